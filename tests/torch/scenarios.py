#!/usr/bin/env python3
"""scenarios.py: one real PyTorch training scenario with a bad label at a known step.

Run by tests/torch/run_scenarios.py, one subprocess per (scenario, action), because a real
device-side assert kills the process's CUDA context. The parent sets LD_PRELOAD and the
LABELGUARD_* variables; this program does not know whether labelguard is loaded. It trains a
small model on synthetic data for a few steps, puts a bad label into the targets at step
BAD_STEP, and records what happened into --result (JSON): the exception (step, phase, type,
text), whether the context still works afterwards (torch.cuda.synchronize, .cpu(), one more
training step), and, for the masked loss, the value PyTorch computes on the CPU with the bad
labels set to ignore_index (what labelguard's `mask` must produce).

  scenarios.py NAME --result FILE [--device cuda|cpu] [--premask] [--steps N]
  scenarios.py --list

GPU-free check (on CPU PyTorch): `--device cpu --premask`
writes ignore_index over the bad labels itself, which is exactly what `mask` does, and so
proves that the expected-loss formulas (label smoothing, backward, reduction='none', uint8)
equal PyTorch's own result; a formula error makes mask_check fail there.
"""
import argparse
import json
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE = -100


class Scenario:
    """A training loop with one bad step. Subclasses set the shapes and the loss."""
    name = ""
    n_classes = 10
    batch = 64
    bad_step = 5
    bad_label = 10
    bad_positions = (3, 17)
    steps = 8
    dtype_t = torch.long
    tol = 1e-4
    loss_kw = {}

    def __init__(self, device, premask):
        self.device = device
        self.premask = premask
        self.gen = torch.Generator().manual_seed(1234)
        torch.manual_seed(1234)
        self.model = self.make_model().to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.mask_check = None

    def make_model(self):
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, self.n_classes))

    def make_input(self):
        return torch.randn(self.batch, 32, generator=self.gen)

    def make_target(self, step):
        t = torch.randint(0, self.n_classes, self.target_shape(), generator=self.gen)
        if step == self.bad_step:
            flat = t.view(-1)
            for p in self.bad_positions:
                flat[p] = self.bad_label
        return t

    def target_shape(self):
        return (self.batch,)

    def bad_mask(self, t):
        return (t != IGNORE) & ((t < 0) | (t >= self.n_classes))

    def masked(self, t):
        """Targets as labelguard's mask hands them to the kernel, in int64 for the CPU."""
        t = t.to(torch.long).clone()
        t[self.bad_mask(t)] = IGNORE
        return t

    def loss_fn(self, logits, t):
        return F.cross_entropy(logits, t, **self.loss_kw)

    def reduce(self, loss):
        return loss

    def reference(self, logits_cpu, t_cpu):
        """The loss PyTorch computes with the bad labels set to ignore_index."""
        return self.reduce(F.cross_entropy(logits_cpu.float(), self.masked(t_cpu), **self.loss_kw))

    def step(self, i, rec):
        x = self.make_input().to(self.device)
        t_cpu = self.make_target(i)
        t = t_cpu.to(self.device, self.dtype_t)
        if self.premask and i == self.bad_step:
            t = self.premasked(t)
        rec["phase"] = "forward"
        logits = self.model(x)
        loss = self.reduce(self.loss_fn(logits, t))
        rec["phase"] = "backward"
        self.opt.zero_grad()
        loss.backward()
        rec["phase"] = "optimizer"
        self.opt.step()
        rec["phase"] = "item"
        value = loss.item()  # a sync point, as a training loop's logging is: errors surface here
        if i == self.bad_step:
            ref = self.reference(logits.detach().cpu(), t_cpu).item()
            self.mask_check = {"got": value, "expected": ref, "abs_err": abs(value - ref),
                               "tol": self.tol * max(1.0, abs(ref)),
                               "ok": abs(value - ref) <= self.tol * max(1.0, abs(ref))}
        return value

    def premasked(self, t):
        """What the mask action hands the kernel: bad labels replaced by ignore_index (uint8:
        by a free value that the rewritten ignore_index names; here computed in int64)."""
        return self.masked(t.cpu()).to(self.device)

    def clean_step(self):
        """One more step with good labels: proves the context still trains."""
        saved = self.bad_step
        self.bad_step = -1
        try:
            self.step(10_000, {})
        finally:
            self.bad_step = saved


