#!/usr/bin/env bash
# The double's asynchronous device (FAKECUDA_ASYNC_US, tests/fakecuda/fakecudart.c) through
# build/progs/asyncq with every kernel taking 20 ms: launches return at once and the sync waits;
# queries answer cudaErrorNotReady while work is in flight (every time, not a poll count) and
# success after the sync; cudaStreamWaitEvent orders streams on the device; the legacy stream
# synchronises with blocking streams only; cudaStreamPerThread is each thread's own stream; pageable sources are staged, copies to pageable
# memory wait, pinned copies do not; a device assert surfaces at the first sync after the kernel
# ran; last-error rules are unchanged; destroyed streams finish their work; argument storage
# may die after the launch; exit and fork with work in flight neither hang nor crash.
# Without FAKECUDA_ASYNC_US the double stays synchronous (the last check).
. "$(dirname "$0")/lib.sh"
export FAKECUDA_ASYNC_US=20000
num() { sed -n "s/^$1=//p" "$OUT"; }

for v in asyncq asyncq_legacy asyncq_ptsz; do
  fk_run $v timing
  expect_rc 0
  l=$(num launch_ms); s=$(num sync_ms)
  [ -n "$l" ] && [ "$l" -lt 100 ] || fail "$v: 50 launches took ${l:-?} ms (want < 100: launches return at once)"
  [ -n "$s" ] && [ "$s" -ge 950 ] || fail "$v: the sync after 50 kernels of 20 ms waited ${s:-?} ms (want >= 950)"
  expect_line "sync=0"
  echo "$v: launch ${l} ms, sync ${s} ms"
done

# FAKECUDA_NOT_READY=0 turns the synchronous double's poll counter off: NotReady must come from
# the work really being in flight.
FAKECUDA_NOT_READY=0 fk_run asyncq query
for line in stream_query=600 stream_query_again=600 event_query=600 event_query_again=600 last_error=600 \
            sync=0 event_query_after=0 stream_query_after=0 last_error_after=0; do expect_line "$line"; done

fk_run asyncq wait_event
expect_line "wait_call_returns_at_once=1"
expect_line "order=CAB"          # C's stream is free; B waited for A's event
expect_line "copied=1"           # B's copy saw A's kernel

fk_run asyncq legacy
expect_line "order=SLTN"         # legacy after blocking S1, before non-blocking N; T after legacy
expect_line "sync0_order=SXN"    # cudaStreamSynchronize(0) waited for S1, not for N

fk_run asyncq per_thread
expect_line "other_query=0 other_sync_fast=1" # another thread's per-thread stream is free
expect_line "order=WM"           # and runs while this thread's is busy
expect_line "legacy_order=PL"    # the legacy stream waits for a per-thread stream (it is blocking)

fk_run asyncq copies
for line in h2d_pageable=1 h2d_pinned=2 d2h_pageable_ms_ge_15=1 d2h_pageable_value=2 d2h_pinned_ms_lt_15=1 \
            d2h_pinned_before_sync=-1 d2h_pinned_after_sync=2 blocking_d2h=1 h2h=5; do expect_line "$line"; done

fk_run asyncq assert
for line in launch=0 idle_query_before=0 stream_query_before=600 last_error_before=600 sync=710 \
            idle_query_after=710 last_error_after=710; do expect_line "$line"; done
expect_err_line '/pytorch/aten/src/ATen/native/cuda/Loss.cu:304: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.'

fk_run asyncq lasterror
for line in after_launch=0 bad_launch=9 good_launch=0 peek=9 get=9 get_again=0 query=600 get_after_query=600 \
            sync=0 get_after_sync=0; do expect_line "$line"; done

fk_run asyncq destroy
for line in destroy=0 flag_at_destroy=0 device_sync=0 flag_after_sync=1; do expect_line "$line"; done

fk_run asyncq args
expect_line "values=1,1,1,1,2,2,2,2"

start=$(date +%s%N)
fk_run asyncq exit
ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_rc 0
expect_line "returning"
[ "$ms" -lt 3000 ] || fail "exit with 50 kernels in flight took $ms ms (want < 3000)"
expect_no_err

FAKECUDA_FORK_OK=1 fk_run asyncq fork
expect_rc 0
expect_line "child=0,0,0,0 value=1"
expect_line "child_exit=0"
expect_line "parent_sync=0"
fk_run asyncq fork
expect_line "child=3,3,3,3 value=-1"   # without FAKECUDA_FORK_OK the child has no runtime
expect_line "parent_sync=0"

# Empty or 0: today's synchronous double (kernels run inside the launch call).
FAKECUDA_ASYNC_US='' fk_run asyncq timing
l=$(num sync_ms)
[ -n "$l" ] && [ "$l" -lt 100 ] || fail "FAKECUDA_ASYNC_US unset: the sync waited ${l:-?} ms (want < 100)"
FAKECUDA_ASYNC_US=0 fk_run asyncq wait_event
expect_line "order=ABC"
finish
