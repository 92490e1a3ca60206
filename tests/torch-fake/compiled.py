"""compiled.py: torch.compile'd losses under labelguard, with real torch on the test double
(tests/torch-fake/test_compiled.sh runs it under `labelguard run`, one mode per process).

The double has no Triton and no GPU, so the compiled graphs are CPU graphs (Inductor's C++
backend, gcc) and their generated code is read with torch._inductor.utils.run_and_get_code;
the op's CUDA path (device memory read by labelguard's host backend, sanitized copies, graph
capture) is exercised by calling the op itself on the double's CUDA tensors.

  plain   without labelguard (not under `labelguard run`): the same graph as raise, compiled
          into the Inductor cache that raise then uses, which must not reuse it unchecked.
  late    not under `labelguard run`: a graph compiled, then labelguard.enable(compiled
          default on), torch._dynamo.reset(): the recompiled graph checks, a bad label raises,
          and the start event claims check_op.
  raise   the bootstrap armed the check (labelguard._compiled loaded at start, torch._inductor
          not imported by it); the compiled cross-entropy calls labelguard::check_target once
          (the backward's check merged into the forward's) before its fused kernel and gives
          eager's loss; a label equal
          to n_classes raises labelguard's RuntimeError (position, value, bound) and is logged
          as family nll_loss; on CUDA the op raises the same way and the context stays usable.
  mask    the compiled loss with a bad label equals eager's loss with that label set to
          ignore_index, the target itself unchanged; on CUDA the op's output is masked, and
          inside a captured CUDA graph each replay masks and reports (graph id, replay).
  step    a compiled training step (Linear, cross-entropy, backward): one check op, the forward
          loss's, in the forward graph and none in the backward; eager's loss and gradients; a
          bad label reported as nll_loss_forward (torch.compile) (test_compiled.sh reads the stderr
          `at` line: the step function in this file).
  off     LABELGUARD_COMPILED=off: no check op in the code, one unchecked_loss_kernel warning.
  perf    the cost of the op per call (CPU and the double's CUDA), for docs/testing.md.
Prints "ok: ..." per check and "FAIL: ..." on a failure (exit 1).
"""
import glob
import json
import os
import re
import sys
import time

failures = []


def ok(cond, what, detail=""):
    if cond:
        print("ok: " + what)
    else:
        failures.append(what)
        print("FAIL: %s %s" % (what, detail))


def events(kind=None):
    out = []
    for path in glob.glob(os.path.join(os.environ["LABELGUARD_LOG"], "*.jsonl")):
        with open(path) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return [e for e in out if kind is None or e["event"] == kind]


mode = sys.argv[1]
booted = "labelguard._compiled" in sys.modules
if mode not in ("plain", "late"):
    ok(booted, "the bootstrap sitecustomize loaded labelguard._compiled at start")
    ok("torch" not in sys.modules and "ctypes" not in sys.modules,
       "and imported neither torch nor ctypes (zero cost until Inductor is imported)")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

torch._inductor.config.compile_threads = 1
OP = "torch.ops.labelguard.check_target.default("


def loss_fn(x, y):
    return F.cross_entropy(x * 2.0, y)


def check_then_kernel(code):
    """In one graph's code: the check op's line, its output buffer and its input (the raw
    target), and the lines of the fused kernels that read the output; None without a check."""
    lines = code.splitlines()
    for i, l in enumerate(lines):
        # The forward loss's check (loss 0); the backward's (loss 1) may come first, saved for later.
        # Its arguments end with the loss kind 0, then Inductor's `after=` (the graph's previous check).
        if OP in l and "=" in l.split(OP)[0] and re.search(r", 0(, after=\w+)?\)$", l.rstrip()):
            out = l.split("=")[0].strip()
            raw = l.split(OP)[1].split(",")[0].strip()
            calls = [j for j, k in enumerate(lines) if "cpp_fused" in k and "(" in k and "def " not in k
                     and "async_compile" not in k and not k.strip().startswith("#")]
            names = {out}  # and its aliases (2.10 writes `buf4 = buf3` before the kernel call)
            for k in lines[i + 1:]:
                m = re.match(r"\s*(\w+) = (\w+)\s*(#.*)?$", k)
                if m and m.group(2) in names:
                    names.add(m.group(1))
            readers = [j for j in calls if any(re.search(r"\b%s\b" % re.escape(n), lines[j]) for n in names)]
            raw_readers = [j for j in calls if re.search(r"\b%s\b" % re.escape(raw), lines[j])]
            return i, out, raw, readers, raw_readers, calls
    return None


