#!/usr/bin/env bash
# The emulated index kernels (tests/fakecuda/gather.c) against the rows they must copy, for
# int64 and int32 ids, and with a bad id: the kernel's own assert line and cudaErrorAssert (710)
# at the synchronisation, after which the context stays dead. The vectorized gather wraps
# negative ids only with allow_neg_indices (x[idx]); indexSelect reads ids as its unsigned
# IndexType, so -1 fails there. Table (tests/progs/gather.cu): row r starts with r * 100.
. "$(dirname "$0")/lib.sh"
ok='result launch_err=0 sync_err=0 last_err=0'
bad='result launch_err=0 sync_err=710 last_err=710'
I=/pytorch/aten/src/ATen/native/cuda/Indexing.cu
U=/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu
for k in vgather small large large64; do
  for dt in int64 int32; do
    fk_run gather $k --dtype $dt 3 0 9 3;   expect_line "$ok"; expect_line "rows n=4 3 0 9 3"; expect_no_err; expect_rc 0
    expect_line "after clean_launch_err=0 clean_sync_err=0"
    fk_run gather $k --dtype $dt --rows 5 --dim 8 4 1;   expect_line "rows n=2 4 1"
    fk_run gather $k --dtype $dt 1 10 2
    expect_line "$bad"; expect_rc 1; expect_line "after clean_launch_err=710 clean_sync_err=710"
    case $k in
      vgather) expect_err_line "$U:37: vectorized_gather_kernel: block: [1,0,0], thread: [0,0,0] Assertion \`ind >=0 && ind < ind_dim_size && \"vectorized gather kernel index out of bounds\"\` failed." ;;
      small) expect_err_line "$I:1207: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] Assertion \`srcIndex < srcSelectDimSize\` failed." ;;
      *) expect_err_line "$I:1251: indexSelectLargeIndex: block: [0,0,0], thread: [4,0,0] Assertion \`srcIndex < srcSelectDimSize\` failed." ;;
    esac
    fk_run gather $k --dtype $dt 1 -1 2;  expect_line "$bad"     # negative ids fail without wrapping
  done
done
# allow_neg_indices: -1 is the last row, -10 the first; -11 is out of range even wrapped.
fk_run gather vgather --neg 2 -1 -10;      expect_line "$ok"; expect_line "rows n=3 2 9 0"
fk_run gather vgather --neg 2 -11;         expect_line "$bad"
fk_run gather vgather --neg --dtype int32 -1 10; expect_line "$bad"
# The same name with int64 ids past 2^32: the 32-bit indexSelect narrows them (2^32 + 1 is row 1).
fk_run gather small 4294967297;            expect_line "$ok"; expect_line "rows n=1 1"
fk_run gather large64 4294967297;          expect_line "$bad"
finish
