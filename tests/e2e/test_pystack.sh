#!/usr/bin/env bash
# test_pystack.sh: src/base/pystack.c in real interpreters. python3 loads
# $LG_BUILD/tests/pystack_probe.so through ctypes (which releases the GIL around the call, like
# PyTorch around a kernel launch) and checks the captured stack: function names and line
# numbers from the main thread, from a Python worker thread, and from a native thread with no
# Python frames (the main thread's stack is reported, marked "main"). Runs with the system
# python3 and, when present, every pyenv CPython 3.8 to 3.13 (pystack.c's table), then with
# Debian's CPython 3.14 and 3.15 and a free-threaded 3.13t built from Debian's source
# (pystack.c's debug-offsets path) inside the root of tests/pyroot/install.sh (built on first
# use, cached under ~/.cache/labelguard; needs root for chroot: as another user those are
# skipped with a note, and the rest still runs). Each also has eight threads capture at once.
# Exit 0 pass, 77 skip (no python3 or no probe), else fail.
set -u
cd "$(dirname "$0")/../.."
BUILD="${LG_BUILD:-build}"
probe="$PWD/$BUILD/tests/pystack_probe.so"
if [ ! -f "$probe" ]; then
  make -s "$BUILD/tests/pystack_probe.so" >/dev/null 2>&1 || { echo "cannot build $probe"; exit 1; }
fi
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
# A sanitizer build of the probe needs its runtime loaded first in the (uninstrumented) host.
pre=""
case "${LG_SANITIZER:-}" in
  address) pre="$(gcc -print-file-name=libasan.so)"; export ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0";;
  undefined) pre="$(gcc -print-file-name=libubsan.so)";;
  thread) pre="$(gcc -print-file-name=libtsan.so)";;
  address+undefined) pre="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
                     export ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0";;
esac

tmpd=$(mktemp -d /tmp/lg-pystack-XXXXXX)
script="$tmpd/probe.py"
trap 'rm -rf "$tmpd"' EXIT
cat > "$script" <<'PY'
import ctypes, sys, sysconfig, threading
lib = ctypes.CDLL(sys.argv[1])
lib.lg_probe_capture.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.lg_probe_capture_native_thread.argtypes = [ctypes.c_char_p, ctypes.c_int]
src = open(__file__).read().splitlines()
def line_of(mark):
    return next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# " + mark))
def parse(text):
    lines = text.splitlines()
    head = dict(kv.split("=") for kv in lines[0].split())
    frames = [l.rsplit("|", 2) for l in lines[1:]]
    return head, [(f, int(n), fn) for f, n, fn in frames]
failures = []
def check(label, text, thread, want):
    head, frames = parse(text)
    ok = head["thread"] == thread and int(head["n"]) == len(frames)
    # innermost last: the tail of the stack must be exactly `want` (function, line mark)
    tail = [(fn, n) for f, n, fn in frames[-len(want):]]
    expect = [(fn, line_of(mark)) for fn, mark in want]
    ok = ok and tail == expect and all(f == __file__ for f, n, fn in frames[-len(want):])
    ok = ok and frames[0][2] == "<module>"
    print(("ok   " if ok else "FAIL ") + label + ": thread=" + head["thread"] + " " + repr(frames))
    if not ok:
        print("     expected thread=" + thread + " tail " + repr(expect))
        failures.append(label)
buf = ctypes.create_string_buffer(16384)

def innermost_probe():
    lib.lg_probe_capture(buf, len(buf))  # MARK_MAIN
    return buf.value.decode()
def caller_of_probe():
    return innermost_probe()  # MARK_CALLER
check("main thread", caller_of_probe(), "launching",  # MARK_TOP
      [("<module>", "MARK_TOP"), ("caller_of_probe", "MARK_CALLER"), ("innermost_probe", "MARK_MAIN")])

result = {}
def worker_body():
    lib.lg_probe_capture(buf, len(buf))  # MARK_WORKER
    result["text"] = buf.value.decode()
def worker_entry():
    worker_body()  # MARK_WORKER_ENTRY
