/* report.c: every event the library emits: one JSON line per event in this process's log
 * file (DESIGN.md §4) and, unless LABELGUARD_QUIET=1, a short text block on stderr.
 *
 * Called by launch.c, lg.c and cupti.c on whatever thread hit the event (16 launching threads
 * at once is a tested case). One mutex serializes the lazy open and each write, so lines never
 * interleave; a line is built completely before its single write(). Nothing here runs on the
 * unwatched fast path.
 *
 * Files: `<log_dir>/<host>-<pid>[-rank<R>].jsonl`, created on the first event only (a process
 * that reports nothing leaves no file and no directory), directories 0700, the file with
 * O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, so a planted symlink or an old file is never
 * written through. A pid reused from an earlier run (containers start at pid 1) gets a
 * `-2`, `-3`... suffix instead. If the directory cannot be written, or a later write fails
 * (ENOSPC), one warning goes to stderr and the events follow it there; nothing else changes.
 *
 * Fork: the child forgets the parent's descriptor (lg_report_after_fork_child, from lg.c's
 * atfork handler; also detected by a pid check) and opens its own file on its first event.
 *
 * Tested by tests/unit/test_report.c (events parsed with json_check.h, file naming with and
 * without rank variables, unwritable directories, 16 threads, fork).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define LINE_CAP (96 * 1024)   /* one event: 256 samples, 48 native and 32 Python frames fit */
#define TEXT_CAP 8192          /* one stderr block */
#define MAX_WARN_KINDS 64
#define WARN_REPEAT_CAP 10     /* stderr copies of one warning kind; the log gets them all */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static pid_t log_pid;          /* the process that opened log_fd */
static bool log_fallback;      /* events go to stderr */
static char log_path[4200];    /* written before log_fd is published, under the lock */
static char line_buf[LINE_CAP];

static struct {
    char what[64];
    int count;
} warn_kinds[MAX_WARN_KINDS];
static int n_warn_kinds;

static struct {
    bool set;
    char hooks[64], backend[16], device_name[128], torch[64];
    bool has_device_name, has_torch, has_hooks, has_backend;
    int cuda_runtime, driver, device_index;
} env = { .device_index = -1 };

/* ------------------------------------------------------------------ small helpers */

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

static void write_stderr(const char *p, size_t n)
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
static long rank_of(bool local)
{
    static const char *const global[] = { "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK" };
    static const char *const loc[] = { "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK" };
    const char *const *names = local ? loc : global;
    for (int i = 0; i < 3; i++) {
        long r = env_rank(names[i]);
        if (r >= 0)
            return r;
    }
    return -1;
}

static void hostname(char *out, size_t len)
{
    if (gethostname(out, len) != 0 || !out[0])
        snprintf(out, len, "unknown");
    out[len - 1] = '\0';
    /* The name becomes part of a file name: keep it to a safe alphabet. */
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_'))
            *p = '_';
}

/* UTC date and time computed here rather than by gmtime_r: glibc's gmtime_r takes tzset_lock,
 * which a fork child inherits held when another thread of the parent was formatting a time at
 * that moment, and the child's first event then waits forever (tests/e2e/test_fork.sh, fork
 * storm). Days to civil date: H. Hinnant's algorithm, proleptic Gregorian, any int64 day. */
static void rfc3339_now(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t secs = (int64_t)ts.tv_sec;
    int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
    int64_t sod = secs - days * 86400; /* seconds of the day, 0..86399 */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;                                 /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);          /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                               /* [0, 11], from March */
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    snprintf(out, len, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06ldZ", (long long)year, (long long)month,
             (long long)day, (long long)(sod / 3600), (long long)(sod / 60 % 60), (long long)(sod % 60),
             ts.tv_nsec / 1000);
}

static const char *dtype_name(lg_dtype_t d)
{
    switch (d) {
    case LG_DTYPE_UINT8: return "uint8";
    case LG_DTYPE_INT32: return "int32";
    default: return "int64";
    }
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
                     lg_cfg.log_dir, why, strerror(err));
    write_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
}

