#!/usr/bin/env bash
# test_demo.sh: `labelguard demo` (make demo), GPU-free version. First the demo program alone
# under the test double: the bad label at step 37 trips the device assert, the context is dead
# and the job ends (exit 1), as it would in PyTorch. Then the whole demo with the library:
# exit 0, three explained runs, the report naming a label 10 and the one_based cause, the
# raise run surviving step 37, the mask run training all 60 steps, the merged report; then, when
# build/torch-python is there, the real-PyTorch half the same way.
# Skips (77) while the test double, the demo program or the library is not built.
. "$(dirname "$0")/lib.sh"
demo="$LG_ROOT/$LG_BUILD/demo/demo_train"
fake="$LG_ROOT/$LG_BUILD/fakecuda"
if [ ! -x "$demo" ] || [ ! -e "$fake/libcudart.so.13" ]; then echo "demo program or test double not built (make test-programs)"; exit 77; fi

run_cmd env LD_LIBRARY_PATH="$fake" "$demo"
expect_rc 1 "demo program without the guard dies"
expect_in out "step 36: loss" "trains until step 36"
expect_in out "step 37: RuntimeError: CUDA error: device-side assert triggered" "the assert at step 37"
expect_in out "the CUDA context is dead" "context dead"
grep -q "step 38" "$T/out" && fail "went on after the assert"
ok "demo program without the guard"

[ -f "$LG_ROOT/$LG_BUILD/liblabelguard.so" ] || { echo "library not built: the guarded half is not tested"; exit 77; }
[ -z "${LG_SANITIZER:-}" ] || { echo "sanitizer build: the demo preloads the library alone"; exit 77; }
run_cmd env LG_DEMO_SIMULATED=1 TMPDIR="$T" LG_BUILD="$LG_BUILD" "$LG" demo
expect_rc 0 "labelguard demo"
for s in "SIMULATED" "Run 1 of 3: without labelguard" "Run 2 of 3: with labelguard, action raise" \
         "Run 3 of 3: with labelguard, action mask" "What happened" "device-side assert triggered" \
         "] = 10" "one_based" "the CUDA context is alive" "finished: 60 of 60 steps trained" \
         "Side by side" "labelguard report"; do
  expect_in out "$s" "demo output"
done
# The raise run: an error at the loss call (not at .item()) and the loop went on.
sed -n '/Run 2 of 3/,/Run 3 of 3/p' "$T/out" >"$T/raise"
grep -q "raised at the loss call" "$T/raise" || fail "raise run: error not at the loss call"
grep -q "step 38" "$T/raise" || fail "raise run: did not go on after step 37"
grep -q "finished: 59 of 60 steps trained, 1 skipped" "$T/raise" || fail "raise run: not 59+1 steps"
sed -n '/Run 3 of 3/,/Side by side/p' "$T/out" >"$T/mask"
grep -q "step 37: loss .* of 64 labels counted" "$T/mask" || fail "mask run: step 37 not masked"
ok "demo with the guard"

# The real-PyTorch half (labelguard/demo_torch.py), which a GPU runs: here with real torch on the
# runtime test double (build/torch-python), when it is there. The demo runs its programs with
# the interpreter that runs the command line, so that interpreter is build/torch-python's.
tp="$LG_ROOT/$LG_BUILD/torch-python"
if [ -x "$tp" ] && timeout 300 "$tp" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  run_cmd env TMPDIR="$T" LG_BUILD="$LG_BUILD" PYTHONPATH="$LG_ROOT/python" "$tp" -m labelguard demo
  expect_rc 0 "labelguard demo with real torch"
  for s in "Running: real PyTorch" "finished: 59 of 60 steps trained, 1 skipped." "finished: 60 of 60 steps trained, 0 skipped." \
           "(raised at the loss call, F.cross_entropy)" "one_based"; do
    expect_in out "$s" "real-torch demo output"
  done
  grep -q SIMULATED "$T/out" && fail "real-torch demo labelled SIMULATED"
  ok "demo with real torch (on the test double)"
else
  echo "note: $tp missing or without torch: the real-PyTorch half not tested"
fi
finish
