"""labelguard.torch_audit: reads the loss and gather kernels out of a real PyTorch build.

Given a torch wheel, an installed torch (a Python interpreter that imports it, or the torch
package directory), or a single shared library, it finds the libraries under torch/lib that
carry device code (libtorch_cuda.so, and the split libtorch_cuda_cu.so of older releases),
opens each one's .nv_fatbin section, decompresses every cubin (LZ4 or zstd, the compression
nvcc uses for wheels), and for every kernel whose mangled name names an NLL / cross-entropy
loss or a gather-style kernel, reads its parameter list from the cubin's own metadata: the
EIATTR_KPARAM_INFO records of its .nv.info.<kernel> section (ordinal, offset, size of each
parameter). It also lists the CUDA runtime entry points each library imports for launching
and registering kernels, with the version node and soname they bind to.

This is the source of truth for the tables under tests/wheels/ (shipped in the wheel as
labelguard/data/wheels/, found through _lib.data_path), which tests/unit/test_wheels.c checks
against the built-in spec table (specs/pytorch.conf). Callers: labelguard/commands/audit.py
(`labelguard audit`), labelguard/commands/doctor.py (`labelguard doctor`), and a person
regenerating the tables, from a checkout (M = PYTHONPATH=python python3 -m labelguard.torch_audit):

    M WHEEL|PYTHON|TORCH_DIR|LIB.so        print the kernels found
    M --write-table WHEEL [--out DIR]      write DIR/<version>+cu<NNN>.tsv (default tests/wheels)
    M --all [--versions 2.0.1,2.9.1]       download each release (pip download --no-deps into
        a temporary folder), write its table, delete the wheel
    M --tsv PYTHON                         the table on stdout
    M --coverage WHEEL|PYTHON|TABLE.tsv    which loss kernels the spec table covers (what
        `labelguard audit` prints); the answer comes from the library's own registry through
        its labelguard_coverage() (labelguard._coverage, in a child process; or $LG_SPECMATCH),
        never from a second matcher here

Nothing is kept from a wheel but the table. Decompression uses liblz4 / libzstd through ctypes
when the system has them; otherwise the `lz4` / `zstandard` packages are installed with pip into
${XDG_CACHE_HOME:-~/.cache}/labelguard/py (never into the checkout or the package). Demangling
uses c++filt (binutils) when present. Tested by tests/cli/test_audit.sh (bad inputs; an nvcc-built library
read as a library, a torch directory and a wheel; an installed torch) and, through the tables
it writes, by tests/unit/test_wheels.c.

Exit status: 0 ok, 1 (--coverage) some loss kernel is not covered, 2 bad input or missing tool
(the message says what to do).
"""
import argparse
import ctypes
import ctypes.util
import glob
import hashlib
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

from labelguard import _lib

READER_VERSION = "1"

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


class AuditError(Exception):
    """A user-facing problem: printed as one line with a hint, exit status 2."""


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "labelguard")


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


# ---- decompression -------------------------------------------------------------------------