torch.manual_seed(0)
x = torch.randn(8, 10)
y = torch.randint(0, 10, (8,))
yc = y.cuda()

if mode == "plain":
    # Without labelguard, into the Inductor cache the raise run then uses: that run must not be
    # handed this graph (labelguard's post-grad pass is in the cache key).
    xg = x.clone().requires_grad_(True)
    out, codes = run_and_get_code(lambda: torch.compile(loss_fn)(xg, y))
    ok(not booted and OP not in "\n".join(codes), "without labelguard: no check op (graph cached)")
elif mode == "late":
    # labelguard.enable() after a graph was compiled: a recompile of the same function (after
    # torch._dynamo.reset()) must not be handed the unchecked graph from Inductor's caches.
    xg = x.clone().requires_grad_(True)
    out, codes = run_and_get_code(lambda: torch.compile(loss_fn)(xg, y))
    ok(OP not in "\n".join(codes), "before enable(): no check op")
    import labelguard
    cfg = labelguard.enable(action="raise", quiet=True)
    ok(cfg.get("compiled") == "on", "enable() armed it, config.compiled on", cfg)
    torch._dynamo.reset()
    out, codes = run_and_get_code(lambda: torch.compile(loss_fn)(xg, y))
    ok(OP in "\n".join(codes), "after enable(): the recompiled graph checks the target")
    bad = y.clone()
    bad[1] = 11
    try:
        torch.compile(loss_fn)(xg, bad)
        ok(False, "after enable(): a bad label raises")
    except RuntimeError as e:
        ok("target[1] = 11" in str(e), "after enable(): a bad label raises labelguard's error", str(e))
    # enable() may start the library (and make the start event) before it installs the op.
    start = events("start")
    ok(start and start[0].get("compiled", "").startswith("check_op"), "after enable(): the start event claims check_op",
       start[0].get("compiled") if start else None)
elif mode == "raise":
    xg = x.clone().requires_grad_(True)
    cf = torch.compile(loss_fn)
    out, codes = run_and_get_code(lambda: cf(xg, y))
    code = "\n".join(codes)
    # The backward loss's check on the same target is merged into the forward's (_merge_checks):
    # one check op, the forward loss's, whose output the backward reads.
    ok(code.count(OP) == 1 and re.search(r"check_target\.default\([^)]*, 0(, after=\w+)?\)", codes[0]),
       "the compiled step checks the target once, in the forward (%d check ops)" % code.count(OP))
    found = check_then_kernel(codes[0])
    ok(found is not None and found[3] and min(found[3]) > found[0] and not found[4],
       "forward: the fused loss kernel reads the check op's output, after it, and never the raw target",
       "(check line, output, raw target, kernels reading it, kernels reading the raw target, kernels: %s)"
       % (found,))
    # Hoisted above every kernel, the check leaves Inductor's fusion as it was: one kernel for
    # log_softmax and NLL, not two split around the extern call.
    ok(found is not None and found[0] < min(found[5]) and len(found[5]) == 1,
       "forward: the check op runs before the one fused log_softmax + NLL kernel", found)
    ok(torch.allclose(out, loss_fn(x, y)), "compiled loss equals eager's on good labels")
    out.backward()
    ok(xg.grad is not None and torch.isfinite(xg.grad).all(), "backward ran")
    bad = y.clone()
    bad[3] = 10
    try:
        cf(xg, bad)
        ok(False, "a label equal to n_classes raises")
    except RuntimeError as e:
        msg = str(e)
        ok(msg.startswith("labelguard: bad labels") and "target[3] = 10" in msg and "[0, 10)" in msg,
           "a label equal to n_classes raises labelguard's RuntimeError", msg)
        ok("cudaErrorNotPermitted" not in msg, "the message does not point at CUDA hints")
    v = events("violation")
    ok(len(v) == 1 and v[0]["family"] == "nll_loss" and v[0]["outcome"] == "blocked"
       and v[0]["bad"]["samples"] == [{"index": 3, "value": 10}] and v[0]["target"]["n_classes"] == 10,
       "one violation event: nll_loss, blocked, sample (3, 10), n_classes 10", v)
    start = events("start")
    ok(start and start[0].get("compiled", "").startswith("check_op"), "the start event names the way: check_op",
       start[0].get("compiled") if start else None)
    ok(start and start[0]["config"].get("compiled") == "on", "config.compiled is on")
    # The op on the double's CUDA memory: the same verdict, and the context stays usable.
    badc = bad.cuda()
    try:
        torch.ops.labelguard.check_target(badc, 10, -100, 0)
        ok(False, "CUDA: the op raises on a bad label")
    except RuntimeError as e:
        ok("target[3] = 10" in str(e), "CUDA: the op raises labelguard's error", str(e))
    good = torch.ops.labelguard.check_target(yc, 10, -100, 0)
    torch.cuda.synchronize()
    ok(torch.equal(good.cpu(), y), "CUDA: the op on good labels returns them, no CUDA error left pending")
