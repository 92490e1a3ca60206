#!/usr/bin/env bash
# test_build.sh: the aarch64 library (build-aarch64/liblabelguard.so) is shipped the way the
# x86_64 one is, checked with the cross binutils and, for loading, under qemu-user:
#   - exports exactly tests/exports.txt; NEEDED is glibc alone (libc, libpthread, libdl, loader);
#   - no GLIBC version newer than 2.17 (the Makefile's pin) and none of x86_64's 2.2.5 nodes,
#     which aarch64's glibc never had: a reference to one would fail to load anywhere;
#   - its static TLS stays within the few words a late dlopen can get;
#   - loads into the arm64 tree's cat, which has no glib, and maps no libglib there;
#   - neither the checkout's path nor the arm64 tree's is inside;
#   - the validator fatbin is the x86_64 build's, byte for byte (it is GPU code, built by the
#     host's nvcc and ptxas: nothing in it depends on the host CPU), with SASS for GH200 (sm_90),
#     GB200 (sm_100), GB300 (sm_103) and GB10 (sm_121), and tests/e2e/test_fatbin.sh passes on
#     it (every image's ABI, the PTX's ISA).
# Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-qemu.XXXXXX")"
trap 'rm -rf "$T" "$W"' EXIT
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"
lib="$LG_ROOT/$A64/liblabelguard.so"
objdump=aarch64-linux-gnu-objdump readelf=aarch64-linux-gnu-readelf
check "an aarch64 shared object" bash -c "$readelf -h '$lib' | grep -q 'Machine:.*AArch64'"
aarch64-linux-gnu-nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u >"$T/exports"
check "exports are exactly tests/exports.txt" diff -u "$LG_ROOT/tests/exports.txt" "$T/exports"
$readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort >"$T/needed"
check "NEEDED is glibc alone: $(tr '\n' ' ' <"$T/needed")" \
  diff -u <(printf '%s\n' ld-linux-aarch64.so.1 libc.so.6 libdl.so.2 libpthread.so.0) "$T/needed"
$objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -uV >"$T/versions"
check "no GLIBC version newer than 2.17: $(tr '\n' ' ' <"$T/versions")" \
  bash -c "[ \"\$(sort -V '$T/versions' <(echo GLIBC_2.17) | tail -n1)\" = GLIBC_2.17 ]"
check "no x86_64-only version node (GLIBC_2.2.5)" bash -c "! grep -q 'GLIBC_2\.2\.5' '$T/versions'"
# The fast path's initial-exec variables (R_AARCH64_TLS_TPREL64) are static TLS, which a late
# dlopen (enable(), attach) takes from glibc's surplus, as on x86_64; the rest is TLSDESC.
tls=$($readelf -lW "$lib" | awk '$1 == "TLS" {print $6}'); tls=$((tls))
check "static TLS block at most 128 bytes (it is ${tls:-?})" [ "${tls:-99999}" -le 128 ]
check "initial-exec TLS relocations are aarch64's (R_AARCH64_TLS_TPREL64)" bash -c "$readelf -rW '$lib' | grep -q R_AARCH64_TLS_TPREL64"
LD_PRELOAD="$lib" "$QEMU" -L "$ARM64_ROOT" "$ARM64_ROOT/usr/bin/cat" /proc/self/maps >"$T/maps" 2>"$T/maps.err"
check "loads into a process without glib (cat under qemu)" grep -q 'liblabelguard\.so' "$T/maps"
check "no glib mapped" bash -c "! grep -q libglib '$T/maps'"
check "nothing on stderr when it loads: $(head -c 300 "$T/maps.err")" [ ! -s "$T/maps.err" ]
check "the checkout's path is not inside" bash -c "! grep -qaF -- '$LG_ROOT' '$lib'"
check "the arm64 tree's path is not inside" bash -c "! grep -qaF -- '$ARM64_ROOT' '$lib'"
if [ -f "$LG_ROOT/build/validate.fatbin" ]; then
  check "validator fatbin identical to the x86_64 build's" cmp "$LG_ROOT/$A64/validate.fatbin" "$LG_ROOT/build/validate.fatbin"
else
  echo "not compared: no build/validate.fatbin (make the x86_64 library first)"
fi
# tests/e2e/test_fatbin.sh reads the images inside the library itself.
check "tests/e2e/test_fatbin.sh passes on the aarch64 library" bash -c "bash '$LG_ROOT/tests/e2e/test_fatbin.sh' '$lib' >'$T/fatbin' 2>&1"
sed 's/^/  | /' "$T/fatbin"
for sm in 90 100 103 121; do
  check "SASS for sm_$sm in the library" grep -q "SASS.* sm_$sm(abi" "$T/fatbin"
done
finish
