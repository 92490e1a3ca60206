"""labelguard._audit_asserts: the census of a torch build's device asserts, and which of them
labelguard checks before the launch (`labelguard audit --asserts WHEEL|PYTHON`).

Every cubin of the build (sm_70 and newer; the older encodings are not read) is read by
_audit_sass.cubin_asserts: each kernel with the __assertfail calls it reaches. A site is one
(file, function, condition) as the assert message prints them; per site: how many kernels
(mangled names, over all architectures) carry it, their families, and the verdict:
    checked     every kernel that carries it is watched by a spec,
    partial     some are,
    unchecked   none is; the reason comes from tests/wheels/asserts/sites.tsv (the classified
                sites: file, function, condition, reason), or the site is UNCLASSIFIED.
Which spec watches a kernel is the library's answer, never a matcher of ours: the kernels go,
as a kernel table, through labelguard_coverage() (_audit_coverage.run_coverage, the path of
`labelguard audit`; $LG_SPECMATCH answers instead when set). That report judges the rows of
loss families only, so every row is given as family nll_loss: the verdict itself reads only the
symbol and the parameter sizes. A kernel's family is its spec's (specs/pytorch.conf), else the
reader's (_audit_elf.classify), else none; a site none of whose kernels has one is shown under
its source file, "(Loss)" for aten/.../Loss.cu; a site's families are listed by kernel count.
Each site is counted twice: as eager runs it (above), and under torch.compile (_audit_compiled:
checked by labelguard's check op before Inductor's kernels, or ATen's kernel checked as in
eager), from its families, so the committed tables need no new column.

The committed census of a build is two files in tests/wheels/asserts/: <build>.tsv, one row per
site, and <build>.kernels.tsv, for each site one kernel per spec that watches it and one that
no spec watches, with its parameter sizes. --check judges those kernels again with the library
as it is now, so tests/cli/test_asserts.sh needs no wheel: a site whose spec no longer covers
its kernel, a site not in sites.tsv, or a line of sites.tsv that no table needs, fails.

    M = PYTHONPATH=python python3 -m labelguard._audit_asserts
    M WHEEL|PYTHON|DIR                 print the census (what `labelguard audit --asserts` does)
    M --write-table WHEEL [--out DIR]  write DIR/<build>.tsv and <build>.kernels.tsv
                                       (default tests/wheels/asserts)
    M --reclassify [DIR]               the tables' reasons rewritten from sites.tsv
    M --check [DIR]                    the committed tables against the library (exit 1: a site
                                       lost its coverage, or is unclassified)

Reading a wheel takes minutes (every cubin of every architecture is decompressed and its
assert calls followed). Exit status: 0 ok, 1 an unclassified site or a lost coverage, 2 bad
input. Tested by tests/cli/test_asserts.sh.
"""
import argparse
import hashlib
import mmap
import os
import re
import struct
import sys
import tempfile
import zipfile
from collections import Counter, defaultdict

from labelguard import _lib
from labelguard._audit_common import AuditError, guarded, run_main  # noqa: F401
from labelguard._audit_compress import Decompressor
from labelguard._audit_compiled import compiled_problems, compiled_status, compiled_summary
from labelguard._audit_coverage import run_coverage
from labelguard._audit_elf import ZSTD_MAGIC, Elf, classify, fatbin_entries
from labelguard._audit_sass import cubin_asserts
from labelguard._audit_source import Source

MIN_SM = 70           # the 128-bit instruction encoding _audit_sass follows
COVERAGE_CHUNK = 4000  # rows per coverage run (coverage.c reads at most 4096)
SITE_COLUMNS = ("site", "status", "family", "kernels", "file", "function", "condition", "lines", "covered_by", "reason")
KERNEL_COLUMNS = ("site", "family", "lib", "symbol", "param_sizes", "spec")
UNCLASSIFIED = "UNCLASSIFIED: add it to tests/wheels/asserts/sites.tsv with the reason it is not checked"



def _clean(text):
    return (text or "").replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def norm_file(path):
    """A source path without the build machine's prefix: /pytorch/aten/src/... and
    /var/lib/jenkins/workspace/aten/src/... both read aten/src/..."""
    m = re.search(r"(?:^|/)((?:aten|c10|caffe2|torch|third_party)/.*)$", path or "")
    return m.group(1) if m else (path or "?")


