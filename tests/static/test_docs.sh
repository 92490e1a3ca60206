#!/usr/bin/env bash
# test_docs.sh: the documentation says what the code does. Reads the sources, README.md and
# docs/*.md (nothing is built here) and checks:
#   - every LABELGUARD_* variable named in src/ or python/labelguard/ has a table row of its own
#     in docs/configuration.md (a line "| `NAME` ...", or a first cell listing it), and every
#     enable() keyword (python/labelguard/__init__.py's OPTIONS) one too;
#   - every event src/report/ writes (header(), lg_report_line()), every key it writes
#     (lg_json_*(j, "key", ...), config_object's key, the "truncated" flag) and every warning kind
#     given anywhere in src/ (the snake_case literals in calls of lg_report_warning*,
#     lg_report_note_once, warn_unchecked, unchecked) appears inside a `code span` of
#     docs/log-schema.md;
#   - every relative link of README.md and docs/*.md resolves: the file, and the #anchor as
#     GitHub renders a heading (lower case, punctuation dropped, spaces as '-', -1/-2 for repeats);
#   - the README's wheel and library sizes are within 10 % of build/liblabelguard.so and, when
#     `make wheel` left a wheel in dist/ newer than the library, of that wheel (its file and its
#     unpacked size); otherwise the wheel's figure is left to tests/pip/test_old_glibc.sh, which
#     checks it against the wheel it builds, and the output says so;
#   - no package host is written in the project (pip and apt are asked instead), and
#     scripts/debian-mirror.sh reads the mirror from apt's sources in both formats, skipping the
#     security archive, with an error when none is configured.
# Then that the checks can fail: a copy of the tree with a variable read, an event, a key, a
# warning kind and two broken links planted must be refused, each named.
# Run by tests/run.sh (tests/static/); by hand: bash tests/static/test_docs.sh
set -u
LG_ROOT="${LG_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
LG_BUILD="${LG_BUILD:-build}"
. "$LG_ROOT/tests/lib.sh"
T="$(mktemp -d "${TMPDIR:-/tmp}/lg-docs.XXXXXX")"
trap 'rm -rf "$T"' EXIT
lg_checks_init "$T"

cat >"$T/docs_check.py" <<'EOF'
"""docs_check.py ROOT: prints one line per thing the docs of the tree at ROOT miss; exit 1 if any."""
import ast, glob, os, re, sys

root = sys.argv[1]
missing = []


def read(p):
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()


def strip_fences(text):
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
            continue
        out.append("" if fence else line)
    return "\n".join(out)


def sources(*patterns):
    for pat in patterns:
        for p in sorted(glob.glob(os.path.join(root, pat), recursive=True)):
            yield p, read(p)


# --- variables and enable() keywords -> docs/configuration.md
conf = strip_fences(read(os.path.join(root, "docs/configuration.md")))
rows = [l for l in conf.split("\n") if l.startswith("|")]
first_cells = [l.split("|")[1] for l in rows if l.count("|") >= 3]
variables = set()
for p, text in sources("src/**/*.[ch]", "python/labelguard/**/*.py"):
    variables |= set(re.findall(r"\bLABELGUARD_[A-Z][A-Z0-9_]*[A-Z0-9]\b", text))
for v in sorted(variables):
    if not any("`%s`" % v in cell for cell in first_cells):
        missing.append("variable %s: no row of its own in docs/configuration.md" % v)
init = os.path.join(root, "python/labelguard/__init__.py")
keywords = []
for node in ast.walk(ast.parse(read(init))):
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "OPTIONS" for t in node.targets):
        keywords = [k.value for k in node.value.keys]
if not keywords:
    missing.append("python/labelguard/__init__.py: no OPTIONS dict (the enable() keywords) found")
for k in keywords:
    if not any("`%s`" % k in cell for cell in first_cells):
        missing.append("enable() keyword %s: no row in docs/configuration.md" % k)

# --- events, keys and warning kinds -> docs/log-schema.md
schema = strip_fences(read(os.path.join(root, "docs/log-schema.md")))
documented = set()
for span in re.findall(r"`([^`]+)`", schema):
    documented |= set(re.findall(r"[A-Za-z0-9_]+", span))
events, keys, kinds = set(), set(), set()
for p, text in sources("src/report/*.c"):
    events |= set(re.findall(r"\b(?:header|lg_report_line)\(\s*&?\w+\s*,\s*\"(\w+)\"", text))
    keys |= set(re.findall(r"\blg_json_\w+\(\s*&?\w+\s*,\s*\"(\w+)\"", text))
    keys |= set(re.findall(r"\bconfig_object\(\s*&?\w+\s*,\s*\"(\w+)\"", text))
    keys |= set(re.findall(r"\\\"(\w+)\\\":", text))
