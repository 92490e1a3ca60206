#!/usr/bin/env bash
# run_cases.sh MODE [CASES]: runs tests/torch-fake/cases.py in MODE (plain, raise, mask, async)
# under both torch wheels (TORCH_CUDA=13 and 12) through build/torch-python, i.e. real PyTorch
# on the runtime test double, and passes cases.py's checks through. Called by
# tests/torch-fake/test_{plain,raise,mask,async}.sh (one mode each, so that a failure names the
# mode) from tests/run.sh, which exports LG_BUILD and LG_PRELOAD and cds to the repo root.
# CASES: a comma-separated subset (for a contributor re-running one case by hand).
# A missing build/torch-python is a failure, not a skip: `make test` builds it.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
mode=$1 only=${2:-}
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-torchfake.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG RANK LOCAL_RANK WORLD_SIZE
case "$mode" in
  plain) lg=() ;;
  raise) lg=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION=raise) ;;
  mask)  lg=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION=mask) ;;
  async) lg=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION=raise LABELGUARD_MODE=async) ;;
  *) echo "usage: run_cases.sh plain|raise|mask|async [CASES]"; exit 2 ;;
esac
rc=0
for wheel in 13 12; do
  echo "== $mode, CUDA $wheel wheel"
  out="$T/cuda$wheel"
  [ ${#lg[@]} -eq 0 ] || lg+=(LABELGUARD_LOG="$out/logs")
  start=$(date +%s)
  env "${lg[@]}" TORCH_CUDA=$wheel "$TP" tests/torch-fake/cases.py --mode "$mode" --out "$out" --only "$only" \
    | sed "s/^/[cuda$wheel] /"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  echo "== $mode, CUDA $wheel wheel: $(( $(date +%s) - start )) s"
  [ ${#lg[@]} -eq 0 ] || unset 'lg[${#lg[@]}-1]'
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
