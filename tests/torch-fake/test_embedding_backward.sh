#!/usr/bin/env bash
# test_embedding_backward.sh: an nn.Embedding step with a bad id on real torch (both wheels) on
# the test double: no substitute id reaches loss.backward(), whose kernel writes gradient rows at
# the caller's ids unchecked (the double reports such a write as an illegal address).
# plain: the forward's own assert; async (raise), on a lagging device: blocked at the embedding
# call; raise: a captured step (sync mode) replayed with the bad id asserts in the forward as
# plain PyTorch does, and the captured check reports it. The checks are in embedding_backward.py.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rc=0
LG_MIN_OK=2 lg_run_cases embedding_backward.py plain raise || rc=1
# The loss and the backward come long before the stream reaches the forward's check, as on a
# busy GPU: each kernel and host function takes this long.
FAKECUDA_ASYNC_US=${LG_EMBEDDING_LAG_US:-20000} LG_MIN_OK=4 lg_run_cases embedding_backward.py async || rc=1
exit $rc
