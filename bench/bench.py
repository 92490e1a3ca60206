#!/usr/bin/env python3
"""bench.py: the GPU-free benchmarks of `make bench` (run through bench/run.sh).

  bench.py --build BUILD [--quick]
Measures, under the runtime test double (BUILD/fakecuda), with and without
LD_PRELOAD=BUILD/liblabelguard.so:
  fast_path   instructions labelguard adds to one UNWATCHED launch (valgrind callgrind, total
              Ir of BUILD/bench/launch_loop at N1 and N2 launches, so start-up and the first
              launch's classification cancel out): ((W2-W1) - (B2-B1)) / (N2-N1); target <= 100.
              And the wall-clock ratio of the launch loop alone (the program times its loop),
              interleaved repetitions, medians.
  per_call  the same count for a cudaStreamSynchronize with nothing outstanding, a
              cudaGetLastError once a checked graph ran, and an unwatched launch while a verdict
              is outstanding but not ready (target <= 150).
  startup     added wall time of a process that never launches a kernel: /bin/true and
              python3 -c 'import json', interleaved runs, medians (and the difference of the
              minima); target < 1 ms. Plus the instructions added (callgrind), which a loaded
              machine does not blur.
  host_validate  added time per WATCHED launch on the host backend (build/progs/nll fwd_2d,
              64 labels, --repeat R1 vs R2, interleaved, medians): what the test double's
              copy-and-scan costs; informative only (the GPU backend is measured by gpu-check).
  host_scan   the host scan (cuda/lg_scan.h's lg_scan_host, BUILD/bench/scan_loop) per element of
              valid int64 labels and of valid probabilities of each float dtype: instructions per
              element (callgrind, two repetition counts) and ns per element on 16x1x512x512
              elements next to memcpy of the same bytes (the program's own timing, medians).
  bce_call    added time per BCE call on the host backend (real torch on the double, BUILD/torch-python,
              tests/torch/gpu_path.py's bce_cost child: F.binary_cross_entropy on 16x1x512x512
              float32, with / without the library, interleaved, medians), beside the minimal host
              work on the same data measured in the same run: two copies plus one min/max pass
              each (BUILD/bench/scan_loop float32: memcpy + scan per element); goal ratio <= 1.5.
  logprob_check  added time per watched NLL forward of the raw-logits check (nll_input_not_log_probs:
              a copy of up to 4096 input values to the host and their scan), LABELGUARD_LOGPROB_CHECK=1 vs 0.
  torch     real PyTorch on the double (BUILD/torch-python, bench/torch_bench.py): `import torch`
              + first CUDA tensor (CPU time over 20 paired runs, wall time, peak RSS; peak RSS
              on the CUDA 12 wheel too), the library's registered_kernels from its start event,
              the instructions it adds to registering torch 2.15's kernels (callgrind,
              BUILD/bench/register_loop), and ms per step of a small training loop; with/without ratios.
  launch_site, launch_sites_all  ns a watched async launch pays to record its site (20 Python
              frames deep, tests/pystack_probe.so); ns LABELGUARD_LAUNCH_SITES=all adds to every
              launch (each one's frames kept for the report of a device-side assert nothing
              checked; build/progs/libassertpy.so launching on the double, against the default,
              interleaved, medians).
  compiled_index  a torch.compile'd training step whose ids are GPT-2's batch (8 x 1024 tokens,
              vocabulary 50257; a small model after the embedding), with and without labelguard's
              check_index, compiled and timed interleaved in one process under `labelguard run`
              (tests/torch-fake/compiled_index.py perf; CPU graphs): the check's own cost, on a
              model small enough for it to show.
  compiled_gpt2  a whole compiled GPT-2-small training step (12 layers, width 768, vocabulary
              50257, 8 x 1024 tokens; compiled_index.py gpt2), with and without labelguard's
              checks, 3 interleaved pairs after a warm step each; goal ratio <= 1.03. The slowest
              row (about a minute a step on 2 cores, 15 GB of memory): --quick runs 1 sequence.
Prints a table and writes BUILD/bench.json. Figures are reported, never asserted: the exit
status is 0 when every measurement could be taken, 1 otherwise.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def env_for(build, preload):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_") and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = os.path.join(build, "fakecuda")
    env["LABELGUARD_LOG"] = os.path.join(build, "bench-logs")
    env["PYTHONHASHSEED"] = "0"  # CPython's start-up work varies with the hash seed otherwise
    if preload:
        env["LD_PRELOAD"] = os.path.join(build, "liblabelguard.so")
    return env


def callgrind_ir(argv, env, per_function=False):
    """Total Ir of one run; with per_function, also {function: Ir} of the library's own
    functions and of the dynamic linker's TLS helper (where a hook's cost goes)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                           env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError("callgrind %s failed: %s" % (" ".join(argv), p.stderr[-500:]))
        total = None
        with open(out) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
        if total is None:
            raise RuntimeError("no instruction total in callgrind output")
        funcs = {}
        if per_function and shutil.which("callgrind_annotate"):
            a = subprocess.run(["callgrind_annotate", "--threshold=100", out], capture_output=True, text=True)
            for line in a.stdout.splitlines():
                m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S+?):(\S+)\s+\[(\S+)\]", line)
                if m and ("liblabelguard" in m.group(4) or "__tls_get_addr" in m.group(3)):
                    funcs["%s:%s" % (os.path.basename(m.group(2)), m.group(3))] = int(m.group(1).replace(",", ""))
        return (total, funcs) if per_function else total


