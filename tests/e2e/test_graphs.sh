#!/usr/bin/env bash
# test_graphs.sh: loss kernels captured into a CUDA graph with a static target and replayed
# with one batch after another copied into it (build/progs/graphs), as torch.cuda.graph and
# torch.compile(mode="reduce-overhead") run a training step. For every launch path (<<<>>>,
# cudaLaunchKernel, cudaLaunchKernelExC, per-thread default stream) and both modes:
#   - a clean graph is untouched: the same losses as without the library, no event;
#   - raise: each bad replay is reported (one violation event, the forward's, with the graph's
#     id and which replay; its backward reads the same labels and is counted as a suppressed
#     duplicate), and the error reaches the next synchronizing call after that
#     cudaGraphLaunch (stream sync, .item()'s copy + sync, device sync, blocking cudaMemcpy)
#     with our text; clean replays in between are unaffected; the context stays alive;
#   - mask: trains on: the loss of a bad batch is the loss over its valid labels (the same
#     batch with the bad label ignored, without the library), backward grads likewise;
#   - log: the replay asserts as it would have, and the event was written first;
#   - capture in global, thread-local and relaxed mode leaves the capture valid, also while
#     another thread checks a launch of its own outside the capture;
#   - armed late (dlopen + labelguard_arm, as `labelguard attach`): a graph instantiated before
#     replays unchecked with one graph_unchecked warning, one captured after is checked;
#   - a destroyed graph's handle reused by the next capture (PyTorch destroys each graph once
#     instantiated): the new graph, replayed on another thread, does not take the old one's
#     checks, whose exec still raises at its own bad replay.
. "$(dirname "$0")/lib.sh"

G="$PROGS/graphs"
# reference losses without the library: g (clean) and i (label 3 ignored)
run_plain ref "$G" --batches gi --kernels fwdbwd
require_fake ref
loss_g=$(grep '^replay k=1' "$T/ref.out" | grep -o 'loss=[^ ]*' | cut -d= -f2)
loss_i=$(grep '^replay k=2' "$T/ref.out" | grep -o 'loss=[^ ]*' | cut -d= -f2)
grad_i=$(grep '^replay k=2' "$T/ref.out" | grep -o 'grad3=[^ ]*' | cut -d= -f2)
check "reference losses differ (g=$loss_g i=$loss_i)" test -n "$loss_g" -a -n "$loss_i" -a "$loss_g" != "$loss_i"

line() { grep "^replay k=$2 " "$T/$1.out"; }
has() { line "$1" "$2" | grep -q -- "$3"; }

for variant in chevron legacy exc ptsz; do
  case $variant in
    chevron) prog=("$G" --launch chevron) ;;
    legacy) prog=("$PROGS/graphs_legacy") ;;
    exc) prog=("$G" --launch exc) ;;
    ptsz) prog=("$PROGS/graphs_ptsz") ;;
  esac
  for mode in sync async; do
    id="$variant-$mode"
    export LABELGUARD_MODE=$mode LABELGUARD_QUIET=1

    LABELGUARD_ACTION=raise run_lg "$id-clean" "${prog[@]}" --batches ggg --kernels fwdbwd
    check "$id clean: captured" grep -q "capture begin=0 launch=0 end=0 instantiate=0" "$T/$id-clean.out"
    check "$id clean: every replay as without the library" \
      test "$(grep -c "launch=0 wait=0 last=0 loss=$loss_g " "$T/$id-clean.out")" = 3
    events "$id-clean" && check "$id clean: no violation" qtrue "$id-clean" "len(V) == 0"

    LABELGUARD_ACTION=raise run_lg "$id-raise" "${prog[@]}" --batches gbgbg --kernels fwdbwd
    check "$id raise: replay 1 clean" has "$id-raise" 1 "wait=0 last=0 loss=$loss_g "
    check "$id raise: replay 2's error at the sync" has "$id-raise" 2 "launch=0 wait=800 last=800"
    check "$id raise: our text, hints disowned first" has "$id-raise" 2 'text="labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target\[3\] = 9'
    check "$id raise: replay 3 clean again" has "$id-raise" 3 "wait=0 last=0 loss=$loss_g "
    check "$id raise: replay 4's error" has "$id-raise" 4 "wait=800"
    check "$id raise: replay 5 clean" has "$id-raise" 5 "wait=0 last=0 loss=$loss_g "
    check "$id raise: context alive" grep -q "context alive=1" "$T/$id-raise.out"
    if events "$id-raise"; then
      check "$id raise: one event per bad replay, the forward's; its backward (same labels) counted, not reported" \
        qtrue "$id-raise" "sorted((v['kernel'][:13], v['graph']['replay']) for v in V) == [('nll_loss_forw',2),('nll_loss_forw',4)] and S and S[-1]['suppressed_duplicates'] == 2"
      check "$id raise: one graph id, masked outcome" \
        qtrue "$id-raise" "len({v['graph']['id'] for v in V}) == 1 and all(v['outcome'] == 'masked' and v['bad']['samples'][0] == {'index': 3, 'value': 9} for v in V)"
    else fail "$id raise: events"; fi

    LABELGUARD_ACTION=mask run_lg "$id-mask" "${prog[@]}" --batches gbgb --kernels fwdbwd
    check "$id mask: bad replays train on the valid labels" \
      test "$(grep -c "wait=0 last=0 loss=$loss_i grad3=$grad_i " "$T/$id-mask.out")" = 2
    check "$id mask: clean replays unchanged" test "$(grep -c "wait=0 last=0 loss=$loss_g " "$T/$id-mask.out")" = 2
    events "$id-mask" && check "$id mask: 2 masked events, the backwards counted" \
      qtrue "$id-mask" "len(V) == 2 and all(v['outcome'] == 'masked' for v in V) and S[-1]['suppressed_duplicates'] == 2"

    LABELGUARD_ACTION=log run_lg "$id-log" "${prog[@]}" --batches gb
    check "$id log: replay 2 asserts" has "$id-log" 2 "wait=710"
    check "$id log: context lost, as without the library" grep -q "context alive=0" "$T/$id-log.out"
    events "$id-log" && check "$id log: the event, outcome launched, replay 2" \
      qtrue "$id-log" "len(V) == 1 and V[0]['outcome'] == 'launched' and V[0]['graph']['replay'] == 2"
  done
