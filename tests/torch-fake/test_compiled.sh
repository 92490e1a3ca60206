#!/usr/bin/env bash
# test_compiled.sh: torch.compile'd losses checked inside the compiled graph (labelguard::check_target,
# python/labelguard/_compiled.py, src/hooks/api_check.c), real torch 2.15 on the runtime test double
# (raise also on 2.10, TORCH_CUDA=12),
# each mode of tests/torch-fake/compiled.py in its own process under `labelguard run` (so the
# bootstrap sitecustomize is what arms it):
#   plain  (no labelguard) the raise graph compiled into the shared Inductor cache first, which
#          the raise run must not reuse unchecked (labelguard is in the cache key)
#   raise  one check op (the backward's merged into the forward's), before the fused kernel; a bad label
#          raises labelguard's RuntimeError and is logged; the op on CUDA memory raises too
#   mask   the compiled loss equals eager's with the bad labels masked; the CUDA op masks,
#          also in every replay of a captured graph
#   late   labelguard.enable() after a compile (no preload): the recompiled graph checks
#   off    LABELGUARD_COMPILED=off: no check op, one unchecked_loss_kernel warning
#   step   a compiled training step (2.15; step12 on 2.10): one check op, the forward loss's, and a
#          bad label reported as nll_loss_forward, its stderr `at` line the step in compiled.py
#   bare   raise under a bare LD_PRELOAD (no `labelguard run`): checked all the same; and under
#          python -S (no sitecustomize, so no bootstrap) the start event claims no check op
# and a bad LABELGUARD_COMPILED value (empty included) stops `labelguard run` with the message.
# The double has no Triton: the graphs are CPU graphs (Inductor's C++ backend), their code read
# with run_and_get_code. Slow (an Inductor compile each, ~1 min here).
# This file runs plain, raise and config; test_compiled_mask.sh mask and off; test_compiled_late.sh
# late; test_compiled_210.sh raise12; test_compiled_step.sh step and step12; test_compiled_bare.sh
# bare (bash test_compiled.sh PART... runs the parts named).
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
  env LABELGUARD_QUIET=1 "${envs[@]}" "$LG_ROOT/scripts/labelguard" run --log "$T/$name" -- \
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
  step|step12)
    # A compiled training step, with stderr: the report's `at` line is the step, in compiled.py.
    run "$part" LABELGUARD_QUIET=0 LABELGUARD_ACTION=raise $([ "$part" = step12 ] && echo TORCH_CUDA=12) -- step
    if grep -q "^  at $LG_ROOT/tests/torch-fake/compiled.py:[0-9]* in step   (python)$" "$T/$part.err"; then
      echo "ok: $part: the stderr at line is the compiled step in compiled.py"
    else
      rc=1; echo "FAIL: $part: the stderr at line is not the step's:"; grep '^  at ' "$T/$part.err"
    fi ;;
  bare)
    # A bare LD_PRELOAD, no `labelguard run`: the library's constructor gives the interpreter the
    # bootstrap, and the compiled loss is checked as under `labelguard run`.
    echo "== bare"
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$T/bare" LABELGUARD_QUIET=1 LABELGUARD_ACTION=raise \
      "$TP" tests/torch-fake/compiled.py raise >"$T/bare.out" 2>"$T/bare.err"; r=$?
    sed "s/^/[bare] /" "$T/bare.out"
    if [ $r -ne 0 ] || grep -q '^FAIL' "$T/bare.out" || ! grep -q '^ok' "$T/bare.out"; then
      rc=1; echo "FAIL: bare (rc $r)"; tail -n 15 "$T/bare.err"
    fi
    # Where the bootstrap cannot run (python -S skips sitecustomize), the start event claims nothing.
    # (A bad eager label, so that the log and its start event are written.)
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$T/isolated" LABELGUARD_QUIET=1 "$TP" -S -c 'import torch
try:
    torch.nn.functional.nll_loss(torch.randn(4, 3).cuda(), torch.tensor([0, 1, 5, 2]).cuda())
    torch.cuda.synchronize()
except RuntimeError:
    pass' >"$T/isolated.out" 2>&1
    claim=$(cat "$T"/isolated/*.jsonl 2>/dev/null | "$TP" -c 'import json, sys
print(next((json.loads(l).get("compiled", "") for l in sys.stdin if "\"start\"" in l), "(no start event)"))')
    case $claim in
      "none: this interpreter does not run labelguard's bootstrap"*) echo "ok: python -S: the start event claims no check op";;
      *) rc=1; echo "FAIL: python -S: the start event's compiled line: $claim"; tail -5 "$T/isolated.out";;
    esac ;;
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
