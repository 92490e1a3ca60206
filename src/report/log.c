/* log.c: the output sinks of report.c: this process's JSONL log file and stderr.
 *
 * Files: `<log_dir>/<host>-<pid>[-rank<R>].jsonl`, created on the first event only (a process
 * that reports nothing leaves no file and no directory), directories 0700, the file with
 * O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, so a planted symlink or an old file is never
 * written through. A pid reused from an earlier run (containers start at pid 1) gets a
 * `-2`, `-3`... suffix instead. If the directory cannot be written, or a later write fails
 * (ENOSPC), one warning goes to stderr and the events follow it there; nothing else changes.
 *
 * Called by report.c only, under its lock, so lines never interleave. Fork: the child forgets
 * the parent's descriptor (lg_log_after_fork_child, also detected by a pid check) and opens its
 * own file on its first event. Tested by tests/unit/test_report.c (file naming with and
 * without rank variables, unwritable directories, fork) and tests/e2e/test_report_fields.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/report.h"

static int log_fd = -1;
static pid_t log_pid;       /* the process that opened log_fd */
static bool log_fallback;   /* events go to stderr */
static char log_path[4200]; /* written before log_fd is published */

/* Writes all n bytes, looping on partial writes; *err = 0 or the errno that stopped it, and
 * *done the bytes that did go out. */
static void write_all_count(int fd, const char *p, size_t n, int *err, size_t *done)
{
    *err = 0;
    *done = 0;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            *err = errno;
            return;
        }
        if (w == 0) {
            *err = EIO;
            return;
        }
        p += w;
        n -= (size_t)w;
        *done += (size_t)w;
    }
}

static void write_all(int fd, const char *p, size_t n, int *err)
{
    size_t done;
    write_all_count(fd, p, n, err, &done);
}

void lg_log_stderr(const char *p, size_t n)
{
    int err;
    write_all(2, p, n, &err);
}

/* A rank variable's value, or -1 when unset or not a plain non-negative integer. */
static long env_rank(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s || strlen(s) > 9)
        return -1;
    long r = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        r = r * 10 + (*p - '0');
    }
    return r;
}

/* torchrun, then SLURM, then Open MPI. Read at each event: cheap, and correct if a launcher
 * wrapper sets them late. */
long lg_log_rank(bool local)
{
    static const char *const global[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    static const char *const loc[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"};
    const char *const *names = local ? loc : global;
    for (int i = 0; i < 3; i++) {
        long r = env_rank(names[i]);
        if (r >= 0)
            return r;
    }
    return -1;
}

long lg_log_world_size(void)
{
    static const char *const names[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"};
    for (int i = 0; i < 3; i++) {
        long n = env_rank(names[i]);
        if (n >= 0)
            return n;
    }
    return -1;
}

void lg_log_hostname(char *out, size_t len)
{
    if (gethostname(out, len) != 0 || !out[0])
        snprintf(out, len, "unknown");
    out[len - 1] = '\0';
    /* The name becomes part of a file name: keep it to a safe alphabet. */
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '.' || *p == '_'))
            *p = '_';
}

/* mkdir -p with mode 0700 for the components we create. */
static int mkdir_p(const char *dir)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ the log file */

static void fall_back(const char *why, int err)
{
    char msg[4800];
    log_fallback = true;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
    snprintf(log_path, sizeof(log_path), "stderr");
    int n = snprintf(msg, sizeof(msg),
                     "labelguard: warning: cannot write the log in '%s' (%s: %s); events go to stderr from now on\n"
                     "  hint: set LABELGUARD_LOG to a writable directory\n",
                     lg_config_values.log_dir, why, strerror(err));
    lg_log_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
}

/* Opens the log on the first event. */
static void ensure_open(void)
{
    pid_t pid = getpid();
    if (log_fd >= 0 && log_pid != pid) {
        /* A fork that bypassed pthread_atfork (clone, vfork+...): never write the parent's file. */
        close(log_fd);
        log_fd = -1;
        log_fallback = false;
        log_path[0] = '\0';
    }
    if (log_fd >= 0 || log_fallback)
        return;
    if (!lg_config_values.log_dir[0]) {
        fall_back("the directory name is empty", EINVAL);
        return;
    }
    if (mkdir_p(lg_config_values.log_dir) != 0) {
        fall_back("creating the directory", errno);
        return;
    }
    char host[256], rank[32] = "";
    lg_log_hostname(host, sizeof(host));
    long r = lg_log_rank(false);
    if (r >= 0)
        snprintf(rank, sizeof(rank), "-rank%ld", r);
    const char *sep = lg_config_values.log_dir[strlen(lg_config_values.log_dir) - 1] == '/' ? "" : "/";
    int err = 0;
    for (int attempt = 1; attempt <= 100; attempt++) {
        char suffix[16] = "";
        if (attempt > 1)
            snprintf(suffix, sizeof(suffix), "-%d", attempt);
        int n = snprintf(log_path, sizeof(log_path), "%s%s%s-%ld%s%s.jsonl", lg_config_values.log_dir, sep, host,
                         (long)pid, rank, suffix);
        if (n >= (int)sizeof(log_path)) {
            err = ENAMETOOLONG;
            break;
        }
        int fd = open(log_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            log_fd = fd;
            log_pid = pid;
            return;
        }
        err = errno;
        if (err != EEXIST)
            break;
    }
    fall_back("creating the log file", err);
}

/* Writes one complete line (with its '\n') to the log, or stderr on fallback. */
void lg_log_emit(const char *line, size_t n, bool sync_to_disk)
{
    ensure_open();
    if (log_fd >= 0) {
        int err;
        size_t done;
        write_all_count(log_fd, line, n, &err, &done);
        if (err == 0) {
            if (sync_to_disk)
                fsync(log_fd);
            return;
        }
        /* A full disk can take half a line: cut it off so the file stays valid JSONL (the
         * whole line then goes to stderr with the rest). */
        if (done > 0) {
            off_t end = lseek(log_fd, 0, SEEK_END);
            if (end >= (off_t)done && ftruncate(log_fd, end - (off_t)done) != 0)
                err = errno;
        }
        fall_back("writing the log file", err);
    }
    lg_log_stderr(line, n);
}

const char *lg_log_path(void) { return log_path; }

void lg_log_after_fork_child(void)
{
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
    log_pid = 0;
    log_fallback = false;
    log_path[0] = '\0';
}
