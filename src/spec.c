/* spec.c: the parser of kernel spec text, the GKeyFile format of specs/pytorch.conf
 * (documented there): one group per kernel layout. Every problem gives one message naming
 * file, line, group and field, including what GKeyFile accepts silently (duplicate groups and
 * keys, stray lines, invalid UTF-8); every field is checked against the parameter sizes the
 * spec declares, so decode.c never reads outside them.
 *
 * Pure: no globals. Where each group and key sits in the text, and the line checks GKeyFile
 * does not make, are spec_text.c's. Called by registry.c while it builds the table (lazy start, one thread).
 * Tested by tests/unit/test_registry.c (parser errors) and tests/fuzz/fuzz_spec.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "internal.h"

/* ---- semantic parsing of one group ---------------------------------------------------- */

typedef struct ctx {
    GKeyFile *kf;
    const char *origin;
    const char *group;
    const lg_spec_text_t *map;
    char *err;
    size_t err_len;
} ctx_t;

static int bad(const ctx_t *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(const ctx_t *c, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lg_spec_error(c->err, c->err_len, "%s:%d: [%s] %s: %s", c->origin, lg_spec_text_line(c->map, c->group, key),
                  c->group, key, msg);
    return -1;
}

static const char *const known_keys[] = {
    "versions",        "match",          "family",
    "direction",       "params",         "target",
    "target_accessor", "dtype",          "count",
    "count_field",     "map_nelem",      "blocks_per_sample",
    "n_classes",       "ignore_index",   "truncate_to_int32",
    "target_kind",     "allow_negative", "weight",
    "size_average",    "input",          "no_mask",
    "target_calc",     "targets",        "layout_check",
    NULL,
};

/* Returns a trimmed copy of the value (g_free), or NULL with err set when missing/required. */
static char *get(const ctx_t *c, const char *key, bool required, int *rc)
{
    GError *e = NULL;
    char *v = g_key_file_get_string(c->kf, c->group, key, &e);
    if (!v) {
        bool missing = e && e->domain == G_KEY_FILE_ERROR && e->code == G_KEY_FILE_ERROR_KEY_NOT_FOUND;
        if (missing && !required) {
            g_clear_error(&e);
            return NULL;
        }
        if (missing)
            bad(c, key, "required key is missing");
        else
            bad(c, key, "%s", e ? e->message : "unreadable value");
        g_clear_error(&e);
        *rc = -1;
        return NULL;
    }
    g_strstrip(v);
    if (!*v) {
        bad(c, key, "empty value");
        g_free(v);
        *rc = -1;
        return NULL;
    }
    return v;
}

/* Parses "a,b,c" into at most max integers in [-1, 1<<20]; returns the count or -1. */
static int int_list(const ctx_t *c, const char *key, const char *v, int *out, int max)
{
    int n = 0;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > (1 << 20))
            return bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        if (n == max)
            return bad(c, key, "\"%s\": more than %d values", v, max);
        out[n++] = (int)x;
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0)
            return n;
        if (*p != ',')
            return bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        p++;
    }
}

/* A field "param,offset,width[,signed]" that must fit inside the parameter's size. */
static int field(const ctx_t *c, const lg_spec_t *s, const char *key, lg_field_t *f, bool allow_none, int *rc)
{
    char *v = get(c, key, true, rc);
    if (!v)
        return -1;
    f->param = -1;
    f->offset = 0;
    f->width = 0;
    f->is_signed = true;
    if (allow_none && strcmp(v, "none") == 0) {
        g_free(v);
        return 0;
    }
    int x[4];
    int n = int_list(c, key, v, x, 4);
    if (n < 0) {
        g_free(v);
        return *rc = -1;
    }
    if (n < 3) {
        bad(c, key, "\"%s\": expected param,offset,width[,signed]%s", v, allow_none ? " or none" : "");
        g_free(v);
        return *rc = -1;
    }
    g_free(v);
    if (x[0] >= s->n_params)
        return *rc = bad(c, key, "parameter index %d out of range (the kernel has %d parameters, 0-based)", x[0],
                         s->n_params);
    if (x[2] != 1 && x[2] != 4 && x[2] != 8)
        return *rc = bad(c, key, "width %d: must be 1, 4 or 8 bytes", x[2]);
    if (x[1] + x[2] > s->param_sizes[x[0]])
        return *rc = bad(c, key, "offset %d + width %d is beyond parameter %d (%d bytes)", x[1], x[2], x[0],
                         s->param_sizes[x[0]]);
    if (n == 4 && x[3] > 1)
        return *rc = bad(c, key, "signed flag must be 0 or 1");
    f->param = x[0];
    f->offset = x[1];
    f->width = x[2];
    f->is_signed = n < 4 || x[3] == 1;
    return 0;
}

