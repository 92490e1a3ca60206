#!/usr/bin/env bash
# test_gpu_check.sh: the GPU-free checks of the GPU proof (scripts/gpu-check.sh, tests/gpu/run.sh,
# bench/run.sh and the Python behind them), for `make test`. Each check can fail:
#   - bash -n and shellcheck (when installed) on every script of the GPU proof
#   - without a GPU, gpu-check.sh and tests/gpu/run.sh exit 77 with exactly one line
#   - argument handling: unknown option, two OUTDIRs, unknown part -> 2; --help -> 0
#   - the report writer on canned part results (gpu-check.sh --selftest-report, fixtures/)
#   - the scenario judge on canned runs (run_scenarios.py --judge-selftest): 27 verdicts
#   - the kernel probe's comparison on canned events: 10/10 kernels, the 2 planted problems found
#   - the .deb path (when third_party/debs is populated): extraction, the generated
#     pkg-config, and a static glib link with it
#   - every GPU end-to-end case of progs_real.py, run under the test double (--fake)
#   - the GPU-path cases of gpu_path.py that the double can show, on real torch (--fake)
#   - the label-smoothing formula of the mask reference (when PyTorch is importable)
# Exit 0 pass, 1 fail. Run: bash tests/torch/test_gpu_check.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
fails=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { # description, then a command whose status decides
  local what=$1; shift
  if "$@" >"$tmp/out" 2>&1; then echo "ok   $what"
  else echo "FAIL $what"; sed 's/^/     | /' "$tmp/out" | tail -n 15; fails=$((fails+1)); fi
}
expect_rc() { # rc, command...: the command's exit status must be rc
  local want=$1 rc; shift
  "$@"; rc=$?
  [ "$rc" -eq "$want" ] || { echo "exit status $rc, expected $want"; return 1; }
}
scripts=(scripts/gpu-check.sh scripts/fetch-debs.sh tests/gpu/run.sh tests/gpu/cupti_layout.sh bench/run.sh tests/torch/test_gpu_check.sh)
for s in "${scripts[@]}"; do check "bash -n $s" bash -n "$s"; done
if command -v shellcheck >/dev/null; then check "shellcheck" shellcheck "${scripts[@]}"
else echo "skip shellcheck: not installed (Debian package shellcheck)"; fi

# The same GPU test as gpu-check.sh's has_gpu (any /dev/nvidiaN).
if ! { command -v nvidia-smi >/dev/null && compgen -G '/dev/nvidia[0-9]*' >/dev/null; }; then
  one_line_77() {
    local out rc
    out=$("$@" 2>&1); rc=$?
    [ "$rc" -eq 77 ] || { echo "exit status $rc, expected 77: $out"; return 1; }
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "more than one line: $out"; return 1; }
    grep -qi "no NVIDIA GPU" <<<"$out" || { echo "line does not say why: $out"; return 1; }
  }
  check "gpu-check.sh without a GPU: 77, one line" one_line_77 scripts/gpu-check.sh "$tmp/r"
  check "no report directory written without a GPU" test ! -e "$tmp/r"
  check "tests/gpu/run.sh without a GPU: 77, one line" one_line_77 bash tests/gpu/run.sh build
else
  echo "skip exit-77 checks: this machine has a GPU"
fi
check "unknown option -> 2" expect_rc 2 scripts/gpu-check.sh --bogus
check "two OUTDIRs -> 2" expect_rc 2 scripts/gpu-check.sh a b
check "unknown part -> 2" expect_rc 2 scripts/gpu-check.sh --parts env,nope
check "--help -> 0" expect_rc 0 scripts/gpu-check.sh --help
check "--internal-part refused from outside" expect_rc 2 env -u LG_GPU_OUT scripts/gpu-check.sh --internal-part env