class Decompressor:
    """LZ4 (raw block) and zstd (frame) decompression with a known output size.

    ctypes on the system libraries first (fast, nothing to install), then the pip packages
    installed into the cache, then, for LZ4 only, a pure-Python decoder."""

    def __init__(self):
        self._lz4 = self._zstd = None
        self._py_lz4 = self._py_zstd = None
        self._tried_pip = set()
        for name, attr in (("lz4", "_lz4"), ("zstd", "_zstd")):
            path = ctypes.util.find_library(name)
            for cand in ([path] if path else []) + ["lib%s.so.1" % name]:
                try:
                    setattr(self, attr, ctypes.CDLL(cand))
                    break
                except OSError:
                    continue

    def _pip(self, module, package):
        target = os.path.join(cache_dir(), "py")
        if target not in sys.path:
            sys.path.insert(0, target)
        try:
            return __import__(module)
        except ImportError:
            pass
        if package in self._tried_pip:
            return None
        self._tried_pip.add(package)
        print("lg_audit: installing %s into %s (no system lib%s)" % (package, target, module), file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", target, package],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return None
        try:
            return __import__(module)
        except ImportError:
            return None

    def zstd(self, src, size):
        if self._zstd is not None:
            dst = ctypes.create_string_buffer(size)
            n = self._zstd.ZSTD_decompress(dst, ctypes.c_size_t(size), src, ctypes.c_size_t(len(src)))
            if self._zstd.ZSTD_isError(ctypes.c_size_t(n)):
                raise ValueError("zstd: corrupt payload")
            return dst.raw[:n]
        mod = self._py_zstd or self._pip("zstandard", "zstandard")
        if mod is None:
            raise AuditError("this wheel's device code is zstd-compressed and neither libzstd nor the zstandard "
                             "package is available\n---> HINT: apt-get install libzstd1, or pip install zstandard")
        self._py_zstd = mod
        return mod.ZstdDecompressor().decompress(bytes(src), max_output_size=size)

    def lz4(self, src, size):
        if self._lz4 is not None:
            dst = ctypes.create_string_buffer(size)
            n = self._lz4.LZ4_decompress_safe(src, dst, ctypes.c_int(len(src)), ctypes.c_int(size))
            if n < 0:
                raise ValueError("lz4: corrupt payload")
            return dst.raw[:n]
        mod = self._py_lz4 or self._pip("lz4.block", "lz4")
        if mod is not None:
            self._py_lz4 = mod
            import lz4.block  # noqa: F401  (installed above)
            return lz4.block.decompress(bytes(src), uncompressed_size=size)
        return lz4_block_py(bytes(src), size)


def lz4_block_py(src, size):
    """Pure-Python LZ4 raw block decoder (slow; the last resort)."""
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        tok = src[i]
        i += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= n:
            break
        off = src[i] | (src[i + 1] << 8)
        i += 2
        ml = tok & 15
        if ml == 15:
            while True:
                b = src[i]
                i += 1
                ml += b
                if b != 255:
                    break
        ml += 4
        start = len(out) - off
        if off >= ml:
            out += out[start:start + ml]
        else:
            for k in range(ml):
                out.append(out[start + k])
    return bytes(out[:size])


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


# ---- demangling -------------------------------------------------------------------------

def demangle(symbols):
    syms = list(symbols)
    tool = shutil.which("c++filt")
    if not tool or not syms:
        return {s: "" for s in syms}
    r = subprocess.run([tool], input="\n".join(syms) + "\n", capture_output=True, text=True)
    lines = r.stdout.split("\n")
    return {s: (lines[i] if i < len(lines) and lines[i] != s else "") for i, s in enumerate(syms)}


# ---- inputs ----------------------------------------------------------------------------------

def cuda_tag_from_metadata(text):
    """The CUDA build a wheel's dependencies pin: '130' for cuda-toolkit==13.0.2, '128' for
    nvidia-cuda-runtime-cu12==12.8.90, ''' when nothing CUDA is pinned."""
    m = re.search(r"^Requires-Dist: cuda-toolkit\[[^\]]*\]\s*\(?==\s*(\d+)\.(\d+)", text, re.M) or \
        re.search(r"^Requires-Dist: nvidia-cuda-runtime(?:-cu\d+)?\s*\(?==\s*(\d+)\.(\d+)", text, re.M) or \
        re.search(r"^Requires-Dist: cuda-toolkit\s*\(?==\s*(\d+)\.(\d+)", text, re.M)
    return "%s%s" % (m.group(1), m.group(2)) if m else ""


def version_py(text):
    v = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    c = re.search(r"^cuda\s*(?::\s*\w+(?:\[\w+\])?)?\s*=\s*['\"]([^'\"]+)", text, re.M)
    return (v.group(1) if v else ""), (c.group(1) if c else "")


def magic(path):
    try:
        with open(path, "rb") as f:
            return f.read(4)
    except OSError:
        return b""


class Source:
    """Where the libraries come from: a wheel (members extracted one at a time into a temp
    dir), a torch package directory, or one library file."""

    def __init__(self, arg):
        self.arg = arg
        self.kind = None
        self.tmp = None
        self.version = self.cuda = self.cuda_tag = ""
        self.wheel_name = self.sha256 = ""
        if not os.path.exists(arg) and shutil.which(arg) is None:
            raise AuditError("%s: no such file, directory or command\n---> HINT: give a torch wheel (.whl), a "
                             "python that imports torch, a torch package directory or a libtorch_cuda.so" % arg)
        if os.path.isdir(arg):
            self._torch_dir(arg)
        elif arg.endswith(".whl") or (os.path.isfile(arg) and zipfile.is_zipfile(arg)):
            self._wheel(arg)
        elif os.path.isfile(arg) and magic(arg) == b"\x7fELF" and ".so" in os.path.basename(arg):
            self.kind = "lib"
            self.libs = [arg]
        elif os.path.isfile(arg) and not os.access(arg, os.X_OK):
            raise AuditError("%s: not a torch wheel, Python interpreter, torch package directory or shared "
                             "library" % arg)
        else:
            self._python(shutil.which(arg) or arg)

    def _wheel(self, path):
        if not zipfile.is_zipfile(path):
            raise AuditError("%s: not a wheel (not a zip archive)" % path)
        self.kind = "wheel"
        self.wheel_name = os.path.basename(path)
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        self.sha256 = h.hexdigest()
        self.zip = zipfile.ZipFile(path)
        names = self.zip.namelist()
        meta = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if meta:
            self.cuda_tag = cuda_tag_from_metadata(self.zip.read(meta).decode("utf-8", "replace"))
        if "torch/version.py" in names:
            self.version, self.cuda = version_py(self.zip.read("torch/version.py").decode("utf-8", "replace"))
        self.members = [n for n in names if re.match(r"torch/lib/lib[^/]*\.so[.0-9]*$", n)
                        and not re.match(r"torch/lib/lib(torch_cpu|torch_python|gomp|shm|c10)\.so", n)]
        if not any("cuda" in n for n in self.members):
            raise AuditError("%s: a wheel without CUDA libraries (no torch/lib/libtorch_cuda*.so); is it a CPU or "
                             "non-torch wheel?" % path)

    def _torch_dir(self, d):
        if os.path.isdir(os.path.join(d, "torch", "lib")):
            d = os.path.join(d, "torch")
        lib = os.path.join(d, "lib")
        if not os.path.isdir(lib):
            raise AuditError("%s: not a torch package directory (no lib/)" % d)
        self.kind = "dir"
        vp = os.path.join(d, "version.py")
        if os.path.exists(vp):
            self.version, self.cuda = version_py(open(vp, encoding="utf-8", errors="replace").read())
        # an installed wheel keeps its METADATA next to the package: the same CUDA tag as the wheel's
        base = self.version.split("+")[0]
        for meta in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(d)), "torch-%s*.dist-info" % base,
                                                  "METADATA"))):
            self.cuda_tag = cuda_tag_from_metadata(open(meta, encoding="utf-8", errors="replace").read())
            break
        self.libs = sorted(os.path.join(lib, n) for n in os.listdir(lib)
                           if re.match(r"lib.*cuda.*\.so[.0-9]*$", n) and not os.path.islink(os.path.join(lib, n)))
        if not self.libs:
            raise AuditError("%s: a torch without CUDA libraries (no lib/libtorch_cuda*.so): a CPU build?" % d)

    def _python(self, py):
        code = ("import importlib.util,sys\n"
                "s=importlib.util.find_spec('torch')\n"
                "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n")
        try:
            r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120)
        except OSError as e:
            raise AuditError("%s: cannot run it as a Python interpreter (%s)" % (py, e.strerror))
        except subprocess.TimeoutExpired:
            raise AuditError("%s: did not answer within 120 s" % py)
        d = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
        if not d:
            raise AuditError("%s: not a Python interpreter that can import torch\n---> HINT: pip install torch, or "
                             "give the wheel file" % py)
        self._torch_dir(d)
        self.kind = "python"

    def build_name(self):
        """<version>+cu<NNN>: the version without its local tag, and the CUDA build."""
        base = self.version.split("+")[0]
        tag = self.cuda_tag or (self.cuda.replace(".", "")[:3] if self.cuda else "")
        if not tag:
            m = re.search(r"\+cu(\d+)", self.version)
            tag = m.group(1) if m else ""
        return "%s+cu%s" % (base, tag) if base and tag else (base or "unknown")

    def each_lib(self):
        """Yields (lib name, path); a wheel's members are extracted one at a time and deleted."""
        if self.kind != "wheel":
            for p in self.libs:
                yield os.path.basename(p), p
            return
        self.tmp = tempfile.mkdtemp(prefix="lg_audit.")
        try:
            for m in self.members:
                out = os.path.join(self.tmp, os.path.basename(m))
                with self.zip.open(m) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
                try:
                    yield os.path.basename(m), out
                finally:
                    os.unlink(out)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def audit(src, quiet=False):
    """Reads every library of a Source. Returns (rows, entries, notes)."""
    dec = Decompressor()
    rows, entries, notes = [], [], []
    for name, path in src.each_lib():
        if not quiet:
            print("lg_audit: reading %s" % name, file=sys.stderr)
        try:
            res = read_library(path, dec)
        except (ValueError, IndexError, struct.error) as e:
            raise AuditError("%s: unreadable ELF or device code (%s): a truncated file, or a fatbin format newer "
                             "than this reader (version %s)" % (name, str(e)[:120], READER_VERSION))
        if res is None:
            continue
        for sym, ver, so in res["imports"]:
            entries.append((name, sym, ver, so))
        if res["static_cudart"]:
            notes.append("%s defines cudaLaunchKernel itself (static cudart)" % name)
        if not res["kernels"]:
            continue
        notes.append("%s: %d cubins read" % (name, res["cubins"]))
        for sym, sm in res["mismatch"]:
            notes.append("%s: %s: parameter layout differs on sm_%d" % (name, sym, sm))
        dm = demangle(res["kernels"])
        for sym in sorted(res["kernels"]):
            k = res["kernels"][sym]
            rows.append({"family": classify(sym), "lib": name, "symbol": sym, "demangled": dm.get(sym, ""),
                         "n_params": len(k["params"]), "param_sizes": ",".join(str(p[2]) for p in k["params"]),
                         "param_offsets": ",".join(str(p[1]) for p in k["params"]),
                         "cbank": "" if k["cbank"] is None else str(k["cbank"]),
                         "archs": ",".join("sm_%d" % a for a in sorted(k["archs"]))})
    rows.sort(key=lambda r: (r["family"] not in LOSS_FAMILIES, r["family"], r["lib"], r["symbol"]))
    return rows, entries, notes


