/* test_graphs.c: unit tests of src/graphs.c's bookkeeping, without the runtime: which execs
 * hold checks (lg_graphs_watching, the one load the graph-launch hook pays), that a new
 * exec's record starts from nothing even when its memory held something before, and that a
 * graph handle reused after cudaGraphDestroy (PyTorch destroys each graph once instantiated)
 * does not inherit the destroyed graph's checks. The replays
 * themselves, their verdicts and delivery are tested end to end (tests/e2e/test_graphs.sh).
 * Run: make build/tests/unit/test_graphs && build/tests/unit/test_graphs
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/lg_validate.h"
#include "internal.h"

static char graph_a, graph_b, exec_1, exec_2, exec_3;

/* Takes every verdict queued so far (a check without a ring has its verdict at once). */
static void drain(void)
{
    lg_async_report_t r;
    while (lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL))
        ;
    g_assert_cmpint(lg_verdicts_mine, ==, 0);
}

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
    g_assert_true(lg_graphs_mapped());
    lg_graphs_destroyed(&graph_a);
    g_assert_false(lg_graphs_mapped());
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

/* PyTorch's order: capture, instantiate, cudaGraphDestroy. A later capture whose graph gets the
 * same address (the allocator reuses it) must not replay the first graph's checks: its replays
 * are not watched and queue no verdict; the first exec keeps its own. */
static void reused_handle(bool destroy_hook)
{
    static char graph_h, exec_a, exec_b;
    capture_one(11, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    g_assert_true(lg_graphs_watching());
    if (destroy_hook)
        lg_graphs_destroyed(&graph_h);
    /* The second graph: no loss launch, so no check; its capture ends with the same handle
     * (the EndCapture hook reports it only while some graph mapping could be stale). */
    if (destroy_hook || lg_graphs_mapped())
        lg_graphs_end_capture(0, &graph_h);
    lg_graphs_destroyed(&exec_a); /* not a graph handle: nothing happens */
    lg_graphs_exec_destroyed(&exec_a);
    g_assert_false(lg_graphs_watching());
    lg_graphs_instantiated(&exec_b, &graph_h);
    g_assert_false(lg_graphs_watching());
    int before = lg_verdicts_mine;
    for (int k = 0; k < 3; k++)
        g_assert_false(lg_graphs_launched(&exec_b, NULL));
    g_assert_cmpint(lg_verdicts_mine, ==, before);
    lg_graphs_exec_destroyed(&exec_b);
    lg_graphs_destroyed(&graph_h);
    g_assert_false(lg_graphs_mapped());
}

static void test_reused_after_destroy(void) { reused_handle(true); }

/* The graph was destroyed where no hook saw it (the driver API, or before arming): the new
 * capture ending with the same handle replaces the stale mapping. */
static void test_reused_unseen_destroy(void) { reused_handle(false); }

/* An exec instantiated before its graph is destroyed keeps its checks: each replay queues one
 * verdict. */
static void test_exec_outlives_graph(void)
{
    static char graph_h, exec_a;
    capture_one(12, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    lg_graphs_destroyed(&graph_h);
    g_assert_true(lg_graphs_watching());
    int before = lg_verdicts_mine;
    g_assert_false(lg_graphs_launched(&exec_a, NULL));
    g_assert_cmpint(lg_verdicts_mine, ==, before + 1);
    lg_graphs_exec_destroyed(&exec_a);
    g_assert_false(lg_graphs_watching());
    drain();
}

/* A replay whose check never publishes (its ring stays empty) cannot pile up verdicts: at most
 * one ring's worth stays queued per check. */
static void test_unpublished_bounded(void)
{
    static char graph_h, exec_a;
    static lg_scan_ring_t ring; /* never written */
    lg_target_t t = {0};
    char why[128] = "";
    drain();
    g_assert_cmpint(lg_graphs_add_check(13, NULL, NULL, &t, &ring, why, sizeof why), ==, 0);
    lg_graphs_end_capture(13, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    int before = lg_verdicts_mine;
    for (int k = 0; k < 3 * LG_RING_SLOTS; k++)
        lg_graphs_launched(&exec_a, NULL);
    g_assert_cmpint(lg_verdicts_mine - before, ==, LG_RING_SLOTS);
    lg_async_report_t r;
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL)); /* none published */
    lg_graphs_exec_destroyed(&exec_a);
    lg_graphs_destroyed(&graph_h);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/graphs/watching", test_watching);
    g_test_add_func("/graphs/failed_capture", test_failed_capture);
    g_test_add_func("/graphs/reused_after_destroy", test_reused_after_destroy);
    g_test_add_func("/graphs/reused_unseen_destroy", test_reused_unseen_destroy);
    g_test_add_func("/graphs/exec_outlives_graph", test_exec_outlives_graph);
    g_test_add_func("/graphs/unpublished_bounded", test_unpublished_bounded);
    return g_test_run();
}
