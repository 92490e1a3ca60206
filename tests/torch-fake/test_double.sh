#!/usr/bin/env bash
# The runtime test double under real torch (both wheels), where torch depends on CUDA's rules:
# events and stream queries report work in flight as not ready (torch's `(void)cudaGetLastError()`
# after cudaErrorNotReady must leave no error behind), pinned memory and non_blocking copies
# keep the bytes, cudaHostRegister'd memory counts as pinned, torch.cuda.graph captures the NLL
# kernel and replays it with the labels of the replay (a bad one asserts at replay), and a
# synchronisation inside a capture fails as CUDA makes it fail.
# Needs build/torch-python (make build/torch-python): missing is a failure, never a skip.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PY="$LG_ROOT/tests/torch-fake/double.py"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
has() { # NAME LINE
  grep -qxF -- "$2" "$TMP/$1.out" || { fail "$1: expected line: $2"; sed "s/^/    $1 out| /" "$TMP/$1.out"; tail -n 15 "$TMP/$1.err" | sed "s/^/    $1 err| /"; }
}
for major in 13 12; do
  for what in events pinned graph capture_rules; do
    n="$what$major"
    TORCH_CUDA=$major "$TP" -W ignore "$PY" "$what" >"$TMP/$n.out" 2>"$TMP/$n.err"
  done
  has "events$major" "event_query=False,True"
  has "events$major" "stream_query=False,True"
  has "events$major" "after_sync=True"
  has "events$major" "idle_query=True"
  has "events$major" "mem_total=150754820096 free_le_total=True"
  has "pinned$major" "pinned=True"
  has "pinned$major" "roundtrip=True"
  has "pinned$major" "host_register=0"
  has "pinned$major" "registered_copy=True"
  has "pinned$major" "host_unregister=0"
  has "pinned$major" "reuse_last=49"
  has "graph$major" "replays=ok"
  has "graph$major" "replay_bad=CUDA error: device-side assert triggered"
  grep -q 'nll_loss_forward_reduce_cuda_kernel_2d: block: \[0,0,0\], thread: \[4,0,0\] Assertion' "$TMP/graph$major.err" \
    || fail "graph$major: no device assert line for the replayed kernel"
  has "capture_rules$major" "sync_in_capture=CUDA error: operation not permitted when stream is capturing"
  has "capture_rules$major" "end_capture=CUDA error: operation failed due to a previous error during capture"
done
if [ $failures -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo ok
