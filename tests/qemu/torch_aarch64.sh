#!/usr/bin/env bash
# torch_aarch64.sh: real PyTorch for Arm (PyPI's default aarch64 wheel, CUDA 13: torch 2.15.0,
# cu132) on the aarch64 runtime double under qemu-user, with the aarch64 library preloaded: a bad
# label given to F.nll_loss is raised as a RuntimeError whose text has the label's value, stderr
# names the Python line of the loss, and the labels still come back to the CPU afterwards; the same
# with labelguard.enable() from the aarch64 wheel's package after `import torch`. Run by
# `make test-aarch64` only, not by `make test`: it installs about 3 GB of wheels (4.4 GB
# unpacked) and one run takes ~25 s of emulation (`import torch` ~20 s).
# Install: $LG_TORCH_AARCH64_HOME (default ~/.cache/labelguard/torch-aarch64)/torch2.15.0-cu13-py311
# (pip download/install --target for the aarch64 platform tags, by the host's pip; the wheels
# kept in wheels/; .installed when done; one flock). Every libcudart is removed from it: the
# double must be the only runtime torch can bind. Exit 0 pass, else fail.
. "$(dirname "$0")/lib.sh"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-qemu.XXXXXX")"
trap 'rm -rf "$T" "$W"' EXIT
. "$LG_ROOT/tests/lib.sh"
lg_checks_init "$T"
home="${LG_TORCH_AARCH64_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/torch-aarch64}"
dir="$home/torch2.15.0-cu13-py311"
# The aarch64 wheels are tagged from manylinux_2_17 to 2_28; pip's --platform takes each tag as is.
plats=(--platform manylinux2014_aarch64 --platform linux_aarch64)
for v in 17 18 19 20 21 22 23 24 25 26 27 28; do plats+=(--platform "manylinux_2_${v}_aarch64"); done
pipx=(python3 -m pip --disable-pip-version-check --no-input)
if [ ! -f "$dir/.installed" ]; then
  mkdir -p "$home/wheels"
  exec 9>"$home/.lock"
  flock 9
  if [ ! -f "$dir/.installed" ]; then
    start=$(date +%s)
    rm -rf "$dir.tmp" "$dir"
    echo "installing torch 2.15.0 for aarch64 into $dir" >&2
    "${pipx[@]}" download --only-binary=:all: "${plats[@]}" --python-version 3.11 --implementation cp \
      -d "$home/wheels" torch==2.15.0 numpy >"$T/pip.log" 2>&1 &&
    "${pipx[@]}" install --no-deps --no-index --find-links "$home/wheels" --only-binary=:all: "${plats[@]}" \
      --python-version 3.11 --implementation cp --no-compile --target "$dir.tmp/site-packages" \
      $(cd "$home/wheels" && ls ./*.whl | sed 's|^\./||; s/-[0-9].*//; s/_/-/g' | sort -u) >>"$T/pip.log" 2>&1 ||
      { tail -n 20 "$T/pip.log"; rm -rf "$dir.tmp"; fail "pip download/install of aarch64 torch failed"; finish; }
    find "$dir.tmp/site-packages" -name 'libcudart.so*' -exec rm -f {} +
    mkdir -p "$dir.tmp/lib"
    find "$dir.tmp/site-packages/nvidia" -path '*/lib/lib*.so*' | while read -r f; do
      ln -sf "../site-packages/${f#"$dir.tmp/site-packages/"}" "$dir.tmp/lib/"
    done
    echo "torch 2.15.0 aarch64, installed $(date -u +%FT%TZ) in $(($(date +%s) - start)) s" >"$dir.tmp/.installed"
    mv "$dir.tmp" "$dir"
  fi
  exec 9>&-
fi
check "no libcudart in the install" bash -c "[ -z \"\$(find '$dir/site-packages' -name 'libcudart.so*')\" ]"

cat >"$T/bad.py" <<'PY'
import json, sys, time
t0 = time.time()
import torch
import torch.nn.functional as F
res = {"torch": torch.__version__, "cuda": torch.version.cuda, "import_s": round(time.time() - t0, 1)}
logp = torch.log_softmax(torch.linspace(-1, 1, 40).reshape(8, 5), 1).cuda()
labels = torch.tensor([0, 1, 2, 3, 4, 5, 1, 2]).cuda()
try:
    loss = F.nll_loss(logp, labels)  # MARK_LOSS
    torch.cuda.synchronize()
    res["raised"] = None
except RuntimeError as e:
    res["raised"] = str(e)
res["labels_after"] = labels.cpu().tolist()
print("RESULT " + json.dumps(res))
PY
start=$(date +%s)
(cd "$T" && PYTHONNOUSERSITE=1 PYTHONPATH="$dir/site-packages" LD_LIBRARY_PATH="$dir/lib:$LG_ROOT/$A64/fakecuda-driver" \
  LABELGUARD_LOG="$T/logs" LD_PRELOAD="$LG_ROOT/$A64/liblabelguard.so $LG_ROOT/$A64/fakecuda/libcudart.so.13" \
  "$QEMU" -L "$ARM64_ROOT" "$ARM64_ROOT/usr/bin/python3.11" "$T/bad.py") >"$T/out" 2>"$T/err"
echo "one run under qemu: $(($(date +%s) - start)) s"
sed 's/^/  | /' "$T/out" "$T/err" | tail -n 20
res=$(sed -n 's/^RESULT //p' "$T/out")
line=$(grep -n 'MARK_LOSS' "$T/bad.py" | cut -d: -f1)
q() { python3 -c "import json, sys; r = json.loads(sys.argv[1] or '{}'); sys.exit(not ($1))" "$res"; }
check "real aarch64 torch 2.15.0 (CUDA 13) ran on the double" q 'r.get("torch", "").startswith("2.15.0") and r.get("cuda", "").startswith("13")'
check "the bad label raised, with its value and the range" q 'r.get("raised") and "bad label target[5] = 5, outside [0, 5)" in r["raised"]'
check "stderr names the loss's Python line" grep -q "at $T/bad.py:$line in <module>" "$T/err"
check "the labels come back afterwards (context alive)" q 'r.get("labels_after") == [0, 1, 2, 3, 4, 5, 1, 2]'

# enable() after `import torch` and a first CUDA tensor, from the aarch64 wheel's package (the
# wheel unpacked onto PYTHONPATH), the double preloaded alone as build/torch-python does.
# enable()'s out-of-process check of the configuration execs /bin/true, which qemu-user without
# binfmt runs as the host's: the wheel's library is loaded first and enable() takes that copy.
# Default hooks: enable() leaves CUPTI alone where interposition covers the runtime, as here.
# With CUPTI started (LABELGUARD_HOOKS=cupti) and the wheel's real libcupti.so.13 on the double,
# qemu crashes in the loader (a dlopen from libcupti): left to an Arm machine with a GPU
# (scripts/gpu-check.sh).
(cd "$LG_ROOT" && ARCH=aarch64 OBJDUMP=aarch64-linux-gnu-objdump OBJCOPY=aarch64-linux-gnu-objcopy LG_BUILD="$A64" python3 -c \
  'import sys; sys.path.insert(0, "python"); import wheel_backend as b; print(b.build_wheel(sys.argv[1]))' "$T/dist") \
  >"$T/build.out" 2>"$T/build.err" || { cat "$T/build.err"; fail "the wheel backend failed"; finish; }
python3 -m zipfile -e "$T/dist/$(tail -n1 "$T/build.out")" "$T/lgpkg"
cat >"$T/enable.py" <<'PY'
import ctypes, json, os
import torch
import torch.nn.functional as F
logp = torch.log_softmax(torch.linspace(-1, 1, 40).reshape(8, 5), 1).cuda()  # CUDA has started
import labelguard
ctypes.CDLL(labelguard.library_path(), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
labelguard.enable()
labels = torch.tensor([0, 1, 2, 3, 4, 5, 1, 2]).cuda()
res = {"lib": labelguard.library_path()}
try:
    F.nll_loss(logp, labels)  # MARK_LOSS
    torch.cuda.synchronize()
    res["raised"] = None
except RuntimeError as e:
    res["raised"] = str(e)
res["labels_after"] = labels.cpu().tolist()
print("RESULT " + json.dumps(res))
PY
(cd "$T" && PYTHONNOUSERSITE=1 PYTHONPATH="$T/lgpkg:$dir/site-packages" LD_LIBRARY_PATH="$dir/lib:$LG_ROOT/$A64/fakecuda-driver" \
  LABELGUARD_LOG="$T/logs" LD_PRELOAD="$LG_ROOT/$A64/fakecuda/libcudart.so.13" \
  "$QEMU" -L "$ARM64_ROOT" "$ARM64_ROOT/usr/bin/python3.11" "$T/enable.py") >"$T/enable.out" 2>"$T/enable.err"
sed 's/^/  | /' "$T/enable.out" "$T/enable.err" | tail -n 12
res=$(sed -n 's/^RESULT //p' "$T/enable.out")
line=$(grep -n 'MARK_LOSS' "$T/enable.py" | cut -d: -f1)
check "enable() after import torch: the library is the wheel's" q "r.get('lib', '').startswith('$T/lgpkg/')"
check "enable() after import torch: the bad label raised with its value" q 'r.get("raised") and "bad label target[5] = 5" in r["raised"]'
check "enable() after import torch: stderr names the loss's line" grep -q "at $T/enable.py:$line in <module>" "$T/enable.err"
check "enable() after import torch: the labels come back" q 'r.get("labels_after") == [0, 1, 2, 3, 4, 5, 1, 2]'
finish
