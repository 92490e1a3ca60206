/* sig.c: reads the parameter list of a kernel from its Itanium-mangled name, for the test
 * double's cudaFuncGetParamInfo and for the layout check in front of each emulator.
 *
 * Deliberately independent of the library's src/base/demangle.c: the double is what the library is
 * tested against, so it must not share the library's mistakes. It understands what test and
 * PyTorch kernels use: builtin types, pointers, references, cv-qualifiers, template parameters,
 * substitutions, nested names, template arguments (types, integer literals) and the by-value
 * structs whose size is known: at::GenericPackedTensorAccessor<T, N, PtrTraits, index>
 * (8 + 2*N*sizeof(index) bytes; also torch::headeronly::detail's six-argument form),
 * at::cuda::detail::TensorInfo<T, IndexType> (216 / 416 bytes), c10::Half / c10::BFloat16 (2 bytes) and
 * at::native::Msg (torch._assert_async's message, 256 bytes). Anything else makes
 * the parse fail (sig->ok = 0), and the caller treats the kernel as one of unknown layout.
 * Called at registration (fakecudart.c), on the registering thread; pure function, no state.
 * Tested through cudaFuncGetParamInfo in tests/fakecuda/test_paraminfo.sh.
 */
#include "fakecudart.h"

#include <string.h>
#include <stdlib.h>

enum { K_UNKNOWN, K_BUILTIN, K_POINTER, K_NAME, K_CLASS, K_LITERAL };

typedef struct ty {
    int kind;
    long size, align;            /* -1: unknown */
    char code[4];                /* builtin code */
    char ident[48];              /* last identifier of a name or class */
    long long literal;
} ty_t;

#define MAX_SUBS 128
typedef struct parser {
    const char *p;
    ty_t subs[MAX_SUBS];
    int nsubs;
    ty_t targs[FK_MAX_TARGS];    /* the function's template arguments, for T_ */
    int ntargs;
    int failed;
} parser_t;

static ty_t parse_type(parser_t *ps);

static ty_t unknown(void) { ty_t t; memset(&t, 0, sizeof t); t.kind = K_UNKNOWN; t.size = t.align = -1; return t; }

static void fail(parser_t *ps) { ps->failed = 1; }

static void add_sub(parser_t *ps, const ty_t *t)
{
    if (ps->nsubs < MAX_SUBS) ps->subs[ps->nsubs++] = *t;
    else fail(ps);
}

static ty_t builtin(const char *code, long size)
{
    ty_t t = unknown();
    t.kind = K_BUILTIN;
    t.size = t.align = size;
    strncpy(t.code, code, sizeof t.code - 1);
    return t;
}

/* <number> for source names and literals; 'n' prefix is a minus sign. */
static long long parse_number(parser_t *ps)
{
    int neg = 0;
    if (*ps->p == 'n') { neg = 1; ps->p++; }
    if (*ps->p < '0' || *ps->p > '9') { fail(ps); return 0; }
    long long v = 0;
    while (*ps->p >= '0' && *ps->p <= '9') v = v * 10 + (*ps->p++ - '0');
    return neg ? -v : v;
}

static void parse_source_name(parser_t *ps, char *ident, size_t cap)
{
    long long len = parse_number(ps);
    if (ps->failed || len <= 0 || (long long)strlen(ps->p) < len) { fail(ps); return; }
    size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
    memcpy(ident, ps->p, n);
    ident[n] = 0;
    ps->p += len;
}

/* S_ = 0, S<base36>_ = n+1. */
static ty_t parse_substitution(parser_t *ps)
{
    ps->p++; /* S */
    long idx = 0;
    if (*ps->p == '_') idx = 0;
    else {
        long v = 0;
        while ((*ps->p >= '0' && *ps->p <= '9') || (*ps->p >= 'A' && *ps->p <= 'Z')) {
            v = v * 36 + (*ps->p <= '9' ? *ps->p - '0' : *ps->p - 'A' + 10);
            ps->p++;
        }
        idx = v + 1;
        if (*ps->p != '_') { fail(ps); return unknown(); }
    }
    ps->p++; /* _ */
    if (idx >= ps->nsubs) { fail(ps); return unknown(); }
    return ps->subs[idx];
}

