#!/usr/bin/env python3
"""make_report.py: merges the part results of scripts/gpu-check.sh into gpu-report.json and
gpu-report.md.

Called by gpu-check.sh as `make_report.py OUTDIR` after every part has run (or timed out).
Input, all under OUTDIR/parts/:
  NAME.status.json  written by gpu-check.sh for every part: part, status (pass|fail|timeout|
                    skip|error), rc, seconds, budget_s, log
  NAME.data.json    optional, written by the part's own program (env_probe.py,
                    run_scenarios.py, bench_train.py, tests/gpu/run.sh): part-specific details
Standard library only (the GPU machine's python has torch, this one need not). Tested GPU-free
by `scripts/gpu-check.sh --selftest-report DIR`, which feeds canned part files
(tests/torch/fixtures/) through this writer and checks the output. Exit status: 0 when every
part passed or was skipped, 1 otherwise, 2 on bad usage.
"""
import datetime
import json
import os
import sys

# Order in which parts appear; unknown parts follow in name order.
PART_ORDER = ["env", "deps", "build", "gpu-path", "scenarios", "test-gpu", "bench"]
# Targets the benchmarks are judged by; slowdown = 1 - steps_s / steps_s(none).
TARGETS = {
    ("gpu_bound", "labelguard_async"): 0.01,
    ("gpu_bound", "labelguard_sync"): 0.03,
    ("launch_bound", "labelguard_async"): 0.05,
}
VALIDATOR_BOUND_FACTOR = 2.0  # validator within 2x of the bandwidth bound at 16M labels


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"_error": "%s: %s" % (path, e)}


def load_parts(outdir):
    pdir = os.path.join(outdir, "parts")
    parts = {}
    if not os.path.isdir(pdir):
        return parts
    for fn in sorted(os.listdir(pdir)):
        if fn.endswith(".status.json"):
            name = fn[: -len(".status.json")]
            st = load_json(os.path.join(pdir, fn))
            if "_error" in st:
                st = {"part": name, "status": "error", "summary": st["_error"]}
            parts.setdefault(name, {}).update(st)
            parts[name]["part"] = name
    for fn in sorted(os.listdir(pdir)):
        if fn.endswith(".data.json"):
            name = fn[: -len(".data.json")]
            data = load_json(os.path.join(pdir, fn))
            p = parts.setdefault(name, {"part": name, "status": "error",
                                        "summary": "data without a status file"})
            if "_error" in data:
                p["data_error"] = data["_error"]
            else:
                p["data"] = data
    return parts


def ordered(parts):
    known = [n for n in PART_ORDER if n in parts]
    return known + sorted(n for n in parts if n not in PART_ORDER)


def fmt_s(x):
    return "-" if x is None else "%.1f s" % x


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def bench_judgement(bench):
    """Returns rows (loop, config, steps_s, ratio, slowdown, target, met) from bench data."""
    rows = []
    for loop in ("launch_bound", "gpu_bound"):
        cfgs = (bench.get("loops") or {}).get(loop) or {}
        base = (cfgs.get("none") or {}).get("steps_s")
        for cfg in ("none", "labelguard_sync", "labelguard_async", "cuda_launch_blocking",
                    "compute_sanitizer"):
            c = cfgs.get(cfg)
            if c is None:
                continue
            sps = c.get("steps_s")
            ratio = sps / base if (sps and base) else None
            slow = (1.0 - ratio) if ratio is not None else None
            target = TARGETS.get((loop, cfg))
            met = None
            if target is not None and slow is not None:
                met = slow <= target
            rows.append({"loop": loop, "config": cfg, "steps_s": sps, "ratio": ratio,
                         "slowdown": slow, "target": target, "met": met,
                         "status": c.get("status", "ok" if sps else "missing")})
    return rows


