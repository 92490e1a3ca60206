/* demangle.c: what the library needs to know from an Itanium-mangled kernel name, without
 * libstdc++: the short name for messages, the label type (last template argument) and the
 * LP64 byte size of every parameter of the signature (for the registry's layout check when the
 * runtime cannot report parameter sizes). lg_demangle_full uses __cxa_demangle from a
 * libstdc++ that is dlopen'd at run time (the library never links it), for reports only.
 *
 * Callers: registry.c (layout check, once per kernel handle), decode.c (dtype, once per kernel
 * from classify.c), classify.c and stack.c
 * (names). Any thread; no global state except the dlopen'd __cxa_demangle pointer.
 *
 * The parser is a recursive-descent subset of the Itanium C++ ABI mangling grammar: nested and
 * unscoped names, template arguments (types, integer literals, packs), substitutions
 * (S_, S<n>_, St...), template parameters (T_, T<n>_), CV-qualifiers, pointers and
 * references, builtin types. It works on the caller's NUL-terminated string with a position
 * that never passes the terminator, keeps all state on the stack, and bounds its recursion, so
 * any byte string is safe input (tests/fuzz/fuzz_demangle.c). nvcc's -rdc form
 * `__nv_static_<n>_<n chars>__Z...` is unwrapped first.
 *
 * Tested by tests/unit/test_demangle.c with names taken from nvcc-compiled PyTorch-shaped
 * declarations.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_SUBS  96
#define MAX_TARGS 8
#define MAX_DEPTH 48

/* What the parser knows about one type, template argument or name. */
typedef struct desc {
    long size;       /* bytes for a type, -1 when unknown */
    char builtin;    /* builtin type code ('l', 'h', 'i' ...), 0 otherwise */
    bool is_literal; /* template argument that is an integer literal */
    long literal;
    const char *id; /* last identifier of a class or template name */
    int id_len;
    int nargs; /* template arguments of a class template-id */
    struct targ {
        char builtin;
        bool is_literal;
        long literal;
    } args[MAX_TARGS];
} desc_t;

typedef struct parser {
    const char *s;
    size_t pos;
    int depth;
    bool fail;
    int nsubs;
    desc_t subs[MAX_SUBS];
    int nfargs; /* template arguments of the function itself */
    desc_t fargs[MAX_TARGS];
    const char *short_id; /* the function's unqualified name */
    int short_len;
    bool in_fn_name;
} parser_t;

static char peek(const parser_t *p) { return p->fail ? 0 : p->s[p->pos]; }
static char peek2(const parser_t *p) { return (p->fail || !p->s[p->pos]) ? 0 : p->s[p->pos + 1]; }
static bool eat(parser_t *p, char c)
{
    if (peek(p) != c || c == 0)
        return false;
    p->pos++;
    return true;
}
static void fail(parser_t *p) { p->fail = true; }

static void desc_unknown(desc_t *d)
{
    memset(d, 0, sizeof *d);
    d->size = -1;
}

static void add_sub(parser_t *p, const desc_t *d)
{
    if (p->nsubs < MAX_SUBS)
        p->subs[p->nsubs] = *d;
    p->nsubs++; /* counted even when not stored, so later indices stay right */
}

/* <number> ::= [n] <decimal>; bounded so that a long run of digits cannot overflow. */
static long number(parser_t *p)
{
    bool neg = eat(p, 'n');
    long v = 0;
    int digits = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        if (v > 100000000L) {
            fail(p);
            return 0;
        }
        v = v * 10 + (peek(p) - '0');
        p->pos++;
        digits++;
    }
    if (!digits)
        fail(p);
    return neg ? -v : v;
}

/* <seq-id> _ : S_ is 0, S0_ is 1, base 36 with upper-case digits. */
static long seq_index(parser_t *p)
{
    if (eat(p, '_'))
        return 0;
    long v = 0;
    for (int i = 0; i < 8; i++) {
        char c = peek(p);
        if (c >= '0' && c <= '9')
            v = v * 36 + (c - '0');
        else if (c >= 'A' && c <= 'Z')
            v = v * 36 + (c - 'A' + 10);
        else
            break;
        p->pos++;
    }
    if (!eat(p, '_'))
        fail(p);
    return v + 1;
}

