/* test_decode.c: unit tests of src/kernels/decode.c, decode_dtype.c and decode_rewrite.c. Every
 * built-in spec decodes an args[] array built by hand from the layouts in pytorch-kernels.md
 * (positions written here, not taken from the spec), each parameter in its own exactly-sized
 * heap block filled with 0xAB so that a wrong width or offset reads garbage (and ASan catches a
 * read past a parameter). Also: the sanity checks (negative/absurd counts, NULL target, bad
 * accessor, n_classes <= 0 note) and lg_decode_rewrite (new target pointer, contiguous strides,
 * ignore_index width).
 * Run: make build/tests/unit/test_decode && build/tests/unit/test_decode
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

enum { ACC_NONE, ACC_PTA64_3, ACC_THC_1, ACC_THC_3 };
enum { CNT_PARAM, CNT_ONE, CNT_ACC, CNT_GRID };

typedef struct kcase {
    const char *spec;
    const char *sizes;     /* parameter sizes, from pytorch-kernels.md */
    int target;            /* parameter holding the pointer (offset 0 in every layout) */
    int acc;               /* ACC_*: the target is an accessor passed by value */
    int cnt, cnt_p, cnt_w; /* CNT_*; for CNT_PARAM the parameter and its width */
    int grid_nelem, grid_bps; /* CNT_GRID: parameters (int) */
    int nc_p, nc_off, nc_w;   /* n_classes */
    int ig_p, ig_w;           /* ignore_index */
    bool from_template;
    bool truncate;
} kcase_t;

/* The two steps a launch takes: the dtype once per kernel (classify.c), then each launch. */
static int decode_named(const lg_spec_t *s, const char *mangled, void **args, const unsigned grid[3], lg_target_t *t,
                        char *why, size_t why_len)
{
    lg_dtype_t dtype;
    if (lg_decode_dtype(s, mangled, &dtype, why, why_len) != 0)
        return -1;
    return lg_decode(s, dtype, args, grid, t, why, why_len);
}

