#!/usr/bin/env python3
"""check_report.py: checks what make_report.py wrote for the canned parts in fixtures/.

Called by `scripts/gpu-check.sh --selftest-report DIR` as `check_report.py DIR EXPECT RC`,
where RC is make_report.py's exit status. Compares gpu-report.json and gpu-report.md against
fixtures/expect.json: overall verdict, failed parts, each benchmark target's met/not met, the
validator's bandwidth factor, and lines the Markdown must contain. Prints each mismatch;
exit 0 when there is none. Standard library only, GPU-free.
"""
import json
import os
import sys


def main(argv):
    if len(argv) != 4:
        print("usage: check_report.py DIR EXPECT_JSON RC", file=sys.stderr)
        return 2
    d, exp = argv[1], json.load(open(argv[2]))
    errs = []
    try:
        r = json.load(open(os.path.join(d, "gpu-report.json")))
        md = open(os.path.join(d, "gpu-report.md")).read()
    except (OSError, ValueError) as e:
        print("report missing or not JSON: %s" % e)
        return 1

    def want(what, got, expected):
        if got != expected:
            errs.append("%s: got %r, expected %r" % (what, got, expected))
    want("make_report exit status", int(argv[3]), exp["rc"])
    want("ok", r.get("ok"), exp["ok"])
    want("failed_parts", r.get("failed_parts"), exp["failed_parts"])
    want("parts order", [p["part"] for p in r.get("parts", [])], exp["parts_order"])
    want("targets_met", r.get("targets_met"), exp["targets_met"])
    bench = {"%s/%s" % (b["loop"], b["config"]): b["met"] for b in r.get("bench_table", [])}
    for k, v in exp["bench_met"].items():
        want("bench %s met" % k, bench.get(k, "absent"), v)
    val = {str(v["labels"]): v["met"] for v in r.get("validator_table", [])}
    for k, v in exp["validator_met"].items():
        want("validator %s met" % k, val.get(k, "absent"), v)
    for line in exp["md_contains"]:
        if line not in md:
            errs.append("gpu-report.md lacks: %s" % line)
    for e in errs:
        print("MISMATCH " + e)
    print("report selftest: %d mismatches" % len(errs))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
