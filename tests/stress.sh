#!/usr/bin/env bash
# tests/stress.sh: runs the timing-sensitive suites STRESS_N times each (default 10) while one
# busy loop per core competes for the CPUs, and counts the runs that fail ("flakes": each suite
# passes when run alone, so under load a failure is a timing assumption, or a real race).
# Prints one line per suite, "<flakes>/<runs> <suite>" with the failed runs' log paths, then
# "N flakes" (and exit 1 when N > 0). A suite is a tests/run.sh name: dir/test_x, or async:dir/test_x
# for its rerun on the asynchronous double. Called by `make test-stress` (which builds the test
# programs first); STRESS_TESTS replaces the list below, STRESS_HOGS the number of busy loops
# (default: nproc). LG_STRESS_ROOT runs another checkout's tests (its build must be there), e.g.
# to measure a baseline. Alone: STRESS_N=3 STRESS_TESTS=e2e/test_fork bash tests/stress.sh
set -u
root=${LG_STRESS_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
n=${STRESS_N:-10}
default="e2e/test_fork async:e2e/test_notready e2e/test_notready fakecuda/test_async async:torch-fake/test_async
  e2e/test_threads async:e2e/test_threads e2e/test_attach_busy"
tests=${STRESS_TESTS:-$default}
hogs=${STRESS_HOGS:-$(nproc)}
logs="$root/${LG_BUILD:-build}/test-logs/stress-$$"; mkdir -p "$logs" || exit 1

pids=()
stop_hogs() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do (while :; do :; done) & pids+=($!); done
echo "stress: $n runs of each suite, $hogs busy loops, logs in $logs"

total=0
for t in $tests; do
  flakes=0 skips=0 failed=()
  for i in $(seq "$n"); do
    log="$logs/${t//[:\/]/_}.$i.log"
    case "$t" in
      async:*) env LG_TESTS="$t" LG_ASYNC_SUITES="${t#async:}" bash "$root/tests/run.sh" >"$log" 2>&1 ;;
      *) env LG_TESTS="$t" LG_ASYNC_SUITES=none bash "$root/tests/run.sh" >"$log" 2>&1 ;;
    esac
    # run.sh's filter is a substring: exactly this suite must have run, and passed.
    if grep -q "^SKIP $t " "$log"; then skips=$((skips + 1))
    elif [ "$(grep -c '^PASS ' "$log")" = 1 ] && grep -q "^PASS $t " "$log" && grep -q '^1 passed, 0 failed$' "$log"; then :
    else flakes=$((flakes + 1)); failed+=("$log"); fi
  done
  total=$((total + flakes))
  printf '%d/%d %s%s%s\n' "$flakes" "$n" "$t" "$([ $skips = 0 ] || printf ' (%d skipped)' $skips)" \
    "$([ $flakes = 0 ] || printf ' failed: %s' "${failed[*]}")"
done
echo "$total flakes"
[ "$total" = 0 ]
