/* test_recent.c: unit tests of src/base/recent.c, each thread's last launches kept for the
 * report of a device-side assert nothing checked: the calling thread's come first, newest
 * first, with function, stream, grid and block as given; only the last LG_RECENT are kept; a
 * refused launch is counted but not kept; other threads' newest follow, at most per_other each,
 * with their thread ids; an entry whose slot was rewritten since its number was read is
 * skipped; a graph replay is kept, marked, and not counted as a launch. Python frames (LABELGUARD_LAUNCH_SITES=all) are covered in a real interpreter by
 * tests/e2e/test_device_assert.sh.
 * Run: build/tests/unit/test_recent (or LG_TESTS=test_recent bash tests/run.sh).
 */
#include "base/base.h"

#include <glib.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static lg_recent_dims_t dims(unsigned gx, unsigned bx)
{
    return (lg_recent_dims_t){gx | (uint64_t)2 << 32, bx | (uint64_t)1 << 32, 3, 4};
}

static void *launch_three(void *arg)
{
    for (uintptr_t i = 1; i <= 3; i++)
        lg_recent_count(true, (const void *)(0x5000 + i), arg, dims((unsigned)i, 32));
    return NULL;
}

static void test_order_and_threads(void)
{
    lg_recent_launch_t out[64];
    int mine = -1;
    /* Thread A launches first, then this thread, 20 launches and one refused. */
    pthread_t t;
    pthread_create(&t, NULL, launch_three, (void *)0x77);
    pthread_join(t, NULL);
    for (uintptr_t i = 0; i < 20; i++)
        lg_recent_count(true, (const void *)(0x1000 + i), (const void *)0x9, dims((unsigned)i, 128));
    lg_recent_count(false, (const void *)0xdead, NULL, dims(1, 1));
    int n = lg_recent_read(out, 64, 2, &mine);
    /* The refused launch is counted, not kept: its slot's entry is the oldest one's, not its. */
    g_assert_cmpint(mine, ==, LG_RECENT - 1);
    for (int i = 0; i < mine; i++) {
        g_assert_true(out[i].func == (const void *)(uintptr_t)(0x1000 + 19 - i));
        g_assert_cmpint(out[i].age, ==, i + 1);
        g_assert_cmpint(out[i].tid, ==, (int)syscall(SYS_gettid));
    }
    g_assert_true(out[0].stream == (const void *)0x9);
    g_assert_cmpuint(out[0].grid[0], ==, 19);
    g_assert_cmpuint(out[0].grid[1], ==, 2);
    g_assert_cmpuint(out[0].grid[2], ==, 3);
    g_assert_cmpuint(out[0].block[0], ==, 128);
    g_assert_cmpuint(out[0].block[1], ==, 1);
    g_assert_cmpuint(out[0].block[2], ==, 4);
    g_assert_false(out[0].has_site);
    /* The other thread's newest two, newest first. */
    g_assert_cmpint(n, ==, mine + 2);
    g_assert_true(out[mine].func == (const void *)0x5003);
    g_assert_true(out[mine + 1].func == (const void *)0x5002);
    g_assert_true(out[mine].stream == (const void *)0x77);
    g_assert_cmpint(out[mine].age, ==, 0);
    g_assert_cmpint(out[mine].tid, !=, out[0].tid);
    /* A small cap is honoured. */
    g_assert_cmpint(lg_recent_read(out, 3, 2, &mine), ==, 3);
    g_assert_cmpint(mine, ==, 3);
}

static void test_rewritten(void)
{
    lg_recent_launch_t out[64];
    int mine;
    lg_recent_count(true, (const void *)0x42, NULL, dims(1, 1));
    int n = lg_recent_read(out, 64, 0, &mine);
    g_assert_cmpint(n, ==, mine);
    g_assert_true(out[0].func == (const void *)0x42);
    /* A launch counted whose entry is not written yet (the writer between its count and its
     * stores): the newest entry is skipped, not read as that launch. */
    lg_counter_slot_t *s = lg_counters_my_slot;
    __atomic_fetch_add((uint64_t *)&s->launches, 1, __ATOMIC_RELAXED);
    n = lg_recent_read(out, 64, 0, &mine);
    g_assert_true(out[0].func == (const void *)0x42);
    g_assert_cmpint(out[0].age, ==, 1);
    g_assert_cmpint(mine, ==, LG_RECENT - 2); /* and the refused launch of the test before */
}

/* A graph replay is kept as a candidate (its exec, no grid) but is no launch of the summary's. */
static void test_graph(void)
{
    lg_recent_launch_t out[64];
    int mine;
    lg_counters_t before, after;
    lg_counters_read(&before);
    lg_recent_graph((const void *)0xabc, (const void *)0x5);
    lg_counters_read(&after);
    g_assert_cmpuint(after.launches, ==, before.launches);
    lg_recent_read(out, 64, 0, &mine);
    g_assert_true(out[0].graph && out[0].func == (const void *)0xabc && out[0].stream == (const void *)0x5);
    g_assert_cmpint(out[0].age, ==, 0);
    g_assert_false(out[1].graph);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/recent/order_and_threads", test_order_and_threads);
    g_test_add_func("/recent/rewritten", test_rewritten);
    g_test_add_func("/recent/graph", test_graph);
    return g_test_run();
}