def site_id(file, function, condition):
    return hashlib.sha1(("%s\0%s\0%s" % (file, function, condition)).encode()).hexdigest()[:10]


# ---- reading ----------------------------------------------------------------------------------

def read_library(path, dec, kernels, stats):
    """Adds the assert-carrying kernels of one library to kernels {symbol: {"sites": {site
    key: set(lines)}, "params": [sizes], "archs": set}}; counts calls in stats."""
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            return
    try:
        elf = Elf(data, path)
        fb = elf.section(".nv_fatbin")
        if fb is None:
            return
        for sm, kind, flags, body, unc in fatbin_entries(data, fb[2], fb[2] + fb[3]):
            if kind != 2:
                continue
            if sm < MIN_SM:
                stats["old_arch_cubins"] += 1
                continue
            if bytes(body[:4]) == ZSTD_MAGIC:
                cub = dec.zstd(bytes(body), unc)
            elif flags & 0x2000:
                cub = dec.lz4(bytes(body), unc)
            else:
                cub = bytes(body)
            stats["cubins"] += 1
            for sym, k in cubin_asserts(cub).items():
                e = kernels.setdefault(sym, {"sites": defaultdict(set), "params": k["params"], "archs": set()})
                e["archs"].add(sm)
                for msg, file, line, func in k["calls"]:
                    stats["calls"] += 1
                    if msg is None or file is None or func is None:
                        stats["unresolved"] += 1
                        continue
                    key = (norm_file(file), func, msg)
                    e["sites"][key]
                    if line is not None:
                        e["sites"][key].add(line)
    finally:
        data.close()


def read_source(src, quiet=False):
    """(kernels, stats, libs) of a Source, as read_library fills them."""
    dec, kernels, stats, libs = Decompressor(), {}, Counter(), {}
    for name, path in src.each_lib():
        if not quiet:
            print("lg_audit: reading %s" % name, file=sys.stderr)
        before = set(kernels)
        try:
            read_library(path, dec, kernels, stats)
        except (ValueError, IndexError, struct.error) as e:
            raise AuditError("%s: unreadable ELF or device code (%s)" % (name, str(e)[:120]))
        for sym in set(kernels) - before:
            libs[sym] = name
    return kernels, stats, libs


# ---- the library's verdict --------------------------------------------------------------------

def spec_families():
    """{spec name: family} of specs/pytorch.conf (data file pytorch.conf), for display."""
    out, name = {}, None
    p = _lib.data_path("pytorch.conf")
    if not os.path.isfile(p):
        return out
    with open(p) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                name = line[1:-1]
            elif line.startswith("family=") and name:
                out[name] = line[len("family="):]
    return out


def verdict(rows):
    """{symbol: spec name or None} for rows of (symbol, param sizes as text), by the library's
    registry (labelguard_coverage through run_coverage)."""
    out = {}
    rows = sorted(set(rows))
    for i in range(0, len(rows), COVERAGE_CHUNK):
        fd, tmp = tempfile.mkstemp(prefix="lg_asserts.", suffix=".tsv")
        try:
            with os.fdopen(fd, "w") as f:
                f.write("# build: census\nfamily\tlib\tsymbol\tparam_sizes\n")
                for sym, sizes in rows[i:i + COVERAGE_CHUNK]:
                    # nll_loss: the report judges loss rows only; the verdict reads symbol and sizes
                    f.write("nll_loss\t-\t%s\t%s\n" % (sym, sizes))
            _rc, lines = run_coverage(tmp, False)
        finally:
            os.unlink(tmp)
        for l in lines:
            f4 = l.split("\t")
            if len(f4) >= 4:
                m = re.match(r"^\[(.*)\]$", f4[2])
                out[f4[-1]] = m.group(1) if f4[0] == "covered" and m else None
    return out


def load_sites(path=None):
    """{site id: reason} of the classified sites (tests/wheels/asserts/sites.tsv)."""
    path = path or _lib.data_path("asserts/sites.tsv")
    out = {}
    if not os.path.isfile(path):
        return out
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("site\t") or not line.strip():
                continue
            c = line.rstrip("\n").split("\t")
            if len(c) >= 5:
                out[c[0]] = c[4]
    return out


