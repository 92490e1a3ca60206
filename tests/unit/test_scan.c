/* test_scan.c: the shared label scan (cuda/lg_scan.h) against a naive reference, and the host
 * backend of src/checks/validate.c driven by a fake runtime whose "device" memory is malloc'd host
 * memory and whose copies are memcpy (no CUDA at all).
 *
 * The reference walks the view with nested loops over explicit sizes/strides and applies the
 * kernel's rule written out longhand, so it shares no line with lg_scan_host. Buffers are
 * random with fixed seeds (g_rand), printed on failure through the test name.
 * Run: build/tests/unit/test_scan (or LG_TESTS=test_scan make test).
 */
#include "hooks/hooks.h"
#include "../cuda/lg_validate.h"

#include <cuda_runtime_api.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ naive reference */

static int64_t ref_load(lg_dtype_t d, const void *base, int64_t off)
{
    if (d == LG_DTYPE_UINT8)
        return ((const uint8_t *)base)[off];
    if (d == LG_DTYPE_INT32)
        return ((const int32_t *)base)[off];
    return ((const int64_t *)base)[off];
}

static void reference(const lg_target_t *t, const void *base, int max_samples, lg_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    int64_t s[3] = {1, 1, 1}, st[3] = {0, 0, 0};
    if (t->ndim <= 1) {
        s[2] = t->count;
        st[2] = t->strides[0];
    } else {
        for (int d = 0; d < t->ndim; d++) {
            s[3 - t->ndim + d] = t->sizes[d];
            st[3 - t->ndim + d] = t->strides[d];
        }
    }
    bool any = false;
    int64_t i = 0;
    for (int64_t a = 0; a < s[0]; a++)
        for (int64_t b = 0; b < s[1]; b++)
            for (int64_t c = 0; c < s[2]; c++, i++) {
                int64_t raw = ref_load(t->dtype, base, a * st[0] + b * st[1] + c * st[2]);
                int64_t eff = raw, ig = t->ignore_index;
                if (t->truncate_to_int32) {
                    eff = (int32_t)(raw & 0xffffffff);
                    ig = (int32_t)(ig & 0xffffffff);
                }
                if (t->has_ignore_index && eff == ig)
                    continue;
                if (!any || raw < v->min)
                    v->min = raw;
                if (!any || raw > v->max)
                    v->max = raw;
                any = true;
                v->checked++;
                if (eff < 0 || eff >= t->n_classes) {
                    if (v->n_samples < max_samples && v->n_samples < LG_MAX_SAMPLES) {
                        v->samples[v->n_samples].index = i;
                        v->samples[v->n_samples].value = raw;
                        v->n_samples++;
                    }
                    v->bad_count++;
                }
            }
}

static void assert_same(const lg_verdict_t *a, const lg_verdict_t *b)
{
    g_assert_cmpint(a->bad_count, ==, b->bad_count);
    g_assert_cmpint(a->checked, ==, b->checked);
    g_assert_cmpint(a->min, ==, b->min);
    g_assert_cmpint(a->max, ==, b->max);
    g_assert_cmpint(a->n_samples, ==, b->n_samples);
    for (int i = 0; i < a->n_samples; i++) {
        g_assert_cmpint(a->samples[i].index, ==, b->samples[i].index);
        g_assert_cmpint(a->samples[i].value, ==, b->samples[i].value);
    }
}

static lg_target_t flat(lg_dtype_t d, int64_t count, int64_t n_classes, int64_t ignore, bool has_ignore)
{
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.dtype = d;
    t.ndim = 1;
    t.sizes[0] = count;
    t.strides[0] = 1;
    t.count = count;
    t.n_classes = n_classes;
    t.ignore_index = ignore;
    t.has_ignore_index = has_ignore;
    return t;
}

static size_t esize(lg_dtype_t d) { return d == LG_DTYPE_UINT8 ? 1 : d == LG_DTYPE_INT32 ? 4 : 8; }

static void store(lg_dtype_t d, void *base, int64_t off, int64_t v)
{
    if (d == LG_DTYPE_UINT8)
        ((uint8_t *)base)[off] = (uint8_t)v;
    else if (d == LG_DTYPE_INT32)
        ((int32_t *)base)[off] = (int32_t)v;
    else
        ((int64_t *)base)[off] = v;
}

/* Random labels: mostly valid, some ignore_index, some bad of both signs. */
static void *random_labels(GRand *r, lg_dtype_t d, int64_t n, int64_t n_classes, int64_t ignore, double p_bad)
{
    void *buf = g_malloc0((gsize)(n ? n : 1) * esize(d));
    for (int64_t i = 0; i < n; i++) {
        double x = g_rand_double(r);
        int64_t v;
        if (x < p_bad)
            v = g_rand_boolean(r) ? n_classes + g_rand_int_range(r, 0, 1000) : -g_rand_int_range(r, 1, 1000);
        else if (x < p_bad + 0.05)
            v = ignore;
        else
            v = g_rand_int_range(r, 0, (gint32)n_classes);
        store(d, buf, i, v);
    }
    return buf;
}

static void check(const lg_target_t *t, const void *buf, int samples)
{
    lg_verdict_t *a = g_new0(lg_verdict_t, 1), *b = g_new0(lg_verdict_t, 1);
    lg_scan_host(t, buf, samples, a);
    reference(t, buf, samples, b);
    assert_same(a, b);
    g_free(a);
    g_free(b);
}

/* ------------------------------------------------------------------ scan tests */

static void test_random(void)
{
    GRand *r = g_rand_new_with_seed(1234);
    const lg_dtype_t dts[] = {LG_DTYPE_INT64, LG_DTYPE_INT32, LG_DTYPE_UINT8};
    for (int round = 0; round < 200; round++) {
        lg_dtype_t d = dts[round % 3];
        int64_t n = g_rand_int_range(r, 1, 5000);
        int64_t nc = g_rand_int_range(r, 1, d == LG_DTYPE_UINT8 ? 200 : 100000);
        int64_t ig = d == LG_DTYPE_UINT8 ? 255 : -100;
        void *buf = random_labels(r, d, n, nc, ig, g_rand_double_range(r, 0, 0.2));
        lg_target_t t = flat(d, n, nc, ig, round % 4 != 0);
        check(&t, buf, g_rand_int_range(r, 0, LG_MAX_SAMPLES + 1));
        g_free(buf);
    }
    g_rand_free(r);
}

