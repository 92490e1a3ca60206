#!/usr/bin/env python3
"""gpu_path.py: the GPU-path checks of labelguard in real PyTorch, one PASS/FAIL/SKIP line each.

Called by scripts/gpu-check.sh (part `gpu-path`) on a GPU:
  gpu_path.py --lib build/liblabelguard.so --out parts/gpu-path.data.json --workdir DIR [-j 8]
and GPU-free by tests/torch/test_gpu_check.sh, on real torch on the runtime test double:
  gpu_path.py --fake --python build/torch-python --lib build/liblabelguard.so --workdir DIR
where only the cases that the double can show run (the others print SKIP with the reason).

Each case is this file run again as a child (`--child NAME`) in its own process group with a
timeout, because a device-side assert or a crash must not take the runner with it. The child
prints one JSON object (its observations) as its last stdout line; the parent reads it and the
child's JSONL log and judges. The cases are what a GPU makes the normal path, where the test
double (which finishes each kernel inside its launch) cannot answer for it:
  start_event     the start event: backend gpu, the validator image, host_fallbacks 0 at exit
  start_newest    the same on a second torch (LG_GPU_NEWEST_PYTHON), SKIP where there is none
  graph_reuse     graphs captured, replayed and destroyed in turn (their handles are reused):
                  good replays never raise, and a later graph's bad replay raises our text
  replay_text     `g.replay(); optimizer.step()` with a bad label in the static target: the
                  error names the label (not a bare "operation not permitted"), sync and async
  index_cost      an embedding + x[idx] loop: microseconds per iteration without the library,
                  with it in sync mode and in async mode (figures, no event expected)
  bce_cost        F.binary_cross_entropy on 16x1x512x512 float32 (a segmentation batch), 20 steps
                  after warm-up: ms per call without the library, with it in sync and async mode,
                  and the range check on the GPU backend (its validate_ns_total per check well
                  under a host copy-and-scan of 32 MB; backend gpu, host_fallbacks 0)
  bce_graph       F.binary_cross_entropy captured with torch.cuda.graph: no capture_unchecked
                  warning (each operand's range check is a validator kernel node), good replays
                  raise nothing, and a replay with target[7] = 1.5 is reported (graph id, the
                  note "verdict late: the captured launch replayed ..."); the BCE kernel's own
                  device assert may fire in that replay (the launch keeps its operands)
  hooks_cupti     LABELGUARD_HOOKS=cupti on the installed driver catches the bad label
  profiler        torch.profiler under the default preload: kernels in the trace, and the bad
                  label after it still caught
  async_exit      async mode, a bad last step, exit without a sync: the violation is logged and
                  the exit is clean
  ring_pressure   async ring pressure with a late bad batch: async mode (raise), the device held
                  back (torch.cuda._sleep), 200 good F.cross_entropy launches without a sync,
                  then one bad batch and 100 more good ones, then a sync: the bad batch's
                  violation is logged with its pair, its error is raised, no verdict_lost (a
                  verdict ring holds 64 runs; the double finishes each kernel at once: SKIP there)
  mask_full       mask with the GPU memory nearly all taken: outcome masked (not blocked)
  capture_logits  one thread captures in global mode while another runs an eager NLL on raw
                  logits (the raw-logits check copies and syncs): the capture stays valid
  late_enable     labelguard.enable() in a process whose CUDA context is running (the dlopen of
                  the library into a live torch process, as `attach` does), then a bad label
  attach          `labelguard attach PID` into a running torch process (needs gdb)
  enable_early    `import torch; labelguard.enable()` before any CUDA work (a notebook's order):
                  enable starts no CUDA (torch.cuda.is_initialized() stays False), and the start
                  at the first CUDA work picks backend gpu; the bad label is caught
  enable_fork     the same process forks before its first CUDA work: the child can use CUDA
                  (a parent that had initialised CUDA leaves its child "initialization error")
                  and its bad label is caught by its own labelguard
  attach_busy     `labelguard attach` LG_GPU_ATTACHES times (default 3) into a torch process busy
                  with launches and syncs: every attach returns, the loop keeps running, the next
                  bad label is caught (needs gdb)
  profiler_enable torch.profiler after labelguard.enable(): kernels in the trace (CUPTI's slot is
                  left to Kineto: hooks ["interpose"]), and the bad label after it still caught
  graph_into      capture-to-graph losses against eager: two graphs, each a torch.cond whose branch
                  is an NLL forward, captured under torch.cuda.graph (torch 2.15+ captures each
                  branch into a conditional body with cudaStreamBeginCaptureToGraph; SKIP with the
                  reason where torch cannot), replayed on two streams alternately, mask: every
                  loss equals the eager one of its batch (never one from the other graph's labels
                  or scratch), and the bad batch is reported or said unreportable
                  (graph_checks_unreported), never silent
  split_launch    a gather over 2^31 + 4096 ids, which TensorIterator splits into 32-bit launches,
                  with one bad id in the last part: caught; prints the sample index it reports
  threads_mask    two threads on the default stream (shared, as in PyTorch), mask mode, one bad
                  label per step: every loss is the one of its own thread's labels (the bad one
                  ignored), never one computed from the other thread's sanitized copy
  index_put_acc   x.index_put_((idx,), v, accumulate=True) with an id past the rows: its
                  torch._assert_async condition (computed on the GPU) is read and the launch
                  blocked; the error names index_put_, nothing was written, the context lives on
                  (the double computes no reductions: SKIP there; tests/e2e/test_assert_async.sh)
  assert_async    torch._assert_async(cond) with a false condition made on the CPU: blocked
                  before its kernel asserts, named torch._assert_async, from the user's line; a
                  true one runs, and the context lives on (also on the double)
  sampling        torch.multinomial in float16 with a NaN: with replacement and 4 samples blocked
                  before renormRowsL1 (cause fp16_overflow, probs[1, 3]); one sample through
                  torch._assert_async (computed on the GPU), named multinomial with the sampling
                  cause; Categorical(probs).sample((4,)) with a row of negatives blocked
                  (negative_probs); clean calls run and the context lives on. On the double only
                  the with-replacement call and the clean one are judged (it computes no
                  reductions nor divisions: tests/torch-fake/test_sampling.sh)
  unpool          F.max_unpool2d with an index one past its 4 x 4 output plane: blocked before
                  max_unpooling2d_forward_kernel asserts (ids[6] = 16, bound 16); valid indices
                  then run and the context lives on (also on the double)
  bernoulli       torch.bernoulli(p) with p[17] = 1.5: blocked before kernelPointwiseApply2 asserts
                  `0 <= p && p <= 1` (no_sigmoid); a float16 p (converted to float32 by a copy
                  kernel the double does not run) and a valid p then run, the context alive
  device_assert   torch.poisson(rates) with one rate -1, LABELGUARD_LAUNCH_SITES=all: an assert
                  labelguard does not check before launch (`lambda >= 0`) fires; torch raises
                  CUDA's own error and the log has one device_assert event whose candidates (this
                  thread's launches) hold the poisson kernel with its Python line (the double does
                  not run torch's poisson: SKIP there; tests/torch-fake/test_device_assert.sh)
  compiled_assert torch.compile'd embedding with LABELGUARD_COMPILED=off and an id equal to the
                  vocabulary size: Inductor's own Triton assert fires; the device_assert event
                  lists that kernel (generated_kernels: its file in the cache, line, text, ATen
                  op), and, CUPTI seeing Triton's driver launches (LABELGUARD_HOOKS=cupti), has
                  that kernel among the candidates, marked generated (SKIP on the double: no
                  Triton; tests/torch-fake/test_generated.sh, tests/e2e/test_driver_launch.sh)
  compiled        torch.compile (Triton) with the check op: default, reduce-overhead, mask, off
                  (tests/torch/compiled_gpu.py; LG_GPU_COMPILED_CASES=...,bench adds its benchmark,
                  ...,gpt2 a compiled GPT-2-small step with and without the checks)
  embedding_async an nn.Embedding forward + backward with a bad id, async mode (raise), under
                  compute-sanitizer memcheck, the caching allocator off: blocked at the
                  embedding call with our text, no gradient written, no invalid access
  embedding_graph the same step captured with torch.cuda.graph (sync mode), replayed with the bad
                  id: the forward's own assert (or our error), never an invalid access by the
                  backward; the violation's outcome is launched (it read its own ids)
Exit status 0 when no case failed (SKIP is not a failure), 1 otherwise.
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
N, C = 8, 5
BAD_AT, BAD_VALUE = 7, 7
EMB_BAD = 1000000


# ---------------------------------------------------------------------------------- children
THREADS_N, THREADS_C = 4096, 10
def _emit(**kw):
    print(json.dumps(kw), flush=True)


def _nll_inputs(torch):
    """Log-probabilities made on the CPU (under the double only the loss kernels compute) and
    labels with one bad value, both copied to the GPU."""
    torch.manual_seed(0)
    logp_cpu = torch.log_softmax(torch.randn(N, C), dim=1)
    y_cpu = torch.arange(N) % C
    y_cpu[BAD_AT] = BAD_VALUE
    return logp_cpu, y_cpu


def _try(fn):
    try:
        v = fn()
        return {"raised": False, "value": v}
    except Exception as e:  # noqa: BLE001  (what was raised is the observation)
        return {"raised": True, "type": type(e).__name__, "text": str(e)[:2000]}


def child_bad_label(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp, y = logp_cpu.cuda(), y_cpu.cuda()
    bad = _try(lambda: F.nll_loss(logp, y).item())
    good = _try(lambda: F.nll_loss(logp, (torch.arange(N) % C).cuda()).item())
    _emit(bad=bad, good=good, torch=torch.__version__)


def child_graph_reuse(torch, F):
    raised_good = []
    for i in range(6):
        n = N * (1 + i % 3)
        logp = torch.log_softmax(torch.randn(n, C), dim=1).cuda()
        y = (torch.arange(n) % C).cuda()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            F.nll_loss(logp, y)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            if i % 2 == 0:
                out = F.nll_loss(logp, y)
            else:
                out = logp * 2.0  # a graph with no loss at all
        for _ in range(3):
            r = _try(lambda: (g.replay(), out.sum().item())[1])
            if r["raised"]:
                raised_good.append({"graph": i, **r})
        del g
        torch.cuda.synchronize()
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp, y = logp_cpu.cuda(), (torch.arange(N) % C).cuda()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = F.nll_loss(logp, y)
    y.copy_(y_cpu.cuda())
    bad = _try(lambda: (g.replay(), out.item())[1])
    _emit(raised_good=raised_good, bad=bad)


def child_replay_text(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    w = logp_cpu.cuda().requires_grad_(True)
    opt = torch.optim.SGD([w], lr=0.0)
    static_y = (torch.arange(N) % C).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            opt.zero_grad(set_to_none=False)
            F.nll_loss(w, static_y).backward()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=False)
    with torch.cuda.graph(g):
        loss = F.nll_loss(w, static_y)
        loss.backward()
    steps = []
    for step in range(4):
        if step == 2:
            static_y.copy_(y_cpu.cuda())
        r = _try(lambda: (g.replay(), opt.step(), loss.item())[2])
        steps.append({"step": step, **r})
        if r["raised"]:
            break
    _emit(steps=steps)


def child_index_cost(torch, F):
    iters = int(os.environ.get("LG_GPU_PATH_ITERS", "2000"))
    emb = torch.nn.Embedding(1000, 64).cuda()
    ids = torch.randint(0, 1000, (256,)).cuda()
    x = torch.randn(1000, 64).cuda()
    rows = torch.randint(0, 1000, (256,)).cuda()
    for _ in range(20):
        emb(ids), x[rows]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        emb(ids)
        x[rows]
    torch.cuda.synchronize()
    _emit(us_per_iter=(time.perf_counter() - t0) * 1e6 / iters, iters=iters)


def child_bce_cost(torch, F):
    iters = int(os.environ.get("LG_GPU_PATH_ITERS", "20"))
    shape = (16, 1, 512, 512) if os.environ.get("LG_GPU_PATH_BCE_SMALL") is None else (2, 1, 64, 64)
    p = torch.sigmoid(torch.randn(shape)).cuda()
    y = torch.randint(0, 2, shape).float().cuda()
    for _ in range(3):
        F.binary_cross_entropy(p, y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        F.binary_cross_entropy(p, y)
    torch.cuda.synchronize()
    _emit(ms_per_call=(time.perf_counter() - t0) * 1e3 / iters, iters=iters, elements=p.numel())


def child_bce_graph(torch, F):
    shape = (4, 1, 64, 64)
    p = torch.sigmoid(torch.randn(shape)).cuda()
    y = torch.randint(0, 2, shape).float().cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        F.binary_cross_entropy(p, y)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = F.binary_cross_entropy(p, y)
    good = [_try(lambda: (g.replay(), out.item())[1]) for _ in range(3)]
    bad_y = y.cpu()
    bad_y.view(-1)[7] = 1.5
    y.copy_(bad_y.cuda())
    bad = _try(lambda: (g.replay(), torch.cuda.synchronize(), out.item())[2])
    _emit(good=good, bad=bad)


def child_profiler(torch, F):
    from torch.profiler import ProfilerActivity, profile
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    ok = (torch.arange(N) % C).cuda()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            F.nll_loss(logp, ok).item()
            (logp @ logp.t()).sum().item()
    kernels = [e.name for e in prof.events() if getattr(e, "device_type", None) is not None
               and str(e.device_type).endswith("CUDA")]
    bad = _try(lambda: F.nll_loss(logp, y_cpu.cuda()).item())
    _emit(cuda_events=len(kernels), names=sorted(set(kernels))[:8], bad=bad)


def child_async_exit(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    ok = (torch.arange(N) % C).cuda()
    for _ in range(3):
        F.nll_loss(logp, ok).item()
    F.nll_loss(logp, y_cpu.cuda())  # the bad last step: no .item(), no synchronize
    _emit(launched_last=True)


RING_BEFORE, RING_AFTER = 200, 100
RING_LAG_CYCLES = 1 << 30  # about half a second of a GPU's clock: the host runs that far ahead


def child_ring_pressure(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    logits = logp_cpu.cuda()
    good, bad = (torch.arange(N) % C).cuda(), y_cpu.cuda()
    F.cross_entropy(logits, good).item()  # warm-up: the kernels classified, the scratch made
    lag = torch.cuda.Event()
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(RING_LAG_CYCLES)
    else:  # no _sleep in this torch: a chain of large matmuls holds the device instead
        a = torch.randn(4096, 4096, device="cuda")
        for _ in range(40):
            a = torch.tanh(a @ a)
    lag.record()
    raised, raised_at = None, None
    for k in range(RING_BEFORE + 1 + RING_AFTER):
        r = _try(lambda: (F.cross_entropy(logits, bad if k == RING_BEFORE else good), None)[1])
        if r["raised"]:
            raised, raised_at = r, k
            break
    behind = None
    if raised is None:  # still held back after the whole loop? then the pressure was real
        r = _try(lambda: not lag.query())
        raised, raised_at, behind = (r, "query", None) if r["raised"] else (None, None, r["value"])
    if raised is None:
        r = _try(torch.cuda.synchronize)
        if r["raised"]:
            raised, raised_at = r, "sync"
    _emit(raised=raised, raised_at=raised_at, behind=behind, bad_at=RING_BEFORE)


def child_mask_full(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp, y = logp_cpu.cuda(), y_cpu.cuda()
    F.nll_loss(logp, (torch.arange(N) % C).cuda()).item()  # warm the allocator's small blocks
    hog, size = [], 1 << 36
    while size >= (1 << 20):  # take what is free, in halving chunks, down to 1 MiB
        try:
            hog.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        except RuntimeError:
            size //= 2
    free = torch.cuda.mem_get_info()[0]
    r = _try(lambda: F.nll_loss(logp, y).item())
    ref = y_cpu.clone()
    ref[ref >= C] = -100
    _emit(free_bytes=free, held=sum(h.numel() for h in hog), result=r,
          reference=F.nll_loss(logp_cpu, ref).item())


def child_capture_logits(torch, F):
    import threading
    raw = (torch.randn(N, C) * 4 + 3).cuda()  # raw logits, not log-probabilities
    y = (torch.arange(N) % C).cuda()
    x = torch.randn(64).cuda()
    F.nll_loss(raw, y)
    torch.cuda.synchronize()
    started, done = threading.Event(), threading.Event()
    res = {}

    def capture():
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g, capture_error_mode="global"):
                out = x * 2.0
                started.set()
                done.wait(30)
            g.replay()
            res["capture"] = {"raised": False, "value": out.sum().item()}
        except Exception as e:  # noqa: BLE001
            started.set()
            res["capture"] = {"raised": True, "type": type(e).__name__, "text": str(e)[:1000]}

    t = threading.Thread(target=capture)
    t.start()
    started.wait(30)
    try:
        loss = F.nll_loss(raw, y)
        res["eager"] = {"raised": False}
    except Exception as e:  # noqa: BLE001
        loss = None
        res["eager"] = {"raised": True, "type": type(e).__name__, "text": str(e)[:1000]}
    done.set()
    t.join(60)
    if loss is not None:
        res["eager_value"] = _try(lambda: loss.item())
    _emit(**res)


def child_late_enable(torch, F):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    before = F.nll_loss(logp, (torch.arange(N) % C).cuda()).item()  # the context is running
    import labelguard
    en = _try(lambda: labelguard.enable(action="raise") and None)
    bad = _try(lambda: F.nll_loss(logp, y_cpu.cuda()).item())
    _emit(before=before, enable=en, bad=bad)


def child_attach_target(torch, F):
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    F.nll_loss(logp, (torch.arange(N) % C).cuda()).item()
    print("ready %d" % os.getpid(), flush=True)
    sys.stdin.readline()  # the parent attaches, then writes a line
    bad = _try(lambda: F.nll_loss(logp, y_cpu.cuda()).item())
    _emit(bad=bad)


def child_enable_early(torch, F):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import labelguard
    en = _try(lambda: labelguard.enable(action="raise") and None)
    initialised = torch.cuda.is_initialized()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a DataLoader-style worker forked before the parent's first CUDA work
        os.close(r)
        logp_cpu, y_cpu = _nll_inputs(torch)
        res = {"good": _try(lambda: F.nll_loss(logp_cpu.cuda(), (torch.arange(N) % C).cuda()).item()),
               "bad": _try(lambda: F.nll_loss(logp_cpu.cuda(), y_cpu.cuda()).item()), "pid": os.getpid()}
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    child = json.loads(data.decode() or "{}")
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    good = _try(lambda: F.nll_loss(logp, (torch.arange(N) % C).cuda()).item())
    bad = _try(lambda: F.nll_loss(logp, y_cpu.cuda()).item())
    _emit(enable=en, initialised_after_enable=initialised, child=child, good=good, bad=bad, pid=os.getpid())


def child_busy_target(torch, F):
    trigger, counter = os.environ["LG_BUSY_TRIGGER"], os.environ["LG_BUSY_COUNTER"]
    logp_cpu, y_cpu = _nll_inputs(torch)
    logp = logp_cpu.cuda()
    ok = (torch.arange(N) % C).cuda()
    big = torch.randn(2048, 2048, device="cuda")
    print("ready %d" % os.getpid(), flush=True)
    it = 0
    while not os.path.exists(trigger) and it < 1000000:
        for _ in range(4):
            F.nll_loss(logp, ok)
            big = (big @ big).tanh()
        torch.cuda.synchronize()
        it += 1
        if it % 5 == 0:
            with open(counter + ".tmp", "w") as f:
                f.write(str(it))
            os.replace(counter + ".tmp", counter)
    bad = _try(lambda: F.nll_loss(logp, y_cpu.cuda()).item())
    _emit(bad=bad, iterations=it)


def child_profiler_enable(torch, F):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import labelguard
    labelguard.enable(action="raise")
    child_profiler(torch, F)


def child_threads_mask(torch, F):
    import threading
    iters = int(os.environ.get("LG_THREADS_ITERS", "200"))
    n, c = THREADS_N, THREADS_C
    res, go = {}, threading.Barrier(2)

    def work(t):
        g = torch.Generator().manual_seed(100 + t)
        logp_cpu = torch.log_softmax(torch.randn(n, c, generator=g), dim=1)
        logp = logp_cpu.cuda()
        labels = []
        for _ in range(iters):
            y = torch.randint(0, c, (n,), generator=g)
            bad = int(torch.randint(0, n, (1,), generator=g))
            y[bad] = c + t
            labels.append((y, bad))
        gpu = [y.cuda() for y, _ in labels]
        torch.cuda.synchronize()
        go.wait()
        outs = [F.nll_loss(logp, y) for y in gpu]  # both threads launch on the default stream at once
        vals = [o.item() for o in outs]
        wrong = 0
        for v, (y, bad) in zip(vals, labels):
            ref = y.clone()
            ref[bad] = -100
            want = F.nll_loss(logp_cpu, ref).item()
            wrong += abs(v - want) > 1e-4 * max(1.0, abs(want))
        res[t] = {"losses": len(vals), "wrong": wrong}

    ts = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    _emit(threads=[res.get(0), res.get(1)], iters=iters)


INTO_ROUNDS, INTO_BAD_ROUND = 8, 5
def _into_true(logp, y):
    import torch.nn.functional as F
    return F.nll_loss(logp, y)


def _into_false(logp, y):
    return logp.sum() * 0


def child_graph_into(torch, F):
    """Two graphs, each a torch.cond whose true branch is an NLL forward on its own static target,
    captured under torch.cuda.graph: torch captures each branch into a conditional node's body
    with cudaStreamBeginCaptureToGraph (torch 2.15+). Replayed on two streams, alternately and
    repeatedly, new batches copied into the static targets each round; graph 1's round
    INTO_BAD_ROUND batch holds a bad label. Each loss against the eager one of its batch (the bad
    batch's: with that label ignored, what mask makes of it)."""
    try:
        from torch._higher_order_ops.cudagraph_conditional_nodes import CUDAGraphCaptureControlFlowOpDispatchMode
    except ImportError as e:
        _emit(skip="torch %s captures no torch.cond into CUDA graph conditional nodes (%s)" % (torch.__version__, e))
        return
    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(N, C), dim=1).cuda()
    pred = torch.tensor(True).cuda()
    gen = torch.Generator().manual_seed(1)
    batches = [[torch.randint(0, C, (N,), generator=gen) for _ in range(INTO_ROUNDS)] for _ in range(2)]
    batches[1][INTO_BAD_ROUND][BAD_AT] = BAD_VALUE
    refs = []
    for k in range(2):
        row = []
        for r, y in enumerate(batches[k]):
            y = y.clone()
            y[y >= C] = -100
            row.append(F.nll_loss(logp, y.cuda()).item())  # eager, no graph
        refs.append(row)
    targets = [batches[k][0].clone().cuda() for k in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    graphs, outs = [], []
    try:
        for k in range(2):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):  # warm-up outside the capture, as torch.cuda.graph's docs ask
                F.nll_loss(logp, targets[k])
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                with CUDAGraphCaptureControlFlowOpDispatchMode():
                    out = torch.cond(pred, _into_true, _into_false, (logp, targets[k]))
            graphs.append(g)
            outs.append(out)
    except Exception as e:  # noqa: BLE001  (the failure is the observation)
        _emit(capture_error="%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else ""))
        return
    wrong, raised, seen = [], None, []
    for r in range(INTO_ROUNDS):
        try:
            for k in range(2):  # both replays in flight before either is waited for
                with torch.cuda.stream(streams[k]):
                    targets[k].copy_(batches[k][r].cuda(non_blocking=True))
                    graphs[k].replay()
            vals = []
            for k in range(2):
                streams[k].synchronize()
                vals.append(outs[k].item())
        except Exception as e:  # noqa: BLE001
            raised = {"round": r, "type": type(e).__name__, "text": str(e)[:500]}
            break
        seen.append(vals)
        for k in range(2):
            if abs(vals[k] - refs[k][r]) > 1e-5 * max(1.0, abs(refs[k][r])):
                wrong.append({"graph": k, "round": r, "loss": vals[k], "eager": refs[k][r]})
    _emit(torch=torch.__version__, rounds=len(seen), wrong=wrong, raised=raised)


def child_split_launch(torch, F):
    n = (1 << 31) + 4096  # TensorIterator splits a gather this long into 32-bit launches
    x = torch.zeros(64, dtype=torch.uint8, device="cuda")
    idx = torch.zeros(n, dtype=torch.int64, device="cuda")
    at = n - 100
    idx[at] = 64  # one past the end, in the last part
    bad = _try(lambda: torch.gather(x, 0, idx).sum().item())
    _emit(bad=bad, global_index=at)


def child_embedding_step(torch, F):
    """An nn.Embedding step (forward, sum, backward) with id 1000000 in a table of 1000 rows: eager
    after a clean step (LG_EMB_STEP=eager), or a step captured with torch.cuda.graph on good ids
    and replayed with the bad one in the static ids (graph)."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(1000, 64).cuda()
    good = torch.arange(32) * 31 % 1000
    bad = good.clone()
    bad[5] = EMB_BAD

    def step(ids):
        emb(ids).sum().backward()

    if os.environ.get("LG_EMB_STEP") == "eager":
        step(good.cuda())
        torch.cuda.synchronize()
        emb.zero_grad(set_to_none=True)
        r = _try(lambda: (step(bad.cuda()), torch.cuda.synchronize()) and None)
        _emit(bad=r, grad_written=emb.weight.grad is not None,
              after=_try(lambda: torch.ones(2, device="cuda").sum().item()))
        return
    static = good.cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            emb.zero_grad(set_to_none=True)
            step(static)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    emb.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        step(static)
    static.copy_(bad.cuda())
    _emit(bad=_try(lambda: (g.replay(), torch.cuda.synchronize()) and None))


def child_index_put_acc(torch, F):
    x = torch.zeros(5, 3, device="cuda")
    v = torch.ones(2, 3, device="cuda")
    bad = _try(lambda: (x.index_put_((torch.tensor([0, 7], device="cuda"),), v, accumulate=True),
                        torch.cuda.synchronize(), x.sum().item())[-1])
    good = _try(lambda: (x.index_put_((torch.tensor([0, 4], device="cuda"),), v, accumulate=True),
                         x.sum().item())[-1])
    _emit(bad=bad, good=good, torch=torch.__version__)


def child_assert_async(torch, F):
    false, true = torch.tensor(False).cuda(), torch.tensor(True).cuda()  # made on the CPU, copied
    bad = _try(lambda: (torch._assert_async(false), torch.cuda.synchronize())[-1])
    good = _try(lambda: (torch._assert_async(true), torch.tensor([1.0, 2.0]).cuda().cpu().sum().item())[-1])
    _emit(bad=bad, good=good, torch=torch.__version__)


def child_sampling(torch, F):
    p = torch.softmax(torch.arange(32, dtype=torch.float32).view(4, 8) / 7.0, -1)
    nan = p.clone()
    nan[1, 3] = float("nan")
    neg = p.clone()
    neg[2] = -neg[2]
    nan, neg, good = nan.half().cuda(), neg.cuda(), p.half().cuda()  # made on the CPU, copied
    rep = _try(lambda: (torch.multinomial(nan, 4, replacement=True), torch.cuda.synchronize())[-1])
    one = _try(lambda: (torch.multinomial(nan, 1), torch.cuda.synchronize())[-1])
    cat = _try(lambda: (torch.distributions.Categorical(probs=neg, validate_args=False).sample((4,)),
                        torch.cuda.synchronize())[-1])
    ok = _try(lambda: (torch.multinomial(good, 4, replacement=True).cpu().shape[1],
                       torch.multinomial(good, 1).cpu().shape[1]))
    _emit(rep=rep, one=one, cat=cat, good=ok, torch=torch.__version__)


def child_unpool(torch, F):
    x = torch.arange(8, dtype=torch.float32).view(1, 2, 2, 2).cuda()
    good = torch.tensor([[[[0, 3], [9, 15]], [[1, 2], [14, 5]]]])
    bad = good.clone()
    bad[0, 1, 1, 0] = 16
    b = _try(lambda: (F.max_unpool2d(x, bad.cuda(), 2), torch.cuda.synchronize())[-1])
    g = _try(lambda: F.max_unpool2d(x, good.cuda(), 2).sum().item())
    _emit(bad=b, good=g, torch=torch.__version__)


def child_device_assert(torch, F):
    rates = torch.full((64,), 2.0)
    rates[17] = -1.0
    rates = rates.cuda()  # made on the CPU, copied

    def draw():
        torch.poisson(rates)
        torch.cuda.synchronize()

    _emit(bad=_try(draw), torch=torch.__version__)


def child_compiled_assert(torch, F):
    emb = torch.nn.Embedding(50, 16).cuda()
    step = torch.compile(lambda ids: emb(ids).sum())
    ok = _try(lambda: step(torch.arange(8).cuda()).item())
    ids = torch.arange(8)
    ids[5] = 50  # the vocabulary size: Inductor's own assert in its Triton kernel
    bad = _try(lambda: (step(ids.cuda()), torch.cuda.synchronize())[-1])
    _emit(ok=ok, bad=bad, torch=torch.__version__)


def child_bernoulli(torch, F):
    p = torch.full((64,), 0.5)
    p[17] = 1.5
    bad = _try(lambda: (torch.bernoulli(p.cuda()), torch.cuda.synchronize())[-1])
    half = _try(lambda: torch.bernoulli(torch.full((64,), 0.5).half().cuda()).float().sum().item())
    good = _try(lambda: torch.bernoulli(torch.full((64,), 1.0).cuda()).sum().item())
    _emit(bad=bad, half=half, good=good, torch=torch.__version__)


CHILDREN = {
    "bad_label": child_bad_label, "graph_reuse": child_graph_reuse, "replay_text": child_replay_text,
    "index_cost": child_index_cost, "bce_cost": child_bce_cost, "bce_graph": child_bce_graph, "profiler": child_profiler, "async_exit": child_async_exit,
    "ring_pressure": child_ring_pressure,
    "mask_full": child_mask_full, "capture_logits": child_capture_logits,
    "late_enable": child_late_enable, "attach_target": child_attach_target,
    "split_launch": child_split_launch, "enable_early": child_enable_early, "busy_target": child_busy_target,
    "profiler_enable": child_profiler_enable,
    "threads_mask": child_threads_mask, "graph_into": child_graph_into,
    "embedding_step": child_embedding_step,
    "index_put_acc": child_index_put_acc, "assert_async": child_assert_async, "sampling": child_sampling,
    "unpool": child_unpool, "device_assert": child_device_assert, "bernoulli": child_bernoulli,
    "compiled_assert": child_compiled_assert,
}


def run_child(name):
    import torch
    import torch.nn.functional as F
    CHILDREN[name](torch, F)


# ---------------------------------------------------------------------------------- parent
class Ctx:
    def __init__(self, args):
        self.args = args
        self.python = os.path.abspath(args.python) if os.sep in args.python else args.python
        self.lib = os.path.abspath(args.lib)
        self.fake = args.fake
        self.workdir = os.path.abspath(args.workdir)


def events_in(logdir):
    out = []
    for fn in sorted(glob.glob(os.path.join(logdir, "*.jsonl"))):
        with open(fn, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        out.append({"event": "_unparsable", "line": line[:200]})
    return out


def spawn(ctx, tag, child, env_extra, preload=True, python=None, timeout=120, stdin_fn=None, wrap=()):
    """Runs one child (under the command `wrap`, if any); returns (rc, observation dict or None,
    events, stderr tail)."""
    logdir = os.path.join(ctx.workdir, tag)
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("LABELGUARD_"):
            del env[k]
    env.update({"LABELGUARD_LOG": logdir, "PYTHONUNBUFFERED": "1"})
    if preload:
        env["LD_PRELOAD"] = ctx.lib
    env.update(env_extra)
    argv = list(wrap) + [python or ctx.python, os.path.abspath(__file__), "--child", child]
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=logdir)
    try:
        if stdin_fn:
            stdin_fn(p)
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, None, events_in(logdir), "timeout after %ss; " % timeout + err[-1500:]
    obs = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                obs = json.loads(line)
                break
            except ValueError:
                pass
    return p.returncode, obs, events_in(logdir), err[-1500:]


def of(events, kind):
    return [e for e in events if e.get("event") == kind]


def ours(r):
    """The raise outcome names labelguard and the bad label."""
    return bool(r and r.get("raised") and "labelguard" in r.get("text", "") and str(BAD_VALUE) in r.get("text", ""))


def judge_start(ctx, python=None):
    rc, obs, ev, err = spawn(ctx, "start" if python is None else "start-newest", "bad_label",
                             {"LABELGUARD_ACTION": "raise"}, python=python)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err.strip().splitlines()[-1:] if err.strip() else "")
    start, summ, viol = of(ev, "start"), of(ev, "summary"), of(ev, "violation")
    if not start:
        return "FAIL", "no start event"
    s = start[0]
    detail = "torch %s backend=%s validator=%s" % (obs.get("torch"), s.get("backend"), s.get("validator"))
    want_backend = "host" if ctx.fake else "gpu"
    if s.get("backend") != want_backend:
        return "FAIL", detail + " (expected backend %s)" % want_backend
    if not ctx.fake and not s.get("validator"):
        return "FAIL", detail + " (no validator image named)"
    if not summ:
        return "FAIL", detail + "; no summary event at exit"
    hf = summ[-1].get("host_fallbacks")
    detail += " host_fallbacks=%s" % hf
    if hf != 0:
        return "FAIL", detail
    if not ours(obs["bad"]) or obs["good"].get("raised"):
        return "FAIL", detail + "; bad=%s good=%s" % (obs["bad"], obs["good"])
    if not viol or viol[0].get("outcome") != "blocked":
        return "FAIL", detail + "; violation events: %s" % [v.get("outcome") for v in viol]
    return "PASS", detail


def case_start_event(ctx):
    return judge_start(ctx)


def case_start_newest(ctx):
    py = os.environ.get("LG_GPU_NEWEST_PYTHON")
    if not py:
        return "SKIP", "no second torch (set LG_GPU_NEWEST_PYTHON to a python whose torch is the newest wheel)"
    return judge_start(ctx, python=py)


def case_graph_reuse(ctx):
    rc, obs, ev, err = spawn(ctx, "graph_reuse", "graph_reuse", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    if obs["raised_good"]:
        return "FAIL", "a good replay raised: %s" % obs["raised_good"][0]
    if not ours(obs["bad"]):
        return "FAIL", "the last graph's bad replay: %s" % obs["bad"]
    return "PASS", "6 graphs captured, replayed and destroyed; the 7th's bad replay raised our text"


def replay_text(ctx, mode):
    rc, obs, ev, err = spawn(ctx, "replay_text_" + mode, "replay_text",
                             {"LABELGUARD_ACTION": "raise", "LABELGUARD_MODE": mode})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    raised = [s for s in obs["steps"] if s.get("raised")]
    if not raised:
        return "FAIL", "no step raised: %s" % obs["steps"]
    first = raised[0]
    if first["step"] < 2 or not ours(first):
        return "FAIL", "step %s raised %s: %r" % (first["step"], first.get("type"), first.get("text", "")[:200])
    return "PASS", "raised at step %d (bad labels from step 2) with labelguard's text" % first["step"]


def case_replay_text_sync(ctx):
    return replay_text(ctx, "sync")


def case_replay_text_async(ctx):
    return replay_text(ctx, "async")


def case_index_cost(ctx):
    figs = {}
    for tag, pre, mode in (("none", False, None), ("sync", True, "sync"), ("async", True, "async")):
        env = {"LABELGUARD_ACTION": "raise"}
        if mode:
            env["LABELGUARD_MODE"] = mode
        if ctx.fake:
            env["LG_GPU_PATH_ITERS"] = "200"
        rc, obs, ev, err = spawn(ctx, "index_cost_" + tag, "index_cost", env, preload=pre)
        if obs is None:
            return "FAIL", "%s: child rc=%s: %s" % (tag, rc, err[-300:])
        if of(ev, "violation"):
            return "FAIL", "%s: a violation on valid ids" % tag
        figs[tag] = obs["us_per_iter"]
    return "PASS", "us/iter (embedding + x[idx]): none %.1f, sync %.1f, async %.1f" % (
        figs["none"], figs["sync"], figs["async"])


def case_bce_cost(ctx):
    figs, per_check = {}, {}
    for tag, pre, mode in (("none", False, None), ("sync", True, "sync"), ("async", True, "async")):
        env = {"LABELGUARD_ACTION": "raise"}
        if mode:
            env["LABELGUARD_MODE"] = mode
        if ctx.fake:  # the double: the case's own logic only, on a small batch
            env["LG_GPU_PATH_ITERS"] = "3"
            env["LG_GPU_PATH_BCE_SMALL"] = "1"
        rc, obs, ev, err = spawn(ctx, "bce_cost_" + tag, "bce_cost", env, preload=pre)
        if obs is None:
            return "FAIL", "%s: child rc=%s: %s" % (tag, rc, err[-300:])
        if of(ev, "violation"):
            return "FAIL", "%s: a violation on valid probabilities" % tag
        figs[tag] = obs["ms_per_call"]
        if pre:
            start, summ = of(ev, "start"), of(ev, "summary")
            if not summ or not summ[-1].get("validated"):
                return "FAIL", "%s: no validated BCE launch in the summary" % tag
            s = summ[-1]
            per_check[tag] = s.get("validate_ns_total", 0) / s["validated"] / 1e6
            backend = start[0].get("backend") if start else None
            if not ctx.fake and (backend != "gpu" or s.get("host_fallbacks")):
                return "FAIL", "%s: backend %s, host_fallbacks %s" % (tag, backend, s.get("host_fallbacks"))
    detail = "ms/call (BCE %d elements): none %.3f, sync %.3f, async %.3f; added sync %.3f, async %.3f; " \
             "validate ms/check sync %.3f, async %.3f" % (
                 obs["elements"], figs["none"], figs["sync"], figs["async"], figs["sync"] - figs["none"],
                 figs["async"] - figs["none"], per_check["sync"], per_check["async"])
    # A host copy-and-scan of 2 x 16 MB takes milliseconds; the range kernel's launch, tens of us.
    if not ctx.fake and max(per_check.values()) > 2.0:
        return "FAIL", detail + " (the range check did not run on the GPU)"
    return "PASS", detail


def case_bce_graph(ctx):
    if ctx.fake:
        return "SKIP", "the double runs the host backend, which leaves a captured range check unchecked " \
                       "(GPU-free: tests/unit/test_gpu_driver /gpu_driver/range_captured_launch)"
    rc, obs, ev, err = spawn(ctx, "bce_graph", "bce_graph", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    warn = [w.get("what") for w in of(ev, "warning")]
    if "capture_unchecked" in warn:
        return "FAIL", "the captured BCE ran unchecked: %s" % warn
    if any(r["raised"] for r in obs["good"]):
        return "FAIL", "a good replay raised: %s" % obs["good"]
    v = [e for e in of(ev, "violation") if e.get("family") == "binary_cross_entropy"]
    if len(v) != 1:
        return "FAIL", "%d BCE violations (want 1, the bad replay's); bad replay: %s" % (len(v), obs["bad"])
    v = v[0]
    samples = v.get("bad", {}).get("samples")
    if not v.get("graph") or samples != [{"index": 7, "value": 1.5}] or v["target"].get("operand") != "target" \
            or not v.get("note", "").startswith("verdict late: the captured launch replayed"):
        return "FAIL", "the replay's event: graph %s, samples %s, note %r" % (v.get("graph"), samples, v.get("note"))
    s = of(ev, "summary")
    if s and s[-1].get("host_fallbacks"):
        return "FAIL", "host_fallbacks %s" % s[-1]["host_fallbacks"]
    return "PASS", "captured BCE checked at each replay (kernel nodes); the bad replay reported target[7] = 1.5, " \
                   "raised %s" % (obs["bad"].get("type") if obs["bad"]["raised"] else "nothing")


def case_hooks_cupti(ctx):
    if ctx.fake:
        return "SKIP", "needs the installed driver's CUPTI"
    rc, obs, ev, err = spawn(ctx, "hooks_cupti", "bad_label", {"LABELGUARD_ACTION": "raise", "LABELGUARD_HOOKS": "cupti"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    start = of(ev, "start")
    hooks = start[0].get("hooks") if start else None
    warn = [w.get("what") for w in of(ev, "warning")]
    if hooks != ["cupti"] or not ours(obs["bad"]):
        return "FAIL", "hooks=%s warnings=%s bad=%s" % (hooks, warn, obs["bad"])
    return "PASS", "hooks=%s, bad label caught through CUPTI" % hooks


def case_profiler(ctx):
    if ctx.fake:
        return "SKIP", "the double has no Kineto activity records"
    rc, obs, ev, err = spawn(ctx, "profiler", "profiler", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    if obs["cuda_events"] == 0:
        return "FAIL", "no CUDA kernel in the profiler's trace (warnings: %s)" % [w.get("what") for w in of(ev, "warning")]
    if not ours(obs["bad"]):
        return "FAIL", "after the profiler the bad label was not caught: %s" % obs["bad"]
    return "PASS", "%d CUDA events in the trace (%s...), bad label caught after" % (obs["cuda_events"], obs["names"][:3])


def case_async_exit(ctx):
    rc, obs, ev, err = spawn(ctx, "async_exit", "async_exit", {"LABELGUARD_ACTION": "raise", "LABELGUARD_MODE": "async"})
    if rc is None or rc < 0:
        return "FAIL", "the process died (rc=%s): %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    if not viol:
        return "FAIL", "rc=%s; the bad last step never reached the log (events: %s)" % (rc, [e.get("event") for e in ev])
    samples = viol[0].get("bad", {}).get("samples", [])
    if {"index": BAD_AT, "value": BAD_VALUE} not in samples:
        return "FAIL", "violation samples %s" % samples
    return "PASS", "rc=%s, violation logged at exit (outcome %s)" % (rc, viol[0].get("outcome"))


def case_ring_pressure(ctx):
    if ctx.fake:
        return "SKIP", "the double finishes each kernel inside its launch: no verdict ring fills up"
    rc, obs, ev, err = spawn(ctx, "ring_pressure", "ring_pressure",
                             {"LABELGUARD_ACTION": "raise", "LABELGUARD_MODE": "async"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    lost = [w for w in of(ev, "warning") if w.get("what") == "verdict_lost"]
    if lost:
        return "FAIL", "verdict_lost: %s" % lost[0].get("detail", "")[:300]
    viol = of(ev, "violation")
    if len(viol) != 1 or {"index": BAD_AT, "value": BAD_VALUE} not in viol[0].get("bad", {}).get("samples", []):
        return "FAIL", "violation events %s (want one with the bad batch's pair)" % [v.get("bad") for v in viol]
    if not ours(obs["raised"]):
        return "FAIL", "the bad batch's error was not raised with our text: %s" % obs["raised"]
    return "PASS", "raised at %s (bad batch at %d); device still behind after the loop: %s" % (
        obs["raised_at"], obs["bad_at"], obs["behind"])


def case_mask_full(ctx):
    if ctx.fake:
        return "SKIP", "the double's device memory is the host's"
    rc, obs, ev, err = spawn(ctx, "mask_full", "mask_full", {"LABELGUARD_ACTION": "mask"}, timeout=180)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    outcome = viol[0].get("outcome") if viol else None
    r = obs["result"]
    detail = "free %.1f MiB after taking %.1f GiB; outcome %s" % (obs["free_bytes"] / 2**20, obs["held"] / 2**30, outcome)
    if outcome != "masked" or r.get("raised") or abs(r["value"] - obs["reference"]) > 1e-4:
        return "FAIL", detail + "; result %s, reference %s" % (r, obs["reference"])
    return "PASS", detail + ", loss equals the reference"


def case_index_put_acc(ctx):
    if ctx.fake:
        return "SKIP", ("the double computes no reductions, so index_put_'s condition is not computed there "
                        "(tests/e2e/test_assert_async.sh tests the mechanism)")
    rc, obs, ev, err = spawn(ctx, "index_put_acc", "index_put_acc", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    bad, good = obs["bad"], obs["good"]
    v = viol[0] if viol else {}
    detail = "torch %s: raised=%s op=%s outcome=%s; then sum %s" % (
        obs.get("torch"), bad.get("raised"), v.get("op"), v.get("outcome"), good.get("value"))
    if not (bad.get("raised") and "labelguard" in bad.get("text", "") and "index_put" in bad.get("text", "")):
        return "FAIL", detail + "; bad=%s" % bad
    if len(viol) != 1 or v.get("family") != "assert_async" or v.get("outcome") != "blocked" or \
            v.get("op") not in ("index_put_", "_index_put_impl_"):
        return "FAIL", detail + "; violations %s" % [(e.get("family"), e.get("op"), e.get("outcome")) for e in viol]
    if v.get("bad", {}).get("samples") != [{"index": 0, "value": 0}] or not v.get("python_stack"):
        return "FAIL", detail + "; claimed %s, python stack %s" % (v.get("bad"), bool(v.get("python_stack")))
    # the blocked call wrote nothing, the next one adds its 2 rows of 3 ones: the context lives on
    if good.get("raised") or abs(good.get("value", -1) - 6.0) > 1e-6:
        return "FAIL", detail + "; good=%s" % good
    return "PASS", detail


def case_assert_async(ctx):
    rc, obs, ev, err = spawn(ctx, "assert_async", "assert_async", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    bad, good = obs["bad"], obs["good"]
    v = viol[0] if viol else {}
    py = v.get("python_stack") or [{}]
    detail = "torch %s: raised=%s op=%s outcome=%s at %s:%s; then %s" % (
        obs.get("torch"), bad.get("raised"), v.get("op"), v.get("outcome"), os.path.basename(py[-1].get("file", "?")),
        py[-1].get("line"), good.get("value"))
    if not (bad.get("raised") and "labelguard" in bad.get("text", "") and "torch._assert_async" in bad.get("text", "")):
        return "FAIL", detail + "; bad=%s" % bad
    if len(viol) != 1 or v.get("op") != "torch._assert_async" or v.get("outcome") != "blocked" or \
            v.get("target", {}).get("dtype") != "bool" or not py[-1].get("file", "").endswith("gpu_path.py"):
        return "FAIL", detail + "; violations %s" % [(e.get("op"), e.get("outcome"), e.get("target")) for e in viol]
    if good.get("raised") or good.get("value") != 3.0:
        return "FAIL", detail + "; good=%s" % good
    return "PASS", detail


def case_sampling(ctx):
    rc, obs, ev, err = spawn(ctx, "sampling", "sampling", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    rep, one, cat, good = obs["rep"], obs["one"], obs["cat"], obs["good"]
    ren = [v for v in viol if v.get("kernel") == "renormRowsL1"]
    detail = "torch %s: with replacement raised=%s, one sample raised=%s, Categorical raised=%s; %d violations" % (
        obs.get("torch"), rep.get("raised"), one.get("raised"), cat.get("raised"), len(viol))
    text = rep.get("text", "")
    if not (rep.get("raised") and "labelguard" in text and "probs[1, 3] = nan" in text and "fp16_overflow" in text
            and "device-side assert triggered" not in text):
        return "FAIL", detail + "; with replacement: %s" % rep
    if not ren or ren[0].get("cause") != "fp16_overflow" or ren[0].get("target", {}).get("dtype") != "float16":
        return "FAIL", detail + "; renormRowsL1 events %s" % [(v.get("cause"), v.get("target")) for v in ren]
    if good.get("raised") or good.get("value") != [4, 1]:
        return "FAIL", detail + "; clean calls: %s" % good
    if ctx.fake:  # the one-sample condition and Categorical's normalization are computed by kernels the double skips
        return "PASS", detail + " (one sample and Categorical judged on a GPU only)"
    if not (one.get("raised") and "multinomial" in one.get("text", "") and "device-side assert" not in one.get("text", "")):
        return "FAIL", detail + "; one sample: %s" % one
    asserted = [v for v in viol if v.get("family") == "assert_async"]
    if not asserted or asserted[0].get("op") != "multinomial" or asserted[0].get("cause") != "fp16_overflow":
        return "FAIL", detail + "; one sample events %s" % [(v.get("op"), v.get("cause")) for v in asserted]
    if not (cat.get("raised") and "negative_probs" in cat.get("text", "")):
        return "FAIL", detail + "; Categorical: %s" % cat
    return "PASS", detail


def case_unpool(ctx):
    rc, obs, ev, err = spawn(ctx, "unpool", "unpool", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = [v for v in of(ev, "violation") if v.get("kernel") == "max_unpooling2d_forward_kernel"]
    bad, good = obs["bad"], obs["good"]
    detail = "torch %s: raised=%s, %d violations; then %s" % (obs.get("torch"), bad.get("raised"), len(viol),
                                                              good.get("value"))
    if not (bad.get("raised") and "ids[6] = 16" in bad.get("text", "") and "device-side assert" not in bad.get("text", "")):
        return "FAIL", detail + "; bad=%s" % bad
    if len(viol) != 1 or viol[0].get("target", {}).get("bound") != 16 or viol[0].get("outcome") != "blocked":
        return "FAIL", detail + "; violations %s" % [(v.get("target"), v.get("outcome")) for v in viol]
    if good.get("raised"):
        return "FAIL", detail + "; good=%s" % good
    return "PASS", detail


def case_device_assert(ctx):
    if ctx.fake:
        return "SKIP", "the double runs torch's poisson kernel as a no-op (tests/torch-fake/test_device_assert.sh)"
    rc, obs, ev, err = spawn(ctx, "device_assert", "device_assert", {"LABELGUARD_LAUNCH_SITES": "all"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    bad, d = obs["bad"], of(ev, "device_assert")
    if not (bad.get("raised") and "device-side assert" in bad.get("text", "")):
        return "FAIL", "torch %s: poisson with a rate of -1 did not assert: %s" % (obs.get("torch"), bad)
    if len(d) != 1:
        return "FAIL", "%d device_assert events (want 1)" % len(d)
    mine = [c for c in d[0].get("candidates", []) if c.get("finding_thread")]
    hit = [c for c in mine if "oisson" in (c.get("symbol") or "")]
    detail = "torch %s: found at %s; candidates %s" % (obs.get("torch"), d[0].get("found_at"),
                                                      [c.get("kernel") for c in mine][:4])
    if not hit:
        return "FAIL", detail + "; no poisson kernel among them"
    lines = [f.get("function") for f in hit[0].get("python_stack", [])]
    if "draw" not in lines:
        return "FAIL", detail + "; its launch line is not draw(): %s" % lines
    return "PASS", detail


def case_compiled_assert(ctx):
    if ctx.fake:
        return "SKIP", "no Triton on the double (tests/torch-fake/test_generated.sh reads Inductor's GPU format)"
    rc, obs, ev, err = spawn(ctx, "compiled_assert", "compiled_assert",
                             {"LABELGUARD_COMPILED": "off", "LABELGUARD_HOOKS": "cupti"}, timeout=300)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    bad, d = obs["bad"], of(ev, "device_assert")
    if obs["ok"].get("raised"):
        return "FAIL", "torch %s: the clean compiled step raised: %s" % (obs.get("torch"), obs["ok"])
    if not (bad.get("raised") and "device-side assert" in bad.get("text", "")):
        return "FAIL", "torch %s: an id of 50 did not assert in Inductor's kernel: %s" % (obs.get("torch"), bad)
    if len(d) != 1:
        return "FAIL", "%d device_assert events (want 1)" % len(d)
    gen = [g for g in d[0].get("generated_kernels", []) if "embedding" in g.get("aten_ops", "")]
    launched = [c.get("kernel") for c in d[0].get("candidates", []) if c.get("generated")]
    detail = "torch %s: generated %s; Triton's launches among the candidates: %s; driver launches seen: %s" % (
        obs.get("torch"), [(g.get("kernel"), g.get("message"), g.get("line")) for g in gen][:2], launched[:4],
        d[0].get("driver_launches_seen"))
    if not gen or not gen[0].get("message", "").startswith("index out of bounds") or \
            not os.path.isfile(gen[0].get("file", "")):
        return "FAIL", detail + "; the embedding's generated kernel is not listed with its file"
    if not d[0].get("driver_launches_seen") or gen[0].get("kernel") not in launched or \
            not gen[0].get("among_candidates"):
        return "FAIL", detail + "; CUPTI did not put the embedding kernel's launch among the candidates"
    return "PASS", detail


def case_bernoulli(ctx):
    rc, obs, ev, err = spawn(ctx, "bernoulli", "bernoulli", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = [v for v in of(ev, "violation") if v.get("family") == "bernoulli"]
    if ctx.fake:  # the float16 p's float32 copy holds no values on the double: only the bad call is judged
        viol = [v for v in viol if [s.get("index") for s in v.get("bad", {}).get("samples", [])][:1] == [17]]
    bad, half, good = obs["bad"], obs["half"], obs["good"]
    detail = "torch %s: raised=%s, %d violations; then %s" % (obs.get("torch"), bad.get("raised"), len(viol),
                                                              good.get("value"))
    if not (bad.get("raised") and "p[17] = 1.5" in bad.get("text", "") and "device-side assert" not in bad.get("text", "")):
        return "FAIL", detail + "; bad=%s" % bad
    if len(viol) != 1 or viol[0].get("cause") != "no_sigmoid" or viol[0].get("outcome") != "blocked":
        return "FAIL", detail + "; violations %s" % [(v.get("cause"), v.get("outcome")) for v in viol]
    if ctx.fake:
        return "PASS", detail + " (the float16 p judged on a GPU only)"
    if half.get("raised") or good.get("raised") or good.get("value") != 64.0:
        return "FAIL", detail + "; half=%s good=%s" % (half, good)
    return "PASS", detail


def case_capture_logits(ctx):
    rc, obs, ev, err = spawn(ctx, "capture_logits", "capture_logits", {"LABELGUARD_ACTION": "raise"})
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    warn = [w.get("what") for w in of(ev, "warning")]
    if obs["capture"].get("raised"):
        return "FAIL", "the other thread's capture broke: %s: %s" % (obs["capture"].get("type"), obs["capture"].get("text", "")[:200])
    if obs["eager"].get("raised"):
        return "FAIL", "the eager NLL raised: %s" % obs["eager"].get("text", "")[:200]
    if "nll_input_not_log_probs" not in warn:
        return "FAIL", "the raw-logits check did not run (warnings: %s)" % warn
    return "PASS", "global-mode capture intact while the raw-logits check ran on another thread"


def case_late_enable(ctx):
    rc, obs, ev, err = spawn(ctx, "late_enable", "late_enable", {"LABELGUARD_LIB": ctx.lib}, preload=False)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    if obs["enable"].get("raised"):
        return "FAIL", "enable() refused: %s" % obs["enable"].get("text", "")[:300]
    if not ours(obs["bad"]):
        return "FAIL", "after enable() the bad label: %s" % obs["bad"]
    return "PASS", "enable() into a running torch process (dlopen), bad label raised %s" % obs["bad"]["type"]


def case_attach(ctx):
    if ctx.fake:
        return "SKIP", "covered GPU-free by tests/cli/test_attach.sh"
    if shutil.which("gdb") is None:
        return "SKIP", "no gdb on this machine (late_enable covers the dlopen into a live torch process)"
    result = {}

    def drive(p):
        line = p.stdout.readline()
        if not line.startswith("ready"):
            result["err"] = "target did not start: %r" % line
            p.stdin.write("\n")
            p.stdin.flush()
            return
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), LABELGUARD_LIB=ctx.lib)
        a = subprocess.run([sys.executable, "-m", "labelguard", "attach", str(p.pid)], env=env,
                           capture_output=True, text=True, timeout=90)
        result["attach_rc"], result["attach_out"] = a.returncode, (a.stdout + a.stderr)[-400:]
        p.stdin.write("\n")
        p.stdin.flush()

    rc, obs, ev, err = spawn(ctx, "attach", "attach_target", {"LABELGUARD_ACTION": "raise"},
                             preload=False, timeout=150, stdin_fn=drive)
    if "err" in result:
        return "FAIL", result["err"]
    if result.get("attach_rc") != 0:
        return "FAIL", "attach rc=%s: %s" % (result.get("attach_rc"), result.get("attach_out"))
    if obs is None or not ours(obs["bad"]):
        return "FAIL", "after attach: %s (rc=%s %s)" % (obs and obs["bad"], rc, err[-200:])
    return "PASS", "attached; bad label raised in the attached process"


_early = {}
_early_lock = __import__("threading").Lock()


def early_run(ctx):
    """One enable-before-CUDA child, shared by enable_early and enable_fork."""
    with _early_lock:
        if "r" not in _early:
            _early["r"] = spawn(ctx, "enable_early", "enable_early", {"LABELGUARD_LIB": ctx.lib}, preload=False)
        return _early["r"]


def case_enable_early(ctx):
    rc, obs, ev, err = early_run(ctx)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    if obs["enable"].get("raised"):
        return "FAIL", "enable() refused: %s" % obs["enable"].get("text", "")[:300]
    start = [e for e in of(ev, "start") if e.get("pid") == obs["pid"]]
    backend = start[0].get("backend") if start else None
    want = "host" if ctx.fake else "gpu"
    detail = "initialised after enable=%s, backend=%s" % (obs["initialised_after_enable"], backend)
    if obs["initialised_after_enable"] or backend != want or obs["good"].get("raised") or not ours(obs["bad"]):
        return "FAIL", detail + " (want %s); good=%s bad=%s" % (want, obs["good"], obs["bad"])
    return "PASS", detail + ", bad label raised"


def case_enable_fork(ctx):
    rc, obs, ev, err = early_run(ctx)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    child = obs.get("child") or {}
    if not child or child["good"].get("raised"):
        return "FAIL", "the fork child's CUDA failed after the parent's enable(): %s" % child
    if not ours(child["bad"]):
        return "FAIL", "the fork child's bad label: %s" % child["bad"]
    return "PASS", "fork child after enable(): CUDA works, its bad label raised %s" % child["bad"]["type"]


def case_attach_busy(ctx):
    if ctx.fake:
        return "SKIP", "covered GPU-free by tests/e2e/test_attach_busy.sh (asynchronous double)"
    if shutil.which("gdb") is None:
        return "SKIP", "no gdb on this machine"
    n = int(os.environ.get("LG_GPU_ATTACHES", "3"))
    trigger = os.path.join(ctx.workdir, "busy.trigger")
    counter = os.path.join(ctx.workdir, "busy.counter")
    for f in (trigger, counter):
        if os.path.exists(f):
            os.unlink(f)
    result = {"attaches": []}

    def count():
        try:
            return int(open(counter).read() or 0)
        except (OSError, ValueError):
            return 0

    def drive(p):
        line = p.stdout.readline()
        if not line.startswith("ready"):
            result["err"] = "target did not start: %r" % line
            open(trigger, "w").close()
            return
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), LABELGUARD_LIB=ctx.lib)
        for _ in range(n):
            before, t0 = count(), time.time()
            try:
                a = subprocess.run([sys.executable, "-m", "labelguard", "attach", str(p.pid)], env=env,
                                   capture_output=True, text=True, timeout=60)
                rc_a, out = a.returncode, (a.stdout + a.stderr)[-300:]
            except subprocess.TimeoutExpired:
                rc_a, out = None, "timeout after 60s"
            secs = time.time() - t0
            grew = False
            for _ in range(100):
                if count() > before:
                    grew = True
                    break
                time.sleep(0.1)
            result["attaches"].append({"rc": rc_a, "secs": round(secs, 1), "loop_ran_on": grew, "out": out})
            if rc_a != 0 or not grew:
                break
        open(trigger, "w").close()

    rc, obs, ev, err = spawn(ctx, "attach_busy", "busy_target",
                             {"LABELGUARD_ACTION": "raise", "LG_BUSY_TRIGGER": trigger, "LG_BUSY_COUNTER": counter},
                             preload=False, timeout=120 + 70 * n, stdin_fn=drive)
    if "err" in result:
        return "FAIL", result["err"]
    att = result["attaches"]
    bad_att = [a for a in att if a["rc"] != 0 or not a["loop_ran_on"]]
    if len(att) < n or bad_att:
        return "FAIL", "attaches: %s" % (bad_att or att)
    if obs is None or not ours(obs["bad"]):
        return "FAIL", "after %d attaches: %s (rc=%s %s)" % (n, obs and obs["bad"], rc, err[-200:])
    return "PASS", "%d attaches in %s s, the loop ran on (%d iterations), bad label raised" % (
        n, [a["secs"] for a in att], obs["iterations"])


def case_profiler_enable(ctx):
    if ctx.fake:
        return "SKIP", "the double has no Kineto activity records (GPU-free: tests/torch-fake/test_profiler.sh)"
    rc, obs, ev, err = spawn(ctx, "profiler_enable", "profiler_enable", {"LABELGUARD_LIB": ctx.lib}, preload=False)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    start = of(ev, "start")
    hooks = start[0].get("hooks") if start else None
    if obs["cuda_events"] == 0:
        return "FAIL", "no CUDA kernel in the profiler's trace after enable() (hooks %s, warnings: %s)" % (
            hooks, [w.get("what") for w in of(ev, "warning")])
    if hooks != ["interpose"] or not ours(obs["bad"]):
        return "FAIL", "hooks=%s bad=%s" % (hooks, obs["bad"])
    return "PASS", "%d CUDA events in the trace after enable(), hooks %s, bad label caught after" % (
        obs["cuda_events"], hooks)


def case_split_launch(ctx):
    if ctx.fake:
        return "SKIP", "needs 17 GiB of device memory (and a kernel that computes)"
    rc, obs, ev, err = spawn(ctx, "split_launch", "split_launch", {"LABELGUARD_ACTION": "raise"}, timeout=180)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    viol = of(ev, "violation")
    r = obs["bad"]
    if not (r.get("raised") and "labelguard" in r.get("text", "")) or not viol:
        return "FAIL", "a bad id in the last part of a split gather: %s" % r
    s = viol[0].get("bad", {}).get("samples", [{}])[0]
    return "PASS", "%d launches checked, bad id caught; sample index %s (global element %d), value %s" % (
        sum(1 for _ in viol) or 1, s.get("index"), obs["global_index"], s.get("value"))


def case_threads_mask(ctx):
    iters = 40 if ctx.fake else 200
    rc, obs, ev, err = spawn(ctx, "threads_mask", "threads_mask",
                             {"LABELGUARD_ACTION": "mask", "LABELGUARD_QUIET": "1", "LG_THREADS_ITERS": str(iters)},
                             timeout=300)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    th = obs["threads"]
    if any(t is None or t["losses"] != iters for t in th):
        return "FAIL", "a thread did not finish: %s" % th
    viol = of(ev, "violation")
    detail = "2 threads x %d masked losses on the default stream: %s from another thread's labels" % (
        iters, " + ".join(str(t["wrong"]) for t in th))
    if any(t["wrong"] for t in th):
        return "FAIL", detail
    if len(viol) != 2 * iters or any(v.get("outcome") != "masked" for v in viol):
        return "FAIL", detail + "; %d violations, outcomes %s" % (len(viol), sorted({v.get("outcome") for v in viol}))
    return "PASS", detail


def case_graph_into(ctx):
    if ctx.fake:
        return "SKIP", "the double runs the host backend, which leaves a check in a conditional body unchecked " \
                       "(GPU-free: tests/e2e/test_graph_into.sh, tests/unit/test_gpu_driver /gpu_driver/captured_into_graph)"
    rc, obs, ev, err = spawn(ctx, "graph_into", "graph_into", {"LABELGUARD_ACTION": "mask", "LABELGUARD_QUIET": "1"},
                             timeout=180)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    if obs.get("skip"):
        return "SKIP", obs["skip"]
    if obs.get("capture_error"):
        rc0, obs0, _, err0 = spawn(ctx, "graph_into_plain", "graph_into", {}, preload=False, timeout=180)
        if obs0 is not None and obs0.get("capture_error"):
            return "SKIP", "torch.cond is not captured into conditional nodes here, labelguard or not: %s" % (
                obs0["capture_error"])
        return "FAIL", "the capture failed under labelguard only: %s" % obs["capture_error"]
    detail = "torch %s, 2 graphs x %d replays on two streams: %d losses differ from eager" % (
        obs.get("torch"), obs["rounds"], len(obs["wrong"]))
    if obs["raised"] or obs["rounds"] != INTO_ROUNDS:
        return "FAIL", detail + "; raised %s" % obs["raised"]
    if obs["wrong"]:
        return "FAIL", detail + ": %s" % obs["wrong"][:3]
    viol = [v for v in of(ev, "violation") if "nll_loss" in v.get("kernel", "")]
    warn = [w.get("what") for w in of(ev, "warning")]
    # A body's checks sanitize, but its verdicts cannot be told apart from the parent's execs:
    # the bad batch is either reported or said unreportable, never silent.
    if not viol and "graph_checks_unreported" not in warn:
        return "FAIL", detail + "; the bad batch neither reported nor said unreportable (warnings %s)" % warn
    if any(v.get("outcome") != "masked" for v in viol):
        return "FAIL", detail + "; outcomes %s" % sorted({v.get("outcome") for v in viol})
    return "PASS", detail + "; the bad batch: %s" % (
        "%d violation(s), masked" % len(viol) if viol else "masked, graph_checks_unreported said")


def embedding_step(ctx, step, mode):
    """The embedding step of child_embedding_step under compute-sanitizer memcheck (where it is
    installed): no kernel, forward or backward, may touch memory outside an allocation. Eager,
    PyTorch's caching allocator is off, so that memcheck sees each tensor's own bounds (a graph
    capture needs it: there the bad row, 256 MB past the weight's gradient, leaves its segment)."""
    if ctx.fake:
        return "SKIP", "covered GPU-free by tests/torch-fake/test_embedding_backward.sh and tests/e2e/test_index_backward.sh"
    tag = "embedding_%s_%s" % (step, mode)
    san = shutil.which("compute-sanitizer") or (
        "/usr/local/cuda/bin/compute-sanitizer" if os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK) else None)
    log = os.path.join(ctx.workdir, tag + ".memcheck.log")
    wrap = [san, "--tool", "memcheck", "--log-file", log, "--print-limit", "20"] if san else []
    env = {"LABELGUARD_ACTION": "raise", "LABELGUARD_MODE": mode, "LG_EMB_STEP": step}
    if step == "eager":
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    rc, obs, ev, err = spawn(ctx, tag, "embedding_step", env, timeout=100, wrap=wrap)
    if obs is None:
        return "FAIL", "child rc=%s: %s" % (rc, err[-300:])
    text = open(log, errors="replace").read() if san and os.path.exists(log) else ""
    bad_access = [ln for ln in text.splitlines() if "Invalid __global__" in ln]
    r = obs["bad"]
    viol = of(ev, "violation")
    detail = "memcheck %s; raised %s: %r; violation outcomes %s" % (
        "off (no compute-sanitizer)" if not san else "%d invalid accesses" % len(bad_access),
        r.get("type"), r.get("text", "")[:160], [v.get("outcome") for v in viol])
    if bad_access or "illegal memory access" in r.get("text", ""):
        return "FAIL", detail + "; " + "; ".join(bad_access[:2])
    if not r.get("raised") or not viol:
        return "FAIL", detail
    if step == "eager" and (obs["grad_written"] or "labelguard" not in r.get("text", "")
                            or str(EMB_BAD) not in r.get("text", "") or obs["after"].get("raised")):
        return "FAIL", detail + "; grad written %s, after %s" % (obs["grad_written"], obs["after"])
    if step == "graph" and viol[0].get("outcome") != "launched":
        return "FAIL", detail
    return "PASS", detail


def case_embedding_async(ctx):
    return embedding_step(ctx, "eager", "async")


def case_embedding_graph(ctx):
    return embedding_step(ctx, "graph", "sync")


def case_compiled(ctx):
    script = os.path.join(HERE, "compiled_gpu.py")
    if ctx.fake:
        return "SKIP", "Triton needs a GPU (GPU-free: tests/torch-fake/test_compiled*.sh)"
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # compiled_gpu.py runs each case under `labelguard run` itself
    cases = os.environ.get("LG_GPU_COMPILED_CASES", "default,reduce,mask,off")
    limit = 240 + (600 if "gpt2" in cases.split(",") else 0)  # gpt2 compiles a 12-layer model twice
    try:
        p = subprocess.run([ctx.python, script, "--lib", ctx.lib, "--out", os.path.join(ctx.workdir, "compiled"),
                            "--cases", cases], env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "FAIL", "timeout after %ds" % limit
    if p.returncode == 77:
        return "SKIP", (p.stdout.strip().splitlines() or ["no GPU or no Triton"])[-1]
    lines = p.stdout.strip().splitlines()
    fails = [ln for ln in lines if ln.startswith("FAIL")]
    tail = (lines or [p.stderr[-300:]])[-1]
    return ("PASS" if p.returncode == 0 else "FAIL"), "; ".join(fails[:3] + [tail])[:400]


CASES = [("start_event", case_start_event), ("start_newest", case_start_newest),
         ("graph_reuse", case_graph_reuse), ("replay_text_sync", case_replay_text_sync),
         ("replay_text_async", case_replay_text_async), ("index_cost", case_index_cost),
         ("bce_cost", case_bce_cost), ("bce_graph", case_bce_graph),
         ("hooks_cupti", case_hooks_cupti), ("profiler", case_profiler), ("async_exit", case_async_exit),
         ("ring_pressure", case_ring_pressure),
         ("mask_full", case_mask_full), ("capture_logits", case_capture_logits),
         ("late_enable", case_late_enable), ("attach", case_attach), ("split_launch", case_split_launch),
         ("enable_early", case_enable_early), ("enable_fork", case_enable_fork), ("attach_busy", case_attach_busy),
         ("profiler_enable", case_profiler_enable), ("threads_mask", case_threads_mask),
         ("graph_into", case_graph_into),
         ("compiled", case_compiled), ("embedding_async", case_embedding_async),
         ("embedding_graph", case_embedding_graph), ("index_put_acc", case_index_put_acc),
         ("assert_async", case_assert_async), ("sampling", case_sampling),
         ("unpool", case_unpool), ("bernoulli", case_bernoulli), ("device_assert", case_device_assert),
         ("compiled_assert", case_compiled_assert)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "liblabelguard.so"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--fake", action="store_true", help="real torch on the test double (GPU-free subset)")
    ap.add_argument("--out")
    ap.add_argument("--workdir", default="gpu-path-work")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("-j", type=int, default=4)
    args = ap.parse_args()
    if args.child:
        run_child(args.child)
        return 0
    ctx = Ctx(args)
    os.makedirs(ctx.workdir, exist_ok=True)
    cases = CASES
    if args.only:
        want = set(args.only.split(","))
        unknown = want - {n for n, _ in CASES}
        if unknown:
            print("gpu_path: unknown case(s) %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
        cases = [c for c in CASES if c[0] in want]
    results = {}

    def one(item):
        name, fn = item
        t0 = time.time()
        try:
            status, detail = fn(ctx)
        except Exception as e:  # noqa: BLE001  (a runner fault is a FAIL of that case, not a crash)
            status, detail = "FAIL", "runner error: %s: %s" % (type(e).__name__, e)
        return name, status, detail, time.time() - t0

    with cf.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for name, status, detail, secs in ex.map(one, cases):
            results[name] = {"status": status, "detail": detail, "seconds": round(secs, 1)}
            print("%-4s %-18s %s" % (status, name, detail), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"cases": results, "fake": ctx.fake}, f, indent=1)
    failed = [n for n, r in results.items() if r["status"] == "FAIL"]
    print("gpu-path: %d passed, %d failed, %d skipped" % (
        sum(r["status"] == "PASS" for r in results.values()), len(failed),
        sum(r["status"] == "SKIP" for r in results.values())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
