#!/usr/bin/env bash
# test_enable_fork.sh: labelguard_enable before the application's first CUDA call makes no CUDA
# call of its own, and a fork child of that process can use CUDA. python3 (no torch, the double
# not preloaded) dlopens build/progs/libnllpy.so (PyTorch's NLL kernel, nvcc -cudart shared,
# which brings the runtime double as its NEEDED libcudart.so.13 and registers its kernels: no
# CUDA initialisation), loads the library with ctypes (RTLD_GLOBAL) and enables it, then:
#   before  enable made no CUDA call: the double reports CUDA not initialised
#           (fakecudart_initialised) and the log holds no start event yet;
#   child   a child forked now uses CUDA: a bad label is blocked (800) by the child's own
#           labelguard, its context works (memcheck 0). The double models CUDA's rule: a child
#           of a process that had initialised CUDA gets cudaErrorInitializationError (3) from
#           every call, which is what it gets when enable starts the library at once (its
#           start asks cudaGetDevice and cudaGetDeviceProperties);
#   parent  the parent's first CUDA call (the bad launch) is checked: blocked; only now is
#           there a start event in the parent's log (the start came at the first hook).
# A control run forks the same way without enable: the child's CUDA works (its unguarded bad
# launch runs and fires the device assert), so the rule does not fire without an initialisation.
# Before the start moved to the first hook, this failed with: initialised_before=1,
# child_launch=3 (cudaErrorInitializationError), child_memcheck=3, and a start event at enable.
. "$(dirname "$0")/lib.sh"
[ -z "${LG_SANITIZER:-}" ] || { echo "not with SANITIZER=$LG_SANITIZER"; exit 77; }
lib="$PROGS/libnllpy.so"
need "$lib" "$LG_PRELOAD" "$LG_FAKE_DIR/libcudart.so.13"
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

cat >"$T/fork.py" <<'PY'
import ctypes, glob, json, os, sys
what, lgpath, nll, logdir = sys.argv[1:5]
def starts():
    """The start events of this process's log."""
    n = 0
    for f in glob.glob(os.path.join(logdir, "*.jsonl")):
        for line in open(f):
            e = json.loads(line)
            n += e.get("event") == "start" and e.get("pid") == os.getpid()
    return n
n = ctypes.CDLL(nll)
rt = ctypes.CDLL("libcudart.so.13", mode=os.RTLD_NOLOAD)
rt.fakecudart_identity.restype = ctypes.c_char_p
print("fakecudart_identity=" + rt.fakecudart_identity().decode())
if what == "enable":
    lg = ctypes.CDLL(lgpath, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    lg.labelguard_enable.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    why = ctypes.create_string_buffer(512)
    print("enable=%d why=[%s]" % (lg.labelguard_enable(why, len(why)), why.value.decode()))
print("initialised_before=%d" % rt.fakecudart_initialised())
print("starts_before=%d" % starts(), flush=True)
labels = (ctypes.c_int64 * 4)(0, 1, 2, 9)
pid = os.fork()
if pid == 0:
    err = ctypes.create_string_buffer(2048)
    rc = n.lgpy_launch(0, 0, labels, 4, 3, -100, err, len(err))
    print("child_launch=%d child_err=%s" % (rc, err.value.decode().replace("\n", " ")[:160]))
    print("child_memcheck=%d" % n.lgpy_memcheck(), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child_exit=%d" % os.waitstatus_to_exitcode(status))
err = ctypes.create_string_buffer(2048)
print("parent_launch=%d" % n.lgpy_launch(0, 0, labels, 4, 3, -100, err, len(err)))
print("parent_memcheck=%d" % n.lgpy_memcheck())
print("starts_after=%d" % starts())
PY

run_py() { # name what
  python3 "$T/fork.py" "$2" "$LG_PRELOAD" "$lib" "$T/$1.logs" >"$T/$1.out" 2>"$T/$1.err"
  echo $? >"$T/$1.rc"
  sed "s/^/$1: /" "$T/$1.out"
}

LABELGUARD_LOG="$T/control.logs" run_py control none
check "control: exit 0" [ "$(rc_of control)" = 0 ]
require_fake control
check "control: unguarded, the child's bad launch runs and fires the device assert (710, not the fork error 3)" \
  grep -q '^child_launch=710 ' "$T/control.out"

LABELGUARD_LOG="$T/enable.logs" run_py enable enable
check "enable: exit 0" [ "$(rc_of enable)" = 0 ]
require_fake enable
check "enable: returned >= 0, no reason" grep -q '^enable=[0-9][0-9]* why=\[\]$' "$T/enable.out"
check "enable: made no CUDA call (the double is not initialised)" grep -q '^initialised_before=0$' "$T/enable.out"
check "enable: no start event before the application's first CUDA call" grep -q '^starts_before=0$' "$T/enable.out"
check "child: exit 0" grep -q '^child_exit=0$' "$T/enable.out"
check "child: its CUDA works after the parent's enable" grep -q '^child_memcheck=0$' "$T/enable.out"
check "child: its bad launch is blocked by labelguard" \
  grep -q '^child_launch=800 child_err=.*labelguard.*nll_loss_forward_reduce_cuda_kernel_2d' "$T/enable.out"
check "parent: its first CUDA call, the bad launch, is blocked" grep -q '^parent_launch=800$' "$T/enable.out"
check "parent: its context works" grep -q '^parent_memcheck=0$' "$T/enable.out"
check "parent: one start event, made after its first CUDA call" grep -q '^starts_after=1$' "$T/enable.out"
events enable || fail "enable: log schema"
check "enable: two processes started (parent and child), each blocked its bad launch" qtrue enable \
  "len({e['pid'] for e in E if e['event']=='start'}) == 2 and len(V) == 2 and all(v['outcome']=='blocked' for v in V)"
finish
