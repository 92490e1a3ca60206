# tests/torch-fake/lib.sh: the prologue of the real-torch tests (sourced): LG_ROOT, LG_BUILD,
# LG_PRELOAD and TP (build/torch-python), exported by tests/run.sh or defaulted for a run by
# hand. Exits 77 in a sanitizer build (its double needs the sanitizer runtime loaded first,
# which Python does not have) and 1 when build/torch-python is missing: a missing torch is a
# failure, never a skip.
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
LG_PRELOAD="${LG_PRELOAD:-$LG_ROOT/$LG_BUILD/liblabelguard.so}"
TP="$LG_ROOT/$LG_BUILD/torch-python"
[ -z "${LG_SANITIZER:-}" ] || { echo "real torch runs in the plain build only (LG_SANITIZER=$LG_SANITIZER)"; exit 77; }
[ -x "$TP" ] || { echo "FAIL: $TP missing: run make build/torch-python"; exit 1; }
