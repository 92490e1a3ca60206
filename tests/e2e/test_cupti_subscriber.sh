#!/usr/bin/env bash
# test_cupti_subscriber.sh: CUPTI's one subscriber slot stays usable by a profiler, and
# labelguard still gets it where the driver refuses multiple subscribers.
# build/e2e/kineto_like (tests/e2e/progs/kineto_like.cu) launches a kernel, then subscribes to
# CUPTI as torch.profiler's Kineto does, through the single-slot CUPTI double
# build/fakecupti/libcupti.so.13 (tests/fakecuda/cupti/libcupti.c), under the runtime double:
#   auto (interposition sees the launches) -> labelguard never subscribes: the start event says
#       hooks ["interpose"] and why, no cupti_* warning, the profiler's subscribe returns 0;
#   cupti -> labelguard subscribes with cuptiSubscribe_v2 (named "labelguard"; the double is a
#       CUPTI before 13.2, so the single-subscriber struct), and when the profiler subscribes
#       (v1 and v2) it hands the slot over: the profiler gets 0, one cupti_released warning;
#   interpose -> never subscribes.
# FAKECUPTI_MULTI=unsupported makes the double CUPTI 13.2 on a driver without multiple
# subscribers (before CUDA 13.3, r610), which refuses allowMultipleSubscribers=1 with
# MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED although the slot is free:
#   cupti, v2 profiler -> labelguard asks again with allowMultipleSubscribers=0 and gets the slot;
#       hooks_reason names both answers and the driver, not another tool; no cupti_unavailable;
#       the handover to the profiler still works;
#   cupti, a v1 client subscribed before labelguard starts (v1-early) -> labelguard keeps to
#       cuptiSubscribe (NVIDIA forbids mixing v1 and v2 subscribers) and says so;
#   cupti, build/e2e/attach_target --now with FAKECUDA_CUPTI=1 (the runtime double then calls
#       the CUPTI double's callbacks around each launch) -> the bad label is caught through
#       CUPTI: one violation, masked (CUPTI cannot skip a launch), sync 0.
#   two CUPTI instances, a client linked against the second -> its subscription reaches the
#       second, in auto and in cupti.
# Called by tests/run.sh; alone: bash tests/e2e/test_cupti_subscriber.sh
. "$(dirname "$0")/lib.sh"
PROG="$LG_ROOT/$LG_BUILD/e2e/kineto_like"
CUPTI_DIR="$LG_ROOT/$LG_BUILD/fakecupti"
TARGET="$LG_ROOT/$LG_BUILD/e2e/attach_target"
need "$PROG" "$CUPTI_DIR/libcupti.so.13" "$TARGET"
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

# reason NAME: the start event's hooks_reason
reason() { q "$1" '[e for e in E if e["event"]=="start"][0].get("hooks_reason","")'; }

export FAKECUPTI_MULTI=unsupported
n=nomulti_v2
LABELGUARD_HOOKS=cupti run_lg "$n" "$PROG" v2
cat "$T/$n.out"
check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
events "$n" || fail "$n: log schema"
echo "$n: hooks_reason: $(reason "$n")"
check "$n: start says hooks [cupti]" qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["cupti"]]'
check "$n: hooks_reason names the refusal of allowMultipleSubscribers=1, the driver, and the single slot taken" \
  qtrue "$n" '"cuptiSubscribe_v2 allowMultipleSubscribers=1: refused (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); cuptiSubscribe_v2 allowMultipleSubscribers=0 (multiple subscribers need a CUDA 13.3 driver, r610+): subscribed" in [e for e in E if e["event"]=="start"][0].get("hooks_reason","")'
check "$n: no cupti_unavailable, and no other tool blamed" \
  qtrue "$n" 'not [w for w in W if w["what"]=="cupti_unavailable"] and "another tool" not in json.dumps(E)'
check "$n: the profiler still gets the slot labelguard held" subscribed "$n"
check "$n: one cupti_released warning" qtrue "$n" 'len([w for w in W if w["what"]=="cupti_released"]) == 1'

n=nomulti_v1
LABELGUARD_HOOKS=cupti run_lg "$n" "$PROG" v1-early
cat "$T/$n.out"
check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
check "$n: the early v1 client subscribed before labelguard started" grep -qx 'early: 0' "$T/$n.out"
check "$n: labelguard took the slot with cuptiSubscribe (v1: unnamed)" grep -qx 'started: (unnamed)' "$T/$n.out"
events "$n" || fail "$n: log schema"
echo "$n: hooks_reason: $(reason "$n")"
check "$n: start says hooks [cupti]" qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["cupti"]]'
check "$n: hooks_reason says v1 was kept to, and why, and no v2 call was made" \
  qtrue "$n" '(lambda r: "subscribed with cuptiSubscribe (v1) and v1 and v2 subscribers must not be mixed" in r and r.endswith("cuptiSubscribe (single subscriber): subscribed)") and "cuptiSubscribe_v2 " not in r)([e for e in E if e["event"]=="start"][0].get("hooks_reason",""))'
check "$n: the v1 profiler still gets the slot labelguard held" subscribed "$n"

n=nomulti_caught
rm -rf "$T/$n.logs"
# The CUPTI double is preloaded after the library, as if the application had loaded it: the
# library's search for libcupti would otherwise find a toolkit's real one before the loader path.
FAKECUDA_CUPTI=1 LABELGUARD_HOOKS=cupti LABELGUARD_LOG="$T/$n.logs" LD_PRELOAD="$LG_PRELOAD $CUPTI_DIR/libcupti.so.13" \
  "$TARGET" --now >"$T/$n.out" 2>"$T/$n.err"
