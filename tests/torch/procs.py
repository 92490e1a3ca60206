"""procs.py: child processes that die with their driver.

The GPU-proof drivers (run_scenarios.py, bench_train.py, progs_real.py, probe_kernels.py)
start each child in its own session, so a timed-out child's whole group can be killed. That
also takes the children out of the process group that scripts/gpu-check.sh's `timeout`
signals: so each driver calls install() and starts children through popen(); when the driver
gets SIGTERM (the part's budget is spent) or SIGINT, every live child group is killed first,
and no orphan keeps the GPU busy while the next part measures. Main thread only (signal).
"""
import os
import signal
import subprocess
import sys
import threading

_live = set()
_lock = threading.Lock()


def popen(*args, **kw):
    kw["start_new_session"] = True
    p = subprocess.Popen(*args, **kw)
    with _lock:
        _live.add(p)
    return p


def forget(p):
    with _lock:
        _live.discard(p)


def kill_all():
    with _lock:
        live = list(_live)
    for p in live:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def install():
    def handler(signum, frame):
        kill_all()
        sys.stderr.write("killed by signal %d: children stopped\n" % signum)
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
