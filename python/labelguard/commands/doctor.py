"""`labelguard doctor [CMD ARGS...]` (DESIGN.md §2).

Says what liblabelguard.so will see when it is preloaded into CMD in this environment: GPU,
driver, the CUDA runtime the target uses (inside torch's wheel for a Python command, from
ldd for a binary), CUPTI, the library itself, and the hooks, backend and Python layout
(version, free-threaded or not, whether stacks are read) the library itself reports: a probe process loads the target's runtime, starts the library (labelguard_arm) and
the `start` event it writes is read back, so the answer is the library's, not a guess. Each line
has ✓ or ✗ and, for ✗, a hint. Exit 0 when the guard can work, 2 when it cannot.
main() is called by labelguard.cli with CMD ARGS...; the library is _lib.library_path()'s.
Standard library only; it loads libraries with ctypes in a child process, never in itself, so
a crashing probe costs nothing. For a Python command whose torch is a CUDA build it also
reports the loss-kernel coverage of that build (check_kernels, through labelguard.torch_audit
and the library's labelguard_coverage()).
Tested by tests/cli/test_doctor.sh (under the runtime test double, and without CMD) and
tests/cli/test_audit.sh (coverage line for a fake torch package tree).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

from labelguard import _lib

NAME = "doctor"
USAGE = """\
  doctor [CMD ARGS...]        check GPU, driver, CUDA runtime (of CMD), CUPTI and the library
"""

OK, BAD, INFO = "\u2713", "\u2717", "-"
ALLOWED_DEPS = ("linux-vdso", "libc.so", "ld-linux", "libm.so", "libdl.so", "libpthread.so",
                "librt.so", "ld64.so")


def out(mark, what, detail="", hint=""):
    line = "%s %-14s %s" % (mark, what, detail)
    sys.stdout.write(line.rstrip() + "\n")
    if hint:
        sys.stdout.write("  %s hint: %s\n" % (" " * 14, hint))


def run(argv, env=None, timeout=60):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=timeout, universal_newlines=True, errors="replace")
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)


def ldconfig_find(prefix):
    """Paths from the ld.so cache whose name starts with prefix."""
    tool = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if not tool:
        return []
    rc, so, _ = run([tool, "-p"])
    found = []
    for line in so.splitlines():
        m = re.match(r"\s*(\S+) .*=> (\S+)", line)
        if m and m.group(1).startswith(prefix):
            found.append(m.group(2))
    return found


PROBE_DRIVER = r"""
import ctypes, sys
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("NOLOAD", e); sys.exit(0)
v = ctypes.c_int(0)
rc = cu.cuDriverGetVersion(ctypes.byref(v))
init = cu.cuInit(0)
n = ctypes.c_int(0)
cnt = cu.cuDeviceGetCount(ctypes.byref(n)) if init == 0 else init
print("OK", v.value if rc == 0 else -1, init, n.value if cnt == 0 else -1)
"""

PROBE_TORCH = r"""
import os, sys, glob
try:
    import torch
except Exception as e:
    print("NOTORCH", type(e).__name__, str(e).splitlines()[0] if str(e) else ""); sys.exit(0)
