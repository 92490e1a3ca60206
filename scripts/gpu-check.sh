#!/usr/bin/env bash
# gpu-check.sh: the one command that proves labelguard on a real GPU. Run from the
# repository root on a machine with an NVIDIA GPU, PyTorch (CUDA build), nvcc and
# compute-sanitizer; no network needed. It prints the environment, builds the library and the
# test programs, runs the parts below, each under its own time budget (a part that overruns is
# killed and reported as `timeout`), and writes OUTDIR/gpu-report.json and gpu-report.md.
# The whole run stays inside LG_GPU_CHECK_BUDGET seconds (default 540, i.e. 9 minutes: one
# device session's 10-minute command with room to copy the report back).
#
#   part       what                                                        program
#   env        nvidia-smi, driver, torch/CUDA, libcudart/libcupti in torch tests/torch/env_probe.py
#   deps       glib dev files + pkg-config, from third_party/debs if absent this script (--deps-only)
#   build      make (library, test double, test programs)                  make
#   gpu-path   the paths a GPU makes normal, one PASS/FAIL/SKIP line each:   tests/torch/gpu_path.py
#              start event, graph handle reuse, replay text, index cost,
#              HOOKS=cupti, torch.profiler, async exit, async ring pressure
#              with a late bad batch, mask on a full GPU,
#              capture beside the raw-logits check, late enable, attach,
#              enable before CUDA (backend gpu; a fork child), attach to a
#              busy loop, torch.profiler after enable, torch.compile,
#              capture-to-graph losses against eager (torch.cond bodies;
#              graph_into), torch.multinomial's probabilities (sampling),
#              max_unpool2d indices (unpool), torch.bernoulli's p (bernoulli),
#              an unchecked assert turned into a device_assert report
#              (device_assert), Inductor's own Triton assert listed in it
#              with its generated file and line (compiled_assert)
#              (see that file's docstring)
#   scenarios  real PyTorch training loops x actions                       tests/torch/run_scenarios.py
#   test-gpu   validator vs CPU scan, e2e programs on the real runtime,    tests/gpu/run.sh
#              live kernel names + cudaFuncGetParamInfo sizes vs specs
#   bench      steps/s ratios, validator time vs bandwidth, added latency  tests/torch/bench_train.py
#
# On an Arm host (GH200, GB200/GB300, DGX Spark: `LG_DEBS_ARCH=arm64 scripts/fetch-debs.sh` on
# an x86_64 machine brings its glib packages) every part runs natively as on x86_64, and confirms
# what qemu-user cannot (tests/qemu/, docs/limits.md): the validator's sm_90/sm_100/sm_103/sm_121
# SASS on those GPUs, the verdict ring read under Arm's weaker memory ordering, CUPTI on the
# aarch64 driver, gdb's calls for `attach` (gpu-path), aarch64 torch's kernels against the specs.
#
# Usage: scripts/gpu-check.sh [--parts LIST] [OUTDIR]        (OUTDIR default gpu-report/)
#        scripts/gpu-check.sh --deps-only [PREFIX]            set up glib from the .debs only
#        scripts/gpu-check.sh --selftest-report [DIR]         report writer on canned results
# Exit: 0 all parts passed, 1 some part failed or timed out, 2 usage, 77 no GPU here.
# Without a GPU it prints one line and exits 77 (how CI and `make test` see it). GPU-free
# tests: bash -n, shellcheck, the exit-77 path, --selftest-report, --deps-only with
# LG_FORCE_DEBS=1; LG_GPU_CHECK_ASSUME_GPU=1 skips the
# GPU detection so the part runner and its timeouts can be exercised on a GPU-less machine.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
PYTHON="${PYTHON:-python3}"
BUILD="${BUILD:-build}"
TOTAL_BUDGET="${LG_GPU_CHECK_BUDGET:-540}"
ALL_PARTS="env deps build gpu-path scenarios test-gpu bench"
DEBS_DIR="${LG_DEBS_DIR:-$ROOT/third_party/debs}"
DEB_PREFIX="$ROOT/$BUILD/debroot"

usage() {
  sed -n '/^# Usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//'
}

die_usage() { echo "gpu-check: $*" >&2; usage >&2; exit 2; }

has_gpu() {
  [ "${LG_GPU_CHECK_ASSUME_GPU:-0}" = 1 ] && return 0
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  # Any /dev/nvidiaN, not only nvidia0: a container given one GPU of a larger host
  # keeps that GPU's minor number (e.g. /dev/nvidia3 alone), and the run would exit 77 on a GPU.
  compgen -G '/dev/nvidia[0-9]*' >/dev/null || return 1
  nvidia-smi -L >/dev/null 2>&1
}

