#!/usr/bin/env bash
# test_exports.sh: the library exports exactly the entry points listed in tests/exports.txt
# (nm -D; the hooked runtime entry points once per libcudart version node), depends on glibc alone (ldd: glib is static and hidden, nothing from
# CUDA, CUPTI, libunwind or libstdc++), and loads in a process that has no glib at all.
. "$(dirname "$0")/lib.sh"
lib="$LG_ROOT/$LG_BUILD/liblabelguard.so"
[ -z "${LG_SANITIZER:-}" ] || { echo "sanitizer build links its runtime: not the shipped library"; exit 77; }
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u >"$T/exports"
check "exports are exactly tests/exports.txt" diff -u "$LG_ROOT/tests/exports.txt" "$T/exports"
# Each hooked runtime entry point at every runtime version node (mixed runtimes: a caller's
# reference binds to the copy of its own runtime's version), CUDA 13's the default.
for h in $(grep -E '^(__)?cuda' "$LG_ROOT/tests/exports.txt"); do
  for v in "@@libcudart.so.13" "@libcudart.so.12" "@libcudart.so.11.0"; do
    nm -D --defined-only "$lib" | awk '{print $3}' | grep -qxF "$h$v" || fail "$h$v is not defined"
  done
done
check "no per-version C names exported" bash -c "! nm -D --defined-only '$lib' | grep -q ' lg_preload_v'"
check "no glib symbol leaks" bash -c "! nm -D --defined-only '$lib' | grep -q ' g_'"
# libpthread.so.0 and libdl.so.2 are glibc's own: before glibc 2.34 pthread_create and dlopen
# live there, and the library is built to load on glibc 2.17 (Makefile, GLIBC_BASELINE).
ldd "$lib" | awk '{print $1}' | grep -v -E '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|libc\.so\.6|libpthread\.so\.0|libdl\.so\.2)$' >"$T/deps"
check "ldd shows glibc alone" [ ! -s "$T/deps" ]
readelf -d "$lib" | grep NEEDED >"$T/needed"
check "NEEDED is glibc (libc, libpthread, libdl, the loader) only" bash -c "! grep -v -E 'libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|ld-linux' '$T/needed'"
# The whole TLS block is static TLS (the fast path's initial-exec variables), which a library
# dlopen'd late (attach, labelguard.enable() after import torch) takes from glibc's small
# surplus, shared with every other such library: keep it to a few fast-path words.
tls=$(readelf -lW "$lib" | awk '$1 == "TLS" {print $6}'); tls=$((tls))
check "static TLS block at most 128 bytes (it is ${tls:-?})" [ "${tls:-99999}" -le 128 ]
# A glib-free process: a static-free C program that never links glib, with glib's runtime
# hidden from the loader's search path.
check "loads where libglib is absent" bash -c "mkdir -p '$T/empty' && LD_LIBRARY_PATH='$T/empty' LD_PRELOAD='$lib' /bin/true"
check "no glib mapped in a preloaded process" bash -c "! LD_PRELOAD='$lib' cat /proc/self/maps | grep -q libglib"
finish
