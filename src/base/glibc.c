/* glibc.c: the few C library functions the wheel's glibc baseline (2.17, manylinux2014) lacks,
 * defined here (hidden) in terms of what glibc 2.28 has, so that liblabelguard.so built on a newer
 * glibc still loads on an older one.
 *
 * Why: the static glib (Debian's libglib-2.0.a, built against glibc 2.36 headers) and our own
 * objects call stat64/fstat64/lstat64/fstat, which became real exported functions only in
 * glibc 2.33 (before, the headers turned them into __xstat64 & co.); glib calls close_range
 * (2.34) and fcntl64 (2.28, the same function as fcntl on 64-bit). A hidden definition here satisfies those references inside the library; every other
 * newer-than-2.17 reference (pthread_*, dl*, sem_* moved into libc.so.6 at 2.34) is bound to its
 * old symbol version by the trampolines that scripts/glibc-pin.sh generates at link time.
 * Together they let the Makefile check that the library needs nothing newer than GLIBC_2.17.
 *
 * Who calls it: glib's and our own code, on any thread; nothing here keeps state.
 * Tested by tests/pip/test_wheel.sh (auditwheel's tag, the symbol-version check) and by every
 * test that loads the library (registry.c and stack.c call fstat through this file).
 * x86_64 and aarch64, only where the Makefile pins (LG_PIN_GLIBC): the sanitizer builds go
 * without. The two differ only in the oldest symbol version (aarch64's glibc starts at 2.17, with
 * no 2.2.5 nodes) and the __xstat version argument; aarch64's pin is tested under qemu by every
 * test that reads a file through fstat (tests/qemu/run.sh). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(LG_PIN_GLIBC) && (defined(__x86_64__) || defined(__aarch64__)) && defined(__GLIBC__)

#define LG_HIDDEN __attribute__((visibility("hidden")))
/* struct stat and struct stat64 are one layout on both. The version argument is the one the
 * old headers passed: _STAT_VER_LINUX (1) on x86_64, _STAT_VER_KERNEL (0) on aarch64, whose
 * __xstat64 refuses any other with EINVAL. */
#if defined(__x86_64__)
#define STAT_VER 1
#define GLIBC_OLDEST "GLIBC_2.2.5"
#else
#define STAT_VER 0
#define GLIBC_OLDEST "GLIBC_2.17"
#endif

int lg_glibc_xstat64(int ver, const char *path, struct stat64 *buf);
int lg_glibc_lxstat64(int ver, const char *path, struct stat64 *buf);
int lg_glibc_fxstat64(int ver, int fd, struct stat64 *buf);
__asm__(".symver lg_glibc_xstat64, __xstat64@" GLIBC_OLDEST);
__asm__(".symver lg_glibc_lxstat64, __lxstat64@" GLIBC_OLDEST);
__asm__(".symver lg_glibc_fxstat64, __fxstat64@" GLIBC_OLDEST);

LG_HIDDEN int stat64(const char *path, struct stat64 *buf) { return lg_glibc_xstat64(STAT_VER, path, buf); }
LG_HIDDEN int lstat64(const char *path, struct stat64 *buf) { return lg_glibc_lxstat64(STAT_VER, path, buf); }
LG_HIDDEN int fstat64(int fd, struct stat64 *buf) { return lg_glibc_fxstat64(STAT_VER, fd, buf); }
LG_HIDDEN int fstat(int fd, struct stat *buf) { return lg_glibc_fxstat64(STAT_VER, fd, (struct stat64 *)buf); }

int lg_glibc_fcntl(int fd, int cmd, ...);
__asm__(".symver lg_glibc_fcntl, fcntl@" GLIBC_OLDEST);

/* Every fcntl command takes at most one argument, an int or a pointer: passed on as a pointer-
 * sized value, which the x86_64 and AAPCS64 conventions give to the callee in the same register
 * (on Linux, AAPCS64 passes variadic arguments like named ones). */
LG_HIDDEN int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return lg_glibc_fcntl(fd, cmd, arg);
}

/* glib falls back to closing descriptors one by one when this says ENOSYS (kernels before 5.9). */
LG_HIDDEN int close_range(unsigned int first, unsigned int last, int flags)
{
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, first, last, flags);
#else
    errno = ENOSYS;
    return -1;
#endif
}
#endif
