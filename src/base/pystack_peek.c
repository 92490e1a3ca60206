/* pystack_peek.c: the fault-safe read of this process's own memory that pystack.c walks
 * interpreter structures with: process_vm_readv on our own pid, which returns EFAULT instead of
 * crashing on a stale or freed pointer; where a seccomp filter refuses that call (ENOSYS,
 * EPERM), a pipe: write(2) from the address (the kernel checks its source the same way), then
 * read it back. No allocation; the pipe is made on first need, one per process, under a lock.
 *
 * Called by pystack.c (lg_pystack_peek) and by lg.c's fork handler in the child
 * (lg_pystack_peek_after_fork).
 *
 * Tested through pystack.c: tests/e2e/test_pystack.sh (a seccomp case forces the pipe) and
 * tests/e2e/test_untouched.sh (a fork child keeps its descriptors).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"

static struct {
    int pipe_fd[2]; /* fallback reader, created on first need; -1 until then */
    dev_t pipe_dev; /* the read end's identity, so that a fork child closes our pipe only */
    ino_t pipe_ino;
    bool use_pipe;
} rd = {.pipe_fd = {-1, -1}};
/* One pipe for the process: two capturing threads must not interleave their bytes. */
static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;

/* True when fd is still the pipe end we made: the application may have closed our numbers
 * (a daemon closing every fd) and opened its own files there since. */
static bool pipe_is_ours(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == rd.pipe_dev &&
           st.st_ino == rd.pipe_ino;
}

/* A fork child shares the parent's pipe: a read there could return bytes the other process
 * wrote. The child makes its own on first need; the lock may have been held by a parent thread.
 * Only fds that are still our pipe are closed: a child of a process that never needed the pipe
 * (every shell pipeline, every DataLoader worker) must keep its fd table exactly as it was. */
void lg_pystack_peek_after_fork(void)
{
    pthread_mutex_init(&pipe_lock, NULL);
    for (int i = 0; i < 2; i++) {
        if (pipe_is_ours(rd.pipe_fd[i]))
            close(rd.pipe_fd[i]);
        rd.pipe_fd[i] = -1;
    }
}

/* Copies n bytes at addr into out; false when any of it is unmapped. */
bool lg_pystack_peek(const void *addr, void *out, size_t n)
{
    if ((uintptr_t)addr < 4096 || (uintptr_t)addr + n < (uintptr_t)addr)
        return false;
    if (!__atomic_load_n(&rd.use_pipe, __ATOMIC_RELAXED)) {
        struct iovec local = {out, n}, remote = {(void *)addr, n};
        /* The pid changes after fork; process_vm_readv wants ours. */
        ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r == (ssize_t)n)
            return true;
        if (r >= 0 || errno == EFAULT || errno == ESRCH)
            return false;
        /* ENOSYS / EPERM: a seccomp filter; the kernel checks a pipe write's source too. */
        __atomic_store_n(&rd.use_pipe, true, __ATOMIC_RELAXED);
    }
    if (n > 4096)
        return false;
    pthread_mutex_lock(&pipe_lock);
    bool ok = false;
    if (rd.pipe_fd[0] < 0 && pipe2(rd.pipe_fd, O_CLOEXEC | O_NONBLOCK) == 0) {
        struct stat st;
        if (fstat(rd.pipe_fd[0], &st) == 0) {
            rd.pipe_dev = st.st_dev; /* both ends share the pipe's inode */
            rd.pipe_ino = st.st_ino;
        }
    }
    if (rd.pipe_fd[0] >= 0) {
        ssize_t w = write(rd.pipe_fd[1], addr, n);
        if (w == (ssize_t)n)
            ok = read(rd.pipe_fd[0], out, n) == (ssize_t)n;
        else if (w > 0) {
            char sink[4096];
            (void)!read(rd.pipe_fd[0], sink, (size_t)w);
        }
    }
    pthread_mutex_unlock(&pipe_lock);
    return ok;
}
