#!/usr/bin/env bash
# test_compiled.sh: torch.compile'd losses checked inside the compiled graph (labelguard::check_target,
# python/labelguard/_compiled.py, src/api_check.c), real torch 2.15 on the runtime test double
# (raise also on 2.10, TORCH_CUDA=12),
# each mode of tests/torch-fake/compiled.py in its own process under `labelguard run` (so the
# bootstrap sitecustomize is what arms it):
#   plain  (no labelguard) the raise graph compiled into the shared Inductor cache first, which
#          the raise run must not reuse unchecked (labelguard is in the cache key)
#   raise  check ops in the forward and backward code, before the fused kernel; a bad label
#          raises labelguard's RuntimeError and is logged; the op on CUDA memory raises too
#   mask   the compiled loss equals eager's with the bad labels masked; the CUDA op masks,
#          also in every replay of a captured graph
#   late   labelguard.enable() after a compile (no preload): the recompiled graph checks
#   off    LABELGUARD_COMPILED=off: no check op, one unchecked_loss_kernel warning
# and a bad LABELGUARD_COMPILED value (empty included) stops `labelguard run` with the message.
# The double has no Triton: the graphs are CPU graphs (Inductor's C++ backend), their code read
# with run_and_get_code. Slow (an Inductor compile each, ~1 min here).
# This file runs plain, raise and config; test_compiled_mask.sh mask and off; test_compiled_late.sh
# late; test_compiled_210.sh raise12 (bash test_compiled.sh PART... runs the parts named).
# Run by tests/run.sh; alone: bash tests/torch-fake/test_compiled.sh [PART...]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-compiled.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_COMPILED LABELGUARD_QUIET
export LABELGUARD_LIB="$LG_PRELOAD"
# A cache of our own: a graph compiled by another run must not stand in for this one.
export TORCHINDUCTOR_CACHE_DIR="$T/inductor"
rc=0
run() { # name, env..., -- compiled.py args
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  echo "== $name"
  env "${envs[@]}" LABELGUARD_QUIET=1 "$LG_ROOT/scripts/labelguard" run --log "$T/$name" -- \
    "$TP" tests/torch-fake/compiled.py "$@" >"$T/$name.out" 2>"$T/$name.err"
  local r=$?
  sed "s/^/[$name] /" "$T/$name.out"
  if [ $r -ne 0 ] || grep -q '^FAIL' "$T/$name.out" || ! grep -q '^ok' "$T/$name.out"; then
    rc=1; echo "FAIL: $name (rc $r)"; tail -n 25 "$T/$name.err" | sed 's/^/  stderr: /'
  fi
}
# The parts to run (each an Inductor compile or two, about a minute here): all three test files
# share this one, each with its parts, so that none runs past tests/run.sh's time limit.
parts=${*:-plain raise config}
for part in $parts; do
  case $part in
  plain)
    # The same graph compiled without labelguard first, into the same cache: raise must not get it.
    echo "== plain"
    env -u LD_PRELOAD "$TP" tests/torch-fake/compiled.py plain >"$T/plain.out" 2>"$T/plain.err" ||
      { rc=1; echo "FAIL: plain"; tail -n 5 "$T/plain.err"; }
    sed "s/^/[plain] /" "$T/plain.out" ;;
  raise) run raise LABELGUARD_ACTION=raise -- raise ;;
  raise12) run raise12 TORCH_CUDA=12 LABELGUARD_ACTION=raise -- raise ;;
  mask) run mask LABELGUARD_ACTION=mask -- mask ;;
  off) run off LABELGUARD_COMPILED=off -- off ;;
  late)
    # labelguard.enable() in a process that compiled before it (the library not preloaded).
    echo "== late"
    env -u LD_PRELOAD LABELGUARD_LOG="$T/late" PYTHONPATH="$LG_ROOT/python" "$TP" tests/torch-fake/compiled.py late \
      >"$T/late.out" 2>"$T/late.err"; r=$?
    sed "s/^/[late] /" "$T/late.out"
    if [ $r -ne 0 ] || grep -q '^FAIL' "$T/late.out"; then rc=1; echo "FAIL: late (rc $r)"; tail -n 15 "$T/late.err"; fi ;;
  config)
    for bad in "" yes ON; do
      out=$(LABELGUARD_COMPILED="$bad" "$LG_ROOT/scripts/labelguard" run -- true 2>&1); r=$?
      if [ $r -eq 2 ] && printf '%s' "$out" | grep -q "LABELGUARD_COMPILED=\"$bad\" is not valid; allowed: on, off"; then
        echo "ok: LABELGUARD_COMPILED='$bad' stops labelguard run with the message"
      else
        rc=1; echo "FAIL: LABELGUARD_COMPILED='$bad': rc $r: $out"
      fi
    done ;;
  *) echo "FAIL: unknown part $part"; rc=1 ;;
  esac
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
