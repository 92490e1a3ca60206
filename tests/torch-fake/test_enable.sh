#!/usr/bin/env bash
# test_enable.sh: in-process arming (labelguard_enable, include/labelguard.h) with real torch on
# the runtime test double, through ctypes alone (tests/torch-fake/enable.py), for both wheels:
#   after   import torch and CUDA first, then load + enable: a bad label raises labelguard's
#           RuntimeError, the context lives on, last_violation has the offending pair, config and
#           config_check answer; a library dlopen'd after enable is guarded (CUDA 13:
#           build/progs/libnllpy.so; CUDA 12: build/e2e/libmix12.so, whose lines are checked
#           here); disable: the next bad launch runs and asserts; enable then returns -1.
#   before  load + enable before import torch, then the same bad label; disable + enable:
#           checked again.
#   dead    (CUDA 13, LABELGUARD_ACTION=log) the bad launch runs and asserts; a later enable
#           returns -1 naming the dead context.
#   fork    (CUDA 13) import torch, enable before any CUDA work: no CUDA call, no start event;
#           a forked child uses CUDA and its bad label is blocked; then the parent's. Before the
#           start waited for the first hook, enable initialised CUDA (the double:
#           initialised 1) and the child's first CUDA call failed ("CUDA driver initialization
#           failed"), as a real GPU's does.
# The library is never preloaded here: LD_PRELOAD is unset, the wrapper preloads the double only.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_enable.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
LIB="$LG_ROOT/$LG_BUILD/liblabelguard.so"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-enable.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG RANK LOCAL_RANK WORLD_SIZE
for f in "$LIB" "$LG_BUILD/progs/libnllpy.so" "$LG_BUILD/e2e/libmix12.so"; do
  [ -e "$f" ] || { echo "FAIL: $f missing: run make test-programs"; exit 1; }
done
rc=0
run() { # name, wheel, env..., -- args
  local name=$1 wheel=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  echo "== $name, CUDA $wheel wheel"
  env "${envs[@]}" TORCH_CUDA="$wheel" LABELGUARD_LOG="$T/$name$wheel" "$TP" tests/torch-fake/enable.py "$@" \
    >"$T/$name$wheel.out" 2>"$T/$name$wheel.err"
  local r=$?
  sed "s/^/[cuda$wheel $name] /" "$T/$name$wheel.out"
  if [ $r -ne 0 ] || grep -q '^FAIL' "$T/$name$wheel.out"; then
    rc=1; echo "FAIL: $name (rc $r)"; sed 's/^/  stderr: /' "$T/$name$wheel.err" | tail -n 20
  fi
}
for wheel in 13 12; do
  late="$LG_ROOT/$LG_BUILD/progs/libnllpy.so"
  [ $wheel = 12 ] && late="$LG_ROOT/$LG_BUILD/e2e/libmix12.so"
  run after $wheel LABELGUARD_QUIET=1 -- after "$LIB" "$late"
  if [ $wheel = 12 ]; then
    # libmix12 prints its own results: the launch blocked (800), nothing ran (no assert, 710).
    grep -q '^mix12 launch: 800$' "$T/after12.out" && grep -q '^mix12 sync: 0$' "$T/after12.out" \
      && echo "ok: libmix12, dlopen'd after enable, is guarded" \
      || { rc=1; echo "FAIL: libmix12 dlopen'd after enable was not guarded"; }
  fi
  run before $wheel -- before "$LIB"
  # Not quiet here: the violation's text is on stderr, but enable itself wrote nothing there
  # (labelguard_arm, its CLI twin, says "labelguard: armed N launch entries").
  if grep -q '^labelguard: armed\|^labelguard: arming' "$T/before$wheel.err"; then
    rc=1; echo "FAIL: enable wrote to stderr"
  else
    echo "ok: enable wrote nothing to stderr"
  fi
done
run dead 13 LABELGUARD_ACTION=log LABELGUARD_QUIET=1 -- dead "$LIB"
run fork 13 LABELGUARD_QUIET=1 -- fork "$LIB"
grep -q '^ok: child: its bad label is blocked' "$T/fork13.out" && grep -q '^ok: child: CUDA works' "$T/fork13.out" \
  || { rc=1; echo "FAIL: fork: the child's checks did not all pass"; }
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
