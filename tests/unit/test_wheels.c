/* test_wheels.c: the built-in spec table (specs/pytorch.conf) against the kernels of real
 * PyTorch wheels. Every table tests/wheels/<version>+cu<NNN>.tsv was read out of a wheel's
 * cubins by python/labelguard/torch_audit.py (parameter sizes from EIATTR_KPARAM_INFO); this test checks
 * that every loss-kernel row (family nll_loss, nll_loss2d, cross_entropy) and every gather-style
 * row (index_select, gather, scatter_gather, embedding, embedding_bag) is matched by exactly
 * one built-in spec whose name and layout (count and sizes) fit, through the same
 * lg_registry_find the library uses at a launch (an index row by a target_kind=ids spec). A row no spec can cover must be listed in
 * tests/wheels/known-gaps.tsv with a reason; a listed gap that no row needs, or that a spec
 * covers after all, fails too, so the list cannot go stale. A failure names the wheel, the
 * kernel and the first differing parameter.
 *
 * The tables are found under $LG_ROOT/tests/wheels (tests/run.sh exports LG_ROOT, the repo
 * root), else ./tests/wheels relative to the working directory.
 *
 * The same binary is the coverage tool of `labelguard audit` and `labelguard doctor`, so that
 * their answer is the library's own matching and not a second implementation:
 *     test_wheels --coverage TABLE.tsv [--known-gaps FILE] [--quiet]
 * prints one line per loss kernel ("covered|known gap|NOT covered<TAB>kernel<TAB>spec or
 * reason<TAB>symbol") and a last line "torch <build>: N loss kernels, M covered[, G known
 * gaps][, U NOT covered]"; exit 0 when every loss kernel is covered or a known gap,
 * 1 otherwise, 2 on a bad table. LABELGUARD_KERNELS user spec files count in that mode.
 *
 * Run: make build/tests/unit/test_wheels && LG_TESTS=unit/test_wheels bash tests/run.sh
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_ROWS 4096
#define MIN_TABLES 10

typedef struct row {
    char *family, *symbol, *lib;
    size_t sizes[LG_MAX_PARAMS];
    int n;       /* parameter count; -1 when the row has more than LG_MAX_PARAMS */
    int line;
} row_t;

typedef struct table {
    char *path, *name; /* file path, file name (the wheel's build: 2.11.0+cu130.tsv) */
    char *build;       /* "# build:" header */
    row_t *rows;
    int n_rows;
} table_t;

typedef struct gap {
    char *match;  /* ';'-separated substrings of the mangled name, all must occur */
    char *reason;
    int used;
} gap_t;

static bool is_loss(const char *family)
{
    return !strcmp(family, "nll_loss") || !strcmp(family, "nll_loss2d") || !strcmp(family, "cross_entropy");
}

/* The gather-style kernels the index guard is about: each row is covered by one target_kind=ids
 * spec or is a known gap, exactly as the loss rows. */
