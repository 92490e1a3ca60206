#!/usr/bin/env bash
# bench/run.sh: `make bench` (LG_BUILD set by the Makefile). GPU-free benchmarks under the
# runtime test double: instructions and wall time labelguard adds to an unwatched launch
# (bench/launch_loop.cu under callgrind), start-up cost in processes that never launch, and the
# host backend's cost per watched launch, C++ throw/catch with and without the library, and real
# torch's import, memory, registration and step cost with the library (bench/torch_bench.py, through
# build/torch-python). The work is in bench/bench.py; this wrapper checks what it needs.
# Prints a table and writes $LG_BUILD/bench.json. LG_BENCH_QUICK=1: fewer
# launches and repetitions. Figures are reported, never asserted (GPU figures: scripts/gpu-check.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD="${LG_BUILD:-build}"
for f in "$BUILD/liblabelguard.so" "$BUILD/fakecuda/libcudart.so.13" "$BUILD/bench/launch_loop" "$BUILD/bench/throw_loop" "$BUILD/progs/nll"; do
  [ -e "$f" ] || { echo "bench: $f is missing: run 'make bench' (it builds everything needed)"; exit 1; }
done
command -v valgrind >/dev/null || echo "bench: valgrind not installed (Debian package valgrind): the instruction count is skipped"
quick=()
[ "${LG_BENCH_QUICK:-0}" = 1 ] && quick=(--quick)
exec "${PYTHON:-python3}" bench/bench.py --build "$BUILD" "${quick[@]}"
