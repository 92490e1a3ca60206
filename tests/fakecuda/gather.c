/* gather.c: host emulations of PyTorch's index kernels for the runtime test double: the
 * vectorized gather of IndexKernelUtils.cu (2.8+: index_select, nn.Embedding and x[idx] with
 * rows of 1 KiB and more) and indexSelectSmallIndex / indexSelectLargeIndex of Indexing.cu
 * (TensorInfo arguments). Each copies the selected rows as the kernel does and, for an id out of
 * range, queues the device's assert line with the kernel's own condition text and returns
 * cudaErrorAssert, which poisons the context as on a GPU. File:line in those lines are nominal.
 *
 * fakecudart.c picks an entry of fk_index_emulators by a substring of the mangled name and runs
 * it only when the parameter sizes read from the name (sig.c) match the entry's layout. The id
 * type (int32 or int64) comes from the template arguments; rows are copied for element types
 * whose size the name gives (float, double, integers), other types only check the ids.
 * Runs on the launching thread; no state. Tested by tests/fakecuda/test_index_kernels.sh and,
 * through real torch, tests/torch-fake/test_index.sh.
 */
#include "fakecudart.h"

#include <string.h>

#define INDEXING_CU "/pytorch/aten/src/ATen/native/cuda/Indexing.cu"
#define INDEX_UTILS_CU "/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu"

/* Size of a builtin type code of the name's template arguments; 0 when not known. */
static size_t code_size(const char *c)
{
    if (!strcmp(c, "f") || !strcmp(c, "i") || !strcmp(c, "j")) return 4;
    if (!strcmp(c, "d") || !strcmp(c, "l") || !strcmp(c, "m") || !strcmp(c, "x") || !strcmp(c, "y")) return 8;
    if (!strcmp(c, "h") || !strcmp(c, "a") || !strcmp(c, "b") || !strcmp(c, "c")) return 1;
    if (!strcmp(c, "s") || !strcmp(c, "t")) return 2;
    return 0;
}

/* An id as the kernel reads it: int32 or int64, sign-extended. */
static int read_id(const void *base, int64_t elem, int is64, const fk_region_t *r, int64_t *out)
{
    const char *p = (const char *)base + elem * (is64 ? 8 : 4);
    if (!fk_inside(r, p, is64 ? 8 : 4)) return -1;
    if (is64) {
        memcpy(out, p, 8);
    } else {
        int32_t v;
        memcpy(&v, p, 4);
        *out = v;
    }
    return 0;
}

/* ---- vectorized_gather_kernel<Alignment, index_t>(char *out, char *inp, index_t *idx,
 * int num_ind, int64_t slice_size, int64_t ind_dim_size, int64_t inp_stride, int64_t
 * out_stride, bool allow_neg_indices): block x handles id x; sizes and strides in bytes. */
static cudaError_t emu_vectorized_gather(const fk_launch_t *l)
{
    const fk_sig_t *s = l->sig;
    if (s->n_targs < 2) return cudaSuccess;
    const int is64 = code_size(s->targ[1]) == 8;
    if (!is64 && strcmp(s->targ[1], "i") != 0) return cudaSuccess;
    char *out, *inp;
    const void *idx;
    int num_ind;
    int64_t slice, dim_size, inp_stride, out_stride;
    unsigned char neg;
    memcpy(&out, l->args[0], 8);
    memcpy(&inp, l->args[1], 8);
    memcpy(&idx, l->args[2], 8);
    memcpy(&num_ind, l->args[3], 4);
    memcpy(&slice, l->args[4], 8);
    memcpy(&dim_size, l->args[5], 8);
    memcpy(&inp_stride, l->args[6], 8);
    memcpy(&out_stride, l->args[7], 8);
    memcpy(&neg, l->args[8], 1);
    fk_region_t ri, rin, rout;
    fk_region(idx, &ri);
    fk_region(inp, &rin);
    fk_region(out, &rout);
    int failed = 0;
    for (unsigned b = 0; b < l->grid.x; b++) {
        int64_t ind;
        if (read_id(idx, b, is64, &ri, &ind)) return cudaErrorIllegalAddress;
        if (neg) ind = ind < 0 ? ind + dim_size : ind;
        if (!(ind >= 0 && ind < dim_size)) {
            const unsigned blk[3] = { b, 0, 0 }, th[3] = { 0, 0, 0 };
            fk_device_assert(INDEX_UTILS_CU, 37, "vectorized_gather_kernel", blk, th,
                             "ind >=0 && ind < ind_dim_size && \"vectorized gather kernel index out of bounds\"");
            failed = 1;
            continue;
        }
        if (failed || slice <= 0) continue;
        const char *from = inp + ind * inp_stride;
        char *to = out + (int64_t)b * out_stride;
        if (!fk_inside(&rin, from, (size_t)slice) || !fk_inside(&rout, to, (size_t)slice)) return cudaErrorIllegalAddress;
        memmove(to, from, (size_t)slice);
    }
    (void)num_ind;
    return failed ? cudaErrorAssert : cudaSuccess;
}

