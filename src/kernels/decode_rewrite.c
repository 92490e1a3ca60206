/* decode_rewrite.c: the argument array of a masked launch (the mask action): a copy of args[] in
 * which the target pointer is the masked copy's, an accessor target's strides are contiguous
 * (the masked copy is dense, row-major), and optionally ignore_index is a new value; the
 * rewritten parameters' values live in the copy's own storage.
 *
 * Callers: act.c (a masked launch, on the launching thread, after lg_decode read the same launch
 * with the same spec). Every write is bounded by the spec's declared parameter sizes, as
 * decode.c's reads are. Tested by tests/unit/test_decode.c (rewrites of every built-in spec's
 * layout) and tests/fuzz/fuzz_spec.c.
 */
#include <string.h>

#include "kernels/kernels.h"

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
static unsigned char *own(const lg_spec_t *s, void **args, lg_args_copy_t *copy, int param)
{
    if (param < 0 || param >= s->n_params || !args[param] || s->param_sizes[param] <= 0)
        return NULL;
    unsigned char *lo = copy->storage, *p = copy->args[param];
    if (p >= lo && p < lo + sizeof copy->storage)
        return p;
    int size = s->param_sizes[param], at = (copy->used + 7) & ~7;
    if (at < 0 || (size_t)at + (size_t)size > sizeof copy->storage)
        return NULL;
    memcpy(lo + at, args[param], (size_t)size);
    copy->used = at + size;
    copy->args[param] = lo + at;
    return lo + at;
}

int lg_decode_rewrite(const lg_spec_t *spec, void **args, uint64_t new_data, bool rewrite_ignore, int64_t new_ignore,
                      lg_args_copy_t *copy)
{
    if (!spec || !args || !copy || spec->n_params > LG_MAX_PARAMS || spec->n_params < 0)
        return -1;
    if (spec->operands > 1)
        return -1; /* the copy would replace operand 0 only */
    if (spec->targets.width != 0) {
        /* several index tensors: a copy of one cannot stand in for the launch */
        int64_t n;
        if (lg_decode_field(spec, args, &spec->targets, &n) != 0 || n != 1)
            return -1;
    }
    for (int i = 0; i < spec->n_params; i++)
        copy->args[i] = args[i];
    for (int i = spec->n_params; i < LG_MAX_PARAMS; i++)
        copy->args[i] = NULL;
    copy->used = 0;

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
    unsigned char *tp = own(spec, args, copy, tf->param);
    if (!tp || tf->offset + 8 > spec->param_sizes[tf->param])
        return -1;
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
            int64_t sz = lg_decode_read_int(tp, spec->target_sizes_offset + d * w, w, true);
            if (sz < 0 || sz > LG_DECODE_ABSURD_COUNT || (sz > 0 && stride > LG_DECODE_ABSURD_COUNT / sz))
                return -1; /* lg_decode refuses such a shape too; never reached after it */
            stride *= sz > 0 ? sz : 1;
        }
    }

    if (rewrite_ignore) {
        const lg_field_t *f = &spec->ignore_index;
        unsigned char *ip = own(spec, args, copy, f->param);
        if (!ip)
            return -1;
        write_int(ip, f->offset, f->width, new_ignore);
    }
    return 0;
}