def validator_judgement(bench):
    rows = []
    for v in bench.get("validator") or []:
        t, bound = v.get("time_us"), v.get("bound_us")
        factor = (t / bound) if (t and bound) else None
        met = None
        if v.get("labels") == 16 * 1024 * 1024 and factor is not None:
            met = factor <= VALIDATOR_BOUND_FACTOR
        rows.append(dict(v, factor=factor, met=met))
    return rows


def build_report(outdir):
    parts = load_parts(outdir)
    env = (parts.get("env") or {}).get("data") or {}
    report = {
        "v": 1,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": env,
        "parts": [parts[n] for n in ordered(parts)],
    }
    bench = (parts.get("bench") or {}).get("data")
    if bench:
        report["bench_table"] = bench_judgement(bench)
        report["validator_table"] = validator_judgement(bench)
        targets = [r for r in report["bench_table"] if r["met"] is not None] + \
                  [r for r in report["validator_table"] if r["met"] is not None]
        report["targets_met"] = all(r["met"] for r in targets) if targets else None
    bad = [p["part"] for p in report["parts"] if p.get("status") not in ("pass", "skip")]
    report["failed_parts"] = bad
    report["ok"] = not bad and bool(report["parts"])
    return report


def render_md(r):
    out = []
    env = r.get("environment") or {}
    out.append("# labelguard GPU report")
    out.append("")
    out.append("Generated %s." % r["generated"])
    out.append("")
    if env:
        out.append("| what | value |")
        out.append("|---|---|")
        for k in ("gpu", "driver", "torch", "torch_cuda", "nvcc", "compute_sanitizer",
                  "libcudart", "libcupti", "libcupti_after_profiler", "libcuda", "glib", "python", "host"):
            if k in env:
                v = env[k]
                if isinstance(v, list):
                    v = ", ".join(map(str, v)) or "none"
                out.append("| %s | %s |" % (k, md_escape(v)))
        out.append("")
    out.append("## Parts")
    out.append("")
    out.append("| part | status | time | budget | summary |")
    out.append("|---|---|---|---|---|")
    for p in r["parts"]:
        out.append("| %s | %s | %s | %s | %s |" % (
            p["part"], p.get("status", "?"), fmt_s(p.get("seconds")),
            fmt_s(p.get("budget_s")), md_escape(p.get("summary", ""))))
    out.append("")
    out.append("Overall: **%s**%s" % ("PASS" if r["ok"] else "FAIL",
                                     "" if r["ok"] else " (" + ", ".join(r["failed_parts"]) + ")"))
    out.append("")
    parts = {p["part"]: p for p in r["parts"]}

    gp = (parts.get("gpu-path") or {}).get("data")
    if gp and gp.get("cases"):
        out.append("## GPU paths")
        out.append("")
        out.append("| case | result | detail |")
        out.append("|---|---|---|")
        for name, x in gp["cases"].items():
            out.append("| %s | %s | %s |" % (name, x.get("status"), md_escape(x.get("detail", ""))))
        out.append("")

    sc = (parts.get("scenarios") or {}).get("data")
    if sc and sc.get("results"):
        out.append("## PyTorch scenarios")
        out.append("")
        out.append("| scenario | mode | result | detail |")
        out.append("|---|---|---|---|")
        for x in sc["results"]:
            out.append("| %s | %s | %s | %s |" % (x.get("scenario"), x.get("mode"),
                                                 "pass" if x.get("ok") else
                                                 ("timeout" if x.get("timed_out") else "FAIL"),
                                                 md_escape(x.get("why", ""))))
        out.append("")

    tg = (parts.get("test-gpu") or {}).get("data")
    if tg:
        if tg.get("tests"):
            out.append("## make test-gpu")
            out.append("")
            out.append("| test | status | detail |")
            out.append("|---|---|---|")
            for t in tg["tests"]:
                out.append("| %s | %s | %s |" % (t.get("name"), t.get("status"),
                                                md_escape(t.get("detail", ""))))
            out.append("")
        if tg.get("kernels"):
            out.append("## PyTorch NLL kernels seen in the live process")
            out.append("")
            out.append("| kernel | param sizes (cudaFuncGetParamInfo) | spec | layout |")
            out.append("|---|---|---|---|")
            for k in tg["kernels"]:
                out.append("| `%s` | %s | %s | %s |" % (
                    md_escape(k.get("symbol", "")), md_escape(k.get("param_sizes", "")),
                    md_escape(k.get("spec") or "none"), md_escape(k.get("layout", ""))))
            out.append("")

    if "bench_table" in r:
        out.append("## Overhead (steps/s, same run)")
        out.append("")
        out.append("| loop | configuration | steps/s | ratio to none | slowdown | target | met |")
        out.append("|---|---|---|---|---|---|---|")
        for b in r["bench_table"]:
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                b["loop"], b["config"],
                "-" if b["steps_s"] is None else "%.1f" % b["steps_s"],
                "-" if b["ratio"] is None else "%.4f" % b["ratio"],
                "-" if b["slowdown"] is None else "%+.2f%%" % (100 * b["slowdown"]),
                "-" if b["target"] is None else "<= %g%%" % (100 * b["target"]),
                {True: "yes", False: "**no**", None: "-"}[b["met"]]))
        out.append("")
        if r.get("validator_table"):
            out.append("| validator labels | dtype | kernel time | sync call (wall) | bandwidth bound | factor | met (<= 2x at 16M) |")
            out.append("|---|---|---|---|---|---|---|")
            for v in r["validator_table"]:
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    v.get("labels"), v.get("dtype", "int64"),
                    "-" if v.get("time_us") is None else "%.2f us" % v["time_us"],
                    "-" if v.get("sync_call_wall_us") is None else "%.2f us" % v["sync_call_wall_us"],
                    "-" if v.get("bound_us") is None else "%.2f us" % v["bound_us"],
                    "-" if v["factor"] is None else "%.2fx" % v["factor"],
                    {True: "yes", False: "**no**", None: "-"}[v["met"]]))
            out.append("")
        bench = parts["bench"]["data"]
        lat = bench.get("latency") or {}
        if lat:
            out.append("| one validated loss launch | us per call | added vs none |")
            out.append("|---|---|---|")
            base = (lat.get("none") or {}).get("us")
            for cfg in ("none", "labelguard_sync", "labelguard_async"):
                c = lat.get(cfg) or {}
                us = c.get("us")
                out.append("| %s | %s | %s |" % (
                    cfg, "-" if us is None else "%.2f" % us,
                    "-" if (us is None or base is None) else "%+.2f us" % (us - base)))
            out.append("")
        ls = bench.get("library_summary") or {}
        if ls:
            out.append("| labelguard's own summary | launches | watched | validated | violations | validation time per validated launch |")
            out.append("|---|---|---|---|---|---|")
            for cfg, t in sorted(ls.items()):
                out.append("| %s | %s | %s | %s | %s | %s |" % (
                    cfg, t.get("launches"), t.get("watched"), t.get("validated"), t.get("violations"),
                    "-" if t.get("validate_ns_per_launch") is None else "%.1f us" % (t["validate_ns_per_launch"] / 1e3)))
            out.append("")
        if bench.get("hbm_gbps"):
            out.append("Measured device memory bandwidth: %.0f GB/s." % bench["hbm_gbps"])
            out.append("")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: make_report.py OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    r = build_report(outdir)
    with open(os.path.join(outdir, "gpu-report.json"), "w", encoding="utf-8") as f:
        json.dump(r, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(os.path.join(outdir, "gpu-report.md"), "w", encoding="utf-8") as f:
        f.write(render_md(r))
    print("report: %s/gpu-report.md (%s)" % (outdir, "PASS" if r["ok"] else
                                           "FAIL: " + ", ".join(r["failed_parts"]) or "no parts"))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
