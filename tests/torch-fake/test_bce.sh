#!/usr/bin/env bash
# test_bce.sh: F.binary_cross_entropy on probabilities outside [0, 1] or NaN, on real torch
# (build/torch-python, both wheels). On a GPU the BCE kernel's `input_val >= 0 && input_val <= 1`
# assert kills the context; here the launch is decoded (data[1] of the TensorIterator's data
# array), reported with the exact positions and values (NaN as "nan"), blocked under raise, and
# under mask falls back to raise with the reason; log lets it run. Controls: exactly 0.0 and
# 1.0, no event. The target gets the kernel's same check (`target_val >= 0 && target_val <= 1`):
# data[2], or the closure's pointer after the input's with its own strides, reported as
# target[i] with the target's data_ptr(). In async mode (raise) no value can sanitize a probability: the
# launch runs as it is, and the verdict, read after it, is raised at the call or the next
# synchronisation, the event's note saying it is late. The checks are in bce_cases.py; one process
# per case and mode.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lg_run_cases bce_cases.py \
  raise:range mask:range log:range raise:nan raise:misaligned raise:strided log:strided \
  raise:dtypes raise:controls log:controls async:range raise:target mask:target log:target \
  async:target raise:target_nan raise:target_misaligned raise:target_strided log:target_strided