static const kcase_t cases[] = {
    /* Loss.cu >= 1.13 (§2.1-2.6) */
    {"nll_loss_forward_no_reduce_cuda_kernel", "8,40,8,8,8,8,8", 2, ACC_NONE, CNT_PARAM, 0, 8, 0, 0, 5, 0, 8, 6, 8, true, false},
    {"nll_loss_forward_reduce_cuda_kernel_1d", "8,8,8,8,8,1,8,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 8, 7, 8, true, false},
    {"nll_loss_forward_reduce_cuda_kernel_2d", "8,8,8,8,8,1,8,8,8,8", 3, ACC_NONE, CNT_PARAM, 6, 8, 0, 0, 8, 0, 8, 9, 8, true, false},
    {"nll_loss_backward_no_reduce_cuda_kernel", "4,8,24,40,8,8,8", 1, ACC_NONE, CNT_PARAM, 0, 4, 0, 0, 5, 0, 8, 6, 8, true, false},
    {"nll_loss_backward_reduce_cuda_kernel_1d", "8,8,8,8,8,1,8,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 8, 7, 8, true, false},
    {"nll_loss_backward_reduce_cuda_kernel_2d", "8,8,8,8,8,1,4,4,8,8", 2, ACC_NONE, CNT_PARAM, 6, 4, 0, 0, 8, 0, 8, 9, 8, true, false},
    /* Loss.cu 1.10-1.12 (§2.7) */
    {"nll_loss_forward_no_reduce_cuda_kernel:1.10-1.12", "8,40,8,8,8,4,4", 2, ACC_NONE, CNT_PARAM, 0, 8, 0, 0, 5, 0, 4, 6, 4, true, true},
    {"nll_loss_forward_reduce_cuda_kernel_1d:1.10-1.12", "8,8,8,8,8,1,4,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 4, 7, 8, true, true},
    {"nll_loss_forward_reduce_cuda_kernel_2d:1.10-1.12", "8,8,8,8,8,1,4,4,4,8", 3, ACC_NONE, CNT_PARAM, 6, 4, 0, 0, 8, 0, 4, 9, 8, true, true},
    {"nll_loss_backward_no_reduce_cuda_kernel:1.10-1.12", "4,8,24,40,8,4,4", 1, ACC_NONE, CNT_PARAM, 0, 4, 0, 0, 5, 0, 4, 6, 4, true, true},
    {"nll_loss_backward_reduce_cuda_kernel_1d:1.10-1.12", "8,8,8,8,8,1,4,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 4, 7, 8, true, true},
    {"nll_loss_backward_reduce_cuda_kernel_2d:1.10-1.12", "8,8,8,8,8,1,4,4,4,8", 2, ACC_NONE, CNT_PARAM, 6, 4, 0, 0, 8, 0, 4, 9, 8, true, true},
    /* NLLLoss2d.cu (§3): n_classes of the no_reduce kernels is the input's sizes_[1] (+16) */
    {"nll_loss2d_forward_no_reduce_kernel", "8,72,56,56,8,8", 2, ACC_PTA64_3, CNT_ACC, 0, 0, 0, 0, 1, 16, 8, 5, 8, false, false},
    {"nll_loss2d_forward_kernel", "8,8,8,8,8,4,4,4,8", 3, ACC_NONE, CNT_GRID, 0, 0, 6, 7, 5, 0, 4, 8, 8, false, false},
    {"nll_loss2d_backward_no_reduce_kernel", "8,56,56,72,8,8", 1, ACC_PTA64_3, CNT_ACC, 0, 0, 0, 0, 3, 16, 8, 5, 8, false, false},
    {"nll_loss2d_backward_kernel", "8,8,8,8,8,1,4,4,4,8", 2, ACC_NONE, CNT_GRID, 0, 0, 7, 8, 6, 0, 4, 9, 8, false, false},
    /* NLLLoss2d.cu >= 2.14, int64 index_t: n_classes and map_nelem are int64 (tests/wheels/) */
    {"nll_loss2d_backward_kernel:index64", "8,8,8,8,8,1,8,8,4,8", 2, ACC_NONE, CNT_GRID, 0, 0, 7, 8, 6, 0, 8, 9, 8, false, false},
    /* THCUNN (§4); THCDeviceTensor<T,4>: size_[1] at +28 */
    {"cunn_ClassNLLCriterion_updateOutput_kernel1", "8,8,8,8,8,4,4,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 4, 7, 8, false, true},
    {"ClassNLLCriterion_updateOutput_no_reduce_kernel", "4,24,16,16,8,4,4", 2, ACC_THC_1, CNT_ACC, 0, 0, 0, 0, 5, 0, 4, 6, 4, false, true},
    {"cunn_ClassNLLCriterion_updateOutput_kernel", "8,8,8,8,8,4,4,4,4,8", 3, ACC_NONE, CNT_PARAM, 6, 4, 0, 0, 8, 0, 4, 9, 8, false, true},
    {"ClassNLLCriterion_updateGradInput_no_reduce_kernel", "4,16,16,24,8,4,4", 1, ACC_THC_1, CNT_ACC, 0, 0, 0, 0, 5, 0, 4, 6, 4, false, true},
    {"cunn_ClassNLLCriterion_updateGradInput_kernel1", "8,8,8,8,8,4,4,8", 3, ACC_NONE, CNT_ONE, 0, 0, 0, 0, 6, 0, 4, 7, 8, false, true},
    {"cunn_ClassNLLCriterion_updateGradInput_kernel", "8,8,8,8,8,4,4,4,4,8", 2, ACC_NONE, CNT_PARAM, 6, 4, 0, 0, 8, 0, 4, 9, 8, false, true},
    {"SpatialClassNLLCriterion_updateOutput_no_reduce_kernel", "8,40,32,32,8,8", 2, ACC_THC_3, CNT_ACC, 0, 0, 0, 0, 1, 28, 4, 5, 8, false, true},
    {"SpatialClassNLLCriterion_updateGradInput_no_reduce_kernel", "8,32,32,40,8,8", 1, ACC_THC_3, CNT_ACC, 0, 0, 0, 0, 3, 28, 4, 5, 8, false, true},
    {"cunn_SpatialClassNLLCriterion_updateOutput_kernel", "8,8,8,8,8,4,4,4,4,4,8", 3, ACC_NONE, CNT_GRID, 0, 0, 8, 9, 7, 0, 4, 10, 8, false, true},
    {"cunn_SpatialClassNLLCriterion_updateGradInput_kernel", "8,8,8,8,8,4,4,4,4,4,8", 2, ACC_NONE, CNT_GRID, 0, 0, 8, 9, 7, 0, 4, 10, 8, false, true},
};

/* The index kernels (target_kind=ids), tested by test_ids_builtins below. */
#define N_NAMED_ID_SPECS 4
#define N_ID_SPECS (N_NAMED_ID_SPECS + 15) /* + the closure kernels (test_closure_builtins) */
/* The named index kernels (index_add_, nn.EmbeddingBag), tested by test_named_index below. */
#define N_NAMED_SPECS 19
/* BCE's probability input (target_kind=range): 2 kernels x 4 dtypes, std::array and
 * at::detail::Array data arrays (test_range_builtins). */
/* MultiMarginLoss forward and backward (class-index targets, no ignore_index), test_margin_specs. */
#define N_MARGIN_SPECS 6
#define N_ASSERT_SPECS 1 /* _assert_async_cuda_kernel: decoded by asserts.c (test_asserts.c) */
#define N_UNPOOL_SPECS   1 /* max_unpooling2d_forward_kernel (test_unpool_bound) */
#define N_BERNOULLI_SPECS 12 /* torch.bernoulli's p in its TensorInfo (test_bernoulli_tensorinfo) */
#define N_RENORM_SPECS 1 /* embedding_renorm_wrap_indices_kernel (torch-fake/test_renorm.sh) */
#define N_PROBS_SPECS    8 /* torch.multinomial: renormRowsL1, the sampling kernel; 4 dtypes each (test_probs_key) */
#define N_RANGE_SPECS 20 /* 8 + 8 for the at::detail::Array releases + 4 strided closures */

typedef struct built {
    int n;
    int sizes[LG_MAX_PARAMS];
    void *args[LG_MAX_PARAMS];
} built_t;

static void build(built_t *b, const char *sizes)
{
    char **parts = g_strsplit(sizes, ",", -1);
    b->n = 0;
    for (char **p = parts; *p; p++) {
        b->sizes[b->n] = atoi(*p);
        b->args[b->n] = g_malloc((gsize)b->sizes[b->n]); /* exact size: ASan sees over-reads */
        memset(b->args[b->n], 0xAB, (size_t)b->sizes[b->n]);
        b->n++;
    }
    g_strfreev(parts);
}

static void unbuild(built_t *b)
{
    for (int i = 0; i < b->n; i++)
        g_free(b->args[i]);
}

static void put(built_t *b, int p, int off, int w, int64_t v)
{
    g_assert_cmpint(off + w, <=, b->sizes[p]);
    if (w == 4) {
        int32_t x = (int32_t)v;
        memcpy((char *)b->args[p] + off, &x, 4);
    } else {
        memcpy((char *)b->args[p] + off, &v, 8);
    }
}

static const lg_spec_t *spec_named(const char *name)
{
    for (int i = 0; i < lg_registry_count(); i++)
        if (strcmp(lg_registry_get(i)->name, name) == 0)
            return lg_registry_get(i);
    g_test_message("no spec %s", name);
    g_assert_not_reached();
    return NULL;
}

static void test_every_builtin(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), ==,
                    (int)G_N_ELEMENTS(cases) + N_ID_SPECS + N_NAMED_SPECS + N_RANGE_SPECS + N_MARGIN_SPECS +
                        N_ASSERT_SPECS + N_PROBS_SPECS + N_UNPOOL_SPECS + N_BERNOULLI_SPECS + N_RENORM_SPECS);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const kcase_t *k = &cases[i];
        g_test_message("spec %s", k->spec);
        const lg_spec_t *s = spec_named(k->spec);
        built_t b;
        build(&b, k->sizes);
        const uint64_t ptr = 0x7f0012345600ull + i * 0x100;
        const int64_t nc = 1000 + (int64_t)i, ig = -100 - (int64_t)i;
        put(&b, k->target, 0, 8, (int64_t)ptr);
        int64_t want_count = 0;
        int want_ndim = 1;
        int64_t want_sizes[3] = {0}, want_strides[3] = {0};
        unsigned grid[3] = {12, 1, 1};
        switch (k->acc) {
        case ACC_PTA64_3: /* sizes_ at 8, strides_ at 32, int64 (§6.1) */
            for (int d = 0; d < 3; d++) {
                want_sizes[d] = 2 + d;
                want_strides[d] = 100 * (d + 1);
                put(&b, k->target, 8 + 8 * d, 8, want_sizes[d]);
                put(&b, k->target, 32 + 8 * d, 8, want_strides[d]);
            }
            want_ndim = 3;
            break;
        case ACC_THC_1: /* stride_ at 8, size_ at 12, int (§6.3) */
            want_sizes[0] = 17;
            want_strides[0] = 3;
            put(&b, k->target, 12, 4, 17);
            put(&b, k->target, 8, 4, 3);
            break;
        case ACC_THC_3: /* stride_ at 8/12/16, size_ at 20/24/28 */
            for (int d = 0; d < 3; d++) {
                want_sizes[d] = 5 - d;
                want_strides[d] = 7 + d;
                put(&b, k->target, 20 + 4 * d, 4, want_sizes[d]);
                put(&b, k->target, 8 + 4 * d, 4, want_strides[d]);
            }
            want_ndim = 3;
            break;
        }
        switch (k->cnt) {
        case CNT_PARAM:
            want_count = 4242 + (int64_t)i;
            put(&b, k->cnt_p, 0, k->cnt_w, want_count);
            break;
        case CNT_ONE:
            want_count = 1;
            break;
        case CNT_ACC:
            want_count = want_sizes[0] * (want_ndim == 3 ? want_sizes[1] * want_sizes[2] : 1);
            break;
        case CNT_GRID: /* 12 blocks, 3 per sample: 4 samples of 65 labels */
            put(&b, k->grid_nelem, 0, b.sizes[k->grid_nelem], 65); /* int, or int64 (>= 2.14) */
            put(&b, k->grid_bps, 0, 4, 3);
            want_count = 4 * 65;
            break;
        }
        if (k->acc == ACC_NONE) {
            want_sizes[0] = want_count;
            want_strides[0] = 1;
        }
        put(&b, k->nc_p, k->nc_off, k->nc_w, nc);
        put(&b, k->ig_p, 0, k->ig_w, ig);

        /* the template argument gives the dtype when the spec says so, else it is ignored */
        const char *m_long = "_Z1kIflEvv", *m_byte = "_Z1kIfhEvv";
        for (int variant = 0; variant < 2; variant++) {
            lg_target_t t;
            char why[256];
            int rc = decode_named(s, variant ? m_byte : m_long, b.args, grid, &t, why, sizeof why);
            if (rc)
                g_test_message("why: %s", why);
            g_assert_cmpint(rc, ==, 0);
            g_assert_cmpstr(why, ==, "");
            g_assert_cmpuint(t.data, ==, ptr);
            g_assert_cmpint(t.dtype, ==, (k->from_template && variant) ? LG_DTYPE_UINT8 : LG_DTYPE_INT64);
            g_assert_cmpint(t.count, ==, want_count);
            g_assert_cmpint(t.ndim, ==, want_ndim);
            for (int d = 0; d < want_ndim; d++) {
                g_assert_cmpint(t.sizes[d], ==, want_sizes[d]);
                g_assert_cmpint(t.strides[d], ==, want_strides[d]);
            }
            g_assert_cmpint(t.n_classes, ==, nc);
            g_assert_cmpint(t.has_ignore_index, ==, 1);
            g_assert_cmpint(t.ignore_index, ==, ig);
            g_assert_cmpint(t.truncate_to_int32, ==, k->truncate);
        }

        /* mask: a copy with a new pointer (and contiguous strides), original untouched */
        lg_args_copy_t copy;
        g_assert_cmpint(lg_decode_rewrite(s, b.args, 0xdead0000ull, true, 255, &copy), ==, 0);
        lg_target_t t2;
        char why[256];
        g_assert_cmpint(decode_named(s, "_Z1kIflEvv", copy.args, grid, &t2, why, sizeof why), ==, 0);
        g_assert_cmpuint(t2.data, ==, 0xdead0000ull);
        g_assert_cmpint(t2.ignore_index, ==, 255);
        g_assert_cmpint(t2.count, ==, want_count);
        g_assert_cmpint(t2.n_classes, ==, nc);
        if (want_ndim == 3) {
            g_assert_cmpint(t2.strides[2], ==, 1);
            g_assert_cmpint(t2.strides[1], ==, want_sizes[2]);
            g_assert_cmpint(t2.strides[0], ==, want_sizes[1] * want_sizes[2]);
        } else if (k->acc != ACC_NONE) {
            g_assert_cmpint(t2.strides[0], ==, 1);
        }
        uint64_t orig;
        memcpy(&orig, b.args[k->target], 8);
        g_assert_cmpuint(orig, ==, ptr);
        for (int p = 0; p < b.n; p++) /* untouched parameters are shared, not copied */
            if (p != k->target && p != k->ig_p)
                g_assert_true(copy.args[p] == b.args[p]);
        if (k->ig_w == 4) /* a 4-byte ignore_index cannot take a value beyond int32 */
            g_assert_cmpint(lg_decode_rewrite(s, b.args, 1, true, INT64_C(1) << 40, &copy), ==, -1);
        unbuild(&b);
    }
}

static const lg_spec_t *fwd2d(void)
{
    lg_registry_init_with(NULL, NULL);
    return spec_named("nll_loss_forward_reduce_cuda_kernel_2d");
}

static void test_sanity_checks(void)
{
    const lg_spec_t *s = fwd2d();
    built_t b;
    build(&b, "8,8,8,8,8,1,8,8,8,8");
    unsigned grid[3] = {1, 1, 1};
    lg_target_t t;
    char why[256];
    put(&b, 3, 0, 8, 0x1000);
    put(&b, 8, 0, 8, 10);
    put(&b, 9, 0, 8, -100);

    put(&b, 6, 0, 8, -5); /* negative count */
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "label count -5"));
    put(&b, 6, 0, 8, INT64_C(1) << 50); /* absurd count */
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "not plausible"));

    put(&b, 6, 0, 8, 7);
    put(&b, 8, 0, 8, 0); /* n_classes 0: decoded, with a note */
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.n_classes, ==, 0);
    g_assert_nonnull(strstr(why, "n_classes is 0"));
    put(&b, 8, 0, 8, -3);
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_nonnull(strstr(why, "n_classes is -3"));
    put(&b, 8, 0, 8, 10);

    put(&b, 3, 0, 8, 0); /* NULL labels */
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "target pointer is NULL"));
    put(&b, 6, 0, 8, 0); /* ... but no labels at all is fine */
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 0);
    put(&b, 3, 0, 8, 0x1000);
    put(&b, 6, 0, 8, 7);

    /* label type from a template argument the kernels never use */
    g_assert_cmpint(decode_named(s, "_Z1kIffEvv", b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "label type unknown"));
    g_assert_cmpint(decode_named(s, NULL, b.args, grid, &t, why, sizeof why), ==, -1);

    /* a NULL slot in args[] */
    void *saved = b.args[8];
    b.args[8] = NULL;
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "argument 8"));
    b.args[8] = saved;
    g_assert_cmpint(decode_named(s, "_Z1kIflEvv", NULL, grid, &t, why, sizeof why), ==, -1);
    unbuild(&b);

    /* accessor with a negative size; grid map with blocks_per_sample 0 */
    const lg_spec_t *a = spec_named("nll_loss2d_forward_no_reduce_kernel");
    build(&b, "8,72,56,56,8,8");
    put(&b, 2, 0, 8, 0x2000);
    for (int d = 0; d < 3; d++)
        put(&b, 2, 32 + 8 * d, 8, 1);
    put(&b, 2, 8, 8, 2);
    put(&b, 2, 16, 8, -1);
    put(&b, 2, 24, 8, 2);
    g_assert_cmpint(decode_named(a, NULL, b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "dim 1 has size -1"));
    put(&b, 2, 16, 8, INT64_C(1) << 30);
    put(&b, 2, 24, 8, INT64_C(1) << 30); /* product overflows the plausible range */
    g_assert_cmpint(decode_named(a, NULL, b.args, grid, &t, why, sizeof why), ==, -1);
    unbuild(&b);

    const lg_spec_t *gm = spec_named("nll_loss2d_forward_kernel");
    build(&b, "8,8,8,8,8,4,4,4,8");
    put(&b, 3, 0, 8, 0x3000);
    put(&b, 6, 0, 4, 9);
    put(&b, 7, 0, 4, 0);
    g_assert_cmpint(decode_named(gm, NULL, b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "blocks_per_sample 0"));
    put(&b, 7, 0, 4, 1);
    g_assert_cmpint(decode_named(gm, NULL, b.args, NULL, &t, why, sizeof why), ==, -1);
    unbuild(&b);
}