static void test_empty(void)
{
    int64_t x = 5;
    lg_target_t t = flat(LG_DTYPE_INT64, 0, 10, -100, true);
    lg_verdict_t v;
    memset(&v, 0x5a, sizeof v);
    lg_scan_host(&t, &x, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 0);
    g_assert_cmpint(v.checked, ==, 0);
    g_assert_cmpint(v.min, ==, 0);
    g_assert_cmpint(v.max, ==, 0);
    g_assert_cmpint(v.n_samples, ==, 0);
}

static void test_all_ignored(void)
{
    int64_t buf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = -100;
    lg_target_t t = flat(LG_DTYPE_INT64, 100, 10, -100, true);
    lg_verdict_t v;
    lg_scan_host(&t, buf, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 0);
    g_assert_cmpint(v.checked, ==, 0);
    g_assert_cmpint(v.min, ==, 0);
    g_assert_cmpint(v.max, ==, 0);
    /* Without an ignore_index, -100 is just a bad label. */
    t.has_ignore_index = 0;
    lg_scan_host(&t, buf, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 100);
    g_assert_cmpint(v.min, ==, -100);
    check(&t, buf, 16);
}

static void test_all_bad_and_sample_cap(void)
{
    int64_t n = 1000;
    int64_t *buf = g_new(int64_t, n);
    for (int64_t i = 0; i < n; i++)
        buf[i] = 10 + (i % 7) - (i % 2 ? 30 : 0);
    lg_target_t t = flat(LG_DTYPE_INT64, n, 10, -100, true);
    const int caps[] = {0, 1, 16, 256, 1000};
    for (unsigned c = 0; c < G_N_ELEMENTS(caps); c++) {
        lg_verdict_t *v = g_new0(lg_verdict_t, 1);
        lg_scan_host(&t, buf, caps[c], v);
        g_assert_cmpint(v->bad_count, ==, n);
        int want = caps[c] > LG_MAX_SAMPLES ? LG_MAX_SAMPLES : caps[c];
        g_assert_cmpint(v->n_samples, ==, want);
        for (int i = 0; i < v->n_samples; i++) {
            g_assert_cmpint(v->samples[i].index, ==, i); /* index order, the first ones */
            g_assert_cmpint(v->samples[i].value, ==, buf[i]);
        }
        g_free(v);
        check(&t, buf, caps[c]);
    }
    g_free(buf);
}

static void test_large(void)
{
    GRand *r = g_rand_new_with_seed(99);
    int64_t n = 1 << 20;
    void *buf = random_labels(r, LG_DTYPE_INT64, n, 1000, -100, 0.0005);
    lg_target_t t = flat(LG_DTYPE_INT64, n, 1000, -100, true);
    check(&t, buf, 16);
    check(&t, buf, LG_MAX_SAMPLES);
    g_free(buf);
    g_rand_free(r);
}

static void test_uint8_all_values(void)
{
    uint8_t buf[256 * 3];
    for (int i = 0; i < 256 * 3; i++)
        buf[i] = (uint8_t)(i * 7 + i / 256);
    const int64_t ncs[] = {1, 10, 21, 255, 256, 1000};
    for (unsigned k = 0; k < G_N_ELEMENTS(ncs); k++) {
        lg_target_t t = flat(LG_DTYPE_UINT8, 256 * 3, ncs[k], 255, true);
        check(&t, buf, 64);
        lg_verdict_t v;
        lg_scan_host(&t, buf, 0, &v);
        int64_t nc = ncs[k];
        int64_t expect_bad = nc >= 255 ? 0 : 3 * (255 - nc); /* 255 is ignored */
        g_assert_cmpint(v.bad_count, ==, expect_bad);
        g_assert_cmpint(v.checked, ==, 3 * 255);
        g_assert_cmpint(v.min, ==, 0);
        g_assert_cmpint(v.max, ==, 254);
        t.has_ignore_index = 0; /* uint8 without ignore: 255 counts */
        check(&t, buf, 64);
    }
}

static void test_strided(void)
{
    GRand *r = g_rand_new_with_seed(7);
    for (int round = 0; round < 60; round++) {
        lg_dtype_t d = round % 3 == 0 ? LG_DTYPE_UINT8 : LG_DTYPE_INT64;
        int64_t s0 = g_rand_int_range(r, 1, 6), s1 = g_rand_int_range(r, 1, 9), s2 = g_rand_int_range(r, 1, 11);
        lg_target_t t = flat(d, s0 * s1 * s2, 50, d == LG_DTYPE_UINT8 ? 255 : -100, true);
        t.ndim = 3;
        t.sizes[0] = s0;
        t.sizes[1] = s1;
        t.sizes[2] = s2;
        switch (round % 4) {
        case 0: /* contiguous */
            t.strides[0] = s1 * s2; t.strides[1] = s2; t.strides[2] = 1; break;
        case 1: /* a permuted view: (N,H,W) of an (N,W,H) buffer */
            t.strides[0] = s1 * s2; t.strides[1] = 1; t.strides[2] = s1; break;
        case 2: /* a slice with padding */
            t.strides[0] = (s1 + 2) * (s2 + 3); t.strides[1] = s2 + 3; t.strides[2] = 1; break;
        default: /* broadcast over dim 1 and a step of 2 */
            t.strides[0] = 2 * s2; t.strides[1] = 0; t.strides[2] = 2; break;
        }
        int64_t span = 1 + (s0 - 1) * t.strides[0] + (s1 - 1) * t.strides[1] + (s2 - 1) * t.strides[2];
        void *buf = random_labels(r, d, span, 50, t.ignore_index, 0.1);
        check(&t, buf, g_rand_int_range(r, 1, 40));
        g_free(buf);
    }
    /* 2-D view, and a 1-D view with stride 3 */
    int64_t b[30];
    for (int i = 0; i < 30; i++)
        b[i] = (i * 37) % 23 - 3;
    lg_target_t t = flat(LG_DTYPE_INT64, 10, 15, -100, true);
    t.strides[0] = 3;
    check(&t, b, 8);
    t.ndim = 2;
    t.sizes[0] = 5;
    t.sizes[1] = 3;
    t.count = 15;
    t.strides[0] = 6;
    t.strides[1] = 2;
    check(&t, b, 8);
    g_rand_free(r);
}

