#!/usr/bin/env bash
# tests/run.sh: runs every GPU-free test and prints "N passed, N failed" as its last line.
# Called by `make test` with LG_BUILD (build dir) and LG_SANITIZER set. A test is:
#   - a GTest binary build/tests/unit/test_* (TAP output; its exit status decides),
#   - a script tests/{fakecuda,e2e,cli,torch,torch-fake,pip,fuzz,qemu}/test_*.sh (exit 0 pass, 77 skip, else fail);
#     tests/qemu runs the aarch64 build's under qemu-user.
# Each test's output goes to $LG_BUILD/test-logs/run-PID/<name>.log and is shown when it fails.
# LG_JOBS tests run at once (default: nproc); each prints its line when it ends.
# Then the suites in LG_ASYNC_SUITES (default: the list below) run a second time on the
# asynchronous double (FAKECUDA_ASYNC_US=$LG_ASYNC_US µs per kernel, default 500), named
# async:<dir>/<test>; LG_ASYNC_SUITES=none skips them, LG_TESTS=async: runs only them.
set -u
cd "$(dirname "$0")/.." || exit 1
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
only="${LG_TESTS:-}"   # optional filter: a substring of the test name
# Tests run LG_JOBS at a time (default: one per core). Each has its own temporary files, logs
# and mount namespace, so none waits for another; a test that fails only beside
# another is a timing assumption or a race, and a bug (tests/stress.sh finds them).
jobs_max=${LG_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$jobs_max" -ge 1 ] 2>/dev/null || jobs_max=1
results="$logs/results"; : >"$results"
# Inductor's cache is the run's own, shared by its tests (Inductor locks its entries; a test
# that needs a cache of its own names one): what an earlier run or another checkout compiled
# must not decide what this run sees, and the run costs what it costs on a fresh machine.
export TORCHINDUCTOR_CACHE_DIR="$PWD/$logs/inductor"
trap 'rm -rf "$PWD/$logs/inductor"' EXIT
names=() cmds=()

add() { # name, command...: queue one test
  local name=$1; shift
  if [ -n "$only" ] && [[ "$name" != *"$only"* ]]; then return; fi
  names+=("$name"); cmds+=("$(printf '%q ' "$@")")
}

run_one() { # name, command (one string, quoted by add): run, then print its line under a lock
  local name=$1 cmd=$2 base="${1//[\/:]/_}"
  local log="$logs/$base.log" rc start end line
  start=$(date +%s)
  # A hang guard far above the slowest run: qemu/* runs several suites under emulation, each
  # many times slower than natively, and on two loaded cores takes minutes; real torch on the
  # double (torch-fake/*) runs one process per case and wheel, up to 170 s on two idle cores
  # (test_bce) and past 300 s when they are shared.
  local limit=${LG_TEST_TIMEOUT:-300}
  case "$name" in qemu/*) limit=${LG_TEST_TIMEOUT:-1200} ;; *torch-fake/*) limit=${LG_TEST_TIMEOUT:-900} ;; esac
  eval "timeout -k 5 $limit $cmd" >"$log" 2>&1; rc=$?
  end=$(date +%s)
  {
    flock 8
    if [ $rc -eq 0 ]; then line="PASS $name"; printf 'PASS %-50s %3ss\n' "$name" $((end-start))
    elif [ $rc -eq 77 ]; then line="SKIP $name"; printf 'SKIP %-50s (%s)\n' "$name" "$(tail -n1 "$log")"
    else line="FAIL $name"; printf 'FAIL %-50s rc=%s\n' "$name" $rc; sed 's/^/    | /' "$log" | tail -n 40; fi
    printf '%s\n' "$line" >>"$results"
  } 8>>"$logs/.print.lock"
}

for t in "$LG_BUILD"/tests/unit/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.d) continue;; esac
  add "unit/$(basename "$t")" "$t"
done
for dir in static fakecuda e2e cli torch torch-fake pip fuzz qemu; do
  for t in tests/"$dir"/test_*.sh; do
    [ -f "$t" ] || continue
    add "$dir/$(basename "$t" .sh)" bash "$t"
  done
done
# Suites that must hold on a device that runs behind the host, as a GPU does.
async_default="e2e/test_delivery e2e/test_delivery_steps e2e/test_graphs e2e/test_graph_execs e2e/test_threads e2e/test_notready
  e2e/test_tsan fakecuda/test_threads_fork torch-fake/test_async torch-fake/test_raise
  torch-fake/test_graphs"
async_suites="${LG_ASYNC_SUITES:-$async_default}"
[ "$async_suites" = none ] && async_suites=""
missing=()
for t in $async_suites; do
  if [ -n "$only" ] && [[ "async:$t" != *"$only"* ]]; then continue; fi
  if [ -f "tests/$t.sh" ]; then add "async:$t" env FAKECUDA_ASYNC_US="${LG_ASYNC_US:-500}" bash "tests/$t.sh"
  else missing+=("async:$t"); printf 'FAIL %-50s (no tests/%s.sh)\n' "async:$t" "$t"; fi
done

# The long ones first (emulated aarch64, real torch), so that the last to finish is a short one.
order=()
for pass_ in long rest; do
  for i in "${!names[@]}"; do
    case "${names[$i]}" in qemu/*|*torch-fake/*|pip/*|torch/*) long=1 ;; *) long=0 ;; esac
    if { [ $pass_ = long ] && [ $long = 1 ]; } || { [ $pass_ = rest ] && [ $long = 0 ]; }; then order+=("$i"); fi
  done
done
for i in "${order[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  run_one "${names[$i]}" "${cmds[$i]}" &
done
wait

pass=$(grep -c '^PASS ' "$results"); skip=$(grep -c '^SKIP ' "$results")
mapfile -t failed < <(sed -n 's/^FAIL //p' "$results"; printf '%s\n' "${missing[@]+"${missing[@]}"}" | sed '/^$/d')
fail=${#failed[@]}
[ "$fail" -eq 0 ] || printf 'failed: %s\n' "${failed[*]}"
[ "$skip" -eq 0 ] || printf '%d skipped\n' "$skip"
printf '%d passed, %d failed\n' "$pass" "$fail"
[ "$fail" -eq 0 ]
