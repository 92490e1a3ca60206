#!/usr/bin/env bash
# test_audit.sh: `labelguard audit` and doctor's loss-kernel coverage line (the reader
# python/labelguard/torch_audit.py, with the registry's matcher build/tests/unit/test_wheels
# --coverage):
#   - a committed wheel table: the coverage summary and the launch entry point;
#   - a table with one kernel's layout changed: exit 1, the kernel and its first differing
#     parameter named;
#   - bad inputs (missing file, a .whl that is no zip, a zip without CUDA libraries, a Python
#     without torch): exit 2 with a one-line message, never a traceback;
#   - a fake installed torch package tree (version 2.11.0, CUDA 13.0): doctor matches the
#     committed table and prints its coverage line;
#   - when build/progs/libnllpy.so exists (nvcc-built PyTorch-signature kernels): the reader
#     on a real cubin, as a library, as a fake torch with no table (doctor reads it itself) and
#     as a wheel;
#   - when build/torch-python exists and imports torch: doctor on that real installed torch.
. "$(dirname "$0")/lib.sh"
matcher="$LG_ROOT/$LG_BUILD/tests/unit/test_wheels"
[ -x "$matcher" ] || { echo "skip: $matcher not built (make $LG_BUILD/tests/unit/test_wheels)"; exit 77; }
export LG_BUILD

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
lib="$T/liblg-dummy.so"; make_dummy_lib "$lib"
fake_torch "$T/site" 2.11.0+cu130 13.0
run_cmd env PYTHONPATH="$T/site" LABELGUARD_LIB="$lib" "$LG" doctor python3 train.py
expect_in out "✓ kernels        torch 2.11.0+cu130: 72 loss kernels, 68 covered, 4 known gaps (table " "doctor's coverage line"
expect_in out "torch launches through __cudaLaunchKernel, cudaLaunchKernelExC (libcudart.so.13)" "doctor's launch line"
ok "doctor with a table"

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