static void test_rewrite_limits(void)
{
    const lg_spec_t *s = fwd2d();
    built_t b;
    build(&b, "8,8,8,8,8,1,8,8,8,8");
    lg_args_copy_t copy;
    /* without rewrite_ignore only the target parameter is copied */
    g_assert_cmpint(lg_decode_rewrite(s, b.args, 0x42, false, 0, &copy), ==, 0);
    g_assert_true(copy.args[9] == b.args[9]);
    g_assert_true(copy.args[3] != b.args[3]);
    uint64_t v;
    memcpy(&v, copy.args[3], 8);
    g_assert_cmpuint(v, ==, 0x42);
    g_assert_null(copy.args[10]);
    g_assert_cmpint(lg_decode_rewrite(NULL, b.args, 0x42, false, 0, &copy), ==, -1);
    unbuild(&b);

    /* a kernel without ignore_index cannot have one rewritten */
    lg_spec_t custom;
    char err[256];
    const char *text = "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,8\ntarget=0\ndtype=uint8\ncount=one\n"
                       "n_classes=1,0,8\nignore_index=none\n";
    g_assert_cmpint(lg_spec_parse(text, strlen(text), "t", &custom, 1, err, sizeof err), ==, 1);
    build(&b, "8,8");
    g_assert_cmpint(lg_decode_rewrite(&custom, b.args, 1, true, 255, &copy), ==, -1);
    lg_target_t t;
    unsigned grid[3] = {1, 1, 1};
    put(&b, 0, 0, 8, 0x10);
    g_assert_cmpint(decode_named(&custom, NULL, b.args, grid, &t, err, sizeof err), ==, 0);
    g_assert_cmpint(t.has_ignore_index, ==, 0);
    g_assert_cmpint(t.dtype, ==, LG_DTYPE_UINT8);
    unbuild(&b);
}

/* The index kernels: positions from IndexKernelUtils.cu and Indexing.cu (TensorInfo<T, u32>:
 * sizes[0] at 8, strides[0] at 108; <T, u64>: 8 and 208, pytorch-kernels.md §6.2). The id type
 * is the last template argument of the vectorized gather, the second of indexSelect. */
static void test_ids_builtins(void)
{
    static const struct {
        const char *spec, *sizes, *m_long, *m_int;
        int count_p;       /* -1: the TensorInfo's sizes[0] */
        int info_w;        /* TensorInfo index width (4 or 8), 0 for a plain pointer */
        int bound_p;
        int neg_p;         /* allow_neg_indices (bool), -1 none */
        bool truncate;
    } k[N_NAMED_ID_SPECS] = {
        {"vectorized_gather_kernel", "8,8,8,4,8,8,8,8,1", "_ZN2at6native24vectorized_gather_kernelILi16ElEEvPcS2_PT0_illllb",
         "_ZN2at6native24vectorized_gather_kernelILi16EiEEvPcS2_PT0_illllb", 3, 0, 5, 8, false},
        {"indexSelectSmallIndex", "216,216,216,4,4,4,8", "_Z21indexSelectSmallIndexIfljLi2ELi2ELin2EEvv",
         "_Z21indexSelectSmallIndexIfijLi2ELi2ELin2EEvv", -1, 4, 6, -1, true},
        {"indexSelectLargeIndex", "216,216,216,4,4,4,4,8", "_Z21indexSelectLargeIndexIfljLi2ELi2ELin2ELb1EEvv",
         "_Z21indexSelectLargeIndexIfijLi2ELi2ELin2ELb1EEvv", -1, 4, 7, -1, true},
        {"indexSelectLargeIndex:index64", "416,416,416,4,4,8,8,8", "_Z21indexSelectLargeIndexIflmLin1ELin1ELin1ELb1EEvv",
         "_Z21indexSelectLargeIndexIfimLin1ELin1ELin1ELb1EEvv", -1, 8, 7, -1, false},
    };
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), ==,
                    (int)G_N_ELEMENTS(cases) + N_ID_SPECS + N_NAMED_SPECS + N_RANGE_SPECS + N_MARGIN_SPECS +
                        N_ASSERT_SPECS + N_PROBS_SPECS + N_UNPOOL_SPECS + N_BERNOULLI_SPECS + N_RENORM_SPECS);
    for (int i = 0; i < N_NAMED_ID_SPECS; i++) {
        g_test_message("spec %s", k[i].spec);
        const lg_spec_t *s = spec_named(k[i].spec);
        g_assert_true(s->ids);
        built_t b;
        build(&b, k[i].sizes);
        const uint64_t ptr = 0x7f0055550000ull + (uint64_t)i * 0x100;
        put(&b, 2, 0, 8, (int64_t)ptr);
        int64_t want_count = 37 + i, want_stride = 1;
        if (k[i].count_p >= 0) {
            put(&b, k[i].count_p, 0, 4, want_count);
        } else {
            want_stride = 3;
            put(&b, 2, 8, k[i].info_w, want_count);
            put(&b, 2, k[i].info_w == 4 ? 108 : 208, k[i].info_w, want_stride);
        }
        put(&b, k[i].bound_p, 0, 8, 50257);
        if (k[i].neg_p >= 0)
            memset(b.args[k[i].neg_p], 1, 1);
        unsigned grid[3] = {1, 1, 1};
        for (int variant = 0; variant < 2; variant++) {
            lg_target_t t;
            char why[256];
            int rc = decode_named(s, variant ? k[i].m_int : k[i].m_long, b.args, grid, &t, why, sizeof why);
            if (rc)
                g_test_message("why: %s", why);
            g_assert_cmpint(rc, ==, 0);
            g_assert_cmpuint(t.data, ==, ptr);
            g_assert_cmpint(t.dtype, ==, variant ? LG_DTYPE_INT32 : LG_DTYPE_INT64);
            g_assert_cmpint(t.count, ==, want_count);
            g_assert_cmpint(t.strides[0], ==, want_stride);
            g_assert_cmpint(t.n_classes, ==, 50257);
            g_assert_cmpint(t.has_ignore_index, ==, 0);
            g_assert_cmpint(t.allow_negative, ==, k[i].neg_p >= 0);
            g_assert_cmpint(t.truncate_to_int32, ==, k[i].truncate);
        }
        if (k[i].neg_p >= 0) { /* x[idx] wraps negatives; index_select passes false */
            memset(b.args[k[i].neg_p], 0, 1);
            lg_target_t t;
            char why[256];
            g_assert_cmpint(decode_named(s, k[i].m_long, b.args, grid, &t, why, sizeof why), ==, 0);
            g_assert_cmpint(t.allow_negative, ==, 0);
        }
        unbuild(&b);
    }
}

/* ---- named index kernels: index_add_ / index_reduce_ and nn.EmbeddingBag --------------------
 * Positions from Indexing.cu's indexFuncSmallIndex / indexFuncLargeIndex (TensorInfo dst, src,
 * indices; the bound dstAddDimSize is parameter 6 (small) or 7 (large); alpha, the last
 * parameter, is sizeof T) and EmbeddingBag.cu (ids at 0, numIndices at 5, padding_idx and
 * numRows the last two), with the wheels' mangled names (tests/wheels/2.15.0+cu132.tsv). */
