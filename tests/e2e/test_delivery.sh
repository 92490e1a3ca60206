#!/usr/bin/env bash
# test_delivery.sh: how a verdict's error reaches the application (build/progs/graphs):
#   - it goes to the thread that launched (or replayed), never to a thread that polls
#     cudaGetLastError meanwhile (c10's caching allocator and the NCCL watchdog do), for graph
#     replays and async-mode launches;
#   - when the launching thread exits first, the stream's next synchronization reports it;
#   - our text is cudaGetErrorString(cudaErrorNotPermitted) from the blocked launch until the
#     thread's next launch, then CUDA's own again; it starts by disowning PyTorch's hints;
#   - the application's own pending error (an unchecked failed cudaMalloc) survives our calls,
#     around a captured loss launch and around one whose labels cannot be checked.
. "$(dirname "$0")/lib.sh"

G="$PROGS/graphs"
export LABELGUARD_QUIET=1 LABELGUARD_ACTION=raise

for how in graph eager; do
  extra=(); [ $how = eager ] && extra=(--eager)
  LABELGUARD_MODE=async run_lg "poll-$how" "$G" poller "${extra[@]}" --batches bgbb
  require_fake "poll-$how"
  check "$how: the launching thread gets each bad batch's error" test "$(grep -c 'wait=800' "$T/poll-$how.out")" = 3
  check "$how: the clean batch is clean" grep -q "replay k=2 batch=g launch=0 wait=0 last=0" "$T/poll-$how.out"
  check "$how: the polling thread took nothing" grep -q "poller stolen=0" "$T/poll-$how.out"
done

LABELGUARD_MODE=sync run_lg exit "$G" exitthread
check "exited thread: its error at the stream's next sync" grep -q 'after_exit last_before=0 wait=800 last=800 text="labelguard: bad labels' "$T/exit.out"

for mode in sync async; do
  LABELGUARD_MODE=$mode run_lg "stale-$mode" "$G" stale
  # async: the verdict comes at the launch's own check, or, on an asynchronous device where the
  # stream gets to the check later, at the sync
  check "$mode: our text right after the blocked launch" grep -Eq 'stale bad (launch=800 wait=0|launch=0 wait=800) text="labelguard:"' "$T/stale-$mode.out"
  check "$mode: CUDA's own text after the next launch" grep -q 'stale launch=0 wait=0 after_launch="operation not permitted"' "$T/stale-$mode.out"
done

for cm in global thread relaxed; do
  LABELGUARD_MODE=sync run_lg "app-$cm" "$G" apperror --capture $cm
  check "$cm: the application's error survives a captured loss launch" \
    grep -q "apperror capture malloc=2 begin=0 launch=0 last=2 end=0" "$T/app-$cm.out"
  check "$cm: ... and a launch whose labels cannot be checked" \
    grep -q "apperror unchecked malloc=2 launch=0 last=2" "$T/app-$cm.out"
done
finish
