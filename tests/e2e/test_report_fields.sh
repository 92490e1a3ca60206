#!/usr/bin/env bash
# test_report_fields.sh: every field of the report, end to end under the test double,
# with build/progs/nll launching PyTorch's kernels with labels of each likely cause:
#   one_based (1..10, 10 classes), scaled_255 (a {0,255} mask, 2 classes, backward, more bad
#   labels than the block shows), void_255 (255 in a 2-D segmentation target), negative_unknown
#   (-1), head_too_small (uint8 labels 0..7, 5 classes, ignore_index 3), other (1000 and -7).
# For each: the stderr block line by line (kernel short name and direction, `target[i] = v`,
# `N of M labels outside [0, C)`, ignore_index, min/max, action and outcome, likely cause and
# its fix, the call site, the log path), the CUDA error text the program sees, and the JSONL
# events schema-checked by jsonl_check.py (a JSON parser) plus their exact values. Then:
# the mask and log actions' lines; LABELGUARD_QUIET=1 (nothing on stderr, JSONL still written);
# file names <host>-<pid>.jsonl, and <host>-<pid>-rank<R>.jsonl with RANK, SLURM_PROCID or
# OMPI_COMM_WORLD_RANK (rank and local_rank as JSON ints); a log "directory" that is a regular
# file (one warning on stderr, the events on stderr as JSON lines, the action still taken).
. "$(dirname "$0")/lib.sh"
NLL="$PROGS/nll"
HOST=$(python3 -c 'import re, socket; print(re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()))')

# block NAME: the stderr block of the run's (only) violation, from its header to its log line.
block() { sed -n '/^labelguard: bad labels in /,/^  log: /p' "$T/$1.err"; }
has_line() { block "$1" | grep -qxF -- "$2"; }
# qt NAME EXPR: qtrue with EXPR parenthesized, so it may span lines.
qt() { qtrue "$1" "($2)"; }
logfile() { ls "$T/$1.logs"/*.jsonl 2>/dev/null | head -n1; }

# vcase ID HEADER SAMPLE_LINES COUNT_LINE CAUSE CAUSE_TEXT JSON_EXPR -- NLL ARGS...
# SAMPLE_LINES: the `target[...] = v` lines, separated by '|'. JSON_EXPR: extra Python checks
# on v (the violation).
vcase() {
  local id=$1 header=$2 samples=$3 counts=$4 cause=$5 text=$6 expr=$7; shift 8
  run_lg "$id" "$NLL" "$@"
  require_fake "$id"
  check "$id: exit 1 (the launch failed as PyTorch would raise)" [ "$(rc_of "$id")" = 1 ]
  check "$id: exactly one block" [ "$(grep -c '^labelguard: bad labels in ' "$T/$id.err")" = 1 ]
  check "$id: header names kernel and direction" has_line "$id" "$header"
  local IFS='|' s
  for s in $samples; do check "$id: sample line '$s'" has_line "$id" "$s"; done
  unset IFS
  check "$id: counts, ignore_index, range" has_line "$id" "$counts"
  check "$id: likely cause with its fix" has_line "$id" "  likely cause: $cause — $text"
  check "$id: action and outcome" has_line "$id" "  action: raise → launch blocked, CUDA context intact; PyTorch raises RuntimeError"
  # Not a Python process: the native call site, the caller of the kernel's host stub.
  local kname; kname=$(echo "$header" | sed -E 's/^labelguard: bad labels in ([^ ]+) .*/\1/')
  check "$id: native call site, past the kernel's launch stub" \
    bash -c "sed -n '/^labelguard: bad labels in /,/^  log: /p' '$T/$id.err' | grep -E '^  at ' | grep -Ev '$kname' | grep -Eq '^  at nll\+0x[0-9a-f]+ \(.*   \(native\)$'"
  local lf; lf=$(logfile "$id")
  check "$id: log file exists" [ -n "$lf" ]
  check "$id: log line names that file" has_line "$id" "  log: $lf"
  check "$id: block is 7 lines + samples" [ "$(block "$id" | wc -l)" = $((6 + $(echo "$samples" | tr '|' '\n' | wc -l))) ]
  check "$id: closing summary line" grep -qxF "labelguard: 1 launch with bad labels out of 2 watched; log: $lf" "$T/$id.err"
  check "$id: the program's CUDA error names the label and the log" \
    grep -qF "launch_error_text=\"labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints below): $(echo "$header" | sed -E 's/^labelguard: bad labels in ([^ ]+) .*/\1/'): bad label " "$T/$id.out"
  check "$id: error text points at the log" grep -qF "details in $lf\"" "$T/$id.out"
  check "$id: context alive" grep -q 'after memcpy_err=0 clean_launch_err=0' "$T/$id.out"
  events "$id" || { fail "$id: schema"; return; }
  check "$id: JSONL file name <host>-<pid>.jsonl" qt "$id" \
    "len(V) == 1 and V[0]['_file'] == '$HOST-%d.jsonl' % V[0]['pid'] and all(e['pid'] == V[0]['pid'] for e in E)"
  check "$id: common fields" qt "$id" \
    "all(e['host'] == '$HOST' and e['rank'] is None and e['local_rank'] is None for e in E) and V[0]['tid'] == V[0]['pid']"
  check "$id: cause and cause_text as on stderr" qt "$id" "V[0]['cause'] == '$cause' and V[0]['cause_text'] == \"\"\"$text\"\"\""
  check "$id: action, outcome, stacks" qt "$id" \
    "V[0]['action'] == 'raise' and V[0]['outcome'] == 'blocked' and V[0]['python_stack'] == [] and 'python_stack_thread' not in V[0]
     and len(V[0]['native_stack']) >= 2 and V[0]['native_stack'][0].startswith('nll+0x') and V[0]['kernel'] in V[0]['native_stack'][0]
     and V[0]['launch_seq'] >= 1 and V[0]['device'] == 0 and V[0]['stream'].startswith('0x') and V[0]['symbol'].startswith('_ZN2at6native')
     and V[0]['kernel'] in V[0]['symbol']"
  check "$id: start and summary" qt "$id" \
    "[e['event'] for e in E if e['event'] in ('start', 'summary')] == ['start', 'summary']
     and E[[e['event'] for e in E].index('start')]['config']['action'] == 'raise'
     and E[[e['event'] for e in E].index('start')]['config']['log'] == '$T/$id.logs'
     and E[[e['event'] for e in E].index('start')]['backend'] == 'host'
     and S[0]['violations'] == 1 and S[0]['watched'] == 2 and S[0]['validated'] == 2 and S[0]['launches'] == 3"
  check "$id: exact values" qt "$id" "$expr"
}


