#!/usr/bin/env bash
# tests/gpu/run.sh: `make test-gpu`, the GPU tests (bash tests/gpu/run.sh BUILD). Exits 77
# with one line when there is no GPU (CI, this project's own machines), else runs:
#   validator   each tests/gpu/*.cu (the validator kernel against the
#               CPU scan on the same buffers) built by `make gpu-tests` as BUILD/tests/gpu/NAME
#   progs       the end-to-end programs on the real runtime, every action (tests/torch/progs_real.py)
#   cupti_layout  the real libcupti's launch-callback parameters for 505/506/211/214 as src/hooks/cupti.c
#               reads them (tests/gpu/cupti_layout.sh)
#   probe       PyTorch's real NLL kernels: names + cudaFuncGetParamInfo sizes from the live
#               process against specs/pytorch.conf (tests/torch/probe_kernels.py; needs torch)
# Each under its own timeout; PASS/FAIL/SKIP per test and "N passed, N failed" last.
# scripts/gpu-check.sh sets LG_GPU_OUT_JSON (results for its report) and LG_GPU_WORKDIR.
# Exit: 0 all passed (skips allowed), 1 a failure, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD="${1:-build}"
PYTHON="${PYTHON:-python3}"
WORK="${LG_GPU_WORKDIR:-$BUILD/test-gpu}"

# LG_GPU_FAKE=1 runs the programs under the test double instead (a GPU-free check of this
# script and of progs_real.py; the probe then skips): it proves nothing about a GPU.
fake=()
if [ "${LG_GPU_FAKE:-0}" = 1 ]; then
  fake=(--fake)
  echo "test-gpu: LG_GPU_FAKE=1: programs run under the test double, not a GPU"
# any /dev/nvidiaN (a container keeps its one GPU's host minor number), as gpu-check.sh.
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! compgen -G '/dev/nvidia[0-9]*' >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test-gpu: no NVIDIA GPU here (nvidia-smi missing or failing, or no /dev/nvidiaN): skipped"
  exit 77
fi
# LG_GPU_PROBE_ONLY=1: only say whether a GPU is there (the Makefile asks before building).
[ "${LG_GPU_PROBE_ONLY:-0}" = 1 ] && exit 0
mkdir -p "$WORK"
results="$WORK/results.tsv"
: > "$results"
pass=0; fail=0; skip=0

record() { # name status detail
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$results"
  printf '%-4s %-28s %s\n' "${2^^}" "$1" "$3"
  case $2 in pass) pass=$((pass+1));; skip) skip=$((skip+1));; *) fail=$((fail+1));; esac
  write_json
}

# written after every test, not once at the end: when gpu-check.sh's part budget
# kills this script (its tests' own budgets add up to more than the part's), the report keeps
# the results of the tests that did finish.
write_json() {
  [ -n "${LG_GPU_OUT_JSON:-}" ] || return 0
  "$PYTHON" - "$results" "$WORK" "$LG_GPU_OUT_JSON" <<'PY'
import json, os, sys
res, work, out = sys.argv[1:4]
tests = []
for line in open(res):
    n, st, det = (line.rstrip("\n").split("\t") + ["", ""])[:3]
    tests.append({"name": n, "status": st, "detail": det})
data = {"tests": tests}
for key, fn in (("kernels", "probe.json"), ("progs", "progs.json")):
    try:
        d = json.load(open(os.path.join(work, fn)))
        data[key] = d.get("kernels") if key == "kernels" else d.get("cases")
    except (OSError, ValueError):
        pass
data["summary"] = "%d tests: %s" % (len(tests), ", ".join("%s %s" % (t["name"], t["status"]) for t in tests))
json.dump(data, open(out + ".tmp", "w"), indent=1)
os.replace(out + ".tmp", out)
PY
}

run_test() { # name budget command...: status from the exit code (0 pass, 77 skip, 124 timeout)
  local name=$1 budget=$2 rc log="$WORK/${1//\//_}.log"
  shift 2
  timeout -k 5 "$budget" "$@" > "$log" 2>&1; rc=$?
  sed 's/^/    | /' "$log" | tail -n 25
  case $rc in
    0) record "$name" pass "$(tail -n1 "$log")";;
    77) record "$name" skip "$(tail -n1 "$log")";;
    124|137) record "$name" timeout "killed after ${budget}s";;
    *) record "$name" fail "rc=$rc: $(tail -n1 "$log")";;
  esac
}

jobs=$(nproc 2>/dev/null || echo 4)
make -s -j"$jobs" -k BUILD="$BUILD" test-programs >"$WORK/build.log" 2>&1 || \
  echo "test-gpu: make test-programs had errors (see $WORK/build.log); the tests that need them say so"

# The validator tests: `make gpu-tests` builds each tests/gpu/NAME.cu into
# BUILD/tests/gpu/NAME. test_validator's log (validator_test_validator.log) also carries the
# timing lines that the bench part of scripts/gpu-check.sh reports.
found=0
make -s -j"$jobs" BUILD="$BUILD" gpu-tests >"$WORK/build-gpu-tests.log" 2>&1
for src in tests/gpu/*.cu; do
  [ -f "$src" ] || continue
  found=1
  name=$(basename "$src" .cu)
  if [ -x "$BUILD/tests/gpu/$name" ]; then
    run_test "validator/$name" "${LG_GPU_VALIDATOR_BUDGET:-60}" "$BUILD/tests/gpu/$name"
  else
    record "validator/$name" fail "not built: $(tail -n1 "$WORK/build-gpu-tests.log")"
  fi
done
[ $found = 1 ] || record validator skip "no tests/gpu/*.cu"

run_test progs 45 "$PYTHON" tests/torch/progs_real.py "${fake[@]}" --build "$BUILD" --out "$WORK/progs.json" --workdir "$WORK/progs"
if [ ${#fake[@]} -eq 0 ]; then
  run_test cupti_layout 30 bash tests/gpu/cupti_layout.sh "$BUILD"
else
  record cupti_layout skip "the real libcupti is needed (tests/e2e/test_cupti_layout.sh runs the double's)"
fi
if [ ${#fake[@]} -eq 0 ] && "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  run_test probe 60 "$PYTHON" tests/torch/probe_kernels.py --lib "$PWD/$BUILD/liblabelguard.so" \
    --conf specs/pytorch.conf --out "$WORK/probe.json" --workdir "$WORK/probe" --timeout 50
else
  record probe skip "PyTorch with CUDA is not importable by $PYTHON (or LG_GPU_FAKE=1)"
fi

write_json
[ $skip -eq 0 ] || printf '%d skipped\n' $skip
printf '%d passed, %d failed\n' $pass $fail
[ $fail -eq 0 ]
