"""compiled_index.py: torch.compile'd index ops under labelguard (labelguard::check_index,
python/labelguard/_compiled_index.py), real torch on the test double; run by
tests/torch-fake/test_compiled_index.sh under `labelguard run`, one mode per process.

The graphs are CPU graphs (Inductor's C++ backend: its kernels carry the same index asserts as
its Triton ones). For each op family one tiny function is compiled once, then called with good
ids (the clean twin: equal to the uncompiled function) and with one bad id: labelguard's
RuntimeError comes instead of Inductor's own `index out of bounds` check, and the violation event
names the op as `<op> (torch.compile)`, with its position, value, bound, cause, the model's line
(model_line, from the FX node) and the user's line (the call below, in python_stack).

  families   embedding (an nn.Module, id = vocabulary size: vocab_too_small), x[idx] (dynamic=True:
             the bound is a SymInt), gather, index_select, index_add, scatter, scatter_add,
             scatter_reduce, index_put,
             index_copy, take, put, index_reduce (its mean, which Inductor decomposes), one_hot
             (on 2.10 compiled code writes a zero row for a bad label: silent without labelguard),
             multi_margin_loss (its labels), binary_cross_entropy (input and target in [0, 1], NaN:
             compiled code asserts nothing), max_unpool2d (its indices in the output plane);
             index_fill and x[idx] accept -size as eager does
  silent     the ids compiled code accepts without labelguard (an embedding id of -2 on 2.10, an
             index_add index of -1) are reported; the op on the double's CUDA memory keeps
             eager's negative-id rule per kind, and BCE's [0, 1] rule
  step       a compiled training step: one check of the ids in its two graphs (the embedding
             backward's merged into the forward's), eager's gradients, a bad id reported once;
             two gathers of the same ids: one check; a language model's step whose token id
             equal to the vocabulary size is also the loss's target: the checks run in eager's
             order, so the embedding's id is reported (vocab_too_small), as in eager
  mask       LABELGUARD_ACTION=mask: an embedding with padding_idx gives eager's output with the bad
             id replaced by padding_idx (also the op on CUDA memory, and each replay of a captured
             graph); gather has no such id: raised, the event's note says why
  late       LABELGUARD_MODE=async: a compiled embedding (padding_idx) on CUDA tensors (backend
             aot_eager_decomp_partition: Inductor's decompositions, ATen's kernels, no Triton
             needed on the double) with a bad id: its verdict, read after the op, is raised at a
             later CUDA call and reported with the model's line
  plain      without labelguard: compiles the cached graph (TORCHINDUCTOR_CACHE_DIR) and shows
             Inductor's own assert; cached then runs the same graph guarded from that cache
  cached     under labelguard, after plain: the graph from the cache still reports
  ways       fullgraph=True, mode="max-autotune", and a graph break (two graphs, each checked, each
             bad id reported with its own graph's model line)
  perf       (by hand) the check's cost in a compiled step with GPT-2's batch of ids
  gpt2       (by hand; make bench) the same for a whole GPT-2-small training step: 12 layers of
             width 768, 12 heads, 1024 positions, vocabulary 50257, the LM head tied to the
             embedding, cross-entropy on the shifted ids (so both the embedding's check and the
             loss's run); LG_GPT2_BATCH sequences of 1024 tokens (default 8), LG_GPT2_PAIRS timed
             pairs (default 3) after one warm step each, on LG_GPT2_DEVICE (default cpu; cuda on
             a GPU: tests/torch/compiled_gpu.py gpt2)
Prints "ok: ..." per check, "FAIL: ..." on a failure (exit 1).
"""
import glob
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file
from caselib import check, finish  # noqa: E402


def ok(cond, what, detail=""):
    check(what, cond, detail)


def violations():
    out = []
    for path in glob.glob(os.path.join(os.environ.get("LABELGUARD_LOG", "/nonexistent"), "*.jsonl")):
        with open(path) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return [e for e in out if e["event"] == "violation"]


def call_bad(f, args):
    """The user's line: the call of the compiled function. Returns (error text, this line)."""
    line = sys._getframe().f_lineno + 2
    try:
        f(*args)
    except RuntimeError as e:
        return str(e), line
    return None, line


