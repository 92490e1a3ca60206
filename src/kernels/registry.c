/* registry.c: the table of kernels labelguard watches, and how to find the entry for a launch.
 *
 * Specs are data: one GKeyFile group per kernel layout, in the format of specs/pytorch.conf
 * (documented there). The built-in table is that file, embedded into the library by the
 * Makefile (symbols lg_builtin_specs .. lg_builtin_specs_end); LABELGUARD_KERNELS adds user
 * files in the same format. A malformed user file is skipped as a whole with a message that
 * names file, line, group and field; the built-in table always stays.
 *
 * One kernel name may have several specs (PyTorch ≥1.13, 1.10–1.12 and THCUNN layouts):
 * lg_registry_find picks the spec whose parameter count and sizes fit the kernel, as reported
 * by the runtime or read from the mangled signature, and never returns a spec it could not
 * check.
 *
 * The parser is spec.c. Callers: the table is built once per process (lg_registry_ensure,
 * under build_lock, which a fork waits for: lg.c's start, or a coverage report, coverage.c,
 * whichever comes first); classify.c calls lg_registry_maybe_watched, then lg_registry_find, once per
 * kernel handle and caches the answer, so nothing here is on the fast path. After init the
 * table is read-only, so lookups need no lock.
 *
 * Tested by tests/unit/test_registry.c (parser errors, every built-in spec, version
 * selection) and tests/fuzz/fuzz_spec.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "kernels/kernels.h"

#define REGISTRY_MAX  256
#define SPEC_FILE_MAX (1 << 20) /* bytes; a spec file is a few KiB */

extern const char lg_builtin_specs[] LG_HIDDEN;
extern const char lg_builtin_specs_end[] LG_HIDDEN;

static lg_spec_t table[REGISTRY_MAX];
static int table_n;

/* Reads a spec file into a g_malloc'd, NUL-terminated buffer. Only a regular file is read,
 * opened O_NONBLOCK and capped at SPEC_FILE_MAX: LABELGUARD_KERNELS runs at the job's first
 * launch, and /dev/zero, a FIFO with no writer or a terminal would otherwise hang the training
 * process or grow it without bound. Returns the length, or -1 with err set. */
static ssize_t read_spec_file(const char *path, char **out, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        lg_spec_text_error(err, err_len, "%s:0: file: cannot read: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        lg_spec_text_error(err, err_len, "%s:0: file: not a regular file (a spec file is a text file of [groups])",
                           path);
        close(fd);
        return -1;
    }
    if (st.st_size > SPEC_FILE_MAX) {
        lg_spec_text_error(err, err_len, "%s:0: file: %lld bytes, larger than %d: not a spec file?", path,
                           (long long)st.st_size, SPEC_FILE_MAX);
        close(fd);
        return -1;
    }
    /* One byte more than the cap, so that a file growing while it is read is still refused. */
    char *text = g_malloc((size_t)SPEC_FILE_MAX + 2);
    size_t len = 0;
    while (len <= SPEC_FILE_MAX) {
        ssize_t r = read(fd, text + len, (size_t)SPEC_FILE_MAX + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            lg_spec_text_error(err, err_len, "%s:0: file: cannot read: %s", path, strerror(errno));
            close(fd);
            g_free(text);
            return -1;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (len > SPEC_FILE_MAX) {
        lg_spec_text_error(err, err_len, "%s:0: file: larger than %d bytes: not a spec file?", path, SPEC_FILE_MAX);
        g_free(text);
        return -1;
    }
    text[len] = 0;
    *out = text;
    return (ssize_t)len;
}

/* Adds specs parsed from one file, unless one conflicts with the table. */
static int add_file(const char *path, char *err, size_t err_len)
{
    char *text = NULL;
    ssize_t got = read_spec_file(path, &text, err, err_len);
    if (got < 0)
        return -1;
    size_t len = (size_t)got;
    static lg_spec_t tmp[REGISTRY_MAX];
    int n = lg_spec_parse(text, len, path, tmp, REGISTRY_MAX - table_n, err, err_len);
    g_free(text);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < table_n; j++) {
            if (strcmp(table[j].name, tmp[i].name) == 0) {
                lg_spec_text_error(err, err_len,
                                   "%s: [%s]: kernel spec name already defined by %s; choose another name",
                                   tmp[i].source, tmp[i].name, table[j].source);
                return -1;
            }
        }
        const lg_spec_t *o = lg_spec_conflict(&tmp[i], table, table_n);
        if (o) {
            lg_spec_text_error(err, err_len,
                               "%s: [%s] match: conflicts with [%s] from %s (same match and parameter layout)",
                               tmp[i].source, tmp[i].name, o->name, o->source);
            return -1;
        }
    }
    memcpy(&table[table_n], tmp, (size_t)n * sizeof *tmp);
    table_n += n;
    return n;
}

/* Knowledge of kernels reports nothing itself: the start hands report.c's warning in
 * (lg_registry_ensure); without one, as here, a bad file is skipped silently. */
int lg_registry_init(const char *user_files) { return lg_registry_init_with(user_files, NULL); }

