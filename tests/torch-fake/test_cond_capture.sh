#!/usr/bin/env bash
# test_cond_capture.sh: torch.cond captured into CUDA graph conditional nodes (torch 2.15, CUDA 13
# wheel; 2.10 has no conditional-node capture) with an NLL forward in a branch
# (tests/torch-fake/cond_capture.py). A conditional node's body takes no host node, so the host
# backend's captured check must not go there:
#   plain (no labelguard) -> captured and replayed (the double's conditional nodes work for torch);
#   labelguard -> captured and replayed too, with one capture_unchecked warning for the NLL kernel
#       that says why, and no violation.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_cond_capture.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-cond.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_QUIET LABELGUARD_LOG
rc=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; rc=1; }

TORCH_CUDA=13 "$TP" tests/torch-fake/cond_capture.py >"$T/plain.out" 2>"$T/plain.err"
sed 's/^/[plain] /' "$T/plain.out"
grep -qx replayed "$T/plain.out" && ok "plain: captured and replayed" || { bad "plain: not replayed"; tail -5 "$T/plain.err"; }

LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$T/logs" TORCH_CUDA=13 "$TP" tests/torch-fake/cond_capture.py \
  >"$T/lg.out" 2>"$T/lg.err"
sed 's/^/[labelguard] /' "$T/lg.out"
grep -qx replayed "$T/lg.out" && ok "labelguard: captured and replayed" || { bad "labelguard: not replayed"; tail -5 "$T/lg.err"; }
if python3 tests/e2e/jsonl_check.py "$T/logs" >"$T/events.json" 2>"$T/schema.err"; then
  python3 - "$T/events.json" <<'PY' || rc=1
import json, sys
E = json.load(open(sys.argv[1]))
W = [e for e in E if e["event"] == "warning"]
V = [e for e in E if e["event"] == "violation"]
cu = [w for w in W if w["what"] == "capture_unchecked"]
good = len(cu) == 1 and "nll_loss" in cu[0]["detail"] and "cudaStreamBeginCaptureToGraph" in cu[0]["detail"] \
    and "host node" in cu[0]["detail"] and not V
print(("ok: " if good else "FAIL: ") + "labelguard: one capture_unchecked for the NLL kernel, naming the reason; no violation")
if not good:
    print("  warnings: %s; violations: %d" % ([(w["what"], w["detail"][:160]) for w in W], len(V)))
sys.exit(0 if good else 1)
PY
else
  bad "labelguard: log schema"; cat "$T/schema.err"
fi
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
