#!/usr/bin/env bash
# test_report_hostile.sh: `labelguard report` on inputs that are not log files must end
# promptly with an error naming the file, never block or read without end: /dev/zero, a FIFO
# with no writer (named, and found inside a log directory), and a log with one 50 MB field,
# whose printed output stays small and says that the field was cut. Each run has a 20 s
# watchdog: a hang is a failure, not a stalled suite.
# shellcheck disable=SC2154  # rc is set by lib.sh's run_cmd
. "$(dirname "$0")/lib.sh"
here="$LG_ROOT/tests/cli"
bounded() { timeout -k 2 20 "$@"; }
not_hung() { # what: fails when the last run was killed by the watchdog
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$1 hung (killed by the watchdog)"; fi
}

run_cmd bounded "$LG" report /dev/zero
not_hung "report /dev/zero"
expect_rc 2 "report /dev/zero: an error"
expect_in err "/dev/zero: not a regular file" "report /dev/zero names the file and why"

mkfifo "$T/pipe.jsonl"
run_cmd bounded "$LG" report "$T/pipe.jsonl"
not_hung "report FIFO"
expect_rc 2 "report FIFO: an error"
expect_in err "pipe.jsonl: not a regular file" "report FIFO names the file"

python3 "$here/gen_logs.py" "$T/logs" || fail "gen_logs.py"
mkfifo "$T/logs/stuck.jsonl"
run_cmd bounded "$LG" report --json "$T/logs"
not_hung "report of a directory holding a FIFO"
expect_rc 2 "a FIFO in the log directory: damaged input, exit 2"
expect_in err "stuck.jsonl: not a regular file" "the FIFO is named"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r["problems"]) == 2, r["problems"]' "$T/out" \
  || fail "the regular logs beside the FIFO are still merged"
rm -f "$T/logs/stuck.jsonl"

# One violation event whose kernel field is 50 MB (a damaged or hostile log).
python3 - "$T/big.jsonl" <<'PY' || fail "cannot write the big log"
import json, sys
ev = {"v": 1, "event": "violation", "time": "2025-11-30T03:00:00Z", "pid": 1, "host": "h",
      "kernel": "k" * (50 << 20), "cause": "other",
      "target": {"n_classes": 3, "ignore_index": -100, "count": 4},
      "bad": {"count": 1, "min": 7, "max": 7, "samples": [{"index": 2, "value": 7}]}}
open(sys.argv[1], "w").write(json.dumps(ev) + "\n")
PY
run_cmd bounded "$LG" report "$T/big.jsonl"
not_hung "report of a 50 MB field"
expect_rc 1 "the event still counts as a violation"
size=$(wc -c <"$T/out")
[ "$size" -lt 65536 ] || fail "text report of a 50 MB field printed $size bytes"
expect_in out "field kernel was 52428800 characters; printed cut to 4096" "the cut is noted"
run_cmd bounded "$LG" report --json "$T/big.jsonl"
expect_rc 1 "--json: still a violation"
size=$(wc -c <"$T/out")
[ "$size" -lt 65536 ] || fail "--json report of a 50 MB field printed $size bytes"
ok "report refuses devices and FIFOs without blocking and cuts oversized fields"