/* <source-name> ::= <length> <identifier>; the identifier must lie inside the string. */
static void source_name(parser_t *p, desc_t *d)
{
    long len = number(p);
    if (p->fail || len <= 0) {
        fail(p);
        return;
    }
    for (long i = 0; i < len; i++) {
        if (!p->s[p->pos + i]) {
            fail(p);
            return;
        }
    }
    desc_unknown(d);
    d->id = p->s + p->pos;
    d->id_len = (int)(len > 100000 ? 100000 : len);
    p->pos += (size_t)len;
}

static void type(parser_t *p, desc_t *d);

/* Sizes of the by-value structs PyTorch passes to its watched kernels (pytorch-kernels.md §6). */
static long known_class_size(const desc_t *d)
{
    if (!d->id)
        return -1;
#define IS(name) (d->id_len == (int)sizeof(name) - 1 && memcmp(d->id, name, sizeof(name) - 1) == 0)
    if (IS("Half") || IS("BFloat16"))
        return d->nargs == 0 ? 2 : -1;
    if (IS("GenericPackedTensorAccessor") || IS("PackedTensorAccessor") || IS("PackedTensorAccessor64") ||
        IS("PackedTensorAccessor32")) {
        /* <T, N, PtrTraits, index_t>; since PyTorch 2.10 torch::headeronly::detail's
         * <TensorAccessorT, IndexBoundsCheck<N, index_t>, T, N, PtrTraits, index_t>, whose two
         * leading policy types hold no data (the wheels' KPARAM_INFO: still 8 + 2 * 8 * N). */
        int n_at = 1, idx_at = 3;
        if (d->nargs == 6 && !d->args[1].is_literal && d->args[3].is_literal)
            n_at = 3, idx_at = 5;
        if (d->nargs <= n_at || !d->args[n_at].is_literal || d->args[n_at].literal < 1 || d->args[n_at].literal > 64)
            return -1;
        long idx = IS("PackedTensorAccessor32") ? 4 : 8;
        if (d->nargs > idx_at) {
            char b = d->args[idx_at].builtin;
            idx = (b == 'i' || b == 'j') ? 4 : (b == 'l' || b == 'm' || b == 'x' || b == 'y') ? 8 : -1;
        }
        return idx < 0 ? -1 : 8 + 2 * idx * d->args[n_at].literal;
    }
    if (IS("THCDeviceTensor")) {
        if (d->nargs < 2 || !d->args[1].is_literal || d->args[1].literal < 1 || d->args[1].literal > 64)
            return -1;
        long idx = 4; /* IndexT defaults to int */
        if (d->nargs >= 3) {
            char b = d->args[2].builtin;
            idx = (b == 'i' || b == 'j') ? 4 : (b == 'l' || b == 'm' || b == 'x' || b == 'y') ? 8 : -1;
        }
        return idx < 0 ? -1 : 8 + 2 * idx * d->args[1].literal;
    }
    if (IS("TensorInfo")) {
        if (d->nargs != 2)
            return -1;
        char b = d->args[1].builtin;
        return b == 'j' ? 216 : (b == 'm' || b == 'y') ? 416 : -1;
    }
    if (IS("Msg")) /* at::native::Msg of torch._assert_async's kernel: char msg[256] (TensorCompare.cu) */
        return d->nargs == 0 ? 256 : -1;
#undef IS
    return -1;
}

static void template_args(parser_t *p, desc_t *out, int *nout);

/* The inside of an argument pack, up to and including its E. */
static void template_args_body(parser_t *p)
{
    p->pos--; /* template_args expects an opening letter: reuse the J as it */
    desc_t tmp[MAX_TARGS];
    int n;
    template_args(p, tmp, &n);
}