vcase one_based "labelguard: bad labels in nll_loss_forward_reduce_cuda_kernel_2d (forward)" \
  "  target[9] = 10" \
  "  1 of 10 labels outside [0, 10)  (ignore_index = -100)  min 1, max 10" \
  one_based "labels span 1..10 with 10 classes; they look 1-based: subtract 1" \
  "(V[0]['kernel'], V[0]['family'], V[0]['direction']) == ('nll_loss_forward_reduce_cuda_kernel_2d', 'nll_loss', 'forward')
   and V[0]['target'] == {'dtype': 'int64', 'count': 10, 'n_classes': 10, 'ignore_index': -100}
   and {k: V[0]['bad'][k] for k in ('count', 'min', 'max', 'samples')} == {'count': 1, 'min': 1, 'max': 10, 'samples': [{'index': 9, 'value': 10}]}" \
  -- fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10

vcase scaled_255 "labelguard: bad labels in nll_loss_backward_reduce_cuda_kernel_2d (backward)" \
  "  target[1] = 255      target[2] = 255      target[4] = 255|  target[6] = 255      target[7] = 255      target[8] = 255 (first 6 of 8)" \
  "  8 of 11 labels outside [0, 2)  (ignore_index = -100)  min 0, max 255" \
  scaled_255 "bad labels are multiples of 255 (max 255) with 2 classes, like a mask saved as an image: divide the labels by 255 (if 255 marks void pixels instead, set ignore_index=255)" \
  "(V[0]['kernel'], V[0]['family'], V[0]['direction']) == ('nll_loss_backward_reduce_cuda_kernel_2d', 'nll_loss', 'backward')
   and V[0]['target'] == {'dtype': 'int64', 'count': 11, 'n_classes': 2, 'ignore_index': -100}
   and V[0]['bad']['count'] == 8 and V[0]['bad']['min'] == 0 and V[0]['bad']['max'] == 255
   and V[0]['bad']['samples'] == [{'index': i, 'value': 255} for i in (1, 2, 4, 6, 7, 8, 9, 10)]" \
  -- bwd_2d --classes 2 0 255 255 0 255 0 255 255 255 255 255

