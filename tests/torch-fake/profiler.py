"""profiler.py: the body of tests/torch-fake/test_profiler.sh: torch.profiler after
labelguard.enable(), real torch 2.15 on the runtime double with the CUPTI double
(build/fakecupti/libcupti.so.13, preloaded: it is the libcupti.so.13 torch's Kineto links).

  build/torch-python tests/torch-fake/profiler.py

The notebook's order: import torch, then the package's enable(), then CUDA work and a profile
with CPU and CUDA activities. Checks: enable() made no CUPTI subscription (CUPTI's one slot is
left to the profiler: interposition covers the runtime), the profile runs and records the ops,
a bad label inside the profile is still blocked by labelguard, and the slot is never labelguard's.
Prints one "ok: ..." or "FAIL: ..." line per check; exit 1 if any failed.
"""
import ctypes
import os
import sys

failed = 0


def check(cond, msg, detail=""):
    global failed
    print(("ok: " if cond else "FAIL: ") + msg + ("" if cond else f" ({detail})"), flush=True)
    failed += 0 if cond else 1


import torch
import torch.nn.functional as F
import labelguard

cupti = ctypes.CDLL("libcupti.so.13", mode=os.RTLD_NOLOAD)
cupti.fakecupti_holder.restype = ctypes.c_char_p
check(hasattr(cupti, "fakecupti_holder"), "the CUPTI double is torch's libcupti")
labelguard.enable()
check(cupti.fakecupti_holder() == b"", "enable() left CUPTI's slot free", cupti.fakecupti_holder())
x = torch.zeros(4, 5).cuda()
check(cupti.fakecupti_holder() == b"", "the first CUDA work (labelguard's start) left it free",
      cupti.fakecupti_holder())

from torch.profiler import ProfilerActivity, profile

err = None
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    y = (x * 2).sum()
    holder = cupti.fakecupti_holder()
    try:
        F.cross_entropy(x, torch.tensor([0, 1, 7, 2]).cuda())
        torch.cuda.synchronize()
    except RuntimeError as e:
        err = e
names = {e.name for e in prof.events()}
check(holder != b"CUPTI for labelguard", "inside the profile the slot is not labelguard's", holder)
check("aten::mul" in names and "aten::cross_entropy_loss" in names, "the profile recorded the ops",
      sorted(names)[:20])
check(err is not None and "labelguard" in str(err) and "nll_loss" in str(err),
      "a bad label inside the profile is blocked by labelguard", str(err)[:200])
check(cupti.fakecupti_holder() != b"CUPTI for labelguard", "after the profile the slot is not labelguard's",
      cupti.fakecupti_holder())
sys.exit(1 if failed else 0)
