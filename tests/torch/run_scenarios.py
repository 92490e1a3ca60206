#!/usr/bin/env python3
"""run_scenarios.py: runs every PyTorch scenario (scenarios.py) under every action and judges
the outcome; the GPU proof that labelguard keeps a real CUDA context alive.

Called by scripts/gpu-check.sh (part `scenarios`):
  run_scenarios.py --lib build/liblabelguard.so --out parts/scenarios.data.json --workdir DIR
                   [-j 8] [--only SUBSTR] [--timeout 60]
Each (scenario, mode) runs in its own process group with a timeout, because a device-side
assert kills the CUDA context for good. Modes:
  baseline     no labelguard: the real device-side assert must happen (the scenario is real)
  raise        RuntimeError naming the label at the bad step; then torch.cuda.synchronize(),
               .cpu() and one more training step work; a violation event (outcome blocked)
  mask         runs to the end; the loss (or gradient) equals PyTorch's with the bad labels set
               to ignore_index; a violation event (outcome masked)
  log          the real device-side assert, and a violation event (outcome launched)
  hold         the launching thread stops: the process is still alive 2 s after the held event;
               this driver then sends SIGUSR1 and the process must go on and exit
  *_async      the same with LABELGUARD_MODE=async (the error may surface up to 2 steps later)
The control scenario (200 clean steps) must finish with no exception and no event.
Exit status 0 when every run passed, 1 otherwise. Needs a GPU and PyTorch; GPU-free, the
judging code is exercised by `--judge-selftest` on canned results.
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import signal
import subprocess
import sys
import time

import procs

HERE = os.path.dirname(os.path.abspath(__file__))
BAD = ["ce_2d", "ce_none", "nll_logsoftmax", "seg_void255", "uint8", "label_smoothing",
       "bf16_autocast", "backward", "cuda_graph"]
MATRIX = ([(s, m) for s in BAD for m in ("baseline", "raise", "mask", "log")] +
          [(s, "hold") for s in ("ce_2d", "seg_void255")] +
          [(s, m) for s in ("ce_2d", "seg_void255", "uint8", "backward", "cuda_graph")
           for m in ("raise_async", "mask_async")] +
          [("control_200", m) for m in ("baseline", "raise", "raise_async")])
HOLD_ALIVE_S = 2.0
# The real assert's text. Not just "device-side assert": PyTorch appends "Compile with
# `TORCH_USE_CUDA_DSA` to enable device-side assertions." to every CUDA error, ours included.
REAL_ASSERT = "device-side assert triggered"


def read_events(logdir):
    ev = []
    for fn in sorted(glob.glob(os.path.join(logdir, "*.jsonl"))):
        with open(fn, errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    ev.append(json.loads(line))
                except ValueError:
                    ev.append({"event": "_unparsable", "line": line[:200]})
    return ev


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def run_one(lib, workdir, scenario, mode, timeout):
    d = os.path.join(workdir, "%s-%s" % (scenario, mode))
    os.makedirs(d, exist_ok=True)
    for fn in glob.glob(os.path.join(d, "logs", "*")):
        os.unlink(fn)
    result = os.path.join(d, "result.json")
    if os.path.exists(result):
        os.unlink(result)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LABELGUARD_") and k not in ("LD_PRELOAD", "CUDA_LAUNCH_BLOCKING")}
    action = mode.split("_")[0]
    if action != "baseline":
        env["LD_PRELOAD"] = lib
        env["LABELGUARD_ACTION"] = action
        env["LABELGUARD_MODE"] = "async" if mode.endswith("_async") else "sync"
        env["LABELGUARD_LOG"] = os.path.join(d, "logs")
    out = {"scenario": scenario, "mode": mode, "dir": d}
    t0 = time.time()
    with open(os.path.join(d, "stdout.txt"), "w") as so, open(os.path.join(d, "stderr.txt"), "w") as se:
        p = procs.popen([sys.executable, os.path.join(HERE, "scenarios.py"), scenario,
                         "--result", result], env=env, stdout=so, stderr=se)
        try:
            if action == "hold":
                out["hold"] = watch_hold(p, os.path.join(d, "logs"), timeout)
            p.wait(timeout=max(1.0, timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            out["timed_out"] = True
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    procs.forget(p)
    out["rc"] = p.returncode
    out["seconds"] = round(time.time() - t0, 2)
    try:
        with open(result) as f:
            out["result"] = json.load(f)
    except (OSError, ValueError):
        out["result"] = None
    out["events"] = [e for e in read_events(os.path.join(d, "logs")) if e.get("event") != "start"]
    out["stderr_tail"] = tail(os.path.join(d, "stderr.txt"))
    return out


def watch_hold(p, logdir, timeout):
    """Waits for the held violation, checks the process stays stopped, then releases it."""
    h = {"held_event": False}
    t0 = time.time()
    while time.time() - t0 < timeout * 0.6 and p.poll() is None:
        if any(e.get("event") == "violation" for e in read_events(logdir)):
            h["held_event"] = True
            h["event_after_s"] = round(time.time() - t0, 2)
            break
        time.sleep(0.2)
    if not h["held_event"]:
        return h
    time.sleep(HOLD_ALIVE_S)
    h["alive_after_hold"] = p.poll() is None
    if h["alive_after_hold"]:
        os.kill(p.pid, signal.SIGUSR1)
        t1 = time.time()
        try:
            p.wait(timeout=30)
            h["released_after_s"] = round(time.time() - t1, 2)
        except subprocess.TimeoutExpired:
            h["released_after_s"] = None
    return h


def judge(r):
    """Sets r['ok'] and r['why'] from one run's record (see the module comment)."""
    mode, res = r["mode"], r.get("result")
    action = mode.split("_")[0]
    is_async = mode.endswith("_async")
    viol = [e for e in r.get("events", []) if e.get("event") == "violation"]
    why = []
    if r.get("timed_out") and action != "hold":
        return fail(r, "timed out after %.0f s" % r["seconds"])
    if res is None:
        return fail(r, "no result (rc %s): %s" % (r.get("rc"), r.get("stderr_tail", "")[-300:]))
    exc = res.get("exception")
    post = res.get("post") or {}
    if res["scenario"] == "control_200":
        if exc:
            return fail(r, "control raised %s at step %s: %s" % (exc["type"], exc["step"], exc["text"][:200]))
        if res["completed_steps"] < 200:
            return fail(r, "control stopped after %d steps" % res["completed_steps"])
        if viol:
            return fail(r, "control produced %d violation events" % len(viol))
        return ok(r, "200 clean steps, no event")
    bad_step, label = res["bad_step"], res["bad_label"]
    text = (exc or {}).get("text", "")
    if action in ("baseline", "log"):
        if not exc or REAL_ASSERT not in text.lower():
            return fail(r, "expected the real device-side assert, got %s" %
                        ("no error" if not exc else "%s: %s" % (exc["type"], text[:200])))
        if exc["step"] < bad_step:
            return fail(r, "assert at step %d before the bad step %d" % (exc["step"], bad_step))
        why.append("device-side assert at step %d (%s); context %s" % (
            exc["step"], exc["phase"], "survives" if post.get("synchronize") else "lost"))
        if action == "log":
            if not viol:
                return fail(r, "the assert happened but labelguard logged no violation")
            if any(v.get("outcome") not in (None, "launched") for v in viol):
                return fail(r, "log mode outcome %s" % [v.get("outcome") for v in viol])
            why.append("%d violation event(s), outcome launched" % len(viol))
        return ok(r, "; ".join(why))
    if not viol:
        return fail(r, "no violation event; exception: %s" % (text[:200] if exc else "none"))
    kernels = sorted({v.get("kernel", "?") for v in viol})
    if action == "raise" or action == "hold":
        if action == "hold":
            h = r.get("hold") or {}
            if not h.get("held_event"):
                return fail(r, "no held violation event")
            if not h.get("alive_after_hold"):
                return fail(r, "process ended within %.0f s of the held event (rc %s)" % (HOLD_ALIVE_S, r.get("rc")))
            if h.get("released_after_s") is None:
                return fail(r, "SIGUSR1 did not release the held thread within 30 s")
            if r.get("rc") != 0:
                return fail(r, "after SIGUSR1 the process ended with status %s" % r.get("rc"))
            why.append("held >= %.0f s, released by SIGUSR1 in %.2f s" % (HOLD_ALIVE_S, h["released_after_s"]))
            if not exc:
                return ok(r, "; ".join(why) + "; run then completed")
        if not exc:
            return fail(r, "no exception (completed %d steps)" % res["completed_steps"])
        if not exc.get("is_runtime_error"):
            return fail(r, "%s is not a RuntimeError: %s" % (exc["type"], text[:200]))
        if REAL_ASSERT in text.lower():
            return fail(r, "the real assert fired: %s" % text[:200])
        if "labelguard" not in text.lower():
            return fail(r, "the RuntimeError is not labelguard's: %s" % text[:300])
        late = 2 if (is_async or res["scenario"] == "cuda_graph") else 0
        if not bad_step <= exc["step"] <= bad_step + late:
            return fail(r, "RuntimeError at step %d, bad step %d" % (exc["step"], bad_step))
        if str(label) not in text:
            return fail(r, "the error text does not name label %s: %s" % (label, text[:300]))
        for k in ("synchronize", "cpu", "next_step"):
            if not post.get(k):
                return fail(r, "after the error, %s failed: %s" % (k, post.get(k + "_error", "?")))
        why.append("RuntimeError at step %d (%s) naming %s; synchronize, .cpu() and a further step work; kernels %s"
                   % (exc["step"], exc["phase"], label, ", ".join(kernels)))
        return ok(r, "; ".join(why))
    if action == "mask":
        if exc:
            return fail(r, "mask raised %s at step %d: %s" % (exc["type"], exc["step"], text[:200]))
        mc = res.get("mask_check")
        if not mc:
            return fail(r, "no mask check recorded")
        if not mc.get("ok"):
            return fail(r, "loss %.6g, expected %.6g with the bad labels ignored (err %.3g > %.3g)"
                        % (mc["got"], mc["expected"], mc["abs_err"], mc["tol"]))
        if not is_async and any(v.get("outcome") not in (None, "masked") for v in viol):
            return fail(r, "mask outcome %s" % [v.get("outcome") for v in viol])
        return ok(r, "completed; %s equals the ignore_index reference (err %.2g); kernels %s"
                  % (mc.get("what", "loss"), mc["abs_err"], ", ".join(kernels)))
    return fail(r, "unknown mode")


