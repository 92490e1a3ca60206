#!/usr/bin/env python3
"""labelguard/inject.py: the gdb-less way for `labelguard attach` (x86_64 Linux, glibc >= 2.34).

Usage: python3 inject.py PID LIB   dlopen(LIB, RTLD_NOW|RTLD_GLOBAL) in PID, then call its
                                   labelguard_arm(); prints "LG_HANDLE n", "LG_FN n", "LG_ARM n"
                                   (the lines commands/attach.py reads from gdb too)
       python3 inject.py --probe PID   call getpid() in PID; prints "LG_PID n"
(or python3 -m labelguard.inject ...). A file of its own, standard library only and importing
nothing of the package, so that attach runs it as a child by its path, with a timeout.

Why: gdb 13 cannot make calls in a process on some kernels/CPUs (it fails writing the xsave
area: "Couldn't write extended state status: Bad address", which also leaves the process
broken). This does what gdb's `call` does while writing only the general and the legacy FP
registers (PTRACE_SETREGS / SETFPREGS), as tests/e2e/test_attach.sh's injector does:
stop the process, point rip at the function with a return address of 0 on a scratch stack
below the red zone, let it run until it faults on the return, read rax, restore everything.
Function addresses in the target come from this process's libc (same file, same offsets).
commands/attach.py runs --probe on a throwaway process first and uses this only when gdb
cannot call. Exit 0 on success, 2 with a message on failure. Tested by tests/cli/test_attach.sh
and tests/e2e/test_attach.sh.
"""
import ctypes
import os
import signal
import sys

ATTACH, DETACH, CONT, GETREGS, SETREGS, GETFPREGS, SETFPREGS = 16, 17, 7, 12, 13, 14, 15
RTLD_NOW_GLOBAL = 0x102


class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
        "fs_base gs_base ds es fs gs").split()]


def fail(msg):
    sys.stderr.write("lg_inject: %s\n" % msg)
    sys.exit(2)


def mapped_base(pid, path):
    with open("/proc/%s/maps" % pid) as f:
        for line in f:
            x = line.split()
            if len(x) >= 6 and os.path.realpath(x[5]) == path and int(x[2], 16) == 0:
                return int(x[0].split("-")[0], 16)
    return None


def libc_path(pid):
    with open("/proc/%s/maps" % pid) as f:
        for line in f:
            x = line.split()
            if len(x) >= 6 and os.path.basename(x[5]).startswith("libc.so"):
                return os.path.realpath(x[5])
    return None


def main(argv):
    if os.uname().machine != "x86_64":
        fail("only x86_64 is supported")
    probe = argv[:1] == ["--probe"]
    if probe:
        argv = argv[1:]
    if len(argv) != (1 if probe else 2) or not argv[0].isdigit():
        fail("usage: inject.py PID LIB | --probe PID")
    pid = int(argv[0])
    lib = os.path.realpath(argv[1]) if not probe else None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

    def pt(req, data=None):
        if libc.ptrace(req, pid, None, data) < 0:
            e = ctypes.get_errno()
            raise OSError(e, "ptrace(%d): %s" % (req, os.strerror(e)))

    lc = libc_path("self")
    if not lc or libc_path(pid) != lc:
        fail("process %d does not use this libc (%s); cannot locate dlopen in it" % (pid, lc))
    delta = mapped_base(pid, lc) - mapped_base("self", lc)

    def addr(name):
        return ctypes.cast(getattr(libc, name), ctypes.c_void_p).value + delta

    try:
        pt(ATTACH)
    except OSError as e:
        fail("cannot attach to process %d: %s" % (pid, e.strerror))
    os.waitpid(pid, 0)
    saved = Regs()
    pt(GETREGS, ctypes.byref(saved))
    fp = ctypes.create_string_buffer(512)
    pt(GETFPREGS, fp)
    mem = open("/proc/%d/mem" % pid, "r+b", buffering=0)
    scratch = (saved.rsp - 4096) & ~0xF      # below the red zone and the current frame
    saved_stack = None

    def call(fn, a0=0, a1=0):
        r = Regs.from_buffer_copy(saved)
        r.rsp = scratch - 8                  # 16-aligned at entry, as after a `call`
        mem.seek(r.rsp)
        mem.write(b"\0" * 8)                 # return address 0: the return faults back to us
        r.rip, r.rdi, r.rsi, r.rax = fn, a0, a1, 0
        r.orig_rax = 2**64 - 1               # not in a syscall: no restart logic
        pt(SETREGS, ctypes.byref(r))
        while True:
            pt(CONT)
            _, st = os.waitpid(pid, 0)
            if not os.WIFSTOPPED(st):
                fail("process %d died during the call" % pid)
            out = Regs()
            pt(GETREGS, ctypes.byref(out))
            if os.WSTOPSIG(st) == signal.SIGSEGV and out.rip == 0:
                return out.rax

    try:
        # Keep the bytes we overwrite below the stack pointer, and put them back afterwards.
        mem.seek(scratch - 8)
        saved_stack = mem.read(8 + 64 + 4096)
        if probe:
            print("LG_PID %d" % call(addr("getpid")))
            return 0
        path_addr = scratch + 64
        mem.seek(path_addr)
        mem.write(lib.encode() + b"\0")
        handle = call(addr("dlopen"), path_addr, RTLD_NOW_GLOBAL)
        print("LG_HANDLE %d" % handle)
        if not handle:
            return 0
        name_addr = scratch + 64 + len(lib) + 8
        mem.seek(name_addr)
        mem.write(b"labelguard_arm\0")
        fn = call(addr("dlsym"), handle, name_addr)
        print("LG_FN %d" % fn)
        if fn:
            v = call(fn) & 0xFFFFFFFF
            print("LG_ARM %d" % (v - 2**32 if v >= 2**31 else v))
        return 0
    finally:
        if saved_stack is not None:
            mem.seek(scratch - 8)
            mem.write(saved_stack)
        pt(SETFPREGS, fp)
        pt(SETREGS, ctypes.byref(saved))
        pt(DETACH)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
