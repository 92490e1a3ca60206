"""pystack_train.py: the body of tests/torch-fake/test_pystack_torch.sh, run inside the Debian root
(tests/pyroot/install.sh) by CPython 3.14 or 3.15 with torch 2.15 (CUDA 13) on the runtime test
double and labelguard preloaded, LABELGUARD_ACTION=mask. A few training steps of a small
classifier; one step has a label equal to n_classes. The NLL forward, launched by this thread,
names the loss line; its backward, launched by autograd's engine thread with the same labels, is
masked too and not reported again (the engine thread's fallback to the main thread's stack is
tested by tests/e2e/test_pystack.sh in the same root, "native thread -> main"). Prints one "ok: ..." or "FAIL: ..." line per check, and
exits 1 when any failed.
    python3.1X pystack_train.py OUT     OUT: the LABELGUARD_LOG directory
"""
import glob
import json
import os
import sys

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
print("python %s, torch %s" % (sys.version.split()[0], torch.__version__))

ev = []
for f in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    with open(f) as fh:
        ev += [json.loads(line) for line in fh if line.strip()]
viol = [e for e in ev if e["event"] == "violation"]
fwd = [v for v in viol if v["direction"] == "forward"]
bwd = [v for v in viol if v["direction"] == "backward"]
# One bad batch, one report: the backward reads the forward's labels, runs masked too and is
# not reported again (core/pairs.c; the summary's count, written at exit, is the driver's check).
check("one forward violation, no second one for its backward", len(fwd) == 1 and not bwd,
      [(v["kernel"], v["direction"]) for v in viol])


me = os.path.abspath(__file__)
if fwd:
    # F.nll_loss's own frame (torch/nn/functional.py) is the innermost; the script's frames are
    # exactly <module> -> train -> train_step, at the loss line.
    frames = [(f["file"], f["function"], f["line"]) for f in fwd[0]["python_stack"]]
    mine = [f for f in frames if f[0] == me]
    check("forward: python_stack has <module> -> train -> train_step at the loss line, from the launching thread",
          mine == [(me, "<module>", line_of("MARK_MODULE")), (me, "train", line_of("MARK_STEP")),
                   (me, "train_step", line_of("MARK_LOSS"))]
          and fwd[0].get("python_stack_thread") == "launching", (frames, fwd[0].get("python_stack_thread")))
sys.exit(1 if fails else 0)