def fast_path(build, quick):
    prog = os.path.join(build, "bench", "launch_loop")
    n1, n2 = 1000, (21000 if quick else 101000)
    res = {"program": prog, "n1": n1, "n2": n2}
    ir = {}
    funcs = {}
    for pre in (False, True):
        for n in (n1, n2):
            if pre:
                ir[(pre, n)], funcs[n] = callgrind_ir([prog, str(n)], env_for(build, pre), per_function=True)
            else:
                ir[(pre, n)] = callgrind_ir([prog, str(n)], env_for(build, pre))
    # Per function, the difference between the two launch counts: what each launch costs there
    # (one-time work such as parsing the spec table cancels out).
    per = {k: (funcs[n2].get(k, 0) - funcs[n1].get(k, 0)) / (n2 - n1) for k in funcs[n2]}
    res["top_functions_ir_per_launch"] = dict(sorted(((k, round(v, 1)) for k, v in per.items() if v >= 0.5),
                                                     key=lambda kv: -kv[1])[:10])
    base = ir[(False, n2)] - ir[(False, n1)]
    withl = ir[(True, n2)] - ir[(True, n1)]
    res["ir"] = {"%s_%d" % ("with" if k[0] else "without", k[1]): v for k, v in ir.items()}
    res["ir_per_launch_without"] = base / (n2 - n1)
    res["ir_per_launch_with"] = withl / (n2 - n1)
    res["added_ir_per_launch"] = (withl - base) / (n2 - n1)
    # Wall clock: the program times its own loop; interleave with/without, medians.
    reps = 5 if quick else 11
    n = 100000 if quick else 300000
    t = {False: [], True: []}
    for _ in range(reps):
        for pre in (False, True):
            p = subprocess.run([prog, str(n)], env=env_for(build, pre), capture_output=True, text=True, timeout=120)
            m = re.search(r"loop_ns=(\d+)", p.stdout)
            if p.returncode != 0 or not m:
                raise RuntimeError("launch_loop failed: %s %s" % (p.stdout, p.stderr[-300:]))
            t[pre].append(int(m.group(1)) / n)
    res["ns_per_launch_without"] = statistics.median(t[False])
    res["ns_per_launch_with"] = statistics.median(t[True])
    res["wall_ratio"] = res["ns_per_launch_with"] / res["ns_per_launch_without"]
    res["added_ns_per_launch"] = res["ns_per_launch_with"] - res["ns_per_launch_without"]
    res["wall_reps"] = reps
    return res


def per_call(build, quick):
    """Instructions labelguard adds to one call that is not a launch, the same way as
    fast_path (two loop lengths, with and without): a synchronizing call with nothing
    outstanding (cudaStreamSynchronize), and cudaGetLastError once a loss kernel has been
    captured into a graph and replayed (its verdict collected): both must stay lock-free. And an
    unwatched launch while a replay's verdict is outstanding but not yet published (launch_loop
    pending): it must not take the lock or query errors either; target <= 150."""
    prog = os.path.join(build, "bench", "launch_loop")
    n1, n2 = 1000, (21000 if quick else 101000)
    res = {}
    for mode in ("sync", "lasterr_graph", "pending"):
        ir = {(pre, n): callgrind_ir([prog, str(n), mode], env_for(build, pre)) for pre in (False, True) for n in (n1, n2)}
        base = ir[(False, n2)] - ir[(False, n1)]
        withl = ir[(True, n2)] - ir[(True, n1)]
        res[mode] = {"ir_per_call_without": base / (n2 - n1), "ir_per_call_with": withl / (n2 - n1),
                     "added_ir_per_call": (withl - base) / (n2 - n1)}
    return res


