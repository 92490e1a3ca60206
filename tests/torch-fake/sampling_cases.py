"""sampling_cases.py MODE OUT [CASE]: torch.multinomial with bad probabilities on real torch on the test
double, judged in this process; prints one "ok: ..." or "FAIL: ..." line per check and exits 1 when
any failed. Run by test_sampling.sh under both wheels, one process per mode (and case).

With replacement and several samples, the op copies the probabilities (a real copy on the double),
then renormRowsL1 reads that copy and sampleMultinomialWithReplacement reads it renormalized; on a
GPU a NaN, an inf, a negative value or a row of zeros ends in a device-side assert there
(`!(val < zero)`, `cumdist[size - 1] > 0`). Both kernels are no-ops on the double, so the copy
holds the caller's values when labelguard reads it: renormRowsL1 is checked before launch (the
first kernel that reads them), the sampling kernel's buffer too. The probabilities are made on the
CPU and copied; 4 rows of 8, row 1 bad (or row 2 for the row of zeros).
MODE: raise (every kind in float32, float16 and bfloat16: blocked, the position, the value, the
cause), mask (falls back to raise, the note says why), log (runs: both kernels reported), async
(raise with LABELGUARD_MODE=async: the launch runs, the verdict is raised late), control (valid
probabilities, weights above 1, zeros beside a positive weight, -0.0, 1-D: no event, no exception).
OUT: the LABELGUARD_LOG directory.
CASE one (with raise): the one-sample and without-replacement paths, through torch._assert_async: clean torch.multinomial(probs, 1) and (probs, 2, replacement=False) run unreported; the
condition those paths compute (self.max() < inf & self.min() >= 0, then the row sums) comes from
reductions the double does not run, so a bad one is driven here through the same kernel with the
message multinomial passes and a false condition copied from the CPU: the report names the op
multinomial and the sampling cause. scripts/gpu-check.sh runs the real call on a GPU.
CASE one_async (with async): the same condition read without a wait: the kernel asserts, and the
late verdict names multinomial (its message travels with the check) and the calling line.
"""
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file, even under python -P
from caselib import check, events, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
CASE = sys.argv[3] if len(sys.argv) > 3 else ""
ROWS, COLS, DRAWS = 4, 8, 4
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# kind -> (row, column, value put there, cause, the value as the report prints it); zero_row zeroes
# its whole row, reported as probs[row, :] = 0
KINDS = {
    "nan": (1, 3, float("nan"), "fp16_overflow", "nan"),
    "inf": (1, 5, float("inf"), "fp16_overflow", "inf"),
    "negative": (1, 2, -0.5, "negative_probs", "-0.5"),
    "zero_row": (2, None, 0.0, "all_masked", "0"),
}


def probs(dtype, kind=None):
    """ROWS x COLS valid probabilities (rows summing to 1) in dtype, with the kind's bad value."""
    h = torch.softmax(torch.arange(ROWS * COLS, dtype=torch.float32).view(ROWS, COLS) / 7.0, -1)
    if kind:
        row, col, val = KINDS[kind][:3]
        if col is None:
            h[row] = 0.0
        else:
            h[row, col] = val
    return h.to(dtype)


def sample(p, n=DRAWS, replacement=True):
    return torch.multinomial(p.cuda(), n, replacement=replacement)


