#!/usr/bin/env bash
# test_attach.sh: `labelguard attach`'s gdb calls into an aarch64 process. qemu-user cannot be
# ptrace-attached (gdb -p would see qemu itself), so gdb-multiarch reaches the process through
# qemu's gdb stub instead: build-aarch64/e2e/attach_target runs under qemu -g on the aarch64
# runtime double, gdb stops it in its wait (nanosleep) after a clean launch, and runs the very
# command file the CLI writes (commands/attach.py's gdb_script): dlopen, dlsym and
# labelguard_arm() called by gdb with AAPCS64's conventions, then detach. The target's bad
# launch must then be blocked with the library's text and the context kept (sync 0), where the
# same program unarmed fires the double's device assert (sync 710).
# Exit 0 pass, 77 skip (sanitizer run; no gdb-multiarch), else fail.
. "$(dirname "$0")/lib.sh"
command -v gdb-multiarch >/dev/null || { echo "gdb-multiarch not found: install the Debian package gdb-multiarch"; exit 77; }
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-qemu.XXXXXX")"
trap 'rm -rf "$T" "$W"' EXIT
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"
prog="$LG_ROOT/$A64/e2e/attach_target" lib="$LG_ROOT/$A64/liblabelguard.so"
[ -f "$prog" ] || { echo "missing $prog: run make ARCH=aarch64 qemu-programs"; exit 1; }
export LD_LIBRARY_PATH="$LG_FAKE_DIR" LABELGUARD_LOG="$T/logs"
unset LD_PRELOAD

"$W/e2e/attach_target" --now >"$T/plain.out" 2>"$T/plain.err"
check "unarmed: the bad launch fires the device assert (sync 710)" grep -q '^sync: 710$' "$T/plain.out"

(cd "$LG_ROOT/python" && python3 -c 'import sys; from labelguard.commands.attach import gdb_script; sys.stdout.write(gdb_script(sys.argv[1], False))' "$lib") \
  >"$T/attach.gdb" || { fail "cannot write attach.py's gdb script"; finish; }
for _ in 1 2 3; do  # a port another process took in between: another one
  port=$((20000 + RANDOM % 20000))
  "$QEMU" -L "$ARM64_ROOT" -g "$port" "$prog" "$T/trigger" >"$T/target.out" 2>"$T/target.err" &
  pid=$!
  sleep 0.5
  timeout 60 gdb-multiarch -batch -nx -ex "set sysroot $ARM64_ROOT" -ex "file $prog" -ex "target remote 127.0.0.1:$port" \
    -ex "break nanosleep" -ex continue -ex delete -x "$T/attach.gdb" >"$T/gdb.out" 2>&1
  grep -q '^LG_ARM' "$T/gdb.out" && break
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
done
sed 's/^/  gdb | /' "$T/gdb.out" | grep -E 'LG_|Breakpoint 1,|detached|rror' 
touch "$T/trigger"
wait "$pid"
check "gdb's dlopen of the library returned a handle" grep -Eq '^LG_HANDLE [1-9]' "$T/gdb.out"
check "dlsym found labelguard_arm" grep -Eq '^LG_FN [1-9]' "$T/gdb.out"
check "labelguard_arm() redirected launch entry points" grep -Eq '^LG_ARM [1-9]' "$T/gdb.out"
check "the clean launch before attaching ran" grep -q '^ready ' "$T/target.out"
check "armed: the bad launch is blocked with the library's text" grep -q '^launch: .*labelguard: bad labels.*target\[3\] = 5' "$T/target.out"
check "armed: the context survives (sync 0 after the bad launch)" bash -c "tail -n1 '$T/target.out' | grep -qx 'sync: 0'"
finish
