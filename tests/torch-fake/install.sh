#!/usr/bin/env bash
# install.sh: installs the CUDA builds of torch that build/torch-python runs on the runtime test
# double, and writes that wrapper. Called by the Makefile (`make build/torch-python`, which
# `make test` depends on); safe to run by hand and concurrently (one flock per cache).
#   install.sh MAJOR               install pins-MAJOR.txt (13 or 12) unless already installed
#   install.sh MAJOR --print-dir   print where it goes
#   install.sh wrapper OUT FAKE13 FAKE12 DRIVER   install both, then write the wrapper OUT
# Where: $LG_TORCH_HOME (default ~/.cache/labelguard/torch)/torch<ver>-cu<major>-py<ver>-<hash of
# the pins>, outside the checkout, so `make clean` and other worktrees do not reinstall. The
# wheels are kept in $LG_TORCH_HOME/wheels (pip download), so a reinstall does not download.
# Layout of an install: site-packages/ (pip --target: torch, its pure-Python deps, nvidia-*
# libraries; named as in a real environment, which labelguard's reports recognise as library code),
# lib/ (symlinks: the toolkit's CUDA libraries for CUDA 13, the nvidia-* ones, never a
# libcudart), .installed (what, when, how long). A failed install is an error (exit 1) naming
# what failed; nothing half-installed is left where the wrapper looks.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
PY="${LG_TORCH_PYTHON:-python3}"
die() { echo "torch-fake install: $*" >&2; exit 1; }
LAYOUT=2   # part of the install's key: bump when what an install holds changes

dir_of() { # MAJOR -> install dir
  local pins="$here/pins-$1.txt" pyver ver key
  [ -f "$pins" ] || die "no $pins (TORCH_CUDA must be 12 or 13)"
  pyver="$("$PY" -c 'import sys; print("%d%d" % sys.version_info[:2])')" || die "$PY does not run"
  [ "$pyver" = 311 ] || die "$PY is Python ${pyver:0:1}.${pyver:1}; the pinned wheels are for CPython 3.11 (set LG_TORCH_PYTHON)"
  ver="$(sed -n 's/^torch==//p' "$pins")"
  key="$({ echo "layout=$LAYOUT"; grep -v '^#' "$pins"; } | sha256sum | cut -c1-12)"
  echo "${LG_TORCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/torch}/torch$ver-cu$1-py$pyver-$key"
}

