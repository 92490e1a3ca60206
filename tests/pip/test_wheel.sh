#!/usr/bin/env bash
# test_wheel.sh: the wheel as a pip user gets it. Builds it (the backend, as `make wheel`, and
# `pip wheel .`: the same bytes), reads its contents (the library inside, no shared glib or
# libunwind, nothing newer than GLIBC_2.17 needed, no path of the checkout), checks the tag with
# `auditwheel show`, installs it with `pip install --no-deps` into a fresh venv and runs it from a
# directory outside the checkout with the checkout on no path: the console script and
# `python -m labelguard`, `labelguard audit` of a shipped table, `labelguard run` on a real-torch
# bad-label script, the Python API armed after CUDA started (both torch wheels) and before
# `import torch` (the runtime double preloaded, and found by the loader as a real libcudart is),
# and a bad option.
# Run by tests/run.sh (plain build only).
. "$(dirname "$0")/lib.sh"
pip_setup
name=${WHEEL##*/}
expected="labelguard-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
[ "$name" = "$expected" ] && ok "wheel name $name" || fail "wheel name: $name, expected $expected"

# --- pip wheel . gives the same file --------------------------------------------------------
(cd "$LG_ROOT" && LG_BUILD="$LG_BUILD" "$PY" -m pip wheel --no-deps --disable-pip-version-check -q -w "$T/dist2" .) \
  >"$T/pipwheel.log" 2>&1 || { cat "$T/pipwheel.log"; fail "pip wheel . failed"; }
if [ -f "$T/dist2/$name" ]; then
  if cmp -s "$WHEEL" "$T/dist2/$name"; then ok "pip wheel . gives the same bytes as the backend"
  else fail "pip wheel . differs from the backend's wheel"; fi
else
  fail "pip wheel . wrote no $name (got: $(ls "$T/dist2" 2>/dev/null))"
fi

# --- contents -------------------------------------------------------------------------------
mkdir -p "$T/x"
(cd "$T/x" && "$PY" -m zipfile -e "$WHEEL" .) || fail "the wheel does not unzip"
for f in labelguard/_native/liblabelguard.so labelguard/__init__.py labelguard/cli.py labelguard/__main__.py \
         labelguard/_ipython.py labelguard/data/pytorch.conf labelguard-0.1.0.dist-info/entry_points.txt; do
  [ -f "$T/x/$f" ] && ok "the wheel holds $f" || fail "the wheel lacks $f"
done
shared=$(cd "$T/x" && find . -name '*.so*' ! -name liblabelguard.so)
[ -z "$shared" ] && ok "no other shared object in the wheel" || fail "shared objects besides the library: $shared"
lib="$T/x/labelguard/_native/liblabelguard.so"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "ld-linux-x86-64.so.2 libc.so.6 libdl.so.2 libpthread.so.0 " ] && ok "the library needs only glibc: $needed" \
  || fail "the library's NEEDED: $needed (glib, libunwind must be inside, static)"
if nm -D --defined-only "$lib" | grep -qE ' (g_|_Unwind_|unw_)'; then fail "glib or libunwind symbols exported"
else ok "no glib or libunwind symbol exported"; fi
newest=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
[ "$(printf '%s\n2.17\n' "$newest" | sort -V | tail -n1)" = 2.17 ] && ok "newest glibc version needed: $newest" \
  || fail "the library needs GLIBC_$newest, newer than 2.17"
if grep -rlF -- "$LG_ROOT" "$T/x" >"$T/paths" 2>/dev/null; then fail "the checkout's path is in: $(tr '\n' ' ' <"$T/paths")"
else ok "no path of the checkout anywhere in the wheel"; fi

# --- auditwheel -----------------------------------------------------------------------------
pip_tools
"$VENV/bin/auditwheel" show "$WHEEL" >"$T/aw" 2>&1
tr '\n' ' ' <"$T/aw" | grep -q 'consistent with the following platform tag: *"manylinux_2_17_x86_64"' \
  && ok "auditwheel show: manylinux_2_17_x86_64" || { cat "$T/aw"; fail "auditwheel show does not accept manylinux_2_17_x86_64"; }

# --- the command line from the venv ---------------------------------------------------------
expect_off_paths
in_venv labelguard --help
expect_rc 0 "labelguard --help" && expect_in out "usage: labelguard COMMAND" "the console script prints the usage"
cp "$T/out" "$T/help1"
in_venv python -m labelguard --help
expect_rc 0 "python -m labelguard --help"
cmp -s "$T/out" "$T/help1" && ok "python -m labelguard and the console script print the same" \
  || fail "python -m labelguard --help differs from labelguard --help"
