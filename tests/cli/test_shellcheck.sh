#!/usr/bin/env bash
# test_shellcheck.sh: shellcheck finds nothing in the CLI's shell code (the shim
# scripts/labelguard; the rest is Python, python/labelguard/) and in these tests. In the tests
# `A && B || fail` is meant (a check that fails when either fails; failures are counted,
# tests/lib.sh), hence SC2015 off there. Skips (77) when shellcheck is not installed.
cd "${LG_ROOT:-$(dirname "$0")/../..}" || exit 1
command -v shellcheck >/dev/null || { echo "shellcheck not installed (apt-get install shellcheck)"; exit 77; }
shellcheck -x scripts/labelguard && shellcheck -x -e SC1091,SC2015 tests/cli/*.sh && echo PASS
