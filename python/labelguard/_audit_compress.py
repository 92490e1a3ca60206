"""labelguard._audit_compress: the decompression of a fatbin's cubins for labelguard.torch_audit:
LZ4 raw blocks and zstd frames with a known output size, through liblz4 / libzstd with ctypes
when the system has them, else the `lz4` / `zstandard` packages installed with pip into
${XDG_CACHE_HOME:-~/.cache}/labelguard/py (never into the checkout or the package), else, for LZ4
only, a pure-Python decoder.

Used by labelguard._audit_elf.read_library (one Decompressor per audit, made by
torch_audit.audit). Tested by tests/cli/test_audit.sh (wheels and libraries with compressed
device code).
"""
import ctypes
import ctypes.util
import os
import subprocess
import sys

from labelguard._audit_common import AuditError, cache_dir


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


def _lz4_length(src, i, n):
    """An LZ4 length whose 4-bit field is 15 goes on in bytes while they are 255: (next i, length)."""
    if n == 15:
        while True:
            b = src[i]
            i += 1
            n += b
            if b != 255:
                break
    return i, n


def lz4_block_py(src, size):
    """Pure-Python LZ4 raw block decoder (slow; the last resort)."""
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        tok = src[i]
        i, lit = _lz4_length(src, i + 1, tok >> 4)
        out += src[i:i + lit]
        i += lit
        if i >= n:
            break
        off = src[i] | (src[i + 1] << 8)
        i, ml = _lz4_length(src, i + 2, tok & 15)
        ml += 4
        start = len(out) - off
        if off >= ml:
            out += out[start:start + ml]
        else:
            for k in range(ml):
                out.append(out[start + k])
    return bytes(out[:size])