def judge(dt, kind, exc, V, blocked=True):
    row, col, _, cause, shown = KINDS[kind]
    at = "probs[%d, %s]" % (row, ":" if col is None else col)
    tag = "%s %s %s" % (MODE, dt, kind)
    if blocked:
        check("%s: labelguard's error at the call naming %s = %s and the cause %s" % (tag, at, shown, cause),
              exc is not None and "labelguard" in str(exc) and "%s = %s" % (at, shown) in str(exc)
              and cause in str(exc) and "device-side assert triggered" not in str(exc), exc)
    ren = [v for v in V if v["kernel"] == "renormRowsL1"]
    check("%s: one violation of renormRowsL1, family multinomial" % tag,
          len(ren) == 1 and ren[0]["family"] == "multinomial", [(v["kernel"], v.get("family")) for v in V])
    if not ren:
        return
    v = ren[0]
    t = v["target"]
    check("%s: target kind probs, dtype %s, shape [%d, %d], count %d" % (tag, dt, ROWS, COLS, ROWS * COLS),
          (t.get("kind"), t.get("dtype"), t.get("shape"), t.get("count")) == ("probs", dt, [ROWS, COLS], ROWS * COLS),
          t)
    idx = row * COLS + (0 if col is None else col)
    s = v["bad"]["samples"]
    got = [(x["index"], x["value"]) for x in s]
    want_val = {"nan": "nan", "inf": "inf", "-0.5": -0.5, "0": 0.0}[shown]
    check("%s: the one bad sample (%d, %s), bad count 1" % (tag, idx, shown),
          got == [(idx, want_val)] and v["bad"]["count"] == 1, v["bad"])
    check("%s: cause %s, its sentence names row %d" % (tag, cause, row),
          v["cause"] == cause and ("row %d of %d" % (row, ROWS)) in v["cause_text"], (v["cause"], v["cause_text"]))
    check("%s: the Python frame of the multinomial call" % tag,
          any(f["file"].endswith("sampling_cases.py") for f in v.get("python_stack", [])), v.get("python_stack"))
    return v


if CASE == "one_async":
    # Async mode reads the condition without waiting: the kernel asserts as it would have (the
    # double's context dies), and the verdict, read at the next sync, still names multinomial,
    # from the message kept with the check, and the line that called it.
    msg = "probability tensor contains either `inf`, `nan` or element < 0"
    _, exc = run(lambda: (torch._assert_async(torch.tensor(False).cuda(), msg), torch.cuda.synchronize()))  # MARK_ONE
    V = new_events(OUT)
    check("one_async: the sync raises (the kernel asserted: async mode does not block it)", exc is not None, exc)
    me = os.path.abspath(__file__)
    line = next(i + 1 for i, l in enumerate(open(me).read().splitlines()) if l.rstrip().endswith("# MARK_ONE"))
    check("one_async: one event, op multinomial, cause fp16_overflow, read at a later call, launched at the call's line",
          len(V) == 1 and V[0]["op"] == "multinomial" and V[0]["cause"] == "fp16_overflow"
          and isinstance(V[0].get("verdict_read_at"), dict) and V[0]["outcome"] == "launched"
          and any(os.path.abspath(f["file"] or "") == me and f["line"] == line for f in V[0]["python_stack"]), V)
elif CASE == "one":
    for dt, dtype in DTYPES.items():
        out, exc = run(lambda: sample(probs(dtype), 1))
        check("one %s: torch.multinomial(probs, 1) runs unreported" % dt, exc is None and new_events(OUT) == [], exc)
        out, exc = run(lambda: sample(probs(dtype), 2, replacement=False))
        check("one %s: without replacement runs unreported" % dt, exc is None and new_events(OUT) == [], exc)
    msgs = {"probability tensor contains either `inf`, `nan` or element < 0": "fp16_overflow",
            "invalid multinomial distribution (sum of probabilities <= 0)": "all_masked"}
    for msg, cause in msgs.items():
        _, exc = run(lambda: torch._assert_async(torch.tensor(False).cuda(), msg))
        V = new_events(OUT)
        check("one: multinomial's check '%s...' blocked, its error names multinomial and the sampling cause" % msg[:30],
              exc is not None and "multinomial's device-side check" in str(exc)
              and "device-side assert triggered" not in str(exc), exc)
        check("one: the event: op multinomial, cause %s" % cause,
              len(V) == 1 and V[0]["op"] == "multinomial" and V[0]["cause"] == cause
              and "torch.multinomial" in V[0]["cause_text"], V)
    _, exc = run(lambda: torch._assert_async(torch.tensor(False).cuda(), "some other check"))
    V = new_events(OUT)
    check("one: another message keeps the generic cause (other)",
          len(V) == 1 and V[0]["cause"] == "other" and V[0]["op"] != "multinomial", V)