/* The index in names[] (NULL-terminated) of the required key's value; -1 with err set. */
static int choice(const ctx_t *c, const char *key, const char *const *names, const char *allowed)
{
    int rc = 0;
    char *v = get(c, key, true, &rc);
    if (!v)
        return -1;
    int k = -1;
    for (int i = 0; names[i] && k < 0; i++)
        if (strcmp(v, names[i]) == 0)
            k = i;
    if (k < 0)
        bad(c, key, "\"%s\": must be %s", v, allowed);
    g_free(v);
    return k;
}

/* from_functor:MARK:N[:int64|int32]: MARK a mangled-name piece ending in the functor's 'I'. */
static int parse_functor_dtype(const ctx_t *c, lg_spec_t *s, const char *v)
{
    const char *colon = strchr(v, ':');
    size_t ml = colon ? (size_t)(colon - v) : 0;
    if (!colon || ml == 0 || ml >= sizeof s->dtype_functor || v[ml - 1] != 'I' ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") < ml)
        return bad(c, "dtype", "from_functor:MARK:N[:default]: MARK is a piece of the mangled name ending in the "
                               "functor's template 'I' (e.g. 36_cuda_scatter_gather_internal_kernelI)");
    char *end = NULL;
    long pos = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || pos < 1 || pos > 16 || (*end && *end != ':'))
        return bad(c, "dtype", "from_functor: the argument number N must be 1..16");
    if (*end == ':') {
        if (strcmp(end + 1, "int64") == 0)
            s->dtype_functor_default = LG_DTYPE_INT64;
        else if (strcmp(end + 1, "int32") == 0)
            s->dtype_functor_default = LG_DTYPE_INT32;
        else
            return bad(c, "dtype", "from_functor: the default must be int64 or int32");
        s->dtype_functor_has_default = true;
    }
    memcpy(s->dtype_functor, v, ml);
    s->dtype_functor[ml] = 0;
    s->dtype_functor_arg = (int)pos;
    s->dtype = LG_DTYPE_INT64;
    return 0;
}

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
static int parse_index_targets(const ctx_t *c, lg_spec_t *s, const int a[4])
{
    if (a[0] >= s->n_params)
        return bad(c, "targets", "parameter index %d out of range (the kernel has %d parameters, 0-based)", a[0],
                   s->n_params);
    if (a[2] != 4 && a[2] != 8)
        return bad(c, "targets", "width %d: must be 4 or 8 bytes", a[2]);
    if (a[1] + a[2] > s->param_sizes[a[0]])
        return bad(c, "targets", "offset %d + width %d is beyond parameter %d (%d bytes)", a[1], a[2], a[0],
                   s->param_sizes[a[0]]);
    if (a[3] < 1 || a[3] > 64)
        return bad(c, "targets", "max %d: must be 1..64", a[3]);
    if (s->calc.param < 0)
        return bad(c, "targets", "only with target_calc (index tensors read through one OffsetCalculator)");
    if (s->target.offset + 8 * a[3] > s->param_sizes[s->target.param])
        return bad(c, "targets", "%d target pointers from offset %d are beyond parameter %d (%d bytes)", a[3],
                   s->target.offset, s->target.param, s->param_sizes[s->target.param]);
    if (s->n_classes.width != 8 || s->n_classes.offset + 8 * a[3] > s->param_sizes[s->n_classes.param])
        return bad(c, "targets", "%d bounds of 8 bytes from n_classes' offset %d are beyond parameter %d", a[3],
                   s->n_classes.offset, s->n_classes.param);
    s->targets = (lg_field_t){.param = a[0], .offset = a[1], .width = a[2], .is_signed = true};
    s->targets_max = a[3];
    return 0;
}

