/* demangle_lex.h: the demangler's lowest layer, with demangle_lex.c: the parser's state, what it
 * knows of one type or name, the cursor primitives, and the tokens (numbers, names, the
 * substitution table). demangle_parse.c's grammar and demangle_sizes.c's type sizes stand on it,
 * and demangle.c's entry points on the grammar: one above the other, no file reaching up. Kept
 * out of base.h because nothing outside the demangler sees a parser; the library's callers use
 * base.h's demangle.c section.
 *
 * Included only by demangle*.c; tested through them (tests/unit/test_demangle.c,
 * tests/fuzz/fuzz_demangle.c).
 */
#ifndef LG_DEMANGLE_LEX_H
#define LG_DEMANGLE_LEX_H

#include <string.h>

#include "base/base.h"

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

/* The cursor: peek never passes the terminator, and returns 0 once the parse failed. */
static inline char peek(const parser_t *p) { return p->fail ? 0 : p->s[p->pos]; }
static inline char peek2(const parser_t *p) { return (p->fail || !p->s[p->pos]) ? 0 : p->s[p->pos + 1]; }
static inline bool eat(parser_t *p, char c)
{
    if (peek(p) != c || c == 0)
        return false;
    p->pos++;
    return true;
}
static inline void fail(parser_t *p) { p->fail = true; }
static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

static inline void desc_unknown(desc_t *d)
{
    memset(d, 0, sizeof *d);
    d->size = -1;
}

/* ---------------------------------------------------------------- demangle_parse.c */

/* Parses `_Z <name>` of `itanium` (the Itanium name, nvcc's -rdc prefix already skipped) into p
 * and, when `params` is set, the parameter types' sizes into sizes[0..cap) and their number into
 * *count (-1 when one cannot be sized). Returns false when the name could not be parsed at all;
 * p->fail tells a name parsed only in part. */
LG_HIDDEN bool lg_demangle_parse_encoding(parser_t *p, const char *itanium, bool params, size_t *sizes, int cap,
                                          int *count);

/* ---------------------------------------------------------------- demangle_lex.c */

/* Records d as the next substitution candidate (S_, S0_ ...). */
LG_HIDDEN void lg_demangle_lex_add_sub(parser_t *p, const desc_t *d);
/* <number> ::= [n] <decimal>, bounded. */
LG_HIDDEN long lg_demangle_lex_number(parser_t *p);
/* <seq-id> _ : S_ is 0, S0_ is 1 (base 36). */
LG_HIDDEN long lg_demangle_lex_seq_index(parser_t *p);
/* <source-name> ::= <length> <identifier>, into d->id. */
LG_HIDDEN void lg_demangle_lex_source_name(parser_t *p, desc_t *d);
/* <substitution>: the entry it names (or a std:: name for St, Sa, Ss...) into d. */
LG_HIDDEN void lg_demangle_lex_substitution(parser_t *p, desc_t *d);

/* ---------------------------------------------------------------- demangle_sizes.c */

/* LP64 bytes of a builtin type code ('l' 8, 'h' 1 ...), 0 for void, -1 when not a builtin. */
LG_HIDDEN long lg_demangle_sizes_builtin(char c);
/* Bytes of a by-value class PyTorch passes to a watched kernel (its name and template
 * arguments in d), -1 when not one of them. */
LG_HIDDEN long lg_demangle_sizes_class(const desc_t *d);

#endif
