"""enable.py: the body of tests/torch-fake/test_enable.sh: in-process arming (labelguard_enable,
include/labelguard.h) with real torch on the runtime test double, through ctypes alone, the
way the Python package does it (ctypes.CDLL(..., RTLD_GLOBAL), then labelguard_enable).

  build/torch-python tests/torch-fake/enable.py after|before|dead LIB [DLOPEN_LIB]

after:  import torch, a CUDA tensor, then load + enable; a bad-label cross_entropy raises
        labelguard's RuntimeError and the context lives on; last_violation's JSON; config and
        config_check; a library dlopen'd after enable (DLOPEN_LIB: build/progs/libnllpy.so for
        CUDA 13, build/e2e/libmix12.so for CUDA 12) is guarded; disable(): the next bad launch
        runs unchecked and the double's device assert fires; enable then refuses (-1).
before: load + enable before `import torch`, then the same bad cross_entropy; disable then
        enable: the next bad launch is checked again.
dead:   (LABELGUARD_ACTION=log) load + enable after torch, a bad launch runs and asserts as on a
        GPU; a later enable returns -1 naming the dead context.
fork:   import torch, then load + enable before any CUDA work (a notebook's first cell): enable
        made no CUDA call (the double's fakecudart_initialised) and wrote no start event; a
        child forked now uses CUDA (the double, like CUDA, fails every call of a child whose
        parent had initialised CUDA) and its bad label is blocked; then the parent's.
Prints one "ok: ..." or "FAIL: ..." line per check; exit 1 if any failed. The kernels a check
reads are fed tensors made on the CPU and copied (the double runs only the NLL kernels).
"""
import ctypes
import json
import os
import sys

what, lib_path = sys.argv[1], sys.argv[2]
extra = sys.argv[3] if len(sys.argv) > 3 else ""
failed = 0


def check(cond, msg, detail=""):
    global failed
    print(("ok: " if cond else "FAIL: ") + msg + ("" if cond else f" ({detail})"), flush=True)
    failed += 0 if cond else 1


