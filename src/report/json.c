/* json.c: a JSON writer into a caller-supplied fixed buffer, for the JSONL log (report.c).
 *
 * Called by report.c on whatever thread reports an event, under no lock of its own (each
 * lg_json_t belongs to one caller). Never allocates, never calls into libc beyond memcpy /
 * strlen, so it is also usable from the hold/abort path.
 *
 * Guarantees, because the log is read by scripts that must never choke on a line:
 *  - any input bytes give valid JSON: quotes, backslashes and control characters are escaped,
 *    invalid UTF-8 (stray continuation bytes, overlong forms, surrogates, > U+10FFFF) becomes
 *    U+FFFD; keys go through the same escaper;
 *  - on overflow the text stays valid: every value is written all-or-nothing, room for the
 *    closing brackets of the open containers is kept in reserve, and after the first value that
 *    did not fit nothing more is added (lg_json_finish then closes what is open).
 *
 * Tested by tests/unit/test_json.c (a recursive-descent validator parses every output) and
 * fuzzed by tests/fuzz/fuzz_json.c.
 */
#include <string.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>

#include "report/report.h"

void lg_json_init(lg_json_t *j, char *buf, size_t cap)
{
    memset(j, 0, sizeof(*j));
    j->buf = buf;
    j->cap = cap;
    if (cap > 0)
        buf[0] = '\0';
    else
        j->overflow = true;
}

/* Bytes that must stay free for the closers of the open containers and the NUL. */
static size_t reserve(const lg_json_t *j, int extra_depth) { return (size_t)(j->depth + extra_depth) + 1; }

/* Appends n bytes if they fit beside the reserve; false (nothing written) otherwise. */
static bool put(lg_json_t *j, const char *s, size_t n)
{
    if (j->len + n + reserve(j, 0) > j->cap)
        return false;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    return true;
}

static bool put_c(lg_json_t *j, char c) { return put(j, &c, 1); }

/* Length of the valid UTF-8 sequence starting at s (1..4), or 0 when s[0] does not start
 * one. Follows RFC 3629's table: no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char b = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (avail < n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static bool put_escaped(lg_json_t *j, const char *value, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)value;
    if (!put_c(j, '"'))
        return false;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        bool ok;
        if (c == '"')
            ok = put(j, "\\\"", 2);
        else if (c == '\\')
            ok = put(j, "\\\\", 2);
        else if (c == '\n')
            ok = put(j, "\\n", 2);
        else if (c == '\t')
            ok = put(j, "\\t", 2);
        else if (c == '\r')
            ok = put(j, "\\r", 2);
        else if (c < 0x20 || c == 0x7f) {
            /* DEL is legal JSON but would be invisible in a terminal: escape it too. */
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            ok = put(j, e, 6);
        } else if (c < 0x80)
            ok = put_c(j, (char)c);
        else {
            size_t u = utf8_len(s + i, n - i);
            if (u == 0) {
                ok = put(j, "\\ufffd", 6);
                u = 1;
            } else
                ok = put(j, (const char *)s + i, u);
            i += u;
            if (!ok)
                return false;
            continue;
        }
        if (!ok)
            return false;
        i++;
    }
    return put_c(j, '"');
}

/* Separator and key before a value. Inside an object a missing key becomes "" so the text
 * stays valid even if a caller forgets one; inside an array the key is ignored. */
static bool prefix(lg_json_t *j, const char *key)
{
    if (j->depth > 0) {
        if (j->need_comma[j->depth] && !put_c(j, ','))
            return false;
        if (j->closer[j->depth] == '}') {
            const char *k = key ? key : "";
            if (!put_escaped(j, k, strlen(k)) || !put_c(j, ':'))
                return false;
        }
    }
    return true;
}

/* Starts a value; false when the writer has overflowed (the value is then skipped). */
static bool begin_value(lg_json_t *j, size_t *mark)
{
    *mark = j->len;
    return !j->overflow;
}

/* Ends a value: on failure rolls back to the mark and stops all later output. */
static void end_value(lg_json_t *j, size_t mark, bool ok)
{
    if (ok) {
        if (j->depth >= 0)
            j->need_comma[j->depth] = true;
    } else {
        j->len = mark;
        j->overflow = true;
    }
    if (j->cap > 0)
        j->buf[j->len] = '\0';
}

