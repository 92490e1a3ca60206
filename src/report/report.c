/* report.c: builds the events the library emits (DESIGN.md §4): start, warning (with a cap on
 * repeated stderr copies; one about a kernel names it in a `kernel` field) and summary, as one
 * JSON line each, and holds what every event shares (the lock, the line buffer, the common
 * header and the write) for report_violation.c's violation event. The lines go to the sinks in
 * log.c.
 *
 * Called by act.c, classify.c, launch.c, lg.c and cupti.c on whatever thread hit the event (16
 * launching threads at once is a tested case). One mutex serializes building and writing, so
 * lines never interleave; a line is built completely before its single write(). Nothing here
 * runs on the unwatched fast path. Fork: the child gets a fresh lock and its own log
 * (lg_report_after_fork_child, from lg.c's atfork handler).
 *
 * It also renders the resolved configuration, for the public API (labelguard_config; any
 * thread).
 *
 * Tested by tests/unit/test_report.c (events parsed with json_check.h, file naming with and
 * without rank variables, unwritable directories, 16 threads, fork and the configuration
 * object).
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

#include "report/report.h"

#define LINE_CAP        LG_REPORT_LINE_CAP
#define MAX_WARN_KINDS  64
#define WARN_REPEAT_CAP 10 /* stderr copies of one warning kind; the log gets them all */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char line_buf[LINE_CAP];

static struct {
    char what[64];
    int count;
} warn_kinds[MAX_WARN_KINDS];
static int n_warn_kinds;

static struct {
    bool set;
    char hooks[64], hooks_reason[1024], backend[16], validator[160], device_name[128], torch[64], compiled[512];
    bool has_device_name, has_torch, has_hooks, has_hooks_reason, has_backend, has_validator, has_compiled;
    int cuda_runtime, driver, device_index;
} env = {.device_index = -1};

/* ------------------------------------------------------------------ small helpers */

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
    int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                                    /* [0, 11], from March */
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    snprintf(out, len, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06ldZ", (long long)year, (long long)month,
             (long long)day, (long long)(sod / 3600), (long long)(sod / 60 % 60), (long long)(sod % 60),
             ts.tv_nsec / 1000);
}

/* ------------------------------------------------------------------ JSON events */

static void header(lg_json_t *j, const char *event)
{
    char t[96], host[256];
    rfc3339_now(t, sizeof(t));
    lg_log_hostname(host, sizeof(host));
    lg_json_begin_object(j, NULL);
    lg_json_int(j, "v", 1);
    lg_json_string(j, "event", event);
    lg_json_string(j, "time", t);
    lg_json_string(j, "host", host);
    lg_json_int(j, "pid", (int64_t)getpid());
    lg_json_int(j, "tid", (int64_t)syscall(SYS_gettid));
    long r = lg_log_rank(false), lr = lg_log_rank(true);
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
    lg_log_emit(j->buf, j->len + 1, sync_to_disk);
}

void lg_report_lock(void) { pthread_mutex_lock(&lock); }
void lg_report_unlock(void) { pthread_mutex_unlock(&lock); }

void lg_report_line(lg_json_t *j, const char *event)
{
    lg_json_init(j, line_buf, sizeof(line_buf) - 1);
    header(j, event);
}

void lg_report_emit(lg_json_t *j, bool sync_to_disk) { finish_and_emit(j, sync_to_disk); }

static void version_string(int v, char *out, size_t len) { snprintf(out, len, "%d.%d", v / 1000, (v % 1000) / 10); }

void lg_report_set_environment(const lg_report_env_t *e)
{
    pthread_mutex_lock(&lock);
    env.set = true;
#define COPY(field, flag)                                                       \
    do {                                                                        \
        env.flag = e->field != NULL;                                            \
        snprintf(env.field, sizeof(env.field), "%s", e->field ? e->field : ""); \
    } while (0)
    COPY(hooks, has_hooks);
    COPY(hooks_reason, has_hooks_reason);
    COPY(backend, has_backend);
    COPY(validator, has_validator);
    COPY(device_name, has_device_name);
    COPY(torch, has_torch);
    COPY(compiled, has_compiled);
#undef COPY
    env.cuda_runtime = e->cuda_runtime;
    env.driver = e->driver;
    env.device_index = e->device_index;
    pthread_mutex_unlock(&lock);
}

/* The resolved configuration as an object under `key` (NULL: the root): the start event's
 * `config`, and labelguard_config() for the Python API. */
static void config_object(lg_json_t *j, const char *key)
{
    lg_json_begin_object(j, key);
    lg_json_string(j, "action", lg_config_action_name(lg_config_values.action));
    lg_json_string(j, "mode", lg_config_mode_name(lg_config_values.mode));
    lg_json_string(j, "hooks", lg_config_hooks_name(lg_config_values.hooks));
    lg_json_string(j, "log", lg_config_values.log_dir);
    lg_json_string(j, "kernels", lg_config_values.kernels[0] ? lg_config_values.kernels : NULL);
    const char *bt = lg_config_values.backtrace_native
                         ? (lg_config_values.backtrace_python ? "native,python" : "native")
                         : (lg_config_values.backtrace_python ? "python" : "none");
    lg_json_string(j, "backtrace", bt);
    lg_json_int(j, "samples", lg_config_values.samples);
    lg_json_bool(j, "quiet", lg_config_values.quiet);
    lg_json_bool(j, "logprob_check", lg_config_values.logprob_check);
    lg_json_string(j, "compiled", lg_config_values.compiled ? "on" : "off");
    lg_json_string(j, "launch_sites", lg_config_values.launch_sites_all ? "all" : "checked");
    lg_json_end_object(j);
}

