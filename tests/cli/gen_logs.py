#!/usr/bin/env python3
"""gen_logs.py DIR: writes the synthetic JSONL logs of three processes (ranks 0-2) that
tests/cli/test_report.sh merges. Events follow DESIGN.md §4. Rank 2's file ends with a line
cut short (its process was killed while writing) and has no summary event.
The expected merge is described in test_report.sh, next to its checks."""
import json, os, sys

d = sys.argv[1]
os.makedirs(os.path.join(d, "node-b"), exist_ok=True)

def base(ev, pid, rank, t):
    return {"v": 1, "event": ev, "time": "2025-11-30T03:%02d:%02dZ" % (t // 60, t % 60),
            "host": "node-a" if rank < 2 else "node-b", "pid": pid, "tid": pid + 1,
            "rank": rank, "local_rank": rank % 2}

TRAIN = [{"file": "/usr/lib/python3.11/runpy.py", "line": 86, "function": "_run_code"},
         {"file": "/home/u/train.py", "line": 88, "function": "<module>"},
         {"file": "/home/u/train.py", "line": 52, "function": "train_step"},
         {"file": "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py", "line": 3086,
          "function": "cross_entropy"}]
AUX = [{"file": "/home/u/train.py", "line": 88, "function": "<module>"},
       {"file": "/home/u/model.py", "line": 140, "function": "aux_loss"}]

def cause_text(cause, lo, hi, n):
    """What the library's cause.c writes for these two causes."""
    if cause == "one_based":
        return "labels span %d..%d with %d classes; they look 1-based: subtract 1" % (lo, hi, n)
    return ("labels span %d..%d but the model has %d outputs: give the last layer at least %d outputs "
            "(check num_classes)" % (lo, hi, n, hi + 1))

def violation(pid, rank, t, samples, stack, n=10, cause="one_based", kernel="nll_loss_forward_reduce_cuda_kernel_2d"):
    e = base("violation", pid, rank, t)
    vals = [v for _, v in samples]
    e.update({"kernel": kernel,
              "symbol": "_ZN2at6native38_GLOBAL__N__x38" + kernel + "IfflEEvPT_S4_PKS3_PKT1_S6_bllll",
              "family": "nll_loss", "direction": "forward", "launch_seq": t, "stream": "0x0",
              "device": 0,
              "target": {"dtype": "int64", "count": 64, "n_classes": n, "ignore_index": -100},
              "bad": {"count": len(samples), "min": min(vals), "max": max(vals),
                      "samples": [{"index": i, "value": v} for i, v in samples]},
              "cause": cause, "cause_text": cause_text(cause, min(vals), max(vals), n),
              "action": "mask", "outcome": "masked",
              "native_stack": ["libtorch_cuda.so+0x1234 at::native::nll_loss_forward_out_cuda"],
              "python_stack": stack})
    return e

def start(pid, rank, t):
    e = base("start", pid, rank, t)
    e.update({"version": "0.1", "config": {"action": "mask", "mode": "sync"}, "hooks": ["interpose"],
              "backend": "host", "cuda_runtime": "13.0", "driver": None,
              "device": {"name": "fake", "index": 0}, "torch": None})
    return e

def summary(pid, rank, t, v):
    e = base("summary", pid, rank, t)
    e.update({"launches": 120, "watched": 60, "validated": 60, "violations": v, "validate_ns_total": 12345})
    return e

def warning(pid, rank, t):
    e = base("warning", pid, rank, t)
    e.update({"what": "cupti_unavailable", "detail": "libcupti.so not found"})
    return e

def write(path, events, tail=""):
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
        f.write(tail)

# rank 0: two one-based violations at the train.py:52 call, one aux (head too small) violation
write(os.path.join(d, "node-a-1000-rank0.jsonl"), [
    start(1000, 0, 1), warning(1000, 0, 2),
    violation(1000, 0, 37, [(17, 10), (40, 10)], TRAIN),
    violation(1000, 0, 80, [(3, 10)], TRAIN),
    violation(1000, 0, 90, [(5, 12), (6, 11), (9, 12)], AUX, n=11, cause="head_too_small"),
    summary(1000, 0, 200, 3)])
# rank 1: one one-based violation (same problem as rank 0's), the same warning
write(os.path.join(d, "node-a-1001-rank1.jsonl"), [
    start(1001, 1, 1), warning(1001, 1, 2),
    violation(1001, 1, 38, [(0, 10)], TRAIN),
    summary(1001, 1, 201, 1)])
# rank 2 (in a subdirectory): first event of the problem at t=36, then killed mid-write
v = violation(1002, 2, 36, [(63, 10)], TRAIN)
write(os.path.join(d, "node-b", "node-b-1002-rank2.jsonl"), [start(1002, 2, 1), v],
      tail=json.dumps(violation(1002, 2, 99, [(1, 10)], TRAIN))[:70])
