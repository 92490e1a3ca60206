#!/usr/bin/env python3
"""probe_kernels.py: PyTorch's real NLL kernels, as the live process sees them, against the
built-in specs (specs/pytorch.conf). This is the check that pytorch-kernels.md holds on real
binaries: mangled names and cudaFuncGetParamInfo sizes.

Called by tests/gpu/run.sh:  probe_kernels.py --lib LIB --conf specs/pytorch.conf --out FILE
It runs itself (`--launch`) once under LD_PRELOAD=LIB with LABELGUARD_DEBUG_KERNELS=1 and
LABELGUARD_ACTION=log: every kernel labelguard recognises logs a `kernel_seen` warning
(symbol, spec, params = the sizes cudaFuncGetParamInfo returned); a name that matches but
does not fit logs `unknown_layout`. The child launches each variant once with good labels:
2-D mean/none, 1-D, 4-D mean/none, forward and backward, float/half/bf16/double, int64 and
uint8 targets. The parent then checks, independently of the library's own matcher, that
each of the ten 1.13+ kernels was seen and that its sizes equal a spec group whose match
substrings all occur in the symbol. Prints one line per kernel; exit 0 when all ten match.
GPU-free, `--check-conf` parses the spec file and checks the comparison on canned events.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

EXPECTED = ["nll_loss_forward_no_reduce_cuda_kernel", "nll_loss_forward_reduce_cuda_kernel_1d",
            "nll_loss_forward_reduce_cuda_kernel_2d", "nll_loss_backward_no_reduce_cuda_kernel",
            "nll_loss_backward_reduce_cuda_kernel_1d", "nll_loss_backward_reduce_cuda_kernel_2d",
            "nll_loss2d_forward_no_reduce_kernel", "nll_loss2d_forward_kernel",
            "nll_loss2d_backward_no_reduce_kernel", "nll_loss2d_backward_kernel"]


def parse_conf(text):
    """GKeyFile groups -> {name: {key: value}} (comments and blank lines skipped)."""
    groups, cur = {}, None
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = re.match(r"^\[(.+)\]$", s)
        if m:
            cur = groups.setdefault(m.group(1), {})
            continue
        if cur is not None and "=" in s:
            k, v = s.split("=", 1)
            cur[k.strip()] = v.strip()
    return groups


def short_name(symbol):
    """The kernel identifier in an Itanium name: the length-prefixed piece before 'I' (templates)."""
    for name in sorted(EXPECTED, key=len, reverse=True):
        if re.search(r"%d%sI" % (len(name), re.escape(name)), symbol):
            return name
    m = re.search(r"(\d+)([A-Za-z_]\w*)I", symbol)
    return m.group(2)[: int(m.group(1))] if m else symbol


def compare(symbol, sizes, groups):
    """(spec group or None, verdict text) for a symbol and its runtime sizes (list or None)."""
    cands = [(n, g) for n, g in groups.items()
             if g.get("match") and all(part in symbol for part in g["match"].split(";") if part)]
    if not cands:
        return None, "no spec matches"
    if sizes is None:
        return cands[0][0], "sizes unavailable (cudaFuncGetParamInfo)"
    for n, g in cands:
        want = [int(x) for x in g.get("params", "").split(",") if x.strip()]
        if want == sizes:
            return n, "ok"
    return cands[0][0], "MISMATCH: runtime %s, spec %s %s" % (
        ",".join(map(str, sizes)), cands[0][0], cands[0][1].get("params"))


def parse_detail(ev):
    """kernel_seen detail: 'symbol=S spec=N params=8,8,...' (params '?' when unknown)."""
    d = ev.get("detail") or ""
    sym = re.search(r"symbol=(\S+)", d)
    spec = re.search(r"spec=(\S+)", d)
    par = re.search(r"params=(\S+)", d)
    sizes = None
    if par and re.fullmatch(r"[0-9,]+", par.group(1)):
        sizes = [int(x) for x in par.group(1).split(",")]
    return (sym.group(1) if sym else None), (spec.group(1) if spec else None), sizes


def launch_all():
    import torch
    import torch.nn.functional as F
    dev = "cuda"
    done = []
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for tdt in (torch.long, torch.uint8):
            for red in ("mean", "none"):
                x = torch.randn(16, 5, device=dev, dtype=dt, requires_grad=True)
                t = torch.randint(0, 5, (16,), device=dev).to(tdt)
                F.nll_loss(F.log_softmax(x, 1), t, reduction=red).sum().backward()
                x1 = torch.randn(5, device=dev, dtype=dt, requires_grad=True)  # 1-D: the _1d kernels
                F.nll_loss(F.log_softmax(x1, 0), t[3], reduction=red).sum().backward()
                done.append("%s/%s/%s" % (dt, tdt, red))
        for red in ("mean", "sum", "none"):
            x = torch.randn(2, 5, 4, 4, device=dev, dtype=dt, requires_grad=True)
            t = torch.randint(0, 5, (2, 4, 4), device=dev)
            F.nll_loss(F.log_softmax(x, 1), t, reduction=red).sum().backward()
            done.append("%s/4d/%s" % (dt, red))
    torch.cuda.synchronize()
    print("launched %d variants" % len(done))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launch", action="store_true", help="(child) launch every variant")
    ap.add_argument("--lib")
    ap.add_argument("--conf", default=os.path.join(os.path.dirname(__file__), "..", "..", "specs", "pytorch.conf"))
    ap.add_argument("--out")
    ap.add_argument("--workdir", default="probe-logs")
    ap.add_argument("--events", help="judge these JSONL files instead of running (GPU-free check)")
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    if a.launch:
        launch_all()
        return 0
    with open(a.conf) as f:
        groups = parse_conf(f.read())
    if a.events:
        files = glob.glob(a.events)
    else:
        if not a.lib:
            ap.error("--lib is required")
        os.makedirs(a.workdir, exist_ok=True)
        for fn in glob.glob(os.path.join(a.workdir, "*.jsonl")):
            os.unlink(fn)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_")}
        env.update(LD_PRELOAD=a.lib, LABELGUARD_DEBUG_KERNELS="1", LABELGUARD_ACTION="log",
                   LABELGUARD_LOG=a.workdir)
        import procs
        procs.install()
        p = procs.popen([sys.executable, os.path.abspath(__file__), "--launch"], env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            so, se = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            procs.kill_all()
            so, se = p.communicate()
        p = subprocess.CompletedProcess(p.args, p.returncode, so, se)
        sys.stdout.write(p.stdout[-2000:])
        if p.returncode != 0:
            print("probe child failed (rc %d): %s" % (p.returncode, p.stderr[-1500:]))
        files = glob.glob(os.path.join(a.workdir, "*.jsonl"))
    events = []
    for fn in files:
        with open(fn) as f:
            events += [json.loads(l) for l in f if l.strip()]
    kernels, seen = [], {}
    for ev in events:
        if ev.get("event") != "warning" or ev.get("what") not in ("kernel_seen", "unknown_layout"):
            continue
        if ev["what"] == "kernel_seen":
            sym, lib_spec, sizes = parse_detail(ev)
        else:  # "<symbol>: why; ..."
            sym, lib_spec, sizes = (ev.get("detail") or "").split(":", 1)[0], None, None
        if not sym:
            continue
        spec, verdict = compare(sym, sizes, groups)
        if ev["what"] == "unknown_layout":
            verdict = "library: unknown_layout (%s)" % (ev.get("detail") or "")[:200]
        k = {"short": short_name(sym), "symbol": sym, "param_sizes": " ".join(map(str, sizes or [])) or "?",
             "spec": spec, "library_spec": lib_spec, "layout": verdict}
        kernels.append(k)
        seen.setdefault(k["short"], []).append(k)
        print("%-45s %-28s %s\n    %s" % (k["short"], k["param_sizes"], verdict, sym))
    missing = [n for n in EXPECTED if n not in seen]
    bad = [k for k in kernels if k["layout"] != "ok"]
    ok = not missing and not bad
    summary = "%d NLL kernel instantiations seen, %d/%d kernels, %d layout problems%s" % (
        len(kernels), len(EXPECTED) - len(missing), len(EXPECTED), len(bad),
        ("; missing: " + ", ".join(missing)) if missing else "")
    print(summary)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"summary": summary, "ok": ok, "kernels": kernels, "missing": missing}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