t = threading.Thread(target=worker_entry)
t.start(); t.join()
head, frames = parse(result["text"])
# The worker's own stack: threading's bootstrap frames, then ours; never the main thread's.
tail = [(fn, n) for f, n, fn in frames[-2:]]
ok = head["thread"] == "launching" and tail == [("worker_entry", line_of("MARK_WORKER_ENTRY")), ("worker_body", line_of("MARK_WORKER"))]
ok = ok and any(f.endswith("threading.py") for f, n, fn in frames)
print(("ok   " if ok else "FAIL ") + "worker thread: " + repr(frames))
if not ok: failures.append("worker thread")

def waits_in_native():
    lib.lg_probe_capture_native_thread(buf, len(buf))  # MARK_NATIVE
    return buf.value.decode()
check("native thread -> main", waits_in_native(), "main",  # MARK_NATIVE_TOP
      [("<module>", "MARK_NATIVE_TOP"), ("waits_in_native", "MARK_NATIVE")])

# Deep recursion: the innermost 32 frames are kept.
def deep(k):
    if k == 0:
        lib.lg_probe_capture(buf, len(buf))  # MARK_DEEP
        return buf.value.decode()
    return deep(k - 1)  # MARK_RECURSE
head, frames = parse(deep(100))
ok = len(frames) == 32 and frames[-1][1:] == (line_of("MARK_DEEP"), "deep") and frames[0][1:] == (line_of("MARK_RECURSE"), "deep")
print(("ok   " if ok else "FAIL ") + "deep recursion: %d frames" % len(frames))
if not ok: failures.append("deep")
# Eight threads capture at once (with no GIL, truly at once), each its own stack.
N = 8
bufs = [ctypes.create_string_buffer(16384) for _ in range(N)]
ready = threading.Barrier(N)
def loader(k):
    ready.wait()
    lib.lg_probe_capture(bufs[k], len(bufs[k]))  # MARK_POOL
def pool_entry(k):
    loader(k)  # MARK_POOL_ENTRY
pool = [threading.Thread(target=pool_entry, args=(k,)) for k in range(N)]
for t in pool: t.start()
for t in pool: t.join()
bad = 0
for k in range(N):
    head, frames = parse(bufs[k].value.decode())
    tail = [(fn, n) for f, n, fn in frames[-2:]]
    if not (head["thread"] == "launching" and tail == [("pool_entry", line_of("MARK_POOL_ENTRY")), ("loader", line_of("MARK_POOL"))]):
        bad += 1
        print("     thread %d: thread=%s %r" % (k, head["thread"], frames))
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
print(("ok   " if not bad else "FAIL ") + "%d threads at once (GIL %s): %d wrong" % (N, "on" if gil else "off", bad))
if bad: failures.append("pool")
if sysconfig.get_config_var("Py_GIL_DISABLED") and gil:
    print("FAIL free-threaded build runs with the GIL on (an extension turned it on?)"); failures.append("gil")
# An async launch's site: recorded at the launch, resolved after the launching function returned.
lib.lg_probe_resolve.argtypes = [ctypes.c_char_p, ctypes.c_int]
def launches():
    lib.lg_probe_record()  # MARK_RECORD
def step():
    launches()  # MARK_RECORD_CALLER
step()  # MARK_RECORD_TOP
x = [str(i) for i in range(1000)]  # other work before the verdict is read
lib.lg_probe_resolve(buf, len(buf))
check("recorded, resolved later", buf.value.decode(), "launching",
      [("<module>", "MARK_RECORD_TOP"), ("step", "MARK_RECORD_CALLER"), ("launches", "MARK_RECORD")])
sys.exit(1 if failures else 0)
PY

