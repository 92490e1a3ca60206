"""labelguard._audit_elf: the device code of one shared library, for labelguard.torch_audit: a
minimal ELF64 reader (sections by name, dynamic imports with their version nodes), the fatbins of
its .nv_fatbin section, and in each cubin the parameter records (EIATTR_KPARAM_INFO of
.nv.info.<kernel>) of the kernels it records: which ones, and under which family, is classify's.

Used by labelguard.torch_audit.audit (read_library, classify, LOSS_FAMILIES). Tested by
tests/cli/test_audit.sh (an nvcc-built library, a torch directory, a wheel) and, through the
tables it writes, by tests/unit/test_wheels.c.
"""
import mmap
import re
import struct

from labelguard._audit_common import AuditError

# Which kernels are recorded, and under which family. Loss families are what the spec table
# must cover; the gather-style ones are recorded as facts for the index-kernel guard.
LOSS_FAMILIES = ("nll_loss", "nll_loss2d", "cross_entropy", "multi_margin_loss", "multilabel_margin_loss")
KEYWORDS = (b"nll_loss", b"NLLCriterion", b"ClassNLL", b"cross_entropy", b"vectorized_gather_kernel",
            b"indexSelectLargeIndex", b"indexSelectSmallIndex", b"mbedding", b"_scatter_gather_elementwise_kernel",
            b"indexFuncSmallIndex", b"indexFuncLargeIndex", b"index_elementwise_kernel", b"MultiMarginLoss_",
            b"multilabel_margin_loss")

# Runtime entry points that launch or register kernels (undefined dynamic symbols).
ENTRY_RE = re.compile(r"^(__cudaLaunchKernel\w*|cudaLaunchKernel\w*|cudaLaunchCooperativeKernel\w*|"
                      r"__cudaRegisterFunction|__cudaRegisterFatBinary\w*|__cudaUnregisterFatBinary|"
                      r"__cudaGetKernel|__cudaPushCallConfiguration|__cudaPopCallConfiguration|"
                      r"cudaGraphLaunch\w*|cudaGetFuncBySymbol|cudaFuncGetParamInfo|cudaGetKernel|"
                      r"cuLaunchKernel\w*|cudaLaunch)$")

EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
FATBIN_MAGIC = 0xBA55ED50
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def classify(sym):
    """Family of a mangled kernel name, or None when the kernel is not recorded."""
    if "NLLCriterion" in sym or "ClassNLL" in sym:
        return "nll_loss2d" if "Spatial" in sym else "nll_loss"
    if "nll_loss2d" in sym:
        return "nll_loss2d"
    if "nll_loss" in sym:
        return "nll_loss"
    if "MultiMarginLoss_" in sym:
        return "multi_margin_loss"  # class-index targets asserted in [0, dim)
    if "multilabel_margin_loss" in sym:
        return "multilabel_margin_loss"  # per-row class lists ended by -1
    if "binary_cross_entropy" in sym:
        return "binary_cross_entropy"  # TensorIterator lambdas; the forward's probability range is checked
    if "cross_entropy" in sym:
        return "cross_entropy"
    if "vectorized_gather_kernel" in sym:
        return "gather"
    if "_scatter_gather_elementwise_kernel" in sym:
        return "scatter_gather"
    if "index_elementwise_kernel" in sym:
        return "index_elementwise"
    if "indexSelectLargeIndex" in sym or "indexSelectSmallIndex" in sym:
        return "index_select"
    if "indexFuncSmallIndex" in sym or "indexFuncLargeIndex" in sym:
        return "index_add"  # index_add_ / index_reduce_ (TensorInfo ids, like index_select)
    low = sym.lower()
    if "embeddingbag" in low or "embedding_bag" in low:
        return "embedding_bag"
    if "embedding" in low:
        return "embedding"
    return None


# ---- ELF -------------------------------------------------------------------------------------