static void put_raw_value(lg_json_t *j, const char *key, const char *text, size_t n)
{
    size_t mark;
    if (!begin_value(j, &mark))
        return;
    bool ok = prefix(j, key) && put(j, text, n);
    end_value(j, mark, ok);
}

static void begin_container(lg_json_t *j, const char *key, char open, char close)
{
    size_t mark;
    if (!begin_value(j, &mark) || j->depth >= LG_JSON_MAX_DEPTH) {
        j->overflow = true;
        j->skipped++;
        return;
    }
    /* The opener and the closer's reserve must both fit. */
    bool ok = prefix(j, key) && j->len + 1 + reserve(j, 1) <= j->cap;
    if (!ok) {
        end_value(j, mark, false);
        j->skipped++;
        return;
    }
    j->buf[j->len++] = open;
    j->need_comma[j->depth] = true;
    j->depth++;
    j->need_comma[j->depth] = false;
    j->closer[j->depth] = close;
    j->buf[j->len] = '\0';
}

static void end_container(lg_json_t *j)
{
    if (j->skipped > 0) {
        j->skipped--;
        return;
    }
    if (j->depth <= 0)
        return;
    /* Always fits: reserve() kept this byte free. */
    j->buf[j->len++] = j->closer[j->depth];
    j->depth--;
    j->buf[j->len] = '\0';
}

void lg_json_begin_object(lg_json_t *j, const char *key) { begin_container(j, key, '{', '}'); }
void lg_json_end_object(lg_json_t *j) { end_container(j); }
void lg_json_begin_array(lg_json_t *j, const char *key) { begin_container(j, key, '[', ']'); }
void lg_json_end_array(lg_json_t *j) { end_container(j); }

void lg_json_string_n(lg_json_t *j, const char *key, const char *value, size_t n)
{
    size_t mark;
    if (!begin_value(j, &mark))
        return;
    bool ok = prefix(j, key) && put_escaped(j, value, n);
    end_value(j, mark, ok);
}

void lg_json_string(lg_json_t *j, const char *key, const char *value)
{
    if (!value)
        lg_json_null(j, key);
    else
        lg_json_string_n(j, key, value, strlen(value));
}

void lg_json_int(lg_json_t *j, const char *key, int64_t value)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRId64, value);
    put_raw_value(j, key, t, (size_t)n);
}

void lg_json_uint(lg_json_t *j, const char *key, uint64_t value)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRIu64, value);
    put_raw_value(j, key, t, (size_t)n);
}

size_t lg_json_format_float(char *out, size_t len, double x, bool single)
{
    if (x != x)
        return (size_t)snprintf(out, len, "nan");
    if (x > 1.7976931348623157e308 || x < -1.7976931348623157e308)
        return (size_t)snprintf(out, len, x > 0 ? "inf" : "-inf");
    /* the fewest digits that read back as the same value (of the float type for single) */
    int n = 0;
    for (int p = 1; p <= 17; p++) {
        n = snprintf(out, len, "%.*g", p, x);
        for (char *c = out; *c; c++)
            if (*c == ',')
                *c = '.'; /* a locale's decimal comma: JSON needs the point */
        double back = strtod(out, NULL);
        if (single ? (float)back == (float)x : back == x)
            break;
    }
    return n < 0 ? 0 : (size_t)n;
}

void lg_json_float(lg_json_t *j, const char *key, double value, bool single)
{
    char t[40];
    size_t n = lg_json_format_float(t, sizeof t, value, single);
    if (value != value || value > 1.7976931348623157e308 || value < -1.7976931348623157e308)
        lg_json_string_n(j, key, t, n); /* JSON has no NaN or infinity */
    else
        put_raw_value(j, key, t, n);
}

void lg_json_bool(lg_json_t *j, const char *key, bool value)
{
    put_raw_value(j, key, value ? "true" : "false", value ? 4 : 5);
}

void lg_json_null(lg_json_t *j, const char *key) { put_raw_value(j, key, "null", 4); }

size_t lg_json_finish(lg_json_t *j)
{
    j->skipped = 0;
    while (j->depth > 0)
        end_container(j);
    return j->len;
}
