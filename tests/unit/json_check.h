/* json_check.h: a strict recursive-descent JSON parser (RFC 8259) for the unit tests and the
 * JSON fuzzer, so tests check the log with a real parser instead of string matching.
 * Header-only; used by tests/unit/test_json.c, test_report.c and tests/fuzz/fuzz_json.c.
 *
 * jc_parse() returns a tree (malloc'd; jc_free it) or NULL with a message naming the byte
 * offset. Strict where writers go wrong: control characters in strings, bad escapes, lone
 * surrogate escapes, invalid UTF-8, leading zeros, trailing text, nesting deeper than 64.
 */
#ifndef LG_JSON_CHECK_H
#define LG_JSON_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { JC_NULL, JC_BOOL, JC_NUMBER, JC_STRING, JC_ARRAY, JC_OBJECT } jc_type_t;

typedef struct jc_value {
    jc_type_t type;
    bool b;
    double num;
    bool is_int;          /* the number had no fraction or exponent */
    long long i;          /* valid when is_int */
    char *str;            /* JC_STRING: decoded UTF-8, NUL-terminated (may hold escaped NULs) */
    size_t str_len;
    int n;                /* children (array items or object members) */
    char **keys;          /* JC_OBJECT */
    struct jc_value **items;
} jc_value_t;

typedef struct {
    const char *s;
    size_t len, pos;
    char err[160];
    int depth;
} jc_parser_t;

static __attribute__((unused)) jc_value_t *jc_value_parse(jc_parser_t *p);

static __attribute__((unused)) void jc_free(jc_value_t *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        if (v->keys)
            free(v->keys[i]);
        jc_free(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->str);
    free(v);
}

static __attribute__((unused)) void *jc_fail(jc_parser_t *p, const char *what)
{
    if (!p->err[0])
        snprintf(p->err, sizeof(p->err), "%s at byte %zu", what, p->pos);
    return NULL;
}

static __attribute__((unused)) void jc_ws(jc_parser_t *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static __attribute__((unused)) size_t jc_utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char b = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; if (b == 0xE0) lo = 0xA0; else if (b == 0xED) hi = 0x9F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; if (b == 0xF0) lo = 0x90; else if (b == 0xF4) hi = 0x8F; }
    else return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++) if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

static __attribute__((unused)) int jc_hex4(jc_parser_t *p, unsigned *out)
{
    if (p->pos + 4 > p->len)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

static __attribute__((unused)) void jc_emit_utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) out[(*o)++] = (char)cp;
    else if (cp < 0x800) { out[(*o)++] = (char)(0xC0 | (cp >> 6)); out[(*o)++] = (char)(0x80 | (cp & 63)); }
    else if (cp < 0x10000) { out[(*o)++] = (char)(0xE0 | (cp >> 12)); out[(*o)++] = (char)(0x80 | ((cp >> 6) & 63)); out[(*o)++] = (char)(0x80 | (cp & 63)); }
    else { out[(*o)++] = (char)(0xF0 | (cp >> 18)); out[(*o)++] = (char)(0x80 | ((cp >> 12) & 63)); out[(*o)++] = (char)(0x80 | ((cp >> 6) & 63)); out[(*o)++] = (char)(0x80 | (cp & 63)); }
}

