#!/usr/bin/env bash
# test_assert_async.sh: torch._assert_async must not kill the context. index_put_(accumulate=True)
# checks its indices with torch._assert_async, whose kernel asserts `input[0] != 0` on a
# device-computed flag; labelguard reads that one element before the launch and blocks it.
# build/e2e/assert_async (tests/e2e/progs/assert_async.cu) launches the kernel with PyTorch's
# name and parameters through frames named like PyTorch's ops, the condition built on the CPU
# (the double computes no reductions); the double runs the kernel as the device does:
#   plain (no labelguard), false -> the device assert: the context dies (710 from then on);
#   raise, false, via index_put_ -> the launch fails (800) with a message naming index_put_, the
#       context stays alive; one violation: family assert_async, op index_put_, the one element
#       read (bool, value 0) and nothing else claimed;
#   raise, -0.0 float and a complex64 zero, direct -> blocked, op torch._assert_async / index_put_;
#   true conditions (bool 1, float NaN) -> run, no violation;
#   mask -> falls back to raise (no stand-in for a condition); async -> no wait: read on the
#       stream ahead of the kernel and reported later, the kernel asserting as it would have;
#   log -> the launch runs and asserts, as it would have.
# Called by tests/run.sh; alone: bash tests/e2e/test_assert_async.sh
. "$(dirname "$0")/lib.sh"
P="$LG_ROOT/$LG_BUILD/e2e/assert_async"
need "$P"

n=plain
run_plain "$n" "$P" bool 0 index_put
cat "$T/$n.out"
check "$n: without labelguard the device assert kills the context" grep -qx "launch=0 sync=710 after=710" "$T/$n.out"

n=index_put
LABELGUARD_QUIET=1 run_lg "$n" "$P" bool 0 index_put
cat "$T/$n.out"
check "$n: the launch is blocked and the context stays alive" grep -qx "launch=800 sync=0 after=0" "$T/$n.out"
check "$n: the error names the op and says the context is intact" \
  grep -q "^msg=labelguard: index_put_'s device-side check (torch._assert_async) is false.*context is intact" "$T/$n.out"
events "$n" || fail "$n: log schema"
echo "$n: $(q "$n" '[(v["family"], v["op"], v["target"], v["bad"], v["outcome"]) for v in V]')"
check "$n: one violation: the op, the one element read, blocked" \
  qtrue "$n" 'len(V) == 1 and V[0]["family"] == "assert_async" and V[0]["op"] == "index_put_" and V[0]["outcome"] == "blocked" and V[0]["kernel"] == "_assert_async_cuda_kernel"'
check "$n: only the condition is claimed: bool, 1 element, value 0, no bound" \
  qtrue "$n" 'V[0]["target"]["dtype"] == "bool" and V[0]["target"]["count"] == 1 and V[0]["target"]["kind"] == "assert" and V[0]["target"]["n_classes"] is None and V[0]["bad"]["samples"] == [{"index": 0, "value": 0}] and V[0]["bad"]["count"] == 1'
check "$n: the cause names the op's index check" \
  qtrue "$n" 'V[0]["cause"] == "other" and "index_put_" in V[0]["cause_text"] and "out of range" in V[0]["cause_text"]'

n=negzero
LABELGUARD_QUIET=1 run_lg "$n" "$P" float -0 direct
cat "$T/$n.out"
check "$n: -0.0 is false: blocked" grep -qx "launch=800 sync=0 after=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: the user's own torch._assert_async, float32" \
  qtrue "$n" 'len(V) == 1 and V[0]["op"] == "torch._assert_async" and V[0]["target"]["dtype"] == "float32"'

n=complex
LABELGUARD_QUIET=1 run_lg "$n" "$P" complex64 0 index_put
cat "$T/$n.out"
check "$n: the complex overload is watched too" grep -qx "launch=800 sync=0 after=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: complex64" qtrue "$n" 'len(V) == 1 and V[0]["target"]["dtype"] == "complex64"'

for c in "bool 1" "float nan" "int64 5"; do
  n="true_${c// /_}"
  LABELGUARD_QUIET=1 run_lg "$n" "$P" $c index_put
  check "$n: runs" grep -qx "launch=0 sync=0 after=0" "$T/$n.out"
  events "$n" || fail "$n: log schema"
  check "$n: no violation, the condition was read" qtrue "$n" 'len(V) == 0 and S and S[-1]["validated"] == 1'
done

n=mask
LABELGUARD_ACTION=mask LABELGUARD_QUIET=1 run_lg "$n" "$P" bool 0 index_put
check "$n: falls back to raise" grep -qx "launch=800 sync=0 after=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: blocked, with the reason" qtrue "$n" 'len(V) == 1 and V[0]["outcome"] == "blocked" and "stand-in" in V[0].get("note", "")'

# Async mode must not drain the stream for a condition (multinomial asserts at every sampling
# step): on a gated asynchronous double, where nothing runs until the program waits, the launch
# returns at once (a read before it would have blocked it: 800); the condition, copied out on the
# stream ahead of the kernel, is reported at the program's sync; the kernel asserted, as it would
# have. The native frames are not unwound at an async launch (microseconds each): the op is named
# by the message it passes, and this one passes none.
n=async
FAKECUDA_ASYNC_US=1000 FAKECUDA_ASYNC_GATE=1 LABELGUARD_MODE=async LABELGUARD_QUIET=1 run_lg "$n" "$P" bool 0 index_put
cat "$T/$n.out"
check "$n: no wait before the launch; the kernel asserts at the sync" grep -qx "launch=0 sync=710 after=710" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: one violation, read at the sync, the kernel's caller as its native site" \
  qtrue "$n" 'len(V) == 1 and V[0]["op"] == "torch._assert_async" and V[0]["outcome"] == "launched" and V[0]["verdict_read_at"]["when"] == "at the next sync" and "async mode" in V[0]["note"] and "_assert_async_cuda_kernel" in V[0]["native_stack"][0]'
n=async_true
FAKECUDA_ASYNC_US=1000 FAKECUDA_ASYNC_GATE=1 LABELGUARD_MODE=async LABELGUARD_QUIET=1 run_lg "$n" "$P" bool 1 index_put
check "$n: a true condition, read later: runs, nothing reported" grep -qx "launch=0 sync=0 after=0" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: no violation, the condition was read" qtrue "$n" 'len(V) == 0 and S and S[-1]["validated"] == 1'

n=log
LABELGUARD_ACTION=log LABELGUARD_QUIET=1 run_lg "$n" "$P" bool 0 index_put
check "$n: the launch runs and asserts, as it would have" grep -qx "launch=0 sync=710 after=710" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: reported as launched" qtrue "$n" 'len(V) == 1 and V[0]["outcome"] == "launched"'
# The device assert that follows is that report's: no device_assert event, a note in the log.
for n in async log; do
  check "$n: the assert that follows is the violation's, not reported as one nothing checked" \
    qtrue "$n" 'not [e for e in E if e["event"] == "device_assert"] and any(w["what"] == "device_assert_explained" for w in W)'
done
finish
