/* fuzz_json.c: libFuzzer target for src/report/json.c, the JSONL writer. Built and run by
 * tests/fuzz/run.sh (short in `make test`, long in `make fuzz`); seeds in
 * tests/fuzz/corpus/fuzz_json/.
 * LG_FUZZ_SOURCES: src/report/json.c
 *
 * Input: byte 0 picks the buffer capacity (so overflow paths run), byte 1 the shape; the rest
 * is split at the first 0xFE into a key and a value, both arbitrary bytes (quotes, control
 * characters, NULs, invalid UTF-8). Properties checked on every input:
 *  - the finished text is valid JSON (strict parser of tests/unit/json_check.h) whenever
 *    anything was written, and no byte past the capacity is touched;
 *  - without overflow, the value decodes back to the input bytes exactly when they were valid
 *    UTF-8, and the key likewise.
 */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"
#include "../unit/json_check.h"

/* NULs are escaped as \u0000 and come back, so valid means: every NUL-free run is UTF-8. */
static bool valid_utf8_with_nuls(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '\0') {
            if (i > start && !g_utf8_validate_len(s + start, (gssize)(i - start), NULL))
                return false;
            start = i + 1;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t cap = (size_t)data[0] * 16 + 1; /* 1..4081 */
    uint8_t shape = data[1];
    const char *rest = (const char *)data + 2;
    size_t rest_n = size - 2;
    const char *sep = memchr(rest, 0xFE, rest_n);
    size_t key_n = sep ? (size_t)(sep - rest) : 0;
    const char *value = sep ? sep + 1 : rest;
    size_t value_n = sep ? rest_n - key_n - 1 : rest_n;
    char *key = malloc(key_n + 1);
    memcpy(key, rest, key_n);
    key[key_n] = '\0';

    char *buf = malloc(cap + 64);
    memset(buf + cap, 0xA5, 64);
    lg_json_t j;
    lg_json_init(&j, buf, cap);
    lg_json_begin_object(&j, NULL);
    lg_json_string_n(&j, key, value, value_n);
    int depth = shape & 7;
    for (int d = 0; d < depth; d++) {
        if (shape & 8)
            lg_json_begin_array(&j, key);
        else
            lg_json_begin_object(&j, key);
        lg_json_string_n(&j, "v", value, value_n);
        lg_json_int(&j, key, (int64_t)shape * -1234567);
    }
    lg_json_uint(&j, "u", UINT64_MAX);
    lg_json_string(&j, key, key);
    if (shape & 16)
        for (int d = 0; d < depth; d++)
            (shape & 8) ? lg_json_end_array(&j) : lg_json_end_object(&j);
    size_t len = lg_json_finish(&j);

    for (size_t i = cap; i < cap + 64; i++)
        if ((uint8_t)buf[i] != 0xA5)
            abort(); /* wrote past the capacity */
    if (len >= cap || buf[len] != '\0')
        abort();
    if (len > 0) {
        char err[160];
        jc_value_t *v = jc_parse(buf, len, err);
        if (!v)
            abort(); /* not JSON */
        if (!j.overflow) {
            jc_value_t *first = v->n > 0 ? v->items[0] : NULL;
            if (!first || first->type != JC_STRING)
                abort();
            if (valid_utf8_with_nuls(value, value_n) &&
                (first->str_len != value_n || memcmp(first->str, value, value_n) != 0))
                abort(); /* valid text did not round-trip */
            if (g_utf8_validate(key, -1, NULL) && strcmp(v->keys[0], key) != 0)
                abort();
        }
        jc_free(v);
    } else if (cap > 2) {
        abort(); /* the root object always fits in 3 bytes */
    }
    free(buf);
    free(key);
    return 0;
}
