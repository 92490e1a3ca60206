#!/usr/bin/env bash
# test_renorm.sh: F.embedding(max_norm=...) with an id past the weight's rows, on real torch
# (build/torch-python, both wheels): from 2.13 (the 2.15 wheel here) reported and blocked at
# embedding_renorm_wrap_indices_kernel, whose own assert would fire on a GPU before the lookup's;
# on 2.10 the lookup's check blocks it; valid ids run, and -3 (which the renorm wraps) is blocked
# by the lookup as eager PyTorch rejects it. The checks are in renorm_cases.py; one process per
# mode and wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LG_MIN_OK=2
lg_run_cases renorm_cases.py raise control
