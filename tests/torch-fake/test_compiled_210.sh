#!/usr/bin/env bash
# test_compiled_210.sh: the raise part of test_compiled.sh (torch.compile'd losses checked in the
# compiled graph) on torch 2.10 (TORCH_CUDA=12), whose Inductor writes its output code
# differently; a file of its own to stay within tests/run.sh's time limit.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_210.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" raise12
