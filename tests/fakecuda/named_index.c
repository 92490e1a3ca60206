/* named_index.c: host emulations of the id checks of two more PyTorch index kernels for the
 * runtime test double: indexFuncSmallIndex / indexFuncLargeIndex of Indexing.cu (index_add_,
 * index_reduce_; TensorInfo arguments, 32- and 64-bit index math) and the nn.EmbeddingBag
 * forward kernels of EmbeddingBag.cu (2.1+ layout, with numRows). Each walks the ids as the
 * kernel does and, for one out of range, queues the device's assert line with the kernel's own
 * condition text and returns cudaErrorAssert, which poisons the context as on a GPU. They
 * compute nothing else (the double's kernels produce no values a test may read). File:line in
 * the assert lines are nominal.
 *
 * fakecudart.c picks an entry of fk_named_index_emulators by a substring of the mangled name
 * and runs it only when the parameter sizes read from the name (sig.c) match the entry's
 * layout. Runs on the launching thread; no state. Tested through real torch by
 * tests/torch-fake/test_named_index.sh (plain mode: the device assert without labelguard).
 */
#include "fakecudart.h"

#include <string.h>

#define INDEXING_CU "/pytorch/aten/src/ATen/native/cuda/Indexing.cu"
#define EMBEDDING_BAG_CU "/pytorch/aten/src/ATen/native/cuda/EmbeddingBag.cu"

/* An int32 or int64 id at element elem, sign-extended; -1 when outside its allocation. */
static int load_id(const void *base, int64_t elem, int is64, int64_t *out)
{
    fk_region_t r;
    fk_region(base, &r);
    const char *p = (const char *)base + elem * (is64 ? 8 : 4);
    if (!fk_inside(&r, p, is64 ? 8 : 4)) return -1;
    if (is64) {
        memcpy(out, p, 8);
    } else {
        int32_t v;
        memcpy(&v, p, 4);
        *out = v;
    }
    return 0;
}

/* The indices TensorInfo (1-D after collapseDims): data, sizes[0], strides[0]. */
static void ids_info(const void *arg, int wide, const char **data, uint64_t *n, uint64_t *stride)
{
    const char *p = arg;
    memcpy(data, p, 8);
    if (wide) {
        memcpy(n, p + 8, 8);
        memcpy(stride, p + 208, 8);
    } else {
        uint32_t a, b;
        memcpy(&a, p + 8, 4);
        memcpy(&b, p + 108, 4);
        *n = a;
        *stride = b;
    }
}

/* indexFunc{Small,Large}Index<T, IndicesType, IndexType, ...>(dst, src, indices, int, int,
 * [IndexType totalSize,] IndexType innerSize, int64_t dstAddDimSize, int64_t dstNumel, op,
 * alpha): each id is read as the unsigned IndexType, then `dstIndex < dstAddDimSize`. */
static cudaError_t emu_index_func(const fk_launch_t *l, int large)
{
    const fk_sig_t *s = l->sig;
    if (s->n_targs < 3) return cudaSuccess;
    const int is64 = !strcmp(s->targ[1], "l");
    if (!is64 && strcmp(s->targ[1], "i") != 0) return cudaSuccess;
    const int wide = !strcmp(s->targ[2], "m");
    const char *data;
    uint64_t n, stride;
    ids_info(l->args[2], wide, &data, &n, &stride);
    int64_t bound;
    memcpy(&bound, l->args[large ? 7 : 6], 8);
    for (uint64_t i = 0; i < n; i++) {
        int64_t raw;
        if (load_id(data, (int64_t)(i * stride), is64, &raw)) return cudaErrorIllegalAddress;
        uint64_t dst_index = wide ? (uint64_t)raw : (uint64_t)(uint32_t)raw;
        if (!(dst_index < (uint64_t)bound)) {
            const unsigned b[3] = { 0, 0, 0 }, th[3] = { 0, 0, 0 };
            fk_device_assert(INDEXING_CU, large ? 1152 : 1102, large ? "indexFuncLargeIndex" : "indexFuncSmallIndex",
                             b, th, "dstIndex < dstAddDimSize");
            return cudaErrorAssert;
        }
    }
    return cudaSuccess;
}

static cudaError_t emu_index_func_small(const fk_launch_t *l) { return emu_index_func(l, 0); }
static cudaError_t emu_index_func_large(const fk_launch_t *l) { return emu_index_func(l, 1); }

