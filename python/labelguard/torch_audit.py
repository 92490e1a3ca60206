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

The readers live in one module per format: _audit_source (wheel, torch directory, interpreter,
library), _audit_elf (ELF, fatbin, the cubins' parameter records), _audit_compress (LZ4, zstd),
and the coverage check in _audit_coverage; this module reads a build through them, writes the
table and holds the command line, and re-exports their names.

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
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

from labelguard import _lib
# The readers, per format, and the coverage check live in their own modules; their names are
# re-exported here, where labelguard/commands (audit, doctor) and scripts have always found them.
from labelguard._audit_common import AuditError, cache_dir, guarded, run_main  # noqa: F401
from labelguard._audit_compress import Decompressor, lz4_block_py  # noqa: F401
from labelguard._audit_coverage import (_hinted, coverage_env, coverage_tool, find_table, launch_summary,  # noqa: F401
                                        print_coverage, run_coverage, shown, table_entries)
from labelguard._audit_elf import (ENTRY_RE, EIATTR_CBANK_PARAM_SIZE, EIATTR_KPARAM_INFO, FATBIN_MAGIC,  # noqa: F401
                                   KEYWORDS, LOSS_FAMILIES, ZSTD_MAGIC, Elf, classify, cubin_kernels, fatbin_entries,
                                   parse_nv_info, read_library)
from labelguard._audit_source import Source, cuda_tag_from_metadata, magic, version_py  # noqa: F401

READER_VERSION = "1"


# ---- demangling -------------------------------------------------------------------------

def demangle(symbols):
    syms = list(symbols)
    tool = shutil.which("c++filt")
    if not tool or not syms:
        return {s: "" for s in syms}
    r = subprocess.run([tool], input="\n".join(syms) + "\n", capture_output=True, text=True)
    lines = r.stdout.split("\n")
    return {s: (lines[i] if i < len(lines) and lines[i] != s else "") for i, s in enumerate(syms)}



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


if __name__ == "__main__":
    run_main(main)
