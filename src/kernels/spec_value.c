/* spec_value.c: the values of one key of a spec group, for spec.c and spec_closure.c: a
 * trimmed string (required or optional), a list of small integers, a field
 * "param,offset,width[,signed]" checked against the parameter sizes the spec declares, one word
 * of a fixed set; and the one message a problem gives, naming file, line, group and key.
 *
 * Pure: no globals; the group's GKeyFile and the text's line map come in the context. Called while
 * the registry's table is built (lazy start, one thread). Tested by tests/unit/test_registry.c
 * (parser errors) and tests/fuzz/fuzz_spec.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "kernels/kernels.h"

int lg_spec_value_bad(const lg_spec_value_ctx_t *c, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lg_spec_text_error(c->err, c->err_len, "%s:%d: [%s] %s: %s", c->origin, lg_spec_text_line(c->map, c->group, key),
                       c->group, key, msg);
    return -1;
}

/* Returns a trimmed copy of the value (g_free), or NULL with err set when missing/required. */
char *lg_spec_value_get(const lg_spec_value_ctx_t *c, const char *key, bool required, int *rc)
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
            lg_spec_value_bad(c, key, "required key is missing");
        else
            lg_spec_value_bad(c, key, "%s", e ? e->message : "unreadable value");
        g_clear_error(&e);
        *rc = -1;
        return NULL;
    }
    g_strstrip(v);
    if (!*v) {
        lg_spec_value_bad(c, key, "empty value");
        g_free(v);
        *rc = -1;
        return NULL;
    }
    return v;
}

/* Parses "a,b,c" into at most max integers in [-1, 1<<20]; returns the count or -1. */
int lg_spec_value_ints(const lg_spec_value_ctx_t *c, const char *key, const char *v, int *out, int max)
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
            return lg_spec_value_bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        if (n == max)
            return lg_spec_value_bad(c, key, "\"%s\": more than %d values", v, max);
        out[n++] = (int)x;
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0)
            return n;
        if (*p != ',')
            return lg_spec_value_bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        p++;
    }
}

/* A field "param,offset,width[,signed]" that must fit inside the parameter's size. */
int lg_spec_value_field(const lg_spec_value_ctx_t *c, const lg_spec_t *s, const char *key, lg_field_t *f,
                        bool allow_none, int *rc)
{
    char *v = lg_spec_value_get(c, key, true, rc);
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
    int n = lg_spec_value_ints(c, key, v, x, 4);
    if (n < 0) {
        g_free(v);
        return *rc = -1;
    }
    if (n < 3) {
        lg_spec_value_bad(c, key, "\"%s\": expected param,offset,width[,signed]%s", v, allow_none ? " or none" : "");
        g_free(v);
        return *rc = -1;
    }
    g_free(v);
    if (x[0] >= s->n_params)
        return *rc =
                   lg_spec_value_bad(c, key, "parameter index %d out of range (the kernel has %d parameters, 0-based)",
                                     x[0], s->n_params);
    if (x[2] != 1 && x[2] != 4 && x[2] != 8)
        return *rc = lg_spec_value_bad(c, key, "width %d: must be 1, 4 or 8 bytes", x[2]);
    if (x[1] + x[2] > s->param_sizes[x[0]])
        return *rc = lg_spec_value_bad(c, key, "offset %d + width %d is beyond parameter %d (%d bytes)", x[1], x[2],
                                       x[0], s->param_sizes[x[0]]);
    if (n == 4 && x[3] > 1)
        return *rc = lg_spec_value_bad(c, key, "signed flag must be 0 or 1");
    f->param = x[0];
    f->offset = x[1];
    f->width = x[2];
    f->is_signed = n < 4 || x[3] == 1;
    return 0;
}

/* The index in names[] (NULL-terminated) of the required key's value; -1 with err set. */
int lg_spec_value_choice(const lg_spec_value_ctx_t *c, const char *key, const char *const *names, const char *allowed)
{
    int rc = 0;
    char *v = lg_spec_value_get(c, key, true, &rc);
    if (!v)
        return -1;
    int k = -1;
    for (int i = 0; names[i] && k < 0; i++)
        if (strcmp(v, names[i]) == 0)
            k = i;
    if (k < 0)
        lg_spec_value_bad(c, key, "\"%s\": must be %s", v, allowed);
    g_free(v);
    return k;
}
