/* demangle_parse.c: the productions of the Itanium mangling grammar the demangler needs, a
 * recursive-descent subset: nested and unscoped names, template arguments (types, integer
 * literals, packs), template parameters (T_, T<n>_), CV-qualifiers, pointers and references,
 * builtin and vendor types; the function's encoding with its parameter list. Each type comes out
 * as a desc_t: its size (demangle_sizes.c), its builtin code, its template arguments. Numbers,
 * source names and substitutions are demangle_lex.c's.
 *
 * Callers: demangle.c's entry points, on the caller's thread. The parser keeps all state in the
 * caller's parser_t (demangle_lex.h), on the stack; it works on a NUL-terminated string with a
 * position that never passes the terminator and bounds its recursion, so any byte string is safe
 * input. Tested by tests/unit/test_demangle.c and tests/fuzz/fuzz_demangle.c.
 */
#include "demangle_lex.h"

static void type(parser_t *p, desc_t *d);

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
                    a.literal = lg_demangle_lex_number(p);
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
    d->size = lg_demangle_sizes_class(d);
    d->builtin = 0;
}

/* One <unqualified-name> of a prefix: a source name (optionally L-prefixed for internal
 * linkage, as nvcc emits), a constructor/destructor, or an operator name. */
static void unqualified_name(parser_t *p, desc_t *d)
{
    eat(p, 'L');
    char c = peek(p);
    if (is_digit(c)) {
        lg_demangle_lex_source_name(p, d);
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
        lg_demangle_lex_source_name(p, &tag);
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
            lg_demangle_lex_substitution(p, d);
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
            lg_demangle_lex_add_sub(p, d);
    }
    if (!eat(p, 'E'))
        fail(p);
    if (!is_function && d->size < 0)
        d->size = lg_demangle_sizes_class(d);
}

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

/* <type>; fills d with the type's size and what a template argument needs to know. */
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
            lg_demangle_lex_add_sub(p, d);
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
            lg_demangle_lex_add_sub(p, d);
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
            long bits = lg_demangle_lex_number(p);
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
        lg_demangle_lex_source_name(p, d);
        d->size = -1;
        if (!p->fail)
            lg_demangle_lex_add_sub(p, d);
        break;
    }
    case 'T': {
        p->pos++;
        long idx = lg_demangle_lex_seq_index(p);
        if (p->fail)
            break;
        if (idx >= 0 && idx < p->nfargs)
            *d = p->fargs[idx];
        else
            desc_unknown(d);
        lg_demangle_lex_add_sub(p, d);
        if (peek(p) == 'I') {
            desc_t args[MAX_TARGS];
            int n = 0;
            template_args(p, args, &n);
            desc_unknown(d);
            if (!p->fail)
                lg_demangle_lex_add_sub(p, d);
        }
        break;
    }
    case 'S': {
        bool is_std_name = peek2(p) == 't';
        lg_demangle_lex_substitution(p, d);
        if (p->fail)
            break;
        if (peek(p) == 'I') {
            if (is_std_name)
                lg_demangle_lex_add_sub(p, d);
            if (!with_template_args(p, d))
                break;
            lg_demangle_lex_add_sub(p, d);
        } else if (is_std_name) {
            d->size = -1;
            lg_demangle_lex_add_sub(p, d);
        }
        break;
    }
    case 'N':
        nested_name(p, d, false);
        if (!p->fail)
            lg_demangle_lex_add_sub(p, d);
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
            lg_demangle_lex_source_name(p, d);
            if (p->fail)
                break;
            if (peek(p) == 'I') {
                lg_demangle_lex_add_sub(p, d);
                if (!with_template_args(p, d))
                    break;
            } else {
                d->size = lg_demangle_sizes_class(d);
            }
            lg_demangle_lex_add_sub(p, d);
        } else if (lg_demangle_sizes_builtin(c) != -1 || c == 'v') {
            p->pos++;
            d->builtin = c;
            d->size = lg_demangle_sizes_builtin(c);
        } else {
            fail(p);
        }
    }
    p->depth--;
}

/* An unscoped name (plain, or after St) and its template arguments, which become the
 * function's. Returns true when it is a template. */
static bool unscoped_name(parser_t *p, desc_t *d)
{
    lg_demangle_lex_source_name(p, d);
    if (p->fail)
        return false;
    p->short_id = d->id;
    p->short_len = d->id_len;
    if (peek(p) != 'I')
        return false;
    lg_demangle_lex_add_sub(p, d);
    desc_t args[MAX_TARGS];
    int n = 0;
    template_args(p, args, &n);
    p->nfargs = n;
    for (int i = 0; i < n; i++)
        p->fargs[i] = args[i];
    return true;
}

/* Only the parser's header is cleared: subs[] is written before it is read (nsubs). */
bool lg_demangle_parse_encoding(parser_t *p, const char *itanium, bool params, size_t *sizes, int cap, int *count)
{
    memset(p, 0, offsetof(parser_t, subs));
    p->nfargs = 0;
    p->short_id = NULL;
    p->s = itanium;
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
