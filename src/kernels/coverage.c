/* coverage.c: which built-in spec covers each loss kernel of a PyTorch build's kernel table,
 * or which known gap it is: the verdict of `labelguard audit` and doctor's kernels line.
 *
 * A table (tests/wheels/<version>+cu<NNN>.tsv, written by python/labelguard/torch_audit.py
 * from a wheel's cubins, shipped as labelguard/data/wheels/) lists each loss and gather-style
 * kernel with its parameter sizes. judge() asks the library's own registry, through the same
 * lg_registry_find a launch uses, which spec fits a row; a row no spec can cover must be in
 * known-gaps.tsv ("match<TAB>reason"). So the answer is the guard's matching, never a second
 * implementation in Python.
 *
 * Callers: labelguard_coverage() (include/labelguard.h), which python/labelguard/_coverage.py
 * calls through ctypes in a child process of the audit; tests/unit/test_wheels.c, which judges
 * every committed table with these functions and whose --coverage mode is a thin caller of
 * labelguard_coverage. Report path only: nothing here runs on a launch, starts CUDA or keeps
 * state; the registry is only read (lg_registry_ensure builds it once per process).
 *
 * Tested by tests/unit/test_wheels.c (every committed table; a changed parameter size is
 * named) and tests/cli/test_audit.sh (the audit through the library, from a copy of the
 * package outside the checkout; under SANITIZER=address with leak checking).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "kernels/kernels.h"
#include "labelguard.h" /* declares labelguard_coverage: checked against the definition */

#define MAX_ROWS  4096
#define TABLE_MAX (64 << 20) /* bytes; a table is a few hundred KiB */

bool lg_coverage_is_loss(const char *family)
{
    return !strcmp(family, "nll_loss") || !strcmp(family, "nll_loss2d") || !strcmp(family, "cross_entropy") ||
           !strcmp(family, "multi_margin_loss") || !strcmp(family, "multilabel_margin_loss");
}

bool lg_coverage_is_index(const char *family)
{
    if (!strcmp(family, "index_add"))
        return true;
    return !strcmp(family, "index_select") || !strcmp(family, "gather") || !strcmp(family, "scatter_gather") ||
           !strcmp(family, "embedding") || !strcmp(family, "embedding_bag") || !strcmp(family, "index_elementwise");
}

/* The registry's match rule (every ';'-separated part occurs); registry.c keeps its own copy
 * static, so the "exactly one spec" count re-implements it here and the answer itself comes
 * from lg_registry_find. */
static bool all_parts(const char *match, const char *symbol)
{
    gchar **parts = g_strsplit(match, ";", -1);
    bool ok = true;
    for (gchar **p = parts; ok && *p; p++)
        ok = **p && strstr(symbol, *p);
    g_strfreev(parts);
    return ok;
}

static int col(gchar **cols, const char *name)
{
    for (int i = 0; cols[i]; i++)
        if (!strcmp(cols[i], name))
            return i;
    return -1;
}

/* A whole text file into *text (g_free). Only a regular file of at most TABLE_MAX bytes: the
 * path comes from a user, and a FIFO or /dev/zero must not hang or grow the caller. Returns
 * false with err (g_free) set, and *missing when the file does not exist. */
static bool read_text(const char *path, gchar **text, char **err, bool *missing)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    *missing = fd < 0 && errno == ENOENT;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *err = g_strdup_printf("%s: %s", path, g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    close(fd);
    if (!S_ISREG(st.st_mode) || st.st_size > TABLE_MAX) {
        *err = g_strdup_printf("%s: %s", path, S_ISREG(st.st_mode) ? "larger than 64 MiB: not a kernel table"
                                                                      : "not a regular file");
        return false;
    }
    GError *e = NULL;
    if (!g_file_get_contents(path, text, NULL, &e)) {
        *err = g_strdup_printf("%s: %s", path, e->message);
        g_clear_error(&e);
        return false;
    }
    return true;
}

