#!/usr/bin/env bash
# test_attach_busy.sh: `labelguard attach` to a job that is busy, ten times. The target
# (build/e2e/attach_target --busy, tests/e2e/progs/attach_target.cu) loops launches and device
# syncs on the asynchronous double (FAKECUDA_ASYNC_US: each kernel takes 20 ms, so the loop
# waits inside cudaDeviceSynchronize nearly all the time, where gdb stops it). The CLI itself
# (scripts/labelguard attach PID, as users run it) dlopens the library and calls labelguard_arm()
# in it, ten times. It picks its way as it does for users: gdb when gdb can call a function in a
# throwaway process, else the ptrace injector (gdb 13 cannot on CPUs with AMX, and a failed call
# leaves the target's waiting thread broken, so the target itself must never be the probe).
# The double models the driver's rule for a thread stopped inside a wait: a CUDA call made on it
# by the debugger's call deadlocks (the double says "fakecuda: re-entered" and blocks), so an
# arm that starts the library (CUDA queries, the validator, CUPTI, the log) inside that call
# hangs the job. Checked:
#   - every attach returns (a hang guard of 300 s) with labelguard_arm() >= 1 (armed);
#   - the loop keeps running after each attach (its iteration count grows);
#   - the target never re-entered the runtime from the debugger's call;
#   - then the trigger file: the next bad label is blocked (raise), one violation in the log,
#     and one start event, made by the target's own thread after the first attach.
# Before arming stopped starting the library, the first attach hung: gdb was killed by the
# timeout and the target printed "fakecuda: re-entered from a thread waiting inside a
# device or legacy-stream synchronisation ... cudaGetDevice would deadlock in a real driver".
# Called by tests/run.sh; alone: bash tests/e2e/test_attach_busy.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
B="${LG_BUILD:-build}"
LIB="$PWD/$B/liblabelguard.so"
FAKE="${LG_FAKE_DIR:-$PWD/$B/fakecuda}"
PROG="$B/e2e/attach_target"
LG="$PWD/scripts/labelguard"
command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }
[ -z "${LG_SANITIZER:-}" ] || { echo "not with SANITIZER=$LG_SANITIZER"; exit 77; }
for f in "$LIB" "$FAKE/libcudart.so.13" "$PROG"; do
  [ -e "$f" ] || { echo "missing $f: run make test-programs"; exit 1; }
done
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# wait_for SECONDS COMMAND...: polls COMMAND until it succeeds; fails after SECONDS, a hang guard
# far above the slowest run (the conditions below take well under a second when nothing hangs)
wait_for() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt "$end" ] || return 1; sleep 0.1; done
}
iters() { grep -c '^iter ' "$tmp/out"; }
ran_past() { [ "$(iters)" -gt "$1" ]; }

FAKECUDA_ASYNC_US=20000 LD_LIBRARY_PATH="$FAKE" LABELGUARD_LOG="$tmp/logs" "$PROG" --busy "$tmp/trigger" \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_for 120 ran_past 1 || { echo "FAIL: the target's loop did not start"; cat "$tmp/out" "$tmp/err"; exit 1; }

fail=0
for i in $(seq 10); do
  before=$(iters)
  t0=$(date +%s.%N)
  LABELGUARD_LIB="$LIB" timeout -k 5 300 "$LG" attach "$pid" >"$tmp/attach" 2>&1; rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] && [ "$i" = 1 ]; then
    if grep -q 'Operation not permitted\|ptrace_scope\|not permitted to ptrace' "$tmp/attach"; then
      echo "ptrace not permitted here: $(grep -m1 'attach:' "$tmp/attach")"; exit 77
    fi
    if grep -q 'attach needs gdb\|gdb cannot call functions in a process on this machine' "$tmp/attach"; then
      echo "the CLI cannot attach here: $(grep -m1 'attach:' "$tmp/attach")"; exit 77
    fi
  fi
  how=gdb; grep -q 'through ptrace' "$tmp/attach" && how=inject
  secs=$(python3 -c "print('%.1f' % ($t1 - $t0))")
  armed=$(sed -n 's/^labelguard: attached to process .*; labelguard_arm() returned \(-\{0,1\}[0-9]*\)$/\1/p' "$tmp/attach")
  echo "attach $i ($how): rc=$rc armed=${armed:-none} in ${secs}s"
  if [ $rc -ne 0 ] || [ -z "$armed" ] || [ "$armed" -lt 1 ]; then
    echo "FAIL: attach $i did not return an armed count (rc $rc; 124: timed out)"
    sed 's/^/  attach: /' "$tmp/attach" | tail -n 8
    fail=1; break
  fi
  wait_for 120 ran_past "$before" || { echo "FAIL: the loop stopped after attach $i (iterations $before -> $(iters))"; fail=1; break; }
done
if grep -q 'fakecuda: re-entered' "$tmp/err"; then
  echo "FAIL: the debugger's call re-entered the CUDA runtime:"; grep 'fakecuda: re-entered' "$tmp/err"; fail=1
fi
[ $fail = 0 ] && echo "ok: 10 attaches returned, the loop ran on after each ($(iters) iterations so far)"

touch "$tmp/trigger"
gone() { ! kill -0 "$pid" 2>/dev/null; }
if ! wait_for 120 gone; then
  echo "FAIL: the target did not finish after the trigger"; fail=1
else
  wait "$pid"; rc=$?; pid=
  echo "--- target rc=$rc, last lines:"; tail -n 3 "$tmp/out"; sed 's/^/stderr: /' "$tmp/err" | grep -v '^stderr: labelguard: armed' | head -n 20
  [ $rc -eq 0 ] || { echo "FAIL: target exited $rc"; fail=1; }
  [ "$(tail -n1 "$tmp/out")" = "sync: 0" ] || { echo "FAIL: the bad launch was not blocked"; fail=1; }
  tail -n2 "$tmp/out" | head -n1 | grep -q '^launch: [1-9].*nll_loss_forward_reduce_cuda_kernel_2d' ||
    { echo "FAIL: the launch did not report the library's error naming the kernel"; fail=1; }
  python3 - "$tmp/logs" <<'PY' || fail=1
import glob, json, sys
files = glob.glob(sys.argv[1] + "/*.jsonl")
assert len(files) == 1, f"expected one JSONL log, found {files}"
events = [json.loads(l) for l in open(files[0]) if l.strip()]
starts = [e for e in events if e.get("event") == "start"]
viol = [e for e in events if e.get("event") == "violation"]
assert len(starts) == 1 and events[0] is starts[0], f"one start event, first: {[e.get('event') for e in events][:5]}"
assert starts[0].get("hooks") == ["interpose"], f"interposition only, CUPTI left alone: {starts[0].get('hooks')}"
assert len(viol) == 1 and viol[0].get("outcome") == "blocked", viol
assert viol[0].get("bad", {}).get("max") == 5, viol[0].get("bad")
print("ok: the next bad label was caught:", viol[0].get("kernel"), viol[0].get("bad"))
PY
fi
[ $fail = 0 ] && echo "all checks passed"
exit $fail
