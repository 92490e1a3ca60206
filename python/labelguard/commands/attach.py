"""`labelguard attach PID` (DESIGN.md §2): loads liblabelguard.so into a running process and
calls its labelguard_arm() (late arming, src/hooks/arm.c), then says what was armed.

In order: the PID is checked (a number, a live process), gdb must be installed, and
ptrace_verdict() decides from our uid, the owner, yama's ptrace_scope and CAP_SYS_PTRACE
whether the kernel will let us attach, so a refusal is explained before anything touches
the process. Some kernels and VMs let gdb attach but not write the registers back after a call
into the process (PTRACE_SETREGSET of the xsave area fails), which corrupts it: gdb's call is
first tried on a throwaway `sleep` (gdb_can_call), and where it fails the ptrace injector
labelguard/inject.py (general and legacy FP registers only, x86_64) is tried the same way
(inject_can_call); the user's process is only touched by a way that worked. Both ways make
the same calls (dlopen RTLD_NOW|RTLD_GLOBAL, dlsym, labelguard_arm) and print the same
LG_HANDLE / LG_FN / LG_ARM lines, read back here. Both call in only at a safe point: the
thread they call on is first moved out of malloc/free, the loader, fork, setenv and stdio's
open/close (gdb: GDB_SAFE_POINT, in gdb's Python; the injector: its safe_point), where the
dlopen of the library, which allocates and runs constructors, would wait on a lock that thread
holds; a process that stays there is left untouched (LG_UNSAFE, exit 2, attach again). Every child is an argument vector (gdb reads
its commands from a file; the library path, the only value in it, is refused if it holds a
quote, backslash or newline). Exit 0 when armed, 2 with a message and hint otherwise.
Tested by tests/cli/test_attach.sh (ptrace_verdict called directly from python3),
tests/e2e/test_attach.sh (a real target under the runtime test double), test_arm_mixed.sh (two
runtimes) and test_attach_malloc.sh (a target whose threads are always inside malloc).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from labelguard import _lib
from labelguard.commands._common import Fail
from labelguard.commands._common import require_library

NAME = "attach"
USAGE = """\
  attach PID                  load the guard into a running process (gdb) and arm it
"""
INJECT = os.path.join(_lib.package_dir(), "inject.py")
START_HINT = "hint: start the job under the guard instead: labelguard run -- CMD"


def ptrace_verdict(me, owner, scope, cap):
    """Pure decision: may a process with euid `me` (holding CAP_SYS_PTRACE when cap is true)
    ptrace a process of uid `owner`, under yama's ptrace_scope `scope` ("" or None when yama is
    absent)? Returns None when it may, else two lines: the reason and a hint."""
    scope = "" if scope is None else str(scope).strip()
    cap = str(cap) == "1" or cap is True
    if scope == "3":
        return ("kernel.yama.ptrace_scope is 3: no process may be attached to until reboot.\n"
                "hint: load the guard at start instead: labelguard run -- CMD")
    if scope == "2" and not cap:
        return ("kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach.\n"
                "hint: run labelguard attach as root (sudo), or in a container started with --cap-add=SYS_PTRACE")
    if cap:
        return None
    if str(me) != str(owner):
        return ("process belongs to uid %s and you are uid %s: not permitted to ptrace it.\n"
                "hint: run labelguard attach as that user or as root" % (owner, me))
    if scope == "1":
        return ("kernel.yama.ptrace_scope is 1: only a parent may ptrace its children.\n"
                "hint: run as root, or allow it: sudo sysctl kernel.yama.ptrace_scope=0")
    return None


def has_cap_sys_ptrace():
    """Whether this process holds CAP_SYS_PTRACE (bit 19 of CapEff)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return (int(line.split()[1], 16) >> 19) & 1 == 1
    except (OSError, ValueError, IndexError):
        pass
    return False


