#!/usr/bin/env bash
# test_bad_input.sh: bad input to the library itself, each with a clear message
# and no crash, under the runtime test double:
#   1. every LABELGUARD_* variable empty, overlong (5000 bytes), non-UTF-8 and wrong: exit
#      status 2 before the program runs (its output absent), one stderr line naming the variable
#      and the allowed values. LOG and KERNELS are paths: a non-UTF-8 path is a valid one (the
#      log goes there and the JSONL stays valid JSON; a missing spec file is a warning).
#   2. spec files through LABELGUARD_KERNELS that are empty, truncated, binary, not UTF-8, with
#      duplicate or conflicting kernels, out-of-range parameter indices or offsets, too large, a
#      directory, a device (/dev/zero, /dev/urandom), a FIFO, missing: one `spec_file` warning naming the file and the problem, and the
#      built-in table still catches a bad label; a good file next to a bad one still loads.
#   3. a log path that is a file, a dangling symlink, read-only (as user nobody), on a full disk
#      (a tiny tmpfs; else RLIMIT_FSIZE): one warning on stderr, the events as JSON on stderr,
#      the launch still blocked and the context alive; what reached the file is valid JSONL.
#   4. label buffers that are NULL, host memory, of length 0, n_classes 0 and < 0, a kernel whose
#      parameters differ from the spec, and 2^31 + 1 labels (build/e2e/bad_buffers).
. "$(dirname "$0")/lib.sh"
NLL="$PROGS/nll"
BAD=(fwd_2d --classes 3 0 1 7 2)  # one bad label, at index 2
# blocked NAME: the bad launch was refused with the library's error and the context survived
blocked() {
  grep -q 'launch_error_text=.*bad label' "$T/$1.out" &&
    grep -q 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 same_launch_err=0 same_sync_err=0' "$T/$1.out"
}

# ---- 1. environment variables --------------------------------------------------------------
long=$(head -c 5000 /dev/zero | tr '\0' a)
nonutf8=$'\xff\xfe\x80'
refused() { # VAR VALUE DESCRIPTION
  local var=$1 val=$2 d=$3 id="env-$1-$3"
  run_lg "$id" env "$var=$val" "$NLL" "${BAD[@]}"
  check "$var $d: exit 2" [ "$(rc_of "$id")" = 2 ]
  check "$var $d: the program did not run" [ ! -s "$T/$id.out" ]
  check "$var $d: one line naming $var and the allowed values" \
    eval '[ "$(wc -l <"$T/$id.err")" = 1 ] && grep -q "^labelguard: $var=.* is not valid; allowed: " "$T/$id.err"'
  check "$var $d: no log written" [ ! -e "$T/$id.logs" ]
}
declare -A wrong=(
  [LABELGUARD_ACTION]="RAISE|raise |ignore|raise,log"
  [LABELGUARD_MODE]="Async|sync,async|0"
  [LABELGUARD_HOOKS]="none|cupti,interpose"
  [LABELGUARD_BACKTRACE]="all|native,native|native python"
  [LABELGUARD_SAMPLES]="0|-1|257|16x| 16|+16|1e3|99999999999999999999999"
  [LABELGUARD_QUIET]="yes|true|2| 1"
  [LABELGUARD_DEBUG_KERNELS]="yes|on|-1"
)
for var in LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_BACKTRACE LABELGUARD_SAMPLES \
           LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG LABELGUARD_KERNELS; do
  refused "$var" "" empty
  refused "$var" "$long" overlong
  case $var in LABELGUARD_LOG|LABELGUARD_KERNELS) ;; *) refused "$var" "$nonutf8" non-utf8;; esac
  IFS='|' read -r -a vals <<<"${wrong[$var]:-}"
  i=0; for v in "${vals[@]}"; do i=$((i + 1)); refused "$var" "$v" "wrong$i"; done
done
# paths: control characters are refused (they would end up in messages and file names)
refused LABELGUARD_LOG $'logs\nx' wrong-newline
refused LABELGUARD_LOG $'\tlogs' wrong-tab
refused LABELGUARD_KERNELS $'a.conf\n' wrong-newline
refused LABELGUARD_KERNELS $'a.conf\x1b[2J' wrong-escape
# the message shows an unprintable value escaped, and cuts an overlong one
check "non-UTF-8 value shown escaped" grep -q 'LABELGUARD_ACTION="\\xff\\xfe\\x80"' "$T/env-LABELGUARD_ACTION-non-utf8.err"
check "overlong value shown cut" eval '[ "$(wc -c <"$T/env-LABELGUARD_SAMPLES-overlong.err")" -lt 400 ]'
# non-UTF-8 paths are paths
run_lg env-log-nonutf8 env "LABELGUARD_LOG=$T/logs-$nonutf8" "$NLL" "${BAD[@]}"
check "LOG non-UTF-8 path: program ran, launch blocked" blocked env-log-nonutf8
check "LOG non-UTF-8 path: log written there, valid JSON" \
  python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$T/logs-$nonutf8" >/dev/null