COLUMNS = ("family", "lib", "symbol", "demangled", "n_params", "param_sizes", "param_offsets", "archs")


def table_text(src, rows, entries, notes):
    out = ["# labelguard wheel audit table: the loss and gather-style kernels of one PyTorch build, read from",
           "# its cubins' .nv.info EIATTR_KPARAM_INFO records (sizes and offsets in bytes, in parameter order).",
           "# Regenerate: PYTHONPATH=python python3 -m labelguard.torch_audit --write-table WHEEL (or --all).",
           "# Checked by tests/unit/test_wheels.c.",
           "# build: %s" % src.build_name(),
           "# torch: %s (torch.version.cuda %s)" % (src.version or "?", src.cuda or "?")]
    if src.kind == "wheel":
        out += ["# wheel: %s" % src.wheel_name, "# sha256: %s" % src.sha256]
    else:
        out += ["# source: %s" % src.arg]
    out.append("# reader: lg_audit.py %s" % READER_VERSION)   # the format tag the committed tables carry
    for n in notes:
        out.append("# note: %s" % n)
    out.append("# entry: lib, imported symbol, version node, soname (launch and registration entry points)")
    for e in sorted(set(entries)):
        out.append("# entry\t%s" % "\t".join(e))
    out.append("\t".join(COLUMNS))
    for r in rows:
        out.append("\t".join(str(r[c]) for c in COLUMNS))
    return "\n".join(out) + "\n"


