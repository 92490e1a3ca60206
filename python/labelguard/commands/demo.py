#!/usr/bin/env bash
# lg_demo.sh: `labelguard demo` / `make demo`. One short training loop with a bad label at
# step 37, run without the guard, then with it (action raise, then action mask), each run
# explained in plain words, then a side-by-side table and `labelguard report` of the logs.
# Real PyTorch on a GPU when torch and a GPU are present (scripts/demo_torch.py); otherwise
# the GPU-free program build/demo/demo_train under the runtime test double, labelled simulated.
# Called by scripts/labelguard (LG_SELF = that script); exit 0 when every run behaved as
# described, 2 when something is missing or the guard did not do its job.
# Tested by tests/cli/test_demo.sh.
set -u
self=${LG_SELF:?run this through labelguard demo}
here=$(cd -P -- "$(dirname -- "$0")" && pwd)
root=$(cd -P -- "$here/.." && pwd)
build="$root/${LG_BUILD:-build}"

die() { printf 'labelguard: %s\n' "$@" >&2; exit 2; }

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then B=$'\e[1m'; D=$'\e[2m'; R=$'\e[0m'; else B=""; D=""; R=""; fi
rule() { printf '%s\n' "${D}────────────────────────────────────────────────────────────────────────────${R}"; }
heading() { printf '\n'; rule; printf '%s%s%s\n' "$B" "$1" "$R"; rule; }
say() { fold -s -w 78 <<<"$1"; }

real=0
if [ "${LG_DEMO_SIMULATED:-0}" != 1 ] && command -v python3 >/dev/null 2>&1 &&
   python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  real=1
fi

if [ $real = 1 ]; then
  prog=(python3 "$here/demo_torch.py")
  [ -f "$here/demo_torch.py" ] || die "demo_torch.py not found next to $0"
  envs=()
  kind="real PyTorch $(python3 -c 'import torch; print(torch.__version__, "on", torch.cuda.get_device_name(0))' 2>/dev/null)"
