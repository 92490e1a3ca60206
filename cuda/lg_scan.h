/* lg_scan.h: the label scan shared by the GPU validator (cuda/validate.cu) and the host
 * backend (src/checks/validate.c). One definition of "bad label" for both, so the CPU unit tests
 * (tests/unit/test_scan.c) prove the same lines the GPU runs. Range targets (BCE's float
 * probabilities, valid in [0, 1], NaN bad) share the same scan; their values travel as raw
 * bits; the per-element rules (lg_scan_range_*) compare those bits, never a converted double.
 * torch.multinomial's weights (rule LG_SCAN_RULE_PROBS: finite, not negative, no row of zeros)
 * are judged by row, on the host only (lg_scan_probs_rows); the GPU backend hands them over.
 *
 * Plain C99 plus __host__ __device__ markers; no glib, no libc beyond stdint, so nvcc and
 * gcc both compile it. Included by C and CUDA translation units.
 */
#ifndef LG_SCAN_H
#define LG_SCAN_H

#include <stdint.h>
#include <stddef.h>

#ifdef __CUDACC__
#define LG_HD __host__ __device__ __forceinline__
#else
#define LG_HD static inline
#endif

#define LG_MAX_SAMPLES     256 /* hard upper bound of LABELGUARD_SAMPLES */
#define LG_MAX_TARGET_DIMS 3

/* The float dtypes are range targets (BCE's probability input): checked against [0, 1], NaN
 * bad. Their values travel as raw bits (lg_scan_load) and are read with lg_scan_float. */
typedef enum {
    LG_DTYPE_INT64 = 0,
    LG_DTYPE_UINT8 = 1,
    LG_DTYPE_INT32 = 2,
    LG_DTYPE_FLOAT32 = 3,
    LG_DTYPE_FLOAT64 = 4,
    LG_DTYPE_FLOAT16 = 5,
    LG_DTYPE_BFLOAT16 = 6,
} lg_dtype_t;

LG_HD int lg_scan_is_float(lg_dtype_t d) { return d >= LG_DTYPE_FLOAT32 && d <= LG_DTYPE_BFLOAT16; }

/* The value of raw bits of a float dtype (as lg_scan_load returns them), as a double. */
LG_HD double lg_scan_float(lg_dtype_t d, int64_t raw)
{
    uint64_t b = (uint64_t)raw;
    union {
        uint64_t u;
        double f;
    } d64;
    union {
        uint32_t u;
        float f;
    } f32;
    switch (d) {
    case LG_DTYPE_FLOAT64: d64.u = b; return d64.f;
    case LG_DTYPE_BFLOAT16: f32.u = (uint32_t)(b & 0xffffu) << 16; return (double)f32.f;
    case LG_DTYPE_FLOAT16: {
        uint32_t h = (uint32_t)(b & 0xffffu), sign = (h >> 15) & 1u, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        double v;
        if (e == 0x1f) {
            d64.u = m ? 0x7ff8000000000000ull : 0x7ff0000000000000ull; /* NaN or infinity */
            v = d64.f;
        } else if (e == 0) {
            v = (double)m / 16777216.0; /* subnormal: m * 2^-24 */
        } else {
            v = (double)(m | 0x400u) * (double)(1u << e) / 33554432.0; /* (1024 + m) * 2^(e - 25) */
        }
        return sign ? -v : v;
    }
    default: f32.u = (uint32_t)b; return (double)f32.f;
    }
}

/* ---- range targets compared as bits, never converted: the sign bit, infinity's bits and
 * 1.0's bits of each float dtype. A magnitude above infinity's is NaN; `x >= 0 && x <= 1` is
 * "bits <= 1.0's bits, or -0". The host scan and the GPU's range kernel both use these. */
LG_HD uint64_t lg_scan_range_sign(lg_dtype_t d)
{
    return d == LG_DTYPE_FLOAT64 ? 0x8000000000000000ull : d == LG_DTYPE_FLOAT32 ? 0x80000000ull : 0x8000ull;
}

LG_HD uint64_t lg_scan_range_inf(lg_dtype_t d)
{
    switch (d) {
    case LG_DTYPE_FLOAT64: return 0x7ff0000000000000ull;
    case LG_DTYPE_FLOAT16: return 0x7c00ull;
    case LG_DTYPE_BFLOAT16: return 0x7f80ull;
    default: return 0x7f800000ull;
    }
}