bool lg_coverage_table_load(const char *path, lg_coverage_table_t *t, char **err)
{
    memset(t, 0, sizeof *t);
    t->path = g_strdup(path);
    t->name = g_path_get_basename(path);
    gchar *text = NULL;
    bool missing;
    if (!read_text(path, &text, err, &missing))
        return false;
    gchar **lines = g_strsplit(text, "\n", -1);
    g_free(text);
    int c_sym = -1, c_fam = -1, c_sizes = -1, c_lib = -1, ncols = 0;
    t->rows = g_new0(lg_coverage_row_t, MAX_ROWS);
    bool ok = true;
    for (int i = 0; ok && lines[i]; i++) {
        char *l = lines[i];
        if (!*l)
            continue;
        if (l[0] == '#') {
            if (g_str_has_prefix(l, "# build: ")) {
                g_free(t->build); /* the last header counts */
                t->build = g_strdup(g_strstrip(l + 9));
            }
            continue;
        }
        gchar **cols = g_strsplit(l, "\t", -1);
        if (c_sym < 0) { /* the header line */
            c_sym = col(cols, "symbol");
            c_fam = col(cols, "family");
            c_sizes = col(cols, "param_sizes");
            c_lib = col(cols, "lib");
            ncols = (int)g_strv_length(cols);
            if (c_sym < 0 || c_fam < 0 || c_sizes < 0) {
                *err = g_strdup_printf("%s:%d: header line lacks symbol, family or param_sizes", path, i + 1);
                ok = false;
            }
        } else if ((int)g_strv_length(cols) != ncols) {
            *err = g_strdup_printf("%s:%d: %u columns, the header has %d", path, i + 1, g_strv_length(cols), ncols);
            ok = false;
        } else if (t->n_rows == MAX_ROWS) {
            *err = g_strdup_printf("%s:%d: more than %d rows", path, i + 1, MAX_ROWS);
            ok = false;
        } else {
            lg_coverage_row_t *r = &t->rows[t->n_rows++];
            r->family = g_strdup(cols[c_fam]);
            r->symbol = g_strdup(cols[c_sym]);
            r->lib = g_strdup(c_lib >= 0 ? cols[c_lib] : "");
            r->line = i + 1;
            gchar **sz = g_strsplit(cols[c_sizes], ",", -1);
            int n = *cols[c_sizes] ? (int)g_strv_length(sz) : 0;
            r->n = n > LG_MAX_PARAMS ? -1 : n;
            for (int k = 0; k < n && k < LG_MAX_PARAMS; k++) {
                char *end;
                long v = strtol(sz[k], &end, 10);
                if (end == sz[k] || *end || v <= 0) {
                    *err = g_strdup_printf("%s:%d: param_sizes \"%s\": not a list of sizes", path, i + 1, cols[c_sizes]);
                    ok = false;
                    break;
                }
                r->sizes[k] = (size_t)v;
            }
            g_strfreev(sz);
        }
        g_strfreev(cols);
    }
    g_strfreev(lines);
    if (ok && c_sym < 0) {
        *err = g_strdup_printf("%s: no header line", path);
        ok = false;
    }
    if (ok && !t->build)
        t->build = g_strndup(t->name, strlen(t->name) - (g_str_has_suffix(t->name, ".tsv") ? 4 : 0));
    return ok;
}

void lg_coverage_table_free(lg_coverage_table_t *t)
{
    for (int i = 0; t->rows && i < t->n_rows; i++) {
        g_free(t->rows[i].family);
        g_free(t->rows[i].symbol);
        g_free(t->rows[i].lib);
    }
    g_free(t->rows);
    g_free(t->path);
    g_free(t->name);
    g_free(t->build);
    memset(t, 0, sizeof *t);
}