echo $? >"$T/$n.rc"
cat "$T/$n.out"
check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
check "$n: the bad launch ran on masked labels (no device assert)" grep -qx 'sync: 0' <(tail -n1 "$T/$n.out")
events "$n" || fail "$n: log schema"
echo "$n: hooks_reason: $(reason "$n")"
check "$n: start says hooks [cupti] through the single-slot fallback" \
  qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["cupti"]] and "allowMultipleSubscribers=0 (multiple subscribers need a CUDA 13.3 driver, r610+): subscribed" in [e for e in E if e["event"]=="start"][0].get("hooks_reason","")'
check "$n: one violation in the NLL kernel, masked" \
  qtrue "$n" '[(("nll_loss_forward_reduce_cuda_kernel_2d" in v["kernel"]), v["outcome"]) for v in V] == [(True, "masked")]'
check "$n: no cupti_unavailable" qtrue "$n" 'not [w for w in W if w["what"]=="cupti_unavailable"]'
unset FAKECUPTI_MULTI

# Two CUPTI instances in one process (an Nsight injection, a CUDA 12 extension beside a CUDA 13
# torch): the double's libcupti.so.13 is preloaded after the library, so it comes first in the
# global scope; build/e2e/kineto_like12 links against the second, build/fakecupti12/libcupti.so.12.
# Its cuptiSubscribe binds to our export, which must forward to libcupti.so.12 (the one the
# client links against): the client then holds that instance's slot ("holder:" is read from
# it), not the first instance's. In auto labelguard subscribes nowhere; in cupti it holds the
# first instance's slot, which the client never asks for (no handover, no cupti_released).
PROG12="$LG_ROOT/$LG_BUILD/e2e/kineto_like12"
need "$PROG12" "$LG_ROOT/$LG_BUILD/fakecupti12/libcupti.so.12"
for hooks in auto cupti; do
  for api in v1 v2; do
    n=two_${hooks}_$api
    rm -rf "$T/$n.logs"
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LG_ROOT/$LG_BUILD/fakecupti12" KINETO_CUPTI_SONAME=libcupti.so.12 \
      LABELGUARD_HOOKS=$hooks LABELGUARD_LOG="$T/$n.logs" \
      LD_PRELOAD="$LG_PRELOAD $CUPTI_DIR/libcupti.so.13" "$PROG12" $api >"$T/$n.out" 2>"$T/$n.err"
    echo $? >"$T/$n.rc"
    cat "$T/$n.out"
    check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
    check "$n: the client's subscribe returns 0" subscribed "$n"
    check "$n: the client holds its own CUPTI's slot" grep -qx "holder: $([ $api = v1 ] && echo '(unnamed)' || echo 'CUPTI for kineto')" "$T/$n.out"
    events "$n" || fail "$n: log schema"
    check "$n: no slot handed over (the client asked another instance)" qtrue "$n" 'not [w for w in W if w["what"]=="cupti_released"]'
  done
done

# Armed late (labelguard_enable in a process not started under LD_PRELOAD: KINETO_LIKE_ENABLE
# makes kineto_like load the library and enable it first), the same rule as preloaded:
#   auto  -> labelguard never subscribes (interposition covers the runtime): the profiler gets
#            the slot (before: enable subscribed at once and the profiler got 39);
#   cupti -> labelguard takes the slot at its start (the first launch), and the profiler's
#            cuptiSubscribe, bound to libcupti in its GOT, reaches the hand-over wrapper because
#            arming rewrote that slot: the profiler gets the slot, one cupti_released warning
#            (before: the call went to libcupti directly and got 39).
for hooks in auto cupti; do
  for api in v1 v2; do
    n=enable_${hooks}_$api
    rm -rf "$T/$n.logs"
    KINETO_LIKE_ENABLE="${LG_PRELOAD##* }" LABELGUARD_HOOKS=$hooks LABELGUARD_LOG="$T/$n.logs" "$PROG" $api \
      >"$T/$n.out" 2>"$T/$n.err"
    echo $? >"$T/$n.rc"
    cat "$T/$n.out"
    check "$n: exit 0" [ "$(rc_of "$n")" = 0 ]
    check "$n: enable armed entries" grep -q '^enable: [1-9][0-9]* $' "$T/$n.out"
    check "$n: the profiler gets the slot" subscribed "$n"
    events "$n" || fail "$n: log schema"
    if [ $hooks = auto ]; then
      check "$n: labelguard never held the slot" grep -qx 'started: ' "$T/$n.out"
      check "$n: start says hooks [interpose], CUPTI left to profilers" \
        qtrue "$n" '[e["hooks"] for e in E if e["event"]=="start"] == [["interpose"]] and "left to profilers" in [e for e in E if e["event"]=="start"][0].get("hooks_reason","")'
    else
      check "$n: labelguard held the slot from its start" grep -qx 'started: CUPTI for labelguard' "$T/$n.out"
      check "$n: one cupti_released warning" qtrue "$n" 'len([w for w in W if w["what"]=="cupti_released"]) == 1'
    fi
  done
done

LABELGUARD_HOOKS=interpose run_lg interpose "$PROG" v1
check "interpose: the profiler gets the slot" subscribed interpose
events interpose || fail "interpose: log schema"
check "interpose: no CUPTI warning" qtrue interpose 'not [w for w in W if w["what"].startswith("cupti")]'
finish
