"""bce_cases.py CASE MODE OUT: F.binary_cross_entropy with probabilities outside [0, 1] or NaN on
real torch on the test double, in one process, judged here; prints one "ok: ..." or "FAIL: ..."
line per check and exits 1 when any failed. Run by test_bce.sh under both wheels, one process per
case and mode. The probabilities are made on the CPU and copied: under the double only emulated
kernels compute, and BCE's own kernels are no-ops there.
MODE: raise, mask, log (LABELGUARD_ACTION set by the caller), async (raise with
LABELGUARD_MODE=async: checked synchronously all the same, so the same expectations as raise). OUT: the LABELGUARD_LOG directory.
CASES
  range       8 probabilities, input[2] = 1.5, input[5] = -0.1, input[6] = NaN:
              vectorized_elementwise_kernel; cause no_sigmoid
  nan         input[3] = NaN alone: cause nan_input
  misaligned  the same bad values in x[1:] of a larger tensor (not 16-byte aligned):
              unrolled_elementwise_kernel, positions relative to the view's data_ptr()
  strided     the same bad values in a transposed input (p.cuda().t()): the elementwise_kernel
              closure; positions are element offsets from data_ptr() (p's own storage)
  dtypes      1.5 at input[4] in float64, float16 and bfloat16 inputs: the dtype and value
  controls    exactly 0.0 and 1.0 (and values between) in the input and 0.0 / 1.0 targets,
              contiguous and transposed (the closure): no event, no exception
  target      valid probabilities, the TARGET bad: target[3] = 1.5, target[6] = NaN:
              vectorized_elementwise_kernel, data[2]; reported as target[i], cause other
  target_nan  target[4] = NaN alone: the message names target[4] = nan
  target_misaligned  the same bad targets in y[1:] of a larger tensor: unrolled_elementwise_kernel
  target_strided     the same bad values in a transposed target (y.cuda().t(), the input
              contiguous): the closure's target pointer (after the input's) and its own strides
"""
import glob
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

CASE, MODE, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
fails = 0


def check(what, cond, detail=""):
    global fails
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "  [%s]" % str(detail)[:700]))
    fails += 0 if cond else 1


def events():
    ev = []
    for f in glob.glob(os.path.join(OUT, "*.jsonl")):
        ev += [json.loads(line) for line in open(f) if line.strip()]
    return [e for e in ev if e["event"] == "violation"]


def run(fn):
    try:
        out = fn()
        torch.cuda.synchronize()
        return out, None
    except Exception as e:  # torch.AcceleratorError is a RuntimeError
        return None, e


