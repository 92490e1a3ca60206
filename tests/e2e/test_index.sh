#!/usr/bin/env bash
# test_index.sh: the index guard end to end, for each of PyTorch's index kernels (the 2.8+
# vectorized gather, indexSelectSmallIndex, indexSelectLargeIndex with 32- and 64-bit index
# math; tests/progs/gather.cu on the test double), int64 and int32 ids, and each action: the
# violation event names the kernel, family index_select, target {dtype, count, bound} and the
# offending (position, id) pairs with the likely cause; raise blocks (error 800, context
# alive, rows of a clean launch right after); mask has no padding_idx to use and falls back to
# raise, saying so; hold waits for SIGUSR1, then raises; log lets the kernel run into its
# assert; abort dumps core with the event on disk. Controls: negative ids the op allows (allow_neg_indices) and clean launches (output
# identical to a run without the library, no event).
. "$(dirname "$0")/lib.sh"

for k in vgather small large large64; do
  case $k in
    vgather) short=vectorized_gather_kernel ;;
    small) short=indexSelectSmallIndex ;;
    *) short=indexSelectLargeIndex ;;
  esac
  for dt in int64 int32; do
    base=("$PROGS/gather" "$k" --dtype "$dt" --rows 8)
    id="$k-$dt"
    # ids 0..7 dense with 8 and 9 past the end: a vocabulary larger than the embedding
    run_lg "$id" "${base[@]}" 0 1 8 3 9 5
    require_fake "$id"
    events "$id" || { fail "$id: log schema"; continue; }
    check "$id: one violation" qtrue "$id" "len(V) == 1"
    check "$id: kernel $short, family index_select" qtrue "$id" "V[0]['kernel'] == '$short' and V[0]['family'] == 'index_select'"
    check "$id: target dtype/count/bound" qtrue "$id" "(V[0]['target']['dtype'], V[0]['target']['count'], V[0]['target']['bound'], V[0]['target']['kind'], V[0]['target']['padding_idx']) == ('$dt', 6, 8, 'ids', None)"
    check "$id: offending (position, id) pairs" qtrue "$id" "V[0]['bad']['samples'] == [{'index': 2, 'value': 8}, {'index': 4, 'value': 9}] and V[0]['bad']['count'] == 2"
    check "$id: cause vocab_too_small" qtrue "$id" "V[0]['cause'] == 'vocab_too_small' and 'resize' in V[0]['cause_text']"
    check "$id: raise blocks" qtrue "$id" "V[0]['outcome'] == 'blocked' and V[0]['action'] == 'raise'"
    check "$id: launch error 800" [ "$(field "$id" launch_err)" = 800 ]
    check "$id: error text names the id" grep -q 'launch_error_text=.*labelguard: .*bad id ids\[2\] = 8, outside \[0, 8)' "$T/$id.out"
    check "$id: context alive" grep -qx 'after clean_launch_err=0 clean_sync_err=0' "$T/$id.out"
    check "$id: stderr block" grep -q "labelguard: bad ids in $short (index_select)" "$T/$id.err"

    run_lg "$id-neg" "${base[@]}" 0 -1 2
    events "$id-neg" && check "$id: -1 is negative_id" qtrue "$id-neg" "len(V) == 1 and V[0]['cause'] == 'negative_id' and V[0]['bad']['samples'] == [{'index': 1, 'value': -1}]"

    run_lg "$id-mask" env LABELGUARD_ACTION=mask "${base[@]}" 0 8 1
    events "$id-mask" && check "$id mask: falls back to raise, says why" qtrue "$id-mask" "len(V) == 1 and V[0]['outcome'] == 'blocked' and V[0]['action'] == 'mask' and 'mask fell back to raise' in V[0]['note'] and 'padding_idx' in V[0]['note']"
    check "$id mask: launch blocked" [ "$(field "$id-mask" launch_err)" = 800 ]
    check "$id mask: text says why" grep -q 'note: mask fell back to raise: this kernel has no padding_idx' "$T/$id-mask.err"

    run_lg "$id-log" env LABELGUARD_ACTION=log "${base[@]}" 0 8 1
    events "$id-log" && check "$id log: launched, event first" qtrue "$id-log" "len(V) == 1 and V[0]['outcome'] == 'launched'"
    check "$id log: the kernel asserts" grep -q 'result launch_err=0 sync_err=710' "$T/$id-log.out"
    check "$id log: its assert line" grep -q "$short: block: .* Assertion" "$T/$id-log.err"

    rm -rf "$T/$id-hold.logs"
    LABELGUARD_ACTION=hold LABELGUARD_LOG="$T/$id-hold.logs" LD_PRELOAD="$LG_PRELOAD" "${base[@]}" 0 8 1 >"$T/$id-hold.out" 2>"$T/$id-hold.err" &
    pid=$!
    for _ in $(seq 100); do grep -q HOLDING "$T/$id-hold.err" 2>/dev/null && break; sleep 0.05; done
    check "$id hold: the thread waits, the message names the pid" grep -q "HOLDING thread .* of process $pid" "$T/$id-hold.err"
    kill -USR1 $pid
    wait $pid
    check "$id hold: released by SIGUSR1, then raise" grep -q 'launch_error_text=.*bad id ids\[1\] = 8' "$T/$id-hold.out"
    events "$id-hold" && check "$id hold: event held" qtrue "$id-hold" "len(V) == 1 and V[0]['outcome'] == 'held'"

    (run_lg "$id-abort" env LABELGUARD_ACTION=abort "${base[@]}" 0 8 1) 2>/dev/null
    check "$id abort: SIGABRT" [ "$(rc_of "$id-abort")" = 134 ]
    events "$id-abort" && check "$id abort: event on disk" qtrue "$id-abort" "len(V) == 1 and V[0]['outcome'] == 'aborted'"

    run_plain "$id-clean-plain" "${base[@]}" good:12
    run_lg "$id-clean" "${base[@]}" good:12
    check "$id: clean run identical" cmp -s "$T/$id-clean-plain.out" "$T/$id-clean.out"
    check "$id: clean run silent" [ ! -s "$T/$id-clean.err" ]
    events "$id-clean" && check "$id: clean run validated, no violation" qtrue "$id-clean" "len(V) == 0 and S and S[0]['validated'] >= 2"
  done