elif mode == "mask":
    bad = y.clone()
    bad[2] = 12
    bad[5] = -3
    keep = bad.clone()
    cf = torch.compile(loss_fn)
    with torch.no_grad():
        out, codes = run_and_get_code(lambda: cf(x, bad))
    code = "\n".join(codes)
    ok(OP in code, "the compiled forward checks the target")
    found = check_then_kernel(codes[0])
    ok(found is not None and found[3] and min(found[3]) > found[0] and not found[4],
       "the fused loss kernel reads the check op's output, after it, never the raw target", found)
    masked = bad.clone()
    masked[2] = masked[5] = -100
    ok(torch.allclose(out, loss_fn(x, masked)), "compiled loss with bad labels equals eager's with them masked",
       "%s vs %s" % (out, loss_fn(x, masked)))
    ok(torch.equal(bad, keep), "the caller's target is not written")
    v = events("violation")
    ok(len(v) == 1 and v[0]["outcome"] == "masked" and v[0]["bad"]["count"] == 2, "one masked violation", v)
    # CUDA: the op's output is the masked copy.
    badc = bad.cuda()
    outc = torch.ops.labelguard.check_target(badc, 10, -100, 0)
    ok(torch.equal(outc.cpu(), masked) and torch.equal(badc.cpu(), keep), "CUDA: the op returns the masked copy")
    # A captured graph: every replay checks the labels it reads.
    static = yc.clone()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            res = torch.ops.labelguard.check_target(static, 10, -100, 0)
    torch.cuda.synchronize()
    n0 = len(events("violation"))
    static.copy_(badc)
    g.replay()
    torch.cuda.synchronize()
    ok(torch.equal(res.cpu(), masked), "graph replay: the op's output is masked")
    static.copy_(yc)
    g.replay()
    torch.cuda.synchronize()
    ok(torch.equal(res.cpu(), y), "graph replay with good labels: passed through")
    torch.empty(1, device="cuda").zero_()  # a hook point: the replays' verdicts are collected
    torch.cuda.synchronize()
    vg = events("violation")[n0:]
    ok(len(vg) == 1 and vg[0].get("graph", {}).get("replay") == 1 and vg[0]["outcome"] == "masked",
       "one violation for the bad replay, with its graph replay number", vg)
elif mode == "step":
    # A compiled training step: the backward loss's check on the same target lands in the forward
    # graph (saved for the backward) and is merged into the forward's, so the step checks the
    # target once and names the forward loss; the stderr `at` line (test_compiled.sh reads it) is
    # the step's line, not the check op's or Inductor's code.
    torch.manual_seed(1)
    lin = torch.nn.Linear(6, 10)
    ref = torch.nn.Linear(6, 10)
    ref.load_state_dict(lin.state_dict())
    xs = torch.randn(8, 6)

    def step(x, y):
        loss = F.cross_entropy(lin(x), y)
        loss.backward()
        return loss

    cs = torch.compile(step)
    out, codes = run_and_get_code(lambda: cs(xs, y))
    fwd, bwd = codes[0], "\n".join(codes[1:])
    losses = re.findall(r"check_target\.default\([^)]*, (\d)(?:, after=\w+)?\)", fwd)
    ok(losses == ["0"], "forward graph: one check op on the target, the forward loss's (losses %s)" % losses, fwd[-3000:])
    ok(OP not in bwd, "backward graph: no check op of its own (it reads the checked copy saved by the forward)")
    eager = F.cross_entropy(ref(xs), y)
    eager.backward()
    ok(torch.allclose(out, eager) and torch.allclose(lin.weight.grad, ref.weight.grad, atol=1e-6),
       "the compiled step's loss and gradients equal eager's")
    bad = y.clone()
    bad[3] = 10
    try:
        cs(xs, bad)
        ok(False, "a bad label in the step raises")
    except RuntimeError as e:
        ok("nll_loss_forward (torch.compile)" in str(e) and "target[3] = 10" in str(e),
           "a bad label raises, naming nll_loss_forward (torch.compile)", str(e))
    v = events("violation")
    ok(len(v) == 1 and v[0]["kernel"] == "nll_loss_forward (torch.compile)" and v[0]["direction"] == "forward",
       "one violation: nll_loss_forward (torch.compile), direction forward",
       [(e["kernel"], e["direction"]) for e in v])
