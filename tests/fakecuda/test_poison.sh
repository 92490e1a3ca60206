#!/usr/bin/env bash
# Context poisoning, as on a GPU without labelguard: a kernel with one bad label launches
# successfully (launches are asynchronous), the synchronisation returns cudaErrorAssert (710)
# and prints the device's assert line, and from then on everything fails with 710 and stays
# failed: cudaGetLastError does not clear it, cudaMemcpy fails, later launches (of any kernel)
# fail. In every build and through every launch entry point.
. "$(dirname "$0")/lib.sh"
assert_line='/pytorch/aten/src/ATen/native/cuda/Loss.cu:304: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.'
for v in nll nll_legacy nll_ptsz; do
  for mode in default chevron legacy handle exc; do
    args=(); [ $mode = default ] || args=(--launch $mode)
    fk_run $v fwd_2d "${args[@]}" 0 1 2 3 1
    expect_rc 1
    expect_line 'result launch_err=0 sync_err=710 last_err=710 last_err_str="device-side assert triggered" out=- total_weight=-'
    expect_line 'after memcpy_err=710 clean_launch_err=710 clean_sync_err=710 same_launch_err=710 same_sync_err=710'
    expect_err_line "$assert_line"
    [ "$(wc -l <"$ERR")" = 1 ] || fail "$v $mode: expected exactly one assert line"
    # The same program with good labels is untouched, and its follow-ups run.
    fk_run $v fwd_2d "${args[@]}" --reduction sum 0 1 2 0 1
    expect_rc 0
    # 0.25 + 1.25 + 2.25 + 2.5 + 3.5
    expect_line 'result launch_err=0 sync_err=0 last_err=0 last_err_str="no error" out=9.75 total_weight=5'
    expect_line 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 same_launch_err=0 same_sync_err=0'
    expect_no_err
  done
done
# Every bad label's thread prints its own line, as on a device.
fk_run nll fwd_2d bad:64:40:9 --no-follow
expect_err_line "${assert_line/thread: \[3,0,0\]/thread: [8,0,0]}"
# Launches on the legacy and per-thread streams poison the same context.
fk_run nll fwd_2d --stream legacy 0 7
expect_line 'after memcpy_err=710 clean_launch_err=710 clean_sync_err=710 same_launch_err=710 same_sync_err=710'
fk_run nll_ptsz fwd_2d --stream perthread 0 7
expect_line 'after memcpy_err=710 clean_launch_err=710 clean_sync_err=710 same_launch_err=710 same_sync_err=710'
# An unknown kernel runs as a no-op: nothing is poisoned.
fk_run nll add_one
expect_line 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 same_launch_err=0 same_sync_err=0'
finish
