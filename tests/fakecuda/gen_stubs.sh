#!/usr/bin/env bash
# gen_stubs.sh EXPORTS MAP STUBS: from a runtime's export table (exports-13.txt / exports-12.txt,
# written by gen_exports.sh), writes the double's linker version script MAP (every real function
# under the real version node, plus fakecudart_*) and STUBS, a C file with one weak definition per
# function. fakecudart.c's own definitions are strong and win at link time; every other function
# exists (a program loaded with RTLD_NOW, as Python loads extension modules, resolves) and
# answers cudaErrorNotSupported through fk_unsupported(). Called by the Makefile.
set -euo pipefail
exports="$1"; map="$2"; stubs="$3"
node="$(awk '!/^#/ { print $2; exit }' "$exports")"
{ echo "/* Made by tests/fakecuda/gen_stubs.sh from $exports: do not edit. */"
  echo "$node {"
  echo "  global:"
  awk '!/^#/ { print "    " $1 ";" }' "$exports"
  echo "    fakecudart_*;"
  echo "  local:"
  echo "    *;"
  echo "};"
} > "$map.tmp"
{ echo "/* Made by tests/fakecuda/gen_stubs.sh from $exports: do not edit. The functions of the real"
  echo " * runtime that the double does not model: each sets the last error and returns 801"
  echo " * (cudaErrorNotSupported). No CUDA header is included: the stubs take no parameters, which the"
  echo " * C calling convention makes safe for any caller. */"
  echo "int fk_unsupported(const char *name);"
  awk '!/^#/ { printf "__attribute__((weak, visibility(\"default\"))) int %s(void) { return fk_unsupported(\"%s\"); }\n", $1, $1 }' "$exports"
} > "$stubs.tmp"
mv "$map.tmp" "$map"; mv "$stubs.tmp" "$stubs"
