#!/usr/bin/env python3
"""cases.py: real PyTorch training loops with a bad label at a known step, run on the runtime
test double (build/torch-python) and judged against what a GPU would do and what labelguard
promises (docs/guide.md "Reading a report", DESIGN.md section 4).

  build/torch-python tests/torch-fake/cases.py --mode plain|raise|mask|async --out DIR [--only A,B]

Called by tests/torch-fake/test_{plain,raise,mask,async}.sh, which set LD_PRELOAD and
LABELGUARD_ACTION / LABELGUARD_MODE / LABELGUARD_LOG for the mode (plain: no library). This
process imports torch once and forks one child per case before any CUDA call, so a case that
kills its CUDA context (plain) costs a fork, not an import, and each case's JSONL is its own
file (`<host>-<child pid>.jsonl`). The child runs the loop and writes DIR/CASE.json; the parent
then judges it with the child's log and prints one `ok:` or `FAIL:` line per check. Exit 0 when
every check passed.

Under the double only the NLL kernels compute (tests/torch-fake/README); every other kernel is
a no-op. So labels and the NLLLoss inputs are made on the CPU and copied (copies are real),
models are elementwise (no cuBLAS), and a loss value is compared with the CPU only where the
NLL kernel's own inputs are real (NLLLoss on log-probabilities made on the CPU).

Cases: CrossEntropyLoss and NLLLoss, reduction mean/sum/none, 1-D, 4-D segmentation with void
255 and its ignore_index=255 control, uint8 targets, class weights, label smoothing, a -100
padding control, a bad batch deep in a run through pinned memory and non_blocking copies, the
loss in a Python worker thread, and two ranks (RANK/LOCAL_RANK/WORLD_SIZE) whose logs
`labelguard report` merges.
"""
import argparse
import json
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import jsonl_check  # noqa: E402  (the log schema check the e2e tests use)

REAL_ASSERT = "device-side assert triggered"
# An asynchronous double (FAKECUDA_ASYNC_US, the async:* reruns of tests/run.sh): an async
# verdict is due when the stream reaches the check, as on a GPU, so it is read later than the
# loss call. By then autograd may have launched the loss's backward on the bad labels (on a
# sanitized copy, checked in turn: a second, masked violation, whose error autograd's thread
# meets at its next launch), and the Python stack is where it was read. Which thread meets its
# verdict first is the scheduler's choice, as on a GPU that runs ahead: the main thread's
# forward error (then autograd's comes in the next step), or autograd's backward error inside
# the bad step's backward() (then the main thread's forward error comes at its next sync, the
# first labels.cpu()). Both are legal and each is judged as a whole story (judge_case).
LAGGING = os.environ.get("FAKECUDA_ASYNC_US", "0") not in ("", "0")
SAMPLES = 16          # LABELGUARD_SAMPLES default: pairs kept per event
# A hang guard per case, far above the slowest case (pinned_deep's 150 steps on the lagging
# double, on two loaded cores): it only turns a hang into output. Cases run at most
# nproc + 1 at a time, so one case's time does not grow with the number of cases.
CASE_TIMEOUT_S = int(os.environ.get("LG_CASE_TIMEOUT_S", "150"))