# --- deps: glib's development files and pkg-config -------------------------------------------
# Prints shell assignments (PKG_CONFIG=..., LDFLAGS=...) for make. Uses the system's glib when
# pkg-config finds it with its static archive, else extracts third_party/debs with dpkg -x
# (no root, no dpkg database) into $BUILD/debroot and writes a pkg-config wrapper that points
# into it. LG_FORCE_DEBS=1 takes the .deb path even when the system has glib (for testing).
system_glib_ok() {
  command -v pkg-config >/dev/null 2>&1 || return 1
  pkg-config --exists glib-2.0 || return 1
  local libdir
  libdir=$(pkg-config --variable=libdir glib-2.0) || return 1
  [ -f "$libdir/libglib-2.0.a" ] && pkg-config --static --libs glib-2.0 >/dev/null 2>&1
}

# dpkg-deb where there is one; else the .deb's own format (an ar archive holding data.tar.*),
# so a machine that is not Debian-based can use the packages too.
extract_deb() { # file prefix
  local member
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  member=$(ar t "$1" | grep '^data\.tar') || return 1
  case "$member" in
    *.xz) ar p "$1" "$member" | tar -xJ -C "$2";;
    *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2";;
    *.gz) ar p "$1" "$member" | tar -xz -C "$2";;
    *) ar p "$1" "$member" | tar -x -C "$2";;
  esac
}

