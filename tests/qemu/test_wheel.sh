#!/usr/bin/env bash
# test_wheel.sh: the aarch64 wheel, as `make wheel ARCH=aarch64` makes it from build-aarch64/:
#   - built by the wheel backend with ARCH=aarch64 (its make is the cross one), named
#     labelguard-V-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl, and `auditwheel
#     show` (tests/pip/requirements.txt's pin) finds it consistent with that tag;
#   - pip installs it into an aarch64 venv (the arm64 tree's CPython 3.11 under qemu-user), where
#     labelguard.enable() arms the library the wheel carries and a bad label, launched from
#     Python through ctypes (build-aarch64/progs/libnllpy.so on the aarch64 runtime double), is
#     raised as a RuntimeError with the label's value and the Python line of the launch.
# Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
W_KEEP="$W"
# shellcheck source=tests/pip/lib.sh
LG_BUILD="$A64" . "$LG_ROOT/tests/pip/lib.sh"
trap 'rm -rf "$T" "$W_KEEP"' EXIT
(cd "$LG_ROOT" && ARCH=aarch64 OBJDUMP=aarch64-linux-gnu-objdump OBJCOPY=aarch64-linux-gnu-objcopy LG_BUILD="$A64" python3 -c \
  'import sys; sys.path.insert(0, "python"); import wheel_backend as b; print(b.build_wheel(sys.argv[1]))' "$T/dist") \
  >"$T/build.out" 2>"$T/build.err" || { cat "$T/build.err"; fail "the wheel backend failed"; finish; }
WHEEL="$T/dist/$(tail -n1 "$T/build.out")"
echo "wheel: ${WHEEL##*/} ($(stat -c %s "$WHEEL") bytes)"
check "tagged manylinux_2_17_aarch64 (manylinux2014)" \
  bash -c "[[ '${WHEEL##*/}' == labelguard-*-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl ]]"
VENV="$T/tools"
python3 -m venv "$VENV" >"$T/venv.log" 2>&1 || { cat "$T/venv.log"; fail "python3 -m venv failed"; finish; }
pip_tools
"$VENV/bin/auditwheel" show "$WHEEL" >"$T/audit" 2>&1
sed 's/^/  | /' "$T/audit"
check "auditwheel show: consistent with manylinux_2_17_aarch64" \
  bash -c "tr -s ' \n' ' ' <'$T/audit' | grep -q 'consistent with the following platform tag: \"manylinux_2_17_aarch64\"'"

# The aarch64 venv, and pip (the host's, running its code in that interpreter) installing the wheel.
A="$T/a64venv"
"$W/bin/python3" -m venv --without-pip "$A" >"$T/a64venv.log" 2>&1 || { cat "$T/a64venv.log"; fail "venv under qemu failed"; finish; }
python3 -m pip --python "$A/bin/python" install --no-deps --no-index --disable-pip-version-check -q "$WHEEL" \
  >"$T/a64pip.log" 2>&1 || { cat "$T/a64pip.log"; fail "pip install into the aarch64 venv failed"; finish; }
check "installed into the aarch64 venv" test -f "$A/lib/python3.11/site-packages/labelguard/_native/liblabelguard.so"
cat >"$T/enable.py" <<'PY'
import ctypes, json, sys
import os
import labelguard
# enable()'s out-of-process check of the configuration execs /bin/true, which qemu-user without
# binfmt runs as the host's: the wheel's library is loaded here first, and enable() takes that
# copy (as where `import labelguard` follows an earlier load) and arms it.
ctypes.CDLL(labelguard.library_path(), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
cfg = labelguard.enable()
lib = ctypes.CDLL(sys.argv[1])
lib.lgpy_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                            ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
labels = [i % 10 for i in range(16)]
labels[5] = 10
arr = (ctypes.c_int64 * 16)(*labels)
err = ctypes.create_string_buffer(4096)
try:
    rc = lib.lgpy_launch(0, 0, arr, 16, 10, -100, err, len(err))  # MARK_LAUNCH
    if rc != 0:
        raise RuntimeError("CUDA error: " + err.value.decode())
    print("RESULT " + json.dumps({"raised": None}))
except RuntimeError as e:
    maps = [l.split()[-1] for l in open("/proc/self/maps") if "liblabelguard" in l]
    print("RESULT " + json.dumps({"raised": str(e), "lib": sorted(set(maps)), "memcheck": lib.lgpy_memcheck()}))
PY
mkdir -p "$T/out"
(cd "$T/out" && LABELGUARD_LOG="$T/logs" LD_LIBRARY_PATH="$LG_FAKE_DIR" "$A/bin/python" "$T/enable.py" "$W/progs/libnllpy.so") \
  >"$T/enable.out" 2>"$T/enable.err"
sed 's/^/  | /' "$T/enable.out" "$T/enable.err" | tail -n 20
line=$(grep -n 'MARK_LAUNCH' "$T/enable.py" | cut -d: -f1)
res=$(sed -n 's/^RESULT //p' "$T/enable.out")
check "enable() then a bad launch raised, naming the label's value" \
  bash -c "python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r[\"raised\"] and \"= 10, outside [0, 10)\" in r[\"raised\"]))' '$res'"
check "the library mapped is the wheel's" bash -c "python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(r[\"lib\"] != [sys.argv[2]])' '$res' '$A/lib/python3.11/site-packages/labelguard/_native/liblabelguard.so'"
check "the context survives (memory round-trips)" bash -c "python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])[\"memcheck\"] != 0)' '$res'"
check "stderr names the Python line of the launch" grep -q "at $T/enable.py:$line in <module>" "$T/enable.err"
finish