else
  fake="$build/fakecuda"
  demo="$build/demo/demo_train"
  if [ ! -x "$demo" ] || [ ! -e "$fake/libcudart.so.13" ]; then
    if [ -f "$root/Makefile" ] && command -v make >/dev/null 2>&1; then
      make -s -C "$root" --no-print-directory "${LG_BUILD:-build}/demo/demo_train" \
        "${LG_BUILD:-build}/fakecuda/libcudart.so.13" >&2 ||
        die "could not build the GPU-free demo" "hint: run \`make demo\` in the source tree and read the error"
    else
      die "the GPU-free demo needs the source tree (build/demo/demo_train, build/fakecuda)" \
          "hint: run \`make demo\` in the labelguard source tree"
    fi
  fi
  prog=("$demo")
  envs=("LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  kind="SIMULATED (no GPU or no PyTorch here): a small CUDA program runs PyTorch's own loss kernel (nll_loss_forward_reduce_cuda_kernel_2d, declared exactly as in PyTorch) on a stand-in CUDA runtime that executes kernels on the CPU and fails the way a GPU does (device-side assert)."
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/labelguard-demo.XXXXXX") || die "cannot create a temporary directory" "hint: check TMPDIR"
out="$logs/out"; mkdir -p "$out"

alive() { grep -q 'the CUDA context is alive' "$out/$1" && echo yes || echo no; }
steps() { # from "finished: N of 60" or "... after N of 60 steps"
  sed -n -e 's/^finished: \([0-9]*\) of.*/\1/p' -e 's/.*after \([0-9]*\) of [0-9]* steps.*/\1, then died/p' "$out/$1" | tail -n1
}
named() { grep -q 'target\[[0-9]*\] = 10' "$out/$1" && echo yes || echo no; }

run_case() { # name, then the command: prints its output indented, sets $rc
  local name=$1; shift
  env ${envs[@]+"${envs[@]}"} "$@" >"$out/$name" 2>&1; rc=$?
  sed 's/^/  │ /' "$out/$name"
  printf '  └─ exit status %s\n' "$rc"
}

heading "labelguard demo"
say "A classifier trains for 60 steps on batches of 64 labels with 10 classes (valid labels: 0..9). At step 37 the batch comes from a label file numbered from 1: its labels are 1..10 instead of 0..9, so the samples of the last class carry the label 10, which is out of range. The same program runs three times."
printf '\n'; say "Running: $kind"

heading "Run 1 of 3: without labelguard"
say "What to expect: PyTorch's loss kernel hits its device-side assert. The error surfaces later, at loss.item(), and it poisons the CUDA context: every later CUDA call fails, so the bad labels cannot even be copied back to look at them. The job dies."
printf '\n'
run_case plain "${prog[@]}"; rc1=$rc
printf '\n'
if [ "$rc1" -ne 0 ]; then
  say "What happened: the job died (exit status $rc1) with 'device-side assert triggered'. It does not say which labels were wrong or where they came from, and nothing on the GPU could be read afterwards."
else
  say "What happened: unexpectedly, the job did not fail (exit status 0)."
fi

heading "Run 2 of 3: with labelguard, action raise (the default)"
say "labelguard checks the labels before the loss kernel runs. It blocks the launch, prints a report (below, on stderr) and turns it into an ordinary CUDA error, so PyTorch raises a RuntimeError at the loss call itself. The context stays alive: the training loop can catch the exception, look at the batch, skip it, and go on."
printf '\n'
run_case raise "$self" run --action raise --log "$logs/raise" -- "${prog[@]}"; rc2=$rc
printf '\n'
if [ "$rc2" -eq 0 ] && [ "$(alive raise)" = yes ]; then
  say "What happened: the report named the kernel, the offending label (index and value), the likely cause and the fix; the exception came at the loss call; the labels could be read back; the loop skipped the batch and finished (exit status $rc2)."
  if [ $real = 0 ]; then
    printf '\n'; say "The report's \"at\" line is the call site. In a PyTorch job it names your Python file, line and function (e.g. \"at train.py:52 in train_step (python)\"); this simulated program has no Python, so it names the native function that launched the kernel."
  fi
else
  say "What happened: NOT what was expected: the guard did not keep the job alive (exit status $rc2). See the output above."
fi

heading "Run 3 of 3: with labelguard, action mask"
say "labelguard replaces each bad label by ignore_index in a copy, so the loss skips those samples; every masked sample is reported and logged. No exception: training goes on."
printf '\n'
run_case mask "$self" run --action mask --log "$logs/mask" -- "${prog[@]}"; rc3=$rc
printf '\n'
if [ "$rc3" -eq 0 ] && [ "$(steps mask)" = 60 ]; then
  say "What happened: at step 37 the out-of-range labels were left out of the loss, the report says which ones, and all 60 steps ran (exit status $rc3)."
else
  say "What happened: NOT what was expected: the run did not train all 60 steps (exit status $rc3). See the output above."
fi

heading "Side by side"
fmt='  %-34s %-14s %-14s %-14s\n'
# shellcheck disable=SC2059  # the format is ours
printf "$fmt" "" "without" "raise" "mask"
# shellcheck disable=SC2059
printf "$fmt" "exit status" "$rc1" "$rc2" "$rc3"
# shellcheck disable=SC2059
printf "$fmt" "steps trained (of 60)" "$(steps plain)" "$(steps raise)" "$(steps mask)"
# shellcheck disable=SC2059
printf "$fmt" "bad labels named (index, value)" "$(named plain)" \
  "$(named raise)" "$(named mask)"
# shellcheck disable=SC2059
printf "$fmt" "context alive after the error" "$(alive plain)" "$(alive raise)" \
  "$(if grep -q RuntimeError "$out/mask"; then alive mask; else echo "n/a (no error)"; fi)"

heading "labelguard report: the logs of runs 2 and 3, merged"
say "Every process writes one JSON line per event under --log DIR; \`labelguard report DIR\` merges them, across processes and ranks, into one entry per distinct problem (exit status 1: problems found)."
printf '\n'
"$self" report "$logs" 2>&1 | sed 's/^/  /'
if [ $real = 0 ] && grep -qh '"what":"cupti_unavailable"' "$logs"/*/*.jsonl 2>/dev/null; then
  printf '\n'; say "(The cupti_unavailable warning is expected here: without a GPU driver CUPTI cannot start, and labelguard uses its LD_PRELOAD hooks alone, which is all this program needs.)"
fi
printf '\nThe logs stay in %s (try: labelguard report %s).\n' "$logs" "$logs"

# The demo is also a check: say so when the guard did not do what the text above claims.
bad=""
[ "$rc1" -ne 0 ] || bad="$bad; run 1 did not fail (is the stand-in runtime emulating the device assert?)"
[ "$rc2" -eq 0 ] && [ "$(alive raise)" = yes ] || bad="$bad; run 2 did not survive the bad batch"
[ "$rc3" -eq 0 ] && [ "$(steps mask)" = 60 ] || bad="$bad; run 3 did not train all 60 steps"
if [ -n "$bad" ]; then
  printf '\n'; die "the demo did not go as described${bad}" "hint: run \`make test\` to see which part of labelguard is failing"
fi
exit 0
