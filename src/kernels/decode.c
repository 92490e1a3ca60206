/* decode.c: turns one launch's argument array into the description of its labels
 * (lg_target_t), following a registry spec. The kernel's label dtype is decode_dtype.c's; the
 * rewritten argument array of the mask action (new target pointer, contiguous strides,
 * optionally a new ignore_index) is decode_rewrite.c's.
 *
 * Callers: launch.c (lg_decode_nth, lg_decode_targets, each watched launch), act.c and
 * logprobs.c (lg_decode_field, lg_decode_calc_operand), on the launching thread, only after
 * lg_registry_find checked the spec's layout against the kernel. Every read is bounded by the
 * spec's declared parameter sizes (which the parser checked against each field), values are
 * copied with memcpy (args[] slots need not be aligned), and whatever comes out is checked
 * for sanity before the validator trusts it.
 *
 * Closure-taking TensorIterator kernels (spec target_calc): the ids are read through the
 * OffsetCalculator the closure captured, as the view the kernel reads (each distinct element
 * once, samples at element offsets), after checking that the calculator is one (its sizes make
 * the launch's N, its IntDividers carry their magic numbers); gpu_index_kernel's several index
 * tensors are decoded one by one (lg_decode_nth), as are a range kernel's operands (BCE's input
 * and target: spec targets=2, each with its own calculator strides).
 *
 * Tested by tests/unit/test_decode.c: every built-in spec against a hand-built args[] array;
 * the closures also against real torch's launches by tests/torch-fake/test_closure.sh.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"

int64_t lg_decode_read_int(const void *base, int offset, int width, bool is_signed)
{
    const unsigned char *p = (const unsigned char *)base + offset;
    switch (width) {
    case 1: {
        uint8_t v;
        memcpy(&v, p, 1);
        return is_signed ? (int64_t)(int8_t)v : (int64_t)v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return is_signed ? (int64_t)(int32_t)v : (int64_t)v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static int field_value(const lg_spec_t *s, void **args, const lg_field_t *f, int64_t *out, const char *what, char *why,
                       size_t why_len)
{
    if (f->param < 0 || f->param >= s->n_params || f->offset + f->width > s->param_sizes[f->param]) {
        snprintf(why, why_len, "[%s]: %s field outside the declared parameters", s->name, what);
        return -1;
    }
    if (!args[f->param]) {
        snprintf(why, why_len, "[%s]: argument %d (%s) is NULL", s->name, f->param, what);
        return -1;
    }
    *out = lg_decode_read_int(args[f->param], f->offset, f->width, f->is_signed);
    return 0;
}

/* IntDivider<uint32_t>'s magic numbers, as its constructor computes them: shift the least s
 * with 2^s >= divisor, m1 = 2^32 * (2^shift - divisor) / divisor + 1. A calculator whose every
 * divisor carries its own m1 and shift is an OffsetCalculator, not bytes read at a wrong offset. */
static bool divider_ok(uint32_t divisor, uint32_t m1, uint32_t shift)
{
    if (divisor == 0)
        return false;
    uint32_t sh = 0;
    while (sh < 32 && (UINT64_C(1) << sh) < divisor)
        sh++;
    uint64_t want = ((UINT64_C(1) << 32) * ((UINT64_C(1) << sh) - divisor)) / divisor + 1;
    return shift == sh && (uint64_t)m1 == (want & 0xffffffffu);
}

/* The target as a TensorIterator operand: the OffsetCalculator's sizes (dimension 0 fastest)
 * and the operand's byte strides. Dimensions of size 1 or stride 0 (expanded) are dropped, so
 * the view holds each distinct element once, and adjacent ones that are dense together merge;
 * the dimensions are then stored slowest first, as lg_scan_offset walks them. The product of
 * all sizes must be the launch's N: the check that the calculator sits where the spec says. */
