#!/usr/bin/env bash
# test_compiled_index_more.sh: test_compiled_index.sh's mask, step, late, cache and ways parts
# (torch.compile'd index ops: mask as in eager, a compiled training step and the checks' order, an
# async verdict with the model's line, a graph cached without labelguard then run guarded,
# fullgraph / max-autotune / a graph break) on torch 2.15; a file of its own to stay within tests/run.sh's time limit.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled_index_more.sh
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_compiled_index.sh" mask step late cache ways