/* Opens the log on the first event. Caller holds the lock. */
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
    if (!lg_cfg.log_dir[0]) {
        fall_back("the directory name is empty", EINVAL);
        return;
    }
    if (mkdir_p(lg_cfg.log_dir) != 0) {
        fall_back("creating the directory", errno);
        return;
    }
    char host[256], rank[32] = "";
    hostname(host, sizeof(host));
    long r = rank_of(false);
    if (r >= 0)
        snprintf(rank, sizeof(rank), "-rank%ld", r);
    const char *sep = lg_cfg.log_dir[strlen(lg_cfg.log_dir) - 1] == '/' ? "" : "/";
    int err = 0;
    for (int attempt = 1; attempt <= 100; attempt++) {
        char suffix[16] = "";
        if (attempt > 1)
            snprintf(suffix, sizeof(suffix), "-%d", attempt);
        int n = snprintf(log_path, sizeof(log_path), "%s%s%s-%ld%s%s.jsonl", lg_cfg.log_dir, sep, host, (long)pid, rank, suffix);
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

/* Writes one complete line (with its '\n') to the log, or stderr on fallback. Caller holds the
 * lock. */
static void emit_line(const char *line, size_t n, bool sync_to_disk)
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
    write_stderr(line, n);
}

/* ------------------------------------------------------------------ JSON events */

static void header(lg_json_t *j, const char *event)
{
    char t[96], host[256];
    rfc3339_now(t, sizeof(t));
    hostname(host, sizeof(host));
    lg_json_begin_object(j, NULL);
    lg_json_int(j, "v", 1);
    lg_json_string(j, "event", event);
    lg_json_string(j, "time", t);
    lg_json_string(j, "host", host);
    lg_json_int(j, "pid", (int64_t)getpid());
    lg_json_int(j, "tid", (int64_t)syscall(SYS_gettid));
    long r = rank_of(false), lr = rank_of(true);
    if (r >= 0)
        lg_json_int(j, "rank", r);
    else
        lg_json_null(j, "rank");
    if (lr >= 0)
        lg_json_int(j, "local_rank", lr);
    else
        lg_json_null(j, "local_rank");
}

/* Closes the line, appends '\n' and emits it. A line that overflowed LINE_CAP is still valid
 * JSON (json.c keeps it so) but is marked truncated. Caller holds the lock. */
static void finish_and_emit(lg_json_t *j, bool sync_to_disk)
{
    if (j->overflow) {
        /* json.c refuses new values after overflow: the flag goes in by hand, before the closers. */
        lg_json_finish(j);
        if (j->len >= 1 && j->len + 20 < j->cap) {
            j->len--; /* the root's '}' */
            j->len += (size_t)snprintf(j->buf + j->len, j->cap - j->len, ",\"truncated\":true}");
        }
    } else
        lg_json_finish(j);
    j->buf[j->len] = '\n';
    emit_line(j->buf, j->len + 1, sync_to_disk);
}

