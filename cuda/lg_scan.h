/* lg_scan.h: the label scan shared by the GPU validator (cuda/validate.cu) and the host
 * backend (src/validate.c). One definition of "bad label" for both, so the CPU unit tests
 * (tests/unit/test_scan.c) prove the same lines the GPU runs. Range targets (BCE's float
 * probabilities, valid in [0, 1], NaN bad) share the same scan; their values travel as raw
 * bits. Only the host backend scans them today (validate.c routes them there).
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
    int reserved;          /* explicit padding: the layout nvcc sees, 8-byte multiple */
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
    if (lg_scan_is_float(t->dtype)) {
        /* BCE's `input_val >= zero && input_val <= one`: NaN fails both */
        double x = lg_scan_float(t->dtype, v);
        return !(x >= 0.0 && x <= 1.0);
    }
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
        double v = lg_scan_float(t->dtype, val), c = lg_scan_float(t->dtype, cur);
        if (v != v)
            return 0;
        if (c != c)
            return 1;
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

/* Host scan over a host-resident copy. `base` points at element 0. Fills v completely. */
LG_HD void lg_scan_host(const lg_target_t *t, const void *base, int max_samples, lg_verdict_t *v)
{
    lg_scan_clear(v);
    if (max_samples > LG_MAX_SAMPLES)
        max_samples = LG_MAX_SAMPLES;
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