def timed_runs(argv, env_a, env_b, reps, raw=None):
    a, b = [], []
    for _ in range(reps):
        for env, acc in ((env_a, a), (env_b, b)):
            t0 = time.perf_counter()
            p = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
            acc.append(time.perf_counter() - t0)
            if p.returncode != 0:
                raise RuntimeError("%s failed: %s" % (argv, p.stderr[-300:]))
    if raw is not None:
        raw.update(min_without=min(a), min_with=min(b))
    return statistics.median(a), statistics.median(b)


def startup(build, quick):
    res = {}
    for name, argv, reps in (("true", ["/bin/true"], 60 if quick else 200),
                             ("python_import_json", [sys.executable, "-c", "import json"], 15 if quick else 40)):
        raw = {}
        without, with_ = timed_runs(argv, env_for(build, False), env_for(build, True), reps, raw)
        # The median difference is the figure; the difference of the minima is shown beside it
        # because on a loaded machine it is the less noisy of the two.
        res[name] = {"ms_without": without * 1e3, "ms_with": with_ * 1e3,
                     "added_ms": (with_ - without) * 1e3, "reps": reps,
                     "added_ms_min": (raw["min_with"] - raw["min_without"]) * 1e3}
        # Instructions are immune to the machine's load: what the constructor and the loader
        # add to the process, in user space (page faults and mmap are not counted).
        if shutil.which("valgrind"):
            res[name]["added_instructions"] = (callgrind_ir(argv, env_for(build, True)) -
                                               callgrind_ir(argv, env_for(build, False)))
    return res


def host_validate(build, quick):
    prog = os.path.join(build, "progs", "nll")
    r1, r2 = 1, (2001 if quick else 10001)
    reps = 3 if quick else 7
    med = {}
    for pre in (False, True):
        for r in (r1, r2):
            argv = [prog, "fwd_2d", "--repeat", str(r), "--no-follow", "good:64"]
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                p = subprocess.run(argv, env=env_for(build, pre), capture_output=True, text=True, timeout=120)
                ts.append(time.perf_counter() - t0)
                if p.returncode != 0:
                    raise RuntimeError("nll failed: %s" % p.stderr[-300:])
            med[(pre, r)] = statistics.median(ts)
    base = med[(False, r2)] - med[(False, r1)]
    withl = med[(True, r2)] - med[(True, r1)]
    return {"labels": 64, "launches": r2 - r1, "ns_per_launch_without": base / (r2 - r1) * 1e9,
            "ns_per_launch_with": withl / (r2 - r1) * 1e9, "added_ns_per_watched_launch": (withl - base) / (r2 - r1) * 1e9}


SCAN_DTYPES = ("int64", "float32", "float16", "bfloat16", "float64")


def host_scan(build, quick, prog=None):
    prog = prog or os.path.join(build, "bench", "scan_loop")
    res = {}
    n_ir, n_wall = 100000, 16 * 512 * 512
    reps = 3 if quick else 7
    for dt in SCAN_DTYPES:
        r = {}
        if shutil.which("valgrind"):
            ir1 = callgrind_ir([prog, dt, str(n_ir), "1", "nocopy"], env_for(build, False))
            ir3 = callgrind_ir([prog, dt, str(n_ir), "3", "nocopy"], env_for(build, False))
            r["ir_per_elem"] = (ir3 - ir1) / (2 * n_ir)
        scan, copy = [], []
        for _ in range(reps):
            p = subprocess.run([prog, dt, str(n_wall), "3"], capture_output=True, text=True, timeout=120)
            m = re.search(r"scan_ns_per_elem=([\d.]+) memcpy_ns_per_elem=([\d.]+)", p.stdout)
            if p.returncode != 0 or not m:
                raise RuntimeError("scan_loop failed: %s %s" % (p.stdout, p.stderr[-300:]))
            scan.append(float(m.group(1)))
            copy.append(float(m.group(2)))
        r["ns_per_elem"] = statistics.median(scan)
        r["memcpy_ns_per_elem"] = statistics.median(copy)
        r["ratio_to_memcpy"] = r["ns_per_elem"] / r["memcpy_ns_per_elem"]
        res[dt] = r
    res["elements"] = n_wall
    return res


