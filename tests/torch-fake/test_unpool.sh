#!/usr/bin/env bash
# test_unpool.sh: F.max_unpool2d with an index past its output plane (and a negative one), on real
# torch (build/torch-python, both wheels): reported with its position, value and bound
# (outputHeight * outputWidth) before max_unpooling2d_forward_kernel runs (on a GPU its `maxind >=
# 0 && maxind < outputImageSize` assert kills the context), blocked under raise, mask's fall-back
# to raise (no padding value), log lets it run; a control with valid indices gives no event. The
# checks are in unpool_cases.py; one process per mode and wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LG_MIN_OK=2
lg_run_cases unpool_cases.py raise mask log control