def print_rows(src, rows, entries, notes):
    loss = [r for r in rows if r["family"] in LOSS_FAMILIES]
    print("torch %s: %d loss kernels, %d gather-style kernels" % (src.build_name(), len(loss), len(rows) - len(loss)))
    for r in rows:
        print("%-14s %-3d %-40s %s" % (r["family"], r["n_params"], r["param_sizes"], r["demangled"] or r["symbol"]))
    for e in sorted(set(entries)):
        print("entry  %-22s %-28s %-16s %s" % e)
    for n in notes:
        print("note   %s" % n)


# ---- --all -----------------------------------------------------------------------------------

DEFAULT_RELEASES = ("1.13.1,2.0.1,2.1.2,2.2.2,2.3.1,2.4.1,2.5.1,2.6.0,2.7.1,2.8.0,2.9.1,2.10.0,2.11.0,2.12.1,"
                    "2.13.0,2.14.1,2.15.0")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


def download(version, dest):
    """pip download --no-deps one torch release's Linux x86-64 wheel; returns its path."""
    for py in ("3.11", "3.12", "3.13", "3.10"):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "torch==%s" % version,
               "--python-version", py, "--only-binary=:all:", "-d", dest]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        whl = [f for f in os.listdir(dest) if f.endswith(".whl")]
        if r.returncode == 0 and whl:
            return os.path.join(dest, whl[0])
    raise AuditError("torch==%s: pip download found no Linux x86-64 wheel (%s)" %
                     (version, (r.stderr.strip().splitlines() or ["?"])[-1]))