def loss_line():
    """Line number of the loss call in Case.loss_fn (the one python_stack must name)."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# <- the loss call"):
                return n
    raise RuntimeError("loss call marker not found")


class Case:
    """One training loop. Labels come from labels(step) on the CPU; bad_step's batch gets
    `bad` (flat index -> value) written into it. kernel/bwd_kernel: the NLL kernels real torch
    launches for this loss; cause: labelguard's expected likely cause (None: not judged)."""
    loss = "ce"                 # ce: CrossEntropyLoss on x*w; nll: NLLLoss on CPU-made log-probs
    kw = {}
    n_classes = 10
    shape = (64,)               # target shape; input is (N, C, *rest) or (C,) for 1-D
    dtype = torch.long
    bad = {3: 10, 17: 10}
    bad_step = 3
    steps = 6
    kernel = "nll_loss_forward_reduce_cuda_kernel_2d"
    bwd_kernel = "nll_loss_backward_reduce_cuda_kernel_2d"
    cause = None
    pinned = False              # labels via pin_memory() + .to(non_blocking=True), as a DataLoader
    thread = False              # the bad step's loss runs in a Python worker thread
    rank = None                 # RANK/LOCAL_RANK/WORLD_SIZE=2 in the child's environment
    refused = None              # torch itself refuses the loss call with this text (every step)
    script = None               # instead of the loop: this script, run as __main__ (judge_script)
    ignore = -100

    def __init__(self):
        self.gen = torch.Generator().manual_seed(1234)
        self.ignore = self.kw.get("ignore_index", -100)
        self.w = torch.nn.Parameter(torch.ones(self.n_classes, device="cuda"))
        self.weight = self.kw.get("weight")

    def labels(self, step):
        t = torch.randint(0, self.n_classes, self.shape, generator=self.gen)
        if step == self.bad_step:
            for i, v in self.bad.items():
                t.view(-1)[i] = v
        return t.to(self.dtype)

    def inputs(self):
        """CPU log-probabilities (N, C, *rest), or (C,) for a 1-D target."""
        if self.shape == ():
            x = torch.randn(self.n_classes, generator=self.gen)
            return x.log_softmax(0)
        x = torch.randn((self.shape[0], self.n_classes) + self.shape[1:], generator=self.gen)
        return x.log_softmax(1)

    def to_cuda(self, t):
        if self.pinned:
            return t.pin_memory().to("cuda", non_blocking=True)
        return t.to("cuda")

    def kwargs(self):
        kw = dict(self.kw)
        if "weight" in kw:
            kw["weight"] = kw["weight"].to("cuda")
        return kw

    def step(self, i, rec):
        t_cpu = self.labels(i)
        x_cpu = self.inputs()
        rec["labels_cpu"] = t_cpu
        if i == self.bad_step:
            rec["bad_labels"] = t_cpu.view(-1).tolist()
        t = self.to_cuda(t_cpu)
        rec["labels"] = t
        x = self.to_cuda(x_cpu)
        if self.loss == "ce":
            x = x * self.w.view((-1,) + (1,) * (x.dim() - 2)) if x.dim() > 1 else x * self.w
            fn = F.cross_entropy
        else:
            x.requires_grad_(True)
            fn = F.nll_loss
        rec["phase"] = "loss"
        loss = self.loss_fn(fn, x, t)
        rec["phase"] = "backward"
        self.w.grad = None
        (loss.sum() if loss.dim() else loss).backward()
        # SGD by hand: torch.optim's constructor imports torch._dynamo, seconds per process.
        if self.w.grad is not None:
            with torch.no_grad():
                self.w.sub_(0.1 * self.w.grad)
        rec["phase"] = "sync"
        value = loss.detach().cpu()  # a sync point, like a loop's logging: errors surface here
        if i == self.bad_step and self.loss == "nll":
            masked = t_cpu.to(torch.long).clone()
            masked[(masked != self.ignore) & ((masked < 0) | (masked >= self.n_classes))] = self.ignore
            kw = dict(self.kw)
            ref = F.nll_loss(x_cpu, masked, **kw)
            if masked.dim() == 0 and masked.item() == self.ignore:
                # One ignored label: the CUDA 1-D kernel writes 0 (Loss.cu: "If the only element
                # was omitted, we get 0"), the CPU divides by a total weight of 0.
                ref = torch.zeros(())
            rec["mask_value"] = {"got": value.tolist(), "expected": ref.tolist(),
                                 "err": float((value.double() - ref.double()).abs().max())}

    def loss_fn(self, fn, x, t):
        return fn(x, t, **self.kwargs())  # <- the loss call

    @classmethod
    def expected(cls, labels):
        """From the bad step's labels as drawn on the CPU: the offending (index, value) pairs in
        index order, and min and max over the labels that are not ignore_index."""
        ignore = cls.kw.get("ignore_index", -100)
        kept = [v for v in labels if v != ignore]
        pairs = [(i, v) for i, v in enumerate(labels) if v != ignore and not 0 <= v < cls.n_classes]
        return pairs, min(kept), max(kept)

    @classmethod
    def count(cls):
        n = 1
        for d in cls.shape:
            n *= d
        return n


def case(name, **attrs):
    return type(name, (Case,), dict(attrs, name=name))