static int decode_calc(const lg_spec_t *s, lg_dtype_t dtype, void **args, int64_t n, int step, lg_target_t *out,
                       char *why, size_t why_len)
{
    const lg_field_t *f = &s->calc;
    int w = f->width, md = s->calc_max_dims, nargs = s->calc_nargs, arg = s->calc_arg + step;
    int head = w == 4 ? 4 : 8, div = w == 4 ? 12 : 8;
    int bytes = head + md * div + md * nargs * w;
    if (f->param < 0 || f->param >= s->n_params || (w != 4 && w != 8) || arg >= nargs ||
        f->offset + bytes > s->param_sizes[f->param] || !args[f->param]) {
        snprintf(why, why_len, "[%s]: OffsetCalculator outside the declared parameters", s->name);
        return -1;
    }
    const unsigned char *p = (const unsigned char *)args[f->param] + f->offset;
    int64_t dims = lg_decode_read_int(p, 0, 4, true);
    if (dims < 0 || dims > md) {
        snprintf(why, why_len, "[%s]: OffsetCalculator has %lld dimensions (at most %d): not a calculator", s->name,
                 (long long)dims, md);
        return -1;
    }
    int64_t esz = (int64_t)lg_scan_elem_size(dtype), total = 1;
    int64_t sz[64], st[64];
    int k = 0;
    for (int d = 0; d < dims; d++) {
        int64_t size = lg_decode_read_int(p, head + d * div, w, false);
        int64_t stride = lg_decode_read_int(p, head + md * div + (d * nargs + arg) * w, w, false);
        if (w == 4 && !divider_ok((uint32_t)size, (uint32_t)lg_decode_read_int(p, head + d * div + 4, 4, false),
                                  (uint32_t)lg_decode_read_int(p, head + d * div + 8, 4, false))) {
            snprintf(why, why_len, "[%s]: OffsetCalculator dimension %d (size %lld) is not an IntDivider: not a calculator",
                     s->name, d, (long long)size);
            return -1;
        }
        if (size <= 0 || size > LG_DECODE_ABSURD_COUNT || stride < 0 || stride > LG_DECODE_ABSURD_COUNT * 8 ||
            stride % esz) {
            snprintf(why, why_len, "[%s]: OffsetCalculator dimension %d has size %lld, byte stride %lld: not plausible",
                     s->name, d, (long long)size, (long long)stride);
            return -1;
        }
        if (total > LG_DECODE_ABSURD_COUNT / size) {
            snprintf(why, why_len, "[%s]: OffsetCalculator sizes overflow", s->name);
            return -1;
        }
        total *= size;
        if (size == 1 || stride == 0)
            continue;
        if (k > 0 && st[k - 1] * sz[k - 1] == stride / esz) {
            sz[k - 1] *= size;
            continue;
        }
        sz[k] = size;
        st[k] = stride / esz;
        k++;
    }
    if (total != n) {
        snprintf(why, why_len,
                 "[%s]: the OffsetCalculator's sizes make %lld elements, the launch has N = %lld: the closure's layout "
                 "is not the spec's",
                 s->name, (long long)total, (long long)n);
        return -1;
    }
    if (k > LG_MAX_TARGET_DIMS) {
        snprintf(why, why_len, "[%s]: the index view has %d strided dimensions (at most %d are read)", s->name, k,
                 LG_MAX_TARGET_DIMS);
        return -1;
    }
    int64_t count = 1;
    for (int d = 0; d < LG_MAX_TARGET_DIMS; d++)
        out->sizes[d] = out->strides[d] = 0;
    if (k == 0) {
        /* every position reads the same element (or there is one) */
        out->ndim = 1;
        out->sizes[0] = 1;
        out->strides[0] = 1;
    } else {
        out->ndim = k;
        for (int j = 0; j < k; j++) {
            out->sizes[k - 1 - j] = sz[j];
            out->strides[k - 1 - j] = st[j];
            count *= sz[j];
        }
    }
    out->count = n > 0 ? count : 0;
    out->index_is_offset = 1;
    return 0;
}

int lg_decode_targets(const lg_spec_t *spec, void **args, char *why, size_t why_len)
{
    char dummy[8];
    if (!why || !why_len) {
        why = dummy;
        why_len = sizeof dummy;
    }
    if (spec && spec->operands > 0)
        return spec->operands;
    if (!spec || spec->targets.width == 0)
        return 1;
    int64_t n;
    if (field_value(spec, args, &spec->targets, &n, "targets", why, why_len))
        return -1;
    if (n < 1 || n > spec->targets_max) {
        snprintf(why, why_len, "[%s]: %lld index tensors (1..%d expected): not plausible", spec->name, (long long)n,
                 spec->targets_max);
        return -1;
    }
    return (int)n;
}

int lg_decode(const lg_spec_t *spec, lg_dtype_t dtype, void **args, const unsigned grid[3], lg_target_t *out, char *why,
              size_t why_len)
{
    return lg_decode_nth(spec, dtype, args, grid, 0, out, why, why_len);
}