/* Parses a string at p->pos (which is at '"'); returns malloc'd decoded text. */
static __attribute__((unused)) char *jc_string(jc_parser_t *p, size_t *out_len)
{
    p->pos++;
    char *out = (char *)malloc(p->len - p->pos + 1);
    size_t o = 0;
    while (1) {
        if (p->pos >= p->len) { free(out); return (char *)jc_fail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { free(out); return (char *)jc_fail(p, "control character in string"); }
        if (c == '\\') {
            p->pos++;
            if (p->pos >= p->len) { free(out); return (char *)jc_fail(p, "bad escape"); }
            char e = p->s[p->pos++];
            switch (e) {
            case '"': out[o++] = '"'; break;
            case '\\': out[o++] = '\\'; break;
            case '/': out[o++] = '/'; break;
            case 'b': out[o++] = '\b'; break;
            case 'f': out[o++] = '\f'; break;
            case 'n': out[o++] = '\n'; break;
            case 'r': out[o++] = '\r'; break;
            case 't': out[o++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (jc_hex4(p, &cp) < 0) { free(out); return (char *)jc_fail(p, "bad \\u escape"); }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') { free(out); return (char *)jc_fail(p, "lone high surrogate"); }
                    p->pos += 2;
                    if (jc_hex4(p, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) { free(out); return (char *)jc_fail(p, "bad low surrogate"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) { free(out); return (char *)jc_fail(p, "lone low surrogate"); }
                jc_emit_utf8(out, &o, cp);
                break;
            }
            default: free(out); return (char *)jc_fail(p, "bad escape");
            }
            continue;
        }
        if (c < 0x80) { out[o++] = (char)c; p->pos++; continue; }
        size_t u = jc_utf8_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
        if (u == 0) { free(out); return (char *)jc_fail(p, "invalid UTF-8 in string"); }
        memcpy(out + o, p->s + p->pos, u);
        o += u;
        p->pos += u;
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}

static __attribute__((unused)) jc_value_t *jc_new(jc_type_t t)
{
    jc_value_t *v = (jc_value_t *)calloc(1, sizeof(*v));
    v->type = t;
    return v;
}

static __attribute__((unused)) void jc_push(jc_value_t *v, char *key, jc_value_t *item)
{
    v->items = (jc_value_t **)realloc(v->items, sizeof(*v->items) * (size_t)(v->n + 1));
    if (v->type == JC_OBJECT)
        v->keys = (char **)realloc(v->keys, sizeof(*v->keys) * (size_t)(v->n + 1)), v->keys[v->n] = key;
    v->items[v->n++] = item;
}

static __attribute__((unused)) jc_value_t *jc_number(jc_parser_t *p)
{
    size_t start = p->pos;
    bool is_int = true;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len) return (jc_value_t *)jc_fail(p, "bad number");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') return (jc_value_t *)jc_fail(p, "leading zero");
    } else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    } else return (jc_value_t *)jc_fail(p, "bad number");
    if (p->pos < p->len && p->s[p->pos] == '.') {
        is_int = false;
        p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return (jc_value_t *)jc_fail(p, "bad fraction");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        is_int = false;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return (jc_value_t *)jc_fail(p, "bad exponent");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    char tmp[64];
    size_t n = p->pos - start;
    if (n >= sizeof(tmp)) n = sizeof(tmp) - 1;
    memcpy(tmp, p->s + start, n);
    tmp[n] = '\0';
    jc_value_t *v = jc_new(JC_NUMBER);
    v->num = strtod(tmp, NULL);
    v->is_int = is_int;
    if (is_int) v->i = strtoll(tmp, NULL, 10);
    return v;
}

static __attribute__((unused)) bool jc_lit(jc_parser_t *p, const char *lit)
{
    size_t n = strlen(lit);
    if (p->pos + n > p->len || memcmp(p->s + p->pos, lit, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static __attribute__((unused)) jc_value_t *jc_value_parse(jc_parser_t *p)
{
    jc_ws(p);
    if (p->pos >= p->len) return (jc_value_t *)jc_fail(p, "unexpected end");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        if (++p->depth > 64) return (jc_value_t *)jc_fail(p, "too deep");
        bool obj = c == '{';
        jc_value_t *v = jc_new(obj ? JC_OBJECT : JC_ARRAY);
        p->pos++;
        jc_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) { p->pos++; p->depth--; return v; }
        while (1) {
            char *key = NULL;
            if (obj) {
                jc_ws(p);
                size_t kl;
                if (p->pos >= p->len || p->s[p->pos] != '"' || !(key = jc_string(p, &kl))) { jc_free(v); return (jc_value_t *)jc_fail(p, "expected key"); }
                jc_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') { free(key); jc_free(v); return (jc_value_t *)jc_fail(p, "expected ':'"); }
                p->pos++;
            }
            jc_value_t *item = jc_value_parse(p);
            if (!item) { free(key); jc_free(v); return NULL; }
            jc_push(v, key, item);
            jc_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) { p->pos++; break; }
            jc_free(v);
            return (jc_value_t *)jc_fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        p->depth--;
        return v;
    }
    if (c == '"') {
        size_t n;
        char *s = jc_string(p, &n);
        if (!s) return NULL;
        jc_value_t *v = jc_new(JC_STRING);
        v->str = s;
        v->str_len = n;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return jc_number(p);
    if (jc_lit(p, "true")) { jc_value_t *v = jc_new(JC_BOOL); v->b = true; return v; }
    if (jc_lit(p, "false")) return jc_new(JC_BOOL);
    if (jc_lit(p, "null")) return jc_new(JC_NULL);
    return (jc_value_t *)jc_fail(p, "unexpected character");
}

/* Parses exactly one JSON text of len bytes. err (>= 160 bytes) gets the reason on failure. */
static __attribute__((unused)) jc_value_t *jc_parse(const char *s, size_t len, char *err)
{
    jc_parser_t p = { s, len, 0, "", 0 };
    jc_value_t *v = jc_value_parse(&p);
    if (v) {
        jc_ws(&p);
        if (p.pos != len) { jc_free(v); v = (jc_value_t *)jc_fail(&p, "trailing text"); }
    }
    if (!v && err) strcpy(err, p.err);
    return v;
}

/* Member `key` of an object, NULL when absent or not an object. */
static __attribute__((unused)) jc_value_t *jc_get(const jc_value_t *v, const char *key)
{
    if (!v || v->type != JC_OBJECT) return NULL;
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

/* Follows a '.'-separated path of object keys; NULL when any step is missing. */
static __attribute__((unused)) jc_value_t *jc_path(const jc_value_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL;
    const jc_value_t *cur = v;
    for (char *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = jc_get(cur, k);
    return (jc_value_t *)cur;
}

#endif