def load():
    lib = ctypes.CDLL(lib_path, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    lib.labelguard_enable.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_last_violation.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_config.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.labelguard_config_check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return lib


def enable(lib):
    why = ctypes.create_string_buffer(512)
    rc = lib.labelguard_enable(why, len(why))
    return rc, why.value.decode()


def text(fn, *args):
    """A snprintf-like result: asked with a small buffer first, then with the size it said."""
    small = ctypes.create_string_buffer(8)
    n = fn(*args, small, len(small))
    if n <= 0:
        return n, ""
    buf = ctypes.create_string_buffer(n + 1)
    m = fn(*args, buf, len(buf))
    check(m == n and len(buf.value) == n and small.value == buf.value[:7],
          "snprintf-like: the full length first, the text with a big enough buffer", f"{n} {m}")
    return n, buf.value.decode()


def bad_cross_entropy(torch, F):
    logits = torch.zeros(4, 5).cuda()
    labels = torch.tensor([0, 1, 7, 2]).cuda()  # 7 >= 5 classes, at index 2
    try:
        F.cross_entropy(logits, labels)
        torch.cuda.synchronize()
        return labels, None
    except RuntimeError as e:
        return labels, e


def expect_blocked(torch, F, lib):
    labels, err = bad_cross_entropy(torch, F)
    msg = str(err) if err else ""
    check(err is not None and "labelguard" in msg and "nll_loss" in msg,
          "bad label: RuntimeError with labelguard's text naming the kernel", msg[:300])
    check("device-side assert triggered" not in msg and "cudaErrorNotPermitted" in msg,
          "no device assert: the launch was blocked (labelguard's error 800)", msg[:400])
    check(labels.cpu().tolist() == [0, 1, 7, 2], "labels.cpu() after the raise (context alive)")
    y = (torch.arange(6, dtype=torch.float32).cuda() * 2).cpu()
    check(y.shape == (6,) and torch.cuda.is_available(), "another CUDA op after the raise")
    n, line = text(lib.labelguard_last_violation)
    check(n > 0, "last_violation: an event after a violation", n)
    v = json.loads(line) if n > 0 else {}
    check(v.get("event") == "violation" and v.get("v") == 1 and "nll_loss" in v.get("kernel", ""),
          "last_violation: the violation event's fields", line[:200])
    check(v.get("bad", {}).get("samples") == [{"index": 2, "value": 7}] and v.get("outcome") == "blocked",
          "last_violation: the offending index and value", str(v.get("bad")))
    return v


if what == "before":
    lib = load()
    rc, why = enable(lib)
    check(rc >= 0 and why == "", "enable before import torch succeeds", f"{rc} {why}")
    n, _ = text(lib.labelguard_last_violation)
    check(n == 0, "last_violation: 0 before any violation", n)
    import torch
    import torch.nn.functional as F
    expect_blocked(torch, F, lib)
    rc2, why2 = enable(lib)
    check(rc2 > 0 and why2 == "", "enable again after torch: idempotent, entries armed", f"{rc2} {why2}")
    # disable then enable: checking is back (the blocked launch left the context alive).
    check(lib.labelguard_disable() == 0, "disable returns 0")
    rc3, why3 = enable(lib)
    check(rc3 == rc2, "enable after disable", f"{rc3} {why3}")
    labels, err = bad_cross_entropy(torch, F)
    check(err is not None and "labelguard" in str(err), "enable after disable: checked again", str(err)[:200])

elif what == "after":
    import torch
    import torch.nn.functional as F
    warm = torch.ones(3).cuda()  # CUDA started before the library is loaded
    check(warm.cpu().tolist() == [1.0, 1.0, 1.0], "CUDA works before enable")
    lib = load()
    rc, why = enable(lib)
    check(rc > 0 and why == "", "enable after import torch arms entries", f"{rc} {why}")
    rc2, why2 = enable(lib)
    check(rc2 == rc, "enable twice: same count, nothing hooked twice", f"{rc} then {rc2}")
    v = expect_blocked(torch, F, lib)

    n, cfg = text(lib.labelguard_config)
    c = json.loads(cfg) if n > 0 else {}
    check(c.get("action") == "raise" and c.get("mode") == "sync" and c.get("log") == os.environ["LABELGUARD_LOG"],
          "config: the resolved configuration", cfg)
    msg = ctypes.create_string_buffer(1024)
    rc = lib.labelguard_config_check(b"LABELGUARD_ACTION", b"explode", msg, len(msg))
    check(rc == -1 and "raise, hold, mask, log, abort" in msg.value.decode(), "config_check: a bad action",
          f"{rc} {msg.value}")
    check(lib.labelguard_config_check(b"LABELGUARD_MODE", b"async", msg, len(msg)) == 0, "config_check: a good mode")
    check(lib.labelguard_config_check(b"LABELGUARD_NOPE", b"1", msg, len(msg)) == -2, "config_check: unknown name")

    # An object loaded after enable: its launches go through the library.
    late = ctypes.CDLL(extra)
    if "nllpy" in extra:
        labels = (ctypes.c_int64 * 4)(0, 1, 2, 9)
        err = ctypes.create_string_buffer(2048)
        rc = late.lgpy_launch(0, 0, labels, 4, 3, -100, err, len(err))
        check(rc == 800 and "labelguard" in err.value.decode(), "a library dlopen'd after enable is guarded",
              f"{rc} {err.value[:200]}")
        check(late.lgpy_memcheck() == 0, "its context is alive after the blocked launch")
    else:
        sys.stdout.flush()
        late.mix12_run(1)  # prints "mix12 launch: N" and "mix12 sync: N" (checked by the shell)
    n, line = text(lib.labelguard_last_violation)
    late_v = json.loads(line) if n > 0 else {}
    check(late_v.get("bad", {}).get("max") in (9, 3) and late_v.get("launch_seq") != v.get("launch_seq"),
          "last_violation: now the late library's launch", line[:200])

    # disable(): the bad launch runs unchecked, so the double's device assert fires.
    check(lib.labelguard_disable() == 0, "disable returns 0")
    before = ctypes.c_uint64 * 5
    counters = before()
    lib.labelguard_counters(counters)
    violations = counters[3]
    labels, err = bad_cross_entropy(torch, F)
    msg = str(err) if err else ""
    check(err is not None and "device-side assert" in msg and "labelguard" not in msg,
          "after disable the bad launch runs unchecked (the device assert)", msg[:200])
    lib.labelguard_counters(counters)
    check(counters[3] == violations, "after disable no violation is counted", f"{violations} -> {counters[3]}")
    rc, why = enable(lib)
    check(rc == -1 and "dead" in why and "710" in why and "restart" in why,
          "enable in the poisoned context: -1 naming the dead context", f"{rc} {why}")

elif what == "dead":
    import torch
    import torch.nn.functional as F
    lib = load()
    rc, why = enable(lib)
    check(rc > 0, "enable (action log)", f"{rc} {why}")
    labels, err = bad_cross_entropy(torch, F)
    msg = str(err) if err else ""
    check(err is not None and "device-side assert" in msg, "action log: the bad launch ran and asserted", msg[:200])
    n, line = text(lib.labelguard_last_violation)
    check(n > 0 and json.loads(line).get("outcome") == "launched", "last_violation: outcome launched", line[:200])
    rc, why = enable(lib)
    check(rc == -1 and "dead" in why and "cudaErrorAssert 710" in why and "restart the process/kernel" in why,
          "a later enable returns -1 naming the dead context", f"{rc} {why}")
    check("\n" not in why, "the reason is one line", why)

elif what == "fork":
    import glob
    import torch
    import torch.nn.functional as F

    def starts(pid):
        n = 0
        for f in glob.glob(os.path.join(os.environ["LABELGUARD_LOG"], "*.jsonl")):
            n += sum(1 for line in open(f) if json.loads(line).get("event") == "start" and
                     json.loads(line).get("pid") == pid)
        return n

    rt = ctypes.CDLL("libcudart.so.%s" % torch.version.cuda.split(".")[0], mode=os.RTLD_NOLOAD)
    check(rt.fakecudart_initialised() == 0, "import torch made no CUDA call")
    lib = load()
    rc, why = enable(lib)
    check(rc > 0 and why == "", "enable after import torch, before CUDA, arms entries", f"{rc} {why}")
    check(rt.fakecudart_initialised() == 0, "enable made no CUDA call (CUDA not initialised)")
    check(starts(os.getpid()) == 0, "no start event before the application's first CUDA call")
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            labels, err = bad_cross_entropy(torch, F)
            ok = err is not None and "labelguard" in str(err) and "nll_loss" in str(err)
            print(("ok: " if ok else "FAIL: ") + "child: its bad label is blocked by labelguard" +
                  ("" if ok else " (%s)" % str(err)[:300]), flush=True)
            y = (torch.arange(4, dtype=torch.float32).cuda() * 2).cpu()
            print("ok: child: CUDA works after the parent's enable", flush=True)
        except Exception as e:  # the child's CUDA failed: what a parent's initialisation does
            print("FAIL: child: CUDA failed after the parent's enable (%s)" % str(e)[:300], flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    check(os.waitstatus_to_exitcode(status) == 0, "the child exited 0")
    expect_blocked(torch, F, lib)
    check(starts(os.getpid()) == 1, "the parent's start event came with its first CUDA work", starts(os.getpid()))

sys.exit(1 if failed else 0)
