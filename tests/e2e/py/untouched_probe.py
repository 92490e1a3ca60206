"""untouched_probe.py: prints, as one JSON object, what a process was handed: its stdin, its fd
table, its environment (LD_PRELOAD aside, the one difference a preload makes by definition),
signal mask and ignored signals, umask and sys.path. tests/e2e/test_untouched.sh runs it in
shell children, pipelines, fork and subprocess children and under -S / -I / -E, with and without
the library preloaded, and requires the same output.
"""
import json
import os
import sys


def fds():
    out = {}
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue  # the listing's own directory fd, closed by now
        # pipes and sockets have per-run inode numbers: keep their kind only
        out[name] = target.split(":")[0] + ":" if target.startswith(("pipe:", "socket:")) else target
    return out


def signals():
    keep = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("SigBlk", "SigIgn"):
                keep[k] = v.strip()
    return keep


def main():
    try:
        stdin = sys.stdin.read()
    except Exception as e:  # a closed fd 0 lands here
        stdin = "error: %s" % type(e).__name__
    mask = os.umask(0)
    os.umask(mask)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    print(json.dumps({"stdin": stdin, "fds": fds(), "env": env, "signals": signals(),
                      "umask": mask, "sys.path": sys.path}, sort_keys=True))


main()
