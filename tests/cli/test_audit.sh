#!/usr/bin/env bash
# test_audit.sh: `labelguard audit` and doctor's loss-kernel coverage line (the reader
# python/labelguard/torch_audit.py; the verdict from the library's labelguard_coverage(),
# src/kernels/coverage.c, called by labelguard._coverage in a child process):
#   - a committed wheel table: the coverage summary and the launch entry point;
#   - a table with one kernel's layout changed: exit 1, the kernel and its first differing
#     parameter named; a LABELGUARD_KERNELS spec for that layout covers it;
#   - an installed-like copy (the package with its data/wheels, the library through
#     LABELGUARD_LIB or in _native/, outside the checkout, no test_wheels anywhere): the same
#     output and exit codes as the checkout;
#   - the child's environment is clean (a bad LABELGUARD_MODE of the caller does not reach the
#     library's constructor); a bad LABELGUARD_KERNELS, a library without labelguard_coverage,
#     no library: exit 2 with one line and a hint;
#   - bad inputs (missing file, a .whl that is no zip, a zip without CUDA libraries, a Python
#     without torch): exit 2 with a one-line message, never a traceback;
#   - a fake installed torch package tree (version 2.11.0, CUDA 13.0): doctor matches the
#     committed table and prints its coverage line;
#   - when build/progs/libnllpy.so exists (nvcc-built PyTorch-signature kernels): the reader
#     on a real cubin, as a library, as a fake torch with no table (doctor reads it itself) and
#     as a wheel;
#   - when build/torch-python exists and imports torch: doctor on that real installed torch.
# In a sanitizer build the library cannot be loaded into a plain interpreter (the sanitizer
# runtime must come first), so the verdict comes from the same code through
# $LG_BUILD/tests/unit/test_wheels --coverage ($LG_SPECMATCH), and that program is run with
# leak checking on good and bad inputs.
. "$(dirname "$0")/lib.sh"
reallib="$LG_ROOT/$LG_BUILD/liblabelguard.so"
[ -f "$reallib" ] || { echo "skip: $reallib not built (make)"; exit 77; }
export LG_BUILD
dummy="$T/liblg-dummy.so"; make_dummy_lib "$dummy"
if [ -n "${LG_SANITIZER:-}" ]; then
  matcher="$LG_ROOT/$LG_BUILD/tests/unit/test_wheels"
  [ -x "$matcher" ] || { echo "skip: $matcher not built (make $LG_BUILD/tests/unit/test_wheels)"; exit 77; }
  export LG_SPECMATCH="$matcher"
  lib=$dummy   # doctor's probe preloads the library alone, which a sanitizer build cannot be
else
  lib=$reallib
fi

# A committed table.
tbl="$LG_ROOT/tests/wheels/2.11.0+cu130.tsv"
run_cmd "$LG" audit "$tbl"
expect_rc 0 "audit of a committed table"
expect_in out "torch 2.11.0+cu130: 72 loss kernels, 68 covered, 4 known gaps" "summary line"
expect_in out "launch entry points: __cudaLaunchKernel, cudaLaunchKernelExC (libcudart.so.13)" "entry points"
expect_in out "8 x nll_loss_forward_reduce_cuda_kernel_2d" "grouped kernel line"
ok "committed table"

# One row changed (forward 2d's n_classes as a 4-byte int): not covered, and the reason.
awk -F'\t' 'BEGIN{OFS="\t"} !/^#/ && $3 ~ /nll_loss_forward_reduce_cuda_kernel_2dIfflE/ {$6="8,8,8,8,8,1,8,8,4,8"} {print}' \
  "$tbl" >"$T/broken.tsv"
run_cmd "$LG" audit "$T/broken.tsv"
expect_rc 1 "a table with an uncovered kernel"
expect_in out "torch 2.11.0+cu130: 72 loss kernels, 67 covered, 4 known gaps, 1 NOT covered" "summary"
expect_in out "differs first at parameter 8: the spec says 8 bytes, the wheel has 4" "first differing parameter"
ok "uncovered kernel"

