/* test_wheels.c: the built-in spec table (specs/pytorch.conf) against the kernels of real
 * PyTorch wheels. Every table tests/wheels/<version>+cu<NNN>.tsv was read out of a wheel's
 * cubins by python/labelguard/torch_audit.py (parameter sizes from EIATTR_KPARAM_INFO); this test checks
 * that every loss-kernel row (family nll_loss, nll_loss2d, cross_entropy) and every gather-style
 * row (index_select, gather, scatter_gather, embedding, embedding_bag) is matched by exactly
 * one built-in spec whose name and layout (count and sizes) fit, through the same
 * lg_registry_find the library uses at a launch (an index row by a target_kind=ids spec; a
 * binary_cross_entropy forward row, whose kernel asserts its probabilities lie in [0, 1], by a
 * target_kind=range spec: the backward asserts nothing and stays recorded only). A row no spec can cover must be listed in
 * tests/wheels/known-gaps.tsv with a reason; a listed gap that no row needs, or that a spec
 * covers after all, fails too, so the list cannot go stale. A failure names the wheel, the
 * kernel and the first differing parameter.
 *
 * The tables are found under $LG_ROOT/tests/wheels (tests/run.sh exports LG_ROOT, the repo
 * root), else ./tests/wheels relative to the working directory.
 *
 * The reading and judging are the library's (src/kernels/coverage.c), which `labelguard audit` and
 * doctor call through labelguard_coverage. This binary's
 *     test_wheels --coverage TABLE.tsv [--known-gaps FILE] [--quiet]
 * is a thin caller of that function (output and exit status as include/labelguard.h says;
 * LABELGUARD_KERNELS user spec files count), kept for $LG_SPECMATCH and sanitizer runs.
 *
 * Run: make build/tests/unit/test_wheels && LG_TESTS=unit/test_wheels bash tests/run.sh
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"
#include "labelguard.h"

#define MIN_TABLES 10

static const char *env_get(const char *name) { return getenv(name); }

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
    lg_coverage_gap_t *gaps = NULL;
    if (lg_coverage_gaps_load(gpath, &gaps, &err) < 0)
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
        lg_coverage_table_t t;
        if (!lg_coverage_table_load(path, &t, &err))
            g_error("%s", err);
        cu12 += strstr(name, "+cu12") != NULL;
        cu13 += strstr(name, "+cu13") != NULL;
        int loss = 0, covered = 0, gapped = 0, index = 0, icovered = 0, igapped = 0, range = 0, rcovered = 0;
        for (int k = 0; k < t.n_rows; k++) {
            lg_coverage_row_t *r = &t.rows[k];
            bool ix = lg_coverage_is_index(r->family);
            /* BCE's forward asserts its probabilities are in [0, 1] (target_kind=range specs);
             * its backward asserts nothing, and stays recorded only */
            bool rg = !strcmp(r->family, "binary_cross_entropy") && strstr(r->symbol, "29binary_cross_entropy_out_cudaE");
            if (rg) {
                range++;
                const lg_spec_t *s;
                lg_coverage_gap_t *g;
                char *msg;
                lg_coverage_verdict_t cv = lg_coverage_judge(&t, r, gaps, &s, &g, &msg);
                if (cv == LG_COVERAGE_COVERED && !s->range && failures++ < 20)
                    g_string_append_printf(fail, "  %s:%d: BCE row covered by [%s], not a target_kind=range spec\n",
                                           t.name, r->line, s->name);
                rcovered += cv == LG_COVERAGE_COVERED;
                if (cv == LG_COVERAGE_GAP)
                    g->used++;
                else if (cv != LG_COVERAGE_COVERED && failures++ < 20)
                    g_string_append_printf(fail, "  %s\n", msg);
                g_free(msg);
                continue;
            }
            if (!lg_coverage_is_loss(r->family) && !ix)
                continue;
            (ix ? &index : &loss)[0]++;
            const lg_spec_t *s;
            lg_coverage_gap_t *g;
            char *msg;
            switch (lg_coverage_judge(&t, r, gaps, &s, &g, &msg)) {
            case LG_COVERAGE_COVERED:
                (ix ? &icovered : &covered)[0]++;
                if (s->ids != ix) { /* a loss spec on an index row, or the reverse */
                    if (failures++ < 20)
                        g_string_append_printf(fail, "  %s:%d: %s row covered by [%s], a %s spec\n", t.name, r->line,
                                               r->family, s->name, s->ids ? "target_kind=ids" : "label");
                }
                break;
            case LG_COVERAGE_GAP:
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
                       "gaps; %d BCE forward kernels, %d covered",
                       t.build, loss, covered, gapped, index, icovered, igapped, range, rcovered);
        if (range > 0 && rcovered == 0) {
            g_string_append_printf(fail, "  %s: no BCE forward kernel covered: the range specs do not match\n", name);
            failures++;
        }
        if (loss == 0 || icovered == 0) {
            g_string_append_printf(fail, "  %s: no %s kernel at all: the table or its reader is broken\n", name,
                                   loss == 0 ? "loss" : "covered index");
            failures++;
        }
        lg_coverage_table_free(&t);
        g_free(path);
    }
    for (lg_coverage_gap_t *g = gaps; g && g->match; g++)
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
    lg_coverage_gaps_free(gaps);
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
        lg_coverage_table_t t;
        char *err = NULL;
        if (!lg_coverage_table_load(path, &t, &err))
            g_error("%s", err);
        int declined = 0;
        for (int k = 0; k < t.n_rows; k++) {
            lg_coverage_row_t *r = &t.rows[k];
            if ((!lg_coverage_is_loss(r->family) && !lg_coverage_is_index(r->family)) || r->n < 0)
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
        lg_coverage_table_free(&t);
        g_free(path);
    }
    g_dir_close(d);
    if (fail->len)
        g_error("mangled-signature sizes disagree with the wheels' cubins:\n%s", fail->str);
    g_string_free(fail, TRUE);
    g_free(dir);
    g_free(root);
}

