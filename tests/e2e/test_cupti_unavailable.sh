#!/usr/bin/env bash
# test_cupti_unavailable.sh: CUPTI is tried only where it is wanted, and CUPTI without a driver
# (this machine, CI) is one `warning` event. Runs tests/e2e/progs/attach_target.cu --now (a
# clean launch of nll_loss_forward_reduce_cuda_kernel_2d, then one with a label == n_classes)
# under the runtime test double with the library preloaded:
#   LABELGUARD_HOOKS=auto      -> interposition sees the launches, so CUPTI is not tried: no
#                                  cupti_unavailable warning; the bad launch caught by
#                                  interposition (a violation, launch blocked);
#   LABELGUARD_HOOKS=interpose -> no CUPTI warning at all, same violation;
#   LABELGUARD_HOOKS=cupti     -> exactly one cupti_unavailable warning saying no hook layer is
#                                  left; nothing is checked (no violation; the launch runs and
#                                  the double's kernel asserts: sync 710).
# Whether libcupti is found (cuptiSubscribe then fails) or not, the warning must be there once.
# Called by tests/run.sh (exit 0 pass, 77 skip, else fail); alone: bash tests/e2e/test_cupti_unavailable.sh
set -u
cd "$(dirname "$0")/../.."
B="${LG_BUILD:-build}"
PRELOAD="${LG_PRELOAD:-$PWD/$B/liblabelguard.so}"
FAKE="${LG_FAKE_DIR:-$PWD/$B/fakecuda}"
PROG="$B/e2e/attach_target"
for f in "$B/liblabelguard.so" "$FAKE/libcudart.so.13" "$PROG"; do
  [ -e "$f" ] || { echo "missing $f: run make test-programs"; exit 1; }
done
command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# check HOOKS EXPECTED_CUPTI_WARNINGS EXPECTED_VIOLATIONS
check() {
  local hooks=$1 want=$2 want_viol=$3 dir="$tmp/$1"
  mkdir -p "$dir"
  LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" LABELGUARD_HOOKS="$hooks" LABELGUARD_LOG="$dir/logs" \
    "$PROG" --now >"$dir/out" 2>"$dir/err"
  local rc=$?
  echo "--- HOOKS=$hooks rc=$rc"; cat "$dir/out"; sed 's/^/stderr: /' "$dir/err"
  [ $rc -eq 0 ] || { echo "FAIL: the program exited $rc"; return 1; }
  local sync=0; [ "$want_viol" = 1 ] || sync=710
  grep -q "^sync: $sync\$" <(tail -n1 "$dir/out") || { echo "FAIL: the bad launch's sync is not $sync"; return 1; }
  python3 - "$dir/logs" "$want" "$want_viol" <<'PY' || return 1
import json, glob, sys
logs, want, want_viol = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = glob.glob(logs + "/*.jsonl")
assert len(files) == 1, f"expected one JSONL log, found {files}"
events = [json.loads(l) for l in open(files[0]) if l.strip()]
cupti = [e for e in events if e.get("event") == "warning" and e.get("what") == "cupti_unavailable"]
viol = [e for e in events if e.get("event") == "violation"]
for e in cupti: print("warning:", e.get("detail"))
assert len(cupti) == want, f"expected {want} cupti_unavailable warning(s), got {len(cupti)}"
if want:
    assert "LABELGUARD_HOOKS=cupti leaves no hook layer" in (cupti[0].get("detail") or ""), cupti[0]
assert len(viol) == want_viol, f"expected {want_viol} violation(s), got {len(viol)}"
if want_viol:
    assert "nll_loss_forward_reduce_cuda_kernel_2d" in viol[0].get("kernel", ""), viol[0]
    assert viol[0].get("outcome") == "blocked", viol[0]
print(f"ok: {len(cupti)} cupti warning(s), {len(viol)} violation(s)")
PY
}

fail=0
check auto 0 1 || fail=1
check interpose 0 1 || fail=1
check cupti 1 0 || fail=1
exit $fail