setup_deps() { # prefix
  local prefix=$1 f multiarch libdir real arch
  if [ "${LG_FORCE_DEBS:-0}" != 1 ] && system_glib_ok; then
    echo "deps: system glib $(pkg-config --modversion glib-2.0) with static archive" >&2
    echo "PKG_CONFIG=pkg-config"
    echo "DEPS_LDFLAGS="
    return 0
  fi
  if ! compgen -G "$DEBS_DIR/*.deb" >/dev/null; then
    echo "deps: glib development files missing and no .debs in $DEBS_DIR (run scripts/fetch-debs.sh on a machine with network, then carry third_party/debs)" >&2
    return 1
  fi
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  [ -n "$multiarch" ] || multiarch="$(uname -m)-linux-gnu"
  case "$(uname -m)" in x86_64) arch=amd64;; aarch64) arch=arm64;; *) arch=$(uname -m);; esac
  rm -rf "$prefix"; mkdir -p "$prefix"
  for f in "$DEBS_DIR"/*.deb; do
    case "$f" in *_"$arch".deb|*_all.deb) ;; *) echo "deps: $f is not for $arch" >&2; return 1;; esac
    extract_deb "$f" "$prefix" || { echo "deps: cannot extract $f" >&2; return 1; }
  done
  libdir="$prefix/usr/lib/$multiarch"
  [ -f "$libdir/libglib-2.0.a" ] || { echo "deps: $libdir/libglib-2.0.a missing after extraction" >&2; return 1; }
  # The carried pkgconf first (it needs its own libpkgconf3), else the machine's pkg-config:
  # both honour PKG_CONFIG_LIBDIR and PKG_CONFIG_SYSROOT_DIR.
  real=""
  if LD_LIBRARY_PATH="$libdir" "$prefix/usr/bin/pkgconf" --version >/dev/null 2>&1; then
    real="LD_LIBRARY_PATH='$libdir' exec '$prefix/usr/bin/pkgconf'"
  elif command -v pkg-config >/dev/null 2>&1; then
    real="exec '$(command -v pkg-config)'"
  else
    echo "deps: neither the carried pkgconf nor a system pkg-config runs here" >&2; return 1
  fi
  cat > "$prefix/pkg-config" <<EOF
#!/bin/sh
# Generated by scripts/gpu-check.sh: pkg-config answering from the .debs extracted here.
PKG_CONFIG_LIBDIR='$libdir/pkgconfig:$prefix/usr/share/pkgconfig'
PKG_CONFIG_SYSROOT_DIR='$prefix'
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
unset PKG_CONFIG_PATH
$real "\$@"
EOF
  chmod +x "$prefix/pkg-config"
  "$prefix/pkg-config" --exists glib-2.0 || { echo "deps: the extracted glib-2.0.pc is not found by $prefix/pkg-config" >&2; return 1; }
  echo "deps: glib $("$prefix/pkg-config" --modversion glib-2.0) from $DEBS_DIR, extracted into $prefix" >&2
  echo "PKG_CONFIG=$prefix/pkg-config"
  # The Makefile links glib with --libs-only-l: the linker needs the directory.
  echo "DEPS_LDFLAGS=-L$libdir"
}

# --- part bookkeeping -------------------------------------------------------------------------
write_status() { # name status rc seconds budget summary
  "$PYTHON" - "$@" <<'EOF'
import json, sys, os
name, status, rc, secs, budget, summary = sys.argv[1:7]
outdir = os.environ["LG_GPU_OUT"]
with open(os.path.join(outdir, "parts", name + ".status.json"), "w") as f:
    json.dump({"part": name, "status": status, "rc": int(rc), "seconds": float(secs),
               "budget_s": int(budget), "log": "logs/%s.log" % name, "summary": summary}, f)
EOF
}

# Runs one part under `timeout` (which signals the part's whole process group) with the budget
# clipped to what is left of the total; output goes to the terminal and logs/NAME.log.
# The part runs in a fresh bash (timeout cannot run a function): `gpu-check.sh --internal-part`.
run_part() { # name budget
  local name=$1 budget=$2 left start end rc status summary log
  shift 2
  log="$LG_GPU_OUT/logs/$name.log"
  left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 15 ]; then
    : > "$log"
    write_status "$name" timeout 124 0 "$budget" "not started: the whole check's ${TOTAL_BUDGET}s budget is spent"
    echo "=== $name: not started, out of time"
    return
  fi
  [ "$budget" -le $(( left - 10 )) ] || budget=$(( left - 10 ))
  echo "=== $name (budget ${budget}s)"
  start=$(date +%s.%N)
  LG_PART_BUDGET=$budget timeout -k 5 "$budget" bash "$0" --internal-part "$name" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  end=$(date +%s.%N)
  case $rc in
    0) status=pass;;
    77) status=skip;;
    124|137) status=timeout;;
    *) status=fail;;
  esac
  summary=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-200)
  [ "$status" != timeout ] || summary="killed after ${budget}s (budget); last output: $summary"
  write_status "$name" "$status" "$rc" "$(awk "BEGIN { print $end - $start }")" "$budget" "$summary"
  echo "=== $name: $status"
}

part_env() {
  "$PYTHON" tests/torch/env_probe.py "$LG_GPU_OUT/parts/env.data.json"
}

part_deps() {
  local assigns
  assigns=$(bash "$0" --deps-only "$DEB_PREFIX") || return 1
  printf '%s\n' "$assigns" > "$LG_GPU_OUT/deps.env"
  printf '%s\n' "$assigns"
}

# make reads PKG_CONFIG, LDFLAGS and CUDA_ARCHS from the environment (the Makefile sets them
# with ?= or adds them): exported here for the build and for tests/gpu/run.sh's own make.
# The fatbin is built for this GPU's architecture only (the default list of twelve takes
# minutes); LG_GPU_CHECK_ALL_ARCHS=1 builds the release list instead.
export_build_env() {
  local line cap
  if [ -f "$LG_GPU_OUT/deps.env" ]; then
    while IFS= read -r line; do
      case "$line" in
        PKG_CONFIG=*) export PKG_CONFIG="${line#PKG_CONFIG=}";;
        DEPS_LDFLAGS=?*) export LDFLAGS="${line#DEPS_LDFLAGS=}${LDFLAGS:+ $LDFLAGS}";;
      esac
    done < "$LG_GPU_OUT/deps.env"
  fi
  if [ "${LG_GPU_CHECK_ALL_ARCHS:-0}" != 1 ] && [ -z "${CUDA_ARCHS:-}" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
    [ -z "$cap" ] || export CUDA_ARCHS="$cap"
  fi
}

part_build() {
  local jobs
  export_build_env
  jobs=$(nproc 2>/dev/null || echo 4)
  echo "build: PKG_CONFIG=${PKG_CONFIG:-pkg-config} LDFLAGS=${LDFLAGS:-} CUDA_ARCHS=${CUDA_ARCHS:-default}"
  make -j"$jobs" BUILD="$BUILD" all || return 1
  # Test programs and the test double: test-gpu and the scenarios need them; a failure here
  # is reported, and the parts that need a missing binary say so themselves.
  make -j"$jobs" -k BUILD="$BUILD" test-programs
  ls -l "$BUILD/liblabelguard.so"
}

part_gpu_path() {
  "$PYTHON" tests/torch/gpu_path.py --lib "$ROOT/$BUILD/liblabelguard.so" --python "$PYTHON" \
    --out "$LG_GPU_OUT/parts/gpu-path.data.json" --workdir "$LG_GPU_OUT/gpu-path" -j 6
}

part_scenarios() {
  "$PYTHON" tests/torch/run_scenarios.py --lib "$ROOT/$BUILD/liblabelguard.so" \
    --out "$LG_GPU_OUT/parts/scenarios.data.json" --workdir "$LG_GPU_OUT/scenarios" \
    --budget $(( ${LG_PART_BUDGET:-120} - 10 )) -j "$(( $(nproc 2>/dev/null || echo 8) > 12 ? 12 : $(nproc 2>/dev/null || echo 8) ))"
}

part_test_gpu() {
  export_build_env
  LG_GPU_OUT_JSON="$LG_GPU_OUT/parts/test-gpu.data.json" LG_GPU_WORKDIR="$LG_GPU_OUT/test-gpu" \
    bash tests/gpu/run.sh "$BUILD"
}

part_bench() {
  "$PYTHON" tests/torch/bench_train.py drive --lib "$ROOT/$BUILD/liblabelguard.so" \
    --build "$ROOT/$BUILD" --out "$LG_GPU_OUT/parts/bench.data.json" \
    --workdir "$LG_GPU_OUT/bench" --validator-log "$LG_GPU_OUT/test-gpu/validator_test_validator.log" --budget $(( ${LG_PART_BUDGET:-140} - 10 ))
}

# --- self-test of the report writer on canned results -------------------------------------------
selftest_report() { # dir
  local dir=$1 fx="$ROOT/tests/torch/fixtures" rc
  rm -rf "$dir"; mkdir -p "$dir/parts"
  cp "$fx"/parts/*.json "$dir/parts/" || return 1
  "$PYTHON" tests/torch/make_report.py "$dir"; rc=$?
  "$PYTHON" tests/torch/check_report.py "$dir" "$fx/expect.json" "$rc"
}

# --- main -------------------------------------------------------------------------------------
parts="$ALL_PARTS"
outdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0;;
    --deps-only)
      [ $# -le 2 ] || die_usage "--deps-only takes at most one PREFIX"
      setup_deps "${2:-$DEB_PREFIX}"; exit $?;;
    --internal-part)
      if [ $# -ne 2 ] || [ -z "${LG_GPU_OUT:-}" ]; then die_usage "--internal-part is for gpu-check.sh itself"; fi
      "part_${2//-/_}"; exit $?;;
    --selftest-report)
      [ $# -le 2 ] || die_usage "--selftest-report takes at most one DIR"
      selftest_report "${2:-$BUILD/gpu-report-selftest}"; exit $?;;
    --parts)
      [ $# -ge 2 ] || die_usage "--parts needs a comma-separated list"
      parts=${2//,/ }
      for p in $parts; do
        case " $ALL_PARTS " in *" $p "*) ;; *) die_usage "unknown part '$p' (parts: $ALL_PARTS)";; esac
      done
      shift 2; continue;;
    --parts=*) set -- --parts "${1#--parts=}" "${@:2}"; continue;;
    --) shift; [ $# -le 1 ] || die_usage "one OUTDIR at most"; outdir=${1:-}; break;;
    -*) die_usage "unknown option '$1'";;
    *) [ -z "$outdir" ] || die_usage "one OUTDIR at most (got '$outdir' and '$1')"; outdir=$1;;
  esac
  shift
done
outdir=${outdir:-gpu-report}

if ! has_gpu; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi missing or failing, or no /dev/nvidiaN): nothing to check"
  exit 77
fi
case "$TOTAL_BUDGET" in ''|*[!0-9]*) die_usage "LG_GPU_CHECK_BUDGET must be a number of seconds";; esac

mkdir -p "$outdir/parts" "$outdir/logs" || exit 2
LG_GPU_OUT="$(cd "$outdir" && pwd)"
export LG_GPU_OUT
rm -f "$LG_GPU_OUT"/parts/*.json "$LG_GPU_OUT/deps.env"
DEADLINE=$(( $(date +%s) + TOTAL_BUDGET ))
echo "gpu-check: report into $LG_GPU_OUT, total budget ${TOTAL_BUDGET}s, parts: $parts"

for p in $parts; do
  case $p in
    env) run_part env 40;;
    deps) run_part deps 30;;
    build) run_part build 150;;
    gpu-path) run_part gpu-path 120;;
    scenarios) run_part scenarios 100;;
    test-gpu) run_part test-gpu 110;;
    bench) run_part bench 110;;
  esac
done

"$PYTHON" tests/torch/make_report.py "$LG_GPU_OUT"
