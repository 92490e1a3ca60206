#!/usr/bin/env bash
# test_early_ctor.sh: a hook reached before the library's constructor ran (another library's
# constructor launching a kernel: build/progs/libearly.so, initialised before ours) starts
# nothing and passes the launch through, as without the library; the first launch after our
# constructor starts the library with the configuration the environment gives (LABELGUARD_LOG,
# LABELGUARD_SAMPLES), never the built-in defaults, and checks it.
. "$(dirname "$0")/lib.sh"
need "$PROGS/nll" "$PROGS/libearly.so"
cd "$T" || exit 1
# Ours first in LD_PRELOAD, libearly.so second: the loader initialises in reverse of the search
# order, so libearly's constructor runs before ours, and its launch binds to our hook.
LD_PRELOAD="$PROGS/libearly.so" "$PROGS/nll" fwd_2d good:8 >"$T/plain.out" 2>"$T/plain.err"
LABELGUARD_LOG="$T/early.logs" LABELGUARD_SAMPLES=3 LD_PRELOAD="$LG_PRELOAD $PROGS/libearly.so" \
  "$PROGS/nll" fwd_2d bad:8:2:7 >"$T/early.out" 2>"$T/early.err"
echo $? >"$T/early.rc"
check "the process ran to its end (status 1: the bad label raised)" [ "$(rc_of early)" = 1 ]
require_fake early
check "libearly's constructor launched" grep -q '^early_launch=' "$T/early.err"
check "its launch got the runtime's own answer" \
  [ "$(grep '^early_launch=' "$T/early.err")" = "$(grep '^early_launch=' "$T/plain.err")" ]
check "nothing logged with the built-in defaults" [ ! -e "$T/labelguard-logs" ]
check "the run's events are valid" events early
check "one start event" qtrue early 'sum(e["event"] == "start" for e in E) == 1'
check "the start has the environment's configuration" \
  qtrue early "E[0]['config']['samples'] == 3 and E[0]['config']['log'] == '$T/early.logs'"
check "the bad label is reported" qtrue early 'len(V) == 1 and V[0]["target"]["count"] == 8'
finish
