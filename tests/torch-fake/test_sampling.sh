#!/usr/bin/env bash
# test_sampling.sh: torch.multinomial with a NaN, an inf, a negative probability or a row of zeros,
# in float32, float16 and bfloat16, on real torch (build/torch-python, both wheels). With
# replacement and several samples, reported before renormRowsL1 runs (on a GPU the op ends in a
# device-side assert: `!(val < zero)` there, `cumdist[size - 1] > 0` in the sampling kernel) with
# the position probs[row, column], the value and the sampling cause (fp16_overflow,
# negative_probs, all_masked); blocked under raise, mask falls back to raise, log runs and
# reports both kernels, async raises the late verdict. The one-sample and without-replacement
# paths (torch._assert_async) name multinomial and the sampling cause, in async mode too (read
# without a wait, the kernel then asserting as it would have). Controls: valid
# probabilities give no event. The checks are in sampling_cases.py; one process per mode.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rc=0
LG_MIN_OK=2 LG_MIN_OK_CASE=5 lg_run_cases sampling_cases.py raise mask log async control raise:one || rc=1
# The async one-sample check kills the double's context (as on a GPU): a process of its own.
LG_MIN_OK_CASE=2 lg_run_cases sampling_cases.py async:one_async || rc=1
exit $rc
