#!/usr/bin/env bash
# test_run.sh: `labelguard run` (python/labelguard/commands/run.py): option validation (exit 2
# naming the allowed values), the environment it exports, LD_PRELOAD (library first, existing
# entries kept, sanitizer runtimes kept in front, no duplicate; also as the function alone), the
# command's own exit status and signal, exec (same pid), missing library, cli.main and
# python -m labelguard, the PYTHONPATH the shim leaves alone, `make install`/`uninstall`. Uses a stand-in library (LABELGUARD_LIB) so it does not depend on the
# real one; the last part uses the real one when it is built.
# shellcheck disable=SC2016,SC2034  # $VARS in single quotes are for the child shell; rc is read by lib.sh
. "$(dirname "$0")/lib.sh"
lib="$T/liblg-dummy.so"; make_dummy_lib "$lib"
export LABELGUARD_LIB="$lib"

# Bad option values: exit 2, message lists the allowed values, the command never runs. The
# library's own parser judges them, so these checks need the real library.
real="$LG_ROOT/$LG_BUILD/liblabelguard.so"
[ -f "$real" ] || { echo "the real library is not built: make"; exit 1; }
if [ -n "${LG_SANITIZER:-}" ]; then
  echo "note: sanitizer build: the library cannot be preloaded alone, option checks skipped"
else
export LABELGUARD_LIB="$real"
run_cmd "$LG" run --action explode -- touch "$T/ran"
expect_rc 2 "bad --action"; expect_in err "raise, hold, mask, log, abort" "allowed actions listed"
[ ! -e "$T/ran" ] || fail "the command ran despite a bad option"
run_cmd "$LG" run --mode=later -- true; expect_rc 2 "bad --mode"; expect_in err "sync, async" "allowed modes"
run_cmd "$LG" run --hooks x -- true; expect_rc 2 "bad --hooks"; expect_in err "auto, interpose, cupti" "allowed hooks"
run_cmd "$LG" run --action; expect_rc 2 "--action without value"
run_cmd "$LG" run --bogus -- true; expect_rc 2 "unknown option"
run_cmd "$LG" run --; expect_rc 2 "no command"; expect_in err "no command" "says no command"
run_cmd "$LG" run --kernels "$T/none.conf" -- true; expect_rc 2 "missing --kernels file"
: >"$T/afile"
run_cmd "$LG" run --log "$T/afile" -- true; expect_rc 2 "--log is a file"
run_cmd "$LG" frobnicate; expect_rc 2 "unknown command"
run_cmd "$LG"; expect_rc 2 "no command at all"
run_cmd "$LG" --help; expect_rc 0 "--help"; expect_in out "usage: labelguard" "usage text"
# One version everywhere: the command line's, the package metadata's and the library's own.
want=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$LG_ROOT/pyproject.toml")
lib_ver=$(python3 -c 'import ctypes, sys; f = ctypes.CDLL(sys.argv[1]).labelguard_version; f.restype = ctypes.c_char_p; print(f().decode())' "$real")
run_cmd "$LG" --version; expect_rc 0 "--version"
[ -n "$want" ] && [ "$(cat "$T/out")" = "labelguard $want" ] && [ "$lib_ver" = "$want" ] \
  || fail "versions differ: --version '$(cat "$T/out")', pyproject '$want', library '$lib_ver'"
ok "option validation"

# Bad LABELGUARD_* already in the environment: set-but-empty and wrong values are errors.
run_cmd env LABELGUARD_ACTION= "$LG" run -- true; expect_rc 2 "empty LABELGUARD_ACTION"
expect_in err "LABELGUARD_ACTION" "names the variable"
run_cmd env LABELGUARD_MODE=fast "$LG" run -- true; expect_rc 2 "bad LABELGUARD_MODE"
run_cmd env LABELGUARD_SAMPLES=lots "$LG" run -- true; expect_rc 2 "bad LABELGUARD_SAMPLES"
run_cmd env LABELGUARD_ACTION=mask "$LG" run -- true; expect_rc 0 "good LABELGUARD_ACTION accepted"
run_cmd "$LG" run --action= -- true; expect_rc 2 "empty --action"; expect_in err "LABELGUARD_ACTION" "names the variable"
ok "environment validation"
export LABELGUARD_LIB="$lib"
fi
run_cmd "$LG" run --action; expect_rc 2 "--action without value"
run_cmd "$LG" run --bogus -- true; expect_rc 2 "unknown option"
run_cmd "$LG" run --; expect_rc 2 "no command"; expect_in err "no command" "says no command"

