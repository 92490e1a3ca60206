#!/usr/bin/env bash
# test_report.sh: `labelguard report` merging the logs of three processes (ranks 0-2, one file
# in a subdirectory, one ending in a line cut short by a kill) written by gen_logs.py; the
# --json output is parsed with python3's json module and checked field by field; the text
# output is checked for the parts a person reads; exit statuses 0/1/2.
. "$(dirname "$0")/lib.sh"
here="$LG_ROOT/tests/cli"
python3 "$here/gen_logs.py" "$T/logs" || fail "gen_logs.py"

run_cmd "$LG" report --json "$T/logs"
expect_rc 1 "problems found -> exit 1 (a truncated last line is not an error)"
python3 - "$T/out" "$T/logs" <<'PY' || fail "JSON output"
import json, sys
r = json.load(open(sys.argv[1]))
d = sys.argv[2]
def check(cond, what):
    if not cond:
        print("check failed:", what); print(json.dumps(r, indent=1)[:3000]); sys.exit(1)
check(len(r["files"]) == 3, "3 files, the subdirectory searched")
check(len(r["problems"]) == 2, "two distinct problems (one_based at train.py:52, head_too_small at model.py:140)")
p, q = r["problems"]
check(p["cause"] == "one_based" and p["kernel"] == "nll_loss_forward_reduce_cuda_kernel_2d", "first problem kind")
check(p["events"] == 4, "4 violation events of problem 1 over 3 processes (the cut line not counted): %r" % p["events"])
check(p["bad_labels"] == 5, "5 bad labels in total")
check(p["ranks"] == [0, 1, 2], "ranks 0,1,2")
check([x["pid"] for x in p["processes"]] == [1000, 1001, 1002], "pids")
check({x["host"] for x in p["processes"]} == {"node-a", "node-b"}, "hosts")
check(p["first_time"] == "2025-11-30T03:00:36Z", "first occurrence is rank 2's (t=36), not file order")
check(p["last_time"] == "2025-11-30T03:01:20Z", "last occurrence")
check(p["call_site"] == {"file": "/home/u/train.py", "line": 52, "function": "train_step"}, "user call site, not torch's frame")
check(p["innermost_frame"]["function"] == "cross_entropy", "innermost frame kept")
check(p["values"] == [{"value": 10, "count": 5}], "offending values with counts")
check(p["n_classes"] == 10 and p["ignore_index"] == -100 and p["dtype"] == "int64", "target fields")
check("subtract 1" in p["fix"], "fix for one_based")
check(p["outcomes"] == {"masked": 4}, "outcomes")
check(q["cause"] == "head_too_small" and q["ranks"] == [0] and q["events"] == 1, "second problem")
check(q["values"] == [{"value": 11, "count": 1}, {"value": 12, "count": 2}], "values of problem 2")
check(q["max"] == 12 and "at least 13 outputs" in q["fix"], "fix of problem 2 uses the max label")
check(r["violations"] == 5, "5 violations")
check(len(r["warnings"]) == 1 and r["warnings"][0]["count"] == 2 and len(r["warnings"][0]["processes"]) == 2, "warnings merged")
check(r["malformed"] == [], "no malformed lines")
check(len(r["truncated"]) == 1 and r["truncated"][0]["file"].endswith("node-b-1002-rank2.jsonl") and r["truncated"][0]["line"] == 3, "truncated line reported with file:line")
procs = {x["pid"]: x for x in r["processes"]}
check(procs[1002]["ended_cleanly"] is False and procs[1000]["ended_cleanly"] is True, "process without summary found")
PY
ok "JSON merge of three ranks"

run_cmd "$LG" report "$T/logs"
expect_rc 1 "text report exit 1"
for s in "2 distinct problems" "one_based" "subtract 1" "/home/u/train.py:52 in train_step" "ranks 0, 1, 2" \
         "target[63] = 10" "offending values" "cupti_unavailable" "head_too_small" "node-b-1002-rank2.jsonl:3: last line cut short" \
         "ended without a summary"; do
  expect_in out "$s" "text report"
done
grep -Eq '^ +10 \| [#█]+ 5$' "$T/out" || fail "histogram line for value 10"
grep -Eq '^ +12 \| [#█]+ 2$' "$T/out" || fail "histogram line for value 12"
ok "text report"

# Files given one by one give the same merge as the directory.
run_cmd "$LG" report --json "$T/logs/node-a-1000-rank0.jsonl" "$T/logs/node-a-1001-rank1.jsonl" "$T/logs/node-b"
expect_rc 1 "files and a directory"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if len(r["files"])==3 and r["violations"]==5 else 1)' "$T/out" || fail "explicit files"

# A malformed line in the middle: reported as file:line, skipped, report still made, exit 2.
cp -r "$T/logs" "$T/bad"
sed -i '2s/.*/{"v": 1, "event": "violation", broken/' "$T/bad/node-a-1001-rank1.jsonl"
run_cmd "$LG" report "$T/bad"
expect_rc 2 "malformed line -> 2"
expect_in out "node-a-1001-rank1.jsonl:2:" "malformed line named by file:line"
expect_in out "distinct problems" "report still printed"
run_cmd "$LG" report --json "$T/bad"; expect_rc 2 "malformed line, --json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); m=r["malformed"]; sys.exit(0 if len(m)==1 and m[0]["line"]==2 else 1)' "$T/out" || fail "malformed in JSON"
printf '{"v": 2, "event": "start"}\n' >"$T/bad/future.jsonl"
run_cmd "$LG" report --json "$T/bad/future.jsonl"; expect_rc 2 "unknown schema version"
ok "malformed input"

