/* test_pairs.c: unit tests of src/core/pairs.c, one report per bad batch: a forward and its
 * backward that read the same bad labels (size, bound, bad count, value range, first bad position
 * and value; at the same address or in a copy) pair once, in either order; anything that differs, or a third one, is a violation of its own.
 * Run: build/tests/unit/test_pairs (or LG_TESTS=test_pairs bash tests/run.sh).
 */
#include "core/core.h"

#include <glib.h>
#include <string.h>

static lg_spec_t fwd, bwd;

static void labels(lg_target_t *t, lg_verdict_t *v, uint64_t data, int64_t index, int64_t value)
{
    memset(t, 0, sizeof *t);
    t->data = data;
    t->count = 64;
    t->n_classes = 10;
    lg_scan_clear(v);
    v->min = value < 0 ? value : 0;
    v->max = value < 0 ? 9 : value;
    v->bad_count = 1;
    v->n_samples = 1;
    v->samples[0].index = index;
    v->samples[0].value = value;
}

static void test_pair_once(void)
{
    lg_target_t t;
    lg_verdict_t v;
    uint64_t before = lg_pairs_suppressed();
    labels(&t, &v, 0x1000, 3, 10);
    g_assert_false(lg_pairs_duplicate(&fwd, &t, &v)); /* the forward: reported */
    g_assert_true(lg_pairs_duplicate(&bwd, &t, &v));  /* its backward: the same batch */
    g_assert_false(lg_pairs_duplicate(&bwd, &t, &v)); /* a second backward pairs with nothing */
    g_assert_cmpuint(lg_pairs_suppressed(), ==, before); /* counted by act.c, once left unreported */
    lg_pairs_count_suppressed();
    g_assert_cmpuint(lg_pairs_suppressed(), ==, before + 1);
}

/* A backward that reads a copy of the forward's labels (another address): the same bad values
 * at the same positions are the same batch. */
static void test_copy(void)
{
    lg_target_t t, t2;
    lg_verdict_t v, v2;
    labels(&t, &v, 0x4000, 2, 12);
    g_assert_false(lg_pairs_duplicate(&fwd, &t, &v));
    labels(&t2, &v2, 0x9000, 2, 12);
    g_assert_true(lg_pairs_duplicate(&bwd, &t2, &v2));
}

static void test_either_order(void)
{
    lg_target_t t;
    lg_verdict_t v;
    labels(&t, &v, 0x2000, 5, -1);
    g_assert_false(lg_pairs_duplicate(&bwd, &t, &v)); /* autograd's thread read its verdict first */
    g_assert_true(lg_pairs_duplicate(&fwd, &t, &v));
}

static void test_differs(void)
{
    lg_target_t t, t2;
    lg_verdict_t v, v2;
    labels(&t, &v, 0x3000, 7, 10);
    g_assert_false(lg_pairs_duplicate(&fwd, &t, &v));
    labels(&t2, &v2, 0x3000, 8, 10); /* another position */
    g_assert_false(lg_pairs_duplicate(&bwd, &t2, &v2));
    labels(&t2, &v2, 0x3000, 7, 10); /* another bound */
    t2.n_classes = 12;
    g_assert_false(lg_pairs_duplicate(&bwd, &t2, &v2));
    labels(&t2, &v2, 0x3000, 7, 11); /* another value */
    g_assert_false(lg_pairs_duplicate(&bwd, &t2, &v2));
    g_assert_false(lg_pairs_duplicate(&fwd, &t, &v)); /* the same direction again: a new batch */
    lg_spec_t flag = fwd;
    flag.assert_flag = true; /* _assert_async flags have no labels to pair */
    labels(&t2, &v2, 0x3000, 7, 10);
    g_assert_false(lg_pairs_duplicate(&flag, &t2, &v2));
    g_assert_false(lg_pairs_duplicate(NULL, &t2, &v2));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fwd.direction = LG_DIR_FORWARD;
    bwd.direction = LG_DIR_BACKWARD;
    g_test_add_func("/pairs/once", test_pair_once);
    g_test_add_func("/pairs/either_order", test_either_order);
    g_test_add_func("/pairs/copy", test_copy);
    g_test_add_func("/pairs/differs", test_differs);
    return g_test_run();
}