int lg_coverage_gaps_load(const char *path, lg_coverage_gap_t **out, char **err)
{
    *out = g_new0(lg_coverage_gap_t, 1);
    gchar *text = NULL;
    bool missing;
    if (!read_text(path, &text, err, &missing)) {
        if (!missing)
            return -1;
        g_free(*err); /* no file: no gaps accepted */
        *err = NULL;
        return 0;
    }
    gchar **lines = g_strsplit(text, "\n", -1);
    g_free(text);
    int n = 0;
    for (int i = 0; lines[i]; i++) {
        if (!*lines[i] || lines[i][0] == '#')
            continue;
        gchar **f = g_strsplit(lines[i], "\t", 2);
        if (!f[0] || !*f[0] || !f[1] || !*g_strstrip(f[1])) {
            *err = g_strdup_printf("%s:%d: expected \"match<TAB>reason\"", path, i + 1);
            g_strfreev(f);
            g_strfreev(lines);
            return -1;
        }
        *out = g_renew(lg_coverage_gap_t, *out, n + 2);
        (*out)[n] = (lg_coverage_gap_t){g_strdup(f[0]), g_strdup(f[1]), 0};
        memset(&(*out)[n + 1], 0, sizeof **out);
        n++;
        g_strfreev(f);
    }
    g_strfreev(lines);
    return n;
}

void lg_coverage_gaps_free(lg_coverage_gap_t *g)
{
    for (lg_coverage_gap_t *p = g; p && p->match; p++) {
        g_free(p->match);
        g_free(p->reason);
    }
    g_free(g);
}

lg_coverage_verdict_t lg_coverage_judge(const lg_coverage_table_t *t, const lg_coverage_row_t *r,
                                        lg_coverage_gap_t *gaps, const lg_spec_t **spec, lg_coverage_gap_t **gap,
                                        char **msg)
{
    char kname[160];
    lg_demangle_short(r->symbol, kname, sizeof kname);
    *spec = NULL;
    *gap = NULL;
    *msg = NULL;
    for (lg_coverage_gap_t *g = gaps; g && g->match; g++)
        if (all_parts(g->match, r->symbol)) {
            *gap = g;
            break;
        }
    char why[2048];
    const lg_spec_t *s = r->n >= 0 ? lg_registry_find(r->symbol, r->sizes, r->n, why, sizeof why) : NULL;
    int fitting = 0;
    GString *names = g_string_new(NULL);
    for (int i = 0; i < lg_registry_count(); i++) {
        const lg_spec_t *c = lg_registry_get(i);
        if (r->n >= 0 && all_parts(c->match, r->symbol) && lg_registry_layout_ok(c, r->symbol, r->sizes, r->n, NULL, 0)) {
            fitting++;
            g_string_append_printf(names, " [%s]", c->name);
        }
    }
    if (s && fitting == 1) {
        g_string_free(names, TRUE);
        *spec = s;
        if (*gap) {
            *msg = g_strdup_printf("%s:%d: %s (%s): listed in known-gaps.tsv (\"%s\") but covered by [%s]: remove the "
                                   "gap", t->name, r->line, kname, r->symbol, (*gap)->match, s->name);
            return LG_COVERAGE_STALE_GAP;
        }
        return LG_COVERAGE_COVERED;
    }
    if (fitting > 1) {
        *msg = g_strdup_printf("%s:%d: %s (%s): %d specs fit (%s ), a launch could not tell them apart", t->name, r->line,
                               kname, r->symbol, fitting, names->str);
        g_string_free(names, TRUE);
        return LG_COVERAGE_AMBIGUOUS;
    }
    g_string_free(names, TRUE);
    if (*gap)
        return LG_COVERAGE_GAP;
    /* The closest spec by name: the first that matches; show where its layout departs. */
    GString *m = g_string_new(NULL);
    g_string_append_printf(m, "%s:%d: %s (%s): ", t->name, r->line, kname, r->symbol);
    bool any = false;
    for (int i = 0; i < lg_registry_count(); i++) {
        const lg_spec_t *c = lg_registry_get(i);
        if (!all_parts(c->match, r->symbol))
            continue;
        any = true;
        int k = 0;
        while (k < c->n_params && k < r->n && (size_t)c->param_sizes[k] == r->sizes[k])
            k++;
        if (k < c->n_params && k < r->n)
            g_string_append_printf(m, "[%s] differs first at parameter %d: the spec says %d bytes, the wheel has %zu; ",
                                   c->name, k, c->param_sizes[k], r->sizes[k]);
        else
            g_string_append_printf(m, "[%s] has %d parameters, the wheel's kernel %d (first %d agree); ", c->name,
                                   c->n_params, r->n, k);
    }
    if (!any)
        g_string_append(m, "no spec's match names this kernel; ");
    g_string_append(m, "add or fix the spec in specs/pytorch.conf, or list it in tests/wheels/known-gaps.tsv with a reason");
    *msg = g_string_free(m, FALSE);
    return LG_COVERAGE_UNCOVERED;
}

