"""labelguard/_generated.py: the asserts that torch.compile writes into its own GPU kernels, kept
for the report of one that fires.

Inductor guards each indirect load of a Triton kernel with tl.device_assert ("index out of
bounds: 0 <= tmp3 < 32000"), and a user's Triton kernel in a compiled graph may carry its own.
labelguard checks the index ops' ids before those kernels (labelguard::check_index), but a site
that no check covers (the indexing inside a flex-attention mask_mod, a user's kernel, an op
compiled before labelguard was armed) still asserts on the device, and the device's line names
only the text, without the kernel or where it is. So each output module Inductor loads (a fresh
compile or a cache hit: both go through PyCodeCache.load_by_key_path) is read once, before it
runs, for every tl.device_assert of every kernel it defines: the kernel's name (the function
the GPU runs), the generated file and the assert's line in it (the kernel's own file in
Inductor's cache, named by the "# kernel path:" comment, where the device's line points; the
output module's own line when that file is gone), the assert's text as the device prints it,
and the source nodes and ATen ops of Inductor's comment above the kernel. Each goes to
liblabelguard's labelguard_generated_kernel (include/labelguard.h); the device_assert report
lists them (src/report/report_assert.c).

Costs nothing at run time: the read happens when a module is loaded, once per file, and a
module without "tl.device_assert" is only searched for that string.

Installed by _compiled.py with the decompositions (the first Inductor import), under `labelguard
run`, a bare LD_PRELOAD or labelguard.enable(); standard library and torch only (the bootstrap
loads it by path). Tested by tests/torch-fake/test_generated.sh (the reader on Inductor's format
for 2.10 and 2.15, the hook on real compiles, the report of a device assert on the double).
"""
import os
import re
import sys
import threading

_lock = threading.Lock()
_state = {"installed": False, "lib": None, "seen": set(), "kept": []}

# `name = async_compile.triton('name', '''` opens a kernel's source in the output module.
_OPEN = re.compile(r"^(\w+) = async_compile\.triton\((['\"])(\w+)\2, '''\s*$")
_CLOSE = re.compile(r"^''',?")
_DEF = re.compile(r"^def (\w+)\(")
_ASSERT = re.compile(r"^\s*tl\.device_assert\((.*)\)\s*$")
_MESSAGE = re.compile(r",\s*(?:(['\"])(.*?)\1)\s*$")
_PATH = re.compile(r"^# kernel path: (.+?)\s*$")
_NODES = re.compile(r"^# (?:Topologically Sorted |Unsorted )?Source Nodes: \[(.*)\], Original ATen: \[(.*)\]\s*$")
MAX_BYTES = 64 << 20  # an output module larger than this is not read


def parse(text, path):
    """The device asserts of the Triton kernels an output module defines: a list of dicts
    (kernel, file, line, message, source_nodes, aten_ops, module_line), in file order. path: the
    module's file, for kernels whose own file the comment does not name or that is gone."""
    lines = text.split("\n")
    found = []
    meta = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _PATH.match(line)
        if m:
            meta = {"path": m.group(1)}
            i += 1
            continue
        m = _NODES.match(line)
        if m:
            meta["nodes"], meta["aten"] = m.group(1), m.group(2)
            i += 1
            continue
        m = _OPEN.match(line)
        if not m:
            if line and not line.startswith("#"):
                meta = {}
            i += 1
            continue
        name = m.group(3) if m.group(3) != "triton_" else m.group(1)
        body_start = i + 1
        j = body_start
        while j < len(lines) and not _CLOSE.match(lines[j]):
            j += 1
        body = lines[body_start:j]
        for b in body:
            d = _DEF.match(b)
            if d:  # the function the GPU runs: its name is the kernel's
                name = d.group(1)
                break
        asserts = []
        for k, b in enumerate(body):
            a = _ASSERT.match(b)
            if not a:
                continue
            msg = _MESSAGE.search(a.group(1))
            asserts.append((body_start + k + 1, b.strip(), msg.group(2) if msg else a.group(1).strip()))
        own = _kernel_file(meta.get("path"), path) if asserts else None  # read only where an assert is
        own_lines = None
        if own:
            try:
                with open(own, encoding="utf-8", errors="replace") as f:
                    own_lines = [s.strip() for s in f.read().split("\n")]
            except OSError:
                own = None
        for module_line, stripped, message in asserts:
            file, at = path, module_line
            if own_lines is not None and stripped in own_lines:
                file, at = own, own_lines.index(stripped) + 1
            found.append({"kernel": name, "file": file, "line": at, "message": message,
                          "source_nodes": meta.get("nodes", ""), "aten_ops": meta.get("aten", ""),
                          "module_line": module_line})
        meta = {}
        i = j + 1
    return found


