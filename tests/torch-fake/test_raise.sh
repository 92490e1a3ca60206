#!/usr/bin/env bash
# test_raise.sh: the real-torch cases of cases.py LABELGUARD_ACTION=raise: a RuntimeError with labelguard's text at the
# bad step, labels.cpu() still works, the JSONL names kernel, n_classes, ignore_index, the offending
# pairs and the loss call's line.
# Both wheels; run by tests/run.sh. The work is in run_cases.sh.
exec bash "$(dirname "$0")/run_cases.sh" raise