LG_HD uint64_t lg_scan_range_one(lg_dtype_t d)
{
    switch (d) {
    case LG_DTYPE_FLOAT64: return 0x3ff0000000000000ull;
    case LG_DTYPE_FLOAT16: return 0x3c00ull;
    case LG_DTYPE_BFLOAT16: return 0x3f80ull;
    default: return 0x3f800000ull;
    }
}

LG_HD int lg_scan_range_nan(lg_dtype_t d, int64_t raw)
{
    return ((uint64_t)raw & (lg_scan_range_sign(d) - 1)) > lg_scan_range_inf(d);
}

/* BCE's `input_val >= zero && input_val <= one`: NaN fails both. */
LG_HD int lg_scan_range_bad(lg_dtype_t d, int64_t raw)
{
    uint64_t sign = lg_scan_range_sign(d), b = (uint64_t)raw & (sign | (sign - 1));
    return !(b <= lg_scan_range_one(d) || b == sign);
}

/* What a range target's values must be (lg_target_t.rule). UNIT: BCE's probabilities, each in
 * [0, 1]. PROBS: torch.multinomial's weights, rows of n_classes each: every weight finite and not
 * negative (-0 is zero), and every row with a weight above 0; values above 1 are fine (the kernel
 * normalizes each row). The host backend alone judges PROBS (the row rule needs whole rows). */
enum { LG_SCAN_RULE_UNIT = 0, LG_SCAN_RULE_PROBS = 1 };

/* A multinomial weight the sampling kernels reject: NaN, an infinity, or below 0. */
LG_HD int lg_scan_probs_bad(lg_dtype_t d, int64_t raw)
{
    uint64_t sign = lg_scan_range_sign(d), b = (uint64_t)raw & (sign | (sign - 1)), mag = b & (sign - 1);
    return mag >= lg_scan_range_inf(d) || ((b & sign) && mag != 0);
}

/* A number's order as a signed integer: the magnitude, negated under the sign bit, so -0 and +0
 * are equal as they are as floats. Meaningless for NaN (callers test lg_scan_range_nan first). */
LG_HD int64_t lg_scan_range_key(lg_dtype_t d, int64_t raw)
{
    uint64_t sign = lg_scan_range_sign(d), mag = (uint64_t)raw & (sign - 1);
    return ((uint64_t)raw & sign) ? -(int64_t)mag : (int64_t)mag;
}

/* The bits a key stands for. Zero is ambiguous (-0 and +0 share key 0): the caller resolves it. */
LG_HD int64_t lg_scan_range_unkey(lg_dtype_t d, int64_t key)
{
    return key < 0 ? (int64_t)(lg_scan_range_sign(d) | (uint64_t)-key) : key;
}

/* Where the labels of one launch live and what they are checked against. `data` is a device
 * address on the GPU backend and a host copy on the host backend. Labels are addressed as an
 * ndim-dimensional view with element strides; a contiguous buffer is ndim=1, stride 1. */
typedef struct lg_target {
    uint64_t data;
    lg_dtype_t dtype;
    int ndim;                            /* 1..LG_MAX_TARGET_DIMS */
    int64_t sizes[LG_MAX_TARGET_DIMS];   /* elements */
    int64_t strides[LG_MAX_TARGET_DIMS]; /* elements, not bytes */
    int64_t count;                       /* product of sizes */
    int64_t n_classes;
    int64_t ignore_index;
    int has_ignore_index;  /* 0: the kernel has no ignore_index */
    int truncate_to_int32; /* the kernel compares (int)label: mirror it */
    int allow_negative;    /* ids in [-n_classes, 0) are valid: the kernel wraps them (index kernels) */
    int index_is_offset;   /* samples carry the element offset from data, not the logical index: a
                            * view decoded from a TensorIterator's OffsetCalculator (decode.c) */
    int operand;           /* range kernels: which operand was read (0 BCE's input, 1 its target) */
    int rule;              /* range kernels: LG_SCAN_RULE_UNIT (BCE: [0, 1]) or LG_SCAN_RULE_PROBS
                            * (torch.multinomial: rows of n_classes weights); keeps the layout an
                            * 8-byte multiple, as nvcc sees it */
} lg_target_t;

typedef struct lg_sample {
    int64_t index; /* linear index in the target's logical (row-major) order; with
                    * index_is_offset, the element offset from data (lg_scan_sample_index) */
    int64_t value;
} lg_sample_t;

