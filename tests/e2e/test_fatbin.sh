#!/usr/bin/env bash
# test_fatbin.sh: the validator images embedded in liblabelguard.so load on every driver a
# supported PyTorch runs on. Reads the fatbin container inside the library (no GPU needed):
# header magic 0xBA55ED50, then entries {u16 kind (1 PTX, 2 ELF), u16, u32 header size,
# u32 payload size, ..., u16 minor + u16 major version at +24, u32 sm at +28, u64 flags at +40
# (0x8000: compressed)}, and each cubin's ELF header (EI_ABIVERSION; with ABI 7, e_version is
# the CUDA release that assembled it, 120 for 12.0). Checks:
#   - SASS for every architecture in the Makefile's CUDA_ARCHS, PTX for the lowest;
#   - the PTX declares ISA <= 6.5 in the entry header and in its text, and is not compressed,
#     so that any driver since CUDA 10.2 can JIT it (CUDA 13's own PTX says 9.0: R580 only);
#   - every SASS image for sm_75..sm_90 has ELF ABI 7 and was assembled by CUDA <= 12.0, so a
#     CUDA 12.0 driver (R525, the oldest a CUDA 12 torch runs on) loads it (CUDA 13's: ABI 8);
#   - no image is compressed.
# Run by `make test` (tests/run.sh); `bash tests/e2e/test_fatbin.sh FILE` checks another file.
set -u
cd "$(dirname "$0")/../.."
build="${LG_BUILD:-build}"
file="${1:-$build/liblabelguard.so}"
[ -f "$file" ] || { echo "no $file: run make first"; exit 1; }
want="$(sed -n 's/^CUDA_ARCHS ?= *//p' Makefile)"
[ -n "$want" ] || { echo "cannot read CUDA_ARCHS from the Makefile"; exit 1; }
python3 - "$file" $want <<'PY'
import struct, sys
path, want = sys.argv[1], sorted(int(a) for a in sys.argv[2:])
data = open(path, "rb").read()
magic = struct.pack("<I", 0xBA55ED50)
elf, ptx, problems = {}, {}, []
pos = data.find(magic)
while pos >= 0:
    _, version, hsize, fsize = struct.unpack_from("<IHHQ", data, pos)
    off, end = pos + hsize, pos + hsize + fsize
    if version == 1 and hsize == 16 and end <= len(data):
        while off + 64 <= end:
            kind, _, ehs, payload = struct.unpack_from("<HHII", data, off)
            if kind not in (1, 2) or ehs < 64:
                break
            minor, major, sm = struct.unpack_from("<HHI", data, off + 24)
            flags = struct.unpack_from("<Q", data, off + 40)[0]
            body = data[off + ehs: off + ehs + payload]
            if flags & 0x8000:
                problems.append("%s sm_%d is compressed" % ("PTX" if kind == 1 else "SASS", sm))
            if kind == 1:
                text = body[:4096].decode("ascii", "replace")
                decl = [l.split()[1] for l in text.splitlines() if l.startswith(".version ")]
                ptx[sm] = ((major, minor), decl[0] if decl else None)
            else:
                abi = body[8] if body[:4] == b"\x7fELF" else None
                ever = struct.unpack_from("<I", body, 20)[0] if abi is not None else None
                elf[sm] = (abi, ever)
            off += ehs + payload
    pos = data.find(magic, pos + 4)
if not elf and not ptx:
    sys.exit("no fatbin found in %s" % path)
lowest = want[0]
for a in want:
    if a not in elf:
        problems.append("no SASS for sm_%d" % a)
if lowest not in ptx:
    problems.append("no PTX for compute_%d" % lowest)
for sm, (hdr, decl) in sorted(ptx.items()):
    if hdr > (6, 5) or decl is None or tuple(int(x) for x in decl.split(".")) > (6, 5):
        problems.append("PTX for compute_%d declares ISA %s (header %d.%d): drivers older than "
                        "that ISA's CUDA release cannot JIT it; want <= 6.5" % (sm, decl, hdr[0], hdr[1]))
for sm, (abi, ever) in sorted(elf.items()):
    if 75 <= sm <= 90 and sm != 88 and not (abi == 7 and ever is not None and ever <= 120):
        problems.append("SASS sm_%d: ELF ABI %s, e_version %s: not loadable by a CUDA 12.0 "
                        "driver (want ABI 7 from ptxas 12.0)" % (sm, abi, ever))
print("%s: SASS %s; PTX %s" % (path, " ".join("sm_%d(abi %s)" % (s, elf[s][0]) for s in sorted(elf)),
                                " ".join("compute_%d(ISA %s)" % (s, ptx[s][1]) for s in sorted(ptx))))
for p in problems:
    print("problem:", p)
sys.exit(1 if problems else 0)
PY
