#!/usr/bin/env bash
# test_e2e_actions.sh: tests/e2e/test_actions.sh, unchanged, on the aarch64 build under
# qemu-user: every action (raise, mask, log, hold, abort) and both modes on every decoded NLL
# kernel, the bad label first, in the middle and last. A test of its own for tests/run.sh's
# per-test time limit. Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
q_run e2e/test_actions bash "$LG_ROOT/tests/e2e/test_actions.sh"
q_finish
