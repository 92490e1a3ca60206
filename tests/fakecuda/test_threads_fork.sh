#!/usr/bin/env bash
# Concurrency and fork: 16 threads on 16 streams launching watched and unwatched kernels; with
# good labels every launch succeeds with the right loss; with bad labels the whole process's
# context dies (710 everywhere after the first bad launch), as it would on a GPU. After fork,
# a child of a process that used CUDA gets cudaErrorInitializationError (3), as with the real
# driver; the parent's context is unaffected.
. "$(dirname "$0")/lib.sh"
for v in threads threads_legacy threads_ptsz; do
  fk_run $v --bad-every 0 --seed 5
  expect_rc 0
  expect_line "summary launches=256 launch_errors=0 sync_errors=0 compared=0 mismatches=0"
  # Every input is -0.5, so every watched mean loss is 0.5.
  n=$(grep -c 'kernel=watched bad_index=-1 bad_value=0 launch_err=0 sync_err=0 out=0.5$' "$OUT")
  [ "$n" = 128 ] || fail "$v: $n of 128 watched launches gave 0.5"
  fk_run $v --seed 5
  expect_rc 1
  grep -q 'sync_err=710' "$OUT" || fail "$v: no launch saw the poisoned context"
  grep -q 'Assertion `t >= 0 && t < n_classes` failed.' "$ERR" || fail "$v: no assert line"
done
fk_run forker --child-launch
expect_line "parent first copy_err=0 launch_err=0 sync_err=0"
expect_line "child copy_err=3 launch_err=3 sync_err=3"
expect_line "exec-ok"
expect_line "parent child_status=0"
expect_line "parent second copy_err=0 launch_err=0 sync_err=0"
FAKECUDA_FORK_OK=1 fk_run forker --child-bad
expect_line "child copy_err=0 launch_err=0 sync_err=710"
expect_line "parent second copy_err=0 launch_err=0 sync_err=0"
fk_run forker --bad
expect_line "parent first copy_err=0 launch_err=0 sync_err=710"
expect_line "parent second copy_err=710 launch_err=710 sync_err=710"
finish
