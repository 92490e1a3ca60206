/* test_graphs.c: unit tests of src/core/graphs.c's bookkeeping, without the runtime: which execs
 * hold checks (lg_graphs_watching, the one load the graph-launch hook pays), that a new
 * exec's record starts from nothing even when its memory held something before, and that a
 * graph handle reused after cudaGraphDestroy (PyTorch destroys each graph once instantiated)
 * does not inherit the destroyed graph's checks, and that checks captured into a graph only
 * replayed inside another one (child graph node), or captured into a conditional body beside a
 * parent with checks of its own (cudaStreamBeginCaptureToGraph), give one graph_checks_unreported
 * warning. The replays
 * themselves, their verdicts and delivery are tested end to end (tests/e2e/test_graphs.sh).
 * Run: make build/tests/unit/test_graphs && build/tests/unit/test_graphs
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/lg_validate.h"
#include "hooks/hooks.h"

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
    g_assert_cmpint(lg_graphs_add_check(id, NULL, NULL, &t, NULL, 0, NULL, why, sizeof why), ==, 0);
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
    /* A graph without checks, while graph_a has no exec yet: watched only until graph_a gets
     * one (or its first replay), in case graph_a's checks reached it inside a node. */
    lg_graphs_instantiated(&exec_2, &graph_b);
    g_assert_true(lg_graphs_watching());
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
    g_assert_cmpint(lg_graphs_add_check(0, NULL, NULL, &t, NULL, 0, NULL, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "which capture"));
    g_assert_cmpint(lg_graphs_add_check(9, NULL, NULL, &t, NULL, 0, NULL, why, sizeof why), ==, 0);
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

/* A replay whose check never publishes (its ring stays empty), with no stream to wait for (no
 * runtime here): at most LG_RING_SLOTS - 1 of its runs stay queued waiting; each older one is
 * given up when the replay that would reuse its slot is queued, and collected as lost
 * (checked -1, which launch.c reports as verdict_lost), never dropped unsaid. */
static void test_unpublished_bounded(void)
{
    static char graph_h, exec_a;
    static lg_scan_ring_t ring; /* never written */
    lg_target_t t = {0};
    char why[128] = "";
    drain();
    g_assert_cmpint(lg_graphs_add_check(13, NULL, NULL, &t, &ring, 0, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(13, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    int before = lg_verdicts_mine;
    for (int k = 0; k < 3 * LG_RING_SLOTS; k++)
        lg_graphs_launched(&exec_a, NULL);
    lg_async_report_t r;
    int lost = 0;
    while (lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL)) {
        g_assert_cmpint(r.verdict.checked, ==, -1);
        g_assert_cmpuint(r.replay, ==, (uint64_t)lost + 1); /* oldest first */
        lost++;
    }
    g_assert_cmpint(lost, ==, 2 * LG_RING_SLOTS + 1);
    g_assert_cmpint(lg_verdicts_mine - before, ==, LG_RING_SLOTS - 1); /* none published */
    lg_graphs_exec_destroyed(&exec_a);
    lg_graphs_destroyed(&graph_h);
}

static char *log_dir;

/* How many lines of the run's logs mention `what`. */
static int log_mentions(const char *what)
{
    int n = 0;
    GDir *d = g_dir_open(log_dir, 0, NULL);
    for (const char *f; d && (f = g_dir_read_name(d));) {
        char *path = g_build_filename(log_dir, f, NULL), *text = NULL;
        if (g_file_get_contents(path, &text, NULL, NULL)) {
            char **lines = g_strsplit(text, "\n", -1);
            for (char **l = lines; *l; l++)
                n += strstr(*l, what) != NULL;
            g_strfreev(lines);
        }
        g_free(text);
        g_free(path);
    }
    if (d)
        g_dir_close(d);
    return n;
}

/* Checks captured into a graph that is then only replayed inside another one (a child graph
 * node, a conditional body, a clone): the exec made is the other graph's, which maps to no
 * checks. One graph_checks_unreported warning, naming the graph, at the parent exec's first
 * replay; none before (test_watching instantiated a graph without checks while a checked one
 * had no exec, and never replayed it); no second one when the child graph is then destroyed
 * never instantiated. */
static void test_child_graph_unreported(void)
{
    static char child, parent, exec_p, other, exec_o;
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 0);
    /* PyTorch's order first: captured, instantiated, destroyed: nothing to say. */
    capture_one(21, &other);
    lg_graphs_instantiated(&exec_o, &other);
    lg_graphs_destroyed(&other);
    lg_graphs_exec_destroyed(&exec_o);
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 0);
    /* The child's capture holds the check; the parent (which cudaGraphAddChildGraphNode gave a
     * copy of it) is what gets instantiated and replayed. */
    capture_one(22, &child);
    lg_graphs_instantiated(&exec_p, &parent);
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 0);
    g_assert_true(lg_graphs_watching()); /* until its first replay says which */
    g_assert_false(lg_graphs_launched(&exec_p, NULL));
    g_assert_false(lg_graphs_watching());
    g_assert_false(lg_graphs_launched(&exec_p, NULL));
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 1);
    g_assert_cmpint(log_mentions("graph 22, with 1 checked loss launch"), ==, 1);
    lg_graphs_destroyed(&child);
    lg_graphs_exec_destroyed(&exec_p);
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 1);
    g_assert_false(lg_graphs_mapped());
}

