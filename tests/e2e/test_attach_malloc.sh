#!/usr/bin/env bash
# test_attach_malloc.sh: attach never hangs a process stopped inside malloc. The target
# (build/e2e/malloc_loop, tests/e2e/progs/malloc_loop.cu, under the runtime test double) loops
# on malloc/free of arena-locked sizes on its main thread and three others, so a debugger
# almost always stops the main thread inside malloc or free, holding its arena's lock; a call
# that allocates there (dlopen, our constructor) waits on that lock for good. The CLI's ways
# must first move the thread to a safe point (python/labelguard/inject.py's re-stops, the gdb
# script's breakpoint on the return address), and arming itself allocates nothing (arm_got.c).
#   20 attaches through the ptrace injector (the way used where gdb cannot call functions,
#      e.g. AMX hosts): each returns within its hang guard with "LG_ARM n", n >= 1, and the
#      target lives on; at least one of them found the thread inside malloc/free (the hazard
#      was met, not missed);
#   3 attaches through `labelguard attach` (gdb where it can call, else the injector): armed;
#   then the target's bad launch is blocked (launch: 800, sync: 0) and it exits 0.
# x86_64 for the injector half. Called by tests/run.sh; alone: bash tests/e2e/test_attach_malloc.sh
. "$(dirname "$0")/lib.sh"
PROG="$LG_ROOT/$LG_BUILD/e2e/malloc_loop"
[ -z "${LG_SANITIZER:-}" ] || { echo "not with SANITIZER=$LG_SANITIZER (the library is dlopen'd)"; exit 77; }
need "$PROG" "$LG_PRELOAD"
export LABELGUARD_QUIET=1
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

LABELGUARD_LOG="$T/logs" "$PROG" "$T/go" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 600); do grep -q '^ready' "$T/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q '^ready' "$T/out" || { echo "FAIL: the target did not start"; cat "$T/out" "$T/err"; exit 1; }

if [ "$(uname -m)" = x86_64 ]; then
  restops=0
  for i in $(seq 20); do
    # 120 s: a hang guard only; an attach takes well under a second to a few seconds.
    timeout 120 python3 "$LG_ROOT/python/labelguard/inject.py" "$pid" "$LG_PRELOAD" >"$T/inject.$i" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q 'cannot attach' "$T/inject.$i"; then
      echo "ptrace not permitted here"; cat "$T/inject.$i"; exit 77
    fi
    check "injector attach $i: returned (rc $rc, 124: hung)" [ $rc = 0 ]
    check "injector attach $i: armed" grep -q '^LG_ARM [1-9]' "$T/inject.$i"
    check "injector attach $i: the target lives on" kill -0 "$pid"
    grep -q 'safe point after' "$T/inject.$i" && restops=$((restops + 1))
    [ $rc = 0 ] || { cat "$T/inject.$i"; break; }
  done
  echo "attaches that found the thread inside malloc/free first: $restops of 20"
  check "the hazard was met: some attach stopped the thread inside malloc/free" [ $restops -ge 1 ]
else
  echo "note: no ptrace injector for $(uname -m): only the CLI's attach is tested"
fi

for i in 1 2 3; do
  LABELGUARD_LIB="$LG_PRELOAD" timeout 300 "$LG_ROOT/scripts/labelguard" attach "$pid" >"$T/cli.$i" 2>&1
  rc=$?
  cat "$T/cli.$i"
  if grep -q "cannot call functions\|cannot attach\|refused ptrace" "$T/cli.$i"; then
    echo "note: the CLI cannot call functions here"; break
  fi
  check "labelguard attach $i: armed (rc $rc, 124: hung)" bash -c "[ $rc = 0 ] && grep -q 'labelguard_arm() returned [1-9]' '$T/cli.$i'"
done

touch "$T/go"
# A target hung by an earlier call never ends: a hang guard (120 s), far above its exit time.
for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { echo "the target is hung"; kill -9 "$pid"; }
wait "$pid"; rc=$?; pid=
cat "$T/out"
check "target: exit 0" [ $rc = 0 ]
check "target: the bad launch after arming was blocked" bash -c "grep -qx 'launch: 800' '$T/out' && tail -n1 '$T/out' | grep -qx 'sync: 0'"
finish
