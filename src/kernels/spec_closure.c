/* spec_closure.c: the keys of a spec group for closure-taking TensorIterator kernels, read
 * after target, count and n_classes: target_calc (the OffsetCalculator the closure captured,
 * sized as CUDA lays it out), targets (several index tensors, their number a field; or a constant
 * count of a range kernel's operands) and layout_check.
 *
 * Pure: no globals. Called by spec.c's group parser while the registry's table is built (lazy
 * start, one thread). Tested by tests/unit/test_registry.c and tests/unit/test_decode.c (parser
 * errors of closure specs) and tests/fuzz/fuzz_spec.c.
 */
#include <string.h>

#include <glib.h>

#include "kernels/kernels.h"

/* Bytes of an OffsetCalculator<nargs, index_t> with max_dims dimensions (CUDA's
 * ATen/cuda/detail/OffsetCalculator.cuh): int dims; IntDivider<index_t> sizes_[max_dims];
 * index_t strides_[max_dims][nargs]. IntDivider<uint32_t> is {divisor, m1, shift} (12 bytes,
 * so sizes_ follows dims at 4); IntDivider<uint64_t> is {divisor} (8 bytes, at 8). */
static int calc_bytes(int max_dims, int nargs, int width)
{
    int head = width == 4 ? 4 : 8, div = width == 4 ? 12 : 8;
    return head + max_dims * div + max_dims * nargs * width;
}

/* targets=param,offset,width,max: a kernel reading several index tensors, their number a field. */
static int parse_index_targets(const lg_spec_value_ctx_t *c, lg_spec_t *s, const int a[4])
{
    if (a[0] >= s->n_params)
        return lg_spec_value_bad(
            c, "targets", "parameter index %d out of range (the kernel has %d parameters, 0-based)", a[0], s->n_params);
    if (a[2] != 4 && a[2] != 8)
        return lg_spec_value_bad(c, "targets", "width %d: must be 4 or 8 bytes", a[2]);
    if (a[1] + a[2] > s->param_sizes[a[0]])
        return lg_spec_value_bad(c, "targets", "offset %d + width %d is beyond parameter %d (%d bytes)", a[1], a[2],
                                 a[0], s->param_sizes[a[0]]);
    if (a[3] < 1 || a[3] > 64)
        return lg_spec_value_bad(c, "targets", "max %d: must be 1..64", a[3]);
    if (s->calc.param < 0)
        return lg_spec_value_bad(c, "targets",
                                 "only with target_calc (index tensors read through one OffsetCalculator)");
    if (s->target.offset + 8 * a[3] > s->param_sizes[s->target.param])
        return lg_spec_value_bad(c, "targets", "%d target pointers from offset %d are beyond parameter %d (%d bytes)",
                                 a[3], s->target.offset, s->target.param, s->param_sizes[s->target.param]);
    if (s->n_classes.width != 8 || s->n_classes.offset + 8 * a[3] > s->param_sizes[s->n_classes.param])
        return lg_spec_value_bad(c, "targets", "%d bounds of 8 bytes from n_classes' offset %d are beyond parameter %d",
                                 a[3], s->n_classes.offset, s->n_classes.param);
    s->targets = (lg_field_t){.param = a[0], .offset = a[1], .width = a[2], .is_signed = true};
    s->targets_max = a[3];
    return 0;
}