# Exported variables, as the command sees them.
mkdir -p "$T/wd"
( cd "$T/wd" && "$LG" run --action mask --mode async --hooks cupti --quiet --log rel/logs \
    --kernels "$lib" -- sh -c 'printf "%s|%s|%s|%s|%s|%s\n" "$LABELGUARD_ACTION" "$LABELGUARD_MODE" "$LABELGUARD_HOOKS" "$LABELGUARD_QUIET" "$LABELGUARD_LOG" "$LABELGUARD_KERNELS"' ) >"$T/out" 2>"$T/err"; rc=$?
expect_rc 0 "run with every option"
[ "$(cat "$T/out")" = "mask|async|cupti|1|$T/wd/rel/logs|$lib" ] || fail "exported values: $(cat "$T/out")"
[ ! -e "$T/wd/rel" ] || fail "run created the log directory (the library does, on the first event)"
( cd "$T/wd" && "$LG" run -- sh -c 'printf "%s\n" "$LABELGUARD_LOG"' ) >"$T/out" 2>"$T/err"
[ "$(cat "$T/out")" = "$T/wd/labelguard-logs" ] || fail "default log dir not absolute: $(cat "$T/out")"
( cd "$T/wd" && LABELGUARD_LOG=mine "$LG" run -- sh -c 'printf "%s\n" "$LABELGUARD_LOG"' ) >"$T/out" 2>"$T/err"
[ "$(cat "$T/out")" = "mine" ] || fail "LABELGUARD_LOG from the environment changed: $(cat "$T/out")"
ok "variables exported; --log made absolute"

# LD_PRELOAD: library first, existing entries kept, children inherit.
run_cmd "$LG" run -- sh -c 'echo "$LD_PRELOAD"'; expect_rc 0 "preload"
[ "$(cat "$T/out")" = "$lib" ] || fail "LD_PRELOAD='$(cat "$T/out")', expected '$lib'"
run_cmd env LD_PRELOAD="/x/libother.so:/y/libz.so" "$LG" run -- sh -c 'sh -c "echo \$LD_PRELOAD"'
[ "$(cat "$T/out")" = "$lib /x/libother.so /y/libz.so" ] || fail "existing entries: '$(cat "$T/out")'"
run_cmd env LD_PRELOAD="/usr/lib/libasan.so.8 $lib" "$LG" run -- sh -c 'echo "$LD_PRELOAD"'
[ "$(cat "$T/out")" = "/usr/lib/libasan.so.8 $lib" ] || fail "sanitizer first, no duplicate: '$(cat "$T/out")'"
ok "LD_PRELOAD"

# The command's own status, its signal, exec (same process), command not found.
run_cmd "$LG" run -- sh -c 'exit 7'; expect_rc 7 "exit status passed through"
run_cmd "$LG" run -- sh -c 'kill -TERM $$'; expect_rc 143 "killed by SIGTERM"
"$LG" run -- sh -c 'echo $$' >"$T/pid" & bg=$!; wait $bg
[ "$(cat "$T/pid")" = "$bg" ] || fail "run did not exec the command (pid $(cat "$T/pid") != $bg)"
run_cmd "$LG" run -- "$T/no-such-command"; expect_rc 127 "command not found"
ok "exit status, signal, exec"

