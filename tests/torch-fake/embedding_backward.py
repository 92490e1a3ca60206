"""embedding_backward.py MODE OUT: an nn.Embedding training step on real torch on the test double,
with one bad id (1000000 in a table of 10 rows): the forward (index_select), a loss, and loss.backward(), whose
embedding_backward_feature_kernel (autograd's thread) adds gradient rows at the caller's ids
unchecked. The double emulates it and reports a row outside grad_weight as an illegal address
(tests/fakecuda/index_backward.c): the out-of-bounds write a substitute id in the forward's copy
would let through, where plain PyTorch stops with the forward's device assert.
MODE:
  plain   no labelguard, eager: the forward's device assert (710), never an illegal address
  async   LABELGUARD_MODE=async, raise, eager, the device lagging (the driver sets
          FAKECUDA_ASYNC_US): a labelguard RuntimeError at the embedding call (the ids are
          checked synchronously), the context alive, grad never written
  raise   sync mode, the step captured with torch.cuda.graph (good ids), the bad id copied into
          the static ids, one replay: the forward's own assert (710), never an illegal address,
          and the captured check's violation (outcome launched, the replay's verdict)
Prints one "ok: ..." / "FAIL: ..." line per check; exits 1 on any failure. Run by
test_embedding_backward.sh under both wheels, one process per mode.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
import caselib  # noqa: E402
from caselib import check, finish, new_events  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
cuda = torch.device("cuda")
BAD = [1, 1000000, 2]

torch.manual_seed(0)
emb = torch.nn.Embedding(10, 4).to(cuda)  # initialised on the CPU, copied


def step(ids):
    out = emb(ids)
    loss = out.sum()
    loss.backward()
    return out


def phase_of(fn):
    """Runs fn() then a synchronisation: (None, None) or (phase, exception) where phase says
    which part raised."""
    try:
        fn()
    except RuntimeError as e:
        return "step", e
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:
        return "sync", e
    return None, None


def no_oob(tag, exc):
    check("%s: no out-of-bounds write (illegal address) from the backward" % tag,
          exc is None or "illegal memory access" not in str(exc), exc)


if MODE in ("plain", "async"):
    # A clean step first, as a training loop has run: autograd's device thread and the first
    # backward's set-up exist before the bad step, whose backward then comes right after its
    # forward on the host, long before a lagging device reaches the forward's check.
    phase, exc = phase_of(lambda: step(torch.tensor([1, 2, 3]).to(cuda)))
    check("%s: a clean step runs" % MODE, exc is None, exc)
    emb.zero_grad(set_to_none=True)
    ids = torch.tensor(BAD).to(cuda)
    phase, exc = phase_of(lambda: step(ids))
    no_oob(MODE, exc)
    if MODE == "plain":
        check("plain: the forward's device assert", exc is not None and "device-side assert triggered" in str(exc), exc)
    else:
        check("async: a labelguard RuntimeError at the embedding call naming ids[1] = 1000000",
              phase == "step" and "labelguard" in str(exc) and "bad id ids[1] = 1000000" in str(exc), (phase, exc))
        V = new_events(OUT)
        check("async: one violation, blocked", len(V) == 1 and V[0]["outcome"] == "blocked", V)
        check("async: the context is alive, the weight has no gradient",
              emb.weight.grad is None and torch.ones(2).to(cuda).cpu().tolist() == [1.0, 1.0],
              "grad %s" % ("None" if emb.weight.grad is None else "written"))
elif MODE == "raise":
    static_ids = torch.tensor([1, 2, 3]).to(cuda)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up, as torch.cuda.graph asks
            emb.zero_grad(set_to_none=True)
            step(static_ids)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    emb.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        step(static_ids)
    static_ids.copy_(torch.tensor(BAD))
    phase, exc = phase_of(g.replay)
    no_oob("graph", exc)
    check("graph: the forward's own device assert, as without labelguard",
          exc is not None and "device-side assert triggered" in str(exc), (phase, exc))
    V = new_events(OUT)
    check("graph: the replay's violation: launched on its own ids, ids[1] = 1000000",
          len(V) == 1 and V[0]["outcome"] == "launched" and "read its own ids" in V[0]["note"]
          and V[0]["bad"]["samples"][0] == {"index": 1, "value": 1000000}, V)
else:
    sys.exit("embedding_backward.py: unknown mode %s" % MODE)
if MODE == "plain":
    # The failed backward's graph task is released by autograd's device thread after this thread
    # got the error; releasing it drops a Python object, so that thread takes the GIL. If that
    # happens while the interpreter finalizes, CPython ends the thread with pthread_exit inside
    # a noexcept destructor (~ThreadLocalState) and libstdc++ calls std::terminate (seen as
    # "terminate called without an active exception", status 134, in about one run in three).
    # The checks are all printed: leave without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if caselib.fails else 0)
finish()
