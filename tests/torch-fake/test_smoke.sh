#!/usr/bin/env bash
# Real torch (both wheels: TORCH_CUDA=13 and 12) on the runtime test double: a CUDA tensor works,
# plain and with labelguard preloaded, and torch bound the double (no real libcudart mapped);
# a bad label dies plain as on a GPU (device-side assert, later CUDA calls fail); with
# labelguard (LABELGUARD_ACTION=raise) Python gets labelguard's error, the context stays usable
# and the JSONL names the kernel, n_classes, the offending (index, value) and the script's line.
# Needs build/torch-python (make build/torch-python): missing is a failure, never a skip.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SMOKE="$LG_ROOT/tests/torch-fake/smoke.py"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() { # NAME ENV... -- ARGS: runs smoke.py; stdout in $TMP/NAME.out, stderr in .err
  local name="$1"; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" "$TP" -W ignore "$SMOKE" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  echo $? >"$TMP/$name.rc"
}
has() { # NAME LINE: stdout of NAME has the exact line
  grep -qxF -- "$2" "$TMP/$1.out" || { fail "$1: expected line: $2"; sed "s/^/    $1 out| /" "$TMP/$1.out"; tail -n 15 "$TMP/$1.err" | sed "s/^/    $1 err| /"; }
}
has_re() { # NAME REGEX
  grep -qE -- "$2" "$TMP/$1.out" || { fail "$1: expected a line matching: $2"; sed "s/^/    $1 out| /" "$TMP/$1.out"; tail -n 15 "$TMP/$1.err" | sed "s/^/    $1 err| /"; }
}

for major in 13 12; do
  for lg in plain lg; do
    n="tensor$major$lg"
    pre=(); [ $lg = lg ] && pre=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$TMP/log-$n")
    run "$n" TORCH_CUDA=$major "${pre[@]}" -- tensor
    has "$n" "tensor_device=cuda:0 available=True count=1"
    has "$n" "device_name=NVIDIA H200 capability=(9, 0)"
    has "$n" "fakecudart_identity=fakecuda"
    has "$n" "runtimes=$LG_ROOT/$LG_BUILD/fakecuda$([ $major = 12 ] && echo 12)/libcudart.so.$major"
    has_re "$n" "^torch=[0-9.]+\+cu${major}[0-9] cuda=$major\.[0-9]+$"
    [ "$(cat "$TMP/$n.rc")" = 0 ] || fail "$n: exit status $(cat "$TMP/$n.rc")"
  done

  n="bad$major"
  run "$n" TORCH_CUDA=$major -- badlabel
  has "$n" "exception=AcceleratorError"
  has "$n" "message=CUDA error: device-side assert triggered"
  has "$n" "later_error=CUDA error: device-side assert triggered"
  grep -q 'nll_loss_forward_reduce_cuda_kernel_2d: block: \[0,0,0\], thread: \[3,0,0\] Assertion `t >= 0 && t < n_classes` failed.' "$TMP/$n.err" \
    || fail "$n: no device assert line on stderr"

  n="badlg$major"
  run "$n" TORCH_CUDA=$major LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION=raise LABELGUARD_LOG="$TMP/log-$n" -- badlabel
  has "$n" "exception=AcceleratorError"
  has_re "$n" '^message=CUDA error: labelguard: bad labels, not a CUDA fault .*hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target\[3\] = 10, outside \[0, 10\)'
  has "$n" "later=ok 2"
  has "$n" "labels_cpu=[0, 1, 2, 10, 4, 5, 6, 7]"
  python3 - "$TMP/log-$n" "$SMOKE" >"$TMP/$n.json" 2>&1 <<'PY' || { fail "$n: JSONL check"; sed 's/^/    | /' "$TMP/$n.json"; }
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/*.jsonl") for l in open(f)]
v = [e for e in ev if e["event"] == "violation"]
assert len(v) == 1, f"{len(v)} violations"
v = v[0]
assert v["kernel"] == "nll_loss_forward_reduce_cuda_kernel_2d", v["kernel"]
assert v["target"]["n_classes"] == 10 and v["target"]["ignore_index"] == -100, v["target"]
assert v["bad"]["samples"] == [{"index": 3, "value": 10}], v["bad"]
assert v["outcome"] == "blocked", v["outcome"]
line = next(i + 1 for i, l in enumerate(open(sys.argv[2])) if "# the loss call" in l)
assert {"file": sys.argv[2], "line": line, "function": "<module>"} in v["python_stack"], v["python_stack"]
PY
done
if [ $failures -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo ok
