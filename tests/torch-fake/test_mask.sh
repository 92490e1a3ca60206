#!/usr/bin/env bash
# test_mask.sh: the real-torch cases of cases.py LABELGUARD_ACTION=mask: every step runs, the forward and backward
# launches are masked and logged, NLLLoss values equal the CPU's with the bad labels ignored.
# Both wheels; run by tests/run.sh. The work is in run_cases.sh.
exec bash "$(dirname "$0")/run_cases.sh" mask
