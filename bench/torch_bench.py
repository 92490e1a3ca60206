#!/usr/bin/env python3
"""torch_bench.py: what labelguard costs real PyTorch on the runtime test double (`make bench`).

Used by bench/bench.py (section `torch`), which calls measure(build, quick); also runnable by
hand: `python3 bench/torch_bench.py --build build [--quick]` prints the JSON. Runs
BUILD/torch-python (real torch, CUDA 13 wheel unless said, on the double), with and without
LD_PRELOAD=BUILD/liblabelguard.so, interleaved so that a loaded machine slows both alike:
  startup   `import torch` and the first CUDA tensor, 20 pairs of runs: CPU time (user + system)
            and wall time of the whole process and its peak RSS (VmHWM); the median of the
            pairs' CPU ratios, the ratio of the medians, and the megabytes the library adds
            (goals: CPU <= 1.03, RSS <= 2 MB)
  startup_cu12  the same on the CUDA 12 wheel (torch 2.10), fewer pairs: its RSS and CPU ratio
  kernels   the library's own count of registered kernels, from its `start` event
  registration  instructions the library adds to registering torch 2.15's kernels (callgrind):
            their names, grouped in their fatbins, are written down once by
            BUILD/bench/libkernel_names.so in a torch process (kept in BUILD/bench), then
            registered by BUILD/bench/register_loop with and without the library, at N=0 and N=all
            (start-up and reading the file cancel out); also the unregistration at exit
  enable    `import labelguard` + `labelguard.enable()` (the Python API, no preload): its time
            inside the process, after torch's first CUDA tensor and before `import torch`, and
            the whole process against one without labelguard (wall and CPU ratios)
  steps     ms per step of a small training loop (elementwise model, CrossEntropy with its
            forward and backward NLL launches checked by the host backend), timed inside the
            process after a warm-up, wall and CPU time; the with/without ratios
  index     microseconds per index launch (nn.Embedding + x[idx], nothing synchronizing in the
            loop) on the asynchronous double (FAKECUDA_ASYNC_US=INDEX_KERNEL_US per kernel):
            without the library, with it in sync and in async mode; the sync check waits for
            the stream at each launch, the async one never does
  sampling  the same for a 200-step torch.multinomial loop (one token from 8 x 1000
            probabilities): its torch._assert_async condition is read with a wait per step in
            sync mode, copied out on the stream and judged later in async mode
Wall figures are medians of interleaved runs; CPU time (user + system of the process) is
given beside them because other jobs on a shared machine blur it least.
Figures are reported, never asserted. The worker side is this file run as `--worker KIND`.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def enable_timed():
    """Seconds that `import labelguard` + `labelguard.enable()` take in this process."""
    t = time.perf_counter()
    import labelguard
    labelguard.enable()
    return time.perf_counter() - t


INDEX_KERNEL_US = 50


def index_loop(torch, iters):
    """Seconds (wall, CPU) per index launch of a loop that never synchronizes until its end."""
    emb = torch.nn.Embedding(1000, 256).cuda()
    ids = torch.randint(0, 1000, (64,)).cuda()
    x = torch.zeros(1000, 8).cuda()
    rows = torch.randint(0, 1000, (64,)).cuda()
    for _ in range(10):
        emb(ids), x[rows]
    torch.cuda.synchronize()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(iters):
        emb(ids)
        x[rows]
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / (2 * iters), (time.process_time() - c) / (2 * iters)


def sampling_loop(torch, steps):
    """Seconds (wall, CPU) per step of a sampling loop: torch.multinomial of one token from 8
    rows of 1000 probabilities, which checks them with torch._assert_async; nothing synchronizes
    until the end, as in a generation loop that keeps its tokens on the GPU."""
    probs = torch.softmax(torch.randn(8, 1000), 1).cuda()
    for _ in range(10):
        torch.multinomial(probs, 1)
    torch.cuda.synchronize()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        torch.multinomial(probs, 1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps, (time.process_time() - c) / steps


def worker(kind, steps):
    enable_s = enable_timed() if kind == "enable_before" else None
    t0 = time.perf_counter()
    import torch
    import torch.nn.functional as F
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out = {"import_first_tensor_s": time.perf_counter() - t0}
    if kind == "enable_after":
        enable_s = enable_timed()
    if enable_s is not None:
        out["enable_s"] = enable_s
    if kind == "index":
        out["s_per_launch"], out["cpu_s_per_launch"] = index_loop(torch, steps)
    if kind == "sampling":
        out["s_per_launch"], out["cpu_s_per_launch"] = sampling_loop(torch, steps)
    if kind == "steps":
        w = torch.nn.Parameter(torch.ones(10, device="cuda"))
        opt = torch.optim.SGD([w], lr=0.1)
        g = torch.Generator().manual_seed(0)

        def step():
            x = torch.randn(64, 10, generator=g).to("cuda")
            t = torch.randint(0, 10, (64,), generator=g).to("cuda")
            loss = F.cross_entropy(x * w, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach().cpu()
        for _ in range(20):
            step()
        t1, c1 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        out["ms_per_step"] = (time.perf_counter() - t1) / steps * 1e3
        # CPU time of the whole process (all its threads): what a machine shared with other
        # jobs blurs least.
        out["cpu_ms_per_step"] = (time.process_time() - c1) / steps * 1e3
    del x
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                out["peak_rss_kb"] = int(line.split()[1])
    print("TORCH_BENCH " + json.dumps(out), flush=True)
    if kind == "kernels" and "liblabelguard" in os.environ.get("LD_PRELOAD", ""):
        # After the figures: one bad label, so that the library writes its log, whose start
        # event carries registered_kernels (the log is created at the first event only). A run
        # of its own: the timed start-up runs do nothing after the first tensor.
        try:
            F.nll_loss(torch.zeros(2, 3).cuda(), torch.tensor([0, 7]).cuda())
        except RuntimeError:
            pass


def run(build, kind, preload, logdir, steps, wheel="13", extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_") and k != "LD_PRELOAD"}
    env["TORCH_CUDA"] = wheel
    env.update(extra_env or {})
    if preload:
        env["LD_PRELOAD"] = os.path.join(build, "liblabelguard.so")
        env["LABELGUARD_LOG"] = logdir
    if kind.startswith("enable"):  # the checkout's package, which finds BUILD's library
        env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
        env["LG_BUILD"] = os.path.basename(build)
        env["LABELGUARD_LOG"] = logdir
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        t0 = time.perf_counter()
        p = subprocess.Popen([os.path.join(build, "torch-python"), "-W", "ignore", os.path.abspath(__file__),
                              "--worker", kind, "--steps", str(steps)], env=env, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)   # the wrapper execs python: same process
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        out, err = so.read(), se.read()
    line = [l for l in out.splitlines() if l.startswith("TORCH_BENCH ")]
    if p.returncode != 0 or not line:
        raise RuntimeError("torch-python %s failed (%d): %s" % (kind, p.returncode, (out + err)[-500:]))
    r = json.loads(line[0][len("TORCH_BENCH "):])
    r["wall_s"] = wall
    r["cpu_s"] = ru.ru_utime + ru.ru_stime
    return r


def start_event(logdir):
    for fn in sorted(glob.glob(os.path.join(logdir, "*.jsonl"))):
        with open(fn) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == "start":
                    return e
    return None


def startup(build, pairs, d, wheel):
    """`import torch` + first CUDA tensor, `pairs` pairs of runs with and without the library,
    each pair in alternating order. CPU time is the figure a shared machine blurs least: the
    median of the pairs' ratios is the goal's figure, the ratio of the medians beside it."""
    runs = {False: [], True: []}
    for i in range(pairs):
        for pre in ((False, True) if i % 2 == 0 else (True, False)):
            runs[pre].append(run(build, "startup", pre, os.path.join(d, "s%s_%d" % (wheel, i)), 0, wheel))
    med = {pre: {k: statistics.median(r[k] for r in runs[pre]) for k in runs[pre][0]} for pre in runs}
    paired = [w["cpu_s"] / wo["cpu_s"] for wo, w in zip(runs[False], runs[True])]
    return {
        "pairs": pairs,
        "wall_s_without": med[False]["wall_s"], "wall_s_with": med[True]["wall_s"],
        "wall_ratio": med[True]["wall_s"] / med[False]["wall_s"],
        "cpu_s_without": med[False]["cpu_s"], "cpu_s_with": med[True]["cpu_s"],
        "cpu_ratio": med[True]["cpu_s"] / med[False]["cpu_s"],
        "cpu_ratio_paired_median": statistics.median(paired),
        "cpu_ratio_paired_quartiles": statistics.quantiles(paired, n=4) if pairs >= 2 else None,
        "inner_s_without": med[False]["import_first_tensor_s"], "inner_s_with": med[True]["import_first_tensor_s"],
        "peak_rss_mb_without": med[False]["peak_rss_kb"] / 1024, "peak_rss_mb_with": med[True]["peak_rss_kb"] / 1024,
        "added_rss_mb": (med[True]["peak_rss_kb"] - med[False]["peak_rss_kb"]) / 1024}


def callgrind_total(argv, env):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                           env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError("callgrind %s failed: %s" % (" ".join(argv), p.stderr[-500:]))
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no instruction total in callgrind output")


def kernel_names(build):
    """The file of torch 2.15's registrations ("<fatbin> <name>" a line), written once by the
    preload shim in a torch process and kept beside the programs, per installed wheel."""
    bench = os.path.join(build, "bench")
    wheel = os.path.basename(os.path.realpath(subprocess.run(
        [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "torch-fake", "install.sh"),
         "13", "--print-dir"], capture_output=True, text=True, check=True).stdout.strip()))
    path = os.path.join(bench, "kernels-%s.txt" % wheel)
    if not os.path.exists(path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_")}
        env.update(TORCH_CUDA="13", LD_PRELOAD=os.path.join(bench, "libkernel_names.so"),
                   LG_KERNEL_NAMES_OUT=path + ".tmp")
        subprocess.run([os.path.join(build, "torch-python"), "-c", "import torch"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        os.replace(path + ".tmp", path)
    return path


def registration(build):
    """Instructions the library adds to registering torch 2.15's kernels, and to unregistering
    them (atexit), counted by callgrind on BUILD/bench/register_loop with and without it."""
    if not shutil.which("valgrind"):
        return {"error": "valgrind not installed (Debian package valgrind)"}
    names = kernel_names(build)
    prog = os.path.join(build, "bench", "register_loop")
    with open(names) as f:
        n = sum(1 for _ in f)
    ir = {}
    for pre in (False, True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_") and k != "LD_PRELOAD"}
        env["LD_LIBRARY_PATH"] = os.path.join(build, "fakecuda")
        if pre:
            env["LD_PRELOAD"] = os.path.join(build, "liblabelguard.so")
        for mode, argv in (("none", [names, "0"]), ("all", [names, "-1"]), ("unreg", [names, "-1", "unregister"])):
            ir[(pre, mode)] = callgrind_total([prog] + argv, env)
    added = (ir[(True, "all")] - ir[(True, "none")]) - (ir[(False, "all")] - ir[(False, "none")])
    unreg = (ir[(True, "unreg")] - ir[(True, "all")]) - (ir[(False, "unreg")] - ir[(False, "all")])
    return {"kernels": n, "names_file": names, "added_ir": added, "added_ir_per_kernel": added / n,
            "unregister_added_ir": unreg,
            "ir": {"%s_%s" % ("with" if k[0] else "without", k[1]): v for k, v in ir.items()}}


def measure(build, quick):
    build = os.path.abspath(build)
    if not os.access(os.path.join(build, "torch-python"), os.X_OK):
        raise RuntimeError("%s/torch-python is missing: run 'make %s/torch-python'" % (build, os.path.basename(build)))
    reps = 3 if quick else 7
    steps = 100 if quick else 400
    res = {"wheel": "CUDA 13", "reps": reps, "steps": steps}
    with tempfile.TemporaryDirectory() as d:
        res["startup"] = startup(build, 20, d, "13")
        res["startup_cu12"] = startup(build, 3 if quick else 5, d, "12")
        try:
            res["registration"] = registration(build)
        except Exception as e:  # the other figures stand without it
            res["registration"] = {"error": str(e)}
        run(build, "kernels", True, os.path.join(d, "k"), 0)
        st = start_event(os.path.join(d, "k"))
        res["registered_kernels"] = st.get("registered_kernels") if st else None
        res["start_event_found"] = st is not None
        runs = {False: [], True: []}
        for i in range(2 if quick else 3):
            for pre in ((False, True) if i % 2 == 0 else (True, False)):
                runs[pre].append(run(build, "steps", pre, os.path.join(d, "t%d%d" % (i, pre)), steps))
        med = {pre: {k: statistics.median(r[k] for r in runs[pre]) for k in ("ms_per_step", "cpu_ms_per_step")}
               for pre in runs}
        res["steps"] = {"ms_per_step_without": med[False]["ms_per_step"], "ms_per_step_with": med[True]["ms_per_step"],
                        "ratio": med[True]["ms_per_step"] / med[False]["ms_per_step"],
                        "cpu_ms_per_step_without": med[False]["cpu_ms_per_step"],
                        "cpu_ms_per_step_with": med[True]["cpu_ms_per_step"],
                        "cpu_ratio": med[True]["cpu_ms_per_step"] / med[False]["cpu_ms_per_step"]}
        res["enable"] = enable_cost(build, reps, d)
        res["index"] = index_cost(build, reps, 200 if quick else 1000, d)
        res["sampling"] = index_cost(build, reps, 200, d, kind="sampling")
    return res


def index_cost(build, reps, iters, d, kind="index"):
    """Per index launch (kind "sampling": per torch.multinomial step) on the asynchronous double:
    no library, sync mode, async mode (medians of interleaved runs)."""
    modes = {"none": None, "sync": "sync", "async": "async"}
    runs = {m: [] for m in modes}
    for i in range(reps):
        for m in (list(modes) if i % 2 == 0 else list(reversed(list(modes)))):
            env = {"FAKECUDA_ASYNC_US": str(INDEX_KERNEL_US)}
            if modes[m]:
                env["LABELGUARD_MODE"] = modes[m]
            runs[m].append(run(build, kind, modes[m] is not None, os.path.join(d, "%s%d%s" % (kind, i, m)), iters,
                               extra_env=env))
    out = {"kernel_us": INDEX_KERNEL_US, "iters": iters, "runs": reps}
    for m in modes:
        out["us_per_launch_" + m] = statistics.median(r["s_per_launch"] for r in runs[m]) * 1e6
        out["cpu_us_per_launch_" + m] = statistics.median(r["cpu_s_per_launch"] for r in runs[m]) * 1e6
    return out


def enable_cost(build, reps, d):
    """`import labelguard` + `enable()` in a process with real torch: the time it takes inside the
    process (after import torch and a first CUDA tensor, as in a notebook's later cell, and before
    import torch, as in its first cell), and the whole process's wall and CPU time against the
    same process without labelguard, medians of runs interleaved in pairs."""
    runs = {"plain": [], "enable_after": [], "enable_before": []}
    for i in range(reps):
        order = list(runs) if i % 2 == 0 else list(reversed(list(runs)))
        for kind in order:
            runs[kind].append(run(build, "startup" if kind == "plain" else kind, False,
                                  os.path.join(d, "e%d%s" % (i, kind)), 0))
    med = {k: {f: statistics.median(r[f] for r in v if f in r) for f in v[0]} for k, v in runs.items()}
    out = {"runs": reps}
    for kind in ("enable_after", "enable_before"):
        out[kind] = {"enable_ms": med[kind]["enable_s"] * 1e3,
                     "wall_ratio": med[kind]["wall_s"] / med["plain"]["wall_s"],
                     "cpu_ratio": med[kind]["cpu_s"] / med["plain"]["cpu_s"],
                     "wall_ms_added": (med[kind]["wall_s"] - med["plain"]["wall_s"]) * 1e3}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", choices=("startup", "kernels", "steps", "index", "sampling", "enable_after",
                                         "enable_before"))
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.steps)
        return 0
    print(json.dumps(measure(a.build, a.quick), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
