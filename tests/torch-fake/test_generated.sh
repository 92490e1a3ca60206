#!/usr/bin/env bash
# test_generated.sh: the device asserts torch.compile writes into its own kernels, listed in the
# device_assert report of one that fires (python/labelguard/_generated.py, src/base/generated.c),
# on real torch 2.15 (CUDA 13) and 2.10 (CUDA 12) on the runtime test double, under the preloaded
# library. Per wheel, generated_cases.py runs twice on one fresh Inductor cache: `first` compiles,
# `again` gets the graph from the FX graph cache; each checks that the output module Inductor
# loaded was read, and that a GPU-format output module loaded the same way gives its three asserts
# (kernel, the kernel's own file and line, text, source nodes and ATen ops). On the CUDA 13 wheel
# `again` then makes an extension's kernel assert (build/progs/libassertpy.so) and checks the
# device_assert event's generated_kernels; this driver checks the stderr block.
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
if grep -q "^    triton_poi_fused_embedding_0: \`index out of bounds: 0 <= tmp4 < 32000\` at .*/5v/c5vq2lrtnbd3mvf6brcmzawdhbzfw7kvnbbgpmq3r2hq3x7aaqza.py:[0-9]*; source nodes: h; ATen: aten.embedding$" "$out.err" &&
   grep -q "kernels torch.compile generated with asserts of their own, not checked before launch" "$out.err"; then
  echo "ok: stderr lists the generated kernels with file, line and origin"
else rc=1; echo "FAIL: stderr lacks the generated kernels"; tail -20 "$out.err"; fi
[ $rc -eq 0 ] && echo "all checks passed" || echo "checks failed"
exit $rc
