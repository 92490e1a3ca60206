#!/usr/bin/env bash
# test_report_merge.sh: `labelguard report` over the logs of three real processes,
# end to end under the test double. build/progs/nll runs three times at once as ranks 0, 1, 2
# (RANK/LOCAL_RANK, as torchrun sets them) writing into one log directory: ranks 0 and 1 with
# 1-based labels (rank 1 launches twice), rank 2 with 255 in a segmentation target. Then:
#   - `report DIR`: exit 1, one summary per distinct problem (2), each with its kernel and
#     direction, cause, counts and ranks; the process line names ranks 0, 1, 2;
#   - `report --json DIR` parsed with python3: counts, ranks, kernels, causes, offending values;
#   - the logs of a clean three-rank run: exit 0, no problem;
#   - `labelguard run --action mask --log DIR -- nll ...`: the exit status is the program's own
#     (0 when masked, 1 when the default raise blocks the launch, any code of a plain command),
#     the event's outcome is masked, and report reads that directory.
. "$(dirname "$0")/lib.sh"
NLL="$PROGS/nll"
LG="$LG_ROOT/scripts/labelguard"
# `labelguard run` preloads the build under test; a sanitizer build's runtime stays first
# (the script keeps sanitizer runtimes already in LD_PRELOAD ahead of the library).
export LABELGUARD_LIB="${LG_PRELOAD##* }"
RUN_PRELOAD=""; [ "$LG_PRELOAD" != "$LABELGUARD_LIB" ] && RUN_PRELOAD="${LG_PRELOAD% *}"
lg_run() { if [ -n "$RUN_PRELOAD" ]; then LD_PRELOAD="$RUN_PRELOAD" "$LG" run "$@"; else "$LG" run "$@"; fi; }
ONE_BASED=(fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10)
VOID=(2d_fwd_none --hw '2,4' --classes 5 0 1 2 255 3 4 255 0)