static bool is_index(const char *family)
{
    return !strcmp(family, "index_select") || !strcmp(family, "gather") || !strcmp(family, "scatter_gather") ||
           !strcmp(family, "embedding") || !strcmp(family, "embedding_bag");
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

/* Reads one table; returns false with err set on a malformed file. Caller frees with
 * table_free. */
static bool table_load(const char *path, table_t *t, char **err)
{
    memset(t, 0, sizeof *t);
    t->path = g_strdup(path);
    t->name = g_path_get_basename(path);
    gchar *text = NULL;
    GError *e = NULL;
    if (!g_file_get_contents(path, &text, NULL, &e)) {
        *err = g_strdup_printf("%s: %s", path, e->message);
        g_clear_error(&e);
        return false;
    }
    gchar **lines = g_strsplit(text, "\n", -1);
    g_free(text);
    int c_sym = -1, c_fam = -1, c_sizes = -1, c_lib = -1, ncols = 0;
    t->rows = g_new0(row_t, MAX_ROWS);
    bool ok = true;
    for (int i = 0; ok && lines[i]; i++) {
        char *l = lines[i];
        if (!*l)
            continue;
        if (l[0] == '#') {
            if (g_str_has_prefix(l, "# build: "))
                t->build = g_strdup(g_strstrip(l + 9));
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
            row_t *r = &t->rows[t->n_rows++];
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

static void table_free(table_t *t)
{
    for (int i = 0; i < t->n_rows; i++) {
        g_free(t->rows[i].family);
        g_free(t->rows[i].symbol);
        g_free(t->rows[i].lib);
    }
    g_free(t->rows);
    g_free(t->path);
    g_free(t->name);
    g_free(t->build);
}

/* known-gaps.tsv: "match<TAB>reason" lines, # comments. Returns the count (the array is
 * NULL-terminated by a zero entry); -1 with err on a malformed line. */
static int gaps_load(const char *path, gap_t **out, char **err)
{
    gchar *text = NULL;
    *out = g_new0(gap_t, 1);
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0; /* no file: no gaps accepted */
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
        *out = g_renew(gap_t, *out, n + 2);
        (*out)[n] = (gap_t){g_strdup(f[0]), g_strdup(f[1]), 0};
        memset(&(*out)[n + 1], 0, sizeof(gap_t));
        n++;
        g_strfreev(f);
    }
    g_strfreev(lines);
    return n;
}

static void gaps_free(gap_t *g)
{
    for (gap_t *p = g; p && p->match; p++) {
        g_free(p->match);
        g_free(p->reason);
    }
    g_free(g);
}

typedef enum { V_COVERED, V_GAP, V_UNCOVERED, V_AMBIGUOUS, V_STALE_GAP } verdict_t;

/* Judges one loss row. spec/gap are set for V_COVERED/V_GAP; msg (g_free) explains the
 * others, naming the kernel and the first differing parameter. */
static verdict_t judge(const table_t *t, const row_t *r, gap_t *gaps, const lg_spec_t **spec, gap_t **gap, char **msg)
{
    char kname[160];
    lg_demangle_short(r->symbol, kname, sizeof kname);
    *spec = NULL;
    *gap = NULL;
    *msg = NULL;
    for (gap_t *g = gaps; g && g->match; g++)
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
            return V_STALE_GAP;
        }
        return V_COVERED;
    }
    if (fitting > 1) {
        *msg = g_strdup_printf("%s:%d: %s (%s): %d specs fit (%s ), a launch could not tell them apart", t->name, r->line,
                               kname, r->symbol, fitting, names->str);
        g_string_free(names, TRUE);
        return V_AMBIGUOUS;
    }
    g_string_free(names, TRUE);
    if (*gap)
        return V_GAP;
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
    return V_UNCOVERED;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *root_dir(void)
{
    const char *r = getenv("LG_ROOT");
    return g_strdup(r && *r ? r : ".");
}

/* ---- the test -------------------------------------------------------------------------- */

static void test_tables(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), >, 0);
    char *root = root_dir();
    char *dir = g_build_filename(root, "tests", "wheels", NULL);
    char *gpath = g_build_filename(dir, "known-gaps.tsv", NULL);
    char *err = NULL;
    gap_t *gaps = NULL;
    if (gaps_load(gpath, &gaps, &err) < 0)
        g_error("%s", err);
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        g_error("%s: no wheel tables (run from the repo root or set LG_ROOT)", dir);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (const char *n; (n = g_dir_read_name(d));)
        if (g_str_has_suffix(n, ".tsv") && strcmp(n, "known-gaps.tsv"))
            g_ptr_array_add(names, g_strdup(n));
    g_dir_close(d);
    g_ptr_array_sort(names, by_name);
    int cu12 = 0, cu13 = 0, failures = 0;
    GString *fail = g_string_new(NULL);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        char *path = g_build_filename(dir, name, NULL);
        table_t t;
        if (!table_load(path, &t, &err))
            g_error("%s", err);
        cu12 += strstr(name, "+cu12") != NULL;
        cu13 += strstr(name, "+cu13") != NULL;
        int loss = 0, covered = 0, gapped = 0, index = 0, icovered = 0, igapped = 0;
        for (int k = 0; k < t.n_rows; k++) {
            row_t *r = &t.rows[k];
            bool ix = is_index(r->family);
            if (!is_loss(r->family) && !ix)
                continue;
            (ix ? &index : &loss)[0]++;
            const lg_spec_t *s;
            gap_t *g;
            char *msg;
            switch (judge(&t, r, gaps, &s, &g, &msg)) {
            case V_COVERED:
                (ix ? &icovered : &covered)[0]++;
                if (s->ids != ix) { /* a loss spec on an index row, or the reverse */
                    if (failures++ < 20)
                        g_string_append_printf(fail, "  %s:%d: %s row covered by [%s], a %s spec\n", t.name, r->line,
                                               r->family, s->name, s->ids ? "target_kind=ids" : "label");
                }
                break;
            case V_GAP:
                (ix ? &igapped : &gapped)[0]++;
                g->used++;
                break;
            default:
                if (failures++ < 20)
                    g_string_append_printf(fail, "  %s\n", msg);
                g_free(msg);
            }
        }
        g_test_message("%s: %d loss kernels, %d covered, %d known gaps; %d gather-style kernels, %d covered, %d known "
                       "gaps", t.build, loss, covered, gapped, index, icovered, igapped);
        if (loss == 0 || icovered == 0) {
            g_string_append_printf(fail, "  %s: no %s kernel at all: the table or its reader is broken\n", name,
                                   loss == 0 ? "loss" : "covered index");
            failures++;
        }
        table_free(&t);
        g_free(path);
    }
    for (gap_t *g = gaps; g && g->match; g++)
        if (!g->used) {
            g_string_append_printf(fail, "  known-gaps.tsv: \"%s\" matches no uncovered row of any table: remove it\n",
                                   g->match);
            failures++;
        }
    if (failures)
        g_error("%d problem(s) with the wheel tables under %s:\n%s", failures, dir, fail->str);
    g_assert_cmpuint(names->len, >=, MIN_TABLES);
    g_assert_cmpint(cu12, >, 0);
    g_assert_cmpint(cu13, >, 0);
    g_string_free(fail, TRUE);
    g_ptr_array_free(names, TRUE);
    gaps_free(gaps);
    g_free(gpath);
    g_free(dir);
    g_free(root);
}

