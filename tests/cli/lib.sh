# shellcheck shell=bash disable=SC2034  # variables used by the tests that source this
# tests/cli/lib.sh: helpers sourced by tests/cli/test_*.sh (not a test itself).
# Each test: `. "$(dirname "$0")/lib.sh"`, then checks, then `finish`; failures are counted
# as in every shell test (tests/lib.sh). $T is a private temporary directory, removed at exit.
set -u
LG_ROOT=${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
LG_BUILD=${LG_BUILD:-build}
LG="$LG_ROOT/scripts/labelguard"
T=$(mktemp -d "${TMPDIR:-/tmp}/lg-cli-test.XXXXXX")
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_LOG LABELGUARD_HOOKS LABELGUARD_KERNELS \
      LABELGUARD_BACKTRACE LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_LIB LD_PRELOAD

# shellcheck source=tests/lib.sh
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"

# run_cmd: runs "$@", stdout in $T/out, stderr in $T/err, status in $rc
run_cmd() { "$@" >"$T/out" 2>"$T/err"; rc=$?; }

expect_rc() { # expected, description
  [ "$rc" -eq "$1" ] || { sed 's/^/  stdout| /' "$T/out"; sed 's/^/  stderr| /' "$T/err"; fail "$2: exit status $rc, expected $1"; }
}
expect_in() { # file (out|err), fixed string, description
  grep -qF -- "$2" "$T/$1" || { sed "s/^/  $1| /" "$T/$1"; fail "$3: '$2' not in $1"; }
}

# A stand-in for liblabelguard.so: exports labelguard_arm() returning 5, nothing else. Lets the
# CLI be tested without the real library (which other people are building at the same time).
make_dummy_lib() { # path
  printf '__attribute__((visibility("default"))) int labelguard_arm(void) { return 5; }\n' >"$T/dummy.c"
  gcc -shared -fPIC -o "$1" "$T/dummy.c" || fail "cannot build the dummy library"
}

# A copy of the CLI (the shim scripts/labelguard and the package python/labelguard) that any
# user can run, for the checks run as user nobody: the checkout itself may lie under a directory
# nobody cannot enter (a mode-0700 home). The copy is not a checkout (no src/ beside it), as an
# installed package is not. Prints the copy's labelguard.
world_cli() {
  if ! { mkdir -p "$T/cli/scripts" && cp "$LG_ROOT/scripts/labelguard" "$T/cli/scripts/" &&
         cp -r "$LG_ROOT/python" "$T/cli/" && find "$T/cli" -name __pycache__ -prune -exec rm -rf {} + &&
         chmod -R a+rX "$T/cli"; }; then
    fail "cannot copy the CLI"
  fi
  printf '%s\n' "$T/cli/scripts/labelguard"
}
# lg_py CODE ARGS...: runs python3 code with the checkout's package importable (PYTHONPATH=python).
lg_py() { PYTHONPATH="$LG_ROOT/python" python3 "$@"; }