# No violations: exit 0. Nothing at all: exit 0 with a clear sentence. Missing path: 2.
mkdir -p "$T/clean"; head -n 2 "$T/logs/node-a-1001-rank1.jsonl" >"$T/clean/x.jsonl"
run_cmd "$LG" report "$T/clean"; expect_rc 0 "no violations"; expect_in out "No label problems found" "clean message"
mkdir -p "$T/empty"; run_cmd "$LG" report "$T/empty"; expect_rc 0 "empty dir"; expect_in out "nothing was logged" "empty dir message"
run_cmd "$LG" report "$T/nope"; expect_rc 2 "missing path"; expect_in err "no such file" "missing path message"
run_cmd "$LG" report; expect_rc 2 "no path"
run_cmd "$LG" report --bogus "$T/logs"; expect_rc 2 "bad option"
# An unreadable file (root reads everything, so as user nobody when we are root).
cp "$T/clean/x.jsonl" "$T/unreadable.jsonl"; chmod 000 "$T/unreadable.jsonl"; chmod 755 "$T"
as=(); cli=$LG
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  as=(setpriv --reuid=nobody --regid=nogroup --clear-groups); cli=$(world_cli)
fi
if [ "$(id -u)" != 0 ] || [ ${#as[@]} -gt 0 ]; then
  run_cmd ${as[@]+"${as[@]}"} "$cli" report "$T/unreadable.jsonl" "$T/clean"
  expect_rc 2 "unreadable file"; expect_in err "cannot read" "unreadable file message"
  expect_in out "No label problems found" "the readable part is still reported"
fi
ok "exit statuses"

# A device-side assert labelguard did not check: listed with where it was found and its first
# candidates, and a problem for the exit status.
mkdir -p "$T/assert"
python3 - "$T/assert/node-c-77.jsonl" <<'PY'
import json, sys
common = {"v": 1, "time": "2025-11-30T04:00:00Z", "host": "node-c", "pid": 77, "tid": 77, "rank": None,
          "local_rank": None}
cand = lambda k, line, fin=True: {"thread": 77 if fin else 80, "finding_thread": fin, "age": 0, "kernel": k,
                                  "symbol": None, "grid": [1, 1, 1], "block": [128, 1, 1], "stream": "0x0",
                                  "checked": False,
                                  "python_stack": [{"file": "/home/u/train.py", "line": line, "function": "step"}]}
ev = dict(common, event="device_assert", error=710, error_name="cudaErrorAssert", found_at="cudaStreamSynchronize",
          checked_before_launch=False, launch_blocking=False, note="not checked before launch",
          native_stack=[], python_stack=[{"file": "/home/u/train.py", "line": 61, "function": "train"}],
          candidates=[cand("vectorized_elementwise_kernel", 59), cand("lgas_histogram", 58),
                      cand("embedding_backward_kernel", 40, False)],
          generated_kernels=[{"kernel": "triton_poi_fused_embedding_0", "file": "/tmp/torchinductor_u/5v/c5v.py",
                              "line": 30, "message": "index out of bounds: 0 <= tmp4 < 32000", "source_nodes": "h",
                              "aten_ops": "aten.embedding", "among_candidates": False},
                             {"kernel": "triton_poi_fused_index_1", "file": "/tmp/torchinductor_u/ab/cab.py",
                              "line": 21, "message": "index out of bounds: 0 <= tmp5 < 8", "among_candidates": True}])
open(sys.argv[1], "w").write(json.dumps(dict(common, event="start", version="x", config={}, hooks=[], backend="host",
                                             cuda_runtime=None, driver=None, device=None, torch=None)) + "\n" +
                             json.dumps(ev) + "\n")
PY
run_cmd "$LG" report "$T/assert"; expect_rc 1 "a device assert is a problem: exit 1"
expect_in out "No label problems found; 1 device-side assert that labelguard did not check" "device assert headline"
expect_in out "node-c/77 at 2025-11-30T04:00:00Z: CUDA error 710 returned by cudaStreamSynchronize, found at /home/u/train.py:61" "where it was found"
expect_in out "candidate:  lgas_histogram, launched at /home/u/train.py:58" "a candidate with its line"
expect_in out "candidate:  embedding_backward_kernel (tid 80)" "another thread's candidate"
grep -qxF -- "    compiled:   triton_poi_fused_embedding_0 asserts \`index out of bounds: 0 <= tmp4 < 32000\` at /tmp/torchinductor_u/5v/c5v.py:30" "$T/out" ||
  fail "a compiled kernel's assert, not launched: its line is not in out"
expect_in out "compiled:   triton_poi_fused_index_1 asserts \`index out of bounds: 0 <= tmp5 < 8\` at /tmp/torchinductor_u/ab/cab.py:21 (launched: a candidate)" "a compiled kernel's assert, launched"
run_cmd "$LG" report --json "$T/assert"; expect_rc 1 "device assert, --json"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["device_asserts"]; sys.exit(0 if len(a)==1 and a[0]["found_at"]=="cudaStreamSynchronize" and [c["kernel"] for c in a[0]["candidates"]][1]=="lgas_histogram" else 1)' "$T/out" || fail "device assert in JSON"
ok "device asserts"
# Fields of the wrong JSON type (a damaged or foreign log): the report is still made.
python3 "$LG_ROOT/tests/cli/report_types.py" "$T/types" > "$T/types.out" 2>&1 || { cat "$T/types.out"; fail "a field of the wrong type stops the report"; }
ok "fields of the wrong type: $(tail -1 "$T/types.out")"
finish