run_lg env-kernels-nonutf8 env "LABELGUARD_KERNELS=$T/missing-$nonutf8.conf" "$NLL" "${BAD[@]}"
check "KERNELS non-UTF-8 path: program ran, launch blocked" blocked env-kernels-nonutf8
check "KERNELS non-UTF-8 path: one warning that it cannot be read" \
  [ "$(grep -c 'labelguard: warning: spec_file: .*missing-.*cannot read' "$T/env-kernels-nonutf8.err")" = 1 ]
events env-kernels-nonutf8 || fail "KERNELS non-UTF-8 path: the JSONL is not valid"

# ---- 2. spec files ---------------------------------------------------------------------------
S="$T/specs"; mkdir -p "$S"
cat >"$S/good.conf" <<'EOF'
[my_fwd_2d]
match=38nll_loss_forward_reduce_cuda_kernel_2dI;lg_test_no_such_kernel
family=nll_loss
direction=forward
params=8,8,8,8,8,1,8,8,8,8
target=3
dtype=from_template
count=param
count_field=6,0,8
n_classes=8,0,8
ignore_index=9,0,8
EOF
: >"$S/empty.conf"
head -c 200 "$S/good.conf" >"$S/truncated.conf"
python3 -c 'import random, sys; r = random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(3000)))' >"$S/binary.conf"
python3 -c 'import sys; sys.stdout.buffer.write(open(sys.argv[1], "rb").read().replace(b"family=nll_loss", b"family=nll_\xe9\xff"))' "$S/good.conf" >"$S/latin1.conf"
{ cat "$S/good.conf"; echo; cat "$S/good.conf"; } >"$S/duplicate.conf"
{ cat "$S/good.conf"; echo; sed 's/^\[my_fwd_2d\]/[my_other]/' "$S/good.conf"; } >"$S/conflict.conf"
sed 's/^\[my_fwd_2d\]/[my_conflict]/; s/;lg_test_no_such_kernel//' "$S/good.conf" >"$S/conflict_builtin.conf"
sed 's/^target=3/target=12/' "$S/good.conf" >"$S/index.conf"
sed 's/^n_classes=8,0,8/n_classes=10,0,8/' "$S/good.conf" >"$S/index2.conf"
sed 's/^count_field=6,0,8/count_field=6,16,8/' "$S/good.conf" >"$S/offset.conf"
sed 's/^target=3/target=3,8/' "$S/good.conf" >"$S/offset2.conf"
{ for i in $(seq 2000); do printf '# %0600d\n' 0; done; } >"$S/huge.conf"
mkdir -p "$S/dir.conf"
spec_case() { # NAME FILE PATTERN: one spec_file warning naming FILE and matching PATTERN
  local n=$1 f=$2 pat=$3 id="spec-$1"
  run_lg "$id" env "LABELGUARD_KERNELS=$f" "$NLL" "${BAD[@]}"
  check "spec $n: no crash, the built-in table catches the bad label" blocked "$id"
  check "spec $n: one stderr warning naming the file and the problem" \
    eval '[ "$(grep -c "^labelguard: warning: spec_file: " "$T/$id.err")" = 1 ] && grep "^labelguard: warning: spec_file: " "$T/$id.err" | grep -F -q "$f" && grep "^labelguard: warning: spec_file: " "$T/$id.err" | grep -E -q "$pat"'
  if events "$id"; then
    check "spec $n: one spec_file warning event" \
      qtrue "$id" "len([w for w in W if w['what'] == 'spec_file']) == 1 and len(V) == 1 and V[0]['kernel'] == 'nll_loss_forward_reduce_cuda_kernel_2d'"
  else fail "spec $n: JSONL schema"; fi
}
spec_case empty "$S/empty.conf" 'empty'
spec_case truncated "$S/truncated.conf" 'count_field|missing|required'
spec_case binary "$S/binary.conf" 'binary'
spec_case latin1 "$S/latin1.conf" 'UTF-8|family'
spec_case duplicate "$S/duplicate.conf" 'duplicate'
spec_case conflict "$S/conflict.conf" 'conflicts'
spec_case conflict_builtin "$S/conflict_builtin.conf" 'conflicts'
spec_case index "$S/index.conf" 'index 12 out of range'
spec_case index2 "$S/index2.conf" 'index 10 out of range'
spec_case offset "$S/offset.conf" 'offset 16'
spec_case offset2 "$S/offset2.conf" 'offset|beyond'
spec_case huge "$S/huge.conf" 'larger than'
spec_case directory "$S/dir.conf" 'not a regular file'
# Devices and FIFOs must be refused without reading: /dev/zero never ends, a FIFO with no
# writer blocks forever; either would hang the job at its first launch.
mkfifo "$S/fifo.conf"
spec_case devzero /dev/zero 'not a regular file'
spec_case devurandom /dev/urandom 'not a regular file'
spec_case fifo "$S/fifo.conf" 'not a regular file'
spec_case missing "$S/missing.conf" 'cannot read'
# a good file loads without a word, and next to a bad one it still loads
run_lg spec-good env "LABELGUARD_KERNELS=$S/good.conf" "$NLL" "${BAD[@]}"
check "spec good: no warning" [ -z "$(grep 'warning' "$T/spec-good.err")" ]
check "spec good: bad label blocked" blocked spec-good
run_lg spec-mixed env "LABELGUARD_KERNELS=$S/missing.conf:$S/good.conf" "$NLL" "${BAD[@]}"
check "spec good + missing: one warning, for the missing file" \
  eval '[ "$(grep -c "warning: spec_file" "$T/spec-mixed.err")" = 1 ] && grep -q "warning: spec_file: $S/missing.conf" "$T/spec-mixed.err"'
