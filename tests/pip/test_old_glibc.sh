#!/usr/bin/env bash
# test_old_glibc.sh: the wheel's library loads on an older glibc than the one it was built on.
# Debian 11's glibc 2.31 (before 2.33 made stat64 a real function and 2.34 moved pthread_* and dl*
# into libc.so.6, the two changes src/base/glibc.c and scripts/glibc-pin.sh bridge) and its coreutils
# are fetched from the machine's own Debian mirror (apt's sources; cached), unpacked without root, and the library is
# preloaded into Debian 11's own /bin/true by glibc 2.31's loader with LD_BIND_NOW (every symbol
# bound at load): a good configuration exits 0 silently; a bad one reaches the library's
# constructor, which exits 2 with its message. The library linked without the pins must fail there.
# 2.31 is the oldest glibc the Debian archive still serves here; the 2.17 baseline itself is
# checked on the symbol versions (test_wheel.sh, auditwheel show). The wheel it builds is also
# measured against the sizes the README gives.
# Run by tests/run.sh (plain build only).
. "$(dirname "$0")/lib.sh"
cache="${LG_DEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/labelguard/debs}/bullseye"
mkdir -p "$cache"
# The Debian archive this machine's apt uses (scripts/debian-mirror.sh), asked only when
# something is not in the cache yet; no host is written here.
mirror() { "$LG_ROOT/scripts/debian-mirror.sh"; }
fetch() { # PACKAGE: the .deb from bullseye's index, checked against its SHA256
  local pkg=$1 line file sum base
  if [ ! -s "$cache/Packages" ]; then
    base=$(mirror) || return 1
    { curl -fsS --max-time 120 "$base/dists/bullseye/main/binary-amd64/Packages.xz" | xz -dc >"$cache/Packages.tmp" && mv "$cache/Packages.tmp" "$cache/Packages"; } 2>/dev/null
    [ -s "$cache/Packages" ] || { echo "no bullseye index at $base/dists/bullseye/main/binary-amd64/Packages.xz" >&2; return 1; }
  fi
  line=$(awk -v p="$pkg" '$0 == "Package: " p {f=1} f && /^Filename:/ {fn=$2} f && /^SHA256:/ {print fn, $2; exit}' "$cache/Packages")
  file=${line% *}; sum=${line#* }
  [ -n "$line" ] || { echo "$pkg is not in $cache/Packages" >&2; return 1; }
  if [ -f "$cache/${file##*/}" ] && echo "$sum  $cache/${file##*/}" | sha256sum -c --quiet 2>/dev/null; then echo "$cache/${file##*/}"; return 0; fi
  base=$(mirror) || return 1
  curl -fsS --max-time 300 -o "$cache/${file##*/}.tmp" "$base/$file" 2>/dev/null && mv "$cache/${file##*/}.tmp" "$cache/${file##*/}"
  if echo "$sum  $cache/${file##*/}" | sha256sum -c --quiet 2>/dev/null; then echo "$cache/${file##*/}"; return 0; fi
  echo "$base/$file: download failed or its SHA256 does not match" >&2
  return 1
}
root="$T/bullseye"
mkdir -p "$root"
for p in libc6 coreutils; do
  deb=$(fetch $p) || { fail "cannot fetch Debian 11's $p (above): bullseye must be on the Debian mirror this machine's apt is configured with, or the .deb in $cache"; finish; }
  dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x $deb"
done
ldso=$(ls "$root"/lib/x86_64-linux-gnu/ld-2.*.so 2>/dev/null | head -n1)
[ -x "$ldso" ] || { fail "no loader in Debian 11's libc6"; finish; }
[ "${ldso##*/}" = ld-2.31.so ] && ok "loader: glibc 2.31" || fail "the loader is not glibc 2.31's: $ldso"
pip_build_wheel "$T/dist"
# The README's wheel sizes (`make wheel` prints them) against the wheel just built, within 10 %:
# tests/static/test_docs.sh checks the library's always, the wheel's only where dist/ holds one.
python3 - "$LG_ROOT/README.md" "$WHEEL" >"$T/sizes" 2>&1 <<'EOF'
import re, sys, os, zipfile
text = re.sub(r"\s+", " ", open(sys.argv[1], encoding="utf-8").read())
m = re.search(r"wheel ([0-9.]+) MB \(([0-9.]+) MB installed\)", text)
if not m:
    sys.exit("the README gives no 'wheel N MB (N MB installed)'")
built = (os.path.getsize(sys.argv[2]) / 1e6, sum(i.file_size for i in zipfile.ZipFile(sys.argv[2]).infolist()) / 1e6)
bad = [(w, float(r), b) for w, r, b in zip(("wheel", "installed"), m.groups(), built) if abs(float(r) - b) > 0.10 * b]
print("README: wheel %s MB (%s MB installed); built: %.1f MB (%.1f MB installed)" % (m.group(1), m.group(2), *built))
sys.exit(1 if bad else 0)
EOF
[ $? -eq 0 ] && ok "$(cat "$T/sizes")" || { cat "$T/sizes"; fail "the README's wheel sizes are more than 10 % from the built wheel's: update them (make wheel prints them)"; }
mkdir -p "$T/x"; (cd "$T/x" && "$PY" -m zipfile -e "$WHEEL" .)
lib="$T/x/labelguard/_native/liblabelguard.so"
run231() { # LIB, env assignments...: preload LIB into Debian 11's true under glibc 2.31
  local l=$1; shift
  env -i "$@" LD_BIND_NOW=1 "$ldso" --library-path "$root/lib/x86_64-linux-gnu" --preload "$l" "$root/bin/true" >"$T/out" 2>"$T/err"; rc=$?
}
run231 "$lib"
[ $rc -eq 0 ] && [ ! -s "$T/err" ] && ok "glibc 2.31: the wheel's library loads, every symbol bound, silent" \
  || { cat "$T/err"; fail "glibc 2.31: the wheel's library does not load (rc $rc)"; }
run231 "$lib" LABELGUARD_ACTION=bogus
[ $rc -eq 2 ] && grep -q 'LABELGUARD_ACTION="bogus" is not valid' "$T/err" && ok "glibc 2.31: its constructor runs (bad config: exit 2 with the message)" \
  || { cat "$T/err"; fail "glibc 2.31: constructor did not judge the configuration (rc $rc)"; }
unpinned="$LG_ROOT/$LG_BUILD/obj/unpinned.so"
if [ -f "$unpinned" ]; then
  run231 "$unpinned"
  [ $rc -ne 0 ] && grep -q "version .GLIBC_2.3[0-9]. not found" "$T/err" && ok "control: the library linked without the pins fails on glibc 2.31" \
    || { cat "$T/err"; fail "control: the unpinned library loaded on glibc 2.31 (rc $rc): this test would not see a regression"; }
else
  fail "no $unpinned (the Makefile's first link, x86_64 only)"
fi
finish
