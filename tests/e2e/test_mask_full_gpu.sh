#!/usr/bin/env bash
# test_mask_full_gpu.sh: LABELGUARD_ACTION=mask on a GPU with no memory left for the masked copy.
# FAKECUDA_DEVICE_MEM=2048 makes the runtime double a 2 KiB device: build/progs/nll's own
# buffers fit, the library's cudaMalloc for the sanitized copy (4 KiB at least) is refused.
# The copy then goes to mapped pinned host memory and the launch still runs masked: outcome
# masked, launch error 0, outputs those of a plain run with the bad label ignored. Blocking
# instead (mask falling back to raise) is what hangs the other ranks under DDP. Also: the
# second and third launch of a --repeat 3 reuse the pinned buffer; uint8 labels; async mode.
# Called by tests/run.sh; alone: bash tests/e2e/test_mask_full_gpu.sh
. "$(dirname "$0")/lib.sh"
need "$PROGS/nll"
outputs() { grep -E '^(result|values)' "$T/$1.out" | sed -E 's/launch_err=[0-9]+ sync_err=[0-9]+ last_err=[0-9]+ last_err_str="[^"]*" //'; }
labels_with() { # N POS VALUE -> good labels i%5 with VALUE at POS
  local n=$1 pos=$2 v=$3 i out=()
  for ((i = 0; i < n; i++)); do if [ $i -eq "$pos" ]; then out+=("$v"); else out+=($((i % 5))); fi; done
  echo "${out[@]}"
}
export FAKECUDA_DEVICE_MEM=2048
for dt in int64 uint8; do
  if [ $dt = uint8 ]; then ign=255; else ign=-100; fi
  for rep in 1 3; do
    id=full-$dt-r$rep
    run_plain "$id-ref" "$PROGS/nll" fwd_2d --dtype $dt --classes 5 --ignore $ign --repeat $rep $(labels_with 12 5 $ign)
    run_lg "$id" env LABELGUARD_ACTION=mask "$PROGS/nll" fwd_2d --dtype $dt --classes 5 --repeat $rep $(labels_with 12 5 9)
    require_fake "$id"
    events "$id" || { fail "$id: log schema"; continue; }
    echo "$id: $(q "$id" '[(v["outcome"], v.get("note", "")) for v in V]')"
    check "$id: the reference ran in 2 KiB" [ "$(field "$id-ref" launch_err)" = 0 ]
    check "$id: every violation masked, none blocked" qtrue "$id" "len(V) == $rep and all(v['outcome'] == 'masked' for v in V)"
    check "$id: no mask-fell-back note" qtrue "$id" "not any('fell back' in v.get('note', '') for v in V)"
    check "$id: the launch ran" [ "$(field "$id" launch_err)" = 0 ]
    check "$id: outputs over the valid labels only" [ "$(outputs "$id")" = "$(outputs "$id-ref")" ]
  done
done
id=full-async
run_plain "$id-ref" "$PROGS/nll" fwd_2d --classes 5 $(labels_with 12 5 -100)
run_lg "$id" env LABELGUARD_MODE=async LABELGUARD_ACTION=mask "$PROGS/nll" fwd_2d --classes 5 $(labels_with 12 5 9)
events "$id" || fail "$id: log schema"
check "$id: masked" qtrue "$id" "len(V) == 1 and V[0]['outcome'] == 'masked'"
check "$id: outputs over the valid labels only" [ "$(outputs "$id")" = "$(outputs "$id-ref")" ]
finish