check "report writer on canned results" scripts/gpu-check.sh --selftest-report "$tmp/st"
check "scenario judge on 27 canned runs" python3 tests/torch/run_scenarios.py --judge-selftest tests/torch/fixtures/judge_cases.json
probe_fixture() {
  local out rc
  out=$(python3 tests/torch/probe_kernels.py --events 'tests/torch/fixtures/probe/*.jsonl'); rc=$?
  [ $rc -eq 1 ] || { echo "rc $rc, expected 1 (the fixture has 2 planted problems)"; return 1; }
  grep -q "10/10 kernels, 2 layout problems" <<<"$out" || { echo "$out"; return 1; }
  grep -q "MISMATCH: runtime 8,8,8,8,8,1,8,8,8,8" <<<"$out" || { echo "$out"; return 1; }
}
check "kernel probe finds the planted mismatches" probe_fixture

if compgen -G "third_party/debs/*.deb" >/dev/null; then
  debs_path() {
    local pfx="$tmp/debroot" pc ldf
    LG_FORCE_DEBS=1 scripts/gpu-check.sh --deps-only "$pfx" > "$tmp/deps.env" || return 1
    pc=$(sed -n 's/^PKG_CONFIG=//p' "$tmp/deps.env"); ldf=$(sed -n 's/^DEPS_LDFLAGS=//p' "$tmp/deps.env")
    [ "$pc" = "$pfx/pkg-config" ] || { echo "PKG_CONFIG=$pc"; return 1; }
    "$pc" --cflags glib-2.0 | grep -q "$pfx/usr/include/glib-2.0" || { echo "cflags: $("$pc" --cflags glib-2.0)"; return 1; }
    printf '#include <glib.h>\nint main(void){GHashTable*h=g_hash_table_new(g_str_hash,g_str_equal);g_hash_table_insert(h,"a","b");return (int)g_hash_table_size(h)-1;}\n' > "$tmp/g.c"
    # shellcheck disable=SC2046,SC2086 # flags are words
    gcc $("$pc" --cflags glib-2.0) "$tmp/g.c" -o "$tmp/g" $ldf -Wl,-Bstatic $("$pc" --static --libs-only-l glib-2.0 | sed 's/-lm//g') -Wl,-Bdynamic -lm -pthread || return 1
    "$tmp/g" && ! ldd "$tmp/g" | grep -q glib
  }
  check ".deb path: extract, pkg-config wrapper, static glib link" debs_path
else
  echo "skip .deb path: third_party/debs is empty (scripts/fetch-debs.sh fills it)"
fi

B="${LG_BUILD:-build}"
if [ -e "$B/liblabelguard.so" ] && [ -x "$B/progs/nll" ] && [ -e "$B/fakecuda/libcudart.so.13" ]; then
  check "progs_real.py (the GPU e2e cases) under the test double" \
    python3 tests/torch/progs_real.py --fake --build "$B" -j 2 --workdir "$tmp/progs"
else
  echo "skip progs_real.py under the test double: $B not built (make test-programs)"
fi

if [ -n "${LG_SANITIZER:-}" ]; then
  echo "skip gpu_path.py under the test double: real torch runs in the plain build only (LG_SANITIZER=$LG_SANITIZER)"
elif [ -x "$B/torch-python" ] && [ -e "$B/liblabelguard.so" ]; then
  check "gpu_path.py (the GPU-path cases) on real torch under the test double" \
    python3 tests/torch/gpu_path.py --fake --python "$B/torch-python" --lib "$B/liblabelguard.so" -j 2 --workdir "$tmp/gpath"
else
  echo "skip gpu_path.py under the test double: $B/torch-python not built"
fi

py_torch=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch' 2>/dev/null; then py_torch=$p; break; fi
done
if [ -n "$py_torch" ]; then
  check "mask reference: label smoothing formula equals PyTorch" "$py_torch" tests/torch/scenarios.py --selfcheck
else
  echo "skip label smoothing formula: PyTorch not importable"
fi
[ $fails -eq 0 ] && echo "all GPU-proof self-checks passed"
[ $fails -eq 0 ]
