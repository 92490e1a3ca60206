#!/usr/bin/env bash
# test_named_index.sh: the index kernels with named parameters on real torch (build/torch-python,
# both wheels): index_add_ / index_reduce_ (indexFuncSmallIndex / indexFuncLargeIndex, 32- and
# 64-bit index math, int32 and int64 ids, a strided id view) and nn.EmbeddingBag forward (sum,
# max, offsets, padding_idx, per_sample_weights). Under raise each bad launch is a RuntimeError
# naming the kernel and ids[i] = v, with the JSONL event giving the exact position, value, bound
# and cause; under mask the EmbeddingBag with padding_idx runs on a copy, every other case falls
# back to raise and says why; async mode checks the max-mode EmbeddingBag with padding_idx on
# a sanitized copy and raises at the next sync, the others synchronously; under log the event is
# written and the kernel runs into its own assert (the double emulates it:
# tests/fakecuda/named_index.c), as it does without labelguard (plain). The controls (valid
# ids, padding ids) give no event. The checks are in named_index_cases.py; one process per
# wheel and mode, and per bad case where an assert fires.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# plain and log let a bad launch run into its (emulated) assert: one process per bad case there
# (one per op and kernel; the rest run under raise, mask and async, eb_psw with the log controls)
LOG_BAD="ia_small ia_reduce ia_index64 eb_sum eb_pad"
PLAIN_BAD="ia_small ia_index64 eb_sum"
runs=(raise mask async log plain)
for c in $LOG_BAD; do runs+=("log:$c"); done
for c in $PLAIN_BAD; do runs+=("plain:$c"); done
# a run that stops early (an exception in the script) must not pass on the checks it printed:
# a whole mode prints at least 10, one bad case at least 1
LG_MIN_OK=10 LG_MIN_OK_CASE=1 lg_run_cases named_index_cases.py "${runs[@]}"
