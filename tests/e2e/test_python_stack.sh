#!/usr/bin/env bash
# test_python_stack.sh: the Python call site of a bad launch, end to end. python3
# loads build/progs/libnllpy.so (tests/progs/libnllpy.cu: PyTorch's NLL reduce kernels behind a
# C API) with ctypes.CDLL, which releases the GIL around the call as PyTorch's bindings do,
# under LD_PRELOAD of the library and the runtime test double. A small training loop calls it
# from `train_step`; the test finds the lines by their markers and checks, per interpreter
# (system python3 and each pyenv CPython 3.8 to 3.13 present):
#   - forward launched on the calling thread: python_stack is [{file, line, function}],
#     innermost last, ending train_step <- train <- <module> at the exact lines of this script,
#     python_stack_thread "launching"; the stderr block's `at FILE:LINE in train_step` line;
#   - raise: the Python code sees an error string naming the kernel and the label (it raises
#     RuntimeError with it, as PyTorch does), then memory still round-trips (context alive) and
#     the following steps train cleanly;
#   - backward launched from a native std::thread with no Python frames (autograd's engine
#     threads): the main thread's frames (train_step at the backward call's line),
#     python_stack_thread "main", and the stderr line says so; with mask, training goes on, and
#     the backward that reads the forward's bad labels is masked too and not reported again.
. "$(dirname "$0")/lib.sh"

lib="$LG_ROOT/$LG_BUILD/progs/libnllpy.so"
if [ ! -f "$lib" ]; then
  (cd "$LG_ROOT" && make -s "$LG_BUILD/progs/libnllpy.so" >/dev/null 2>&1) || { echo "FAIL: cannot build $lib"; exit 1; }
fi
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

script="$T/train.py"
cat >"$script" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])          # CDLL: the GIL is released around every call
lib.lgpy_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                            ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
phases, bad_step = sys.argv[2], int(sys.argv[3])
C, STEPS = 10, 6

def check(rc, err):
    if rc != 0:
        raise RuntimeError("CUDA error: " + err.value.decode())

def train_step(labels):
    arr = (ctypes.c_int64 * len(labels))(*labels)
    err = ctypes.create_string_buffer(4096)
    if "fwd" in phases:
        rc = lib.lgpy_launch(0, 0, arr, len(labels), C, -100, err, len(err))  # MARK_FWD
        check(rc, err)
    if "bwd" in phases:
        rc = lib.lgpy_launch(1, 1, arr, len(labels), C, -100, err, len(err))  # MARK_BWD
        check(rc, err)

def train():
    for step in range(STEPS):
        labels = [(step + i) % C for i in range(16)]
        if step == bad_step:
            labels[5] = C                   # one label past the last class
        try:
            train_step(labels)  # MARK_TRAIN
            print("step %d ok" % step)
        except RuntimeError as e:
            print("step %d raised: %s" % (step, e))
            print("step %d memcheck=%d" % (step, lib.lgpy_memcheck()))

train()  # MARK_MODULE
PY
line_of() { grep -n "# $1\$" "$script" | cut -d: -f1; }
L_FWD=$(line_of MARK_FWD); L_BWD=$(line_of MARK_BWD); L_TRAIN=$(line_of MARK_TRAIN); L_MOD=$(line_of MARK_MODULE)

# The interpreters: each distinct real executable once.
pythons=()
add_py() { local real; real=$("$1" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) || return 0
  [ -n "$real" ] || return 0; for p in "${pythons[@]}"; do [ "$p" = "$real" ] && return 0; done; pythons+=("$real"); }
add_py python3; [ -x /usr/bin/python3 ] && add_py /usr/bin/python3
for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v; do [ -x "$p" ] && add_py "$p"; done
done
# LG_TEST_PYTHONS: the interpreters to test instead (tests/qemu/test_python.sh: the arm64 one).
[ -z "${LG_TEST_PYTHONS:-}" ] || { pythons=(); for p in $LG_TEST_PYTHONS; do add_py "$p"; done; }

# stack_is NAME INDEX LINE THREAD: violation INDEX's python_stack is exactly <module> -> train ->
# train_step (at LINE), innermost last, captured as THREAD (launching or main).
stack_is() {
  qtrue "$1" "(all(set(f) == {'file', 'line', 'function'} for f in V[$2]['python_stack'])
    and [(f['file'], f['function'], f['line']) for f in V[$2]['python_stack']]
        == [('$script', '<module>', $L_MOD), ('$script', 'train', $L_TRAIN), ('$script', 'train_step', $3)]
    and V[$2].get('python_stack_thread') == '$4')"
}

