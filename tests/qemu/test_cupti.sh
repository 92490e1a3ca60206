#!/usr/bin/env bash
# test_cupti.sh: the CUPTI paths on the aarch64 build under qemu-user, the scripts of tests/e2e
# unchanged, on the aarch64 CUPTI double (build-aarch64/fakecupti*): where CUPTI is tried and
# what its absence says (test_cupti_unavailable), the launch callbacks' parameters as cupti.c
# reads them on AAPCS64/LP64 (test_cupti_layout), and the one subscriber slot shared with a
# Kineto-like profiler, two CUPTI copies included (test_cupti_subscriber): the paths a static
# runtime, seen through CUPTI alone, depends on. Exit 0 pass, 77 skip (sanitizer run), else fail.
. "$(dirname "$0")/lib.sh"
for t in cupti_unavailable cupti_layout cupti_subscriber; do
  q_run "e2e/test_$t" bash "$LG_ROOT/tests/e2e/test_$t.sh"
done
q_finish
