#!/usr/bin/env bash
# install.sh: a Debian unstable root with CPython 3.14 and 3.15 (Debian's own builds), a
# free-threaded CPython 3.13t built from Debian's source package (install_ft below), and the
# CUDA 13 build of torch for each, in which the tests of the Python stack on those interpreters
# run (tests/e2e/test_pystack.sh, tests/torch-fake/test_pystack_torch.sh,
# tests/pip/test_pystack_wheel.sh). The library and the runtime test double built on the host
# load there unchanged (the root's glibc is newer than the host's).
#   install.sh              build the root unless already built (cached; safe concurrently)
#   install.sh --print-dir  print where it is
#   install.sh --ft-python  print the free-threaded interpreter's path in the root (--ft-torch:
#                           its torch install); exit 1 when it is not built
#   install.sh run [-b HOSTDIR:DIR]... -- CMD ARGS...
#                           run CMD chrooted in the root, in a private mount namespace: the
#                           checkout is bind-mounted at /lg (read-only) and the working
#                           directory is /lg; each -b HOSTDIR appears at DIR (read-write);
#                           /proc, /dev, /sys and CUDA_HOME (at its own path: the torch
#                           installs link into it) are bound too; /tmp is a fresh tmpfs.
# Where: $LG_PYROOT_HOME (default ~/.cache/labelguard/pyroot)/sid-<hash of LAYOUT, the versions,
# the mirror, the architecture and the pins>, outside the checkout, like
# tests/torch-fake/install.sh's torch installs. Layout:
#   root/                   debootstrap --variant=minbase sid with python3.14(-venv), python3.15(-venv)
#   root/opt/torch-cp3XX/   site-packages/ (pip --target: torch 2.15.0 for CUDA 13 and the pins
#                           of tests/torch-fake/pins-13.txt, numpy at $NUMPY), lib/ (links to
#                           CUDA_HOME's libraries and the nvidia-* ones; never a libcudart: the
#                           double is preloaded)
#   .installed              what, when, how long
# pip inside the root cannot verify PyPI's certificate on these machines, so every wheel is
# downloaded on the host (`pip download --python-version 3.1X --platform ...`, kept in
# $LG_PYROOT_HOME/wheels, reusing tests/torch-fake's wheel cache) and installed with --target
# from the host. Needs root (debootstrap, chroot, mount) and debootstrap; a failure is an error
# (exit 1) naming what failed, and nothing half-built is left where the tests look.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
checkout="$(cd "$here/../.." && pwd)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
PY="${LG_PYROOT_PIP_PYTHON:-python3}"
die() { echo "pyroot: $*" >&2; exit 1; }
PINS="$checkout/tests/torch-fake/pins-13.txt"
# The Debian archive: LG_PYROOT_MIRROR, else the one this machine's apt is configured with.
if [ -n "${LG_PYROOT_MIRROR:-}" ]; then
  MIRROR=$LG_PYROOT_MIRROR
else
  MIRROR=$("$checkout/scripts/debian-mirror.sh") || die "no Debian mirror (message above): configure apt's sources or set LG_PYROOT_MIRROR"
fi
VERSIONS="314 315"
ARCH="$(uname -m)"   # debootstrap takes the host's; the wheels are picked for it too
# pip takes --platform literally: every manylinux tag the pins' wheels carry (glibc <= 2.28).
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_18 manylinux_2_17 manylinux2014 manylinux_2_12 manylinux2010 \
         manylinux_2_5 manylinux1; do
  platforms+=(--platform "${p}_$ARCH")
done
home="${LG_PYROOT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/pyroot}"
# numpy 2.4.6 (pins-13.txt, for cp311) has no cp315 wheel; 2.5.5 has cp314 and cp315 ones.
NUMPY=2.5.5
LAYOUT=1   # part of the key: bump when what the root holds changes
pins_text() { grep -v '^#' "$PINS" | sed "s/^numpy==.*/numpy==$NUMPY/"; }
key="$({ echo "layout=$LAYOUT versions=$VERSIONS mirror=$MIRROR"; [ "$ARCH" = x86_64 ] || echo "arch=$ARCH"; pins_text; } | sha256sum | cut -c1-12)"
dir="$home/sid-$key"

