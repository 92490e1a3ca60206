"""wheel_backend.py: the PEP 517 build backend of labelguard (pyproject.toml names it).

build_wheel runs the Makefile to build liblabelguard.so (the validator images and the built-in
kernel specs are embedded in it), then writes one wheel for every CPython on Linux:

    labelguard/...            python/labelguard/ (command line, API, IPython extension)
    labelguard/_native/liblabelguard.so   the library, debug info stripped
    labelguard/data/...       the data files the commands read (_lib.CHECKOUT_DATA)
    labelguard-V.dist-info/   METADATA, WHEEL, entry_points.txt, RECORD

The platform tag is read off the library itself: the newest GLIBC symbol version it needs
(the Makefile pins it to 2.17 on x86_64) gives manylinux_2_17 (alias manylinux2014). The archive is reproducible: entries
sorted, fixed timestamps (SOURCE_DATE_EPOCH when set), fixed modes, so `make wheel`, `pip wheel .`
and `python -m build` give the same file. build_sdist packs the files git tracks (or, in an
unpacked sdist, the files listed in its PKG-INFO-side manifest) so that the wheel can be built
from it.

Called by pip / build (through pyproject.toml's backend-path) and by `make wheel`. Tested by
tests/pip/test_wheel.sh (builds it both ways, installs it in a fresh venv, auditwheel show).
No dependency beyond the standard library (tomllib on 3.11+, else a tiny reader of our own
pyproject.toml's simple key = "value" lines).
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_SRC = os.path.join(ROOT, "python", "labelguard")
MANIFEST = "labelguard-sdist-files.txt"


class BuildError(RuntimeError):
    pass


# --- project metadata ---------------------------------------------------------------------

def _pyproject():
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib  # Python 3.11+
        with open(path, "rb") as f:
            return tomllib.load(f)
    except ImportError:
        pass
    # Our pyproject.toml uses only `key = "string"` lines and `[table]` headers for what we read.
    data = {}
    cur = data
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^\[([A-Za-z0-9_.-]+)\]$", line)
            if m:
                cur = data
                for part in m.group(1).split("."):
                    cur = cur.setdefault(part, {})
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"$', line)
            if m:
                cur[m.group(1)] = m.group(2)
    return data


def _meta():
    proj = _pyproject()["project"]
    name, version = proj["name"], proj["version"]
    lib_version = _library_version()
    if lib_version and lib_version != version:
        raise BuildError("pyproject.toml says version %s but src/base/base.h's LG_VERSION is %s: make them equal"
                         % (version, lib_version))
    return proj, name, version


def _library_version():
    try:
        with open(os.path.join(ROOT, "src", "base", "base.h"), encoding="utf-8") as f:
            m = re.search(r'#define LG_VERSION "([^"]+)"', f.read())
            return m.group(1) if m else None
    except OSError:
        return None


def _metadata_text(proj, name, version):
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version]
    if proj.get("description"):
        lines.append("Summary: " + proj["description"])
    if proj.get("requires-python"):
        lines.append("Requires-Python: " + proj["requires-python"])
    for c in proj.get("classifiers", []):
        lines.append("Classifier: " + c)
    body = ""
    readme = proj.get("readme")
    if isinstance(readme, str) and os.path.isfile(os.path.join(ROOT, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _entry_points(proj):
    scripts = proj.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))


# --- the library ----------------------------------------------------------------------------

def _build_dir():
    return os.environ.get("LG_BUILD") or "build"


def _make_library():
    """Runs make for the library; returns its path. make's own output goes to stderr, so that a
    missing dependency's one-line message (naming the Debian package) reaches the user."""
    build = _build_dir()
    target = os.path.join(build, "liblabelguard.so")
    cmd = ["make", "-C", ROOT, "--no-print-directory", "BUILD=" + build, target]
    env = dict(os.environ)
    pip_python = _python_with_pip()
    if pip_python and "LG_PIP_PYTHON" not in env:
        env["LG_PIP_PYTHON"] = pip_python  # scripts/fetch-ptxas.sh downloads the old assemblers with it
    try:
        rc = subprocess.call(cmd, stdout=sys.stderr, env=env)
    except OSError as e:
        raise BuildError("cannot run make (%s): building labelguard needs make, gcc and a CUDA toolkit" % e)
    if rc != 0:
        raise BuildError("`%s` failed (exit %d); its message is above" % (" ".join(cmd), rc))
    return os.path.join(ROOT, target)