/* The verdict on one target. min/max cover the non-ignored labels (bad ones included), so a
 * classifier sees the whole spread; both are 0 when `checked` is 0. */
typedef struct lg_verdict {
    int64_t bad_count;
    int64_t checked; /* labels that were not ignore_index */
    int64_t min, max;
    int n_samples; /* <= requested samples, first offenders in index order */
    lg_sample_t samples[LG_MAX_SAMPLES];
} lg_verdict_t;

/* Element offset (in elements) of logical index i. */
LG_HD int64_t lg_scan_offset(const lg_target_t *t, int64_t i)
{
    if (t->ndim <= 1)
        return i * t->strides[0];
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d] > 0 ? t->sizes[d] : 1;
        off += (i % sz) * t->strides[d];
        i /= sz;
    }
    return off;
}

/* What a sample reports for logical index i: i itself, or for a view read through a
 * TensorIterator the element of the tensor it views (its offset from data). */
LG_HD int64_t lg_scan_sample_index(const lg_target_t *t, int64_t i)
{
    return t->index_is_offset ? lg_scan_offset(t, i) : i;
}

LG_HD int64_t lg_scan_load(const lg_target_t *t, const void *base, int64_t i)
{
    int64_t off = lg_scan_offset(t, i);
    switch (t->dtype) {
    case LG_DTYPE_UINT8: return (int64_t)((const uint8_t *)base)[off];
    case LG_DTYPE_INT32: return (int64_t)((const int32_t *)base)[off];
    case LG_DTYPE_FLOAT32: return (int64_t)((const uint32_t *)base)[off];
    case LG_DTYPE_FLOAT16:
    case LG_DTYPE_BFLOAT16: return (int64_t)((const uint16_t *)base)[off];
    default: return ((const int64_t *)base)[off];
    }
}

/* The value the loss kernel compares: some PyTorch versions narrow the label to int first. */
LG_HD int64_t lg_scan_effective(const lg_target_t *t, int64_t v)
{
    return t->truncate_to_int32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v : v;
}

LG_HD int lg_scan_is_ignored(const lg_target_t *t, int64_t v)
{
    if (!t->has_ignore_index)
        return 0;
    int64_t ig = t->truncate_to_int32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)t->ignore_index : t->ignore_index;
    return lg_scan_effective(t, v) == ig;
}

/* Outside [0, n_classes) after narrowing. n_classes <= 0 makes every label bad, which is what
 * the loss kernel's own `t >= 0 && t < n_classes` assert would say. An index kernel that wraps
 * negative ids (ind += size when ind < 0, then the same assert) accepts [-n_classes, n_classes). */
LG_HD int lg_scan_is_bad(const lg_target_t *t, int64_t v)
{
    if (lg_scan_is_float(t->dtype))
        return lg_scan_range_bad(t->dtype, v); /* PROBS targets take lg_scan_probs_rows instead */
    int64_t e = lg_scan_effective(t, v);
    int64_t lo = t->allow_negative ? -t->n_classes : 0;
    return e < lo || e >= t->n_classes;
}

/* ---- target geometry: the same rules for the host backend, the GPU backend's launcher and
 * the kernels (src/validate*.c, cuda/validate.cu) */

LG_HD size_t lg_scan_elem_size(lg_dtype_t d)
{
    switch (d) {
    case LG_DTYPE_UINT8: return 1;
    case LG_DTYPE_FLOAT16:
    case LG_DTYPE_BFLOAT16: return 2;
    case LG_DTYPE_INT32:
    case LG_DTYPE_FLOAT32: return 4;
    default: return 8;
    }
}

/* Whether val replaces the running min (want_max 0) or max (1): floats by value, and a NaN
 * never replaces a number while a number replaces a NaN, so min/max cover the numbers (and
 * stay NaN's bits only when every value is NaN). */
LG_HD int lg_scan_extends(const lg_target_t *t, int64_t val, int64_t cur, int want_max)
{
    if (lg_scan_is_float(t->dtype)) {
        if (lg_scan_range_nan(t->dtype, val))
            return 0;
        if (lg_scan_range_nan(t->dtype, cur))
            return 1;
        int64_t v = lg_scan_range_key(t->dtype, val), c = lg_scan_range_key(t->dtype, cur);
        return want_max ? v > c : v < c;
    }
    return want_max ? val > cur : val < cur;
}

