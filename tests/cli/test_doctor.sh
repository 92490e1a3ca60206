#!/usr/bin/env bash
# test_doctor.sh: `labelguard doctor`: ✓/✗ lines with hints, exit 0 when usable and 2 when
# not: library missing, a library with a dependency besides libc, a command without a CUDA
# runtime, a program using the shared runtime of the test double, a Python without torch; the
# Python layout the library found (version, free-threaded, stacks read) for a Python probe only.
# Hooks and backend are what the real library's start event says in doctor's probe, so those
# parts use the real library; the library checks use stand-ins.
. "$(dirname "$0")/lib.sh"
lib="$LG_ROOT/$LG_BUILD/liblabelguard.so"
[ -f "$lib" ] || { echo "the real library is not built: make"; exit 1; }
[ -z "${LG_SANITIZER:-}" ] || { echo "sanitizer build: doctor's probe preloads the library alone"; exit 77; }

run_cmd env LABELGUARD_LIB="$T/none.so" "$LG" doctor
expect_rc 2 "library missing"; expect_in out "✗ library" "✗ for the library"; expect_in out "hint:" "hint"
for what in GPU driver runtime CUPTI hooks backend; do expect_in out " $what " "line for $what"; done

run_cmd env LABELGUARD_LIB="$lib" "$LG" doctor
expect_rc 0 "usable without a command"; expect_in out "✓ library" "library ✓"; expect_in out "✓ preload" "preload ✓"
expect_in out "needs libc only" "dependency check"
# The probe ran this python3: the library says which layout it found and that stacks are read.
pyver=$(python3 -c 'import platform; print(platform.python_version())')
grep -qE "✓ python +CPython $pyver: Python stacks are read" "$T/out" || { cat "$T/out"; fail "python line for $pyver"; }

# A library that needs something besides libc (as a glib linked dynamically would) is ✗.
printf 'double f(double x);\n__attribute__((visibility("default"))) int labelguard_arm(void){return 0;}\n' >"$T/d2.c"
mkdir -p "$T/dep"; printf 'int depfn(void){return 1;}\n' >"$T/dep/dep.c"
gcc -shared -fPIC -o "$T/dep/libdep.so" "$T/dep/dep.c"
printf 'int depfn(void);\n__attribute__((visibility("default"))) int labelguard_arm(void){return depfn();}\n' >"$T/d3.c"
gcc -shared -fPIC -o "$T/lib-with-dep.so" "$T/d3.c" -L"$T/dep" -ldep -Wl,-rpath,"$T/dep"
run_cmd env LABELGUARD_LIB="$T/lib-with-dep.so" "$LG" doctor
expect_rc 2 "library with an extra dependency"; expect_in out "depends on libdep.so" "names the dependency"
ok "library checks"

# A command without any CUDA runtime: no hook can see launches.
run_cmd env LABELGUARD_LIB="$lib" "$LG" doctor /bin/true
expect_rc 2 "command without CUDA"; expect_in out "links no CUDA runtime" "runtime line"; expect_in out "✗ hooks" "hooks ✗"
run_cmd env LABELGUARD_LIB="$lib" "$LG" doctor /no/such/cmd
expect_rc 2 "command not found"; expect_in out "command not found" "message"

# A Python without torch: says so and how to fix.
run_cmd env LABELGUARD_LIB="$lib" "$LG" doctor python3 train.py
if python3 -c 'import torch' 2>/dev/null; then
  expect_in out "torch" "torch line"
else
  expect_rc 2 "python without torch"; expect_in out "torch is not importable" "message"; expect_in out "activate the environment" "hint"
fi
ok "command checks"

# A program built with -cudart shared, run against the test double: interpose, host backend.
prog=""
for p in "$LG_ROOT/$LG_BUILD/demo/demo_train" "$LG_ROOT/$LG_BUILD"/progs/*; do
  [ -x "$p" ] && [ -f "$p" ] && { prog=$p; break; }
done
if [ -n "$prog" ] && [ -e "$LG_ROOT/$LG_BUILD/fakecuda/libcudart.so.13" ]; then
  run_cmd env LABELGUARD_LIB="$lib" LD_LIBRARY_PATH="$LG_ROOT/$LG_BUILD/fakecuda" "$LG" doctor "$prog"
  expect_rc 0 "test-double program"; expect_in out "uses the shared CUDA runtime $LG_ROOT/$LG_BUILD/fakecuda/libcudart.so.13" "runtime path"
  expect_in out "✓ hooks          interpose" "interpose hook"
  ! grep -q "CPython" "$T/out" || fail "a python line for a program without Python"
  run_cmd env LABELGUARD_LIB="$lib" LABELGUARD_HOOKS=cupti LD_LIBRARY_PATH="$LG_ROOT/$LG_BUILD/fakecuda" "$LG" doctor "$prog"
  if [ ! -e /dev/nvidia0 ]; then expect_rc 2 "cupti only, without a driver"; fi
  ok "test-double program"
else
  echo "note: no test-double program built: that part skipped"
fi
finish
