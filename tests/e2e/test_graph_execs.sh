#!/usr/bin/env bash
# test_graph_execs.sh: one captured graph instantiated twice (two cudaGraphExec_t of one
# cudaGraph_t, as a graph instantiated for two streams), exec A replaying a clean batch and exec B
# a bad one (build/progs/graphs twoexecs), under mask:
#   - each exec checks with scratch of its own: no graph_exec_shares_checks warning, B's bad
#     replay is its own replay 1 (one violation, masked, graph.exec 2), A's clean one reports
#     nothing;
#   - A's loss is the clean batch's and B's the bad batch's over its valid labels;
#   - B replayed after A's replay (an event), or, with the two replays overlapping (each kernel
#     400 ms on the asynchronous double, B launched 100 ms after A, once A's check has read its
#     labels), A's loss kernel still reads A's own sanitized labels, not those B's check wrote
#     meanwhile.
# Then what cudagraph trees do for each new shape, 10,000 times (build/progs/graphs cycles,
# 2,000 on the asynchronous double): capture the step, instantiate it twice, destroy the graph,
# replay each exec, destroy the execs. The checks' scratch is handed back and reused: no device
# or host memory taken after the first 100 cycles, every replay checked (each bad one reported
# once, as replay 1 of its exec), every loss right.
# Runs on the synchronous double and, in tests/run.sh's async list, the asynchronous one.
. "$(dirname "$0")/lib.sh"

G="$PROGS/graphs"
need "$G"
run_plain ref "$G" --batches gi replay
require_fake ref
loss_g=$(grep '^replay k=1' "$T/ref.out" | grep -o 'loss=[^ ]*' | cut -d= -f2)
loss_i=$(grep '^replay k=2' "$T/ref.out" | grep -o 'loss=[^ ]*' | cut -d= -f2)
check "reference losses differ (g=$loss_g i=$loss_i)" test -n "$loss_g" -a -n "$loss_i" -a "$loss_g" != "$loss_i"

two() { # NAME ENV...: the twoexecs scenario under mask, A clean, B bad
  local n=$1; shift
  (
    [ $# -gt 0 ] && export "$@"
    LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$G" --batches gb twoexecs
  )
  check "$n: captured, instantiated twice" grep -q "twoexecs capture end=0 instantiate_a=0 instantiate_b=0" "$T/$n.out"
  check "$n: A's loss is its clean batch's" grep -q "twoexecs a batch=g launch=0 wait=0 loss=$loss_g\$" "$T/$n.out"
  check "$n: B's loss is its batch's valid labels'" grep -q "twoexecs b batch=b launch=0 wait=0 loss=$loss_i last=0" "$T/$n.out"
  check "$n: context alive" grep -q "context alive=1" "$T/$n.out"
  if events "$n"; then
    check "$n: no shared-scratch warning" qtrue "$n" "not [w for w in W if w['what'] == 'graph_exec_shares_checks']"
    check "$n: one violation, B's replay 1, masked" \
      qtrue "$n" "len(V) == 1 and V[0]['graph']['replay'] == 1 and V[0]['outcome'] == 'masked' and V[0]['bad']['samples'][0] == {'index': 3, 'value': 9}"
    check "$n: the violation names exec B, the graph's second" qtrue "$n" "V[0]['graph']['exec'] == 2"
  else fail "$n: events"; fi
}

for mode in sync async; do
  export LABELGUARD_MODE=$mode
  # as the suite runs (the synchronous double, or the asynchronous one at its kernel time), B after A
  two "$mode"
  # the two replays overlapping on the asynchronous double
  two "$mode-overlap" FAKECUDA_ASYNC_US=400000 TWOEXECS_GAP_US=100000
done

# capture / instantiate twice / replay / destroy, over and over, under mask
NC=10000
[ -n "${FAKECUDA_ASYNC_US:-}" ] && NC=2000
# ASan keeps freed memory in a quarantine (256 MB by default), which the host-memory bound
# would count as growth: a small one leaves the bound meaningful.
case "${LG_SANITIZER:-}" in *address*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4";; esac
cy() { grep '^cycles n=' "$T/$1.out" | grep -o " $2=[^ ]*" | cut -d= -f2; } # cy NAME KEY: the summary's KEY
for mode in sync async; do
  n="cycles-$mode"
  LABELGUARD_MODE=$mode LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 \
    run_lg "$n" "$G" --cycles $NC --execs 2 --batches gggggggggb --rss-limit-mb 256 cycles
  check "$n: ran to the end" [ "$(cy "$n" n)" = $NC ]
  grep '^cycle' "$T/$n.out" | head -n 4
  check "$n: no cycle failed" [ "$(cy "$n" failed)" = 0 ]
  check "$n: losses right (g=$(cy "$n" loss_g) b=$(cy "$n" loss_b)), none changed" \
    [ "$(cy "$n" loss_g)" = "$loss_g" -a "$(cy "$n" loss_b)" = "$loss_i" -a "$(cy "$n" changed)" = 0 ]
  check "$n: no device memory taken after cycle 100 ($(cy "$n" device_growth) bytes)" \
    [ "$(cy "$n" device_growth)" = 0 ]
  check "$n: host memory bounded ($(cy "$n" host_growth) kB after cycle 100)" \
    [ "$(cy "$n" host_growth)" -lt 32768 ]
  if events "$n"; then
    check "$n: no warning" qtrue "$n" "not W"
    check "$n: each bad replay reported once, masked, as replay 1 of exec 1 and of exec 2" \
      qtrue "$n" "len(V) == 2 * ($NC // 10) and all(v['outcome'] == 'masked' and v['graph']['replay'] == 1 for v in V) and sorted(v['graph']['exec'] for v in V) == [1] * ($NC // 10) + [2] * ($NC // 10)"
  else fail "$n: events"; fi
done

finish