W10 = torch.linspace(0.5, 2.0, 10)
CASES = [c for c in (
    case("ce_mean", bad={3: 10, 17: 10, 40: 11}, cause="head_too_small"),
    case("ce_sum", kw={"reduction": "sum"}, bad={5: -1, 6: -1}, cause="negative_unknown"),
    case("ce_none", kw={"reduction": "none"}, bad={0: 12}, kernel="nll_loss_forward_no_reduce_cuda_kernel",
         bwd_kernel="nll_loss_backward_no_reduce_cuda_kernel"),
    case("nll_mean", loss="nll", bad={2: 10, 9: 10, 63: 10}),
    case("nll_none", loss="nll", kw={"reduction": "none"}, bad={1: -5, 30: 99},
         kernel="nll_loss_forward_no_reduce_cuda_kernel", bwd_kernel="nll_loss_backward_no_reduce_cuda_kernel"),
    case("nll_1d", loss="nll", shape=(), bad={0: 10}, kernel="nll_loss_forward_reduce_cuda_kernel_1d",
         bwd_kernel="nll_loss_backward_reduce_cuda_kernel_1d"),
    case("seg_void255", shape=(2, 16, 16), n_classes=21, bad={i: 255 for i in range(100, 140)},
         kernel="nll_loss2d_forward_kernel", bwd_kernel="nll_loss2d_backward_kernel", cause="void_255"),
    case("seg_ignore255", shape=(2, 16, 16), n_classes=21, kw={"ignore_index": 255},
         bad={i: 255 for i in range(100, 140)}, kernel=None),
    # Real torch takes uint8 targets for nll_loss but not for nll_loss2d: it refuses them on the
    # CPU side, before any kernel, in every mode (so labelguard has nothing to see).
    case("seg_uint8_refused", loss="nll", shape=(2, 8, 8), n_classes=21, dtype=torch.uint8, bad={7: 200},
         kernel=None, refused="expected scalar type Long but found Byte"),
    case("nll_uint8", loss="nll", dtype=torch.uint8, bad={4: 200}),
    case("ce_weights", kw={"weight": W10}, bad={8: 10}),
    case("nll_weights", loss="nll", kw={"weight": W10}, bad={8: 10, 9: 13}),
    case("ce_smoothing", kw={"label_smoothing": 0.1}, bad={20: 10}),
    case("pad_minus100", bad={i: -100 for i in range(40, 64)}, kernel=None),
    case("pinned_deep", pinned=True, steps=150, bad_step=140, bad={31: 10}),
    case("thread", thread=True, bad={12: 10}),
    # Two ranks of one job with the same bug (a head one class short), as torchrun starts them:
    # each writes its own -rankR log, and `labelguard report` must merge them into one problem.
    case("rank0", rank=0, bad={3: 10}, cause="head_too_small"),
    case("rank1", rank=1, bad={7: 10, 9: 11}, cause="head_too_small"),
    # `labelguard demo`'s real-PyTorch script as it is: 60 steps, step 37's labels 1-based.
    case("demo", script=os.path.join(ROOT, "python", "labelguard", "demo_torch.py")),
)]
CASES = {c.name: c for c in CASES}


def run_child(cls, out):
    """In the forked child: the loop, then what is still possible after its first error."""
    res = {"case": cls.name, "pid": os.getpid(), "completed": [], "exception": None, "post": {}}
    signal.alarm(CASE_TIMEOUT_S)
    if cls.script:
        sys.argv = [cls.script]
        try:
            runpy.run_path(cls.script, run_name="__main__")
            res["exit"] = 0
        except SystemExit as e:
            res["exit"] = e.code
        with open(out, "w") as f:
            json.dump(res, f)
        return
    t0 = time.time()
    sc = cls()
    res["setup_s"] = round(time.time() - t0, 3)
    for i in range(sc.steps):
        rec = {"phase": "start"}
        t_step = time.time()
        err = []
        try:
            if sc.thread and i == sc.bad_step:
                def work():
                    try:
                        sc.step(i, rec)
                    except Exception as e:  # noqa: BLE001  (judged by the parent)
                        err.append(e)
                th = threading.Thread(target=work, name="loss-worker")
                th.start()
                th.join()
                if err:
                    raise err[0]
            else:
                sc.step(i, rec)
        except Exception as e:  # noqa: BLE001
            if res["exception"] is None:
                res["exception"] = {"step": i, "phase": rec["phase"], "type": type(e).__name__,
                                    "text": str(e), "in_thread": bool(err)}
            if i == sc.bad_step:
                res["post"] = after_error(rec)
            continue
        finally:
            if "bad_labels" in rec:
                res["bad_labels"] = rec["bad_labels"]
        res["completed"].append(i)
        res["step_s"] = res.get("step_s", []) + [round(time.time() - t_step, 3)]
        if "mask_value" in rec:
            res["mask_value"] = rec["mask_value"]
    with open(out, "w") as f:
        json.dump(res, f)


