/* demangle_lex.c: the token level of the Itanium mangling grammar for demangle_parse.c:
 * <number>, <seq-id>, <source-name> (its identifier bounded by the string's terminator) and the
 * substitution table (the candidates S_, S0_ ... refer back to, and the std:: abbreviations).
 *
 * Callers: demangle_parse.c's productions, on the caller's thread; state lives in the caller's
 * parser_t (demangle_lex.h), on its stack. Tested through demangle.c's entry points by
 * tests/unit/test_demangle.c (substitutions, nvcc's internal-linkage names) and
 * tests/fuzz/fuzz_demangle.c (any byte string).
 */
#include "demangle_lex.h"

void lg_demangle_lex_add_sub(parser_t *p, const desc_t *d)
{
    if (p->nsubs < MAX_SUBS)
        p->subs[p->nsubs] = *d;
    p->nsubs++; /* counted even when not stored, so later indices stay right */
}

/* <number> ::= [n] <decimal>; bounded so that a long run of digits cannot overflow. */
long lg_demangle_lex_number(parser_t *p)
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
long lg_demangle_lex_seq_index(parser_t *p)
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
void lg_demangle_lex_source_name(parser_t *p, desc_t *d)
{
    long len = lg_demangle_lex_number(p);
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

/* <substitution>; `d` receives the entry (or a std:: name for St, Sa, Ss...). */
void lg_demangle_lex_substitution(parser_t *p, desc_t *d)
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
            lg_demangle_lex_source_name(p, d);
        return;
    }
    if (c == 'a' || c == 'b' || c == 's' || c == 'i' || c == 'o' || c == 'd') {
        p->pos++;
        return;
    }
    long idx = lg_demangle_lex_seq_index(p);
    if (p->fail)
        return;
    if (idx < 0 || idx >= p->nsubs || idx >= MAX_SUBS) {
        fail(p);
        return;
    }
    *d = p->subs[idx];
}