def bce_call(build, quick):
    py = os.path.join(build, "torch-python")
    if not os.access(py, os.X_OK):
        raise RuntimeError("%s not built" % py)
    here = os.path.dirname(os.path.abspath(__file__))
    child = [py, os.path.join(here, "..", "tests", "torch", "gpu_path.py"), "--child", "bce_cost"]
    reps = 3 if quick else 5
    ms = {False: [], True: []}
    for _ in range(reps):
        for pre in (False, True):
            env = env_for(build, pre)
            env.pop("LD_LIBRARY_PATH", None)  # torch-python sets up the double itself
            env["LG_GPU_PATH_ITERS"] = "10"
            p = subprocess.run(child, env=env, capture_output=True, text=True, timeout=300)
            m = re.search(r'"ms_per_call": ([\d.e-]+)', p.stdout)
            if p.returncode != 0 or not m:
                raise RuntimeError("bce_cost child failed: %s %s" % (p.stdout[-200:], p.stderr[-300:]))
            ms[pre].append(float(m.group(1)))
    n = 16 * 512 * 512
    scan, copy = [], []
    for _ in range(reps):
        p = subprocess.run([os.path.join(build, "bench", "scan_loop"), "float32", str(n), "3"], capture_output=True,
                           text=True, timeout=120)
        m = re.search(r"scan_ns_per_elem=([\d.]+) memcpy_ns_per_elem=([\d.]+)", p.stdout)
        if p.returncode != 0 or not m:
            raise RuntimeError("scan_loop failed: %s" % p.stderr[-300:])
        scan.append(float(m.group(1)))
        copy.append(float(m.group(2)))
    minimal = 2 * (statistics.median(scan) + statistics.median(copy)) * n / 1e6
    added = statistics.median(ms[True]) - statistics.median(ms[False])
    return {"elements": n, "ms_per_call_without": statistics.median(ms[False]),
            "ms_per_call_with": statistics.median(ms[True]), "added_ms_per_call": added,
            "minimal_host_ms": minimal, "ratio_to_minimal": added / minimal, "reps": reps}


def logprob_check(build, quick):
    """The raw-logits check's share of a watched NLL forward: 64 labels x 64 classes, so it
    reads its cap of 4096 floats; with the library both times, LABELGUARD_LOGPROB_CHECK=1 vs 0."""
    prog = os.path.join(build, "progs", "nll")
    r1, r2 = 1, (2001 if quick else 10001)
    reps = 3 if quick else 7
    med = {}
    for on in (False, True):
        env = env_for(build, True)
        env["LABELGUARD_LOGPROB_CHECK"] = "1" if on else "0"
        for r in (r1, r2):
            argv = [prog, "fwd_2d", "--classes", "64", "--repeat", str(r), "--no-follow", "good:64"]
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
                ts.append(time.perf_counter() - t0)
                if p.returncode != 0:
                    raise RuntimeError("nll failed: %s" % p.stderr[-300:])
            med[(on, r)] = statistics.median(ts)
    off = (med[(False, r2)] - med[(False, r1)]) / (r2 - r1)
    on = (med[(True, r2)] - med[(True, r1)]) / (r2 - r1)
    return {"values_read": 4096, "launches": r2 - r1, "ns_per_launch_off": off * 1e9, "ns_per_launch_on": on * 1e9,
            "added_ns_per_watched_forward": (on - off) * 1e9}


