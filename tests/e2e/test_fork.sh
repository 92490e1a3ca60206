#!/usr/bin/env bash
# test_fork.sh: fork and exec with the library preloaded (build/progs/forker,
# build/e2e/fork_storm), under the runtime test double:
#   - a child that does not launch writes nothing, and never into the parent's log;
#   - a child that launches (FAKECUDA_FORK_OK=1 lets it use the runtime) is checked and gets its
#     own log file, named by its own pid; without FAKECUDA_FORK_OK it sees the runtime's own
#     error exactly as without the library;
#   - after exec the library starts fresh: the exec'd program's events (its own start event,
#     launch_seq from 1) are in a file named by its pid;
#   - no lock is inherited held: children forked at random moments while 4 threads of the parent
#     launch and report bad labels launch at once and finish (no deadlock: a child is hung when
#     it sleeps with flat CPU time for 30 s, whatever the load; fork_storm.cu prints what it waits
#     on), and every parent launch is reported exactly once in the parent's file;
#   - the same for every lock the library has, read from its sources: each pthread mutex is
#     re-initialised by a fork-child handler that lg.c's atfork handler reaches (the storm only
#     catches the locks its threads happen to hold; under qemu-user, where a dlopen is slow,
#     it caught runtime.c's version-lookup lock).
. "$(dirname "$0")/lib.sh"
FORKER="$PROGS/forker"

# Every `pthread_mutex_t NAME` of src/*/*.c is re-initialised (pthread_mutex_init(&NAME, ...)), and
# every `lg_seen_t NAME` (base/seen.c's set, its own lock inside) reset (lg_seen_after_fork(&NAME)), in
# a function of the same file named *after_fork* / *atfork_child*, and that function is called
# from lg.c's atfork_child, directly or through a function it calls.
check_locks() {
  python3 - "$LG_ROOT/src" <<'PY'
import glob, os, re, sys
src = sys.argv[1]
text = {os.path.basename(f): open(f).read() for f in glob.glob(os.path.join(src, "*", "*.c"))}
def body(name):
    for t in text.values():
        m = re.search(r"\n(?:static )?void " + name + r"\(void\)\s*\{", t)
        if m:
            depth, i = 1, m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(t[i], 0); i += 1
            return t[m.end():i]
    return ""
reached, todo = set(), ["atfork_child"]
while todo:
    f = todo.pop()
    if f in reached: continue
    reached.add(f)
    todo += [c for c in re.findall(r"\b(lg_\w*(?:after_fork|atfork_child)\w*)\(\)", body(f))]
bad = 0
for fname, t in sorted(text.items()):
    for kind, lock in re.findall(r"(pthread_mutex_t|lg_seen_t)\s+(\w+)\s*=", t):
        reset = "pthread_mutex_init" if kind == "pthread_mutex_t" else "lg_seen_after_fork"
        ok = False
        for fn in re.findall(r"void (\w*(?:after_fork|atfork_child)\w*)\(void\)", t):
            if fn in reached and re.search(reset + r"\(&" + lock + r"\b", body(fn)):
                ok = True
        if not ok:
            print(f"{fname}: lock {lock} is not re-initialised by a fork-child handler lg.c reaches"); bad += 1
print(f"locks unchecked: {bad}")
sys.exit(1 if bad else 0)
PY
}
check "every lock of the library is re-initialised in a fork child" check_locks

# Fork handlers are registered once, by the constructor, while the process is one thread: glibc
# before 2.36 runs prepare handlers under its own atfork lock, so a pthread_atfork made later
# under one of our locks (a start) deadlocks against a fork that waits for that lock.
atfork_calls() {
  grep -n 'pthread_atfork(' "$LG_ROOT"/src/*/*.c | grep -v '^[^:]*:[0-9]*:\s*/\?\*'
}
atfork_once_in_lg() { [ "$(atfork_calls | wc -l)" = 1 ] && atfork_calls | grep -q '/hooks/lg\.c:'; }
check "pthread_atfork is called once, in lg.c" atfork_once_in_lg

# logs NAME: one line per log file: "<pid> <starts> <violations> <summaries> <lowest launch_seq>",
# after checking that every event of a file has the pid its name carries (<host>-<pid>[-N].jsonl)
logs() {
  python3 - "$T/$1.json" <<'PY'
import collections, json, re, sys
E = json.load(open(sys.argv[1]))
by = collections.defaultdict(list)
for e in E:
    by[e["_file"]].append(e)
for f, es in sorted(by.items()):
    pids = {e["pid"] for e in es}
    host = es[0]["host"]
    if len(pids) != 1:
        print(f"FILE {f} mixes pids {sorted(pids)}"); continue
    pid = pids.pop()
    if not re.fullmatch(re.escape(host) + f"-{pid}(-[0-9]+)?\\.jsonl", f):
        print(f"FILE {f} holds events of pid {pid}"); continue
    n = collections.Counter(e["event"] for e in es)
    seqs = [e["launch_seq"] for e in es if e["event"] == "violation"]
    print(pid, n["start"], n["violation"], n["summary"], min(seqs) if seqs else "-")
PY
}
nofile() { ! grep FILE "$1"; }
# run_f NAME ENV... -- ARGS: forker with the preload, under a hang guard far above the slowest
# run (F_LIMIT seconds; each case takes well under a second natively, seconds under qemu)
run_f() {
  local n=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  run_lg "$n" timeout -k 5 "${F_LIMIT:-120}" env "${envs[@]}" "$@"
}

