"""`labelguard report [--json] PATH...` (DESIGN.md §2, log schema §4).

Merges the JSONL logs that liblabelguard.so writes (one file per process and rank) into one
summary per distinct problem, for a person (text, with a histogram of offending values) or a
machine (--json). main() is called by labelguard.cli (the registry in commands/__init__.py);
standard library only.
Tested by tests/cli/test_report.sh (three processes, ranks 0-2, a truncated last line).

What counts as one problem. The key is (kernel, cause, n_classes, ignore_index, call site):
  - the offending values are NOT part of the key: the same bug shows different values in
    different batches (a head that is too small sees 10 in one batch and 12 in the next), so
    values are aggregated with counts instead of splitting one bug into many lines;
  - the call site (the innermost Python frame outside installed packages and the standard
    library, i.e. the user's own line) is part of it: two loss calls in one model (a main and
    an auxiliary head) are two mistakes in two places, even with the same kernel and cause;
  - n_classes and ignore_index are part of it: the same line with a different head size is a
    different configuration;
  - ranks, pids, hosts and times are never part of it: one bug shows up on every rank.

Input rules (decided here, documented in docs/guide.md):
  - PATH is a .jsonl file or a directory searched recursively for *.jsonl; a PATH that does
    not exist or cannot be read is an error (exit 2), reported after what could be merged.
  - A line that is not a JSON object with "v" and "event" is reported as file:line and skipped;
    the report is still printed and the exit status is 2 (the input is damaged).
  - The last line of a file without a trailing newline that does not parse is a record cut
    short by a process killed while writing (the library writes each event with one write(),
    so only the last one can be cut): reported as a note, it does not change the exit status.
  - Only regular files are read (opened without blocking): a FIFO or a device, named or found
    in a directory, is an error (exit 2) and is never opened for a blocking read.
  - A line over 64 MiB is malformed without being parsed; a string field over 4096 characters
    is cut to that length, marked, and noted, so a damaged log cannot flood the terminal.
  - A device_assert event (an assert in a kernel labelguard does not check: the CUDA context is
    lost) is listed per process with where it was found and its first candidates; it counts as
    a problem for the exit status.
  - Exit 1 when at least one violation or device assert was found, 0 when none (2 takes
    precedence).
"""


import argparse
import datetime
import json
import os
import sys

# Reading the logs (regular files, one event per line, long fields cut) is _report_read's.
from labelguard.commands._report_read import FIELD_MAX, LINE_MAX, clip_fields, find_files, read_events  # noqa: F401

LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "<string>")

NAME = "report"
USAGE = """\
  report [--json] PATH...     merge JSONL logs (files or directories) into one summary per
                              problem; exit 1 when problems were found, 0 when none
"""


def parse_time(s):
    """datetime for an RFC 3339 string, or None; ordering falls back to the string itself."""
    if not isinstance(s, str):
        return None
    try:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


def time_key(s):
    t = parse_time(s)
    return (0, t.timestamp(), "") if t else (1, 0.0, str(s))


def is_inductor_code(path):
    """Inductor's output code for a compiled graph: <cache>/<xy>/c<xy...>.py (the library's text.c
    has the same rule): its `call` runs the graph, the user's line called the compiled function."""
    head, base = os.path.split(path)
    parent = os.path.basename(head)
    return (len(base) >= 24 and base.startswith("c") and base.endswith(".py") and len(parent) == 2
            and base[1:3] == parent)


def is_library_frame(path):
    """A frame of an installed package or the standard library, labelguard's own check op (in a
    checkout it is no installed package), or a compiled graph's generated code."""
    return (any(m in path for m in LIBRARY_MARKERS) or path.endswith("/labelguard/_compiled.py")
            or is_inductor_code(path))


def dicts(v, kind=dict):
    """The items of a JSON array field that are of `kind` (objects, or str for a native stack);
    nothing when the field is not an array (a damaged or foreign line must not stop the report)."""
    return [x for x in v if isinstance(x, kind)] if isinstance(v, list) else []


def call_site(stack):
    """(user frame, innermost frame) of a python_stack (innermost last), each a dict or None."""
    frames = dicts(stack)
    if not frames:
        return None, None
    inner = frames[-1]
    for f in reversed(frames):
        if not is_library_frame(str(f.get("file", ""))):
            return f, inner
    return inner, inner


def fmt_frame(f):
    if not f:
        return "-"
    return "%s:%s in %s" % (f.get("file", "?"), f.get("line", "?"), f.get("function", "?"))


