#!/usr/bin/env bash
# test_margin.sh: F.multi_margin_loss with a target class index equal to the class count, on
# real torch (build/torch-python, both wheels): reported with its position and value before
# MultiMarginLoss_forward_kernel runs (on a GPU its `target_k >= 0 && target_k < dim` assert
# kills the context), blocked under raise, mask's fall-back to raise (the kernel has no
# ignore_index), log lets it run; a control with valid targets
# gives no event. The checks are in margin_cases.py; one process per mode and wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lg_run_cases margin_cases.py raise mask log control
