#!/usr/bin/env bash
# test_unload.sh: kernel names of an image that is unloaded and loaded again. The library keeps
# registered names by pointer into the registering image (src/kernels/names.c) and drops them when
# nvcc's atexit handler unregisters the fatbin at dlclose. python3 loads a copy of
# build/progs/libnllpy.so (PyTorch's NLL kernels) with ctypes, launches a bad label (raise),
# dlcloses it (checked in /proc/self/maps), loads a second copy and launches again: both
# launches are blocked with the kernel named in the error and in the JSONL, and nothing
# crashes or reads a stale name. A third run keeps the first image loaded while loading the
# second: both stay named (each registers its own stubs). That a dropped entry is named afresh
# when another image registers at its address is tests/unit/test_names.c's.
. "$(dirname "$0")/lib.sh"
lib="$LG_ROOT/$LG_BUILD/progs/libnllpy.so"
if [ ! -f "$lib" ]; then
  (cd "$LG_ROOT" && make -s "$LG_BUILD/progs/libnllpy.so" >/dev/null 2>&1) || { echo "FAIL: cannot build $lib"; exit 1; }
fi
cp "$lib" "$T/libA.so"; cp "$lib" "$T/libB.so"
cat >"$T/reload.py" <<'PY'
import ctypes, _ctypes, sys
def load(path):
    lib = ctypes.CDLL(path)
    lib.lgpy_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
    return lib
def bad(lib, tag):
    labels = (ctypes.c_int64 * 8)(0, 1, 2, 3, 4, 10, 6, 7)
    err = ctypes.create_string_buffer(4096)
    rc = lib.lgpy_launch(0, 0, labels, 8, 10, -100, err, len(err))
    print("%s rc=%d err=%s" % (tag, rc, err.value.decode().splitlines()[0] if err.value else ""))
def mapped(path):
    return any(path in l for l in open("/proc/self/maps"))
keep = sys.argv[1] == "keep"
a = load(sys.argv[2]); bad(a, "first")
if not keep:
    _ctypes.dlclose(a._handle)
    print("first_unmapped=%d" % (not mapped(sys.argv[2])))
b = load(sys.argv[3]); bad(b, "second")
if keep:
    bad(a, "first_again")
PY
run_lg reload python3 "$T/reload.py" close "$T/libA.so" "$T/libB.so"
check "reload: exit 0" [ "$(rc_of reload)" = 0 ]
check "reload: the first image was unmapped by dlclose" grep -qx 'first_unmapped=1' "$T/reload.out"
for tag in first second; do
  check "reload: $tag launch blocked, kernel named" \
    grep -q "^$tag rc=[1-9][0-9]* err=labelguard: bad labels, not a CUDA fault .*hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target\[5\] = 10" "$T/reload.out"
done
events reload && check "reload: two violations, both named, symbol and samples right" qtrue reload \
  "len(V) == 2 and all(v['kernel'] == 'nll_loss_forward_reduce_cuda_kernel_2d' and '38nll_loss_forward_reduce_cuda_kernel_2dI' in v['symbol'] and v['bad']['samples'] == [{'index': 5, 'value': 10}] for v in V)"
run_lg keep python3 "$T/reload.py" keep "$T/libA.so" "$T/libB.so"
check "keep: exit 0" [ "$(rc_of keep)" = 0 ]
for tag in first second first_again; do
  check "keep: $tag launch blocked, kernel named" \
    grep -q "^$tag rc=[1-9][0-9]* err=labelguard: bad labels, not a CUDA fault .*hints below): nll_loss_forward_reduce_cuda_kernel_2d:" "$T/keep.out"
done
finish