def after_error(rec):
    """labels.cpu() on the bad step's labels, and one fresh CUDA op. When the first labels.cpu()
    raises labelguard's error (a verdict still due to this thread: the forward's, when
    autograd's backward error came first), its text is kept and labels.cpu() is tried once more."""
    post = {"labels_cpu": None}
    if "labels" in rec:
        for attempt in range(2):
            try:
                got = rec["labels"].cpu()
                post["labels_cpu"] = bool(torch.equal(got, rec["labels_cpu"]))
            except Exception as e:  # noqa: BLE001
                post["labels_cpu"] = False
                post["labels_cpu_error"] = str(e)[:1000]
                if attempt == 0 and "labelguard" in str(e):
                    post["labels_cpu_first_error"] = post.pop("labels_cpu_error")
                    continue
            break
    try:
        torch.arange(4).to("cuda").cpu()
        post["cuda_op"] = True
    except Exception as e:  # noqa: BLE001
        post["cuda_op"] = False
        post["cuda_op_error"] = str(e)[:300]
    return post


def fork_case(cls, d, env=None):
    """Starts one case in a forked child; returns its pid. The child's stdout/stderr go to
    d/CASE.out (labelguard's stderr block lands there)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for k, v in (env or {}).items():
                os.environ[k] = v
            fd = os.open(os.path.join(d, cls.name + ".out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            run_child(cls, os.path.join(d, cls.name + ".json"))
            code = 0
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def run_cases(names, d):
    """Runs the cases, at most nproc + 1 at a time (more only share the same cores, and each
    then runs slower: its hang guard must not depend on how many cases there are). Returns
    ({case: pid}, {case: exit code})."""
    limit = len(os.sched_getaffinity(0)) + 1
    queue, running, pids, rcs = list(names), {}, {}, {}
    while queue or running:
        while queue and len(running) < limit:
            n = queue.pop(0)
            r = CASES[n].rank
            env = None if r is None else {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2"}
            pids[n] = fork_case(CASES[n], d, env)
            running[pids[n]] = n
        pid, status = os.wait()
        if pid in running:
            rcs[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    return pids, rcs


def logs_of(logdir, pid):
    """The schema-checked events of one child's log files (by pid), in order."""
    ev = []
    if not logdir or not os.path.isdir(logdir):
        return ev
    for fn in sorted(os.listdir(logdir)):
        if not fn.endswith(".jsonl") or "-%d" % pid not in fn:
            continue
        stem = fn[:-6]
        if not (stem.endswith("-%d" % pid) or "-%d-rank" % pid in stem):
            continue
        path = os.path.join(logdir, fn)
        with open(path, "rb") as f:
            data = f.read()
        if data and not data.endswith(b"\n"):
            jsonl_check.fail(path, "last line is not terminated (torn write)")
        for n, line in enumerate(data.split(b"\n")[:-1], 1):
            e = json.loads(line)
            jsonl_check.check_event(e, "%s:%d" % (path, n))
            e["_file"] = fn
            ev.append(e)
    return ev


class Judge:
    def __init__(self):
        self.fails = 0

    def check(self, what, cond, detail=""):
        if cond:
            print("ok: " + what)
        else:
            self.fails += 1
            print("FAIL: %s%s" % (what, (" -- " + detail) if detail else ""))
        return cond


