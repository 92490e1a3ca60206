#!/usr/bin/env python3
"""compiled_gpu.py: torch.compile'd losses under labelguard on a real GPU (Triton kernels), the
GPU half of tests/torch-fake/test_compiled.sh. Needs an NVIDIA GPU, a CUDA build of torch with
Triton, and the built library.

    python3 tests/torch/compiled_gpu.py [--lib build/liblabelguard.so] [--out DIR] [--cases LIST]

Each case runs in its own process under `labelguard run` (the checkout's package, so the
bootstrap sitecustomize is what arms the check), prints "ok: ..."/"FAIL: ..." lines and one
"RESULT {json}" line; the parent prints them and a summary, and writes DIR/compiled-gpu.json.
Exit 0 all passed, 1 some failed, 77 no GPU or no Triton.

  default   torch.compile (Inductor, Triton): the output code calls labelguard::check_target
            and its Triton kernels read the check's output; good labels train; a label equal to
            n_classes raises labelguard's RuntimeError before the fused kernel runs, and the CUDA
            context lives on (a later good step works; no device-side assert)
  reduce    mode="reduce-overhead" (CUDA graphs): good steps record and replay; a bad label in a
            replay is caught by the captured check (sanitized copy, no assert) and raised as the
            next CUDA error; the context lives on
  mask      LABELGUARD_ACTION=mask: the compiled loss equals the eager loss with the bad label
            set to ignore_index; no error
  off       LABELGUARD_COMPILED=off: no check op in the code, one unchecked_loss_kernel warning
  bench     ms per training step and peak memory, B=4096 tokens, C=32000 classes: check op on,
            LABELGUARD_COMPILED=off, and way (a) (Inductor made to call ATen's NLL kernels:
            the NLL decompositions removed), to back the choice of the check op
  gpt2      a compiled GPT-2-small training step (8 x 1024 tokens, Triton) with and without the
            checks, 3 interleaved pairs: tests/torch-fake/compiled_index.py gpt2 with
            LG_GPT2_DEVICE=cuda; prints its ratio (goal <= 1.03) and fails unless the checked step
            then reports an id equal to the vocabulary size
Not run by default: bench and gpt2 (LG_GPU_COMPILED_CASES=default,...,gpt2 in gpu_path.py).
scripts/gpu-check.sh runs it as the `compiled` case of tests/torch/gpu_path.py; by hand on a GPU
machine, after `make`:  python3 tests/torch/compiled_gpu.py --out gpu-report/compiled
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ["default", "reduce", "mask", "off", "bench", "gpt2"]
OP = "labelguard.check_target"


# ----------------------------------------------------------------------------- child side

class Child:
    def __init__(self):
        self.failures = []
        self.result = {}

    def ok(self, cond, what, detail=""):
        print(("ok: %s" % what) if cond else ("FAIL: %s %s" % (what, detail)), flush=True)
        if not cond:
            self.failures.append(what)

    def events(self, kind):
        import glob
        out = []
        for p in glob.glob(os.path.join(os.environ["LABELGUARD_LOG"], "*.jsonl")):
            with open(p) as f:
                out += [json.loads(line) for line in f if line.strip()]
        return [e for e in out if e["event"] == kind]


def model_and_data(B=256, D=64, C=1000, seed=0):
    import torch
    torch.manual_seed(seed)
    lin = torch.nn.Linear(D, C).cuda()
    x = torch.randn(B, D, device="cuda")
    y = torch.randint(0, C, (B,), device="cuda")
    return lin, x, y, C


def child(case):
    import torch
    import torch.nn.functional as F
    from torch._inductor.utils import run_and_get_code
    c = Child()
    c.ok("labelguard._compiled" in sys.modules, "the bootstrap armed the torch.compile check")

    if case in ("default", "mask", "off"):
        lin, x, y, C = model_and_data()

        def step(x, y):
            loss = F.cross_entropy(lin(x), y)
            loss.backward()
            return loss

        cf = torch.compile(step)
        loss, codes = run_and_get_code(lambda: cf(x, y))
        code = "\n".join(codes)
        c.ok("triton" in code, "Inductor generated Triton kernels")
        if case == "off":
            c.ok(OP not in code, "off: no check op")
            w = [e for e in c.events("warning") if e["what"] == "unchecked_loss_kernel"]
            c.ok(len(w) == 1, "off: one unchecked_loss_kernel warning", w)
        else:
            c.ok(code.count(OP) >= 1, "the output code calls the check op (%d)" % code.count(OP))
            with torch.no_grad():
                ref = F.cross_entropy(lin(x), y)
            c.ok(torch.allclose(loss, ref, rtol=1e-4, atol=1e-4), "good labels: the compiled loss equals eager's")
            bad = y.clone()
            bad[5] = C
            if case == "default":
                try:
                    cf(x, bad)
                    torch.cuda.synchronize()
                    c.ok(False, "a label equal to n_classes raises")
                except RuntimeError as e:
                    c.ok(str(e).startswith("labelguard: bad labels") and "target[5] = %d" % C in str(e),
                         "a label equal to n_classes raises labelguard's error", str(e)[:300])
                torch.cuda.synchronize()
                again = cf(x, y)
                torch.cuda.synchronize()
                c.ok(torch.isfinite(again).item(), "the CUDA context lives on: a later good step works")
            else:
                got = cf(x, bad)
                torch.cuda.synchronize()
                masked = bad.clone()
                masked[5] = -100
                with torch.no_grad():
                    ref = F.cross_entropy(lin(x), masked)
                c.ok(torch.allclose(got, ref, rtol=1e-4, atol=1e-4), "mask: the loss equals eager's with it masked",
                     "%s vs %s" % (got.item(), ref.item()))
                v = c.events("violation")
                c.ok(v and v[0]["outcome"] == "masked", "mask: a masked violation is logged")
    elif case == "reduce":
        lin, x, y, C = model_and_data()

        def step(x, y):
            loss = F.cross_entropy(lin(x), y)
            loss.backward()
            return loss.detach()

        cf = torch.compile(step, mode="reduce-overhead")
        for _ in range(4):  # warm-up, record, replays
            cf(x, y)
        torch.cuda.synchronize()
        c.ok(True, "good steps recorded and replayed")
        bad = y.clone()
        bad[7] = C + 3
        raised = None
        try:
            cf(x, bad)
            torch.cuda.synchronize()
            cf(x, y)
            torch.cuda.synchronize()
        except RuntimeError as e:
            raised = str(e)
        c.ok(raised is not None and "labelguard: bad labels" in raised and "device-side assert" not in raised,
             "a bad label in a CUDA graph replay is raised as labelguard's error", raised)
        v = c.events("violation")
        c.ok(v and v[0]["bad"]["samples"][0] == {"index": 7, "value": C + 3},
             "the replay's violation has the position and value", v[:1])
        torch.cuda.synchronize()
        cf(x, y)
        torch.cuda.synchronize()
        c.ok(True, "the CUDA context lives on after the replay")
    elif case.startswith("bench"):
        way = os.environ.get("LG_BENCH_WAY", "check_op")
        if way == "aten":
            # Way (a): Inductor falls back to ATen's NLL kernels (labelguard's launch hooks check them).
            from torch._inductor import decomposition as d
            aten = torch.ops.aten
            for op in (aten.nll_loss_forward, aten.nll_loss_backward, aten.nll_loss2d_forward):
                for k in [k for k in d.decompositions if getattr(k, "overloadpacket", None) is op]:
                    d.decompositions.pop(k)
            d.fast_random_decomps.cache_clear()
        B, C, D = 4096, 32000, 256
        lin, x, y, _ = model_and_data(B, D, C)

        def step(x, y):
            loss = F.cross_entropy(lin(x), y)
            loss.backward()
            return loss.detach()

        cf = torch.compile(step)
        for _ in range(3):
            cf(x, y)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        n = 50
        t0 = time.perf_counter()
        for _ in range(n):
            cf(x, y)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / n * 1e3
        peak = torch.cuda.max_memory_allocated() / 2**20
        c.result = {"way": way, "ms_per_step": round(ms, 3), "peak_mib": round(peak, 1), "B": B, "C": C}
        c.ok(True, "bench %s: %.3f ms/step, peak %.0f MiB" % (way, ms, peak))
    c.result.setdefault("case", case)
    print("RESULT " + json.dumps(dict(c.result, failures=c.failures)), flush=True)
    return 1 if c.failures else 0


# ----------------------------------------------------------------------------- parent side

def run_case(case, lib, out, extra_env, timeout=300, argv=None, parse=None):
    """One case in its own process under `labelguard run`: this file's child (argv None) or the
    command argv. Its lines are printed; its RESULT line, or parse(stdout) when given, and its
    exit status make the result."""
    log = os.path.join(out, case + extra_env.get("LG_BENCH_WAY", ""))
    env = dict(os.environ, LABELGUARD_LIB=lib, PYTHONPATH=os.path.join(ROOT, "python"), LABELGUARD_QUIET="1",
               **extra_env)
    for k in ("LABELGUARD_ACTION", "LABELGUARD_COMPILED"):
        if k not in extra_env:
            env.pop(k, None)
    cmd = [sys.executable, "-m", "labelguard", "run", "--log", log, "--", sys.executable] + (
        argv or [os.path.abspath(__file__), "--child", case])
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=timeout)
        text, rc = p.stdout, p.returncode
        err = p.stderr
    except subprocess.TimeoutExpired as e:
        text, rc, err = (e.stdout or ""), 124, "timeout"
    result = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
        else:
            print("[%s] %s" % (case, line))
    if parse is not None:
        result.update(parse(text))
    if rc != 0:
        print("[%s] rc %d; stderr tail:\n%s" % (case, rc, "\n".join(str(err).splitlines()[-15:])))
    result.update(case=case, rc=rc, seconds=round(time.time() - t0, 1))
    return result


def gpt2_ratio(text):
    """compiled_index.py gpt2's timing line, as numbers."""
    import re
    m = re.search(r"([0-9.]+) ms unchecked, ([0-9.]+) ms checked, ratio ([0-9.]+)", text)
    return {"ms_unchecked": float(m.group(1)), "ms_checked": float(m.group(2)), "ratio": float(m.group(3))} if m else {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "liblabelguard.so"))
    ap.add_argument("--out", default=os.path.join(ROOT, "gpu-report", "compiled"))
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    try:
        import torch
        if not torch.cuda.is_available():
            print("no GPU: skipped")
            return 77
        import triton  # noqa: F401
    except ImportError as e:
        print("skipped: %s" % e)
        return 77
    os.makedirs(a.out, exist_ok=True)
    results = []
    for case in a.cases.split(","):
        if case == "gpt2":
            results.append(run_case("gpt2", a.lib, a.out, {"LG_GPT2_DEVICE": "cuda"}, timeout=600,
                                    argv=[os.path.join(ROOT, "tests", "torch-fake", "compiled_index.py"), "gpt2"],
                                    parse=gpt2_ratio))
        elif case == "bench":
            for way, env in (("check_op", {}), ("off", {"LABELGUARD_COMPILED": "off"}), ("aten", {"LABELGUARD_COMPILED": "off"})):
                results.append(run_case("bench", a.lib, a.out, dict(env, LG_BENCH_WAY=way)))
        else:
            env = {"mask": {"LABELGUARD_ACTION": "mask"}, "off": {"LABELGUARD_COMPILED": "off"}}.get(case, {})
            results.append(run_case(case, a.lib, a.out, env))
    with open(os.path.join(a.out, "compiled-gpu.json"), "w") as f:
        json.dump(results, f, indent=1)
    bad = [r for r in results if r["rc"] != 0]
    print("compiled_gpu: %d cases, %d failed; %s" % (len(results), len(bad), os.path.join(a.out, "compiled-gpu.json")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
