#!/usr/bin/env bash
# A kernel with PyTorch's name but another parameter list (at::native::lg_test_mismatch, one
# extra int) is not emulated: it runs as a no-op whatever its labels, and the output keeps the
# driver's sentinel (12345). FAKECUDA_TRACE says why. Also: a test can add an emulator.
. "$(dirname "$0")/lib.sh"
fk_run nll mismatch_fwd_2d 0 9 1
expect_rc 0
expect_line 'result launch_err=0 sync_err=0 last_err=0 last_err_str="no error" out=12345 total_weight=0'
expect_no_err
FAKECUDA_TRACE=1 fk_run nll mismatch_fwd_2d 0 9 1 --no-follow
grep -q 'lg_test_mismatch38nll_loss_forward_reduce_cuda_kernel_2dI.*parameter list differs: no-op' "$ERR" || fail "no trace of the layout mismatch"
# The same name in PyTorch's namespace with PyTorch's layout is emulated (and asserts).
fk_run nll fwd_2d 0 9 1 --no-follow
expect_line 'result launch_err=0 sync_err=710 last_err=710 last_err_str="device-side assert triggered" out=- total_weight=-'
# A test-registered emulator takes precedence over the built-in one; the counters see both launches.
fk_run probe emulator
expect_line "builtin value=1 register=0 user value=42 launches=2 emulated=2 nll_launches=0"
finish
