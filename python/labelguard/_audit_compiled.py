"""labelguard._audit_compiled: the device-assert census's second count, a site under torch.compile.

The census (_audit_asserts) counts a wheel's kernels, that is eager mode. Under torch.compile a
family's op is lowered into Inductor's own kernels and checked before them by labelguard's check
op ("op": python/labelguard/_compiled.py and _compiled_index.py put labelguard::check_target /
check_index in front of the aten ops named here), or left to ATen's kernel, which the launch
hooks check as in eager ("aten"), or lowered unchecked ("no"). A site's compiled verdict comes
from its families (compiled_status), so the committed tables need no column of their own.

Called by _audit_asserts (`labelguard audit --asserts`, --check); compiled_problems checks the
"op" entries against the check op's tables. Tested by tests/cli/test_asserts.sh.
"""
import os
from collections import Counter

# family -> ("op", the aten ops checked) | ("aten" | "no", why). Every family of a checked or
# partial site needs an entry: --check fails on one without.
COMPILED = {
    "nll_loss": ("op", ("nll_loss_forward",)),
    "nll_loss2d": ("op", ("nll_loss2d_forward",)),
    "index_select": ("op", ("index_select", "embedding")),
    "index_add": ("op", ("index_add", "index_reduce")),  # index_reduce: its mean; the rest runs ATen's
    "index_copy": ("op", ("index_copy",)),
    "index_fill": ("op", ("index_fill",)),
    "index": ("op", ("index",)),
    "index_put": ("op", ("index_put",)),
    "index_elementwise": ("op", ("index", "index_put")),
    "take": ("op", ("take",)),
    "put": ("op", ("put",)),
    "scatter": ("op", ("scatter", "scatter_add", "scatter_reduce", "one_hot")),
    "gather": ("op", ("gather",)),
    "multi_margin_loss": ("op", ("multi_margin_loss",)),
    "binary_cross_entropy": ("op", ("binary_cross_entropy",)),
    "max_unpool2d": ("op", ("max_unpool2d",)),
    "embedding_bag": ("aten", "Inductor falls back to ATen's _embedding_bag"),
    "multinomial": ("aten", "Inductor falls back to ATen's multinomial"),
    # embedding_renorm_ (F.embedding's max_norm): no lowering in Inductor, which runs ATen's kernel
    "embedding": ("aten", "Inductor falls back to ATen's embedding_renorm_ (max_norm)"),
    # torch/_inductor/decomposition.py: bernoulli becomes rand_like(p) < p on the GPU, which asserts
    # nothing and checks nothing (p = 1.5 always draws 1, silently)
    "bernoulli": ("no", "Inductor decomposes it into rand_like(p) < p: no kernel asserts, none is checked"),
}


def compiled_status(row):
    """A site's verdict under torch.compile (COMPILED): "checked" when each of its families is
    checked by the check op; its eager status when some run ATen's kernels (or kernels of no
    family, "(File)"); "unchecked" when one is lowered unchecked, and for a site eager does not
    check (compiling checks nothing that eager does not); None for a family COMPILED does not know."""
    if row["status"] == "unchecked":
        return "unchecked"
    ways = set()
    for fam in row["family"].split(","):
        if fam.startswith("("):
            ways.add("aten")
            continue
        if fam not in COMPILED:
            return None
        ways.add(COMPILED[fam][0])
    if "no" in ways:
        return "unchecked"
    return "checked" if ways == {"op"} else row["status"]


def compiled_summary(rows, build):
    """One line: the sites checked, partial and unchecked under torch.compile (compiled_status),
    the checked ones split into the check op's and ATen's kernels'. torch 1.x has no torch.compile."""
    if build.split(".")[0] in ("0", "1"):
        return "when compiled: no torch.compile in torch %s" % build
    st = Counter(compiled_status(r) for r in rows)
    by_op = sum(1 for r in rows if compiled_status(r) == "checked"
                and {COMPILED.get(f, ("",))[0] for f in r["family"].split(",")} == {"op"})
    return ("when compiled (torch.compile): %d checked (%d by the check op before Inductor's kernels, %d by ATen's "
            "kernels as in eager), %d partial, %d unchecked" % (st["checked"], by_op, st["checked"] - by_op,
                                                                  st["partial"], st["unchecked"]))


def compiled_problems():
    """COMPILED against the check op's tables: an "op" family names only aten ops that
    python/labelguard/_compiled.py (losses) or _compiled_index.py (index ops) put a check in front of."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    mods = {}
    for name in ("_compiled", "_compiled_index"):
        spec = importlib.util.spec_from_file_location("labelguard_census_" + name, os.path.join(here, name + ".py"))
        mods[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[name])
    known = set(mods["_compiled"].LOSSES) | set(mods["_compiled_index"]._INDEX) | set(mods["_compiled_index"]._PY_IMPL)
    out = []
    for fam, (way, what) in sorted(COMPILED.items()):
        if way == "op":
            out += ["COMPILED[%s]: %s has no check op in front of it (not in _compiled.LOSSES, _compiled_index._INDEX "
                    "or _PY_IMPL)" % (fam, op) for op in what if op not in known]
    return out