static void test_truncate(void)
{
    int64_t buf[] = {
        3,                      /* fine */
        (1ll << 32) + 3,        /* narrows to 3: fine when truncating, bad otherwise */
        (1ll << 32) - 100,      /* narrows to -100: ignored when truncating */
        -100,                   /* ignored either way */
        (1ll << 31),            /* narrows to INT32_MIN: bad */
        -(1ll << 32) + 9,       /* narrows to 9: fine */
        10,                     /* bad */
    };
    lg_target_t t = flat(LG_DTYPE_INT64, G_N_ELEMENTS(buf), 10, -100, true);
    lg_verdict_t v;
    lg_scan_host(&t, buf, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 5);
    g_assert_cmpint(v.checked, ==, 6);
    check(&t, buf, 16);
    t.truncate_to_int32 = 1;
    lg_scan_host(&t, buf, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 2);
    g_assert_cmpint(v.checked, ==, 5);
    g_assert_cmpint(v.samples[0].index, ==, 4);
    g_assert_cmpint(v.samples[0].value, ==, 1ll << 32 >> 1);
    g_assert_cmpint(v.samples[1].index, ==, 6);
    g_assert_cmpint(v.min, ==, -(1ll << 32) + 9); /* raw values, not narrowed ones */
    g_assert_cmpint(v.max, ==, (1ll << 32) + 3);
    check(&t, buf, 16);
    /* ignore_index itself is narrowed too: 2^32-100 as ignore_index means -100 */
    t.ignore_index = (1ll << 32) - 100;
    check(&t, buf, 16);
}

static void test_no_classes(void)
{
    int64_t buf[] = {0, 1, -100, 5, -1};
    lg_target_t t = flat(LG_DTYPE_INT64, 5, 0, -100, true);
    lg_verdict_t v;
    lg_scan_host(&t, buf, 16, &v);
    g_assert_cmpint(v.bad_count, ==, 4); /* every non-ignored label */
    t.n_classes = -3;
    check(&t, buf, 16);
}

/* Index kernels that wrap negative ids (allow_neg_indices) accept [-n, n); the others [0, n). */
static void test_allow_negative(void)
{
    int64_t ids[] = {-9, -8, -1, 0, 7, 8};
    int32_t ids32[] = {-9, -8, -1, 0, 7, 8};
    for (int wide = 0; wide < 2; wide++) {
        lg_target_t t = flat(wide ? LG_DTYPE_INT64 : LG_DTYPE_INT32, 6, 8, 0, false);
        const void *buf = wide ? (const void *)ids : (const void *)ids32;
        lg_verdict_t v;
        t.allow_negative = 1;
        lg_scan_host(&t, buf, 16, &v);
        g_assert_cmpint(v.bad_count, ==, 2);
        g_assert_cmpint(v.samples[0].index, ==, 0);
        g_assert_cmpint(v.samples[0].value, ==, -9);
        g_assert_cmpint(v.samples[1].index, ==, 5);
        g_assert_cmpint(v.samples[1].value, ==, 8);
        t.allow_negative = 0;
        lg_scan_host(&t, buf, 16, &v);
        g_assert_cmpint(v.bad_count, ==, 4);
        check(&t, buf, 16);
    }
}

static void test_abi_sizes(void)
{
    /* The kernel reads these through a by-value parameter and mapped memory: the host side
     * must see the layout nvcc sees (all 8-byte aligned, no implicit padding). */
    g_assert_cmpuint(sizeof(lg_target_t), ==, 8 + 4 + 4 + 24 + 24 + 8 + 8 + 8 + 4 + 4 + 4 + 4 + 4 + 4);
    g_assert_cmpuint(sizeof(lg_scan_params_t) % 8, ==, 0);
    g_assert_cmpuint(sizeof(lg_scan_params_t), <=, 4096);
    g_assert_cmpuint(sizeof(lg_sample_t), ==, 16);
    g_assert_cmpuint(G_STRUCT_OFFSET(lg_scan_ring_entry_t, verdict), ==, 16);
    g_assert_cmpint(LG_SCAN_TILE(8) * 8, ==, LG_SCAN_TILE(1));
}

#include "fake_runtime.h"


static void init_host_backend(void)
{
    lg_validate_init(&fake_rt);
    /* No context anywhere (and usually no libcuda at all): the host backend. */
    g_assert_cmpint(lg_validate_backend(), ==, LG_BACKEND_HOST);
}

static void test_host_sync(void)
{
    init_host_backend();
    GRand *r = g_rand_new_with_seed(5);
    uint64_t ns0 = lg_validate_ns_total();
    for (int round = 0; round < 20; round++) {
        lg_dtype_t d = round % 2 ? LG_DTYPE_UINT8 : LG_DTYPE_INT64;
        int64_t n = g_rand_int_range(r, 1, 3000);
        void *host = random_labels(r, d, n, 20, d == LG_DTYPE_UINT8 ? 255 : -100, 0.05);
        void *dev = dev_copy_of(host, (size_t)n * esize(d));
        lg_target_t t = flat(d, n, 20, d == LG_DTYPE_UINT8 ? 255 : -100, true);
        t.data = (uint64_t)(uintptr_t)dev;
        lg_verdict_t *v = g_new0(lg_verdict_t, 1), *ref = g_new0(lg_verdict_t, 1);
        char why[256] = "";
        int s0 = syncs;
        g_assert_cmpint(lg_validate_sync(&t, (void *)0x1234, 16, v, why, sizeof why), ==, 0);
        g_assert_cmpint(syncs, >, s0); /* waited for the copy */
        reference(&t, host, 16, ref);
        assert_same(v, ref);
        g_free(v);
        g_free(ref);
        g_free(host);
    }
    g_assert_cmpuint(lg_validate_ns_total(), >, ns0);
    g_rand_free(r);
}

/* Range targets (BCE's probabilities): every float dtype, bits written out by hand, the rule
 * `x >= 0 && x <= 1` longhand (NaN, infinities, just above 1, a negative subnormal are bad;
 * 0, -0, 1 and a positive subnormal are not), through the host backend of lg_validate_sync. */
