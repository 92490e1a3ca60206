/* test_json.c: unit tests of src/report/json.c, the fixed-buffer JSON writer behind the JSONL log.
 * Every output is parsed by the strict parser of json_check.h, never string-matched alone.
 * Run: make build/tests/unit/test_json && build/tests/unit/test_json
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "hooks/hooks.h"
#include "json_check.h"

static jc_value_t *parse_ok(const char *text, size_t len)
{
    char err[160];
    jc_value_t *v = jc_parse(text, len, err);
    if (!v)
        g_test_message("not JSON (%s): %.*s", err, (int)len, text);
    g_assert_nonnull(v);
    return v;
}

static void test_structure(void)
{
    char buf[512];
    lg_json_t j;
    lg_json_init(&j, buf, sizeof(buf));
    lg_json_begin_object(&j, NULL);
    lg_json_int(&j, "v", 1);
    lg_json_string(&j, "event", "violation");
    lg_json_int(&j, "min", INT64_MIN);
    lg_json_uint(&j, "max", UINT64_MAX);
    lg_json_bool(&j, "t", true);
    lg_json_bool(&j, "f", false);
    lg_json_null(&j, "n");
    lg_json_string(&j, "s_null", NULL);
    lg_json_begin_array(&j, "arr");
    lg_json_int(&j, NULL, -5);
    lg_json_begin_object(&j, NULL);
    lg_json_int(&j, "index", 17);
    lg_json_end_object(&j);
    lg_json_begin_array(&j, NULL);
    lg_json_end_array(&j);
    lg_json_end_array(&j);
    lg_json_begin_object(&j, "empty");
    lg_json_end_object(&j);
    lg_json_end_object(&j);
    g_assert_false(j.overflow);
    g_assert_cmpuint(j.len, ==, strlen(buf));

    jc_value_t *v = parse_ok(buf, j.len);
    g_assert_cmpint(v->type, ==, JC_OBJECT);
    g_assert_cmpint(v->n, ==, 10);
    g_assert_cmpint(jc_get(v, "v")->i, ==, 1);
    g_assert_cmpstr(jc_get(v, "event")->str, ==, "violation");
    g_assert_true(strstr(buf, "\"min\":-9223372036854775808") != NULL);
    g_assert_true(strstr(buf, "\"max\":18446744073709551615") != NULL);
    g_assert_true(jc_get(v, "t")->b);
    g_assert_false(jc_get(v, "f")->b);
    g_assert_cmpint(jc_get(v, "n")->type, ==, JC_NULL);
    g_assert_cmpint(jc_get(v, "s_null")->type, ==, JC_NULL);
    jc_value_t *arr = jc_get(v, "arr");
    g_assert_cmpint(arr->type, ==, JC_ARRAY);
    g_assert_cmpint(arr->n, ==, 3);
    g_assert_cmpint(arr->items[0]->i, ==, -5);
    g_assert_cmpint(jc_get(arr->items[1], "index")->i, ==, 17);
    g_assert_cmpint(arr->items[2]->n, ==, 0);
    g_assert_cmpint(jc_get(v, "empty")->type, ==, JC_OBJECT);
    jc_free(v);
}

/* Writes {"k": value} and returns the decoded string (caller frees). */
static char *roundtrip(const char *key, const char *value, size_t n, size_t *out_len, char **out_key)
{
    char buf[4096];
    lg_json_t j;
    lg_json_init(&j, buf, sizeof(buf));
    lg_json_begin_object(&j, NULL);
    lg_json_string_n(&j, key, value, n);
    lg_json_finish(&j);
    g_assert_false(j.overflow);
    jc_value_t *v = parse_ok(buf, j.len);
    g_assert_cmpint(v->n, ==, 1);
    char *s = g_memdup2(v->items[0]->str, v->items[0]->str_len + 1);
    *out_len = v->items[0]->str_len;
    if (out_key)
        *out_key = g_strdup(v->keys[0]);
    jc_free(v);
    return s;
}

static void test_escapes(void)
{
    static const char in[] = "quote\" back\\ nl\n tab\t cr\r bell\a esc\x1b del\x7f nul\0end / é €  😀";
    size_t n = sizeof(in) - 1, got_len;
    char *key;
    char *got = roundtrip("k\"e\\y\n", in, n, &got_len, &key);
    /* Valid UTF-8 and every ASCII byte come back exactly, NUL included. */
    g_assert_cmpuint(got_len, ==, n);
    g_assert_true(memcmp(got, in, n) == 0);
    g_assert_cmpstr(key, ==, "k\"e\\y\n");
    g_free(got);
    g_free(key);
}

