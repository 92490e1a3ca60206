#!/usr/bin/env bash
# test_valgrind.sh: a representative subset of the end-to-end runs
# under Valgrind memcheck with the library preloaded: every decoded kernel shape (reduce, none,
# accessor with a row stride, 2-D, backward), every action that lets the program go on (raise,
# mask, log; sync and async), a layout mismatch, pathological label buffers, 4 threads on 4
# streams, and a fork child that launches. Invalid reads/writes, uses of uninitialised values,
# bad frees and definite leaks are errors (--error-exitcode=99); each run must also end exactly
# as it does without Valgrind. No suppression is needed (there is no suppression file).
# Helgrind is not used: it does not model C11 atomics (acquire/release on the kernel cache and
# the resolved-function pointers) and reports each as a race; tests/e2e/test_tsan.sh does.
. "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || { echo "valgrind not installed (Debian package valgrind)"; exit 77; }
[ -z "${LG_SANITIZER:-}" ] || { echo "not with SANITIZER=$LG_SANITIZER (Valgrind and sanitizer runtimes exclude each other)"; exit 77; }
VG=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --child-silent-after-fork=no)

# the program's result lines, in order of their kind, without the log file name (it has the pid)
results() { grep -E '^(result|values|after|case|launch |summary|child|parent)' "$1" | sed -E 's|[^ "]*\.jsonl||g' | sort; }
vg() { # NAME ENV... -- PROG ARGS...: the run with and without Valgrind; compares the endings
  local n=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  run_lg "$n-ref" timeout 60 env "${envs[@]}" "$@"
  run_lg "$n" timeout 120 env "${envs[@]}" "${VG[@]}" "$@"
  local rc ref; rc=$(rc_of "$n"); ref=$(rc_of "$n-ref")
  check "$n: memcheck clean (rc $rc)" [ "$rc" != 99 ]
  [ "$rc" != 99 ] || grep '^==' "$T/$n.err" | head -30
  check "$n: same exit status as without Valgrind ($ref)" [ "$rc" = "$ref" ]
  check "$n: same results as without Valgrind" cmp -s <(results "$T/$n.out") <(results "$T/$n-ref.out")
  events "$n" || fail "$n: JSONL schema"
}
NLL="$PROGS/nll"
vg fwd_2d-raise -- "$NLL" fwd_2d --classes 3 0 1 7 2
check "fwd_2d-raise: the violation was reported" qtrue fwd_2d-raise "len(V) == 1 and V[0]['outcome'] == 'blocked'"
vg fwd_none-u8-mask LABELGUARD_ACTION=mask -- "$NLL" fwd_none --dtype uint8 --classes 5 0 1 9 2 3
check "fwd_none-u8-mask: masked" qtrue fwd_none-u8-mask "len(V) == 1 and V[0]['outcome'] == 'masked'"
vg 2d_fwd_none-stride -- "$NLL" 2d_fwd_none --classes 5 --hw 2,4 --stride 6 0 1 2 3 4 0 1 2 3 4 0 1 2 3 9 0
check "2d_fwd_none-stride: the bad label, not the padding" \
  qtrue 2d_fwd_none-stride "len(V) == 1 and V[0]['bad']['count'] == 1 and V[0]['bad']['samples'][0]['value'] == 9"
vg bwd_2d-log LABELGUARD_ACTION=log -- "$NLL" bwd_2d --classes 3 --weights on 0 1 5 2
vg 2d_fwd-async LABELGUARD_MODE=async -- "$NLL" 2d_fwd --classes 5 --hw 2,4 0 1 2 3 4 0 1 7
vg fwd_1d-async-mask LABELGUARD_MODE=async LABELGUARD_ACTION=mask -- "$NLL" fwd_1d --classes 3 -1
vg mismatch -- "$NLL" mismatch_fwd_2d --classes 3 0 1 7 2
vg legacy-raise -- "$PROGS/nll_legacy" fwd_2d --classes 3 --repeat 3 0 1 7 2
BB="$LG_ROOT/$LG_BUILD/e2e/bad_buffers"
for c in null host zero classes_neg; do vg "buffers-$c" -- "$BB" $c; done
vg threads -- "$PROGS/threads" --threads 4 --iters 4
# (async raise delivers the error at the next hook point of whichever thread comes first: not
# the same launch from run to run; async mask is deterministic)
vg threads-async LABELGUARD_MODE=async LABELGUARD_ACTION=mask -- "$PROGS/threads" --threads 4 --iters 4
vg fork FAKECUDA_FORK_OK=1 -- "$PROGS/forker" --bad --child-bad
finish