static void test_float_range(void)
{
    init_host_backend();
    /* 0, 1, 0.5, 1.5, -0.1, NaN, -0, inf, next above 1, -subnormal, +subnormal */
    static const uint16_t half[] = {0x0000, 0x3C00, 0x3800, 0x3E00, 0xAE66, 0x7E00,
                                    0x8000, 0x7C00, 0x3C01, 0x8001, 0x0001};
    static const uint16_t bf16[] = {0x0000, 0x3F80, 0x3F00, 0x3FC0, 0xBDCD, 0x7FC0,
                                    0x8000, 0x7F80, 0x3F81, 0x8001, 0x0001};
    const float f32[] = {0.0f, 1.0f, 0.5f, 1.5f, -0.1f, __builtin_nanf(""), -0.0f, __builtin_inff(),
                         0x1.000002p0f, -0x1p-149f, 0x1p-149f};
    const double f64[] = {0.0, 1.0, 0.5, 1.5, -0.1, __builtin_nan(""), -0.0, __builtin_inf(),
                          0x1.0000000000001p0, -0x1p-1074, 0x1p-1074};
    const int64_t want_bad[] = {3, 4, 5, 7, 8, 9};
    const struct {
        lg_dtype_t d;
        const void *host;
        size_t esz;
        double v15, vneg; /* the decoded 1.5 and -0.1 of this dtype */
    } k[] = {
        {LG_DTYPE_FLOAT16, half, 2, 1.5, -0.0999755859375},
        {LG_DTYPE_BFLOAT16, bf16, 2, 1.5, -0.10009765625},
        {LG_DTYPE_FLOAT32, f32, 4, 1.5, (double)-0.1f},
        {LG_DTYPE_FLOAT64, f64, 8, 1.5, -0.1},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        g_test_message("dtype %d", (int)k[i].d);
        g_assert_cmpuint(lg_scan_elem_size(k[i].d), ==, k[i].esz);
        void *dev = dev_copy_of(k[i].host, 11 * k[i].esz);
        lg_target_t t = flat(k[i].d, 11, 0, 0, false);
        t.data = (uint64_t)(uintptr_t)dev;
        lg_verdict_t *v = g_new0(lg_verdict_t, 1);
        char why[256] = "";
        g_assert_cmpint(lg_validate_sync(&t, (void *)0x1234, 16, v, why, sizeof why), ==, 0);
        g_assert_cmpint(v->bad_count, ==, 6);
        g_assert_cmpint(v->checked, ==, 11);
        g_assert_cmpint(v->n_samples, ==, 6);
        for (int j = 0; j < 6; j++)
            g_assert_cmpint(v->samples[j].index, ==, want_bad[j]);
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->samples[0].value), ==, k[i].v15);
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->samples[1].value), ==, k[i].vneg);
        double nan = lg_scan_float(k[i].d, v->samples[2].value);
        g_assert_true(nan != nan);
        /* min and max over the numbers: NaN neither */
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->min), ==, k[i].vneg);
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->max), ==, __builtin_inf());
        g_free(v);
    }
    /* all NaN: min and max stay NaN */
    const float nans[] = {__builtin_nanf(""), __builtin_nanf("")};
    lg_target_t t = flat(LG_DTYPE_FLOAT32, 2, 0, 0, false);
    lg_verdict_t *v = g_new0(lg_verdict_t, 1);
    lg_scan_host(&t, nans, 4, v);
    g_assert_cmpint(v->bad_count, ==, 2);
    double mn = lg_scan_float(LG_DTYPE_FLOAT32, v->min);
    g_assert_true(mn != mn);
    g_free(v);
}

/* ------------------------------------------------------------------ range scan exactness */

/* The value of element i of a float buffer, decoded by the compiler (float, double; bfloat16 is
 * a float's top half) or, for half, by hand here: no line shared with the scan's bit rules. */