def as_int(x):
    return x if isinstance(x, int) and not isinstance(x, bool) else None


class Problem:
    def __init__(self, key):
        self.key = key
        self.events = 0
        self.bad_labels = 0
        self.first = None
        self.last = None
        self.ranks = set()
        self.procs = set()            # (host, pid)
        self.values = {}              # offending value -> occurrences among the samples
        self.min = None
        self.max = None
        self.directions = set()
        self.actions = {}
        self.outcomes = {}
        self.example = None           # the first event, for fields shown once
        self.inner = None
        self.files = set()
        self.counts = set()

    def add(self, ev, path):
        self.events += 1
        self.files.add(path)
        t = ev.get("time")
        if self.first is None or time_key(t) < time_key(self.first):
            self.first = t
            self.example = ev
        if self.last is None or time_key(t) > time_key(self.last):
            self.last = t
        if as_int(ev.get("rank")) is not None:
            self.ranks.add(ev["rank"])
        self.procs.add((str(ev.get("host", "?")), ev.get("pid")))
        bad = ev.get("bad") if isinstance(ev.get("bad"), dict) else {}
        self.bad_labels += as_int(bad.get("count")) or 0
        for k, pick in (("min", min), ("max", max)):
            v = as_int(bad.get(k))
            if v is not None:
                cur = getattr(self, k)
                setattr(self, k, v if cur is None else pick(cur, v))
        for s in dicts(bad.get("samples")):
            v = as_int(s.get("value"))
            if v is not None:
                self.values[v] = self.values.get(v, 0) + 1
        tgt = ev.get("target") if isinstance(ev.get("target"), dict) else {}
        if as_int(tgt.get("count")) is not None:
            self.counts.add(tgt["count"])
        for field, d in (("action", self.actions), ("outcome", self.outcomes)):
            v = ev.get(field)
            if isinstance(v, str):
                d[v] = d.get(v, 0) + 1
        if isinstance(ev.get("direction"), str):
            self.directions.add(ev["direction"])

    def fix(self):
        """The library's own words (cause_text, from cause.c) for the first event."""
        text = (self.example or {}).get("cause_text")
        return text if isinstance(text, str) and text else "(the log gives no cause_text)"

    def to_json(self):
        kernel, cause, n, ignore, site = self.key
        ex = self.example or {}
        tgt = ex.get("target") if isinstance(ex.get("target"), dict) else {}
        user, inner = call_site(ex.get("python_stack"))
        return {
            "kernel": kernel,
            "family": ex.get("family"),
            "directions": sorted(self.directions),
            "cause": cause,
            "fix": self.fix(),
            "n_classes": n,
            "ignore_index": ignore,
            "dtype": tgt.get("dtype"),
            "ids": tgt.get("kind") == "ids",
            "range": tgt.get("range") if tgt.get("kind") == "range" else None,
            "operand": tgt.get("operand") if tgt.get("kind") == "range" else None,  # BCE: input or target
            "probs": tgt.get("shape") if tgt.get("kind") == "probs" else None,  # torch.multinomial: [rows, categories]
            "range_min": (ex.get("bad") or {}).get("min") if isinstance(ex.get("bad"), dict) else None,
            "range_max": (ex.get("bad") or {}).get("max") if isinstance(ex.get("bad"), dict) else None,
            "events": self.events,
            "bad_labels": self.bad_labels,
            "first_time": self.first,
            "last_time": self.last,
            "ranks": sorted(self.ranks),
            "processes": [{"host": h, "pid": p} for h, p in sorted(self.procs, key=lambda x: (x[0], str(x[1])))],
            "call_site": user,
            "innermost_frame": inner,
            "python_stack": dicts(ex.get("python_stack")),
            "native_stack": dicts(ex.get("native_stack"), str),
            "values": [{"value": v, "count": c} for v, c in sorted(self.values.items())],
            "min": self.min,
            "max": self.max,
            "actions": self.actions,
            "outcomes": self.outcomes,
            "first_event": {"file": ex.get("_file"), "line": ex.get("_line"),
                            "launch_seq": ex.get("launch_seq"),
                            "samples": dicts(ex.get("bad").get("samples"))
                            if isinstance(ex.get("bad"), dict) else []},
            "files": sorted(self.files),
        }


