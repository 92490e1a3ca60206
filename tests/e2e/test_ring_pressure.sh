#!/usr/bin/env bash
# test_ring_pressure.sh: a program far ahead of its device loses no verdict
# (build/progs/ringfill, from tests/progs/ringfill.cu), under the asynchronous runtime test
# double (FAKECUDA_ASYNC_US: the device runs behind the host, as a GPU does; set here when the
# caller did not). A verdict ring holds 64 runs; the program makes 200 async checks (eager
# launches, or replays of a captured loss step) on one stream with no synchronization and no
# error query between them, then one bad batch (label 3 is 9, with 5 classes), then more good
# ones, and synchronizes once at the end. In every case the bad batch gets its violation event
# with the pair (3, 9), exactly once, no verdict is reported lost, and the program sees
# labelguard's error (raise). Before the verdicts were kept, the graph case with checks after the
# bad one lost its verdict: no event, no error.
. "$(dirname "$0")/lib.sh"

P="$PROGS/ringfill"
need "$P"
[ "${FAKECUDA_ASYNC_US:-0}" = 0 ] && export FAKECUDA_ASYNC_US=2000
export LABELGUARD_QUIET=1 LABELGUARD_ACTION=raise LABELGUARD_MODE=async

for sc in "eager 200 0" "eager 200 100" "graph 200 0" "graph 200 100" "graph 0 200"; do
  n="${sc// /-}"
  run_lg "$n" "$P" $sc
  require_fake "$n"
  check "$sc: exits cleanly" test "$(rc_of "$n")" = 0
  check "$sc: the log parses" events "$n"
  check "$sc: one violation, the bad batch's pair (3, 9)" \
    qtrue "$n" 'len(V) == 1 and V[0]["kernel"].startswith("nll_loss_forward") and [(s["index"], s["value"]) for s in V[0]["bad"]["samples"]] == [(3, 9)] and V[0]["bad"]["checked"] == 8'
  check "$sc: no verdict lost" qtrue "$n" 'not [w for w in W if w["what"] == "verdict_lost"]'
  check "$sc: the summary counts it" qtrue "$n" 'S and S[-1]["violations"] == 1'
  check "$sc: the program got labelguard's error" grep -q 'text="labelguard:"' "$T/$n.out"
done

finish
