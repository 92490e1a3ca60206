#!/usr/bin/env bash
# test_device_assert.sh: a device-side assert in a kernel labelguard does not check is still
# turned into a report. python3 loads build/progs/libassertpy.so (tests/progs/libassertpy.cu: an
# extension whose own histogram kernel asserts `bins[i] >= 0 && bins[i] < nbins`) with ctypes,
# under LD_PRELOAD of the library and the runtime test double; a loop launches clean kernels,
# one bad histogram and more clean kernels, then synchronizes. Checks:
#   plain: without labelguard the sync returns 710 and the context stays dead;
#   default: one device_assert event (not one per later failing call), found at the sync's
#     Python line, checked_before_launch false; the candidates are this thread's launches newest
#     first (2 scale, the histogram, 3 scale), none checked by labelguard; the stderr block
#     names the histogram and says how to get the exact kernel and line; the error the program
#     sees is CUDA's own 710, unchanged;
#   LABELGUARD_LAUNCH_SITES=all: the histogram's candidate names the line that launched it;
#   the histogram launched from a native thread (autograd's backward runs on its own): it is
#     another thread's candidate, and its recorded line is the main thread's call;
#   the histogram captured into a CUDA graph and replayed: the replay is a candidate (any kernel
#     of the graph), with the line that replayed it; the summary counts kernel launches only;
#   CUDA_LAUNCH_BLOCKING=1 (the double's blocking launch returns its kernel's fault): the report
#     is made at the histogram's launch, and the kernel it names is the histogram, not the launch
#     before it (a launch that returned 710 is kept as a candidate only in blocking mode);
#   quiet: the event, and nothing on stderr from labelguard.
# The case where a labelguard report explains the assert (async mode, action log) is in
# test_assert_async.sh. Called by tests/run.sh; alone: bash tests/e2e/test_device_assert.sh
. "$(dirname "$0")/lib.sh"

lib="$LG_ROOT/$LG_BUILD/progs/libassertpy.so"
need "$lib"
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

script="$T/hist.py"
cat >"$script" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
how = sys.argv[2]  # 0: this thread, 1: a native thread, graph: a CUDA graph replay
in_thread = int(how) if how != "graph" else 0

def step(bins):
    arr = (ctypes.c_int * len(bins))(*bins)
    print("clean=%d" % lib.lgas_clean(3))
    if how == "graph":
        print("hist=%d" % lib.lgas_histogram_graph(arr, len(bins), 8))  # MARK_GRAPH
    else:
        print("hist=%d" % lib.lgas_histogram(arr, len(bins), 8, in_thread))  # MARK_BAD
    print("clean=%d" % lib.lgas_clean(2))

def train():
    step([i % 8 for i in range(32)][:31] + [8])
    rc = lib.lgas_sync()  # MARK_SYNC
    print("sync=%d" % rc)
    print("again=%d" % lib.lgas_sync())

train()
PY
line_of() { grep -n "$1" "$script" | head -1 | cut -d: -f1; }
BAD=$(line_of MARK_BAD)
SYNC=$(line_of MARK_SYNC)
GRAPH=$(line_of MARK_GRAPH)

n=plain
run_plain "$n" python3 "$script" "$lib" 0
cat "$T/$n.out" "$T/$n.err"
check "$n: without labelguard the sync returns 710, and so does the next call" \
  grep -qx "sync=710" "$T/$n.out"
check "$n: the device's assert line" grep -q "Assertion \`bins\[i\] >= 0 && bins\[i\] < nbins\` failed" "$T/$n.err"

n=default
run_lg "$n" python3 "$script" "$lib" 0
cat "$T/$n.out" "$T/$n.err"
check "$n: the program sees CUDA's own error, unchanged" grep -qx "sync=710" "$T/$n.out"
check "$n: ... at the next call too" grep -qx "again=710" "$T/$n.out"
events "$n" || fail "$n: log schema"
D='[e for e in E if e["event"] == "device_assert"]'
check "$n: one device_assert event, not one per failing call" qtrue "$n" "len($D) == 1"
check "$n: found at the sync, on its Python line, never checked before launch" \
  qtrue "$n" "$D[0]['found_at'] == 'cudaDeviceSynchronize' and $D[0]['python_stack'][-1]['line'] == $SYNC and $D[0]['python_stack'][-1]['function'] == 'train' and $D[0]['checked_before_launch'] is False"
echo "$n: $(q "$n" "[(c['kernel'], c['age'], c['finding_thread'], c['checked']) for c in $D[0]['candidates']]")"
check "$n: the candidates: this thread's launches, newest first" \
  qtrue "$n" "[c['kernel'] for c in $D[0]['candidates'] if c['finding_thread']] == ['lgas_scale'] * 2 + ['lgas_histogram'] + ['lgas_scale'] * 3"
check "$n: ... with their ages, grid and block, none checked by labelguard" \
  qtrue "$n" "[c['age'] for c in $D[0]['candidates']] == list(range(6)) and $D[0]['candidates'][2]['grid'] == [1, 1, 1] and $D[0]['candidates'][2]['block'] == [128, 1, 1] and not any(c['checked'] for c in $D[0]['candidates'])"
