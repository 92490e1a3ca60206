/* decode.c: turns one launch's argument array into the description of its labels
 * (lg_target_t), following a registry spec, and builds the rewritten argument array for the
 * mask action (new target pointer, contiguous strides, optionally a new ignore_index).
 *
 * Callers: classify.c (lg_decode_dtype, once per kernel), launch.c (lg_decode, each watched
 * launch) and act.c (lg_decode_rewrite, a masked launch), on the launching thread, only after
 * lg_registry_find checked the spec's layout against the kernel. Every read is bounded by the
 * spec's declared parameter sizes (which the parser checked against each field), values are
 * copied with memcpy (args[] slots need not be aligned), and whatever comes out is checked
 * for sanity before the validator trusts it.
 *
 * Tested by tests/unit/test_decode.c: every built-in spec against a hand-built args[] array.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* More labels than this in one launch means we misread the arguments (2^40 int64 labels
 * would be 8 TiB). */
#define ABSURD_COUNT (INT64_C(1) << 40)

static int64_t read_int(const void *base, int offset, int width, bool is_signed)
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
    *out = read_int(args[f->param], f->offset, f->width, f->is_signed);
    return 0;
}

int lg_decode_dtype(const lg_spec_t *spec, const char *mangled, lg_dtype_t *dtype, char *why, size_t why_len)
{
    if (!spec->dtype_from_template) {
        *dtype = spec->dtype;
        return 0;
    }
    char c = spec->dtype_template_arg > 0 ? lg_demangle_template_arg(mangled, spec->dtype_template_arg)
                                          : lg_demangle_last_template_arg(mangled);
    switch (c) {
    case 'l':
    case 'x': *dtype = LG_DTYPE_INT64; return 0;
    case 'h': *dtype = LG_DTYPE_UINT8; return 0;
    case 'i': *dtype = LG_DTYPE_INT32; return 0;
    default:
        snprintf(why, why_len, "[%s]: label type unknown (template argument '%c' of %s)", spec->name, c ? c : '?',
                 mangled ? mangled : "(no name)");
        return -1;
    }
}

int lg_decode(const lg_spec_t *spec, lg_dtype_t dtype, void **args, const unsigned grid[3], lg_target_t *out, char *why,
              size_t why_len)
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

    /* target pointer */
    const lg_field_t *tf = &spec->target;
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
            int64_t sz = read_int(tp, spec->target_sizes_offset + d * w, w, true);
            int64_t st = read_int(tp, spec->target_strides_offset + d * w, w, true);
            if (sz < 0 || st < 0 || sz > ABSURD_COUNT || st > ABSURD_COUNT) {
                snprintf(why, why_len, "[%s]: target accessor dim %d has size %lld stride %lld: not plausible",
                         spec->name, d, (long long)sz, (long long)st);
                return -1;
            }
            out->sizes[d] = sz;
            out->strides[d] = st;
            if (sz && acc_count > ABSURD_COUNT / sz) {
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
        if (nelem && batch > ABSURD_COUNT / nelem) {
            snprintf(why, why_len, "[%s]: label count overflows", spec->name);
            return -1;
        }
        count = batch * nelem;
        break;
    }
    default: snprintf(why, why_len, "[%s]: unknown count kind", spec->name); return -1;
    }
    if (count < 0 || count > ABSURD_COUNT) {
        snprintf(why, why_len, "[%s]: label count %lld is not plausible", spec->name, (long long)count);
        return -1;
    }
    if (spec->target_ndim == 0 || spec->count_kind != LG_COUNT_ACCESSOR) {
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

    /* n_classes */
    int64_t nc;
    if (field_value(spec, args, &spec->n_classes, &nc, "n_classes", why, why_len))
        return -1;
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
    if (nc <= 0)
        snprintf(why, why_len, "[%s]: n_classes is %lld: every label is out of range", spec->name, (long long)nc);
    return 0;
}

int lg_decode_field(const lg_spec_t *spec, void **args, const lg_field_t *f, int64_t *out)
{
    char why[8];
    if (!spec || !args || !f || f->param < 0)
        return -1;
    return field_value(spec, args, f, out, "field", why, sizeof why);
}

static void write_int(void *base, int offset, int width, int64_t v)
{
    unsigned char *p = (unsigned char *)base + offset;
    if (width == 1) {
        uint8_t x = (uint8_t)v;
        memcpy(p, &x, 1);
    } else if (width == 4) {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

/* Copies one parameter into the copy's storage (once) and points the copy's slot at it. */
static int own(const lg_spec_t *s, void **args, lg_args_copy_t *copy, int param)
{
    if (param < 0 || param >= s->n_params || s->param_sizes[param] > (int)sizeof copy->storage[0] || !args[param])
        return -1;
    if (copy->args[param] != copy->storage[param]) {
        memcpy(copy->storage[param], args[param], (size_t)s->param_sizes[param]);
        copy->args[param] = copy->storage[param];
    }
    return 0;
}

int lg_decode_rewrite(const lg_spec_t *spec, void **args, uint64_t new_data, bool rewrite_ignore, int64_t new_ignore,
                      lg_args_copy_t *copy)
{
    if (!spec || !args || !copy || spec->n_params > LG_MAX_PARAMS || spec->n_params < 0)
        return -1;
    for (int i = 0; i < spec->n_params; i++)
        copy->args[i] = args[i];
    for (int i = spec->n_params; i < LG_MAX_PARAMS; i++)
        copy->args[i] = NULL;

    if (rewrite_ignore) {
        const lg_field_t *f = &spec->ignore_index;
        if (f->param < 0)
            return -1;
        int w = f->width;
        bool fits = w == 8 ||
                    (w == 4 && (f->is_signed ? new_ignore >= INT32_MIN && new_ignore <= INT32_MAX
                                             : new_ignore >= 0 && new_ignore <= UINT32_MAX)) ||
                    (w == 1 && (f->is_signed ? new_ignore >= INT8_MIN && new_ignore <= INT8_MAX
                                             : new_ignore >= 0 && new_ignore <= UINT8_MAX));
        if (!fits || f->offset + w > spec->param_sizes[f->param])
            return -1;
    }

    const lg_field_t *tf = &spec->target;
    if (own(spec, args, copy, tf->param) || tf->offset + 8 > spec->param_sizes[tf->param])
        return -1;
    unsigned char *tp = copy->storage[tf->param];
    memcpy(tp + tf->offset, &new_data, 8);
    if (spec->target_ndim > 0) {
        /* The masked copy is dense in logical (row-major) order: contiguous strides. */
        int nd = spec->target_ndim, w = spec->target_index_width;
        if (spec->target_sizes_offset + nd * w > spec->param_sizes[tf->param] ||
            spec->target_strides_offset + nd * w > spec->param_sizes[tf->param])
            return -1;
        int64_t stride = 1;
        for (int d = nd - 1; d >= 0; d--) {
            write_int(tp, spec->target_strides_offset + d * w, w, stride);
            int64_t sz = read_int(tp, spec->target_sizes_offset + d * w, w, true);
            if (sz < 0 || sz > ABSURD_COUNT || (sz > 0 && stride > ABSURD_COUNT / sz))
                return -1; /* lg_decode refuses such a shape too; never reached after it */
            stride *= sz > 0 ? sz : 1;
        }
    }

    if (rewrite_ignore) {
        const lg_field_t *f = &spec->ignore_index;
        if (own(spec, args, copy, f->param))
            return -1;
        write_int(copy->storage[f->param], f->offset, f->width, new_ignore);
    }
    return 0;
}