# Library missing or unusable.
run_cmd env LABELGUARD_LIB="$T/missing.so" "$LG" run -- true; expect_rc 2 "missing library"
expect_in err "hint:" "missing library has a hint"
mkdir -p "$T/with space"; cp "$lib" "$T/with space/lib.so"
run_cmd env LABELGUARD_LIB="$T/with space/lib.so" "$LG" run -- true; expect_rc 2 "library path with a space"
expect_in err "LD_PRELOAD cannot hold it" "explains the space"
ok "library errors"

# The LD_PRELOAD rule as the function alone (commands/run.py preload_value): ld.so's separators
# (spaces, colons, tabs, newlines), sanitizer runtimes in front, the library's own entry dropped.
lg_py - "$lib" <<'PY' || fail "preload_value"
import sys
from labelguard.commands.run import preload_value as pv
lib = sys.argv[1]
cases = [("", lib), ("/a/x.so:/b/y.so", lib + " /a/x.so /b/y.so"), ("  /a/x.so\t/b/y.so\n", lib + " /a/x.so /b/y.so"),
         (lib + ":/a/x.so:" + lib, lib + " /a/x.so"),
         ("/a/x.so /u/libtsan.so.2:/u/libclang_rt.asan-x86_64.so", "/u/libtsan.so.2 /u/libclang_rt.asan-x86_64.so " + lib + " /a/x.so"),
         ("/u/libubsan.so.1", "/u/libubsan.so.1 " + lib)]
bad = [(old, pv(lib, old), want) for old, want in cases if pv(lib, old) != want]
for b in bad:
    print("FAIL: preload_value(%r) = %r, expected %r" % b)