if CASE == "dtypes":
    for dt, name in ((torch.float64, "float64"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        q = torch.full((8,), 0.25, dtype=dt)
        q[4] = 1.5
        d_q = q.cuda()
        _, exc = run(lambda: F.binary_cross_entropy(d_q, torch.ones(8, dtype=dt).cuda()))
        check("%s %s: blocked, the message names input[4] = 1.5" % (MODE, name),
              exc is not None and "bad probability input[4] = 1.5" in str(exc), exc)
    V = sorted([v for v in events() if v.get("family") == "binary_cross_entropy"], key=lambda v: v["launch_seq"])
    check("%s: three violations, dtypes float64, float16, bfloat16, each input[4] = 1.5" % MODE,
          [(v["target"]["dtype"], v["bad"]["samples"]) for v in V] ==
          [(n, [{"index": 4, "value": 1.5}]) for n in ("float64", "float16", "bfloat16")],
          [(v["target"]["dtype"], v["bad"]["samples"]) for v in V])
    sys.exit(1 if fails else 0)

if CASE.startswith("target"):
    # the target is the bad operand; the probabilities are valid
    y = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    p = torch.full((8,), 0.25)
    bad = {3: 1.5, 6: float("nan")}
    if CASE == "target_strided":
        y = torch.ones(24)
        bad = {8: 1.5, 1: float("nan")}
    elif CASE == "target_nan":
        bad = {4: float("nan")}
    for i, x in bad.items():
        y[i] = x
    if CASE == "target_strided":
        d_y = y.view(4, 6).cuda().t()  # 6x4, strides (1, 6)
        d_p = torch.full((6, 4), 0.25).cuda()
        kernel = "elementwise_kernel"
    elif CASE == "target_misaligned":
        big = torch.zeros(9)
        big[1:] = y
        d_big = big.cuda()
        d_y = d_big[1:]
        d_p = p.cuda()
        kernel = "unrolled_elementwise_kernel"
    else:
        d_y = y.cuda()
        d_p = p.cuda()
        kernel = "vectorized_elementwise_kernel"
    y_view = y.view(4, 6).t() if CASE == "target_strided" else y
    out, exc = run(lambda: F.binary_cross_entropy(d_p, d_y))  # <- the BCE call
    V = [v for v in events() if v.get("family") == "binary_cross_entropy"]
    first = min(bad)
    blocked = MODE in ("raise", "mask", "async")
    if blocked:
        check("%s: an exception at the BCE call, not a device assert" % MODE,
              exc is not None and "labelguard" in str(exc) and "device-side assert triggered" not in str(exc), exc)
        want = "bad target value target[%d] = %s" % (first, "nan" if math.isnan(bad[first]) else repr(bad[first]))
        check("%s: the message names %s and %s" % (MODE, kernel, want),
              exc is not None and kernel in str(exc) and want in str(exc) and "input[" not in str(exc), exc)
        check("%s: the targets can still be read (context alive)" % MODE,
              torch.equal(d_y.cpu().isnan(), y_view.isnan()) and torch.equal(d_y.cpu().nan_to_num(), y_view.nan_to_num()))
        good, exc2 = run(lambda: F.binary_cross_entropy(d_p, torch.ones(tuple(d_y.shape)).cuda()))
        check("%s: the next BCE call with valid targets runs" % MODE, exc2 is None, exc2)
    else:
        check("log: no exception (the kernel is let run)", exc is None, exc)
    check("%s: one violation in the JSONL, kernel %s" % (MODE, kernel),
          len(V) == 1 and V[0]["kernel"] == kernel, [(v["kernel"], v["family"]) for v in V])
    if V:
        v = V[0]
        t = v["target"]
        n = 24 if CASE == "target_strided" else 8
        check("%s: target {dtype float32, count %d, range [0, 1], operand target}" % (MODE, n),
              t["dtype"] == "float32" and t["count"] == n and t["range"] == [0, 1] and t.get("operand") == "target", t)
        check("%s: the decoded pointer is the target's data_ptr(), not the input's" % MODE,
              t.get("data") == hex(d_y.data_ptr()) and t.get("data") != hex(d_p.data_ptr()),
              (t.get("data"), hex(d_y.data_ptr()), hex(d_p.data_ptr())))
        got = sorted([(s["index"], s["value"]) for s in v["bad"]["samples"]])
        want = sorted([(i, "nan" if math.isnan(x) else x) for i, x in bad.items()])
        check("%s: samples at exact positions and values, NaN as \"nan\"" % MODE,
              got == want and v["bad"]["count"] == len(bad), v["bad"])
        check("%s: cause other, the text says target" % MODE,
              v["cause"] == "other" and "target" in v.get("cause_text", ""), (v["cause"], v.get("cause_text")))
        outcome = "blocked" if blocked else "launched"
        check("%s: outcome %s" % (MODE, outcome), v["outcome"] == outcome, v["outcome"])
        if MODE == "mask":
            check("mask: falls back to raise, the note says why (no ignore value for a probability)",
                  "no ignore value for a probability" in v.get("note", ""), v.get("note"))
    sys.exit(1 if fails else 0)

p = torch.full((8,), 0.25)
bad = {}
if CASE == "strided":
    p = torch.full((24,), 0.25)
    bad = {8: 1.5, 23: -0.1, 1: float("nan")}
elif CASE in ("range", "misaligned"):
    bad = {2: 1.5, 5: -0.1, 6: float("nan")}
elif CASE == "nan":
    bad = {3: float("nan")}
elif CASE == "controls":
    p[0], p[4], p[7] = 0.0, 1.0, 1.0
for i, x in bad.items():
    p[i] = x
y = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
if CASE == "strided":
    y = torch.ones(6, 4)
    d_p = p.view(4, 6).cuda().t()  # 6x4, strides (1, 6)
    kernel = "elementwise_kernel"
elif CASE == "misaligned":
    big = torch.zeros(9)
    big[1:] = p
    d_big = big.cuda()
    d_p = d_big[1:]
    kernel = "unrolled_elementwise_kernel"
else:
    d_p = p.cuda()
    kernel = "vectorized_elementwise_kernel"
d_y = y.cuda()
p_view = p.view(4, 6).t() if CASE == "strided" else p  # what d_p holds
out, exc = run(lambda: F.binary_cross_entropy(d_p, d_y))  # <- the BCE call
V = [v for v in events() if v.get("family") == "binary_cross_entropy"]

if CASE == "controls":
    check("%s: 0.0 and 1.0 are valid probabilities: no exception" % MODE, exc is None, exc)
    y0 = torch.zeros(24)
    y0[::2] = 1.0
    d_y0 = y0.view(4, 6).cuda().t()  # 0 and 1 targets through the closure
    _, exc = run(lambda: F.binary_cross_entropy(torch.full((6, 4), 0.5).cuda(), d_y0))
    check("%s: 0.0 and 1.0 targets, transposed (closure): no exception" % MODE, exc is None, exc)
    _, exc = run(lambda: F.binary_cross_entropy(torch.full((8,), 0.5).cuda(), torch.zeros(8).cuda()))
    check("%s: all-0.0 targets: no exception" % MODE, exc is None, exc)
    V = [v for v in events() if v.get("family") == "binary_cross_entropy"]
    check("%s: no violation in the JSONL" % MODE, V == [], V)
    sys.exit(1 if fails else 0)

first = min(bad)
blocked = MODE in ("raise", "mask", "async")
if blocked:
    check("%s: an exception at the BCE call, not a device assert" % MODE,
          exc is not None and "labelguard" in str(exc) and "device-side assert triggered" not in str(exc), exc)
    want = "bad probability input[%d] = %s" % (first, "nan" if math.isnan(bad[first]) else repr(bad[first]))
    check("%s: the message names %s and %s" % (MODE, kernel, want),
          exc is not None and kernel in str(exc) and want in str(exc), exc)
    check("%s: the probabilities can still be read (context alive)" % MODE,
          torch.equal(d_p.cpu().isnan(), p_view.isnan()) and torch.equal(d_p.cpu().nan_to_num(), p_view.nan_to_num()))
    good, exc2 = run(lambda: F.binary_cross_entropy(torch.full(tuple(d_p.shape), 0.5).cuda(), d_y))
    check("%s: the next BCE call with valid probabilities runs" % MODE, exc2 is None, exc2)
else:
    check("log: no exception (the kernel is let run)", exc is None, exc)
check("%s: one violation in the JSONL, kernel %s, family binary_cross_entropy" % (MODE, kernel),
      len(V) == 1 and V[0]["kernel"] == kernel, [(v["kernel"], v["family"]) for v in V])
if V:
    v = V[0]
    t = v["target"]
    n = 24 if CASE == "strided" else 8
    check("%s: target {dtype float32, count %d, range [0, 1]}" % (MODE, n),
          t["dtype"] == "float32" and t["count"] == n and t["range"] == [0, 1], t)
    check("%s: the decoded pointer is the input's data_ptr()" % MODE,
          t.get("data") == hex(d_p.data_ptr()), (t.get("data"), hex(d_p.data_ptr())))
    want = [{"index": i, "value": "nan" if math.isnan(x) else x} for i, x in sorted(bad.items())]
    got = [{"index": s["index"], "value": s["value"] if isinstance(s["value"], str)
            else float(torch.tensor(s["value"], dtype=torch.float32))} for s in v["bad"]["samples"]]
    got.sort(key=lambda s: s["index"])
    want = [{"index": w["index"], "value": w["value"] if isinstance(w["value"], str)
             else float(torch.tensor(w["value"], dtype=torch.float32))} for w in want]
    check("%s: samples at exact positions and values, NaN as \"nan\"" % MODE,
          got == want and v["bad"]["count"] == len(bad), v["bad"])
    cause = "nan_input" if CASE == "nan" else "no_sigmoid"
    check("%s: cause %s" % (MODE, cause), v["cause"] == cause, (v["cause"], v.get("cause_text")))
    outcome = "blocked" if blocked else "launched"
    check("%s: outcome %s" % (MODE, outcome), v["outcome"] == outcome, v["outcome"])
    if MODE == "mask":
        check("mask: falls back to raise, the note says why (no ignore value for a probability)",
              "no ignore value for a probability" in v.get("note", ""), v.get("note"))
sys.exit(1 if fails else 0)
