#!/usr/bin/env bash
# cupti_layout.sh: on a GPU, the parameters the REAL libcupti passes in a launch callback, as
# src/hooks/cupti.c reads them (cudaLaunchKernel_v7000_params for __cudaLaunchKernel's ids 505/506,
# which CUPTI's headers list without a params struct of their own). The same programs and the
# same expected lines as tests/e2e/test_cupti_layout.sh, which runs them on the CUPTI double.
# Called by tests/gpu/run.sh:  cupti_layout.sh BUILD   (exit 0 pass, 1 fail, 77 no libcupti.so.13)
set -u
B="${1:-build}/e2e"
if [ ! -x "$B/cupti_layout" ] || [ ! -x "$B/cupti_layout_ptsz" ]; then echo "cupti_layout: $B/cupti_layout* not built"; exit 1; fi
dir=""
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda-13*/extras/CUPTI/lib64; do
  [ -e "$d/libcupti.so.13" ] && { dir=$d; break; }
done
if [ -z "$dir" ]; then
  dir=$("${PYTHON:-python3}" - <<'PY' 2>/dev/null
import glob, os, site
for sp in site.getsitepackages():
    for p in glob.glob(os.path.join(sp, "nvidia", "**", "libcupti.so.13"), recursive=True):
        print(os.path.dirname(p)); raise SystemExit
PY
)
fi
[ -n "$dir" ] || { echo "cupti_layout: no libcupti.so.13 found (CUDA toolkit or the nvidia-cuda-cupti wheel)"; exit 77; }
echo "cupti_layout: libcupti from $dir"
want='grid=3,5,7 block=32,2,1 shm=48 stream=ok args=ok'
fails=0
for c in "cupti_layout chevron 505" "cupti_layout legacy 211" "cupti_layout_ptsz chevron 506" "cupti_layout_ptsz legacy 214"; do
  read -r prog how id <<<"$c"
  out=$(LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$B/$prog" "$how" 2>&1)
  if grep -qx "cb cbid=$id site=enter $want" <<<"$out" && grep -qx "cb cbid=$id site=exit $want" <<<"$out" &&
     grep -qx 'launch=0 sync=0' <<<"$out"; then
    echo "PASS $prog $how: cbid $id carries the launch's values in cudaLaunchKernel_v7000_params"
  else
    echo "FAIL $prog $how (cbid $id):"; printf '%s\n' "$out" | head -n 12; fails=$((fails+1))
  fi
done
[ $fails -eq 0 ]
