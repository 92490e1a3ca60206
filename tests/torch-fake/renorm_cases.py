"""renorm_cases.py MODE OUT: F.embedding(max_norm=...) with an id past the weight's rows, on real torch
on the test double, judged in this process; prints one "ok: ..." or "FAIL: ..." line per check and
exits 1 when any failed. Run by test_renorm.sh under both wheels, one process per mode. From 2.13
the renorm runs embedding_renorm_wrap_indices_kernel on the caller's ids before the lookup, and on
a GPU its `index >= -num_weights && index < num_weights` asserts first: labelguard must block it
there. Before 2.13 the renorm asserts nothing and the lookup's own check blocks the id.
MODE: raise (id 12 of a 10-row weight: blocked, with the position, value and bound; an id of -11
too; then valid ids run), control (valid ids, -3 wrapped as the renorm wraps it before a lookup
without negatives: the lookup's check blocks -3 as eager PyTorch does). OUT: the LABELGUARD_LOG
directory.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
wrap = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 15)
w = torch.randn(10, 4)


def lookup(ids):
    return F.embedding(ids.cuda(), w.cuda(), max_norm=1.0)


if MODE == "control":
    out, exc = run(lambda: lookup(torch.tensor([0, 9, 3, 9])))
    check("control: valid ids run, 4 x 4", exc is None and tuple(out.shape) == (4, 4), exc)
    check("control: no violation", events(OUT) == [], events(OUT))
    _, exc = run(lambda: lookup(torch.tensor([1, -3])))
    V = new_events(OUT)
    kernels = [v["kernel"] for v in V]
    check("control: -3 passes the renorm's wrap and is blocked by the lookup, as eager rejects it",
          exc is not None and "ids[1] = -3" in str(exc) and len(V) == 1
          and "embedding_renorm_wrap_indices_kernel" not in kernels, (exc, kernels))
else:
    _, exc = run(lambda: lookup(torch.tensor([1, 2, 12, 4])))
    V = new_events(OUT)
    check("raise: blocked with labelguard's error naming ids[2] = 12",
          exc is not None and "labelguard" in str(exc) and "ids[2] = 12" in str(exc)
          and "device-side assert triggered" not in str(exc), exc)
    want = "embedding_renorm_wrap_indices_kernel" if wrap else None
    check("raise: one violation, %s" % (want or "at the lookup (no renorm assert before 2.15)"),
          len(V) == 1 and (V[0]["kernel"] == want if want else V[0]["kernel"] != "embedding_renorm_wrap_indices_kernel"),
          [v["kernel"] for v in V])
    if V and wrap:
        v = V[0]
        check("raise: family embedding, bound 10, negatives wrapped as the kernel does",
              v["family"] == "embedding" and v["target"]["bound"] == 10 and v["target"]["allow_negative"] is True,
              v["target"])
        check("raise: the Python frame of the lookup",
              any(f["file"].endswith("renorm_cases.py") for f in v.get("python_stack", [])), v.get("python_stack"))
        _, exc = run(lambda: lookup(torch.tensor([1, -11])))
        V = new_events(OUT)
        check("raise: -11 is past the wrap too (ids[1] = -11, outside [-10, 10))",
              exc is not None and "ids[1] = -11" in str(exc) and "outside [-10, 10)" in str(exc) and len(V) == 1, (exc, V))
    out, exc = run(lambda: lookup(torch.tensor([0, 9])))
    check("raise: valid ids afterwards run", exc is None, exc)
finish()
