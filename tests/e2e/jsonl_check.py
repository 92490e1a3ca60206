#!/usr/bin/env python3
"""jsonl_check.py: schema check of labelguard JSONL logs (DESIGN.md section 4) for the e2e tests.

Usage: jsonl_check.py DIR_OR_FILE...   -> parses every line with a real JSON parser, checks the
schema of every event, and prints the events as one JSON array on stdout (tests then query it
with `python3 -c`). Exit 1 with a message naming file:line on the first violation of the schema.
"""
import json
import os
import re
import sys

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
COMMON = {"v": int, "event": str, "time": str, "host": str, "pid": int, "tid": int}
INT_OR_NULL = ("rank", "local_rank")


def fail(where, msg):
    print(f"jsonl_check: {where}: {msg}", file=sys.stderr)
    sys.exit(1)


def need(obj, key, typ, where):
    if key not in obj:
        fail(where, f"missing field {key!r} in {json.dumps(obj)[:300]}")
    val = obj[key]
    if typ is int and isinstance(val, bool):
        fail(where, f"field {key!r} is a bool, want int")
    if not isinstance(val, typ):
        fail(where, f"field {key!r} = {val!r} has type {type(val).__name__}, want {typ}")
    return val


def check_event(e, where):
    for k, t in COMMON.items():
        need(e, k, t, where)
    if e["v"] != 1:
        fail(where, "v must be 1")
    if not RFC3339.match(e["time"]):
        fail(where, f"time {e['time']!r} is not RFC 3339 UTC")
    for k in INT_OR_NULL:
        if k not in e or not (e[k] is None or (isinstance(e[k], int) and not isinstance(e[k], bool))):
            fail(where, f"{k} must be an int or null")
    ev = e["event"]
    if ev == "start":
        need(e, "version", str, where)
        cfg = need(e, "config", dict, where)
        for k in ("action", "mode", "log", "hooks", "samples", "quiet"):
            if k not in cfg:
                fail(where, f"config lacks {k}")
        need(e, "hooks", list, where)
        if need(e, "backend", str, where) not in ("gpu", "host"):
            fail(where, "backend must be gpu or host")
        for k in ("cuda_runtime", "driver", "device", "torch"):
            if k not in e:
                fail(where, f"start lacks {k}")
    elif ev == "violation":
        for k in ("kernel", "symbol", "family", "direction", "action", "outcome", "cause", "stream"):
            need(e, k, str, where)
        if e["direction"] not in ("forward", "backward"):
            fail(where, "direction")
        if e["outcome"] not in ("blocked", "held", "masked", "launched", "aborted"):
            fail(where, f"outcome {e['outcome']}")
        if e["cause"] not in ("one_based", "scaled_255", "void_255", "negative_unknown", "head_too_small",
                              "vocab_too_small", "negative_id", "node_id_out_of_range", "other"):
            fail(where, f"cause {e['cause']}")
        need(e, "launch_seq", int, where)
        need(e, "device", int, where)
        t = need(e, "target", dict, where)
        need(t, "dtype", str, where)
        for k in ("count", "n_classes", "ignore_index"):
            if k not in t or not (t[k] is None or isinstance(t[k], int)):
                fail(where, f"target.{k}")
        b = need(e, "bad", dict, where)
        for k in ("count", "min", "max"):
            need(b, k, int, where)
        for s in need(b, "samples", list, where):
            need(s, "index", int, where)
            need(s, "value", int, where)
        for s in need(e, "native_stack", list, where):
            if not isinstance(s, str):
                fail(where, "native_stack entries must be strings")
        for f in need(e, "python_stack", list, where):
            need(f, "file", str, where)
            need(f, "line", int, where)
            need(f, "function", str, where)
    elif ev == "warning":
        need(e, "what", str, where)
        need(e, "detail", str, where)
    elif ev == "device_assert":
        if need(e, "error", int, where) != 710 or need(e, "checked_before_launch", bool, where):
            fail(where, "device_assert: error 710, never checked before launch")
        need(e, "found_at", str, where)
        need(e, "launch_blocking", bool, where)
        need(e, "driver_launches_seen", bool, where)
        need(e, "note", str, where)
        need(e, "python_stack", list, where)
        for c in need(e, "candidates", list, where):
            for k, t in (("thread", int), ("age", int), ("kernel", str), ("stream", str),
                         ("finding_thread", bool), ("checked", bool), ("grid", list), ("block", list)):
                need(c, k, t, where)
            if "symbol" not in c:
                fail(where, "candidate lacks symbol")
    elif ev == "summary":
        for k in ("launches", "watched", "validated", "violations", "validate_ns_total", "unchecked", "host_fallbacks"):
            need(e, k, int, where)
    else:
        fail(where, f"unknown event {ev!r}")


def files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith(".jsonl"):
                        yield os.path.join(root, n)
        elif os.path.exists(p):
            yield p


def main():
    events = []
    for path in files(sys.argv[1:]):
        with open(path, "rb") as fh:
            data = fh.read()
        if data and not data.endswith(b"\n"):
            fail(path, "last line is not terminated (torn write)")
        for i, line in enumerate(data.split(b"\n")[:-1], 1):
            where = f"{path}:{i}"
            try:
                e = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                fail(where, f"not JSON: {exc}: {line[:200]!r}")
            check_event(e, where)
            e["_file"] = os.path.basename(path)
            events.append(e)
    json.dump(events, sys.stdout)


if __name__ == "__main__":
    main()