/* A table the registry cannot cover makes lg_coverage_judge() fail and name the first differing
 * parameter: the check above can fail. */
static void test_detects_mismatch(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), >, 0);
    lg_coverage_table_t t = {.name = "synthetic+cu000.tsv"};
    lg_coverage_row_t r = {.family = "nll_loss", .n = 10, .line = 7,
               .symbol = "_ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv38nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S3_PKS2_PKT1_S5_blllll",
               .sizes = {8, 8, 8, 8, 8, 1, 8, 8, 4, 8}};
    const lg_spec_t *s;
    lg_coverage_gap_t *g;
    char *msg;
    g_assert_cmpint(lg_coverage_judge(&t, &r, NULL, &s, &g, &msg), ==, LG_COVERAGE_UNCOVERED);
    g_assert_nonnull(strstr(msg, "synthetic+cu000.tsv:7: nll_loss_forward_reduce_cuda_kernel_2d"));
    g_assert_nonnull(strstr(msg, "[nll_loss_forward_reduce_cuda_kernel_2d] differs first at parameter 8: the spec says "
                                 "8 bytes, the wheel has 4"));
    g_free(msg);
    r.sizes[8] = 8;
    g_assert_cmpint(lg_coverage_judge(&t, &r, NULL, &s, &g, &msg), ==, LG_COVERAGE_COVERED);
    g_assert_cmpstr(s->name, ==, "nll_loss_forward_reduce_cuda_kernel_2d");
    lg_coverage_gap_t stale[2] = {{"38nll_loss_forward_reduce_cuda_kernel_2dI", "test", 0}, {0}};
    g_assert_cmpint(lg_coverage_judge(&t, &r, stale, &s, &g, &msg), ==, LG_COVERAGE_STALE_GAP);
    g_free(msg);
}

/* ---- --coverage mode: labelguard_coverage, as the library runs it ---------------------- */

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
        /* The configuration as the library's constructor reads it (LABELGUARD_KERNELS counts):
         * labelguard_coverage builds the registry from it, problems of a user file on stderr. */
        char err[1024];
        if (lg_config_parse(&lg_config_values, env_get, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        return labelguard_coverage(argv[2], gpath, quiet, 1);
    }
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/wheels/detects-mismatch", test_detects_mismatch);
    g_test_add_func("/wheels/tables", test_tables);
    g_test_add_func("/wheels/mangled-sizes", test_mangled_sizes);
    return g_test_run();
}
