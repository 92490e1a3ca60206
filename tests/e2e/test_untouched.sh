#!/usr/bin/env bash
# test_untouched.sh: a process the library does not guard sees exactly what it would have seen
# without it. Each case runs once plainly and once with the library preloaded (LD_PRELOAD in
# every child, as `labelguard run` leaves it) and requires the same output from
# py/untouched_probe.py: stdin, the fd table, the environment (LD_PRELOAD aside), blocked and
# ignored signals, umask and sys.path. The cases: a shell child reading stdin (the fork child
# handler once closed fd 0 of every child), a subshell pipeline, a Python os.fork() child, a
# subprocess child, python -S / -I / -E, a PYTHONPATH of the user's, unset and empty, and
# `labelguard run`. Needs python3 only (no CUDA: nothing here launches a kernel).
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
PROBE="$LG_ROOT/tests/e2e/py/untouched_probe.py"
export LABELGUARD_LOG="$T/untouched-logs"
export PROBE

same() { # DESCRIPTION COMMAND...: stdout and status equal with and without the preload
  local d=$1; shift
  # the same file names in both runs: the fd table shows where stdout and stderr go
  "$@" >"$T/o" 2>"$T/e" </dev/null; local ra=$?
  mv "$T/o" "$T/a.out"; mv "$T/e" "$T/a.err"
  LD_PRELOAD="$LG_PRELOAD" "$@" >"$T/o" 2>"$T/e" </dev/null; local rb=$?
  mv "$T/o" "$T/b.out"; mv "$T/e" "$T/b.err"
  check "$d: same status ($ra)" [ "$ra" = "$rb" ]
  check "$d: output made" [ -s "$T/a.out" ]
  if cmp -s "$T/a.out" "$T/b.out"; then ok "$d: same output"; else
    fail "$d: same output"; diff <(tr ',' '\n' <"$T/a.out") <(tr ',' '\n' <"$T/b.out") | head -n 20
  fi
  check "$d: same stderr" cmp -s "$T/a.err" "$T/b.err"
}

# The shortest form of the fd-0 fault: the child's cat reads the pipe.
same "echo | bash -c cat" bash -c 'echo hello | bash -c "cat; true"'
check "echo | bash -c cat: prints hello" grep -qx hello "$T/b.out"
same "shell child" bash -c 'echo hello | bash -c "python3 \"\$PROBE\"; true"'
same "subshell pipeline" bash -c 'echo hello | bash -c "(python3 \"\$PROBE\") | cat"'
same "python os.fork() child" bash -c 'echo hello | python3 -c "
import os, runpy, sys
pid = os.fork()
if pid == 0:
    try:
        runpy.run_path(os.environ[\"PROBE\"], run_name=\"__main__\")
    finally:
        sys.stdout.flush(); os._exit(0)
os.waitpid(pid, 0)"'
same "python subprocess child" bash -c 'echo hello | python3 -c "
import os, subprocess, sys
subprocess.run([sys.executable, os.environ[\"PROBE\"]], check=True)"'
same "python itself" bash -c 'echo hello | python3 "$PROBE"'
for flag in -S -I -E -IS; do
  same "python $flag" bash -c "echo hello | python3 $flag \"\$PROBE\""
done
same "PYTHONPATH of the user's" bash -c 'echo hello | PYTHONPATH="/x y:/z" python3 -c "
import os, subprocess, sys
subprocess.run([sys.executable, os.environ[\"PROBE\"]], check=True)
exec(open(os.environ[\"PROBE\"]).read())"'
same "empty PYTHONPATH" bash -c 'echo hello | PYTHONPATH= python3 "$PROBE"'
same "a venv" bash -c 'python3 -m venv --without-pip "$0/venv" && echo hello | "$0/venv/bin/python" "$PROBE"' "$T"
# `labelguard run` adds nothing but the preload either: its command sees the environment the
# shim was given (the shim's own PYTHONPATH is put back by the CLI; "_" is the calling shell's
# note of the last command, the log directory is run's own setting).
env_of() { python3 -c 'import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LABELGUARD_LOG", "_")}, sort_keys=True))'; }
export -f env_of
export LABELGUARD_LIB="$LG_ROOT/$LG_BUILD/liblabelguard.so"
bash -c 'env_of' >"$T/run-a.out"
"$LG_ROOT/scripts/labelguard" run -- bash -c 'env_of' >"$T/run-b.out" 2>"$T/run-b.err"
check "labelguard run: the command's environment is the caller's" cmp -s "$T/run-a.out" "$T/run-b.out"
check "no log directory (nothing was guarded)" [ ! -e "$T/untouched-logs" ]
finish
