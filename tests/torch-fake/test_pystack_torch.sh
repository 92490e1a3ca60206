#!/usr/bin/env bash
# test_pystack_torch.sh: the Python call site of a bad label under real torch on CPython 3.14,
# 3.15 and a free-threaded 3.13t. Inside the Debian root of tests/pyroot/install.sh (built on
# first use, cached under ~/.cache/labelguard), Debian's python3.14 (sync mode) and python3.15
# (async) run tests/torch-fake/pystack_train.py with torch 2.15.0 for CUDA 13 built for that
# interpreter (cp314, cp315), and the free-threaded 3.13t (sync and async, PYTHON_GIL=0) with
# torch 2.12.0 (cp313t), on the runtime test double, with the library built here preloaded
# (LABELGUARD_ACTION=mask). Besides the script's own checks (cross_entropy, embedding, eight
# loader threads at once), per run:
# the forward NLL launch's python_stack names the script's <module> -> train -> train_step at
# the loss line (thread "launching"), the stderr report's "at FILE:LINE in train_step" line says
# the same, and its backward (same labels, autograd's engine thread) is masked too and counted
# as suppressed_duplicates, not reported again.
# Needs root (chroot): exits 77 as another user, and in a sanitizer build (the double needs the
# sanitizer runtime, which the root's Python lacks). A root that cannot be built is a failure.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_pystack_torch.sh
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
cd "$LG_ROOT" || exit 1
[ -z "${LG_SANITIZER:-}" ] || { echo "the Debian root runs the plain build only (LG_SANITIZER=$LG_SANITIZER)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "the Debian root needs root (chroot)"; exit 77; }
for f in "$LG_BUILD/liblabelguard.so" "$LG_BUILD/fakecuda/libcudart.so.13" "$LG_BUILD/fakecuda-driver/libcuda.so.1"; do
  [ -e "$f" ] || { echo "FAIL: $f missing: run make test-programs"; exit 1; }
done
tests/pyroot/install.sh || { echo "FAIL: cannot build the Debian root (tests/pyroot/install.sh)"; exit 1; }
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-pystack-torch.XXXXXX")"
trap 'rm -rf "$T"' EXIT
script=tests/torch-fake/pystack_train.py
line_of() { grep -n "# $1\$" "$script" | cut -d: -f1; }
rc=0
ft=$(tests/pyroot/install.sh --ft-python) && ft_torch=$(tests/pyroot/install.sh --ft-torch) ||
  { rc=1; echo "FAIL: no free-threaded interpreter in the root (tests/pyroot/install.sh)"; ft=""; }
# name interpreter torch-install mode: 3.14 in sync mode, 3.15 in async, the free-threaded one in both.
runs=("3.14 python3.14 /opt/torch-cp314 sync" "3.15 python3.15 /opt/torch-cp315 async")
[ -z "$ft" ] || runs+=("ft $ft $ft_torch sync" "ft-async $ft $ft_torch async")
for r in "${runs[@]}"; do
  read -r v py opt mode <<<"$r"
  mkdir -p "$T/$v"
  echo "== $py, torch in $opt, LABELGUARD_MODE=$mode"
  # The free-threaded build must keep its GIL off (a regular build refuses the variable).
  gil=(); [ "$py" = "$ft" ] && gil=(PYTHON_GIL=0)
  # The checkout is /lg in the root: the paths below are the same wherever it lies here.
  tests/pyroot/install.sh run -b "$T/$v:/tmp/out" -- env -u LD_PRELOAD \
    LD_PRELOAD="/lg/$LG_BUILD/liblabelguard.so /lg/$LG_BUILD/fakecuda/libcudart.so.13" \
    LD_LIBRARY_PATH="$opt/lib:/lg/$LG_BUILD/fakecuda-driver" \
    PYTHONPATH="$opt/site-packages" PYTHONNOUSERSITE=1 "${gil[@]}" \
    LABELGUARD_ACTION=mask LABELGUARD_MODE="$mode" LABELGUARD_LOG=/tmp/out \
    "$py" "$script" /tmp/out >"$T/$v.out" 2>"$T/$v.err"
  r=$?
  sed "s/^/[$v] /" "$T/$v.out"
  [ $r -eq 0 ] || { rc=1; echo "FAIL: $py exited $r"; sed "s/^/[$v] err| /" "$T/$v.err" | tail -n 20; }
  # sync: where it was launched; async: where it was launched, then where the verdict was read.
  want="  at /lg/$script:$(line_of MARK_LOSS) in train_step   (python)"
  [ "$mode" = async ] && want="  launched at /lg/$script:$(line_of MARK_LOSS) in train_step; found at "
  if grep -q "^$(printf '%s' "$want" | sed 's/[.[\*^$/]/\\&/g')" "$T/$v.err"; then echo "[$v] ok: stderr says '${want#  }'"
  else rc=1; echo "[$v] FAIL: stderr lacks '${want#  }'"; grep -n "^  \(launched \)\?at " "$T/$v.err" | sed "s/^/[$v]   /"; fi
  if cat "$T/$v"/*.jsonl 2>/dev/null | grep '"event":"summary"' | grep -q '"suppressed_duplicates":1[,}]'; then
    echo "[$v] ok: the summary counts the backward as a suppressed duplicate"
  else rc=1; echo "[$v] FAIL: the summary does not count one suppressed duplicate"; fi
  if [ "$v" = ft ]; then
    if cat "$T/$v"/*.jsonl | grep '"event":"start"' | grep -q '"free_threaded":true,"stacks":true'; then
      echo "[$v] ok: the start event says free-threaded, stacks read"
    else rc=1; echo "[$v] FAIL: the start event's python: $(cat "$T/$v"/*.jsonl | grep '"event":"start"' | grep -o '"python":{[^}]*}')"; fi
  fi
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