# As in tests/torch-fake/install.sh: no runtime but the double; CUDA_HOME's libraries and the
# nvidia-* ones on one path, OPT/lib (the links are absolute: CUDA_HOME is bound at its own path).
link_libs() {
  local opt=$1 f rel
  find "$opt/site-packages" -name 'libcudart.so*' -exec rm -f {} +
  for f in "$(realpath "$CUDA_HOME")"/lib64/lib*.so.*; do
    case "$(basename "$f")" in libcudart*) continue ;; esac
    ln -sf "$f" "$opt/lib/"
  done
  while IFS= read -r f; do
    rel="${f#"$opt"/}"
    ln -sf "../$rel" "$opt/lib/$(basename "$f")"
  done < <(find "$opt/site-packages/nvidia" -path '*/lib/lib*.so*' \( -type f -o -type l \) 2>/dev/null)
}

install_root() {
  [ -f "$dir/.installed" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "building the root needs root (debootstrap, chroot)"
  command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
  mkdir -p "$home"
  exec 9>"$home/.lock"
  flock 9
  if [ -f "$dir/.installed" ]; then exec 9>&-; return 0; fi
  local start tmp v wheels="$home/wheels" f rel torch_wheels
  start=$(date +%s)
  tmp="$dir.tmp.$$"
  rm -rf "$tmp" "$dir"
  mkdir -p "$tmp" "$wheels"
  pins_text >"$tmp/pins.txt"
  echo "pyroot: building $dir (debootstrap sid, torch for cp${VERSIONS// /, cp})" >&2
  # The root and the wheels download in parallel: both are network-bound.
  ( debootstrap --variant=minbase --include=python3.14,python3.14-venv,python3.15,python3.15-venv \
      sid "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 || { echo failed >"$tmp/debootstrap.failed"; } ) &
  local boot=$!
  # torch-fake's cache already holds the py3-none wheels (nvidia-*, the pure deps): copied, not fetched.
  torch_wheels="${LG_TORCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/torch}/wheels"
  local ok=1
  for v in $VERSIONS; do
    "$PY" -m pip download --no-deps --disable-pip-version-check --no-input --only-binary=:all: \
      --python-version "${v:0:1}.${v:1}" --implementation cp --abi "cp$v" "${platforms[@]}" \
      ${torch_wheels:+--find-links "$torch_wheels"} -d "$wheels" -r "$tmp/pins.txt" >>"$tmp/pip.log" 2>&1 || { ok=0; break; }
  done
  wait $boot
  [ $ok = 1 ] || { tail -n 25 "$tmp/pip.log" >&2; rm -rf "$tmp"; die "pip download for cp$v failed (output above): PyPI must be reachable"; }
  if [ -f "$tmp/debootstrap.failed" ]; then
    tail -n 25 "$tmp/debootstrap.log" >&2; [ -f "$tmp/root/debootstrap/debootstrap.log" ] && tail -n 25 "$tmp/root/debootstrap/debootstrap.log" >&2
    rm -rf "$tmp"; die "debootstrap sid from $MIRROR failed (output above)"
  fi
  for v in $VERSIONS; do
    "$tmp/root/usr/bin/python${v:0:1}.${v:1}" -c 1 2>/dev/null || chroot "$tmp/root" "python${v:0:1}.${v:1}" -c 1 ||
      { rm -rf "$tmp"; die "python${v:0:1}.${v:1} does not run in the root"; }
  done
  for v in $VERSIONS; do
    local opt="$tmp/root/opt/torch-cp$v"
    mkdir -p "$opt/lib"
    # --ignore-requires-python: pip checks Requires-Python against the host's interpreter even
    # with --python-version; the tags already pick the wheels built for the root's.
    "$PY" -m pip install --no-deps --no-index --find-links "$wheels" --no-compile --disable-pip-version-check \
      --no-warn-script-location --no-input --only-binary=:all: --ignore-requires-python --python-version "${v:0:1}.${v:1}" \
      --implementation cp --abi "cp$v" "${platforms[@]}" \
      --target "$opt/site-packages" -r "$tmp/pins.txt" >>"$tmp/pip.log" 2>&1 ||
      { tail -n 25 "$tmp/pip.log" >&2; rm -rf "$tmp"; die "pip install --target for cp$v failed (output above)"; }
    link_libs "$opt"
  done
  mkdir -p "$tmp/root/lg" "$tmp/root$(realpath "$CUDA_HOME")"
  printf 'python=%s\ntorch=%s\nfinished=%s\nseconds=%s\n' \
    "$(for v in $VERSIONS; do chroot "$tmp/root" "python${v:0:1}.${v:1}" -c 'import sys; print(sys.version.split()[0])'; done | tr '\n' ' ')" \
    "$(sed -n 's/^torch==//p' "$PINS")" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" > "$tmp/.installed"
  # Older roots (another key) are superseded: remove them, not the shared wheels.
  for f in "$home"/sid-*; do
    [ -d "$f" ] && [ "$f" != "$tmp" ] && [ "$f" != "$dir" ] && case "$f" in *.tmp.*) ;; *) rm -rf "$f" ;; esac
  done
  mv "$tmp" "$dir"
  echo "pyroot: built in $(( $(date +%s) - start )) s" >&2
  exec 9>&-
}

