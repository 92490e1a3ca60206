#!/usr/bin/env bash
# test_tsan.sh: the 16-thread test under ThreadSanitizer. The library, the
# runtime test double and the threads program are built with -fsanitize=thread into
# build-thread/ (make SANITIZER=thread; the embedded validator fatbin is copied from the
# current build when it is up to date, so no nvcc fatbin run), then build/progs/threads runs
# with 16 threads on 16 streams, watched and unwatched kernels, bad labels at random positions,
# for raise, mask and async, through <<<>>> and cudaLaunchKernel. Any TSan report fails
# (exitcode 66); the runs must also report every bad launch (the program's count).
# Under `make test SANITIZER=thread` the build directory is already the TSan one.
. "$(dirname "$0")/lib.sh"
case "${LG_SANITIZER:-}" in
  ""|thread) ;;
  *) echo "not with SANITIZER=$LG_SANITIZER (one sanitizer runtime per process)"; exit 77;;
esac
TB=build-thread
[ "${LG_SANITIZER:-}" = thread ] && TB="$LG_BUILD"
libtsan=$(gcc -print-file-name=libtsan.so)
[ -f "$libtsan" ] || { echo "libtsan not found (Debian package libgcc-12-dev)"; exit 77; }
cd "$LG_ROOT" || exit 1
if [ "${LG_SANITIZER:-}" != thread ]; then
  mkdir -p "$TB"
  for src in "$LG_BUILD/validate.fatbin" build/validate.fatbin; do
    if [ -f "$src" ] && [ "$src" -nt cuda/validate.cu ] && [ "$src" -nt cuda/lg_scan.h ] && [ "$src" -nt cuda/lg_validate.h ] &&
       { [ ! -f "$TB/validate.fatbin" ] || [ "$src" -nt "$TB/validate.fatbin" ]; }; then
      cp -p "$src" "$TB/validate.fatbin"; break
    fi
  done
  start=$(date +%s)
  if ! make --no-print-directory -s SANITIZER=thread -j2 "$TB/liblabelguard.so" "$TB/fakecuda/libcudart.so.13" \
       "$TB/progs/threads" "$TB/progs/threads_legacy" >"$T/build.log" 2>&1; then
    cat "$T/build.log"; echo "FAIL: the ThreadSanitizer build failed"; exit 1
  fi
  echo "ThreadSanitizer build: $(( $(date +%s) - start )) s"
fi
export LD_LIBRARY_PATH="$LG_ROOT/$TB/fakecuda"
PRE="$libtsan $LG_ROOT/$TB/liblabelguard.so"
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
for prog in threads threads_legacy; do
  for cfg in "sync raise" "sync mask" "async raise" "async mask"; do
    read -r mode action <<<"$cfg"
    id="$prog-$mode-$action"
    rm -rf "$T/$id.logs"
    LABELGUARD_MODE=$mode LABELGUARD_ACTION=$action LABELGUARD_LOG="$T/$id.logs" LD_PRELOAD="$PRE" \
      timeout -k 5 120 "$LG_ROOT/$TB/progs/$prog" --seed 3 --iters 12 >"$T/$id.out" 2>"$T/$id.err"
    rc=$?
    check "$id: no ThreadSanitizer report (rc $rc)" eval '[ "$rc" != 66 ] && ! grep -q "WARNING: ThreadSanitizer" "$T/$id.err"'
    grep -A24 'WARNING: ThreadSanitizer' "$T/$id.err" | head -50
    check "$id: finished (no deadlock)" grep -q '^summary launches=384 ' "$T/$id.out"
    nbad=$(grep -c 'kernel=watched bad_index=[0-9]' "$T/$id.out")
    if events "$id"; then
      check "$id: each of the $nbad bad launches reported once" qtrue "$id" "len(V) == $nbad and $nbad > 0"
    else fail "$id: JSONL schema"; fi
  done
done
finish