def judge_case(j, cls, mode, res, rc, events, d):
    n = cls.name
    ignore = cls.kw.get("ignore_index", -100)
    if not j.check("%s: child exited normally (rc 0)" % n, rc == 0 and res is not None,
                   "rc %s; its output: %s" % (rc, child_output(d, n))):
        return
    if cls.script:
        return judge_script(j, cls, mode, res, events, child_output(d, n, 1 << 20))
    exc = res["exception"]
    pairs, lo, hi = cls.expected(res["bad_labels"]) if "bad_labels" in res else ([], None, None)
    if cls.kernel is not None and not j.check("%s: the bad step's labels hold the bad values %s" % (n, short(sorted(cls.bad.items()))),
                                              all(res.get("bad_labels", [])[i] == v for i, v in cls.bad.items())
                                              and pairs, str(res.get("bad_labels"))[:200]):
        return
    viol = [e for e in events if e["event"] == "violation"]
    bad_case = cls.kernel is not None
    steps = cls.steps
    if cls.refused:
        j.check("%s: torch refuses the loss call at step 0 (%s)" % (n, cls.refused),
                exc is not None and exc["step"] == 0 and exc["phase"] == "loss" and cls.refused in exc["text"]
                and not res["completed"], str(exc)[:300])
        j.check("%s: no violation event" % n, not viol, str(viol)[:300])
        return
    if not bad_case:
        j.check("%s: clean control: every step ran, no exception" % n,
                exc is None and len(res["completed"]) == steps, str(exc))
        j.check("%s: clean control: no violation event" % n, not viol, str([v["bad"] for v in viol]))
        return
    if mode == "plain":
        j.check("%s: plain: the real device-side assert at the bad step %d" % (n, cls.bad_step),
                exc is not None and REAL_ASSERT in exc["text"] and exc["step"] == cls.bad_step,
                str(exc)[:400])
        post = res["post"]
        j.check("%s: plain: later CUDA calls fail (context lost)" % n,
                post.get("cuda_op") is False and post.get("labels_cpu") is False, str(post)[:400])
        j.check("%s: plain: no step after the assert trains" % n,
                res["completed"] == list(range(cls.bad_step)), str(res["completed"]))
        return
    # with labelguard
    fwd = [v for v in viol if v["direction"] == "forward"]
    bwd = [v for v in viol if v["direction"] == "backward"]
    if mode in ("raise", "async"):
        # sync: the launch is refused, so the loss call itself raises; async: the verdict is read
        # at the next hook point, which must still be inside the bad step.
        ok = j.check("%s: %s: an exception at the bad step %d, %s" % (
                     n, mode, cls.bad_step, "in its loss call" if mode == "raise" else "within the step"),
                     exc is not None and exc["step"] == cls.bad_step and (mode == "async" or exc["phase"] == "loss"),
                     str(exc)[:400])
        if ok:
            text, post = exc["text"], res["post"]
            first = "target[%d] = %d" % pairs[0]

            def names(t, kernel):
                return "labelguard" in t and kernel in t and first in t and REAL_ASSERT not in t
            lg_error = exc["type"] in ("RuntimeError", "AcceleratorError")
            if mode == "async" and LAGGING and exc["phase"] == "backward" and names(text, cls.bwd_kernel):
                # autograd's thread met its backward verdict first: then the forward's error
                # is still due to this thread, and comes at its next sync, the first labels.cpu().
                j.check("%s: async: backward first: RuntimeError with labelguard's text naming %s and %s, raised by backward()"
                        % (n, cls.bwd_kernel, first), lg_error, text[:500])
                j.check("%s: async: backward first: then nothing more is due: the forward read the same labels and is "
                        "not reported again (one bad batch, one error)" % n,
                        "labels_cpu_first_error" not in post, str(post)[:800])
            else:
                j.check("%s: %s: RuntimeError with labelguard's text naming %s and %s" % (n, mode, cls.kernel, first),
                        lg_error and names(text, cls.kernel), text[:500])
                j.check("%s: %s: nothing more is due: the first labels.cpu() works" % (n, mode),
                        "labels_cpu_first_error" not in post, str(post)[:800])
            j.check("%s: %s: labels.cpu() works after it and shows the bad labels" % (n, mode),
                    post.get("labels_cpu") is True and post.get("cuda_op") is True, str(post)[:800])
            if cls.thread:
                j.check("%s: %s: raised in the worker thread" % (n, mode), exc["in_thread"])
        late = mode == "async" and LAGGING
        done, others = set(res["completed"]), set(range(steps)) - {cls.bad_step}
        j.check("%s: %s: every other step trained%s" % (n, mode, " (the next one may meet the backward's error)" if late else ""),
                res["completed"] == sorted(others) if not late
                else cls.bad_step not in done and others - {cls.bad_step + 1} <= done, str(res["completed"]))
        # One bad batch, one report: the forward's, or on a lagging device the backward's when
        # autograd's thread read its verdict first; the other half is counted, not reported.
        j.check("%s: %s: exactly one violation, forward, %s%s" % (n, mode, cls.kernel, " (or the backward's, read first)" if late else ""),
                len(viol) == 1 and (len(fwd) == 1 and fwd[0]["kernel"] == cls.kernel
                                    or late and len(bwd) == 1 and bwd[0]["kernel"] == cls.bwd_kernel),
                str([(v["kernel"], v["direction"]) for v in viol]))
        if mode == "raise" and fwd:
            j.check("%s: raise: outcome blocked" % n, fwd[0]["outcome"] == "blocked", fwd[0]["outcome"])
    elif mode == "mask":
        j.check("%s: mask: every step ran, no exception" % n,
                exc is None and res["completed"] == list(range(steps)), str(exc)[:300])
        j.check("%s: mask: one violation, the forward's (%s), masked; its backward (%s) masked too, not reported again"
                % (n, cls.kernel, cls.bwd_kernel),
                len(viol) == 1 and len(fwd) == 1 and fwd[0]["kernel"] == cls.kernel and fwd[0]["outcome"] == "masked"
                and fwd[0].get("backward", "").startswith("masked too"),
                str([(v["kernel"], v["direction"], v["outcome"], v.get("backward")) for v in viol]))
        if cls.loss == "nll":
            mv = res.get("mask_value")
            j.check("%s: mask: the loss equals the CPU's with the bad labels ignored" % n,
                    mv is not None and mv["err"] <= 1e-5 * max(1.0, abs_max(mv["expected"])), str(mv)[:300])
    for v in fwd[:1]:
        t, b = v["target"], v["bad"]
        want_ignore = ignore
        if mode == "mask" and cls.dtype == torch.uint8 and ignore == -100:
            want_ignore = None  # rewritten to a free value: judged below
        j.check("%s: %s %s: n_classes %d, ignore_index %s, count %d, dtype %s" % (
                n, mode, v["direction"], cls.n_classes, ignore, cls.count(), dtype_name(cls.dtype)),
                t["n_classes"] == cls.n_classes and t["count"] == cls.count()
                and t["dtype"] == dtype_name(cls.dtype) and (want_ignore is None or t["ignore_index"] == want_ignore)
                and (want_ignore is not None or t["ignore_index"] in (-100, 255)), str(t))
        got = [(s["index"], s["value"]) for s in b["samples"]]
        j.check("%s: %s %s: the offending pairs exactly %s" % (n, mode, v["direction"], short(pairs)),
                got == pairs[:SAMPLES] and b["count"] == len(pairs)
                and b["min"] == lo and b["max"] == hi,
                "got %s, count %s, min %s, max %s; want min %s, max %s" % (short(got), b["count"], b["min"], b["max"], lo, hi))
        if cls.cause:
            j.check("%s: %s: cause %s" % (n, mode, cls.cause), v["cause"] == cls.cause, v["cause"])
        if v["direction"] == "forward" and mode == "async":
            # The verdict is read later (on a lagging device, steps later): the report still
            # names the loss call, recorded at the launch, and says where the verdict was found.
            line = loss_line()
            frames = [(os.path.basename(f["file"]), f["line"]) for f in v["python_stack"]]
            j.check("%s: %s: python_stack names cases.py:%d (the loss call), verdict_read_at where it was read"
                    % (n, mode, line), ("cases.py", line) in frames and isinstance(v.get("verdict_read_at"), dict),
                    str(v["python_stack"])[:600])
            at = "  launched at %s:%d in loss_fn; found " % (os.path.abspath(__file__), line)
            j.check("%s: %s: the stderr report says %r" % (n, mode, at.strip() + "..."),
                    any(l.startswith(at) for l in child_output(d, n, 1 << 20).splitlines()), child_output(d, n)[-600:])
        elif v["direction"] == "forward":
            line = loss_line()
            frames = [(os.path.basename(f["file"]), f["line"]) for f in v["python_stack"]]
            j.check("%s: %s: python_stack names cases.py:%d (the loss call)" % (n, mode, line),
                    ("cases.py", line) in frames, str(v["python_stack"])[:600])
            at = "  at %s:%d in loss_fn   (python)" % (os.path.abspath(__file__), line)
            j.check("%s: %s: the stderr report says %r" % (n, mode, at.strip()),
                    at in child_output(d, n, 1 << 20).splitlines(), child_output(d, n)[-600:])


