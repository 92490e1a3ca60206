# tests/torch-fake/lib.sh: sourced by the real-torch tests (tests/torch-fake/test_*.sh). Its
# prologue sets LG_ROOT, LG_BUILD, LG_PRELOAD and TP (build/torch-python), exported by
# tests/run.sh or defaulted for a run by hand. Exits 77 in a sanitizer build (its double needs the
# sanitizer runtime loaded first, which Python does not have) and 1 when build/torch-python is
# missing: a missing torch is a failure, never a skip. lg_run_cases is the loop of the drivers
# whose checks live in a case script. Tested by running those tests: a broken prologue or loop
# fails or empties every one of them.
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
LG_PRELOAD="${LG_PRELOAD:-$LG_ROOT/$LG_BUILD/liblabelguard.so}"
TP="$LG_ROOT/$LG_BUILD/torch-python"
[ -z "${LG_SANITIZER:-}" ] || { echo "real torch runs in the plain build only (LG_SANITIZER=$LG_SANITIZER)"; exit 77; }
[ -x "$TP" ] || { echo "FAIL: $TP missing: run make build/torch-python"; exit 1; }

# lg_run_cases SCRIPT RUN...: runs `tests/torch-fake/SCRIPT MODE OUT [CASE]` under $TP, from
# LG_ROOT, for each wheel (CUDA 13, then 12) and each RUN (MODE or MODE:CASE), one process each
# with a fresh LABELGUARD_LOG directory OUT; the script judges and prints "ok: ..." / "FAIL: ...".
# MODE picks how labelguard is preloaded: plain, not at all; async, raise with
# LABELGUARD_MODE=async; control (valid data only), raise; any other MODE is LABELGUARD_ACTION.
# Shows each run's stdout as "[cudaW RUN] ...", and the tail of its stderr when it fails: when
# the script exits non-zero, or prints fewer "ok: " lines than LG_MIN_OK (a run without CASE) or
# LG_MIN_OK_CASE (one with), both 0 unless the caller sets them: a script that can end early
# with status 0 sets them, so that it cannot pass on the checks it printed before.
# Prints "all checks passed" and returns 0, or "checks failed" and returns 1.
lg_run_cases() {
  local script=$1 rc=0 wheel run mode name out r n min
  local -a lg
  shift
  cd "$LG_ROOT" || return 1
  LG_CASES_TMP="$(mktemp -d "${TMPDIR:-/tmp}/lg-${script%.py}.XXXXXX")" || return 1
  trap 'rm -rf "$LG_CASES_TMP"' EXIT
  # each run sets its own labelguard environment: none of the caller's may leak into it
  unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
        LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_DEBUG_KERNELS LABELGUARD_LOG
  for wheel in 13 12; do
    for run in "$@"; do
      mode="${run%%:*}" name=""
      [ "$mode" = "$run" ] || name="${run#*:}"
      out="$LG_CASES_TMP/$wheel-$mode${name:+-$name}"
      mkdir -p "$out"
      case $mode in
        plain) lg=() ;;
        async) lg=(LABELGUARD_ACTION=raise LABELGUARD_MODE=async) ;;
        control) lg=(LABELGUARD_ACTION=raise LABELGUARD_MODE=sync) ;;
        *) lg=(LABELGUARD_ACTION="$mode" LABELGUARD_MODE=sync) ;;
      esac
      [ "$mode" = plain ] || lg+=(LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$out" LABELGUARD_QUIET=1)
      env "${lg[@]}" TORCH_CUDA=$wheel "$TP" "tests/torch-fake/$script" "$mode" "$out" ${name:+"$name"} >"$out.txt" 2>"$out.err"
      r=$?
      sed "s/^/[cuda$wheel $run] /" "$out.txt"
      n=$(grep -c '^ok: ' "$out.txt")
      min=${LG_MIN_OK:-0}
      [ -z "$name" ] || min=${LG_MIN_OK_CASE:-0}
      if [ $r -ne 0 ] || [ "$n" -lt "$min" ]; then
        rc=1; sed "s/^/[cuda$wheel $run] err| /" "$out.err" | tail -15
      fi
    done
  done
  [ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
  return $rc
}
