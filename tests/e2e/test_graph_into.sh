#!/usr/bin/env bash
# test_graph_into.sh: captures into an existing graph (cudaStreamBeginCaptureToGraph), as torch
# 2.15 captures torch.cond / while_loop bodies. build/e2e/graph_into (tests/e2e/progs/graph_into.cu)
# captures one NLL forward into each of two graphs made with cudaGraphCreate (a's capture ended
# with a NULL pGraph, b's with &got), then replays both on two streams, six rounds, both
# replays of a round in flight together, each round with new batches in the static targets;
# graph b's round-3 batch holds a bad label (9 of 5 classes). Under mask:
#   - every replay's loss equals the eager loss of its batch (the bad one: with label 3
#     ignored), so neither graph computed its loss from the other's labels or checked them in
#     the other's scratch;
#   - the bad batch is reported once: the NLL kernel, label 3 = 9, graph b's id, its replay 4,
#     on stream b, masked; no graph or capture warning (both graphs take host-node checks).
# A capture that ends without a graph handed back must not be taken for a failed one (its
# checks dropped, their scratch handed to the next captured check while the graph replays it).
# Each case runs on the synchronous double and on the asynchronous one (FAKECUDA_ASYNC_US: each
# stream's work on a thread of its own, the two graphs' replays overlapping), with
# LABELGUARD_MODE sync and async; and built for the per-thread default stream (graph_into_ptsz:
# the _ptsz entry points) on the asynchronous double. Called by tests/run.sh; alone: bash tests/e2e/test_graph_into.sh
. "$(dirname "$0")/lib.sh"
P="$LG_ROOT/$LG_BUILD/e2e/graph_into"
need "$P" "$P"_ptsz
async_us="${FAKECUDA_ASYNC_US:-500}"

n=plain
run_plain "$n" "$P" --rounds 6
cat "$T/$n.out"
check "$n: the double puts the captures into the graphs (a: no handle back, b: the same graph)" \
  bash -c "grep -q '^capture a id=[1-9][0-9]* begin=0 launch=0 end=0 got=null\$' '$T/$n.out' && grep -q '^capture b id=[1-9][0-9]* begin=0 launch=0 end=0 got=same\$' '$T/$n.out'"
check "$n: every replay's loss is the eager one" grep -qx "into rounds=6 mismatches=0 errors=0" "$T/$n.out"

for dev in sync async ptsz; do
  for mode in sync async; do
    n="$dev-$mode"
    (
      if [ $dev != sync ]; then export FAKECUDA_ASYNC_US=$async_us; else unset FAKECUDA_ASYNC_US; fi
      prog="$P"; [ $dev = ptsz ] && prog="$P"_ptsz
      LABELGUARD_MODE=$mode LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$prog" --rounds 6 --bad b:3
    )
    grep -E '^(capture|instantiate|into)' "$T/$n.out"
    check "$n: both captured and instantiated" \
      bash -c "grep -c '^capture [ab] id=[1-9][0-9]* begin=0 launch=0 end=0 ' '$T/$n.out' | grep -qx 2 && grep -q '^instantiate a=0 b=0 ' '$T/$n.out'"
    check "$n: every replay's loss is the eager one (the bad batch's: label 3 ignored)" \
      grep -qx "into rounds=6 mismatches=0 errors=0" "$T/$n.out"
    grep -q "into rounds=6 mismatches=0" "$T/$n.out" || grep '^round' "$T/$n.out"
    if events "$n"; then
      b_id=$(grep -o '^capture b id=[0-9]*' "$T/$n.out" | cut -d= -f2)
      stream_b=$(field "$n" stream_b)
      echo "$n: $(q "$n" '[(v["kernel"], v.get("graph"), v["stream"], v["outcome"]) for v in V], [w["what"] for w in W]')"
      check "$n: one violation: the NLL kernel, label 3 = 9, graph b's replay 4 on stream b, masked" \
        qtrue "$n" "len(V) == 1 and 'nll_loss_forward_reduce_cuda_kernel_2d' in V[0]['kernel'] and V[0]['bad']['samples'][0] == {'index': 3, 'value': 9} and V[0]['graph']['id'] == ${b_id:-0} and V[0]['graph']['replay'] == 4 and int(V[0]['stream'], 16) == int('${stream_b:-0}', 16) and V[0]['outcome'] == 'masked'"
      check "$n: no graph or capture warning" \
        qtrue "$n" "not [w for w in W if w['what'].startswith('graph_') or w['what'].startswith('capture_')]"
    else fail "$n: events"; fi
  done
done
finish