def timed_pairs(fn, run, pairs, warm):
    """fn compiled twice, with labelguard's checks and without them (its switch, as under
    LABELGUARD_COMPILED=off), each warmed `warm` times, then timed interleaved in this process;
    run(compiled, ids) is one step (ids None: the step's own). Returns the medians in seconds
    (unchecked, checked), the ratio (the median of each adjacent pair's: steadier than the
    medians' under a load that changes during the run) and the two steps, {False: unchecked,
    True: checked}, each a function of optional ids."""
    import statistics
    import time
    import types

    # The bootstrap's finder sets the switch when Inductor's decompositions are first imported:
    # at the first compile, unless they are imported now, before the switch is set.
    import torch._inductor.decomposition  # noqa: F401

    core = sys.modules["labelguard._compiled"]
    saved = core._state["on"]
    steps = {}
    for on in (False, True):
        core._state["on"] = on
        # Each its own code object: Dynamo keeps compiled code per code object, and two
        # torch.compile wrappers of one function with the same options share that code.
        code = fn.__code__.replace(co_name="%s_%s" % (fn.__name__, "checked" if on else "unchecked"))
        compiled = torch.compile(types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                                                    fn.__closure__))
        steps[on] = (lambda c: lambda ids=None: run(c, ids))(compiled)
        for _ in range(warm):
            steps[on]()
    core._state["on"] = saved
    times = {True: [], False: []}
    for _ in range(pairs):
        for on in (False, True):
            t0 = time.perf_counter()
            steps[on]()
            times[on].append(time.perf_counter() - t0)
    ratio = statistics.median(c / u for u, c in zip(times[False], times[True]))
    return statistics.median(times[False]), statistics.median(times[True]), ratio, steps


def checks_made(step):
    """How many checks labelguard made during step() (its `watched` counter: a compiled check op
    counts there)."""
    import ctypes

    class Counters(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in ("launches", "watched", "validated", "violations",
                                                    "validate_ns_total")]
    lib = sys.modules["labelguard._compiled"]._library()
    c = Counters()
    lib.labelguard_counters(ctypes.byref(c))
    before = c.watched
    step()
    lib.labelguard_counters(ctypes.byref(c))
    return c.watched - before


def timed_step_checks(name, steps, tokens, vocab):
    """The timed steps are what they claim: the unchecked one makes no check, the checked one
    does, and reports an id equal to the vocabulary size. (The unchecked one is not fed that id:
    Inductor's C++ kernel throws inside its OpenMP region, which ends the process.)"""
    made = (checks_made(steps[False]), checks_made(steps[True]))
    ok(made[0] == 0 and made[1] >= 1, "%s: the unchecked step makes no check, the checked one does" % name,
       "checks made: %s" % (made,))
    bad = tokens.clone()
    bad[0, 5] = vocab
    before = len(violations())
    try:
        steps[True](bad)
        msg = None
    except RuntimeError as e:
        msg = str(e)
    ev = [(e["kernel"], e["cause"]) for e in violations()[before:]]
    ok(msg is not None and ev == [("embedding (torch.compile)", "vocab_too_small")],
       "%s: the timed checked step reports an id equal to the vocabulary size" % name, "%r %s" % ((msg or "")[:200], ev))