vcase void_255 "labelguard: bad labels in nll_loss2d_forward_no_reduce_kernel (forward)" \
  "  target[0][0][3] = 255 target[0][1][2] = 255" \
  "  2 of 8 labels outside [0, 5)  (ignore_index = -100)  min 0, max 255" \
  void_255 "255 in a dense (segmentation) target with 5 classes and ignore_index -100: 255 is the usual 'void' label: set ignore_index=255 in the loss" \
  "(V[0]['kernel'], V[0]['family'], V[0]['direction']) == ('nll_loss2d_forward_no_reduce_kernel', 'nll_loss2d', 'forward')
   and V[0]['target'] == {'dtype': 'int64', 'count': 8, 'n_classes': 5, 'ignore_index': -100, 'shape': [1, 2, 4]}
   and {k: V[0]['bad'][k] for k in ('count', 'min', 'max', 'samples')} == {'count': 2, 'min': 0, 'max': 255, 'samples': [{'index': 3, 'value': 255}, {'index': 6, 'value': 255}]}" \
  -- 2d_fwd_none --hw 2,4 --classes 5 0 1 2 255 3 4 255 0

vcase negative_unknown "labelguard: bad labels in nll_loss_forward_no_reduce_cuda_kernel (forward)" \
  "  target[2] = -1       target[4] = -1" \
  "  2 of 5 labels outside [0, 5)  (ignore_index = -100)  min -1, max 2" \
  negative_unknown "the bad labels are -1, a common 'unknown' marker, while ignore_index is -100: set ignore_index=-1 or drop those samples" \
  "(V[0]['kernel'], V[0]['family'], V[0]['direction']) == ('nll_loss_forward_no_reduce_cuda_kernel', 'nll_loss', 'forward')
   and V[0]['target'] == {'dtype': 'int64', 'count': 5, 'n_classes': 5, 'ignore_index': -100}
   and {k: V[0]['bad'][k] for k in ('count', 'min', 'max', 'samples')} == {'count': 2, 'min': -1, 'max': 2, 'samples': [{'index': 2, 'value': -1}, {'index': 4, 'value': -1}]}" \
  -- fwd_none --classes 5 0 1 -1 2 -1

vcase head_too_small "labelguard: bad labels in nll_loss_forward_reduce_cuda_kernel_2d (forward)" \
  "  target[5] = 5        target[6] = 6        target[7] = 7" \
  "  3 of 8 labels outside [0, 5)  (ignore_index = 3)  min 0, max 7" \
  head_too_small "labels span 0..7 but the model has 5 outputs: give the last layer at least 8 outputs (check num_classes)" \
  "V[0]['target'] == {'dtype': 'uint8', 'count': 8, 'n_classes': 5, 'ignore_index': 3}
   and {k: V[0]['bad'][k] for k in ('count', 'min', 'max', 'samples')} == {'count': 3, 'min': 0, 'max': 7, 'samples': [{'index': i, 'value': i} for i in (5, 6, 7)]}" \
  -- fwd_2d --dtype uint8 --classes 5 --ignore 3 0 1 2 3 4 5 6 7

vcase other "labelguard: bad labels in nll_loss_forward_reduce_cuda_kernel_2d (forward)" \
  "  target[2] = 1000     target[3] = -7" \
  "  2 of 4 labels outside [0, 5)  (ignore_index = -100)  min -7, max 1000" \
  other "labels outside [0, 5) (min -7, max 1000) match no known pattern: check the dataset's label mapping and the model's num_classes" \
  "V[0]['target'] == {'dtype': 'int64', 'count': 4, 'n_classes': 5, 'ignore_index': -100}
   and {k: V[0]['bad'][k] for k in ('count', 'min', 'max', 'samples')} == {'count': 2, 'min': -7, 'max': 1000, 'samples': [{'index': 2, 'value': 1000}, {'index': 3, 'value': -7}]}" \
  -- fwd_2d --classes 5 0 1 1000 -7

