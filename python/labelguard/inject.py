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
cannot call. Exit 0 on success, 2 with a message on failure. Tested by tests/cli/test_attach.sh,
tests/e2e/test_attach.sh and tests/e2e/test_attach_malloc.sh.

The safe point: the call runs on the thread we stopped, wherever it was. Stopped inside malloc
or free (holding its arena's lock), in the loader (holding its lock, a link map half updated),
in fork or setenv, that thread's own dlopen (which allocates and runs our constructor) would
wait on itself for good. So before calling, the stopped thread's pc and the return addresses on
its stack (words that point just after a call instruction) are compared with the loader's code
and libc's allocator, loader, fork and environment functions (from libc's .dynsym: the
internal _int_malloc is reached through malloc, whose return address is on the stack); while
one matches, the thread is let go and stopped again (SIGSTOP through tgkill), up to
SAFE_TRIES times, after which the process is left untouched (exit 2).
Before letting it go, the thread is single-stepped until those frames have returned, which
is quicker and certain where the scan read the stack right.
"""
import array
import ctypes
import os
import signal
import struct
import sys
import time

SINGLESTEP = 9
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


# libc functions that hold a lock the call needs (the arena's, the loader's, atfork's, the
# environment's, stdio's list) or leave state half changed while they run.
UNSAFE = frozenset("""
malloc free calloc realloc reallocarray memalign posix_memalign aligned_alloc valloc pvalloc cfree
malloc_trim malloc_usable_size malloc_stats malloc_info mallopt mallinfo mallinfo2
__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc __libc_pvalloc
dlopen dlmopen dlclose dlsym dlvsym dladdr dladdr1 dlinfo dlerror dl_iterate_phdr
__libc_dlopen_mode __libc_dlsym __libc_dlvsym __libc_dlclose
fork _Fork vfork __register_atfork setenv unsetenv putenv clearenv
fopen fopen64 fdopen freopen freopen64 fclose fflush fcloseall _IO_flush_all exit
""".split())
SAFE_TRIES = 200
STEP_LIMIT = 200000    # single steps to leave the unsafe frames (malloc's slow paths take thousands)
STACK_SCAN = 1 << 20   # bytes of the stack above the stack pointer read for return addresses


def elf_functions(path, names):
    """{name: (value, size)} of the defined functions among names in the ELF file's .dynsym, and
    the lowest PT_LOAD vaddr (the load bias is the mapping of offset 0 minus it)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return {}, 0
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    low = min([struct.unpack_from("<IIQQ", data, phoff + i * phentsize)[3] for i in range(phnum)
               if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 1] or [0])
    out = {}
    for i in range(shnum):
        sh = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, sh + 4)
        if sh_type != 11:                    # SHT_DYNSYM
            continue
        off, size, link, _, entsize = struct.unpack_from("<QQIIQQ", data, sh + 0x18)[0:5]
        stroff, = struct.unpack_from("<Q", data, shoff + link * shentsize + 0x18)
        for k in range(size // entsize):
            name, info, _, shndx, value, sz = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
            if shndx == 0 or value == 0 or info & 0xf not in (2, 10):   # FUNC, IFUNC
                continue
            end = data.index(b"\0", stroff + name)
            n = data[stroff + name:end].decode("ascii", "replace")
            if n in names:
                out[n] = (value, max(sz, 1))
    return out, low


def unsafe_ranges(pid, libc):
    """[(lo, hi)] of the target's code that a call must not interrupt: ld.so's executable
    mappings and libc's UNSAFE functions."""
    ranges = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            x = line.split()
            if len(x) >= 6 and "x" in x[1] and os.path.basename(x[5]).startswith("ld-"):
                lo, hi = (int(v, 16) for v in x[0].split("-"))
                ranges.append((lo, hi))
    funcs, low = elf_functions(libc, UNSAFE)
    bias = mapped_base(pid, libc) - low
    ranges += [(bias + v, bias + v + sz) for v, sz in funcs.values()]
    return sorted(ranges)


def stack_end(pid, sp):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= sp < hi:
                return hi
    return sp


def after_call(mem, v):
    """Whether v points just after a call instruction (e8 rel32, ff /2 forms)."""
    try:
        mem.seek(v - 7)
        b = mem.read(7)
    except (OSError, ValueError, OverflowError):
        return False
    if len(b) != 7:
        return False
    return (b[2] == 0xe8 or (b[5] == 0xff and 0xd0 <= b[6] <= 0xd7) or
            (b[4] == 0xff and (b[5] & 0x38) == 0x10) or (b[1] == 0xff and (b[2] & 0x38) == 0x10) or
            (b[0] == 0xff and (b[1] & 0x38) == 0x10) or (b[3] == 0xff and (b[4] & 0x38) == 0x10))


def hit(ranges, v):
    for lo, hi in ranges:
        if lo <= v < hi:
            return True
    return False


def in_unsafe(ranges, mem, pc, sp, top):
    """None when neither pc nor a return address on the stack is in ranges; else the stack
    address just above the outermost such return address (sp - 8 when only pc is): the thread
    is out once its stack pointer is past it and its pc is outside ranges."""
    found = sp - 8 if hit(ranges, pc) else None
    lo_all, hi_all = ranges[0][0], max(h for _, h in ranges)
    n = min(top - sp, STACK_SCAN) // 8
    try:
        mem.seek(sp)
        words = array.array("Q", mem.read(n * 8))
    except (OSError, ValueError, OverflowError):
        return found
    for i, v in enumerate(words):
        if lo_all <= v < hi_all and hit(ranges, v) and after_call(mem, v):
            found = sp + 8 * i
    return found


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
    mem = open("/proc/%d/mem" % pid, "r+b", buffering=0)
    if not probe:
        try:
            safe_point(pt, pid, lc, mem)
        except Exception:
            pt(DETACH)
            raise
    saved = Regs()
    pt(GETREGS, ctypes.byref(saved))
    fp = ctypes.create_string_buffer(512)
    pt(GETFPREGS, fp)
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


def step_out(pt, pid, ranges, slot):
    """Single-steps the stopped thread until its pc is outside ranges with its stack pointer
    past slot (the unsafe frames returned); False if it did not within STEP_LIMIT steps."""
    sig = 0
    for _ in range(STEP_LIMIT):
        pt(SINGLESTEP, ctypes.c_void_p(sig))
        _, st = os.waitpid(pid, 0)
        if not os.WIFSTOPPED(st):
            fail("process %d ended while waiting for a safe point" % pid)
        sig = 0 if os.WSTOPSIG(st) in (signal.SIGTRAP, signal.SIGSTOP) else os.WSTOPSIG(st)
        r = Regs()
        pt(GETREGS, ctypes.byref(r))
        if r.rsp > slot and not hit(ranges, r.rip) and not sig:
            return True
    return False


def safe_point(pt, pid, libc, mem):
    """Leaves the stopped thread stopped where no UNSAFE function or loader code is under way
    on it: single-stepped out of such frames, or, where that does not get out (a return
    address the scan mistook, a long wait), let go and stopped again a little later; exits 2
    (the process let go, untouched) when no safe point was found in SAFE_TRIES rounds."""
    ranges = unsafe_ranges(pid, libc)
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    for attempt in range(SAFE_TRIES):
        r = Regs()
        pt(GETREGS, ctypes.byref(r))
        slot = in_unsafe(ranges, mem, r.rip, r.rsp, stack_end(pid, r.rsp))
        if slot is None:
            if attempt:
                sys.stderr.write("lg_inject: safe point after %d round(s)\n" % attempt)
            return
        if attempt % 2 == 0 and step_out(pt, pid, ranges, slot):
            continue                                    # checked again from the top
        pt(CONT)
        time.sleep(0.001)                               # let it run out of there
        syscall(234, pid, pid, signal.SIGSTOP)          # SYS_tgkill on x86_64: this thread only
        while True:
            _, st = os.waitpid(pid, 0)
            if not os.WIFSTOPPED(st):
                fail("process %d ended while waiting for a safe point" % pid)
            if os.WSTOPSIG(st) == signal.SIGSTOP:
                break
            pt(CONT, ctypes.c_void_p(os.WSTOPSIG(st)))    # someone else's signal: deliver it
    pt(DETACH)
    fail("process %d stayed inside malloc/free or the loader for %d rounds; it was not touched: attach again"
         % (pid, SAFE_TRIES))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