check "$n: no launch lines recorded by default" qtrue "$n" "not any('python_stack' in c for c in $D[0]['candidates'])"
check "$n: no violation" qtrue "$n" "not V"
check "$n: stderr says what happened" grep -q "labelguard: a device-side assert fired in a kernel labelguard does not check before launch" "$T/$n.err"
check "$n: ... where it was found" grep -q "found at: .*hist.py:$SYNC in train" "$T/$n.err"
check "$n: ... the histogram among the candidates" grep -q "^    lgas_histogram grid \[1,1,1\] block \[128,1,1\]" "$T/$n.err"
check "$n: ... and how to get the exact kernel and line" grep -q "rerun with CUDA_LAUNCH_BLOCKING=1 LABELGUARD_LAUNCH_SITES=all" "$T/$n.err"
check "$n: one block, not one per failing call" test "$(grep -c 'a device-side assert fired' "$T/$n.err")" = 1

n=sites
LABELGUARD_LAUNCH_SITES=all run_lg "$n" python3 "$script" "$lib" 0
cat "$T/$n.err"
events "$n" || fail "$n: log schema"
H="[c for c in $D[0]['candidates'] if c['kernel'] == 'lgas_histogram'][0]"
check "$n: the histogram's candidate names the line that launched it" \
  qtrue "$n" "$H['python_stack'][-1]['line'] == $BAD and $H['python_stack'][-1]['function'] == 'step' and $H['python_stack'][-2]['function'] == 'train'"
check "$n: ... on stderr" grep -q "lgas_histogram grid .*, launched at .*hist.py:$BAD in step" "$T/$n.err"
check "$n: the hint no longer asks for launch sites" grep -q "rerun with CUDA_LAUNCH_BLOCKING=1$" "$T/$n.err"
check "$n: the start event says so" qtrue "$n" "[e for e in E if e['event'] == 'start'][0]['config']['launch_sites'] == 'all'"

n=thread
LABELGUARD_LAUNCH_SITES=all run_lg "$n" python3 "$script" "$lib" 1
cat "$T/$n.err"
events "$n" || fail "$n: log schema"
check "$n: the histogram is another thread's candidate" \
  qtrue "$n" "$H['finding_thread'] is False and $H['age'] == 0 and 'lgas_histogram' not in [c['kernel'] for c in $D[0]['candidates'] if c['finding_thread']]"
check "$n: ... its line is the main thread's call, said so" \
  qtrue "$n" "$H['python_stack'][-1]['line'] == $BAD and $H['python_stack_thread'] == 'main'"
check "$n: stderr lists it under the other threads" grep -q "^    tid [0-9]*: lgas_histogram grid" "$T/$n.err"

n=graph
LABELGUARD_LAUNCH_SITES=all run_lg "$n" python3 "$script" "$lib" graph
cat "$T/$n.err"
events "$n" || fail "$n: log schema"
G="[c for c in $D[0]['candidates'] if c.get('graph_replay')]"
check "$n: the replay is a candidate, with the line that replayed it" \
  qtrue "$n" "len($G) == 1 and $G[0]['finding_thread'] and $G[0]['python_stack'][-1]['line'] == $GRAPH and $G[0]['kernel'].startswith('CUDA graph replay (exec ')"
check "$n: ... on stderr, as any kernel of the graph" grep -q "^    CUDA graph replay (exec 0x[0-9a-f]*) stream 0x[0-9a-f]*: any kernel of the graph, launched at .*hist.py:$GRAPH in step" "$T/$n.err"
check "$n: the summary counts kernel launches only (5 scale kernels and the captured one, not the replay)" \
  qtrue "$n" "[e for e in E if e['event'] == 'summary'][0]['launches'] == 6"

n=blocking
CUDA_LAUNCH_BLOCKING=1 LABELGUARD_LAUNCH_SITES=all run_lg "$n" python3 "$script" "$lib" 0
cat "$T/$n.out" "$T/$n.err"
check "$n: the blocking launch returns its kernel's assert" grep -qx "hist=710" "$T/$n.out"
events "$n" || fail "$n: log schema"
check "$n: found at that launch, on the histogram's line" \
  qtrue "$n" "len($D) == 1 and $D[0]['found_at'] == 'a kernel launch' and $D[0]['launch_blocking'] is True and $D[0]['python_stack'][-1]['line'] == $BAD"
check "$n: the newest candidate is the histogram itself, not the launch before it" \
  qtrue "$n" "[c['kernel'] for c in $D[0]['candidates'] if c['finding_thread']][:2] == ['lgas_histogram', 'lgas_scale']"
check "$n: stderr names it as the kernel" grep -A1 -q "CUDA_LAUNCH_BLOCKING=1: the kernel is this thread's newest launch:" "$T/$n.err"
check "$n: ... the histogram" bash -c "grep -A1 \"CUDA_LAUNCH_BLOCKING=1: the kernel is this thread's newest launch:\" '$T/$n.err' | grep -q '^    lgas_histogram grid'"

n=quiet
LABELGUARD_QUIET=1 run_lg "$n" python3 "$script" "$lib" 0
events "$n" || fail "$n: log schema"
check "$n: the event" qtrue "$n" "len($D) == 1"
check "$n: nothing from labelguard on stderr" sh -c "! grep -q labelguard '$T/$n.err'"
finish