def case(name, fn, good, bad, kernel, value, bound, cause, model, dynamic=False, close=False, operand=None,
         **compile_kw):
    """fn compiled (compile_kw: torch.compile's other options); good: its clean twin's arguments,
    bad: one bad id at value; model: the text of the model's line that the report must show;
    close: a float reduction (a loss), compared within rounding (Inductor may sum in another
    order); bound None: a probability of BCE's operand `operand` ("input" or "target")."""
    f = torch.compile(fn, dynamic=dynamic, **compile_kw)
    want = fn(*good)
    got = f(*good)
    ok(torch.allclose(got, want) if close else torch.equal(got, want),
       "%s: the clean twin equals the uncompiled output" % name, "%s != %s" % (got, want))
    before = len(violations())
    msg, line = call_bad(f, bad)
    ok(msg is not None and msg.startswith("labelguard:") and "index out of bounds" not in msg,
       "%s: labelguard's error, before Inductor's own check" % name, repr(msg)[:300])
    ev = violations()[before:]
    ok(len(ev) == 1, "%s: one violation event" % name, str(len(ev)))
    if not ev:
        return
    e = ev[0]
    t = e["target"]
    sample = (e.get("bad", {}).get("samples") or [{}])[0]
    ok(e["kernel"] == kernel + " (torch.compile)", "%s: kernel %s (torch.compile)" % (name, kernel), e["kernel"])
    if bound is None:  # probabilities (BCE): bound [0, 1], bound names the operand
        ok(sample.get("value") == value and t.get("range") == [0, 1] and t.get("operand") == operand,
           "%s: %s = %s, range [0, 1]" % (name, operand, value), json.dumps(t)[:300])
    else:
        ok(sample.get("value") == value and t.get("n_classes") == bound,
           "%s: value %d, bound %d" % (name, value, bound), json.dumps(t)[:300])
    ok(e["cause"] == cause, "%s: cause %s" % (name, cause), e["cause"])
    ok(model in e.get("model_line", "") and "compiled_index.py" in e.get("model_line", ""),
       "%s: the model's line" % name, e.get("model_line"))
    user = [fr for fr in e.get("python_stack", []) if fr["file"].endswith("compiled_index.py") and fr["line"] == line]
    ok(bool(user), "%s: the user's line in the Python stack" % name)
    ok("model line: " in msg and model in msg, "%s: the raised error names the model's line" % name)


class Tiny(torch.nn.Module):
    def __init__(self, vocab=50, padding_idx=None):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(vocab, 8, padding_idx=padding_idx)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        return h * 2


class Projected(torch.nn.Module):
    """An embedding and a linear layer: something for max-autotune to choose a GEMM for."""
    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, width)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        return self.head(h)


class Block(torch.nn.Module):
    """A GPT-2 block: pre-norm causal self-attention and a GELU MLP."""
    def __init__(self, width, heads):
        super().__init__()
        self.width, self.heads = width, heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.fc, self.out = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=2))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(torch.nn.Module):
    """GPT-2 (the defaults: GPT-2-small), the LM head tied to the token embedding; forward returns
    the cross-entropy of the next-token prediction on the shifted tokens."""
    def __init__(self, vocab=50257, positions=1024, width=768, heads=12, layers=12):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, width), torch.nn.Embedding(positions, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)

    def forward(self, tokens):
        h = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            h = blk(h)
        logits = self.ln_f(h) @ self.wte.weight.t()
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 tokens[:, 1:].reshape(-1))


class Broken(torch.nn.Module):
    """Two embeddings with a graph break between them: two graphs, each with its own check."""
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Embedding(50, 8)
        self.second = torch.nn.Embedding(30, 8)

    def forward(self, tokens, tags):
        h = self.first(tokens)
        print("graph break here")  # Dynamo cannot trace print: the graph ends
        g = self.second(tags)
        return h.sum(1) + g.sum(1)


def gather_fn(x, idx):
    return torch.gather(x, 1, idx) + 1


def index_fn(x, idx):
    return x[idx] * 3


def index_select_fn(x, idx):
    return torch.index_select(x, 0, idx) + 1


def index_add_fn(x, idx, src):
    return torch.index_add(x, 0, idx, src)


def scatter_add_fn(x, idx, src):
    return torch.scatter_add(x, 1, idx, src)


def scatter_fn(x, idx):
    return torch.scatter(x, 1, idx, 0.5)


def scatter_reduce_fn(x, idx, src):
    return x.scatter_reduce(1, idx, src, "amax")


def index_put_fn(x, idx, v):
    y = x.clone()
    y[idx] = v
    return y


def index_copy_fn(x, idx, src):
    return torch.index_copy(x, 0, idx, src)


def index_fill_fn(x, idx):
    return torch.index_fill(x, 0, idx, 7.0)


def take_fn(x, idx):
    return torch.take(x, idx) * 2


def put_fn(x, idx, src):
    return x.put(idx, src) * 2


def index_reduce_fn(x, idx, src):
    return x.index_reduce(0, idx, src, "mean")


def one_hot_fn(labels):
    return torch.nn.functional.one_hot(labels, 5) * 2


def multi_margin_fn(x, target):
    return torch.nn.functional.multi_margin_loss(x, target)


def unpool_fn(x, idx):
    return torch.nn.functional.max_unpool2d(x, idx, 2, output_size=(4, 4)) + 1


