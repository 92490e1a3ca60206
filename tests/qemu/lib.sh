# shellcheck shell=bash
# tests/qemu/lib.sh: runs the existing tests on the aarch64 build (build-aarch64/, made by
# `make ARCH=aarch64 qemu-programs`) under qemu-user, unchanged (sourced by tests/qemu/test_*.sh).
# There is no binfmt_misc here, so an aarch64 program cannot be exec'd directly. Instead a
# private tree $W (LG_BUILD for the tests it runs) mirrors build-aarch64/: every aarch64
# executable becomes a two-line script that execs qemu-aarch64-static -L ROOT on the real one
# (argv[0] kept, so a program that re-execs itself, or execs another, goes through qemu again),
# everything else is a link. One program is started otherwise: e2e/fork_storm forks while its
# other threads open files, and under -L qemu sends every absolute path through its path(),
# whose process-wide lock has no fork handling, so a child forked while another thread is inside
# it would hang for good at its first open, a qemu hang that is no test of the library. It runs
# on the arm64 tree's loader, the tree's libraries on its --library-path, which needs no path
# mapping. Not every program can: the loader is then /proc/self/exe, and the unit tests
# (test_stack reads its own symbols there, test_arm finds its fixtures next to it) and the arm64
# CPython (its standard library is found in /usr/lib through -L) need the program there.
# The preload path is $W/preload/$PLATFORM/liblabelguard.so: the loader expands $PLATFORM, so an
# aarch64 process under qemu preloads the aarch64 library and a host process on the way
# (timeout, env, sh) an empty x86_64 one, silently, whatever its loader calls the CPU
# (host_stub.sh). bin/ comes first on PATH: python3 there is the arm64 tree's CPython 3.11 (only
# for the tests that ask for it: see qemu_python), gcc the cross compiler whose output is wrapped
# the same way.
# Needs: LG_ROOT (the checkout), the Debian packages qemu-user-static and gcc-aarch64-linux-gnu,
# the arm64 tree (scripts/arm64-root.sh, made by the cross build).
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
[ -z "${LG_SANITIZER:-}" ] || { echo "the aarch64 build is not sanitized: its tests run once, in the plain run"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "on $(uname -m) the native suite is the test (qemu runs aarch64 on x86_64 only)"; exit 77; }
QEMU="$(command -v qemu-aarch64-static)" || { echo "qemu-aarch64-static not found: install the Debian package qemu-user-static"; exit 1; }
A64="${LG_AARCH64_BUILD:-build-aarch64}"
ARM64_ROOT="$(bash "$LG_ROOT/scripts/arm64-root.sh" --print)"
[ -f "$ARM64_ROOT/.installed" ] || { echo "no arm64 tree at $ARM64_ROOT: run make ARCH=aarch64 qemu-programs"; exit 1; }
[ -f "$LG_ROOT/$A64/liblabelguard.so" ] || { echo "missing $A64/liblabelguard.so: run make ARCH=aarch64 qemu-programs"; exit 1; }
QW="$A64/qemu-run.$$"       # relative to LG_ROOT, like LG_BUILD
W="$LG_ROOT/$QW"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin" "$W/preload/aarch64"