/* Without runtime parameter sizes (cudaFuncGetParamInfo unavailable) the library sizes a
 * kernel from its mangled signature. That path may decline (then the kernel is not decoded),
 * but it must never disagree with the cubin: a wrong size would let a spec decode the wrong
 * bytes. Declines are counted in the test log. */
static void test_mangled_sizes(void)
{
    char *root = root_dir();
    char *dir = g_build_filename(root, "tests", "wheels", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    GString *fail = g_string_new(NULL);
    for (const char *n; (n = g_dir_read_name(d));) {
        if (!g_str_has_suffix(n, ".tsv") || !strcmp(n, "known-gaps.tsv"))
            continue;
        char *path = g_build_filename(dir, n, NULL);
        table_t t;
        char *err = NULL;
        if (!table_load(path, &t, &err))
            g_error("%s", err);
        int declined = 0;
        for (int k = 0; k < t.n_rows; k++) {
            row_t *r = &t.rows[k];
            if ((!is_loss(r->family) && !is_index(r->family)) || r->n < 0)
                continue;
            size_t s[LG_MAX_PARAMS];
            int m = lg_demangle_param_sizes(r->symbol, s, LG_MAX_PARAMS);
            if (m < 0) {
                declined++;
                continue;
            }
            int i = 0;
            while (i < m && i < r->n && s[i] == r->sizes[i])
                i++;
            if (m != r->n || i < m)
                g_string_append_printf(fail, "  %s:%d: %s: the mangled signature gives %d parameters, the cubin %d; "
                                             "first difference at parameter %d\n", n, r->line, r->symbol, m, r->n, i);
        }
        if (declined)
            g_test_message("%s: the mangled signature cannot be sized for %d loss and gather-style kernels (runtime sizes needed)",
                           t.build, declined);
        table_free(&t);
        g_free(path);
    }
    g_dir_close(d);
    if (fail->len)
        g_error("mangled-signature sizes disagree with the wheels' cubins:\n%s", fail->str);
    g_string_free(fail, TRUE);
    g_free(dir);
    g_free(root);
}

/* A table the registry cannot cover makes judge() fail and name the first differing
 * parameter: the check above can fail. */
static void test_detects_mismatch(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), >, 0);
    table_t t = {.name = "synthetic+cu000.tsv"};
    row_t r = {.family = "nll_loss", .n = 10, .line = 7,
               .symbol = "_ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv38nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S3_PKS2_PKT1_S5_blllll",
               .sizes = {8, 8, 8, 8, 8, 1, 8, 8, 4, 8}};
    const lg_spec_t *s;
    gap_t *g;
    char *msg;
    g_assert_cmpint(judge(&t, &r, NULL, &s, &g, &msg), ==, V_UNCOVERED);
    g_assert_nonnull(strstr(msg, "synthetic+cu000.tsv:7: nll_loss_forward_reduce_cuda_kernel_2d"));
    g_assert_nonnull(strstr(msg, "[nll_loss_forward_reduce_cuda_kernel_2d] differs first at parameter 8: the spec says "
                                 "8 bytes, the wheel has 4"));
    g_free(msg);
    r.sizes[8] = 8;
    g_assert_cmpint(judge(&t, &r, NULL, &s, &g, &msg), ==, V_COVERED);
    g_assert_cmpstr(s->name, ==, "nll_loss_forward_reduce_cuda_kernel_2d");
    gap_t stale[2] = {{"38nll_loss_forward_reduce_cuda_kernel_2dI", "test", 0}, {0}};
    g_assert_cmpint(judge(&t, &r, stale, &s, &g, &msg), ==, V_STALE_GAP);
    g_free(msg);
}