# The free-threaded interpreter: Debian has no such package, so it is built from Debian's own
# CPython source package (apt-get source, from a deb-src line on the root's own mirror, for
# FT_SUITE) with --disable-gil, into root/opt/python3.Xt, and torch's cp3Xt wheels
# (tests/pyroot/pins-ft.txt) go to root/opt/torch-cp3Xt like the others. CPython 3.13 from
# Debian 13 (trixie): the archive keeps only the newest source of each package, and sid's 3.14
# moves faster than a mirror's index (the index names a source the archive no longer has),
# while a stable release's stays. A stage of its own, with its own marker (.installed-ft,
# FT_LAYOUT), so that the root it is added to is not rebuilt. It needs the compiler and headers
# in the root (about 250 MB of Debian packages); the build takes 3 minutes on two idle cores, 8
# on busy ones, and the cache grows by about 3.5 GB (its torch install, 1.9 GB; the wheel,
# 500 MB).
FT_LAYOUT=1
FT_VERSION=313
FT_SUITE=trixie
FT_PINS="$checkout/tests/pyroot/pins-ft.txt"
in_root_sh() { # SCRIPT: run sh -c SCRIPT chrooted in the root being built (proc, sys, dev bound)
  # shellcheck disable=SC2016 # expanded by the inner sh
  local script='set -e
r=$1; shift
mount --make-rprivate /
for d in proc sys dev; do mount --rbind "/$d" "$r/$d"; done
exec chroot "$r" /usr/bin/env -C / sh -c "$1"'
  unshare -m -- sh -c "$script" pyroot "$dir/root" "$1"
}

install_ft() {
  local want
  want="ft_layout=$FT_LAYOUT version=$FT_VERSION suite=$FT_SUITE pins=$(grep -v '^#' "$FT_PINS" | sha256sum | cut -c1-12)"
  [ -f "$dir/.installed-ft" ] && head -n1 "$dir/.installed-ft" | grep -qx "$want" && return 0
  exec 9>"$home/.lock"
  flock 9
  if [ -f "$dir/.installed-ft" ] && head -n1 "$dir/.installed-ft" | grep -qx "$want"; then exec 9>&-; return 0; fi
  local start v="$FT_VERSION" log="$dir/ft-build.log" opt="$dir/root/opt/torch-cp${FT_VERSION}t" wheels="$home/wheels" f rel
  local dotted="${FT_VERSION:0:1}.${FT_VERSION:1}"
  start=$(date +%s)
  rm -f "$dir/.installed-ft"
  rm -rf "$dir/root/opt/python${dotted}t" "$dir/root/opt/src-ft" "$opt"
  echo "pyroot: building free-threaded CPython $dotted from Debian's source package (log: $log)" >&2
  echo "deb-src $MIRROR $FT_SUITE main" >"$dir/root/etc/apt/sources.list.d/labelguard-src.list"
  # apt-get source runs as root in the root: its sandbox user cannot write there. The mirror
  # may serve a snapshot whose Release file is past its Valid-Until, or dated after this
  # machine's clock (debootstrap checks neither date; apt does). The root may have been built on
  # another machine: it resolves names with this one's resolver.
  cp /etc/resolv.conf "$dir/root/etc/resolv.conf" 2>/dev/null || true
  if ! in_root_sh "set -e; export DEBIAN_FRONTEND=noninteractive
    apt='apt-get -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false -o Acquire::Check-Date=false'
    \$apt update -qq
    \$apt install -y -qq --no-install-recommends dpkg-dev gcc make pkg-config \
      libffi-dev zlib1g-dev libbz2-dev liblzma-dev libssl-dev libexpat1-dev
    mkdir -p /opt/src-ft && cd /opt/src-ft
    \$apt source -qq python$dotted/$FT_SUITE
    cd python$dotted-*/
    ./configure -q --disable-gil --prefix=/opt/python${dotted}t --without-ensurepip --disable-test-modules
    make -s -j$(nproc)
    make -s install
    /opt/python${dotted}t/bin/python${dotted}t -c 'import sys, sysconfig; assert not sys._is_gil_enabled(); assert sysconfig.get_config_var(\"Py_GIL_DISABLED\")'
    cd / && rm -rf /opt/src-ft" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "building free-threaded CPython $dotted failed (output above)"
  fi
  "$PY" -m pip download --no-deps --disable-pip-version-check --no-input --only-binary=:all: \
    --python-version "$dotted" --implementation cp --abi "cp${v}t" "${platforms[@]}" \
    -d "$wheels" -r <(grep -v '^#' "$FT_PINS") >>"$log" 2>&1 || { tail -n 25 "$log" >&2; die "pip download for cp${v}t failed (output above): PyPI must be reachable"; }
  mkdir -p "$opt/lib"
  "$PY" -m pip install --no-deps --no-index --find-links "$wheels" --no-compile --disable-pip-version-check \
    --no-warn-script-location --no-input --only-binary=:all: --ignore-requires-python --python-version "$dotted" \
    --implementation cp --abi "cp${v}t" "${platforms[@]}" \
    --target "$opt/site-packages" -r <(grep -v '^#' "$FT_PINS") >>"$log" 2>&1 ||
    { tail -n 25 "$log" >&2; rm -rf "$opt"; die "pip install --target for cp${v}t failed (output above)"; }
  link_libs "$opt"
  printf '%s\npython=%s\nfinished=%s\nseconds=%s\n' "$want" \
    "$(chroot "$dir/root" "/opt/python${dotted}t/bin/python${dotted}t" -c 'import sys; print(sys.version.split()[0])')" \
    "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" >"$dir/.installed-ft"
  echo "pyroot: free-threaded CPython $dotted and torch for cp${v}t in $(( $(date +%s) - start )) s" >&2
  exec 9>&-
}