def bce_fn(p, y):
    return torch.nn.functional.binary_cross_entropy(p, y)


def bce_cases():
    """BCE: Inductor's decomposition asserts nothing (a probability of 1.5 or NaN gives a loss, or
    NaN, silently); eager's kernel asserts each input and target value in [0, 1]."""
    p, y = torch.rand(6, 5), torch.rand(6, 5)

    def bad(t, i, v):
        t = t.clone()
        t.view(-1)[i] = v
        return t

    model = "return torch.nn.functional.binary_cross_entropy(p, y)"
    case("bce input", bce_fn, (p, y), (bad(p, 7, 1.5), y), "binary_cross_entropy", 1.5, None, "no_sigmoid", model,
         close=True, operand="input")
    case("bce NaN", bce_fn, (p, y), (bad(p, 3, float("nan")), y), "binary_cross_entropy", "nan", None, "nan_input",
         model, close=True, operand="input")
    case("bce target", bce_fn, (p, y), (p, bad(y, 10, -0.5)), "binary_cross_entropy", -0.5, None, "other", model,
         close=True, operand="target")
    # The check is below autograd: the compiled step's gradient is eager's.
    pc, pe = p.clone().requires_grad_(), p.clone().requires_grad_()
    torch.compile(bce_fn)(pc, y).backward()
    bce_fn(pe, y).backward()
    ok(torch.allclose(pc.grad, pe.grad), "bce: the compiled gradient equals eager's")


mode = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(6, 50)
if mode == "families":
    with torch.no_grad():
        m = Tiny()
        case("embedding", m, (torch.tensor([[1, 2, 49]]),), (torch.tensor([[1, 50, 3]]),), "embedding", 50, 50,
             "vocab_too_small", "h = self.tok_embeddings(tokens)")
    case("x[idx] dynamic", index_fn, (x, torch.tensor([0, 5, -6])), (x, torch.tensor([0, 6])), "index", 6, 6,
         "index_out_of_range", "return x[idx] * 3", dynamic=True)
    case("gather", gather_fn, (x, torch.tensor([[0], [49], [3], [1], [2], [5]])),
         (x, torch.tensor([[0], [50], [3], [1], [2], [5]])), "gather", 50, 50, "index_out_of_range",
         "return torch.gather(x, 1, idx) + 1")
    case("index_select", index_select_fn, (x, torch.tensor([5, 0])), (x, torch.tensor([6, 0])), "index_select", 6, 6,
         "index_out_of_range", "return torch.index_select(x, 0, idx) + 1")
    case("index_add", index_add_fn, (x, torch.tensor([1, 5]), torch.ones(2, 50)),
         (x, torch.tensor([1, 6]), torch.ones(2, 50)), "index_add", 6, 6, "node_id_out_of_range",
         "return torch.index_add(x, 0, idx, src)")
    case("scatter_add", scatter_add_fn, (x, torch.tensor([[0, 49]] * 6), torch.ones(6, 2)),
         (x, torch.tensor([[0, 50]] * 6), torch.ones(6, 2)), "scatter_add", 50, 50, "node_id_out_of_range",
         "return torch.scatter_add(x, 1, idx, src)")
    case("scatter", scatter_fn, (x, torch.tensor([[3], [49], [0], [1], [2], [5]])),
         (x, torch.tensor([[3], [-1], [0], [1], [2], [5]])), "scatter", -1, 50, "negative_id",
         "return torch.scatter(x, 1, idx, 0.5)")
    case("scatter_reduce", scatter_reduce_fn, (x, torch.tensor([[0, 49]] * 6), torch.ones(6, 2)),
         (x, torch.tensor([[0, 51]] * 6), torch.ones(6, 2)), "scatter_reduce", 51, 50, "node_id_out_of_range",
         "return x.scatter_reduce(1, idx, src, \"amax\")")
    case("index_put", index_put_fn, (x, torch.tensor([0, -6]), torch.zeros(50)), (x, torch.tensor([0, -7]), torch.zeros(50)),
         "index_put", -7, 6, "negative_id", "y[idx] = v")
    case("index_copy", index_copy_fn, (x, torch.tensor([2]), torch.ones(1, 50)), (x, torch.tensor([-1]), torch.ones(1, 50)),
         "index_copy", -1, 6, "negative_id", "return torch.index_copy(x, 0, idx, src)")
    case("index_fill", index_fill_fn, (x, torch.tensor([-6, 1])), (x, torch.tensor([6, 1])), "index_fill", 6, 6,
         "index_out_of_range", "return torch.index_fill(x, 0, idx, 7.0)")
    case("take", take_fn, (x, torch.tensor([0, 299, -300])), (x, torch.tensor([0, 300])), "take", 300, 300,
         "index_out_of_range", "return torch.take(x, idx) * 2")
    case("put", put_fn, (x, torch.tensor([0, 299, -300]), torch.ones(3)), (x, torch.tensor([0, -301]), torch.ones(2)),
         "put", -301, 300, "negative_id", "return x.put(idx, src) * 2")
    case("index_reduce mean", index_reduce_fn, (x, torch.tensor([5, 0]), torch.ones(2, 50)),
         (x, torch.tensor([6, 0]), torch.ones(2, 50)), "index_reduce", 6, 6, "node_id_out_of_range",
         "return x.index_reduce(0, idx, src, \"mean\")")
    case("one_hot", one_hot_fn, (torch.tensor([0, 4, 2]),), (torch.tensor([0, 5, 2]),), "one_hot", 5, 5,
         "num_classes_too_small", "return torch.nn.functional.one_hot(labels, 5) * 2")
    case("multi_margin_loss", multi_margin_fn, (x[:, :5], torch.tensor([0, 4, 2, 1, 3, 0])),
         (x[:, :5], torch.tensor([0, 4, 2, 1, 5, 0])), "multi_margin_loss", 5, 5, "head_too_small",
         "return torch.nn.functional.multi_margin_loss(x, target)", close=True)
    bce_cases()
    # one_hot's and multi_margin_loss's checks wrap Python kernels that every trace runs: an
    # exported program, decomposed, holds no check op (it must load where labelguard is not).
    class Both(torch.nn.Module):
        def forward(self, labels, x, target):
            return one_hot_fn(labels), multi_margin_fn(x, target)

    ep = torch.export.export(Both(), (torch.tensor([0, 4]), x[:2, :5], torch.tensor([0, 4])))
    ok("labelguard" not in str(ep.run_decompositions().graph),
       "export: run_decompositions() leaves no check op (one_hot, multi_margin_loss)")
    plane = torch.arange(16.0).reshape(1, 1, 4, 4)
    pooled, where = torch.nn.functional.max_pool2d(plane, 2, return_indices=True)
    case("max_unpool2d", unpool_fn, (pooled, where), (pooled, where.clone().fill_(16)), "max_unpool2d", 16, 16,
         "index_out_of_range", "return torch.nn.functional.max_unpool2d(x, idx, 2, output_size=(4, 4)) + 1")
