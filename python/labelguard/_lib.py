"""Where labelguard's files are: the native library and the data files the commands read.

Used by every part of the package (the API in __init__.py, the command line, the IPython
extension). The wheel holds the library at labelguard/_native/liblabelguard.so and the data at
labelguard/data/; a checkout (python/labelguard/ run with PYTHONPATH=python, as the shim
scripts/labelguard does) finds the library in the build directory instead. Nothing here is a
path of the machine that built the wheel: everything is relative to this file.

Tested by tests/pip/ (the installed wheel, from a directory outside the checkout) and tests/cli/
(the checkout).
"""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFound(RuntimeError):
    """liblabelguard.so is neither in the package nor in a checkout's build directory."""


def package_dir():
    return _HERE


def checkout_root():
    """The source tree this package lies in (python/labelguard/ inside it), or None for an install."""
    root = os.path.dirname(os.path.dirname(_HERE))
    if os.path.isfile(os.path.join(root, "src", "hooks", "lg.c")) and os.path.isfile(os.path.join(root, "Makefile")):
        return root
    return None


def _candidates():
    env = os.environ.get("LABELGUARD_LIB")
    if env:
        return [("LABELGUARD_LIB", env)]
    out = [("package", os.path.join(_HERE, "_native", "liblabelguard.so"))]
    root = checkout_root()
    if root:
        out.append(("checkout", os.path.join(root, os.environ.get("LG_BUILD") or "build", "liblabelguard.so")))
    return out


def library_path():
    """Absolute path of the library to load or preload: $LABELGUARD_LIB when set (it must exist),
    else the one inside the package, else a checkout's build directory. Raises LibraryNotFound with
    what was looked at and what to do."""
    cands = _candidates()
    for origin, path in cands:
        if os.path.isfile(path):
            return os.path.realpath(path)
    if cands[0][0] == "LABELGUARD_LIB":
        raise LibraryNotFound("LABELGUARD_LIB=%s: no such file\nhint: point LABELGUARD_LIB at a built "
                              "liblabelguard.so, or unset it" % cands[0][1])
    raise LibraryNotFound("liblabelguard.so not found (looked in %s)\nhint: install the wheel "
                          "(pip install labelguard), or build it with `make` in the source tree, or set "
                          "LABELGUARD_LIB=/path/to/liblabelguard.so" % " and ".join(p for _, p in cands))


# Where a checkout keeps each data file that the wheel ships under labelguard/data/: the first
# component of the name -> the source tree's directory. The wheel's build copies these, so this
# table is also the list of what goes into labelguard/data/:
#   wheels/<version>+cu<NNN>.tsv   the committed kernel tables of PyTorch builds (audit, doctor)
#   wheels/known-gaps.tsv          kernels no spec can cover, with the reason (audit, doctor)
#   pytorch.conf                   the built-in kernel spec table (also embedded in the library)
#   asserts/sites.tsv              the classified device assert sites (`audit --asserts`), with
#                                  the census tables of tests/wheels/asserts/
# A directory entry ships its *.tsv files (python/wheel_backend.py).
CHECKOUT_DATA = {"wheels": os.path.join("tests", "wheels"), "pytorch.conf": os.path.join("specs", "pytorch.conf"),
                 "asserts": os.path.join("tests", "wheels", "asserts")}


def data_path(name):
    """A data file (or directory) shipped with the package (labelguard/data/NAME), or, in a
    checkout, where the source tree keeps it (CHECKOUT_DATA). NAME is relative, '/'-separated.
    Returns the package path when neither exists; the caller reports a missing file."""
    p = os.path.join(_HERE, "data", *name.split("/"))
    if os.path.exists(p):
        return p
    root = checkout_root()
    head, _, rest = name.partition("/")
    if root and head in CHECKOUT_DATA:
        c = os.path.join(root, CHECKOUT_DATA[head], *(rest.split("/") if rest else []))
        if os.path.exists(c):
            return c
    return p
