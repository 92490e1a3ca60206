#!/usr/bin/env python3
"""bench_train.py: what labelguard costs a real training job, against the tools users use
today (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer). All figures come from the same run.

Called by scripts/gpu-check.sh (part `bench`):
  bench_train.py drive --lib LIB --build BUILD --out parts/bench.data.json --workdir DIR [--budget S]
which starts one worker process per configuration (the variables must be set at process
start), interleaved so that clock drift hits every configuration alike:
  none, labelguard_sync, labelguard_async (two rounds each), cuda_launch_blocking,
  compute_sanitizer (a few fixed steps: it is slow).
A worker (`bench_train.py run --out FILE [...]`) measures, in one process:
  launch_bound  small MLP, batch 64, SGD: steps/s (median of timed windows)
  gpu_bound     a transformer block, bf16 autocast, 64 x 256 tokens, per-token CrossEntropy
  latency       microseconds per F.nll_loss call + synchronize at 64 / 65536 / 16M labels
  hbm           device memory bandwidth from a large copy (GB/s)
The validator's own times come from $BUILD/tests/gpu/test_validator's timing lines (the
test-gpu part's log, --validator-log); else from the labelguard_sync - none latency at that
size (an upper bound: it includes the stream sync). Measured figures are reported, never
asserted. Needs a GPU; the report side is tested GPU-free with canned data (make_report.py).
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402

HERE = os.path.abspath(__file__)
SIZES = (64, 65536, 16 * 1024 * 1024)
DEV = "cuda"  # `run --device cpu` exercises the worker GPU-free (small sizes, no bandwidth)


def sync(torch):
    if DEV == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------- worker
def make_loops(torch):
    nn, F = torch.nn, torch.nn.functional
    dev = DEV

    def launch_bound():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10)).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        x = torch.randn(64, 128, device=dev)
        t = torch.randint(0, 10, (64,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(m(x), t).backward()
            opt.step()
        return step

    def gpu_bound():
        torch.manual_seed(0)
        d, classes = 1024, 1000
        blk = nn.TransformerEncoderLayer(d, 16, 4096, batch_first=True).to(dev)
        head = nn.Linear(d, classes).to(dev)
        params = list(blk.parameters()) + list(head.parameters())
        opt = torch.optim.SGD(params, lr=0.01)
        x = torch.randn(64, 256, d, device=dev)
        t = torch.randint(0, classes, (64 * 256,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev, dtype=torch.bfloat16):
                logits = head(blk(x)).reshape(-1, classes)
            F.cross_entropy(logits.float(), t).backward()
            opt.step()
        return step

    return {"launch_bound": launch_bound, "gpu_bound": gpu_bound}


def measure_loop(torch, step, seconds, windows, fixed_steps):
    for _ in range(3 if fixed_steps else 10):  # warm-up: allocator, cuBLAS handles, lazy modules
        step()
    sync(torch)
    if fixed_steps:
        t0 = time.perf_counter()
        for _ in range(fixed_steps):
            step()
        sync(torch)
        return {"steps_s": fixed_steps / (time.perf_counter() - t0), "windows": [], "steps": fixed_steps}
    # Calibrate steps per window so that each window lasts about seconds/windows.
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.2:
        step()
        n += 1
    sync(torch)
    per = (time.perf_counter() - t0) / n
    k = max(3, int(seconds / windows / per))
    rates = []
    for _ in range(windows):
        sync(torch)
        t0 = time.perf_counter()
        for _ in range(k):
            step()
        sync(torch)
        rates.append(k / (time.perf_counter() - t0))
    return {"steps_s": statistics.median(rates), "windows": rates, "steps_per_window": k}


def measure_latency(torch, calls=300):
    F = torch.nn.functional
    out = {}
    for n in (SIZES if DEV == "cuda" else SIZES[:2]):
        logp = torch.randn(n, 2, device=DEV).log_softmax(1)
        t = torch.randint(0, 2, (n,), device=DEV)
        for _ in range(5):
            F.nll_loss(logp, t, reduction="none")
        sync(torch)
        reps = calls if n <= 65536 else 20
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            # reduction='none': the grid-wide kernel; the mean kernel is one block, whose own
            # time at 16M labels would hide what the validator adds.
            F.nll_loss(logp, t, reduction="none")
            sync(torch)
            times.append(time.perf_counter() - t0)
        out[str(n)] = statistics.median(times) * 1e6
        del logp, t
    return out


def measure_hbm(torch):
    n = 1 << 30  # bytes
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    sync(torch)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = None
    for _ in range(10):
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
        best = ms if best is None else min(best, ms)
    return 2 * n / (best / 1e3) / 1e9  # read + write


def cmd_run(a):
    global DEV
    DEV = a.device
    import torch
    res = {"pid": os.getpid(), "env": {k: v for k, v in os.environ.items()
                                       if k.startswith("LABELGUARD_") or k in ("LD_PRELOAD", "CUDA_LAUNCH_BLOCKING")}}
    loops = make_loops(torch)

    def save():  # after each measurement: a worker killed by its timeout keeps what it had
        with open(a.out + ".tmp", "w") as f:
            json.dump(res, f)
        os.replace(a.out + ".tmp", a.out)
    for kind in [k for k in a.kinds.split(",") if k]:
        res[kind] = measure_loop(torch, loops[kind](), a.seconds, a.windows, a.fixed_steps)
        if DEV == "cuda":
            torch.cuda.empty_cache()
        print("%s: %.1f steps/s" % (kind, res[kind]["steps_s"]), flush=True)
        save()
    if a.latency:
        res["latency_us"] = measure_latency(torch)
        print("latency us: %s" % res["latency_us"], flush=True)
        save()
    if a.hbm:
        res["hbm_gbps"] = measure_hbm(torch)
        print("hbm: %.0f GB/s" % res["hbm_gbps"], flush=True)
    save()
    return 0


# ----------------------------------------------------------------------------- driver
CONFIGS = {
    "none": {},
    "labelguard_sync": {"LABELGUARD_MODE": "sync"},
    "labelguard_async": {"LABELGUARD_MODE": "async"},
    "cuda_launch_blocking": {"CUDA_LAUNCH_BLOCKING": "1"},
    "compute_sanitizer": {},
}


def worker(cfg, a, i, seconds_left):
    out = os.path.join(a.workdir, "%s-%d.json" % (cfg, i))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LABELGUARD_") and k not in ("LD_PRELOAD", "CUDA_LAUNCH_BLOCKING")}
    env.update(CONFIGS[cfg])
    argv = [sys.executable, HERE, "run", "--out", out]
    if a.device != "cuda":
        argv += ["--device", a.device, "--kinds", "launch_bound"]
    if cfg.startswith("labelguard"):
        env["LD_PRELOAD"] = a.lib
        env["LABELGUARD_ACTION"] = "raise"
        env["LABELGUARD_LOG"] = os.path.join(a.workdir, "logs-%s-%d" % (cfg, i))
    if cfg == "compute_sanitizer":
        argv = [a.sanitizer, "--tool", "memcheck", "--print-limit", "10"] + argv + ["--fixed-steps", "3"]
    elif cfg == "cuda_launch_blocking":
        argv += ["--seconds", str(a.seconds / 2)]
    else:
        argv += ["--seconds", str(a.seconds), "--latency"]
        if cfg == "none" and i == 0 and a.device == "cuda":
            argv.append("--hbm")
    timeout = max(5.0, seconds_left)
    t0 = time.time()
    log = open(os.path.join(a.workdir, "%s-%d.log" % (cfg, i)), "w")
    p = procs.popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    timed_out = False
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, 9)
        p.wait()
    procs.forget(p)
    log.close()
    try:
        with open(out) as f:
            r = json.load(f)
        r["status"] = "timeout (partial)" if timed_out else ("ok" if p.returncode == 0 else "rc %d" % p.returncode)
    except (OSError, ValueError):
        r = {"status": "timeout" if timed_out else "error rc %d" % p.returncode}
    r["seconds"] = time.time() - t0
    return r


VALIDATOR_LINE = re.compile(r"^labels (\d+) bytes (\d+) ns ([0-9.]+) GB/s ([0-9.]+) \(sync call wall ([0-9.]+) ns; "
                            r"memcpy D2D ([0-9.]+) GB/s", re.M)


def validator_times(build, log):
    """The validator's own kernel time per size, from tests/gpu/test_validator's timing lines
    (`labels N bytes B ns T GB/s G (sync call wall W ns; memcpy D2D C GB/s; ...)`): taken from
    the test-gpu part's log when given, else by running the test (it runs its checks first)."""
    text = ""
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            text = f.read()
    if not VALIDATOR_LINE.search(text):
        exe = os.path.join(build, "tests", "gpu", "test_validator")
        if os.access(exe, os.X_OK):
            try:
                text = subprocess.run([exe], capture_output=True, text=True, timeout=90).stdout
            except (OSError, subprocess.TimeoutExpired):
                text = ""
    rows = []
    for m in VALIDATOR_LINE.finditer(text):
        rows.append({"labels": int(m.group(1)), "dtype": "int64", "bytes": int(m.group(2)),
                     "time_us": float(m.group(3)) / 1e3, "sync_call_wall_us": float(m.group(5)) / 1e3,
                     "copy_gbps": float(m.group(6)), "source": "tests/gpu/test_validator"})
    return rows