static void version_string(int v, char *out, size_t len)
{
    snprintf(out, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

void lg_report_set_environment(const lg_report_env_t *e)
{
    pthread_mutex_lock(&lock);
    env.set = true;
#define COPY(field, flag) do { env.flag = e->field != NULL; snprintf(env.field, sizeof(env.field), "%s", e->field ? e->field : ""); } while (0)
    COPY(hooks, has_hooks);
    COPY(backend, has_backend);
    COPY(device_name, has_device_name);
    COPY(torch, has_torch);
#undef COPY
    env.cuda_runtime = e->cuda_runtime;
    env.driver = e->driver;
    env.device_index = e->device_index;
    pthread_mutex_unlock(&lock);
}

void lg_report_start(void)
{
    pthread_mutex_lock(&lock);
    lg_json_t j;
    lg_json_init(&j, line_buf, sizeof(line_buf) - 1);
    header(&j, "start");
    lg_json_string(&j, "version", LG_VERSION);
    lg_json_begin_object(&j, "config");
    lg_json_string(&j, "action", lg_config_action_name(lg_cfg.action));
    lg_json_string(&j, "mode", lg_config_mode_name(lg_cfg.mode));
    lg_json_string(&j, "hooks", lg_config_hooks_name(lg_cfg.hooks));
    lg_json_string(&j, "log", lg_cfg.log_dir);
    lg_json_string(&j, "kernels", lg_cfg.kernels[0] ? lg_cfg.kernels : NULL);
    const char *bt = lg_cfg.backtrace_native ? (lg_cfg.backtrace_python ? "native,python" : "native")
                                             : (lg_cfg.backtrace_python ? "python" : "none");
    lg_json_string(&j, "backtrace", bt);
    lg_json_int(&j, "samples", lg_cfg.samples);
    lg_json_bool(&j, "quiet", lg_cfg.quiet);
    lg_json_end_object(&j);
    /* Active layers as a list: "interpose,cupti" -> ["interpose", "cupti"]. */
    lg_json_begin_array(&j, "hooks");
    if (env.has_hooks) {
        const char *p = env.hooks;
        while (*p) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char layer[32];
            if (n > 0 && n < sizeof layer) {
                memcpy(layer, p, n);
                layer[n] = '\0';
                lg_json_string(&j, NULL, layer);
            }
            p += n + (comma ? 1 : 0);
        }
    }
    lg_json_end_array(&j);
    lg_json_string(&j, "backend", env.has_backend ? env.backend : NULL);
    char ver[32];
    if (env.cuda_runtime > 0) {
        version_string(env.cuda_runtime, ver, sizeof(ver));
        lg_json_string(&j, "cuda_runtime", ver);
    } else
        lg_json_null(&j, "cuda_runtime");
    if (env.driver > 0) {
        version_string(env.driver, ver, sizeof(ver));
        lg_json_string(&j, "driver", ver);
    } else
        lg_json_null(&j, "driver");
    lg_json_begin_object(&j, "device");
    lg_json_string(&j, "name", env.has_device_name ? env.device_name : NULL);
    if (env.device_index >= 0)
        lg_json_int(&j, "index", env.device_index);
    else
        lg_json_null(&j, "index");
    lg_json_end_object(&j);
    if (env.has_torch) {
        lg_json_begin_object(&j, "torch");
        lg_json_string(&j, "version", env.torch);
        lg_json_end_object(&j);
    } else
        lg_json_null(&j, "torch");
    /* Kernels whose names the process registered so far (PyTorch: all of its kernels, at import). */
    lg_json_int(&j, "registered_kernels", lg_names_registered());
    finish_and_emit(&j, false);
    pthread_mutex_unlock(&lock);
}

void lg_report_summary(const lg_counters_t *c)
{
    pthread_mutex_lock(&lock);
    lg_json_t j;
    lg_json_init(&j, line_buf, sizeof(line_buf) - 1);
    header(&j, "summary");
    lg_json_uint(&j, "launches", c->launches);
    lg_json_uint(&j, "watched", c->watched);
    lg_json_uint(&j, "validated", c->validated);
    lg_json_uint(&j, "violations", c->violations);
    lg_json_uint(&j, "validate_ns_total", c->validate_ns_total);
    finish_and_emit(&j, true);
    if (!lg_cfg.quiet && c->violations > 0) {
        char msg[4600];
        int n = snprintf(msg, sizeof(msg), "labelguard: %" PRIu64 " launch%s with bad labels out of %" PRIu64
                         " watched; log: %s\n", c->violations, c->violations == 1 ? "" : "es", c->watched, log_path);
        write_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
    }
    pthread_mutex_unlock(&lock);
}

/* Counts `what`; returns how many times it was seen before (capped table: kinds beyond it
 * count as new each time). Caller holds the lock. */
static int warn_seen(const char *what)
{
    for (int i = 0; i < n_warn_kinds; i++)
        if (strncmp(warn_kinds[i].what, what, sizeof(warn_kinds[i].what) - 1) == 0)
            return warn_kinds[i].count++;
    if (n_warn_kinds < MAX_WARN_KINDS) {
        snprintf(warn_kinds[n_warn_kinds].what, sizeof(warn_kinds[0].what), "%s", what);
        warn_kinds[n_warn_kinds].count = 1;
        n_warn_kinds++;
    }
    return 0;
}

static const char *term_safe(const char *in, char *out, size_t len);

static void warning(const char *what, const char *detail, bool once, bool to_stderr)
{
    if (!what)
        what = "unknown";
    pthread_mutex_lock(&lock);
    int seen = warn_seen(what);
    if (once && seen > 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    lg_json_t j;
    lg_json_init(&j, line_buf, sizeof(line_buf) - 1);
    header(&j, "warning");
    lg_json_string(&j, "what", what);
    lg_json_string(&j, "detail", detail ? detail : "");
    finish_and_emit(&j, false);
    if (to_stderr && !lg_cfg.quiet && seen <= WARN_REPEAT_CAP) {
        char msg[2048], sw[128], sd[1536];
        int n;
        term_safe(what, sw, sizeof(sw));
        if (seen < WARN_REPEAT_CAP)
            n = snprintf(msg, sizeof(msg), "labelguard: warning: %s: %s\n", sw, term_safe(detail ? detail : "", sd, sizeof(sd)));
        else
            n = snprintf(msg, sizeof(msg), "labelguard: warning: %s: further warnings of this kind go to the log only\n", sw);
        write_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
    }
    pthread_mutex_unlock(&lock);
}

void lg_report_warning(const char *what, const char *detail) { warning(what, detail, false, true); }
void lg_report_warning_once(const char *what, const char *detail) { warning(what, detail, true, true); }
/* For conditions that change nothing the user must act on (CUPTI missing while interposition
 * covers the launches): the log records them, the terminal stays quiet. */
void lg_report_note_once(const char *what, const char *detail) { warning(what, detail, true, false); }

/* ------------------------------------------------------------------ violations */

/* Fills cause and cause_text when the caller left them empty. */
static void ensure_cause(const lg_violation_t *v, lg_cause_t *cause, char *text, size_t len)
{
    if (v->cause_text[0]) {
        *cause = v->cause;
        snprintf(text, len, "%s", v->cause_text);
        return;
    }
    bool dense = v->target.ndim >= 2 || (v->spec && strstr(v->spec->family, "2d"));
    *cause = lg_cause_classify(&v->target, &v->verdict, dense);
    lg_cause_explain(*cause, &v->target, &v->verdict, text, len);
}

/* "target[17]" for 1-D targets, "target[0][3][7]" for dense ones: the coordinates a user types
 * into a debugger. */
static int format_index(const lg_target_t *t, int64_t index, char *out, size_t len)
{
    if (t->ndim <= 1)
        return snprintf(out, len, "target[%" PRId64 "]", index);
    int64_t coord[LG_MAX_TARGET_DIMS];
    int nd = t->ndim > LG_MAX_TARGET_DIMS ? LG_MAX_TARGET_DIMS : t->ndim;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d] > 0 ? t->sizes[d] : 1;
        coord[d] = index % sz;
        index /= sz;
    }
    int n = snprintf(out, len, "target");
    for (int d = 0; d < nd && n < (int)len; d++)
        n += snprintf(out + n, len - (size_t)n, "[%" PRId64 "]", coord[d]);
    return n;
}