check "spec good + missing: bad label blocked" blocked spec-mixed
# the spec of a matching kernel whose parameters differ: never decoded, one warning, runs
run_plain mismatch-plain "$NLL" mismatch_fwd_2d --classes 3 0 1 7 2
run_lg mismatch "$NLL" mismatch_fwd_2d --classes 3 0 1 7 2
check "layout mismatch: same output as without the library" cmp -s "$T/mismatch-plain.out" "$T/mismatch.out"
if events mismatch; then
  check "layout mismatch: one unknown_layout warning naming both layouts, no violation" \
    qtrue mismatch "len([w for w in W if w['what'] == 'unknown_layout']) == 1 and 'expects parameter sizes' in [w for w in W if w['what'] == 'unknown_layout'][0]['detail'] and not V"
else fail "layout mismatch: JSONL schema"; fi

# ---- 3. log paths --------------------------------------------------------------------------
# log_case NAME: one warning about the log, events as JSON on stderr, launch blocked
log_case() {
  local n=$1 id="log-$1"
  check "log $n: launch blocked, context alive" blocked "$id"
  check "log $n: one warning about the log naming the path" \
    [ "$(grep -c "^labelguard: warning: cannot write the log in '.*'" "$T/$id.err")" = 1 ]
  grep '^{' "$T/$id.err" >"$T/$id.stderr.jsonl"
  check "log $n: the events on stderr parse, the violation among them" \
    eval 'python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$T/$id.stderr.jsonl" >"$T/$id.json" && qtrue "$id" "len(V) == 1 and V[0][\"outcome\"] == \"blocked\" and len(S) == 1"'
}
echo x >"$T/a-file"
LABELGUARD_LOG="$T/a-file" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${BAD[@]}" >"$T/log-file.out" 2>"$T/log-file.err"
log_case file
ln -s "$T/nowhere" "$T/dangling"
LABELGUARD_LOG="$T/dangling" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${BAD[@]}" >"$T/log-dangling.out" 2>"$T/log-dangling.err"
log_case dangling
check "log dangling: nothing created through the symlink" [ ! -e "$T/nowhere" ]
# read-only: root ignores permissions, so run as nobody in a directory nobody may enter. The
# program, the library and the test double are copied where nobody can read them: the
# checkout may lie under a directory nobody cannot enter (a mode-0700 home).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  RO=$(mktemp -d /tmp/lg-ro.XXXXXX); chmod 0755 "$RO"; mkdir "$RO/logs"; chmod 0500 "$RO/logs"
  lib_copy="$RO/liblabelguard.so"; cp "$LG_ROOT/$LG_BUILD/liblabelguard.so" "$lib_copy"
  cp -r "$LG_FAKE_DIR" "$RO/fakecuda"; cp "$NLL" "$RO/nll"; chmod -R a+rX "$RO"
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env LABELGUARD_LOG="$RO/logs" \
    LD_LIBRARY_PATH="$RO/fakecuda" LD_PRELOAD="${LG_PRELOAD/$LG_ROOT\/$LG_BUILD\/liblabelguard.so/$lib_copy}" \
    "$RO/nll" "${BAD[@]}" >"$T/log-readonly.out" 2>"$T/log-readonly.err"
  log_case readonly
  check "log read-only: nothing written" [ -z "$(ls -A "$RO/logs")" ]
  rm -rf "$RO"