/* snprintf's contract for the public API's text results: at most cap - 1 bytes and a NUL,
 * the full length returned so that the caller can retry with a larger buffer. */
int lg_report_copy_out(char *buf, size_t cap, const char *text, size_t len)
{
    if (buf && cap > 0) {
        size_t n = len < cap - 1 ? len : cap - 1;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    return len > (size_t)INT32_MAX ? INT32_MAX : (int)len;
}

int lg_report_config_json(char *buf, size_t cap)
{
    /* Both paths (4095 bytes each) escaped as \u00XX at worst, plus the rest. */
    enum { CONFIG_CAP = 6 * 2 * 4096 + 1024 };
    char *tmp = malloc(CONFIG_CAP);
    if (!tmp)
        return -1;
    lg_json_t j;
    lg_json_init(&j, tmp, CONFIG_CAP);
    config_object(&j, NULL);
    size_t len = lg_json_finish(&j);
    int r = lg_report_copy_out(buf, cap, tmp, len);
    free(tmp);
    return r;
}

void lg_report_start(void)
{
    /* The interpreter, when this is a CPython process: whether its stacks will be read. Asked
     * before the lock: the first answer looks symbols up (dlsym takes the loader's lock). */
    lg_py_info_t py;
    lg_pystack_info(&py);
    pthread_mutex_lock(&lock);
    lg_json_t j;
    lg_json_init(&j, line_buf, sizeof(line_buf) - 1);
    header(&j, "start");
    lg_json_string(&j, "version", LG_VERSION);
    config_object(&j, "config");
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
    lg_json_string(&j, "hooks_reason", env.has_hooks_reason ? env.hooks_reason : NULL);
    lg_json_string(&j, "backend", env.has_backend ? env.backend : NULL);
    lg_json_string(&j, "validator", env.has_validator ? env.validator : NULL);
    lg_json_string(&j, "compiled", env.has_compiled ? env.compiled : NULL);
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
    if (py.python) {
        lg_json_begin_object(&j, "python");
        lg_json_string(&j, "version", py.version);
        lg_json_bool(&j, "free_threaded", py.free_threaded);
        lg_json_bool(&j, "stacks", py.stacks);
        lg_json_string(&j, "why", py.why);
        lg_json_end_object(&j);
    } else
        lg_json_null(&j, "python");
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
    lg_json_uint(&j, "unchecked", c->unchecked);
    lg_json_uint(&j, "host_fallbacks", c->host_fallbacks);
    lg_json_uint(&j, "suppressed_duplicates", c->suppressed_duplicates);
    finish_and_emit(&j, true);
    if (!lg_config_values.quiet && c->violations > 0) {
        char msg[4600];
        int n = snprintf(msg, sizeof(msg),
                         "labelguard: %" PRIu64 " launch%s with bad labels out of %" PRIu64 " watched; log: %s\n",
                         c->violations, c->violations == 1 ? "" : "es", c->watched, lg_log_path());
        lg_log_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
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

/* kernel: the kernel a warning is about (a `kernel` field), or NULL. */
static void warning(const char *what, const char *kernel, const char *detail, bool once, bool to_stderr)
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
    if (kernel)
        lg_json_string(&j, "kernel", kernel);
    lg_json_string(&j, "detail", detail ? detail : "");
    finish_and_emit(&j, false);
    if (to_stderr && !lg_config_values.quiet && seen <= WARN_REPEAT_CAP) {
        char msg[2048], sw[128], sd[1536];
        int n;
        lg_text_safe(what, sw, sizeof(sw));
        if (seen < WARN_REPEAT_CAP)
            n = snprintf(msg, sizeof(msg), "labelguard: warning: %s: %s\n", sw,
                         lg_text_safe(detail ? detail : "", sd, sizeof(sd)));
        else
            n = snprintf(msg, sizeof(msg),
                         "labelguard: warning: %s: further warnings of this kind go to the log only\n", sw);
        lg_log_stderr(msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1));
    }
    pthread_mutex_unlock(&lock);
}

void lg_report_warning(const char *what, const char *detail) { warning(what, NULL, detail, false, true); }
void lg_report_warning_once(const char *what, const char *detail) { warning(what, NULL, detail, true, true); }
void lg_report_warning_kernel(const char *what, const char *kernel, const char *detail)
{
    warning(what, kernel ? kernel : "", detail, false, true);
}
/* For conditions that change nothing the user must act on (CUPTI missing while interposition
 * covers the launches): the log records them, the terminal stays quiet. */
void lg_report_note_once(const char *what, const char *detail) { warning(what, NULL, detail, true, false); }

const char *lg_report_log_path(void) { return lg_log_path(); }

void lg_report_after_fork_child(void)
{
    /* Another thread of the parent may have held the lock at fork time: start from a fresh one. */
    pthread_mutex_init(&lock, NULL);
    lg_log_after_fork_child();
    n_warn_kinds = 0;
}
