#!/usr/bin/env bash
# test_beyond.sh: the checks beyond the NLL assert on real torch (build/torch-python, both
# wheels). The index guard: nn.Embedding
# with an id equal to num_embeddings dies with the device-side assert without labelguard;
# under raise it is a RuntimeError naming the kernel and ids[i] = 10 with the JSONL event, the
# context alive; under mask (with or without padding_idx) it falls back to raise and says why;
# x[idx]'s allowed negative ids pass, one past -rows is blocked. The raw-logits check: one
# warning per F.nll_loss call site fed logits. Mask with class weights and label smoothing: no
# device assert (the gather guard itself: tests/e2e/test_opaque.sh). The checks are in beyond_cases.py; one process per case and mode, since a device assert poisons the process.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-torchindex.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG
rc=0
for wheel in 13 12; do
  for c in "emb_small plain" "emb_small raise" "emb_large plain" "emb_large raise" "emb_small mask" "emb_pad mask" \
           "neg_index plain" "neg_index raise" "nll_logits raise" "smooth_weights mask"; do
    read -r case mode <<<"$c"
    out="$T/$wheel-$case-$mode"
    mkdir -p "$out"
    lg=()
    [ "$mode" = plain ] || lg=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_ACTION="$mode" LABELGUARD_LOG="$out" LABELGUARD_QUIET=1)
    env "${lg[@]}" TORCH_CUDA=$wheel "$TP" tests/torch-fake/beyond_cases.py "$case" "$mode" "$out" >"$out.txt" 2>"$out.err"
    r=$?
    sed "s/^/[cuda$wheel $case] /" "$out.txt"
    if [ $r -ne 0 ]; then rc=1; sed "s/^/[cuda$wheel $case] err| /" "$out.err" | tail -15; fi
  done
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
