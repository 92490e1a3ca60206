/* decode_dtype.c: the label dtype of a kernel, once per kernel (classify.c): the spec's own, the
 * n-th or last template argument of the kernel's mangled name (demangle.c), a template argument
 * of the functor a closure kernel names (spec dtype=from_functor:MARK:N, read here by skipping
 * template arguments after MARK), or, for torch._assert_async's kernel, the condition's element
 * type (asserts.c).
 *
 * Callers: classify.c, on the launching thread, after the registry matched the kernel; no state.
 * Tested by tests/unit/test_decode.c (every dtype form of the built-in specs),
 * tests/unit/test_asserts.c and tests/unit/test_registry.c.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"

/* Skips one <template-arg> of a mangled name: a builtin letter, a literal L...E, or a name or
 * type with nested parts (N...E, I...E; source names by their length). NULL when unreadable. */
static const char *skip_targ(const char *p)
{
    if (!*p)
        return NULL;
    if (*p == 'L') {
        const char *e = strchr(p, 'E');
        return e ? e + 1 : NULL;
    }
    if (*p == 'r' || *p == 'V' || *p == 'K' || *p == 'P' || *p == 'R')
        return skip_targ(p + 1);
    if (*p != 'N' && *p != 'I' && !(*p >= '0' && *p <= '9') && *p != 'S')
        return p + 1; /* builtin */
    int depth = 0;
    do {
        if (*p >= '0' && *p <= '9') {
            long n = 0;
            while (*p >= '0' && *p <= '9' && n < 4096)
                n = n * 10 + (*p++ - '0');
            if ((long)strnlen(p, (size_t)n) < n)
                return NULL;
            p += n;
        } else if (*p == 'S') { /* substitution S_ / S<seq>_ */
            const char *u = strchr(p, '_');
            if (!u)
                return NULL;
            p = u + 1;
        } else if (*p == 'L') {
            const char *e = strchr(p, 'E');
            if (!e)
                return NULL;
            p = e + 1;
        } else if (*p == 'N' || *p == 'I') {
            depth++;
            p++;
        } else if (*p == 'E') {
            depth--;
            p++;
        } else if (*p) {
            p++;
        } else {
            return NULL;
        }
    } while (depth > 0);
    return p;
}

/* The pos-th (1-based) template argument's builtin letter of the functor `mark` names; 'E'
 * when it has fewer, 0 when unreadable. */
static char functor_arg(const char *mangled, const char *mark, int pos)
{
    const char *p = mangled ? strstr(mangled, mark) : NULL;
    if (!p)
        return 0;
    p += strlen(mark); /* just past the functor's I */
    for (int i = 1; i < pos && p; i++) {
        if (*p == 'E')
            return 'E';
        p = skip_targ(p);
    }
    return p ? *p : 0;
}

int lg_decode_dtype(const lg_spec_t *spec, const char *mangled, lg_dtype_t *dtype, char *why, size_t why_len)
{
    if (spec->assert_flag) {
        /* torch._assert_async's condition: bool, complex and the rest, outside lg_dtype_t;
         * asserts.c reads its type from the name, and only an instance it knows is watched */
        lg_assert_elem_t e;
        if (lg_asserts_element(mangled, &e) != 0) {
            snprintf(why, why_len, "[%s]: the condition's type is not one torch._assert_async's kernel takes (%s)",
                     spec->name, mangled ? mangled : "(no name)");
            return -1;
        }
        *dtype = LG_DTYPE_UINT8;
        return 0;
    }
    if (spec->dtype_functor[0]) {
        char c = functor_arg(mangled, spec->dtype_functor, spec->dtype_functor_arg);
        if (c == 'l' || c == 'x' || c == 'i') {
            *dtype = c == 'i' ? LG_DTYPE_INT32 : LG_DTYPE_INT64;
            return 0;
        }
        if (c == 'E' && spec->dtype_functor_has_default) {
            *dtype = spec->dtype_functor_default;
            return 0;
        }
        snprintf(why, why_len, "[%s]: id type unknown (template argument %d of %s in %s: '%c')", spec->name,
                 spec->dtype_functor_arg, spec->dtype_functor, mangled ? mangled : "(no name)", c ? c : '?');
        return -1;
    }
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
