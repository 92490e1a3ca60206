/* test_site.c: unit tests of src/base/site.c, a late verdict's launch site: the caller's return
 * address comes back as the frame after an empty first slot (looked up as a return address),
 * references keep a site shared by a captured check's replays alive until the last one drops
 * it, and nothing is recorded when neither backtrace is wanted; a site made with a model line
 * keeps its own copy of it, even with no backtrace wanted. Python frames are covered in a
 * real interpreter by tests/e2e/test_pystack.sh ("recorded, resolved later").
 * Run: build/tests/unit/test_site (or LG_TESTS=test_site bash tests/run.sh).
 */
#include "base/base.h"

#include <glib.h>

static void test_caller(void)
{
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = true;
    lg_site_t *s = lg_site_new((const void *)0x401234);
    g_assert_nonnull(s);
    lg_native_stack_t native;
    lg_py_stack_t py;
    lg_site_resolve(s, &native, &py);
    g_assert_cmpint(native.n, ==, 2);
    g_assert_null(native.ips[0]);
    g_assert_true(native.ips[1] == (void *)0x401234);
    g_assert_cmpint(py.n, ==, 0); /* no interpreter in this process */
    lg_site_drop(s);
}

static void test_shared(void)
{
    lg_config_values.backtrace_native = true;
    lg_site_t *s = lg_site_new(NULL);
    g_assert_true(lg_site_hold(s) == s); /* a captured check's */
    g_assert_true(lg_site_hold(s) == s); /* one replay's pending check */
    lg_site_drop(s);                     /* the launch's own */
    lg_site_drop(s);                     /* the replay collected */
    lg_native_stack_t native;
    lg_py_stack_t py;
    lg_site_resolve(s, &native, &py); /* still held by the check: valid (ASan would say) */
    g_assert_cmpint(native.n, ==, 0); /* no caller known */
    lg_site_drop(s);
    lg_site_drop(NULL);
    g_assert_null(lg_site_hold(NULL));
}

static void test_off(void)
{
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = false;
    g_assert_null(lg_site_new((const void *)0x401234));
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = true;
}

static void test_line(void)
{
    char line[] = "model.py:7 in forward: h = self.tok_embeddings(tokens)";
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = false;
    lg_site_t *s = lg_site_new_line((const void *)0x401234, line);
    g_assert_nonnull(s); /* the line alone is worth a site */
    line[0] = 'X';       /* the caller's string goes away before a late verdict */
    g_assert_cmpstr(lg_site_line(s), ==, "model.py:7 in forward: h = self.tok_embeddings(tokens)");
    lg_native_stack_t native;
    lg_py_stack_t py;
    lg_site_resolve(s, &native, &py);
    g_assert_cmpint(native.n, ==, 0); /* no backtrace was wanted */
    lg_site_drop(s);
    g_assert_null(lg_site_new_line(NULL, "")); /* no line, no backtrace: as lg_site_new */
    g_assert_null(lg_site_line(NULL));
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = true;
    s = lg_site_new_line(NULL, NULL);
    g_assert_nonnull(s);
    g_assert_null(lg_site_line(s));
    lg_site_drop(s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/site/caller", test_caller);
    g_test_add_func("/site/shared", test_shared);
    g_test_add_func("/site/off", test_off);
    g_test_add_func("/site/line", test_line);
    return g_test_run();
}
