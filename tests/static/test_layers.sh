#!/usr/bin/env bash
# test_layers.sh: the library's layers hold (tests/static/layers.py, which src/README.md's layer
# table drives): no call from a file to a layer above its own, no circle of calls between files,
# every C file and Python module under 500 lines and every header under 700. Reads the sources
# and the built objects ($LG_BUILD/obj, what each leaves undefined). Then checks that the check
# can fail: a copy of src/ with one upward call added (a base file naming a hooks function) and
# one circle (a kernels file and the file it calls naming each other) must be refused.
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
. "$LG_ROOT/tests/lib.sh"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-layers.XXXXXX")"
trap 'rm -rf "$T"' EXIT
lg_checks_init "$T"
L="$LG_ROOT/tests/static/layers.py"
OBJ="$LG_ROOT/$LG_BUILD/obj"
[ -d "$OBJ" ] || { echo "missing $OBJ: run make"; exit 1; }

python3 "$L" "$LG_ROOT/src" "$LG_ROOT/python/labelguard" "$OBJ" >"$T/tree.out"; rc=$?
cat "$T/tree.out"
check "the tree: no upward call, no circle, every file within its size" [ $rc = 0 ]

# The same check on a copy with an upward call and a circle put in: it must name both.
cp -r "$LG_ROOT/src" "$T/src"
printf '\nvoid lg_config_probe_up(void) { labelguard_config_probe(); lg_preload_hooks(0, 0); }\n' >>"$T/src/base/config.c"
printf '\nvoid lg_names_probe_circle(void) { lg_decode_probe_circle(); }\n' >>"$T/src/kernels/names.c"
printf '\nvoid lg_decode_probe_circle(void) { lg_names_probe_circle(); }\n' >>"$T/src/kernels/decode.c"
python3 "$L" "$T/src" "$LG_ROOT/python/labelguard" >"$T/bad.out"; rc=$?
check "a planted upward call and circle are refused" [ $rc = 1 ]
check "the upward call is named" grep -q '^upward call: base/config.c -> hooks/preload.c (lg_preload_hooks)' "$T/bad.out"
check "the circle is named" grep -q '^circle: decode names' "$T/bad.out"
[ $rc = 1 ] || cat "$T/bad.out"
finish
