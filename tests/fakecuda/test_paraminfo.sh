#!/usr/bin/env bash
# cudaFuncGetParamInfo: parameter sizes and offsets read from the mangled names, against the
# layouts of pytorch-kernels.md (PackedTensorAccessor64<T,N> = 8+16N bytes; bool 1; int 4),
# and cudaErrorInvalidValue (1) past the last parameter.
. "$(dirname "$0")/lib.sh"
fk_run probe params
expect_rc 0
expect_line "params fwd_none 8@0 40@8 8@48 8@56 8@64 8@72 8@80 count=7 end_err=1"
expect_line "params fwd_none_u8 8@0 40@8 8@48 8@56 8@64 8@72 8@80 count=7 end_err=1"
expect_line "params fwd_1d 8@0 8@8 8@16 8@24 8@32 1@40 8@48 8@56 count=8 end_err=1"
expect_line "params fwd_2d 8@0 8@8 8@16 8@24 8@32 1@40 8@48 8@56 8@64 8@72 count=10 end_err=1"
expect_line "params fwd_2d_double_u8 8@0 8@8 8@16 8@24 8@32 1@40 8@48 8@56 8@64 8@72 count=10 end_err=1"
expect_line "params bwd_none 4@0 8@8 24@16 40@40 8@80 8@88 8@96 count=7 end_err=1"
expect_line "params bwd_1d 8@0 8@8 8@16 8@24 8@32 1@40 8@48 8@56 count=8 end_err=1"
expect_line "params bwd_2d 8@0 8@8 8@16 8@24 8@32 1@40 4@44 4@48 8@56 8@64 count=10 end_err=1"
expect_line "params 2d_fwd_none 8@0 72@8 56@80 56@136 8@192 8@200 count=6 end_err=1"
expect_line "params 2d_fwd 8@0 8@8 8@16 8@24 8@32 4@40 4@44 4@48 8@56 count=9 end_err=1"
expect_line "params 2d_size_average 8@0 8@8 count=2 end_err=1"
expect_line "params 2d_bwd_none 8@0 56@8 56@64 72@120 8@192 8@200 count=6 end_err=1"
expect_line "params 2d_bwd 8@0 8@8 8@16 8@24 8@32 1@40 4@44 4@48 4@52 8@56 count=10 end_err=1"
expect_line "params mismatch_fwd_2d 8@0 8@8 8@16 8@24 8@32 1@40 8@48 8@56 8@64 8@72 4@80 count=11 end_err=1"
expect_line "params add_one 8@0 4@8 count=2 end_err=1"
finish