# Three ranks at once, one directory.
bad="$T/bad-logs"
RANK=0 LOCAL_RANK=0 LABELGUARD_LOG="$bad" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${ONE_BASED[@]}" >"$T/r0.out" 2>&1 &
RANK=1 LOCAL_RANK=1 LABELGUARD_LOG="$bad" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${ONE_BASED[@]:0:1}" --repeat 2 "${ONE_BASED[@]:1}" >"$T/r1.out" 2>&1 &
RANK=2 LOCAL_RANK=0 LABELGUARD_LOG="$bad" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${VOID[@]}" >"$T/r2.out" 2>&1 &
wait
check "three ranks ran on the test double" [ "$(grep -l '^fakecudart_identity=fakecuda$' "$T"/r[012].out | wc -l)" = 3 ]
rank_files=("$bad"/*-rank[012].jsonl)
check "three log files, one per rank" [ "${#rank_files[@]}" = 3 ]
check "no other file in the log directory" [ "$(find "$bad" -type f | wc -l)" = 3 ]

"$LG" report "$bad" >"$T/report.out" 2>"$T/report.err"; rc=$?
check "report: exit 1 (problems found)" [ $rc = 1 ]
check "report: the header counts files and processes with their ranks" \
  grep -q '^labelguard report: 3 files, [0-9]* events, 3 processes (ranks 0, 1, 2)$' "$T/report.out"
check "report: two distinct problems, four violations" grep -qx '2 distinct problems (4 violations in total):' "$T/report.out"
# problem CAUSE: its summary, from its "[N] kernel (direction): CAUSE" header to the next blank
# line (problems are listed by first occurrence, which the concurrent ranks leave open)
problem() { awk -v c="$1" '/^\[[0-9]+\] / { on = ($0 ~ (": " c "$")) } on && /^$/ { on = 0 } on' "$T/report.out"; }
has() { problem "$1" | grep -q -- "$2"; }
check "report one_based: kernel, direction, cause" has one_based '^\[[12]\] nll_loss_forward_reduce_cuda_kernel_2d (forward): one_based$'
check "report one_based: fix" has one_based '^    fix: .*subtract 1'
check "report one_based: counts" has one_based '^    labels: *3 bad labels in 3 launches; values 1\.\.10, n_classes 10, ignore_index -100, dtype int64$'
check "report one_based: first offending label" has one_based '^    first: *target\[9\] = 10$'
check "report one_based: ranks 0 and 1" has one_based '^    who: *ranks 0, 1; '
check "report one_based: histogram of offending values" has one_based '^    10 | █* 3$'
check "report void_255: kernel, direction, cause" has void_255 '^\[[12]\] nll_loss2d_forward_no_reduce_kernel (forward): void_255$'
check "report void_255: fix" has void_255 '^    fix: .*ignore_index=255'
check "report void_255: counts" has void_255 '^    labels: *2 bad labels in 1 launch; values 0\.\.255, n_classes 5'
check "report void_255: rank 2 only" has void_255 '^    who: *rank 2; '
check "report void_255: histogram" has void_255 '^    255 | █* 2$'
check "report: nothing on stderr" [ ! -s "$T/report.err" ]

"$LG" report --json "$bad" >"$T/report.json" 2>"$T/report-json.err"; rc=$?
check "report --json: exit 1" [ $rc = 1 ]
jq_true() { # PYEXPR over R = the parsed report
  python3 - "$T/report.json" "$1" <<'PY'
import json, sys
R = json.load(open(sys.argv[1]))
P = {p["cause"]: p for p in R["problems"]}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
check "report --json: parses, 2 problems, 4 violations, 3 files" \
  jq_true "len(R['problems']) == 2 and R['violations'] == 4 and len(R['files']) == 3 and sorted(P) == ['one_based', 'void_255']"
check "report --json: one_based: kernel, counts, ranks, values" jq_true "(
  P['one_based']['kernel'] == 'nll_loss_forward_reduce_cuda_kernel_2d' and P['one_based']['family'] == 'nll_loss'
  and P['one_based']['directions'] == ['forward'] and P['one_based']['events'] == 3 and P['one_based']['bad_labels'] == 3
  and P['one_based']['ranks'] == [0, 1] and len(P['one_based']['processes']) == 2
  and P['one_based']['values'] == [{'value': 10, 'count': 3}] and (P['one_based']['min'], P['one_based']['max']) == (1, 10)
  and P['one_based']['n_classes'] == 10 and P['one_based']['outcomes'] == {'blocked': 3}
  and P['one_based']['first_time'] <= P['one_based']['last_time'])"
check "report --json: void_255: kernel, counts, ranks, values" jq_true "(
  P['void_255']['kernel'] == 'nll_loss2d_forward_no_reduce_kernel' and P['void_255']['family'] == 'nll_loss2d'
  and P['void_255']['events'] == 1 and P['void_255']['bad_labels'] == 2 and P['void_255']['ranks'] == [2]
  and P['void_255']['values'] == [{'value': 255, 'count': 2}] and P['void_255']['n_classes'] == 5)"
check "report --json: per-process ranks and clean ends" jq_true "(
  sorted(p['rank'] for p in R['processes']) == [0, 1, 2] and all(p['ended_cleanly'] for p in R['processes'])
  and sorted(p['violations'] for p in R['processes']) == [1, 1, 2])"

# A clean three-rank run: nothing to report, exit 0.
clean="$T/clean-logs"
for r in 0 1 2; do
  RANK=$r LABELGUARD_LOG="$clean" LD_PRELOAD="$LG_PRELOAD" "$NLL" fwd_2d --classes 10 good:10 >/dev/null 2>&1 &
done
wait
"$LG" report "$clean" >"$T/clean.out" 2>&1; rc=$?
check "clean report: exit 0" [ $rc = 0 ]
check "clean report: says so" grep -qx 'No label problems found.' "$T/clean.out"
"$LG" report --json "$clean" >"$T/clean.json" 2>&1; rc=$?
check "clean report --json: exit 0, no problems, 3 processes" \
  bash -c "[ $rc = 0 ] && python3 -c 'import json,sys; R=json.load(open(sys.argv[1])); sys.exit(not (R[\"problems\"] == [] and len(R[\"processes\"]) == 3))' '$T/clean.json'"

# labelguard run: the program's own exit status, the action on its launches.
unset LABELGUARD_LOG
lg_run --action mask --log "$T/run-mask" -- "$NLL" "${ONE_BASED[@]}" >"$T/run-mask.out" 2>"$T/run-mask.err"; rc=$?
check "run --action mask: exit 0 (the program's, its launch ran)" [ $rc = 0 ]
check "run --action mask: the kernel ran on the masked labels" grep -q '^result launch_err=0 sync_err=0 .* total_weight=9$' "$T/run-mask.out"
check "run --action mask: the report on stderr" grep -qxF '  action: mask → 1 bad label replaced by ignore_index in a copy; the kernel ran on it' "$T/run-mask.err"
mkdir -p "$T/run-mask.logs" && cp "$T"/run-mask/*.jsonl "$T/run-mask.logs/" 2>/dev/null
events run-mask && check "run --action mask: event outcome masked" \
  qtrue run-mask "len(V) == 1 and V[0]['action'] == 'mask' and V[0]['outcome'] == 'masked' and V[0]['cause'] == 'one_based'"
"$LG" report "$T/run-mask" >"$T/run-mask-report.out" 2>&1; rc=$?
check "report of the masked run: exit 1, outcome masked" \
  bash -c "[ $rc = 1 ] && grep -q '^    action: *mask x1 -> masked x1' '$T/run-mask-report.out'"
lg_run --log "$T/run-raise" -- "$NLL" "${ONE_BASED[@]}" >"$T/run-raise.out" 2>&1; rc=$?
check "run (raise): exit 1, the program's own (its launch failed)" [ $rc = 1 ]
lg_run --log "$T/run-sh" -- sh -c 'exit 7' >/dev/null 2>&1; rc=$?
check "run: a plain command's exit status passes through" [ $rc = 7 ]
check "run: a process without kernel launches writes no log" [ ! -e "$T/run-sh" ]
finish
