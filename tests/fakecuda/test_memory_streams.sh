#!/usr/bin/env bash
# Memory, streams, events and capture: cudaPointerGetAttributes says device only for cudaMalloc
# memory (interior pointers too), host for pinned, unregistered (0) otherwise; copies check the
# device side; stream/event handles are validated; capture records launches into a graph that
# runs when launched, and a synchronisation or (outside relaxed mode) a blocking copy inside a
# capture fails and invalidates it; stream 0 cannot be captured when it is the legacy stream, and
# can when it is the per-thread stream (--default-stream per-thread).
. "$(dirname "$0")/lib.sh"
fk_run probe memory
expect_line "malloc=0 malloc_host=0"
expect_line "attr device err=0 type=2"
expect_line "attr device_interior err=0 type=2"
expect_line "attr pinned err=0 type=1"
expect_line "attr stack err=0 type=0"
expect_line "host_get_device_pointer pinned=0 stack=1"
expect_line "copy h2d=0 d2h=0 d2h_from_stack=1 d2h_overrun=1"
expect_line "memset=0 free=0 double_free=1 free_host=0"
expect_line "attr_after_free type=0"
fk_run probe streams
expect_line "create=0 create_flags=0"
expect_line "query=0 sync=0"
expect_line "elapsed_unrecorded=400"
expect_line "record=0 record2=0 sync=0 query=0 elapsed_err=0 elapsed_nonneg=1"
expect_line "elapsed_no_timing=400"
expect_line "destroy=0 destroy_again=400"
expect_line "event_destroy=0 device_sync=0"
for v in probe probe_legacy probe_ptsz; do
  fk_run $v capture
  # stream 0: the legacy stream cannot be captured, the per-thread stream (probe_ptsz) can
  if [ $v = probe_ptsz ]; then expect_line "capture_legacy=0"; else expect_line "capture_legacy=900"; fi
  expect_line "begin=0 status=1 launch=0 value_during_capture=0 end=0 status_after=0"
  expect_line "instantiate=0 launch1=0 launch2=0 sync=0 value=2"
  expect_line "begin2=0 sync_in_capture=900 status=2 end=901"
  expect_line "begin3=0 unsafe_copy=900 end=901"
done
finish
