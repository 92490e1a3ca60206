# shellcheck shell=bash
# tests/qemu/host_stub.sh: qemu_host_stub DIR, sourced by tests/qemu/lib.sh and
# tests/qemu/test_host_stub.sh. The qemu tests preload DIR/$PLATFORM/liblabelguard.so; each
# loader expands $PLATFORM itself: the guest's to "aarch64" (lib.sh links the aarch64 library
# there), the host's to the string its glibc picked for this CPU, which is not always "x86_64":
# glibc >= 2.26 says "haswell" on an Intel CPU with AVX2 (and on Xeon Phi "xeon_phi"), and
# `ld.so --list-diagnostics` (glibc >= 2.33) prints the choice as dl_platform. A host process on
# the way (timeout, env, sh) that misses the stub prints "ERROR: ld.so: object ... cannot be
# preloaded" on stderr, which the tests' "nothing on stderr" checks then fail on. So the empty
# host stub goes under every name glibc's x86 loader can choose, and under this loader's own
# answer, and a host process is checked to preload it silently before any test runs.
# Returns 0, or 1 with the reason on stdout.
qemu_host_stub() {
  local dir=$1 p ldso out
  mkdir -p "$dir/x86_64" || return 1
  echo 'void lg_qemu_host_stub(void) {}' >"$dir/x86_64/stub.c"
  gcc -shared -fPIC -o "$dir/x86_64/liblabelguard.so" "$dir/x86_64/stub.c" || { echo "cannot build the host stub"; return 1; }
  ldso=; for p in /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2; do [ -x "$p" ] && { ldso=$p; break; }; done
  for p in haswell xeon_phi $([ -n "$ldso" ] && "$ldso" --list-diagnostics 2>/dev/null | sed -n 's/^dl_platform="\([A-Za-z0-9_]*\)"$/\1/p'); do
    [ "$p" = aarch64 ] || [ -e "$dir/$p" ] || ln -s x86_64 "$dir/$p" || return 1
  done
  # shellcheck disable=SC2016  # $PLATFORM is the loader's to expand
  out=$(LD_PRELOAD="$dir/"'$PLATFORM'/liblabelguard.so /bin/true 2>&1)
  [ -z "$out" ] || { echo "a host process does not preload the stub $dir/\$PLATFORM/liblabelguard.so: $out"; return 1; }
}