/* The closure keys: target_calc, targets, layout_check (after target, count and n_classes). */
static int parse_closure(const ctx_t *c, lg_spec_t *s)
{
    int rc = 0;
    s->calc.param = s->targets.param = -1;
    char *v;
    if ((v = get(c, "target_calc", false, &rc))) {
        int a[6];
        int n = int_list(c, "target_calc", v, a, 6);
        g_free(v);
        if (n < 0)
            return -1;
        if (n != 6)
            return bad(c, "target_calc", "expected param,offset,max_dims,nargs,arg,index_width");
        if (a[0] >= s->n_params)
            return bad(c, "target_calc", "parameter index %d out of range (the kernel has %d parameters, 0-based)",
                       a[0], s->n_params);
        if (a[5] != 4 && a[5] != 8)
            return bad(c, "target_calc", "index width %d: must be 4 (uint32_t index math) or 8 (uint64_t)", a[5]);
        if (a[2] < 1 || a[2] > 64)
            return bad(c, "target_calc", "max_dims %d: must be 1..64", a[2]);
        if (a[3] < 1 || a[3] > 16 || a[4] >= a[3])
            return bad(c, "target_calc", "nargs %d / arg %d: need 1 <= nargs <= 16 and arg < nargs", a[3], a[4]);
        if (a[1] % (a[5] == 4 ? 4 : 8))
            return bad(c, "target_calc", "offset %d: an OffsetCalculator is %d-byte aligned", a[1], a[5] == 4 ? 4 : 8);
        int bytes = calc_bytes(a[2], a[3], a[5]);
        if (a[1] + bytes > s->param_sizes[a[0]])
            return bad(c, "target_calc", "offset %d + %d bytes of OffsetCalculator is beyond parameter %d (%d bytes)",
                       a[1], bytes, a[0], s->param_sizes[a[0]]);
        if (s->target_ndim)
            return bad(c, "target_calc", "not with target_accessor: the target is one or the other");
        if (s->count_kind != LG_COUNT_PARAM)
            return bad(c, "target_calc", "needs count=param (the launch's N, checked against the calculator)");
        s->calc = (lg_field_t){.param = a[0], .offset = a[1], .width = a[5], .is_signed = false};
        s->calc_max_dims = a[2];
        s->calc_nargs = a[3];
        s->calc_arg = a[4];
    }
    if (rc)
        return -1;
    if ((v = get(c, "targets", false, &rc))) {
        int a[4];
        int n = int_list(c, "targets", v, a, 4);
        g_free(v);
        if (n < 0)
            return -1;
        if (n == 1) {
            /* targets=N: a constant N operands of an elementwise kernel (BCE: input, target),
             * pointer k at 8 * k after target's; through a calculator, operand arg + k */
            if (!s->range)
                return bad(c, "targets", "a constant count (targets=N) only with target_kind=range");
            if (a[0] < 1 || a[0] > LG_MAX_OPERANDS)
                return bad(c, "targets", "constant count %d: must be 1..%d", a[0], LG_MAX_OPERANDS);
            if (s->target.offset + 8 * a[0] > s->param_sizes[s->target.param])
                return bad(c, "targets", "%d operand pointers from offset %d are beyond parameter %d (%d bytes)", a[0],
                           s->target.offset, s->target.param, s->param_sizes[s->target.param]);
            if (s->calc.param >= 0 && s->calc_arg + a[0] > s->calc_nargs)
                return bad(c, "targets", "%d operands from calculator operand %d: the calculator has %d", a[0],
                           s->calc_arg, s->calc_nargs);
            s->operands = a[0];
        } else if (n != 4) {
            return bad(c, "targets", "expected param,offset,width,max (the number of index tensors), or a constant "
                                     "count of operands");
        } else if (parse_index_targets(c, s, a)) {
            return -1;
        }
    }
    if (rc)
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "layout_check", NULL)) {
        static const char *const checks[] = {"offset_calc", "match_types", NULL};
        int k = choice(c, "layout_check", checks, "offset_calc or match_types");
        if (k < 0)
            return -1;
        if (k == 0 && s->calc.param < 0)
            return bad(c, "layout_check", "offset_calc needs target_calc");
        /* match_types: the match names the types of the parameters that are not sized from
         * the signature (TensorIterator's std::array<char*, N> data array), so a kernel it
         * matches has the spec's layout; for capture-less lambdas of range kernels */
        if (k == 1 && (!s->range || (!strstr(s->match, "St5arrayIPcLm") && !strstr(s->match, "6detail5ArrayIPcLi"))))
            return bad(c, "layout_check", "match_types needs target_kind=range and the data array "
                                          "(St5arrayIPcLm... or 6detail5ArrayIPcLi...) in match");
        s->unsized_ok = true;
    }
    return 0;
}

