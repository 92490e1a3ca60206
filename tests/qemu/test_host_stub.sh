#!/usr/bin/env bash
# test_host_stub.sh: the host stub of tests/qemu/host_stub.sh is preloaded silently by a host
# process whatever string the host's loader puts for $PLATFORM. The loader decides from the CPU
# (glibc's x86 cpu_features): on an Intel CPU with AVX2 it is "haswell", elsewhere "x86_64". This
# machine's CPU is one case; the others run the host's own /bin/true under qemu-x86_64 with a
# chosen CPU model (its loader then sees that CPU), so every case runs on any x86_64 host.
# Exit 0 pass, 77 skip (not x86_64, or no gcc), else fail. Alone: bash tests/qemu/test_host_stub.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
[ "$(uname -m)" = x86_64 ] || { echo "x86_64 hosts only"; exit 77; }
command -v gcc >/dev/null || { echo "gcc not found"; exit 77; }
. tests/qemu/host_stub.sh
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
qemu_host_stub "$T/preload" || { echo "FAIL: qemu_host_stub"; exit 1; }
echo "ok: this host ($(/lib64/ld-linux-x86-64.so.2 --list-diagnostics 2>/dev/null | grep '^dl_platform=' || echo 'no diagnostics'))"
q=$(command -v qemu-x86_64-static || command -v qemu-x86_64) || { echo "no qemu-x86_64: only this host's CPU was checked"; exit 0; }
for cpu in Haswell Skylake-Server KnightsMill max qemu64; do
  plat=$("$q" -cpu "$cpu" /lib64/ld-linux-x86-64.so.2 --list-diagnostics 2>/dev/null | sed -n 's/^dl_platform=//p')
  # shellcheck disable=SC2016  # $PLATFORM is the loader's to expand
  out=$(LD_PRELOAD="$T/preload/"'$PLATFORM'/liblabelguard.so "$q" -cpu "$cpu" /bin/true 2>&1 | grep -v '^qemu-x86_64[a-z-]*: warning: ')
  if [ -n "$out" ]; then echo "FAIL: CPU $cpu (dl_platform=${plat:-?}): $out"; fail=1
  else echo "ok: CPU $cpu (dl_platform=${plat:-?}): the stub was preloaded silently"; fi
done
[ $fail = 0 ] && echo "all checks passed"
exit $fail
