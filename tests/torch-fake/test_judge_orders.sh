#!/usr/bin/env bash
# test_judge_orders.sh: cases.py's async judge accepts both legal orders of a bad step's errors
# and rejects broken stories (tests/torch-fake/judge_orders.py, under build/torch-python because
# cases.py imports torch; no case runs). Run by tests/run.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
"$TP" tests/torch-fake/judge_orders.py
