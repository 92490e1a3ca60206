# lib.sh: helpers sourced by the tests of the runtime test double (tests/fakecuda/test_*.sh).
# Needs LG_ROOT, LG_BUILD and LG_FAKE_DIR (exported by tests/run.sh; defaults for a manual run
# from the repository root). Every program runs with LD_LIBRARY_PATH=$LG_FAKE_DIR, and fk_run
# fails the test unless the program found the fake (fakecudart_identity=fakecuda): the real
# libcudart.so.13 is in the ldconfig cache, and a test that silently ran on it must not pass.
set -u
LG_ROOT="${LG_ROOT:-$PWD}"
LG_BUILD="${LG_BUILD:-build}"
LG_FAKE_DIR="${LG_FAKE_DIR:-$LG_ROOT/$LG_BUILD/fakecuda}"
PROGS="$LG_ROOT/$LG_BUILD/progs"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$TMP"

# fk_run PROG ARGS...: runs build/progs/PROG; stdout in $OUT, stderr in $ERR, status in $RC.
fk_run() {
  local prog="$1"; shift
  [ -x "$PROGS/$prog" ] || { echo "missing $PROGS/$prog (make test-programs)"; exit 1; }
  # a hang guard far above any run (seconds): a hang fails this run, not the whole suite
  LD_LIBRARY_PATH="$LG_FAKE_DIR" timeout -k 5 "${FK_LIMIT:-120}" "$PROGS/$prog" "$@" >"$OUT" 2>"$ERR"
  RC=$?
  if ! grep -qx 'fakecudart_identity=fakecuda' "$OUT"; then
    echo "FAIL: $prog $* did not run on the fake runtime:"; cat "$OUT" "$ERR"; exit 1
  fi
}

# expect_line TEXT: stdout of the last fk_run has a line exactly TEXT.
expect_line() {
  grep -qxF -- "$1" "$OUT" || { fail "expected line: $1"; sed 's/^/    out| /' "$OUT"; sed 's/^/    err| /' "$ERR"; }
}
# expect_err_line TEXT: stderr has a line exactly TEXT.
expect_err_line() {
  grep -qxF -- "$1" "$ERR" || { fail "expected stderr line: $1"; sed 's/^/    err| /' "$ERR"; }
}
expect_no_err() {
  [ ! -s "$ERR" ] || { fail "expected no stderr, got:"; sed 's/^/    err| /' "$ERR"; }
}
expect_rc() {
  [ "$RC" = "$1" ] || fail "expected exit status $1, got $RC"
}
# result_is ARGS... -- expected result line: runs nll and checks the result line.
