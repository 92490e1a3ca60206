#!/usr/bin/env bash
# test_distributed.sh: a job of two processes (WORLD_SIZE=2, RANK 0 and 1), started by a small
# torchrun-like launcher (it SIGTERMs the other ranks when one dies), under the runtime double.
# Both ranks run build/e2e/attach_target: rank 1 launches a bad label at once (--now); rank 0
# launches clean labels and then waits, as a peer waits in its next all-reduce (a trigger file
# that never comes; it gives up after 60 s). Rank 1 starts when rank 0 has printed "ready".
#   abort -> rank 1 dies by SIGABRT at once; the job is over in seconds, not at rank 0's
#            timeout; rank 1's log holds the violation (outcome aborted) and its summary,
#            rank 0's log its start; rank 1's report says what happens to the other ranks;
#   raise -> the report and a start note (distributed_action) say that the other ranks wait
#            until the NCCL timeout, that skipping the batch on one rank desynchronises the
#            collectives, and recommend mask or abort;
#   raise with WORLD_SIZE unset -> none of that.
# Called by tests/run.sh; alone: bash tests/e2e/test_distributed.sh
. "$(dirname "$0")/lib.sh"
PROG="$LG_ROOT/$LG_BUILD/e2e/attach_target"
need "$PROG"
command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }

# job NAME ACTION: both ranks under the launcher; logs in $T/NAME.logs, rank R's stderr in
# $T/NAME.R.err, the launcher's account in $T/NAME.out
job() {
  local n=$1 action=$2
  rm -rf "$T/$n.logs"
  LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION="$action" LABELGUARD_LOG="$T/$n.logs" \
    python3 - "$PROG" "$T/never" "$T/$n" >"$T/$n.out" 2>&1 <<'PY'
import os, signal, subprocess, sys, time
prog, never, base = sys.argv[1:4]
t0 = time.time()
ranks = []
for r, arg in ((0, never), (1, "--now")):
    env = dict(os.environ, WORLD_SIZE="2", RANK=str(r), LOCAL_RANK=str(r))
    ranks.append(subprocess.Popen([prog, arg], env=env, stdout=subprocess.PIPE,
                                  stderr=open("%s.%d.err" % (base, r), "w")))
    if r == 0:
        # rank 1 starts once rank 0 is up (its start written, "ready" printed): otherwise a
        # quick rank 1 ends the job before a slow rank 0 has logged anything
        for line in ranks[0].stdout:
            if line.startswith(b"ready"):
                break
# torchrun's agent: the first rank to fail ends the job
while all(p.poll() is None for p in ranks) and time.time() - t0 < 90:
    time.sleep(0.05)
for p in ranks:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
for p in ranks:
    p.wait()
print("rc0=%d rc1=%d" % (ranks[0].returncode, ranks[1].returncode))
print("seconds=%d" % int(time.time() - t0))
PY
}
rank_log() { # NAME RANK: that rank's events as JSON lines
  cat "$T/$1.logs"/*-rank"$2".jsonl 2>/dev/null
}

job abort abort
cat "$T/abort.out"
check "abort: rank 1 died by SIGABRT" grep -qx 'rc0=-15 rc1=-6' "$T/abort.out"
check "abort: the job ended in seconds (not at the peer's timeout)" \
  bash -c "[ \$(grep -o 'seconds=[0-9]*' '$T/abort.out' | cut -d= -f2) -lt 20 ]"
check "abort: rank 1's log has the violation (aborted) and the summary" \
  bash -c "rank_log() { cat '$T/abort.logs'/*-rank1.jsonl; }; rank_log | grep -q '\"outcome\":\"aborted\"' && rank_log | grep -q '\"event\":\"summary\"'"
check "abort: rank 0's log has its start" bash -c "cat '$T/abort.logs'/*-rank0.jsonl | grep -q '\"event\":\"start\"'"
check "abort: rank 1's report says the launcher ends the other ranks" \
  grep -q '^  distributed: WORLD_SIZE=2: this rank.s log is flushed; the launcher' "$T/abort.1.err"

job raise raise
cat "$T/raise.out"
check "raise: rank 1's report says peers wait until the NCCL timeout" \
  grep -q '^  distributed: WORLD_SIZE=2: .*other ranks wait in their next collective (all-reduce) until the NCCL timeout' "$T/raise.1.err"
check "raise: ... that skipping the batch desynchronises, and recommends mask or abort" \
  bash -c "grep '^  distributed:' '$T/raise.1.err' | grep -q 'desynchronises the collectives. For distributed jobs use LABELGUARD_ACTION=mask (every rank goes on) or abort'"
check "raise: each rank's log notes it at start (distributed_action)" \
  bash -c "for r in 0 1; do cat '$T/raise.logs'/*-rank\$r.jsonl | grep -q '\"what\":\"distributed_action\"' || exit 1; done"

LABELGUARD_ACTION=raise run_lg single "$PROG" --now
check "one process: no distributed line" bash -c "! grep -q 'distributed' '$T/single.err'"
events single || fail "single: log schema"
check "one process: no distributed_action note" qtrue single 'not [w for w in W if w["what"] == "distributed_action"]'
finish