/* The closure keys: target_calc, targets, layout_check (after target, count and n_classes). */
int lg_spec_closure_parse(const lg_spec_value_ctx_t *c, lg_spec_t *s)
{
    int rc = 0;
    s->calc.param = s->targets.param = -1;
    char *v;
    if ((v = lg_spec_value_get(c, "target_calc", false, &rc))) {
        int a[6];
        int n = lg_spec_value_ints(c, "target_calc", v, a, 6);
        g_free(v);
        if (n < 0)
            return -1;
        if (n != 6)
            return lg_spec_value_bad(c, "target_calc", "expected param,offset,max_dims,nargs,arg,index_width");
        if (a[0] >= s->n_params)
            return lg_spec_value_bad(c, "target_calc",
                                     "parameter index %d out of range (the kernel has %d parameters, 0-based)", a[0],
                                     s->n_params);
        if (a[5] != 4 && a[5] != 8)
            return lg_spec_value_bad(c, "target_calc",
                                     "index width %d: must be 4 (uint32_t index math) or 8 (uint64_t)", a[5]);
        if (a[2] < 1 || a[2] > 64)
            return lg_spec_value_bad(c, "target_calc", "max_dims %d: must be 1..64", a[2]);
        if (a[3] < 1 || a[3] > 16 || a[4] >= a[3])
            return lg_spec_value_bad(c, "target_calc", "nargs %d / arg %d: need 1 <= nargs <= 16 and arg < nargs", a[3],
                                     a[4]);
        if (a[1] % (a[5] == 4 ? 4 : 8))
            return lg_spec_value_bad(c, "target_calc", "offset %d: an OffsetCalculator is %d-byte aligned", a[1],
                                     a[5] == 4 ? 4 : 8);
        int bytes = calc_bytes(a[2], a[3], a[5]);
        if (a[1] + bytes > s->param_sizes[a[0]])
            return lg_spec_value_bad(c, "target_calc",
                                     "offset %d + %d bytes of OffsetCalculator is beyond parameter %d (%d bytes)", a[1],
                                     bytes, a[0], s->param_sizes[a[0]]);
        if (s->target_ndim)
            return lg_spec_value_bad(c, "target_calc", "not with target_accessor: the target is one or the other");
        if (s->count_kind != LG_COUNT_PARAM)
            return lg_spec_value_bad(c, "target_calc",
                                     "needs count=param (the launch's N, checked against the calculator)");
        s->calc = (lg_field_t){.param = a[0], .offset = a[1], .width = a[5], .is_signed = false};
        s->calc_max_dims = a[2];
        s->calc_nargs = a[3];
        s->calc_arg = a[4];
    }
    if (rc)
        return -1;
    if ((v = lg_spec_value_get(c, "targets", false, &rc))) {
        int a[4];
        int n = lg_spec_value_ints(c, "targets", v, a, 4);
        g_free(v);
        if (n < 0)
            return -1;
        if (n == 1) {
            /* targets=N: a constant N operands of an elementwise kernel (BCE: input, target),
             * pointer k at 8 * k after target's; through a calculator, operand arg + k */
            if (!s->range)
                return lg_spec_value_bad(c, "targets", "a constant count (targets=N) only with target_kind=range");
            if (a[0] < 1 || a[0] > LG_MAX_OPERANDS)
                return lg_spec_value_bad(c, "targets", "constant count %d: must be 1..%d", a[0], LG_MAX_OPERANDS);
            if (s->target.offset + 8 * a[0] > s->param_sizes[s->target.param])
                return lg_spec_value_bad(c, "targets",
                                         "%d operand pointers from offset %d are beyond parameter %d (%d bytes)", a[0],
                                         s->target.offset, s->target.param, s->param_sizes[s->target.param]);
            if (s->calc.param >= 0 && s->calc_arg + a[0] > s->calc_nargs)
                return lg_spec_value_bad(c, "targets", "%d operands from calculator operand %d: the calculator has %d",
                                         a[0], s->calc_arg, s->calc_nargs);
            s->operands = a[0];
        } else if (n != 4) {
            return lg_spec_value_bad(c, "targets",
                                     "expected param,offset,width,max (the number of index tensors), or a constant "
                                     "count of operands");
        } else if (parse_index_targets(c, s, a)) {
            return -1;
        }
    }
    if (rc)
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "layout_check", NULL)) {
        static const char *const checks[] = {"offset_calc", "match_types", NULL};
        int k = lg_spec_value_choice(c, "layout_check", checks, "offset_calc or match_types");
        if (k < 0)
            return -1;
        if (k == 0 && s->calc.param < 0)
            return lg_spec_value_bad(c, "layout_check", "offset_calc needs target_calc");
        /* match_types: the match names the types of the parameters that are not sized from
         * the signature (TensorIterator's std::array<char*, N> data array; the sampling kernel's
         * PhiloxCudaState), so a kernel it matches has the spec's layout; for capture-less
         * lambdas of range kernels and torch.multinomial's kernels */
        bool typed = strstr(s->match, "St5arrayIPcLm") || strstr(s->match, "6detail5ArrayIPcLi") ||
                     strstr(s->match, "15PhiloxCudaState");
        if (k == 1 && (!s->range || !typed))
            return lg_spec_value_bad(c, "layout_check",
                                     "match_types needs target_kind=range and the data array "
                                     "(St5arrayIPcLm... or 6detail5ArrayIPcLi...) or 15PhiloxCudaState in match");
        s->unsized_ok = true;
    }
    return 0;
}