/* <template-args> ::= I <template-arg>+ E. Stores the first MAX_TARGS into out/nout. */
static void template_args(parser_t *p, desc_t *out, int *nout)
{
    if (!eat(p, 'I') && !eat(p, 'J')) {
        fail(p);
        return;
    }
    if (++p->depth > MAX_DEPTH) {
        fail(p);
        return;
    }
    int n = 0;
    while (!p->fail && peek(p) != 'E') {
        desc_t a;
        desc_unknown(&a);
        char c = peek(p);
        if (c == 0) {
            fail(p);
            break;
        }
        if (c == 'L') { /* <expr-primary> ::= L <type> <value> E | L _Z <encoding> E */
            p->pos++;
            if (peek(p) == '_' && peek2(p) == 'Z') {
                while (peek(p) && peek(p) != 'E')
                    p->pos++; /* an external name: skip, its text has no E of its own here */
            } else {
                desc_t t;
                type(p, &t);
                if (peek(p) == 'n' || (peek(p) >= '0' && peek(p) <= '9')) {
                    a.is_literal = true;
                    a.literal = number(p);
                } else {
                    while (peek(p) && peek(p) != 'E')
                        p->pos++; /* float literal text */
                }
            }
            if (!eat(p, 'E'))
                fail(p);
        } else if (c == 'J') { /* argument pack: J <template-arg>* E, not recorded */
            p->pos++;
            template_args_body(p);
        } else if (c == 'X') {
            fail(p); /* expressions are not needed for kernel names */
        } else {
            type(p, &a);
        }
        if (n < MAX_TARGS && out)
            out[n] = a;
        n++;
    }
    p->depth--;
    if (!eat(p, 'E'))
        fail(p);
    if (nout)
        *nout = n < MAX_TARGS ? n : MAX_TARGS;
}

/* Copies a template-args list into a class desc and sizes the result. */
static void apply_targs(desc_t *d, const desc_t *args, int n)
{
    d->nargs = n;
    for (int i = 0; i < n && i < MAX_TARGS; i++) {
        d->args[i].builtin = args[i].builtin;
        d->args[i].is_literal = args[i].is_literal;
        d->args[i].literal = args[i].literal;
    }
    d->size = known_class_size(d);
    d->builtin = 0;
}