# A user spec for the changed layout (LABELGUARD_KERNELS reaches the library): covered again.
awk '/^\[nll_loss_forward_reduce_cuda_kernel_2d\]/{p=1} p&&/^$/{exit} p' "$LG_ROOT/specs/pytorch.conf" |
  sed 's/^\[nll_loss_forward_reduce_cuda_kernel_2d\]/[user_forward_2d_int_classes]/; s/^params=.*/params=8,8,8,8,8,1,8,8,4,8/; s/^n_classes=.*/n_classes=8,0,4/' \
  >"$T/user.conf"
run_cmd env LABELGUARD_KERNELS="$T/user.conf" "$LG" audit "$T/broken.tsv"
expect_rc 0 "a user spec covers the changed kernel"
expect_in out "torch 2.11.0+cu130: 72 loss kernels, 68 covered, 4 known gaps" "summary with the user spec"
expect_in out "[user_forward_2d_int_classes]" "the user spec named"
ok "LABELGUARD_KERNELS counts"

if [ -z "${LG_SANITIZER:-}" ]; then
  # The caller's environment stays out of the child that loads the library: a LABELGUARD_MODE
  # the constructor would refuse (exit 2) changes nothing.
  run_cmd env LABELGUARD_MODE=bogus LABELGUARD_ACTION=bogus "$LG" audit "$tbl"
  expect_rc 0 "bad LABELGUARD_MODE of the caller"
  expect_in out "72 loss kernels, 68 covered, 4 known gaps" "summary"
  # A bad LABELGUARD_KERNELS does reach it: the constructor's message, exit 2, the caller lives.
  run_cmd env LABELGUARD_KERNELS="$(printf 'a\001b')" "$LG" audit "$tbl"
  expect_rc 2 "bad LABELGUARD_KERNELS"; expect_in err "LABELGUARD_KERNELS=" "the constructor's message"
  expect_in err "lg_audit: coverage check failed" "said by the audit"
  run_cmd env LABELGUARD_LIB="$dummy" "$LG" audit "$tbl"
  expect_rc 2 "a library without labelguard_coverage"; expect_in err "no labelguard_coverage" "message"
  expect_in err "HINT: point LABELGUARD_LIB at a liblabelguard.so of this version" "hint"
  run_cmd env LABELGUARD_LIB="$T/none.so" "$LG" audit "$tbl"
  expect_rc 2 "no library"; expect_in err "the coverage check needs the library" "message"
  expect_in err "HINT: point LABELGUARD_LIB at a built liblabelguard.so" "hint"
  for f in out err; do if grep -q Traceback "$T/$f"; then fail "a traceback"; fi; done
  ok "the coverage child"

  # As installed: the package and its data outside the checkout, the library through
  # LABELGUARD_LIB, then in the package's _native/ as the wheel has it; no test_wheels, no
  # checkout on any path. The same output and exit codes as above.
  inst="$T/inst"; mkdir -p "$inst/labelguard/data/wheels" "$T/nativelib" "$T/cwd"
  cp -r "$LG_ROOT/python/labelguard/." "$inst/labelguard/"
  find "$inst" -name __pycache__ -prune -exec rm -rf {} +
  cp "$LG_ROOT"/tests/wheels/*.tsv "$inst/labelguard/data/wheels/"
  cp "$reallib" "$T/nativelib/liblabelguard.so"
  run_cmd "$LG" audit "$tbl"; cp "$T/out" "$T/checkout.out"
  run_cmd "$LG" audit "$T/broken.tsv"; cp "$T/out" "$T/checkout-broken.out"
  installed() { # ENV... TABLE  (ENV: LABELGUARD_LIB=... or nothing)
    local t=${!#}; (cd "$T/cwd" && env -u LG_BUILD -u LG_ROOT PYTHONPATH="$inst" "${@:1:$#-1}" python3 -m labelguard audit "$t") \
      >"$T/out" 2>"$T/err"; rc=$?
  }
  installed LABELGUARD_LIB="$T/nativelib/liblabelguard.so" "$inst/labelguard/data/wheels/2.11.0+cu130.tsv"
  expect_rc 0 "installed copy, LABELGUARD_LIB"
  check "installed copy: the checkout's output" cmp -s "$T/out" "$T/checkout.out"
  installed LABELGUARD_LIB="$T/nativelib/liblabelguard.so" "$T/broken.tsv"
  expect_rc 1 "installed copy, an uncovered kernel"
  check "installed copy: the checkout's output for the changed table" cmp -s "$T/out" "$T/checkout-broken.out"
  mkdir -p "$inst/labelguard/_native" && cp "$reallib" "$inst/labelguard/_native/liblabelguard.so"
  installed "$inst/labelguard/data/wheels/2.11.0+cu130.tsv"
  expect_rc 0 "installed copy, the library in _native/"
  check "installed copy (_native/): the checkout's output" cmp -s "$T/out" "$T/checkout.out"
  ok "audit as installed"
else
  # The report under the sanitizer with leak checking, on every way in and out of it.
  for args in "$tbl --known-gaps $LG_ROOT/tests/wheels/known-gaps.tsv" "$T/broken.tsv --quiet" \
              "$T/none.tsv" "$tbl --known-gaps $T/user.conf"; do
    # shellcheck disable=SC2086  # the arguments are split on purpose
    ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0 "$matcher" --coverage $args >"$T/out" 2>"$T/err"; rc=$?
    [ "$rc" -le 2 ] && ! grep -q 'Sanitizer' "$T/err" || { cat "$T/err"; fail "sanitizer report for --coverage $args (exit $rc)"; }
  done
  ok "coverage under $LG_SANITIZER"
fi

# Bad inputs: exit 2, one message, no traceback.
run_cmd "$LG" audit "$T/none.whl"
expect_rc 2 "missing file"; expect_in err "no such file" "message"
printf 'not a zip\n' >"$T/fake.whl"
run_cmd "$LG" audit "$T/fake.whl"
expect_rc 2 "not a zip"; expect_in err "not a wheel" "message"
python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1], "w"); z.writestr("torch/__init__.py", ""); z.close()' "$T/cpu.whl"
run_cmd "$LG" audit "$T/cpu.whl"
expect_rc 2 "wheel without CUDA libs"; expect_in err "without CUDA libraries" "message"
printf 'x\n' >"$T/plain.txt"
run_cmd "$LG" audit "$T/plain.txt"
expect_rc 2 "plain file"; expect_in err "not a torch wheel" "message"
run_cmd "$LG" audit a b
expect_rc 2 "two arguments"
if ! python3 -c 'import torch' 2>/dev/null; then
  run_cmd "$LG" audit python3
  expect_rc 2 "python without torch"; expect_in err "not a Python interpreter that can import torch" "message"
fi
for f in out err; do if grep -q Traceback "$T/$f"; then fail "a traceback on bad input"; fi; done
ok "bad inputs"

# A fake installed torch: the package tree doctor and the reader look at.
fake_torch() { # dir version cuda [libtorch_cuda.so to copy]
  local d=$1/torch
  mkdir -p "$d/lib"
  printf '__version__ = "%s"\ncuda = "%s"\n' "$2" "$3" >"$d/version.py"
  printf 'from . import version\n__version__ = version.__version__\n' >"$d/__init__.py"
  if [ -n "${4:-}" ]; then cp "$4" "$d/lib/libtorch_cuda.so"; else
    printf 'int cudart_stub(void) { return 0; }\n' >"$T/cudart.c"
    gcc -shared -fPIC -Wl,-soname,libcudart.so.13 -o "$d/lib/libcudart.so.13" "$T/cudart.c" || fail "stub cudart"
    printf 'int cudart_stub(void);\nint f(void) { return cudart_stub(); }\n' >"$T/tc.c"
    gcc -shared -fPIC -o "$d/lib/libtorch_cuda.so" "$T/tc.c" -L"$d/lib" -l:libcudart.so.13 || fail "stub libtorch_cuda"
  fi
}
fake_torch "$T/site" 2.11.0+cu130 13.0
run_cmd env PYTHONPATH="$T/site" LABELGUARD_LIB="$lib" "$LG" doctor python3 train.py
expect_in out "✓ kernels        torch 2.11.0+cu130: 72 loss kernels, 68 covered, 4 known gaps (table " "doctor's coverage line"
expect_in out "torch launches through __cudaLaunchKernel, cudaLaunchKernelExC (libcudart.so.13)" "doctor's launch line"
ok "doctor with a table"
if [ -z "${LG_SANITIZER:-}" ]; then
  run_cmd env PYTHONPATH="$T/site" LABELGUARD_LIB="$dummy" "$LG" doctor python3 train.py
  expect_in out "✗ kernels        loss-kernel coverage unknown: coverage check failed: " "doctor with a library lacking labelguard_coverage"
  expect_in out "hint: point LABELGUARD_LIB at a liblabelguard.so of this version" "its hint"
  ok "doctor with an old library"
fi

nll="$LG_ROOT/$LG_BUILD/progs/libnllpy.so"
if [ -f "$nll" ]; then
  fake_torch "$T/site2" 9.9.9+cu130 13.0 "$nll"
  run_cmd env PYTHONPATH="$T/site2" LABELGUARD_LIB="$lib" "$LG" doctor python3
  expect_in out "✓ kernels        torch 9.9.9+cu130: 2 loss kernels, 2 covered (read from $T/site2/torch/lib; no committed table)" \
    "doctor reads a torch without a table"
  run_cmd "$LG" audit "$T/site2/torch"
  expect_rc 0 "audit of a torch directory"; expect_in out "torch 9.9.9+cu130: 2 loss kernels, 2 covered" "summary"
  expect_in out "[nll_loss_backward_reduce_cuda_kernel_2d]" "spec named"
  # The same as a wheel, with the CUDA build pinned by its METADATA as PyPI's are.
  (cd "$T/site2" && mkdir -p torch-9.9.9.dist-info && printf 'Name: torch\nVersion: 9.9.9\nRequires-Dist: cuda-toolkit[cudart]==13.0.2\n' \
    >torch-9.9.9.dist-info/METADATA && python3 -m zipfile -c "$T/torch-9.9.9-cp311-cp311-linux_x86_64.whl" torch torch-9.9.9.dist-info)
  run_cmd lg_py -m labelguard.torch_audit --tsv "$T/torch-9.9.9-cp311-cp311-linux_x86_64.whl"
  expect_rc 0 "reader on a wheel"
  expect_in out "# build: 9.9.9+cu130" "build name"; expect_in out "# sha256: " "sha256 header"
  expect_in out "# entry	libtorch_cuda.so	__cudaLaunchKernel	libcudart.so.13	libcudart.so.13" "entry point"
  grep -P '^nll_loss\tlibtorch_cuda.so\t_ZN2at6native.*nll_loss_forward_reduce_cuda_kernel_2dIfflE.*\t10\t8,8,8,8,8,1,8,8,8,8\t0,8,16,24,32,40,48,56,64,72\t' \
    "$T/out" >/dev/null || { cat "$T/out"; fail "forward 2d row with sizes and offsets from the cubin"; }
  ok "reader on an nvcc-built library"
else
  echo "note: $nll not built: the reader-on-a-cubin part skipped"
fi
# A real installed torch (build/torch-python: torch's CUDA 13 and CUDA 12 builds on the runtime
# test double), when it is there and imports: doctor names its table and coverage.
tp="$LG_ROOT/$LG_BUILD/torch-python"
for cu in 13 12; do
  [ -x "$tp" ] || break
  ver=$(TORCH_CUDA=$cu timeout 300 "$tp" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -n1)
  case $ver in *+cu*) ;; *) echo "note: TORCH_CUDA=$cu $tp does not import torch: that part skipped"; continue;; esac
  [ -f "$LG_ROOT/tests/wheels/$ver.tsv" ] || fail "no committed table for the installed torch $ver"
  run_cmd env TORCH_CUDA=$cu LABELGUARD_LIB="$lib" "$LG" doctor "$tp"
  expect_in out "✓ kernels        torch $ver: " "doctor's coverage line for the installed torch $ver"
  expect_in out "(table tests/wheels/$ver.tsv)" "the matching table"
  ok "doctor with the installed torch $ver"
done
finish
