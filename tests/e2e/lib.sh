# tests/e2e/lib.sh: helpers for the end-to-end tests (sourced). Each test runs real nvcc-built
# programs (build/progs, from tests/progs) under the runtime test double, with and without
# LD_PRELOAD of the library, and checks their output and JSONL logs (parsed and
# schema-checked by jsonl_check.py). Needs LG_ROOT, LG_BUILD, LG_PRELOAD, LG_FAKE_DIR
# (exported by tests/run.sh); falls back to the defaults when run by hand from the repo root.
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
LG_PRELOAD="${LG_PRELOAD:-$LG_ROOT/$LG_BUILD/liblabelguard.so}"
LG_FAKE_DIR="${LG_FAKE_DIR:-$LG_ROOT/$LG_BUILD/fakecuda}"
PROGS="$LG_ROOT/$LG_BUILD/progs"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-e2e.XXXXXX")"
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$LG_FAKE_DIR"
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS
export LABELGUARD_LOG="$T/logs"
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"

# need FILE...: each built file the test runs, else one line naming what to build and exit 1
need() { local f; for f; do [ -e "$f" ] || { echo "missing $f: run make test-programs"; exit 1; }; done; }
# run_plain NAME PROG ARGS...: without the library; stdout/stderr/rc in $T/NAME.{out,err,rc}
run_plain() { local n=$1; shift; "$@" >"$T/$n.out" 2>"$T/$n.err"; echo $? >"$T/$n.rc"; }
# run_lg NAME PROG ARGS...: the same with LD_PRELOAD of the library and a fresh log dir $T/NAME.logs
run_lg() {
  local n=$1; shift
  rm -rf "$T/$n.logs"
  LABELGUARD_LOG="$T/$n.logs" LD_PRELOAD="$LG_PRELOAD" "$@" >"$T/$n.out" 2>"$T/$n.err"
  echo $? >"$T/$n.rc"
}
rc_of() { cat "$T/$1.rc"; }
# field NAME KEY: value of key=value on the program's output (first occurrence)
field() { grep -o "$2=[^ ]*" "$T/$1.out" | head -n1 | cut -d= -f2- | tr -d '"'; }
# events NAME: schema-check the run's logs, store them as JSON in $T/NAME.json
events() {
  if ! python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$T/$1.logs" >"$T/$1.json" 2>"$T/$1.jsonerr"; then
    cat "$T/$1.jsonerr"; return 1; fi
}
# q NAME PYEXPR: evaluates PYEXPR with E = the run's events, V = its violations, W = warnings
q() {
  python3 - "$T/$1.json" "$2" <<'PY'
import json, sys
E = json.load(open(sys.argv[1]))
V = [e for e in E if e["event"] == "violation"]
W = [e for e in E if e["event"] == "warning"]
S = [e for e in E if e["event"] == "summary"]
r = eval(sys.argv[2])
print(r if not isinstance(r, bool) else ("true" if r else "false"))
PY
}
# qtrue NAME PYEXPR: succeeds when PYEXPR is true
qtrue() { [ "$(q "$1" "$2")" = "true" ]; }
require_fake() { # the test double, not the real runtime from the ldconfig cache
  grep -q '^fakecudart_identity=fakecuda$' "$T/$1.out" || { echo "FAIL: $1 did not run on the test double"; cat "$T/$1.out"; exit 1; }
}
