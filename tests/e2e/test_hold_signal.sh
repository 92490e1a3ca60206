#!/usr/bin/env bash
# test_hold_signal.sh: the application's own SIGUSR1 handler (SLURM uses the
# signal) survives a hold. A Python program installs its handler, launches a bad NLL kernel
# through ctypes (build/progs/libnllpy.so) with LABELGUARD_ACTION=hold: the thread is held,
# SIGUSR1 releases it (the launch then fails as with raise, context alive), and a second
# SIGUSR1 afterwards reaches the application's handler, not ours.
. "$(dirname "$0")/lib.sh"
lib="$LG_ROOT/$LG_BUILD/progs/libnllpy.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing (make test-programs)"; exit 1; }
cat >"$T/app.py" <<'PY'
import ctypes, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
lib = ctypes.CDLL(sys.argv[1])
lib.lgpy_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                            ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
labels = (ctypes.c_int64 * 4)(0, 1, 7, 2)
err = ctypes.create_string_buffer(4096)
rc = lib.lgpy_launch(0, 0, labels, 4, 5, -100, err, 4096)
print("launch rc=%d err=%s" % (rc, err.value.decode()), flush=True)
print("memcheck=%d" % lib.lgpy_memcheck(), flush=True)
print("handler calls during hold: %d" % len(got), flush=True)
print("waiting", flush=True)
for _ in range(100):
    if got:
        break
    time.sleep(0.05)
print("handler calls after: %d" % len(got), flush=True)
PY
LABELGUARD_ACTION=hold LABELGUARD_LOG="$T/logs" LD_PRELOAD="$LG_PRELOAD" python3 "$T/app.py" "$lib" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 200); do grep -q HOLDING "$T/err" 2>/dev/null && break; sleep 0.05; done
check "held, with the attach hint" grep -q "gdb -p $pid" "$T/err"
kill -USR1 $pid
for _ in $(seq 200); do grep -q waiting "$T/out" 2>/dev/null && break; sleep 0.05; done
check "released: the launch failed as with raise" grep -q "launch rc=800 err=labelguard: .*bad label target\[2\] = 7" "$T/out"
check "context alive after the hold" grep -q "memcheck=0" "$T/out"
check "the release signal was ours, not the app's" grep -q "handler calls during hold: 0" "$T/out"
kill -USR1 $pid
wait $pid; rc=$?
check "the app's handler is back afterwards" grep -q "handler calls after: 1" "$T/out"
check "the app exits normally" [ "$rc" = 0 ]
finish
