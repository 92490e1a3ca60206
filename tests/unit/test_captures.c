/* test_captures.c: captures.c's table of the captures labelguard saw begin, as the begin and
 * end hooks fill it and validate_node.c asks it: an id is seen from its begin to its end only,
 * id 0 never, the end hook's fast-path flag follows the open count, and a full table leaves a
 * new capture unseen (no host node) without losing the recorded ones. Threads begin and end
 * captures concurrently without losing or inventing an id.
 * Run: build/tests/unit/test_captures (or LG_TESTS=test_captures bash tests/run.sh).
 */
#include "hooks/hooks.h"

#include <glib.h>
#include <pthread.h>

static void test_begin_end(void)
{
    g_assert_false(lg_captures_open());
    g_assert_false(lg_captures_seen(0));
    lg_captures_begun(0);
    g_assert_false(lg_captures_open());
    g_assert_false(lg_captures_seen(7));
    lg_captures_begun(7);
    lg_captures_begun(9);
    g_assert_true(lg_captures_open());
    g_assert_true(lg_captures_seen(7));
    g_assert_true(lg_captures_seen(9));
    g_assert_false(lg_captures_seen(8));
    lg_captures_ended(7);
    g_assert_false(lg_captures_seen(7));
    g_assert_true(lg_captures_seen(9));
    lg_captures_ended(7); /* twice, or an id never recorded: nothing changes */
    lg_captures_ended(123);
    g_assert_true(lg_captures_seen(9));
    lg_captures_ended(9);
    g_assert_false(lg_captures_open());
}

static void test_full(void)
{
    for (unsigned long long id = 1000; id < 1000 + 64; id++)
        lg_captures_begun(id);
    lg_captures_begun(5000); /* no room: not recorded, so it gets no host node */
    g_assert_false(lg_captures_seen(5000));
    for (unsigned long long id = 1000; id < 1000 + 64; id++)
        g_assert_true(lg_captures_seen(id));
    lg_captures_ended(1010);
    lg_captures_begun(5001); /* a freed slot is used again */
    g_assert_true(lg_captures_seen(5001));
    for (unsigned long long id = 1000; id < 1000 + 64; id++)
        lg_captures_ended(id);
    lg_captures_ended(5001);
    g_assert_false(lg_captures_open());
}

static void *churn(void *arg)
{
    unsigned long long base = (unsigned long long)(uintptr_t)arg;
    for (int round = 0; round < 20000; round++) {
        unsigned long long id = base + (unsigned long long)round;
        lg_captures_begun(id);
        if (!lg_captures_seen(id))
            return (void *)1;
        lg_captures_ended(id);
        if (lg_captures_seen(id))
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        g_assert_cmpint(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)((unsigned long long)(i + 1) << 32)), ==, 0);
    for (int i = 0; i < 8; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        g_assert_null(rc);
    }
    g_assert_false(lg_captures_open());
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/captures/begin_end", test_begin_end);
    g_test_add_func("/captures/full", test_full);
    g_test_add_func("/captures/threads", test_threads);
    return g_test_run();
}
