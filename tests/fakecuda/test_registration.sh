#!/usr/bin/env bash
# Registration: every kernel is named by cudaFuncGetName through its host stub and through the
# cudaKernel_t handle from cudaGetKernel; the handle is not the stub (as in the real runtime);
# names are PyTorch's mangled ones. In the three builds (<<<>>>, legacy, per-thread stream).
. "$(dirname "$0")/lib.sh"
for v in probe probe_legacy probe_ptsz; do
  fk_run $v names
  expect_rc 0
  n=$(grep -c '^name .* stub_err=0 handle_err=0 handle_name_err=0 handle_is_stub=0 same=1 ' "$OUT")
  [ "$n" = 15 ] || fail "$v: $n of 15 kernels named by stub and handle"
  expect_line "name not_a_kernel err=98"
  for pat in \
    'fwd_2d .*_ZN2at6native[0-9]+_GLOBAL__N__[0-9a-f]+_[0-9]+_probe_cu_[0-9a-f]+38nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S4_PKS3_PKT1_S6_bllll$' \
    'fwd_none_u8 .*38nll_loss_forward_no_reduce_cuda_kernelIfhEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPKT0_PS4_PKS4_ll$' \
    'bwd_none .*39nll_loss_backward_no_reduce_cuda_kernelIflEEviPKT0_NS_27GenericPackedTensorAccessorIKT_Lm1ENS_16DefaultPtrTraitsElEENS6_IS7_Lm2ES9_lEEPS8_ll$' \
    'bwd_2d .*39nll_loss_backward_reduce_cuda_kernel_2dIflEEvPT_PKS3_PKT0_S6_S6_biill$' \
    '2d_fwd .*25nll_loss2d_forward_kernelIffiEEvPT_S4_PKS3_PKlS6_iiil$' \
    'mismatch_fwd_2d .* _ZN2at6native16lg_test_mismatch38nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S4_PKS3_PKT1_S6_blllli$' \
    'add_one .* _Z15lg_test_add_onePfi$'; do
    grep -qE "^name $pat" "$OUT" || fail "$v: no line matching $pat"
  done
done
finish