static double ref_float(lg_dtype_t d, const void *base, int64_t i)
{
    if (d == LG_DTYPE_FLOAT32)
        return ((const float *)base)[i];
    if (d == LG_DTYPE_FLOAT64)
        return ((const double *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    if (d == LG_DTYPE_BFLOAT16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double x = e == 0x1f ? (m ? __builtin_nan("") : __builtin_inf()) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -x : x;
}

static int64_t ref_bits(lg_dtype_t d, const void *base, int64_t i)
{
    switch (d) {
    case LG_DTYPE_FLOAT32: return ((const uint32_t *)base)[i];
    case LG_DTYPE_FLOAT64: return ((const int64_t *)base)[i];
    default: return ((const uint16_t *)base)[i];
    }
}

/* BCE's rule longhand over doubles: bad unless 0 <= x <= 1; min and max the first of the least
 * and greatest numbers (a NaN never replaces a number, a number replaces a NaN). */
static void range_reference(lg_dtype_t d, const void *base, int64_t n, int max_samples, lg_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    double mn = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ref_float(d, base, i);
        int64_t raw = ref_bits(d, base, i);
        if (i == 0 || (x == x && (mn != mn || x < mn))) {
            mn = x;
            v->min = raw;
        }
        if (i == 0 || (x == x && (mx != mx || x > mx))) {
            mx = x;
            v->max = raw;
        }
        v->checked++;
        if (!(x >= 0.0 && x <= 1.0)) {
            if (v->n_samples < max_samples) {
                v->samples[v->n_samples].index = i;
                v->samples[v->n_samples].value = raw;
                v->n_samples++;
            }
            v->bad_count++;
        }
    }
}

/* Bits of the values the range rule turns on, per dtype: 0, -0, 1, the next value above 1,
 * the smallest subnormal of both signs, the largest subnormal, 0.5, the largest value below 1,
 * -1, infinities, quiet and signalling NaN of both signs, the largest finite number. */
static const uint64_t special32[] = {0x00000000, 0x80000000, 0x3f800000, 0x3f800001, 0x00000001, 0x80000001,
                                     0x007fffff, 0x3f000000, 0x3f7fffff, 0xbf800000, 0x7f800000, 0xff800000,
                                     0x7fc00000, 0xffc00000, 0x7f800001, 0x7f7fffff};
static const uint64_t special64[] = {0x0000000000000000ull, 0x8000000000000000ull, 0x3ff0000000000000ull,
                                     0x3ff0000000000001ull, 0x0000000000000001ull, 0x8000000000000001ull,
                                     0x000fffffffffffffull, 0x3fe0000000000000ull, 0x3fefffffffffffffull,
                                     0xbff0000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                     0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                                     0x7fefffffffffffffull};
static const uint64_t special16[] = {0x0000, 0x8000, 0x3c00, 0x3c01, 0x0001, 0x8001, 0x03ff, 0x3800,
                                     0x3bff, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7bff};
static const uint64_t specialbf[] = {0x0000, 0x8000, 0x3f80, 0x3f81, 0x0001, 0x8001, 0x007f, 0x3f00,
                                     0x3f7f, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7f7f};

static void put_bits(lg_dtype_t d, void *base, int64_t i, uint64_t b)
{
    switch (d) {
    case LG_DTYPE_FLOAT32: ((uint32_t *)base)[i] = (uint32_t)b; break;
    case LG_DTYPE_FLOAT64: ((uint64_t *)base)[i] = b; break;
    default: ((uint16_t *)base)[i] = (uint16_t)b; break;
    }
}

/* Contiguous float buffers of many lengths (under, at and across the pass's blocks), valid
 * values with special ones sprinkled in, each dtype: the host scan gives the reference's
 * verdict bit for bit (min/max bits, which zero's sign, all-NaN, samples in order). */
static void test_range_exact(void)
{
    const struct {
        lg_dtype_t d;
        const uint64_t *special;
    } k[] = {{LG_DTYPE_FLOAT32, special32},
             {LG_DTYPE_FLOAT64, special64},
             {LG_DTYPE_FLOAT16, special16},
             {LG_DTYPE_BFLOAT16, specialbf}};
    const int64_t lens[] = {1, 2, 7, 63, 64, 65, 128, 200, 1000, 4099};
    GRand *r = g_rand_new_with_seed(29);
    for (size_t ki = 0; ki < G_N_ELEMENTS(k); ki++) {
        lg_dtype_t d = k[ki].d;
        size_t esz = lg_scan_elem_size(d);
        for (size_t li = 0; li < G_N_ELEMENTS(lens); li++) {
            int64_t n = lens[li];
            for (int mode = 0; mode < 6; mode++) {
                g_test_message("dtype %d, %" G_GINT64_FORMAT " elements, mode %d", (int)d, n, mode);
                void *buf = g_malloc0((gsize)n * esz);
                for (int64_t i = 0; i < n; i++) {
                    /* mode 0: valid only (0.5 and the largest below 1); 1: a few specials; 2: many;
                     * 3: only zeros of both signs; 4: all NaN; 5: NaN then zeros and -1 */
                    uint64_t b = k[ki].special[g_rand_boolean(r) ? 7 : 8];
                    if (mode == 1 && g_rand_int_range(r, 0, 50) == 0)
                        b = k[ki].special[g_rand_int_range(r, 0, 16)];
                    else if (mode == 2)
                        b = k[ki].special[g_rand_int_range(r, 0, 16)];
                    else if (mode == 3)
                        b = k[ki].special[g_rand_int_range(r, 0, 2)];
                    else if (mode == 4)
                        b = k[ki].special[g_rand_int_range(r, 12, 15)];
                    else if (mode == 5)
                        b = i < n / 2 ? k[ki].special[12] : k[ki].special[g_rand_int_range(r, 0, 2) ? 1 - (i & 1) : 9];
                    put_bits(d, buf, i, b);
                }
                for (int samples = 0; samples <= 16; samples += 16) {
                    lg_target_t t = flat(d, n, 0, 0, false);
                    lg_verdict_t *a = g_new0(lg_verdict_t, 1), *want = g_new0(lg_verdict_t, 1);
                    lg_scan_host(&t, buf, samples, a);
                    range_reference(d, buf, n, samples, want);
                    assert_same(a, want);
                    g_free(a);
                    g_free(want);
                }
                g_free(buf);
            }
        }
    }
    g_rand_free(r);
}

/* Pinned staging handed out by the fake runtime's cudaMallocHost (counted). */
static int host_allocs;
static int f_malloc_host(void **p, size_t n)
{
    host_allocs++;
    *p = g_malloc0(n);
    return 0;
}

/* A contiguous target larger than the staging buffer goes to the host in chunks of at most
 * LG_VALIDATE_HOST_STAGE_BYTES through two staging buffers allocated once (pinned where the
 * runtime gives it), and the verdict is the one scan over the whole buffer gives, bit for bit:
 * offenders at and across chunk boundaries and more of them than samples are kept, a first chunk
 * all NaN or all ignore_index, zeros of both signs first met in a later chunk. */
static void test_host_chunked(void)
{
    init_host_backend();
    lg_validate_host_after_fork(); /* a fresh staging pool: this test counts its allocations */
    fake_rt.malloc_host = f_malloc_host;
    host_allocs = 0;
    const struct {
        lg_dtype_t d;
        const uint64_t *special; /* NULL: int64 labels */
    } k[] = {{LG_DTYPE_INT64, NULL},
             {LG_DTYPE_FLOAT32, special32},
             {LG_DTYPE_FLOAT16, special16},
             {LG_DTYPE_FLOAT64, special64}};
    GRand *r = g_rand_new_with_seed(31);
    for (size_t ki = 0; ki < G_N_ELEMENTS(k); ki++) {
        lg_dtype_t d = k[ki].d;
        size_t esz = lg_scan_elem_size(d);
        int64_t chunk = (int64_t)(LG_VALIDATE_HOST_STAGE_BYTES / esz), n = 3 * chunk + chunk / 3;
        for (int mode = 0; mode < 3; mode++) {
            g_test_message("dtype %d, mode %d", (int)d, mode);
            void *host = g_malloc0((gsize)n * esz);
            for (int64_t i = 0; i < n; i++) {
                int64_t ci = i % chunk;
                bool edge = ci == 0 || ci == chunk - 1;
                if (!k[ki].special) {
                    /* labels in [0, 20), ignore_index -100: 0 bad at edges and a few inside;
                     * 1 the same past a first chunk all ignored; 2 bad everywhere at random */
                    int64_t lab = g_rand_int_range(r, 0, 20);
                    if ((mode < 2 && i >= mode * chunk && (edge || g_rand_int_range(r, 0, 40000) == 0)) ||
                        (mode == 2 && g_rand_int_range(r, 0, 3) == 0))
                        lab = g_rand_boolean(r) ? 20 + g_rand_int_range(r, 0, 5) : -1 - g_rand_int_range(r, 0, 5);
                    if (mode == 1 && i < chunk)
                        lab = -100;
                    ((int64_t *)host)[i] = lab;
                    continue;
                }
                /* probabilities: 0 valid with specials at edges; 1 the first chunk all NaN,
                 * then valid, zeros of both signs from chunk 2 on; 2 specials at random */
                uint64_t b = k[ki].special[g_rand_boolean(r) ? 7 : 8];
                if (mode == 0 && edge)
                    b = k[ki].special[g_rand_int_range(r, 0, 16)];
                else if (mode == 1 && i < chunk)
                    b = k[ki].special[g_rand_int_range(r, 12, 15)];
                else if (mode == 1 && i >= 2 * chunk && g_rand_int_range(r, 0, 1000) == 0)
                    b = k[ki].special[g_rand_int_range(r, 0, 2)];
                else if (mode == 2 && g_rand_int_range(r, 0, 50) == 0)
                    b = k[ki].special[g_rand_int_range(r, 0, 16)];
                put_bits(d, host, i, b);
            }
            void *dev = dev_copy_of(host, (size_t)n * esz);
            lg_target_t t = k[ki].special ? flat(d, n, 0, 0, false) : flat(d, n, 20, -100, true);
            lg_verdict_t *v = g_new0(lg_verdict_t, 1), *want = g_new0(lg_verdict_t, 1);
            lg_scan_host(&t, host, 16, want);
            t.data = (uint64_t)(uintptr_t)dev;
            char why[256] = "";
            int c0 = copies;
            max_copy_bytes = 0;
            g_assert_cmpint(lg_validate_sync(&t, (void *)0x1234, 16, v, why, sizeof why), ==, 0);
            g_assert_cmpuint(max_copy_bytes, <=, LG_VALIDATE_HOST_STAGE_BYTES);
            g_assert_cmpint(copies - c0, ==, 4); /* 3 1/3 chunks */
            g_assert_cmpint(want->bad_count, >, 0);
            assert_same(v, want); /* min and max as bits: which zero, NaN when all are */
            g_free(v);
            g_free(want);
            g_free(host);
        }
    }
    g_assert_cmpint(host_allocs, ==, 2); /* one set of two buffers, reused by every check */
    fake_rt.malloc_host = NULL;
    g_rand_free(r);
}

/* torch.multinomial's weights (rule LG_SCAN_RULE_PROBS): in every float dtype, rows of 4:
 * weights above 1, zeros beside a positive one and -0 pass; a row of zeros (+0 and -0), a NaN,
 * an infinity and a negative weight (a negative subnormal too) are bad, each once, in index
 * order, a zero row at its first element. Then through the host backend's chunked copy, with a
 * row that straddles the chunk boundary ([0, 1, 1]): the chunks hold whole rows, so its zero
 * is not taken for a row of zeros. */
static void test_probs_rows(void)
{
    init_host_backend();
    /* 0.5 2 0 1 | 0 -0 0 0 | 1 NaN 1 1 | inf 1 1 1 | -0.1 1 1 1 | -0 1 0 0 | 1 1 1 -subnormal */
    static const uint16_t half[] = {0x3800, 0x4000, 0,      0x3C00, 0,      0x8000, 0,      0,      0x3C00, 0x7E00,
                                    0x3C00, 0x3C00, 0x7C00, 0x3C00, 0x3C00, 0x3C00, 0xAE66, 0x3C00, 0x3C00, 0x3C00,
                                    0x8000, 0x3C00, 0,      0,      0x3C00, 0x3C00, 0x3C00, 0x8001};
    static const uint16_t bf16[] = {0x3F00, 0x4000, 0,      0x3F80, 0,      0x8000, 0,      0,      0x3F80, 0x7FC0,
                                    0x3F80, 0x3F80, 0x7F80, 0x3F80, 0x3F80, 0x3F80, 0xBDCD, 0x3F80, 0x3F80, 0x3F80,
                                    0x8000, 0x3F80, 0,      0,      0x3F80, 0x3F80, 0x3F80, 0x8001};
    const float f32[] = {
        0.5f, 2, 0,     1, 0, -0.0f, 0, 0, 1, __builtin_nanf(""), 1, 1, __builtin_inff(), 1, 1, 1, -0.1f, 1,
        1,    1, -0.0f, 1, 0, 0,     1, 1, 1, -0x1p-149f};
    const double f64[] = {0.5, 2, 0,    1, 0, -0.0, 0, 0, 1, __builtin_nan(""), 1, 1, __builtin_inf(), 1, 1, 1, -0.1, 1,
                          1,   1, -0.0, 1, 0, 0,    1, 1, 1, -0x1p-1074};
    const struct {
        lg_dtype_t d;
        const void *host;
    } k[] = {{LG_DTYPE_FLOAT16, half}, {LG_DTYPE_BFLOAT16, bf16}, {LG_DTYPE_FLOAT32, f32}, {LG_DTYPE_FLOAT64, f64}};
    const int64_t want[] = {4, 9, 12, 16, 27};
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        g_test_message("dtype %d", (int)k[i].d);
        lg_target_t t = flat(k[i].d, 28, 4, 0, false);
        t.rule = LG_SCAN_RULE_PROBS;
        lg_verdict_t *v = g_new0(lg_verdict_t, 1);
        lg_scan_host(&t, k[i].host, 16, v);
        g_assert_cmpint(v->bad_count, ==, (int64_t)G_N_ELEMENTS(want));
        g_assert_cmpint(v->checked, ==, 28);
        g_assert_cmpint(v->n_samples, ==, (int)G_N_ELEMENTS(want));
        for (size_t j = 0; j < G_N_ELEMENTS(want); j++)
            g_assert_cmpint(v->samples[j].index, ==, want[j]);
        g_assert_cmpint(v->samples[0].value, ==, 0); /* the zero row's first element: +0 */
        g_assert_true(lg_scan_range_nan(k[i].d, v->samples[1].value));
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->max), ==, __builtin_inf());
        g_assert_cmpfloat(lg_scan_float(k[i].d, v->min), <, -0.09);
        g_free(v);
    }
    /* the host backend's chunks: 3-weight rows, all 1.0 but one [0, 1, 1] across the boundary */
    size_t esz = 4;
    int64_t chunk = (int64_t)(LG_VALIDATE_HOST_STAGE_BYTES / esz), cols = 3, n = 3 * (chunk / 3 + 1000);
    float *host = g_new(float, n);
    for (int64_t i = 0; i < n; i++)
        host[i] = 1.0f;
    int64_t straddle = chunk - 1; /* element chunk-1 starts a row (chunk = 3 * 87381 + 1) */
    g_assert_cmpint(straddle % cols, ==, 0);
    host[straddle] = 0.0f;
    host[n - 3] = host[n - 2] = host[n - 1] = 0.0f; /* and a true zero row, last */
    void *dev = dev_copy_of(host, (size_t)n * esz);
    lg_target_t t = flat(LG_DTYPE_FLOAT32, n, cols, 0, false);
    t.rule = LG_SCAN_RULE_PROBS;
    t.data = (uint64_t)(uintptr_t)dev;
    lg_verdict_t *v = g_new0(lg_verdict_t, 1);
    char why[256] = "";
    g_assert_cmpint(lg_validate_sync(&t, (void *)0x1234, 16, v, why, sizeof why), ==, 0);
    g_assert_cmpint(v->bad_count, ==, 1);
    g_assert_cmpint(v->n_samples, ==, 1);
    g_assert_cmpint(v->samples[0].index, ==, n - 3);
    g_free(v);
    g_free(host);
}