done
unset LABELGUARD_MODE

# the synchronizing calls PyTorch waits in
for wait in item device memcpy; do
  LABELGUARD_ACTION=raise LABELGUARD_QUIET=1 run_lg "wait-$wait" "$G" --batches gb --wait $wait
  check "raise at $wait: error there" has "wait-$wait" 2 "launch=0 wait=800 last=800"
  check "raise at $wait: replay 1 clean" has "wait-$wait" 1 "wait=0 last=0"
done
# cudaGraphInstantiate (not WithFlags) is tracked too
LABELGUARD_ACTION=raise LABELGUARD_QUIET=1 run_lg inst-plain "$G" --batches gb --instantiate plain
check "cudaGraphInstantiate: replay 2 raises" has inst-plain 2 "wait=800"

# A graph's handle reused: with tcache off, glibc's calloc hands the double's next graph the
# address the destroyed one had (same=1 says it did, as a real runtime's pool does). A
# sanitizer's allocator holds freed memory back, so the address is not reused there: the
# bookkeeping itself is tests/unit/test_graphs.c's.
[ -n "${LG_SANITIZER:-}" ] || for mode in sync async; do
  GLIBC_TUNABLES=glibc.malloc.tcache_count=0 LABELGUARD_MODE=$mode LABELGUARD_ACTION=raise LABELGUARD_QUIET=1 \
    run_lg "reuse-$mode" "$G" reuse --batches gbg
  check "reuse $mode: the second graph got the first one's handle" grep -q "same=1" "$T/reuse-$mode.out"
  check "reuse $mode: the second graph's replays are untouched" grep -q "reuse b launch=0 wait=0" "$T/reuse-$mode.out"
  check "reuse $mode: the first graph's bad replay raises" has "reuse-$mode" 2 "launch=0 wait=800 last=800"
  check "reuse $mode: its clean replays stay clean" \
    test "$(grep -c "wait=0 last=0 loss=$loss_g " "$T/reuse-$mode.out")" = 2
  events "reuse-$mode" && check "reuse $mode: one event, the first graph's replay 2" \
    qtrue "reuse-$mode" "len(V) == 1 and V[0]['graph']['replay'] == 2"
done

# capture modes; and a second thread checking its own launch while this one captures
for cm in global thread relaxed; do
  LABELGUARD_ACTION=raise LABELGUARD_QUIET=1 run_lg "cap-$cm" "$G" --capture $cm --batches bgb
  check "$cm capture: valid" grep -q "capture begin=0 launch=0 end=0 instantiate=0" "$T/cap-$cm.out"
  check "$cm capture: replays 1 and 3 raise" test "$(grep -c 'wait=800' "$T/cap-$cm.out")" = 2
  for action in mask raise; do
    LABELGUARD_ACTION=$action LABELGUARD_QUIET=1 run_lg "side-$cm-$action" "$G" side --capture $cm --batches b
    check "$cm capture, $action on another thread: capture stays valid" \
      grep -q "capture begin=0 launch=0 end=0" "$T/side-$cm-$action.out"
  done
done
# late arming (no LD_PRELOAD: the program dlopens the library and arms it itself); a
# sanitizer-built library cannot be dlopen'd into a process without the sanitizer runtime
if [ -z "${LG_SANITIZER:-}" ]; then
rm -rf "$T/late.logs"
LABELGUARD_LOG="$T/late.logs" LABELGUARD_QUIET=1 LABELGUARD_ACTION=raise LG_LATE_LIB="$LG_PRELOAD" \
  "$G" late >"$T/late.out" 2>"$T/late.err"
check "late: armed" grep -q "late armed=1" "$T/late.out"
check "late: the old graph replays as it is" has late 1 "wait=0 last=0"
check "late: the new graph is checked" has late 2 "wait=800"
events late && check "late: one graph_unchecked warning" \
  qtrue late "len([w for w in W if w['what'] == 'graph_unchecked']) == 1 and len(V) == 1"
fi
finish
