#!/usr/bin/env bash
# fetch-ptxas.sh: puts the PTX assembler of an older CUDA release under third_party/ptxas/<ver>/
# and prints the path of its ptxas. Called by the Makefile when it builds the validator fatbin:
# SASS assembled by CUDA 13 (and PTX that says ISA 9.0) cannot be loaded or JIT-compiled by the
# drivers that CUDA 12 builds of PyTorch run on (R525 and up), so the validator's images for
# sm_75..sm_90 come from CUDA 12.0's ptxas and those for sm_100..sm_121 from CUDA 12.9's.
# Source: the registry's nvidia-cuda-nvcc-cu12 wheel (ptxas only; pip caches the download).
# third_party/ is ignored by git; carry it to a machine without network (scripts/gpu-check.sh).
#
# Usage: scripts/fetch-ptxas.sh VERSION    e.g. 12.0.76; exit 2 with a hint when it cannot fetch.
# Tested by tests/gpu/check_fatbin_archs.sh, which reads which assembler made each image.
set -euo pipefail
cd "$(dirname "$0")/.."
ver="${1:?usage: scripts/fetch-ptxas.sh VERSION (e.g. 12.0.76)}"
dest="third_party/ptxas/$ver"
if [ -x "$dest/bin/ptxas" ]; then echo "$PWD/$dest/bin/ptxas"; exit 0; fi
# LG_PIP_PYTHON: a Python that has pip (the wheel backend sets it: inside pip's isolated build
# environment the python3 on PATH has none).
py=${LG_PIP_PYTHON:-$(command -v python3 || true)}
[ -n "$py" ] && "$py" -m pip --version >/dev/null 2>&1 || { echo "fetch-ptxas: a python3 with pip is needed to fetch CUDA $ver's ptxas (set LG_PIP_PYTHON)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lg-ptxas.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m pip download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
     --python-version 3.11 -d "$tmp" "nvidia-cuda-nvcc-cu12==$ver" >"$tmp/pip.log" 2>&1; then
  tail -n 3 "$tmp/pip.log" >&2
  echo "fetch-ptxas: cannot download nvidia-cuda-nvcc-cu12==$ver from the package registry;" \
       "on a machine without network, carry third_party/ptxas from one that has it" >&2
  exit 2
fi
whl=$(ls "$tmp"/*.whl)
"$py" - "$whl" "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("nvidia/cuda_nvcc/bin/ptxas", sys.argv[2])
PY
mkdir -p "$dest/bin"
install -m 0755 "$tmp/x/nvidia/cuda_nvcc/bin/ptxas" "$dest/bin/ptxas"
"$dest/bin/ptxas" --version >"$dest/VERSION"
grep -q "release ${ver%.*}," "$dest/VERSION" || { echo "fetch-ptxas: $dest/bin/ptxas is not CUDA ${ver%.*}" >&2; cat "$dest/VERSION" >&2; rm -rf "$dest"; exit 2; }
echo "$PWD/$dest/bin/ptxas"
