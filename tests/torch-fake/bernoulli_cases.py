"""bernoulli_cases.py MODE OUT: torch.bernoulli / Tensor.bernoulli_ with probabilities outside
[0, 1], on real torch on the test double, judged in this process; prints one "ok: ..." or
"FAIL: ..." line per check and exits 1 when any failed. Run by test_bernoulli.sh under both
wheels, one process per mode. kernelPointwiseApply2's op asserts `0 <= p && p <= 1` on a GPU;
under the double its kernels are no-ops, so p is made on the CPU and copied, and only the check
is judged.
MODE: raise (a contiguous float32 p with 1.5 at element 17: blocked with position, value, cause
no_sigmoid; a float64 p with a NaN: nan_input; every other element of a vector (stride 2) and a
transposed matrix p (two collapsed dimensions): the bad element found at its logical position),
mask (no probability stands in: falls back to raise, the note says why), log (runs, the event
written), control (valid p with 0 and 1: no event). OUT: the LABELGUARD_LOG directory.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
p = torch.full((64,), 0.5)
p[17] = 1.5


def draw(q):
    return torch.bernoulli(q.cuda())


def bernoulli_events(V):
    return [v for v in V if v.get("family") == "bernoulli"]


if MODE == "control":
    good = torch.linspace(0, 1, 64)
    out, exc = run(lambda: draw(good))
    check("control: no exception, 64 draws", exc is None and tuple(out.shape) == (64,), exc)
    # (A float16 p is converted to a float32 copy by a kernel the double does not run: its copy
    # holds no values here, so that case is judged on a GPU only.)
    check("control: no violation", events(OUT) == [], events(OUT))
else:
    _, exc = run(lambda: draw(p))
    V = bernoulli_events(new_events(OUT))
    if MODE == "log":
        check("log: the launch runs (no exception from labelguard)", exc is None, exc)
    else:
        check("%s: blocked with labelguard's error naming p[17] = 1.5 and the fix" % MODE,
              exc is not None and "labelguard" in str(exc) and "p[17] = 1.5" in str(exc)
              and "torch.sigmoid" in str(exc) and "device-side assert triggered" not in str(exc), exc)
    check("%s: one violation, family bernoulli" % MODE, len(V) == 1, V)
    if V:
        v = V[0]
        check("%s: 64 probabilities of float32 in [0, 1]" % MODE,
              (v["target"]["count"], v["target"]["dtype"], v["target"]["kind"]) == (64, "float32", "range"), v["target"])
        check("%s: the sample (17, 1.5)" % MODE, [(s["index"], s["value"]) for s in v["bad"]["samples"]] == [(17, 1.5)],
              v["bad"])
        check("%s: cause no_sigmoid, in torch.bernoulli's words" % MODE,
              v["cause"] == "no_sigmoid" and "torch.bernoulli" in v["cause_text"], (v["cause"], v["cause_text"]))
        want = {"raise": "blocked", "mask": "blocked", "log": "launched"}[MODE]
        check("%s: outcome %s" % (MODE, want), v["outcome"] == want, v["outcome"])
        if MODE == "mask":
            check("mask: falls back to raise, the note says why", "mask fell back to raise" in v.get("note", ""),
                  v.get("note"))
        check("%s: the Python frame of the draw" % MODE,
              any(f["file"].endswith("bernoulli_cases.py") for f in v.get("python_stack", [])), v.get("python_stack"))
    if MODE == "raise":
        nan = torch.full((10,), 0.25, dtype=torch.float64)
        nan[3] = float("nan")
        _, exc = run(lambda: draw(nan))
        V = bernoulli_events(new_events(OUT))
        check("raise: a NaN in float64 p is blocked, cause nan_input",
              exc is not None and len(V) == 1 and V[0]["cause"] == "nan_input" and V[0]["target"]["dtype"] == "float64"
              and [s["index"] for s in V[0]["bad"]["samples"]] == [3], (exc, V))
        base = torch.full((40,), 0.5)
        base[2 * 7] = -0.25  # element 7 of base[::2]
        _, exc = run(lambda: torch.bernoulli(base.cuda()[::2]))
        V = bernoulli_events(new_events(OUT))
        check("raise: every other element (stride 2): p[7] = -0.25, nothing else",
              exc is not None and len(V) == 1 and [(s["index"], s["value"]) for s in V[0]["bad"]["samples"]] == [(7, -0.25)]
              and V[0]["target"]["count"] == 20, (exc, V))
        m = torch.full((6, 5), 0.5)
        m[4, 1] = 2.0  # element (1, 4) of m.t(), the 9th in row-major order of the 5 x 6 view
        x = torch.empty(5, 6, device="cuda")
        _, exc = run(lambda: x.bernoulli_(m.cuda().t()))
        V = bernoulli_events(new_events(OUT))
        check("raise: a transposed matrix p (two dimensions): the value 2 found, 30 read",
              exc is not None and len(V) == 1 and [s["value"] for s in V[0]["bad"]["samples"]] == [2.0]
              and V[0]["bad"]["checked"] == 30, (exc, V))
        out, exc = run(lambda: draw(torch.full((64,), 0.5)))
        check("raise: valid p afterwards runs", exc is None, exc)
finish()