# qemu_wrap REAL OUT: OUT runs the aarch64 program REAL under qemu
qemu_wrap() {
  # shellcheck disable=SC2016  # $0 and $@ are the wrapper's own, expanded when it runs
  printf '#!/bin/sh\nexec %s -L %s -0 "$0" %s "$@"\n' "$QEMU" "$ARM64_ROOT" "$1" >"$2"
  chmod +x "$2"
}
# qemu_wrap_loader REAL OUT: the same without -L, through the tree's loader (see above).
# --library-path replaces LD_LIBRARY_PATH for the loader, so the wrapper puts it first.
qemu_wrap_loader() {
  # shellcheck disable=SC2016  # $0, $@ and LD_LIBRARY_PATH are the wrapper's own, expanded when it runs
  printf '#!/bin/sh\nexec %s %s --library-path "${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}%s" --argv0 "$0" %s "$@"\n' \
    "$QEMU" "$ARM64_ROOT/lib/ld-linux-aarch64.so.1" "$ARM64_ROOT/usr/lib/aarch64-linux-gnu" "$1" >"$2"
  chmod +x "$2"
}
is_a64_exec() { # an aarch64 ELF program: e_machine 183 (EM_AARCH64), not named like a library
  case "$1" in *.so | *.so.*) return 1 ;; esac
  [ -x "$1" ] && [ -f "$1" ] && [ "$(od -An -tx1 -j0 -N4 "$1" | tr -d ' ')" = 7f454c46 ] &&
    [ "$(od -An -tu2 -j18 -N2 "$1" | tr -d ' ')" = 183 ]
}
(
  cd "$LG_ROOT/$A64" || exit 1
  find . -path ./obj -prune -o -path './qemu-run.*' -prune -o -path ./validator -prune -o -path ./test-logs -prune \
    -o -type d -print | while read -r d; do mkdir -p "$W/$d"; done
  find . -path ./obj -prune -o -path './qemu-run.*' -prune -o -path ./validator -prune -o -path ./test-logs -prune \
    -o \( -type f -o -type l \) -print | while read -r f; do
    case "$f" in *.d) continue ;; esac
    if [ "$f" = ./e2e/fork_storm ]; then qemu_wrap_loader "$LG_ROOT/$A64/${f#./}" "$W/$f"
    elif is_a64_exec "$f"; then qemu_wrap "$LG_ROOT/$A64/${f#./}" "$W/$f"; else ln -s "$LG_ROOT/$A64/${f#./}" "$W/$f"; fi
  done
) || { echo "could not make $W"; exit 1; }
ln -s "$LG_ROOT/$A64/liblabelguard.so" "$W/preload/aarch64/liblabelguard.so"
. "$LG_ROOT/tests/qemu/host_stub.sh"
qemu_host_stub "$W/preload" || exit 1
# python3: the arm64 CPython; gcc: the cross compiler, its programs wrapped for qemu.
qemu_wrap "$ARM64_ROOT/usr/bin/python3.11" "$W/bin/python3"
cat >"$W/bin/gcc" <<EOF
#!/bin/bash
# gcc ... -o OUT ...: OUT.aarch64 built by the cross compiler, OUT its qemu launcher
args=() out=""
while [ \$# -gt 0 ]; do
  if [ "\$1" = -o ]; then out=\$2; args+=(-o "\$2.aarch64"); shift 2; else args+=("\$1"); shift; fi
done
aarch64-linux-gnu-gcc "\${args[@]}" || exit
[ -z "\$out" ] && exit 0
printf '#!/bin/sh\nexec %s -L %s -0 "\$0" "%s" "\$@"\n' "$QEMU" "$ARM64_ROOT" "\$out.aarch64" >"\$out"
chmod +x "\$out"
EOF
chmod +x "$W/bin/gcc"

export LG_ROOT LG_BUILD="$QW" LG_SANITIZER=""
export LG_PRELOAD="$W/preload/\$PLATFORM/liblabelguard.so"
export LG_FAKE_DIR="$W/fakecuda"
export QEMU_PATH="$W/bin:$PATH"
logs="$LG_ROOT/$A64/test-logs/qemu-$$"; mkdir -p "$logs"
q_pass=0 q_fail=0 q_skip=0 q_failed=()
# q_run NAME COMMAND...: one test, like tests/run.sh's run_one (its output shown when it fails)
q_run() {
  local name=$1 rc start; shift
  start=$(date +%s)
  timeout -k 5 "${LG_TEST_TIMEOUT:-600}" "$@" >"$logs/${name//\//_}.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then q_pass=$((q_pass + 1)); printf 'PASS %-44s %3ss\n' "$name" $(($(date +%s) - start))
  elif [ $rc -eq 77 ]; then q_skip=$((q_skip + 1)); printf 'SKIP %-44s (%s)\n' "$name" "$(tail -n1 "$logs/${name//\//_}.log")"
  else q_fail=$((q_fail + 1)); q_failed+=("$name"); printf 'FAIL %-44s rc=%s\n' "$name" $rc; sed 's/^/    | /' "$logs/${name//\//_}.log" | tail -n 40; fi
}
q_finish() {
  printf 'aarch64 under qemu: %d passed, %d failed, %d skipped%s\n' $q_pass $q_fail $q_skip \
    "$([ ${#q_failed[@]} -eq 0 ] || printf ' (%s)' "${q_failed[*]}")"
  [ $q_fail -eq 0 ] && [ $q_pass -gt 0 ]
}