def judge_script(j, cls, mode, res, events, out):
    """python/labelguard/demo_torch.py: its own story lines (as on a GPU), and labelguard's events."""
    n, kernel = cls.name, Case.kernel
    lines = out.splitlines()

    def has(line):
        return j.check("%s: %s: prints %r" % (n, mode, line), line in lines, out[-800:])
    viol = [e for e in events if e["event"] == "violation"]
    if mode == "plain":
        j.check("%s: plain: exit status 1" % n, res.get("exit") == 1, str(res.get("exit")))
        has("step 37: RuntimeError: CUDA error: %s" % REAL_ASSERT)
        has("    (raised at loss.item(), long after the kernel that failed)")
        has("    => the CUDA context is dead: nothing on the GPU can be read any more.")
        has("    => the job ends here, after 37 of 60 steps.")
        return
    j.check("%s: %s: exit status 0" % (n, mode), res.get("exit") == 0, str(res.get("exit")))
    fwd = [v for v in viol if v["direction"] == "forward"]
    if mode == "mask":
        has("finished: 60 of 60 steps trained, 0 skipped.")
        j.check("%s: mask: no RuntimeError" % n, "RuntimeError" not in out, out[-500:])
        j.check("%s: mask: one violation, the forward's, masked (its backward masked too, not reported again)" % n,
                len(viol) == 1 and len(fwd) == 1 and all(v["outcome"] == "masked" for v in viol),
                str([(v["kernel"], v["outcome"]) for v in viol]))
        printed = None
    else:
        first = [l for l in lines if l.startswith("step 37: RuntimeError: ")]
        j.check("%s: %s: step 37 raises labelguard's RuntimeError naming %s" % (n, mode, kernel),
                len(first) == 1 and first[0].startswith("step 37: RuntimeError: CUDA error: labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints below): %s: bad label target[" % kernel),
                str(first) or out[-500:])
        if mode == "raise":
            has("    (raised at the loss call, F.cross_entropy)")
        has("    inspecting the batch: labels.cpu() works, the CUDA context is alive:")
        has("finished: 59 of 60 steps trained, 1 skipped.")
        printed = [(int(a), int(b)) for a, b in re.findall(r"^      labels\[(\d+)\] = (-?\d+)  \(n_classes = 10\)$", out, re.M)]
        j.check("%s: %s: exactly one violation, forward, blocked" % (n, mode),
                len(viol) == 1 and len(fwd) == 1 and (mode == "async" or fwd[0]["outcome"] == "blocked"),
                str([(v["kernel"], v["outcome"]) for v in viol]))
    for v in fwd[:1]:
        b = v["bad"]
        got = [(s["index"], s["value"]) for s in b["samples"]]
        # 1-based labels: every bad one is 10, and the batch spans 1..10.
        j.check("%s: %s: kernel %s, cause one_based, labels 1..10, every offending value 10" % (n, mode, kernel),
                v["kernel"] == kernel and v["cause"] == "one_based" and (b["min"], b["max"]) == (1, 10)
                and got and all(x == 10 for _, x in got) and v["target"]["n_classes"] == 10, json.dumps(b)[:300])
        if printed is not None:
            j.check("%s: %s: the offending pairs are those labels.cpu() shows, %s" % (n, mode, short(printed)),
                    got == printed[:SAMPLES] and b["count"] == len(printed), "got %s count %d" % (short(got), b["count"]))
        with open(cls.script) as f:
            line = next(i for i, l in enumerate(f, 1) if "cross_entropy(logits_of(" in l)
        frames = [(os.path.basename(f["file"]), f["line"]) for f in v["python_stack"]]
        if mode == "async" and LAGGING:
            j.check("%s: %s: python_stack names demo_torch.py (where the verdict was read)" % (n, mode),
                    any(f == "demo_torch.py" for f, _ in frames), str(frames))
        else:
            j.check("%s: %s: python_stack names demo_torch.py:%d (the loss call)" % (n, mode, line),
                    ("demo_torch.py", line) in frames, str(frames))


