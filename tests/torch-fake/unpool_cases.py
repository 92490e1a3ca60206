"""unpool_cases.py MODE OUT: F.max_unpool2d (nn.MaxUnpool2d) with an index past its output plane, on
real torch on the test double, judged in this process; prints one "ok: ..." or "FAIL: ..." line per
check and exits 1 when any failed. Run by test_unpool.sh under both wheels, one process per mode.
max_unpooling2d_forward_kernel asserts `maxind >= 0 && maxind < outputHeight * outputWidth` on a
GPU; under the double its kernels are no-ops, so the input and the indices are made on the CPU and
copied, and only the check is judged. 1 x 2 channels of 2 x 2 unpooled into 4 x 4 planes (16
positions each); channel 1 holds index 16 (one past the plane) at element 6.
MODE: raise (blocked, the position, value and bound), mask (no padding value: falls back to raise,
the note says why), log (runs, the event written), control (valid indices, 0 and 15 included, and
a negative one of -1 as the last case of raise: also bad). OUT: the LABELGUARD_LOG directory.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
x = torch.arange(8, dtype=torch.float32).view(1, 2, 2, 2)
good = torch.tensor([[[[0, 3], [9, 15]], [[1, 2], [14, 5]]]])
bad = good.clone()
bad[0, 1, 1, 0] = 16  # element 6: one past the 4 x 4 plane


def unpool(idx):
    return F.max_unpool2d(x.cuda(), idx.cuda(), 2)


if MODE == "control":
    out, exc = run(lambda: unpool(good))
    check("control: no exception, output 1 x 2 x 4 x 4", exc is None and tuple(out.shape) == (1, 2, 4, 4), exc)
    check("control: no violation", events(OUT) == [], events(OUT))
else:
    _, exc = run(lambda: unpool(bad))
    V = new_events(OUT)
    if MODE == "log":
        check("log: the launch runs (no exception from labelguard)", exc is None, exc)
    else:
        check("%s: blocked with labelguard's error naming ids[6] = 16 and the bound [0, 16)" % MODE,
              exc is not None and "labelguard" in str(exc) and "ids[6] = 16" in str(exc)
              and "outside [0, 16)" in str(exc) and "device-side assert triggered" not in str(exc), exc)
    k = [v for v in V if v["kernel"] == "max_unpooling2d_forward_kernel"]
    check("%s: one violation of max_unpooling2d_forward_kernel, family max_unpool2d" % MODE,
          len(k) == 1 and k[0]["family"] == "max_unpool2d", [(v["kernel"], v.get("family")) for v in V])
    if k:
        v = k[0]
        check("%s: 8 indices, bound 16 (outputHeight x outputWidth), no padding value" % MODE,
              (v["target"]["count"], v["target"]["bound"], v["target"]["padding_idx"]) == (8, 16, None), v["target"])
        check("%s: the sample (6, 16)" % MODE, [(s["index"], s["value"]) for s in v["bad"]["samples"]] == [(6, 16)],
              v["bad"])
        check("%s: cause index_out_of_range" % MODE, v["cause"] == "index_out_of_range", v["cause"])
        want = {"raise": "blocked", "mask": "blocked", "log": "launched"}[MODE]
        check("%s: outcome %s" % (MODE, want), v["outcome"] == want, v["outcome"])
        if MODE == "mask":
            check("mask: falls back to raise, the note says why", "mask fell back to raise" in v.get("note", ""),
                  v.get("note"))
        check("%s: the Python frame of the unpool call" % MODE,
              any(f["file"].endswith("unpool_cases.py") for f in v.get("python_stack", [])), v.get("python_stack"))
    if MODE == "raise":
        neg = good.clone()
        neg[0, 0, 0, 1] = -1
        _, exc = run(lambda: unpool(neg))
        V = new_events(OUT)
        check("raise: a negative index is blocked too (ids[1] = -1)",
              exc is not None and "ids[1] = -1" in str(exc) and len(V) == 1, (exc, V))
        out, exc = run(lambda: unpool(good))
        check("raise: valid indices afterwards run", exc is None, exc)
finish()
