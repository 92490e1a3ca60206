#!/usr/bin/env bash
# tests/fuzz/test_fuzz_short.sh: the short fuzz run for `make test`: every tests/fuzz/fuzz_*.c
# target, LG_FUZZ_RUNS (20000) inputs each, through tests/fuzz/run.sh. Exit 77 when clang or
# libFuzzer is missing. The long run is `make fuzz`.
cd "$(dirname "$0")/../.." || exit 1
unset LG_FUZZ_LONG
exec bash tests/fuzz/run.sh