class CE2d(Scenario):
    name = "ce_2d"
    doc = "CrossEntropy on (N, C), label n_classes at a known step"


class CENone(Scenario):
    name = "ce_none"
    doc = "reduction='none' (per-sample losses, summed by the loop), label -1"
    bad_label = -1
    loss_kw = {"reduction": "none"}

    def reduce(self, loss):
        return loss.sum()


class NLLLogSoftmax(Scenario):
    name = "nll_logsoftmax"
    doc = "NLLLoss after log_softmax, one-based label n_classes"
    bad_label = 10

    def loss_fn(self, logits, t):
        return F.nll_loss(F.log_softmax(logits, dim=1), t)

    def reference(self, logits_cpu, t_cpu):
        return F.nll_loss(F.log_softmax(logits_cpu.float(), 1), self.masked(t_cpu))


class Seg255(Scenario):
    name = "seg_void255"
    doc = "segmentation (N, C, H, W) with void label 255 and the default ignore_index"
    n_classes = 21
    batch = 4
    bad_label = 255
    bad_positions = tuple(range(100, 164))  # a patch of void pixels

    def make_model(self):
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, self.n_classes, 1))

    def make_input(self):
        return torch.randn(self.batch, 3, 32, 32, generator=self.gen)

    def target_shape(self):
        return (self.batch, 32, 32)


class Uint8(Scenario):
    name = "uint8"
    doc = "uint8 targets (NLL dispatches Byte), label 200"
    dtype_t = torch.uint8
    bad_label = 200


class LabelSmoothing(Scenario):
    name = "label_smoothing"
    doc = "CrossEntropy with label_smoothing=0.1"
    loss_kw = {"label_smoothing": 0.1}

    def reference(self, logits_cpu, t_cpu):
        # PyTorch's cross_entropy with label smoothing (aten Loss.cpp) is
        #   (1 - eps) * nll_loss(log_softmax, target) + eps / C * smooth,
        # smooth = sum over labels != ignore_index of -sum_c log_softmax, divided by their count.
        # mask only changes what the NLL kernel reads: the smoothing term still sees the
        # original labels (none of which equals ignore_index), so the expected value mixes both.
        eps, c = 0.1, self.n_classes
        logp = F.log_softmax(logits_cpu.float(), 1)
        nll = F.nll_loss(logp, self.masked(t_cpu))
        keep = t_cpu.to(torch.long) != IGNORE
        smooth = (-logp.sum(1))[keep].sum() / keep.sum()
        return (1 - eps) * nll + eps / c * smooth

    def premasked(self, t):
        # Only the NLL part may see the masked labels (see reference()); --premask on the CPU
        # therefore computes the two terms itself instead of calling cross_entropy.
        return t

    def loss_fn(self, logits, t):
        if self.premask and self.current_bad:
            eps, c = 0.1, self.n_classes
            logp = F.log_softmax(logits, 1)
            keep = t != IGNORE
            smooth = (-logp.sum(1))[keep].sum() / keep.sum()
            return (1 - eps) * F.nll_loss(logp, self.masked(t)) + eps / c * smooth
        return super().loss_fn(logits, t)

    def step(self, i, rec):
        self.current_bad = i == self.bad_step
        return super().step(i, rec)


