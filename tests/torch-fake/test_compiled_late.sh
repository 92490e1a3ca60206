#!/usr/bin/env bash
# test_compiled_late.sh: parts of test_compiled.sh (torch.compile'd losses checked in the compiled graph), in a
# file of their own to stay within tests/run.sh's time limit: late (labelguard.enable() after a compile).
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_late.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" late
