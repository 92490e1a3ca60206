/* spec.c: the parser of kernel spec text, the GKeyFile format of specs/pytorch.conf
 * (documented there): one group per kernel layout. Every problem gives one message naming
 * file, line, group and field, including what GKeyFile accepts silently (duplicate groups and
 * keys, stray lines, invalid UTF-8); every field is checked against the parameter sizes the
 * spec declares, so decode.c never reads outside them.
 *
 * Here: the file (groups, conflicts between them) and one group's keys in the order they
 * depend on each other. Reading one key's value and its messages are spec_value.c's; the
 * closure kernels' keys (target_calc, targets, layout_check) spec_closure.c's; where each group
 * and key sits in the text, and the line checks GKeyFile does not make, spec_text.c's.
 *
 * Pure: no globals. Called by registry.c while it builds the table (lazy start, one thread).
 * Tested by tests/unit/test_registry.c (parser errors) and tests/fuzz/fuzz_spec.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "kernels/kernels.h"

static const char *const known_keys[] = {
    "versions",
    "match",
    "family",
    "direction",
    "params",
    "target",
    "target_accessor",
    "dtype",
    "count",
    "count_field",
    "map_nelem",
    "blocks_per_sample",
    "n_classes",
    "ignore_index",
    "truncate_to_int32",
    "target_kind",
    "allow_negative",
    "weight",
    "size_average",
    "input",
    "no_mask",
    "target_calc",
    "targets",
    "layout_check",
    "n_classes_times",
    NULL,
};

/* from_functor:MARK:N[:int64|int32]: MARK a mangled-name piece ending in the functor's 'I'. */
static int parse_functor_dtype(const lg_spec_value_ctx_t *c, lg_spec_t *s, const char *v)
{
    const char *colon = strchr(v, ':');
    size_t ml = colon ? (size_t)(colon - v) : 0;
    if (!colon || ml == 0 || ml >= sizeof s->dtype_functor || v[ml - 1] != 'I' ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") < ml)
        return lg_spec_value_bad(c, "dtype",
                                 "from_functor:MARK:N[:default]: MARK is a piece of the mangled name ending in the "
                                 "functor's template 'I' (e.g. 36_cuda_scatter_gather_internal_kernelI)");
    char *end = NULL;
    long pos = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || pos < 1 || pos > 16 || (*end && *end != ':'))
        return lg_spec_value_bad(c, "dtype", "from_functor: the argument number N must be 1..16");
    if (*end == ':') {
        if (strcmp(end + 1, "int64") == 0)
            s->dtype_functor_default = LG_DTYPE_INT64;
        else if (strcmp(end + 1, "int32") == 0)
            s->dtype_functor_default = LG_DTYPE_INT32;
        else
            return lg_spec_value_bad(c, "dtype", "from_functor: the default must be int64 or int32");
        s->dtype_functor_has_default = true;
    }
    memcpy(s->dtype_functor, v, ml);
    s->dtype_functor[ml] = 0;
    s->dtype_functor_arg = (int)pos;
    s->dtype = LG_DTYPE_INT64;
    return 0;
}