int lg_decode_nth(const lg_spec_t *spec, lg_dtype_t dtype, void **args, const unsigned grid[3], int k, lg_target_t *out,
                  char *why, size_t why_len)
{
    char dummy[8];
    if (!why || !why_len) {
        why = dummy;
        why_len = sizeof dummy;
    }
    why[0] = 0;
    if (!spec || !args || !out) {
        snprintf(why, why_len, "no spec or argument array");
        return -1;
    }
    memset(out, 0, sizeof *out);
    int most = spec->operands > 0 ? spec->operands : spec->targets.width != 0 ? spec->targets_max : 1;
    if (k < 0 || k >= most) {
        snprintf(why, why_len, "[%s]: no index tensor %d", spec->name, k);
        return -1;
    }

    /* target pointer (target k of several: 8 bytes apart) */
    lg_field_t tk = spec->target;
    tk.offset += 8 * k;
    const lg_field_t *tf = &tk;
    if (tf->param < 0 || tf->param >= spec->n_params || tf->offset + 8 > spec->param_sizes[tf->param] ||
        !args[tf->param]) {
        snprintf(why, why_len, "[%s]: target argument missing", spec->name);
        return -1;
    }
    const unsigned char *tp = args[tf->param];
    uint64_t data;
    memcpy(&data, tp + tf->offset, 8);
    out->data = data;

    out->dtype = dtype;

    /* shape: the accessor's view, or a dense vector */
    int64_t acc_count = 1;
    if (spec->target_ndim > 0) {
        int nd = spec->target_ndim, w = spec->target_index_width;
        if (nd > LG_MAX_TARGET_DIMS || (w != 4 && w != 8) ||
            spec->target_sizes_offset + nd * w > spec->param_sizes[tf->param] ||
            spec->target_strides_offset + nd * w > spec->param_sizes[tf->param]) {
            snprintf(why, why_len, "[%s]: accessor description outside parameter %d", spec->name, tf->param);
            return -1;
        }
        out->ndim = nd;
        for (int d = 0; d < nd; d++) {
            int64_t sz = lg_decode_read_int(tp, spec->target_sizes_offset + d * w, w, true);
            int64_t st = lg_decode_read_int(tp, spec->target_strides_offset + d * w, w, true);
            if (sz < 0 || st < 0 || sz > LG_DECODE_ABSURD_COUNT || st > LG_DECODE_ABSURD_COUNT) {
                snprintf(why, why_len, "[%s]: target accessor dim %d has size %lld stride %lld: not plausible",
                         spec->name, d, (long long)sz, (long long)st);
                return -1;
            }
            out->sizes[d] = sz;
            out->strides[d] = st;
            if (sz && acc_count > LG_DECODE_ABSURD_COUNT / sz) {
                snprintf(why, why_len, "[%s]: target accessor sizes overflow", spec->name);
                return -1;
            }
            acc_count *= sz;
        }
    }

    /* count */
    int64_t count = 0;
    switch (spec->count_kind) {
    case LG_COUNT_ONE: count = 1; break;
    case LG_COUNT_PARAM:
        if (field_value(spec, args, &spec->count, &count, "count", why, why_len))
            return -1;
        break;
    case LG_COUNT_ACCESSOR:
        if (spec->target_ndim <= 0) {
            snprintf(why, why_len, "[%s]: count=accessor without an accessor target", spec->name);
            return -1;
        }
        count = acc_count;
        break;
    case LG_COUNT_GRID_MAP: {
        int64_t nelem, bps;
        if (field_value(spec, args, &spec->map_nelem, &nelem, "map_nelem", why, why_len) ||
            field_value(spec, args, &spec->blocks_per_sample, &bps, "blocks_per_sample", why, why_len))
            return -1;
        if (!grid) {
            snprintf(why, why_len, "[%s]: no grid for a grid-derived count", spec->name);
            return -1;
        }
        if (bps <= 0 || nelem < 0) {
            snprintf(why, why_len, "[%s]: blocks_per_sample %lld / map_nelem %lld: not plausible", spec->name,
                     (long long)bps, (long long)nelem);
            return -1;
        }
        int64_t batch = (int64_t)grid[0] / bps;
        if (nelem && batch > LG_DECODE_ABSURD_COUNT / nelem) {
            snprintf(why, why_len, "[%s]: label count overflows", spec->name);
            return -1;
        }
        count = batch * nelem;
        break;
    }
    default: snprintf(why, why_len, "[%s]: unknown count kind", spec->name); return -1;
    }
    if (count < 0 || count > LG_DECODE_ABSURD_COUNT) {
        snprintf(why, why_len, "[%s]: label count %lld is not plausible", spec->name, (long long)count);
        return -1;
    }
    if (spec->calc.width != 0) {
        /* operand k of a range kernel has its own strides; index tensors share theirs */
        if (decode_calc(spec, dtype, args, count, spec->operands > 0 ? k : 0, out, why, why_len))
            return -1;
        count = out->count;
    } else if (spec->target_ndim == 0 || spec->count_kind != LG_COUNT_ACCESSOR) {
        /* a dense vector (or the first dimension of an accessor, when the count comes from
         * elsewhere) */
        int64_t stride = spec->target_ndim > 0 ? out->strides[0] : 1;
        out->ndim = 1;
        out->sizes[0] = count;
        out->strides[0] = stride;
        for (int d = 1; d < LG_MAX_TARGET_DIMS; d++)
            out->sizes[d] = out->strides[d] = 0;
    }
    out->count = count;
    if (count > 0 && data == 0) {
        snprintf(why, why_len, "[%s]: target pointer is NULL with %lld labels", spec->name, (long long)count);
        return -1;
    }

    if (spec->probs) {
        /* torch.multinomial's weights: `count` rows of n_classes, contiguous (the op's own copy) */
        int64_t cols;
        if (field_value(spec, args, &spec->n_classes, &cols, "n_classes", why, why_len))
            return -1;
        if (cols <= 0 || (count && cols > LG_DECODE_ABSURD_COUNT / count)) {
            snprintf(why, why_len, "[%s]: %lld rows of %lld weights: not plausible", spec->name, (long long)count,
                     (long long)cols);
            return -1;
        }
        out->count = out->sizes[0] = count * cols;
        out->n_classes = cols;
        out->rule = LG_SCAN_RULE_PROBS;
        return 0;
    }
    if (spec->range) {
        /* BCE's probabilities: the bound is [0, 1], no class count, nothing ignored */
        out->n_classes = 0;
        out->operand = k;
        return 0;
    }

    /* n_classes */
    int64_t nc;
    lg_field_t nk = spec->n_classes;
    nk.offset += 8 * k;
    if (field_value(spec, args, &nk, &nc, "n_classes", why, why_len))
        return -1;
    if (spec->n_classes_times.width != 0) {
        int64_t f;
        if (field_value(spec, args, &spec->n_classes_times, &f, "n_classes_times", why, why_len))
            return -1;
        if (nc < 0 || f < 0 || (f && nc > LG_DECODE_ABSURD_COUNT / f)) {
            snprintf(why, why_len, "[%s]: bound %lld x %lld: not plausible", spec->name, (long long)nc, (long long)f);
            return -1;
        }
        nc *= f;
    }
    out->n_classes = nc;

    /* ignore_index */
    if (spec->ignore_index.param >= 0) {
        int64_t ig;
        if (field_value(spec, args, &spec->ignore_index, &ig, "ignore_index", why, why_len))
            return -1;
        out->ignore_index = ig;
        out->has_ignore_index = 1;
        /* An index kernel's padding_idx: PyTorch passes -1 for padding_idx=None
         * (F.embedding_bag), and no negative one names a row; a negative id is then bad, not
         * skipped. */
        if (spec->ids && ig < 0)
            out->has_ignore_index = 0;
    }
    out->truncate_to_int32 = spec->truncate_to_int32;
    if (spec->ids && spec->allow_negative.param >= 0) {
        int64_t neg;
        if (field_value(spec, args, &spec->allow_negative, &neg, "allow_negative", why, why_len))
            return -1;
        out->allow_negative = neg != 0;
    }
    if (spec->ids && spec->allow_negative_always)
        out->allow_negative = 1;
    if (nc <= 0)
        snprintf(why, why_len, "[%s]: n_classes is %lld: every label is out of range", spec->name, (long long)nc);
    return 0;
}