def write_table(src, out_dir, quiet=False):
    rows, entries, notes = audit(src, quiet)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, src.build_name() + ".tsv")
    with open(path, "w") as f:
        f.write(table_text(src, rows, entries, notes))
    loss = sum(r["family"] in LOSS_FAMILIES for r in rows)
    print("%s: %d loss kernels, %d gather-style kernels, %d entry points" % (path, loss, len(rows) - loss,
                                                                              len(set(entries))))
    return path


# ---- coverage (labelguard audit / doctor) -----------------------------------------------------

def shown(path):
    """A data file's path as messages show it: relative to the checkout (tests/wheels/X.tsv)
    when it lies in one, else as it is (inside the installed package)."""
    root = _lib.checkout_root()
    if root and os.path.abspath(path).startswith(os.path.join(root, "")):
        return os.path.relpath(path, root)
    return path


def coverage_tool():
    """$LG_SPECMATCH: a program with test_wheels' --coverage interface that answers instead of
    the library (a sanitizer build's build-address/tests/unit/test_wheels, whose library cannot
    be loaded into a plain interpreter). None when unset; "" when set but not executable."""
    env = os.environ.get("LG_SPECMATCH")
    if not env:
        return None
    return env if os.access(env, os.X_OK) else ""


def _hinted(msg):
    """A message of _lib's or the library's ("...\nhint: ...") in AuditError's form."""
    head, _, hint = msg.strip().partition("\nhint: ")
    return "%s\n---> HINT: %s" % (head, hint) if hint else head


