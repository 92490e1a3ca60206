#!/usr/bin/env bash
# test_plain.sh: the real-torch cases of cases.py without labelguard: a bad label dies with the real device-side
# assert at its step and later CUDA calls fail.
# Both wheels; run by tests/run.sh. The work is in run_cases.sh.
exec bash "$(dirname "$0")/run_cases.sh" plain
