# shellcheck shell=bash
# tests/lib.sh: the one way every shell test counts failures, sourced by tests/e2e/lib.sh,
# tests/cli/lib.sh and tests/fakecuda/lib.sh after they made their private temporary
# directory (lg_checks_init DIR). `fail` appends to a file in it, so a failure inside a
# subshell, a pipeline or a function run in the background counts too; `finish` ends the test
# with status 1 when anything failed, 0 otherwise (tests/run.sh reads only the status).
lg_checks_init() { LG_FAILS_FILE="$1/.lg-failures"; : >"$LG_FAILS_FILE"; }
fail() { printf 'FAIL: %s\n' "$*"; printf '%s\n' "$*" >>"$LG_FAILS_FILE"; }
ok() { printf 'ok: %s\n' "$*"; }
check() { # check DESCRIPTION COMMAND...  (passes when the command succeeds)
  local d=$1; shift
  if "$@"; then ok "$d"; else fail "$d"; fi
}
failures() { local n; n=$(wc -l <"$LG_FAILS_FILE" 2>/dev/null) || n=0; echo $((n)); }
finish() {
  local n; n=$(failures)
  if [ "$n" -eq 0 ]; then echo "all checks passed"; exit 0; fi
  echo "$n check(s) failed"; exit 1
}