def coverage_env(lib):
    """The coverage child's whole environment: the library to load and how to import us, plus
    the user's LABELGUARD_KERNELS (their specs count, as in a guarded run). Nothing else: no
    LD_PRELOAD (a CUDA double, a sanitizer, the library itself), no other LABELGUARD_* value
    for the constructor to refuse, no PYTHON* of the user's."""
    env = {"LABELGUARD_LIB": lib, "PYTHONPATH": os.path.dirname(_lib.package_dir())}
    if "LABELGUARD_KERNELS" in os.environ:
        env["LABELGUARD_KERNELS"] = os.environ["LABELGUARD_KERNELS"]
    return env


def find_table(build):
    if not build or "/" in build or build.startswith("."):
        return None   # a build name read from a wheel is a file name here, never a path
    p = _lib.data_path("wheels/%s.tsv" % build)
    return p if os.path.isfile(p) else None


def run_coverage(table, quiet=False):
    """The registry's verdict on one table: labelguard_coverage() of the library the guard would
    preload (_lib.library_path()), called by labelguard._coverage in a child process, or
    $LG_SPECMATCH. Returns (exit code, output lines); raises AuditError for status 2."""
    gaps = _lib.data_path("wheels/known-gaps.tsv")
    gaps = gaps if os.path.isfile(gaps) else ""
    tool = coverage_tool()
    if tool == "":
        raise AuditError("LG_SPECMATCH=%s: not an executable program\n---> HINT: unset LG_SPECMATCH to use the "
                         "library's own coverage check" % os.environ["LG_SPECMATCH"])
    if tool:
        cmd = [tool, "--coverage", table] + (["--known-gaps", gaps] if gaps else []) + (["--quiet"] if quiet else [])
        env = None
    else:
        try:
            lib = _lib.library_path()
        except _lib.LibraryNotFound as e:
            raise AuditError("the coverage check needs the library, whose registry gives the verdict: %s"
                             % _hinted(str(e)))
        cmd = [sys.executable, "-m", "labelguard._coverage", table, gaps, "1" if quiet else "0"]
        env = coverage_env(lib)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode not in (0, 1):
        raise AuditError("coverage check failed: %s" % (_hinted(r.stderr) or "exit %d" % r.returncode))
    if r.stderr:
        sys.stderr.write(r.stderr)  # warnings: a LABELGUARD_KERNELS file that was skipped
    return r.returncode, r.stdout.rstrip("\n").split("\n")


def table_entries(table):
    """Launch entry points of a table: {symbol: soname/version} of libtorch_cuda*'s imports."""
    out = []
    with open(table) as f:
        for line in f:
            if line.startswith("# entry\t"):
                _, lib, sym, ver, so = (line.rstrip("\n").split("\t") + ["", ""])[:5]
                out.append((lib, sym, ver, so))
    return out


def launch_summary(entries):
    """The launch entry points the torch CUDA libraries import, e.g. '__cudaLaunchKernel,
    cudaLaunchKernelExC (libcudart.so.13)'."""
    torch = [e for e in entries if e[0].startswith("libtorch_cuda")]
    syms = sorted({e[1] for e in torch if re.match(r"^(__)?cudaLaunch", e[1])})
    sonames = sorted({e[3] for e in torch if e[3]})
    return "%s (%s)" % (", ".join(syms) or "none", ", ".join(sonames) or "no libcudart import")


def print_coverage(lines):
    """Groups the matcher's per-kernel lines into one line per (verdict, kernel, spec)."""
    groups, order = {}, []
    for l in lines[:-1]:
        f = l.split("\t")
        if len(f) < 4:
            continue
        key = tuple(f[:3])
        if key not in groups:
            order.append(key)
            groups[key] = 0
        groups[key] += 1
    for key in order:
        print("%-12s %3d x %-42s %s" % (key[0], groups[key], key[1], key[2]))
    if lines:
        print(lines[-1])


