"""closure_cases.py MODE OUT: the closure-taking TensorIterator index kernels on real torch on the
test double (gather / scatter: _scatter_gather_elementwise_kernel; x[idx], index_put_,
index_fill_, index_copy_, take, put_: index_elementwise_kernel). Each case puts one bad id at a known element of an index tensor
(contiguous, transposed, expanded) and checks what labelguard decoded from the closure against
the tensors themselves: the index pointer is idx.data_ptr(), the id count is the number of distinct
elements the view reads, the bound is the indexed dimension's size, the strides are the view's own
(expanded dimensions dropped), and the sample is (element offset from data_ptr, value). Then the
action: raise blocks with the id in the message and the context alive, in async mode too (no id
may stand in for a bad one: a backward reads the caller's ids); mask falls back to raise and says
why (no padding_idx); log lets the launch run. Controls with valid ids (and the negative
ids x[idx] allows) give no event. Prints one "ok: ..." / "FAIL: ..." line per check; exits 1 on
any failure. Run by test_closure.sh under both wheels, one process per mode.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
V215 = torch.__version__.startswith("2.15")


def view_of(t):
    """The distinct elements a view reads, in its own dimension order (the ops below iterate in
    the order of a contiguous output): (sizes, strides) with size-1 and stride-0 dimensions
    dropped and dense neighbours merged, which is what labelguard decodes from the iterator."""
    out = []
    for sz, st in zip(t.shape, t.stride()):
        if sz == 1 or st == 0:
            continue
        if out and out[-1][1] == st * sz:
            out[-1] = (out[-1][0] * sz, st)
        else:
            out.append((sz, st))
    return [s for s, _ in out], [st for _, st in out]


def case(name, fn, idx, bound, elem, value, kernels, family, negative=False, cause=None):
    """fn() launches the op; idx the index tensor holding the bad id at element offset elem."""
    _, exc = run(fn)
    V = new_events(OUT)
    tag = "%s %s" % (MODE, name)
    if MODE == "log":
        check("%s: log lets the launch run" % tag, exc is None, exc)
    else:
        check("%s: blocked with a labelguard error naming ids[%d] = %d, not a device assert" % (tag, elem, value),
              exc is not None and "labelguard" in str(exc) and "ids[%d] = %d" % (elem, value) in str(exc)
              and "device-side assert triggered" not in str(exc), exc)
    check("%s: one violation, kernel %s, family %s" % (tag, "/".join(kernels), family),
          len(V) == 1 and V[0]["kernel"] in kernels and V[0]["family"] == family,
          [(v["kernel"], v["family"]) for v in V])
    if len(V) != 1:
        return
    t, b = V[0]["target"], V[0]["bad"]
    sizes, strides = view_of(idx)
    count = 1
    for s in sizes:
        count *= s
    check("%s: decoded index pointer == idx.data_ptr() (%#x)" % (tag, idx.data_ptr()),
          t.get("data") == "%#x" % idx.data_ptr(), t.get("data"))
    check("%s: count %d (distinct elements), bound %d, dtype %s, allow_negative %s" %
          (tag, count, bound, str(idx.dtype)[6:], negative),
          (t["count"], t["bound"], t["dtype"], t["allow_negative"]) == (count, bound, str(idx.dtype)[6:], negative), t)
    check("%s: strides %s (the view's own)" % (tag, strides or [1]),
          t.get("strides") == (strides or [1]) and (len(sizes) < 2 or t.get("shape") == sizes), t)
    check("%s: the one sample is (element %d, %d)" % (tag, elem, value),
          [(s["index"], s["value"]) for s in b["samples"]] == [(elem, value)] and b["count"] == 1, b)
    if cause:
        check("%s: cause %s, its fix in the message" % (tag, cause), V[0]["cause"] == cause and
              (MODE == "log" or cause in str(exc)), (V[0]["cause"], V[0].get("cause_text")))
    # async (raise, LABELGUARD_MODE=async): every one of these is checked synchronously and
    # blocked. No id may stand in for a bad one in a copy: the ops that write at their ids would
    # write it into the caller's tensor, and the backward of those that read (gather's
    # scatter_add, x[idx]'s index_put_, take's put) reads the caller's ids, not the copy.
    outcome = {"log": "launched", "raise": "blocked", "mask": "blocked", "async": "blocked"}[MODE]
    check("%s: outcome %s" % (tag, outcome), V[0]["outcome"] == outcome, V[0]["outcome"])
    if MODE == "mask":
        check("%s: mask falls back to raise, the note says why" % tag,
              "mask fell back to raise" in V[0]["note"] and "padding_idx" in V[0]["note"], V[0]["note"])


def control(name, fn):
    _, exc = run(fn)
    V = new_events(OUT)
    check("%s control %s: runs, no event" % (MODE, name), exc is None and not V, (exc, V))


SG = ["_scatter_gather_elementwise_kernel"]
IE = ["index_elementwise_kernel"]
x = torch.randn(4, 7).cuda()

# ---- gather / scatter: _scatter_gather_elementwise_kernel ----
idx = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 7, 0], [1, 2, 3]]).cuda()  # idx[2, 1] = 7 == x.size(1)
case("gather contiguous", lambda: torch.gather(x, 1, idx), idx, 7, 7, 7, SG, "gather")
base = torch.tensor([[0, 1, 2, 3], [4, 5, -1, 6], [1, 2, 3, 4]]).cuda()  # base[1, 2] = -1: element 6
it = base.t()
case("gather transposed", lambda: torch.gather(x, 1, it), it, 7, 6, -1, SG, "gather")
ie = torch.tensor([[1], [9], [2], [3]]).cuda().expand(4, 3)
case("gather expanded", lambda: torch.gather(x, 1, ie), ie, 7, 1, 9, SG, "gather")
i32 = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 8, 0], [1, 2, 3]], dtype=torch.int32).cuda()
case("gather int32 ids", lambda: torch.gather(x, 1, i32), i32, 7, 7, 8, SG, "gather")
# GNN aggregation: out.scatter_add_(0, dst.view(-1, 1).expand(-1, F), msg); dst[5] == num_nodes
N, F, E = 6, 4, 8
dst = torch.tensor([0, 1, 2, 3, 4, 6, 5, 1]).cuda()
msg = torch.randn(E, F).cuda()
agg = torch.zeros(N, F).cuda()
dx = dst.view(-1, 1).expand(-1, F)
case("scatter_add GNN expanded dst", lambda: agg.scatter_add_(0, dx, msg), dx, N, 5, 6, SG, "scatter",
     cause="node_id_out_of_range")
s = torch.zeros(4, 7).cuda()
src = torch.randn(4, 3).cuda()
case("scatter_", lambda: s.scatter_(1, idx, src), idx, 7, 7, 7, SG, "scatter")
case("scatter_ value", lambda: s.scatter_(1, idx, 2.0), idx, 7, 7, 7, SG, "scatter")
case("scatter_reduce amax", lambda: s.scatter_reduce_(1, idx, src, "amax"), idx, 7, 7, 7, SG, "scatter")
good = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 6, 0], [1, 2, 3]]).cuda()
control("gather valid ids", lambda: torch.gather(x, 1, good))
control("scatter_add valid dst", lambda: agg.scatter_add_(0, torch.tensor([0, 1, 2, 3, 4, 5, 5, 1]).cuda()
                                                          .view(-1, 1).expand(-1, F), msg))
# nn.Embedding(20, 16) with 40 ids (64-byte rows): the TensorIterator gather in 2.15; 2.10 takes
# vectorized_gather_kernel (a named-parameter kernel, tests/torch-fake/beyond_cases.py)
if V215:
    emb = torch.nn.Embedding(20, 16).cuda()
    ids = torch.tensor([i % 20 for i in range(40)])
    ids[33] = 20
    ids = ids.cuda()
    case("embedding 20x16, 40 ids (2.15)", lambda: emb(ids), ids, 20, 33, 20, SG, "gather")
    control("embedding valid ids", lambda: emb(torch.tensor([i % 20 for i in range(40)]).cuda()))

# ---- x[idx], index_put_, index_fill_, index_copy_: index_elementwise_kernel ----
y = torch.randn(6, 5).cuda()
i1 = torch.tensor([0, 5, -1, 6]).cuda()
case("x[idx]", lambda: y[i1], i1, 6, 3, 6, IE, "index", negative=True)
rows, cols = torch.tensor([0, 1, 2]).cuda(), torch.tensor([4, 3, 5]).cuda()
case("x[rows, cols], bad column", lambda: y[rows, cols], cols, 5, 2, 5, IE, "index", negative=True)
ix = torch.tensor([[1], [-7]]).cuda().expand(2, 4)
case("x[idx] expanded", lambda: y[ix], ix, 6, 1, -7, IE, "index", negative=True)
ip = torch.tensor([1, 8]).cuda()
case("index_put_", lambda: y.index_put_((ip,), torch.ones(2, 5).cuda()), ip, 6, 1, 8, IE, "index_put",
     negative=True)
# x[idx] = scalar: index_put_kernel_impl in 2.10, index_fill_kernel_impl in 2.15
case("x[idx] = 3.0", lambda: y.__setitem__(ip, 3.0), ip, 6, 1, 8, IE, "index_fill" if V215 else "index_put",
     negative=True)
fi = torch.tensor([1, 5]).cuda()
case("index_fill_", lambda: y.index_fill_(1, fi, 2.0), fi, 5, 1, 5, IE, "index_fill", negative=True)
ci = torch.tensor([1, 6]).cuda()
case("index_copy_", lambda: y.index_copy_(0, ci, torch.ones(2, 5).cuda()), ci, 6, 1, 6, IE, "index_copy")
control("index_copy_ valid", lambda: y.index_copy_(0, torch.tensor([1, 5]).cuda(), torch.ones(2, 5).cuda()))
ti = torch.tensor([1, -31]).cuda()  # y has 30 elements: -31 is one before -30
case("torch.take", lambda: torch.take(y, ti), ti, 30, 1, -31, IE, "take", negative=True)
pi = torch.tensor([30, 2]).cuda()
yt = y.t()  # put_ into a non-contiguous tensor: the bound is still its numel
case("put_ (transposed self)", lambda: yt.put_(pi, torch.ones(2).cuda()), pi, 30, 0, 30, IE, "put", negative=True)
control("take with -30 and 29", lambda: torch.take(y, torch.tensor([-30, 29]).cuda()))
control("x[idx] with allowed negatives -1, -6", lambda: y[torch.tensor([0, 5, -1, -6]).cuda()])
control("x[rows, cols] valid", lambda: y[rows, torch.tensor([4, 3, -5]).cuda()])
check("%s: the context is alive" % MODE, i1.cpu().tolist() == [0, 5, -1, 6])
finish()
