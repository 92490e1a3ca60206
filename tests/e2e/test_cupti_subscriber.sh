#!/usr/bin/env bash
# test_cupti_subscriber.sh: CUPTI's one subscriber slot stays usable by a profiler.
# build/e2e/kineto_like (tests/e2e/progs/kineto_like.cu) launches a kernel, then subscribes to
# CUPTI as torch.profiler's Kineto does, through the single-slot CUPTI double
# build/fakecupti/libcupti.so.13 (tests/fakecuda/cupti/libcupti.c), under the runtime double:
#   auto (interposition sees the launches) -> labelguard never subscribes: the start event says
#       hooks ["interpose"] and why, no cupti_* warning, the profiler's subscribe returns 0;
#   cupti -> labelguard subscribes with cuptiSubscribe_v2 (named "labelguard"; the double is a
#       CUPTI before 13.2, so the single-subscriber struct), and when the profiler subscribes
#       (v1 and v2) it hands the slot over: the profiler gets 0, one cupti_released warning;
#   interpose -> never subscribes.
# Called by tests/run.sh; alone: bash tests/e2e/test_cupti_subscriber.sh
. "$(dirname "$0")/lib.sh"
PROG="$LG_ROOT/$LG_BUILD/e2e/kineto_like"
CUPTI_DIR="$LG_ROOT/$LG_BUILD/fakecupti"
need "$PROG" "$CUPTI_DIR/libcupti.so.13"
export LD_LIBRARY_PATH="$LG_FAKE_DIR:$CUPTI_DIR"

# subscribed NAME: the profiler's cuptiSubscribe returned CUPTI_SUCCESS
subscribed() { grep -qx 'subscribe: 0' "$T/$1.out"; }

for api in v1 v2; do
  n=auto_$api
  LABELGUARD_HOOKS=auto run_lg "$n" "$PROG" "$api"
  cat "$T/$n.out"
  check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
  check "$n: the profiler gets the slot" subscribed "$n"
  events "$n" || fail "$n: log schema"
  check "$n: start says hooks [interpose] and why" \
    qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["interpose"]] and "left to profilers" in [e for e in E if e["event"]=="start"][0].get("hooks_reason","")'
  check "$n: no CUPTI warning (CUPTI not tried)" qtrue "$n" 'not [w for w in W if w["what"].startswith("cupti")]'

  n=cupti_$api
  LABELGUARD_HOOKS=cupti run_lg "$n" "$PROG" "$api"
  cat "$T/$n.out"
  check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
  check "$n: the profiler gets the slot labelguard held" subscribed "$n"
  check "$n: the profiler is the holder now" grep -qx "holder: $([ $api = v1 ] && echo '(unnamed)' || echo 'CUPTI for kineto')" "$T/$n.out"
  check "$n: the profiler is not told labelguard holds it" grep -qx 'old: ' "$T/$n.out"
  events "$n" || fail "$n: log schema"
  check "$n: start says cupti via cuptiSubscribe_v2" \
    qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["cupti"]] and "cuptiSubscribe_v2" in [e for e in E if e["event"]=="start"][0].get("hooks_reason","")'
  check "$n: one cupti_released warning naming the call" \
    qtrue "$n" '[w["detail"].split(" and ")[0] for w in W if w["what"]=="cupti_released"] == ["another CUPTI client (a profiler: torch.profiler, Nsight) called cuptiSubscribe%s" % ("_v2" if "'$api'"=="v2" else "")]'
done

LABELGUARD_HOOKS=interpose run_lg interpose "$PROG" v1
check "interpose: the profiler gets the slot" subscribed interpose
events interpose || fail "interpose: log schema"
check "interpose: no CUPTI warning" qtrue interpose 'not [w for w in W if w["what"].startswith("cupti")]'
finish
