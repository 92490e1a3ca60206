#!/usr/bin/env bash
# debian-mirror.sh: prints the Debian archive this machine's apt is configured with (one URL,
# no trailing slash), so that the scripts that fetch Debian packages themselves
# (tests/pyroot/install.sh, tests/pip/test_old_glibc.sh, scripts/arm64-root.sh) go wherever the
# machine's apt goes, and no package host is written in the project.
#   scripts/debian-mirror.sh     the URL on stdout; exit 1 with one line on stderr when none
# Read: deb822 stanzas in $APT_ETC/sources.list.d/*.sources ("Types: deb", "URIs:", not
# "Enabled: no"), then one-line "deb [options] URL suite ..." entries in $APT_ETC/sources.list
# and sources.list.d/*.list. The security archive (a suite ending in -security, or a URL ending
# in -security) only carries updates, so it is skipped. APT_ETC defaults to /etc/apt (a test
# points it elsewhere). Tested by tests/static/test_docs.sh (a deb822 file, a one-line file,
# none at all).
set -u
etc="${APT_ETC:-/etc/apt}"
url=$(
  {
    for f in "$etc"/sources.list.d/*.sources; do [ -f "$f" ] && { cat "$f"; echo; }; done
  } | awk '
    function flush() {
      if (!done && types ~ /(^|[ \t])deb([ \t]|$)/ && enabled !~ /^[ \t]*no/ && uris != "" && suites !~ /-security/) {
        split(uris, u, /[ \t]+/)
        for (i = 1; i in u; i++) if (u[i] != "" && u[i] !~ /-security\/?$/) { print u[i]; done = 1; exit }
      }
      types = uris = suites = enabled = ""
    }
    /^[ \t]*#/ { next }
    /^[ \t]*$/ { flush(); next }
    tolower($1) == "types:"   { sub(/^[^:]*:/, ""); types = $0 }
    tolower($1) == "uris:"    { sub(/^[^:]*:/, ""); sub(/^[ \t]+/, ""); uris = $0 }
    tolower($1) == "suites:"  { sub(/^[^:]*:/, ""); suites = $0 }
    tolower($1) == "enabled:" { sub(/^[^:]*:/, ""); enabled = $0 }
    END { flush() }'
)
if [ -z "$url" ]; then
  url=$(cat "$etc/sources.list" "$etc"/sources.list.d/*.list 2>/dev/null | awk '
    $1 == "deb" {
      i = 2
      if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if (i + 1 <= NF && $(i + 1) !~ /-security/ && $i !~ /-security\/?$/) { print $i; exit }
    }')
fi
if [ -z "$url" ]; then
  echo "debian-mirror: no Debian archive configured for apt (no \"Types: deb\" stanza with URIs: in $etc/sources.list.d/*.sources, no \"deb URL suite\" line in $etc/sources.list or $etc/sources.list.d/*.list); configure apt's sources, or give the mirror explicitly where the calling script allows it" >&2
  exit 1
fi
echo "${url%/}"