def census(kernels, libs, classified):
    """(site rows, kernel rows): the census table of one build, judged by the library."""
    judged = verdict((sym, ",".join(str(s) for s in k["params"])) for sym, k in kernels.items())
    fam_of_spec = spec_families()
    by_site = defaultdict(list)
    lines = defaultdict(set)
    for sym, k in kernels.items():
        for key, ls in k["sites"].items():
            by_site[key].append(sym)
            lines[key] |= ls
    rows, reps = [], []
    for key, syms in by_site.items():
        file, func, cond = key
        sid = site_id(file, func, cond)
        fams, specs, uncovered = Counter(), Counter(), []
        for sym in sorted(syms):
            spec = judged.get(sym)
            fam = fam_of_spec.get(spec) if spec else None
            fams[fam or classify(sym) or ""] += 1
            if spec:
                if not specs[spec]:
                    reps.append((sid, fam or "", libs.get(sym, ""), sym, kernels[sym]["params"], spec))
                specs[spec] += 1
            else:
                if not uncovered:
                    reps.append((sid, classify(sym) or "", libs.get(sym, ""), sym, kernels[sym]["params"], "-"))
                uncovered.append(sym)
        n, ncov = len(syms), sum(specs.values())
        status = "checked" if ncov == n else "partial" if ncov else "unchecked"
        # Families by kernel count; kernels of no family under their source file, "(Loss)".
        stem = "(%s)" % os.path.splitext(os.path.basename(file))[0]
        family = ",".join(f or stem for f, _ in sorted(fams.items(), key=lambda x: (-x[1], x[0])))
        reason = "-"
        if status != "checked":
            reason = classified.get(sid, UNCLASSIFIED)
            if status == "partial":
                reason = "%d of %d kernels watched; %s" % (ncov, n, reason)
        rows.append({"site": sid, "status": status, "family": family, "kernels": n, "file": file,
                     "function": func, "condition": cond,
                     "lines": ",".join(str(x) for x in sorted(lines[key])) or "-",
                     "covered_by": ",".join("%s:%d" % (s, c) for s, c in sorted(specs.items())) or "-",
                     "reason": reason})
    order = {"unchecked": 0, "partial": 1, "checked": 2}
    rows.sort(key=lambda r: (order[r["status"]], r["family"], r["file"], r["function"], r["condition"]))
    reps.sort()
    return rows, reps


# ---- output ------------------------------------------------------------------------------------

def summary(rows):
    st = Counter(r["status"] for r in rows)
    return "%d assert sites in %d kernel instantiations: %d checked, %d partial, %d unchecked" % (
        len(rows), sum(r["kernels"] for r in rows), st["checked"], st["partial"], st["unchecked"])


def table_text(src, rows, stats, command):
    out = ["# labelguard assert census: every distinct device assert site (file, function, condition) of one",
           "# PyTorch build, read from the __assertfail calls of its cubins (sm_%d and newer), and whether a" % MIN_SM,
           "# spec of the library watches every kernel that carries it. Checked by tests/cli/test_asserts.sh.",
           "# made by: %s" % command,
           "# build: %s" % src.build_name(),
           "# torch: %s (torch.version.cuda %s)" % (src.version or "?", src.cuda or "?")]
    if src.kind == "wheel":
        out += ["# wheel: %s" % src.wheel_name, "# sha256: %s" % src.sha256]
    out.append("# note: %d cubins read, %d assert calls, %d not followed (not in any site), %d cubins older than "
               "sm_%d not read" % (stats["cubins"], stats["calls"], stats["unresolved"], stats["old_arch_cubins"],
                                   MIN_SM))
    out.append("# summary: %s" % summary(rows))
    out.append("\t".join(SITE_COLUMNS))
    for r in rows:
        out.append("\t".join(_clean(str(r[c])) for c in SITE_COLUMNS))
    return "\n".join(out) + "\n"


