#!/usr/bin/env bash
# test_graph_cond.sh: no host node where CUDA forbids one. torch 2.15 captures torch.cond /
# while_loop bodies into conditional nodes with cudaStreamBeginCaptureToGraph; a body takes no
# host node, and the host backend's captured check is one. build/e2e/graph_cond
# (tests/e2e/progs/graph_cond.cu) captures an NLL forward into an IF node's body:
#   hostfn (no labelguard) -> the double's rule: a host function captured into the body fails
#       (900) and invalidates the body's capture (901 at its end), as CUDA does;
#   cond good -> the whole capture succeeds, the replay runs the body (the loss is computed),
#       one capture_unchecked warning names the reason, no violation;
#   late good -> a capture that began before labelguard armed gets no host node either;
#   plain bad (mask) -> control: a capture begun under the hooks gets its host-node check, and
#       the replay's violation is reported, masked.
# Called by tests/run.sh; alone: bash tests/e2e/test_graph_cond.sh
. "$(dirname "$0")/lib.sh"
P="$LG_ROOT/$LG_BUILD/e2e/graph_cond"
need "$P"

n=hostfn
run_plain "$n" "$P" hostfn good
cat "$T/$n.out"
check "$n: the double refuses a host node in a body and invalidates its capture" \
  grep -qx "capture begin=0 body_begin=0 launch=900 body_end=901 end=0" "$T/$n.out"

n=cond
run_lg "$n" "$P" cond good
cat "$T/$n.out"
check "$n: the body's capture and the parent's succeed" \
  grep -qx "capture begin=0 body_begin=0 launch=0 body_end=0 end=0" "$T/$n.out"
check "$n: the replay ran the body" grep -qx "replay instantiate=0 launch=0 sync=0 loss_ok=1" "$T/$n.out"
events "$n" || fail "$n: log schema"
echo "$n: $(q "$n" '[(w["what"], w["detail"][-260:]) for w in W]')"
check "$n: one capture_unchecked warning, naming capture-to-graph and conditional bodies" \
  qtrue "$n" '[w["what"] for w in W] == ["capture_unchecked"] and all(s in W[0]["detail"] for s in ("cudaStreamBeginCaptureToGraph", "conditional node", "host node"))'
check "$n: no violation" qtrue "$n" 'len(V) == 0'

n=late
rm -rf "$T/$n.logs"
LABELGUARD_LOG="$T/$n.logs" LG_LATE_LIB="${LG_PRELOAD##* }" "$P" late good >"$T/$n.out" 2>"$T/$n.err"
cat "$T/$n.out"
check "$n: armed inside the capture" grep -qx "late armed=1" "$T/$n.out"
check "$n: the capture succeeds and replays" \
  grep -qx "replay instantiate=0 launch=0 sync=0 loss_ok=1" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: one capture_unchecked warning, no violation" \
  qtrue "$n" '[w["what"] for w in W if w["what"] == "capture_unchecked"] == ["capture_unchecked"] and len(V) == 0'

n=plain
LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$P" plain bad
cat "$T/$n.out"
check "$n: captured" grep -qx "capture begin=0 body_begin=0 launch=0 body_end=0 end=0" "$T/$n.out"
check "$n: the replay ran on the masked copy" grep -qx "replay instantiate=0 launch=0 sync=0 loss_ok=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: the replay's violation is reported, masked; no capture_unchecked" \
  qtrue "$n" 'len(V) == 1 and V[0]["outcome"] == "masked" and V[0]["graph"]["replay"] == 1 and not [w for w in W if w["what"] == "capture_unchecked"]'
finish