static int parse_group(const ctx_t *c, lg_spec_t *s)
{
    int rc = 0;
    memset(s, 0, sizeof *s);
    g_strlcpy(s->name, c->group, sizeof s->name);

    char **keys = g_key_file_get_keys(c->kf, c->group, NULL, NULL);
    for (char **k = keys; k && *k; k++) {
        bool ok = false;
        for (int i = 0; known_keys[i]; i++)
            ok |= strcmp(*k, known_keys[i]) == 0;
        if (!ok) {
            bad(c, *k,
                "unknown key (known: versions, match, family, direction, params, target, target_accessor, "
                "dtype, count, count_field, map_nelem, blocks_per_sample, n_classes, ignore_index, "
                "truncate_to_int32, target_kind, allow_negative, weight, size_average, input, no_mask, target_calc, "
                "targets, layout_check)");
            g_strfreev(keys);
            return -1;
        }
    }
    g_strfreev(keys);

    char *v;
    if ((v = get(c, "versions", false, &rc))) {
        g_strlcpy(s->versions, v, sizeof s->versions);
        g_free(v);
    }
    if (rc)
        return -1;

    if (!(v = get(c, "match", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->match) {
        g_free(v);
        return bad(c, "match", "longer than %zu characters", sizeof s->match - 1);
    }
    for (char *p = v; *p; p++) {
        if (*p == ' ' || *p == '\t' || (p[0] == ';' && (p[1] == ';' || p[1] == 0)) || v[0] == ';') {
            g_free(v);
            return bad(c, "match", "substrings of the mangled name, separated by ';', without blanks or empty parts");
        }
    }
    g_strlcpy(s->match, v, sizeof s->match);
    g_free(v);

    if (!(v = get(c, "family", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->family || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(v)) {
        g_free(v);
        return bad(c, "family", "1..%zu characters of [a-z0-9_]", sizeof s->family - 1);
    }
    g_strlcpy(s->family, v, sizeof s->family);
    g_free(v);

    static const char *const directions[] = {"forward", "backward", NULL};
    int k = choice(c, "direction", directions, "forward or backward");
    if (k < 0)
        return -1;
    s->direction = k == 0 ? LG_DIR_FORWARD : LG_DIR_BACKWARD;

    if (!(v = get(c, "params", true, &rc)))
        return -1;
    int n = int_list(c, "params", v, s->param_sizes, LG_MAX_PARAMS);
    g_free(v);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s->param_sizes[i] < 1 || s->param_sizes[i] > 4096)
            return bad(c, "params", "parameter %d has size %d: must be 1..4096 bytes", i, s->param_sizes[i]);
    s->n_params = n;

    /* target: param[,offset], an 8-byte device pointer */
    if (!(v = get(c, "target", true, &rc)))
        return -1;
    int t[2] = {0, 0};
    n = int_list(c, "target", v, t, 2);
    g_free(v);
    if (n < 0)
        return -1;
    if (t[0] >= s->n_params)
        return bad(c, "target", "parameter index %d out of range (the kernel has %d parameters, 0-based)", t[0],
                   s->n_params);
    if (t[1] + 8 > s->param_sizes[t[0]])
        return bad(c, "target", "offset %d + 8-byte pointer is beyond parameter %d (%d bytes)", t[1], t[0],
                   s->param_sizes[t[0]]);
    s->target = (lg_field_t){.param = t[0], .offset = t[1], .width = 8, .is_signed = false};

    if ((v = get(c, "target_accessor", false, &rc))) {
        int a[4];
        n = int_list(c, "target_accessor", v, a, 4);
        g_free(v);
        if (n < 0)
            return -1;
        if (n != 4)
            return bad(c, "target_accessor", "expected ndim,sizes_offset,strides_offset,index_width");
        if (a[0] < 1 || a[0] > LG_MAX_TARGET_DIMS)
            return bad(c, "target_accessor", "ndim %d: must be 1..%d", a[0], LG_MAX_TARGET_DIMS);
        if (a[3] != 4 && a[3] != 8)
            return bad(c, "target_accessor", "index width %d: must be 4 or 8 bytes", a[3]);
        int psize = s->param_sizes[s->target.param];
        if (a[1] + a[0] * a[3] > psize || a[2] + a[0] * a[3] > psize)
            return bad(c, "target_accessor", "sizes/strides beyond parameter %d (%d bytes)", s->target.param, psize);
        s->target_ndim = a[0];
        s->target_sizes_offset = a[1];
        s->target_strides_offset = a[2];
        s->target_index_width = a[3];
    }
    if (rc)
        return -1;

    if (!(v = get(c, "dtype", true, &rc)))
        return -1;
    static const char *const dtypes[] = {"int64", "uint8", "int32", "float32", "float64", "float16", "bfloat16", NULL};
    static const lg_dtype_t dtype_of[] = {LG_DTYPE_INT64,   LG_DTYPE_UINT8,   LG_DTYPE_INT32,   LG_DTYPE_FLOAT32,
                                          LG_DTYPE_FLOAT64, LG_DTYPE_FLOAT16, LG_DTYPE_BFLOAT16};
    k = -1;
    for (int i = 0; dtypes[i]; i++)
        if (strcmp(v, dtypes[i]) == 0)
            k = i;
    if (k >= 0) {
        s->dtype = dtype_of[k];
    } else if (strncmp(v, "from_template", 13) == 0) {
        /* from_template: the last template argument; from_template:N the N-th (1-based), for
         * kernels whose id type is not the last one (indexSelect<T, IndicesType, ...>). */
        s->dtype = LG_DTYPE_INT64;
        s->dtype_from_template = true;
        char *end = NULL;
        long pos = v[13] == ':' ? strtol(v + 14, &end, 10) : 0;
        if (v[13] && (v[13] != ':' || !end || end == v + 14 || *end || pos < 1 || pos > 16)) {
            bad(c, "dtype", "\"%s\": from_template:N needs N in 1..16", v);
            g_free(v);
            return -1;
        }
        s->dtype_template_arg = (int)pos;
    } else if (strncmp(v, "from_functor:", 13) == 0) {
        if (parse_functor_dtype(c, s, v + 13)) {
            g_free(v);
            return -1;
        }
    } else {
        bad(c, "dtype", "\"%s\": must be int64, uint8, int32, float32, float64, float16, bfloat16, from_template, "
            "from_template:N or from_functor:...", v);
        g_free(v);
        return -1;
    }
    g_free(v);

    static const char *const kinds[] = {"param", "one", "accessor", "grid_map", NULL};
    int kind = choice(c, "count", kinds, "param, one, accessor or grid_map");
    if (kind < 0)
        return -1;
    s->count_kind = (lg_count_kind_t)kind;
    s->count.param = s->map_nelem.param = s->blocks_per_sample.param = -1;
    static const char *const by_kind[4][2] = {
        {"count_field", NULL}, {NULL, NULL}, {NULL, NULL}, {"map_nelem", "blocks_per_sample"}};
    const char *const optional[] = {"count_field", "map_nelem", "blocks_per_sample"};
    for (int i = 0; i < 3; i++) {
        bool wanted = (by_kind[kind][0] && strcmp(by_kind[kind][0], optional[i]) == 0) ||
                      (by_kind[kind][1] && strcmp(by_kind[kind][1], optional[i]) == 0);
        if (!wanted && g_key_file_has_key(c->kf, c->group, optional[i], NULL))
            return bad(c, optional[i], "not used with count=%s", kinds[kind]);
    }
    if (s->count_kind == LG_COUNT_PARAM && field(c, s, "count_field", &s->count, false, &rc))
        return -1;
    if (s->count_kind == LG_COUNT_GRID_MAP && (field(c, s, "map_nelem", &s->map_nelem, false, &rc) ||
                                               field(c, s, "blocks_per_sample", &s->blocks_per_sample, false, &rc)))
        return -1;
    if (s->count_kind == LG_COUNT_ACCESSOR && s->target_ndim == 0)
        return bad(c, "count", "count=accessor needs target_accessor");

    static const char *const kinds2[] = {"labels", "ids", "range", "assert", NULL};
    if (g_key_file_has_key(c->kf, c->group, "target_kind", NULL)) {
        k = choice(c, "target_kind", kinds2, "labels, ids, range or assert");
        if (k < 0)
            return -1;
        s->ids = k == 1;
        s->range = k == 2;
        s->assert_flag = k == 3;
    }
    if (s->assert_flag) {
        /* torch._assert_async's condition: one element whose type the kernel's name gives
         * (asserts.c), nonzero or the kernel asserts; no class count, no ignore value */
        if (!s->dtype_from_template || s->dtype_template_arg || s->dtype_functor[0])
            return bad(c, "dtype", "target_kind=assert takes dtype=from_template (the condition's type is the kernel's)");
        if (s->count_kind != LG_COUNT_ONE)
            return bad(c, "count", "target_kind=assert reads one element: count=one");
        if (s->target_ndim)
            return bad(c, "target_accessor", "target_kind=assert reads a plain pointer");
        s->n_classes.param = s->ignore_index.param = -1;
        if (g_key_file_has_key(c->kf, c->group, "n_classes", NULL) ||
            g_key_file_has_key(c->kf, c->group, "ignore_index", NULL))
            return bad(c, "n_classes", "target_kind=assert has neither n_classes nor ignore_index");
    } else if (s->range != lg_scan_is_float(s->dtype))
        return bad(c, "dtype", s->range ? "target_kind=range needs a float dtype (float32, float64, float16, bfloat16)"
                                         : "a float dtype needs target_kind=range");
    if (s->assert_flag) {
        /* checked above */
    } else if (s->range) {
        /* a probability has no class count and no ignore value: [0, 1] is the whole rule */
        s->n_classes.param = s->ignore_index.param = -1;
        if (g_key_file_has_key(c->kf, c->group, "n_classes", NULL) ||
            g_key_file_has_key(c->kf, c->group, "ignore_index", NULL))
            return bad(c, "n_classes", "target_kind=range has neither n_classes nor ignore_index");
    } else {
        if (field(c, s, "n_classes", &s->n_classes, false, &rc))
            return -1;
        if (field(c, s, "ignore_index", &s->ignore_index, true, &rc))
            return -1;
    }
    s->allow_negative.param = s->weight.param = s->size_average.param = s->input.param = -1;
    if (g_key_file_has_key(c->kf, c->group, "allow_negative", NULL)) {
        if (!s->ids)
            return bad(c, "allow_negative", "only with target_kind=ids");
        char *an = get(c, "allow_negative", true, &rc);
        bool always = an && strcmp(an, "always") == 0;
        g_free(an);
        if (always)
            s->allow_negative_always = true;
        else if (rc || field(c, s, "allow_negative", &s->allow_negative, true, &rc))
            return -1;
    }
    if (parse_closure(c, s))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "weight", NULL) && field(c, s, "weight", &s->weight, true, &rc))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "size_average", NULL) &&
        field(c, s, "size_average", &s->size_average, true, &rc))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "input", NULL)) {
        if (field(c, s, "input", &s->input, true, &rc))
            return -1;
        if (s->input.param >= 0 && s->input.width != 8)
            return bad(c, "input", "the input is an 8-byte device pointer: width must be 8");
    }
    if ((v = get(c, "no_mask", false, &rc))) {
        bool too_long = strlen(v) >= sizeof s->no_mask;
        g_strlcpy(s->no_mask, v, sizeof s->no_mask);
        g_free(v);
        if (!s->ids && !s->range)
            return bad(c, "no_mask", "only with target_kind=ids or range");
        if (too_long)
            return bad(c, "no_mask", "longer than %zu characters", sizeof s->no_mask - 1);
    }
    if (rc)
        return -1;
    if (s->weight.param >= 0 && s->weight.width != 8)
        return bad(c, "weight", "the weight is an 8-byte device pointer: width must be 8");

    if (g_key_file_has_key(c->kf, c->group, "truncate_to_int32", NULL)) {
        GError *e = NULL;
        s->truncate_to_int32 = g_key_file_get_boolean(c->kf, c->group, "truncate_to_int32", &e);
        if (e) {
            g_clear_error(&e);
            return bad(c, "truncate_to_int32", "must be true or false");
        }
    }
    snprintf(s->source, sizeof s->source, "%s:%d", c->origin, lg_spec_text_line(c->map, c->group, ""));
    return 0;
}