# 1. the child does not launch, then execs sh: nothing from it in any log
run_f plain-child -- "$FORKER" --bad
check "child without launches: exit 0" [ "$(rc_of plain-child)" = 0 ]
check "child without launches: exec'd command ran" grep -qx 'exec-ok' "$T/plain-child.out"
check "child without launches: parent blocked its bad launch, then ran clean" \
  grep -q 'parent second copy_err=0 launch_err=0 sync_err=0' "$T/plain-child.out"
if events plain-child; then
  logs plain-child >"$T/plain-child.logs.txt"
  check "child without launches: one log file, the parent's: start, 1 violation, summary" \
    [ "$(cut -d' ' -f2- "$T/plain-child.logs.txt")" = "1 1 1 1" ]
else fail "plain-child schema"; fi

# 2. the child launches on the parent's runtime (not allowed by CUDA): the runtime's own error,
# exactly as without the library; whatever the library says goes to the child's own file
run_plain child-launch-ref "$FORKER" --child-launch
run_f child-launch -- "$FORKER" --child-launch
check "child launch, fork-unsafe runtime: same child line as without the library" \
  [ "$(grep '^child' "$T/child-launch.out")" = "$(grep '^child' "$T/child-launch-ref.out")" ]
check "child launch, fork-unsafe runtime: runtime's error 3" grep -q '^child copy_err=3 launch_err=3' "$T/child-launch.out"
if events child-launch; then
  logs child-launch >"$T/child-launch.logs.txt"
  check "child launch, fork-unsafe runtime: no file mixes processes" nofile "$T/child-launch.logs.txt"
  check "child launch, fork-unsafe runtime: the parent's file has its start and summary" \
    grep -q '^[0-9]* 1 0 1 -$' "$T/child-launch.logs.txt"
else fail "child-launch schema"; fi

# 3. the child launches a bad label on a fork-safe runtime: blocked, reported in its own file
run_f child-bad FAKECUDA_FORK_OK=1 -- "$FORKER" --bad --child-bad
check "child bad launch: exit 0" [ "$(rc_of child-bad)" = 0 ]
check "child bad launch: blocked in the child" grep -q '^child copy_err=0 launch_err=800 sync_err=0' "$T/child-bad.out"
check "child bad launch: parent goes on" grep -q 'parent second copy_err=0 launch_err=0 sync_err=0' "$T/child-bad.out"
check "child bad launch: two reports on stderr" [ "$(grep -c '^labelguard: bad labels in' "$T/child-bad.err")" = 2 ]
if events child-bad; then
  logs child-bad >"$T/child-bad.logs.txt"
  check "child bad launch: no file mixes processes" nofile "$T/child-bad.logs.txt"
  check "child bad launch: two files" [ "$(wc -l <"$T/child-bad.logs.txt")" = 2 ]
  check "child bad launch: parent's file: start, its violation, summary" grep -q '^[0-9]* 1 1 1 1$' "$T/child-bad.logs.txt"
  check "child bad launch: child's own file holds its violation" grep -q '^[0-9]* 0 1 0 [0-9]*$' "$T/child-bad.logs.txt"
else fail "child-bad schema"; fi

# 4. exec: the child execs another forker (same pid), which launches a bad label: the library
# in the new image starts fresh (own start event, launch_seq 1, own summary) in a file of that pid
run_f exec -- "$FORKER" --bad -- "$FORKER" --bad
check "exec: exit 0" [ "$(rc_of exec)" = 0 ]
check "exec: both images blocked their bad launch" [ "$(grep -c 'parent first copy_err=0 launch_err=800' "$T/exec.out")" = 2 ]
if events exec; then
  logs exec >"$T/exec.logs.txt"
  check "exec: no file mixes processes" nofile "$T/exec.logs.txt"
  check "exec: two files, each a fresh start: start, violation at launch_seq 1, summary" \
    [ "$(cut -d' ' -f2- "$T/exec.logs.txt" | sort | uniq -c | tr -s ' ')" = " 2 1 1 1 1" ]