/* A runtime whose stream 0x7700 captures (id 77, begun under the hooks) and that takes host
 * functions (counted): what validate_node.c needs to capture a host node. */
static int host_funcs;
static int f_capturing77(void *s, int *st)
{
    *st = s == (void *)0x7700;
    return 0;
}
static int f_capture_info77(void *s, int *st, unsigned long long *id, void *g, void *d, void *n, void *x)
{
    (void)g, (void)d, (void)n, (void)x;
    *st = s == (void *)0x7700;
    *id = 77;
    return 0;
}
static int f_host_func(void *s, void (*fn)(void *), void *user)
{
    (void)s, (void)fn, (void)user;
    host_funcs++;
    return 0;
}

/* A range target (BCE's probabilities) captured on the host backend gets no host node (it would
 * copy to the host and scan at every replay): the check is refused, and the launch runs
 * unchecked as before; a label target in the same capture still gets its host node. */
static void test_host_range_capture(void)
{
    lg_runtime_t rt = fake_rt;
    rt.stream_is_capturing = f_capturing77;
    rt.stream_get_capture_info = f_capture_info77;
    rt.launch_host_func = f_host_func;
    rt.malloc_host = f_malloc_host;
    lg_validate_init(&rt);
    g_assert_cmpint(lg_validate_backend(), ==, LG_BACKEND_HOST);
    lg_captures_begun(77);
    float probs[64];
    for (int i = 0; i < 64; i++)
        probs[i] = i == 9 ? 1.5f : 0.5f;
    lg_target_t t = flat(LG_DTYPE_FLOAT32, 64, 0, 0, false);
    t.data = (uint64_t)(uintptr_t)dev_copy_of(probs, sizeof probs);
    lg_kernel_info_t info;
    memset(&info, 0, sizeof info);
    lg_capture_t cap = {.id = 77, .sanitize = false};
    uint64_t sanitized = 0;
    char why[512] = "";
    host_funcs = 0;
    g_assert_cmpint(lg_validate_async(&t, (void *)0x7700, 0, 16, &info, &cap, NULL, &sanitized, why, sizeof why), ==,
                    -1);
    g_test_message("%s", why);
    g_assert_cmpint(host_funcs, ==, 0);
    g_assert_nonnull(strstr(why, "runs on the GPU validator only"));
    /* labels: the host node, as ever */
    int64_t labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    lg_target_t l = flat(LG_DTYPE_INT64, 8, 20, -100, true);
    l.data = (uint64_t)(uintptr_t)dev_copy_of(labels, sizeof labels);
    cap.sanitize = true;
    why[0] = '\0';
    g_assert_cmpint(lg_validate_async(&l, (void *)0x7700, -100, 16, &info, &cap, NULL, &sanitized, why, sizeof why), ==,
                    0);
    g_assert_cmpint(host_funcs, ==, 1);
    lg_graphs_end_capture(77, (void *)0x7701);
    lg_graphs_destroyed((void *)0x7701);
    lg_captures_ended(77);
    lg_validate_init(&fake_rt);
}

