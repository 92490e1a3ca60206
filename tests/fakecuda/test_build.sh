#!/usr/bin/env bash
# The test double's shape: soname, every symbol under the version node libcudart.so.13, no
# undefined symbol in any test program when resolved against it (ldd -r), and the programs
# really pick the fake up through LD_LIBRARY_PATH.
. "$(dirname "$0")/lib.sh"
lib="$LG_FAKE_DIR/libcudart.so.13"
[ -f "$lib" ] || { echo "missing $lib"; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = libcudart.so.13 ] || fail "soname is '$soname'"
# Dynamic symbols defined by the library, with their version.
unversioned=$(objdump -T "$lib" | awk '$2 != "*UND*" && / DF | DO / && $0 !~ /libcudart\.so\.13/ && $NF ~ /^(cuda|__cuda|fakecudart_)/' )
[ -z "$unversioned" ] || fail "symbols outside the version node: $unversioned"
for s in cudaLaunchKernel __cudaLaunchKernel __cudaLaunchKernel_ptsz cudaLaunchKernel_ptsz cudaLaunchKernelExC \
         cudaLaunchKernelExC_ptsz __cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaRegisterFunction \
         __cudaRegisterVar __cudaUnregisterFatBinary __cudaGetKernel __cudaPushCallConfiguration \
         __cudaPopCallConfiguration cudaFuncGetName cudaFuncGetParamInfo cudaMemcpyAsync cudaStreamSynchronize \
         cudaMalloc cudaFree cudaMallocHost cudaFreeHost cudaPointerGetAttributes cudaStreamIsCapturing cudaGetDevice \
         cudaGetLastError cudaGetErrorString fakecudart_identity fakecudart_register_emulator; do
  objdump -T "$lib" | grep -qE "libcudart\.so\.13 +$s\$" || fail "$s not exported under libcudart.so.13"
done
# Internal helpers stay local.
! objdump -T "$lib" | grep -qE ' fk_' || fail "fk_* symbols leak from the fake"
n=0
for p in "$PROGS"/*; do
  [ -x "$p" ] && [ -f "$p" ] || continue
  n=$((n + 1))
  und=$(LD_LIBRARY_PATH="$LG_FAKE_DIR" ldd -r "$p" 2>&1 | grep -E 'undefined symbol|not found|no version information')
  [ -z "$und" ] || fail "$(basename "$p"): $und"
  LD_LIBRARY_PATH="$LG_FAKE_DIR" ldd "$p" | grep -q "$LG_FAKE_DIR/libcudart.so.13" || fail "$(basename "$p") does not resolve to the fake"
done
[ $n -ge 9 ] || fail "only $n test programs found"
# Without LD_LIBRARY_PATH the program must not claim to be on the fake (the identity check works).
id=$(env -u LD_LIBRARY_PATH "$PROGS/probe" names 2>/dev/null | head -n1)
[ "$id" != "fakecudart_identity=fakecuda" ] || fail "probe found the fake without LD_LIBRARY_PATH"
fk_run probe names
finish
