#!/usr/bin/env bash
# test_compiled_index_210.sh: test_compiled_index.sh's families and silent parts (torch.compile'd
# index ops checked before Inductor's kernels) on torch 2.10 (TORCH_CUDA=12), whose compiled
# embedding accepts an id of -2 silently; a file of its own to stay within tests/run.sh's limit.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_index_210.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled_index.sh" families12 silent12
