#!/usr/bin/env bash
# test_profiler.sh: torch.profiler after labelguard.enable() (tests/torch-fake/profiler.py), real
# torch 2.15 (CUDA 13) on the runtime double, with the single-slot CUPTI double
# (build/fakecupti/libcupti.so.13, tests/fakecuda/cupti/libcupti.c) preloaded as torch's
# libcupti.so.13, FAKECUPTI_TRACE=1 (the double prints each subscription). enable() and the
# start must leave CUPTI's one slot to the profiler (interposition covers torch's runtime: no
# CUPTI), the profile runs, and a bad label inside it is still blocked. The start event says
# hooks ["interpose"] and why. Before the preload rule applied to enable(), enable subscribed at
# once ("fakecupti: subscribe labelguard: 0"): the slot was labelguard's through the profile.
# Kineto 2.15 on the double does not subscribe itself (no driver to profile); the hand-over of a
# profiler's cuptiSubscribe after enable is tested with a Kineto-like client in
# tests/e2e/test_cupti_subscriber.sh (enable_*). Run by tests/run.sh; alone:
# bash tests/torch-fake/test_profiler.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
CUPTI="$LG_ROOT/$LG_BUILD/fakecupti/libcupti.so.13"
[ -e "$CUPTI" ] || { echo "FAIL: $CUPTI missing: run make test-programs"; exit 1; }
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-profiler.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_DEBUG_KERNELS RANK LOCAL_RANK WORLD_SIZE
rc=0
LD_PRELOAD="$CUPTI" FAKECUPTI_TRACE=1 LABELGUARD_QUIET=1 LABELGUARD_LOG="$T/logs" PYTHONPATH="$LG_ROOT/python" \
  "$TP" tests/torch-fake/profiler.py >"$T/out" 2>"$T/err" || rc=1
cat "$T/out"
grep -q '^FAIL' "$T/out" && rc=1
[ "$(grep -c '^ok: ' "$T/out")" -ge 7 ] || { rc=1; echo "FAIL: fewer checks than expected ran"; }
if grep -q '^fakecupti: subscribe labelguard' "$T/err"; then
  rc=1; echo "FAIL: labelguard subscribed to CUPTI: $(grep '^fakecupti: subscribe' "$T/err" | head -n 3)"
else
  echo "ok: labelguard never called cuptiSubscribe"
fi
python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$T/logs" >"$T/events.json" 2>"$T/jsonerr" || { rc=1; cat "$T/jsonerr"; }
python3 - "$T/events.json" <<'PY' || rc=1
import json, sys
E = json.load(open(sys.argv[1]))
s = [e for e in E if e["event"] == "start"]
assert len(s) == 1 and s[0]["hooks"] == ["interpose"] and "left to profilers" in s[0].get("hooks_reason", ""), s
assert not [e for e in E if e["event"] == "warning" and e["what"].startswith("cupti")], "a CUPTI warning"
print("ok: the start event says hooks [interpose], CUPTI left to profilers")
PY
[ $rc -eq 0 ] && echo "all checks passed" || { echo "checks failed"; tail -n 20 "$T/err" | sed 's/^/  stderr: /'; }
exit $rc