def ok(r, why):
    r["ok"], r["why"] = True, why
    return r


def fail(r, why):
    r["ok"], r["why"] = False, why
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib")
    ap.add_argument("--out")
    ap.add_argument("--workdir", default="scenario-runs")
    ap.add_argument("-j", "--jobs", type=int, default=8)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--budget", type=float, default=110,
                    help="seconds for the whole matrix: runs not started by then are reported as such")
    ap.add_argument("--judge-selftest", metavar="CASES_JSON",
                    help="judge canned run records and compare with their expected verdicts")
    a = ap.parse_args()
    if a.judge_selftest:
        with open(a.judge_selftest) as f:
            cases = json.load(f)
        bad = 0
        for c in cases:
            r = judge(dict(c["run"]))
            if r["ok"] != c["expect_ok"]:
                bad += 1
                print("MISJUDGED %s: ok=%s (%s)" % (c["name"], r["ok"], r["why"]))
        print("%d cases, %d misjudged" % (len(cases), bad))
        return 1 if bad else 0
    if not a.lib or not a.out:
        ap.error("--lib and --out are required")
    procs.install()
    if not os.path.exists(a.lib):
        print("run_scenarios: %s not built" % a.lib)
        return 1
    todo = [(s, m) for s, m in MATRIX if a.only in "%s-%s" % (s, m)]
    os.makedirs(a.workdir, exist_ok=True)
    deadline = time.time() + a.budget
    results = []

    def guarded(s, m):
        left = deadline - time.time()
        if left < 10:
            return {"scenario": s, "mode": m, "seconds": 0, "timed_out": True, "result": None,
                    "not_started": True}
        return run_one(a.lib, a.workdir, s, m, min(a.timeout, left))

    def write():
        order = {k: i for i, k in enumerate(MATRIX)}
        rs = sorted(results, key=lambda r: order.get((r["scenario"], r["mode"]), 0))
        npass = sum(r["ok"] for r in rs)
        summary = "%d/%d scenario runs passed" % (npass, len(todo))
        with open(a.out + ".tmp", "w") as f:
            json.dump({"summary": summary, "results": rs}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)  # written after each run: a killed part keeps its results
        return npass, summary

    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(guarded, s, m) for s, m in todo]
        for fu in cf.as_completed(futs):
            r = fu.result()
            if r.get("not_started"):
                fail(r, "not started: the scenarios' time budget was spent")
            else:
                judge(r)
            # keep the report small: the full records stay in the workdir
            r["events"] = [{k: e.get(k) for k in ("event", "kernel", "outcome", "cause", "what", "detail", "bad")}
                           for e in r.get("events", [])][:5]
            if r["ok"]:
                r.pop("stderr_tail", None)
            results.append(r)
            print("%-4s %-16s %-12s %5.1fs  %s" % ("PASS" if r["ok"] else "FAIL", r["scenario"],
                                                    r["mode"], r["seconds"], r["why"]), flush=True)
            write()
    npass, summary = write()
    print(summary)
    return 0 if npass == len(todo) else 1


if __name__ == "__main__":
    sys.exit(main())