/* Elements from logical element 0 to the last one, inclusive, in memory: what a copy of the
 * target must hold so that the same element offsets stay valid. -1 for negative strides
 * (PyTorch never makes them; refusing is safer than reading before the buffer). */
LG_HD int64_t lg_scan_span(const lg_target_t *t)
{
    if (t->count <= 0)
        return 0;
    int64_t span = 1;
    int nd = t->ndim < 1 ? 1 : t->ndim;
    for (int d = 0; d < nd; d++) {
        if (t->strides[d] < 0)
            return -1;
        int64_t sz = nd == 1 ? t->count : t->sizes[d];
        if (sz > 1)
            span += (sz - 1) * t->strides[d];
    }
    return span;
}

/* A row-major contiguous view becomes ndim 1, stride 1: the kernels' vector path. */
LG_HD void lg_scan_normalize(const lg_target_t *in, lg_target_t *out)
{
    *out = *in;
    if (out->ndim < 1)
        out->ndim = 1;
    if (out->ndim == 1) {
        out->sizes[0] = out->count;
        return;
    }
    int64_t expect = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        if (out->sizes[d] != 1 && out->strides[d] != expect)
            return;
        expect *= out->sizes[d];
    }
    out->ndim = 1;
    out->sizes[0] = out->count;
    out->strides[0] = 1;
}

/* A verdict with nothing found: what a target without labels gets. */
LG_HD void lg_scan_clear(lg_verdict_t *v)
{
    v->bad_count = 0;
    v->checked = 0;
    v->min = 0;
    v->max = 0;
    v->n_samples = 0;
}

/* ---- the host's range pass: one pass over a contiguous float buffer with min, max, NaN and
 * bad counts together, in blocks of a fixed length with branch-free integer lanes, so that the
 * compiler vectorises it at -O2. Offenders are located afterwards, only when the pass counted
 * some. Host only: the GPU's range kernel reduces the same per-element rules (above) by warp. */
#ifndef __CUDACC__
typedef struct lg_scan_range_acc {
    int64_t nan_count, bad_count;
    int64_t min, max; /* raw bits of the least and greatest number; meaningless when all are NaN */
} lg_scan_range_acc_t;

#define LG_SCAN_RANGE_BLOCK 64

/* One dtype's pass: UT its bits, ST the signed type of the same width. The order key flips the
 * magnitude bits under the sign bit (so -0 sorts just below +0: the caller resolves zeros); a
 * NaN's lanes take the neutral element through a mask, so min and max cover the numbers. Selects
 * are written as masks and the block length is fixed because GCC's -O2 vectorises only that. */
#define LG_SCAN_RANGE_PASS(NAME, UT, ST, ST_MAX, SIGN, INF, ONE)                                                    \
    static inline void NAME(const UT *p, int64_t n, lg_scan_range_acc_t *a)                                         \
    {                                                                                                              \
        const UT abs_mask = (UT)(SIGN - 1);                                                                        \
        ST mn = ST_MAX, mx = (ST)(-ST_MAX - 1);                                                                    \
        int64_t nan = 0, bad = 0, i = 0;                                                                           \
        for (; i < n; i += LG_SCAN_RANGE_BLOCK) {                                                                  \
            int len = n - i < LG_SCAN_RANGE_BLOCK ? (int)(n - i) : LG_SCAN_RANGE_BLOCK;                            \
            UT bn = 0, bb = 0; /* per block: a lane's count cannot overflow */                                     \
            ST bmn = ST_MAX, bmx = (ST)(-ST_MAX - 1);                                                              \
            if (len == LG_SCAN_RANGE_BLOCK) {                                                                      \
                for (int j = 0; j < LG_SCAN_RANGE_BLOCK; j++)                                                      \
                    LG_SCAN_RANGE_LANE(UT, ST, ST_MAX, SIGN, INF, ONE)                                             \
            } else {                                                                                               \
                for (int j = 0; j < len; j++)                                                                      \
                    LG_SCAN_RANGE_LANE(UT, ST, ST_MAX, SIGN, INF, ONE)                                             \
            }                                                                                                      \
            nan += bn;                                                                                             \
            bad += bb;                                                                                             \
            mn = bmn < mn ? bmn : mn;                                                                              \
            mx = bmx > mx ? bmx : mx;                                                                              \
        }                                                                                                          \
        a->nan_count = nan;                                                                                        \
        a->bad_count = bad;                                                                                        \
        a->min = (int64_t)(UT)(mn < 0 ? (UT)mn ^ abs_mask : (UT)mn);                                               \
        a->max = (int64_t)(UT)(mx < 0 ? (UT)mx ^ abs_mask : (UT)mx);                                               \
    }