elif mode == "silent":
    with torch.no_grad():
        m = Tiny()
        case("embedding -2", m, (torch.tensor([[1, 2, 3]]),), (torch.tensor([[1, -2, 3]]),), "embedding", -2, 50,
             "negative_id", "h = self.tok_embeddings(tokens)")
    case("index_add -1", index_add_fn, (x, torch.tensor([1, 5]), torch.ones(2, 50)),
         (x, torch.tensor([1, -1]), torch.ones(2, 50)), "index_add", -1, 6, "negative_id",
         "return torch.index_add(x, 0, idx, src)")
    # The op on the double's CUDA memory (the host backend reads it): eager's negative-id rule
    # per kind, a raise that leaves no CUDA error pending.
    op = torch.ops.labelguard.check_index
    try:
        op(torch.tensor([1, -2, 3]).cuda(), 50, -1, 16, "")
        ok(False, "CUDA: an embedding id of -2 raises")
    except RuntimeError as e:
        ok("embedding (torch.compile)" in str(e) and "= -2" in str(e), "CUDA: an embedding id of -2 raises", str(e))
    ids = torch.tensor([0, -6, 5]).cuda()
    out = op(ids, 6, -1, 18, "")
    torch.cuda.synchronize()
    ok(torch.equal(out.cpu(), ids.cpu()), "CUDA: x[idx] takes -size as eager does, no CUDA error left pending")
    # BCE's probabilities on CUDA memory (the validator's range rule): NaN raises, [0, 1] passes.
    probs = torch.tensor([0.0, 0.5, 1.0]).cuda()
    out = op(probs, 1, -1, 33, "")
    torch.cuda.synchronize()
    ok(torch.equal(out.cpu(), probs.cpu()), "CUDA: BCE's probabilities in [0, 1] pass")
    try:
        op(torch.tensor([0.5, float("nan")]).cuda(), 1, -1, 34, "")
        ok(False, "CUDA: a NaN BCE target raises")
    except RuntimeError as e:
        ok("binary_cross_entropy (torch.compile)" in str(e) and "target[1] = nan" in str(e),
           "CUDA: a NaN BCE target raises", str(e)[:200])