def coverage_main(arg, quiet):
    """`labelguard audit`: prints the coverage table; 0 all covered or known gaps, 1 not."""
    if arg.endswith(".tsv"):
        if not os.path.isfile(arg):
            raise AuditError("%s: no such table" % arg)
        table, tmp = arg, None
    else:
        src = Source(arg)
        rows, entries, notes = audit(src, quiet=True)
        fd, tmp = tempfile.mkstemp(prefix="lg_audit.", suffix=".tsv")
        with os.fdopen(fd, "w") as f:
            f.write(table_text(src, rows, entries, notes))
        table = tmp
        known = find_table(src.build_name())
        if known:
            print("(%s has a committed table: %s)" % (src.build_name(), shown(known)))
    try:
        rc, lines = run_coverage(table, quiet)
        print_coverage(lines)
        print("launch entry points: %s" % launch_summary(table_entries(table)))
        return rc
    finally:
        if tmp:
            os.unlink(tmp)


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m labelguard.torch_audit", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?", help="torch wheel, python interpreter, torch directory or library")
    ap.add_argument("--write-table", action="store_true", help="write <out>/<version>+cu<NNN>.tsv")
    ap.add_argument("--tsv", action="store_true", help="print the table format on stdout")
    ap.add_argument("--name", action="store_true", help="print the build name (<version>+cu<NNN>) and exit")
    ap.add_argument("--coverage", action="store_true", help="print which loss kernels the spec table covers")
    ap.add_argument("--all", action="store_true", help="download, read and delete every release in --versions")
    ap.add_argument("--versions", default=DEFAULT_RELEASES, help="comma-separated releases for --all")
    ap.add_argument("--out", default=None, help="directory for tables (default: tests/wheels of this checkout)")
    ap.add_argument("--tmp", default=None, help="download directory for --all (default: a new temp dir)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    out = a.out
    if out is None and (a.all or a.write_table):
        root = _lib.checkout_root()
        if not root:
            raise AuditError("no checkout to write the table into\n---> HINT: give --out DIR")
        out = os.path.join(root, "tests", "wheels")
    out = os.path.normpath(out) if out else out
    if a.all:
        failed = []
        for v in [x.strip() for x in a.versions.split(",") if x.strip()]:
            d = tempfile.mkdtemp(prefix="lg_audit.dl.", dir=a.tmp)
            try:
                print("lg_audit: downloading torch==%s" % v, file=sys.stderr)
                whl = download(v, d)
                write_table(Source(whl), out, a.quiet)
            except AuditError as e:
                print("lg_audit: %s" % e, file=sys.stderr)
                failed.append(v)
            finally:
                shutil.rmtree(d, ignore_errors=True)
        if failed:
            print("lg_audit: no table for %s" % ", ".join(failed), file=sys.stderr)
            return 2
        return 0
    if not a.source:
        ap.print_usage(sys.stderr)
        print("lg_audit: give a wheel, a python, a torch directory or a library (or --all)", file=sys.stderr)
        return 2
    if a.coverage:
        return coverage_main(a.source, a.quiet)
    src = Source(a.source)
    if a.name:
        print(src.build_name())
        return 0
    if a.write_table:
        write_table(src, out, a.quiet)
        return 0
    rows, entries, notes = audit(src, a.quiet or a.tsv)
    if a.tsv:
        sys.stdout.write(table_text(src, rows, entries, notes))
    else:
        print_rows(src, rows, entries, notes)
    return 0


def guarded(fn, *args):
    """fn(*args)'s exit status, with the user-facing failures as one line and status 2 (never a
    traceback): the audit's own errors, unreadable files, a broken zip."""
    try:
        return fn(*args)
    except AuditError as e:
        print("lg_audit: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        print("lg_audit: %s: %s" % (e.filename or "", e.strerror or e), file=sys.stderr)
        return 2
    except zipfile.BadZipFile as e:
        print("lg_audit: not a readable wheel: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    try:
        sys.exit(guarded(main, sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
