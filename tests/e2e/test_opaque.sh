#!/usr/bin/env bash
# test_opaque.sh: kernels known by name only (src/checks/opaque.c, tests/progs/opaque.cu).
# Compiled losses: a Triton-named fused nll_loss forward and backward each get exactly one
# unchecked_loss_kernel warning, however often launched, with the hint (uncompiled step,
# torch._dynamo.disable); an unrelated Triton kernel gets none; they all run.
# The gather after a masked weighted loss (F.cross_entropy(weight=, label_smoothing=)): under
# mask, the NLL forward is masked and PyTorch's TensorIterator gather that follows is blocked
# (error 800 with the reason, a violation event, context alive). Controls where it must run:
# no weights, reduction sum, the NLL backward in between (no smoothing), more than 64 launches
# in between, the scatter form of the kernel, action raise (the loss itself was blocked), good
# labels.
. "$(dirname "$0")/lib.sh"

run_lg triton "$PROGS/opaque" triton
require_fake triton
events triton || fail "triton: log schema"
check "triton: one warning per compiled loss kernel (2)" qtrue triton "sorted(w['detail'].split(':')[0] for w in W if w['what'] == 'unchecked_loss_kernel') == ['triton_poi_fused_nll_loss_backward_0', 'triton_red_fused__log_softmax_nll_loss_forward_1']"
check "triton: the hint" qtrue triton "all('torch._dynamo.disable' in w['detail'] and 'uncompiled' in w['detail'] for w in W if w['what'] == 'unchecked_loss_kernel')"
check "triton: every launch ran" grep -qx 'triton launches_failed=0 sync_err=0' "$T/triton.out"
check "triton: no violation" qtrue triton "len(V) == 0"

run_lg smooth env LABELGUARD_ACTION=mask "$PROGS/opaque" smoothing
events smooth || fail "smooth: log schema"
check "smooth: the loss ran on the masked copy" grep -qx 'loss launch_err=0 sync_err=0' "$T/smooth.out"
check "smooth: the gather is blocked" grep -qx 'gather launch_err=800 sync_err=0' "$T/smooth.out"
check "smooth: its error says why" grep -q 'launch_error_text=.*mask cannot cover this step.*label_smoothing.*target\[1\] = 5' "$T/smooth.out"
check "smooth: context alive" grep -qx 'after clean_launch_err=0 clean_sync_err=0' "$T/smooth.out"
check "smooth: two violations, masked then blocked" qtrue smooth "[(v['kernel'], v['outcome']) for v in V] == [('nll_loss_forward_reduce_cuda_kernel_2d', 'masked'), ('_scatter_gather_elementwise_kernel', 'blocked')]"
check "smooth: the gather's event: family gather, the original labels, the note" qtrue smooth "V[1]['family'] == 'gather' and V[1]['bad']['samples'] == [{'index': 1, 'value': 5}] and 'mask fell back to raise' in V[1]['note']"
check "smooth: the loss's note announces it" qtrue smooth "'label_smoothing' in V[0]['note']"

for c in "noweights --no-weights" "sum --sum" "backward --backward" "far --gap 80" "scatter --scatter"; do
  read -r id opt <<<"$c"
  run_lg "$id" env LABELGUARD_ACTION=mask "$PROGS/opaque" smoothing $opt
  events "$id" || fail "$id: log schema"
  check "$id: the gather runs" grep -qx 'gather launch_err=0 sync_err=0' "$T/$id.out"
  check "$id: only the masked loss is reported" qtrue "$id" "[(v['kernel'], v['outcome']) for v in V if v['direction'] == 'forward'] == [('nll_loss_forward_reduce_cuda_kernel_2d', 'masked')] and all(v['family'] != 'gather' for v in V)"
done
run_lg raise "$PROGS/opaque" smoothing
events raise && check "raise: the loss is blocked, the gather runs" qtrue raise "[(v['kernel'], v['outcome']) for v in V] == [('nll_loss_forward_reduce_cuda_kernel_2d', 'blocked')]"
check "raise: gather ran" grep -qx 'gather launch_err=0 sync_err=0' "$T/raise.out"
run_lg good env LABELGUARD_ACTION=mask "$PROGS/opaque" smoothing 0 2 1
events good && check "good labels: nothing reported, the gather runs" qtrue good "len(V) == 0"
check "good: gather ran" grep -qx 'gather launch_err=0 sync_err=0' "$T/good.out"
finish
