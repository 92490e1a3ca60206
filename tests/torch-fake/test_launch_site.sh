#!/usr/bin/env bash
# test_launch_site.sh: a verdict read after its launch names the launch's Python line. Real torch
# (both wheels) on the runtime test double, each kernel and host function taking 20 ms
# (FAKECUDA_ASYNC_US), so that the verdict of a bad batch is read steps later, inside
# opt.step() or at a sync, as on a busy GPU: async mode (raise) around F.nll_loss and around an
# nn.Embedding with padding_idx, and a CUDA graph replay (sync mode, raise). The JSON checks are in
# launch_site.py (one violation and one error per bad batch, python_stack at the launching line,
# verdict_read_at at a later one); this driver checks the stderr line "launched at FILE:LINE in
# FUNC; found ...". Run by tests/run.sh; alone: bash tests/torch-fake/test_launch_site.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-launch-site.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_LOG
script=tests/torch-fake/launch_site.py
line_of() { grep -n "# $1\$" "$script" | cut -d: -f1; }
rc=0
for wheel in 13 12; do
  for run in async:ce:MARK_LOSS:train_step async:embedding:MARK_EMB:forward sync:graph:MARK_CAPTURE:captured_step; do
    IFS=: read -r mode case mark fn <<<"$run"
    out="$T/$wheel-$case"
    mkdir -p "$out"
    env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$out" LABELGUARD_ACTION=raise LABELGUARD_MODE="$mode" \
      FAKECUDA_ASYNC_US="${LG_LAUNCH_SITE_LAG_US:-20000}" TORCH_CUDA=$wheel \
      "$TP" "$script" "$mode" "$out" "$case" >"$out.txt" 2>"$out.err"
    r=$?
    sed "s/^/[cuda$wheel $case] /" "$out.txt"
    [ "$(grep -c '^ok: ' "$out.txt")" -ge 6 ] && [ $r -eq 0 ] || { rc=1; sed "s/^/[cuda$wheel $case] err| /" "$out.err" | tail -15; }
    want="launched at $LG_ROOT/$script:$(line_of "$mark") in $fn; found "
    [ "$case" != embedding ] || want="  at $LG_ROOT/$script:$(line_of "$mark") in $fn   (python)"
    if grep -qF -- "$want" "$out.err"; then echo "[cuda$wheel $case] ok: stderr says '$want...'"
    else rc=1; echo "[cuda$wheel $case] FAIL: stderr lacks '$want...'"; grep -n "launched\|^  at " "$out.err" | head -5; fi
  done
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
