#!/usr/bin/env bash
# test_quoting.sh: no value from the arguments or the environment reaches a shell unquoted in
# the command line (the shim scripts/labelguard, the package python/labelguard/). Arguments, log directories, library paths and report
# paths containing spaces, quotes, $(...), backticks, globs and newlines must arrive verbatim,
# and nothing in them may run (each payload would create $T/pwned).
# shellcheck disable=SC2016,SC2034  # $VARS in single quotes are for the child shell; rc is read by lib.sh
. "$(dirname "$0")/lib.sh"
lib="$T/liblg-dummy.so"; make_dummy_lib "$lib"
export LABELGUARD_LIB="$lib"
cd "$T" || exit 1
touch "$T/globhit1" "$T/globhit2"

pw="\$(touch $T/pwned)"
bt="\`touch $T/pwned\`"
args=("a b" "'single'" "\"double\"" "$pw" "$bt" "*" "glob*" "x;touch $T/pwned" "new
line" "" "-" "--" "--action" "\\back\\slash" "%s%n" "ü ✓")

# 1. Arguments reach the command exactly (compared as a JSON list by python3).
"$LG" run -- python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${args[@]}" >"$T/got" 2>"$T/err" || fail "run failed: $(cat "$T/err")"
python3 - "$T/got" "${args[@]}" <<'PY' || fail "arguments changed on the way"
import json, sys
got = json.load(open(sys.argv[1]))
want = sys.argv[2:]
if got != want:
    print("got ", got); print("want", want); sys.exit(1)
PY
ok "arguments verbatim"

# 2. Option values with the same characters end up verbatim in the environment.
weird="$T/logs \$(touch $T/pwned) \`x\` 'q' \"d\" *"
"$LG" run --log "$weird" -- python3 -c 'import os; print(os.environ["LABELGUARD_LOG"])' >"$T/got" 2>"$T/err" || fail "run --log weird: $(cat "$T/err")"
[ "$(cat "$T/got")" = "$weird" ] || fail "LABELGUARD_LOG='$(cat "$T/got")' expected '$weird'"
ok "--log value verbatim"

# 3. A library path with $(...) and quotes (no spaces: LD_PRELOAD cannot hold those) works.
odd="$T/d\$(touch\${IFS}pwned)'q\"\`b\`*?[x]"
mkdir -p "$odd"; cp "$lib" "$odd/lib.so"
LABELGUARD_LIB="$odd/lib.so" "$LG" run -- sh -c 'printf "%s\n" "$LD_PRELOAD"' >"$T/got" 2>"$T/err" || fail "odd lib path: $(cat "$T/err")"
[ "$(cat "$T/got")" = "$odd/lib.so" ] || fail "LD_PRELOAD='$(cat "$T/got")' expected '$odd/lib.so'"
ok "library path verbatim"

# 4. Environment values with payloads: rejected or passed, never run.
# (the library's parser judges the value: the real library, where it can be preloaded alone)
if [ -z "${LG_SANITIZER:-}" ]; then
  LABELGUARD_LIB="$LG_ROOT/$LG_BUILD/liblabelguard.so" LABELGUARD_ACTION="$pw" "$LG" run -- true >/dev/null 2>"$T/err"
  [ $? -eq 2 ] || fail "payload in LABELGUARD_ACTION accepted"
fi
LABELGUARD_KERNELS="$pw" "$LG" run --kernels "$lib" -- sh -c 'printf "%s\n" "$LABELGUARD_KERNELS"' >"$T/got" 2>&1 || fail "LABELGUARD_KERNELS payload"
[ "$(cat "$T/got")" = "$pw:$lib" ] || fail "LABELGUARD_KERNELS='$(cat "$T/got")'"
LD_PRELOAD="$pw" "$LG" run -- true 2>/dev/null
ok "environment values"

# 5. report and attach with such paths: errors name the path, nothing runs.
mkdir -p "$T/r \$(touch $T/pwned) *"
"$LG" report "$T/r \$(touch $T/pwned) *" >"$T/out" 2>"$T/err"; rc=$?
expect_rc 0 "report on an empty directory with an odd name"
"$LG" report "$T/nothing \$(touch $T/pwned)" >"$T/out" 2>"$T/err"; rc=$?
expect_rc 2 "report on a missing odd path"; expect_in err "\$(touch $T/pwned)" "the path is shown verbatim"
"$LG" attach "1;touch $T/pwned" >"$T/out" 2>"$T/err"; rc=$?; expect_rc 2 "attach with a payload pid"
LABELGUARD_LIB="$T/a\"b.so" "$LG" attach $$ >"$T/out" 2>"$T/err"; rc=$?; expect_rc 2 "attach with a quote in the library path"
"$LG" doctor sh -c "touch $T/pwned" >"$T/out" 2>"$T/err"   # doctor inspects CMD, never runs a non-Python one
[ ! -e "$T/pwned" ] || fail "a payload ran"
ok "report/attach/doctor paths"
[ ! -e "$T/pwned" ] || fail "a payload ran"
finish