else fail "exec schema"; fi
# the child launched before exec'ing: its pre-exec event and the exec'd image's events both carry
# its pid, in two files (the second never appends to the first)
run_f exec2 FAKECUDA_FORK_OK=1 -- "$FORKER" --child-bad -- "$FORKER" --bad
if events exec2; then
  logs exec2 >"$T/exec2.logs.txt"
  check "exec after a child launch: no file mixes processes or images" nofile "$T/exec2.logs.txt"
  check "exec after a child launch: three files" [ "$(wc -l <"$T/exec2.logs.txt")" = 3 ]
  check "exec after a child launch: the exec'd image started fresh in a file of its pid" \
    [ "$(grep -c '^[0-9]* 1 1 1 1$' "$T/exec2.logs.txt")" = 1 ]
else fail "exec2 schema"; fi

# 5. forks in the middle of other threads' reports: no child deadlocks
STORM="$LG_ROOT/$LG_BUILD/e2e/fork_storm"
if [ -n "${LG_SANITIZER:-}" ]; then
  # seen with GCC 12's libasan: a child's first malloc waits forever on the sanitizer
  # allocator's own lock, taken by a parent thread at fork time
  echo "skip: fork storm under SANITIZER=$LG_SANITIZER (the sanitizer runtime's allocator is not fork-safe in a multithreaded parent)"
  finish
fi
# The storm's hang verdict itself: child 2 sleeps on a futex of its own (hung, with what it waits
# on printed and the futex's mapping named), child 5 computes for 4 s before its launch, twice the
# 2 s it may sleep, and is not hung: it is moving.
F_LIMIT=240 run_f storm-verdict FAKECUDA_FORK_OK=1 -- "$STORM" --threads 2 --forks 8 --hung-after 2 --hang-child 2 --busy-child 5:4
check "storm verdict: the sleeping child hung, the computing one not" grep -q '^storm forks=8 hung=1 unblocked=0 ' "$T/storm-verdict.out"
check "storm verdict: the hung child is named, asleep with flat CPU time" \
  grep -q '^child pid=[0-9]* hung: asleep with flat CPU time' "$T/storm-verdict.out"
check "storm verdict: its threads' syscall and wchan, and the futex's mapping, are printed" \
  bash -c "grep -q '^  syscall: [0-9]' '$T/storm-verdict.out' && grep -q '^  wchan: ' '$T/storm-verdict.out' && grep -q '^    0x[0-9a-f]* is in: ' '$T/storm-verdict.out'"
check "storm verdict: 7 children launched and were blocked" [ "$(grep -c '^child pid=[0-9]* launch_err=[1-9]' "$T/storm-verdict.out")" = 7 ]

# 240 s: a guard for the whole storm; a child judged hung (30 s asleep) fails it sooner, with a dump
F_LIMIT=240 run_f storm FAKECUDA_FORK_OK=1 -- "$STORM" --threads 4 --forks 150 --hung-after 30 --cap 200
rc=$(rc_of storm)
check "fork storm: finished (rc $rc), no child hung" [ "$rc" = 0 ]
check "fork storm: summary line" grep -q '^storm forks=150 hung=0 unblocked=0 ' "$T/storm.out"
[ "$rc" = 0 ] || grep -E -A 40 'hung|^storm' "$T/storm.out" | head -60
# Under qemu-user a child can hang inside qemu itself, on a lock in qemu's own image inherited
# held (a qemu bug: fork_storm.cu's dump_child tells it apart from any guest lock). Such a child
# is killed and left out, with a warning and its dump.
qhung=$(sed -n 's/^storm .* qemu_hung=\([0-9]*\)$/\1/p' "$T/storm.out")
if [ "${qhung:-0}" != 0 ]; then
  echo "warning: $qhung storm child(ren) hung inside qemu-user's own locks (a qemu bug, not the library's):"
  grep -B 30 'not counted as hung (qemu_hung)' "$T/storm.out" | grep -v 'launch_err=' | head -40
fi
if events storm; then
  logs storm >"$T/storm.logs.txt"
  plaunch=$(grep -o 'parent_launches=[0-9]*' "$T/storm.out" | cut -d= -f2)
  check "fork storm: no file mixes processes" nofile "$T/storm.logs.txt"
  # a child forked while the parent's lazy start was under way starts for itself (start event)
  grep -v '^[0-9]* [01] 1 0 [0-9]*$' "$T/storm.logs.txt" | grep -v ' 1 [0-9]* 1 1$' | head -3
  check "fork storm: $((150 - ${qhung:-0})) child files, one violation each" \
    [ "$(grep -c '^[0-9]* [01] 1 0 [0-9]*$' "$T/storm.logs.txt")" = $((150 - ${qhung:-0})) ]
  check "fork storm: parent's file: each of its $plaunch launches reported once" \
    grep -q "^[0-9]* 1 $plaunch 1 1\$" "$T/storm.logs.txt"
else fail "storm schema"; fi
finish
