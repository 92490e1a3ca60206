#!/usr/bin/env bash
# test_bernoulli.sh: torch.bernoulli / Tensor.bernoulli_ with probabilities outside [0, 1] or NaN, on
# real torch (build/torch-python, both wheels): reported with position, value and the cause in
# torch.bernoulli's words before kernelPointwiseApply2 runs (on a GPU its `0 <= p && p <= 1`
# assert kills the context), blocked under raise, for a contiguous, a strided and a transposed
# p; mask's fall-back to raise; log lets it run; valid p gives no event. The
# checks are in bernoulli_cases.py; one process per mode and wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LG_MIN_OK=2
lg_run_cases bernoulli_cases.py raise mask log control