/* ---- at::cuda::detail::TensorInfo<T, IndexType>: data, sizes[25], strides[25], dims. */
typedef struct tinfo {
    char *data;
    uint64_t sizes[25], strides[25];
    int dims;
} tinfo_t;

static tinfo_t tinfo(const void *arg, int wide)
{
    tinfo_t t;
    memset(&t, 0, sizeof t);
    const char *p = arg;
    memcpy(&t.data, p, 8);
    for (int k = 0; k < 25; k++) {
        if (wide) {
            memcpy(&t.sizes[k], p + 8 + 8 * k, 8);
            memcpy(&t.strides[k], p + 208 + 8 * k, 8);
        } else {
            uint32_t a, b;
            memcpy(&a, p + 8 + 4 * k, 4);
            memcpy(&b, p + 108 + 4 * k, 4);
            t.sizes[k] = a;
            t.strides[k] = b;
        }
    }
    memcpy(&t.dims, p + (wide ? 408 : 208), 4);
    if (t.dims < 1 || t.dims > 25) t.dims = 1;
    return t;
}

/* IndexToOffset<..., -1>::get: the element offset of a linear index (the select dimension has
 * size 1 in dst and src, as index_select sets it up). */
static uint64_t to_offset(uint64_t linear, const tinfo_t *t)
{
    uint64_t off = 0;
    for (int d = t->dims - 1; d >= 0; d--) {
        uint64_t sz = t->sizes[d] ? t->sizes[d] : 1;
        off += (linear % sz) * t->strides[d];
        linear /= sz;
    }
    return off;
}

typedef struct isel {
    tinfo_t dst, src, ind;
    int dst_dim, src_dim;
    uint64_t total, inner;
    int64_t select_size;
    int wide, is64;
    size_t elem; /* 0: element type unknown, ids checked only */
    fk_region_t rd, rs, ri;
} isel_t;

/* Reads the common arguments; 0 when the launch is not one this file emulates. */
static int isel_read(const fk_launch_t *l, int large, isel_t *x)
{
    const fk_sig_t *s = l->sig;
    if (s->n_targs < 3) return 0;
    x->wide = code_size(s->targ[2]) == 8;
    x->is64 = code_size(s->targ[1]) == 8;
    if (!x->is64 && strcmp(s->targ[1], "i") != 0) return 0;
    x->elem = code_size(s->targ[0]);
    x->dst = tinfo(l->args[0], x->wide);
    x->src = tinfo(l->args[1], x->wide);
    x->ind = tinfo(l->args[2], x->wide);
    memcpy(&x->dst_dim, l->args[3], 4);
    memcpy(&x->src_dim, l->args[4], 4);
    int a = 5;
    x->total = 0;
    if (large) {
        x->total = 0;
        memcpy(&x->total, l->args[a++], x->wide ? 8 : 4);
    }
    x->inner = 0;
    memcpy(&x->inner, l->args[a++], x->wide ? 8 : 4);
    memcpy(&x->select_size, l->args[a], 8);
    if (x->dst_dim < 0 || x->dst_dim > 24 || x->src_dim < 0 || x->src_dim > 24) return 0;
    fk_region(x->dst.data, &x->rd);
    fk_region(x->src.data, &x->rs);
    fk_region(x->ind.data, &x->ri);
    return 1;
}

/* One element: the id of dst_index, its check (the kernel's `srcIndex < srcSelectDimSize` on the
 * unsigned IndexType), then the copy. 1: assert, -1: bad access, 0: fine. */
