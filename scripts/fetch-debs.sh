#!/usr/bin/env bash
# fetch-debs.sh: downloads the Debian packages that scripts/gpu-check.sh needs to build the
# library on a machine that lacks glib's development files or pkg-config (the GPU machine has
# no network). Run here, on a Debian machine with network; the .debs land in third_party/debs/
# (ignored by git) and travel with the working tree to the GPU machine.
#
# Usage: scripts/fetch-debs.sh [DIR]      (default third_party/debs)
#        LG_DEBS_ARCH=arm64 scripts/fetch-debs.sh [DIR]   for an Arm GPU machine (GH200, GB200,
#        DGX Spark), from an x86_64 one: the arm64 .debs are taken from the arm64 tree that
#        scripts/arm64-root.sh makes (cached; its debootstrap fetched them), not from apt.
# What is fetched, and why each one:
#   libglib2.0-dev     glib headers, glib-2.0.pc and libglib-2.0.a (the library links glib statically)
#   libpcre2-dev       libpcre2-8.a + libpcre2-8.pc: `pkg-config --static --libs glib-2.0` needs -lpcre2-8
#   libglib2.0-0       glibconfig.h's runtime peer; harmless, lets unit tests link dynamically too
#   libpcre2-8-0       runtime of the above
#   pkgconf pkgconf-bin libpkgconf3 pkg-config   pkg-config itself, for machines without it
# gpu-check.sh extracts them with `dpkg -x` (no root, no dpkg database) into a local prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-third_party/debs}"
pkgs=(libglib2.0-dev libglib2.0-0 libpcre2-dev libpcre2-8-0 pkgconf pkgconf-bin libpkgconf3 pkg-config)

command -v apt-get >/dev/null || { echo "fetch-debs: apt-get not found: run this on a Debian/Ubuntu machine" >&2; exit 2; }
mkdir -p "$dir"
rm -f "$dir"/*.deb
arch="${LG_DEBS_ARCH:-$(dpkg --print-architecture)}"
if [ "$arch" = "$(dpkg --print-architecture)" ]; then
  # apt-get download writes into the current directory; it needs no root.
  (cd "$dir" && apt-get download "${pkgs[@]}")
elif [ "$arch" = arm64 ]; then
  root="$(bash scripts/arm64-root.sh)"
  for p in "${pkgs[@]}"; do
    found=""
    for f in "$root"/var/cache/apt/archives/"${p}"_*_arm64.deb "$root"/var/cache/apt/archives/"${p}"_*_all.deb; do
      [ -f "$f" ] && { cp "$f" "$dir/"; found=1; break; }
    done
    [ -n "$found" ] || { echo "fetch-debs: no $p in $root/var/cache/apt/archives" >&2; exit 1; }
  done
else
  echo "fetch-debs: LG_DEBS_ARCH=$arch: only the host's architecture or arm64" >&2; exit 2
fi
{
  echo "# fetched $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n "s/^PRETTY_NAME=//p" /etc/os-release | tr -d "\"") ($arch)"
  for f in "$dir"/*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" "$(dpkg-deb -f "$f" Architecture)"
  done
} > "$dir/MANIFEST"
# Each package must have arrived: a silent partial download would only show on the GPU machine.
for p in "${pkgs[@]}"; do
  grep -q "^$p " "$dir/MANIFEST" || { echo "fetch-debs: $p missing from $dir" >&2; exit 1; }
done
cat "$dir/MANIFEST"
du -sh "$dir"
