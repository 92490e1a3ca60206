#!/usr/bin/env bash
# test_notready.sh: a labelguard error must survive PyTorch's way of clearing cudaErrorNotReady.
# After a query of work in flight answers NotReady, PyTorch's allocators call cudaGetLastError
# and discard the result. In async mode the verdict of a bad launch arrives at such a hook
# point; it must be returned by the next check (800, labelguard's raise), not vanish with the
# NotReady status. In sync mode the launch is blocked, nothing is in flight, and the first check
# gets the error. Under the runtime test double, which answers NotReady for work in flight.
. "$(dirname "$0")/lib.sh"
# On an asynchronous device (FAKECUDA_ASYNC_US) the double is gated (FAKECUDA_ASYNC_GATE=1):
# its queued work runs only while the program waits on the device, so the kernel is in flight
# at the query by construction, however the threads are scheduled, and labelguard's verdict is
# published at the sync, not before.
gate=()
[ "${FAKECUDA_ASYNC_US:-0}" != 0 ] && gate=(FAKECUDA_ASYNC_GATE=1)
# Without labelguard the bad kernel asserts when it runs: inside the launch on the synchronous
# double; on an asynchronous device after the query, which finds it in flight, at the sync.
plain='query=710 cleared=710 next=710 sync=710'
[ "${FAKECUDA_ASYNC_US:-0}" != 0 ] && plain='query=600 cleared=600 next=0 sync=710'
# With labelguard in async mode the verdict is due when the stream reaches the check: at once on
# the synchronous double (so it arrives at the query, the case this test is about); on the gated
# asynchronous device at the sync. Either way it is returned once, never lost.
async='query=600 cleared=600 next=800 sync=0'
[ "${FAKECUDA_ASYNC_US:-0}" != 0 ] && async='query=600 cleared=600 next=0 sync=800'
for v in notready notready_legacy; do
  run_lg "$v-async" env "${gate[@]}" LD_LIBRARY_PATH="$LG_FAKE_DIR" LABELGUARD_MODE=async LABELGUARD_QUIET=1 "$PROGS/$v"
  require_fake "$v-async"
  check "$v async: NotReady, cleared, then labelguard's error" grep -qx "$async" "$T/$v-async.out"
  run_lg "$v-sync" env "${gate[@]}" LD_LIBRARY_PATH="$LG_FAKE_DIR" LABELGUARD_MODE=sync LABELGUARD_QUIET=1 "$PROGS/$v"
  check "$v sync: the blocked launch's error at the first check" grep -qx 'query=0 cleared=800 next=0 sync=0' "$T/$v-sync.out"
  run_plain "$v-plain" env "${gate[@]}" LD_LIBRARY_PATH="$LG_FAKE_DIR" "$PROGS/$v"
  check "$v plain: the device assert, sticky" grep -qx "$plain" "$T/$v-plain.out"
done
finish