/* Size of a class type from its last identifier and template arguments. */
static void classify(ty_t *t, const ty_t *args, int nargs)
{
    t->kind = K_CLASS;
    t->size = t->align = -1;
    if (!strcmp(t->ident, "GenericPackedTensorAccessor") || !strcmp(t->ident, "PackedTensorAccessor")) {
        /* <T, N, PtrTraits, index_t>: data pointer, then index_t sizes_[N], strides_[N] */
        if (nargs == 4 && args[1].kind == K_LITERAL && args[3].kind == K_BUILTIN && args[3].size > 0) {
            t->size = 8 + 2 * args[1].literal * args[3].size;
            t->align = 8;
        }
        /* torch::headeronly::detail's form (PyTorch 2.10+): <TensorAccessorT, IndexBoundsCheck,
         * T, N, PtrTraits, index_t>, same data_, sizes_[N], strides_[N] members. */
        if (nargs == 6 && args[3].kind == K_LITERAL && args[5].kind == K_BUILTIN && args[5].size > 0) {
            t->size = 8 + 2 * args[3].literal * args[5].size;
            t->align = 8;
        }
    } else if (!strcmp(t->ident, "TensorInfo")) {
        /* at::cuda::detail::TensorInfo<T, IndexType>: T *data; IndexType sizes[25], strides[25];
         * int dims; padded to the pointer's alignment (216 / 416 bytes). */
        if (nargs == 2 && args[1].kind == K_BUILTIN && args[1].size > 0) {
            long raw = 8 + 2 * 25 * args[1].size + 4;
            t->size = (raw + 7) / 8 * 8;
            t->align = 8;
        }
    } else if (!strcmp(t->ident, "Half") || !strcmp(t->ident, "BFloat16")) {
        t->size = t->align = 2;
    } else if (!strcmp(t->ident, "Msg") && nargs == 0) {
        /* at::native::Msg, torch._assert_async's message: char msg[256] */
        t->size = 256;
        t->align = 1;
    }
}

/* I <template-arg>+ E. Stores up to FK_MAX_TARGS arguments in out. */
static int parse_template_args(parser_t *ps, ty_t *out, int max)
{
    int n = 0;
    ps->p++; /* I */
    while (!ps->failed && *ps->p && *ps->p != 'E') {
        ty_t a;
        if (*ps->p == 'L') {
            ps->p++;
            if (*ps->p == '_' || *ps->p == 'Z') { fail(ps); break; } /* external names: not needed */
            ty_t lt = parse_type(ps);
            a = unknown();
            a.kind = K_LITERAL;
            a.literal = parse_number(ps);
            (void)lt;
            if (*ps->p != 'E') { fail(ps); break; }
            ps->p++;
        } else if (*ps->p == 'X' || *ps->p == 'J') {
            fail(ps);
            break;
        } else {
            a = parse_type(ps);
        }
        if (n < max) out[n] = a;
        n++;
    }
    if (*ps->p != 'E') fail(ps);
    else ps->p++;
    return n < max ? n : max;
}

/* N [qualifiers] <prefix components> E. The completed prefixes are substitution candidates,
 * the whole name is not (the caller adds it when it is a type). Template arguments of the last
 * component go to targs when is_function. */
static ty_t parse_nested(parser_t *ps, int is_function, int *has_targs)
{
    ps->p++; /* N */
    while (*ps->p == 'K' || *ps->p == 'V' || *ps->p == 'r') ps->p++;
    ty_t cur = unknown();
    cur.kind = K_NAME;
    int first = 1;
    ty_t args[FK_MAX_TARGS];
    int nargs = 0;
    *has_targs = 0;
    while (!ps->failed && *ps->p && *ps->p != 'E') {
        if (*ps->p == 'S' && ps->p[1] == 't' && first) {
            ps->p += 2;
            strcpy(cur.ident, "std");
            first = 0;
            continue; /* St is not a candidate */
        } else if (*ps->p == 'S' && first) {
            cur = parse_substitution(ps);
            first = 0;
            if (*ps->p == 'E') break;
            continue;
        } else if (*ps->p >= '0' && *ps->p <= '9') {
            cur.kind = K_NAME;
            parse_source_name(ps, cur.ident, sizeof cur.ident);
            nargs = 0;
            *has_targs = 0;
        } else if (*ps->p == 'I') {
            nargs = parse_template_args(ps, args, FK_MAX_TARGS);
            *has_targs = 1;
            classify(&cur, args, nargs);
        } else {
            fail(ps);
            break;
        }
        first = 0;
        if (*ps->p != 'E') add_sub(ps, &cur);
    }
    if (*ps->p != 'E') { fail(ps); return unknown(); }
    ps->p++;
    if (*has_targs && is_function) {
        ps->ntargs = nargs;
        memcpy(ps->targs, args, sizeof(ty_t) * (size_t)nargs);
    }
    if (cur.kind == K_NAME) classify(&cur, NULL, 0);
    return cur;
}

