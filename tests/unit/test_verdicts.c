/* test_verdicts.c: what the hooks do while async verdicts are outstanding (src/checks/verdicts.c,
 * src/core/launch.c), driven directly with verdict rings written by hand, on a host-memory runtime
 * (tests/unit/fake_runtime.h) that counts its error queries:
 *   - while the calling thread's oldest verdict is not yet published, an unwatched launch
 *     queries no error (no collection: no lock, no ring scan); once its run is published, the
 *     next launch collects it;
 *   - verdicts are read oldest first at launches, every ready one at a synchronizing call;
 *   - a run its ring skipped (later runs published, never this one) is given up, not awaited;
 *   - at exit every thread's verdicts are taken, a live thread's too;
 *   - the host backend's verdict (validate_defer.c) is due once the stream ran its host
 *     function, not before;
 *   - once closed, no ring is read (its memory may be gone) and nothing is due any more.
 * Run: build/tests/unit/test_verdicts (or LG_TESTS=test_verdicts make test).
 */
#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../cuda/lg_validate.h"
#include "fake_runtime.h"
#include "hooks/hooks.h"

static char stub;
static void *fatbin[1];
static char *log_dir;

static void launch_unwatched(void)
{
    int x = 0;
    void *args[] = {&x};
    lg_launch_t l = {.entry = LG_ENTRY_CUDA_LAUNCH_KERNEL,
                     .func = &stub,
                     .args = args,
                     .grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .can_block = true};
    lg_decision_t d;
    lg_launch_decide(&fake_rt, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN);
}

static lg_pending_t *pending_on(const lg_scan_ring_t *ring, uint64_t seq)
{
    lg_pending_t *p = calloc(1, sizeof *p);
    g_assert_nonnull(p);
    p->ring = ring;
    p->seq = seq;
    return p;
}

static void publish(lg_scan_ring_t *ring, uint64_t seq, int64_t bad)
{
    lg_scan_ring_entry_t *e = &ring->entries[seq % LG_RING_SLOTS];
    memset((void *)&e->verdict, 0, sizeof e->verdict);
    e->verdict.bad_count = bad;
    e->verdict.checked = 4;
    __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&ring->latest, seq, __ATOMIC_RELEASE);
}

static void test_unpublished(void)
{
    static lg_scan_ring_t ring;
    launch_unwatched(); /* classified: unwatched from now on */
    g_assert_cmpint(lg_verdicts_add(pending_on(&ring, 1)), ==, 0);
    g_assert_cmpint(lg_verdicts_mine, ==, 1);
    int reads = last_error_reads;
    for (int i = 0; i < 100; i++)
        launch_unwatched();
    g_assert_cmpint(last_error_reads - reads, ==, 0); /* nothing was collected */
    g_assert_cmpint(lg_verdicts_mine, ==, 1);
    publish(&ring, 1, 0);
    launch_unwatched();
    g_assert_cmpint(lg_verdicts_mine, ==, 0); /* collected at the first launch after */
    g_assert_cmpint(last_error_reads - reads, ==, 2);
}

static void test_oldest_first(void)
{
    static lg_scan_ring_t ring;
    g_assert_cmpint(lg_verdicts_add(pending_on(&ring, 1)), ==, 0);
    g_assert_cmpint(lg_verdicts_add(pending_on(NULL, 0)), ==, 0); /* final already */
    launch_unwatched();
    g_assert_cmpint(lg_verdicts_mine, ==, 2); /* behind the oldest */
    lg_async_report_t r;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL)); /* a sync reads what is there */
    g_assert_cmpint(lg_verdicts_mine, ==, 1);
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL));
    publish(&ring, 1, 0);
    launch_unwatched();
    g_assert_cmpint(lg_verdicts_mine, ==, 0);
}

static void test_skipped_run(void)
{
    static lg_scan_ring_t ring;
    g_assert_cmpint(lg_verdicts_add(pending_on(&ring, 2)), ==, 0);
    publish(&ring, 3, 0); /* run 2 never published, run 3 was */
    lg_async_report_t r;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
    g_assert_cmpint(r.verdict.checked, ==, -1); /* reported lost */
    g_assert_cmpint(r.verdict.bad_count, ==, 0);
    g_assert_cmpint(lg_verdicts_mine, ==, 0);
}

static pthread_barrier_t bar;
static lg_scan_ring_t other_ring;

static void *live_thread(void *arg)
{
    (void)arg;
    publish(&other_ring, 1, 3);
    g_assert_cmpint(lg_verdicts_add(pending_on(&other_ring, 1)), ==, 0);
    pthread_barrier_wait(&bar); /* added */
    pthread_barrier_wait(&bar); /* stays alive until the exit collection is done */
    return NULL;
}

static void test_exit_takes_live_threads(void)
{
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, live_thread, NULL);
    pthread_barrier_wait(&bar);
    lg_async_report_t r;
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL)); /* its owner is alive */
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_EXIT, NULL));
    g_assert_cmpint(r.verdict.bad_count, ==, 3);
    g_assert_false(lg_verdicts_outstanding());
    g_assert_cmpint(lg_verdicts_mine, ==, 0); /* this thread's count untouched */
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
}