def run_limited(argv, limit):
    """Runs argv with stdin from /dev/null, stdout and stderr together; returns (status, text).
    Past `limit` seconds it gets SIGTERM, as timeout(1) does (gdb then detaches from its
    target rather than leaving it stopped), SIGKILL 10 s later; the status is then 124."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        return 127, "%s: %s" % (argv[0], e.strerror)
    try:
        out, _ = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        rc = 124
    return rc, out.decode("utf-8", "replace")


def with_probe(try_call):
    """Starts a throwaway `sleep 30`, runs try_call(its pid) -> output, checks 0.2 s later that
    the probe still lives, then ends it. Returns (pid, output, alive)."""
    probe = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        out = try_call(probe.pid)
        time.sleep(0.2)
        alive = probe.poll() is None
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.wait()
    return probe.pid, out, alive


def gdb_can_call():
    """None when gdb can call a function in a process of ours and let it go on unharmed; else
    the reason, in a few words."""
    call = 'printf "LG_PID %d\\n", ((int(*)(void))getpid)()'
    pid, out, alive = with_probe(lambda p: run_limited(
        ["gdb", "-batch", "-nx", "-p", str(p), "-ex", call, "-ex", "detach"], 30)[1])
    if not re.search(r"^LG_PID %d$" % pid, out, re.M):
        for line in out.split("\n"):
            if "Couldn't" in line or "ptrace" in line or "rror" in line:
                return line
        return "gdb could not call getpid()"
    if not alive:
        return "the test process died after the call"
    return None


def inject_can_call():
    """Whether the ptrace injector can call getpid() in a throwaway process, which lives on."""
    if not os.path.isfile(INJECT):
        return False
    pid, out, alive = with_probe(lambda p: run_limited([sys.executable, INJECT, "--probe", str(p)], 30)[1])
    return bool(re.search(r"^LG_PID %d$" % pid, out, re.M)) and alive


# The safe point for gdb's calls (gdb's Python): the calls run on thread 1, which gdb stopped
# wherever it was. While one of its frames is inside malloc/free, the loader, fork, setenv or
# stdio's list (inject.py's UNSAFE, the loader's _dl_* and ld.so, malloc's internals), a
# thread-specific temporary breakpoint on the return address of the outermost such frame lets
# the job run out of it (the other threads run too during gdb's calls, so their locks are let
# go). Prints "LG_SAFE n" (n breakpoints it took) or "LG_UNSAFE name" (then no call is made).
GDB_SAFE_POINT = """python
import os
UNSAFE = set(n.lstrip("_") for n in %s)
PREFIXES = ("int_", "dl_", "dlopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dlerror", "dlinfo", "dlmopen",
            "libc_malloc", "libc_free", "libc_calloc", "libc_realloc", "libc_memalign", "libc_valloc",
            "libc_pvalloc", "libc_dl", "sysmalloc", "malloc_", "tcache_", "arena_", "IO_un_link", "IO_link_in",
            "IO_new_fopen", "IO_new_fclose", "IO_new_fdopen", "IO_fflush", "fopen_internal", "run_fork_handlers",
            "add_to_environ")
def lg_bad(name, lib):
    if lib.startswith("ld-"):
        return True
    n = name[5:] if name.startswith("__GI_") else name
    n = n.lstrip("_")
    return bool(n) and not n.startswith("libc_start") and (n in UNSAFE or n.startswith(PREFIXES))
def lg_unsafe_caller():
    f, found, depth = gdb.newest_frame(), None, 0
    while f is not None and depth < 512:
        name = f.name() or ""
        lib = os.path.basename(gdb.solib_name(f.pc()) or "")
        if lg_bad(name, lib):
            found = f
        try:
            f, depth = f.older(), depth + 1
        except gdb.error:
            break
    if found is None:
        return None, ""
    return found.older(), found.name() or "?"
gdb.execute("thread 1", to_string=True)
for lg_try in range(50):
    caller, where = lg_unsafe_caller()
    if not where:
        print("LG_SAFE %%d" %% lg_try)
        gdb.set_convenience_variable("lg_safe", 1)
        break
    if caller is None:
        print("LG_UNSAFE %%s" %% where)
        break
    gdb.execute("tbreak *%%d thread 1" %% caller.pc(), to_string=True)
    gdb.execute("continue", to_string=True)
    gdb.execute("thread 1", to_string=True)
else:
    print("LG_UNSAFE %%s" %% where)
end
"""


def gdb_script(lib, loaded):
    """The gdb command file (a file, not -ex strings, because `if ... end` blocks need their
    own lines). $h, $f and $lg_safe are gdb convenience variables. The calls are made only once
    thread 1 is at a safe point (GDB_SAFE_POINT sets $lg_safe)."""
    lines = ["set confirm off", "set pagination off", "set $lg_safe = 0",
             GDB_SAFE_POINT % sorted(unsafe_functions()).__repr__(), "if $lg_safe == 1"]
    if loaded:
        lines.append("set $h = ((void*(*)(const char*, int))dlopen)(0, 2)")
    else:
        # RTLD_NOW|RTLD_GLOBAL = 0x102: resolve everything now, so a missing symbol fails here.
        lines.append('set $h = ((void*(*)(const char*, int))dlopen)("%s", 0x102)' % lib)
    lines += ['printf "LG_HANDLE %lu\\n", (unsigned long)$h',
              "if $h == 0", '  printf "LG_DLERROR %s\\n", ((char*(*)(void))dlerror)()', "end",
              "set $f = 0",
              "if $h != 0", '  set $f = ((void*(*)(void*, const char*))dlsym)($h, "labelguard_arm")', "end",
              'printf "LG_FN %lu\\n", (unsigned long)$f',
              "if $f != 0", '  printf "LG_ARM %d\\n", ((int(*)(void))$f)()', "end",
              "end", "detach", "quit"]
    return "\n".join(lines) + "\n"


def unsafe_functions():
    """inject.py's UNSAFE list (one list for both ways), read from its file without importing
    the package's commands into it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("labelguard_inject", INJECT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.UNSAFE


def last(pattern, text):
    """The group of the last line of text that matches pattern entirely, or None."""
    found = re.findall("^%s$" % pattern, text, re.M)
    return found[-1] if found else None


