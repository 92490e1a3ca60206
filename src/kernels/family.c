/* family.c: what a kernel family's labels or ids mean to the rest of the library, in one table:
 * a spec names its family (specs/pytorch.conf `family=`), and the launch path (launch.c: which
 * kernels write at their ids), the causes (cause.c: node ids, a tensor's dimension rather than a
 * vocabulary, a vocabulary whatever the call site) and the reports (act.c: dense labels) ask
 * here instead of keeping lists of their own, so a new family is described once.
 *
 * Called by launch.c, cause.c and act.c on any thread; a constant table, no state, no lock.
 * Tested by tests/unit/test_cause.c (through the causes) and tests/unit/test_family.c.
 */
#include <string.h>

#include "kernels/kernels.h"

static const struct {
    const char *name;
    bool prefix; /* also names its variants (scatter_add, scatter_reduce) */
    unsigned flags;
} families[] = {
    {"nll_loss2d", false, LG_FAMILY_DENSE},
    {"scatter", true, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_NODE_IDS},
    {"index_add", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_NODE_IDS},
    {"index_put", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_TENSOR_INDEX},
    {"index_fill", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_TENSOR_INDEX},
    {"index_copy", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_TENSOR_INDEX},
    {"put", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_TENSOR_INDEX},
    {"index", false, LG_FAMILY_TENSOR_INDEX},
    {"take", false, LG_FAMILY_TENSOR_INDEX},
    {"max_unpool2d", false, LG_FAMILY_WRITES_AT_IDS | LG_FAMILY_TENSOR_INDEX},
    {"embedding_bag", false, LG_FAMILY_VOCAB},
    {"embedding", false, LG_FAMILY_VOCAB}, /* torch.compile's check of aten.embedding (api_index.c) */
    {"one_hot", false, LG_FAMILY_CLASSES}, /* torch.compile's check of F.one_hot (eager: the scatter's one-hot) */
};

unsigned lg_family_flags(const char *family)
{
    if (!family)
        return 0;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        size_t n = strlen(families[i].name);
        if (strncmp(family, families[i].name, n) == 0 &&
            (family[n] == '\0' || (families[i].prefix && family[n] == '_')))
            return families[i].flags;
    }
    return 0;
}
