# shellcheck shell=bash
# tests/pip/lib.sh: the prologue of the wheel tests (sourced by tests/pip/test_*.sh): builds the
# wheel from the checkout, installs it with `pip install --no-deps` into a fresh venv made by the
# test, and sets up a run of it from a directory outside the checkout, with the checkout's build
# directory and python/ on no path. Real torch runs on the CUDA test double, whose two files
# (libcudart.so.N, the driver half libcuda.so.1) are copied out of the build directory first.
#   pip_build_wheel DIR    $WHEEL: the wheel built into DIR
#   pip_setup              $T, $WHEEL (built), $VENV (labelguard installed), $OUT (a cwd outside)
#   pip_tools              installs tests/pip/requirements.txt into $VENV (cached downloads)
#   torch_env MAJOR [found]  TENV: what real torch MAJOR (13: 2.15 cu132, 12: 2.10 cu128) needs
#   in_venv CMD...         runs CMD in $OUT with PATH=$VENV/bin first and nothing of the checkout
# Skips (77) in sanitizer builds: the wheel holds the plain build's library.
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
[ -z "${LG_SANITIZER:-}" ] || { echo "the wheel is made from the plain build only (LG_SANITIZER=$LG_SANITIZER)"; exit 77; }
PY="${LG_TORCH_PYTHON:-python3}"
T=$(mktemp -d "${TMPDIR:-/tmp}/lg-pip-test.XXXXXX")
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
# shellcheck source=tests/lib.sh
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"
unset LABELGUARD_ACTION LABELGUARD_MODE LABELGUARD_LOG LABELGUARD_HOOKS LABELGUARD_KERNELS \
      LABELGUARD_BACKTRACE LABELGUARD_SAMPLES LABELGUARD_QUIET LABELGUARD_LIB LD_PRELOAD PYTHONPATH \
      LG_BUILD_PY

# The wheel, made by the backend exactly as `make wheel` makes it.
pip_build_wheel() { # DIR -> $WHEEL, the wheel's path
  (cd "$LG_ROOT" && LG_BUILD="$LG_BUILD" "$PY" -c 'import sys; sys.path.insert(0, "python"); import wheel_backend as b; print(b.build_wheel(sys.argv[1]))' "$1") >"$T/build.out" 2>"$T/build.err" \
    || { cat "$T/build.err"; fail "the wheel backend failed"; finish; }
  WHEEL="$1/$(tail -n1 "$T/build.out")"
}

pip_setup() {
  pip_build_wheel "$T/dist"
  VENV="$T/venv"
  OUT="$T/outside"
  mkdir -p "$OUT"
  "$PY" -m venv "$VENV" >"$T/venv.log" 2>&1 || { cat "$T/venv.log"; fail "python -m venv failed"; finish; }
  "$VENV/bin/python" -m pip install --no-deps --no-index --disable-pip-version-check -q "$WHEEL" >>"$T/venv.log" 2>&1 \
    || { cat "$T/venv.log"; fail "pip install --no-deps $WHEEL failed"; finish; }
}

# The pinned tools, downloaded once per requirements file into the cache (one flock per cache).
pip_tools() {
  local req="$LG_ROOT/tests/pip/requirements.txt" key dir
  key=$(sha256sum "$req" | cut -c1-12)
  dir="${LG_PIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/pip}/$key"
  mkdir -p "$dir"
  (
    exec 9>"$dir/.lock"; flock 9
    [ -f "$dir/.complete" ] && exit 0
    "$PY" -m pip download --no-deps --disable-pip-version-check -q -d "$dir" -r "$req" >"$T/dl.log" 2>&1 \
      || { cat "$T/dl.log"; exit 1; }
    touch "$dir/.complete"
  ) || { fail "pip download -r tests/pip/requirements.txt failed: PyPI must be reachable, or the wheels already in $dir"; finish; }
  "$VENV/bin/python" -m pip install --no-deps --no-index --disable-pip-version-check -q --find-links "$dir" -r "$req" \
    >"$T/tools.log" 2>&1 || { cat "$T/tools.log"; fail "installing tests/pip/requirements.txt into the venv failed"; finish; }
}

# Real torch on the double, with the double's files copied out of the build directory. Kept in
# TENV (given to in_venv's command only), so that this script's own commands never preload it.
TENV=()
torch_env() { # MAJOR [found]: "found" lets the loader find the double through LD_LIBRARY_PATH
  # as it finds a real libcudart (a NEEDED of torch's libraries, loaded with them) instead of
  # preloading it, which puts it before labelguard in the symbol search.
  local major=$1 how=${2:-preloaded} tdir fake
  tdir=$(CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" bash "$LG_ROOT/tests/torch-fake/install.sh" "$major" --print-dir)
  [ -f "$tdir/.installed" ] || { fail "torch for CUDA $major is not installed ($tdir): run make build/torch-python"; finish; }
  if [ "$major" = 13 ]; then fake="$LG_ROOT/$LG_BUILD/fakecuda/libcudart.so.13"; else fake="$LG_ROOT/$LG_BUILD/fakecuda12/libcudart.so.12"; fi
  if [ ! -d "$T/double$major" ]; then
    mkdir -p "$T/double$major"
    cp "$fake" "$LG_ROOT/$LG_BUILD/fakecuda-driver/libcuda.so.1" "$T/double$major/"
  fi
  TENV=("PYTHONPATH=$tdir/site-packages" PYTHONNOUSERSITE=1 "LD_LIBRARY_PATH=$tdir/lib:$T/double$major")
  [ "$how" = found ] || TENV+=("LD_PRELOAD=$T/double$major/${fake##*/}")
}

in_venv() { # CMD... : in $OUT, the venv's bin first, with TENV; stdout $T/out, stderr $T/err, status $rc
  (cd "$OUT" && env PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" "${TENV[@]}" "$@") >"$T/out" 2>"$T/err"; rc=$?
}

show() { sed 's/^/  stdout| /' "$T/out"; sed 's/^/  stderr| /' "$T/err"; }
expect_rc() { [ "$rc" -eq "$1" ] || { show; fail "$2: exit status $rc, expected $1"; return 1; }; ok "$2"; }
expect_in() { # out|err STRING DESCRIPTION
  grep -qF -- "$2" "$T/$1" || { show; fail "$3: '$2' not in std$1"; return 1; }; ok "$3"
}
# Nothing of the checkout may be on a search path of what runs (the double was copied out).
expect_off_paths() {
  local e
  for e in "PATH=$VENV/bin:/usr/local/bin:/usr/bin:/bin" "${TENV[@]}"; do
    case $e in PATH=*|PYTHONPATH=*|LD_LIBRARY_PATH=*|LD_PRELOAD=*) case $e in *"$LG_ROOT"*) fail "${e%%=*} holds the checkout: ${e#*=}";; esac;; esac
  done
}