static const char *direction_name(const lg_violation_t *v)
{
    if (!v->spec)
        return NULL;
    return v->spec->direction == LG_DIR_BACKWARD ? "backward" : "forward";
}

static void build_violation_json(lg_json_t *j, const lg_violation_t *v, lg_cause_t cause, const char *cause_text,
                                 char (*native)[256], int n_native)
{
    header(j, "violation");
    lg_json_string(j, "kernel", v->short_name);
    lg_json_string(j, "symbol", v->mangled);
    lg_json_string(j, "family", v->spec ? v->spec->family : NULL);
    lg_json_string(j, "direction", direction_name(v));
    lg_json_uint(j, "launch_seq", v->launch_seq);
    char stream[32];
    snprintf(stream, sizeof(stream), "0x%" PRIxPTR, (uintptr_t)v->stream);
    lg_json_string(j, "stream", stream);
    lg_json_int(j, "device", v->device);

    const lg_target_t *t = &v->target;
    lg_json_begin_object(j, "target");
    lg_json_string(j, "dtype", dtype_name(t->dtype));
    lg_json_int(j, "count", t->count);
    lg_json_int(j, "n_classes", t->n_classes);
    if (t->has_ignore_index)
        lg_json_int(j, "ignore_index", t->ignore_index);
    else
        lg_json_null(j, "ignore_index");
    if (t->ndim >= 2) {
        lg_json_begin_array(j, "shape");
        for (int d = 0; d < t->ndim && d < LG_MAX_TARGET_DIMS; d++)
            lg_json_int(j, NULL, t->sizes[d]);
        lg_json_end_array(j);
    }
    lg_json_end_object(j);

    const lg_verdict_t *vd = &v->verdict;
    lg_json_begin_object(j, "bad");
    lg_json_int(j, "count", vd->bad_count);
    lg_json_int(j, "checked", vd->checked);
    lg_json_int(j, "min", vd->min);
    lg_json_int(j, "max", vd->max);
    lg_json_begin_array(j, "samples");
    int ns = vd->n_samples;
    if (ns > LG_MAX_SAMPLES)
        ns = LG_MAX_SAMPLES;
    if (lg_cfg.samples > 0 && ns > lg_cfg.samples)
        ns = lg_cfg.samples;
    for (int i = 0; i < ns; i++) {
        lg_json_begin_object(j, NULL);
        lg_json_int(j, "index", vd->samples[i].index);
        lg_json_int(j, "value", vd->samples[i].value);
        lg_json_end_object(j);
    }
    lg_json_end_array(j);
    lg_json_end_object(j);

    lg_json_string(j, "cause", lg_cause_name(cause));
    lg_json_string(j, "cause_text", cause_text);
    lg_json_string(j, "action", lg_config_action_name(v->action));
    lg_json_string(j, "outcome", v->outcome ? v->outcome : "launched");
    if (v->note[0])
        lg_json_string(j, "note", v->note);

    lg_json_begin_array(j, "native_stack");
    for (int i = 0; i < n_native; i++)
        lg_json_string(j, NULL, native[i]);
    lg_json_end_array(j);

    const lg_py_stack_t *py = &v->python;
    int np = py->n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : py->n;
    lg_json_begin_array(j, "python_stack");
    for (int i = 0; i < np; i++) {
        lg_json_begin_object(j, NULL);
        lg_json_string(j, "file", py->frames[i].file);
        lg_json_int(j, "line", py->frames[i].line);
        lg_json_string(j, "function", py->frames[i].function);
        lg_json_end_object(j);
    }
    lg_json_end_array(j);
    if (np > 0)
        lg_json_string(j, "python_stack_thread", py->from_main_thread ? "main" : "launching");
}

