/* test_family.c: family.c's table, as launch.c, cause.c and act.c read it: which families
 * write at their ids, hold node ids, index a tensor's dimension or a vocabulary, or carry dense
 * labels, and that a prefix entry names its variants only (scatter_add, not scatterx).
 * Run: build/tests/unit/test_family (or LG_TESTS=test_family bash tests/run.sh).
 */
#include "hooks/hooks.h"

#include <glib.h>

static void test_flags(void)
{
    g_assert_cmpuint(lg_family_flags(NULL), ==, 0);
    g_assert_cmpuint(lg_family_flags("nll_loss"), ==, 0);
    g_assert_cmpuint(lg_family_flags("nll_loss2d"), ==, LG_FAMILY_DENSE);
    g_assert_cmpuint(lg_family_flags("gather"), ==, 0);
    g_assert_cmpuint(lg_family_flags("index_select"), ==, 0);
    /* EmbeddingBag's ids index its table whatever the call site; index_select's and gather's
     * only under nn.Embedding (cause.c reads that off the stack) */
    g_assert_cmpuint(lg_family_flags("embedding_bag"), ==, LG_FAMILY_VOCAB);
    g_assert_cmpuint(lg_family_flags("index_select") & LG_FAMILY_VOCAB, ==, 0);
    g_assert_cmpuint(lg_family_flags("gather") & LG_FAMILY_VOCAB, ==, 0);
    g_assert_cmpuint(lg_family_flags("embedding_bagx"), ==, 0);
    /* torch.compile's check of aten.embedding (api_index.c): a vocabulary, whatever the stack */
    g_assert_cmpuint(lg_family_flags("embedding"), ==, LG_FAMILY_VOCAB);
    g_assert_cmpuint(lg_family_flags("embeddingx"), ==, 0);
    /* torch.compile's check of F.one_hot: class labels, as eager's scatter with a one-hot output */
    g_assert_cmpuint(lg_family_flags("one_hot"), ==, LG_FAMILY_CLASSES);
    const char *writers[] = {"scatter", "scatter_add", "scatter_reduce", "index_put", "index_fill", "index_copy",
                             "put", "index_add"};
    for (size_t i = 0; i < G_N_ELEMENTS(writers); i++)
        g_assert_true(lg_family_flags(writers[i]) & LG_FAMILY_WRITES_AT_IDS);
    g_assert_cmpuint(lg_family_flags("index_add") & LG_FAMILY_NODE_IDS, !=, 0);
    g_assert_cmpuint(lg_family_flags("scatter_add") & LG_FAMILY_NODE_IDS, !=, 0);
    g_assert_cmpuint(lg_family_flags("index_put") & LG_FAMILY_NODE_IDS, ==, 0);
    const char *dims[] = {"index", "index_put", "index_fill", "index_copy", "take", "put"};
    for (size_t i = 0; i < G_N_ELEMENTS(dims); i++)
        g_assert_true(lg_family_flags(dims[i]) & LG_FAMILY_TENSOR_INDEX);
    g_assert_cmpuint(lg_family_flags("index_add") & LG_FAMILY_TENSOR_INDEX, ==, 0);
    /* Exact names, and prefixes only where the table says so. */
    g_assert_cmpuint(lg_family_flags("scatterx"), ==, 0);
    g_assert_cmpuint(lg_family_flags("index_addx"), ==, 0);
    g_assert_cmpuint(lg_family_flags("index_add_more"), ==, 0);
    g_assert_cmpuint(lg_family_flags("ind"), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/family/flags", test_flags);
    return g_test_run();
}
