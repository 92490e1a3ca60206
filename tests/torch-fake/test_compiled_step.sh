#!/usr/bin/env bash
# test_compiled_step.sh: the step parts of test_compiled.sh (a compiled training step: one check op,
# a bad label reported as the forward loss at the step's line) on torch 2.15 and 2.10; a file of
# its own to stay within tests/run.sh's time limit.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_step.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled.sh" step step12
