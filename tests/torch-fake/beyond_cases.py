"""beyond_cases.py MODE OUT CASE: one real-torch scenario beyond the NLL assert on the test double
(nn.Embedding / x[idx] with an id out of range, nll_loss fed raw logits), in one process, judged here; prints one
"ok: ..." or "FAIL: ..." line per check and exits 1 when any failed. Run by test_beyond.sh
under both wheels, one process per case and mode (a device assert poisons the process).
MODE: plain (no labelguard: the device assert), raise, mask (LABELGUARD_ACTION set by the
caller). OUT: the log directory the caller gave LABELGUARD_LOG (plain: unused).
CASES
  emb_small   nn.Embedding(10, 8) with 4 ids, ids[1] = 10: indexSelectSmallIndex
  emb_large   nn.Embedding(10, 256) with 40 ids, ids[7] = 10: the 2.8+ vectorized gather
  emb_pad     as emb_small with padding_idx=0 (the forward has no padding_idx parameter)
  neg_index   x[idx] on rows of 1 KiB: -1 and -10 are allowed (wrapped), -11 is not
  nll_logits  F.nll_loss on raw logits from two call sites, three times each: one
              nll_input_not_log_probs warning per site; F.nll_loss on log_softmax: none
  smooth_weights  F.cross_entropy(weight=w, label_smoothing=0.1) with a bad label under mask:
              the loss runs masked and announces the gather guard; no device assert. (On a GPU
              the gather of weight[target] that follows is blocked; on the double the
              masked_select before it already fails, its count kernel being a no-op here,
              so the gather itself is tested by tests/e2e/test_opaque.sh.)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, run  # noqa: E402

MODE, OUT, CASE = sys.argv[1], sys.argv[2], sys.argv[3]

torch.manual_seed(0)
if CASE in ("emb_small", "emb_large", "emb_pad"):
    n, dim, pos = (4, 8, 1) if CASE != "emb_large" else (40, 256, 7)
    emb = torch.nn.Embedding(10, dim, padding_idx=0 if CASE == "emb_pad" else None).cuda()
    ids = torch.randint(1, 10, (n,))
    ids[pos] = 10
    d_ids = ids.cuda()
    out, exc = run(lambda: emb(d_ids))  # <- the embedding call
    kernel = "vectorized_gather_kernel" if CASE == "emb_large" else "indexSelectSmallIndex"
    if MODE == "plain":
        check("plain: the job dies with the device-side assert",
              exc is not None and "device-side assert triggered" in str(exc), exc)
        finish()
    check("%s: an exception at the embedding call, not a device assert" % MODE,
          exc is not None and "labelguard" in str(exc) and "device-side assert triggered" not in str(exc), exc)
    check("%s: the message names %s and ids[%d] = 10" % (MODE, kernel, pos),
          exc is not None and kernel in str(exc) and "bad id ids[%d] = 10" % pos in str(exc), exc)
    check("%s: the ids can still be read (context alive)" % MODE, d_ids.cpu().tolist() == ids.tolist())
    good, exc2 = run(lambda: emb(torch.zeros(n, dtype=torch.long).cuda()).cpu())
    check("%s: the next embedding call with good ids runs" % MODE, exc2 is None and good.shape == (n, dim), exc2)
    V = events(OUT)
    check("%s: one violation in the JSONL, kernel %s, family index_select" % (MODE, kernel),
          len(V) == 1 and V[0]["kernel"] == kernel and V[0]["family"] == "index_select",
          [(v["kernel"], v["family"]) for v in V])
    if V:
        v = V[0]
        check("%s: target {dtype int64, count %d, bound 10}" % (MODE, n),
              (v["target"]["dtype"], v["target"]["count"], v["target"]["bound"], v["target"]["kind"]) == ("int64", n, 10, "ids"),
              v["target"])
        check("%s: the offending pair (%d, 10), cause vocab_too_small" % (MODE, pos),
              [(s["index"], s["value"]) for s in v["bad"]["samples"]] == [(pos, 10)] and v["cause"] == "vocab_too_small",
              v["bad"])
        check("%s: outcome blocked" % MODE, v["outcome"] == "blocked", v["outcome"])
        frames = [(os.path.basename(f["file"]), f["function"]) for f in v["python_stack"]]
        check("%s: python_stack names beyond_cases.py" % MODE, any(f == "beyond_cases.py" for f, _ in frames), frames)
        if MODE == "mask":
            check("mask: falls back to raise, and the note says why (no padding_idx parameter)",
                  "mask fell back to raise" in v["note"] and "padding_idx" in v["note"], v["note"])
elif CASE == "neg_index":
    x = torch.arange(10 * 256, dtype=torch.float32).reshape(10, 256).cuda()
    idx = torch.tensor([2, -1, -10] + [0] * 13).cuda()
    out, exc = run(lambda: x[idx].cpu())
    check("%s: x[idx] with -1 and -10 runs" % MODE, exc is None, exc)
    if exc is None:
        check("%s: rows 2, 9, 0" % MODE, out[:3, 0].tolist() == [512.0, 2304.0, 0.0], out[:3, 0].tolist())
    V = events(OUT)
    check("%s: allowed negatives are no violation" % MODE, len(V) == 0, [(v["kernel"], v["bad"]) for v in V])
    bad = torch.tensor([2, -11] + [0] * 14).cuda()
    out, exc = run(lambda: x[bad].cpu())
    if MODE == "plain":
        check("plain: -11 trips the device assert", exc is not None and "device-side assert" in str(exc), exc)
    else:
        V = events(OUT)
        check("%s: -11 is blocked: outside [-10, 10)" % MODE,
              exc is not None and "labelguard" in str(exc) and len(V) == 1 and V[0]["target"]["allow_negative"]
              and [(s["index"], s["value"]) for s in V[0]["bad"]["samples"]] == [(1, -11)], (exc, V))
elif CASE == "nll_logits":
    import torch.nn.functional as F
    logits = torch.randn(16, 5).cuda()
    t = torch.randint(0, 5, (16,)).cuda()
    for _ in range(3):
        F.nll_loss(logits, t)  # <- site one
    for _ in range(3):
        F.nll_loss(logits, t, reduction="sum")  # <- site two
    F.nll_loss(torch.randn(16, 5).log_softmax(1).cuda(), t)  # <- log-probabilities: no warning
    torch.cuda.synchronize()
    V, W = events(OUT), events(OUT, "warning")
    lp = [w for w in W if w["what"] == "nll_input_not_log_probs"]
    lines = [i + 1 for i, l in enumerate(open(__file__)) if l.rstrip().endswith(("site one", "site two"))]
    check("%s: one warning per call site (2)" % MODE, len(lp) == 2, [w["detail"][-160:] for w in lp])
    check("%s: each names its beyond_cases.py line" % MODE,
          sorted(int(w["detail"].split("beyond_cases.py:")[1].split(" ")[0]) for w in lp if "beyond_cases.py:" in w["detail"])
          == lines, [w["detail"] for w in lp])
    check("%s: no violation" % MODE, len(V) == 0, V)
elif CASE == "smooth_weights":
    import torch.nn.functional as F
    x = torch.randn(8, 10).cuda()
    t = torch.randint(0, 10, (8,))
    t[3] = 10
    t = t.cuda()
    w = torch.linspace(0.5, 2.0, 10).cuda()
    out, exc = run(lambda: F.cross_entropy(x, t, weight=w, label_smoothing=0.1).cpu())
    check("%s: no device-side assert" % MODE, exc is None or "device-side assert triggered" not in str(exc), exc)
    V = events(OUT)
    fwd = [v for v in V if v["kernel"] == "nll_loss_forward_reduce_cuda_kernel_2d"]
    check("%s: the loss ran masked and its note announces the gather guard" % MODE,
          len(fwd) == 1 and fwd[0]["outcome"] == "masked" and "label_smoothing" in fwd[0]["note"], V)
    gather = [v for v in V if v["family"] == "gather"]
    check("%s: a gather that follows is blocked, never run on the bad label" % MODE,
          all(v["outcome"] == "blocked" for v in gather), gather)
    check("%s: the context is alive" % MODE, t.cpu()[3].item() == 10)
else:
    print("unknown case " + CASE)
    sys.exit(2)
finish()