static const char *action_text(const lg_violation_t *v, char *buf, size_t len)
{
    const char *outcome = v->outcome ? v->outcome : "launched";
    const char *a = lg_config_action_name(v->action);
    if (!strcmp(outcome, "blocked"))
        snprintf(buf, len, "%s → launch blocked, CUDA context intact; PyTorch raises RuntimeError", a);
    else if (!strcmp(outcome, "held"))
        snprintf(buf, len, "%s → launch blocked, thread %ld waits: attach a debugger (gdb -p %ld) or send SIGCONT "
                 "(kill -CONT %ld) to go on", a, (long)syscall(SYS_gettid), (long)getpid(), (long)getpid());
    else if (!strcmp(outcome, "masked"))
        snprintf(buf, len, "%s → %" PRId64 " bad label%s replaced by ignore_index in a copy; the kernel ran on it", a,
                 v->verdict.bad_count, v->verdict.bad_count == 1 ? "" : "s");
    else if (!strcmp(outcome, "aborted"))
        snprintf(buf, len, "%s → aborting for a core dump", a);
    else if (!strcmp(outcome, "launched"))
        snprintf(buf, len, "%s → the kernel ran with these labels (its device-side assert may fire)", a);
    else
        snprintf(buf, len, "%s → %s", a, outcome);
    return buf;
}

/* Text from outside (kernel names, Python file names) for the terminal: control characters
 * and invalid UTF-8 become '?', so a hostile name cannot move the cursor or fake a line. */
