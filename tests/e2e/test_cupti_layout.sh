#!/usr/bin/env bash
# test_cupti_layout.sh: the parameters a CUPTI subscriber finds in a launch callback, as
# src/hooks/cupti.c reads them. CUPTI 13's cupti_runtime_cbid.h gives nvcc 13's <<<>>> entry point
# __cudaLaunchKernel the ids 505 and 506 (_ptsz), and its generated_cuda_runtime_api_meta.h
# defines no params struct for them (checked against the toolkit's CUPTI 13.0 headers); src/hooks/cupti.c
# reads them as cudaLaunchKernel_v7000_params, the struct of cudaLaunchKernel (211, _ptsz 214),
# which shares __cudaLaunchKernel's prototype order. build/e2e/cupti_layout
# (tests/e2e/progs/cupti_layout.cu) subscribes to the CUPTI double and reads every launch
# callback through that header struct, for one launch of grid (3,5,7), block (32,2,1), 48 bytes
# of shared memory on a created stream, through <<<>>> and through cudaLaunchKernel, built
# plain and with --default-stream per-thread: each entry point must call back at enter and at
# exit with its own id (505, 211, 506, 214) and exactly those values. That a real CUPTI 13.x
# passes that struct for 505/506 only a GPU run can show (README, Limits).
# Called by tests/run.sh; alone: bash tests/e2e/test_cupti_layout.sh
. "$(dirname "$0")/lib.sh"
B="$LG_ROOT/$LG_BUILD/e2e"
need "$B/cupti_layout" "$B/cupti_layout_ptsz" "$LG_ROOT/$LG_BUILD/fakecupti/libcupti.so.13"
export LD_LIBRARY_PATH="$LG_FAKE_DIR:$LG_ROOT/$LG_BUILD/fakecupti"
want='grid=3,5,7 block=32,2,1 shm=48 stream=ok args=ok'
for c in "cupti_layout chevron 505" "cupti_layout legacy 211" "cupti_layout_ptsz chevron 506" "cupti_layout_ptsz legacy 214"; do
  read -r prog how id <<<"$c"
  n=$prog-$how
  FAKECUDA_CUPTI=1 "$B/$prog" "$how" >"$T/$n.out" 2>"$T/$n.err"
  echo $? >"$T/$n.rc"
  cat "$T/$n.out"
  check "$n: exit 0, the launch ran" grep -qx 'launch=0 sync=0' "$T/$n.out"
  check "$n: cbid $id at enter, with the launch's values in cudaLaunchKernel_v7000_params" \
    grep -qx "cb cbid=$id site=enter $want" "$T/$n.out"
  check "$n: cbid $id at exit, the same" grep -qx "cb cbid=$id site=exit $want" "$T/$n.out"
  check "$n: no other callback" [ "$(grep -c '^cb ' "$T/$n.out")" = 2 ]
done
finish