/* One element of a block: b its bits. */
#define LG_SCAN_RANGE_LANE(UT, ST, ST_MAX, SIGN, INF, ONE)                                                          \
    {                                                                                                              \
        UT b = p[i + j];                                                                                           \
        ST key = (ST)(b ^ ((UT)((ST)b < 0 ? abs_mask : 0)));                                                       \
        UT isnan = (b & abs_mask) > (UT)INF;                                                                       \
        ST m = (ST)-(ST)isnan;                                                                                     \
        bn += isnan;                                                                                               \
        bb += (UT)((b > (UT)ONE) & (b != (UT)SIGN));                                                               \
        ST kmin = (ST)((key & ~m) | ((ST)ST_MAX & m)), kmax = (ST)((key & ~m) | ((ST)(-ST_MAX - 1) & m));          \
        bmn = kmin < bmn ? kmin : bmn;                                                                             \
        bmx = kmax > bmx ? kmax : bmx;                                                                             \
    }

LG_SCAN_RANGE_PASS(lg_scan_range_pass32, uint32_t, int32_t, INT32_MAX, 0x80000000u, 0x7f800000u, 0x3f800000u)

/* float64: x86-64's baseline vectors have no 64-bit compare, so the masked lanes above would run
 * scalar; a branch on the common case (bits of [+0, 1]: the key is the bits) is three times
 * faster there. The same keys and counts as the other passes. */
static inline void lg_scan_range_pass64(const uint64_t *p, int64_t n, lg_scan_range_acc_t *a)
{
    const uint64_t abs_mask = 0x7fffffffffffffffull;
    int64_t mn = INT64_MAX, mx = INT64_MIN, nan = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = p[i];
        int64_t key = (int64_t)b;
        if (__builtin_expect(b > 0x3ff0000000000000ull, 0)) {
            bad += b != 0x8000000000000000ull;
            if ((b & abs_mask) > 0x7ff0000000000000ull) {
                nan++;
                continue;
            }
            key = (int64_t)(b ^ ((b >> 63) ? abs_mask : 0));
        }
        mn = key < mn ? key : mn;
        mx = key > mx ? key : mx;
    }
    a->nan_count = nan;
    a->bad_count = bad;
    a->min = mn < 0 ? (int64_t)((uint64_t)mn ^ abs_mask) : mn;
    a->max = mx < 0 ? (int64_t)((uint64_t)mx ^ abs_mask) : mx;
}
LG_SCAN_RANGE_PASS(lg_scan_range_pass_half, uint16_t, int16_t, INT16_MAX, 0x8000u, 0x7c00u, 0x3c00u)
LG_SCAN_RANGE_PASS(lg_scan_range_pass_bf16, uint16_t, int16_t, INT16_MAX, 0x8000u, 0x7f80u, 0x3f80u)

/* The contiguous range scan: the verdict of lg_scan_host's element loop (min and max the first
 * of equal numbers, so -0 or +0 whichever comes first; the first element's bits when every
 * element is NaN; samples the first offenders in index order). */
