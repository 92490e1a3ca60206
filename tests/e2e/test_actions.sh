#!/usr/bin/env bash
# test_actions.sh: every action on every decoded kernel, with a bad label at the
# first, a middle and the last position, under the runtime test double:
#   raise  the launch is skipped, the context stays alive (memcpy + clean launches succeed),
#          cudaGetErrorString of the launch error names the label;
#   mask   the kernel runs on a copy: outputs equal a plain run where the bad label is
#          ignore_index (uint8: the free value 255, with ignore_index rewritten to match);
#   log    the launch runs and the assert poisons the context exactly as without the library,
#          the event is on disk first;
#   hold   (one position) the thread waits, SIGCONT does not release it, SIGUSR1 does, then raise;
#   abort  (one position) SIGABRT with the event already on disk;
# and the same for raise/mask in async mode, where the verdict arrives at the next hook point.
. "$(dirname "$0")/lib.sh"

# kernel, number of labels, extra args
cases=(
  "fwd_none 12" "fwd_1d 1" "fwd_2d 12" "bwd_none 12" "bwd_1d 1" "bwd_2d 12"
  "2d_fwd_none 16 --hw 2,4" "2d_fwd 16 --hw 2,4" "2d_bwd_none 16 --hw 2,4" "2d_bwd 16 --hw 2,4"
)
# LG_ACTIONS_KERNELS: only these kernels (tests/qemu/test_e2e_actions.sh, where each run is
# emulated: a subset, each action and mode still on every one).
if [ -n "${LG_ACTIONS_KERNELS:-}" ]; then
  sel=(); for c in "${cases[@]}"; do [[ " $LG_ACTIONS_KERNELS " == *" ${c%% *} "* ]] && sel+=("$c"); done
  [ ${#sel[@]} -gt 0 ] || { echo "LG_ACTIONS_KERNELS=$LG_ACTIONS_KERNELS names no kernel of this test"; exit 1; }
  cases=("${sel[@]}")
fi
outputs() { grep -E '^(result|values)' "$T/$1.out" | sed -E 's/launch_err=[0-9]+ sync_err=[0-9]+ last_err=[0-9]+ last_err_str="[^"]*" //'; }
# The reduce backward kernels take total_weight from the forward pass, which the driver computes
# from the labels it was given (the bad one included): only where gradients are zero can be
# compared with the reference. With PyTorch the forward pass is masked too, so both agree.
zero_pattern() { grep -E '^values' "$T/$1.out" | tr ' ' '\n' | tail -n +3 | sed -E 's/^-?0$/0/; s/^[^0].*|^-.*/x/' | tr -d '\n'; }
compare_masked() { # NAME REF KERNEL
  case $3 in bwd_1d|bwd_2d|2d_bwd) [ "$(zero_pattern "$1")" = "$(zero_pattern "$2")" ] && [ -n "$(zero_pattern "$2")" ];;
    *) [ "$(outputs "$1")" = "$(outputs "$2")" ];; esac
}
labels_with() { # N POS VALUE -> good labels i%5 with VALUE at POS
  local n=$1 pos=$2 v=$3 i out=()
  for ((i = 0; i < n; i++)); do if [ $i -eq "$pos" ]; then out+=("$v"); else out+=($((i % 5))); fi; done
  echo "${out[@]}"
}
for c in "${cases[@]}"; do
  read -r k n extra <<<"$c"
  dtypes="int64 uint8"; case $k in 2d_*) dtypes=int64;; esac
  positions="0 $((n / 2)) $((n - 1))"; [ "$n" -eq 1 ] && positions=0
  for dt in $dtypes; do
    base=("$PROGS/nll" "$k" --dtype "$dt" --classes 5 --ignore -100 $extra)
    for pos in $positions; do
      id="$k-$dt-$pos"
      bad=$(labels_with "$n" "$pos" 9)
      # raise
      run_lg "$id-raise" "${base[@]}" $bad
      events "$id-raise" || fail "$id-raise schema"
      check "$id raise: blocked" qtrue "$id-raise" "len(V) == 1 and V[0]['outcome'] == 'blocked' and V[0]['bad']['samples'][0] == {'index': $pos, 'value': 9}"
      check "$id raise: error text" grep -q "launch_error_text=.*bad label.*= 9, outside \[0, 5).*context is intact" "$T/$id-raise.out"
      check "$id raise: context alive" grep -q 'after memcpy_err=0 clean_launch_err=0 clean_sync_err=0 same_launch_err=0 same_sync_err=0' "$T/$id-raise.out"
      # mask, against a plain run with the bad label ignored
      if [ "$dt" = uint8 ]; then ref_ignore=255; else ref_ignore=-100; fi
      run_plain "$id-ref" "$PROGS/nll" "$k" --dtype "$dt" --classes 5 --ignore $ref_ignore $extra $(labels_with "$n" "$pos" $ref_ignore)
      run_lg "$id-mask" env LABELGUARD_ACTION=mask "${base[@]}" $bad
      events "$id-mask" || fail "$id-mask schema"
      check "$id mask: event" qtrue "$id-mask" "len(V) == 1 and V[0]['outcome'] == 'masked' and V[0]['action'] == 'mask'"
      check "$id mask: launch ran" [ "$(field "$id-mask" launch_err)" = 0 ]
      check "$id mask: outputs over the valid labels only" compare_masked "$id-mask" "$id-ref" "$k"
      # log: exactly as without the library
      run_plain "$id-plain" "${base[@]}" $bad
      run_lg "$id-log" env LABELGUARD_ACTION=log "${base[@]}" $bad
      events "$id-log" || fail "$id-log schema"
      check "$id log: event, launched" qtrue "$id-log" "len(V) == 1 and V[0]['outcome'] == 'launched'"
      check "$id log: same output as without the library" cmp -s "$T/$id-plain.out" "$T/$id-log.out"
      if [ "$k" != 2d_bwd_none ]; then  # that kernel has no assert in PyTorch: 700, not 710
        check "$id log: context poisoned (710)" grep -q 'after memcpy_err=710' "$T/$id-log.out"
      fi
      # async: the launch runs on the sanitized copy; raise arrives at the next hook point
      run_lg "$id-async" env LABELGUARD_MODE=async "${base[@]}" $bad
      events "$id-async" || fail "$id-async schema"
      check "$id async: verdict reported" qtrue "$id-async" "len(V) == 1 and V[0]['outcome'] == 'masked' and 'async' in V[0].get('note', '')"
      check "$id async: error raised at the next check" grep -Eq 'launch_err=800|last_err=800' "$T/$id-async.out"
      run_lg "$id-amask" env LABELGUARD_MODE=async LABELGUARD_ACTION=mask "${base[@]}" $bad
      events "$id-amask" || fail "$id-amask schema"
      check "$id async mask: event" qtrue "$id-amask" "len(V) == 1 and V[0]['outcome'] == 'masked'"
      check "$id async mask: no error" [ "$(field "$id-amask" launch_err)" = 0 ]
      check "$id async mask: outputs over the valid labels only" compare_masked "$id-amask" "$id-ref" "$k"
    done
    # hold and abort, middle position
    pos=$((n / 2)); id="$k-$dt"; bad=$(labels_with "$n" "$pos" 9)
    rm -rf "$T/$id-hold.logs"
    LABELGUARD_ACTION=hold LABELGUARD_LOG="$T/$id-hold.logs" LD_PRELOAD="$LG_PRELOAD" "${base[@]}" $bad >"$T/$id-hold.out" 2>"$T/$id-hold.err" &
    pid=$!
    for _ in $(seq 100); do grep -q HOLDING "$T/$id-hold.err" 2>/dev/null && break; sleep 0.05; done
    check "$id hold: message names pid and how to release" grep -q "HOLDING thread .* of process $pid.*" "$T/$id-hold.err"
    check "$id hold: says how to attach" grep -q "gdb -p $pid" "$T/$id-hold.err"
    kill -CONT $pid; sleep 0.2
    check "$id hold: SIGCONT does not release" kill -0 $pid
    kill -USR1 $pid
    wait $pid
    check "$id hold: released by SIGUSR1, then raise" grep -q 'launch_error_text=.*bad label' "$T/$id-hold.out"
    check "$id hold: context alive" grep -q 'after memcpy_err=0' "$T/$id-hold.out"
    events "$id-hold" && check "$id hold: event" qtrue "$id-hold" "len(V) == 1 and V[0]['outcome'] == 'held'"
    (run_lg "$id-abort" env LABELGUARD_ACTION=abort "${base[@]}" $bad) 2>/dev/null
    check "$id abort: SIGABRT" [ "$(rc_of "$id-abort")" = 134 ]
    events "$id-abort" && check "$id abort: event on disk" qtrue "$id-abort" "len(V) == 1 and V[0]['outcome'] == 'aborted'"
  done
done
finish
