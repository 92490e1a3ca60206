"""labelguard._audit_source: where labelguard.torch_audit reads a torch build from: a wheel (its
libraries extracted one at a time into a temporary folder), an installed torch (a Python
interpreter that imports it, or the torch package directory) or one shared library; and the
build's name (<version>+cu<NNN>) from its version.py and its METADATA's CUDA pins.

Used by labelguard.torch_audit (audit, --write-table, --all, coverage) and
labelguard/commands/doctor.py (through torch_audit.Source). Tested by tests/cli/test_audit.sh
(bad inputs; a library, a torch directory, a wheel, an installed torch).
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile

from labelguard._audit_common import AuditError


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
