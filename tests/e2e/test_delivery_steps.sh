#!/usr/bin/env bash
# test_delivery_steps.sh: labelguard's error in the calls a training loop makes around a bad
# step (build/progs/delivery, from tests/progs/delivery.cu), under the runtime test double:
#   - a graph replay followed by the optimizer (a kernel and its launch check, a second graph
#     replay, or a cudaPeekAtLastError first) and a sync: the bad step's error is read with
#     labelguard's text, never a bare "operation not permitted", once per bad step; a replay
#     after the bad one returns the error, as CUDA returns an asynchronous error at the next call;
#   - an error labelguard returns from a blocking copy is also the thread's last error
#     (cudaPeekAtLastError keeps it, cudaGetLastError takes it), as CUDA's own errors are;
#   - a bad async step of a thread still alive at exit, never synchronized, is in the log;
#   - a watched launch whose stream's capture state cannot be asked is counted unchecked and said.
# With FAKECUDA_ASYNC_US set (the asynchronous double), the same checks run with work in flight.
. "$(dirname "$0")/lib.sh"

D="$PROGS/delivery"
need "$D"
export LABELGUARD_QUIET=1 LABELGUARD_ACTION=raise

for mode in sync async; do
  for opt in kernel graph peek; do
    n="step-$mode-$opt"
    LABELGUARD_MODE=$mode run_lg "$n" "$D" step --opt $opt --batches gbgbb
    require_fake "$n"
    check "$mode/$opt: each bad step's error has labelguard's text" \
      test "$(grep 'batch=b' "$T/$n.out" | grep -c 'text="labelguard:"')" = 3
    check "$mode/$opt: good steps are clean" test "$(grep 'batch=g' "$T/$n.out" | grep -c 'text=""')" = 2
    check "$mode/$opt: never a bare operation not permitted" bash -c "! grep -q 'operation n' '$T/$n.out'"
  done
  check "$mode/graph: the returned error is also the last error" \
    test "$(grep -c 'batch=b .*last=800 ' "$T/step-$mode-graph.out")" = 3
  if [ "${FAKECUDA_ASYNC_US:-0}" = 0 ]; then # work done at once: the verdict is there at the next replay
    check "$mode/graph: the next replay returns the error" \
      grep -q 'step k=2 batch=b replay=0 opt=800 sync=0 last=800' "$T/step-$mode-graph.out"
  fi
done

# No sync between steps, host work between them: on a device that runs behind, a replay's
# verdict is read at the next step's replay, before that step's optimizer launches.
for opt in kernel graph; do
  n="nosync-$opt"
  LABELGUARD_MODE=async run_lg "$n" "$D" step --opt $opt --sync end --host-us 20000 --batches gbgbg
  check "no sync/$opt: the bad steps' errors have labelguard's text" test "$(grep -c 'text="labelguard:"' "$T/$n.out")" -ge 2
  check "no sync/$opt: never a bare operation not permitted" bash -c "! grep -q 'operation n' '$T/$n.out'"
done

LABELGUARD_MODE=async run_lg lasterr "$D" lasterr
check "an error returned by a blocking copy stays the last error until cudaGetLastError" \
  grep -q 'lasterr launch=0 memcpy=800 sync=0 peek=800,800 last=800,0 text="labelguard:"' "$T/lasterr.out"

for sc in exitlive exitgraph; do
  LABELGUARD_MODE=async run_lg "$sc" "$D" $sc
  check "$sc: exits cleanly" test "$(rc_of $sc)" = 0
  check "$sc: the log parses" events $sc
  check "$sc: the live thread's bad last step is in the log" \
    qtrue $sc 'len(V) == 1 and V[0]["kernel"].startswith("nll_loss_forward") and S and S[-1]["violations"] == 1'
done

LABELGUARD_MODE=sync run_lg implicit "$D" implicit
check "implicit: the launch is refused by CUDA" grep -q 'implicit begin=0 launch=906' "$T/implicit.out"
check "implicit: the log parses" events implicit
check "implicit: counted unchecked in the summary" qtrue implicit 'S[-1]["unchecked"] == 1 and S[-1]["watched"] == 1'
check "implicit: said once, with the reason" \
  qtrue implicit 'len([w for w in W if w["what"] == "capture_query_failed" and "blocking stream captures" in w["detail"]]) == 1'

finish
