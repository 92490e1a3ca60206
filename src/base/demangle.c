/* demangle.c: what the library needs to know from an Itanium-mangled kernel name, without
 * libstdc++: the short name for messages, the label type (last template argument) and the
 * LP64 byte size of every parameter of the signature (for the registry's layout check when the
 * runtime cannot report parameter sizes). lg_demangle_full uses __cxa_demangle from a
 * libstdc++ that is dlopen'd at run time (the library never links it), for reports only.
 *
 * Callers: registry.c (layout check, once per kernel handle), decode_dtype.c (dtype, once per
 * kernel from classify.c), classify.c and stack.c (names). Any thread; no global state except
 * the dlopen'd __cxa_demangle pointer.
 *
 * The entry points live here: nvcc's -rdc form `__nv_static_<n>_<n chars>__Z...` is unwrapped
 * first, then the name is parsed on the caller's stack by demangle_parse.c (the grammar, a
 * recursive-descent subset of the Itanium C++ ABI mangling: nested and unscoped names, template
 * arguments, substitutions, template parameters, CV-qualifiers, pointers and references,
 * builtin types), with demangle_lex.c's tokens and demangle_sizes.c's type sizes; any byte
 * string is safe input (tests/fuzz/fuzz_demangle.c).
 *
 * Tested by tests/unit/test_demangle.c with names taken from nvcc-compiled PyTorch-shaped
 * declarations.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "demangle_lex.h"

/* Skips nvcc's -rdc prefix `__nv_static_<n>_<n chars>_` in front of `_Z...`. Returns the
 * start of the Itanium name, or NULL when the string is not mangled. */
static const char *itanium_start(const char *m)
{
    if (!m)
        return NULL;
    if (m[0] == '_' && m[1] == 'Z')
        return m;
    static const char pre[] = "__nv_static_";
    if (strncmp(m, pre, sizeof pre - 1) != 0)
        return NULL;
    const char *q = m + sizeof pre - 1;
    long n = 0;
    int digits = 0;
    while (*q >= '0' && *q <= '9' && digits < 8) {
        n = n * 10 + (*q - '0');
        q++;
        digits++;
    }
    if (digits && *q == '_') {
        const char *r = q + 1;
        long i = 0;
        while (i < n && r[i])
            i++;
        if (i == n && r[n] == '_' && r[n + 1] == '_' && r[n + 2] == 'Z')
            return r + n + 1;
    }
    /* Unknown length convention: the first "__Z" after the prefix. */
    const char *z = strstr(m + sizeof pre - 1, "__Z");
    return z ? z + 1 : NULL;
}

/* Parses the Itanium name inside `mangled` into p (demangle_parse.c). false when the string is
 * not mangled or its name could not be parsed at all. */
static bool parse_encoding(parser_t *p, const char *mangled, bool params, size_t *sizes, int cap, int *count)
{
    const char *s = itanium_start(mangled);
    if (!s)
        return false;
    return lg_demangle_parse_encoding(p, s, params, sizes, cap, count);
}

bool lg_demangle_short(const char *mangled, char *out, size_t out_len)
{
    if (!out || out_len == 0)
        return false;
    out[0] = 0;
    if (!mangled)
        return false;
    parser_t p;
    int count;
    if (parse_encoding(&p, mangled, false, NULL, 0, &count) && p.short_id) {
        size_t n = (size_t)p.short_len < out_len - 1 ? (size_t)p.short_len : out_len - 1;
        memcpy(out, p.short_id, n);
        out[n] = 0;
        return true;
    }
    size_t n = strnlen(mangled, out_len - 1);
    memcpy(out, mangled, n);
    out[n] = 0;
    return false;
}

char lg_demangle_last_template_arg(const char *mangled)
{
    parser_t p;
    int count;
    if (!parse_encoding(&p, mangled, false, NULL, 0, &count) || p.fail || p.nfargs == 0)
        return 0;
    const desc_t *a = &p.fargs[p.nfargs - 1];
    return a->is_literal ? 0 : a->builtin;
}

char lg_demangle_template_arg(const char *mangled, int pos)
{
    parser_t p;
    int count;
    if (pos < 1 || !parse_encoding(&p, mangled, false, NULL, 0, &count) || p.fail || p.nfargs < pos)
        return 0;
    const desc_t *a = &p.fargs[pos - 1];
    return a->is_literal ? 0 : a->builtin;
}

int lg_demangle_param_sizes(const char *mangled, size_t *sizes, int cap)
{
    parser_t p;
    int count = -1;
    if (!parse_encoding(&p, mangled, true, sizes, cap, &count) || p.fail)
        return -1;
    return count;
}

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

/* __cxa_demangle from a libstdc++ already in the process (NOLOAD) or loaded privately; the
 * handle is kept for the life of the process. Resolved once (pthread_once): reports from
 * several threads at once reach here together (tests/e2e/test_tsan.sh). */
static cxa_demangle_fn cxa_fn;
static pthread_once_t cxa_once = PTHREAD_ONCE_INIT;

static void cxa_resolve(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (h)
        cxa_fn = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
}

static cxa_demangle_fn cxa_demangle(void)
{
    pthread_once(&cxa_once, cxa_resolve);
    return cxa_fn;
}

char *lg_demangle_full(const char *mangled)
{
    if (!mangled)
        return NULL;
    const char *s = itanium_start(mangled);
    cxa_demangle_fn fn = s ? cxa_demangle() : NULL;
    if (fn) {
        int status = -1;
        char *r = fn(s, NULL, NULL, &status);
        if (r && status == 0)
            return r;
        free(r);
    }
    char buf[256];
    lg_demangle_short(mangled, buf, sizeof buf);
    return strdup(buf);
}
