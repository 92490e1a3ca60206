#!/usr/bin/env bash
# test_pystack_wheel.sh: the wheel on CPython 3.14, as a pip user there gets it. Builds the wheel
# (the backend, as `make wheel`), and inside the Debian root of tests/pyroot/install.sh (built
# on first use, cached under ~/.cache/labelguard) makes a venv with Debian's python3.14,
# installs the wheel into it offline, and runs tests/pip/bad_label.py with torch 2.15 for cp314
# on the runtime test double (copied out of the build directory; nothing of the checkout on a
# path): under `labelguard run`, and armed by labelguard.enable() after CUDA started. Each run
# is judged by tests/pip/judge.py (the error, last_violation()'s pairs, the context alive, the
# venv's library mapped), and its JSONL's python_stack must name bad_label.py's loss line, from
# the launching thread.
# Needs root (chroot): exits 77 as another user, and in a sanitizer build (lib.sh).
# Run by tests/run.sh; alone: bash tests/pip/test_pystack_wheel.sh
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "the Debian root needs root (chroot)"; exit 77; }
for f in "$LG_BUILD/fakecuda/libcudart.so.13" "$LG_BUILD/fakecuda-driver/libcuda.so.1"; do
  [ -e "$LG_ROOT/$f" ] || { fail "$f missing: run make test-programs"; finish; }
done
"$LG_ROOT/tests/pyroot/install.sh" || { fail "cannot build the Debian root (tests/pyroot/install.sh)"; finish; }
W="$T/w"     # /w inside the root: the wheel, the venv, the script, the logs
mkdir -p "$W/out" "$W/double"
pip_build_wheel "$W"
cp "$LG_ROOT/tests/pip/bad_label.py" "$W/out/"
cp "$LG_ROOT/$LG_BUILD/fakecuda/libcudart.so.13" "$LG_ROOT/$LG_BUILD/fakecuda-driver/libcuda.so.1" "$W/double/"
inroot() { # CMD... : in /w/out inside the root, stdout $T/out, stderr $T/err, status $rc
  "$LG_ROOT/tests/pyroot/install.sh" run -b "$W:/w" -- env -C /w/out "$@" >"$T/out" 2>"$T/err"; rc=$?
}
inroot python3.14 -m venv /w/venv
expect_rc 0 "python3.14 -m venv in the Debian root" || finish
inroot /w/venv/bin/python -m pip install --no-deps --no-index --disable-pip-version-check -q "/w/${WHEEL##*/}"
expect_rc 0 "pip install --no-deps ${WHEEL##*/} into the 3.14 venv" || finish

TORCH=(PATH=/w/venv/bin:/usr/bin:/bin PYTHONPATH=/opt/torch-cp314/site-packages PYTHONNOUSERSITE=1
       LD_LIBRARY_PATH=/opt/torch-cp314/lib:/w/double LD_PRELOAD=/w/double/libcudart.so.13)
loss_line=$(grep -n 'F.nll_loss(logp, labels)' "$W/out/bad_label.py" | cut -d: -f1)
# stack_names_loss LOGDIR WHAT: the violation's python_stack has bad_label.py's <module> at the loss line.
stack_names_loss() {
  "$PY" - "$1" "$loss_line" <<'PY' && ok "$2: python_stack names bad_label.py:$loss_line, launching thread" || fail "$2: python_stack does not name bad_label.py:$loss_line"
import glob, json, sys
ev = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")) for l in open(f) if l.strip()]
v = [e for e in ev if e["event"] == "violation"]
frames = [(f["file"], f["function"], f["line"]) for f in v[0]["python_stack"]] if v else []
print("  python_stack:", frames, v[0].get("python_stack_thread") if v else None)
sys.exit(0 if v and ("/w/out/bad_label.py", "<module>", int(sys.argv[2])) in frames
         and v[0].get("python_stack_thread") == "launching" else 1)
PY
}

inroot env "${TORCH[@]}" labelguard run --log /w/logs-run -- python bad_label.py run
expect_rc 0 "3.14: labelguard run -- python bad_label.py (torch 2.15 cp314)"
expect_in err "at /w/out/bad_label.py:$loss_line in <module>   (python)" "3.14 run: the stderr report names the loss line"
"$PY" "$LG_ROOT/tests/pip/judge.py" "$T/out" /w/venv || { show; fail "3.14 labelguard run: see above"; }
stack_names_loss "$W/logs-run" "3.14 run"

inroot env "${TORCH[@]}" LABELGUARD_LOG=/w/logs-enable python bad_label.py after
expect_rc 0 "3.14: labelguard.enable() after CUDA started"
"$PY" "$LG_ROOT/tests/pip/judge.py" "$T/out" /w/venv || { show; fail "3.14 enable(): see above"; }
stack_names_loss "$W/logs-enable" "3.14 enable()"
finish