elif mode == "step":
    from torch._inductor.utils import run_and_get_code

    m = Tiny()
    ref = Tiny()
    ref.load_state_dict(m.state_dict())
    f = torch.compile(m)
    good = torch.tensor([[1, 2, 49]])

    def train(model, tokens):
        model(tokens).pow(2).sum().backward()

    _, codes = run_and_get_code(lambda: train(f, good))
    train(ref, good)
    code = "\n".join(codes)
    calls = code.count("labelguard.check_index.default(")
    ok(len(codes) >= 2 and calls == 1,
       "step: one check of the ids in forward and backward together (the backward's merged)",
       "%d graphs, %d checks" % (len(codes), calls))
    ok(torch.allclose(m.tok_embeddings.weight.grad, ref.tok_embeddings.weight.grad),
       "step: the compiled step's gradients equal eager's")
    # The same ids read by two ops under one rule: one check.
    twice = torch.compile(lambda x, idx: torch.gather(x, 1, idx) + torch.gather(x * 2, 1, idx))
    idx = torch.tensor([[0], [49], [3], [1], [2], [5]])
    _, codes = run_and_get_code(lambda: twice(x, idx))
    n = "\n".join(codes).count("labelguard.check_index.default(")
    ok(n == 1, "step: two gathers of the same ids, one check", "%d checks" % n)
    before = len(violations())
    msg, _ = call_bad(lambda t: train(f, t), (torch.tensor([[1, 50, 3]]),))
    ev = violations()[before:]
    ok(msg is not None and len(ev) == 1 and ev[0]["kernel"] == "embedding (torch.compile)"
       and ev[0]["direction"] == "forward" and "h = self.tok_embeddings(tokens)" in ev[0].get("model_line", ""),
       "step: a bad id reported once, by the forward's check, with the model's line",
       str([(e["kernel"], e["direction"]) for e in ev]))
    # A token id equal to the vocabulary size is an embedding id and, shifted, the loss's target:
    # eager reports the embedding (it runs first); compiled, the checks run in eager's order too,
    # though Inductor's scheduler puts the loss's target copy before the embedding's lookup here.
    lm = GPT2(positions=64, width=64, heads=2, layers=1)
    lm_step = torch.compile(GPT2.forward)
    tokens = torch.randint(0, 50257, (8, 64))
    _, codes = run_and_get_code(lambda: lm_step(lm, tokens).backward())
    order = [("index" if "check_index" in line else "target") for line in codes[0].splitlines()
             if "labelguard.check_" in line and "= torch.ops" in line]
    ok(order[:1] == ["index"] and order[-1:] == ["target"], "step: the checks run in eager's order", str(order))
    bad = tokens.clone()
    bad[0, 5] = 50257
    before = len(violations())
    msg, _ = call_bad(lambda t: lm_step(lm, t).backward(), (bad,))
    ev = [(e["kernel"], e["cause"]) for e in violations()[before:]]
    ok(msg is not None and ev == [("embedding (torch.compile)", "vocab_too_small")],
       "step: an id equal to the vocabulary size, also a target of the loss, is the embedding's, as in eager", str(ev))