install_one() { # MAJOR
  local major="$1" dir pins="$here/pins-$1.txt" tmp start f rel missing wheels
  dir="$(dir_of "$major")"
  wheels="$(dirname "$dir")/wheels"
  [ -f "$dir/.installed" ] && return 0
  mkdir -p "$(dirname "$dir")"
  exec 9>"$(dirname "$dir")/.lock"
  flock 9
  if [ -f "$dir/.installed" ]; then exec 9>&-; return 0; fi
  start=$(date +%s)
  tmp="$dir.tmp.$$"
  rm -rf "$tmp" "$dir"
  mkdir -p "$tmp/lib"
  echo "torch-fake: installing $(sed -n 's/^torch==/torch /p' "$pins") for CUDA $major into $dir (wheels kept in $wheels)" >&2
  # Wheels are downloaded into a directory of our own and installed from there: pip's HTTP cache
  # cannot be relied on (a proxy that strips Cache-Control and ETag, as this project's machines
  # have, disables it), and `pip download` skips a wheel that is already in the directory.
  if ! "$PY" -m pip download --no-deps --disable-pip-version-check --no-input --only-binary=:all: \
        -d "$wheels" -r "$pins" >"$tmp/pip.log" 2>&1 ||
     ! "$PY" -m pip install --no-deps --no-index --find-links "$wheels" --no-compile --disable-pip-version-check \
        --no-warn-script-location --no-input --target "$tmp/site-packages" -r "$pins" >>"$tmp/pip.log" 2>&1; then
    tail -n 25 "$tmp/pip.log" >&2
    rm -rf "$tmp"
    die "pip download/install -r $pins failed (output above). PyPI must be reachable, or the wheels already in $wheels."
  fi
  # The double must be the only CUDA runtime torch can bind: none may come with the tree.
  find "$tmp/site-packages" -name 'libcudart.so*' -exec rm -f {} +
  [ -z "$(find "$tmp/site-packages" -name 'libcudart.so*')" ] || die "could not remove a libcudart from $tmp/site-packages"
  if [ "$major" = 13 ]; then
    for f in "$CUDA_HOME"/lib64/lib*.so.*; do
      case "$(basename "$f")" in libcudart*) continue ;; esac
      ln -sf "$f" "$tmp/lib/"
    done
  fi
  while IFS= read -r f; do
    rel="${f#"$tmp"/}"
    ln -sf "../$rel" "$tmp/lib/$(basename "$f")"
  done < <(find "$tmp/site-packages/nvidia" -path '*/lib/lib*.so*' \( -type f -o -type l \) 2>/dev/null)
  # Every library torch's binaries NEED must resolve, except the runtime (the double, preloaded)
  # and libcuda.so.1 (only the lazily loaded NVRTC shim needs it; there is no driver).
  missing="$(for f in "$tmp"/site-packages/torch/lib/*.so* "$tmp"/site-packages/torch/_C*.so; do
      LD_LIBRARY_PATH="$tmp/lib:$tmp/site-packages/torch/lib" ldd "$f" 2>/dev/null | awk '/not found/ { print $1 }'
    done | sort -u | grep -vE '^lib(cudart\.so\.[0-9]+|cuda\.so\.1)$' || true)"
  if [ -n "$missing" ]; then
    rm -rf "$tmp"
    die "after installing $pins, torch's libraries still NEED: $(echo $missing) (add the package that has them to $pins)"
  fi
  # ... and every function they import must be defined by something on that path (Python loads
  # extension modules with RTLD_NOW): a toolkit library older than the wheel's shows up here.
  missing="$(export LC_ALL=C
    { for f in "$tmp"/lib/*.so* "$tmp"/site-packages/torch/lib/*.so*; do
        nm -D --defined-only "$f" 2>/dev/null | awk '{ sub(/@.*/, "", $3); print $3 }'
      done
      awk '!/^#/ { print $1 }' "$here/../fakecuda/exports-$major.txt"   # what the double exports
    } | sort -u > "$tmp/defined.txt"
    for f in "$tmp"/site-packages/torch/lib/libtorch*.so "$tmp"/site-packages/torch/lib/libc10*.so; do
      nm -D --undefined-only "$f" | awk '$1 == "U" && $2 !~ /@(GLIBC|GLIBCXX|CXXABI|GCC|OMP|GOMP)/ { sub(/@.*/, "", $2); print $2 }'
    done | grep -vE '^(_Z|Py|_Py|__cxa_|__gxx_|_Unwind_|__gmon|_ITM)' | sort -u | comm -23 - "$tmp/defined.txt" | head -n 20)"
  if [ -n "$missing" ]; then
    rm -rf "$tmp"
    die "torch's libraries import functions no installed library defines: $(echo $missing) (a CUDA library is missing or too old: pin the pip package that has them in $pins)"
  fi
  printf 'pins=%s\nfinished=%s\nseconds=%s\n' "$pins" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" > "$tmp/.installed"
  mv "$tmp" "$dir"
  echo "torch-fake: installed in $(( $(date +%s) - start )) s" >&2
  exec 9>&-
}

case "${1:-}" in
12|13)
  if [ "${2:-}" = --print-dir ]; then dir_of "$1"; else install_one "$1"; fi ;;
wrapper)
  [ $# -eq 5 ] || die "usage: install.sh wrapper OUT FAKE13 FAKE12 DRIVER"
  install_one 13
  install_one 12
  mkdir -p "$(dirname "$2")"
  sed -e "s|@DIR13@|$(dir_of 13)|; s|@DIR12@|$(dir_of 12)|; s|@FAKE13@|$3|; s|@FAKE12@|$4|; s|@DRIVERDIR@|$(dirname "$5")|; s|@PYTHON@|$(command -v "$PY")|" \
    "$here/torch-python.in" > "$2.tmp"
  chmod 0755 "$2.tmp"
  mv "$2.tmp" "$2" ;;
*) echo "usage: $0 12|13 [--print-dir] | wrapper OUT FAKE13 FAKE12 DRIVER" >&2; exit 2 ;;
esac
