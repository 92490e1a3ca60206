#!/usr/bin/env bash
# test_kernels.sh: for each of the ten ATen NLL kernels, each target dtype and the
# three launch paths (<<<>>> via __cudaLaunchKernel, cudaLaunchKernel with the host stub,
# per-thread default stream), the library identifies the kernel and decodes the target pointer,
# count, n_classes and ignore_index exactly (checked through the violation event it reports for
# a bad label placed at a known index), blocks the launch with `raise` and leaves the context
# alive; a clean launch of the same kernel runs with results identical to a run without it.
. "$(dirname "$0")/lib.sh"

# kernel short-name family direction count-args
cases=(
  "fwd_none nll_loss_forward_no_reduce_cuda_kernel nll_loss forward 12"
  "fwd_1d nll_loss_forward_reduce_cuda_kernel_1d nll_loss forward 1"
  "fwd_2d nll_loss_forward_reduce_cuda_kernel_2d nll_loss forward 12"
  "bwd_none nll_loss_backward_no_reduce_cuda_kernel nll_loss backward 12"
  "bwd_1d nll_loss_backward_reduce_cuda_kernel_1d nll_loss backward 1"
  "bwd_2d nll_loss_backward_reduce_cuda_kernel_2d nll_loss backward 12"
  "2d_fwd_none nll_loss2d_forward_no_reduce_kernel nll_loss2d forward 16"
  "2d_fwd nll_loss2d_forward_kernel nll_loss2d forward 16"
  "2d_bwd_none nll_loss2d_backward_no_reduce_kernel nll_loss2d backward 16"
  "2d_bwd nll_loss2d_backward_kernel nll_loss2d backward 16"
)
for c in "${cases[@]}"; do
  read -r k short family dir n <<<"$c"
  dtypes="int64 uint8"; extra=()
  case $k in 2d_*) dtypes="int64"; extra=(--hw 2,4);; esac
  case $k in 2d_*_none) extra=(--hw 2,4 --stride 6);; esac
  pos=$(( n > 1 ? n - 3 : 0 ))
  for dt in $dtypes; do
    for p in nll nll_legacy nll_ptsz; do
      id="$k-$dt-$p"
      args=("$k" --dtype "$dt" --classes 5 --ignore -100 "${extra[@]}")
      run_lg "$id" "$PROGS/$p" "${args[@]}" "bad:$n:$pos:7"
      require_fake "$id"
      events "$id" || { fail "$id: log schema"; continue; }
      check "$id: one violation" qtrue "$id" "len(V) == 1"
      check "$id: kernel named $short" qtrue "$id" "V[0]['kernel'] == '$short' and V[0]['family'] == '$family' and V[0]['direction'] == '$dir'"
      check "$id: symbol is the mangled name" qtrue "$id" "V[0]['symbol'] == '$(field "$id" kernel)'"
      check "$id: decoded target" qtrue "$id" "{k: V[0]['target'][k] for k in ('dtype', 'count', 'n_classes', 'ignore_index')} == {'dtype': '$dt', 'count': $n, 'n_classes': 5, 'ignore_index': -100}"
      check "$id: offending label" qtrue "$id" "V[0]['bad']['count'] == 1 and V[0]['bad']['samples'] == [{'index': $pos, 'value': 7}] and V[0]['bad']['max'] == 7"
      check "$id: blocked" qtrue "$id" "V[0]['outcome'] == 'blocked' and V[0]['action'] == 'raise'"
      check "$id: launch error 800 reported" [ "$(field "$id" launch_err)" = 800 ]
      check "$id: context alive afterwards" grep -q 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 same_launch_err=0 same_sync_err=0' "$T/$id.out"
      check "$id: error text names the label" grep -q "launch_error_text=.*labelguard.*bad label.*= 7" "$T/$id.out"
      # clean launch: identical output with and without the library
      run_plain "$id-clean-plain" "$PROGS/$p" "${args[@]}" "good:$n"
      run_lg "$id-clean" "$PROGS/$p" "${args[@]}" "good:$n"
      check "$id: clean run identical" cmp -s "$T/$id-clean-plain.out" "$T/$id-clean.out"
      check "$id: clean run silent" [ ! -s "$T/$id-clean.err" ]
      events "$id-clean" || fail "$id-clean: log schema"
      check "$id: clean run has no violation, validated" qtrue "$id-clean" "len(V) == 0 and S and S[0]['validated'] >= 1"
    done
  done
done
# The other entry points: cudaLaunchKernel with a cudaKernel_t handle, and cudaLaunchKernelExC
# (the C form of cudaLaunchKernelEx), each on the plain and the per-thread-stream build.
for launch in handle exc; do
  for p in nll nll_ptsz; do
    id="fwd_2d-$launch-$p"
    run_lg "$id" "$PROGS/$p" fwd_2d --launch "$launch" --classes 5 bad:12:4:6
    events "$id" || { fail "$id: log schema"; continue; }
    check "$id: caught" qtrue "$id" "len(V) == 1 and V[0]['bad']['samples'] == [{'index': 4, 'value': 6}] and V[0]['outcome'] == 'blocked'"
    check "$id: launch error 800" [ "$(field "$id" launch_err)" = 800 ]
    check "$id: context alive" grep -q 'after memcpy_err=0 clean_launch_err=0' "$T/$id.out"
  done
done
finish