/* EmbeddingBag_updateOutputKernel_{max,sum_mean}<scalar_t, index_t>(input, offsets, weight,
 * output, offset2bag, int64_t numIndices, ..., index_t padding_idx, int64_t numRows): each bag
 * asserts `input[emb] < numRows` for its ids (padding ones too: the assert comes before the
 * padding test). Bags with monotonic offsets partition [0, numIndices), so every id is checked
 * here without reading the offsets: those of a 2-D input are made on the device (arange, a
 * no-op on the double) and hold garbage. Its `end >= begin` assert is not emulated. */
static cudaError_t emu_embedding_bag(const fk_launch_t *l)
{
    const fk_sig_t *s = l->sig;
    if (s->n_targs < 2) return cudaSuccess;
    const int is64 = !strcmp(s->targ[1], "l");
    if (!is64 && strcmp(s->targ[1], "i") != 0) return cudaSuccess;
    const char *input;
    int64_t num_indices, num_rows;
    memcpy(&input, l->args[0], 8);
    memcpy(&num_indices, l->args[5], 8);
    memcpy(&num_rows, l->args[s->n_params - 1], 8);
    const unsigned b[3] = { 0, 0, 0 }, th[3] = { 0, 0, 0 };
    const char *fn = s->n_params == 14 ? "EmbeddingBag_updateOutputKernel_max" : "EmbeddingBag_updateOutputKernel_sum_mean";
    for (int64_t emb = 0; emb < num_indices; emb++) {
        int64_t id;
        if (load_id(input, emb, is64, &id)) return cudaErrorIllegalAddress;
        if (!(id < num_rows)) {
            fk_device_assert(EMBEDDING_BAG_CU, 62, fn, b, th, "input[emb] < numRows");
            return cudaErrorAssert;
        }
    }
    return cudaSuccess;
}

/* Layouts (parameter sizes in bytes) from the wheels' cubins (tests/wheels/): the last
 * parameter of indexFunc* is alpha, sizeof T. */
#define SMALL(a) { 216, 216, 216, 4, 4, 4, 8, 8, 8, a }
#define LARGE(a) { 216, 216, 216, 4, 4, 4, 4, 8, 8, 8, a }
#define LARGE64(a) { 416, 416, 416, 4, 4, 8, 8, 8, 8, 8, a }
static const size_t L_SMALL[5][10] = { SMALL(1), SMALL(2), SMALL(4), SMALL(8), SMALL(16) };
static const size_t L_LARGE[5][11] = { LARGE(1), LARGE(2), LARGE(4), LARGE(8), LARGE(16) };
static const size_t L_LARGE64[5][11] = { LARGE64(1), LARGE64(2), LARGE64(4), LARGE64(8), LARGE64(16) };
static const size_t L_EB_MAX_L[] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 };
static const size_t L_EB_MAX_I[] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 8 };
static const size_t L_EB_SUM_L[] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 8, 8, 8, 8, 8 };
static const size_t L_EB_SUM_I[] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 8, 8, 8, 4, 8 };

#define E(sub, fn, layout) { sub, fn, (int)(sizeof layout / sizeof layout[0]), layout }
#define EACH_ALPHA(sub, fn, table) E(sub, fn, table[0]), E(sub, fn, table[1]), E(sub, fn, table[2]), \
                                   E(sub, fn, table[3]), E(sub, fn, table[4])
const fk_emulator_t fk_named_index_emulators[] = {
    EACH_ALPHA("19indexFuncSmallIndexI", emu_index_func_small, L_SMALL),
    EACH_ALPHA("19indexFuncLargeIndexI", emu_index_func_large, L_LARGE),
    EACH_ALPHA("19indexFuncLargeIndexI", emu_index_func_large, L_LARGE64),
    E("35EmbeddingBag_updateOutputKernel_maxI", emu_embedding_bag, L_EB_MAX_L),
    E("35EmbeddingBag_updateOutputKernel_maxI", emu_embedding_bag, L_EB_MAX_I),
    E("40EmbeddingBag_updateOutputKernel_sum_meanI", emu_embedding_bag, L_EB_SUM_L),
    E("40EmbeddingBag_updateOutputKernel_sum_meanI", emu_embedding_bag, L_EB_SUM_I),
    { NULL, NULL, 0, NULL },
};
