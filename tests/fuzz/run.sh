#!/usr/bin/env bash
# tests/fuzz/run.sh: builds every tests/fuzz/fuzz_*.c as a libFuzzer binary and runs it over its
# seed corpus (tests/fuzz/corpus/<target>/) plus generated inputs.
#   `make test` (via test_fuzz_short.sh): LG_FUZZ_RUNS runs per target (default 20000).
#   `make fuzz`: LG_FUZZ_LONG=1, LG_FUZZ_TIME seconds per target (default 300).
# Each target names the library sources it needs on a line "LG_FUZZ_SOURCES: src/a.c src/b.c";
# they are compiled with clang (-fsanitize=fuzzer,address,undefined) next to the target, with
# glib and the embedded built-in spec table (specs/pytorch.conf) linked in.
# Exit: 0 all targets clean, 77 (one-line reason) when clang/libFuzzer are missing, 1 on a
# crash or build failure (the reproducer is kept in $LG_BUILD/fuzz/<target>/crash-*).
set -u
cd "$(dirname "$0")/../.."
BUILD="${LG_BUILD:-build}"
OUT="$BUILD/fuzz"
CLANG="${LG_CLANG:-$(command -v clang || command -v clang-14 || true)}"
if [ -z "$CLANG" ]; then
  echo "skip: clang not found (apt-get install clang libclang-rt-14-dev)"; exit 77
fi
mkdir -p "$OUT"
probe="$OUT/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$probe"
if ! "$CLANG" -fsanitize=fuzzer,address "$probe" -o "$OUT/probe" >"$OUT/probe.log" 2>&1; then
  echo "skip: $CLANG cannot link libFuzzer (apt-get install libclang-rt-14-dev): $(head -n1 "$OUT/probe.log")"; exit 77
fi
if ! pkg-config --exists glib-2.0; then
  echo "skip: glib-2.0 development files not found (apt-get install libglib2.0-dev)"; exit 77
fi

SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
CFLAGS_F="-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter -Isrc -Icuda -Iinclude $(pkg-config --cflags glib-2.0)"
printf '.section .rodata\n.balign 8\n.globl lg_builtin_specs\n.hidden lg_builtin_specs\nlg_builtin_specs:\n.incbin "specs/pytorch.conf"\n.globl lg_builtin_specs_end\n.hidden lg_builtin_specs_end\nlg_builtin_specs_end:\n.byte 0\n.section .note.GNU-stack,"",@progbits\n' > "$OUT/builtin_specs.S"
"$CLANG" -c "$OUT/builtin_specs.S" -o "$OUT/builtin_specs.o" || { echo "cannot embed specs/pytorch.conf"; exit 1; }

if [ "${LG_FUZZ_LONG:-0}" = 1 ]; then
  limit="-max_total_time=${LG_FUZZ_TIME:-300}"
else
  limit="-runs=${LG_FUZZ_RUNS:-20000}"
fi
status=0; ran=0
for src in tests/fuzz/fuzz_*.c; do
  [ -f "$src" ] || continue
  name=$(basename "$src" .c)
  sources=$(sed -n 's/.*LG_FUZZ_SOURCES:\(.*\)$/\1/p' "$src" | head -n1)
  if [ -z "$sources" ]; then
    echo "FAIL $name: no 'LG_FUZZ_SOURCES: src/...' line in $src"; status=1; continue
  fi
  bin="$OUT/$name"
  # shellcheck disable=SC2086
  if ! "$CLANG" $CFLAGS_F $SAN -o "$bin" "$src" $sources "$OUT/builtin_specs.o" \
        $(pkg-config --libs glib-2.0) -ldl -lm >"$OUT/$name.build.log" 2>&1; then
    echo "FAIL $name: build failed"; sed 's/^/    /' "$OUT/$name.build.log" | tail -n 30; status=1; continue
  fi
  root=$PWD; work="$root/$OUT/$name.d"; log="$root/$OUT/$name.log"; mkdir -p "$work/corpus"
  seeds=""; [ -d "tests/fuzz/corpus/$name" ] && seeds="$root/tests/fuzz/corpus/$name"
  # The generated corpus lives under $work; the seed directory is only read.
  # shellcheck disable=SC2086
  if (cd "$work" && ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" "$root/$bin" \
        $limit -max_len=4096 -timeout=10 -rss_limit_mb=2048 corpus ${seeds:+"$seeds"} >"$log" 2>&1); then
    echo "ok   $name ($(grep -a -o 'Done [0-9]* runs.*' "$log" | head -n1))"
  else
    echo "FAIL $name: see $OUT/$name.log and the crash-* reproducer in $work"
    grep -a -E 'ERROR|SUMMARY|==[0-9]+==|runtime error' "$log" | head -n 20 | sed 's/^/    /'
    status=1
  fi
  ran=$((ran+1))
done
[ $ran -gt 0 ] || { echo "no fuzz targets ran"; status=1; }
exit $status
