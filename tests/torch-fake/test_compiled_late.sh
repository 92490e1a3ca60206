#!/usr/bin/env bash
# test_compiled_late.sh: parts of test_compiled.sh (torch.compile'd losses checked in the compiled graph), in a
# file of their own to stay within tests/run.sh's time limit: late (labelguard.enable() after a compile) and raise12 (the raise part on torch
# 2.10, TORCH_CUDA=12).
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_late.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" late raise12
