#!/usr/bin/env bash
# check_fatbin_archs.sh: checks that the validator fatbin (alone, or embedded in the library)
# holds SASS for every architecture in the Makefile's CUDA_ARCHS and PTX for the lowest one, so
# any newer GPU can JIT it. Needs no GPU.
#   usage: tests/gpu/check_fatbin_archs.sh [FILE]   (default: $LG_BUILD/liblabelguard.so, else
#          $LG_BUILD/validate.fatbin; LG_BUILD defaults to build)
# Uses `cuobjdump --list-elf/--list-ptx` on a bare fatbin when the toolkit has it; otherwise (and
# for the library, where the fatbin sits in .rodata, which cuobjdump does not search) it walks
# the fatbin container itself: header magic 0xBA55ED50, then entries {u16 kind (1 PTX, 2 ELF),
# u16 version, u32 header size, u32 padded payload size, ..., u32 sm at +28}.
# Exit 0 all present, 1 something missing, 77 nothing built yet.
set -u
cd "$(dirname "$0")/../.."
build="${LG_BUILD:-build}"
file="${1:-}"
if [ -z "$file" ]; then
  if [ -f "$build/liblabelguard.so" ]; then file="$build/liblabelguard.so"; else file="$build/validate.fatbin"; fi
fi
[ -f "$file" ] || { echo "no $file: run make first"; exit 77; }
want="${LG_CUDA_ARCHS:-$(sed -n 's/^CUDA_ARCHS ?= *//p' Makefile)}"
[ -n "$want" ] || { echo "cannot read CUDA_ARCHS from the Makefile"; exit 1; }
lowest=$(printf '%s\n' $want | sort -n | head -n1)
cuobjdump="${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump"

if [ -x "$cuobjdump" ] && [ "${file##*.}" = fatbin ]; then
  elf=$("$cuobjdump" --list-elf "$file" 2>&1 | sed -n 's/.*sm_\([0-9]*\).*/\1/p' | sort -un)
  ptx=$("$cuobjdump" --list-ptx "$file" 2>&1 | sed -n 's/.*sm_\([0-9]*\).*/\1/p' | sort -un)
else
  listing=$(python3 - "$file" <<'EOF'
import struct, sys
data = open(sys.argv[1], 'rb').read()
magic = struct.pack('<I', 0xBA55ED50)
pos = data.find(magic)
found = False
while pos >= 0:
    _, version, hsize, fsize = struct.unpack_from('<IHHQ', data, pos)
    off, end = pos + hsize, pos + hsize + fsize
    if version == 1 and hsize == 16 and end <= len(data):
        while off + 32 <= end:
            kind, _, ehs, payload = struct.unpack_from('<HHII', data, off)
            sm = struct.unpack_from('<I', data, off + 28)[0]
            if kind not in (1, 2) or ehs < 32:
                break
            print(('ptx' if kind == 1 else 'elf'), sm)
            found = True
            off += ehs + payload
    pos = data.find(magic, pos + 4)
if not found:
    sys.exit('no fatbin found in ' + sys.argv[1])
EOF
) || { echo "$listing"; exit 1; }
  elf=$(printf '%s\n' "$listing" | awk '$1=="elf"{print $2}' | sort -un)
  ptx=$(printf '%s\n' "$listing" | awk '$1=="ptx"{print $2}' | sort -un)
fi

missing=()
for a in $want; do
  printf '%s\n' $elf | grep -qx "$a" || missing+=("sm_$a")
done
printf '%s\n' $ptx | grep -qx "$lowest" || missing+=("compute_$lowest (PTX)")
echo "$file: SASS for $(printf 'sm_%s ' $elf); PTX for $(printf 'compute_%s ' $ptx)"
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}"
  exit 1
fi
echo "all $(echo $want | wc -w) architectures and PTX present"
