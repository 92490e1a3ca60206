"""caselib.py: what the real-torch case scripts (bce_cases.py, beyond_cases.py, closure_cases.py,
margin_cases.py, named_index_cases.py) have in common: one "ok: ..." or "FAIL: ..." line per check,
with a failure count that decides the exit status; the events labelguard wrote to the
LABELGUARD_LOG directory; and a call that runs one CUDA op up to a synchronisation.

Imported by those scripts, each run as its own process under build/torch-python by its driver
(test_bce.sh and the others, through lg_run_cases in lib.sh). Tested through them: every check of
those tests prints and counts here, so a broken helper fails them all.
"""
import glob
import json
import os
import sys

import torch

fails = 0
_seen = {}  # OUT -> how many of its violations new_events() has returned


def check(what, cond, detail=""):
    """Prints "ok: WHAT", or "FAIL: WHAT  [DETAIL]" (DETAIL cut at 700 characters, enough for an
    event or an exception message), and counts the failure for finish()."""
    global fails
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "  [%s]" % str(detail)[:700]))
    fails += 0 if cond else 1


def finish():
    """Ends the process: exit status 1 when any check failed, else 0 (what the drivers judge)."""
    sys.exit(1 if fails else 0)


def events(out, kind="violation"):
    """Every event of that kind ("violation", "warning", ...) in the JSONL files under out, file by
    file in name order, each file's in the order written. Read afresh at each call: labelguard
    appends as it goes."""
    ev = []
    for f in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        with open(f) as fh:
            ev += [json.loads(line) for line in fh if line.strip()]
    return [e for e in ev if e["event"] == kind]


def new_events(out):
    """The violations written under out since this function's last call for it (all of them at
    the first): where one process runs many cases, a case's events are the ones its call added."""
    v = events(out)
    start, _seen[out] = _seen.get(out, 0), len(v)
    return v[start:]


def run(fn):
    """Calls fn(), then torch.cuda.synchronize(), so that a device-side assert or an error labelguard
    defers to the next synchronising call surfaces here rather than in a later case. Returns
    (fn's result, None), or (None, the exception): torch.AcceleratorError is a RuntimeError, and a
    labelguard block raises one."""
    try:
        out = fn()
        torch.cuda.synchronize()
        return out, None
    except Exception as e:
        return None, e
