"""device_assert.py LIB OUT: a device-side assert in a kernel labelguard does not check, in a real
torch process on the runtime test double (tests/torch-fake/test_device_assert.sh). LIB is
build/progs/libassertpy.so: an extension whose own histogram kernel asserts on a bin out of range
(tests/progs/libassertpy.cu), launched with ctypes between torch's own elementwise ops, as a
custom op would be. Prints what torch raised at the synchronize; the driver checks the log in OUT.
"""
import ctypes
import sys

import torch

lib = ctypes.CDLL(sys.argv[1])


def step(x):
    y = x * 2
    bins = (ctypes.c_int * 8)(0, 1, 2, 3, 4, 5, 6, 9)
    print("hist=%d" % lib.lgas_histogram(bins, 8, 8, 0))  # MARK_BAD
    return y + 1  # MARK_AFTER


x = torch.ones(64, device="cuda")
z = step(x)
try:
    torch.cuda.synchronize()  # MARK_SYNC
    print("synchronize: no error")
except RuntimeError as e:
    print("raised: " + str(e).strip().splitlines()[0])
