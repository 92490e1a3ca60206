#!/usr/bin/env bash
# test_unit.sh: every GTest unit test of the aarch64 build (build-aarch64/tests/unit) under
# qemu-user: the core on Arm, arm.c's GOT patching with R_AARCH64_JUMP_SLOT/GLOB_DAT against
# aarch64 fixture libraries (lazy and -z now) and the dlopen wrapper, libunwind's aarch64 port
# (test_stack), the glibc pin's stat/fcntl shims (test_registry reads files through them).
# Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
for t in "$W"/tests/unit/test_*; do
  [ -x "$t" ] || continue
  q_run "unit/$(basename "$t")" "$t"
done
q_finish
