#!/usr/bin/env bash
# test_jupyter.sh: `%load_ext labelguard` in a real Jupyter kernel, from the installed wheel.
# A fresh venv holds the wheel and the pinned ipykernel/nbclient (tests/pip/requirements.txt);
# a kernelspec starts the venv's Python on real torch 2.15 on the CUDA test double; nbclient runs
# tests/pip/notebook.py's three cells from a directory outside the checkout: the extension
# (before torch is imported) says it is enabled in one line, the bad-label cell fails with
# labelguard's text, and the next cell still uses CUDA and reads the violation's pairs.
# Run by tests/run.sh (plain build only).
. "$(dirname "$0")/lib.sh"
pip_setup
pip_tools
cp "$LG_ROOT/tests/pip/notebook.py" "$OUT/"
torch_env 13
mkdir -p "$T/jupyter/kernels/lgtorch" "$T/jupyter-runtime"
# The kernel gets the torch/double environment; the nbclient process itself does not need it.
"$PY" - "$T/jupyter/kernels/lgtorch/kernel.json" "$VENV/bin/python" "${TENV[@]}" <<'PYEOF'
import json, sys
env = dict(a.split("=", 1) for a in sys.argv[3:])
json.dump({"argv": [sys.argv[2], "-m", "ipykernel_launcher", "-f", "{connection_file}"],
           "display_name": "labelguard test (torch on the CUDA test double)", "language": "python",
           "env": env}, open(sys.argv[1], "w"), indent=1)
PYEOF
expect_off_paths
TENV=()
in_venv env JUPYTER_PATH="$T/jupyter" JUPYTER_RUNTIME_DIR="$T/jupyter-runtime" JUPYTER_PLATFORM_DIRS=1 \
  HOME="$T" python notebook.py lgtorch
expect_rc 0 "nbclient ran the notebook"
"$PY" - "$T/out" "$VENV" <<'PYEOF' || { show; fail "the notebook's cells: see above"; }
import json, os, sys
cells = {}
for line in open(sys.argv[1]):
    if line.startswith("CELL "):
        n, rest = line[5:].split(" ", 1)
        cells[int(n)] = json.loads(rest)
bad = 0
def check(what, cond, got):
    global bad
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else " -- got %r" % (got,)))
    bad += not cond
def text(n, kind):
    return "".join(o["text"] for o in cells.get(n, []) if kind in o)
c1 = text(1, "stream")
check("cell 1: one line saying labelguard is enabled in this kernel",
      c1.count("\n") == 1 and c1.startswith("labelguard: enabled in this kernel (action=raise, mode=sync"), c1)
check("cell 1: no error", not text(1, "error"), cells.get(1))
errs = [o for o in cells.get(2, []) if "error" in o]
check("cell 2: fails with RuntimeError (torch.AcceleratorError)", len(errs) == 1 and errs[0]["error"] in ("AcceleratorError", "RuntimeError"), errs)
check("cell 2: with labelguard's text", bool(errs) and "labelguard: bad labels" in errs[0]["text"]
      and "target[2] = 5" in errs[0]["text"], errs)
c3 = text(3, "stream")
check("cell 3: no error", not text(3, "error"), cells.get(3))
check("cell 3: labels.cpu() works", "labels [0, 1, 5, 2, 7, 3, 4, 0]" in c3, c3)
check("cell 3: a new CUDA copy works", "copy [3, 1, 2]" in c3, c3)
check("cell 3: last_violation() gives the pairs", "samples [[2, 5], [4, 7]]" in c3, c3)
venv = os.path.realpath(sys.argv[2])
maps = [l for l in c3.splitlines() if l.startswith("maps ")]
check("cell 3: the kernel mapped the venv's library", len(maps) == 1 and venv in maps[0] and maps[0].count("liblabelguard.so") == 1, maps)
sys.exit(1 if bad else 0)
PYEOF
finish