static int isel_one(const isel_t *x, uint64_t dst_index, uint64_t elem_in_slice)
{
    int64_t raw;
    if (read_id(x->ind.data, (int64_t)to_offset(dst_index, &x->ind), x->is64, &x->ri, &raw)) return -1;
    uint64_t src_index = x->wide ? (uint64_t)raw : (uint64_t)(uint32_t)raw;
    if (!(src_index < (uint64_t)x->select_size)) return 1;
    if (!x->elem) return 0;
    uint64_t d = to_offset(elem_in_slice, &x->dst) + dst_index * x->dst.strides[x->dst_dim];
    uint64_t s = to_offset(elem_in_slice, &x->src) + src_index * x->src.strides[x->src_dim];
    char *to = x->dst.data + d * x->elem;
    const char *from = x->src.data + s * x->elem;
    if (!fk_inside(&x->rd, to, x->elem) || !fk_inside(&x->rs, from, x->elem)) return -1;
    memmove(to, from, x->elem);
    return 0;
}

static void coords(const fk_launch_t *l, uint64_t i, unsigned b[3], unsigned th[3])
{
    const uint64_t per = (uint64_t)l->grid.x * l->block.x;
    const uint64_t g = per ? i % per : 0;
    b[0] = (unsigned)(l->block.x ? g / l->block.x : 0); b[1] = b[2] = 0;
    th[0] = (unsigned)(l->block.x ? g % l->block.x : 0); th[1] = th[2] = 0;
}

/* indexSelectSmallIndex<T, IndicesType, IndexType, DstDim, SrcDim, IdxDim>(dst, src, indices,
 * int dstSelectDim, int srcSelectDim, IndexType innerSize, int64_t srcSelectDimSize): every
 * thread walks all ids, so the first bad one asserts in thread 0 of block 0 (among others). */
static cudaError_t emu_select_small(const fk_launch_t *l)
{
    isel_t x;
    if (!isel_read(l, 0, &x)) return cudaSuccess;
    for (uint64_t di = 0; di < x.ind.sizes[0]; di++)
        for (uint64_t e = 0; e < (x.inner ? x.inner : 1); e++) {
            int r = isel_one(&x, di, e);
            if (r < 0) return cudaErrorIllegalAddress;
            if (r > 0) {
                const unsigned b[3] = { 0, 0, 0 }, th[3] = { 0, 0, 0 };
                fk_device_assert(INDEXING_CU, 1207, "indexSelectSmallIndex", b, th, "srcIndex < srcSelectDimSize");
                return cudaErrorAssert;
            }
        }
    return cudaSuccess;
}

/* indexSelectLargeIndex<..., bool IndexIsMajor>(dst, src, indices, int dstSelectDim,
 * int srcSelectDim, IndexType totalSize, IndexType innerSize, int64_t srcSelectDimSize): one
 * element per linear index of a grid-stride loop. */
static cudaError_t emu_select_large(const fk_launch_t *l)
{
    isel_t x;
    if (!isel_read(l, 1, &x)) return cudaSuccess;
    const int major = strstr(l->name, "Lb1EE") != NULL;
    const uint64_t n_ind = x.ind.sizes[0] ? x.ind.sizes[0] : 1, inner = x.inner ? x.inner : 1;
    int failed = 0;
    for (uint64_t li = 0; li < x.total; li++) {
        uint64_t di = major ? li / inner : li % n_ind;
        uint64_t e = major ? li % inner : li / n_ind;
        int r = isel_one(&x, di, e);
        if (r < 0) return cudaErrorIllegalAddress;
        if (r > 0) {
            unsigned b[3], th[3];
            coords(l, li, b, th);
            if (!failed)
                fk_device_assert(INDEXING_CU, 1251, "indexSelectLargeIndex", b, th, "srcIndex < srcSelectDimSize");
            failed = 1;
        }
    }
    return failed ? cudaErrorAssert : cudaSuccess;
}

/* Layouts (parameter sizes in bytes) from the wheels' cubins (tests/wheels/). */
static const size_t L_VGATHER[] = { 8, 8, 8, 4, 8, 8, 8, 8, 1 };
static const size_t L_SMALL[] = { 216, 216, 216, 4, 4, 4, 8 };
static const size_t L_LARGE[] = { 216, 216, 216, 4, 4, 4, 4, 8 };
static const size_t L_LARGE64[] = { 416, 416, 416, 4, 4, 8, 8, 8 };

#define E(sub, fn, layout) { sub, fn, (int)(sizeof layout / sizeof layout[0]), layout }
const fk_emulator_t fk_index_emulators[] = {
    E("24vectorized_gather_kernelI", emu_vectorized_gather, L_VGATHER),
    E("21indexSelectSmallIndexI", emu_select_small, L_SMALL),
    E("21indexSelectLargeIndexI", emu_select_large, L_LARGE),
    E("21indexSelectLargeIndexI", emu_select_large, L_LARGE64),
    { NULL, NULL, 0, NULL },
};
