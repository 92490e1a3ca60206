#!/usr/bin/env bash
# test_enable_early.sh: labelguard_enable (include/labelguard.h) where no CUDA runtime is loaded
# yet, the case real torch meets in a notebook's first cell (under build/torch-python the test
# double is preloaded, so tests/torch-fake/test_enable.sh never sees it). python3, without torch
# and without the double preloaded, loads the library with ctypes (RTLD_GLOBAL) and enables it:
#   early      enable returns 0 with no libcudart mapped; then build/progs/libnllpy.so (PyTorch's
#              NLL kernel, nvcc -cudart shared) is dlopen'd and brings the double as its NEEDED
#              libcudart.so.13: a bad label is blocked with labelguard's text, memory still
#              round-trips, last_violation names the kernel (its name came from the
#              registration, seen by our definitions) and the offending pair.
#   preloaded  the library is in LD_PRELOAD and enable is called too: it succeeds, and a bad
#              launch is checked once (one violation, one watched launch), not twice.
#   static     a runtime the loader does not know as libcudart (the double under another file
#              name, standing in for one linked statically) has made a context, libcuda is
#              loaded, CUPTI is absent: enable returns -1 saying so, with a hint.
# Here our RTLD_GLOBAL definitions come before the later libcudart in the lookup order, so
# libnllpy binds to them directly; what "early" adds is that the start waits for a runtime: a
# start made at enable would describe an empty runtime table (the start event's cuda_runtime
# null, checked below; it is, with the start forced into enable).
. "$(dirname "$0")/lib.sh"
# A sanitizer-built library cannot be dlopen'd into a process without the sanitizer runtime.
[ -z "${LG_SANITIZER:-}" ] || { echo "not with SANITIZER=$LG_SANITIZER"; exit 77; }
# lib.sh puts the double on LD_LIBRARY_PATH: a search path only, nothing is loaded from it until
# libnllpy needs its libcudart.so.13.
lib="$PROGS/libnllpy.so"
need "$lib" "$LG_PRELOAD" "$LG_FAKE_DIR/libcudart.so.13" "$LG_ROOT/$LG_BUILD/fakecuda-driver/libcuda.so.1"
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

cat >"$T/early.py" <<'PY'
import ctypes, json, os, sys
what, lgpath, nll = sys.argv[1], sys.argv[2], sys.argv[3]
def mapped(part):
    return any(part in l for l in open("/proc/self/maps"))
