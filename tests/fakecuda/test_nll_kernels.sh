#!/usr/bin/env bash
# Each emulated NLL kernel against hand-computed outputs, with good labels, ignore_index,
# weights, uint8 and int64 labels, float and double, a strided nll_loss2d target; and with a
# bad label, the device's assert line and cudaErrorAssert (710) at the synchronisation.
# Inputs (tests/progs/nll.cu): x = -(flat_index + 1) / 4, C = 3 classes unless given.
#   [N,C] rows: row0 -0.25 -0.5 -0.75, row1 -1 -1.25 -1.5, row2 -1.75 -2 -2.25
. "$(dirname "$0")/lib.sh"
ok='result launch_err=0 sync_err=0 last_err=0 last_err_str="no error"'
bad='result launch_err=0 sync_err=710 last_err=710 last_err_str="device-side assert triggered" out=- total_weight=-'
L=/pytorch/aten/src/ATen/native/cuda/Loss.cu
D=/pytorch/aten/src/ATen/native/cuda/NLLLoss2d.cu

# forward 2d (the CrossEntropy path): labels 0 2 1 pick 0.25 + 1.5 + 2 = 3.75.
fk_run nll fwd_2d 0 2 1;                              expect_line "$ok out=1.25 total_weight=3"; expect_no_err; expect_rc 0
fk_run nll fwd_2d --reduction sum 0 2 1;              expect_line "$ok out=3.75 total_weight=3"
fk_run nll fwd_2d --reduction sum --weights on 0 2 1; expect_line "$ok out=8.75 total_weight=6"   # 0.25*1 + 1.5*3 + 2*2
fk_run nll fwd_2d 0 -100 1;                           expect_line "$ok out=1.125 total_weight=2" # (0.25 + 2) / 2
fk_run nll fwd_2d --dtype uint8 0 2 1;                expect_line "$ok out=1.25 total_weight=3"
fk_run nll fwd_2d --dtype uint8 --ignore 255 0 255 1; expect_line "$ok out=1.125 total_weight=2"
fk_run nll fwd_2d --scalar double 0 2 1;              expect_line "$ok out=1.25 total_weight=3"
fk_run nll fwd_2d --scalar double --dtype uint8 --reduction sum 2 2 2; expect_line "$ok out=4.5 total_weight=3" # 0.75 + 1.5 + 2.25
fk_run nll fwd_2d -100 -100;                          expect_line "$ok out=nan total_weight=0"   # mean of nothing: 0/0
fk_run nll fwd_2d 0 5 1
expect_line "$bad"; expect_rc 1
expect_err_line "$L:304: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [1,0,0] Assertion \`t >= 0 && t < n_classes\` failed."
fk_run nll fwd_2d 0 1 -1;   expect_line "$bad"     # negative labels fail too
fk_run nll fwd_2d bad:40:33:3
expect_line "$bad"
expect_err_line "$L:304: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [1,0,0] Assertion \`t >= 0 && t < n_classes\` failed."
fk_run nll fwd_2d --dtype uint8 0 255 1 --no-follow
expect_line "$bad"
expect_err_line "$L:304: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [1,0,0] Assertion \`t < n_classes\` failed."

# forward none: per-sample -x[i][t]; ignored samples give 0.
fk_run nll fwd_none 0 2 1;               expect_line "$ok out=- total_weight=-"; expect_line "values n=3 0.25 1.5 2"
fk_run nll fwd_none --weights 2,0,4 0 2 -100; expect_line "values n=3 0.5 6 0"
fk_run nll fwd_none --dtype uint8 1 1;   expect_line "values n=2 0.5 1.25"
fk_run nll fwd_none 0 3 1
expect_line "$bad"
expect_err_line "$L:200: nll_loss_forward_no_reduce_cuda_kernel: block: [0,0,0], thread: [1,0,0] Assertion \`cur_target >= 0 && cur_target < n_classes\` failed."

# forward 1d: one label; mean gives -x[t] (weight only in total_weight), sum gives -w*x[t].
fk_run nll fwd_1d 2;                                  expect_line "$ok out=0.75 total_weight=1"
fk_run nll fwd_1d --weights on 2;                     expect_line "$ok out=0.75 total_weight=3"
fk_run nll fwd_1d --weights on --reduction sum 2;     expect_line "$ok out=2.25 total_weight=3"
fk_run nll fwd_1d --weights 1,0,1 1;                  expect_line "$ok out=nan total_weight=0"
fk_run nll fwd_1d -100;                               expect_line "$ok out=0 total_weight=0"
fk_run nll fwd_1d 3
expect_line "$bad"
expect_err_line "$L:265: nll_loss_forward_reduce_cuda_kernel_1d: block: [0,0,0], thread: [0,0,0] Assertion \`t >= 0 && t < n_classes\` failed."

# backward none: grad_input[i][t] = -w[t] * grad_output[i], grad_output[i] = i + 1.
fk_run nll bwd_none 0 2 1;               expect_line "values n=9 -1 0 0 0 0 -2 0 -3 0"
fk_run nll bwd_none --weights on 0 -100 1; expect_line "values n=9 -1 0 0 0 0 0 0 -6 0"
fk_run nll bwd_none --dtype uint8 0 9 1
expect_line "$bad"
expect_err_line "$L:392: nll_loss_backward_no_reduce_cuda_kernel: block: [0,0,0], thread: [1,0,0] Assertion \`cur_target < n_classes\` failed."