/* <substitution>; `d` receives the entry (or a std:: name for St, Sa, Ss...). */
static void substitution(parser_t *p, desc_t *d)
{
    if (!eat(p, 'S')) {
        fail(p);
        return;
    }
    desc_unknown(d);
    char c = peek(p);
    if (c == 't') { /* St <unqualified-name>: ::std:: */
        p->pos++;
        if (peek(p) >= '0' && peek(p) <= '9')
            source_name(p, d);
        return;
    }
    if (c == 'a' || c == 'b' || c == 's' || c == 'i' || c == 'o' || c == 'd') {
        p->pos++;
        return;
    }
    long idx = seq_index(p);
    if (p->fail)
        return;
    if (idx < 0 || idx >= p->nsubs || idx >= MAX_SUBS) {
        fail(p);
        return;
    }
    *d = p->subs[idx];
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* One <unqualified-name> of a prefix: a source name (optionally L-prefixed for internal
 * linkage, as nvcc emits), a constructor/destructor, or an operator name. */
static void unqualified_name(parser_t *p, desc_t *d)
{
    eat(p, 'L');
    char c = peek(p);
    if (is_digit(c)) {
        source_name(p, d);
    } else if (c == 'C' || c == 'D') {
        p->pos++;
        if (!peek(p))
            fail(p);
        else
            p->pos++;
        desc_unknown(d);
    } else if (c >= 'a' && c <= 'z' && peek2(p) >= 'a' && peek2(p) <= 'z') {
        desc_unknown(d); /* operator name, two lower-case letters */
        d->id = p->s + p->pos;
        d->id_len = 2;
        p->pos += 2;
        if (d->id[0] == 'c' && d->id[1] == 'v') { /* conversion operator: cv <type> */
            desc_t t;
            type(p, &t);
        }
    } else {
        fail(p);
    }
    /* ABI tags B <source-name> */
    while (!p->fail && peek(p) == 'B') {
        p->pos++;
        desc_t tag;
        source_name(p, &tag);
    }
}

/* <nested-name> ::= N [<CV-qualifiers>] [<ref-qualifier>] <prefix> <unqualified-name> E.
 * Adds each prefix component as a substitution, except the last one (the type adds itself
 * as a whole; a function name is never a candidate), like the reference demangler. */
static void nested_name(parser_t *p, desc_t *d, bool is_function)
{
    if (!eat(p, 'N')) {
        fail(p);
        return;
    }
    while (peek(p) == 'r' || peek(p) == 'V' || peek(p) == 'K')
        p->pos++;
    if (peek(p) == 'R' || peek(p) == 'O')
        p->pos++;
    desc_unknown(d);
    bool have = false;
    while (!p->fail && peek(p) != 'E') {
        char c = peek(p);
        bool from_sub = false;
        if (c == 0) {
            fail(p);
            return;
        }
        if (c == 'S') {
            substitution(p, d);
            from_sub = true;
        } else if (c == 'I') {
            if (!have) {
                fail(p);
                return;
            }
            desc_t args[MAX_TARGS];
            int n = 0;
            bool last_before = is_function;
            template_args(p, args, &n);
            if (p->fail)
                return;
            if (last_before && peek(p) == 'E') {
                /* the function's own template arguments */
                p->nfargs = n;
                for (int i = 0; i < n; i++)
                    p->fargs[i] = args[i];
            }
            apply_targs(d, args, n);
        } else if (c == 'T') {
            type(p, d); /* template parameter as prefix */
            from_sub = true;
        } else {
            unqualified_name(p, d);
            if (p->fail)
                return;
            if (is_function && d->id) {
                p->short_id = d->id;
                p->short_len = d->id_len;
            }
        }
        if (p->fail)
            return;
        have = true;
        if (!from_sub && peek(p) != 'E')
            add_sub(p, d);
    }
    if (!eat(p, 'E'))
        fail(p);
    if (!is_function && d->size < 0)
        d->size = known_class_size(d);
}

static long builtin_size(char c)
{
    switch (c) {
    case 'b':
    case 'c':
    case 'a':
    case 'h': return 1;
    case 's':
    case 't': return 2;
    case 'w':
    case 'i':
    case 'j':
    case 'f': return 4;
    case 'l':
    case 'm':
    case 'x':
    case 'y':
    case 'd': return 8;
    case 'e':
    case 'g':
    case 'n':
    case 'o': return 16;
    case 'v':
    case 'z': return 0;
    default: return -1;
    }
}

/* <type>; fills d with the type's size and what a template argument needs to know. */
/* The template arguments that follow a name, applied to d (its size, as a known class
 * template). false when they could not be parsed. */
static bool with_template_args(parser_t *p, desc_t *d)
{
    desc_t args[MAX_TARGS];
    int n = 0;
    template_args(p, args, &n);
    if (p->fail)
        return false;
    apply_targs(d, args, n);
    return true;
}

static void type(parser_t *p, desc_t *d)
{
    desc_unknown(d);
    if (++p->depth > MAX_DEPTH) {
        fail(p);
        return;
    }
    char c = peek(p);
    switch (c) {
    case 0: fail(p); break;
    case 'r':
    case 'V':
    case 'K': { /* CV-qualified: same size; a candidate of its own */
        while (peek(p) == 'r' || peek(p) == 'V' || peek(p) == 'K')
            p->pos++;
        type(p, d);
        if (!p->fail)
            add_sub(p, d);
        break;
    }
    case 'P':
    case 'R':
    case 'O': {
        p->pos++;
        desc_t inner;
        type(p, &inner);
        desc_unknown(d);
        d->size = 8;
        if (!p->fail)
            add_sub(p, d);
        break;
    }
    case 'D': {
        char n = peek2(p);
        p->pos += 2;
        switch (n) {
        case 'd':
        case 'n': d->size = 8; break;
        case 'e': d->size = 16; break;
        case 'f':
        case 'i': d->size = 4; break;
        case 'h':
        case 's': d->size = 2; break;
        case 'u':
        case 'a':
        case 'c': d->size = -1; break;
        case 'F': { /* DF <number> _ : _FloatN */
            long bits = number(p);
            if (!eat(p, '_'))
                fail(p);
            d->size = (bits > 0 && bits <= 128) ? bits / 8 : -1;
            break;
        }
        default: fail(p);
        }
        break;
    }
    case 'u': { /* vendor extended type */
        p->pos++;
        source_name(p, d);
        d->size = -1;
        if (!p->fail)
            add_sub(p, d);
        break;
    }
    case 'T': {
        p->pos++;
        long idx = seq_index(p);
        if (p->fail)
            break;
        if (idx >= 0 && idx < p->nfargs)
            *d = p->fargs[idx];
        else
            desc_unknown(d);
        add_sub(p, d);
        if (peek(p) == 'I') {
            desc_t args[MAX_TARGS];
            int n = 0;
            template_args(p, args, &n);
            desc_unknown(d);
            if (!p->fail)
                add_sub(p, d);
        }
        break;
    }
    case 'S': {
        bool is_std_name = peek2(p) == 't';
        substitution(p, d);
        if (p->fail)
            break;
        if (peek(p) == 'I') {
            if (is_std_name)
                add_sub(p, d);
            if (!with_template_args(p, d))
                break;
            add_sub(p, d);
        } else if (is_std_name) {
            d->size = -1;
            add_sub(p, d);
        }
        break;
    }
    case 'N':
        nested_name(p, d, false);
        if (!p->fail)
            add_sub(p, d);
        break;
    case 'F':
    case 'A':
    case 'M':
    case 'X':
    case 'G':
    case 'C':
        fail(p); /* function, array, member pointer, expressions: not in kernel signatures */
        break;
    case 'Z': fail(p); break;
    default:
        if (is_digit(c)) {
            source_name(p, d);
            if (p->fail)
                break;
            if (peek(p) == 'I') {
                add_sub(p, d);
                if (!with_template_args(p, d))
                    break;
            } else {
                d->size = known_class_size(d);
            }
            add_sub(p, d);
        } else if (builtin_size(c) != -1 || c == 'v') {
            p->pos++;
            d->builtin = c;
            d->size = builtin_size(c);
        } else {
            fail(p);
        }
    }
    p->depth--;
}

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

/* An unscoped name (plain, or after St) and its template arguments, which become the
 * function's. Returns true when it is a template. */
static bool unscoped_name(parser_t *p, desc_t *d)
{
    source_name(p, d);
    if (p->fail)
        return false;
    p->short_id = d->id;
    p->short_len = d->id_len;
    if (peek(p) != 'I')
        return false;
    add_sub(p, d);
    desc_t args[MAX_TARGS];
    int n = 0;
    template_args(p, args, &n);
    p->nfargs = n;
    for (int i = 0; i < n; i++)
        p->fargs[i] = args[i];
    return true;
}

/* Parses `_Z <name>` and, when `params` is set, the parameter types. Returns false when the
 * name could not be parsed at all. */
static bool parse_encoding(parser_t *p, const char *mangled, bool params, size_t *sizes, int cap, int *count)
{
    memset(p, 0, offsetof(parser_t, subs));
    p->nfargs = 0;
    p->short_id = NULL;
    const char *s = itanium_start(mangled);
    if (!s)
        return false;
    p->s = s;
    p->pos = 2;
    bool is_template = false;
    eat(p, 'L');
    char c = peek(p);
    desc_t d;
    if (c == 'N') {
        nested_name(p, &d, true);
    } else if (is_digit(c)) {
        is_template = unscoped_name(p, &d);
    } else if (c == 'S' && peek2(p) == 't') {
        p->pos += 2;
        is_template = unscoped_name(p, &d);
    } else {
        fail(p);
    }
    if (p->fail)
        return p->short_id != NULL;
    if (!params)
        return true;
    /* nested template function names: the template args were the last component */
    if (c == 'N')
        is_template = p->nfargs > 0;
    if (is_template) {
        desc_t ret;
        type(p, &ret); /* the return type comes first in a template function's signature */
    }
    int n = 0;
    bool unsized = false;
    if (peek(p) == 'v' && peek2(p) == 0) {
        *count = 0;
        return true;
    }
    while (!p->fail && peek(p) != 0 && peek(p) != '.') { /* ".constprop.0" style suffixes */
        desc_t t;
        type(p, &t);
        if (p->fail)
            break;
        if (t.size <= 0)
            unsized = true;
        if (n < cap && sizes)
            sizes[n] = t.size > 0 ? (size_t)t.size : 0;
        n++;
    }
    if (p->fail || unsized || n > cap || n == 0) {
        *count = -1;
        return true;
    }
    *count = n;
    return true;
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