static int parse_group(const lg_spec_value_ctx_t *c, lg_spec_t *s)
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
            lg_spec_value_bad(
                c, *k,
                "unknown key (known: versions, match, family, direction, params, target, target_accessor, "
                "dtype, count, count_field, map_nelem, blocks_per_sample, n_classes, ignore_index, "
                "truncate_to_int32, target_kind, allow_negative, weight, size_average, input, no_mask, target_calc, "
                "targets, layout_check, n_classes_times)");
            g_strfreev(keys);
            return -1;
        }
    }
    g_strfreev(keys);

    char *v;
    if ((v = lg_spec_value_get(c, "versions", false, &rc))) {
        g_strlcpy(s->versions, v, sizeof s->versions);
        g_free(v);
    }
    if (rc)
        return -1;

    if (!(v = lg_spec_value_get(c, "match", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->match) {
        g_free(v);
        return lg_spec_value_bad(c, "match", "longer than %zu characters", sizeof s->match - 1);
    }
    for (char *p = v; *p; p++) {
        if (*p == ' ' || *p == '\t' || (p[0] == ';' && (p[1] == ';' || p[1] == 0)) || v[0] == ';') {
            g_free(v);
            return lg_spec_value_bad(c, "match",
                                     "substrings of the mangled name, separated by ';', without blanks or empty parts");
        }
    }
    g_strlcpy(s->match, v, sizeof s->match);
    g_free(v);

    if (!(v = lg_spec_value_get(c, "family", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->family || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(v)) {
        g_free(v);
        return lg_spec_value_bad(c, "family", "1..%zu characters of [a-z0-9_]", sizeof s->family - 1);
    }
    g_strlcpy(s->family, v, sizeof s->family);
    g_free(v);

    static const char *const directions[] = {"forward", "backward", NULL};
    int k = lg_spec_value_choice(c, "direction", directions, "forward or backward");
    if (k < 0)
        return -1;
    s->direction = k == 0 ? LG_DIR_FORWARD : LG_DIR_BACKWARD;

    if (!(v = lg_spec_value_get(c, "params", true, &rc)))
        return -1;
    int n = lg_spec_value_ints(c, "params", v, s->param_sizes, LG_MAX_PARAMS);
    g_free(v);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s->param_sizes[i] < 1 || s->param_sizes[i] > 4096)
            return lg_spec_value_bad(c, "params", "parameter %d has size %d: must be 1..4096 bytes", i,
                                     s->param_sizes[i]);
    s->n_params = n;

    /* target: param[,offset], an 8-byte device pointer */
    if (!(v = lg_spec_value_get(c, "target", true, &rc)))
        return -1;
    int t[2] = {0, 0};
    n = lg_spec_value_ints(c, "target", v, t, 2);
    g_free(v);
    if (n < 0)
        return -1;
    if (t[0] >= s->n_params)
        return lg_spec_value_bad(c, "target", "parameter index %d out of range (the kernel has %d parameters, 0-based)",
                                 t[0], s->n_params);
    if (t[1] + 8 > s->param_sizes[t[0]])
        return lg_spec_value_bad(c, "target", "offset %d + 8-byte pointer is beyond parameter %d (%d bytes)", t[1],
                                 t[0], s->param_sizes[t[0]]);
    s->target = (lg_field_t){.param = t[0], .offset = t[1], .width = 8, .is_signed = false};

    if ((v = lg_spec_value_get(c, "target_accessor", false, &rc))) {
        int a[4];
        n = lg_spec_value_ints(c, "target_accessor", v, a, 4);
        g_free(v);
        if (n < 0)
            return -1;
        if (n != 4)
            return lg_spec_value_bad(c, "target_accessor", "expected ndim,sizes_offset,strides_offset,index_width");
        if (a[0] < 1 || a[0] > LG_MAX_TARGET_DIMS)
            return lg_spec_value_bad(c, "target_accessor", "ndim %d: must be 1..%d", a[0], LG_MAX_TARGET_DIMS);
        if (a[3] != 4 && a[3] != 8)
            return lg_spec_value_bad(c, "target_accessor", "index width %d: must be 4 or 8 bytes", a[3]);
        int psize = s->param_sizes[s->target.param];
        if (a[1] + a[0] * a[3] > psize || a[2] + a[0] * a[3] > psize)
            return lg_spec_value_bad(c, "target_accessor", "sizes/strides beyond parameter %d (%d bytes)",
                                     s->target.param, psize);
        s->target_ndim = a[0];
        s->target_sizes_offset = a[1];
        s->target_strides_offset = a[2];
        s->target_index_width = a[3];
    }
    if (rc)
        return -1;

    if (!(v = lg_spec_value_get(c, "dtype", true, &rc)))
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
            lg_spec_value_bad(c, "dtype", "\"%s\": from_template:N needs N in 1..16", v);
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
        lg_spec_value_bad(c, "dtype",
                          "\"%s\": must be int64, uint8, int32, float32, float64, float16, bfloat16, from_template, "
                          "from_template:N or from_functor:...",
                          v);
        g_free(v);
        return -1;
    }
    g_free(v);

    static const char *const kinds[] = {"param", "one", "accessor", "grid_map", NULL};
    int kind = lg_spec_value_choice(c, "count", kinds, "param, one, accessor or grid_map");
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
            return lg_spec_value_bad(c, optional[i], "not used with count=%s", kinds[kind]);
    }
    if (s->count_kind == LG_COUNT_PARAM && lg_spec_value_field(c, s, "count_field", &s->count, false, &rc))
        return -1;
    if (s->count_kind == LG_COUNT_GRID_MAP &&
        (lg_spec_value_field(c, s, "map_nelem", &s->map_nelem, false, &rc) ||
         lg_spec_value_field(c, s, "blocks_per_sample", &s->blocks_per_sample, false, &rc)))
        return -1;
    if (s->count_kind == LG_COUNT_ACCESSOR && s->target_ndim == 0)
        return lg_spec_value_bad(c, "count", "count=accessor needs target_accessor");

    static const char *const kinds2[] = {"labels", "ids", "range", "assert", "probs", NULL};
    if (g_key_file_has_key(c->kf, c->group, "target_kind", NULL)) {
        k = lg_spec_value_choice(c, "target_kind", kinds2, "labels, ids, range, assert or probs");
        if (k < 0)
            return -1;
        s->ids = k == 1;
        s->range = k == 2 || k == 4; /* probs: a range target with its own rule */
        s->assert_flag = k == 3;
        s->probs = k == 4;
    }
    if (s->assert_flag) {
        /* torch._assert_async's condition: one element whose type the kernel's name gives
         * (asserts.c), nonzero or the kernel asserts; no class count, no ignore value */
        if (!s->dtype_from_template || s->dtype_template_arg || s->dtype_functor[0])
            return lg_spec_value_bad(
                c, "dtype", "target_kind=assert takes dtype=from_template (the condition's type is the kernel's)");
        if (s->count_kind != LG_COUNT_ONE)
            return lg_spec_value_bad(c, "count", "target_kind=assert reads one element: count=one");
        if (s->target_ndim)
            return lg_spec_value_bad(c, "target_accessor", "target_kind=assert reads a plain pointer");
        s->n_classes.param = s->ignore_index.param = -1;
        if (g_key_file_has_key(c->kf, c->group, "n_classes", NULL) ||
            g_key_file_has_key(c->kf, c->group, "ignore_index", NULL))
            return lg_spec_value_bad(c, "n_classes", "target_kind=assert has neither n_classes nor ignore_index");
    } else if (s->range != lg_scan_is_float(s->dtype))
        return lg_spec_value_bad(c, "dtype",
                                 s->range
                                     ? "target_kind=range needs a float dtype (float32, float64, float16, bfloat16)"
                                     : "a float dtype needs target_kind=range");
    if (s->assert_flag) {
        /* checked above */
    } else if (s->probs) {
        /* rows of weights: count_field the rows, n_classes the weights in each; nothing ignored */
        if (s->count_kind != LG_COUNT_PARAM || s->target_ndim)
            return lg_spec_value_bad(c, "count",
                                     "target_kind=probs reads count_field rows of a plain pointer: count=param");
        if (lg_spec_value_field(c, s, "n_classes", &s->n_classes, false, &rc))
            return -1;
        s->ignore_index.param = -1;
        if (g_key_file_has_key(c->kf, c->group, "ignore_index", NULL))
            return lg_spec_value_bad(c, "ignore_index", "target_kind=probs has no ignore_index");
    } else if (s->range) {
        /* a probability has no class count and no ignore value: [0, 1] is the whole rule */
        s->n_classes.param = s->ignore_index.param = -1;
        if (g_key_file_has_key(c->kf, c->group, "n_classes", NULL) ||
            g_key_file_has_key(c->kf, c->group, "ignore_index", NULL))
            return lg_spec_value_bad(c, "n_classes", "target_kind=range has neither n_classes nor ignore_index");
    } else {
        if (lg_spec_value_field(c, s, "n_classes", &s->n_classes, false, &rc))
            return -1;
        if (lg_spec_value_field(c, s, "ignore_index", &s->ignore_index, true, &rc))
            return -1;
        /* a bound that is the product of two fields (max_unpool2d: outputHeight * outputWidth) */
        if (g_key_file_has_key(c->kf, c->group, "n_classes_times", NULL) &&
            lg_spec_value_field(c, s, "n_classes_times", &s->n_classes_times, false, &rc))
            return -1;
    }
    if (g_key_file_has_key(c->kf, c->group, "n_classes_times", NULL) && s->n_classes_times.width == 0)
        return lg_spec_value_bad(c, "n_classes_times", "only with target_kind=labels or ids");
    s->allow_negative.param = s->weight.param = s->size_average.param = s->input.param = -1;
    if (g_key_file_has_key(c->kf, c->group, "allow_negative", NULL)) {
        if (!s->ids)
            return lg_spec_value_bad(c, "allow_negative", "only with target_kind=ids");
        char *an = lg_spec_value_get(c, "allow_negative", true, &rc);
        bool always = an && strcmp(an, "always") == 0;
        g_free(an);
        if (always)
            s->allow_negative_always = true;
        else if (rc || lg_spec_value_field(c, s, "allow_negative", &s->allow_negative, true, &rc))
            return -1;
    }
    if (lg_spec_closure_parse(c, s))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "weight", NULL) &&
        lg_spec_value_field(c, s, "weight", &s->weight, true, &rc))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "size_average", NULL) &&
        lg_spec_value_field(c, s, "size_average", &s->size_average, true, &rc))
        return -1;
    if (g_key_file_has_key(c->kf, c->group, "input", NULL)) {
        if (lg_spec_value_field(c, s, "input", &s->input, true, &rc))
            return -1;
        if (s->input.param >= 0 && s->input.width != 8)
            return lg_spec_value_bad(c, "input", "the input is an 8-byte device pointer: width must be 8");
    }
    if ((v = lg_spec_value_get(c, "no_mask", false, &rc))) {
        bool too_long = strlen(v) >= sizeof s->no_mask;
        g_strlcpy(s->no_mask, v, sizeof s->no_mask);
        g_free(v);
        if (!s->ids && !s->range)
            return lg_spec_value_bad(c, "no_mask", "only with target_kind=ids or range");
        if (too_long)
            return lg_spec_value_bad(c, "no_mask", "longer than %zu characters", sizeof s->no_mask - 1);
    }
    if (rc)
        return -1;
    if (s->weight.param >= 0 && s->weight.width != 8)
        return lg_spec_value_bad(c, "weight", "the weight is an 8-byte device pointer: width must be 8");

    if (g_key_file_has_key(c->kf, c->group, "truncate_to_int32", NULL)) {
        GError *e = NULL;
        s->truncate_to_int32 = g_key_file_get_boolean(c->kf, c->group, "truncate_to_int32", &e);
        if (e) {
            g_clear_error(&e);
            return lg_spec_value_bad(c, "truncate_to_int32", "must be true or false");
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
        lg_spec_text_error(err, err_len, "%s:1: file: empty: no kernel spec", origin);
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
        lg_spec_text_error(err, err_len, "%s:0: file: %s", origin, e->message);
        g_clear_error(&e);
        goto out;
    }
    gsize ng = 0;
    char **groups = g_key_file_get_groups(kf, &ng);
    if (ng == 0) {
        lg_spec_text_error(err, err_len, "%s:1: file: no kernel spec (no [group])", origin);
        g_strfreev(groups);
        goto out;
    }
    int n = 0;
    for (gsize g = 0; g < ng; g++) {
        lg_spec_value_ctx_t c = {kf, origin, groups[g], &map, err, err_len};
        if (n >= cap) {
            lg_spec_value_bad(&c, "", "too many kernel specs (at most %d)", cap);
            n = -1;
            break;
        }
        if (parse_group(&c, &out[n])) {
            n = -1;
            break;
        }
        const lg_spec_t *o = lg_spec_conflict(&out[n], out, n);
        if (o) {
            lg_spec_value_bad(
                &c, "match", "conflicts with [%s]: same match and parameter layout, a launch could not tell them apart",
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
