#!/usr/bin/env bash
# test_bce.sh: F.binary_cross_entropy on probabilities outside [0, 1] or NaN, on real torch
# (build/torch-python, both wheels). On a GPU the BCE kernel's `input_val >= 0 && input_val <= 1`
# assert kills the context; here the launch is decoded (data[1] of the TensorIterator's data
# array), reported with the exact positions and values (NaN as "nan"), blocked under raise, and
# under mask falls back to raise with the reason; log lets it run. Controls: exactly 0.0 and
# 1.0, no event. The target gets the kernel's same check (`target_val >= 0 && target_val <= 1`):
# data[2], or the closure's pointer after the input's with its own strides, reported as
# target[i] with the target's data_ptr(). In async mode (raise) the launch is checked synchronously all the same: no
# value can sanitize a probability. The checks are in bce_cases.py; one process per case and mode.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-torchbce.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG
rc=0
for wheel in 13 12; do
  for c in "range raise" "range mask" "range log" "nan raise" "misaligned raise" "strided raise" "strided log" "dtypes raise" "controls raise" "controls log" \
           "range async" "target raise" "target mask" "target log" "target async" "target_nan raise" "target_misaligned raise" \
           "target_strided raise" "target_strided log"; do
    read -r case mode <<<"$c"
    out="$T/$wheel-$case-$mode"
    mkdir -p "$out"
    action=$mode lgmode=sync
    [ "$mode" = async ] && action=raise lgmode=async
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION="$action" LABELGUARD_MODE="$lgmode" LABELGUARD_LOG="$out" LABELGUARD_QUIET=1 \
        TORCH_CUDA=$wheel "$TP" tests/torch-fake/bce_cases.py "$case" "$mode" "$out" >"$out.txt" 2>"$out.err"
    r=$?
    sed "s/^/[cuda$wheel $case] /" "$out.txt"
    if [ $r -ne 0 ]; then rc=1; sed "s/^/[cuda$wheel $case] err| /" "$out.err" | tail -15; fi
  done
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