in_venv labelguard run --action bogus -- true
expect_rc 2 "run --action bogus exits 2" && expect_in err "allowed: raise, hold, mask, log, abort" "and names the allowed values"
in_venv labelguard nonsense
expect_rc 2 "an unknown command exits 2"
# audit: the verdict from the wheel's own library (labelguard_coverage), the tables and known
# gaps from labelguard/data/wheels: the output a checkout gives, with no test program anywhere.
in_venv labelguard audit "$T/x/labelguard/data/wheels/2.11.0+cu130.tsv"
expect_rc 0 "labelguard audit of a shipped table" && \
  expect_in out "torch 2.11.0+cu130: 72 loss kernels, 68 covered, 4 known gaps" "audit's summary from the wheel"
(cd "$LG_ROOT" && LABELGUARD_LIB="$lib" "$LG_ROOT/scripts/labelguard" audit "$T/x/labelguard/data/wheels/2.11.0+cu130.tsv") \
  >"$T/audit.checkout" 2>&1
cmp -s "$T/out" "$T/audit.checkout" && ok "the same audit output as the checkout's" \
  || { diff "$T/audit.checkout" "$T/out" | head; fail "the wheel's audit differs from the checkout's"; }

# --- real torch, from outside the checkout --------------------------------------------------
cp "$LG_ROOT/tests/pip/bad_label.py" "$LG_ROOT/tests/pip/judge.py" "$OUT/"
torch_env 13
expect_off_paths
in_venv labelguard run --log "$OUT/logs" -- python bad_label.py run
expect_rc 0 "labelguard run -- python bad_label.py (torch 2.15)"
expect_in err "labelguard: bad labels in nll_loss_forward" "run: the report block on stderr"
"$PY" "$OUT/judge.py" "$T/out" "$VENV" || { show; fail "labelguard run: see above"; }
ls "$OUT/logs"/*.jsonl >/dev/null 2>&1 && ok "run: the JSONL log is written" || fail "run: no JSONL in $OUT/logs"

for major in 13 12; do
  torch_env $major
  in_venv python bad_label.py after
  expect_rc 0 "enable() after CUDA started (CUDA $major)"
  "$PY" "$OUT/judge.py" "$T/out" "$VENV" || { show; fail "enable() after CUDA started, CUDA $major: see above"; }
done
for how in preloaded found; do
  torch_env 13 $how
  in_venv python bad_label.py before
  expect_rc 0 "enable() before import torch (the double $how)"
  "$PY" "$OUT/judge.py" "$T/out" "$VENV" || { show; fail "enable() before import torch, the double $how: see above"; }
done
# As on a machine with a GPU: the runtime is loaded with torch, after labelguard.
torch_env 13 found
in_venv python bad_label.py after
expect_rc 0 "enable() after CUDA started (the double found by the loader)"
"$PY" "$OUT/judge.py" "$T/out" "$VENV" || { show; fail "enable() after CUDA started, the double found: see above"; }

# disable() lets the bad launch through, its device assert kills the context, and enable() then
# refuses with LabelguardError naming the dead context.
cp "$LG_ROOT/tests/pip/dead_context.py" "$OUT/"
torch_env 13
in_venv python dead_context.py
expect_rc 0 "dead_context.py"
expect_in out "STEP guarded RuntimeError CUDA error: labelguard: bad labels" "enabled: the bad loss raises labelguard's error"
expect_in out "STEP disabled RuntimeError" "disabled: the bad loss reaches the kernel" && expect_in out "device-side assert" "and its device assert"
expect_in out "STEP enable_again LabelguardError" "enable() on a dead context raises LabelguardError" && expect_in out "710" "naming the sticky error"

# A bad option is a ValueError naming the allowed values; the interpreter lives on.
in_venv python -c '
import labelguard
try:
    labelguard.enable(mode="fast")
except ValueError as e:
    print("VALUE", e)
try:
    labelguard.enable(colour="red")
except TypeError as e:
    print("TYPE", e)
print("alive", labelguard.last_violation())'
expect_rc 0 "enable() with bad options"
expect_in out "VALUE LABELGUARD_MODE=\"fast\" is not valid; allowed: sync, async" "a bad mode is a ValueError naming sync, async"
expect_in out "TYPE labelguard.enable() got unknown option colour" "an unknown option is a TypeError"
expect_in out "alive None" "the interpreter lives on; no violation yet"
finish