elif [ "$(id -u)" != 0 ]; then
  RO="$T/ro"; mkdir -p "$RO/logs"; chmod 0500 "$RO/logs"
  LABELGUARD_LOG="$RO/logs" LD_PRELOAD="$LG_PRELOAD" "$NLL" "${BAD[@]}" >"$T/log-readonly.out" 2>"$T/log-readonly.err"
  log_case readonly
  chmod 0700 "$RO/logs"
else
  echo "skip: log read-only (running as root without setpriv/nobody: permissions are not enforced)"
fi
# full disk: a 2-page tmpfs, one page taken: the log fills the other mid-run (six bad launches)
FULL="$T/full"; mkdir -p "$FULL"
if mount -t tmpfs -o size=8k lg-e2e-full "$FULL" 2>/dev/null; then
  trap 'umount "$FULL" 2>/dev/null; rm -rf "$T"' EXIT
  mkdir "$FULL/logs"; head -c 4096 /dev/zero >"$FULL/filler"
  LABELGUARD_LOG="$FULL/logs" LD_PRELOAD="$LG_PRELOAD" "$NLL" fwd_2d --classes 3 --repeat 6 0 1 7 2 \
    >"$T/log-full.out" 2>"$T/log-full.err"
  how="tmpfs"
else
  # no mount here: RLIMIT_FSIZE gives EFBIG on the log file (SIGXFSZ ignored, as a shell does
  # with `trap '' XFSZ`); stdout and stderr go through pipes, which the limit does not apply to
  mkdir -p "$FULL/logs"
  bash -c 'trap "" XFSZ; ulimit -f 4; exec "$@"' _ env LABELGUARD_LOG="$FULL/logs" LD_PRELOAD="$LG_PRELOAD" \
    "$NLL" fwd_2d --classes 3 --repeat 6 0 1 7 2 2> >(cat >"$T/log-full.err") | cat >"$T/log-full.out"
  sleep 0.2
  how="RLIMIT_FSIZE"
fi
check "log full ($how): launches blocked, context alive" \
  grep -q 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0' "$T/log-full.out"
check "log full ($how): one warning about the log" \
  [ "$(grep -c "^labelguard: warning: cannot write the log in '$FULL/logs'" "$T/log-full.err")" = 1 ]
check "log full ($how): what reached the file is valid JSONL" \
  eval 'python3 "$LG_ROOT/tests/e2e/jsonl_check.py" "$FULL/logs" >"$T/log-full-file.json"'
grep '^{' "$T/log-full.err" >"$T/log-full.stderr.jsonl"
check "log full ($how): every event once, in the file or on stderr" python3 - "$FULL/logs" "$T/log-full.stderr.jsonl" <<'PY'
import glob, json, sys
E = []
for f in glob.glob(sys.argv[1] + "/*.jsonl") + [sys.argv[2]]:
    E += [json.loads(l) for l in open(f, encoding="utf-8")]
n = lambda ev: len([e for e in E if e["event"] == ev])
seqs = sorted(e["launch_seq"] for e in E if e["event"] == "violation")
ok = n("start") == 1 and n("summary") == 1 and len(seqs) == 6 and len(set(seqs)) == 6
print("events:", n("start"), seqs, n("summary"))
sys.exit(0 if ok else 1)
PY
umount "$FULL" 2>/dev/null