static bool same_layout(const lg_spec_t *a, const lg_spec_t *b)
{
    if (a->n_params != b->n_params)
        return false;
    for (int i = 0; i < a->n_params; i++)
        if (a->param_sizes[i] != b->param_sizes[i])
            return false;
    return true;
}

/* Two specs conflict when one launch could match both: same match text and same layout. */
const lg_spec_t *lg_spec_conflict(const lg_spec_t *s, const lg_spec_t *list, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].match, s->match) == 0 && same_layout(&list[i], s))
            return &list[i];
    return NULL;
}

int lg_spec_parse(const char *text, size_t len, const char *origin, lg_spec_t *out, int cap, char *err, size_t err_len)
{
    if (err && err_len)
        err[0] = 0;
    if (!origin)
        origin = "(spec)";
    if (!text || len == 0) {
        lg_spec_error(err, err_len, "%s:1: file: empty: no kernel spec", origin);
        return -1;
    }
    lg_spec_text_t map = {0};
    int result = -1;
    GKeyFile *kf = NULL;
    if (lg_spec_text_check(text, len, origin, &map, err, err_len))
        goto out;
    kf = g_key_file_new();
    GError *e = NULL;
    if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &e)) {
        lg_spec_error(err, err_len, "%s:0: file: %s", origin, e->message);
        g_clear_error(&e);
        goto out;
    }
    gsize ng = 0;
    char **groups = g_key_file_get_groups(kf, &ng);
    if (ng == 0) {
        lg_spec_error(err, err_len, "%s:1: file: no kernel spec (no [group])", origin);
        g_strfreev(groups);
        goto out;
    }
    int n = 0;
    for (gsize g = 0; g < ng; g++) {
        ctx_t c = {kf, origin, groups[g], &map, err, err_len};
        if (n >= cap) {
            bad(&c, "", "too many kernel specs (at most %d)", cap);
            n = -1;
            break;
        }
        if (parse_group(&c, &out[n])) {
            n = -1;
            break;
        }
        const lg_spec_t *o = lg_spec_conflict(&out[n], out, n);
        if (o) {
            bad(&c, "match", "conflicts with [%s]: same match and parameter layout, a launch could not tell them apart",
                o->name);
            n = -1;
            break;
        }
        n++;
    }
    g_strfreev(groups);
    result = n;
out:
    if (kf)
        g_key_file_free(kf);
    lg_spec_text_free(&map);
    return result;
}
