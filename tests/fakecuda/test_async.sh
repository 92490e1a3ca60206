#!/usr/bin/env bash
# The double's asynchronous device (FAKECUDA_ASYNC_US, tests/fakecuda/fakecudart.c) through
# build/progs/asyncq with every kernel taking 20 ms: launches return at once and the sync waits;
# queries answer cudaErrorNotReady while work is in flight (every time, not a poll count) and
# success after the sync; cudaStreamWaitEvent orders streams on the device; the legacy stream
# synchronises with blocking streams only; cudaStreamPerThread is each thread's own stream; pageable sources are staged, copies to pageable
# memory wait, pinned copies do not; a device assert surfaces at the first sync after the kernel
# ran; last-error rules are unchanged; destroyed streams finish their work; argument storage
# may die after the launch; exit and fork with work in flight neither hang nor crash.
# Without FAKECUDA_ASYNC_US the double stays synchronous (the last checks). Every claim is a
# condition (an order, a value, a flag), not a time: asyncq holds a stream with a host function
# until it releases it (tests/progs/asyncq.cu), so "returned at once" or "ran first" holds by
# construction on a loaded machine. Then the gated device (FAKECUDA_ASYNC_GATE=1): nothing runs
# until the program waits, and a query loop ends.
. "$(dirname "$0")/lib.sh"
export FAKECUDA_ASYNC_US=20000
num() { sed -n "s/^$1=//p" "$OUT"; }

for v in asyncq asyncq_legacy asyncq_ptsz; do
  fk_run $v timing
  expect_rc 0
  expect_line "flag_after_launch=0"  # 50 launches returned while their stream was held
  expect_line "flag_after_sync=1"    # the sync waited for all of them and what followed
  expect_line "sync=0"
  echo "$v: launch $(num launch_ms) ms, sync $(num sync_ms) ms"
done

# FAKECUDA_NOT_READY=0 turns the synchronous double's poll counter off: NotReady must come from
# the work really being in flight.
FAKECUDA_NOT_READY=0 fk_run asyncq query
for line in stream_query=600 stream_query_again=600 event_query=600 event_query_again=600 last_error=600 \
            sync=0 event_query_after=0 stream_query_after=0 last_error_after=0; do expect_line "$line"; done

fk_run asyncq wait_event
expect_line "wait_call_returns_at_once=1" # returned while A was held
expect_line "order=CAB"          # C's stream is free (done while A was held); B waited for A's event
expect_line "copied=1"           # B's copy saw A's kernel

fk_run asyncq legacy
expect_line "order=SLTN"         # legacy after blocking S1, not waiting for held non-blocking N; T after legacy
expect_line "sync0_order=SXN"    # cudaStreamSynchronize(0) waited for S1, returned while N was held

fk_run asyncq per_thread
expect_line "other_query=0 other_sync_fast=1" # another thread's per-thread stream is free: synced while this one's is held
expect_line "order=WM"           # and runs while this thread's is busy
expect_line "legacy_order=PL"    # the legacy stream waits for a per-thread stream (it is blocking)

fk_run asyncq copies
# d2h_pageable_value=3: the copy returned after the kernel queued before it (2 -> 3) ran;
# d2h_pinned_before_sync=-1: the pinned copy returned while its stream was held
for line in h2d_pageable=1 h2d_pinned=2 d2h_pageable_value=3 \
            d2h_pinned_before_sync=-1 d2h_pinned_after_sync=3 blocking_d2h=1 h2h=5; do expect_line "$line"; done

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

# Exit with 50 kernels in flight: the queued work gets a second, then is dropped (fakecudart.c
# async_shutdown); a hang is caught by fk_run's guard.
fk_run asyncq exit
expect_rc 0
expect_line "returning"
expect_no_err

FAKECUDA_FORK_OK=1 fk_run asyncq fork
expect_rc 0
expect_line "child=0,0,0,0 value=1"
expect_line "child_exit=0"
expect_line "parent_sync=0"
fk_run asyncq fork
expect_line "child=3,3,3,3 value=-1"   # without FAKECUDA_FORK_OK the child has no runtime
expect_line "parent_sync=0"

# Empty or 0: today's synchronous double (kernels and host functions run inside the call).
FAKECUDA_ASYNC_US='' fk_run asyncq timing
expect_line "flag_after_launch=1"
FAKECUDA_ASYNC_US=0 fk_run asyncq wait_event
expect_line "order=ABC"

# The gated device: queued work runs only while a thread waits on the device. A single query
# finds the work queued however long the program took to ask; a query loop ends (the repeated
# query waits); a sync runs everything.
FAKECUDA_ASYNC_GATE=1 fk_run asyncq gate
expect_rc 0
for line in flag_before_wait=0 stream_query=600 polls=1 flag_after_loop=1 event_query=600 event_polls=1 \
            event_flag=1 sync=0 sync_flag=1; do expect_line "$line"; done
finish
