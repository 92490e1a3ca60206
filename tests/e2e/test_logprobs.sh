#!/usr/bin/env bash
# test_logprobs.sh: the raw-logits check (src/checks/logprobs.c). An NLL forward fed values above 0
# (tests/progs/nll.cu --logits: (k % 4) - 1.5) gets exactly one nll_input_not_log_probs warning
# per kernel, however often it is launched, naming the kernel, how many values and the max, with
# the hint; the launch itself runs as without the library. Controls: log-probabilities (no
# warning), LABELGUARD_LOGPROB_CHECK=0, async mode (never synchronises: not checked), and a
# backward kernel (not checked).
. "$(dirname "$0")/lib.sh"
for k in fwd_2d fwd_1d 2d_fwd; do
  for sc in float double; do
    id="$k-$sc"
    extra=(); n=12
    case $k in fwd_1d) n=1;; 2d_fwd) extra=(--hw 2,2);; esac
    run_plain "$id-plain" "$PROGS/nll" "$k" --scalar $sc --classes 5 --logits --repeat 3 "${extra[@]}" "good:$n"
    run_lg "$id" "$PROGS/nll" "$k" --scalar $sc --classes 5 --logits --repeat 3 "${extra[@]}" "good:$n"
    require_fake "$id"
    events "$id" || { fail "$id: log schema"; continue; }
    check "$id: one warning for 4 launches" qtrue "$id" "len([w for w in W if w['what'] == 'nll_input_not_log_probs']) == 1"
    check "$id: it names the kernel, the count, the max and the fix" qtrue "$id" "any(w['what'] == 'nll_input_not_log_probs' and 'max 1.5' in w['detail'] and 'above 0' in w['detail'] and 'log_softmax' in w['detail'] and 'CrossEntropyLoss' in w['detail'] and w['detail'].startswith('nll_loss') for w in W)"
    check "$id: no violation" qtrue "$id" "len(V) == 0"
    check "$id: the launch ran as without the library" cmp -s "$T/$id-plain.out" "$T/$id.out"
    check "$id: stderr has the warning" grep -q 'labelguard: warning: nll_input_not_log_probs' "$T/$id.err"
    run_lg "$id-clean" "$PROGS/nll" "$k" --scalar $sc --classes 5 --repeat 3 "${extra[@]}" "good:$n"
    events "$id-clean" && check "$id: log-probabilities give no warning" qtrue "$id-clean" "not any(w['what'] == 'nll_input_not_log_probs' for w in W)"
  done
done
run_lg off env LABELGUARD_LOGPROB_CHECK=0 "$PROGS/nll" fwd_2d --logits good:12
events off && check "LABELGUARD_LOGPROB_CHECK=0: no warning" qtrue off "not any(w['what'] == 'nll_input_not_log_probs' for w in W) and E[0]['config']['logprob_check'] is False"
run_lg async env LABELGUARD_MODE=async "$PROGS/nll" fwd_2d --logits good:12
events async && check "async mode: not checked" qtrue async "not any(w['what'] == 'nll_input_not_log_probs' for w in W)"
run_lg bwd "$PROGS/nll" bwd_2d --logits good:12
events bwd && check "backward: not checked" qtrue bwd "not any(w['what'] == 'nll_input_not_log_probs' for w in W)"
run_lg badval env LABELGUARD_LOGPROB_CHECK=yes "$PROGS/nll" fwd_2d good:12
check "LABELGUARD_LOGPROB_CHECK=yes refused with the allowed values" grep -q 'LABELGUARD_LOGPROB_CHECK.*0, 1' "$T/badval.err"
# Bad labels and raw logits together: both reported, the launch still blocked.
run_lg both "$PROGS/nll" fwd_2d --logits --classes 5 bad:12:3:9
events both && check "bad labels too: violation blocked and the warning" qtrue both "len(V) == 1 and V[0]['outcome'] == 'blocked' and any(w['what'] == 'nll_input_not_log_probs' for w in W)"
# A global-mode capture on one thread while another runs an eager NLL forward (tests/progs/graphs
# side): the check's copy into pageable memory and its wait are "unsafe" calls there, which the
# double (like CUDA) answers by invalidating the capture unless the calling thread is in relaxed
# mode. The capture must end valid; LABELGUARD_LOGPROB_CHECK=0 is the control.
for chk in 1 0; do
  for cm in global thread; do
    n=side-$cm-check$chk
    run_lg "$n" env LABELGUARD_LOGPROB_CHECK=$chk LABELGUARD_ACTION=mask "$PROGS/graphs" side --capture $cm --batches g
    check "$n: the other thread's eager NLL ran" grep -q "side launch=0 wait=0" "$T/$n.out"
    check "$n: the $cm-mode capture stays valid" grep -q "capture begin=0 launch=0 end=0" "$T/$n.out"
  done
done
finish