# backward 1d and 2d: grad_output = 1, total_weight = sum of weights of the kept labels.
fk_run nll bwd_1d 2;                                  expect_line "values n=3 0 0 -1"
fk_run nll bwd_1d --weights on --reduction sum 2;     expect_line "values n=3 0 0 -3"
fk_run nll bwd_1d -100;                               expect_line "values n=3 0 0 0"
fk_run nll bwd_1d -5;  expect_line "$bad"
fk_run nll bwd_2d --reduction sum 0 2 1;              expect_line "values n=9 -1 0 0 0 0 -1 0 -1 0"
fk_run nll bwd_2d --reduction sum --weights on 0 2 1; expect_line "values n=9 -1 0 0 0 0 -3 0 -2 0"
fk_run nll bwd_2d 0 1 2 1;                            expect_line "values n=12 -0.25 0 0 0 -0.25 0 0 0 -0.25 0 -0.25 0"
fk_run nll bwd_2d --scalar double --dtype uint8 --reduction sum 1 1; expect_line "values n=6 0 -1 0 0 -1 0"
fk_run nll bwd_2d 0 2 3
expect_line "$bad"
expect_err_line "$L:455: nll_loss_backward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [2,0,0] Assertion \`t >= 0 && t < n_classes\` failed."

# nll_loss2d, N=1, H=W=2, labels in [N,H,W] order; x[b][c][h][w] = -(c*4 + h*2 + w + 1) / 4:
# (0,0) t=0 -> 0.25, (0,1) t=1 -> 1.5, (1,0) t=2 -> 2.75, (1,1) t=1 -> 2.
fk_run nll 2d_fwd_none --hw 2,2 0 1 2 1;              expect_line "values n=4 0.25 1.5 2.75 2"
fk_run nll 2d_fwd_none --hw 2,2 --stride 5 0 1 2 1;   expect_line "values n=4 0.25 1.5 2.75 2"   # padding holds 103
fk_run nll 2d_fwd_none --hw 2,2 --weights on 0 -100 2 1; expect_line "values n=4 0.25 0 8.25 4"
# PyTorch's index math walks h fastest (b = i % N, h = (i / N) % H): (h=1, w=0) is thread 1.
fk_run nll 2d_fwd_none --hw 2,2 0 1 3 1
expect_line "$bad"
expect_err_line "$D:60: nll_loss2d_forward_no_reduce_kernel: block: [0,0,0], thread: [1,0,0] Assertion \`cur_target >= 0 && cur_target < n_classes\` failed."
fk_run nll 2d_fwd --hw 2,2 0 1 2 1;                   expect_line "$ok out=1.625 total_weight=4"
fk_run nll 2d_fwd --hw 2,2 --reduction sum 0 1 2 1;   expect_line "$ok out=6.5 total_weight=4"
fk_run nll 2d_fwd --hw 1,2 --reduction sum 0 1 2 1;   expect_line "$ok out=6.5 total_weight=4"   # N=2: 0.25 + 1 | 2.75 + 2.5
fk_run nll 2d_fwd --hw 2,2 0 1 2 -7
expect_line "$bad"
expect_err_line "$D:140: nll_loss2d_forward_kernel: block: [0,0,0], thread: [3,0,0] Assertion \`t >= 0 && t < n_classes\` failed."
# backward: grad_output[b][h][w] = flat + 1 (none), 1 (reduce, mean divides by total_weight 4).
fk_run nll 2d_bwd_none --hw 2,2 0 1 2 1;              expect_line "values n=12 -1 0 0 0 0 -2 0 -4 0 0 -3 0"
fk_run nll 2d_bwd_none --hw 2,2 --stride 3 0 1 2 1;   expect_line "values n=12 -1 0 0 0 0 -2 0 -4 0 0 -3 0"
fk_run nll 2d_bwd --hw 2,2 --reduction sum 0 1 2 1;   expect_line "values n=12 -1 0 0 0 0 -1 0 -1 0 0 -1 0"
fk_run nll 2d_bwd --hw 2,2 0 1 2 1;                   expect_line "values n=12 -0.25 0 0 0 0 -0.25 0 -0.25 0 0 -0.25 0"
fk_run nll 2d_bwd --hw 2,2 0 4 2 1
expect_line "$bad"
expect_err_line "$D:224: nll_loss2d_backward_kernel: block: [0,0,0], thread: [1,0,0] Assertion \`t >= 0 && t < n_classes\` failed."
# v2.6 nll_loss2d backward none has no assert: a label past the allocation is an illegal address.
fk_run nll 2d_bwd_none --hw 2,2 0 1 2 5
expect_line 'result launch_err=0 sync_err=700 last_err=700 last_err_str="an illegal memory access was encountered" out=- total_weight=-'
expect_no_err

# The unwatched kernel adds one.
fk_run nll add_one;  expect_line "values n=4 1 1 1 1"
finish