# ---- 4. label buffers --------------------------------------------------------------------------
BB="$LG_ROOT/$LG_BUILD/e2e/bad_buffers"
AFTER_OK='after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 add_one_err=0'
for c in null host count_repeat zero classes0 classes_neg mismatch; do
  run_plain "bb-$c-plain" "$BB" $c
  run_lg "bb-$c" "$BB" $c
  check "buffers $c: no crash (exit 0, the program finished)" \
    eval '[ "$(rc_of "bb-$c")" = 0 ] && grep -q "^after " "$T/bb-$c.out"'
  events "bb-$c" || fail "buffers $c: JSONL schema"
done
# NULL and host memory: the labels cannot be read; a clear warning, and the launch is left to
# the runtime exactly as without the library (a GPU faults on it: 700, as the test double does)
check "buffers null: warning says the target is NULL" \
  qtrue bb-null "any(w['what'] == 'decode_failed' and 'NULL' in w['detail'] for w in W) and not V"
check "buffers null: same outcome as without the library" \
  [ "$(grep '^case' "$T/bb-null.out")" = "$(grep '^case' "$T/bb-null-plain.out")" ]
check "buffers host: warning says the labels are host memory" \
  qtrue bb-host "any(w['what'] == 'validate_failed' and 'host memory' in w['detail'] for w in W) and not V"
check "buffers null and host: the summary counts each unchecked launch" \
  eval 'qtrue bb-null "S[0][\"unchecked\"] >= 1 and S[0][\"host_fallbacks\"] == 0" && qtrue bb-host "S[0][\"unchecked\"] >= 1"'
check "buffers zero: nothing unchecked" qtrue bb-zero 'S[0]["unchecked"] == 0'
# Said once per kernel, counted every time: two launches of one kernel and one of another.
check "buffers count_repeat: one warning per kernel (two), three launches unchecked" \
  qtrue bb-count_repeat "len({w['detail'] for w in W if w['what'] == 'decode_failed'}) == len([w for w in W if w['what'] == 'decode_failed']) == 2 and S[0]['unchecked'] == 3"
check "buffers count_repeat: each launch ran, context alive" \
  grep -q "^case=count_repeat launch_err=0 sync_err=0" "$T/bb-count_repeat.out"
check "buffers count_repeat: ... and afterwards" grep -q "$AFTER_OK" "$T/bb-count_repeat.out"
check "buffers host: same outcome as without the library" \
  [ "$(grep '^case' "$T/bb-host.out")" = "$(grep '^case' "$T/bb-host-plain.out")" ]
check "buffers zero: nothing to check, nothing said, context alive" \
  eval 'qtrue bb-zero "not V and not [w for w in W if w[\"what\"] != \"cupti_unavailable\"]" && grep -q "$AFTER_OK" "$T/bb-zero.out"'
for c in classes0 classes_neg; do
  nc=0; [ $c = classes_neg ] && nc=-3
  check "buffers $c: violation (n_classes $nc, all 4 labels bad), blocked" \
    qtrue "bb-$c" "len(V) == 1 and V[0]['target']['n_classes'] == $nc and V[0]['bad']['count'] == 4 and V[0]['outcome'] == 'blocked'"
  check "buffers $c: context alive" grep -q "$AFTER_OK" "$T/bb-$c.out"
  check "buffers $c: without the library the assert fires" grep -q 'sync_err=710' "$T/bb-$c-plain.out"
done
check "buffers mismatch: unknown_layout warning, no violation, same as without the library" \
  eval 'qtrue bb-mismatch "not V and any(w[\"what\"] == \"unknown_layout\" for w in W)" && cmp -s "$T/bb-mismatch.out" "$T/bb-mismatch-plain.out"'
# 2^31 + 1 uint8 labels: 2 GiB under the test double, plus the host backend's copy
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kb:-0}" -ge $((8 * 1024 * 1024)) ]; then
  run_lg bb-big "$BB" big
  check "buffers 2^31+1: blocked, context alive" \
    eval 'grep -q "^case=big launch_err=800 sync_err=0" "$T/bb-big.out" && grep -q "$AFTER_OK" "$T/bb-big.out"'
  if events bb-big; then
    check "buffers 2^31+1: count and offending index past INT32_MAX, not truncated" \
      qtrue bb-big "len(V) == 1 and V[0]['target']['count'] == 2**31 + 1 and V[0]['bad']['count'] == 1 and V[0]['bad']['samples'] == [{'index': 2**31, 'value': 200}] and V[0]['bad']['max'] == 200"
  else fail "buffers 2^31+1: JSONL schema"; fi
else
  echo "skip: buffers 2^31+1 (needs 8 GiB of available memory, $((avail_kb / 1024)) MiB here)"
fi
finish
