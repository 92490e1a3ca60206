"""pystack_train.py: the body of tests/torch-fake/test_pystack_torch.sh, run inside the Debian root
(tests/pyroot/install.sh) by CPython 3.14 or 3.15 with torch 2.15 (CUDA 13) on the runtime test
double and labelguard preloaded, LABELGUARD_ACTION=mask. A few training steps of a small
classifier; one step has a label equal to n_classes. The NLL forward, launched by this thread,
names the loss line; its backward, launched by autograd's engine thread with the same labels, is
masked too and not reported again (the engine thread's fallback to the main thread's stack is
tested by tests/e2e/test_pystack.sh in the same root, "native thread -> main"). Then
F.cross_entropy and F.embedding with one invalid label or id each, and eight loader threads
launching an embedding with their own invalid id at once: each report names its own line and
thread. Run in sync and async mode (LABELGUARD_MODE), on regular and free-threaded builds.
Prints one "ok: ..." or "FAIL: ..." line per check, and exits 1 when any failed.
    python3.1X pystack_train.py OUT     OUT: the LABELGUARD_LOG directory
"""
import glob
import json
import os
import sys
import sysconfig
import threading

import torch
import torch.nn.functional as F

out = sys.argv[1]
src = open(__file__).read().splitlines()
fails = 0


def line_of(mark):
    return next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# " + mark))


def check(what, cond, detail=""):
    global fails
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "  [%s]" % str(detail)[:700]))
    fails += 0 if cond else 1


C = 10
gen = torch.Generator().manual_seed(0)
# Elementwise only: the double runs no cuBLAS (it has no driver API for it).
w = torch.randn(C, generator=gen).cuda().requires_grad_(True)


def train_step(x, labels):
    logits = x * w
    loss = F.nll_loss(F.log_softmax(logits, 1), labels)  # MARK_LOSS
    w.grad = None
    loss.backward()  # MARK_BACKWARD
    with torch.no_grad():
        w.sub_(0.1 * w.grad)
    return loss.item()


def train():
    for step in range(3):
        labels = torch.arange(8) % C
        if step == 1:
            labels[3] = C  # one label past the last class
        train_step(torch.randn(8, C, generator=gen).cuda(), labels.cuda())  # MARK_STEP


train()  # MARK_MODULE

# CrossEntropy and an embedding, each fed one invalid label or id.
V = 6
table = torch.randn(V, 4, generator=gen).cuda()


def ce_step(logits, labels):
    return F.cross_entropy(logits, labels)  # MARK_CE


def embed_step(ids):
    return F.embedding(ids, table)  # MARK_EMBED


def attempt(fn, *args):
    try:
        fn(*args)
        torch.cuda.synchronize()
    except RuntimeError as e:  # where mask falls back to raise
        errors.append(str(e).splitlines()[0])


errors = []
ce_labels = torch.arange(8) % C
ce_labels[5] = C + 1
attempt(ce_step, torch.randn(8, C, generator=gen).cuda(), ce_labels.cuda())
bad_ids = torch.arange(8) % V
bad_ids[2] = V
attempt(embed_step, bad_ids.cuda())

# Eight loader threads launch at once, each with its own invalid id (V + k): with no GIL (a
# free-threaded build) they truly run together; each report must name its own thread's line.
N = 8
pool_ids = []
for k in range(N):
    ids = torch.arange(8) % V
    ids[k] = V + k
    pool_ids.append(ids.cuda())
ready = threading.Barrier(N)


def loader(k):
    ready.wait()
    try:
        F.embedding(pool_ids[k], table)  # MARK_POOL
        torch.cuda.synchronize()
    except RuntimeError as e:  # mask falls back to raise: index_select has no padding_idx
        errors.append(str(e).splitlines()[0])


pool = [threading.Thread(target=loader, args=(k,)) for k in range(N)]
for t in pool:
    t.start()
for t in pool:
    t.join()
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
print("python %s%s, torch %s, GIL %s, mode %s" % (sys.version.split()[0], "t" if "t" in sys.abiflags else "",
                                                 torch.__version__, "on" if gil else "off",
                                                 os.environ.get("LABELGUARD_MODE")))
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    check("a free-threaded build keeps its GIL off with torch imported", not gil)

ev = []
for f in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    with open(f) as fh:
        ev += [json.loads(line) for line in fh if line.strip()]
me = os.path.abspath(__file__)


def lines(v):
    """This script's frames of a violation's python_stack, as (function, line)."""
    return [(f["function"], f["line"]) for f in v.get("python_stack") or [] if f["file"] == me]


viol = [e for e in ev if e["event"] == "violation"]
train_viol = [v for v in viol if ("train_step", line_of("MARK_LOSS")) in lines(v) or v["direction"] == "backward"]
fwd = [v for v in train_viol if v["direction"] == "forward"]
bwd = [v for v in train_viol if v["direction"] == "backward"]
# One bad batch, one report: the backward reads the forward's labels, runs masked too and is
# not reported again (core/pairs.c; the summary's count, written at exit, is the driver's check).
check("one forward violation, no second one for its backward", len(fwd) == 1 and not bwd,
      [(v["kernel"], v["direction"]) for v in viol])


if fwd:
    # F.nll_loss's own frame (torch/nn/functional.py) is the innermost; the script's frames are
    # exactly <module> -> train -> train_step, at the loss line.
    frames = [(f["file"], f["function"], f["line"]) for f in fwd[0]["python_stack"]]
    mine = [f for f in frames if f[0] == me]
    check("forward: python_stack has <module> -> train -> train_step at the loss line, from the launching thread",
          mine == [(me, "<module>", line_of("MARK_MODULE")), (me, "train", line_of("MARK_STEP")),
                   (me, "train_step", line_of("MARK_LOSS"))]
          and fwd[0].get("python_stack_thread") == "launching", (frames, fwd[0].get("python_stack_thread")))

ce = [v for v in viol if lines(v)[-1:] == [("ce_step", line_of("MARK_CE"))]]
check("cross_entropy: one report, at its line, with the value", len(ce) == 1 and ce[0]["bad"]["max"] == C + 1,
      [lines(v) for v in viol])
emb = [v for v in viol if lines(v)[-1:] == [("embed_step", line_of("MARK_EMBED"))]]
check("embedding: one report, at its line, with the value", len(emb) == 1 and emb[0]["bad"]["max"] == V,
      [lines(v) for v in viol])
pooled = [v for v in viol if lines(v)[-1:] == [("loader", line_of("MARK_POOL"))]]
check("8 loader threads: one report each, each from its launching thread with its own value",
      sorted(v["bad"]["max"] for v in pooled) == [V + k for k in range(N)]
      and all(v.get("python_stack_thread") == "launching" for v in pooled),
      ([(v["bad"]["max"], v.get("python_stack_thread"), lines(v)) for v in pooled], errors))
sys.exit(1 if fails else 0)