run_in_root() {
  local binds=() cuda
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
      -b) binds+=("$2"); shift 2 ;;
      *) die "run: unknown option $1" ;;
    esac
  done
  [ "${1:-}" = -- ] || die "usage: install.sh run [-b HOSTDIR:DIR]... -- CMD ARGS..."
  shift
  [ -f "$dir/.installed" ] || die "no root at $dir: run tests/pyroot/install.sh"
  cuda="$(realpath "$CUDA_HOME")"
  # The mounts live in a private namespace: they vanish with the command, and concurrent runs
  # each see their own. The root stays writable so that the first import of torch caches its
  # bytecode there (CPython writes .pyc files atomically: concurrent runs are safe).
  local script='set -e
r=$1; checkout=$2; cuda=$3; nb=$4; shift 4
mount --make-rprivate /
for d in proc sys dev; do mount --rbind "/$d" "$r/$d"; done
mount --bind "$checkout" "$r/lg"; mount -o remount,bind,ro "$r/lg"
[ -d "$r$cuda" ] && mount --bind "$cuda" "$r$cuda" && mount -o remount,bind,ro "$r$cuda"
mount -t tmpfs tmpfs "$r/tmp"
i=0; while [ $i -lt "$nb" ]; do s=${1%%:*}; d=${1#*:}; shift; mkdir -p "$r$d"; mount --bind "$s" "$r$d"; i=$((i+1)); done
exec chroot "$r" /usr/bin/env -C /lg "$@"'
  exec unshare -m -- sh -c "$script" pyroot "$dir/root" "$checkout" "$cuda" "${#binds[@]}" "${binds[@]}" "$@"
}

case "${1:-}" in
"") install_root; install_ft ;;
--print-dir) echo "$dir" ;;
--ft-python) # the free-threaded interpreter's path inside the root; exit 1 when not built
  [ -f "$dir/.installed-ft" ] || exit 1; echo "/opt/python${FT_VERSION:0:1}.${FT_VERSION:1}t/bin/python${FT_VERSION:0:1}.${FT_VERSION:1}t" ;;
--ft-torch) # its torch install (site-packages/ and lib/, as /opt/torch-cp3XX/ for the others)
  [ -f "$dir/.installed-ft" ] || exit 1; echo "/opt/torch-cp${FT_VERSION}t" ;;
run) shift; run_in_root "$@" ;;
*) echo "usage: $0 [--print-dir | --ft-python | --ft-torch | run [-b HOSTDIR:DIR]... -- CMD ARGS...]" >&2; exit 2 ;;
esac