d = os.path.dirname(torch.__file__)
print("TORCH", torch.__version__, getattr(torch.version, "cuda", None) or "none", d)
site = os.path.dirname(d)
libs = sorted(glob.glob(os.path.join(d, "lib", "libcudart*.so*")) +
              glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*")) +
              glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libcudart.so*")))
for l in libs: print("CUDART", l)
for l in sorted(glob.glob(os.path.join(d, "lib", "libcupti*.so*")) +
                glob.glob(os.path.join(site, "nvidia", "cuda_cupti", "lib", "libcupti.so*")) +
                glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libcupti.so*"))):
    print("CUPTI", l)
tc = os.path.join(d, "lib", "libtorch_cuda.so")
if os.path.exists(tc): print("TORCHCUDA", tc)
"""


# Runs under the library (LD_PRELOAD): loads the target's runtime (argv[1], or torch for a
# Python target, or nothing), then starts the library (labelguard_start: arming alone does not),
# which writes its `start` event.
PROBE_START = r"""
import ctypes, os, sys
what = sys.argv[1]
if what == "torch":
    import torch
elif what:
    ctypes.CDLL(what, mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(os.environ["LG_PROBE_LIB"])
print("ARM", lib.labelguard_arm())
print("START", lib.labelguard_start())
"""


def probe_start(lib, python, runtime):
    """The `start` event the library writes in a probe process, or None (with why)."""
    import json
    import tempfile
    if not lib:
        return None, "no library"
    with tempfile.TemporaryDirectory(prefix="lg-doctor-") as logs:
        env = dict(os.environ, LD_PRELOAD=lib, LG_PROBE_LIB=lib, LABELGUARD_LOG=logs, LABELGUARD_QUIET="1")
        rc, so, se = run([python, "-c", PROBE_START, runtime or ""], env=env, timeout=120)
        for name in sorted(os.listdir(logs)):
            with open(os.path.join(logs, name), errors="replace") as f:
                for line in f:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(ev, dict) and ev.get("event") == "start":
                        return ev, ""
        return None, (se.strip().splitlines() or ["the probe wrote no start event (exit %d)" % rc])[-1]


def needed(path):
    """DT_NEEDED names of an ELF file, via readelf or objdump; None if neither works."""
    for tool in (["readelf", "-d", path], ["objdump", "-p", path]):
        if shutil.which(tool[0]):
            rc, so, _ = run(tool)
            if rc == 0:
                return re.findall(r"NEEDED\)?\s+(?:Shared library: \[)?([^\]\s]+)", so)
    return None


def check_library(lib):
    if not lib:
        out(BAD, "library", "liblabelguard.so not found",
            "build it with `make`, or set LABELGUARD_LIB=/path/to/liblabelguard.so")
        return False
    if not os.path.isfile(lib):
        out(BAD, "library", lib + ": no such file", "run `make`, or fix LABELGUARD_LIB")
        return False
    ok = True
    deps = needed(lib)   # DT_NEEDED: what the dynamic loader must find for the library
    if deps is None and shutil.which("ldd"):
        rc, so, se = run(["ldd", lib])
        deps = [] if "statically linked" in so else [l.split()[0] for l in so.splitlines() if "=>" in l]
    if deps is None:
        out(INFO, "library", "%s (no readelf/objdump/ldd to check its dependencies)" % lib)
    else:
        extra = [d for d in deps if not any(d.startswith(a) for a in ALLOWED_DEPS)]
        if extra:
            out(BAD, "library", "%s depends on %s" % (lib, ", ".join(extra)),
                "the library must need libc only (glib linked statically), or a container "
                "without those libraries runs unguarded; rebuild with `make`")
            ok = False
        else:
            out(OK, "library", "%s (needs libc only; glib linked in statically)" % lib)
    env = dict(os.environ, LD_PRELOAD=lib)
    true = shutil.which("true") or "/bin/true"
    rc, so, se = run([true], env=env)
    if rc != 0 or "cannot be preloaded" in se or "ERROR: ld.so" in se:
        out(BAD, "preload", "LD_PRELOAD=%s %s fails: %s" % (lib, true, se.strip()[:200]),
            "rebuild with `make`; check the path and permissions")
        ok = False
    else:
        out(OK, "preload", "loads into a process cleanly (%s)" % ("silent" if not se.strip() else se.strip()[:80]))
    return ok


def check_kernels(tdir):
    """Coverage of this torch's loss kernels by the spec table, through torch_audit: the
    committed table of the same build (version + CUDA, data wheels/: tests/wheels/ in a
    checkout) when there is one, else the kernels read from the installed libraries themselves.
    The matching is the library's registry (torch_audit.run_coverage), so the line says what
    the guard will decode."""
    from labelguard import torch_audit
    tmp = None
    try:
        src = torch_audit.Source(tdir)
        build = src.build_name()
        table = torch_audit.find_table(build)
        where = "table %s" % torch_audit.shown(table) if table else ""
        if not table:
            sys.stderr.write("labelguard doctor: no table for torch %s; reading its kernels from %s (a minute)\n"
                             % (build, tdir))
            rows, entries, notes = torch_audit.audit(src, quiet=True)
            import tempfile
            fd, tmp = tempfile.mkstemp(prefix="lg_doctor.", suffix=".tsv")
            with os.fdopen(fd, "w") as f:
                f.write(torch_audit.table_text(src, rows, entries, notes))
            table = tmp
            where = "read from %s; no committed table" % os.path.join(tdir, "lib")
        rc, lines = torch_audit.run_coverage(table, quiet=True)
        launch = torch_audit.launch_summary(torch_audit.table_entries(table))
    except torch_audit.AuditError as e:
        msg = str(e).split("\n---> HINT: ")
        out(BAD, "kernels", "loss-kernel coverage unknown: %s" % msg[0],
            msg[1] if len(msg) > 1 else "run labelguard audit on the torch wheel for details")
        return False
    finally:
        if tmp:
            os.unlink(tmp)
    line = lines[-1] if lines else "?"
    m = re.search(r": (\d+) loss kernels", line)
    if m and m.group(1) == "0":
        out(BAD, "kernels", "%s (%s)" % (line, where),
            "no NLL kernel found in torch's libraries: a build this reader does not know; run labelguard audit")
        return False
    out(OK if rc == 0 else BAD, "kernels", "%s (%s)" % (line, where),
        "" if rc == 0 else "labelguard audit %s lists the kernels no spec covers" % tdir)
    out(INFO, "launch", "torch launches through %s" % launch)
    return rc == 0


def python_like(cmd):
    # python3, python3.11, and wrappers named like one (build/torch-python, conda-python)
    return bool(cmd) and re.search(r"(^|[-_])python[0-9.]*$", os.path.basename(cmd[0])) is not None


def find_library():
    """The library doctor checks: _lib.library_path()'s, else $LABELGUARD_LIB as given (so a
    wrong one is reported as missing), else "" (not found)."""
    try:
        return _lib.library_path()
    except _lib.LibraryNotFound:
        return os.environ.get("LABELGUARD_LIB", "")


def main(argv):
    cmd = list(argv)
    lib = find_library()
    hooks_env = os.environ.get("LABELGUARD_HOOKS", "auto")

    sys.stdout.write("labelguard doctor%s\n" % ((": for " + " ".join(cmd)) if cmd else ""))
    lib_ok = check_library(lib)

    # GPU
    gpus = []
    if shutil.which("nvidia-smi"):
        rc, so, _ = run(["nvidia-smi", "-L"], timeout=30)
        if rc == 0:
            gpus = [l for l in so.splitlines() if l.startswith("GPU")]
    devnodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    if gpus:
        out(OK, "GPU", "; ".join(gpus[:4]) + (" ..." if len(gpus) > 4 else ""))
    elif devnodes:
        out(OK, "GPU", "device nodes %s (nvidia-smi not available)" % ", ".join(devnodes[:4]))
    else:
        out(BAD, "GPU", "none visible (no /dev/nvidia*, nvidia-smi lists nothing)",
            "on a GPU node, check the container's --gpus flag / CUDA_VISIBLE_DEVICES; without a GPU "
            "the guard works only under the test double (make demo)")

    # Driver
    rc, so, se = run([sys.executable, "-c", PROBE_DRIVER])
    driver = False
    if so.startswith("OK"):
        _, ver, init, n = so.split()[:4]
        ver = int(ver)
        vtxt = "%d.%d" % (ver // 1000, (ver % 1000) // 10) if ver > 0 else "unknown"
        if init == "0":
            out(OK, "driver", "libcuda.so.1 loads, CUDA driver API %s, %s device(s)" % (vtxt, n))
            driver = True
        else:
            out(BAD, "driver", "libcuda.so.1 loads (API %s) but cuInit failed with %s" % (vtxt, init),
                "no usable GPU for this process: check nvidia-smi and CUDA_VISIBLE_DEVICES")
    else:
        out(BAD, "driver", "libcuda.so.1 cannot be loaded",
            "install the NVIDIA driver (or mount it into the container); without it the guard "
            "validates on the host (test double only)")

    # CUDA runtime in the target
    cudart_shared = None     # True: interposable; False: static or absent
    cupti_paths = []
    probe_python, probe_runtime = sys.executable, ""   # what the start probe loads
    if cmd and python_like(cmd):
        exe = shutil.which(cmd[0]) or cmd[0]
        rc, so, se = run([exe, "-c", PROBE_TORCH], timeout=120)
        lines = so.splitlines()
        torch_line = [l for l in lines if l.startswith("TORCH ")]
        if rc != 0 and not lines:
            out(BAD, "runtime", "%s could not run: %s" % (exe, se.strip()[:200]), "check the command")
            cudart_shared = False
        elif not torch_line:
            out(BAD, "runtime", "%s: torch is not importable (%s)" % (exe, " ".join(lines[0].split()[1:]) if lines else "?"),
                "activate the environment your job uses, then run doctor again")
            cudart_shared = False
        else:
            _, ver, cuda, tdir = torch_line[0].split(" ", 3)
            cudarts = [l.split(" ", 1)[1] for l in lines if l.startswith("CUDART ")]
            cupti_paths += [l.split(" ", 1)[1] for l in lines if l.startswith("CUPTI ")]
            tc = [l.split(" ", 1)[1] for l in lines if l.startswith("TORCHCUDA ")]
            if cuda == "none":
                out(BAD, "runtime", "torch %s is a CPU-only build (%s)" % (ver, tdir),
                    "install a CUDA build of torch; a CPU build never launches CUDA kernels")
                cudart_shared = False
            else:
                dyn = None
                if tc:
                    nd = needed(tc[0])
                    if nd is not None:
                        dyn = any(n.startswith("libcudart") for n in nd)
                if dyn is False:
                    out(BAD, "runtime", "torch %s (CUDA %s) links the CUDA runtime statically" % (ver, cuda),
                        "interposition cannot see its launches; the guard relies on CUPTI (needs the driver)")
                    cudart_shared = False
                else:
                    out(OK, "runtime", "torch %s, CUDA %s, shared runtime %s" % (
                        ver, cuda, cudarts[0] if cudarts else "(from the system)"))
                    cudart_shared = True
                probe_python, probe_runtime = exe, "torch"
                check_kernels(tdir)
    elif cmd:
        exe = shutil.which(cmd[0]) or cmd[0]
        if not os.path.isfile(exe):
            out(BAD, "runtime", "%s: command not found" % cmd[0], "give the command as you would run it")
            cudart_shared = False
        else:
            rc, so, se = run(["ldd", exe])
            m = re.search(r"(libcudart\.so\S*) => (\S+)", so)
            nf = re.search(r"(libcudart\.so\S*) => not found", so)
            if m:
                out(OK, "runtime", "%s uses the shared CUDA runtime %s" % (exe, m.group(2)))
                cudart_shared = True
                probe_runtime = m.group(2)
            elif nf:
                out(BAD, "runtime", "%s needs %s, which is not found" % (exe, nf.group(1)),
                    "set LD_LIBRARY_PATH to the CUDA runtime's directory")
                cudart_shared = False
            else:
                try:
                    with open(exe, "rb") as f:
                        static = b"cudaLaunchKernel" in f.read()
                except OSError:
                    static = False
                if static:
                    out(BAD, "runtime", "%s has the CUDA runtime linked in statically" % exe,
                        "build with `nvcc -cudart shared` for interposition; otherwise only CUPTI can see launches")
                else:
                    out(INFO, "runtime", "%s links no CUDA runtime (it may load one at run time, or use none)" % exe)
                cudart_shared = False
    else:
        found = ldconfig_find("libcudart.so")
        home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        found += sorted(glob.glob(os.path.join(home, "lib64", "libcudart.so.*")))
        if found:
            out(OK, "runtime", "CUDA runtime on this system: %s" % found[0])
            probe_runtime = found[0]
        else:
            out(INFO, "runtime", "no system CUDA runtime (PyTorch wheels bring their own)",
                "give your command to check its runtime: labelguard doctor python train.py")

    # CUPTI
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d:
            cupti_paths += sorted(glob.glob(os.path.join(d, "libcupti.so*")))
    cupti_paths += ldconfig_find("libcupti.so")
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cupti_paths += sorted(glob.glob(os.path.join(home, "extras", "CUPTI", "lib64", "libcupti.so*")))
    cupti_paths += sorted(glob.glob(os.path.join(home, "lib64", "libcupti.so*")))
    if cupti_paths and not driver:
        # Found, but cuptiSubscribe needs a working driver: it will not be used here, as the
        # library's own cupti_unavailable warning will say.
        out(INFO, "CUPTI", "%s (unused here: CUPTI needs a working GPU driver)" % cupti_paths[0])
    elif cupti_paths:
        out(OK, "CUPTI", cupti_paths[0])
    else:
        out(BAD, "CUPTI", "libcupti.so not found",
            "install the CUDA toolkit's CUPTI or pip's nvidia-cuda-cupti; needed for static runtimes, "
            "driver-API launches (Triton) and attach")

    # Which hooks and backend: what the library's own start event says in a probe.
    note = "LABELGUARD_HOOKS=%s" % hooks_env
    start, why = probe_start(lib if lib_ok else "", probe_python, probe_runtime)
    hooks = [h for h in (start or {}).get("hooks") or [] if isinstance(h, str)]
    if hooks:
        reason = (start or {}).get("hooks_reason")
        out(OK, "hooks", "%s (%s%s)" % (" + ".join(hooks), note, "; " + reason if isinstance(reason, str) else ""))
    else:
        out(BAD, "hooks", "none will see kernel launches (%s%s)" % (note, "; " + why if why else ""),
            "use a shared CUDA runtime (interpose) or a driver + CUPTI (cupti)")
    backend = (start or {}).get("backend")
    if backend == "gpu":
        out(OK, "backend", "gpu (validator kernel on the launch's stream)")
    elif backend == "host":
        out(INFO, "backend", "host (labels copied and checked on the CPU; right for the test double, not for real GPUs)")
    else:
        out(INFO, "backend", "unknown: the library did not start in the probe (%s)" % (why or "no start event"))
    # The interpreter the probe ran (the command's, else this one; not for a native command,
    # which the probe only stands in for): whether reports will name the launching Python
    # line, as the library itself decided.
    py = (start or {}).get("python")
    if isinstance(py, dict) and (not cmd or python_like(cmd)):
        what = "CPython %s%s" % (py.get("version"), ", free-threaded" if py.get("free_threaded") else "")
        if py.get("stacks"):
            out(OK, "python", "%s: Python stacks are read (reports name the launching line)" % what)
        else:
            out(INFO, "python", "%s: Python stacks are not read (%s)" % (what, py.get("why")),
                "reports still give the kernel, the bad values and the native stack")
    usable = lib_ok and bool(hooks)
    where = "" if driver else ", but only under the test double (no GPU driver: try make demo or make test)"
    sys.stdout.write("\n%s\n" % ("labelguard can guard this command%s." % where if usable and cmd else
                                 "labelguard can be used here%s." % where if usable else
                                 "labelguard cannot guard %s: fix the lines marked %s above." %
                                 ("this command" if cmd else "here", BAD)))
    return 0 if usable else 2

