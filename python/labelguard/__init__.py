"""labelguard: finds the bad label before PyTorch's loss kernel device-asserts, and keeps the CUDA
context alive.

The Python API, for use inside a running interpreter (a training script, a notebook):

    import labelguard
    labelguard.enable()                 # or enable(action="mask", log="/scratch/lg")
    ...
    except RuntimeError:
        v = labelguard.last_violation() # the JSONL event as a dict: kernel, bad samples, cause
    labelguard.disable()                # optional: stop checking new launches

and the IPython extension (`%load_ext labelguard`, see _ipython.py). The command line is
labelguard.cli (the `labelguard` console script, `python -m labelguard`).

enable() loads the package's liblabelguard.so into this process and arms it in-process (the late
arming `labelguard attach` does, without gdb): the CUDA runtime calls of every object already
loaded are redirected to the guard, and so are those of objects loaded afterwards (torch imported
later, CUDA extensions, Triton's modules). enable() itself makes no CUDA call: the library starts
at the process's first CUDA launch, so a process that enables before any CUDA work can still fork
CUDA-using workers. The configuration follows the LABELGUARD_* environment
variables' rules (docs/configuration.md): keyword arguments override the environment, and a bad
value is a ValueError naming the allowed values, judged by the library's own parser. The
configuration is fixed once the library is loaded in a process; a later enable() with other
values is an error that says so.

Importing this module loads nothing: the library is loaded by the first enable().
Tested by tests/pip/ (the installed wheel in a fresh venv, real torch on the CUDA test double, a
Jupyter kernel) and tests/torch-fake/test_api.sh (the checkout's package).
"""
import ctypes
import json
import os
import subprocess
import sys
import threading

from ._lib import LibraryNotFound, library_path

__version__ = "0.1.0"
__all__ = ["enable", "disable", "last_violation", "config", "LabelguardError", "load_ipython_extension"]

# Keyword -> environment variable, as the library reads them (src/base/config.c).
OPTIONS = {
    "action": "LABELGUARD_ACTION",
    "mode": "LABELGUARD_MODE",
    "log": "LABELGUARD_LOG",
    "hooks": "LABELGUARD_HOOKS",
    "kernels": "LABELGUARD_KERNELS",
    "backtrace": "LABELGUARD_BACKTRACE",
    "samples": "LABELGUARD_SAMPLES",
    "quiet": "LABELGUARD_QUIET",
    "logprob_check": "LABELGUARD_LOGPROB_CHECK",
    "debug_kernels": "LABELGUARD_DEBUG_KERNELS",
    "compiled": "LABELGUARD_COMPILED",
    "launch_sites": "LABELGUARD_LAUNCH_SITES",
}


class LabelguardError(RuntimeError):
    """labelguard cannot guard this process; the message says why and what to do."""


_lock = threading.Lock()
_handle = None  # the loaded library (ctypes.CDLL), once enable() or a query found it


def _env_value(name, value):
    """A keyword argument's value as the environment variable's text."""
    if isinstance(value, bool):
        if name == "compiled":
            return "on" if value else "off"
        if name == "launch_sites":
            return "all" if value else "checked"
        return "1" if value else "0"
    if name in ("log", "kernels") and isinstance(value, (str, bytes, os.PathLike)):
        value = os.fsdecode(value)
        if name == "log":
            return os.path.abspath(value) if value else value  # children and chdir keep the same place
        return ":".join(os.path.abspath(p) if p else p for p in value.split(":"))
    if name == "kernels" and isinstance(value, (list, tuple)):
        return ":".join(os.path.abspath(os.fsdecode(p)) for p in value)
    if name == "backtrace" and isinstance(value, (list, tuple)):
        return ",".join(value) if value else "none"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise ValueError("labelguard.enable(%s=%r): expected a string%s" % (
        name, value, ", a number" if name == "samples" else ""))


