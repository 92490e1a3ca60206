#!/usr/bin/env bash
# test_index_backward.sh: no substitute for a bad id reaches the backward that writes at the ids.
# tests/progs/embed_step.cu runs an nn.Embedding step as PyTorch does: the forward
# (index_select), a loss kernel, then embedding_backward_feature_kernel from a second thread
# (autograd's), which adds gradient rows into grad_weight at the caller's ids, unchecked; the
# test double reports a row outside grad_weight as memcheck would ("Invalid __global__ write",
# error 700, tests/fakecuda/index_backward.c). The device lags (FAKECUDA_ASYNC_US), so an async
# verdict is due only when the stream gets to the check, as on a GPU.
#   async mode, raise and mask: the forward is checked synchronously and blocked (no row 0 in a
#     copy: the backward would still read the caller's ids); the backward never runs.
#   a captured step (sync and async mode): the forward keeps its own ids, so its own device
#     assert stops the replay exactly as without labelguard (error 710, the backward does not
#     run); the captured check reports the bad id (outcome launched) and raises it.
# Controls: the same step without labelguard (the forward's assert), and good ids (no event).
. "$(dirname "$0")/lib.sh"
need "$PROGS/embed_step"
LAG=${LG_INDEX_BACKWARD_LAG_US:-100000} # µs per kernel: the loss and the backward come long before the check runs
P=("$PROGS/embed_step")

no_oob() { ! grep -q 'Invalid __global__ write' "$T/$1.err"; }

# Without labelguard: the forward's own assert, the backward never writes.
run_plain plain env FAKECUDA_ASYNC_US="$LAG" "${P[@]}" eager 1 1000000 2
check "plain: the forward asserts (710)" grep -qx 'sync err=710 last_err=710' "$T/plain.out"
check "plain: its assert line" grep -q 'indexSelectSmallIndex: block: .* Assertion `srcIndex < srcSelectDimSize` failed' "$T/plain.err"
check "plain: no out-of-bounds write" no_oob plain

for action in raise mask; do
  id=async-$action
  run_lg "$id" env FAKECUDA_ASYNC_US="$LAG" LABELGUARD_MODE=async LABELGUARD_ACTION=$action "${P[@]}" eager 1 1000000 2
  check "$id: no out-of-bounds write by the backward" no_oob "$id"
  check "$id: the forward is blocked at its launch (800)" grep -qx 'forward launch_err=800' "$T/$id.out"
  check "$id: the step stops there" grep -qx 'stopped_at=forward' "$T/$id.out"
  check "$id: the forward never ran (no row 0 read for the bad id)" grep -qx 'rows n=3 0 0 0' "$T/$id.out"
  check "$id: the context is alive" grep -qx 'sync err=0 last_err=0' "$T/$id.out"
  events "$id" && check "$id: one violation, blocked, ids[1] = 1000000" qtrue "$id" \
    "len(V) == 1 and V[0]['outcome'] == 'blocked' and V[0]['kernel'] == 'indexSelectSmallIndex' and V[0]['bad']['samples'] == [{'index': 1, 'value': 1000000}]"
done

for mode in sync async; do
  for action in raise mask; do
    id=graph-$mode-$action
    run_lg "$id" env FAKECUDA_ASYNC_US="$LAG" LABELGUARD_MODE=$mode LABELGUARD_ACTION=$action "${P[@]}" graph 1 1000000 2
    check "$id: captured, instantiated, replayed" grep -qx 'capture launches=0,0,0 end=0 instantiate=0 replay=0' "$T/$id.out"
    check "$id: no out-of-bounds write by the backward" no_oob "$id"
    check "$id: the forward's own assert, as without labelguard (710)" grep -qx 'sync err=710 last_err=710' "$T/$id.out"
    check "$id: its assert line" grep -q 'indexSelectSmallIndex: block: .* Assertion `srcIndex < srcSelectDimSize` failed' "$T/$id.err"
    events "$id" && check "$id: the replay's violation: launched on its own ids, ids[1] = 1000000" qtrue "$id" \
      "len(V) == 1 and V[0]['outcome'] == 'launched' and 'read its own ids' in V[0]['note'] and V[0]['graph']['replay'] == 1 and V[0]['bad']['samples'] == [{'index': 1, 'value': 1000000}]"
  done
done

# Good ids: the step runs whole, on both paths, with no event.
for m in eager graph; do
  run_lg "good-$m" env FAKECUDA_ASYNC_US="$LAG" LABELGUARD_MODE=async "${P[@]}" "$m" 1 9 2
  check "good $m: the step ran and synchronised" grep -qx 'sync err=0 last_err=0' "$T/good-$m.out"
  check "good $m: rows 1 9 2" grep -qx 'rows n=3 1 9 2' "$T/good-$m.out"
  events "good-$m" && check "good $m: validated, no violation" qtrue "good-$m" "len(V) == 0 and S[0]['validated'] >= 1"
done

finish