def kernels_text(src, reps, command):
    out = ["# labelguard assert census, the kernels judged again by tests/cli/test_asserts.sh: for each site of",
           "# %s.tsv one kernel per spec that watches it, and one that no spec watches (spec -)." % src.build_name(),
           "# made by: %s" % command,
           "# build: %s" % src.build_name(),
           "\t".join(KERNEL_COLUMNS)]
    for sid, fam, lib, sym, params, spec in reps:
        out.append("\t".join((sid, fam or "-", lib or "-", sym, ",".join(str(p) for p in params), spec)))
    return "\n".join(out) + "\n"


def print_census(src, rows, stats):
    print("torch %s: %s" % (src.build_name(), summary(rows)))
    print("torch %s: %s" % (src.build_name(), compiled_summary(rows, src.build_name())))
    print("(%d cubins read, %d assert calls, %d not followed)" % (stats["cubins"], stats["calls"], stats["unresolved"]))
    fam = defaultdict(Counter)
    for r in rows:
        fam[r["family"]][r["status"]] += 1
    print("by family: sites checked/partial/unchecked")
    for f in sorted(fam, key=lambda f: (-sum(fam[f].values()), f)):
        c = fam[f]
        print("  %-40s %3d  %d/%d/%d" % (f, sum(c.values()), c["checked"], c["partial"], c["unchecked"]))
    for r in rows:
        print("%-9s %5d  %-28s %s: %s: %s" % (r["status"], r["kernels"], r["family"][:28], r["file"], r["function"],
                                            r["condition"][:120]))
        if r["status"] != "checked":
            print("%-9s %5s  %s" % ("", "", r["reason"]))
        else:
            print("%-9s %5s  watched by %s" % ("", "", r["covered_by"]))


# ---- --check -----------------------------------------------------------------------------------

def read_tsv(path, columns):
    rows = []
    with open(path) as f:
        header = None
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            c = line.rstrip("\n").split("\t")
            if header is None:
                header = c
                if tuple(c) != columns:
                    raise AuditError("%s: header %s, expected %s" % (path, c, "\t".join(columns)))
                continue
            if len(c) != len(columns):
                raise AuditError("%s: a row with %d columns, the header has %d" % (path, len(c), len(columns)))
            rows.append(dict(zip(columns, c)))
    return rows


def check(directory):
    """The committed census against the library and sites.tsv. Returns 0, or 1 with each
    problem on stdout."""
    sites_path = os.path.join(directory, "sites.tsv")
    classified = load_sites(sites_path)
    tables = sorted(n for n in os.listdir(directory) if n.endswith(".tsv") and n != "sites.tsv"
                    and not n.endswith(".kernels.tsv"))
    if not tables:
        raise AuditError("%s: no census table" % directory)
    problems, needed, notes = [], set(), []
    for name in tables:
        build = name[:-4]
        rows = read_tsv(os.path.join(directory, name), SITE_COLUMNS)
        reps = read_tsv(os.path.join(directory, build + ".kernels.tsv"), KERNEL_COLUMNS)
        judged = verdict((r["symbol"], r["param_sizes"]) for r in reps)
        site = {r["site"]: r for r in rows}
        lost = defaultdict(list)
        for r in reps:
            now = judged.get(r["symbol"])
            if r["spec"] != "-" and now != r["spec"]:
                lost[r["site"]].append("[%s] no longer watches %s (now: %s)" % (r["spec"], r["symbol"][:100],
                                                                             "[%s]" % now if now else "no spec"))
            elif r["spec"] == "-" and now:
                notes.append("%s: site %s: %s is now watched by [%s]: regenerate the table" % (
                    name, r["site"], r["symbol"][:100], now))
        for sid, why in sorted(lost.items()):
            s = site.get(sid, {})
            problems.append("%s: site %s (%s: %s: %s), %s, lost its coverage: %s" % (
                name, sid, s.get("file"), s.get("function"), s.get("condition"), s.get("status"), "; ".join(why)))
        for r in rows:
            if compiled_status(r) is None:
                problems.append("%s: site %s, %s, of family %s: no entry in COMPILED (labelguard/_audit_compiled.py) "
                                "says how it runs under torch.compile" % (name, r["site"], r["status"], r["family"]))
        print("%s: %s" % (build, compiled_summary([dict(r, kernels=int(r["kernels"])) for r in rows], build)))
        for r in rows:
            if r["status"] not in ("checked", "partial", "unchecked"):
                problems.append("%s: site %s: status '%s'" % (name, r["site"], r["status"]))
            if r["status"] == "checked":
                continue
            needed.add(r["site"])
            if r["site"] not in classified:
                problems.append("%s: site %s (%s: %s: %s) is %s and not classified: add it to %s with the reason" % (
                    name, r["site"], r["file"], r["function"], r["condition"], r["status"], sites_path))
    problems += compiled_problems()
    for sid in sorted(set(classified) - needed):
        problems.append("%s: site %s is in no table as partial or unchecked: remove it" % (sites_path, sid))
    for n in notes:
        print("note: %s" % n)
    for p in problems:
        print("FAIL: %s" % p)
    print("asserts: %d tables, %d classified sites, %d problems" % (len(tables), len(classified), len(problems)))
    return 1 if problems else 0


