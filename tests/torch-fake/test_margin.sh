#!/usr/bin/env bash
# test_margin.sh: F.multi_margin_loss with a target class index equal to the class count, on
# real torch (build/torch-python, both wheels): reported with its position and value before
# MultiMarginLoss_forward_kernel runs (on a GPU its `target_k >= 0 && target_k < dim` assert
# kills the context), blocked under raise, mask's fall-back to raise (the kernel has no
# ignore_index), log lets it run; a control with valid targets
# gives no event. The checks are in margin_cases.py; one process per mode and wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-torchmargin.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG
rc=0
for wheel in 13 12; do
  for mode in raise mask log control; do
    out="$T/$wheel-$mode"
    mkdir -p "$out"
    action=$mode
    [ "$mode" = control ] && action=raise
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION="$action" LABELGUARD_LOG="$out" LABELGUARD_QUIET=1 \
        TORCH_CUDA=$wheel "$TP" tests/torch-fake/margin_cases.py "$mode" "$out" >"$out.txt" 2>"$out.err"
    r=$?
    sed "s/^/[cuda$wheel $mode] /" "$out.txt"
    if [ $r -ne 0 ]; then rc=1; sed "s/^/[cuda$wheel $mode] err| /" "$out.err" | tail -15; fi
  done
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