def _python_with_pip():
    """This interpreter, or the one its (isolated build) venv was made from, whichever has pip."""
    for py in (sys.executable, getattr(sys, "_base_executable", None), shutil.which("python3")):
        if py and subprocess.call([py, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) == 0:
            return py
    return None


def _glibc_needed(lib):
    """The newest GLIBC_x.y version the library's dynamic symbols need, as (x, y)."""
    out = subprocess.run([os.environ.get("OBJDUMP", "objdump"), "-T", lib], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    if out.returncode != 0:
        raise BuildError("objdump -T %s failed: %s" % (lib, out.stderr.strip()))
    vers = [tuple(int(x) for x in v.split(".")[:2]) for v in re.findall(r"GLIBC_([0-9]+\.[0-9]+)", out.stdout)]
    return max(vers) if vers else (2, 17)


def _machine(lib):
    with open(lib, "rb") as f:
        head = f.read(20)
    machine = int.from_bytes(head[18:20], "little")
    return {62: "x86_64", 183: "aarch64"}.get(machine) or _fail("unknown ELF machine %d in %s" % (machine, lib))


def _fail(msg):
    raise BuildError(msg)


# PEP 600's legacy names, given beside the new one so that older pips accept the wheel too.
LEGACY = {(2, 5): "manylinux1", (2, 12): "manylinux2010", (2, 17): "manylinux2014"}


def _platform_tag(lib):
    """manylinux_X_Y_ARCH from the newest GLIBC version the library needs (at least 2.17, the
    oldest that x86_64 and aarch64 wheels are tagged for), plus its legacy alias."""
    glibc = max(_glibc_needed(lib), (2, 17))
    arch = _machine(lib)
    tag = "manylinux_%d_%d_%s" % (glibc + (arch,))
    if glibc in LEGACY:
        tag += ".%s_%s" % (LEGACY[glibc], arch)
    return tag


def _stripped(lib, tmpdir):
    out = os.path.join(tmpdir, "liblabelguard.so")
    objcopy = os.environ.get("OBJCOPY", "objcopy")  # the target's, for a cross build (Makefile)
    if shutil.which(objcopy):
        if subprocess.call([objcopy, "--strip-debug", lib, out]) == 0:
            return out
    shutil.copyfile(lib, out)
    return out


# --- writing the archive ------------------------------------------------------------------

def _epoch():
    try:
        return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)  # zip cannot go below 1980
    except ValueError:
        return 315532800


def _zinfo(name, mode):
    t = time.gmtime(_epoch())
    zi = zipfile.ZipInfo(name, date_time=(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec))
    zi.external_attr = (0o100000 | mode) << 16
    zi.compress_type = zipfile.ZIP_DEFLATED
    return zi


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _package_files():
    """(archive name, source path, mode) of the Python package, sorted."""
    from_pkg = []
    for dirpath, dirnames, filenames in os.walk(PKG_SRC):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "_native")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            src = os.path.join(dirpath, fn)
            rel = os.path.relpath(src, os.path.dirname(PKG_SRC)).replace(os.sep, "/")
            from_pkg.append((rel, src, 0o644))
    return from_pkg