def judge_report(j, mode, files, rank_events):
    """`labelguard report --json` over the two ranks' logs: one problem seen on both.
    rank_events: each rank's own events (rank -> list), from which what the report must say
    about each kernel is computed: on a lagging device each rank decides for itself whether its
    backward was launched on the bad labels before the forward's verdict stopped it."""
    p = subprocess.run([os.path.join(ROOT, "scripts", "labelguard"), "report", "--json"] + files,
                       capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
    try:
        r = json.loads(p.stdout)
    except ValueError:
        j.check("report --json over the rank logs parses", False, p.stdout[-300:] + p.stderr[-300:])
        return
    j.check("report: exit 1 (problems found)", p.returncode == 1, "rc %d %s" % (p.returncode, p.stderr[-300:]))
    probs = {q["kernel"]: q for q in r.get("problems", [])}
    fwd, bwd = Case.kernel, Case.bwd_kernel

    def ranks_with(k):
        return sorted(r for r, ev in rank_events.items()
                      if any(e["event"] == "violation" and e["kernel"] == k for e in ev))
    # one bad batch, one report: the forward's, or, in async mode on a lagging device, the
    # backward's on the ranks whose autograd thread read its verdict first
    if mode == "async" and LAGGING and ranks_with(bwd):
        want = [fwd, bwd]
    else:
        want = [fwd]
    j.check("report: both ranks' own logs have the forward violation", ranks_with(fwd) == [0, 1],
            str({r: [(e["kernel"], e["direction"]) for e in ev if e["event"] == "violation"] for r, ev in rank_events.items()}))
    ok = j.check("report: the two ranks' violations merge into one problem per kernel (%s)" % ", ".join(want),
                 sorted(probs) == sorted(want) and len(r.get("problems", [])) == len(want),
                 str([(q["kernel"], q["cause"]) for q in r.get("problems", [])]))
    if ok:
        for k in want:
            q = probs[k]
            ranks = ranks_with(k) if mode == "async" else [0, 1]
            counts = {}
            for r in ranks:
                for v in CASES["rank%d" % r].bad.values():
                    counts[v] = counts.get(v, 0) + 1
            values = sorted(({"value": v, "count": c} for v, c in counts.items()), key=lambda x: (-x["count"], x["value"]))
            j.check("report %s: ranks %s, %d processes, %d events, values %s" % (
                    k, ranks, len(ranks), len(ranks), ", ".join("%d x%d" % (x["value"], x["count"]) for x in values)),
                    q["ranks"] == ranks and len(q["processes"]) == len(ranks) and q["events"] == len(ranks)
                    and sorted(q["values"], key=lambda x: (-x["count"], x["value"])) == values,
                    json.dumps({x: q.get(x) for x in ("ranks", "processes", "events", "values")}))
        site = probs[fwd].get("call_site") or {}
        # late verdicts (async mode) name their launch too
        j.check("report: the call site is cases.py:%d, the user's line (torch's own frames skipped)" % loss_line(),
                site.get("file") == os.path.abspath(__file__) and site.get("line") == loss_line(), str(site))


def abs_max(x):
    return max(abs(v) for v in x) if isinstance(x, list) else abs(x)


def dtype_name(dt):
    return {torch.long: "int64", torch.uint8: "uint8"}[dt]


def short(pairs):
    s = ", ".join("(%d, %d)" % p for p in pairs[:4])
    return "[%s%s]" % (s, ", ... %d in all" % len(pairs) if len(pairs) > 4 else "")


def child_output(d, name, n=1500):
    path = os.path.join(d, name + ".out")
    return open(path, errors="replace").read()[-n:] if os.path.exists(path) else "(none)"


def lib_loaded():
    with open("/proc/self/maps") as f:
        return "liblabelguard" in f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", required=True, choices=("plain", "raise", "mask", "async"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    j = Judge()
    want_lib = a.mode != "plain"
    if not j.check("labelguard %s in this process" % ("loaded" if want_lib else "not loaded"), lib_loaded() == want_lib):
        return 1
    if want_lib:
        j.check("LABELGUARD_ACTION/MODE match --mode %s" % a.mode,
                os.environ.get("LABELGUARD_ACTION") == ("mask" if a.mode == "mask" else "raise")
                and os.environ.get("LABELGUARD_MODE", "sync") == ("async" if a.mode == "async" else "sync"))
    logdir = os.environ.get("LABELGUARD_LOG")
    names = [n for n in CASES if not a.only or n in a.only.split(",")]
    t0 = time.time()
    rank_files = []
    rank_events = {}
    pids, rcs = run_cases(names, a.out)
    print("%d cases in %.1f s" % (len(names), time.time() - t0))
    for n in names:
        try:
            with open(os.path.join(a.out, n + ".json")) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = None
        events = logs_of(logdir, pids[n]) if want_lib else []
        judge_case(j, CASES[n], a.mode, res, rcs[n], events, a.out)
        if CASES[n].rank is not None and want_lib:
            j.check("%s: its log is <host>-<pid>-rank%d.jsonl" % (n, CASES[n].rank),
                    events and all(e["_file"].endswith("-%d-rank%d.jsonl" % (pids[n], CASES[n].rank))
                                   and e["rank"] == CASES[n].rank and e["local_rank"] == CASES[n].rank for e in events),
                    str(sorted({e["_file"] for e in events})))
            rank_files.extend(sorted({os.path.join(logdir, e["_file"]) for e in events}))
            rank_events[CASES[n].rank] = events
    if want_lib and rank_files:
        judge_report(j, a.mode, rank_files, rank_events)
    print("%d checks failed" % j.fails if j.fails else "all checks passed")
    return 1 if j.fails else 0


if __name__ == "__main__":
    sys.exit(main())