class BF16Autocast(Scenario):
    name = "bf16_autocast"
    doc = "model under bf16 autocast; nll_loss on bf16 log-probs (the BFloat16 kernel)"
    tol = 2e-2

    def step(self, i, rec):
        x = self.make_input().to(self.device)
        t_cpu = self.make_target(i)
        t = t_cpu.to(self.device)
        if self.premask and i == self.bad_step:
            t = self.premasked(t)
        rec["phase"] = "forward"
        with torch.autocast(device_type=self.device, dtype=torch.bfloat16):
            logits = self.model(x)
        logp = F.log_softmax(logits.to(torch.bfloat16), dim=1)
        loss = F.nll_loss(logp, t)
        rec["phase"] = "backward"
        self.opt.zero_grad()
        loss.float().backward()
        self.opt.step()
        rec["phase"] = "item"
        value = loss.float().item()
        if i == self.bad_step:
            ref = F.nll_loss(logp.detach().float().cpu(), self.masked(t_cpu)).item()
            err = abs(value - ref)
            self.mask_check = {"got": value, "expected": ref, "abs_err": err,
                               "tol": self.tol * max(1.0, abs(ref)), "ok": err <= self.tol * max(1.0, abs(ref))}
        return value


class Backward(Scenario):
    name = "backward"
    doc = "forward sees good labels; the saved target is corrupted before backward (backward kernels)"

    def step(self, i, rec):
        x = self.make_input().to(self.device)
        t_clean = torch.randint(0, self.n_classes, (self.batch,), generator=self.gen)
        t = t_clean.to(self.device)
        rec["phase"] = "forward"
        logits = self.model(x)
        logits.retain_grad()
        loss = F.cross_entropy(logits, t)
        if i == self.bad_step:
            # .data shares storage without the version counter: autograd's saved target now
            # holds the bad labels, and only the backward NLL kernel reads them.
            bad = t_clean.clone()
            for p in self.bad_positions:
                bad[p] = self.bad_label
            t.data.copy_(self.masked(bad).to(self.device) if self.premask else bad.to(self.device))
        rec["phase"] = "backward"
        self.opt.zero_grad()
        loss.backward()
        rec["phase"] = "item"
        gsum = logits.grad.double().abs().sum().item()
        self.opt.step()
        if i == self.bad_step:
            # Expected gradient: the backward kernel skips masked labels but keeps the forward's
            # total_weight (all N labels were valid then): d/dlogits of sum_{i kept} -logp / N.
            lc = logits.detach().cpu().float().requires_grad_(True)
            tm = self.masked(bad)
            F.nll_loss(F.log_softmax(lc, 1), tm, reduction="sum").div(self.batch).backward()
            ref = lc.grad.double().abs().sum().item()
            diff = (logits.grad.detach().cpu().double() - lc.grad.double()).abs().max().item()
            self.mask_check = {"got": gsum, "expected": ref, "abs_err": diff, "tol": 1e-5,
                               "ok": diff <= 1e-5, "what": "max |grad - expected grad| of the logits"}
        return loss.item()


class CudaGraph(Scenario):
    name = "cuda_graph"
    doc = "loss inside a captured CUDA graph; bad label written into the static target before a replay"
    steps = 10

    def __init__(self, device, premask):
        super().__init__(device, premask)
        self.static_x = torch.zeros(self.batch, 32, device=device)
        self.static_t = torch.zeros(self.batch, dtype=torch.long, device=device)
        self.graph = None
        if device == "cuda":
            with torch.no_grad():
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        F.cross_entropy(self.model(self.static_x), self.static_t)
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.static_loss = F.cross_entropy(self.model(self.static_x), self.static_t)

    def step(self, i, rec):
        x = self.make_input()
        t_cpu = self.make_target(i)
        t = t_cpu
        if self.premask and i == self.bad_step:
            t = self.masked(t_cpu)
        rec["phase"] = "copy"
        self.static_x.copy_(x.to(self.device))
        self.static_t.copy_(t.to(self.device))
        rec["phase"] = "replay"
        with torch.no_grad():
            if self.graph is not None:
                self.graph.replay()
                loss = self.static_loss
            else:
                loss = F.cross_entropy(self.model(self.static_x), self.static_t)
            rec["phase"] = "item"
            value = loss.item()
            # A kernel launch after the replay: a hook point where an async verdict surfaces.
            rec["phase"] = "after"
            torch.ones(4, device=self.device).mul_(2).sum().item()
        if i == self.bad_step:
            ref = F.cross_entropy(self.model(x.to(self.device)).detach().cpu().float(), self.masked(t_cpu)).item()
            err = abs(value - ref)
            self.mask_check = {"got": value, "expected": ref, "abs_err": err,
                               "tol": self.tol * max(1.0, abs(ref)), "ok": err <= self.tol * max(1.0, abs(ref))}
        return value