static const char *term_safe(const char *in, char *out, size_t len)
{
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)in;
    while (*s && o + 5 < len) {
        unsigned char c = *s;
        size_t u = 1;
        if (c >= 0x80) {
            /* Accept well-formed sequences only (same table as json.c, minus its code). */
            size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            bool ok = need > 0;
            for (size_t k = 1; ok && k < need; k++)
                ok = (s[k] & 0xC0) == 0x80;
            if (ok && need == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F)))
                ok = false;
            if (ok && need == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F)))
                ok = false;
            if (ok) {
                memcpy(out + o, s, need);
                o += need;
                s += need;
                continue;
            }
            out[o++] = '?';
        } else
            out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        s += u;
    }
    out[o] = '\0';
    return out;
}

/* A Python file that belongs to an installed package or the standard library. */
static bool library_frame(const char *file)
{
    return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") || strstr(file, "/lib/python3") ||
           file[0] == '<';
}

#define APPEND(...) do { if (n < (int)cap) n += snprintf(out + n, cap - (size_t)n, __VA_ARGS__); } while (0)

/* The stderr block: one read tells kernel, values, counts, cause, action, call site, log. */
static size_t build_text(char *out, size_t cap, const lg_violation_t *v, const char *cause_name, const char *cause_text,
                         char (*native)[256], int n_native)
{
    int n = 0;
    const char *dir = direction_name(v);
    char safe[512], safe2[256];
    APPEND("labelguard: bad labels in %s", v->short_name[0] ? term_safe(v->short_name, safe, sizeof(safe)) : "(unknown kernel)");
    if (dir)
        APPEND(" (%s)", dir);
    APPEND("\n");

    const lg_verdict_t *vd = &v->verdict;
    const lg_target_t *t = &v->target;
    int shown = vd->n_samples < 6 ? vd->n_samples : 6;
    if (shown > 0) {
        APPEND(" ");
        for (int i = 0; i < shown; i++) {
            char idx[96], cell[160];
            format_index(t, vd->samples[i].index, idx, sizeof(idx));
            snprintf(cell, sizeof(cell), "%s = %" PRId64, idx, vd->samples[i].value);
            if (i > 0 && i % 3 == 0)
                APPEND("\n ");
            bool last_in_row = i % 3 == 2 || i == shown - 1;
            if (last_in_row)
                APPEND(" %s", cell);
            else
                APPEND(" %-20s", cell);
        }
        if (vd->bad_count > shown)
            APPEND(" (first %d of %" PRId64 ")", shown, vd->bad_count);
        APPEND("\n");
    }
    APPEND("  %" PRId64 " of %" PRId64 " labels outside [0, %" PRId64 ")", vd->bad_count, t->count, t->n_classes);
    if (t->has_ignore_index)
        APPEND("  (ignore_index = %" PRId64 ")", t->ignore_index);
    else
        APPEND("  (no ignore_index)");
    if (vd->checked > 0)
        APPEND("  min %" PRId64 ", max %" PRId64, vd->min, vd->max);
    APPEND("\n");
    APPEND("  likely cause: %s — %s\n", cause_name, cause_text);
    char act[512];
    APPEND("  action: %s\n", action_text(v, act, sizeof(act)));
    if (v->note[0])
        APPEND("  note: %s\n", term_safe(v->note, safe, sizeof(safe)));
    if (v->python.n > 0) {
        /* The user's line, not torch/nn/functional.py: the innermost frame outside installed
         * packages and the standard library, then the innermost one as "via". */
        int np = v->python.n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : v->python.n;
        int k = np - 1;
        while (k > 0 && library_frame(v->python.frames[k].file))
            k--;
        if (library_frame(v->python.frames[k].file))
            k = np - 1;
        const lg_py_frame_t *f = &v->python.frames[k];
        APPEND("  at %s:%d in %s   (python%s)\n", term_safe(f->file, safe, sizeof(safe)), f->line,
               term_safe(f->function, safe2, sizeof(safe2)),
               v->python.from_main_thread ? ", main thread: the launching thread runs no Python" : "");
        if (k != np - 1) {
            const lg_py_frame_t *in = &v->python.frames[np - 1];
            const char *base = strrchr(in->file, '/');
            APPEND("    via %s:%d in %s\n", term_safe(base ? base + 1 : in->file, safe, sizeof(safe)), in->line,
                   term_safe(in->function, safe2, sizeof(safe2)));
        }
    } else if (n_native > 0) {
        /* The first frame outside the CUDA stack itself (CUPTI sees launches from inside it). */
        int k = 0;
        while (k < n_native - 1 && (!strncmp(native[k], "libcudart", 9) || !strncmp(native[k], "libcuda.", 8) ||
                                    !strncmp(native[k], "libcupti", 8)))
            k++;
        /* Then the kernel's host stub (nvcc names it after the kernel; it only calls the launch
         * API): its caller is the code that chose these labels. */
        if (k < n_native - 1 && v->short_name[0] && strstr(native[k], v->short_name))
            k++;
        APPEND("  at %s   (native)\n", term_safe(native[k], safe, sizeof(safe)));
    }
    APPEND("  log: %s\n", log_path[0] ? term_safe(log_path, safe, sizeof(safe)) : "(none)");
    if (n >= (int)cap) {
        n = (int)cap - 1;
        out[n - 1] = '\n';
    }
    return (size_t)n;
}