/* Writes all of buf, retrying short writes and EINTR. Returns false with errno set. */
static bool write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        buf += w;
        len -= (size_t)w;
    }
    return true;
}

/* "labelguard: MSG" on stderr, the one line a command shows for status 2. */
static int fail(const char *msg)
{
    char *line = g_strdup_printf("labelguard: %s\n", msg);
    (void)write_all(2, line, strlen(line));
    g_free(line);
    return 2;
}

int lg_coverage_report(const char *table_path, const char *known_gaps_path, bool quiet, int out_fd)
{
    if (!table_path)
        return fail("coverage: no table given");
    char *err = NULL;
    lg_coverage_gap_t *gaps = NULL;
    if (known_gaps_path && lg_coverage_gaps_load(known_gaps_path, &gaps, &err) < 0) {
        int rc = fail(err);
        g_free(err);
        lg_coverage_gaps_free(gaps);
        return rc;
    }
    lg_coverage_table_t t;
    if (!lg_coverage_table_load(table_path, &t, &err)) {
        int rc = fail(err);
        g_free(err);
        lg_coverage_table_free(&t);
        lg_coverage_gaps_free(gaps);
        return rc;
    }
    /* The whole report is formatted first and written at once: a failed write is then one
     * error, not a half report. */
    GString *out = g_string_new(NULL);
    int loss = 0, covered = 0, gapped = 0, bad = 0;
    for (int k = 0; k < t.n_rows; k++) {
        const lg_coverage_row_t *r = &t.rows[k];
        if (!lg_coverage_is_loss(r->family))
            continue;
        loss++;
        const lg_spec_t *s;
        lg_coverage_gap_t *g;
        char *msg;
        char kname[160];
        lg_demangle_short(r->symbol, kname, sizeof kname);
        switch (lg_coverage_judge(&t, r, gaps, &s, &g, &msg)) {
        case LG_COVERAGE_COVERED:
            covered++;
            if (!quiet)
                g_string_append_printf(out, "covered\t%s\t[%s]\t%s\n", kname, s->name, r->symbol);
            break;
        case LG_COVERAGE_GAP:
            gapped++;
            if (!quiet)
                g_string_append_printf(out, "known gap\t%s\t%s\t%s\n", kname, g->reason, r->symbol);
            break;
        default:
            bad++;
            if (!quiet)
                g_string_append_printf(out, "NOT covered\t%s\t%s\t%s\n", kname, msg, r->symbol);
        }
        g_free(msg);
    }
    g_string_append_printf(out, "torch %s: %d loss kernels, %d covered", t.build, loss, covered);
    if (gapped)
        g_string_append_printf(out, ", %d known gaps", gapped);
    if (bad)
        g_string_append_printf(out, ", %d NOT covered", bad);
    g_string_append_c(out, '\n');
    int rc = bad ? 1 : 0;
    if (!write_all(out_fd, out->str, out->len)) {
        char *m = g_strdup_printf("coverage: cannot write the report to fd %d: %s", out_fd, g_strerror(errno));
        rc = fail(m);
        g_free(m);
    }
    g_string_free(out, TRUE);
    lg_coverage_table_free(&t);
    lg_coverage_gaps_free(gaps);
    return rc;
}

/* A malformed or conflicting LABELGUARD_KERNELS file, when the report builds the registry:
 * said on stderr, not through the event log (a report run must not create labelguard-logs/). */
static void warn_stderr(const char *what, const char *detail)
{
    char *line = g_strdup_printf("labelguard: warning: %s: %s\n", what, detail);
    (void)write_all(2, line, strlen(line));
    g_free(line);
}

LG_EXPORT int labelguard_coverage(const char *table_path, const char *known_gaps_path, int quiet, int out_fd)
{
    lg_registry_ensure(warn_stderr);
    return lg_coverage_report(table_path, known_gaps_path, quiet != 0, out_fd);
}