elif mode == "ways":
    # The ways of compiling besides the default and dynamic=True (families): fullgraph=True,
    # mode="max-autotune" (on CPU graphs Inductor benchmarks its GEMM choices), and a graph break,
    # whose two graphs are each checked and each report their own model line.
    import torch._dynamo

    with torch.no_grad():
        case("fullgraph", Tiny(), (torch.tensor([[1, 2, 49]]),), (torch.tensor([[1, 50, 3]]),), "embedding", 50, 50,
             "vocab_too_small", "h = self.tok_embeddings(tokens)", fullgraph=True)
        case("max-autotune", Projected(), (torch.tensor([[1, 2, 49]]),), (torch.tensor([[1, 50, 3]]),), "embedding",
             50, 50, "vocab_too_small", "h = self.tok_embeddings(tokens)", close=True, mode="max-autotune")
        torch._dynamo.utils.counters.clear()
        good = (torch.tensor([[1, 2, 49]]), torch.tensor([[0, 29, 3]]))
        case("graph break, second graph", Broken(), good, (good[0], torch.tensor([[0, 30, 3]])), "embedding", 30,
             30, "vocab_too_small", "g = self.second(tags)")
        breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
        ok(breaks >= 1, "graph break: Dynamo broke the graph at the print", str(dict(torch._dynamo.utils.counters)))
        case("graph break, first graph", Broken(), good, (torch.tensor([[1, 50, 3]]), good[1]), "embedding", 50, 50,
             "vocab_too_small", "h = self.first(tokens)")
elif mode == "mask":
    with torch.no_grad():
        m = Tiny(padding_idx=0)
        f = torch.compile(m)
        good = torch.tensor([[1, 2, 3]])
        ok(torch.equal(f(good), m(good)), "mask: the clean twin equals the uncompiled output")
        bad = torch.tensor([[1, 50, 3]])
        got = f(bad)
        ok(torch.equal(got, m(torch.tensor([[1, 0, 3]]))) and bad[0, 1].item() == 50,
           "mask: the bad id reads padding_idx's row, as eager's mask; the caller's ids unchanged")
        ev = violations()
        ok(len(ev) == 1 and ev[0]["outcome"] == "masked", "mask: one violation, masked",
           str([(e["kernel"], e["outcome"]) for e in ev]))
    # CUDA: the op's output is the masked copy; in a captured graph every replay masks.
    op = torch.ops.labelguard.check_index
    badc = torch.tensor([1, 50, 3]).cuda()
    outc = op(badc, 50, 0, 16, "")
    ok(torch.equal(outc.cpu(), torch.tensor([1, 0, 3])) and badc[1].item() == 50,
       "CUDA: the op returns the masked copy, the caller's ids unchanged")
    static = torch.tensor([1, 2, 3]).cuda()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            res = op(static, 50, 0, 16, "model.py:7 in forward: h = self.tok_embeddings(tokens)")
    torch.cuda.synchronize()
    n0 = len(violations())
    static.copy_(badc)
    graph.replay()
    torch.cuda.synchronize()
    ok(torch.equal(res.cpu(), torch.tensor([1, 0, 3])), "graph replay: the op's output is masked")
    torch.empty(1, device="cuda").zero_()  # a hook point: the replay's verdict is collected
    torch.cuda.synchronize()
    vg = violations()[n0:]
    ok(len(vg) == 1 and vg[0].get("graph", {}).get("replay") == 1 and vg[0]["outcome"] == "masked",
       "graph replay: one masked violation with its replay number", str(vg)[:300])
    ok(bool(vg) and vg[0].get("model_line") == "model.py:7 in forward: h = self.tok_embeddings(tokens)",
       "graph replay: the verdict has the captured op's model line", str(vg and vg[0].get("model_line")))
    before = len(violations())
    g = torch.compile(gather_fn)
    g(x, torch.tensor([[0]] * 6))
    msg, _ = call_bad(g, (x, torch.tensor([[50]] * 6)))
    ev = violations()[before:]
    ok(msg is not None and msg.startswith("labelguard:"), "mask: gather has no stand-in id: raised", repr(msg)[:200])
    ok(len(ev) == 1 and "gather has no index that leaves its result unchanged" in ev[0].get("note", ""),
       "mask: the event's note says why gather cannot be masked", str([e.get("note") for e in ev]))