if not events or not keys:
    missing.append("src/report: no event or no key found: the patterns of this test no longer match the code")


def call_args(text, start):
    """The text of a call's argument list from the '(' at start, string literals kept."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
        i += 1
    return text[start:]


kind_call = re.compile(r"\b(?:lg_report_warning\w*|lg_report_note_once|warn_unchecked|unchecked)\s*\(")
for p, text in sources("src/**/*.c"):
    for m in kind_call.finditer(text):
        before = text[max(0, m.start() - 40):m.start()]
        if re.search(r"\b(void|int|bool|static)\s+$", before):
            continue  # the definition, not a call
        args = call_args(text, m.end() - 1)
        kinds |= set(s for s in re.findall(r"\"([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\"", args))
if not kinds:
    missing.append("src: no warning kind found: the patterns of this test no longer match the code")
for what, names in (("event", events), ("field", keys), ("warning kind", kinds)):
    for name in sorted(names - documented):
        missing.append("%s %s: not in docs/log-schema.md" % (what, name))


# --- relative links of README.md and docs/*.md
def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for line in strip_fences(read(path)).split("\n"):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs/*.md")))
for page in pages:
    rel = os.path.relpath(page, root)
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", strip_fences(read(page))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            missing.append("%s: link %s: no such file" % (rel, target))
        elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
            missing.append("%s: link %s: no heading #%s in %s" % (rel, target, anchor, os.path.relpath(dest, root)))

for line in missing:
    print(line)
print("checked: %d variables, %d keywords, %d events, %d fields, %d warning kinds, %d pages" % (
    len(variables), len(keywords), len(events), len(keys), len(kinds), len(pages)))
sys.exit(1 if missing else 0)
EOF

python3 "$T/docs_check.py" "$LG_ROOT" >"$T/tree.out"; rc=$?
cat "$T/tree.out"
check "the docs name every variable, keyword, event, field and warning kind; every link resolves" [ $rc = 0 ]

# The same check on a copy with one thing of each kind planted: each must be named.
mkdir -p "$T/tree/python"
cp -r "$LG_ROOT/src" "$LG_ROOT/docs" "$LG_ROOT/README.md" "$T/tree/"
cp -r "$LG_ROOT/python/labelguard" "$T/tree/python/"
for e in "$LG_ROOT"/* "$LG_ROOT"/python/*; do  # what the links point at, as it is
  r=${e#"$LG_ROOT"/}; [ -e "$T/tree/$r" ] || ln -s "$e" "$T/tree/$r"
done
printf '\nconst char *lg_config_planted(void) { return getenv("LABELGUARD_PLANTED_VAR"); }\n' >>"$T/tree/src/base/config.c"
printf '\nvoid lg_report_planted(lg_json_t *j) { header(j, "planted_event"); lg_json_int(j, "planted_field", 1); }\n' >>"$T/tree/src/report/report.c"
printf '\nvoid lg_launch_planted(void) { lg_report_warning_once("planted_warning", "a planted warning"); }\n' >>"$T/tree/src/core/launch.c"
printf '\nSee [nowhere](no-such-page.md) and [a lost section](guide.md#no-such-heading).\n' >>"$T/tree/docs/limits.md"
python3 "$T/docs_check.py" "$T/tree" >"$T/bad.out"; rc=$?
check "a planted variable, event, field, warning kind and two broken links are refused" [ $rc = 1 ]
check "the variable is named" grep -q '^variable LABELGUARD_PLANTED_VAR: no row of its own in docs/configuration.md' "$T/bad.out"
check "the event is named" grep -q '^event planted_event: not in docs/log-schema.md' "$T/bad.out"
check "the field is named" grep -q '^field planted_field: not in docs/log-schema.md' "$T/bad.out"
check "the warning kind is named" grep -q '^warning kind planted_warning: not in docs/log-schema.md' "$T/bad.out"
check "the missing page is named" grep -q '^docs/limits.md: link no-such-page.md: no such file' "$T/bad.out"
check "the missing heading is named" grep -q '^docs/limits.md: link guide.md#no-such-heading: no heading' "$T/bad.out"
[ "$(grep -c '' "$T/bad.out")" = 7 ] && ok "nothing else is named" || { cat "$T/bad.out"; fail "the planted copy gave other complaints"; }

# --- the README's sizes against the built ones (`make wheel` prints them)
size_check() { # WHAT README_MB ACTUAL_BYTES
  python3 - "$@" <<'EOF' || return 1
import sys
what, readme, actual = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) / 1e6
ok = abs(readme - actual) <= 0.10 * actual
print("%s: README %.1f MB, built %.1f MB%s" % (what, readme, actual, "" if ok else ": more than 10 % apart, update the README"))
sys.exit(0 if ok else 1)
EOF
}
readme="$LG_ROOT/README.md"
sizes=$(python3 - "$readme" <<'EOF'
import re, sys
text = re.sub(r"\s+", " ", open(sys.argv[1], encoding="utf-8").read())
lib = re.search(r"`build/liblabelguard\.so` ([0-9.]+) MB", text)
wheel = re.search(r"wheel ([0-9.]+) MB \(([0-9.]+) MB installed\)", text)
print(lib.group(1) if lib else "-", *(wheel.groups() if wheel else ("-", "-")))
EOF
)
read -r lib_mb wheel_mb inst_mb <<<"$sizes"
check "the README gives the library's size" [ "$lib_mb" != - ]
check "the README gives the wheel's size and its installed size" [ "$wheel_mb" != - ] && [ "$inst_mb" != - ]
lib="$LG_ROOT/build/liblabelguard.so"
if [ -n "${LG_SANITIZER:-}" ]; then
  echo "sizes: not checked in a sanitizer build (LG_SANITIZER=$LG_SANITIZER): the README gives the plain build's"
elif [ ! -f "$lib" ]; then
  fail "no $lib to compare the README's size with: run make"
else
  check "the library's size as the README gives it" size_check "build/liblabelguard.so" "${lib_mb:-0}" "$(stat -c %s "$lib")"
  wheel=$(ls -t "$LG_ROOT"/dist/labelguard-*-manylinux_2_17_x86_64*.whl 2>/dev/null | head -n1)
  if [ -n "$wheel" ] && [ "$wheel" -nt "$lib" ]; then
    check "the wheel's size as the README gives it" size_check "${wheel##*/}" "${wheel_mb:-0}" "$(stat -c %s "$wheel")"
    installed=$(python3 -c 'import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()))' "$wheel")
    check "the wheel's installed size as the README gives it" size_check "installed" "${inst_mb:-0}" "$installed"
  else
    echo "wheel: no dist/*.whl newer than the library (make wheel makes one): only the library's size was checked here (tests/pip/test_old_glibc.sh checks the wheel's)"
  fi
fi

# --- no package host in the project; the Debian mirror from apt's own sources
# (the names in pieces, so that this file is not a hit for a grep of the tree)
d=deb""ian
hosts="deb\.$d\.org|archive\.$d\.org|security\.$d\.org|py""pi\.org|files\.python""hosted\.org|download\.py""torch\.org"
(cd "$LG_ROOT" && git ls-files -co --exclude-standard 2>/dev/null | grep -v '^third_party/' \
  | xargs -d '\n' grep -nIE "$hosts" 2>/dev/null) >"$T/hosts.out"
[ -s "$T/hosts.out" ] && { cat "$T/hosts.out"; fail "a package host is written in the project (above): ask pip's or apt's configuration"; } \
  || ok "no package host written in the project"
M="$LG_ROOT/scripts/debian-mirror.sh"
mkdir -p "$T/apt1/sources.list.d" "$T/apt2/sources.list.d" "$T/apt3/sources.list.d"
printf 'Types: deb\nURIs: http://a.example/debian-security\nSuites: bookworm-security\n\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\nEnabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n\nTypes: deb\nURIs: http://b.example/debian/\nSuites: bookworm bookworm-updates\n' >"$T/apt1/sources.list.d/x.sources"
printf '# a comment\ndeb [signed-by=/k.gpg] http://c.example/debian-security bookworm-security main\ndeb [arch=amd64] http://c.example/debian bookworm main\n' >"$T/apt2/sources.list"
check "debian-mirror: a deb822 source, security, deb-src and disabled stanzas skipped" [ "$(APT_ETC="$T/apt1" "$M")" = http://b.example/debian ]
check "debian-mirror: a one-line source with options, security skipped" [ "$(APT_ETC="$T/apt2" "$M")" = http://c.example/debian ]
APT_ETC="$T/apt3" "$M" >"$T/none.out" 2>"$T/none.err"; rc=$?
check "debian-mirror: none configured is an error (exit 1, nothing on stdout)" [ $rc = 1 ] && [ ! -s "$T/none.out" ]
check "debian-mirror: the error says where it looked" grep -q 'no Debian archive configured for apt' "$T/none.err"
finish
