"""launch_site.py: where a late verdict's report points. Run by tests/torch-fake/test_launch_site.sh
through build/torch-python (real torch on the runtime test double, each kernel and host function
taking FAKECUDA_ASYNC_US, so that verdicts arrive steps after their launch, as on a busy GPU),
with labelguard preloaded (raise, async mode or a CUDA graph replay).

    build/torch-python tests/torch-fake/launch_site.py MODE OUT CASE

CASE:
  ce         a training loop around F.cross_entropy; batch BAD has one label = n_classes.
  embedding  the same loop around an nn.Embedding(padding_idx=0) fed an id = the vocabulary.
  graph      a step captured with torch.cuda.graph, replayed with batch BAD copied in.
Each judges the log: the bad batch gives exactly one violation and one RuntimeError; its
python_stack's innermost user frame is the line that launched the kernel (MARK_LOSS, MARK_EMB or
MARK_CAPTURE), never the optimizer's step or the loop; verdict_read_at says where the verdict was
read (a later line of this file), except for the embedding, whose forward is checked before it
runs in async mode too (no padding_idx can stand in for an id in index_select). The driver checks the stderr block's "launched at FILE:LINE
in FUNC; found ..." line. Prints "ok: ..." / "FAIL: ..." per check; exits 1 on a failed check.
"""
import glob
import json
import os
import sys

import torch
import torch.nn.functional as F

mode, out, case = sys.argv[1], sys.argv[2], sys.argv[3]
src = open(__file__).read().splitlines()
fails = 0
N, C, BAD, STEPS = 8, 5, 2, 5


def line_of(mark):
    return next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# " + mark))


def check(what, cond, detail=""):
    global fails
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "  [%s]" % str(detail)[:900]), flush=True)
    fails += 0 if cond else 1


def labels(step):
    y = torch.arange(N) % C
    if step == BAD:
        y[3] = C
    return y


torch.manual_seed(0)
errors = []


def run_loss_loop():
    # Log-probabilities made on the CPU: under the double only the checked kernels compute.
    logp = torch.log_softmax(torch.randn(N, C), 1).cuda().requires_grad_(True)
    opt = torch.optim.SGD([logp], lr=0.1)

    def train_step(y):
        loss = F.nll_loss(logp, y)  # MARK_LOSS
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()  # MARK_OPT

    for step in range(STEPS):
        try:
            train_step(labels(step).cuda())
        except RuntimeError as e:
            errors.append((step, str(e)))
    try:
        torch.cuda.synchronize()  # MARK_SYNC
    except RuntimeError as e:
        errors.append(("sync", str(e)))


class Model(torch.nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim, padding_idx=0)

    def forward(self, ids):
        return self.emb(ids)  # MARK_EMB


def run_embedding_loop():
    V = 16
    model = Model(V, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        ids = (torch.arange(N) % (V - 1)) + 1
        if step == BAD:
            ids[5] = V
        try:
            h = model(ids.cuda())
            opt.zero_grad(set_to_none=True)
            h.sum().backward()
            opt.step()  # MARK_EMB_OPT
        except RuntimeError as e:
            errors.append((step, str(e)))
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:
        errors.append(("sync", str(e)))


def run_graph():
    logp = torch.log_softmax(torch.randn(N, C), 1).cuda().requires_grad_(True)
    opt = torch.optim.SGD([logp], lr=0.0)
    static_y = labels(0).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            F.nll_loss(logp, static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)

    def captured_step():
        loss = F.nll_loss(logp, static_y)  # MARK_CAPTURE
        loss.backward()
        opt.step()
        return loss

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = captured_step()
    for step in range(STEPS):
        static_y.copy_(labels(step).cuda())
        try:
            g.replay()
            static_loss.item()  # MARK_ITEM
        except RuntimeError as e:
            errors.append((step, str(e)))


{"ce": run_loss_loop, "embedding": run_embedding_loop, "graph": run_graph}[case]()

mine = os.path.abspath(__file__)


def user_frame(stack):
    """The innermost frame in this file, as (line, function); None when there is none."""
    for f in reversed(stack or []):
        if f.get("file") and os.path.abspath(f["file"]) == mine:
            return f["line"], f["function"]
    return None


ev = []
for path in glob.glob(os.path.join(out, "*.jsonl")):
    with open(path) as fh:
        ev += [json.loads(l) for l in fh if l.strip()]
viol = [e for e in ev if e.get("event") == "violation"]
check("%s: one violation for the bad batch" % case, len(viol) == 1, [(v.get("kernel"), v.get("outcome")) for v in viol])
check("%s: one RuntimeError for the bad batch" % case, len(errors) == 1, errors)
if errors:
    check("%s: the error is labelguard's" % case, "labelguard" in errors[0][1], errors[0][1])
want = {"ce": ("MARK_LOSS", "train_step"), "embedding": ("MARK_EMB", "forward"),
        "graph": ("MARK_CAPTURE", "captured_step")}[case]
if viol:
    v = viol[0]
    site = user_frame(v.get("python_stack"))
    check("%s: python_stack names the launching line" % case, site == (line_of(want[0]), want[1]),
          (site, v.get("python_stack")))
    read = v.get("verdict_read_at")
    if case == "embedding":
        # An embedding's forward (index_select) has no padding_idx to put in place of a bad id:
        # it is checked before it runs in async mode too, and blocked there.
        check("%s: checked before the launch: blocked, no verdict_read_at" % case,
              v.get("outcome") == "blocked" and read is None, (v.get("outcome"), read))
    else:
        check("%s: verdict_read_at is there, with its own stacks" % case,
              isinstance(read, dict) and "python_stack" in read and "native_stack" in read and read.get("when"), read)
    if isinstance(read, dict):
        at = user_frame(read.get("python_stack"))
        check("%s: the verdict was read at a later line" % case, at is not None and at[0] > line_of(want[0]), at)
    check("%s: native_stack names the launch's caller" % case, len(v.get("native_stack") or []) >= 1,
          v.get("native_stack"))
sys.exit(1 if fails else 0)
