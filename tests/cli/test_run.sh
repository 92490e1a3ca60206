#!/usr/bin/env bash
# test_run.sh: `labelguard run`: option validation (exit 2 naming the allowed values), the
# environment it exports, LD_PRELOAD (library first, existing entries kept, sanitizer runtimes
# kept in front, no duplicate), the command's own exit status and signal, exec (same pid),
# missing library. Uses a stand-in library (LABELGUARD_LIB) so it does not depend on the
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

# The installed layout, as `make install` makes it (the same sed line as the Makefile): the
# script finds the library through LG_INSTALLED_LIB and its helpers in ../share/labelguard.
pre="$T/prefix"; mkdir -p "$pre/bin" "$pre/lib" "$pre/share/labelguard"
cp "$lib" "$pre/lib/liblabelguard.so"
cp "$LG_ROOT"/scripts/lg_report.py "$LG_ROOT"/scripts/lg_doctor.py "$LG_ROOT"/scripts/lg_demo.sh "$pre/share/labelguard/"
sed "s|^LG_INSTALLED_LIB=.*|LG_INSTALLED_LIB=$pre/lib/liblabelguard.so|" "$LG" >"$pre/bin/labelguard"; chmod 755 "$pre/bin/labelguard"
grep -q "^LG_INSTALLED_LIB=$pre/lib/liblabelguard.so\$" "$pre/bin/labelguard" || fail "the install sed line did not match LG_INSTALLED_LIB="
run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" run -- sh -c 'echo "$LD_PRELOAD"'
expect_rc 0 "installed run"; [ "$(cat "$T/out")" = "$pre/lib/liblabelguard.so" ] || fail "installed LD_PRELOAD: $(cat "$T/out")"
mkdir -p "$T/emptylogs"; run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" report "$T/emptylogs"; expect_rc 0 "installed report"
rm "$pre/lib/liblabelguard.so"
run_cmd env -u LABELGUARD_LIB "$pre/bin/labelguard" run -- true; expect_rc 2 "installed, library removed"
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
