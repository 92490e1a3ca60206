/* test_graphs.c: unit tests of src/graphs.c's bookkeeping, without the runtime: which execs
 * hold checks (lg_graphs_watching, the one load the graph-launch hook pays), and that a new
 * exec's record starts from nothing even when its memory held something before. The replays
 * themselves, their verdicts and delivery are tested end to end (tests/e2e/test_graphs.sh).
 * Run: make build/tests/unit/test_graphs && build/tests/unit/test_graphs
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char graph_a, graph_b, exec_1, exec_2, exec_3;

/* One check captured under `id` and its capture ended as `graph`. */
static void capture_one(unsigned long long id, const void *graph)
{
    lg_target_t t = {0};
    char why[128] = "";
    g_assert_cmpint(lg_graphs_add_check(id, NULL, NULL, &t, NULL, why, sizeof why), ==, 0);
    g_assert_true(lg_graphs_capturing());
    lg_graphs_end_capture(id, graph);
}

static void test_watching(void)
{
    g_assert_false(lg_graphs_watching());
    capture_one(7, &graph_a);
    g_assert_false(lg_graphs_capturing());
    /* The table of execs is made now: fresh heap memory that held other bytes before (as
     * recycled memory does in a long process, and a sanitizer's malloc always). */
    for (int i = 0; i < 8; i++) {
        void *p = malloc(256 << (i % 4));
        memset(p, 0xbe, 256 << (i % 4));
        free(p);
    }
    lg_graphs_instantiated(&exec_2, &graph_b); /* a graph without checks: not watched */
    g_assert_false(lg_graphs_watching());
    lg_graphs_instantiated(&exec_1, &graph_a); /* its record: the table's second, 0xbe before */
    g_assert_true(lg_graphs_watching());
    lg_graphs_instantiated(&exec_3, &graph_a); /* a second exec of the checked graph */
    lg_graphs_exec_destroyed(&exec_1);
    g_assert_true(lg_graphs_watching());
    lg_graphs_exec_destroyed(&exec_3);
    g_assert_false(lg_graphs_watching());
    /* An exec handle reused for a graph without checks no longer counts. */
    lg_graphs_instantiated(&exec_1, &graph_a);
    g_assert_true(lg_graphs_watching());
    lg_graphs_instantiated(&exec_1, &graph_b);
    g_assert_false(lg_graphs_watching());
    lg_graphs_exec_destroyed(&exec_1);
    lg_graphs_exec_destroyed(&exec_2);
    g_assert_false(lg_graphs_watching());
}

static void test_failed_capture(void)
{
    lg_target_t t = {0};
    char why[128] = "";
    g_assert_cmpint(lg_graphs_add_check(0, NULL, NULL, &t, NULL, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "which capture"));
    g_assert_cmpint(lg_graphs_add_check(9, NULL, NULL, &t, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(9, NULL); /* the capture failed: its check is gone */
    g_assert_false(lg_graphs_capturing());
    lg_graphs_instantiated(&exec_2, &graph_b);
    g_assert_false(lg_graphs_watching());
    lg_graphs_exec_destroyed(&exec_2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/graphs/watching", test_watching);
    g_test_add_func("/graphs/failed_capture", test_failed_capture);
    return g_test_run();
}