pythons=(python3)
[ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v; do
    [ -x "$p" ] && pythons+=("$p")
  done
done
# LG_TEST_PYTHONS: the interpreters to test instead (tests/qemu/test_python.sh: the arm64 one).
[ -z "${LG_TEST_PYTHONS:-}" ] || read -ra pythons <<<"$LG_TEST_PYTHONS"
fail=0
for py in "${pythons[@]}"; do
  echo "== $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
  env ${pre:+LD_PRELOAD="$pre"} "$py" "$script" "$probe" || { echo "FAILED with $py"; fail=1; }
done
# 3.14 and 3.15 in the Debian root: the probe built here, the script at the same path in there
# (the checks compare frame files with __file__). A sanitizer build's probe needs its runtime,
# which the root lacks: plain build only.
have_root=0
if [ -n "${LG_SANITIZER:-}" ]; then
  echo "note: 3.14 and 3.15 (the Debian root) run in the plain build only"
elif [ -n "${LG_TEST_PYTHONS:-}" ]; then
  echo "note: 3.14 and 3.15 left out: LG_TEST_PYTHONS names the interpreters (another architecture's probe)"
elif [ "$(id -u)" -ne 0 ]; then
  echo "note: 3.14 and 3.15 skipped: the Debian root needs root (chroot)"
elif ! tests/pyroot/install.sh; then
  echo "FAIL: cannot build the Debian root (tests/pyroot/install.sh)"; fail=1
else
  have_root=1
  ft=$(tests/pyroot/install.sh --ft-python) || { echo "FAIL: no free-threaded interpreter in the root"; fail=1; ft=""; }
  for py in python3.14 python3.15 $ft; do
    echo "== $py in the Debian root ($(tests/pyroot/install.sh run -- "$py" -c 'import sys; print(sys.version.split()[0], "free-threaded" if "t" in sys.abiflags else "")'))"
    # PYTHON_GIL=0: a free-threaded interpreter must stay without its GIL for the test to mean it
    # (a regular build refuses the variable).
    gil=(); [ "$py" = "$ft" ] && gil=(PYTHON_GIL=0)
    tests/pyroot/install.sh run -b "$tmpd:$tmpd" -- env "${gil[@]}" "$py" "$script" "/lg/$BUILD/tests/pystack_probe.so" ||
      { echo "FAILED with $py"; fail=1; }
  done
fi
# A process without Python: the probe loaded into a C program reports nothing.
cat > "$tmpd/nopy.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { puts(dlerror()); return 2; }
    int (*cap)(char *, int) = (int (*)(char *, int))dlsym(h, "lg_probe_capture");
    char buf[256];
    cap(buf, sizeof buf);
    fputs(buf, stdout);
    return strcmp(buf, "thread=none n=0\n") != 0;
}
C
if gcc -o "$tmpd/nopy.bin" "$tmpd/nopy.c" -ldl; then
  env ${pre:+LD_PRELOAD="$pre"} "$tmpd/nopy.bin" "$probe" && echo "ok   no Python: empty stack" || { echo "FAIL no Python"; fail=1; }
else
  fail=1
fi
# Where a seccomp filter forbids process_vm_readv (some container profiles), pystack.c falls
# back to reading through a pipe: run the same checks with the call blocked (EPERM).
cat > "$tmpd/nopy.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { 4, f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) return 99;
    char a = 1, b = 0;
    struct iovec l = { &b, 1 }, r = { &a, 1 };
    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != -1 || errno != EPERM) { puts("filter not active"); return 98; }
    execvp(argv[1], argv + 1);
    return 97;
}
C
# LG_TEST_SECCOMP=0: no seccomp filters here (qemu-user refuses them: tests/qemu/test_python.sh).
if [ "${LG_TEST_SECCOMP:-1}" = 0 ]; then
  echo "not run: python3 with process_vm_readv blocked (LG_TEST_SECCOMP=0)"
elif gcc -o "$tmpd/nopy.bin" "$tmpd/nopy.c"; then
  echo "== python3 with process_vm_readv blocked"
  env ${pre:+LD_PRELOAD="$pre"} "$tmpd/nopy.bin" python3 "$script" "$probe" || { echo "FAILED with process_vm_readv blocked"; fail=1; }
  if [ $have_root = 1 ]; then
    echo "== python3.14 in the Debian root with process_vm_readv blocked"
    tests/pyroot/install.sh run -b "$tmpd:$tmpd" -- "$tmpd/nopy.bin" python3.14 "$script" "/lg/$BUILD/tests/pystack_probe.so" ||
      { echo "FAILED: python3.14 with process_vm_readv blocked"; fail=1; }
  fi
else
  fail=1
fi
exit $fail