def cmd_drive(a):
    if not os.path.exists(a.lib):
        print("bench: %s not built" % a.lib)
        return 1
    procs.install()
    os.makedirs(a.workdir, exist_ok=True)
    deadline = time.time() + a.budget
    plan = [("none", 0), ("labelguard_sync", 0), ("labelguard_async", 0),
            ("none", 1), ("labelguard_sync", 1), ("labelguard_async", 1),
            ("cuda_launch_blocking", 0)]
    if a.sanitizer:
        plan.append(("compute_sanitizer", 0))
    runs = {}
    for cfg, i in plan:
        left = deadline - time.time() - 5
        if left < 10:
            runs.setdefault(cfg, []).append({"status": "timeout", "seconds": 0, "note": "budget spent"})
            continue
        # The sanitizer gets what is left; every other worker at most 40 s.
        r = worker(cfg, a, i, left if cfg == "compute_sanitizer" else min(left, 40))
        print("%-22s round %d: %s %.1fs" % (cfg, i, r["status"], r["seconds"]), flush=True)
        runs.setdefault(cfg, []).append(r)
    data = {"loops": {"launch_bound": {}, "gpu_bound": {}}, "latency": {}, "runs": runs}
    for cfg, rs in runs.items():
        for kind in ("launch_bound", "gpu_bound"):
            ws = [w for r in rs if kind in r for w in (r[kind]["windows"] or [r[kind]["steps_s"]])]
            if ws:
                data["loops"][kind][cfg] = {"steps_s": statistics.median(ws), "windows": len(ws),
                                            "status": "ok"}
            else:
                data["loops"][kind][cfg] = {"steps_s": None,
                                            "status": ",".join(r["status"] for r in rs)}
        lats = [r["latency_us"] for r in rs if "latency_us" in r]
        if lats:
            by = {s: statistics.median(l[s] for l in lats) for s in lats[0]}
            data["latency"][cfg] = {"us": by.get("64"), "by_size": by}
        for r in rs:
            if "hbm_gbps" in r:
                data["hbm_gbps"] = r["hbm_gbps"]
    # The library's own account (its `summary` event at exit): launches validated and the time
    # spent validating them, as seen from the launching thread.
    data["library_summary"] = {}
    for cfg in ("labelguard_sync", "labelguard_async"):
        tot = {"launches": 0, "watched": 0, "validated": 0, "violations": 0, "validate_ns_total": 0}
        for fn in glob.glob(os.path.join(a.workdir, "logs-%s-*" % cfg, "*.jsonl")):
            with open(fn, errors="replace") as f:
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("event") == "summary":
                        for k in tot:
                            tot[k] += int(e.get(k) or 0)
        if tot["validated"]:
            tot["validate_ns_per_launch"] = tot["validate_ns_total"] / tot["validated"]
        data["library_summary"][cfg] = tot
    vt = validator_times(a.build, a.validator_log)
    if not vt and "none" in data["latency"] and "labelguard_sync" in data["latency"]:
        n0, s0 = data["latency"]["none"]["by_size"], data["latency"]["labelguard_sync"]["by_size"]
        vt = [{"labels": int(s), "dtype": "int64", "time_us": max(0.0, s0[s] - n0[s]),
               "source": "labelguard_sync - none per nll_loss call (includes the stream sync)"}
              for s in n0 if s in s0]
    for v in vt:
        # Bandwidth bound: the label bytes read once at the measured device bandwidth (the
        # worker's 1 GiB copy; else the test's own D2D copy of the same buffer).
        bw = data.get("hbm_gbps") or v.get("copy_gbps")
        if bw:
            nbytes = v.get("bytes") or v["labels"] * (1 if v.get("dtype") == "uint8" else 8)
            v["bound_us"] = nbytes / (bw * 1e9) * 1e6
    data["validator"] = vt
    lb, gb = data["loops"]["launch_bound"], data["loops"]["gpu_bound"]

    def ratio(d, c):
        try:
            return "%.3f" % (d[c]["steps_s"] / d["none"]["steps_s"])
        except (KeyError, TypeError, ZeroDivisionError):
            return "n/a"
    data["summary"] = "steps/s ratio to none: gpu-bound sync %s async %s; launch-bound sync %s async %s" % (
        ratio(gb, "labelguard_sync"), ratio(gb, "labelguard_async"),
        ratio(lb, "labelguard_sync"), ratio(lb, "labelguard_async"))
    with open(a.out, "w") as f:
        json.dump(data, f, indent=1)
    print(data["summary"])
    ok = all(data["loops"][k].get(c, {}).get("steps_s") for k in data["loops"]
             for c in ("none", "labelguard_sync", "labelguard_async"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--kinds", default="launch_bound,gpu_bound")
    r.add_argument("--seconds", type=float, default=2.5)
    r.add_argument("--windows", type=int, default=5)
    r.add_argument("--fixed-steps", type=int, default=0)
    r.add_argument("--latency", action="store_true")
    r.add_argument("--hbm", action="store_true")
    r.add_argument("--device", default="cuda")
    d = sub.add_parser("drive")
    d.add_argument("--lib", required=True)
    d.add_argument("--build", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--workdir", required=True)
    d.add_argument("--budget", type=float, default=120)
    d.add_argument("--seconds", type=float, default=2.5)
    d.add_argument("--sanitizer", default=None)
    d.add_argument("--validator-log", default=None, help="test-gpu's log of tests/gpu/test_validator")
    d.add_argument("--device", default="cuda", help="cpu: a GPU-free run of the driver itself")
    a = ap.parse_args()
    if a.cmd == "run":
        return cmd_run(a)
    if a.sanitizer is None:
        for c in ("compute-sanitizer", os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "compute-sanitizer")):
            p = c if os.path.isabs(c) else next((os.path.join(x, c) for x in os.environ.get("PATH", "").split(":")
                                                 if os.access(os.path.join(x, c), os.X_OK)), None)
            if p and os.access(p, os.X_OK):
                a.sanitizer = p
                break
    return cmd_drive(a)


if __name__ == "__main__":
    sys.exit(main())
