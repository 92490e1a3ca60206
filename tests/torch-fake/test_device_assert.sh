#!/usr/bin/env bash
# test_device_assert.sh: a device-side assert that labelguard did not check, in real torch (the
# CUDA 13 wheel, whose runtime the extension shares) on the runtime test double: device_assert.py
# launches an extension's histogram kernel that asserts (tests/progs/libassertpy.cu) between
# torch's own elementwise kernels, then calls torch.cuda.synchronize(). Checks, with LABELGUARD_LAUNCH_SITES=all:
#   - torch raises CUDA's own "device-side assert triggered" at the synchronize, unchanged;
#   - one device_assert event: found at cudaDeviceSynchronize on the synchronize's line;
#   - the candidates are this thread's launches newest first: torch's `+ 1` kernel, the histogram,
#     torch's `* 2` kernel, each with the Python line that launched it;
#   - the stderr block names the histogram and its line.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_device_assert.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-device-assert.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_LOG LABELGUARD_LAUNCH_SITES
lib="$LG_ROOT/$LG_BUILD/progs/libassertpy.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing: run make test-programs"; exit 1; }
script=tests/torch-fake/device_assert.py
line_of() { grep -n "# $1\$" "$script" | cut -d: -f1; }
rc=0
for wheel in 13; do # the extension is built with CUDA 13: the wheel with the same runtime
  out="$T/$wheel"
  mkdir -p "$out"
  env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$out" LABELGUARD_LAUNCH_SITES=all TORCH_CUDA=$wheel \
    "$TP" "$script" "$lib" >"$out.txt" 2>"$out.err"
  sed "s/^/[cuda$wheel] /" "$out.txt"
  "$TP" - "$out" "$(line_of MARK_BAD)" "$(line_of MARK_AFTER)" "$(line_of MARK_SYNC)" "$out.txt" <<'PY' || rc=1
import glob, json, sys
out, bad, after, sync, txt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
E = [json.loads(l) for f in glob.glob(out + "/*.jsonl") for l in open(f)]
D = [e for e in E if e["event"] == "device_assert"]
ok = True
def check(what, cond):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)
text = open(txt).read()
check("torch raises CUDA's own error at the synchronize", "raised: CUDA error: device-side assert triggered" in text)
check("one device_assert event", len(D) == 1)
if D:
    d = D[0]
    check("found at cudaDeviceSynchronize, on the synchronize's line",
          d["found_at"] == "cudaDeviceSynchronize" and
          [(f["file"].endswith("/device_assert.py"), f["line"]) for f in d["python_stack"]][-2] == (True, sync))
    mine = [c for c in d["candidates"] if c["finding_thread"]]
    names = [c["kernel"] for c in mine]
    print("candidates:", [(c["kernel"], c.get("python_stack", [{}])[-1].get("line")) for c in mine])
    check("the newest three: torch's + 1, the histogram, torch's * 2",
          len(mine) >= 3 and names[1] == "lgas_histogram" and "elementwise" in names[0] and "elementwise" in names[2])
    check("each with the line that launched it",
          len(mine) >= 3 and [c["python_stack"][-1]["line"] for c in mine[:2]] == [after, bad]
          and mine[2]["python_stack"][-1]["function"] == "step")
    check("none checked by labelguard", not any(c["checked"] for c in mine))
sys.exit(0 if ok else 1)
PY
  if grep -q "^    lgas_histogram grid \[1,1,1\] block \[128,1,1\] stream 0x0, launched at .*device_assert.py:$(line_of MARK_BAD) in step" "$out.err"; then
    echo "[cuda$wheel] ok: stderr names the histogram and its line"
  else rc=1; echo "[cuda$wheel] FAIL: stderr lacks the histogram's line"; tail -20 "$out.err"; fi
done
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