elif MODE == "raise":
    for dt, dtype in DTYPES.items():
        for kind in KINDS:
            _, exc = run(lambda: sample(probs(dtype, kind)))
            V = new_events(OUT)
            v = judge(dt, kind, exc, V)
            if v:
                check("raise %s %s: outcome blocked" % (dt, kind), v["outcome"] == "blocked", v["outcome"])
    check("raise: the sampling kernel never ran (every call blocked at renormRowsL1)",
          not [v for v in events(OUT) if v["kernel"] == "sampleMultinomialWithReplacement"], events(OUT))
    # the context is intact: a clean call runs afterwards
    out, exc = run(lambda: sample(probs(torch.float32)))
    check("raise: a clean call afterwards runs", exc is None and out is not None and out.shape == (ROWS, DRAWS), exc)
elif MODE == "mask":
    _, exc = run(lambda: sample(probs(torch.float32, "nan")))
    v = judge("float32", "nan", exc, new_events(OUT))
    if v:
        check("mask: falls back to raise, the note says no value can stand in for a probability",
              "mask fell back to raise" in v.get("note", "") and "no value can stand in" in v.get("note", ""),
              v.get("note"))
elif MODE == "log":
    _, exc = run(lambda: sample(probs(torch.float16, "inf")))
    V = new_events(OUT)
    check("log: the launch runs (no exception from labelguard)", exc is None, exc)
    v = judge("float16", "inf", exc, V, blocked=False)
    if v:
        check("log: outcome launched", v["outcome"] == "launched", v["outcome"])
        check("log: float16 inf: the cause text says half-precision logits overflowed",
              "half-precision" in v["cause_text"], v["cause_text"])
    # `labelguard report` on the log: positions as probs[row, column], the rows and the rule
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("LABELGUARD_")}
    env["PYTHONPATH"] = os.path.join(root, "python")
    r = subprocess.run([sys.executable, "-m", "labelguard", "report", OUT], capture_output=True, text=True, env=env)
    check("log: labelguard report names probs[1, 5] = inf, 4 rows of 8 and the rule",
          "probs[1, 5] = inf" in r.stdout and "4 rows of 8" in r.stdout and "each row's sum > 0" in r.stdout,
          r.stdout[-600:] + r.stderr[-300:])
    smp = [v for v in V if v["kernel"] == "sampleMultinomialWithReplacement"]
    check("log: the sampling kernel's buffer is reported too (the same value, launched)",
          len(smp) == 1 and smp[0]["outcome"] == "launched" and smp[0]["cause"] == "fp16_overflow"
          and smp[0]["target"]["shape"] == [ROWS, COLS], smp)
elif MODE == "async":
    _, exc = run(lambda: sample(probs(torch.bfloat16, "negative")))
    V = events(OUT)
    check("async: raised at the call or the next synchronisation, by labelguard, saying the launch ran",
          exc is not None and "labelguard" in str(exc) and "the launch ran on them" in str(exc), exc)
    ren = [v for v in V if v["kernel"] == "renormRowsL1"]
    check("async: renormRowsL1 reported, outcome launched, the note says the verdict is late",
          len(ren) == 1 and ren[0]["outcome"] == "launched" and "verdict late" in ren[0].get("note", "")
          and ren[0]["cause"] == "negative_probs", ren)
elif MODE == "control":
    for dt, dtype in DTYPES.items():
        h = probs(dtype)
        h[0, :4] = 0.0      # zeros beside positive weights in the same row
        h[1] *= 50.0        # unnormalized weights above 1
        h[2, 0] = -0.0      # -0 is zero, not negative
        out, exc = run(lambda: sample(h))
        check("control %s: no exception, %d x %d samples" % (dt, ROWS, DRAWS),
              exc is None and out is not None and tuple(out.shape) == (ROWS, DRAWS), exc)
        out, exc = run(lambda: sample(h[3]))
        check("control %s: a 1-D distribution runs" % dt, exc is None, exc)
    check("control: no violation", events(OUT) == [], events(OUT))
    check("control: no warning", events(OUT, "warning") == [], events(OUT, "warning"))
else:
    check("known mode %s" % MODE, False)
finish()