static inline void lg_scan_range_contiguous(const lg_target_t *t, const void *base, int max_samples,
                                            lg_verdict_t *v)
{
    lg_dtype_t d = t->dtype;
    int64_t n = t->count;
    lg_scan_range_acc_t a;
    switch (d) {
    case LG_DTYPE_FLOAT64: lg_scan_range_pass64((const uint64_t *)base, n, &a); break;
    case LG_DTYPE_FLOAT16: lg_scan_range_pass_half((const uint16_t *)base, n, &a); break;
    case LG_DTYPE_BFLOAT16: lg_scan_range_pass_bf16((const uint16_t *)base, n, &a); break;
    default: lg_scan_range_pass32((const uint32_t *)base, n, &a); break;
    }
    v->checked = n;
    v->bad_count = a.bad_count;
    if (a.nan_count == n) {
        v->min = v->max = lg_scan_load(t, base, 0);
    } else {
        uint64_t abs_mask = lg_scan_range_sign(d) - 1;
        v->min = a.min;
        v->max = a.max;
        if (!((uint64_t)a.min & abs_mask) || !((uint64_t)a.max & abs_mask)) {
            /* a zero: the element loop keeps the first zero's sign, whichever the pass ordered first */
            int64_t i = 0, z;
            while (lg_scan_range_key(d, z = lg_scan_load(t, base, i)) != 0 || lg_scan_range_nan(d, z))
                i++;
            if (!((uint64_t)a.min & abs_mask))
                v->min = z;
            if (!((uint64_t)a.max & abs_mask))
                v->max = z;
        }
    }
    int want = a.bad_count < max_samples ? (int)a.bad_count : max_samples;
    for (int64_t i = 0; v->n_samples < want; i++) {
        int64_t val = lg_scan_load(t, base, i);
        if (lg_scan_range_bad(d, val)) {
            v->samples[v->n_samples].index = lg_scan_sample_index(t, i);
            v->samples[v->n_samples].value = val;
            v->n_samples++;
        }
    }
}
/* The multinomial rule over rows of n_classes weights (t->count / n_classes rows): each bad
 * weight is an offender, and so is a row whose weights are all zero (its sum is 0: the sampling
 * kernel's `cumdist[size - 1] > 0` fails); such a row's sample is its first element (index
 * r * n_classes, value 0), so samples stay in index order. bad_count counts both. Host only. */
static inline void lg_scan_probs_rows(const lg_target_t *t, const void *base, int max_samples, lg_verdict_t *v)
{
    int64_t cols = t->n_classes > 0 ? t->n_classes : t->count, abs_mask = (int64_t)(lg_scan_range_sign(t->dtype) - 1);
    for (int64_t r = 0; cols > 0 && r * cols < t->count; r++) {
        int row_zero = 1, row_bad = 0;
        for (int64_t c = 0; c < cols && r * cols + c < t->count; c++) {
            int64_t i = r * cols + c, val = lg_scan_load(t, base, i);
            if (v->checked == 0 || lg_scan_extends(t, val, v->min, 0))
                v->min = val;
            if (v->checked == 0 || lg_scan_extends(t, val, v->max, 1))
                v->max = val;
            v->checked++;
            row_zero &= (val & abs_mask) == 0;
            if (lg_scan_probs_bad(t->dtype, val)) {
                row_bad = 1;
                if (v->n_samples < max_samples) {
                    v->samples[v->n_samples].index = lg_scan_sample_index(t, i);
                    v->samples[v->n_samples].value = val;
                    v->n_samples++;
                }
                v->bad_count++;
            }
        }
        if (row_zero && !row_bad) {
            if (v->n_samples < max_samples) {
                v->samples[v->n_samples].index = lg_scan_sample_index(t, r * cols);
                v->samples[v->n_samples].value = lg_scan_load(t, base, r * cols);
                v->n_samples++;
            }
            v->bad_count++;
        }
    }
}
#endif

/* Host scan over a host-resident copy. `base` points at element 0. Fills v completely.
 * Contiguous range targets take the vectorised pass above; everything else the element loop. */
LG_HD void lg_scan_host(const lg_target_t *t, const void *base, int max_samples, lg_verdict_t *v)
{
    lg_scan_clear(v);
    if (max_samples > LG_MAX_SAMPLES)
        max_samples = LG_MAX_SAMPLES;
#ifndef __CUDACC__
    if (t->rule == LG_SCAN_RULE_PROBS) {
        lg_scan_probs_rows(t, base, max_samples, v);
        return;
    }
    if (lg_scan_is_float(t->dtype) && !t->has_ignore_index && t->count > 0 && t->ndim <= 1 && t->strides[0] == 1) {
        lg_scan_range_contiguous(t, base, max_samples, v);
        return;
    }
#endif
    for (int64_t i = 0; i < t->count; i++) {
        int64_t val = lg_scan_load(t, base, i);
        if (lg_scan_is_ignored(t, val))
            continue;
        if (v->checked == 0 || lg_scan_extends(t, val, v->min, 0))
            v->min = val;
        if (v->checked == 0 || lg_scan_extends(t, val, v->max, 1))
            v->max = val;
        v->checked++;
        if (lg_scan_is_bad(t, val)) {
            if (v->n_samples < max_samples) {
                v->samples[v->n_samples].index = lg_scan_sample_index(t, i);
                v->samples[v->n_samples].value = val;
                v->n_samples++;
            }
            v->bad_count++;
        }
    }
}

#endif
