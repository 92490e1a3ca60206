#!/usr/bin/env bash
# test_closure.sh: the closure-taking TensorIterator index kernels (gather / scatter through
# _scatter_gather_elementwise_kernel; x[idx], index_put_, index_fill_ through
# index_elementwise_kernel) on real torch, both wheels, under raise, mask and log: what
# labelguard decodes from each launch's closure (index pointer, distinct-id count, bound,
# strides, the bad element's offset and value) equals what the tensors are. The checks are in
# closure_cases.py; one process per wheel and mode (raise keeps the context alive, so one process
# runs every case of a mode). async: raise with LABELGUARD_MODE=async (checked synchronously and
# blocked all the same: no id may stand in for a bad one where a backward reads the caller's ids).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lg_run_cases closure_cases.py raise mask log async