static void test_host_errors(void)
{
    init_host_backend();
    lg_verdict_t v;
    char why[256] = "";
    int64_t on_stack[4] = {1, 2, 3, 4};
    lg_target_t t = flat(LG_DTYPE_INT64, 4, 10, -100, true);

    t.data = 0;
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "NULL"));

    why[0] = 0;
    t.data = (uint64_t)(uintptr_t)on_stack;
    int c0 = copies;
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "host memory"));
    g_assert_cmpint(copies, ==, c0); /* refused before any copy */
    g_assert_cmpuint(lg_validate_masked_copy(&t, NULL, -100, why, sizeof why), ==, 0);

    /* A failing copy is an error, and the runtime's sticky error is consumed. */
    t.data = (uint64_t)(uintptr_t)dev_copy_of(on_stack, sizeof on_stack);
    fail_copies = 1;
    int e0 = last_error_reads;
    why[0] = 0;
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "700"));
    g_assert_cmpint(last_error_reads, >, e0);
    fail_copies = 0;
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, 0);
    g_assert_cmpint(v.bad_count, ==, 0);

    /* count 0: clean, nothing copied, even with a NULL pointer */
    t.count = 0;
    t.data = 0;
    c0 = copies;
    memset(&v, 0x5a, sizeof v);
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, 0);
    g_assert_cmpint(v.bad_count, ==, 0);
    g_assert_cmpint(v.n_samples, ==, 0);
    g_assert_cmpint(copies, ==, c0);

    /* negative strides are refused, not read */
    t = flat(LG_DTYPE_INT64, 4, 10, -100, true);
    t.data = (uint64_t)(uintptr_t)dev_copy_of(on_stack, sizeof on_stack) + 24;
    t.strides[0] = -1;
    g_assert_cmpint(lg_validate_sync(&t, NULL, 16, &v, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "negative stride"));
}