elif mode == "late":
    with torch.no_grad():
        m = Tiny(padding_idx=0).cuda()
        f = torch.compile(m, backend="aot_eager_decomp_partition")
        good = torch.tensor([[1, 2, 49]]).cuda()
        f(good)  # the double runs no embedding kernel: the output says nothing, the verdict does
        torch.cuda.synchronize()
        ok(not violations(), "late: no violation for good ids")
        msg = None
        try:
            f(torch.tensor([[1, 50, 3]]).cuda())
            torch.cuda.synchronize()  # a hook point, if the graph's own launches were not
        except RuntimeError as e:
            msg = str(e)
        ev = violations()
        ok(msg is not None and "labelguard: bad ids" in msg, "late: the verdict raised at a later CUDA call",
           repr(msg)[:200])
        ok(len(ev) == 1 and ev[0]["kernel"] == "embedding (torch.compile)" and ev[0]["cause"] == "vocab_too_small"
           and "verdict_read_at" in ev[0], "late: one violation, read after the op, vocab_too_small",
           str([(e["kernel"], e["cause"], "verdict_read_at" in e) for e in ev]))
        ok(bool(ev) and "h = self.tok_embeddings(tokens)" in ev[0].get("model_line", "")
           and "compiled_index.py" in ev[0].get("model_line", ""), "late: the late verdict has the model's line",
           str(ev and ev[0].get("model_line")))
        try:
            f(good)
            torch.cuda.synchronize()
            msg = None
        except RuntimeError as e:
            msg = str(e)
        ok(msg is None and len(violations()) == 1, "late: the raise left no CUDA error pending", repr(msg)[:200])
elif mode in ("plain", "cached"):
    with torch.no_grad():
        m = Tiny()
        f = torch.compile(m)
        bad = torch.tensor([[1, 50, 3]])
        if mode == "plain":
            f(torch.tensor([[1, 2, 3]]))
            msg, _ = call_bad(f, (bad,))
            ok(msg is not None and "index out of bounds" in msg, "plain: Inductor's own assert, no labelguard",
               repr(msg)[:200])
            files = glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.py"), recursive=True)
            ok(bool(files), "plain: the graph went into the Inductor cache")
        else:
            case("embedding from the cache", m, (torch.tensor([[1, 2, 3]]),), (bad,), "embedding", 50, 50,
                 "vocab_too_small", "h = self.tok_embeddings(tokens)")
elif mode == "perf":
    # The check's cost in a compiled step whose ids are a GPT-2 batch (8 x 1024 tokens, vocabulary
    # 50257), a small model after the embedding so that the check is not lost in a big one.
    m = Projected(50257, 64)
    tokens = torch.randint(0, 50257, (8, 1024))

    def loss_of(model, ids):
        return model(ids).square().mean()

    def run(compiled, ids):
        compiled(m, tokens if ids is None else ids).backward()

    a, b, ratio, steps = timed_pairs(loss_of, run, 40, warm=2)
    print("perf: compiled step, 8 x 1024 ids, vocabulary 50257: %.2f ms unchecked, %.2f ms checked, ratio %.3f"
          % (a * 1e3, b * 1e3, ratio))
    ok(not violations(), "perf: no violation")
    timed_step_checks("perf", steps, tokens, 50257)
elif mode == "gpt2":
    # A whole GPT-2-small step (forward, loss, backward): the checks' share of a real model's
    # step, where `perf` isolates their cost.
    V, T = 50257, 1024
    batch = int(os.environ.get("LG_GPT2_BATCH", "8"))
    pairs = int(os.environ.get("LG_GPT2_PAIRS", "3"))
    device = os.environ.get("LG_GPT2_DEVICE", "cpu")  # cuda: tests/torch/compiled_gpu.py's gpt2 case

    torch.manual_seed(0)
    m = GPT2().to(device)
    tokens = torch.randint(0, V, (batch, T), device=device)

    def run(compiled, ids):
        m.zero_grad(set_to_none=True)
        compiled(m, tokens if ids is None else ids).backward()
        if device != "cpu":
            torch.cuda.synchronize()  # the step's time is its kernels' too

    a, b, ratio, steps = timed_pairs(GPT2.forward, run, pairs, warm=1)
    print("gpt2: compiled GPT-2-small step, %d x %d tokens, %d pairs: %.0f ms unchecked, %.0f ms checked, ratio %.3f"
          % (batch, T, pairs, a * 1e3, b * 1e3, ratio))
    ok(not violations(), "gpt2: no violation")
    timed_step_checks("gpt2", steps, tokens, V)
else:
    print("FAIL: unknown mode " + mode)
    sys.exit(2)
finish()