k=0
for py in "${pythons[@]}"; do
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  k=$((k + 1)); id="py$ver#$k"
  echo "== $py ($ver)"
  # 1. raise, forward on the calling thread, bad labels at step 2.
  run_lg "$id-raise" "$py" "$script" "$lib" fwd 2
  check "$id raise: exit 0 (the loop caught the error)" [ "$(rc_of "$id-raise")" = 0 ]
  events "$id-raise" || fail "$id raise: schema"
  check "$id raise: one violation, blocked, forward" qtrue "$id-raise" \
    "len(V) == 1 and V[0]['outcome'] == 'blocked' and V[0]['direction'] == 'forward' and V[0]['bad']['samples'] == [{'index': 5, 'value': 10}]"
  check "$id raise: python_stack ends train_step:$L_FWD <- train:$L_TRAIN <- <module>:$L_MOD, launching thread" \
    stack_is "$id-raise" 0 "$L_FWD" launching
  check "$id raise: stderr names the call site" \
    grep -qxF "  at $script:$L_FWD in train_step   (python)" "$T/$id-raise.err"
  check "$id raise: Python sees the kernel and the label" \
    grep -q '^step 2 raised: CUDA error: labelguard: bad labels, not a CUDA fault .*hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target\[5\] = 10, outside \[0, 10)' "$T/$id-raise.out"
  check "$id raise: the error string says where the details are" \
    grep -q "^step 2 raised: .*details in $T/$id-raise.logs/.*\.jsonl" "$T/$id-raise.out"
  check "$id raise: memory round-trips after the error (context alive)" grep -qx 'step 2 memcheck=0' "$T/$id-raise.out"
  check "$id raise: the other steps trained" \
    [ "$(grep -c '^step [0-9] ok$' "$T/$id-raise.out")" = 5 ]

  # 2. raise, backward only, launched from a native thread while Python waits in train_step.
  run_lg "$id-thread" "$py" "$script" "$lib" bwd 3
  events "$id-thread" || fail "$id thread: schema"
  check "$id thread: one violation, backward, blocked" qtrue "$id-thread" \
    "len(V) == 1 and V[0]['direction'] == 'backward' and V[0]['outcome'] == 'blocked' and V[0]['tid'] != V[0]['pid']"
  check "$id thread: the main thread's frames, marked main" stack_is "$id-thread" 0 "$L_BWD" main
  check "$id thread: stderr names the call site and says it is the main thread's" \
    grep -qxF "  at $script:$L_BWD in train_step   (python, main thread: the launching thread runs no Python)" "$T/$id-thread.err"
  check "$id thread: Python sees the backward kernel's error" \
    grep -q '^step 3 raised: CUDA error: labelguard: bad labels, not a CUDA fault .*hints below): nll_loss_backward_reduce_cuda_kernel_2d: bad label target\[5\] = 10' "$T/$id-thread.out"
  check "$id thread: context alive" grep -qx 'step 3 memcheck=0' "$T/$id-thread.out"

  # 3. mask, both directions: training goes on; one bad batch, one report: the backward, which
  #    reads the same labels, runs masked too and is counted, not reported again.
  run_lg "$id-mask" env LABELGUARD_ACTION=mask "$py" "$script" "$lib" fwd+bwd 4
  events "$id-mask" || fail "$id mask: schema"
  check "$id mask: every step trained" [ "$(grep -c '^step [0-9] ok$' "$T/$id-mask.out")" = 6 ]
  check "$id mask: one violation, the forward's, masked; it says what its backward got" qtrue "$id-mask" \
    "[(v['direction'], v['outcome']) for v in V] == [('forward', 'masked')] and V[0]['backward'].startswith('masked too')"
  check "$id mask: the backward masked silently, counted" qtrue "$id-mask" \
    "S and S[-1]['suppressed_duplicates'] == 1 and S[-1]['violations'] == 1"
  check "$id mask: forward from the launching thread" stack_is "$id-mask" 0 "$L_FWD" launching
done

# Without the library the same script must fail differently (the assert of the test double
# poisons the context): proof that the checks above are the library's doing.
run_plain plain "${pythons[0]}" "$script" "$lib" fwd 2
check "without the library: the step fails with the device assert, memory is gone" \
  grep -q '^step 2 memcheck=[1-9]' "$T/plain.out"
finish