def describe_arm(n):
    """labelguard_arm() returns the number of launch entry points it redirected
    (include/labelguard.h); the process's stderr gets the details."""
    if n > 0:
        print("  armed: %d CUDA launch entry point(s) now go through the guard; the process's stderr has "
              "the details" % n)
    else:
        print("  nothing was redirected: the process has no CUDA runtime loaded yet, or only CUPTI was started")
        print("  hint: attach again after the job has started using CUDA; see the process's stderr")


def main(argv):
    if len(argv) != 1:
        raise Fail(2, "usage: labelguard attach PID")
    pid = argv[0]
    if not re.match(r"^[1-9][0-9]{0,9}\Z", pid):
        raise Fail(2, "attach: '%s' is not a process id" % pid, "hint: find it with pgrep -f train.py")
    if not os.path.isdir("/proc/%s" % pid):
        raise Fail(2, "attach: no such process: %s" % pid, "hint: check the PID with ps -p %s" % pid)
    if shutil.which("gdb") is None:
        raise Fail(2, "attach needs gdb, which is not installed", "hint: apt-get install gdb")
    try:
        owner = os.stat("/proc/%s" % pid).st_uid
    except OSError:
        raise Fail(2, "attach: no such process: %s" % pid)
    scope = ""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            scope = f.read().strip()
    except OSError:
        pass
    why = ptrace_verdict(os.geteuid(), owner, scope, has_cap_sys_ptrace())
    if why:
        reason, _, hint = why.partition("\n")
        raise Fail(2, "attach: cannot attach to process %s: %s" % (pid, reason), hint)
    lib = require_library()
    # The path goes into a gdb string literal: refuse the characters that would end or escape it.
    if any(c in lib for c in '"\\\n'):
        raise Fail(2, "library path '%s' contains a quote, backslash or newline" % lib,
                   "hint: copy it to a plain path and set LABELGUARD_LIB")

    # Try the ways on a throwaway process first, so the user's job is never the one that finds out.
    method = "gdb"
    why_not = gdb_can_call()
    if why_not is not None:
        if inject_can_call():
            method = "inject"
        else:
            raise Fail(2, "attach: gdb cannot call functions in a process on this machine (%s); process %s was "
                       "not touched" % (why_not, pid), START_HINT)
    try:
        with open("/proc/%s/maps" % pid, errors="replace") as f:
            loaded = lib in f.read()
    except OSError:
        loaded = False
    if method == "gdb":
        try:
            fd, script = tempfile.mkstemp(prefix="labelguard-attach.")
        except OSError:
            raise Fail(2, "attach: cannot create a temporary file", "hint: check TMPDIR")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(gdb_script(lib, loaded))
            rc, out = run_limited(["gdb", "-batch", "-nx", "-p", pid, "-x", script], 60)
        finally:
            os.unlink(script)
    else:
        rc, out = run_limited([sys.executable, INJECT, pid, lib], 60)
    arm = last(r"LG_ARM (-?[0-9]+)", out)
    handle = last(r"LG_HANDLE ([0-9]+)", out)
    fn = last(r"LG_FN ([0-9]+)", out)
    if handle is None:
        where = last(r"LG_UNSAFE (.*)", out)
        if where is not None or "it was not touched" in out:
            raise Fail(2, "attach: process %s stayed inside %s, where a call into it could hang it; it was not "
                       "touched" % (pid, where or "malloc/free or the loader"), "hint: attach again")
        if "Operation not permitted" in out:
            raise Fail(2, "attach: the kernel refused ptrace on process %s (Operation not permitted)" % pid,
                       "hint: check kernel.yama.ptrace_scope, the process owner, and that the process is not being "
                       "traced already")
        bad = [l for l in out.split("\n") if "extended state" in l or "Couldn't write" in l]
        if bad:
            raise Fail(2, "attach: gdb attached but cannot call functions in process %s on this kernel/VM (%s)" %
                       (pid, bad[0]), START_HINT)
        tail = out.rstrip("\n").split("\n")[-5:]
        sys.stderr.write("\n".join(tail) + "\n")
        raise Fail(2, "attach: gdb could not call into process %s (gdb exit %d; its last lines are above)" % (pid, rc),
                   "hint: the process needs a dynamic libc (dlopen); a static binary cannot load the guard")
    if handle == "0":
        err = last(r"LG_DLERROR (.*)", out) or ""
        raise Fail(2, "attach: dlopen of %s failed in process %s: %s" % (lib, pid, err),
                   "hint: the library must be readable by the process's user and built for its architecture")
    if fn == "0":
        raise Fail(2, "attach: %s has no labelguard_arm() (too old a build?)" % lib, "hint: rebuild with make")
    if arm is None:
        raise Fail(2, "attach: labelguard_arm() did not return in process %s (gdb exit %d)" % (pid, rc))
    n = int(arm)
    if n < 0:
        raise Fail(2, "attach: labelguard_arm() failed in process %s (returned %d)" % (pid, n),
                   "hint: see the process's stderr and its JSONL log for the reason (no CUDA runtime, CUPTI busy?)")
    print("labelguard: attached to process %s%s%s; labelguard_arm() returned %d" % (
        pid, " (library was already loaded)" if loaded else "",
        " (through ptrace: gdb cannot call functions here)" if method == "inject" else "", n))
    describe_arm(n)
    return 0