def launch_site(build, quick):
    """What a watched async launch pays to record its site (its Python frames and its caller),
    in a real interpreter 20 frames deep: tests/pystack_probe.so through ctypes, timed inside."""
    probe = os.path.join(build, "tests", "pystack_probe.so")
    n = 20000 if quick else 200000
    code = ("import ctypes, sys\n"
            "l = ctypes.CDLL(sys.argv[1])\n"
            "l.lg_probe_time_site.restype = l.lg_probe_time_record.restype = ctypes.c_double\n"
            "def d(k):\n"
            "    return d(k - 1) if k else (l.lg_probe_time_site(%d), l.lg_probe_time_record(%d))\n"
            "print('%%.1f %%.1f' %% d(17))\n" % (n, n))
    p = subprocess.run([sys.executable, "-c", code, probe], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("probe failed: %s" % p.stderr[-300:])
    site, rec = (float(x) for x in p.stdout.split())
    return {"python": sys.version.split()[0], "frames": 20, "ns_per_site": site, "ns_python_record": rec}


def launch_sites_all(build, quick):
    """What LABELGUARD_LAUNCH_SITES=all adds to every launch (its Python frames kept for the
    report of an unchecked device assert), against the default, in a real interpreter 20 frames
    deep: build/progs/libassertpy.so's lgas_clean(n) launches n kernels on the double, timed
    inside, the two settings interleaved, medians."""
    lib = os.path.join(build, "progs", "libassertpy.so")
    n = 20000 if quick else 100000
    reps = 3 if quick else 7
    code = ("import ctypes, sys, time\n"
            "l = ctypes.CDLL(sys.argv[1])\n"
            "l.lgas_clean(10)\n"
            "def d(k):\n"
            "    if k:\n"
            "        return d(k - 1)\n"
            "    t = time.perf_counter(); l.lgas_clean(%d); return time.perf_counter() - t\n"
            "print(d(17))\n" % n)
    ns = {"checked": [], "all": []}
    for _ in range(reps):
        for sites in ("checked", "all"):
            env = dict(env_for(build, True), LABELGUARD_LAUNCH_SITES=sites)
            p = subprocess.run([sys.executable, "-c", code, lib], env=env, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise RuntimeError("lgas_clean loop failed: %s" % p.stderr[-300:])
            ns[sites].append(float(p.stdout.split()[-1]) * 1e9 / n)
    a, c = statistics.median(ns["all"]), statistics.median(ns["checked"])
    return {"frames": 20, "launches": n, "ns_per_launch_checked": c, "ns_per_launch_all": a, "added_ns_per_launch": a - c}


def compiled_index(build, quick):
    """The check of a compiled step's ids: compiled_index.py perf prints both medians."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LABELGUARD_QUIET="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"))
        argv = [os.path.join(root, "scripts", "labelguard"), "run", "--log", os.path.join(d, "log"), "--",
                os.path.join(build, "torch-python"), os.path.join(root, "tests", "torch-fake", "compiled_index.py"), "perf"]
        p = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=900)
    m = re.search(r"perf: .*: ([0-9.]+) ms unchecked, ([0-9.]+) ms checked, ratio ([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("compiled_index.py perf failed: %s" % (p.stdout + p.stderr)[-300:])
    return {"ids": "8 x 1024", "vocabulary": 50257, "ms_per_step_unchecked": float(m.group(1)),
            "ms_per_step_checked": float(m.group(2)), "ratio": float(m.group(3))}


def compiled_gpt2(build, quick):
    """A compiled GPT-2-small step with and without the checks: compiled_index.py gpt2."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LABELGUARD_QUIET="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"),
                   LG_GPT2_BATCH="1" if quick else "8", LG_GPT2_PAIRS="3")
        argv = [os.path.join(root, "scripts", "labelguard"), "run", "--log", os.path.join(d, "log"), "--",
                os.path.join(build, "torch-python"), os.path.join(root, "tests", "torch-fake", "compiled_index.py"), "gpt2"]
        p = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=3600)
    m = re.search(r"gpt2: .*, (\d+) x (\d+) tokens, (\d+) pairs: ([0-9.]+) ms unchecked, ([0-9.]+) ms checked, ratio ([0-9.]+)",
                  p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("compiled_index.py gpt2 failed: %s" % (p.stdout + p.stderr)[-300:])
    return {"tokens": "%s x %s" % (m.group(1), m.group(2)), "vocabulary": 50257, "pairs": int(m.group(3)),
            "ms_per_step_unchecked": float(m.group(4)), "ms_per_step_checked": float(m.group(5)),
            "ratio": float(m.group(6))}


def exceptions(build, quick):
    """C++ throw/catch per iteration, with / without the library: an unwinder of ours that
    exported _Unwind_* would take over the host's exceptions. Timed inside the process."""
    prog = os.path.join(build, "bench", "throw_loop")
    n = "20000" if quick else "200000"
    reps = 3 if quick else 7
    ns = {False: [], True: []}
    for _ in range(reps):
        for pre in (False, True):
            p = subprocess.run([prog, n], env=env_for(build, pre), capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise RuntimeError("throw_loop failed: %s" % p.stderr[-300:])
            ns[pre].append(float(p.stdout.split("ns_per_throw=")[1].split()[0]))
    without, with_ = statistics.median(ns[False]), statistics.median(ns[True])
    return {"ns_per_throw_without": without, "ns_per_throw_with": with_, "ratio": with_ / without, "reps": reps}


def torch_real(build, quick):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_bench
    return torch_bench.measure(build, quick)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="fewer launches and repetitions")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": os.uname().nodename,
           "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
           "runtime": "test double (build/fakecuda)"}
    errors = []
    for key, fn, need in (("fast_path", fast_path, "valgrind"), ("per_call", per_call, "valgrind"),
                          ("startup", startup, None), ("host_validate", host_validate, None),
                          ("host_scan", host_scan, None), ("bce_call", bce_call, None),
                          ("logprob_check", logprob_check, None), ("launch_site", launch_site, None),
                          ("launch_sites_all", launch_sites_all, None),
                          ("exceptions", exceptions, None), ("torch", torch_real, None),
                          ("compiled_index", compiled_index, None), ("compiled_gpt2", compiled_gpt2, None)):
        if need and not shutil.which(need):
            out[key] = {"error": "%s not installed (Debian package %s)" % (need, need)}
            errors.append(key)
            continue
        try:
            out[key] = fn(build, a.quick)
        except Exception as e:  # one failing measurement must not hide the others
            out[key] = {"error": str(e)}
            errors.append(key)
    with open(os.path.join(build, "bench.json"), "w") as f:
        json.dump(out, f, indent=1)

    def g(d, k, fmt):
        return fmt % d[k] if isinstance(d, dict) and k in d else "n/a"
    fp, st, hv = out["fast_path"], out["startup"], out["host_validate"]
    print("labelguard bench (%s, %s, %s)" % (out["date"], out["cpu"], out["runtime"]))
    print("%-52s %14s %10s" % ("measure", "value", "target"))
    print("%-52s %14s %10s" % ("instructions added per unwatched launch (callgrind)", g(fp, "added_ir_per_launch", "%.1f"), "<= 100"))
    print("%-52s %14s %10s" % ("  instructions per launch without / with", "%s / %s" % (g(fp, "ir_per_launch_without", "%.0f"), g(fp, "ir_per_launch_with", "%.0f")), ""))
    for fn, v in (fp.get("top_functions_ir_per_launch") or {}).items() if isinstance(fp, dict) else ():
        print("%-52s %14s %10s" % ("    " + fn[:48], "%.1f" % v, ""))
    pc = out["per_call"] if isinstance(out["per_call"], dict) else {}
    for k, label in (("sync", "per cudaStreamSynchronize, nothing outstanding"),
                     ("lasterr_graph", "per cudaGetLastError after a checked graph ran")):
        print("%-52s %14s %10s" % ("instructions added " + label, g(pc.get(k, {}), "added_ir_per_call", "%.1f"), ""))
    print("%-52s %14s %10s" % ("instructions added per launch, verdict not ready", g(pc.get("pending", {}), "added_ir_per_call", "%.1f"), "<= 150"))
    print("%-52s %14s %10s" % ("wall time per unwatched launch, with/without ratio", g(fp, "wall_ratio", "%.4f"), ""))
    print("%-52s %14s %10s" % ("  ns per launch without / with", "%s / %s" % (g(fp, "ns_per_launch_without", "%.1f"), g(fp, "ns_per_launch_with", "%.1f")), ""))
    for k, label in (("true", "/bin/true"), ("python_import_json", "python3 -c 'import json'")):
        sk = st.get(k, {}) if isinstance(st, dict) else {}
        print("%-52s %14s %10s" % ("start-up added, %s (ms)" % label,
                                   "%s (min %s)" % (g(sk, "added_ms", "%.3f"), g(sk, "added_ms_min", "%.3f")), "< 1 ms"))
    for k, label in (("true", "/bin/true"), ("python_import_json", "python3 -c 'import json'")):
        sk = st.get(k, {}) if isinstance(st, dict) else {}
        print("%-52s %14s %10s" % ("start-up instructions added, %s" % label, g(sk, "added_instructions", "%d"), ""))
    print("%-52s %14s %10s" % ("host backend: ns added per watched launch (64 labels)", g(hv, "added_ns_per_watched_launch", "%.0f"), "info"))
    hs = out["host_scan"] if isinstance(out.get("host_scan"), dict) else {}
    for dt in SCAN_DTYPES:
        d = hs.get(dt, {})
        print("%-52s %14s %10s" % ("host scan %s: ns/elem (x memcpy); instr/elem" % dt,
                                   "%s (%s); %s" % (g(d, "ns_per_elem", "%.2f"), g(d, "ratio_to_memcpy", "%.1f"),
                                                    g(d, "ir_per_elem", "%.1f")), "info"))
    bc = out["bce_call"]
    print("%-52s %14s %10s" % ("BCE 16x1x512x512 f32, host backend: ms added per call", g(bc, "added_ms_per_call", "%.2f"), "info"))
    print("%-52s %14s %10s" % ("  minimal host work (2 copies + min/max pass), ms; ratio",
                               "%s; %s" % (g(bc, "minimal_host_ms", "%.2f"), g(bc, "ratio_to_minimal", "%.2f")), "<= 1.5"))
    lp = out["logprob_check"]
    print("%-52s %14s %10s" % ("raw-logits check: ns added per NLL forward (4096 values)", g(lp, "added_ns_per_watched_forward", "%.0f"), "info"))
    ex = out["exceptions"]
    ls = out.get("launch_site", {})
    print("%-52s %14s %10s" % ("async launch site, ns per watched launch (20 frames)", g(ls, "ns_per_site", "%.0f"), "<= 500"))
    print("%-52s %14s %10s" % ("  of which the Python record, ns", g(ls, "ns_python_record", "%.0f"), ""))
    la = out.get("launch_sites_all", {})
    print("%-52s %14s %10s" % ("LABELGUARD_LAUNCH_SITES=all, ns added per launch", g(la, "added_ns_per_launch", "%.0f"), "info"))
    print("%-52s %14s %10s" % ("C++ throw/catch, with/without ratio", g(ex, "ratio", "%.3f"), "~1"))
    print("%-52s %14s %10s" % ("  ns per throw without / with", "%s / %s" % (g(ex, "ns_per_throw_without", "%.0f"), g(ex, "ns_per_throw_with", "%.0f")), ""))
    tr = out["torch"] if isinstance(out.get("torch"), dict) else {}
    ts, tt = tr.get("startup", {}), tr.get("steps", {})
    print("real torch (%s) on the double:" % tr.get("wheel", "n/a"))
    print("%-52s %14s %10s" % ("  import torch + first CUDA tensor, CPU time ratio", g(ts, "cpu_ratio_paired_median", "%.3f"), "<= 1.03"))
    print("%-52s %14s %10s" % ("    (median of %s pairs' ratios; ratio of medians)" % ts.get("pairs", "?"), g(ts, "cpu_ratio", "%.3f"), ""))
    print("%-52s %14s %10s" % ("    CPU s without / with", "%s / %s" % (g(ts, "cpu_s_without", "%.2f"), g(ts, "cpu_s_with", "%.2f")), ""))
    print("%-52s %14s %10s" % ("  the same, wall time ratio (medians)", g(ts, "wall_ratio", "%.3f"), "info"))
    print("%-52s %14s %10s" % ("  peak RSS added (MB)", g(ts, "added_rss_mb", "%.2f"), "<= 2"))
    print("%-52s %14s %10s" % ("    peak RSS MB without / with", "%s / %s" % (g(ts, "peak_rss_mb_without", "%.1f"), g(ts, "peak_rss_mb_with", "%.1f")), ""))
    t12 = tr.get("startup_cu12", {}) if isinstance(tr.get("startup_cu12"), dict) else {}
    print("%-52s %14s %10s" % ("  CUDA 12 wheel (torch 2.10): peak RSS added (MB)", g(t12, "added_rss_mb", "%.2f"), "<= 2"))
    print("%-52s %14s %10s" % ("    CPU ratio (median of %s paired runs)" % t12.get("pairs", "?"), g(t12, "cpu_ratio_paired_median", "%.3f"), "info"))
    print("%-52s %14s %10s" % ("  registered kernels (start event)", g(tr, "registered_kernels", "%s"), "info"))
    rg = tr.get("registration", {}) if isinstance(tr.get("registration"), dict) else {}
    print("%-52s %14s %10s" % ("  instructions added registering %s kernels" % rg.get("kernels", "?"), g(rg, "added_ir", "%d"), "info"))
    print("%-52s %14s %10s" % ("    per kernel; unregistering them all (exit)", "%s; %s" % (g(rg, "added_ir_per_kernel", "%.0f"), g(rg, "unregister_added_ir", "%d")), ""))
    if rg.get("error"):
        print("  registration: %s" % rg["error"])
    te = tr.get("enable", {}) if isinstance(tr.get("enable"), dict) else {}
    for k, label in (("enable_after", "after import torch"), ("enable_before", "before import torch")):
        e = te.get(k, {})
        print("%-52s %14s %10s" % ("  import labelguard + enable() %s (ms)" % label, g(e, "enable_ms", "%.1f"), "info"))
        print("%-52s %14s %10s" % ("    whole process, wall / CPU ratio", "%s / %s" % (g(e, "wall_ratio", "%.3f"), g(e, "cpu_ratio", "%.3f")), ""))
    print("%-52s %14s %10s" % ("  training step, CPU time ratio", g(tt, "cpu_ratio", "%.3f"), "info"))
    print("%-52s %14s %10s" % ("    CPU ms per step without / with", "%s / %s" % (g(tt, "cpu_ms_per_step_without", "%.3f"), g(tt, "cpu_ms_per_step_with", "%.3f")), ""))
    print("%-52s %14s %10s" % ("  training step, wall time ratio", g(tt, "ratio", "%.3f"), "info"))
    ti = tr.get("index", {}) if isinstance(tr.get("index"), dict) else {}
    print("%-52s %14s %10s" % ("  index launch on the async double (%s us kernels), us" % ti.get("kernel_us", "?"), "", ""))
    for m in ("none", "sync", "async"):
        print("%-52s %14s %10s" % ("    %s: wall / CPU us per launch" % {"none": "without", "sync": "sync mode", "async": "async mode"}[m],
                                   "%s / %s" % (g(ti, "us_per_launch_" + m, "%.1f"), g(ti, "cpu_us_per_launch_" + m, "%.1f")), "info"))
    ts2 = tr.get("sampling", {}) if isinstance(tr.get("sampling"), dict) else {}
    print("%-52s %14s %10s" % ("  200-step multinomial loop, async double (%s us ops)" % ts2.get("kernel_us", "?"), "", ""))
    for m in ("none", "sync", "async"):
        print("%-52s %14s %10s" % ("    %s: wall / CPU us per step" % {"none": "without", "sync": "sync mode", "async": "async mode"}[m],
                                   "%s / %s" % (g(ts2, "us_per_launch_" + m, "%.1f"), g(ts2, "cpu_us_per_launch_" + m, "%.1f")), "info"))
    ci = out["compiled_index"]
    print("%-52s %14s %10s" % ("  compiled step, GPT-2's ids: with/without ratio", g(ci, "ratio", "%.3f"), "info"))
    print("%-52s %14s %10s" % ("    ms per step without / with", "%s / %s" % (g(ci, "ms_per_step_unchecked", "%.2f"),
                                                                        g(ci, "ms_per_step_checked", "%.2f")), ""))
    cg = out["compiled_gpt2"]
    print("%-52s %14s %10s" % ("  compiled GPT-2-small step (%s tokens): with/without" % cg.get("tokens", "?")
                               if isinstance(cg, dict) else "  compiled GPT-2-small step: with/without",
                               g(cg, "ratio", "%.3f"), "<= 1.03"))
    print("%-52s %14s %10s" % ("    ms per step without / with", "%s / %s" % (g(cg, "ms_per_step_unchecked", "%.0f"),
                                                                        g(cg, "ms_per_step_checked", "%.0f")), ""))
    for k in errors:
        print("%s: %s" % (k, out[k]["error"]))
    print("written: %s" % os.path.join(build, "bench.json"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
