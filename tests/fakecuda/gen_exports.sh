#!/usr/bin/env bash
# gen_exports.sh: writes exports-13.txt / exports-12.txt (and prop12.h), the data the runtime test
# double's export list is built from (gen_stubs.sh turns them into a version script and stubs).
# Run by hand when the double should follow a newer runtime; the Makefile only reads the results.
#   gen_exports.sh 13   reads $CUDA_HOME/lib64/libcudart.so.13 (the toolkit's own runtime)
#   gen_exports.sh 12   downloads nvidia-cuda-runtime-cu12 (the version torch's CUDA 12 wheel pins)
#                       with pip into a temporary directory (never kept) and reads its
#                       libcudart.so.12 and include/driver_types.h (cudaDeviceProp's CUDA 12 layout)
# Output: one "name node" line per function the real runtime exports, sorted (LC_ALL=C).
set -euo pipefail
cd "$(dirname "$0")"
export LC_ALL=C
CU12_PIN="${CU12_PIN:-nvidia-cuda-runtime-cu12==12.8.90}"
table() { # LIB LABEL OUT
  { echo "# The functions $2 exports, with their version node: made by tests/fakecuda/gen_exports.sh"
    echo "# from $(basename "$1") ($(sha256sum "$1" | cut -c1-16)); one 'name node' per line."
    nm -D --defined-only "$1" | awk '$2 == "T" { split($3, a, "@"); print a[1], a[length(a)] }' | sort -u
  } > "$3"
  echo "wrote $3: $(grep -vc '^#' "$3") functions"
}
case "${1:-}" in
13) table "${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so.13" "the CUDA 13 toolkit's libcudart.so.13" exports-13.txt ;;
12)
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  pip download --quiet --no-deps -d "$tmp" "$CU12_PIN"
  (cd "$tmp" && python3 -m zipfile -e ./*.whl x)
  table "$tmp/x/nvidia/cuda_runtime/lib/libcudart.so.12" "$CU12_PIN's libcudart.so.12" exports-12.txt
  { echo "/* prop12.h: struct cudaDeviceProp as CUDA 12 lays it out (from $CU12_PIN's include/driver_types.h,"
    echo " * by tests/fakecuda/gen_exports.sh 12): what cudaGetDeviceProperties_v2 fills in the libcudart.so.12"
    echo " * build of the double. CUDA 13 removed fields from the middle of the struct, so the layouts differ. */"
    echo "#ifndef FK_PROP12_H"; echo "#define FK_PROP12_H"; echo "#include <stddef.h>"
    echo "struct fk_prop12 {"
    awk '/^struct __device_builtin__ cudaDeviceProp/,/^};/' "$tmp/x/nvidia/cuda_runtime/include/driver_types.h" |
      sed 's/\/\*\*<.*//; s/[[:space:]]*$//' | grep -E '^[[:space:]]+[a-zA-Z]' | sed 's/cudaUUID_t/struct { char bytes[16]; }/'
    echo "};"; echo "#endif"
  } > prop12.h
  echo "wrote prop12.h"
  ;;
*) echo "usage: $0 13|12" >&2; exit 2 ;;
esac
