#!/usr/bin/env bash
# test_closure.sh: the closure-taking TensorIterator index kernels (gather / scatter through
# _scatter_gather_elementwise_kernel; x[idx], index_put_, index_fill_ through
# index_elementwise_kernel) on real torch, both wheels, under raise, mask and log: what
# labelguard decodes from each launch's closure (index pointer, distinct-id count, bound,
# strides, the bad element's offset and value) equals what the tensors are. The checks are in
# closure_cases.py; one process per wheel and mode (raise keeps the context alive, so one process
# runs every case of a mode). async: raise with LABELGUARD_MODE=async (sanitized copy, no stream
# sync, the error at the next synchronizing call).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-closure.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG
rc=0
for wheel in 13 12; do
  for mode in raise mask log async; do
    out="$T/$wheel-$mode"
    mkdir -p "$out"
    action=$mode lgmode=sync
    [ "$mode" = async ] && action=raise lgmode=async
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION="$action" LABELGUARD_MODE="$lgmode" LABELGUARD_LOG="$out" \
      LABELGUARD_QUIET=1 TORCH_CUDA=$wheel \
      "$TP" tests/torch-fake/closure_cases.py "$mode" "$out" >"$out.txt" 2>"$out.err"
    r=$?
    sed "s/^/[cuda$wheel $mode] /" "$out.txt"
    if [ $r -ne 0 ]; then rc=1; sed "s/^/[cuda$wheel $mode] err| /" "$out.err" | tail -15; fi
  done
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
