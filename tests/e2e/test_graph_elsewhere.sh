#!/usr/bin/env bash
# test_graph_elsewhere.sh: checks captured into a graph that only another graph's exec replays
# (a child graph node, a clone; with the GPU backend also a conditional node's body) cannot report
# their verdicts; labelguard says so once. build/e2e/graph_elsewhere (tests/e2e/progs/graph_elsewhere.cu)
# captures a bad NLL launch with cudaStreamBeginCapture, then replays another graph:
#   elsewhere (mask) -> the replay runs (launch 0, sync 0), no violation can be read, and one
#       graph_checks_unreported warning names the graph and the cases;
#   itself (control) -> the captured graph's own exec: the violation is reported (masked, with
#       its graph id), and no warning.
# Called by tests/run.sh; alone: bash tests/e2e/test_graph_elsewhere.sh
. "$(dirname "$0")/lib.sh"
P="$LG_ROOT/$LG_BUILD/e2e/graph_elsewhere"
need "$P"
n=elsewhere
LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$P" elsewhere
cat "$T/$n.out"
check "$n: captured into the graph" grep -qx "capture begin=0 launch=0 end=0 graph=1" "$T/$n.out"
check "$n: the other graph's replay ran" grep -qx "replay instantiate=0 launch=0 sync=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
echo "$n: $(q "$n" '[w["detail"][:120] for w in W]')"
check "$n: one graph_checks_unreported warning, naming the graph and the cases" \
  qtrue "$n" '[w["what"] for w in W if w["what"].startswith("graph_")] == ["graph_checks_unreported"] and all(s in [w for w in W if w["what"]=="graph_checks_unreported"][0]["detail"] for s in ("graph 1,", "child graph node", "conditional", "cudaGraphClone", "cudaStreamBeginCaptureToGraph"))'
check "$n: no violation (none can be read)" qtrue "$n" 'len(V) == 0'
n=itself
LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$P" itself
cat "$T/$n.out"
check "$n: the graph's replay ran" grep -qx "replay instantiate=0 launch=0 sync=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: the violation is reported, masked, from the graph's replay 1" \
  qtrue "$n" 'len(V) == 1 and V[0]["outcome"] == "masked" and V[0]["graph"]["replay"] == 1'
check "$n: no graph warning" qtrue "$n" 'not [w for w in W if w["what"].startswith("graph_")]'
finish