done

# labelguard report reads the ids' events in their own words.
"$LG_ROOT/scripts/labelguard" report "$T/small-int64.logs" >"$T/report.txt" 2>&1
check "report: ids, bound and the first ids" grep -q 'ids:        2 bad ids in 1 launch; values 0..9, bound 8, padding_idx None, dtype int64' "$T/report.txt"
check "report: first ids[2] = 8" grep -q 'first:      ids\[2\] = 8, ids\[4\] = 9' "$T/report.txt"
check "report: the cause" grep -q 'indexSelectSmallIndex (forward): vocab_too_small' "$T/report.txt"

# The ops that allow negative ids (x[idx]: allow_neg_indices) wrap them: no violation, and the
# rows are those of the wrapped ids. Past -bound they are bad, with the range in the report.
for dt in int64 int32; do
  id="neg-$dt"
  run_lg "$id" "$PROGS/gather" vgather --neg --dtype $dt --rows 8 2 -1 -8
  events "$id" && check "$id: allowed negatives are no violation" qtrue "$id" "len(V) == 0"
  check "$id: wrapped rows" grep -qx 'rows n=3 2 7 0' "$T/$id.out"
  run_lg "$id-bad" "$PROGS/gather" vgather --neg --dtype $dt --rows 8 2 -9 8
  events "$id-bad" && check "$id: -9 and 8 are outside [-8, 8)" qtrue "$id-bad" "len(V) == 1 and V[0]['target']['allow_negative'] and V[0]['bad']['samples'] == [{'index': 1, 'value': -9}, {'index': 2, 'value': 8}] and V[0]['cause'] == 'other'"
  check "$id: text gives the wrapped range" grep -q 'ids outside \[-8, 8)' "$T/$id-bad.err"
done
# Async mode (raise): ids are checked synchronously and blocked at the launch. No row may stand
# in for a bad id in a copy: the backward reads the caller's ids (tests/e2e/test_index_backward.sh).
run_lg async env LABELGUARD_MODE=async "$PROGS/gather" vgather --rows 8 1 8
events async && check "async: checked synchronously, blocked" qtrue async "len(V) == 1 and V[0]['outcome'] == 'blocked'"
check "async: the launch returns the error" grep -qx 'result launch_err=800 sync_err=0 last_err=0' "$T/async.out"
check "async: the kernel did not run (no row 0 for the bad id)" grep -qx 'rows n=2 0 0' "$T/async.out"
# The other entry points, on the vectorized gather.
for launch in legacy handle exc; do
  run_lg "vgather-$launch" "$PROGS/gather" vgather --launch $launch --rows 8 1 8
  events "vgather-$launch" && check "vgather-$launch: blocked" qtrue "vgather-$launch" "len(V) == 1 and V[0]['outcome'] == 'blocked'"
done
run_lg "vgather-ptsz" "$PROGS/gather_ptsz" vgather --rows 8 1 8
events "vgather-ptsz" && check "vgather-ptsz: blocked" qtrue "vgather-ptsz" "len(V) == 1 and V[0]['outcome'] == 'blocked'"
finish
