#!/usr/bin/env bash
# test_e2e_actions.sh: tests/e2e/test_actions.sh on the aarch64 build under qemu-user: every
# action (raise, mask, log, hold, abort) and both modes, the bad label first, in the middle and
# last, on three of its ten NLL kernels (LG_ACTIONS_KERNELS: forward and backward, 1-d and 2-d,
# int64 and uint8 labels; the whole set takes over tests/run.sh's 300 s per test under qemu).
# Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
q_run e2e/test_actions env LG_ACTIONS_KERNELS="fwd_none bwd_1d 2d_fwd" bash "$LG_ROOT/tests/e2e/test_actions.sh"
q_finish
