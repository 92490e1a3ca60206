#!/usr/bin/env bash
# test_generated.sh: the device asserts torch.compile writes into its own kernels, listed in the
# device_assert report of one that fires (python/labelguard/_generated.py, src/base/generated.c),
# on real torch 2.15 (CUDA 13) and 2.10 (CUDA 12) on the runtime test double, under the preloaded
# library. Per wheel, generated_cases.py runs twice on one fresh Inductor cache: `first` compiles,
# `again` gets the graph from the FX graph cache; each checks that the output module Inductor
# loaded was read, and that a GPU-format output module loaded the same way gives its three asserts
# (kernel, the kernel's own file and line, text, source nodes and ATen ops). On the CUDA 13 wheel
# `again` then makes an extension's kernel assert (build/progs/libassertpy.so), and this driver
# checks the device_assert event's generated_kernels and the stderr lines.
# What only a GPU shows (a Triton kernel's own assert firing, Triton's launch among the
# candidates) is scripts/gpu-check.sh's `compiled_assert`.
# Run by tests/run.sh; alone: bash tests/torch-fake/test_generated.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$LG_ROOT" || exit 1
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-generated.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset LD_PRELOAD LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_HOOKS LABELGUARD_KERNELS LABELGUARD_BACKTRACE \
      LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_LOG LABELGUARD_LAUNCH_SITES LABELGUARD_COMPILED
lib="$LG_ROOT/$LG_BUILD/progs/libassertpy.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing: run make test-programs"; exit 1; }
rc=0
for wheel in 13 12; do
  cache="$T/inductor-$wheel"
  for mode in first again; do
    out="$T/$wheel-$mode"
    mkdir -p "$out"
    extra=()
    [ "$wheel:$mode" != 13:again ] || extra=("$lib")
    if ! env LD_PRELOAD="$LG_PRELOAD" LABELGUARD_LOG="$out" TORCH_CUDA=$wheel TORCHINDUCTOR_CACHE_DIR="$cache" \
        "$TP" tests/torch-fake/generated_cases.py "$mode" "$cache" "${extra[@]}" >"$out.txt" 2>"$out.err"; then
      rc=1
      tail -20 "$out.err" | sed "s/^/[cuda$wheel $mode] stderr: /"
    fi
    sed "s/^/[cuda$wheel $mode] /" "$out.txt"
    grep -q '^ok: ' "$out.txt" || { rc=1; echo "[cuda$wheel $mode] FAIL: no check ran"; }
  done
done
out="$T/13-again"
"$TP" - "$out" "$T/inductor-13" <<'PY' || rc=1
import glob, json, os, sys
out, cache = sys.argv[1], os.path.realpath(sys.argv[2])
E = [json.loads(l) for f in glob.glob(out + "/*.jsonl") for l in open(f)]
D = [e for e in E if e["event"] == "device_assert"]
ok = True
def check(what, cond):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)
check("torch raises CUDA's own error at the synchronize", "raised: CUDA error: device-side assert triggered" in open(out + ".txt").read())
check("one device_assert event", len(D) == 1)
if D:
    g = D[0].get("generated_kernels", [])
    check("it lists the three generated kernels, newest first: %s" % [k["kernel"] for k in g],
          [k["kernel"] for k in g] == ["mask_mod_kernel", "triton_poi_fused_index_mul_1", "triton_poi_fused_embedding_0"])
    if len(g) == 3:
        e = g[2]
        check("the embedding's: its file in the cache, line, text, source nodes, ATen ops",
              os.path.realpath(e["file"]).startswith(cache + os.sep) and e["line"] > 0
              and e["message"] == "index out of bounds: 0 <= tmp4 < 32000"
              and e["source_nodes"] == "h" and e["aten_ops"] == "aten.embedding")
        check("none among the candidates (no Triton launch here)", not any(k["among_candidates"] for k in g))
        check("the user's kernel has no origin fields", "source_nodes" not in g[0] and "aten_ops" not in g[0])
    check("the extension's histogram is still the candidate",
          any(c["kernel"] == "lgas_histogram" for c in D[0]["candidates"]))
sys.exit(0 if ok else 1)
PY
if grep -q "^    triton_poi_fused_embedding_0: \`index out of bounds: 0 <= tmp4 < 32000\` at .*/5v/c5vq2lrtnbd3mvf6brcmzawdhbzfw7kvnbbgpmq3r2hq3x7aaqza.py:[0-9]*; source nodes: h; ATen: aten.embedding$" "$out.err" &&
   grep -q "kernels torch.compile generated with asserts of their own, not checked before launch" "$out.err"; then
  echo "ok: stderr lists the generated kernels with file, line and origin"
else rc=1; echo "FAIL: stderr lacks the generated kernels"; tail -20 "$out.err"; fi
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
