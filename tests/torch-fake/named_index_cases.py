"""named_index_cases.py MODE OUT: index_add_ / index_reduce_ (indexFuncSmallIndex /
indexFuncLargeIndex, both index-math widths) and nn.EmbeddingBag forward
(EmbeddingBag_updateOutputKernel_sum_mean / _max) with ids out of range, on real torch on the
test double, judged here. Prints one "ok: ..." or "FAIL: ..." line per check and exits 1 when
any failed. Run by test_named_index.sh under both wheels, one process per mode.

MODE: raise, mask or log (LABELGUARD_ACTION set by the caller to the same), async (raise with
LABELGUARD_MODE=async), or plain (no labelguard). In plain and log mode the bad launches run
and the double emulates their asserts (tests/fakecuda/named_index.c), which poison the
process: there a third argument CASE runs that one bad case only (plain: it must die with the
device-side assert; log: the event first, then the assert), and a run without it the controls.
OUT: the directory the caller gave LABELGUARD_LOG.

Under raise, mask and async every case runs in one process: a bad launch is blocked (or runs
on a sanitized copy), so no assert fires. A case's events are the ones its call added.

The double computes nothing in these kernels, so a check reads what labelguard decoded (the JSONL
event: position, value, bound, count, dtype) against what the tensors are, never an output.

CASES (each bad case under raise, mask, async and log; the controls must give no event)
  ia_small     x[10, 4].index_add_(0, ids, src, alpha=2) with 4 int64 ids, ids[2] = 10:
               indexFuncSmallIndex (32-bit index math); alpha != 1 keeps 2.15's scatter_add
               fast path away; cause node_id_out_of_range; mask falls back to raise
  ia_large     y[4, 10].index_add_(1, ids, src) with 40 int32 ids, ids[17] = -1 (dim 1 is
               never the fast path): indexFuncLargeIndex, bound y.size(1) = 10, cause negative_id
  ia_strided   index_add_ with ids = base[::2], 20 of 40 int64 ids: base[6] = 10 is ids[3],
               reported; base[7] = 99 lies between the viewed elements and must not be
  ia_reduce    x.index_reduce_(0, ids, src, "amax") with ids[1] = 12: ReduceMaximum, same kernels
  ia_index64   an int8 destination of 2^31 + 8 elements (64-bit index math:
               indexFuncLargeIndex<..., unsigned long, ...>, alpha 1 byte) with ids[1] = 2^31 + 8
  eb_sum       nn.EmbeddingBag(10, 4, mode="sum") with offsets, ids[2] = 10, no padding_idx:
               mask falls back to raise, the note says the op has no padding_idx
  eb_pad       nn.EmbeddingBag(10, 4, mode="max", padding_idx=0), 2-D int32 input, ids[2] = 10:
               mask runs the kernel with the bad id replaced by padding_idx 0
  eb_mean_pad  nn.EmbeddingBag(10, 4, mode="mean", padding_idx=1), ids[2] = 10: mask falls back to
               raise all the same, the note says why (the sum/mean backward scatters at the
               caller's ids); async mode checks it synchronously (blocked) for the same reason
  eb_psw       per_sample_weights (mode="sum"), ids[0] = -1, padding_idx=None (-1 is not padding
               then): cause negative_id
  controls     index_add_ with every id in [0, 10) (9 included) on both kernels, index_reduce_,
               EmbeddingBag with ids equal to padding_idx, include_last_offset, int32 ids
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
ONLY = sys.argv[3] if len(sys.argv) > 3 else None  # plain: the one bad case to run
KIND = {"raise": "blocked", "mask": "blocked", "log": "launched", "async": "blocked"}


def bad_case(name, fn, kernel, family, dtype, count, bound, samples, cause, padding=None, mask_runs=False,
             asserts=True, async_masked=False, note_has=""):
    """One bad launch: the exception (raise, mask fallback) or none (log, mask that ran), and its event.
    asserts: the kernel's own assert fires on these ids (EmbeddingBag has no `>= 0` check: a
    negative id reads before the weight, silently)."""
    if MODE in ("plain", "log"):
        # the kernel runs on the bad ids, and its assert (emulated by the double) kills the
        # context: one bad case per process (ONLY), the controls in a run of their own
        if (ONLY != name) if asserts else ONLY:
            return  # a case whose kernel asserts nothing runs with the controls
        _, exc = run(fn)
        if asserts:
            check("%s %s: the kernel ran, and its device-side assert kills the job" % (name, MODE),
                  exc is not None and "device-side assert triggered" in str(exc), exc)
        else:
            check("%s %s: the kernel ran (it asserts nothing on these ids)" % (name, MODE), exc is None, exc)
        if MODE == "plain":
            if asserts:
                finish()
            return
    else:
        _, exc = run(fn)
    V = new_events(OUT)
    tag = "%s %s" % (name, MODE)
    # async: a launch with a padding_idx runs on a sanitized copy (outcome masked) and its verdict
    # is raised at the next synchronizing call; one without falls back to the synchronous check
    masked = (MODE == "mask" and mask_runs) or (MODE == "async" and (mask_runs or async_masked))
    expect_outcome = "masked" if masked else KIND[MODE]
    if MODE == "log":
        pass  # the exception, if any, is the kernel's own assert, checked above
    elif expect_outcome == "blocked" or MODE == "async":
        i, v0 = samples[0]
        check("%s: a labelguard RuntimeError at the call naming %s and ids[%d] = %d" % (tag, kernel, i, v0),
              exc is not None and "labelguard" in str(exc) and kernel in str(exc)
              and "bad id ids[%d] = %d" % (i, v0) in str(exc) and "device-side assert triggered" not in str(exc), exc)
    else:
        check("%s: the call returns (outcome %s)" % (tag, expect_outcome), exc is None, exc)
    check("%s: one violation, kernel %s, family %s" % (tag, kernel, family),
          len(V) == 1 and V[0]["kernel"] == kernel and V[0]["family"] == family,
          [(v["kernel"], v["family"]) for v in V])
    if len(V) != 1:
        if MODE == "log" and asserts:
            sys.exit(1)
        return
    v = V[0]
    t = v["target"]
    check("%s: target {kind ids, dtype %s, count %d, bound %d, padding_idx %s}" % (tag, dtype, count, bound, padding),
          (t["kind"], t["dtype"], t["count"], t["bound"], t["padding_idx"]) == ("ids", dtype, count, bound, padding), t)
    got = [(s["index"], s["value"]) for s in v["bad"]["samples"]]
    check("%s: the offending (position, id) pairs %s, %d bad" % (tag, samples, len(samples)),
          got == samples and v["bad"]["count"] == len(samples), v["bad"])
    check("%s: cause %s" % (tag, cause), v["cause"] == cause, (v["cause"], v["cause_text"]))
    check("%s: outcome %s" % (tag, expect_outcome), v["outcome"] == expect_outcome, (v["outcome"], v.get("note")))
    if MODE == "mask" and not mask_runs:
        check("%s: mask fell back to raise, and the note says why (padding_idx%s)" % (tag, note_has and ", " + note_has),
              "mask fell back to raise" in v.get("note", "") and "padding_idx" in v.get("note", "")
              and note_has in v.get("note", ""), v.get("note"))
    frames = [os.path.basename(f["file"]) for f in v["python_stack"]]
    check("%s: python_stack names named_index_cases.py" % tag, "named_index_cases.py" in frames, frames)
    if MODE == "log" and asserts:
        finish()
    return v


def control(name, fn):
    if ONLY:
        return
    _, exc = run(fn)
    check("%s %s: runs" % (name, MODE), exc is None, exc)
    if MODE != "plain":
        V = new_events(OUT)
        check("%s %s: no violation" % (name, MODE), len(V) == 0, [(v["kernel"], v["bad"]) for v in V])


torch.manual_seed(0)
cuda = torch.device("cuda")

# ---- index_add_ / index_reduce_ ----
x = torch.zeros(10, 4, device=cuda)
src4 = torch.ones(4, 4).to(cuda)
ids = torch.tensor([0, 3, 10, 9])
d_ids = ids.to(cuda)
bad_case("ia_small", lambda: x.index_add_(0, d_ids, src4, alpha=2.0), "indexFuncSmallIndex", "index_add", "int64",
         4, 10, [(2, 10)], "node_id_out_of_range")
check("ia_small %s: the ids still read back (context alive)" % MODE, d_ids.cpu().tolist() == ids.tolist())

y = torch.zeros(4, 10, device=cuda)
ids32 = (torch.arange(40, dtype=torch.int32) * 7) % 10
ids32[17] = -1
src40 = torch.ones(4, 40).to(cuda)
bad_case("ia_large", lambda: y.index_add_(1, ids32.to(cuda), src40), "indexFuncLargeIndex", "index_add", "int32",
         40, 10, [(17, -1)], "negative_id")

base = torch.arange(40) % 10
base[6] = 10   # ids[3] of the view
base[7] = 99   # between viewed elements: never read by the kernel
d_base = base.to(cuda)
view = d_base[::2]
src20 = torch.ones(20, 4).to(cuda)
bad_case("ia_strided", lambda: x.index_add_(0, view, src20, alpha=2.0), "indexFuncLargeIndex", "index_add",
         "int64", 20, 10, [(3, 10)], "node_id_out_of_range")

r_ids = torch.tensor([4, 12, 0, 1]).to(cuda)
bad_case("ia_reduce", lambda: x.index_reduce_(0, r_ids, src4, "amax"), "indexFuncSmallIndex", "index_add", "int64",
         4, 10, [(1, 12)], "node_id_out_of_range")

N64 = 2 ** 31 + 8
try:
    big = torch.empty(N64, dtype=torch.int8, device=cuda)
except RuntimeError as e:  # the double's memory is host memory; say it, do not pass silently
    big = None
    check("ia_index64 %s: a %d-byte destination can be allocated" % (MODE, N64), False, e)
if big is not None:
    b_ids = torch.tensor([5, N64, 0]).to(cuda)
    b_src = torch.ones(3, dtype=torch.int8).to(cuda)
    v = bad_case("ia_index64", lambda: big.index_add_(0, b_ids, b_src, alpha=2), "indexFuncLargeIndex", "index_add",
                 "int64", 3, N64, [(1, N64)], "node_id_out_of_range")
    if v is not None:
        check("ia_index64 %s: the 64-bit index-math instantiation (unsigned long IndexType)" % MODE,
              "19indexFuncLargeIndexIalmLin1ELin1ELin1ELb1E" in v["symbol"], v["symbol"])
    control("ia_index64 control", lambda: big.index_add_(0, torch.tensor([0, N64 - 1]).to(cuda),
                                                           torch.ones(2, dtype=torch.int8).to(cuda), alpha=2))
    del big

control("ia control small (ids 0..9, 9 included)", lambda: x.index_add_(0, torch.tensor([9, 0, 5]).to(cuda),
                                                                         torch.ones(3, 4).to(cuda), alpha=2.0))
control("ia control large int32", lambda: y.index_add_(1, ((torch.arange(40, dtype=torch.int32) * 3) % 10).to(cuda),
                                                       src40))
control("ia control strided (99 outside the view)", lambda: x.index_add_(0, (torch.tensor([1, 99] * 20).to(cuda))[::2],
                                                                         src20, alpha=2.0))
control("ia control index_reduce_", lambda: x.index_reduce_(0, torch.tensor([9, 9, 0, 1]).to(cuda), src4, "prod"))

# ---- nn.EmbeddingBag ----
eb = torch.nn.EmbeddingBag(10, 4, mode="sum").to(cuda)
e_ids = torch.tensor([1, 2, 10, 3, 4])
bad_case("eb_sum", lambda: eb(e_ids.to(cuda), torch.tensor([0, 2]).to(cuda)), "EmbeddingBag_updateOutputKernel_sum_mean",
         "embedding_bag", "int64", 5, 10, [(2, 10)], "vocab_too_small")
ebp = torch.nn.EmbeddingBag(10, 4, mode="max", padding_idx=0).to(cuda)
p_ids = torch.tensor([[1, 2], [10, 0]], dtype=torch.int32)
d_p = p_ids.to(cuda)
bad_case("eb_pad", lambda: ebp(d_p), "EmbeddingBag_updateOutputKernel_max", "embedding_bag", "int32", 4, 10, [(2, 10)],
         "vocab_too_small", padding=0, mask_runs=True)
check("eb_pad %s: the caller's ids are untouched (a copy was masked)" % MODE, d_p.cpu().tolist() == p_ids.tolist())

ebm = torch.nn.EmbeddingBag(10, 4, mode="mean", padding_idx=1).to(cuda)
bad_case("eb_mean_pad", lambda: ebm(torch.tensor([2, 1, 10, 3]).to(cuda), torch.tensor([0, 2]).to(cuda)),
         "EmbeddingBag_updateOutputKernel_sum_mean", "embedding_bag", "int64", 4, 10, [(2, 10)], "vocab_too_small",
         padding=1, note_has="backward")

ebw = torch.nn.EmbeddingBag(10, 4, mode="sum").to(cuda)
w_ids = torch.tensor([-1, 4, 5, 6])
psw = torch.tensor([0.5, 1.0, 2.0, 1.0]).to(cuda)
bad_case("eb_psw", lambda: ebw(w_ids.to(cuda), torch.tensor([0, 1]).to(cuda), per_sample_weights=psw),
         "EmbeddingBag_updateOutputKernel_sum_mean", "embedding_bag", "int64", 4, 10, [(0, -1)], "negative_id")

control("eb control padding ids and 9", lambda: ebp(torch.tensor([[0, 9], [0, 0]], dtype=torch.int32).to(cuda)))
control("eb control include_last_offset", lambda: torch.nn.functional.embedding_bag(
    torch.tensor([1, 9, 3]).to(cuda), eb.weight, torch.tensor([0, 1, 3]).to(cuda), mode="mean",
    include_last_offset=True))
control("eb control per_sample_weights", lambda: ebw(torch.tensor([0, 4, 5, 9]).to(cuda), torch.tensor([0, 1]).to(cuda),
                                                     per_sample_weights=psw))
if MODE != "plain":
    new_events(OUT)
finish()
