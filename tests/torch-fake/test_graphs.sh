#!/usr/bin/env bash
# test_graphs.sh: real torch (both wheels) on the test double, a training step captured with
# torch.cuda.graph and replayed with a bad batch copied into the static target
# (tests/torch-fake/graphs.py), labelguard preloaded:
#   raise  the bad replay's .item() raises torch.AcceleratorError (a RuntimeError) whose text
#          is labelguard's, disowning PyTorch's hints first; labels.cpu() works after it and the
#          next replays train as before; one violation, the forward's, replay 4 (its backward reads
#          the same labels and is not reported again);
#   mask   no error; the bad replay's loss is the loss over its valid labels (CPU reference);
#   log    the replay asserts as without the library, and the event was written before.
# Needs build/torch-python (make build/torch-python): missing is a failure, never a skip.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PY="$LG_ROOT/tests/torch-fake/graphs.py"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
unset LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE LABELGUARD_SAMPLES LABELGUARD_DEBUG_KERNELS
failures=0
for major in 13 12; do
  for action in raise mask log; do
    n="$action$major"
    LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION=$action LABELGUARD_QUIET=1 LABELGUARD_LOG="$TMP/$n.logs" \
      TORCH_CUDA=$major "$TP" -W ignore "$PY" >"$TMP/$n.out" 2>"$TMP/$n.err"
  done
  python3 - "$TMP" "$major" "$LG_ROOT/tests/e2e" <<'PY' || failures=$((failures + 1))
import glob, json, os, sys
tmp, major, e2e = sys.argv[1:]
sys.path.insert(0, e2e)
import jsonl_check  # noqa: E402
bad = []
def check(what, cond):
    print(("ok: " if cond else "FAIL: ") + f"cuda{major} {what}")
    if not cond:
        bad.append(what)
def run(action):
    lines = [json.loads(l) for l in open(f"{tmp}/{action}{major}.out") if l.startswith("{")]
    steps = {l["step"]: l for l in lines if "step" in l}
    after = [l for l in lines if "after" in l]
    ev = []
    for f in sorted(glob.glob(f"{tmp}/{action}{major}.logs/*.jsonl")):
        for i, line in enumerate(open(f), 1):
            e = json.loads(line)
            jsonl_check.check_event(e, f"{f}:{i}")
            ev.append(e)
    return steps, after, [e for e in ev if e["event"] == "violation"]
close = lambda a, b: abs(a - b) < 1e-5
steps, after, V = run("raise")
check("raise: clean replays match the CPU", all(close(steps[k]["loss"], steps[k]["cpu_loss"]) for k in (0, 1, 2, 4, 5) if k in steps) and len(steps) == 6)
e = steps.get(3, {})
check("raise: torch.AcceleratorError, a RuntimeError", e.get("error_type") == "AcceleratorError" and e.get("is_runtime_error"))
msg = e.get("message", "")
check("raise: labelguard's text first, hints disowned", msg.startswith("CUDA error: labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target[3] = 5"))
check("raise: labels.cpu() after the error", after and after[0].get("value", [None])[3] == 5)
check("raise: one event for the bad replay (the forward's; its backward reads the same labels), replay 4",
      [v["kernel"] for v in V] == ["nll_loss_forward_reduce_cuda_kernel_2d"] and V[0]["graph"]["replay"] == 4
      and V[0].get("backward", "").startswith("masked too"))
steps, after, V = run("mask")
check("mask: every replay trains, the bad one on its valid labels",
      len(steps) == 6 and all("loss" in s and close(s["loss"], s["cpu_loss"]) for s in steps.values())
      and not close(steps[3]["cpu_loss"], steps[0]["cpu_loss"]))
check("mask: one masked event, the forward's", len(V) == 1 and V[0]["outcome"] == "masked")
steps, after, V = run("log")
check("log: the bad replay asserts", "device-side assert triggered" in steps.get(3, {}).get("message", ""))
check("log: the event, outcome launched", len(V) == 1 and V[0]["outcome"] == "launched" and V[0]["graph"]["replay"] == 4)
sys.exit(1 if bad else 0)
PY
done
[ $failures -eq 0 ] && { echo "all checks passed"; exit 0; }
echo "checks failed"; exit 1
