#!/usr/bin/env bash
# test_async.sh: the real-torch cases of cases.py LABELGUARD_MODE=async (action raise): the error arrives within the bad
# step, with the same report.
# Both wheels; run by tests/run.sh. The work is in run_cases.sh.
exec bash "$(dirname "$0")/run_cases.sh" async