def merge(paths):
    errors, malformed, truncated, clipped = [], [], [], []
    files = find_files(paths, errors)
    problems = {}
    warnings = {}
    asserts = []
    procs = {}      # (host, pid, file) -> {"start": ev, "summary": ev}
    n_events = 0
    for path in files:
        for lineno, ev in read_events(path, malformed, truncated, errors, clipped):
            n_events += 1
            if isinstance(ev.get("pid"), (list, dict)):  # keys of sets below: a damaged line's pid as its text
                ev = dict(ev, pid=json.dumps(ev["pid"]))
            kind = ev.get("event")
            proc = procs.setdefault((str(ev.get("host", "?")), ev.get("pid"), path),
                                    {"rank": ev.get("rank"), "start": None, "summary": None,
                                     "violations": 0})
            if kind == "violation":
                proc["violations"] += 1
                tgt = ev.get("target") if isinstance(ev.get("target"), dict) else {}
                user, _ = call_site(ev.get("python_stack"))
                site = "%s:%s" % (user.get("file"), user.get("line")) if user else None
                key = (str(ev.get("kernel", "?")), str(ev.get("cause", "other")),
                       as_int(tgt.get("n_classes")), as_int(tgt.get("ignore_index")), site)
                ev = dict(ev, _file=path, _line=lineno)
                problems.setdefault(key, Problem(key)).add(ev, path)
            elif kind == "warning":
                wk = (str(ev.get("what", "?")), str(ev.get("detail", "")))
                w = warnings.setdefault(wk, {"what": wk[0], "detail": wk[1], "count": 0,
                                             "processes": set(), "first_time": ev.get("time")})
                w["count"] += 1
                w["processes"].add((str(ev.get("host", "?")), ev.get("pid")))
                if time_key(ev.get("time")) < time_key(w["first_time"]):
                    w["first_time"] = ev.get("time")
            elif kind == "device_assert":
                user, _ = call_site(ev.get("python_stack"))
                cands = dicts(ev.get("candidates"))
                asserts.append({
                    "host": str(ev.get("host", "?")), "pid": ev.get("pid"), "rank": ev.get("rank"),
                    "time": ev.get("time"), "found_at": ev.get("found_at"), "call_site": user,
                    "candidates": [{"kernel": c.get("kernel"), "thread": c.get("thread"),
                                    "finding_thread": c.get("finding_thread"),
                                    "call_site": call_site(c.get("python_stack"))[0]} for c in cands],
                    "generated_kernels": [dict({k: g.get(k) for k in ("kernel", "file", "line", "message")},
                                               launched=g.get("among_candidates") is True)
                                          for g in dicts(ev.get("generated_kernels"))],
                    "file": path, "line": lineno})
            elif kind in ("start", "summary"):
                proc[kind] = ev
    plist = sorted(problems.values(), key=lambda p: time_key(p.first))
    wlist = []
    for w in sorted(warnings.values(), key=lambda w: time_key(w["first_time"])):
        w = dict(w)
        w["processes"] = [{"host": h, "pid": p} for h, p in sorted(w["processes"], key=lambda x: (x[0], str(x[1])))]
        wlist.append(w)
    plist_json = [p.to_json() for p in plist]
    processes = []
    for (host, pid, path), pr in sorted(procs.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
        start = pr["start"] or {}
        summ = pr["summary"] or {}
        processes.append({
            "host": host, "pid": pid, "rank": pr["rank"], "file": path,
            "backend": start.get("backend"), "hooks": start.get("hooks"),
            "violations": pr["violations"],
            "ended_cleanly": pr["summary"] is not None,
            "launches": summ.get("launches"), "watched": summ.get("watched"),
        })
    return {
        "v": 1,
        "files": files,
        "events": n_events,
        "problems": plist_json,
        "violations": sum(p.events for p in plist),
        "warnings": wlist,
        "device_asserts": sorted(asserts, key=lambda a: time_key(a["time"])),
        "processes": processes,
        "malformed": malformed,
        "truncated": truncated,
        "clipped": clipped,
        "errors": errors,
    }


def histogram(values, width=40, bar="#"):
    """Lines of a horizontal bar chart of value -> count, values in numeric order."""
    if not values:
        return []
    top = max(c for c in values.values())
    label_w = max(len(str(v)) for v in values)
    out = []
    for v in sorted(values):
        c = values[v]
        n = max(1, round(width * c / top))
        out.append("    %*s | %s %d" % (label_w, v, bar * n, c))
    return out


def plural(n, word):
    if n == 1:
        return "%d %s" % (n, word)
    return "%d %s" % (n, word + ("es" if word.endswith(("s", "ch")) else "s"))


def print_text(r, out):
    enc = (getattr(out, "encoding", None) or "").lower()
    bar = "\u2588" if "utf" in enc else "#"
    w = out.write
    nproc = len(r["processes"])
    ranks = sorted({p["rank"] for p in r["processes"] if isinstance(p["rank"], int)})
    w("labelguard report: %s, %s, %s%s\n" % (
        plural(len(r["files"]), "file"), plural(r["events"], "event"), plural(nproc, "process"),
        (" (ranks %s)" % ", ".join(map(str, ranks))) if ranks else ""))
    if not r["problems"] and not r["device_asserts"]:
        w("\nNo label problems found.\n")
    elif not r["problems"]:
        w("\nNo label problems found; %s that labelguard did not check:\n" %
          plural(len(r["device_asserts"]), "device-side assert"))
    else:
        w("\n%s (%s in total):\n" % (plural(len(r["problems"]), "distinct problem"),
                                     plural(r["violations"], "violation")))
    for i, p in enumerate(r["problems"], 1):
        w("\n[%d] %s%s: %s\n" % (i, p["kernel"],
                                 (" (%s)" % "/".join(p["directions"])) if p["directions"] else "",
                                 p["cause"]))
        w("    fix:        %s\n" % p["fix"])
        if p.get("probs"):  # torch.multinomial's weights: rows x categories, finite, >= 0, no row of zeros
            w("    values:     %s bad in %s; first launch's span %s..%s, %s rows of %s, valid: finite, >= 0, each "
              "row's sum > 0%s\n" % (p["bad_labels"], plural(p["events"], "launch"), p["range_min"], p["range_max"],
                                     p["probs"][0], p["probs"][1], (", dtype %s" % p["dtype"]) if p["dtype"] else ""))
        elif p.get("range"):  # BCE's probabilities: float values, valid in [0, 1]
            w("    values:     %s bad %s in %s; first launch's span %s..%s, valid [0, 1]%s\n" % (
                p["bad_labels"], "targets" if p.get("operand") == "target" else "probabilities",
                plural(p["events"], "launch"), p["range_min"], p["range_max"],
                (", dtype %s" % p["dtype"]) if p["dtype"] else ""))
        elif p.get("ids"):  # embedding / index ids: n_classes is the row count, ignore_index padding_idx
            w("    ids:        %s bad ids in %s; values %s..%s, bound %s, padding_idx %s%s\n" % (
                p["bad_labels"], plural(p["events"], "launch"), p["min"], p["max"], p["n_classes"],
                p["ignore_index"], (", dtype %s" % p["dtype"]) if p["dtype"] else ""))
        else:
            w("    labels:     %s bad labels in %s; values %s..%s, n_classes %s, ignore_index %s%s\n" % (
                p["bad_labels"], plural(p["events"], "launch"), p["min"], p["max"], p["n_classes"],
                p["ignore_index"], (", dtype %s" % p["dtype"]) if p["dtype"] else ""))
        samples = p["first_event"]["samples"][:4]
        if samples and p.get("probs"):  # probs[row, column]; a row of zeros is shown as probs[row, :]
            cols = max(int(p["probs"][1] or 1), 1)
            w("    first:      %s\n" % ", ".join(
                "probs[%d, %s] = %s" % (s.get("index", 0) // cols, ":" if s.get("value") == 0 else s.get("index", 0) % cols,
                                        s.get("value"))
                for s in samples if isinstance(s, dict) and isinstance(s.get("index"), int)))
        elif samples:
            w("    first:      %s\n" % ", ".join("%s[%s] = %s" % ("ids" if p.get("ids") else (p.get("operand") or "input") if p.get("range") else "target",
                                                                  s.get("index"),
                                                                  s.get("value"))
                                               for s in samples if isinstance(s, dict)))
        w("    where:      %s\n" % (fmt_frame(p["call_site"]) if p["call_site"]
                                     else "no Python stack (not a Python process?); native stack:"))
        if p["innermost_frame"] and p["innermost_frame"] is not p["call_site"] and p["innermost_frame"] != p["call_site"]:
            w("                (innermost: %s)\n" % fmt_frame(p["innermost_frame"]))
        if not p["call_site"]:
            ns = [s for s in p["native_stack"][:3]]
            if ns:
                w("    native:     %s\n" % "\n                ".join(ns))
        w("    when:       first %s, last %s\n" % (p["first_time"], p["last_time"]))
        w("    who:        %s; %s\n" % (
            ("rank " if len(p["ranks"]) == 1 else "ranks ") + ", ".join(map(str, p["ranks"])) if p["ranks"] else "no rank set",
            ", ".join("%s/%s" % (q["host"], q["pid"]) for q in p["processes"][:8]) +
            (" and %d more" % (len(p["processes"]) - 8) if len(p["processes"]) > 8 else "")))
        w("    action:     %s -> %s\n" % (
            ", ".join("%s x%d" % kv for kv in sorted(p["actions"].items())) or "-",
            ", ".join("%s x%d" % kv for kv in sorted(p["outcomes"].items())) or "-"))
        vals = {v["value"]: v["count"] for v in p["values"]}
        if vals:
            w("    offending values (among the sampled labels):\n")
            for line in histogram(vals, bar=bar):
                w(line + "\n")
    if r["device_asserts"] and r["problems"]:
        w("\n%s that labelguard did not check:\n" % plural(len(r["device_asserts"]), "device-side assert"))
    for a in r["device_asserts"]:
        w("\n  %s/%s%s at %s: CUDA error 710 returned by %s%s\n" % (
            a["host"], a["pid"], (" rank %s" % a["rank"]) if a["rank"] is not None else "", a["time"], a["found_at"],
            (", found at %s" % fmt_frame(a["call_site"])) if a["call_site"] else ""))
        for c in a["candidates"][:5]:
            w("    candidate:  %s%s%s\n" % (c["kernel"], "" if c["finding_thread"] else " (tid %s)" % c["thread"],
                                          (", launched at %s" % fmt_frame(c["call_site"])) if c["call_site"] else ""))
        if len(a["candidates"]) > 5:
            w("    ... %d more candidates in %s:%d\n" % (len(a["candidates"]) - 5, a["file"], a["line"]))
        for g in a["generated_kernels"][:5]:
            w("    compiled:   %s asserts `%s` at %s:%s%s\n" % (g["kernel"], g["message"], g["file"], g["line"],
                                                               " (launched: a candidate)" if g["launched"] else ""))
        if len(a["generated_kernels"]) > 5:
            w("    ... %d more compiled kernels with asserts in %s:%d\n" % (len(a["generated_kernels"]) - 5, a["file"],
                                                                           a["line"]))
    if r["warnings"]:
        w("\nWarnings:\n")
        for x in r["warnings"]:
            w("  %-22s x%-4d %s (%s)\n" % (x["what"], x["count"], x["detail"],
                                          plural(len(x["processes"]), "process")))
    unclean = [p for p in r["processes"] if not p["ended_cleanly"]]
    if unclean and r["processes"]:
        w("\n%s ended without a summary event (killed, crashed, or still running):\n" %
          plural(len(unclean), "process"))
        for p in unclean[:10]:
            w("  %s/%s%s  %s\n" % (p["host"], p["pid"],
                                   (" rank %s" % p["rank"]) if p["rank"] is not None else "", p["file"]))
    for t in r["truncated"]:
        w("\nnote: %s:%d: last line cut short (process killed while writing?); skipped\n" %
          (t["file"], t["line"]))
    for c in r["clipped"][:20]:
        w("\nnote: %s:%d: field %s was %d characters; printed cut to %d\n" %
          (c["file"], c["line"], c["field"], c["bytes"], FIELD_MAX))
    if r["malformed"]:
        w("\n%s skipped:\n" % plural(len(r["malformed"]), "malformed line"))
        for m in r["malformed"][:20]:
            w("  %s:%d: %s\n" % (m["file"], m["line"], m["error"]))
        if len(r["malformed"]) > 20:
            w("  ... and %d more\n" % (len(r["malformed"]) - 20))


def main(argv):
    ap = argparse.ArgumentParser(prog="labelguard report",
                                 description="Merge labelguard JSONL logs into one summary per problem.")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("paths", nargs="*", metavar="PATH", help="JSONL files or directories")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    if not a.paths:
        sys.stderr.write("labelguard: report needs at least one PATH (a .jsonl file or a log "
                         "directory)\nlabelguard: hint: labelguard report labelguard-logs\n")
        return 2
    r = merge(a.paths)
    if a.json:
        json.dump(r, sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
    else:
        if not r["files"] and not r["errors"]:
            sys.stdout.write("labelguard report: no *.jsonl files under %s: nothing was logged "
                             "(the library writes a log only when it has an event)\n" %
                             ", ".join(a.paths))
        elif r["files"]:  # nothing readable at all: the errors below say it all
            print_text(r, sys.stdout)
    for e in r["errors"]:
        sys.stderr.write("labelguard: %s\n" % e)
    if r["errors"] or r["malformed"]:
        sys.stderr.write("labelguard: the input is damaged or unreadable (see above); exit status 2\n")
        return 2
    return 1 if r["problems"] or r["device_asserts"] else 0