static void test_named_index(void)
{
    static const struct {
        const char *spec, *sizes, *m_long, *m_int;
        int info_w; /* TensorInfo index width: 4 (unsigned int) or 8 (uint64_t) */
        int bound_p;
    } k[] = {
        {"indexFuncSmallIndex:alpha1", "216,216,216,4,4,4,8,8,8,1",
         "_ZN2at6native19indexFuncSmallIndexIaljLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_",
         "_ZN2at6native19indexFuncSmallIndexIaijLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_", 4, 6},
        {"indexFuncSmallIndex:alpha2", "216,216,216,4,4,4,8,8,8,2",
         "_ZN2at6native19indexFuncSmallIndexIsljLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_",
         "_ZN2at6native19indexFuncSmallIndexIsijLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_", 4, 6},
        {"indexFuncSmallIndex", "216,216,216,4,4,4,8,8,8,4",
         "_ZN2at6native19indexFuncSmallIndexIfljLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_",
         "_ZN2at6native19indexFuncSmallIndexIfijLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_", 4, 6},
        {"indexFuncSmallIndex:alpha8", "216,216,216,4,4,4,8,8,8,8",
         "_ZN2at6native19indexFuncSmallIndexIdljLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_",
         "_ZN2at6native19indexFuncSmallIndexIdijLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_llRKT5_S7_", 4, 6},
        {"indexFuncSmallIndex:alpha16", "216,216,216,4,4,4,8,8,8,16",
         "_ZN2at6native19indexFuncSmallIndexIN3c107complexIdEEljLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_llRKT5_SA_",
         "_ZN2at6native19indexFuncSmallIndexIN3c107complexIdEEijLi1ELi1ELin2ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_llRKT5_SA_", 4, 6},
        {"indexFuncLargeIndex:alpha1", "216,216,216,4,4,4,4,8,8,8,1",
         "_ZN2at6native19indexFuncLargeIndexIaljLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIaijLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 4, 7},
        {"indexFuncLargeIndex:alpha2", "216,216,216,4,4,4,4,8,8,8,2",
         "_ZN2at6native19indexFuncLargeIndexIsljLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIsijLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 4, 7},
        {"indexFuncLargeIndex", "216,216,216,4,4,4,4,8,8,8,4",
         "_ZN2at6native19indexFuncLargeIndexIfljLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIfijLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 4, 7},
        {"indexFuncLargeIndex:alpha8", "216,216,216,4,4,4,4,8,8,8,8",
         "_ZN2at6native19indexFuncLargeIndexIdljLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIdijLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 4, 7},
        {"indexFuncLargeIndex:alpha16", "216,216,216,4,4,4,4,8,8,8,16",
         "_ZN2at6native19indexFuncLargeIndexIN3c107complexIdEEljLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_SB_llRKT6_SA_",
         "_ZN2at6native19indexFuncLargeIndexIN3c107complexIdEEijLi1ELi1ELin2ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_SB_llRKT6_SA_", 4, 7},
        {"indexFuncLargeIndex:index64:alpha1", "416,416,416,4,4,8,8,8,8,8,1",
         "_ZN2at6native19indexFuncLargeIndexIalmLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIaimLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 8, 7},
        {"indexFuncLargeIndex:index64:alpha2", "416,416,416,4,4,8,8,8,8,8,2",
         "_ZN2at6native19indexFuncLargeIndexIslmLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIsimLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 8, 7},
        {"indexFuncLargeIndex:index64", "416,416,416,4,4,8,8,8,8,8,4",
         "_ZN2at6native19indexFuncLargeIndexIflmLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIfimLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 8, 7},
        {"indexFuncLargeIndex:index64:alpha8", "416,416,416,4,4,8,8,8,8,8,8",
         "_ZN2at6native19indexFuncLargeIndexIdlmLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_",
         "_ZN2at6native19indexFuncLargeIndexIdimLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS6_IKS7_S8_EENS6_IKT0_S8_EEiiS8_S8_llRKT6_S7_", 8, 7},
        {"indexFuncLargeIndex:index64:alpha16", "416,416,416,4,4,8,8,8,8,8,16",
         "_ZN2at6native19indexFuncLargeIndexIN3c107complexIdEElmLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_SB_llRKT6_SA_",
         "_ZN2at6native19indexFuncLargeIndexIN3c107complexIdEEimLin1ELin1ELin1ELb1ENS0_44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb9ReduceAddEEEvNS_4cuda6detail10TensorInfoIT_T1_EENS9_IKSA_SB_EENS9_IKT0_SB_EEiiSB_SB_llRKT6_SA_", 8, 7},
    };
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), ==,
                    (int)G_N_ELEMENTS(cases) + N_ID_SPECS + N_NAMED_SPECS + N_RANGE_SPECS + N_MARGIN_SPECS +
                        N_ASSERT_SPECS + N_PROBS_SPECS + N_UNPOOL_SPECS + N_BERNOULLI_SPECS + N_RENORM_SPECS);
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        g_test_message("spec %s", k[i].spec);
        const lg_spec_t *s = spec_named(k[i].spec);
        g_assert_true(s->ids);
        g_assert_cmpstr(s->family, ==, "index_add");
        built_t b;
        build(&b, k[i].sizes);
        /* dst and src TensorInfos hold other sizes: a decode of the wrong one shows */
        put(&b, 0, 8, k[i].info_w, 999);
        put(&b, 1, 8, k[i].info_w, 998);
        const uint64_t ptr = 0x7f0066660000ull + (uint64_t)i * 0x100;
        put(&b, 2, 0, 8, (int64_t)ptr);
        put(&b, 2, 8, k[i].info_w, 23 + (int64_t)i);                       /* sizes[0]: the id count */
        put(&b, 2, k[i].info_w == 4 ? 108 : 208, k[i].info_w, 2);          /* strides[0] (a [::2] view) */
        put(&b, 2, k[i].info_w == 4 ? 208 : 408, 4, 1);                    /* dims */
        const int64_t bound = k[i].info_w == 8 ? (INT64_C(1) << 31) + 8 : 10007;
        put(&b, k[i].bound_p, 0, 8, bound);
        put(&b, k[i].bound_p + 1, 0, 8, 77777); /* dstNumel, next to the bound */
        unsigned grid[3] = {4, 1, 1};
        for (int variant = 0; variant < 2; variant++) {
            lg_target_t t;
            char why[256];
            int rc = decode_named(s, variant ? k[i].m_int : k[i].m_long, b.args, grid, &t, why, sizeof why);
            if (rc)
                g_test_message("why: %s", why);
            g_assert_cmpint(rc, ==, 0);
            g_assert_cmpuint(t.data, ==, ptr);
            g_assert_cmpint(t.dtype, ==, variant ? LG_DTYPE_INT32 : LG_DTYPE_INT64);
            g_assert_cmpint(t.count, ==, 23 + (int64_t)i);
            g_assert_cmpint(t.ndim, ==, 1);
            g_assert_cmpint(t.sizes[0], ==, 23 + (int64_t)i);
            g_assert_cmpint(t.strides[0], ==, 2);
            g_assert_cmpint(t.n_classes, ==, bound);
            g_assert_cmpint(t.has_ignore_index, ==, 0);
            g_assert_cmpint(t.allow_negative, ==, 0);
            /* 32-bit index math narrows an id to unsigned int before `dstIndex < dstAddDimSize` */
            g_assert_cmpint(t.truncate_to_int32, ==, k[i].info_w == 4);
        }
        unbuild(&b);
    }

    /* nn.EmbeddingBag: padding_idx is index_t (4 bytes for int32 ids); -1 is padding_idx=None */
    static const struct {
        const char *spec, *sizes, *mangled;
        int pad_p, pad_w, rows_p;
        lg_dtype_t dtype;
    } e[] = {
        {"EmbeddingBag_updateOutputKernel_max", "8,8,8,8,8,8,8,8,8,8,8,8,8,8",
         "_ZN2at6native48_GLOBAL__N__e790c892_15_EmbeddingBag_cu_c8847c2f35EmbeddingBag_updateOutputKernel_maxIflEEvPKT0_"
         "S5_PKT_PS6_PS3_lllllSA_SA_S3_l", 12, 8, 13, LG_DTYPE_INT64},
        {"EmbeddingBag_updateOutputKernel_max:int32", "8,8,8,8,8,8,8,8,8,8,8,8,4,8",
         "_ZN2at6native48_GLOBAL__N__e790c892_15_EmbeddingBag_cu_c8847c2f35EmbeddingBag_updateOutputKernel_maxIN3c104"
         "HalfEiEEvPKT0_S7_PKT_PS8_PS5_lllllSC_SC_S5_l", 12, 4, 13, LG_DTYPE_INT32},
        {"EmbeddingBag_updateOutputKernel_sum_mean", "8,8,8,8,8,8,8,8,8,8,4,8,8,8,8,8",
         "_ZN2at6native48_GLOBAL__N__e790c892_15_EmbeddingBag_cu_c8847c2f40EmbeddingBag_updateOutputKernel_sum_meanIdlEE"
         "vPKT0_S5_PKT_PS6_PS3_llllliSA_S8_lS3_l", 14, 8, 15, LG_DTYPE_INT64},
        {"EmbeddingBag_updateOutputKernel_sum_mean:int32", "8,8,8,8,8,8,8,8,8,8,4,8,8,8,4,8",
         "_ZN2at6native48_GLOBAL__N__e790c892_15_EmbeddingBag_cu_c8847c2f40EmbeddingBag_updateOutputKernel_sum_meanIfiEE"
         "vPKT0_S5_PKT_PS6_PS3_llllliSA_S8_lS3_l", 14, 4, 15, LG_DTYPE_INT32},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(e); i++) {
        g_test_message("spec %s", e[i].spec);
        const lg_spec_t *s = spec_named(e[i].spec);
        g_assert_true(s->ids);
        g_assert_cmpstr(s->family, ==, "embedding_bag");
        /* the sum/mean backward scatters at the caller's ids: mask must not run it on a copy */
        g_assert_cmpint(s->no_mask[0] != 0, ==, strstr(e[i].spec, "sum_mean") != NULL);
        built_t b;
        build(&b, e[i].sizes);
        const uint64_t ptr = 0x7f0077770000ull + (uint64_t)i * 0x100;
        put(&b, 0, 0, 8, (int64_t)ptr);
        put(&b, 1, 0, 8, 0x1234); /* offsets: not the ids */
        put(&b, 5, 0, 8, 41);     /* numIndices */
        put(&b, 6, 0, 8, 7);      /* numBags */
        put(&b, e[i].rows_p, 0, 8, 50000);
        unsigned grid[3] = {1024, 1, 1};
        for (int pad = 0; pad < 2; pad++) {
            put(&b, e[i].pad_p, 0, e[i].pad_w, pad ? 3 : -1);
            lg_target_t t;
            char why[256];
            int rc = decode_named(s, e[i].mangled, b.args, grid, &t, why, sizeof why);
            if (rc)
                g_test_message("why: %s", why);
            g_assert_cmpint(rc, ==, 0);
            g_assert_cmpuint(t.data, ==, ptr);
            g_assert_cmpint(t.dtype, ==, e[i].dtype);
            g_assert_cmpint(t.count, ==, 41);
            g_assert_cmpint(t.strides[0], ==, 1);
            g_assert_cmpint(t.n_classes, ==, 50000);
            g_assert_cmpint(t.has_ignore_index, ==, pad); /* -1: no padding, a -1 id is bad */
            if (pad)
                g_assert_cmpint(t.ignore_index, ==, 3);
            g_assert_cmpint(t.truncate_to_int32, ==, 0);
        }
        /* mask: the ids pointer is replaced, padding_idx stays (the kernel skips it) */
        lg_args_copy_t copy;
        g_assert_cmpint(lg_decode_rewrite(s, b.args, 0xbeef0000ull, false, 0, &copy), ==, 0);
        lg_target_t t2;
        char why[256];
        g_assert_cmpint(decode_named(s, e[i].mangled, copy.args, grid, &t2, why, sizeof why), ==, 0);
        g_assert_cmpuint(t2.data, ==, 0xbeef0000ull);
        g_assert_cmpint(t2.ignore_index, ==, 3);
        g_assert_true(copy.args[1] == b.args[1]);
        uint64_t orig;
        memcpy(&orig, b.args[0], 8);
        g_assert_cmpuint(orig, ==, ptr);
        unbuild(&b);
    }
}

/* no_mask: ids specs only, and its text reaches the spec. */
static void test_no_mask_key(void)
{
    lg_spec_t sp;
    char err[512];
    const char *ok = "[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=ids\nparams=8,8,8\ntarget=0\n"
                     "dtype=int64\ncount=param\ncount_field=1,0,8\nn_classes=2,0,8\nignore_index=1,0,8\n"
                     "no_mask=a later kernel reads the ids\n";
    g_assert_cmpint(lg_spec_parse(ok, strlen(ok), "t", &sp, 1, err, sizeof err), ==, 1);
    g_assert_cmpstr(sp.no_mask, ==, "a later kernel reads the ids");
    const char *labels = "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,8,8\ntarget=0\n"
                         "dtype=int64\ncount=param\ncount_field=1,0,8\nn_classes=2,0,8\nignore_index=1,0,8\n"
                         "no_mask=x\n";
    g_assert_cmpint(lg_spec_parse(labels, strlen(labels), "t", &sp, 1, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, "no_mask: only with target_kind=ids"));
}

/* ---- BCE's probability input (target_kind=range) ------------------------------------------ */

/* The forward kernels of F.binary_cross_entropy, by their real names (tests/wheels/2.15.0+cu132):
 * found with and without runtime parameter sizes (layout_check=match_types), the input read at
 * data[1] of the data array, the dtype the lambda's. The cast variant and the backward are not
 * watched. */
static void test_range_builtins(void)
{
    static const struct {
        const char *mangled, *spec, *sizes;
        lg_dtype_t dtype;
    } k[] = {
        {"_ZN2at6native29vectorized_elementwise_kernelILi2EZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE0_clEvEUlffE_St5arrayIPcLm3EELb0EEEviT0_T1_",
         "vectorized_elementwise_kernel:binary_cross_entropy:float32", "4,1,24", LG_DTYPE_FLOAT32},
        {"_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE_clEvEUlddE_St5arrayIPcLm3EELi4E23TrivialOffsetCalculatorILi2EjESG_ILi1EjENS0_6memory15LoadWithoutCastENSJ_16StoreWithoutCastEEEviT_T0_T2_T3_T4_T5_",
         "unrolled_elementwise_kernel:binary_cross_entropy:float64", "4,1,24,1,1,1,1", LG_DTYPE_FLOAT64},
        {"_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE1_clEvEUlN3c104HalfESD_E_St5arrayIPcLm3EELb1EEEviT0_T1_",
         "vectorized_elementwise_kernel:binary_cross_entropy:float16", "4,1,24", LG_DTYPE_FLOAT16},
        {"_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE2_clEvEUlN3c108BFloat16ESD_E_St5arrayIPcLm3EELi4E23TrivialOffsetCalculatorILi2EjESI_ILi1EjENS0_6memory15LoadWithoutCastENSL_16StoreWithoutCastEEEviT_T0_T2_T3_T4_T5_",
         "unrolled_elementwise_kernel:binary_cross_entropy:bfloat16", "4,1,24,1,1,1,1", LG_DTYPE_BFLOAT16},
    };
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), ==,
                    (int)G_N_ELEMENTS(cases) + N_ID_SPECS + N_NAMED_SPECS + N_RANGE_SPECS + N_MARGIN_SPECS +
                        N_ASSERT_SPECS + N_PROBS_SPECS + N_UNPOOL_SPECS + N_BERNOULLI_SPECS + N_RENORM_SPECS);
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        g_test_message("kernel %s", k[i].spec);
        char why[512] = "";
        const lg_spec_t *s = lg_registry_find(k[i].mangled, NULL, -1, why, sizeof why);
        if (!s)
            g_test_message("why: %s", why);
        g_assert_nonnull(s);
        g_assert_cmpstr(s->name, ==, k[i].spec);
        g_assert_true(s->range);
        g_assert_cmpstr(s->family, ==, "binary_cross_entropy");
        built_t b;
        build(&b, k[i].sizes);
        size_t actual[LG_MAX_PARAMS];
        for (int p = 0; p < b.n; p++)
            actual[p] = (size_t)b.sizes[p];
        g_assert_true(lg_registry_find(k[i].mangled, actual, b.n, why, sizeof why) == s);
        actual[2] = 32; /* a four-operand data array is another kernel */
        g_assert_null(lg_registry_find(k[i].mangled, actual, b.n, why, sizeof why));
        put(&b, 0, 0, 4, 1000 + (int64_t)i);                   /* N */
        put(&b, 2, 0, 8, (int64_t)0x7f0011110000ull);          /* data[0]: the loss */
        put(&b, 2, 8, 8, (int64_t)(0x7f0022220000ull + i * 4)); /* data[1]: the input */
        put(&b, 2, 16, 8, (int64_t)0x7f0033330000ull);         /* data[2]: the target */
        lg_target_t t;
        unsigned grid[3] = {1, 1, 1};
        int rc = decode_named(s, k[i].mangled, b.args, grid, &t, why, sizeof why);
        if (rc)
            g_test_message("why: %s", why);
        g_assert_cmpint(rc, ==, 0);
        g_assert_cmpuint(t.data, ==, 0x7f0022220000ull + i * 4);
        g_assert_cmpint(t.dtype, ==, k[i].dtype);
        g_assert_cmpint(t.count, ==, 1000 + (int64_t)i);
        g_assert_cmpint(t.ndim, ==, 1);
        g_assert_cmpint(t.strides[0], ==, 1);
        g_assert_cmpint(t.has_ignore_index, ==, 0);
        g_assert_cmpint(t.operand, ==, 0);
        /* the kernel asserts the target too: operand 1, data[2], the same count and dtype */
        g_assert_cmpint(lg_decode_targets(s, b.args, why, sizeof why), ==, 2);
        lg_dtype_t dt;
        g_assert_cmpint(lg_decode_dtype(s, k[i].mangled, &dt, why, sizeof why), ==, 0);
        rc = lg_decode_nth(s, dt, b.args, grid, 1, &t, why, sizeof why);
        if (rc)
            g_test_message("why: %s", why);
        g_assert_cmpint(rc, ==, 0);
        g_assert_cmpuint(t.data, ==, 0x7f0033330000ull);
        g_assert_cmpint(t.operand, ==, 1);
        g_assert_cmpint(t.dtype, ==, k[i].dtype);
        g_assert_cmpint(t.count, ==, 1000 + (int64_t)i);
        g_assert_cmpint(t.ndim, ==, 1);
        g_assert_cmpint(t.strides[0], ==, 1);
        /* no third operand; and no masked copy of one operand */
        g_assert_cmpint(lg_decode_nth(s, dt, b.args, grid, 2, &t, why, sizeof why), ==, -1);
        lg_args_copy_t copy;
        g_assert_cmpint(lg_decode_rewrite(s, b.args, 0x1000, false, 0, &copy), ==, -1);
        unbuild(&b);
    }
    char why[512] = "";
    /* mixed dtypes (LoadWithCast) and the backward: not watched */
    g_assert_null(lg_registry_find(
        "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE0_clEvEUlffE_St5arrayIPcLm3EELi4E23TrivialOffsetCalculatorILi2EjESG_ILi1EjENS0_6memory12LoadWithCastILi2EEENSJ_13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_T5_",
        NULL, -1, why, sizeof why));
    g_assert_null(lg_registry_find(
        "_ZN2at6native29vectorized_elementwise_kernelILi2EZZZN37_INTERNAL_6bd09d29_7_Loss_cu_5b0651e139_GLOBAL__N__6bd09d29_7_Loss_cu_5b0651e140binary_cross_entropy_backward_out_kernelERNS_6TensorERKS4_S7_S7_ENKUlvE_clEvENKUlvE0_clEvEUlfffE_St5arrayIPcLm4EELb0EEEviT0_T1_",
        NULL, -1, why, sizeof why));
}

/* target_kind=range: a float dtype, no n_classes or ignore_index; match_types needs the data
 * array in the match. */
static void test_range_key(void)
{
    lg_spec_t sp;
    char err[512];
    const char *ok = "[k]\nmatch=x;St5arrayIPcLm3EE\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,1,24\n"
                     "layout_check=match_types\ntarget=2,8\ndtype=float16\ncount=param\ncount_field=0,0,4\n";
    g_assert_cmpint(lg_spec_parse(ok, strlen(ok), "t", &sp, 1, err, sizeof err), ==, 1);
    g_assert_true(sp.range && sp.unsized_ok);
    g_assert_cmpint(sp.dtype, ==, LG_DTYPE_FLOAT16);
    g_assert_cmpint(sp.n_classes.param, ==, -1);
    const char *bad[][2] = {
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,1,24\ntarget=2,8\ndtype=int64\n"
         "count=param\ncount_field=0,0,4\n",
         "target_kind=range needs a float dtype"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=4,1,24\ntarget=2,8\ndtype=float32\n"
         "count=param\ncount_field=0,0,4\nn_classes=0,0,4\nignore_index=none\n",
         "a float dtype needs target_kind=range"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,1,24\ntarget=2,8\ndtype=float32\n"
         "count=param\ncount_field=0,0,4\nn_classes=0,0,4\n",
         "neither n_classes nor ignore_index"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,1,24\nlayout_check=match_types\n"
         "target=2,8\ndtype=float32\ncount=param\ncount_field=0,0,4\n",
         "match_types needs target_kind=range and the data array"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(lg_spec_parse(bad[i][0], strlen(bad[i][0]), "t", &sp, 1, err, sizeof err), ==, -1);
        g_test_message("err: %s", err);
        g_assert_nonnull(strstr(err, bad[i][1]));
    }
}

/* target_kind=probs (torch.multinomial's renormRowsL1 / sampling kernel): count_field rows of
 * n_classes weights, decoded as one contiguous run of rows x n_classes with the probs rule;
 * no ignore_index, count=param only; a row length of 0 is refused at the launch; match_types
 * takes the sampling kernel's PhiloxCudaState. */
static void test_probs_key(void)
{
    lg_spec_t sp;
    char err[512], why[256] = "";
    const char *ok = "[k]\nmatch=12renormRowsL1IfEE\nfamily=multinomial\ndirection=forward\ntarget_kind=probs\n"
                     "params=8,8,8\ntarget=0\ndtype=float32\ncount=param\ncount_field=1,0,8\nn_classes=2,0,8\n"
                     "no_mask=why not\n";
    g_assert_cmpint(lg_spec_parse(ok, strlen(ok), "t", &sp, 1, err, sizeof err), ==, 1);
    g_assert_true(sp.range && sp.probs);
    g_assert_cmpstr(sp.no_mask, ==, "why not");
    float w[15] = {0};
    uint64_t ptr = (uint64_t)(uintptr_t)w;
    int64_t rows = 3, cols = 5;
    void *args[3] = {&ptr, &rows, &cols};
    unsigned grid[3] = {1, 1, 1};
    lg_target_t t;
    g_assert_cmpint(lg_decode(&sp, LG_DTYPE_FLOAT32, args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 15);
    g_assert_cmpint(t.n_classes, ==, 5);
    g_assert_cmpint(t.ndim, ==, 1);
    g_assert_cmpint(t.strides[0], ==, 1);
    g_assert_cmpint(t.rule, ==, LG_SCAN_RULE_PROBS);
    cols = 0;
    g_assert_cmpint(lg_decode(&sp, LG_DTYPE_FLOAT32, args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "not plausible"));
    const char *philox = "[k]\nmatch=32sampleMultinomialWithReplacementIfEEvNS_15PhiloxCudaState\nfamily=multinomial\n"
                         "direction=forward\ntarget_kind=probs\nparams=32,4,8,8,4,8,8\nlayout_check=match_types\n"
                         "target=6\ndtype=float32\ncount=param\ncount_field=3,0,8\nn_classes=4,0,4\n";
    g_assert_cmpint(lg_spec_parse(philox, strlen(philox), "t", &sp, 1, err, sizeof err), ==, 1);
    g_assert_true(sp.probs && sp.unsized_ok);
    const char *bad[][2] = {
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=probs\nparams=8,8,8\ntarget=0\ndtype=float32\n"
         "count=one\nn_classes=2,0,8\n",
         "target_kind=probs reads count_field rows"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=probs\nparams=8,8,8\ntarget=0\ndtype=float32\n"
         "count=param\ncount_field=1,0,8\nn_classes=2,0,8\nignore_index=1,0,8\n",
         "target_kind=probs has no ignore_index"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=probs\nparams=8,8,8\ntarget=0\ndtype=float32\n"
         "count=param\ncount_field=1,0,8\n",
         "n_classes"},
        {"[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=probs\nparams=8,8,8\ntarget=0\ndtype=int64\n"
         "count=param\ncount_field=1,0,8\nn_classes=2,0,8\n",
         "needs a float dtype"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(lg_spec_parse(bad[i][0], strlen(bad[i][0]), "t", &sp, 1, err, sizeof err), ==, -1);
        g_test_message("err: %s", err);
        g_assert_nonnull(strstr(err, bad[i][1]));
    }
    /* the built-in specs on the kernels of 2.15.0+cu132 (tests/wheels/asserts/), with the
     * sizes its cubins declare and without any (the double) */
    lg_registry_init_with(NULL, NULL);
    const struct {
        const char *mangled, *spec;
        size_t sizes[7];
        int n;
        lg_dtype_t dt;
    } k[] = {
        {"_ZN2at6native59_GLOBAL__N__d0eb2d0f_20_MultinomialKernel_cu_e5d96c45_5647112renormRowsL1IN3c104HalfEEEvPT_ll",
         "renormRowsL1:float16",
         {8, 8, 8},
         3,
         LG_DTYPE_FLOAT16},
        {"_ZN2at6native59_GLOBAL__N__d0eb2d0f_20_MultinomialKernel_cu_e5d96c45_5647112renormRowsL1IfEEvPT_ll",
         "renormRowsL1:float32",
         {8, 8, 8},
         3,
         LG_DTYPE_FLOAT32},
        {"_ZN2at6native59_GLOBAL__N__d0eb2d0f_20_MultinomialKernel_cu_e5d96c45_5647132sampleMultinomialWithReplacementIN3c1"
         "08BFloat16EEEvNS_15PhiloxCudaStateEiPlliPKT_S9_",
         "sampleMultinomialWithReplacement:bfloat16",
         {32, 4, 8, 8, 4, 8, 8},
         7,
         LG_DTYPE_BFLOAT16},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        const lg_spec_t *s = lg_registry_find(k[i].mangled, k[i].sizes, k[i].n, why, sizeof why);
        g_assert_nonnull(s);
        g_assert_cmpstr(s->name, ==, k[i].spec);
        g_assert_true(s == lg_registry_find(k[i].mangled, NULL, -1, why, sizeof why));
        g_assert_cmpint(s->dtype, ==, k[i].dt);
        g_assert_cmpstr(s->family, ==, "multinomial");
    }
    /* the sampling kernel: normDist at param 6, distributions (int64) at 3, categories (int) at 4 */
    const lg_spec_t *smp = spec_named("sampleMultinomialWithReplacement:float32");
    unsigned char philox_state[32] = {0};
    int32_t total = 4, categories = 6;
    int64_t dists = 2;
    uint64_t dest = 0x1000, prefix = 0x2000;
    void *sargs[7] = {philox_state, &total, &dest, &dists, &categories, &prefix, &ptr};
    g_assert_cmpint(lg_decode(smp, LG_DTYPE_FLOAT32, sargs, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 12);
    g_assert_cmpint(t.n_classes, ==, 6);
    g_assert_cmpuint(t.data, ==, ptr);
}

/* n_classes_times: the bound is the product of two fields (max_unpool2d's outputHeight *
 * outputWidth), on the built-in spec with the 2.15 kernel's name; a product past the absurd count
 * is refused; the key needs labels or ids. */
static void test_unpool_bound(void)
{
    char why[256] = "", err[512];
    lg_registry_init_with(NULL, NULL);
    const char *name = "_ZN2at6native30max_unpooling2d_forward_kernelIfEEvlPKT_PKllllllPS2_";
    const lg_spec_t *s = lg_registry_find(name, NULL, -1, why, sizeof why);
    g_assert_nonnull(s);
    g_assert_cmpstr(s->family, ==, "max_unpool2d");
    g_assert_true(s->ids && s->truncate_to_int32);
    int64_t v[9] = {8, 0x1000, 0x2000, 2, 2, 2, 4, 5, 0x3000};
    void *args[9];
    for (int i = 0; i < 9; i++)
        args[i] = &v[i];
    unsigned grid[3] = {1, 1, 1};
    lg_target_t t;
    g_assert_cmpint(lg_decode(s, LG_DTYPE_INT64, args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 8);
    g_assert_cmpint(t.n_classes, ==, 20);
    g_assert_cmpuint(t.data, ==, 0x2000);
    g_assert_false(t.has_ignore_index);
    v[6] = v[7] = INT64_C(1) << 30;
    g_assert_cmpint(lg_decode(s, LG_DTYPE_INT64, args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "not plausible"));
    lg_spec_t sp;
    const char *range = "[k]\nmatch=x;St5arrayIPcLm3EE\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,1,24\n"
                        "layout_check=match_types\ntarget=2,8\ndtype=float32\ncount=param\ncount_field=0,0,4\n"
                        "n_classes_times=0,0,4\n";
    g_assert_cmpint(lg_spec_parse(range, strlen(range), "t", &sp, 1, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, "only with target_kind=labels or ids"));
}

/* torch.bernoulli's p, read from kernelPointwiseApply2's TensorInfo<float, unsigned> (data, 25
 * sizes at 8, 25 strides at 108): every other element of a vector (BDims 1, the count from
 * totalElements, the stride from the TensorInfo), and a transposed matrix (BDims 2, the count
 * from the sizes). The 2.15 kernel's names (torch-fake/test_bernoulli.sh launches them). */
static void test_bernoulli_tensorinfo(void)
{
    char why[256] = "";
    lg_registry_init_with(NULL, NULL);
    const char *one = "_ZN2at4cuda57_GLOBAL__N__4097cdb0_24_DistributionBernoulli_cu_7537a20d21kernelPointwiseApply2IZNS_"
                      "6native9templates4cuda28bernoulli_tensor_cuda_kernelIffEEvRKNS_10TensorBaseES9_NS_15PhiloxCuda"
                      "StateEEUliRfSB_SB_SB_RKfSD_SD_SD_E_fSC_jLi1ELi1ELi4ELi512ELi2EEEvNS0_6detail10TensorInfoIT0_T2_"
                      "EENSG_IT1_SI_EESI_T_";
    const lg_spec_t *s = lg_registry_find(one, NULL, -1, why, sizeof why);
    g_assert_nonnull(s);
    g_assert_cmpstr(s->family, ==, "bernoulli");
    g_assert_true(s->range);
    unsigned char a[216] = {0}, b[216] = {0}, op[32] = {0};
    uint64_t data = 0x7000;
    uint32_t total = 20, size = 20, stride = 2;
    memcpy(b, &data, 8);
    memcpy(b + 8, &size, 4);
    memcpy(b + 108, &stride, 4);
    void *args[4] = {a, b, &total, op};
    unsigned grid[3] = {1, 1, 1};
    lg_target_t t;
    g_assert_cmpint(lg_decode(s, LG_DTYPE_FLOAT32, args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7000);
    g_assert_cmpint(t.count, ==, 20);
    g_assert_cmpint(t.ndim, ==, 1);
    g_assert_cmpint(t.strides[0], ==, 2);
    g_assert_cmpint(t.dtype, ==, LG_DTYPE_FLOAT32);

    char two[1024];
    snprintf(two, sizeof two, "%s", one);
    char *dims = strstr(two, "jLi1ELi1ELi4E");
    g_assert_nonnull(dims);
    memcpy(dims, "jLi1ELi2ELi4E", 13);
    s = lg_registry_find(two, NULL, -1, why, sizeof why);
    g_assert_nonnull(s);
    uint32_t sizes[2] = {5, 6}, strides[2] = {1, 5};
    memcpy(b + 8, sizes, 8);
    memcpy(b + 108, strides, 8);
    total = 30;
    g_assert_cmpint(lg_decode(s, LG_DTYPE_FLOAT32, args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 30);
    g_assert_cmpint(t.ndim, ==, 2);
    g_assert_cmpint(t.sizes[0], ==, 5);
    g_assert_cmpint(t.strides[1], ==, 5);

    /* Three or more collapsed dimensions (BDims -1): not watched. */
    memcpy(dims, "jLi1ELin1ELi4E", 14);
    g_assert_null(lg_registry_find(two, NULL, -1, why, sizeof why));
}

/* targets=N, the constant form: range kernels only, N operand pointers inside the parameter,
 * N operands inside the calculator. */
static void test_range_operands_key(void)
{
    lg_spec_t sp;
    char err[512];
    const char *head = "[k]\nmatch=x;St5arrayIPcLm3EE\nfamily=f\ndirection=forward\ntarget_kind=range\n"
                       "params=4,1,24\nlayout_check=match_types\ntarget=2,8\ndtype=float32\ncount=param\n"
                       "count_field=0,0,4\n";
    char text[1024];
    snprintf(text, sizeof text, "%stargets=2\n", head);
    g_assert_cmpint(lg_spec_parse(text, strlen(text), "t", &sp, 1, err, sizeof err), ==, 1);
    g_assert_cmpint(sp.operands, ==, 2);
    g_assert_cmpint(sp.targets.width, ==, 0);
    const char *bad[][2] = {
        {"targets=3\n", "constant count 3: must be 1..2"},
        {"targets=0\n", "constant count 0"},
        {"targets=2,8\n", "or a constant count of operands"},
        {"targets=-2\n", "non-negative integers"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        snprintf(text, sizeof text, "%s%s", head, bad[i][0]);
        g_assert_cmpint(lg_spec_parse(text, strlen(text), "t", &sp, 1, err, sizeof err), ==, -1);
        g_test_message("err: %s", err);
        g_assert_nonnull(strstr(err, bad[i][1]));
    }
    /* the pointers past the data array: target at 16, two operands need 32 bytes */
    const char *past = "[k]\nmatch=x;St5arrayIPcLm3EE\nfamily=f\ndirection=forward\ntarget_kind=range\n"
                       "params=4,1,24\nlayout_check=match_types\ntarget=2,16\ndtype=float32\ncount=param\n"
                       "count_field=0,0,4\ntargets=2\n";
    g_assert_cmpint(lg_spec_parse(past, strlen(past), "t", &sp, 1, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, "2 operand pointers from offset 16 are beyond parameter 2"));
    /* not for labels: their index tensors are counted by a field */
    const char *labels = "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,8,8\ntarget=1\ndtype=int64\n"
                         "count=param\ncount_field=0,0,8\nn_classes=2,0,8\nignore_index=none\ntargets=2\n";
    g_assert_cmpint(lg_spec_parse(labels, strlen(labels), "t", &sp, 1, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, "only with target_kind=range"));
    /* through a calculator: operand arg + 1 must exist */
    const char *calc = "[k]\nmatch=x\nfamily=f\ndirection=forward\ntarget_kind=range\nparams=4,648\n"
                       "target=1,616\ntarget_calc=1,0,25,3,2,4\nlayout_check=offset_calc\ndtype=float32\n"
                       "count=param\ncount_field=0,0,4\ntargets=2\n";
    g_assert_cmpint(lg_spec_parse(calc, strlen(calc), "t", &sp, 1, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, "2 operands from calculator operand 2: the calculator has 3"));
}

/* ---- closure-taking TensorIterator kernels ------------------------------------------------ */

/* IntDivider<uint32_t>'s constructor (ATen/cuda/detail/IntegerDivider.cuh). */
static void put_divider(built_t *b, int p, int off, uint32_t d)
{
    uint32_t shift = 0;
    while (shift < 32 && (UINT64_C(1) << shift) < d)
        shift++;
    uint32_t m1 = (uint32_t)(((UINT64_C(1) << 32) * ((UINT64_C(1) << shift) - d)) / d + 1);
    put(b, p, off, 4, (int32_t)d);
    put(b, p, off + 4, 4, (int32_t)m1);
    put(b, p, off + 8, 4, (int32_t)shift);
}

/* An OffsetCalculator<nargs, uint32_t> (MAX_DIMS 25) at the start of parameter 1: sizes[d] and
 * operand `arg`'s byte strides st[d], dimension 0 fastest; the other operands' strides 4. */
static void put_calc(built_t *b, int nargs, int arg, int dims, const uint32_t *sz, const uint32_t *st)
{
    put(b, 1, 0, 4, dims);
    for (int d = 0; d < dims; d++) {
        put_divider(b, 1, 4 + 12 * d, sz[d]);
        for (int a = 0; a < nargs; a++)
            put(b, 1, 304 + 4 * (d * nargs + a), 4, a == arg ? (int32_t)st[d] : 4);
    }
}

static void test_closure_builtins(void)
{
    lg_registry_init_with(NULL, NULL);
    char why[256];
    lg_target_t t;
    unsigned grid[3] = {1, 1, 1};
    /* 2.15's torch.gather(x(4,7), 1, idx(4,3)^T) from a (3,4) tensor: the iterator's dims
     * [3, 4] with index byte strides (32, 8); as a view, sizes [4, 3] strides [1, 4]. */
    const char *g215 = "_ZN2at6native34_scatter_gather_elementwise_kernelILi128ELi8EZNS0_36_cuda_scatter_gather_"
                       "internal_kernelILb0ENS0_10OpaqueTypeILi4EEElEclINS0_12TensorAssignEEEvRNS_14TensorIteratorE"
                       "lllRKT_EUliE_EEviT1_";
    const lg_spec_t *s = lg_registry_find(g215, NULL, -1, why, sizeof why);
    g_assert_nonnull(s); /* layout_check=offset_calc: no sizes from the double, the calculator stands in */
    g_assert_cmpstr(s->name, ==, "_scatter_gather_elementwise_kernel:gather");
    built_t b;
    build(&b, "4,664");
    uint32_t sz[3] = {3, 4, 1}, st[3] = {32, 8, 0};
    put_calc(&b, 3, 2, 2, sz, st);
    put(&b, 0, 0, 4, 12);
    put(&b, 1, 608, 8, (int64_t)0x7f0000001000ull);
    put(&b, 1, 616, 8, 7);
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7f0000001000ull);
    g_assert_cmpint(t.dtype, ==, LG_DTYPE_INT64);
    g_assert_cmpint(t.count, ==, 12);
    g_assert_cmpint(t.n_classes, ==, 7);
    g_assert_cmpint(t.ndim, ==, 2);
    g_assert_cmpint(t.sizes[0], ==, 4);
    g_assert_cmpint(t.sizes[1], ==, 3);
    g_assert_cmpint(t.strides[0], ==, 1);
    g_assert_cmpint(t.strides[1], ==, 4);
    g_assert_true(t.index_is_offset && !t.allow_negative && !t.has_ignore_index);
    /* a sample is the element offset: logical (1, 2) of the view is element 1 + 2*4 = 9 */
    g_assert_cmpint(lg_scan_sample_index(&t, 1 * 3 + 2), ==, 9);

    /* expanded (stride 0) and size-1 dimensions drop out; dense neighbours merge */
    uint32_t sz2[3] = {16, 5, 8}, st2[3] = {0, 8, 40};
    put_calc(&b, 3, 2, 3, sz2, st2);
    put(&b, 0, 0, 4, 16 * 5 * 8);
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.ndim, ==, 1);
    g_assert_cmpint(t.count, ==, 40);
    g_assert_cmpint(t.strides[0], ==, 1);

    /* the calculator must be one: N must be the product of its sizes */
    put(&b, 0, 0, 4, 16 * 5 * 8 + 1);
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "the closure's layout is not the spec's"));
    put(&b, 0, 0, 4, 16 * 5 * 8);
    /* ... and every IntDivider its own magic numbers */
    put(&b, 1, 4 + 12 + 4, 4, 12345);
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "is not an IntDivider"));
    put_calc(&b, 3, 2, 3, sz2, st2);
    /* a byte stride that is no multiple of the id size: not this tensor */
    put(&b, 1, 304 + 4 * (1 * 3 + 2), 4, 12);
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, -1);
    put(&b, 1, 0, 4, 26); /* more dims than MAX_DIMS */
    g_assert_cmpint(decode_named(s, g215, b.args, grid, &t, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "not a calculator"));

    /* the id type: index_t of the functor (2.8+), int64 before it had one (1.13-2.7) */
    const char *g215i = "_ZN2at6native34_scatter_gather_elementwise_kernelILi128ELi8EZNS0_36_cuda_scatter_gather_"
                        "internal_kernelILb0ENS0_10OpaqueTypeILi4EEEiEclINS0_12TensorAssignEEEvRNS_14TensorIteratorE"
                        "lllRKT_EUliE_EEviT1_";
    const char *s113 = "_ZN2at6native34_scatter_gather_elementwise_kernelILi128ELi4EZNS0_36_cuda_scatter_gather_"
                       "internal_kernelILb1EiEclINS0_10ReduceMeanEEEvRNS_14TensorIteratorElllRKT_EUliE_EEviT1_";
    const char *h215 = "_ZN2at6native34_scatter_gather_elementwise_kernelILi128ELi8EZNS0_36_cuda_scatter_gather_"
                       "internal_kernelILb1EN3c104HalfEiEclINS0_9ReduceAddEEEvRNS_14TensorIteratorElllRKT_EUliE_EEviT1_";
    lg_dtype_t dt;
    g_assert_cmpint(lg_decode_dtype(s, g215i, &dt, why, sizeof why), ==, 0);
    g_assert_cmpint(dt, ==, LG_DTYPE_INT32);
    const lg_spec_t *sc = lg_registry_find(s113, NULL, -1, why, sizeof why);
    g_assert_nonnull(sc);
    g_assert_cmpstr(sc->name, ==, "_scatter_gather_elementwise_kernel:scatter");
    g_assert_cmpint(lg_decode_dtype(sc, s113, &dt, why, sizeof why), ==, 0);
    g_assert_cmpint(dt, ==, LG_DTYPE_INT64); /* scalar int, ids int64 */
    g_assert_cmpint(lg_decode_dtype(sc, h215, &dt, why, sizeof why), ==, 0);
    g_assert_cmpint(dt, ==, LG_DTYPE_INT32); /* scalar Half, ids int */
    /* with runtime sizes the size check applies as for every spec */
    size_t wrong[2] = {4, 656}, right[2] = {4, 664};
    g_assert_null(lg_registry_find(g215, wrong, 2, why, sizeof why));
    g_assert_nonnull(lg_registry_find(g215, right, 2, why, sizeof why));
    unbuild(&b);

    /* x[rows, cols]: two index tensors, pointers 8 bytes apart, bounds 6 and 5, negatives wrap */
    const char *ix = "_ZN2at6native24index_elementwise_kernelILi128ELi4EZNS0_16gpu_index_kernelIZNS0_17index_kernel_"
                     "implINS0_10OpaqueTypeILi4EEEEEvRNS_18TensorIteratorBaseEN3c108ArrayRefIlEESA_EUlPcPKclE_EEvS7_"
                     "SA_SA_RKT_bEUliE_EEvlT1_";
    s = lg_registry_find(ix, NULL, -1, why, sizeof why);
    g_assert_nonnull(s);
    build(&b, "8,1240");
    uint32_t sz3[1] = {3}, st3[1] = {8};
    put_calc(&b, 3, 2, 1, sz3, st3);
    put(&b, 0, 0, 8, 3);
    put(&b, 1, 624, 8, 2);
    put(&b, 1, 632, 8, 0x7f0000002000);
    put(&b, 1, 640, 8, 0x7f0000003000);
    put(&b, 1, 832, 8, 6);
    put(&b, 1, 840, 8, 5);
    g_assert_cmpint(lg_decode_targets(s, b.args, why, sizeof why), ==, 2);
    g_assert_cmpint(lg_decode_nth(s, LG_DTYPE_INT64, b.args, grid, 1, &t, why, sizeof why), ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7f0000003000ull);
    g_assert_cmpint(t.n_classes, ==, 5);
    g_assert_cmpint(t.count, ==, 3);
    g_assert_true(t.allow_negative);
    g_assert_cmpint(lg_decode_nth(s, LG_DTYPE_INT64, b.args, grid, 0, &t, why, sizeof why), ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7f0000002000ull);
    g_assert_cmpint(t.n_classes, ==, 6);
    put(&b, 1, 624, 8, 26); /* more index tensors than the closure holds */
    g_assert_cmpint(lg_decode_targets(s, b.args, why, sizeof why), ==, -1);
    /* a closure copy cannot stand in for a launch with several index tensors */
    lg_args_copy_t copy;
    g_assert_cmpint(lg_decode_rewrite(s, b.args, 0x1000, false, 0, &copy), ==, -1);
    unbuild(&b);
}

