#!/usr/bin/env bash
# tests/run.sh: runs every GPU-free test and prints "N passed, N failed" as its last line.
# Called by `make test` with LG_BUILD (build dir) and LG_SANITIZER set. A test is:
#   - a GTest binary build/tests/unit/test_* (TAP output; its exit status decides),
#   - a script tests/{fakecuda,e2e,cli,torch,torch-fake,pip,fuzz,qemu}/test_*.sh (exit 0 pass, 77 skip, else fail);
#     tests/qemu runs the aarch64 build's under qemu-user.
# Each test's output goes to $LG_BUILD/test-logs/<name>.log and is shown when it fails.
# Then the suites in LG_ASYNC_SUITES (default: the list below) run a second time on the
# asynchronous double (FAKECUDA_ASYNC_US=$LG_ASYNC_US µs per kernel, default 500), named
# async:<dir>/<test>; LG_ASYNC_SUITES=none skips them, LG_TESTS=async: runs only them.
set -u
cd "$(dirname "$0")/.."
export LG_BUILD="${LG_BUILD:-build}"
export LG_ROOT="$PWD"
export LG_SANITIZER="${LG_SANITIZER:-}"
# The preload line a test uses: sanitizer runtimes must come first in LD_PRELOAD.
LG_PRELOAD="$PWD/$LG_BUILD/liblabelguard.so"
case "$LG_SANITIZER" in
  address) LG_PRELOAD="$(gcc -print-file-name=libasan.so) $LG_PRELOAD"
           export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}";;
  undefined) LG_PRELOAD="$(gcc -print-file-name=libubsan.so) $LG_PRELOAD"
           export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}";;
  thread) LG_PRELOAD="$(gcc -print-file-name=libtsan.so) $LG_PRELOAD";;
  address+undefined)
           LG_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so) $LG_PRELOAD"
           export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}"
           export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}";;
esac
export LG_PRELOAD
export LG_FAKE_DIR="$PWD/$LG_BUILD/fakecuda"
logs="$LG_BUILD/test-logs/run-$$"; mkdir -p "$logs"  # per run: concurrent runs must not clobber each other
pass=0; fail=0; skip=0; failed=()
only="${LG_TESTS:-}"   # optional filter: a substring of the test name

run_one() { # name, command...
  local name=$1; shift
  if [ -n "$only" ] && [[ "$name" != *"$only"* ]]; then return; fi
  local log="$logs/${name//\//_}.log" rc start end
  start=$(date +%s)
  # A hang guard far above the slowest run: qemu/* runs several suites under emulation, each
  # many times slower than natively, and on two loaded cores takes minutes; real torch on the
  # double (torch-fake/*) runs one process per case and wheel, up to 140 s on two idle cores
  # (test_bce) and past 300 s when they are shared.
  local limit=${LG_TEST_TIMEOUT:-300}
  case "$name" in qemu/*) limit=${LG_TEST_TIMEOUT:-1200} ;; *torch-fake/*) limit=${LG_TEST_TIMEOUT:-900} ;; esac
  timeout -k 5 "$limit" "$@" >"$log" 2>&1; rc=$?
  end=$(date +%s)
  if [ $rc -eq 0 ]; then pass=$((pass+1)); printf 'PASS %-50s %3ss\n' "$name" $((end-start))
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); printf 'SKIP %-50s (%s)\n' "$name" "$(tail -n1 "$log")"
  else fail=$((fail+1)); failed+=("$name"); printf 'FAIL %-50s rc=%s\n' "$name" $rc; sed 's/^/    | /' "$log" | tail -n 40; fi
}

for t in "$LG_BUILD"/tests/unit/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.d) continue;; esac
  run_one "unit/$(basename "$t")" "$t"
done
for dir in static fakecuda e2e cli torch torch-fake pip fuzz qemu; do
  for t in tests/$dir/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$dir/$(basename "$t" .sh)" bash "$t"
  done
done
# Suites that must hold on a device that runs behind the host, as a GPU does.
async_default="e2e/test_delivery e2e/test_delivery_steps e2e/test_graphs e2e/test_graph_execs e2e/test_threads e2e/test_notready
  e2e/test_tsan fakecuda/test_threads_fork torch-fake/test_async torch-fake/test_raise
  torch-fake/test_graphs"
async_suites="${LG_ASYNC_SUITES:-$async_default}"
[ "$async_suites" = none ] && async_suites=""
for t in $async_suites; do
  if [ -n "$only" ] && [[ "async:$t" != *"$only"* ]]; then continue; fi
  [ -f "tests/$t.sh" ] || { fail=$((fail+1)); failed+=("async:$t"); printf 'FAIL %-50s (no tests/%s.sh)\n' "async:$t" "$t"; continue; }
  run_one "async:$t" env FAKECUDA_ASYNC_US="${LG_ASYNC_US:-500}" bash "tests/$t.sh"
done
[ ${#failed[@]} -eq 0 ] || printf 'failed: %s\n' "${failed[*]}"
[ $skip -eq 0 ] || printf '%d skipped\n' $skip
printf '%d passed, %d failed\n' $pass $fail
[ $fail -eq 0 ]
