#!/usr/bin/env bash
# test_inert.sh: preloaded into processes that never launch a kernel, the
# library does nothing: no output, no file, no thread, no CUDA library loaded, same exit status.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
export LABELGUARD_LOG="$T/inert-logs"
inert() { # DESCRIPTION COMMAND...: compare stdout, stderr and status with and without the preload
  local d=$1; shift
  "$@" >"$T/a.out" 2>"$T/a.err"; local ra=$?
  LD_PRELOAD="$LG_PRELOAD" "$@" >"$T/b.out" 2>"$T/b.err"; local rb=$?
  check "$d: same status ($ra)" [ "$ra" = "$rb" ]
  check "$d: same stdout" cmp -s "$T/a.out" "$T/b.out"
  check "$d: same stderr" cmp -s "$T/a.err" "$T/b.err"
  check "$d: no log directory" [ ! -e "$T/inert-logs" ]
}
inert "/bin/true" /bin/true
inert "/bin/false" /bin/false
inert "sh pipeline" sh -c 'ls / | wc -l'
inert "python3 import json" python3 -c 'import json; print(json.dumps({"a": 1}))'
inert "gcc --version" gcc --version
inert "forked worker" python3 -c '
import os, sys
pid = os.fork()
if pid == 0:
    sys.stdout.write("child\n"); sys.stdout.flush(); os._exit(3)
_, st = os.waitpid(pid, 0)
print("parent", os.WEXITSTATUS(st))'
# no thread, no CUDA library: the process's own view while preloaded
LD_PRELOAD="$LG_PRELOAD" python3 -c '
import os
print(len(os.listdir("/proc/self/task")))
maps = open("/proc/self/maps").read()
print("cuda" if ("libcuda" in maps or "libcupti" in maps or "libcudart" in maps) else "nocuda")
print("lg" if "liblabelguard" in maps else "nolg")' >"$T/self" 2>&1
check "one thread" [ "$(sed -n 1p "$T/self")" = 1 ]
check "no CUDA library loaded" [ "$(sed -n 2p "$T/self")" = nocuda ]
check "the library is loaded" [ "$(sed -n 3p "$T/self")" = lg ]
# (.lg-failures is tests/lib.sh's count of failed checks)
check "no file written in cwd" [ -z "$(ls -A "$T" | grep -v -E '^(a|b)\.(out|err)$|^self$|^\.lg-failures$')" ]
finish