def _desired(options):
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError("labelguard.enable() got unknown option%s %s; allowed: %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(OPTIONS)))
    env = {k: v for k, v in os.environ.items() if k.startswith("LABELGUARD_") and k in OPTIONS.values()}
    for name, value in options.items():
        if value is not None:
            env[OPTIONS[name]] = _env_value(name, value)
    return env


def _loaded_copy():
    """The path of a liblabelguard.so already mapped in this process (preloaded by `labelguard run`,
    or loaded by an earlier enable()), or None. Two copies in one process would hook twice."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if os.path.basename(path) == "liblabelguard.so":
                    return path
    except OSError:
        pass
    return None


def _check_platform():
    if not sys.platform.startswith("linux"):
        raise LabelguardError("labelguard runs on Linux only (this is %s)" % sys.platform)
    machine = os.uname().machine
    if machine not in ("x86_64", "aarch64"):
        raise LabelguardError("labelguard supports x86_64 and aarch64 Linux (this machine is %s)" % machine)


def _check_config_out_of_process(lib, env):
    """Judges the configuration with the library's own parser in a throwaway process: its
    constructor exits with status 2 and one message on a bad value. Done before loading the library
    here, because in this process that exit would end the interpreter (a notebook's kernel)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LABELGUARD_")}
    clean.update(env)
    clean["LD_PRELOAD"] = lib
    true = "/bin/true" if os.path.exists("/bin/true") else "true"
    try:
        r = subprocess.run([true], env=clean, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LabelguardError("cannot check the configuration (running %s with the library: %s)" % (true, e))
    if r.returncode == 2:
        raise ValueError(r.stderr.strip().replace("labelguard: ", "", 1))
    if r.returncode != 0 or "cannot open shared object" in r.stderr or "ERROR: ld.so" in r.stderr:
        raise LabelguardError("the library %s does not load on this machine: %s\nhint: labelguard needs "
                              "Linux x86_64 or aarch64 with glibc 2.17 or newer" % (lib, r.stderr.strip() or "exit %d" % r.returncode))


def _buf_call(fn, *args):
    """Calls an snprintf-like entry point (buf, cap) -> length and returns the text."""
    cap = 4096
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = fn(*(args + (buf, ctypes.c_size_t(cap))))
        if n < cap:
            return buf.value.decode("utf-8", "replace") if n > 0 else ""
        cap = n + 1


def _bind(lib):
    lib.labelguard_enable.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_enable.restype = ctypes.c_int
    lib.labelguard_last_violation.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_last_violation.restype = ctypes.c_int
    lib.labelguard_config.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_config.restype = ctypes.c_int
    lib.labelguard_config_check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_config_check.restype = ctypes.c_int
    lib.labelguard_disable.argtypes = []
    lib.labelguard_disable.restype = ctypes.c_int
    return lib


def _load(path):
    try:
        return _bind(ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOW))
    except OSError as e:
        raise LabelguardError("cannot load %s: %s\nhint: labelguard needs Linux x86_64 or aarch64 with glibc "
                              "2.17 or newer" % (path, e))
    except AttributeError as e:
        raise LabelguardError("%s is too old for this package (%s): reinstall labelguard" % (path, e))


def _active_config(lib):
    text = _buf_call(lib.labelguard_config)
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}


def _conflicts(lib, env):
    """The options asked for that differ from the loaded library's configuration, as text."""
    active = _active_config(lib)
    out = []
    for var, value in sorted(env.items()):
        key = var[len("LABELGUARD_"):].lower()
        msg = ctypes.create_string_buffer(512)
        rc = lib.labelguard_config_check(var.encode(), os.fsencode(value), msg, 512)
        if rc == -1:
            raise ValueError(msg.value.decode("utf-8", "replace").replace("labelguard: ", "", 1))
        if key in active and not _same(active[key], value):
            out.append("%s=%s (active: %s)" % (key, value, active[key]))
    return out


def _same(active, value):
    """Whether an environment value means the configuration value the library reports."""
    if isinstance(active, bool):
        return value == ("1" if active else "0")
    if active is None:
        return value == ""
    if isinstance(active, int):
        return value.strip() == str(active)
    return value == active or os.path.abspath(value) == os.path.abspath(active)


def enable(action=None, mode=None, log=None, **options):
    """Arms labelguard in this process. Works before `import torch` (objects loaded later are
    armed as they load) and after CUDA has started. Makes no CUDA call: checking starts at the
    process's first CUDA launch. Returns the active configuration as a dict.

    action: raise (default), hold, mask, log, abort   mode: sync (default), async
    log: the JSONL log directory (default labelguard-logs, or $LABELGUARD_LOG)
    options: hooks, kernels, backtrace, samples, quiet, logprob_check, debug_kernels,
    compiled ("on"/True, the default: torch.compile'd losses are checked in the compiled graph;
    "off"/False: left as Inductor makes them), launch_sites ("checked", the default, or "all"/True:
    every launch records its Python line for the report of a device-side assert labelguard did
    not check) (docs/configuration.md).

    Raises ValueError for a bad value (naming the allowed ones), TypeError for an unknown option,
    LabelguardError (a RuntimeError) where the process cannot be guarded: the CUDA context is
    already dead after a device-side assert, the CUDA runtime is linked statically, the platform
    is not supported, or labelguard is already enabled here with another configuration."""
    global _handle
    options.update(action=action, mode=mode, log=log)
    env = _desired(options)
    with _lock:
        _check_platform()
        if _handle is None:
            present = _loaded_copy()
            if present:
                _handle = _load(present)
            else:
                try:
                    path = library_path()
                except LibraryNotFound as e:
                    raise LabelguardError(str(e))
                _check_config_out_of_process(path, env)
                for var in [k for k in os.environ if k.startswith("LABELGUARD_") and k in OPTIONS.values()]:
                    if var not in env:
                        del os.environ[var]
                os.environ.update(env)  # the constructor reads them
                _handle = _load(path)
                env = {}
        conflicts = _conflicts(_handle, env) if env else []
        if conflicts:
            raise LabelguardError("labelguard is already loaded in this process with another configuration: %s; "
                                  "it is fixed for the process's lifetime\nhint: restart the interpreter (the "
                                  "notebook's kernel) and call enable() with these options first"
                                  % "; ".join(conflicts))
        # The start event, which arming may write at once, says what checks compiled losses:
        # the check op, which is installed below once arming succeeds.
        _handle.labelguard_compiled(None)
        why = ctypes.create_string_buffer(1024)
        if _handle.labelguard_enable(why, 1024) < 0:
            raise LabelguardError(why.value.decode("utf-8", "replace") or "labelguard could not arm this process")
        from . import _compiled
        _compiled.install()  # graphs compiled from now on check their losses' targets
        return _active_config(_handle)


def _query_lib():
    """The loaded library for a query, without loading it: None when labelguard is not in this
    process at all."""
    global _handle
    with _lock:
        if _handle is None:
            present = _loaded_copy()
            if present:
                _handle = _load(present)
        return _handle


def last_violation():
    """The last violation of this process as a dict with the JSONL event's fields (kernel, target,
    bad {count, min, max, samples [{index, value}]}, cause, action, outcome, python_stack, ...), or
    None when there was none (or labelguard is not enabled)."""
    lib = _query_lib()
    if lib is None:
        return None
    text = _buf_call(lib.labelguard_last_violation)
    return json.loads(text) if text else None


def config():
    """The active configuration (the start event's `config`) as a dict, or None when labelguard is
    not loaded in this process."""
    lib = _query_lib()
    return _active_config(lib) if lib is not None else None


def disable():
    """Stops checking new launches in this process (a later enable() resumes). Does nothing when
    labelguard is not loaded."""
    lib = _query_lib()
    if lib is not None:
        lib.labelguard_disable()


def load_ipython_extension(ipython):
    """`%load_ext labelguard`: enable() for the kernel's process (see _ipython.py)."""
    from . import _ipython
    _ipython.load(ipython)


def unload_ipython_extension(ipython):
    from . import _ipython
    _ipython.unload(ipython)
