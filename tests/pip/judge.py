"""judge.py: checks bad_label.py's RESULT line (tests/pip/test_wheel.sh).

  python3 judge.py OUTFILE VENV
Prints one ok:/FAIL: line per check; exit 1 when any failed."""
import json
import os
import sys

out, venv = sys.argv[1], os.path.realpath(sys.argv[2])
lines = [l for l in open(out, errors="replace") if l.startswith("RESULT ")]
if not lines:
    print("FAIL: no RESULT line")
    sys.exit(1)
r = json.loads(lines[-1][len("RESULT "):])
bad = 0


def check(what, cond, got):
    global bad
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else " -- got %r" % (got,)))
    bad += not cond


w = r["way"]
check(w + ": the bad loss raised RuntimeError", r.get("raised") in ("RuntimeError", "AcceleratorError"), r.get("raised"))
check(w + ": with labelguard's text", "labelguard: bad labels" in r.get("text", ""), r.get("text"))
check(w + ": last_violation() gives the offending pairs", r.get("samples") == [[2, 5], [4, 7]], r.get("samples"))
check(w + ": of the NLL kernel", (r.get("kernel") or "").startswith("nll_loss_forward"), r.get("kernel"))
check(w + ": labels.cpu() works afterwards", r.get("labels_after") == [0, 1, 5, 2, 7, 3, 4, 0], r.get("labels_after"))
check(w + ": a new CUDA copy works afterwards", r.get("copy_after") == [3, 1, 2], r.get("copy_after"))
maps = r.get("maps") or []
check(w + ": the venv's library is the one mapped", len(maps) == 1 and os.path.realpath(maps[0]).startswith(venv + os.sep), maps)
sys.exit(1 if bad else 0)