/* A runtime whose cudaLaunchHostFunc queues the function: it runs when the test says the
 * stream got there. */
static void (*queued_fn[4])(void *);
static void *queued_user[4];
static int n_queued;

static int queue_host_func(void *stream, void (*fn)(void *), void *user)
{
    (void)stream;
    g_assert_cmpint(n_queued, <, 4);
    queued_fn[n_queued] = fn;
    queued_user[n_queued++] = user;
    return 0;
}

static void run_queued(void)
{
    for (int i = 0; i < n_queued; i++)
        queued_fn[i](queued_user[i]);
    n_queued = 0;
}

/* The host backend's async verdict (validate_defer.c) is due only once its host function ran,
 * as the GPU validator's once its kernel ran; runs of one stream share a ring in order. */
static void test_deferred_host_verdict(void)
{
    lg_runtime_t rt = fake_rt;
    rt.launch_host_func = queue_host_func;
    lg_verdict_t v;
    lg_scan_clear(&v);
    v.bad_count = 2;
    v.checked = 5;
    lg_pending_t *p = pending_on(NULL, 0);
    g_assert_cmpint(lg_validate_defer(&rt, (void *)0x10, &v, &p->ring, &p->seq), ==, 0);
    g_assert_nonnull(p->ring);
    g_assert_cmpint(p->seq, ==, 1);
    p->verdict = v;
    const struct lg_scan_ring *first = p->ring;
    g_assert_cmpint(lg_verdicts_add(p), ==, 0);
    launch_unwatched();
    launch_unwatched();
    g_assert_cmpint(lg_verdicts_mine, ==, 1); /* not due: the stream has not got there */
    lg_async_report_t r;
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL));
    run_queued();
    g_assert_true(lg_verdicts_due());
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
    g_assert_cmpint(r.verdict.bad_count, ==, 2);
    g_assert_cmpint(r.verdict.checked, ==, 5);
    g_assert_cmpint(lg_verdicts_mine, ==, 0);

    /* the same stream: its ring, next run; another stream: a ring of its own */
    const struct lg_scan_ring *ring1 = NULL, *ring2 = NULL;
    uint64_t seq1 = 0, seq2 = 0;
    g_assert_cmpint(lg_validate_defer(&rt, (void *)0x10, &v, &ring1, &seq1), ==, 0);
    g_assert_cmpint(lg_validate_defer(&rt, (void *)0x20, &v, &ring2, &seq2), ==, 0);
    g_assert_true(ring1 == first);
    g_assert_cmpint(seq1, ==, 2);
    g_assert_true(ring2 != ring1);
    g_assert_cmpint(seq2, ==, 1);
    run_queued();
    g_assert_cmpint(lg_verdicts_ring_read(ring1, 2, &v), ==, 1);
    g_assert_cmpint(lg_verdicts_ring_read(ring2, 1, &v), ==, 1);

    /* no cudaLaunchHostFunc: the caller keeps its verdict final */
    rt.launch_host_func = NULL;
    g_assert_cmpint(lg_validate_defer(&rt, (void *)0x10, &v, &ring1, &seq1), ==, -1);
}

static void test_closed(void)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = (sizeof(lg_scan_ring_t) + (size_t)page - 1) & ~((size_t)page - 1);
    lg_scan_ring_t *ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_assert_true(ring != MAP_FAILED);
    memset(ring, 0, sizeof *ring);
    g_assert_cmpint(lg_verdicts_add(pending_on(ring, 1)), ==, 0);
    publish(ring, 1, 0);
    lg_verdicts_close();
    munmap(ring, bytes); /* CUDA's teardown unmaps pinned memory */
    g_assert_false(lg_verdicts_due()); /* no hook looks at the ring any more */
    launch_unwatched();
    lg_async_report_t r;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_EXIT, NULL)); /* without reading it */
    g_assert_cmpint(r.verdict.checked, ==, -1);
    g_assert_false(lg_verdicts_outstanding());
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_dir = g_dir_make_tmp("lg-test-verdicts-XXXXXX", NULL);
    g_assert_nonnull(log_dir);
    lg_config_values = lg_cfg_defaults();
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s/logs", log_dir);
    lg_config_values.quiet = true;
    lg_registry_init_with(NULL, NULL);
    lg_validate_init(&fake_rt);
    lg_names_record_function(fatbin, &stub, "_Z16optimizer_kernelPfi");
    g_test_add_func("/verdicts/unpublished", test_unpublished);
    g_test_add_func("/verdicts/oldest_first", test_oldest_first);
    g_test_add_func("/verdicts/skipped_run", test_skipped_run);
    g_test_add_func("/verdicts/exit_takes_live_threads", test_exit_takes_live_threads);
    g_test_add_func("/verdicts/deferred_host_verdict", test_deferred_host_verdict);
    g_test_add_func("/verdicts/closed", test_closed); /* last: closes the queue for good */
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", log_dir);
    (void)!system(cmd);
    g_free(cmd);
    (void)dev_copy_of;
    return rc;
}