static void test_invalid_utf8(void)
{
    struct { const char *in; size_t n; const char *want; } cases[] = {
        { "a\x80z", 3, "a\xef\xbf\xbdz" },              /* stray continuation byte */
        { "\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong NUL */
        { "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* UTF-16 surrogate */
        { "\xf5\x80\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
        { "x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd" },  /* truncated 3-byte sequence */
        { "\xff\xfe", 2, "\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xe2\x82\xac", 3, "\xe2\x82\xac" },          /* valid euro sign stays */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        size_t got_len;
        char *got = roundtrip("k", cases[i].in, cases[i].n, &got_len, NULL);
        g_assert_cmpuint(got_len, ==, strlen(cases[i].want));
        g_assert_true(memcmp(got, cases[i].want, got_len) == 0);
        g_free(got);
    }
    /* Invalid UTF-8 in a key too. */
    size_t got_len;
    char *key;
    char *got = roundtrip("bad\xc3", "v", 1, &got_len, &key);
    g_assert_cmpstr(key, ==, "bad\xef\xbf\xbd");
    g_free(got);
    g_free(key);
}

static void test_random_bytes(void)
{
    GRand *r = g_rand_new_with_seed(1234);
    char in[300];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = (size_t)g_rand_int_range(r, 0, (gint32)sizeof(in));
        for (size_t i = 0; i < n; i++) {
            /* Bias towards the interesting bytes. */
            static const unsigned char hot[] = { '"', '\\', 0, 1, 0x1f, 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff };
            in[i] = g_rand_boolean(r) ? (char)hot[g_rand_int_range(r, 0, sizeof(hot))] : (char)g_rand_int_range(r, 0, 256);
        }
        size_t got_len;
        char *got = roundtrip("k", in, n, &got_len, NULL);
        g_free(got);
    }
    g_rand_free(r);
}

/* Every capacity from 0 up to the full size: the text is always valid JSON once finished, the
 * overflow flag is set exactly when something was dropped, and nothing is written past cap. */
static void test_overflow(void)
{
    char full[1024];
    lg_json_t j;
    int full_len = 0;
    for (size_t cap = 0; cap <= 300; cap++) {
        char buf[400];
        memset(buf, 'X', sizeof(buf));
        lg_json_init(&j, buf, cap);
        lg_json_begin_object(&j, NULL);
        lg_json_string(&j, "kernel", "nll_loss_forward_reduce_cuda_kernel_2d \"q\"");
        lg_json_begin_object(&j, "bad");
        lg_json_int(&j, "count", 3);
        lg_json_begin_array(&j, "samples");
        for (int i = 0; i < 5; i++) {
            lg_json_begin_object(&j, NULL);
            lg_json_int(&j, "index", i * 17);
            lg_json_int(&j, "value", 10);
            lg_json_end_object(&j);
        }
        lg_json_end_array(&j);
        lg_json_end_object(&j);
        lg_json_string(&j, "tail", "end");
        lg_json_end_object(&j);
        size_t len = lg_json_finish(&j);
        for (size_t i = cap; i < sizeof(buf); i++)
            g_assert_cmpint(buf[i], ==, 'X');
        if (cap > 0) {
            g_assert_cmpuint(len, <, cap);
            g_assert_cmpint(buf[len], ==, '\0');
        }
        if (len > 0) {
            jc_value_t *v = parse_ok(buf, len);
            jc_free(v);
        }
        if (!j.overflow && full_len == 0) {
            full_len = (int)len;
            memcpy(full, buf, len + 1);
        }
        if (full_len == 0)
            g_assert_true(j.overflow);
        else
            g_assert_cmpstr(buf, ==, full);
    }
    g_assert_cmpint(full_len, >, 0);
    jc_value_t *v = parse_ok(full, (size_t)full_len);
    g_assert_cmpint(jc_path(v, "bad.samples")->n, ==, 5);
    g_assert_cmpstr(jc_get(v, "tail")->str, ==, "end");
    jc_free(v);
}

static void test_depth_limit(void)
{
    char buf[512];
    lg_json_t j;
    lg_json_init(&j, buf, sizeof(buf));
    for (int i = 0; i < 40; i++)
        lg_json_begin_array(&j, NULL);
    lg_json_int(&j, NULL, 1);
    for (int i = 0; i < 40; i++)
        lg_json_end_array(&j);
    g_assert_true(j.overflow);
    g_assert_cmpint(j.depth, ==, 0);
    jc_value_t *v = parse_ok(buf, j.len);
    jc_free(v);
}

/* The parser in json_check.h must itself reject broken text, or the tests above prove nothing. */
static void test_checker_rejects(void)
{
    const char *bad[] = { "{\"a\":1,}", "{\"a\" 1}", "[1 2]", "\"ctl\x01\"", "\"\\x\"", "01", "\"\xc0\x80\"",
                          "\"\\ud800\"", "{\"a\":1}x", "", "[", "{\"a\":tru}", "1.", "-" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        char err[160];
        jc_value_t *v = jc_parse(bad[i], strlen(bad[i]), err);
        if (v)
            g_test_message("accepted: %s", bad[i]);
        g_assert_null(v);
    }
}

/* Float values (BCE samples): the fewest digits that read back (as a float when single), and
 * NaN / infinities as strings, since JSON has none; the output still parses. */
static void test_floats(void)
{
    char buf[512];
    lg_json_t j;
    lg_json_init(&j, buf, sizeof(buf));
    lg_json_begin_array(&j, NULL);
    lg_json_float(&j, NULL, 1.5, true);
    lg_json_float(&j, NULL, (double)-0.1f, true);
    lg_json_float(&j, NULL, -0.1, false);
    lg_json_float(&j, NULL, __builtin_nan(""), true);
    lg_json_float(&j, NULL, __builtin_inf(), false);
    lg_json_float(&j, NULL, -__builtin_inf(), true);
    lg_json_float(&j, NULL, 0.0, true);
    lg_json_float(&j, NULL, 1e-300, false);
    lg_json_end_array(&j);
    g_assert_false(j.overflow);
    g_assert_cmpstr(buf, ==, "[1.5,-0.1,-0.1,\"nan\",\"inf\",\"-inf\",0,1e-300]");
    jc_value_t *v = parse_ok(buf, j.len);
    g_assert_cmpint(v->type, ==, JC_ARRAY);
    jc_free(v);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/json/structure", test_structure);
    g_test_add_func("/json/floats", test_floats);
    g_test_add_func("/json/escapes", test_escapes);
    g_test_add_func("/json/invalid_utf8", test_invalid_utf8);
    g_test_add_func("/json/random_bytes", test_random_bytes);
    g_test_add_func("/json/overflow", test_overflow);
    g_test_add_func("/json/depth_limit", test_depth_limit);
    g_test_add_func("/json/checker_rejects", test_checker_rejects);
    return g_test_run();
}