void lg_report_violation(lg_violation_t *v, bool sync_to_disk)
{
    /* Symbolization takes the loader's lock and may allocate: done before ours. */
    char native[LG_MAX_FRAMES][256];
    int n_native = 0;
    if (v->native.n > 0)
        n_native = lg_stack_symbolize(&v->native, native, LG_MAX_FRAMES);
    lg_cause_t cause;
    char cause_text[256];
    ensure_cause(v, &cause, cause_text, sizeof(cause_text));
    v->cause = cause;
    snprintf(v->cause_text, sizeof(v->cause_text), "%s", cause_text);

    pthread_mutex_lock(&lock);
    lg_json_t j;
    lg_json_init(&j, line_buf, sizeof(line_buf) - 1);
    build_violation_json(&j, v, cause, cause_text, native, n_native);
    finish_and_emit(&j, sync_to_disk);
    if (!lg_cfg.quiet) {
        static char text[TEXT_CAP];
        size_t n = build_text(text, sizeof(text), v, lg_cause_name(cause), cause_text, native, n_native);
        write_stderr(text, n);
    }
    pthread_mutex_unlock(&lock);
}

void lg_report_error_message(const lg_violation_t *v, char *out, size_t out_len)
{
    lg_cause_t cause;
    char cause_text[256];
    ensure_cause(v, &cause, cause_text, sizeof(cause_text));
    const lg_verdict_t *vd = &v->verdict;
    const lg_target_t *t = &v->target;
    char idx[96] = "";
    int64_t value = 0;
    if (vd->n_samples > 0) {
        format_index(t, vd->samples[0].index, idx, sizeof(idx));
        value = vd->samples[0].value;
    }
    char ign[48];
    if (t->has_ignore_index)
        snprintf(ign, sizeof(ign), "ignore_index %" PRId64, t->ignore_index);
    else
        snprintf(ign, sizeof(ign), "no ignore_index");
    char what[160];
    if (vd->n_samples > 0)
        snprintf(what, sizeof(what), "bad label %s = %" PRId64, idx, value);
    else /* samples off: the range still says what is wrong */
        snprintf(what, sizeof(what), "bad labels (min %" PRId64 ", max %" PRId64 ")", vd->min, vd->max);
    pthread_mutex_lock(&lock);
    const char *path = log_path[0] ? log_path : "the log";
    snprintf(out, out_len, "labelguard: %s: %s, outside [0, %" PRId64 ") (%s; %" PRId64 " of %" PRId64
             " labels bad); launch blocked, the CUDA context is intact; likely cause: %s: %s; details in %s",
             v->short_name[0] ? v->short_name : "kernel", what, t->n_classes, ign, vd->bad_count, t->count,
             lg_cause_name(cause), lg_cause_fix(cause), path);
    pthread_mutex_unlock(&lock);
}

const char *lg_report_log_path(void)
{
    return log_path;
}

void lg_report_after_fork_child(void)
{
    /* Another thread of the parent may have held the lock at fork time: start from a fresh one. */
    pthread_mutex_init(&lock, NULL);
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
    log_pid = 0;
    log_fallback = false;
    log_path[0] = '\0';
    n_warn_kinds = 0;
}