/* A conditional body captured into with cudaStreamBeginCaptureToGraph (a graph not made by
 * cudaGraphCreate) holds a check; its parent, captured with a check of its own beside the
 * torch.cond, is instantiated and replayed: the parent's verdicts are read, the body's cannot
 * be, and that is said once (graph_checks_unreported) at the parent's first replay. The body's
 * checks stay mapped to it while its parent lives (never destroyed by a call of its own). */
static void test_body_beside_checks_unreported(void)
{
    /* In a process of its own: the warning is said once per process, and other tests say it. */
    if (!g_test_subprocess()) {
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_passed();
        return;
    }
    static char body, parent, exec_p;
    lg_target_t t = {0};
    char why[128] = "";
    g_assert_cmpint(lg_graphs_add_check(31, NULL, NULL, &t, NULL, 0, NULL, why, sizeof why), ==, 0);
    g_assert_cmpint(lg_graphs_add_check(32, NULL, NULL, &t, NULL, 0, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_into(32, &body, true); /* the body's capture ends first, inside the parent's */
    lg_graphs_end_capture(31, &parent);
    g_assert_false(lg_graphs_capturing());
    lg_graphs_instantiated(&exec_p, &parent);
    g_assert_false(lg_graphs_launched(&exec_p, NULL));
    drain();
    g_assert_cmpint(log_mentions("graph_checks_unreported"), ==, 1);
    g_assert_cmpint(log_mentions("graph 32, with 1 checked loss launch"), ==, 1);
    g_assert_cmpint(log_mentions("had no exec"), ==, 1);
    lg_graphs_exec_destroyed(&exec_p);
    lg_graphs_destroyed(&parent);
    g_assert_true(lg_graphs_mapped()); /* the body's: it goes only if its handle is reused */
    lg_graphs_end_capture(0, &body);
    g_assert_false(lg_graphs_mapped());
}

/* A second exec of a checked graph whose check cannot get scratch of its own (here: no host-node
 * check behind it, as for the GPU backend's validator, which writes the stream's scratch) shares
 * the check's scratch: one graph_exec_shares_checks warning saying why, at the second
 * instantiate (none for the first, none again for a third). Host-node checks get their own
 * (tests/e2e/test_graph_execs.sh). */
static void test_second_exec_warned(void)
{
    static char graph_h, exec_a, exec_b, exec_c;
    g_assert_cmpint(log_mentions("graph_exec_shares_checks"), ==, 0);
    capture_one(31, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    g_assert_cmpint(log_mentions("graph_exec_shares_checks"), ==, 0);
    lg_graphs_instantiated(&exec_a, &graph_h); /* the same exec handle again: not a second exec */
    g_assert_cmpint(log_mentions("graph_exec_shares_checks"), ==, 0);
    lg_graphs_instantiated(&exec_b, &graph_h);
    g_assert_cmpint(log_mentions("graph_exec_shares_checks"), ==, 1);
    g_assert_cmpint(log_mentions("graph 31 was instantiated a second time"), ==, 1);
    g_assert_cmpint(log_mentions("could not get check scratch of its own (the check has no verdict ring)"), ==, 1);
    lg_graphs_instantiated(&exec_c, &graph_h);
    g_assert_cmpint(log_mentions("graph_exec_shares_checks"), ==, 1);
    lg_graphs_exec_destroyed(&exec_a);
    lg_graphs_exec_destroyed(&exec_b);
    lg_graphs_exec_destroyed(&exec_c);
    lg_graphs_destroyed(&graph_h);
    g_assert_false(lg_graphs_watching());
}

/* Two execs of one checked graph, replayed A, B, A: each replay's verdict names its exec's own
 * replay number (A's 1 and 2, B's 1), not the count of the graph's replays by any exec. */
static void test_replays_per_exec(void)
{
    static char graph_h, exec_a, exec_b;
    static lg_scan_ring_t ring;
    lg_target_t t = {0};
    char why[128] = "";
    drain();
    g_assert_cmpint(lg_graphs_add_check(41, NULL, NULL, &t, &ring, 0, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(41, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    lg_graphs_instantiated(&exec_b, &graph_h);
    const void *order[] = {&exec_a, &exec_b, &exec_a};
    for (int k = 0; k < 3; k++) {
        g_assert_false(lg_graphs_launched(order[k], NULL));
        /* The check's node ran: it publishes run k + 1 of the ring, clean. */
        lg_scan_ring_entry_t *e = &ring.entries[(k + 1) % LG_RING_SLOTS];
        memset((void *)&e->verdict, 0, sizeof e->verdict);
        e->seq = (unsigned long long)k + 1;
        ring.latest = (unsigned long long)k + 1;
    }
    uint64_t want[] = {1, 1, 2};
    lg_async_report_t r;
    for (int k = 0; k < 3; k++) {
        g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL));
        g_assert_cmpuint(r.graph_id, ==, 41);
        g_assert_cmpuint(r.replay, ==, want[k]);
    }
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL));
    lg_graphs_exec_destroyed(&exec_a);
    lg_graphs_exec_destroyed(&exec_b);
    lg_graphs_destroyed(&graph_h);
    g_assert_false(lg_graphs_watching());
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_dir = g_dir_make_tmp("lg-test-graphs-XXXXXX", NULL);
    g_assert_nonnull(log_dir);
    lg_config_values.quiet = true;
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s", log_dir);
    /* graphs.c refers to the report module weakly (the GPU tests link it without one): this
     * reference is what links it in here. */
    void (*volatile report)(const char *, const char *) = lg_report_warning_once;
    g_assert_nonnull((void *)report);
    /* First: test_watching makes a second exec of its graph, which is warned about once. */
    g_test_add_func("/graphs/second_exec_warned", test_second_exec_warned);
    g_test_add_func("/graphs/watching", test_watching);
    g_test_add_func("/graphs/failed_capture", test_failed_capture);
    g_test_add_func("/graphs/reused_after_destroy", test_reused_after_destroy);
    g_test_add_func("/graphs/reused_unseen_destroy", test_reused_unseen_destroy);
    g_test_add_func("/graphs/exec_outlives_graph", test_exec_outlives_graph);
    g_test_add_func("/graphs/replays_per_exec", test_replays_per_exec);
    g_test_add_func("/graphs/unpublished_bounded", test_unpublished_bounded);
    g_test_add_func("/graphs/child_graph_unreported", test_child_graph_unreported);
    g_test_add_func("/graphs/body_beside_checks_unreported", test_body_beside_checks_unreported);
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", log_dir);
    if (system(cmd) != 0)
        rc = 1;
    g_free(cmd);
    return rc;
}
