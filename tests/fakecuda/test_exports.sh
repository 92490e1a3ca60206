#!/usr/bin/env bash
# The double exports exactly the real runtimes' functions (exports-13.txt / exports-12.txt, read
# from NVIDIA's libcudart by gen_exports.sh), each under the real version node, plus its own
# fakecudart_* extras; a function it does not model answers cudaErrorNotSupported (801) and sets
# the last error; the driver entry points answer "symbol not found" as without a driver.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
for major in 13 12; do
  lib="$LG_FAKE_DIR/libcudart.so.$major"
  [ $major = 12 ] && lib="$LG_ROOT/$LG_BUILD/fakecuda12/libcudart.so.12"
  [ -f "$lib" ] || { fail "missing $lib"; continue; }
  want="$(grep -v '^#' "$LG_ROOT/tests/fakecuda/exports-$major.txt" | awk '{ print $1 "@@" $2 }' | sort)"
  have="$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" { print $3 }' | grep -v '^fakecudart_' | sort)"
  diff <(echo "$want") <(echo "$have") > "$TMP/diff" || { fail "libcudart.so.$major exports differ from exports-$major.txt:"; head -20 "$TMP/diff"; }
  # Nothing else leaks out (a helper without static, a libc symbol).
  extra="$(nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | grep -vE "@@libcudart\.so\.$major$" || true)"
  [ -z "$extra" ] || fail "libcudart.so.$major exports outside its version node: $extra"
  cat > "$TMP/call.py" <<PY
import ctypes
rt = ctypes.CDLL("$lib")
print("unmodelled", rt.cudaGraphAddMemcpyNode1D(None), rt.cudaGetLastError(), rt.cudaGetLastError())
fn = ctypes.c_void_p(1); st = ctypes.c_int(-1)
print("entry", rt.cudaGetDriverEntryPointByVersion(b"cuMemCreate", ctypes.byref(fn), 12000, 0, ctypes.byref(st)), st.value, fn.value)
PY
  python3 "$TMP/call.py" > "$OUT" 2>"$ERR" || { fail "$major: call.py"; cat "$ERR"; }
  expect_line "unmodelled 801 801 0"
  expect_line "entry 0 1 None"
done
finish
