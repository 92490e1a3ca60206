#!/usr/bin/env bash
# test_mixed_runtimes.sh: a process holding two CUDA runtimes sends each caller's calls to its
# own. build/e2e/mixed_main (CUDA 13, tests/e2e/progs/mixed_main.cu) dlopens
# build/e2e/libmix12.so (linked against libcudart.so.12, tests/e2e/progs/libmix12.c); both
# launch nll_loss_forward_reduce_cuda_kernel_2d with one label == n_classes, under the test
# double's two builds (build/fakecuda: libcudart.so.13, build/fakecuda12: libcudart.so.12).
# Each double has its own kernel registry and memory, so a call sent to the wrong runtime
# shows: the CUDA 12 library's kernel would be registered in the CUDA 13 runtime
# (cudaFuncGetName through libcudart.so.12 fails), run there (its own sync misses the assert)
# and its labels, in CUDA 12 memory, could not be checked (validate_failed).
#   log   -> two violations (outcome launched), each runtime's sync reports its own assert (710),
#            the CUDA 12 registration reached libcudart.so.12, no validate_failed;
#   raise -> two violations (blocked), each launch returns 800 on its own runtime, syncs 0;
#   async raise -> both launches run on a masked copy made through their own runtime, and
#            each caller's next cudaGetLastError returns 800;
#   good labels -> no violation, syncs 0.
# Called by tests/run.sh; alone: bash tests/e2e/test_mixed_runtimes.sh
. "$(dirname "$0")/lib.sh"
PROG="$LG_ROOT/$LG_BUILD/e2e/mixed_main"
LIB12="$LG_ROOT/$LG_BUILD/e2e/libmix12.so"
FAKE12="$LG_ROOT/$LG_BUILD/fakecuda12"
need "$PROG" "$LIB12" "$FAKE12/libcudart.so.12"
export LD_LIBRARY_PATH="$LG_FAKE_DIR:$FAKE12"
export LABELGUARD_QUIET=1

# line NAME TEXT: the program printed exactly this line
line() { grep -qx "$2" "$T/$1.out"; }

run_plain plain "$PROG" "$LIB12" bad
check "unguarded: both kernels assert in their own runtime" \
  bash -c "grep -qx 'main sync: 710' '$T/plain.out' && grep -qx 'mix12 sync: 710' '$T/plain.out' && grep -qx 'mix12 registered: 0' '$T/plain.out'"

LABELGUARD_ACTION=log run_lg log "$PROG" "$LIB12" bad
cat "$T/log.out"
check "log: exit 0" [ "$(rc_of log)" = 0 ]
check "log: the CUDA 12 registration reached libcudart.so.12" line log 'mix12 registered: 0'
check "log: the CUDA 13 kernel ran on libcudart.so.13" line log 'main sync: 710'
check "log: the CUDA 12 kernel ran on libcudart.so.12" line log 'mix12 sync: 710'
events log || fail "log: log schema"
check "log: two violations, both launched" qtrue log '[v["outcome"] for v in V] == ["launched", "launched"]'
check "log: the CUDA 12 labels were checked (no validate_failed)" qtrue log 'not [w for w in W if w["what"] == "validate_failed"]'

LABELGUARD_ACTION=raise run_lg raise "$PROG" "$LIB12" bad
cat "$T/raise.out"
check "raise: the CUDA 13 launch blocked" bash -c "grep -qx 'main launch: 800' '$T/raise.out' && grep -qx 'main sync: 0' '$T/raise.out'"
check "raise: the CUDA 12 launch blocked" bash -c "grep -qx 'mix12 launch: 800' '$T/raise.out' && grep -qx 'mix12 sync: 0' '$T/raise.out'"
events raise || fail "raise: log schema"
check "raise: two violations, both blocked" qtrue raise '[v["outcome"] for v in V] == ["blocked", "blocked"]'

# Async mode: each check runs on its caller's runtime (the masked copy uploaded through it,
# into its memory), and each verdict reaches the launching caller's next error check.
LABELGUARD_ACTION=raise LABELGUARD_MODE=async run_lg async "$PROG" "$LIB12" bad
cat "$T/async.out"
check "async: the CUDA 13 verdict at its next check" bash -c "grep -qx 'main launch: 800' '$T/async.out' && grep -qx 'main sync: 0' '$T/async.out'"
check "async: the CUDA 12 verdict at its next check" bash -c "grep -qx 'mix12 launch: 800' '$T/async.out' && grep -qx 'mix12 sync: 0' '$T/async.out'"
events async || fail "async: log schema"
check "async: both launches ran on a masked copy" qtrue async '[v["outcome"] for v in V] == ["masked", "masked"]'
check "async: no warning" qtrue async 'not W'

run_lg good "$PROG" "$LIB12" good
check "good labels: both syncs 0" bash -c "grep -qx 'main sync: 0' '$T/good.out' && grep -qx 'mix12 sync: 0' '$T/good.out' && grep -qx 'mix12 registered: 0' '$T/good.out'"
events good || fail "good: log schema"
check "good labels: no violation, no warning" qtrue good 'not V and not W'
finish