/* A 64-bit index-math calculator (OffsetCalculator<2, uint64_t>: dims at 0, IntDivider<uint64_t>
 * {divisor} from 8, strides from 8 + 8 * max_dims) in a user spec: sizes and strides are read
 * at 8 bytes, and no magic numbers are asked of the dividers. */
static void test_closure_index64(void)
{
    const char *text = "[k64]\nmatch=6mykernI\nfamily=gather\ndirection=forward\ntarget_kind=ids\nparams=8,440\n"
                       "target=1,424\ntarget_calc=1,0,13,2,1,8\ndtype=int32\ncount=param\ncount_field=0,0,8\n"
                       "n_classes=1,432,8\nignore_index=none\n";
    lg_spec_t sp[1];
    char err[512] = "";
    g_assert_cmpint(lg_spec_parse(text, strlen(text), "k.conf", sp, 1, err, sizeof err), ==, 1);
    built_t b;
    build(&b, "8,440");
    put(&b, 1, 0, 4, 2);
    put(&b, 1, 8, 8, 5);                        /* sizes_[0] */
    put(&b, 1, 16, 8, 3);                       /* sizes_[1] */
    put(&b, 1, 8 + 8 * 13 + 8 * (0 * 2 + 1), 8, 4);  /* strides_[0][1]: int32 ids, dense */
    put(&b, 1, 8 + 8 * 13 + 8 * (1 * 2 + 1), 8, 40); /* strides_[1][1]: rows of 10 ids */
    put(&b, 0, 0, 8, 15);
    put(&b, 1, 424, 8, 0x7f0000004000);
    put(&b, 1, 432, 8, 1000);
    lg_target_t t;
    char why[256];
    unsigned grid[3] = {1, 1, 1};
    g_assert_cmpint(lg_decode(&sp[0], LG_DTYPE_INT32, b.args, grid, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.count, ==, 15);
    g_assert_cmpint(t.ndim, ==, 2);
    g_assert_cmpint(t.sizes[0], ==, 3);
    g_assert_cmpint(t.strides[0], ==, 10);
    g_assert_cmpint(t.sizes[1], ==, 5);
    g_assert_cmpint(t.strides[1], ==, 1);
    g_assert_cmpint(t.n_classes, ==, 1000);
    unbuild(&b);
}


/* BCE on a transposed input (2.15's F.binary_cross_entropy(p.view(4, 6).t(), y)): the
 * gpu_kernel_impl_nocast closure, OffsetCalculator<3> at 0 with the input as operand 1 and its
 * pointer at data[1] (616). Dims as TensorIterator orders them: 4 (input stride 24 bytes) then 6
 * (4 bytes). */
static void test_range_closure(void)
{
    lg_registry_init_with(NULL, NULL);
    const char *m = "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_29binary_cross_entropy_out_cudaERKNS_6TensorES5_RKSt8optionalIS3_ElRS3_ENKUlvE_clEvENKUlvE0_clEvEUlffE_EEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_";
    char why[256] = "";
    const lg_spec_t *s = lg_registry_find(m, NULL, -1, why, sizeof why);
    g_assert_nonnull(s);
    g_assert_cmpstr(s->name, ==, "elementwise_kernel:binary_cross_entropy:float32");
    built_t b;
    build(&b, "4,648");
    const uint32_t sz[2] = {4, 6}, st[2] = {24, 4};
    put_calc(&b, 3, 1, 2, sz, st);
    put(&b, 0, 0, 4, 24);
    put(&b, 1, 608, 8, (int64_t)0x7f0011110000ull);
    put(&b, 1, 616, 8, (int64_t)0x7f0022220000ull);
    put(&b, 1, 624, 8, (int64_t)0x7f0033330000ull);
    lg_target_t t;
    unsigned grid[3] = {1, 1, 1};
    int rc = decode_named(s, m, b.args, grid, &t, why, sizeof why);
    if (rc)
        g_test_message("why: %s", why);
    g_assert_cmpint(rc, ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7f0022220000ull);
    g_assert_cmpint(t.dtype, ==, LG_DTYPE_FLOAT32);
    g_assert_cmpint(t.count, ==, 24);
    g_assert_true(t.index_is_offset);
    /* element offsets: dim 4 by 6 elements, dim 6 by 1 (row-major order, slowest first) */
    int64_t off_max = 0;
    for (int64_t i = 0; i < t.count; i++)
        off_max = lg_scan_offset(&t, i) > off_max ? lg_scan_offset(&t, i) : off_max;
    g_assert_cmpint(off_max, ==, 23);
    g_assert_cmpint(lg_scan_span(&t), ==, 24);
    g_assert_cmpint(t.operand, ==, 0);
    /* the target: operand 2 of the calculator, pointer after the input's, its own strides
     * (dense in the iteration order: 4 bytes in dimension 0 of size 4, 16 in dimension 1) */
    g_assert_cmpint(lg_decode_targets(s, b.args, why, sizeof why), ==, 2);
    for (int d = 0; d < 2; d++)
        put(&b, 1, 304 + 4 * (d * 3 + 2), 4, d == 0 ? 4 : 16);
    rc = lg_decode_nth(s, LG_DTYPE_FLOAT32, b.args, grid, 1, &t, why, sizeof why);
    if (rc)
        g_test_message("why: %s", why);
    g_assert_cmpint(rc, ==, 0);
    g_assert_cmpuint(t.data, ==, 0x7f0033330000ull);
    g_assert_cmpint(t.operand, ==, 1);
    g_assert_cmpint(t.count, ==, 24);
    g_assert_cmpint(t.ndim, ==, 1); /* dense: the two dimensions merge */
    g_assert_cmpint(t.strides[0], ==, 1);
    g_assert_cmpint(lg_scan_span(&t), ==, 24);
    /* the input's strides are unchanged by it: still transposed */
    g_assert_cmpint(lg_decode_nth(s, LG_DTYPE_FLOAT32, b.args, grid, 0, &t, why, sizeof why), ==, 0);
    g_assert_cmpint(t.ndim, ==, 2);
    /* N that is not the calculator's product: not decoded */
    put(&b, 0, 0, 4, 25);
    g_assert_cmpint(decode_named(s, m, b.args, grid, &t, why, sizeof why), ==, -1);
    unbuild(&b);
}

/* F.multi_margin_loss: target (int64) at param 2 of the forward and 3 of the backward, nframe
 * and dim the two ints after the weights; no ignore_index, so every value must be in [0, dim). */
static void test_margin_specs(void)
{
    static const struct { const char *spec, *sizes; int target, nframe, dim; } m[] = {
        {"MultiMarginLoss_forward_kernel:margin2", "8,8,8,8,4,4,1,2", 2, 4, 5},
        {"MultiMarginLoss_forward_kernel:margin4", "8,8,8,8,4,4,1,4", 2, 4, 5},
        {"MultiMarginLoss_forward_kernel:margin8", "8,8,8,8,4,4,1,8", 2, 4, 5},
        {"MultiMarginLoss_backward_kernel:margin2", "8,8,8,8,8,4,4,1,2,1", 3, 5, 6},
        {"MultiMarginLoss_backward_kernel:margin4", "8,8,8,8,8,4,4,1,4,1", 3, 5, 6},
        {"MultiMarginLoss_backward_kernel:margin8", "8,8,8,8,8,4,4,1,8,1", 3, 5, 6},
    };
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), ==,
                    (int)G_N_ELEMENTS(cases) + N_ID_SPECS + N_NAMED_SPECS + N_RANGE_SPECS + N_MARGIN_SPECS +
                        N_ASSERT_SPECS + N_PROBS_SPECS + N_UNPOOL_SPECS + N_BERNOULLI_SPECS + N_RENORM_SPECS);
    for (size_t i = 0; i < G_N_ELEMENTS(m); i++) {
        g_test_message("spec %s", m[i].spec);
        const lg_spec_t *s = spec_named(m[i].spec);
        g_assert_false(s->ids);
        g_assert_cmpstr(s->family, ==, "multi_margin_loss");
        built_t b;
        build(&b, m[i].sizes);
        const uint64_t ptr = 0x7f0055550000ull + i * 0x100;
        put(&b, m[i].target, 0, 8, (int64_t)ptr);
        put(&b, m[i].nframe, 0, 4, 37 + (int64_t)i);
        put(&b, m[i].dim, 0, 4, 10 + (int64_t)i);
        unsigned grid[3] = {1, 1, 1};
        lg_target_t t;
        char why[256] = "";
        int rc = decode_named(s, "_Z30MultiMarginLoss_forward_kernelILi1EfEvv", b.args, grid, &t, why, sizeof why);
        if (rc)
            g_test_message("why: %s", why);
        g_assert_cmpint(rc, ==, 0);
        g_assert_cmpuint(t.data, ==, ptr);
        g_assert_cmpint(t.dtype, ==, LG_DTYPE_INT64);
        g_assert_cmpint(t.count, ==, 37 + (int64_t)i);
        g_assert_cmpint(t.n_classes, ==, 10 + (int64_t)i);
        g_assert_cmpint(t.has_ignore_index, ==, 0);
        unbuild(&b);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/decode/every-builtin-spec", test_every_builtin);
    g_test_add_func("/decode/index-kernels", test_ids_builtins);
    g_test_add_func("/decode/multi-margin", test_margin_specs);
    g_test_add_func("/decode/named-index-kernels", test_named_index);
    g_test_add_func("/decode/no-mask-key", test_no_mask_key);
    g_test_add_func("/decode/closure-kernels", test_closure_builtins);
    g_test_add_func("/decode/range-kernels", test_range_builtins);
    g_test_add_func("/decode/range-key", test_range_key);
    g_test_add_func("/decode/probs-key", test_probs_key);
    g_test_add_func("/decode/unpool-bound", test_unpool_bound);
    g_test_add_func("/decode/bernoulli-tensorinfo", test_bernoulli_tensorinfo);
    g_test_add_func("/decode/range-operands-key", test_range_operands_key);
    g_test_add_func("/decode/range-closure", test_range_closure);
    g_test_add_func("/decode/closure-index64", test_closure_index64);
    g_test_add_func("/decode/sanity-checks", test_sanity_checks);
    g_test_add_func("/decode/rewrite-limits", test_rewrite_limits);
    return g_test_run();
}