/* ---- --coverage mode (labelguard audit / doctor) ---------------------------------------- */

static int coverage(const char *path, const char *gpath, bool quiet)
{
    lg_registry_init_with(getenv("LABELGUARD_KERNELS"), NULL);
    char *err = NULL;
    gap_t *gaps = NULL;
    if (gpath && gaps_load(gpath, &gaps, &err) < 0) {
        fprintf(stderr, "labelguard: %s\n", err);
        return 2;
    }
    table_t t;
    if (!table_load(path, &t, &err)) {
        fprintf(stderr, "labelguard: %s\n", err);
        return 2;
    }
    int loss = 0, covered = 0, gapped = 0, bad = 0;
    for (int k = 0; k < t.n_rows; k++) {
        row_t *r = &t.rows[k];
        if (!is_loss(r->family))
            continue;
        loss++;
        const lg_spec_t *s;
        gap_t *g;
        char *msg;
        char kname[160];
        lg_demangle_short(r->symbol, kname, sizeof kname);
        switch (judge(&t, r, gaps, &s, &g, &msg)) {
        case V_COVERED:
            covered++;
            if (!quiet)
                printf("covered\t%s\t[%s]\t%s\n", kname, s->name, r->symbol);
            break;
        case V_GAP:
            gapped++;
            if (!quiet)
                printf("known gap\t%s\t%s\t%s\n", kname, g->reason, r->symbol);
            break;
        default:
            bad++;
            if (!quiet)
                printf("NOT covered\t%s\t%s\t%s\n", kname, msg, r->symbol);
            g_free(msg);
        }
    }
    printf("torch %s: %d loss kernels, %d covered", t.build, loss, covered);
    if (gapped)
        printf(", %d known gaps", gapped);
    if (bad)
        printf(", %d NOT covered", bad);
    printf("\n");
    table_free(&t);
    gaps_free(gaps);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--coverage")) {
        const char *gpath = NULL;
        bool quiet = false;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--known-gaps") && i + 1 < argc)
                gpath = argv[++i];
            else if (!strcmp(argv[i], "--quiet"))
                quiet = true;
            else {
                fprintf(stderr, "usage: %s --coverage TABLE.tsv [--known-gaps FILE] [--quiet]\n", argv[0]);
                return 2;
            }
        }
        return coverage(argv[2], gpath, quiet);
    }
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/wheels/detects-mismatch", test_detects_mismatch);
    g_test_add_func("/wheels/tables", test_tables);
    g_test_add_func("/wheels/mangled-sizes", test_mangled_sizes);
    return g_test_run();
}