sys.exit(1 if bad else 0)
PY
# main(argv) returns the status (the console script's entry point), python -m gives the same.
[ "$(lg_py -c 'import sys; from labelguard.cli import main; sys.exit(main(["run", "--bogus"]) == 2 and 0 or 1)' 2>&1)" = \
  "labelguard: run: unknown option '--bogus'
labelguard: hint: labelguard run [--action A] [--log DIR] [--mode sync|async] [--hooks H] [--quiet] [--kernels FILE] -- CMD ARGS..." ] ||
  fail "cli.main(['run', '--bogus']): not status 2 with the message"
run_cmd lg_py -m labelguard run -- sh -c 'echo "$LD_PRELOAD"'; expect_rc 0 "python -m labelguard run"
[ "$(cat "$T/out")" = "$lib" ] || fail "python -m labelguard run: LD_PRELOAD='$(cat "$T/out")'"
# Neither the shim's PYTHONPATH nor labelguard's reaches the command: unset stays unset, a value
# stays that value (the torch.compile bootstrap comes from the preload in each interpreter,
# which puts PYTHONPATH back itself: tests/e2e/test_untouched.sh).
run_cmd env -u PYTHONPATH -u PYTHONSAFEPATH "$LG" run -- sh -c 'echo "${PYTHONPATH-unset}|${PYTHONSAFEPATH-unset}|${LG_SHIM_PYTHONPATH-none}"'
[ "$(cat "$T/out")" = "unset|unset|none" ] || fail "PYTHONPATH after the shim: '$(cat "$T/out")'"
run_cmd env PYTHONPATH="/x y:/z" PYTHONSAFEPATH= "$LG" run -- sh -c 'echo "${PYTHONPATH-unset}|${PYTHONSAFEPATH-unset}"'
[ "$(cat "$T/out")" = "/x y:/z|" ] || fail "PYTHONPATH after the shim: '$(cat "$T/out")'"
# A working directory with modules named like the standard library's does not break it.
mkdir -p "$T/shadow"; for m in json signal subprocess shutil re tempfile argparse; do printf 'raise SystemExit("shadowed %s")\n' "$m" >"$T/shadow/$m.py"; done
( cd "$T/shadow" && "$LG" run -- true ) >"$T/out" 2>&1 || fail "run from a directory with json.py etc.: $(cat "$T/out")"
( cd "$T/shadow" && "$LG" report "$T/shadow" ) >"$T/out" 2>&1 || fail "report from a directory with json.py etc.: $(cat "$T/out")"
ok "preload_value, cli.main, python -m, PYTHONPATH kept"

# The installed layout, as `make install` makes it (with the stand-in as the library: -o keeps
# make from building anything): bin/labelguard finds the package in share/labelguard/python,
# which finds the library through its _native/ link, and its data (the wheel tables).
pre="$T/prefix"
run_cmd make -s --no-print-directory -C "$LG_ROOT" install PREFIX="$pre" BUILD="$LG_BUILD" LIB="$lib" -o "$lib"
expect_rc 0 "make install"
run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" run -- sh -c 'echo "$LD_PRELOAD"'
expect_rc 0 "installed run"; [ "$(cat "$T/out")" = "$pre/lib/liblabelguard.so" ] || fail "installed LD_PRELOAD: $(cat "$T/out")"
mkdir -p "$T/emptylogs"; run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" report "$T/emptylogs"; expect_rc 0 "installed report"
[ -f "$pre/share/labelguard/python/labelguard/data/wheels/known-gaps.tsv" ] || fail "known-gaps.tsv not installed"
run_cmd env -u LABELGUARD_LIB PYTHONPATH="$pre/share/labelguard/python" python3 -c \
  'from labelguard import _lib; print(_lib.checkout_root(), _lib.data_path("wheels/2.11.0+cu130.tsv"))'
[ "$(cat "$T/out")" = "None $pre/share/labelguard/python/labelguard/data/wheels/2.11.0+cu130.tsv" ] || fail "installed data_path: $(cat "$T/out")"
run_cmd env -u LABELGUARD_LIB LG_DEMO_SIMULATED=1 "$pre/bin/labelguard" demo
expect_rc 2 "installed demo without a GPU"; expect_in err "make demo" "says where the simulated demo lives"
rm "$pre/lib/liblabelguard.so"
run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" run -- true; expect_rc 2 "installed, library removed"
expect_in err "hint:" "installed, library removed: hint"
run_cmd make -s --no-print-directory -C "$LG_ROOT" uninstall PREFIX="$pre"
expect_rc 0 "make uninstall"
left=$(find "$pre" ! -type d); [ -z "$left" ] || fail "make uninstall left: $left"
# Staged (DESTDIR) and moved elsewhere: nothing in it names the staging directory.
run_cmd make -s --no-print-directory -C "$LG_ROOT" install DESTDIR="$T/stage" PREFIX=/opt/lg BUILD="$LG_BUILD" LIB="$lib" -o "$lib"
expect_rc 0 "make install DESTDIR"
mv "$T/stage/opt/lg" "$T/moved"
run_cmd env -u LABELGUARD_LIB "$T/moved/bin/labelguard" run -- sh -c 'echo "$LD_PRELOAD"'
expect_rc 0 "moved install"; [ "$(cat "$T/out")" = "$T/moved/lib/liblabelguard.so" ] || fail "moved install LD_PRELOAD: $(cat "$T/out")"
ok "installed layout"

# The real library, when built (not under a sanitizer: its runtime must come first).
real="$LG_ROOT/$LG_BUILD/liblabelguard.so"
if [ -f "$real" ] && [ -z "${LG_SANITIZER:-}" ]; then
  run_cmd env -u LABELGUARD_LIB LG_BUILD="$LG_BUILD" "$LG" run --log "$T/reallogs" -- sh -c 'echo "$LD_PRELOAD"; ls / | wc -l >/dev/null'
  expect_rc 0 "real library preloaded into sh"
  [ "$(head -n1 "$T/out")" = "$(cd "$(dirname "$real")" && pwd)/liblabelguard.so" ] || fail "real LD_PRELOAD: $(cat "$T/out")"
  [ ! -s "$T/err" ] || fail "real library printed something in a process without kernels: $(cat "$T/err")"
  [ ! -e "$T/reallogs" ] || fail "real library created a log without an event"
  ok "real library: found next to the script, inert in sh"
else
  echo "note: real library not built (or sanitizer build): its part skipped"
fi
finish
