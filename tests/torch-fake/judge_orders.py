#!/usr/bin/env python3
"""judge_orders.py: cases.py's judge (judge_case, async mode on a lagging device) against the two
legal orders of a bad step's errors, written by hand as a case child would record them, and
against stories that must fail. On a lagging device which thread meets its verdict first is the
scheduler's choice: the main thread's forward error, or autograd's backward error inside
backward(); either way one bad batch gives one report and one error (the other half reads the
same labels and is not reported again). A real run shows one order or the other at random, so
each is judged here by construction. Run by test_judge_orders.sh under
build/torch-python (cases.py imports torch); prints ok:/FAIL: lines, exit 0 when all hold."""
import os
import sys

os.environ["FAKECUDA_ASYNC_US"] = "500"   # cases.LAGGING, read at import
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases  # noqa: E402

cls = cases.CASES["ce_mean"]
labels = [i % cls.n_classes for i in range(cls.count())]
for i, v in cls.bad.items():
    labels[i] = v
pairs, lo, hi = cls.expected(labels)
first = "target[%d] = %d" % pairs[0]


def text(kernel):
    return "CUDA error: labelguard: bad labels, not a CUDA fault: %s: bad label %s" % (kernel, first)


def violation(kernel, direction, outcome):
    return {"event": "violation", "kernel": kernel, "direction": direction, "outcome": outcome, "cause": cls.cause,
            "target": {"n_classes": cls.n_classes, "count": cls.count(), "dtype": "int64", "ignore_index": -100},
            "bad": {"samples": [{"index": i, "value": v} for i, v in pairs], "count": len(pairs), "min": lo, "max": hi},
            "python_stack": [{"file": cases.__file__, "line": 1}]}


fwd_event = dict(violation(cls.kernel, "forward", "masked"),
                 python_stack=[{"file": cases.__file__, "line": cases.loss_line(), "function": "loss_fn"}],
                 verdict_read_at={"when": "at the next sync", "native_stack": [], "python_stack": []})
bwd_event = violation(cls.bwd_kernel, "backward", "masked")
cases.child_output = lambda d, n, k=0: "  launched at %s:%d in loss_fn; found at the next sync (cases.py:1)   (python)" % (
    os.path.abspath(cases.__file__), cases.loss_line())
stories = [  # (what, exception, post, events, passes)
    ("forward first", {"phase": "sync", "text": text(cls.kernel)},
     {"labels_cpu": True, "cuda_op": True}, [fwd_event], True),
    ("backward first, the forward (same labels) not reported again", {"phase": "backward", "text": text(cls.bwd_kernel)},
     {"labels_cpu": True, "cuda_op": True}, [bwd_event], True),
    ("backward first, and the forward's error still delivered at labels.cpu()",
     {"phase": "backward", "text": text(cls.bwd_kernel)},
     {"labels_cpu": True, "labels_cpu_first_error": text(cls.kernel), "cuda_op": True}, [bwd_event], False),
    ("forward first, and an error still due at labels.cpu()", {"phase": "sync", "text": text(cls.kernel)},
     {"labels_cpu": True, "labels_cpu_first_error": text(cls.kernel), "cuda_op": True}, [fwd_event], False),
    ("forward first, and the backward reported too (two reports for one batch)", {"phase": "sync", "text": text(cls.kernel)},
     {"labels_cpu": True, "cuda_op": True}, [fwd_event, bwd_event], False),
    ("backward first, labels.cpu() fails again", {"phase": "backward", "text": text(cls.bwd_kernel)},
     {"labels_cpu": False, "cuda_op": True}, [bwd_event], False),
]
bad = 0
for what, exc, post, events, passes in stories:
    exc = dict(exc, step=cls.bad_step, type="RuntimeError", in_thread=False)
    res = {"exception": exc, "post": post, "completed": [s for s in range(cls.steps) if s != cls.bad_step],
           "bad_labels": labels}
    j = cases.Judge()
    real = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        cases.judge_case(j, cls, "async", res, 0, events, "/nonexistent")
    finally:
        sys.stdout.close()
        sys.stdout = real
    if (j.fails == 0) == passes:
        print("ok: %s: %s" % (what, "passes" if passes else "fails (%d checks)" % j.fails))
    else:
        bad += 1
        print("FAIL: %s: %s" % (what, "failed %d checks" % j.fails if passes else "passed"))
print("all checks passed" if not bad else "%d checks failed" % bad)
sys.exit(1 if bad else 0)
