"""report_types.py DIR: `labelguard report` on events whose fields have the wrong JSON type (a
damaged or foreign log): each field of a violation, a device_assert (with its candidates and
torch.compile's generated kernels), a warning, a start and a summary event is replaced in turn by
a number, a string, an array, an object, null and a float, and the report (text and JSON) must be
made without an exception. In one process (tests/cli/test_report.sh): the merge and both printers
are called directly. Prints one line per failure and "N cases, M failed"; exit 1 on a failure.
"""
import io
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from labelguard.commands import report  # noqa: E402

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
common = {"v": 1, "time": "2025-11-30T04:00:00Z", "host": "h", "pid": 7, "tid": 7, "rank": 0, "local_rank": 0}
events = [
    dict(common, event="start", version="x", config={}, hooks=[], backend="host", cuda_runtime=None, driver=None,
         device=None, torch=None),
    dict(common, event="violation", kernel="nll_loss_forward_reduce_cuda_kernel_2d", launch_seq=3,
         target={"n_classes": 5, "ignore_index": -100, "count": 8, "dtype": "int64"},
         bad={"count": 1, "samples": [{"index": 3, "value": 7}], "min": 0, "max": 7}, action="raise",
         outcome="blocked", cause="off_by_one", cause_text="x",
         python_stack=[{"file": "/u/t.py", "line": 3, "function": "f"}], native_stack=["a"]),
    dict(common, event="device_assert", found_at="cudaMemcpy", python_stack=[{"file": "/u/t.py", "line": 9}],
         candidates=[{"kernel": "k", "thread": 7, "finding_thread": True,
                      "python_stack": [{"file": "/u/t.py", "line": 8, "function": "g"}]}],
         generated_kernels=[{"kernel": "triton_poi_fused_embedding_0", "file": "/c/5v/c5v.py", "line": 30,
                             "message": "index out of bounds: 0 <= tmp4 < 32000"}]),
    dict(common, event="warning", what="w", detail="d"),
    dict(common, event="summary", launches=3, violations=1),
]
nested = {("device_assert", "candidates"), ("device_assert", "generated_kernels"), ("violation", "target"),
          ("violation", "bad"), ("violation", "python_stack")}
values = (5, "s", [1, 2], {"a": 1}, None, 1.5)
cases = failed = 0


def one(evs, what):
    global cases, failed
    cases += 1
    path = os.path.join(d, "h-7.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in evs))
    try:
        r = report.merge([path])
        report.print_text(r, io.StringIO())
        json.dumps(r)
    except Exception as e:  # the failure this test looks for
        failed += 1
        print("FAIL: %s: %s: %s" % (what, type(e).__name__, e))


for i, ev in enumerate(events):
    for key in ev:
        if key == "event":
            continue
        for val in values:
            evs = [dict(e) for e in events]
            evs[i][key] = val
            one(evs, "%s.%s = %r" % (ev["event"], key, val))
    for (kind, key) in nested:
        if kind != ev["event"]:
            continue
        inner = ev[key][0] if isinstance(ev[key], list) else ev[key]
        for k2 in inner:
            for val in values:
                evs = [dict(e) for e in events]
                item = dict(inner, **{k2: val})
                evs[i][key] = [item] if isinstance(ev[key], list) else item
                one(evs, "%s.%s.%s = %r" % (ev["event"], key, k2, val))
print("%d cases, %d failed" % (cases, failed))
sys.exit(1 if failed else 0)
