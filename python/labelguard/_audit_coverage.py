"""labelguard._audit_coverage: the spec table's coverage of a torch build's loss kernels, for
`labelguard audit` and `labelguard doctor`: the verdict comes from the library's own registry
(labelguard_coverage(), called by labelguard._coverage in a child process whose environment is
built here; or $LG_SPECMATCH), never from a second matcher; its lines are grouped for print, and
a table's launch entry points summed up.

Used by labelguard.torch_audit.coverage_main and labelguard/commands/doctor.py (through
torch_audit's names). Tested by tests/cli/test_audit.sh and tests/cli/test_doctor.sh.
"""
import os
import re
import subprocess
import sys

from labelguard import _lib
from labelguard._audit_common import AuditError


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
