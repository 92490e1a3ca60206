#!/usr/bin/env bash
# test_compiled_bare.sh: the bare part of test_compiled.sh (torch.compile'd losses checked under a
# bare LD_PRELOAD, without `labelguard run`; python -S gets no claim); a file of its own to stay
# within tests/run.sh's time limit.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_bare.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" bare