static ty_t parse_type(parser_t *ps)
{
    const char c = *ps->p;
    switch (c) {
    case 'v': ps->p++; return builtin("v", 0);
    case 'b': ps->p++; return builtin("b", 1);
    case 'c': ps->p++; return builtin("c", 1);
    case 'a': ps->p++; return builtin("a", 1);
    case 'h': ps->p++; return builtin("h", 1);
    case 's': ps->p++; return builtin("s", 2);
    case 't': ps->p++; return builtin("t", 2);
    case 'w': ps->p++; return builtin("w", 4);
    case 'i': ps->p++; return builtin("i", 4);
    case 'j': ps->p++; return builtin("j", 4);
    case 'f': ps->p++; return builtin("f", 4);
    case 'l': ps->p++; return builtin("l", 8);
    case 'm': ps->p++; return builtin("m", 8);
    case 'x': ps->p++; return builtin("x", 8);
    case 'y': ps->p++; return builtin("y", 8);
    case 'd': ps->p++; return builtin("d", 8);
    case 'n': ps->p++; return builtin("n", 16);
    case 'o': ps->p++; return builtin("o", 16);
    case 'e': ps->p++; return builtin("e", 16);
    case 'D':
        if (ps->p[1] == 'h') { ps->p += 2; return builtin("Dh", 2); }
        if (ps->p[1] == 'n') { ps->p += 2; return builtin("Dn", 8); }
        fail(ps);
        return unknown();
    case 'P': case 'R': case 'O': {
        ps->p++;
        ty_t inner = parse_type(ps);
        (void)inner;
        ty_t t = unknown();
        t.kind = K_POINTER;
        t.size = t.align = 8;
        add_sub(ps, &t);
        return t;
    }
    case 'K': case 'V': case 'r': {
        while (*ps->p == 'K' || *ps->p == 'V' || *ps->p == 'r') ps->p++;
        ty_t t = parse_type(ps);
        add_sub(ps, &t);
        return t;
    }
    case 'T': {
        ps->p++;
        long idx = 0;
        if (*ps->p != '_') idx = (long)parse_number(ps) + 1;
        if (*ps->p != '_' || idx >= ps->ntargs) { fail(ps); return unknown(); }
        ps->p++;
        ty_t t = ps->targs[idx];
        add_sub(ps, &t);
        if (*ps->p == 'I') {
            ty_t args[FK_MAX_TARGS];
            int n = parse_template_args(ps, args, FK_MAX_TARGS);
            classify(&t, args, n);
            add_sub(ps, &t);
        }
        return t;
    }
    case 'S': {
        ty_t t;
        if (ps->p[1] == 't') {
            ps->p += 2;
            t = unknown();
            t.kind = K_NAME;
            parse_source_name(ps, t.ident, sizeof t.ident);
            add_sub(ps, &t);
        } else {
            t = parse_substitution(ps);
        }
        if (*ps->p == 'I') {
            ty_t args[FK_MAX_TARGS];
            int n = parse_template_args(ps, args, FK_MAX_TARGS);
            classify(&t, args, n);
            add_sub(ps, &t);
        }
        return t;
    }
    case 'N': {
        int has_targs;
        ty_t t = parse_nested(ps, 0, &has_targs);
        add_sub(ps, &t);
        return t;
    }
    default:
        if (c >= '0' && c <= '9') {
            ty_t t = unknown();
            t.kind = K_NAME;
            parse_source_name(ps, t.ident, sizeof t.ident);
            if (*ps->p == 'I') {
                add_sub(ps, &t);
                ty_t args[FK_MAX_TARGS];
                int n = parse_template_args(ps, args, FK_MAX_TARGS);
                classify(&t, args, n);
            } else {
                classify(&t, NULL, 0);
            }
            add_sub(ps, &t);
            return t;
        }
        fail(ps);
        return unknown();
    }
}

int fk_sig_parse(const char *mangled, fk_sig_t *sig)
{
    memset(sig, 0, sizeof *sig);
    if (!mangled) return 0;
    const char *s = mangled;
    if (strncmp(s, "_Z", 2) != 0) {
        /* -rdc=true registers __nv_static_<hash>__Z...: the encoding starts after the prefix */
        const char *z = strstr(s, "__Z");
        if (!z) return 0;
        s = z + 1;
    }
    parser_t *ps = calloc(1, sizeof *ps);
    if (!ps) return 0;
    ps->p = s + 2;
    int is_template = 0;
    if (*ps->p == 'N') {
        parse_nested(ps, 1, &is_template);
    } else if (*ps->p >= '0' && *ps->p <= '9') {
        ty_t t = unknown();
        parse_source_name(ps, t.ident, sizeof t.ident);
        if (*ps->p == 'I') {
            add_sub(ps, &t);
            ps->ntargs = parse_template_args(ps, ps->targs, FK_MAX_TARGS);
            is_template = 1;
        }
    } else {
        fail(ps);
    }
    if (is_template && !ps->failed) (void)parse_type(ps); /* the return type */
    size_t off = 0;
    int n = 0;
    while (!ps->failed && *ps->p) {
        ty_t t = parse_type(ps);
        if (ps->failed) break;
        if (t.kind == K_BUILTIN && t.size == 0) {
            if (n == 0 && !*ps->p) break; /* (void): no parameters */
            fail(ps);
            break;
        }
        if (t.size <= 0 || t.align <= 0 || n >= FK_MAX_PARAMS) { fail(ps); break; }
        off = (off + (size_t)t.align - 1) / (size_t)t.align * (size_t)t.align;
        sig->size[n] = (size_t)t.size;
        sig->offset[n] = off;
        off += (size_t)t.size;
        n++;
    }
    if (!ps->failed) {
        sig->ok = 1;
        sig->n_params = n;
        sig->n_targs = ps->ntargs;
        for (int i = 0; i < ps->ntargs && i < FK_MAX_TARGS; i++)
            if (ps->targs[i].kind == K_BUILTIN) memcpy(sig->targ[i], ps->targs[i].code, sizeof sig->targ[i]);
    }
    free(ps);
    return sig->ok;
}
