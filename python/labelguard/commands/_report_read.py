"""labelguard.commands._report_read: how `labelguard report` reads its input (the input rules of
commands/report.py's docstring): the regular *.jsonl files under each PATH, each opened without
blocking and checked again once open; each line parsed as one event of schema v 1, a damaged line
recorded as malformed (or, last and unterminated, as cut short), a line over LINE_MAX not parsed,
and every string field over FIELD_MAX cut and noted.

Used by labelguard.commands.report (merge, print_text); standard library only.
Tested by tests/cli/test_report.sh (a line cut short by a kill, malformed lines) and
tests/cli/test_report_hostile.sh (/dev/zero, FIFOs named and found in a directory, a 50 MB field).
"""
import json
import os
import stat

# Longest string field printed, and longest line read as an event: the library's events are a
# few KiB (a demangled kernel name or a stack frame is the longest string in them); a longer
# line is parsed (and its fields cut) up to LINE_MAX, beyond which it is not read as JSON.
FIELD_MAX = 4096
LINE_MAX = 64 << 20


def find_files(paths, errors):
    """Regular files only: a FIFO or device among the logs (or named on the command line)
    would block the report forever or never end (/dev/zero)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, dirs, names in os.walk(p, onerror=lambda e: errors.append(
                    "%s: cannot read directory: %s" % (e.filename, e.strerror))):
                dirs.sort()
                for n in sorted(names):
                    if not n.endswith(".jsonl"):
                        continue
                    f = os.path.join(root, n)
                    if os.path.isfile(f):
                        found.append(f)
                    else:
                        errors.append("%s: not a regular file; skipped" % f)
            files += found
        elif os.path.isfile(p):
            files.append(p)
        elif os.path.exists(p):
            errors.append("%s: not a regular file or a directory; skipped" % p)
        else:
            errors.append("%s: no such file or directory" % p)
    return files


def read_events(path, malformed, truncated, errors, clipped):
    """Yields (line number, event dict). Records damaged lines in malformed/truncated."""
    try:
        # O_NONBLOCK and a second check on the open file: the path may have been swapped for a
        # FIFO since find_files looked.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                errors.append("%s: not a regular file; skipped" % path)
                return
            data = fh.read()
    except OSError as e:
        errors.append("%s: cannot read: %s" % (path, e.strerror))
        return
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        last_unterminated = (i == len(lines)) and not ends_with_newline
        if len(raw) > LINE_MAX:
            (truncated if last_unterminated else malformed).append(
                {"file": path, "line": i,
                 "error": "line of %d bytes, longer than any event the library writes" % len(raw)})
            continue
        try:
            ev = json.loads(raw.decode("utf-8", errors="replace"))
            if not isinstance(ev, dict) or "event" not in ev:
                raise ValueError("not an event object (no \"event\" key)")
            if ev.get("v") != 1:
                raise ValueError("unknown schema version %r (this report reads v 1)" % ev.get("v"))
        except ValueError as e:
            msg = str(e).splitlines()[0]
            if last_unterminated:
                truncated.append({"file": path, "line": i, "error": msg})
            else:
                malformed.append({"file": path, "line": i, "error": msg})
            continue
        cut = []
        ev = clip_fields(ev, "", cut)
        for field, n in cut:
            clipped.append({"file": path, "line": i, "field": field, "bytes": n})
        yield i, ev


def clip_fields(x, where, cut):
    """x with every string longer than FIELD_MAX cut to it (marked), recording (field, length)
    in cut: a damaged log must not print a 50 MB field to the terminal."""
    if isinstance(x, str):
        if len(x) > FIELD_MAX:
            cut.append((where or "(value)", len(x)))
            return x[:FIELD_MAX] + "...[%d more characters cut]" % (len(x) - FIELD_MAX)
        return x
    if isinstance(x, dict):
        return {k: clip_fields(v, (where + "." if where else "") + str(k)[:64], cut) for k, v in x.items()}
    if isinstance(x, list):
        return [clip_fields(v, "%s[%d]" % (where, i), cut) for i, v in enumerate(x)]
    return x
