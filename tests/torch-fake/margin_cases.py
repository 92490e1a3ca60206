"""margin_cases.py MODE OUT: F.multi_margin_loss (nn.MultiMarginLoss) with a target class index
out of range, on real torch on the test double, judged in this process; prints one "ok: ..." or
"FAIL: ..." line per check and exits 1 when any failed. Run by test_margin.sh under both wheels,
one process per mode. MultiMarginLoss_forward_kernel asserts 0 <= target < dim on a GPU; under
the double its kernels are no-ops, so the scores are made on the CPU and only the check is judged.
Forward only: torch 2.15 on the double sometimes aborts at exit after a CUDA backward
("terminate called without an active exception", with or without labelguard); the backward
kernel's spec is tested by tests/unit/test_decode.c.
MODE: raise, mask (no ignore_index: falls back to raise, the note says why), log (runs as it
would, the event written), control (valid targets, 0 and C-1 included: no event). OUT: the
LABELGUARD_LOG directory.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
N, C, BAD_AT, BAD = 6, 4, 3, 4

x = torch.randn(N, C).cuda()
y = torch.tensor([0, 1, 2, 3, 1, 0])
if MODE != "control":
    y[BAD_AT] = BAD
_, exc = run(lambda: F.multi_margin_loss(x, y.cuda()))
V = events(OUT)
if MODE == "control":
    check("control: no exception", exc is None, exc)
    check("control: no violation", V == [], V)
else:
    if MODE == "log":
        check("log: the launch runs (no exception from labelguard)", exc is None, exc)
    else:
        check("%s: blocked with labelguard's error naming target[%d] = %d" % (MODE, BAD_AT, BAD),
              exc is not None and "labelguard" in str(exc) and "target[%d] = %d" % (BAD_AT, BAD) in str(exc), exc)
    fwd = [v for v in V if v["kernel"] == "MultiMarginLoss_forward_kernel"]
    check("%s: one violation of MultiMarginLoss_forward_kernel, family multi_margin_loss" % MODE,
          len(fwd) == 1 and fwd[0]["family"] == "multi_margin_loss", [(v["kernel"], v["family"]) for v in V])
    if fwd:
        v = fwd[0]
        check("%s: target count %d, n_classes %d, no ignore_index" % (MODE, N, C),
              (v["target"]["count"], v["target"]["n_classes"], v["target"].get("ignore_index")) == (N, C, None),
              v["target"])
        check("%s: the sample (%d, %d)" % (MODE, BAD_AT, BAD),
              [(s["index"], s["value"]) for s in v["bad"]["samples"]] == [(BAD_AT, BAD)], v["bad"])
        want = {"raise": "blocked", "mask": "blocked", "log": "launched"}[MODE]
        check("%s: outcome %s" % (MODE, want), v["outcome"] == want, v["outcome"])
        if MODE == "mask":
            check("mask: falls back to raise, the note says why", "mask fell back to raise" in v.get("note", ""),
                  v.get("note"))
        check("%s: the Python frame of the loss call" % MODE,
              any(f["file"].endswith("margin_cases.py") for f in v.get("python_stack", [])), v.get("python_stack"))
finish()