class Control(Scenario):
    name = "control_200"
    doc = "200 clean steps: no event, no error"
    steps = 200
    bad_step = -1


SCENARIOS = {c.name: c for c in (CE2d, CENone, NLLLogSoftmax, Seg255, Uint8, LabelSmoothing,
                                 BF16Autocast, Backward, CudaGraph, Control)}


def selfcheck():
    """CPU check of the one expected-value formula that is not PyTorch's own call: the label
    smoothing decomposition, against F.cross_entropy on labels with and without ignore_index."""
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(64, 10, generator=g)
    t = torch.randint(0, 10, (64,), generator=g)
    sc = LabelSmoothing.__new__(LabelSmoothing)
    worst = 0.0
    for ign in ((), (3, 17)):
        tt = t.clone()
        for p in ign:
            tt[p] = IGNORE
        want = F.cross_entropy(logits, tt, label_smoothing=0.1).item()
        got = sc.reference(logits, tt).item()
        worst = max(worst, abs(want - got))
    print("label smoothing decomposition: max abs error %.3g" % worst)
    return 0 if worst < 1e-5 else 1


def run(name, device, premask, steps, result_path):
    res = {"scenario": name, "device": device, "premask": premask, "completed_steps": 0,
           "exception": None, "post": None, "mask_check": None, "started": time.time()}

    def save():
        res["elapsed_s"] = time.time() - res["started"]
        with open(result_path, "w") as f:
            json.dump(res, f, indent=1)

    cls = SCENARIOS[name]
    res.update(bad_step=cls.bad_step, bad_label=cls.bad_label, n_classes=cls.n_classes)
    save()
    try:
        sc = cls(device, premask)
    except Exception as e:
        res["exception"] = {"step": -1, "phase": "setup", "type": type(e).__name__,
                            "is_runtime_error": isinstance(e, RuntimeError), "text": str(e)[:2000],
                            "traceback": traceback.format_exc()[-2000:]}
        save()
        return
    n = steps or sc.steps
    rec = {}
    for i in range(n):
        rec["phase"] = "start"
        print("step %d" % i, flush=True)
        try:
            sc.step(i, rec)
        except Exception as e:
            res["exception"] = {"step": i, "phase": rec.get("phase"), "type": type(e).__name__,
                                "is_runtime_error": isinstance(e, RuntimeError),
                                "text": str(e)[:2000]}
            print("exception at step %d (%s): %s" % (i, rec.get("phase"), str(e)[:300]), flush=True)
            break
        res["completed_steps"] = i + 1
    res["mask_check"] = sc.mask_check
    save()
    if res["exception"] is not None:
        # Is the context still usable? (after a real device-side assert it is not)
        post = {}
        for what, fn in (("synchronize", lambda: torch.cuda.synchronize() if device == "cuda" else None),
                         ("cpu", lambda: torch.arange(8, device=device).mul(3).cpu().sum().item()),
                         ("next_step", sc.clean_step)):
            try:
                fn()
                post[what] = True
            except Exception as e:
                post[what] = False
                post[what + "_error"] = str(e)[:300]
        res["post"] = post
    save()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--result")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--premask", action="store_true")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--selfcheck", action="store_true")
    a = ap.parse_args()
    if a.selfcheck:
        return selfcheck()
    if a.list:
        for n, c in SCENARIOS.items():
            print("%-16s %s" % (n, c.doc))
        return 0
    if a.name not in SCENARIOS or not a.result:
        ap.error("need a scenario name (one of %s) and --result FILE" % ", ".join(SCENARIOS))
    run(a.name, a.device, a.premask, a.steps, a.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