lg = ctypes.CDLL(lgpath, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
lg.labelguard_enable.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
lg.labelguard_last_violation.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
why = ctypes.create_string_buffer(512)
if what == "static":
    # The double under a name that is not libcudart's: the process launches kernels, the loader
    # shows no libcudart.
    rt = ctypes.CDLL(sys.argv[4], mode=os.RTLD_GLOBAL)
    drv = ctypes.CDLL(sys.argv[5], mode=os.RTLD_GLOBAL)
    p = ctypes.c_void_p()
    print("malloc=%d" % rt.cudaMalloc(ctypes.byref(p), 64))
    print("enable=%d" % lg.labelguard_enable(why, len(why)))
    print("why=" + why.value.decode())
    sys.exit(0)
print("cudart_before=%s" % mapped("libcudart"))
print("enable=%d why=[%s]" % (lg.labelguard_enable(why, len(why)), why.value.decode()))
n = ctypes.CDLL(nll)
print("cudart_after=%s" % mapped("libcudart"))
print("enable_again=%d" % lg.labelguard_enable(why, len(why)))
rt = ctypes.CDLL("libcudart.so.13", mode=os.RTLD_NOLOAD)
rt.fakecudart_identity.restype = ctypes.c_char_p
print("fakecudart_identity=" + rt.fakecudart_identity().decode())
labels = (ctypes.c_int64 * 4)(0, 1, 2, 9)
err = ctypes.create_string_buffer(2048)
print("launch=%d" % n.lgpy_launch(0, 0, labels, 4, 3, -100, err, len(err)))
print("err=" + err.value.decode().replace("\n", " ")[:300])
print("memcheck=%d" % n.lgpy_memcheck())
buf = ctypes.create_string_buffer(1 << 16)
k = lg.labelguard_last_violation(buf, len(buf))
print("last=" + (buf.value.decode() if k > 0 else "none"))
c = (ctypes.c_uint64 * 5)()
lg.labelguard_counters(c)
print("watched=%d violations=%d" % (c[1], c[3]))
PY

python3 "$T/early.py" early "$LG_PRELOAD" "$lib" >"$T/early.out" 2>"$T/early.err"
echo $? >"$T/early.rc"
sed 's/^/early: /' "$T/early.out"
check "early: exit 0" [ "$(rc_of early)" = 0 ]
require_fake early
check "early: no libcudart before, enable returns 0" grep -q '^cudart_before=False$' "$T/early.out"
check "early: enable returned 0, no reason" grep -q '^enable=0 why=\[\]$' "$T/early.out"
check "early: libnllpy brought libcudart" grep -q '^cudart_after=True$' "$T/early.out"
check "early: enable again: libnllpy's slots are ours" grep -q '^enable_again=[1-9][0-9]*$' "$T/early.out"
check "early: the bad launch was blocked (800)" grep -q '^launch=800$' "$T/early.out"
check "early: the error is labelguard's, naming the kernel" grep -q '^err=.*labelguard.*nll_loss_forward_reduce_cuda_kernel_2d' "$T/early.out"
check "early: the context is alive" grep -q '^memcheck=0$' "$T/early.out"
last=$(sed -n 's/^last=//p' "$T/early.out")
check "early: last_violation: kernel, offending pair, blocked" python3 -c '
import json, sys
v = json.loads(sys.argv[1])
assert v["kernel"] == "nll_loss_forward_reduce_cuda_kernel_2d", v["kernel"]
assert v["bad"]["samples"] == [{"index": 3, "value": 9}] and v["outcome"] == "blocked", v["bad"]
' "$last"
mv "$T/logs" "$T/early.logs"
events early
check "early: the start event, made at the first launch, names the runtime" qtrue early \
  "[e.get('cuda_runtime') for e in E if e['event'] == 'start'] == ['13.0']"
check "early: enable wrote nothing to stderr" bash -c "! grep -q '^labelguard: arm' '$T/early.err'"

LD_PRELOAD="$LG_PRELOAD" python3 "$T/early.py" early "$LG_PRELOAD" "$lib" >"$T/pre.out" 2>"$T/pre.err"
echo $? >"$T/pre.rc"
sed 's/^/preloaded: /' "$T/pre.out"
check "preloaded: exit 0" [ "$(rc_of pre)" = 0 ]
check "preloaded: enable succeeds" grep -q '^enable=[0-9][0-9]* why=\[\]$' "$T/pre.out"
check "preloaded: enable after the library loaded counts its slots (bound to us already)" \
  grep -q '^enable_again=[1-9][0-9]*$' "$T/pre.out"
check "preloaded: blocked" grep -q '^launch=800$' "$T/pre.out"
check "preloaded: checked once, not twice" grep -q '^watched=1 violations=1$' "$T/pre.out"

cp "$LG_FAKE_DIR/libcudart.so.13" "$T/libstaticrt.so"
LABELGUARD_QUIET=1 python3 "$T/early.py" static "$LG_PRELOAD" "$lib" "$T/libstaticrt.so" \
  "$LG_ROOT/$LG_BUILD/fakecuda-driver/libcuda.so.1" >"$T/static.out" 2>"$T/static.err"
sed 's/^/static: /' "$T/static.out" "$T/static.err"
check "static: the runtime made a context" grep -q '^malloc=0$' "$T/static.out"
check "static: enable returns -1" grep -q '^enable=-1$' "$T/static.out"
check "static: the reason names the static runtime and CUPTI, with a hint" \
  grep -q '^why=.*statically.*CUPTI cannot subscribe.*HINT' "$T/static.out"
finish
