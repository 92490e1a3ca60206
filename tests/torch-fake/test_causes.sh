#!/usr/bin/env bash
# test_causes.sh: the cause of a bad id follows from what the ids index (a class dimension for
# F.one_hot, a plain dimension for index_select(1) / gather / take_along_dim, the vocabulary for
# nn.Embedding, node rows for index_add_), on real torch, both wheels, under raise. The checks
# are in causes_cases.py; one process per wheel.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lg_run_cases causes_cases.py raise
