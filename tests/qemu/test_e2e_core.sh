#!/usr/bin/env bash
# test_e2e_core.sh: the e2e suite's core cases on the aarch64 build under qemu-user, the scripts
# of tests/e2e unchanged: graphs, threads, fork (and exec), then the asynchronous double's re-run
# of the threads suite (async:, as tests/run.sh names it). The actions are test_e2e_actions.sh's;
# test_build.sh checks the library itself.
# Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
for t in graphs threads fork; do
  q_run "e2e/test_$t" bash "$LG_ROOT/tests/e2e/test_$t.sh"
done
q_run async:e2e/test_threads env FAKECUDA_ASYNC_US="${LG_ASYNC_US:-500}" bash "$LG_ROOT/tests/e2e/test_threads.sh"
q_finish
