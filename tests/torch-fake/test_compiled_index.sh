#!/usr/bin/env bash
# test_compiled_index.sh: torch.compile'd index ops checked before Inductor's own kernels
# (labelguard::check_index: python/labelguard/_compiled_index.py, src/hooks/api_index.c), real
# torch on the runtime test double, each mode of tests/torch-fake/compiled_index.py in its own
# process under `labelguard run` (the bootstrap arms the check):
#   families  per op family a clean twin equal to the uncompiled output and one bad id reported
#             (kernel, value, bound, cause, model line, user line) instead of Inductor's assert
#   silent    the ids compiled code accepts without labelguard (embedding -2, index_add -1)
#   mask      an embedding with padding_idx masked as in eager; gather raised, with the reason
#   step      a compiled training step: one check of the ids (the backward's merged), eager's grads
#   late      LABELGUARD_MODE=async: a compiled embedding's verdict read after the op keeps the model line
#   ways      fullgraph=True, mode="max-autotune", a graph break (each graph checked, its own model line)
#   cache     plain (no labelguard) compiles into TORCHINDUCTOR_CACHE_DIR and gets Inductor's own
#             assert; cached (guarded, the same cache) still reports the bad id
# This file runs families and silent; test_compiled_index_more.sh mask, step, late, cache and ways (each
# file within tests/run.sh's time limit); the parts ending in 12 run on torch 2.10 (TORCH_CUDA=12),
# test_compiled_index_210.sh runs those.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_index.sh [PART...]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-compiled-index.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_COMPILED LABELGUARD_QUIET LD_PRELOAD
export LABELGUARD_LIB="$LG_PRELOAD"
rc=0
check() { # name, rc, out file
  sed "s/^/[$1] /" "$3"
  if [ "$2" -ne 0 ] || grep -q '^FAIL' "$3" || ! grep -q '^ok' "$3"; then
    rc=1; echo "FAIL: $1 (rc $2)"; grep -v Warning "${3%.out}.err" | tail -n 20 | sed 's/^/  stderr: /'
  fi
}
run() { # name, env..., -- compiled_index.py mode
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  echo "== $name"
  env TORCHINDUCTOR_CACHE_DIR="$T/inductor-$name" LABELGUARD_QUIET=1 "${envs[@]}" "$LG_ROOT/scripts/labelguard" run \
    --log "$T/$name" -- "$TP" tests/torch-fake/compiled_index.py "$@" >"$T/$name.out" 2>"$T/$name.err"
  check "$name" $? "$T/$name.out"
}
for part in ${*:-families silent}; do
  w=13; case $part in *12) w=12 ;; esac
  case ${part%12} in
  families|silent|step|ways) run "$part" TORCH_CUDA=$w LABELGUARD_ACTION=raise -- "${part%12}" ;;
  mask) run "$part" TORCH_CUDA=$w LABELGUARD_ACTION=mask -- mask ;;
  late) run "$part" TORCH_CUDA=$w LABELGUARD_MODE=async LABELGUARD_ACTION=raise -- late ;;
  cache)
    # Compiled without labelguard into a cache of its own, then run guarded from that cache.
    echo "== plain"
    env TORCH_CUDA=$w TORCHINDUCTOR_CACHE_DIR="$T/inductor-cache" "$TP" tests/torch-fake/compiled_index.py plain \
      >"$T/plain.out" 2>"$T/plain.err"
    check plain $? "$T/plain.out"
    run cached TORCH_CUDA=$w TORCHINDUCTOR_CACHE_DIR="$T/inductor-cache" LABELGUARD_ACTION=raise -- cached ;;
  *) echo "FAIL: unknown part $part"; rc=1 ;;
  esac
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