static void test_host_masked_copy(void)
{
    init_host_backend();
    /* contiguous int64 */
    int64_t labels[] = {0, 12, -100, 3, -5, 9, 10};
    lg_target_t t = flat(LG_DTYPE_INT64, G_N_ELEMENTS(labels), 10, -100, true);
    void *dev = dev_copy_of(labels, sizeof labels);
    t.data = (uint64_t)(uintptr_t)dev;
    char why[256] = "";
    uint64_t c = lg_validate_masked_copy(&t, NULL, -100, why, sizeof why);
    g_assert_cmpuint(c, !=, 0);
    g_assert_true(is_dev((void *)(uintptr_t)c));
    const int64_t want[] = {0, -100, -100, 3, -100, 9, -100};
    g_assert_cmpmem((void *)(uintptr_t)c, sizeof want, want, sizeof want);
    g_assert_cmpmem(dev, sizeof labels, labels, sizeof labels); /* original untouched */

    /* uint8 with a replacement of 255, strided: offsets of the copy match the original's */
    uint8_t u[12] = {1, 99, 250, 99, 3, 99, 200, 99, 255, 99, 7, 99};
    lg_target_t s = flat(LG_DTYPE_UINT8, 6, 10, 255, true);
    s.strides[0] = 2;
    s.data = (uint64_t)(uintptr_t)dev_copy_of(u, sizeof u);
    c = lg_validate_masked_copy(&s, NULL, 255, why, sizeof why);
    g_assert_cmpuint(c, !=, 0);
    const uint8_t *cu = (const uint8_t *)(uintptr_t)c;
    const uint8_t wantu[6] = {1, 255, 3, 255, 255, 7};
    for (int i = 0; i < 6; i++)
        g_assert_cmpint(cu[2 * i], ==, wantu[i]);

    /* the copy the loss kernel will read scans clean */
    s.data = c;
    lg_verdict_t v;
    g_assert_cmpint(lg_validate_sync(&s, NULL, 16, &v, why, sizeof why), ==, 0);
    g_assert_cmpint(v.bad_count, ==, 0);
}

static void test_host_async(void)
{
    init_host_backend();
    lg_async_report_t *r = g_new0(lg_async_report_t, 1);
    while (lg_verdicts_collect(r, LG_COLLECT_MINE, NULL)) /* drain anything earlier tests left */
        ;
    int64_t bad[] = {1, 2, 77, 4};
    int64_t good[] = {1, 2, 3, 4};
    lg_target_t tb = flat(LG_DTYPE_INT64, 4, 10, -100, true), tg = tb;
    tb.data = (uint64_t)(uintptr_t)dev_copy_of(bad, sizeof bad);
    tg.data = (uint64_t)(uintptr_t)dev_copy_of(good, sizeof good);
    uint64_t sb = 0, sg = 0;
    char why[256] = "";
    struct lg_kernel_info *k1 = (struct lg_kernel_info *)(uintptr_t)0x100, *k2 = (struct lg_kernel_info *)(uintptr_t)0x200;
    g_assert_cmpint(lg_validate_async(&tb, (void *)0x11, -100, 8, k1, NULL, NULL, &sb, why, sizeof why), ==, 0);
    g_assert_cmpint(lg_validate_async(&tg, (void *)0x22, -100, 8, k2, NULL, NULL, &sg, why, sizeof why), ==, 0);
    g_assert_cmpuint(sg, ==, tg.data); /* clean: the launch may read the original */
    g_assert_cmpuint(sb, !=, tb.data);
    const int64_t want[] = {1, 2, -100, 4};
    g_assert_cmpmem((void *)(uintptr_t)sb, sizeof want, want, sizeof want);

    g_assert_true(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL)); /* in launch order */
    g_assert_true(r->info == k1);
    g_assert_true(r->stream == (void *)0x11);
    g_assert_cmpint(r->verdict.bad_count, ==, 1);
    g_assert_cmpint(r->verdict.samples[0].index, ==, 2);
    g_assert_cmpint(r->verdict.samples[0].value, ==, 77);
    g_assert_cmpuint(r->target.data, ==, tb.data);
    g_assert_true(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL));
    g_assert_true(r->info == k2);
    g_assert_cmpint(r->verdict.bad_count, ==, 0);
    g_assert_cmpint(r->verdict.checked, ==, 4);
    g_assert_false(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL));

    /* an error is reported at once, and leaves nothing to collect */
    int64_t host[2] = {0, 0};
    lg_target_t th = flat(LG_DTYPE_INT64, 2, 10, -100, true);
    th.data = (uint64_t)(uintptr_t)host;
    g_assert_cmpint(lg_validate_async(&th, NULL, -100, 8, k1, NULL, NULL, &sb, why, sizeof why), ==, -1);
    g_assert_false(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL));
    g_free(r);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scan/random", test_random);
    g_test_add_func("/scan/probs-rows", test_probs_rows);
    g_test_add_func("/scan/allow_negative", test_allow_negative);
    g_test_add_func("/scan/empty", test_empty);
    g_test_add_func("/scan/all_ignored", test_all_ignored);
    g_test_add_func("/scan/all_bad_and_sample_cap", test_all_bad_and_sample_cap);
    g_test_add_func("/scan/large_2_20", test_large);
    g_test_add_func("/scan/uint8_all_values", test_uint8_all_values);
    g_test_add_func("/scan/strided", test_strided);
    g_test_add_func("/scan/truncate_to_int32", test_truncate);
    g_test_add_func("/scan/no_classes", test_no_classes);
    g_test_add_func("/scan/abi_sizes", test_abi_sizes);
    g_test_add_func("/validate/host_sync", test_host_sync);
    g_test_add_func("/validate/float_range", test_float_range);
    g_test_add_func("/scan/range_exact", test_range_exact);
    g_test_add_func("/validate/host_chunked", test_host_chunked);
    g_test_add_func("/validate/host_range_capture", test_host_range_capture);
    g_test_add_func("/validate/host_errors", test_host_errors);
    g_test_add_func("/validate/host_masked_copy", test_host_masked_copy);
    g_test_add_func("/validate/host_async", test_host_async);
    return g_test_run();
}