class Elf:
    """Minimal ELF64 little-endian reader: sections by name, dynamic imports with versions."""

    def __init__(self, data, what):
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise AuditError("%s: not an ELF file" % what)
        if data[4] != 2 or data[5] != 1:
            raise AuditError("%s: not a 64-bit little-endian ELF file" % what)
        self.d = data
        self.what = what
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = []
        for i in range(shnum):
            name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", data, shoff + i * shentsize)
            self.sections.append([name, typ, off, size, link, entsize])
        stro = self.sections[shstrndx][2] if shnum else 0
        for s in self.sections:
            s[0] = self._cstr(stro + s[0])

    def _cstr(self, off):
        end = self.d.find(b"\0", off)
        return bytes(self.d[off:end]).decode("utf-8", "replace")

    def section(self, name):
        for s in self.sections:
            if s[0] == name:
                return s
        return None

    def bytes_of(self, s):
        return self.d[s[2]:s[2] + s[3]]

    def imports(self):
        """Undefined dynamic symbols: list of (name, version node or '', soname or '')."""
        dynsym = next((s for s in self.sections if s[1] == 11), None)
        if dynsym is None:
            return []
        strtab = self.sections[dynsym[4]][2]
        versym = next((s for s in self.sections if s[1] == 0x6FFFFFFF), None)
        verneed = next((s for s in self.sections if s[1] == 0x6FFFFFFE), None)
        vmap = {}
        if verneed is not None:
            vstr = self.sections[verneed[4]][2]
            off = verneed[2]
            while True:
                vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", self.d, off)
                soname = self._cstr(vstr + vn_file)
                a = off + vn_aux
                for _ in range(vn_cnt):
                    vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack_from("<IHHII", self.d, a)
                    vmap[vna_other] = (self._cstr(vstr + vna_name), soname)
                    a += vna_next
                if not vn_next:
                    break
                off += vn_next
        out = []
        n = dynsym[3] // 24
        for i in range(1, n):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", self.d, dynsym[2] + i * 24)
            if st_shndx != 0:
                continue
            name = self._cstr(strtab + st_name)
            ver, so = "", ""
            if versym is not None:
                v, = struct.unpack_from("<H", self.d, versym[2] + i * 2)
                ver, so = vmap.get(v & 0x7FFF, ("", ""))
            out.append((name, ver, so))
        return out

    def needed(self):
        dyn = next((s for s in self.sections if s[1] == 6), None)
        if dyn is None:
            return []
        strtab = self.sections[dyn[4]][2]
        out = []
        for off in range(dyn[2], dyn[2] + dyn[3], 16):
            tag, val = struct.unpack_from("<qQ", self.d, off)
            if tag == 0:
                break
            if tag == 1:
                out.append(self._cstr(strtab + val))
        return out

    def defines(self, name):
        dynsym = next((s for s in self.sections if s[1] == 11), None)
        if dynsym is None:
            return False
        strtab = self.sections[dynsym[4]][2]
        want = name.encode()
        for i in range(1, dynsym[3] // 24):
            st_name, _, _, st_shndx = struct.unpack_from("<IBBH", self.d, dynsym[2] + i * 24)
            if st_shndx != 0 and self.d[strtab + st_name:strtab + st_name + len(want) + 1] == want + b"\0":
                return True
        return False


def parse_nv_info(buf):
    """EIATTR records of one .nv.info.<kernel> section: returns (params, cbank_param_size) where
    params is a list of (ordinal, offset, size), sorted by ordinal."""
    params, cbank = [], None
    i, n = 0, len(buf)
    while i + 4 <= n:
        fmt, attr = buf[i], buf[i + 1]
        if fmt == 0x04:  # EIFMT_SVAL: u16 length, then the value
            ln, = struct.unpack_from("<H", buf, i + 2)
            val = buf[i + 4:i + 4 + ln]
            if attr == EIATTR_KPARAM_INFO and ln >= 12:
                _index, ordinal, offset, flags = struct.unpack_from("<IHHI", val, 0)
                params.append((ordinal, offset, (flags >> 18) & 0x3FFF))
            i += 4 + ln
        elif fmt in (0x01, 0x02, 0x03):  # NVAL / BVAL / HVAL: 4 bytes in all
            if attr == EIATTR_CBANK_PARAM_SIZE:
                cbank, = struct.unpack_from("<H", buf, i + 2)
            i += 4
        else:
            raise ValueError("unknown EIFMT 0x%x at %d" % (fmt, i))
    params.sort()
    return params, cbank


def cubin_kernels(cubin):
    """(mangled name, [(ordinal, offset, size)], cbank size) of each recorded kernel in a cubin."""
    if not any(k in cubin for k in KEYWORDS):
        return []
    elf = Elf(cubin, "cubin")
    out = []
    for s in elf.sections:
        if not s[0].startswith(".nv.info."):
            continue
        sym = s[0][len(".nv.info."):]
        if classify(sym) is None:
            continue
        params, cbank = parse_nv_info(elf.bytes_of(s))
        out.append((sym, params, cbank))
    return out


def fatbin_entries(data, off, end):
    """Yields (sm, kind, flags, payload memoryview, uncompressed size) for every entry of the
    fatbins in data[off:end]."""
    while off + 16 <= end:
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            off += 8  # fatbins are 8-aligned; skip padding between them
            continue
        p, e = off + hsize, off + hsize + fsize
        while p + 64 <= e:
            kind, _ev, ehs, padded = struct.unpack_from("<HHIQ", data, p)
            payload, = struct.unpack_from("<I", data, p + 16)
            sm, = struct.unpack_from("<I", data, p + 28)
            flags, = struct.unpack_from("<Q", data, p + 40)
            unc, = struct.unpack_from("<Q", data, p + 56)
            if ehs == 0 or padded == 0:
                break
            body = data[p + ehs:p + ehs + (payload or padded)]
            yield sm, kind, flags, body, unc
            p += ehs + padded
        off = e


def read_library(path, dec, progress=None):
    """Kernels and imports of one shared library. Returns a dict with 'kernels' (symbol ->
    {'params', 'cbank', 'archs'}), 'imports', 'needed', 'cubins', 'mismatch' (archs whose
    layout differed), or None when the library carries no device code."""
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            raise AuditError("%s: empty file" % path)
    try:
        elf = Elf(data, path)
        result = {"imports": [i for i in elf.imports() if ENTRY_RE.match(i[0])],
                  "needed": elf.needed(),
                  "static_cudart": elf.defines("cudaLaunchKernel"),
                  "kernels": {}, "cubins": 0, "mismatch": []}
        fb = elf.section(".nv_fatbin")
        if fb is None:
            return None if not result["imports"] else result
        for sm, kind, flags, body, unc in fatbin_entries(data, fb[2], fb[2] + fb[3]):
            if kind != 2:  # PTX text: no parameter metadata to read
                continue
            if bytes(body[:4]) == ZSTD_MAGIC:
                cubin = dec.zstd(bytes(body), unc)
            elif flags & 0x2000:
                cubin = dec.lz4(bytes(body), unc)
            else:
                cubin = bytes(body)
            result["cubins"] += 1
            for sym, params, cbank in cubin_kernels(cubin):
                k = result["kernels"].get(sym)
                if k is None:
                    result["kernels"][sym] = {"params": params, "cbank": cbank, "archs": {sm}}
                else:
                    if k["params"] != params:
                        result["mismatch"].append((sym, sm))
                    k["archs"].add(sm)
            if progress:
                progress(result["cubins"])
        return result
    finally:
        data.close()