def reclassify(directory):
    """Rewrites the reason column of the committed tables from sites.tsv (no wheel needed)."""
    classified = load_sites(os.path.join(directory, "sites.tsv"))
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".tsv") or name == "sites.tsv" or name.endswith(".kernels.tsv"):
            continue
        path = os.path.join(directory, name)
        with open(path) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            c = line.split("\t")
            if line.startswith("#") or len(c) != len(SITE_COLUMNS) or c[0] == "site" or c[1] == "checked":
                continue
            reason = classified.get(c[0], UNCLASSIFIED)
            if c[1] == "partial":
                reason = "%s; %s" % (c[9].split("; ")[0], reason)
            c[9] = _clean(reason)
            lines[i] = "\t".join(c)
        with open(path, "w") as f:
            f.write("\n".join(lines))
        print("%s: reasons from %s" % (path, os.path.join(directory, "sites.tsv")))
    return 0


# ---- entry points ------------------------------------------------------------------------------

def census_main(arg, quiet=False):
    """`labelguard audit --asserts`: prints the census of a wheel, python or torch directory;
    1 when a site is unclassified."""
    src = Source(arg)
    kernels, stats, libs = read_source(src, quiet)
    if not kernels:
        raise AuditError("%s: no device asserts found (no CUDA libraries of sm_%d or newer?)" % (arg, MIN_SM))
    rows, _reps = census(kernels, libs, load_sites())
    print_census(src, rows, stats)
    return 1 if any(r["reason"].endswith(UNCLASSIFIED) for r in rows) else 0


def write_tables(arg, out, quiet=False):
    src = Source(arg)
    kernels, stats, libs = read_source(src, quiet)
    if not kernels:
        raise AuditError("%s: no device asserts found" % arg)
    rows, reps = census(kernels, libs, load_sites(os.path.join(out, "sites.tsv")))
    command = "PYTHONPATH=python python3 -m labelguard._audit_asserts --write-table %s" % (
        src.wheel_name or os.path.basename(arg))
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, src.build_name())
    with open(base + ".tsv", "w") as f:
        f.write(table_text(src, rows, stats, command))
    with open(base + ".kernels.tsv", "w") as f:
        f.write(kernels_text(src, reps, command))
    print("%s.tsv: %s" % (base, summary(rows)))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m labelguard._audit_asserts", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", nargs="?", help="torch wheel, python interpreter or torch directory")
    ap.add_argument("--write-table", action="store_true", help="write <out>/<build>.tsv and <build>.kernels.tsv")
    ap.add_argument("--check", action="store_true", help="check the committed tables (source: their directory)")
    ap.add_argument("--reclassify", action="store_true", help="rewrite the tables' reasons from sites.tsv")
    ap.add_argument("--out", default=None, help="directory of the tables (default tests/wheels/asserts)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    out = a.out
    if out is None and (a.write_table or a.check or a.reclassify):
        if (a.check or a.reclassify) and a.source:
            out = a.source
        else:
            root = _lib.checkout_root()
            out = os.path.join(root, "tests", "wheels", "asserts") if root else _lib.data_path("asserts")
    if a.check:
        return check(out)
    if a.reclassify:
        return reclassify(out)
    if not a.source:
        ap.print_usage(sys.stderr)
        return 2
    if a.write_table:
        return write_tables(a.source, out, a.quiet)
    return census_main(a.source, a.quiet)


if __name__ == "__main__":
    run_main(main)