def _data_files():
    """(archive name, source path, mode) of labelguard/data/: _lib.CHECKOUT_DATA's files, and the
    *.tsv files of its directories."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("labelguard_lib_table", os.path.join(PKG_SRC, "_lib.py"))
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)  # the one table of data files, without importing the package
    out = []
    for name, rel in sorted(table.CHECKOUT_DATA.items()):
        src = os.path.join(ROOT, rel)
        if os.path.isdir(src):
            for fn in sorted(os.listdir(src)):
                if fn.endswith(".tsv"):
                    out.append(("labelguard/data/%s/%s" % (name, fn), os.path.join(src, fn), 0o644))
        elif os.path.isfile(src):
            out.append(("labelguard/data/" + name, src, 0o644))
        else:
            raise BuildError("data file %s (%s) is missing from the source tree" % (name, rel))
    return out


def _write_wheel(wheel_directory, lib):
    proj, name, version = _meta()
    tag = "py3-none-" + _platform_tag(lib)
    dist_info = "%s-%s.dist-info" % (name, version)
    wheel_name = "%s-%s-%s.whl" % (name, version, tag)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        files = _package_files() + _data_files()
        files.append(("labelguard/_native/liblabelguard.so", _stripped(lib, tmp), 0o755))
        files.sort()
        tags = "".join("Tag: py3-none-%s\n" % t for t in tag[len("py3-none-"):].split("."))
        generated = [
            (dist_info + "/METADATA", _metadata_text(proj, name, version).encode()),
            (dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: labelguard wheel_backend\n"
                                    "Root-Is-Purelib: false\n" + tags).encode()),
            (dist_info + "/entry_points.txt", _entry_points(proj).encode()),
            (dist_info + "/top_level.txt", b"labelguard\n"),
        ]
        os.makedirs(wheel_directory, exist_ok=True)
        path = os.path.join(wheel_directory, wheel_name)
        record = []
        with zipfile.ZipFile(path + ".tmp", "w") as z:
            for arc, src, mode in files:
                with open(src, "rb") as f:
                    data = f.read()
                z.writestr(_zinfo(arc, mode), data)
                record.append(_record_line(arc, data))
            for arc, data in generated:
                z.writestr(_zinfo(arc, 0o644), data)
                record.append(_record_line(arc, data))
            record.append(dist_info + "/RECORD,,")
            z.writestr(_zinfo(dist_info + "/RECORD", 0o644), ("\n".join(record) + "\n").encode())
        os.replace(path + ".tmp", path)
    return wheel_name


# --- PEP 517 hooks --------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    proj, name, version = _meta()
    dist_info = "%s-%s.dist-info" % (name, version)
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata_text(proj, name, version))
    with open(os.path.join(d, "entry_points.txt"), "w", encoding="utf-8") as f:
        f.write(_entry_points(proj))
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    try:
        return _write_wheel(wheel_directory, _make_library())
    except BuildError as e:
        sys.stderr.write("labelguard wheel: %s\n" % e)
        raise


def _sdist_files():
    listed = os.path.join(ROOT, MANIFEST)
    if os.path.isfile(listed):  # building from an unpacked sdist
        with open(listed, encoding="utf-8") as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], stdout=subprocess.PIPE, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise BuildError("an sdist is made from a git checkout (git ls-files) or from an unpacked sdist")
    # Wheels' audit tables and the tests are not needed to build; the sources, specs and scripts are.
    return sorted(p for p in out.decode().split("\0") if p and not p.startswith(("tests/", "bench/", ".ci/"))
                  and os.path.isfile(os.path.join(ROOT, p)))


def build_sdist(sdist_directory, config_settings=None):
    proj, name, version = _meta()
    base = "%s-%s" % (name, version)
    files = _sdist_files()
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, base + ".tar.gz")

    def info(arc, size, mode):
        ti = tarfile.TarInfo(base + "/" + arc)
        ti.size, ti.mode, ti.mtime = size, mode, _epoch()
        ti.uname = ti.gname = ""
        return ti

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in files:
            src = os.path.join(ROOT, rel)
            with open(src, "rb") as f:
                data = f.read()
            t.addfile(info(rel, len(data), 0o755 if os.access(src, os.X_OK) else 0o644), io.BytesIO(data))
        extra = {
            MANIFEST: ("\n".join(files) + "\n").encode(),
            "PKG-INFO": _metadata_text(proj, name, version).encode(),
        }
        for arc, data in sorted(extra.items()):
            t.addfile(info(arc, len(data), 0o644), io.BytesIO(data))
    return base + ".tar.gz"