int lg_registry_init_with(const char *user_files, lg_registry_warn_fn warn)
{
    char err[512];
    table_n = 0;
    int n = lg_spec_parse(lg_builtin_specs, (size_t)(lg_builtin_specs_end - lg_builtin_specs), "builtin", table,
                          REGISTRY_MAX, err, sizeof err);
    if (n < 0) {
        if (warn)
            warn("spec_file", err);
        n = 0;
    }
    table_n = n;
    if (!user_files || !*user_files)
        return table_n;
    char **files = g_strsplit(user_files, ":", -1);
    for (char **f = files; *f; f++) {
        if (!**f)
            continue;
        if (add_file(*f, err, sizeof err) < 0 && warn) {
            char msg[640];
            snprintf(msg, sizeof msg, "%s; file skipped, the built-in table stays", err);
            warn("spec_file", msg);
        }
    }
    g_strfreev(files);
    return table_n;
}

/* The table is built once per process, by whichever comes first, the start or a coverage
 * report (labelguard_coverage in a process that has not started), and is read-only after
 * that, so a report in a guarded process never rewrites the table a launch reads. A fork waits
 * for build_lock (lg.c's prepare handler), so a child never inherits a half-built table. */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;
static bool built;

void lg_registry_ensure(lg_registry_warn_fn warn)
{
    pthread_mutex_lock(&build_lock);
    lg_forkpoint(LG_FORKPOINT_REGISTRY);
    if (!built) {
        lg_registry_init_with(lg_config_values.kernels[0] ? lg_config_values.kernels : NULL, warn);
        built = true;
    }
    pthread_mutex_unlock(&build_lock);
}

void lg_registry_atfork_prepare(void) { pthread_mutex_lock(&build_lock); }
void lg_registry_atfork_parent(void) { pthread_mutex_unlock(&build_lock); }
void lg_registry_atfork_child(void) { pthread_mutex_init(&build_lock, NULL); }

/* Every ';'-separated part of the spec's match occurs in the mangled name. */
static bool name_matches(const lg_spec_t *s, const char *mangled)
{
    const char *p = s->match;
    char part[sizeof s->match];
    while (*p) {
        size_t n = strcspn(p, ";");
        memcpy(part, p, n);
        part[n] = 0;
        if (!strstr(mangled, part))
            return false;
        p += n;
        if (*p == ';')
            p++;
    }
    return true;
}

bool lg_registry_maybe_watched(const char *mangled) { return lg_registry_match(mangled) != NULL; }

const lg_spec_t *lg_registry_match(const char *mangled)
{
    if (!mangled)
        return NULL;
    for (int i = 0; i < table_n; i++)
        if (name_matches(&table[i], mangled))
            return &table[i];
    return NULL;
}

static void format_sizes(char *out, size_t len, const size_t *s, int n)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < n && o + 1 < len; i++) {
        int w = snprintf(out + o, len - o, "%s%zu", i ? "," : "", s[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

bool lg_registry_layout_ok(const lg_spec_t *spec, const char *mangled, const size_t *actual_sizes, int n_actual,
                           char *why, size_t why_len)
{
    size_t from_name[LG_MAX_PARAMS];
    const char *where = "runtime";
    if (n_actual < 0 || !actual_sizes) {
        n_actual = mangled ? lg_demangle_param_sizes(mangled, from_name, LG_MAX_PARAMS) : -1;
        actual_sizes = from_name;
        where = "mangled signature";
        if (n_actual < 0 && spec->unsized_ok)
            return true; /* layout_check=offset_calc: lg_decode checks the closure at each launch */
        if (n_actual < 0) {
            lg_spec_text_error(why, why_len,
                               "[%s]: the parameter sizes are unknown (no runtime information, signature not sizable)",
                               spec->name);
            return false;
        }
    }
    bool ok = n_actual == spec->n_params;
    for (int i = 0; ok && i < n_actual; i++)
        ok = actual_sizes[i] == (size_t)spec->param_sizes[i];
    if (!ok) {
        char have[160], want[160];
        size_t ws[LG_MAX_PARAMS];
        for (int i = 0; i < spec->n_params; i++)
            ws[i] = (size_t)spec->param_sizes[i];
        format_sizes(have, sizeof have, actual_sizes, n_actual);
        format_sizes(want, sizeof want, ws, spec->n_params);
        lg_spec_text_error(why, why_len, "[%s] expects parameter sizes %s, the kernel has %s (%s)", spec->name, want,
                           have, where);
    }
    return ok;
}

const lg_spec_t *lg_registry_find(const char *mangled, const size_t *actual_sizes, int n_actual, char *why,
                                  size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!mangled)
        return NULL;
    size_t used = 0;
    for (int i = 0; i < table_n; i++) {
        if (!name_matches(&table[i], mangled))
            continue;
        char one[384];
        if (lg_registry_layout_ok(&table[i], mangled, actual_sizes, n_actual, one, sizeof one)) {
            if (why && why_len)
                why[0] = 0;
            return &table[i];
        }
        /* collect every rejection: the warning shows all layouts that were tried */
        if (why && used + 3 < why_len) {
            int w = snprintf(why + used, why_len - used, "%s%s", used ? "; " : "", one);
            if (w > 0)
                used += (size_t)w < why_len - used ? (size_t)w : why_len - used - 1;
        }
    }
    return NULL;
}

int lg_registry_count(void) { return table_n; }

const lg_spec_t *lg_registry_get(int i) { return (i >= 0 && i < table_n) ? &table[i] : NULL; }
