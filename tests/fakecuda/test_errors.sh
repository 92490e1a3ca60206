#!/usr/bin/env bash
# Error semantics: cudaGetLastError returns and clears, cudaPeekAtLastError does not; failing
# calls set the last error; CUDA 13's own names and texts; device queries.
. "$(dirname "$0")/lib.sh"
for v in probe probe_legacy probe_ptsz; do
  fk_run $v errors
  expect_rc 0
  expect_line "initial get=0"
  expect_line "huge_malloc=2"
  expect_line "peek1=2 peek2=2"
  expect_line "get1=2 get2=0"
  expect_line "set_device_1=101 get=101"
  expect_line "bogus_stream_sync=400"
  expect_line "runtime_version=13000 driver_version=13000 device=0 count=1 name=\"NVIDIA H200\""
done
# <<<>>> reports a bad configuration through cudaGetLastError (which clears it); cudaLaunchKernel returns it.
fk_run probe errors; expect_line "bad_config=9 get=0"
fk_run probe_legacy errors; expect_line "bad_config=9 get=9"
expect_line 'error 0 cudaSuccess "no error"'
expect_line 'error 1 cudaErrorInvalidValue "invalid argument"'
expect_line 'error 2 cudaErrorMemoryAllocation "out of memory"'
expect_line 'error 17 cudaErrorInvalidDevicePointer "invalid device pointer"'
expect_line 'error 35 cudaErrorInsufficientDriver "CUDA driver version is insufficient for CUDA runtime version"'
expect_line 'error 98 cudaErrorInvalidDeviceFunction "invalid device function"'
expect_line 'error 100 cudaErrorNoDevice "no CUDA-capable device is detected"'
expect_line 'error 400 cudaErrorInvalidResourceHandle "invalid resource handle"'
expect_line 'error 600 cudaErrorNotReady "device not ready"'
expect_line 'error 700 cudaErrorIllegalAddress "an illegal memory access was encountered"'
expect_line 'error 710 cudaErrorAssert "device-side assert triggered"'
expect_line 'error 719 cudaErrorLaunchFailure "unspecified launch failure"'
expect_line 'error 800 cudaErrorNotPermitted "operation not permitted"'
expect_line 'error 801 cudaErrorNotSupported "operation not supported"'
expect_line 'error 900 cudaErrorStreamCaptureUnsupported "operation not permitted when stream is capturing"'
expect_line 'error 12345 unrecognized error code "unrecognized error code"'
finish