# The other actions' lines and outcomes.
run_lg act-mask env LABELGUARD_ACTION=mask "$NLL" fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10
check "mask: action line" has_line act-mask "  action: mask → 1 bad label replaced by ignore_index in a copy; the kernel ran on it"
check "mask: the launch ran" [ "$(field act-mask launch_err)" = 0 ]
events act-mask && check "mask: outcome masked" qt act-mask "len(V) == 1 and V[0]['action'] == 'mask' and V[0]['outcome'] == 'masked'"
run_lg act-log env LABELGUARD_ACTION=log "$NLL" fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10
check "log: action line" has_line act-log "  action: log → the kernel ran with these labels (its device-side assert may fire)"
events act-log && check "log: outcome launched" qt act-log "len(V) >= 1 and V[0]['action'] == 'log' and V[0]['outcome'] == 'launched'"

# LABELGUARD_QUIET=1: not a byte on stderr, the JSONL still complete.
run_lg quiet env LABELGUARD_QUIET=1 "$NLL" fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10
check "quiet: stderr empty" [ ! -s "$T/quiet.err" ]
check "quiet: the launch still raised" [ "$(field quiet launch_err)" = 800 ]
events quiet && check "quiet: events written, config says quiet" qt quiet \
  "len(V) == 1 and V[0]['cause'] == 'one_based' and len(S) == 1 and [e for e in E if e['event'] == 'start'][0]['config']['quiet'] is True"

# File naming with the launchers' rank variables; rank/local_rank are JSON ints.
rank_case() { # ID RANKVAR=R LOCALVAR=L R L
  run_lg "$1" env "$2" "$3" "$NLL" fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10
  events "$1" || { fail "$1: schema"; return; }
  check "$1: file $HOST-<pid>-rank$4.jsonl, rank $4, local_rank $5" qt "$1" \
    "len(V) == 1 and V[0]['_file'] == '$HOST-%d-rank$4.jsonl' % V[0]['pid']
     and all(type(e['rank']) is int and e['rank'] == $4 and type(e['local_rank']) is int and e['local_rank'] == $5 for e in E)"
  check "$1: exactly one file" [ "$(ls "$T/$1.logs" | wc -l)" = 1 ]
}
rank_case torchrun RANK=3 LOCAL_RANK=1 3 1
rank_case slurm SLURM_PROCID=12 SLURM_LOCALID=4 12 4
rank_case openmpi OMPI_COMM_WORLD_RANK=7 OMPI_COMM_WORLD_LOCAL_RANK=0 7 0

# An unwritable log directory: LABELGUARD_LOG is a regular file.
: >"$T/not-a-dir"
LABELGUARD_LOG="$T/not-a-dir" LD_PRELOAD="$LG_PRELOAD" "$NLL" fwd_2d --classes 10 1 2 3 4 5 6 7 8 9 10 >"$T/nodir.out" 2>"$T/nodir.err"
check "no log dir: exactly one warning" [ "$(grep -c '^labelguard: warning: ' "$T/nodir.err")" = 1 ]
check "no log dir: the warning names the path and a fix" \
  bash -c "grep -q \"^labelguard: warning: cannot write the log in '$T/not-a-dir'\" '$T/nodir.err' && grep -q 'hint: set LABELGUARD_LOG' '$T/nodir.err'"
check "no log dir: the action still happened (raise, context alive)" \
  bash -c "grep -q 'launch_error_text=\"labelguard: .*bad label target\[9\] = 10' '$T/nodir.out' && grep -q 'after memcpy_err=0' '$T/nodir.out'"
check "no log dir: the file is untouched" [ ! -s "$T/not-a-dir" ]
check "no log dir: the block says where the events went" grep -qxF "  log: stderr" "$T/nodir.err"
grep '^{' "$T/nodir.err" >"$T/nodir.jsonl"
if python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$T/nodir.jsonl" >"$T/nodir.json" 2>"$T/nodir.jsonerr"; then
  ok "no log dir: events on stderr pass the schema"
  check "no log dir: start, violation, summary on stderr" qt nodir \
    "[e['event'] for e in E if e['event'] != 'warning'] == ['start', 'violation', 'summary'] and V[0]['outcome'] == 'blocked'"
else
  cat "$T/nodir.jsonerr"; fail "no log dir: events on stderr pass the schema"
fi
finish
