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
lg_run_cases beyond_cases.py \
  plain:emb_small raise:emb_small plain:emb_large raise:emb_large mask:emb_small mask:emb_pad \
  plain:neg_index raise:neg_index raise:nll_logits mask:smooth_weights
