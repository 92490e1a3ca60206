#!/usr/bin/env bash
# test_python.sh: the Python stack on Arm, under qemu-user with the arm64 tree's CPython 3.11:
# tests/e2e/test_pystack.sh (pystack.c's frame walk in a real aarch64 interpreter: main thread,
# worker thread, native thread, deep recursion, process_vm_readv blocked; its C helpers built by
# the cross compiler) and tests/e2e/test_python_stack.sh (a bad launch from Python through
# ctypes: the report names the Python line), with python3 and gcc on PATH being the arm64 ones
# (lib.sh's bin/). Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
# test_pystack checks inside the interpreter and execs python3 by name: bin/ first on PATH.
# qemu-user refuses a guest's seccomp filter: the run with process_vm_readv blocked is left out.
q_run e2e/test_pystack env PATH="$QEMU_PATH" LG_TEST_PYTHONS=python3 LG_TEST_SECCOMP=0 bash "$LG_ROOT/tests/e2e/test_pystack.sh"
# test_python_stack checks with the host's python3 (tests/e2e/lib.sh's q): only the program runs on Arm.
q_run e2e/test_python_stack env LG_TEST_PYTHONS="$W/bin/python3" bash "$LG_ROOT/tests/e2e/test_python_stack.sh"
q_finish