elif mode == "off":
    cf = torch.compile(loss_fn)
    with torch.no_grad():
        out, codes = run_and_get_code(lambda: cf(x, y))
        cf(x, y)
    ok(OP not in "\n".join(codes), "off: no check op in the compiled code")
    w = [e for e in events("warning") if e["what"] == "unchecked_loss_kernel"]
    ok(len(w) == 1 and "LABELGUARD_COMPILED=off" in w[0]["detail"], "off: one unchecked_loss_kernel warning", w)
    start = events("start")
    ok(start and start[0].get("compiled", "").startswith("off"), "off: the start event says so")
elif mode == "perf":
    import torch._inductor.decomposition  # noqa: F401  (what arms the check: the op is registered)
    n = int(os.environ.get("LG_PERF_N", "2000"))
    for dev, t in (("cpu", torch.randint(0, 32000, (8192,))), ("cuda (double)", torch.randint(0, 32000, (8192,)).cuda())):
        for _ in range(20):
            torch.ops.labelguard.check_target(t, 32000, -100, 0)
        t0 = time.perf_counter()
        for _ in range(n):
            torch.ops.labelguard.check_target(t, 32000, -100, 0)
        per = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for _ in range(n):
            t.clone()
        clone = (time.perf_counter() - t0) / n
        print("perf: %s, 8192 int64 labels: check op %.1f us per call (a plain clone: %.1f us)"
              % (dev, per * 1e6, clone * 1e6))
    # Per training step (CPU graph, B = 256 tokens, C = 1000): the check op's two calls
    # (forward, backward) against the same graph without them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    lgc = sys.modules["labelguard._compiled"]  # the bootstrap loaded it by path
    xs = torch.randn(256, 1000, requires_grad=True)
    ys = torch.randint(0, 1000, (256,))
    steps = {}
    for on in (True, False):
        lgc._state["on"] = on
        torch._dynamo.reset()
        steps[on] = torch.compile(loss_fn)
        for _ in range(5):
            steps[on](xs, ys).backward()
    lgc._state["on"] = True
    times = {True: [], False: []}
    for _ in range(5):  # interleaved: the machine's load drifts
        for on in (True, False):
            t0 = time.perf_counter()
            for _ in range(40):
                steps[on](xs, ys).backward()
            times[on].append((time.perf_counter() - t0) / 40 * 1e6)
    per_step = {on: sorted(v)[len(v) // 2] for on, v in times.items()}
    print("perf: compiled training step (CPU, B 256, C 1000): %.0f us with the check op, %.0f us without "
          "(+%.0f us per step, 2 checks; medians of 5 interleaved runs of 40 steps)"
          % (per_step[True], per_step[False], per_step[True] - per_step[False]))
    # Memory: B x C buffers in the compiled training step's forward code, the check op's way
    # (Inductor's fused kernels) against way (a), Inductor made to call ATen's NLL kernels.
    B, C = 64, 1000
    xb = torch.randn(B, C, requires_grad=True)
    yb = torch.randint(0, C, (B,))

    def count_bxc():
        torch._dynamo.reset()
        _, codes = run_and_get_code(lambda: torch.compile(loss_fn)(xb, yb).backward())
        fwd = codes[0]
        if os.environ.get("LG_PERF_DUMP"):
            with open(os.environ["LG_PERF_DUMP"] + str(len(dumps)), "w") as f:
                f.write(fwd)
        dumps.append(1)
        return (len(re.findall(r"empty_strided_\w+\(\(%d, %d\)" % (B, C), fwd)),
                len(re.findall(r"aten\.nll_loss_forward(\.default)?\(", fwd)))
    dumps = []
    # Caches off: AOTAutograd's key is the graph before decomposition, so it would hand back the
    # first way's code for the second.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    b = count_bxc()
    from torch._inductor import decomposition as d
    for k in [k for k in d.decompositions
              if getattr(k, "overloadpacket", None) in (torch.ops.aten.nll_loss_forward, torch.ops.aten.nll_loss_backward)]:
        d.decompositions.pop(k)
    d.fast_random_decomps.cache_clear()
    a = count_bxc()
    print("perf: compiled training step, forward graph: check op: %d B x C buffers (%d ATen NLL calls); "
          "way (a), ATen's NLL: %d B x C buffers (%d ATen NLL calls)" % (b[0], b[1], a[0], a[1]))
else:
    sys.exit("usage: compiled.py plain|late|raise|mask|step|off|perf")
sys.exit(1 if failures else 0)
