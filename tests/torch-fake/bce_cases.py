"""bce_cases.py MODE OUT CASE: F.binary_cross_entropy with probabilities outside [0, 1] or NaN on
real torch on the test double, in one process, judged here; prints one "ok: ..." or "FAIL: ..."
line per check and exits 1 when any failed. Run by test_bce.sh under both wheels, one process per
case and mode. The probabilities are made on the CPU and copied: under the double only emulated
kernels compute, and BCE's own kernels are no-ops there.
MODE: raise, mask, log (LABELGUARD_ACTION set by the caller), async (raise with
LABELGUARD_MODE=async: the launch runs on its own operands, no value can stand in for a probability,
and the verdict, read after it, is raised at the call or the next synchronisation: outcome
launched, the note says the verdict is late). OUT: the LABELGUARD_LOG directory.
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
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, run  # noqa: E402

MODE, OUT, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
BLOCKED = MODE in ("raise", "mask", "async")


def f32(x):
    """x as the float32 it is stored as, "nan" for NaN (how the JSONL writes it): -0.1 in a float32
    tensor is not the double -0.1."""
    return "nan" if isinstance(x, str) or math.isnan(x) else float(torch.tensor(x, dtype=torch.float32))


def place(h, layout):
    """h (24 values for "strided", else 8) on the device in the case's layout, one per BCE kernel:
    "strided", h.view(4, 6) transposed (6x4, strides (1, 6): elementwise_kernel, the closure);
    "misaligned", h as x[1:] of a larger tensor (not 16-byte aligned: unrolled_elementwise_kernel);
    any other, contiguous (vectorized_elementwise_kernel). Returns (the device tensor, the host
    tensor it equals, the kernel)."""
    if layout == "strided":
        return h.view(4, 6).cuda().t(), h.view(4, 6).t(), "elementwise_kernel"
    if layout == "misaligned":
        big = torch.zeros(h.numel() + 1)
        big[1:] = h
        return big.cuda()[1:], h, "unrolled_elementwise_kernel"
    return h.cuda(), h, "vectorized_elementwise_kernel"


def bce_violations():
    return [v for v in events(OUT) if v.get("family") == "binary_cross_entropy"]


def judge(exc, kernel, bad, d_bad, host, retry, cause, operand, other=None):
    """Checks the BCE call that raised exc (or None) on one bad operand (operand "input", the
    probabilities, or "target"): d_bad is that operand on the device, host what it holds, bad its
    {element offset: value}; retry() repeats the call with that operand valid and must run.
    other: the valid input when the target is bad, whose data_ptr() the event must not name (the
    closure holds the input's pointer first). A bad target is reported as target[i], with
    operand "target" and a cause text that names it."""
    V = bce_violations()
    first = min(bad)
    label = {"input": "probabilities", "target": "targets"}[operand]
    if BLOCKED:
        check("%s: an exception at the BCE call, not a device assert" % MODE,
              exc is not None and "labelguard" in str(exc) and "device-side assert triggered" not in str(exc), exc)
        want = ("bad probability input[%d] = %s" if operand == "input" else "bad target value target[%d] = %s") % (
            first, "nan" if math.isnan(bad[first]) else repr(bad[first]))
        check("%s: the message names %s and %s" % (MODE, kernel, want),
              exc is not None and kernel in str(exc) and want in str(exc)
              and (operand == "input" or "input[" not in str(exc)), exc)
        check("%s: the %s can still be read (context alive)" % (MODE, label),
              torch.equal(d_bad.cpu().isnan(), host.isnan())
              and torch.equal(d_bad.cpu().nan_to_num(), host.nan_to_num()))
        _, exc2 = run(retry)
        check("%s: the next BCE call with valid %s runs" % (MODE, label), exc2 is None, exc2)
    else:
        check("log: no exception (the kernel is let run)", exc is None, exc)
    check("%s: one violation in the JSONL, kernel %s, family binary_cross_entropy" % (MODE, kernel),
          len(V) == 1 and V[0]["kernel"] == kernel, [(v["kernel"], v["family"]) for v in V])
    if not V:
        return
    v = V[0]
    t = v["target"]
    n = host.numel()
    check("%s: target {dtype float32, count %d, range [0, 1]%s}"
          % (MODE, n, ", operand target" * (operand == "target")),
          t["dtype"] == "float32" and t["count"] == n and t["range"] == [0, 1]
          and (operand == "input" or t.get("operand") == "target"), t)
    check("%s: the decoded pointer is the %s's data_ptr()%s"
          % (MODE, operand, ", not the input's" * (other is not None)),
          t.get("data") == hex(d_bad.data_ptr()) and (other is None or t.get("data") != hex(other.data_ptr())),
          (t.get("data"), hex(d_bad.data_ptr()), other is not None and hex(other.data_ptr())))
    got = sorted((s["index"], f32(s["value"])) for s in v["bad"]["samples"])
    want = sorted((i, f32(x)) for i, x in bad.items())
    check("%s: samples at exact positions and values, NaN as \"nan\"" % MODE,
          got == want and v["bad"]["count"] == len(bad), v["bad"])
    if operand == "target":
        check("%s: cause %s, the text says target" % (MODE, cause),
              v["cause"] == cause and "target" in v.get("cause_text", ""), (v["cause"], v.get("cause_text")))
    else:
        check("%s: cause %s" % (MODE, cause), v["cause"] == cause, (v["cause"], v.get("cause_text")))
    outcome = "blocked" if BLOCKED and MODE != "async" else "launched"
    check("%s: outcome %s" % (MODE, outcome), v["outcome"] == outcome, v["outcome"])
    if MODE == "async":
        check("async: the note says the launch ran and the verdict is late",
              v.get("note", "").startswith("verdict late: the launch (async mode) ran on its probabilities"),
              v.get("note"))
    if MODE == "mask":
        check("mask: falls back to raise, the note says why (no ignore value for a probability)",
              "no ignore value for a probability" in v.get("note", ""), v.get("note"))


if CASE == "dtypes":
    for dt, name in ((torch.float64, "float64"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        q = torch.full((8,), 0.25, dtype=dt)
        q[4] = 1.5
        d_q = q.cuda()
        _, exc = run(lambda: F.binary_cross_entropy(d_q, torch.ones(8, dtype=dt).cuda()))
        check("%s %s: blocked, the message names input[4] = 1.5" % (MODE, name),
              exc is not None and "bad probability input[4] = 1.5" in str(exc), exc)
    V = sorted(bce_violations(), key=lambda v: v["launch_seq"])
    check("%s: three violations, dtypes float64, float16, bfloat16, each input[4] = 1.5" % MODE,
          [(v["target"]["dtype"], v["bad"]["samples"]) for v in V] ==
          [(n, [{"index": 4, "value": 1.5}]) for n in ("float64", "float16", "bfloat16")],
          [(v["target"]["dtype"], v["bad"]["samples"]) for v in V])
    finish()

if CASE.startswith("target"):
    # the target is the bad operand; the probabilities are valid
    y = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    bad = {3: 1.5, 6: float("nan")}
    if CASE == "target_strided":
        y = torch.ones(24)
        bad = {8: 1.5, 1: float("nan")}
    elif CASE == "target_nan":
        bad = {4: float("nan")}
    for i, x in bad.items():
        y[i] = x
    d_y, y_view, kernel = place(y, CASE[len("target_"):])
    d_p = torch.full(tuple(d_y.shape), 0.25).cuda()
    _, exc = run(lambda: F.binary_cross_entropy(d_p, d_y))  # <- the BCE call
    judge(exc, kernel, bad, d_y, y_view, lambda: F.binary_cross_entropy(d_p, torch.ones(tuple(d_y.shape)).cuda()),
          "other", "target", other=d_p)
    finish()

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
d_p, p_view, kernel = place(p, CASE)
y = torch.ones(6, 4) if CASE == "strided" else torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
d_y = y.cuda()
_, exc = run(lambda: F.binary_cross_entropy(d_p, d_y))  # <- the BCE call

if CASE == "controls":
    check("%s: 0.0 and 1.0 are valid probabilities: no exception" % MODE, exc is None, exc)
    y0 = torch.zeros(24)
    y0[::2] = 1.0
    d_y0 = y0.view(4, 6).cuda().t()  # 0 and 1 targets through the closure
    _, exc = run(lambda: F.binary_cross_entropy(torch.full((6, 4), 0.5).cuda(), d_y0))
    check("%s: 0.0 and 1.0 targets, transposed (closure): no exception" % MODE, exc is None, exc)
    _, exc = run(lambda: F.binary_cross_entropy(torch.full((8,), 0.5).cuda(), torch.zeros(8).cuda()))
    check("%s: all-0.0 targets: no exception" % MODE, exc is None, exc)
    V = bce_violations()
    check("%s: no violation in the JSONL" % MODE, V == [], V)
    finish()

judge(exc, kernel, bad, d_p, p_view, lambda: F.binary_cross_entropy(torch.full(tuple(d_p.shape), 0.5).cuda(), d_y),
      "nan_input" if CASE == "nan" else "no_sigmoid", "input")
finish()