/* Another operand of a closure kernel's OffsetCalculator (cause.c asks where a scatter
 * writes: one id per row, or many ids into one row). Raw: every dimension as the calculator
 * holds it, byte strides, fastest first. Bounded by the spec's sizes like decode_calc. */
int lg_decode_calc_operand(const lg_spec_t *s, void **args, int operand, int64_t *sizes, int64_t *strides, int cap)
{
    const lg_field_t *f = &s->calc;
    int w = f->width, md = s->calc_max_dims, nargs = s->calc_nargs;
    int head = w == 4 ? 4 : 8, div = w == 4 ? 12 : 8;
    if (!args || f->param < 0 || f->param >= s->n_params || (w != 4 && w != 8) || operand < 0 || operand >= nargs ||
        f->offset + head + md * div + md * nargs * w > s->param_sizes[f->param] || !args[f->param])
        return -1;
    const unsigned char *p = (const unsigned char *)args[f->param] + f->offset;
    int64_t dims = lg_decode_read_int(p, 0, 4, true);
    if (dims < 0 || dims > md || dims > cap)
        return -1;
    for (int d = 0; d < dims; d++) {
        sizes[d] = lg_decode_read_int(p, head + d * div, w, false);
        strides[d] = lg_decode_read_int(p, head + md * div + (d * nargs + operand) * w, w, false);
    }
    return (int)dims;
}

int lg_decode_field(const lg_spec_t *spec, void **args, const lg_field_t *f, int64_t *out)
{
    char why[8];
    if (!spec || !args || !f || f->param < 0)
        return -1;
    return field_value(spec, args, f, out, "field", why, sizeof why);
}
