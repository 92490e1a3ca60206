#!/usr/bin/env bash
# arm64-root.sh: makes (once, cached) the Debian 12 arm64 tree that the aarch64 build links
# against and that qemu-user runs its tests in, and prints its path.
#   arm64-root.sh            make it unless already made; print the path
#   arm64-root.sh --print    print the path only
# One tree serves both: the cross build takes glib, pcre2 and LLVM's libunwind (static, PIC) from
# it (-dev packages of the same Debian release as the host's cross compiler), and the qemu tests
# take its loader, libc, libstdc++ and python3.11 (qemu-aarch64-static -L ROOT). It is made with
# `debootstrap --foreign` (download and unpack only: nothing of arm64 runs, nothing of the host's
# dpkg database changes), then every package debootstrap fetched is unpacked into it.
# Where: $LG_ARM64_HOME (default ~/.cache/labelguard)/arm64-root-<hash of this script>, outside
# the checkout, so `make clean` and other worktrees reuse it; made under a flock, in a temporary
# directory renamed into place with an .installed marker, so nothing half-made is ever used.
# Needs root (debootstrap) and the Debian package debootstrap; the mirror is the host's own.
# Called by the Makefile (ARCH=aarch64); tested by every aarch64 build and qemu test.
set -euo pipefail
SUITE=bookworm
# python3.11 + libpython3.11-stdlib: tests/e2e/test_pystack.sh's interpreter. libstdc++6: the
# nvcc-built test programs. The -dev packages: what the library links statically. pkg-config,
# pkgconf: with the glib packages, what scripts/fetch-debs.sh takes from here for an Arm GPU
# machine (the .debs are kept in the tree's var/cache/apt/archives).
PKGS=python3.11,libpython3.11-stdlib,libstdc++6,libglib2.0-dev,libpcre2-dev,libunwind-14-dev,pkg-config,pkgconf
die() { echo "arm64-root: $*" >&2; exit 1; }
key="$({ echo "$SUITE $PKGS"; cat "$0"; } | sha256sum | cut -c1-12)"
base="${LG_ARM64_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard}"
root="$base/arm64-root-$key"
if [ "${1:-}" = --print ] || [ -f "$root/.installed" ]; then echo "$root"; exit 0; fi

command -v debootstrap >/dev/null || die "debootstrap not found: install the Debian package debootstrap"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
mkdir -p "$base"
exec 9>"$base/arm64-root.lock"
flock 9
[ -f "$root/.installed" ] && { echo "$root"; exit 0; }
# The host's Debian mirror (deb822 or one-line sources), so that the tree comes from wherever
# this machine's apt is allowed to go.
mirror="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $0 ~ / '"$SUITE"' / { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null)"
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d}"
start=$(date +%s)
tmp="$root.tmp.$$"
rm -rf "$tmp" "$root"
echo "arm64-root: debootstrap --foreign --arch=arm64 $SUITE into $root (from $mirror)" >&2
if ! debootstrap --foreign --arch=arm64 --variant=minbase --include="$PKGS" "$SUITE" "$tmp" "$mirror" >"$base/arm64-root.log" 2>&1; then
  tail -n 20 "$base/arm64-root.log" >&2
  rm -rf "$tmp"
  die "debootstrap failed (output above; full log $base/arm64-root.log)"
fi
# --foreign unpacks only the essential packages; the rest (the --include list and what it
# depends on) is unpacked here. --keep-directory-symlink: /lib, /bin are links into /usr.
n=0
for deb in "$tmp"/var/cache/apt/archives/*.deb; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$tmp" || die "could not unpack $deb"
  n=$((n + 1))
done
# qemu-user 7.2 shows an aarch64 program the host's /proc/cpuinfo, on which pytorch's cpuinfo
# library (run by `import torch`) crashes; with -L ROOT qemu opens ROOT/proc/cpuinfo first: an
# arm64 one (two Neoverse V2 cores, Grace's) replaces debootstrap's link to /proc. Nothing else
# is under ROOT/proc, so /proc/self/* stays qemu's. Likewise the MIDR register oneDNN reads.
rm -f "$tmp/proc" && mkdir -p "$tmp/proc" || die "cannot make $tmp/proc"
for c in 0 1; do
  printf 'processor\t: %d\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb dcpodp flagm2 frint i8mm bf16 dgh bti\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n\n' $c
  mkdir -p "$tmp/sys/devices/system/cpu/cpu$c/regs/identification"
  echo 0x00000000410fd4f0 >"$tmp/sys/devices/system/cpu/cpu$c/regs/identification/midr_el1"
done >"$tmp/proc/cpuinfo"
for f in usr/bin/python3.11 usr/lib/aarch64-linux-gnu/libglib-2.0.a usr/lib/aarch64-linux-gnu/libpcre2-8.a \
         usr/lib/llvm-14/lib/libunwind.a usr/include/libunwind/libunwind.h lib/ld-linux-aarch64.so.1 \
         usr/lib/aarch64-linux-gnu/libstdc++.so.6; do
  [ -e "$tmp/$f" ] || die "$f missing from the tree after unpacking $n packages"
done
echo "arm64 $SUITE, $n packages, made $(date -u +%FT%TZ) in $(($(date +%s) - start)) s" >"$tmp/.installed.tmp"
mv "$tmp" "$root"
mv "$root/.installed.tmp" "$root/.installed"
echo "arm64-root: done in $(($(date +%s) - start)) s ($(du -sh "$root" | cut -f1))" >&2
echo "$root"