def _kernel_file(named, module_path):
    """The kernel's own file from the comment: absolute, or relative to Inductor's cache root
    (compile-on-one-rank writes it so); None when not named or not there."""
    if not named:
        return None
    if os.path.isabs(named):
        return named if os.path.isfile(named) else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(module_path)))
    for base in (root, os.path.dirname(root)):
        cand = os.path.join(base, named)
        if os.path.isfile(cand):
            return cand
    return None


def _library():
    if _state["lib"] is None:
        import ctypes

        try:
            lib = ctypes.CDLL(None)
            fn = lib.labelguard_generated_kernel
        except (OSError, AttributeError):
            return None
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                       ctypes.c_char_p]
        _state["lib"] = lib
    return _state["lib"]


def note(path):
    """Reads the output module at path once and hands its kernels' asserts to the library.
    Returns how many asserts it found (0 for a file read before)."""
    with _lock:
        if path in _state["seen"]:
            return 0
        _state["seen"].add(path)
    try:
        if os.path.getsize(path) > MAX_BYTES:
            return 0
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except (OSError, TypeError, ValueError):
        return 0
    if "tl.device_assert" not in text or "async_compile.triton(" not in text:
        return 0
    found = parse(text, path)
    lib = _library()

    def b(s):
        return s.encode("utf-8", "replace")

    for k in found:
        if lib is not None:
            lib.labelguard_generated_kernel(b(k["kernel"]), b(k["file"]), k["line"], b(k["message"]),
                                            b(k["source_nodes"]), b(k["aten_ops"]))
    with _lock:
        _state["kept"].extend(found)
    return len(found)


def kept():
    """Every assert noted in this process so far, oldest first."""
    with _lock:
        return list(_state["kept"])


def seen():
    """The output modules read so far (each once), sorted."""
    with _lock:
        return sorted(_state["seen"])


def install():
    """Wraps PyCodeCache.load_by_key_path, through which Inductor loads every output module, and
    reads the modules it loaded before. Idempotent; returns True when the hook is in place."""
    with _lock:
        if _state["installed"]:
            return True
        from torch._inductor import codecache

        cache = getattr(codecache, "PyCodeCache", None)
        raw = cache.__dict__.get("load_by_key_path") if cache is not None else None
        if not isinstance(raw, classmethod):
            return False
        real = raw.__func__

        def load_by_key_path(cls, key, path, *args, **kwargs):
            try:
                note(path)
            except Exception as e:  # the guard never breaks the job
                sys.stderr.write("labelguard: could not read %s for its device asserts: %s: %s\n"
                                 % (path, type(e).__name__, e))
            return real(cls, key, path, *args, **kwargs)

        load_by_key_path.labelguard_wrapped = real
        cache.load_by_key_path = classmethod(load_by_key_path)
        _state["installed"] = True
        loaded = list(getattr(cache, "modules", None) or [])
    for mod in loaded:  # compiled before labelguard was armed (labelguard.enable() late)
        path = getattr(mod, "__file__", None)
        if path:
            try:
                note(path)
            except Exception:
                pass
    return True
