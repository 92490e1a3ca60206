#!/usr/bin/env bash
# test_compiled_mask.sh: parts of test_compiled.sh (torch.compile'd losses checked in the compiled graph), in a
# file of their own to stay within tests/run.sh's time limit: mask (the compiled loss on masked labels, the CUDA op's masked copy, a captured
# graph's replays) and off (LABELGUARD_COMPILED=off).
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_mask.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" mask off
