/* test_config.c: LABELGUARD_* parsing (src/base/config.c) — defaults, every valid value, and every
 * kind of bad value (empty, overlong, non-UTF-8, wrong) giving one message that names the
 * variable, shows the value escaped, and lists the allowed values; lg_config_check (the
 * public labelguard_config_check) giving the same verdict and message for each of them, -2 for
 * a name that is not ours, and seeing nothing of the real environment. Run by `make test`. */
#include <stdlib.h>
#include <glib.h>
#include <string.h>

#include "hooks/hooks.h"

static const char *keys[16];
static const char *vals[16];
static int n_env;

static const char *table_getenv(const char *name)
{
    for (int i = 0; i < n_env; i++)
        if (strcmp(keys[i], name) == 0)
            return vals[i];
    return NULL;
}

static void set_env(const char *k, const char *v)
{
    keys[n_env] = k;
    vals[n_env] = v;
    n_env++;
}

static int parse(lg_config_t *c, char *err, size_t len)
{
    int rc = lg_config_parse(c, table_getenv, err, len);
    n_env = 0;
    return rc;
}

static void test_defaults(void)
{
    lg_config_t c;
    char err[512] = "";
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_cmpint(c.action, ==, LG_ACTION_RAISE);
    g_assert_cmpint(c.mode, ==, LG_MODE_SYNC);
    g_assert_cmpint(c.hooks, ==, LG_HOOKS_AUTO);
    g_assert_cmpstr(c.log_dir, ==, "labelguard-logs");
    g_assert_cmpstr(c.kernels, ==, "");
    g_assert_true(c.backtrace_native && c.backtrace_python);
    g_assert_cmpint(c.samples, ==, 16);
    g_assert_false(c.quiet);
    g_assert_true(c.compiled);
}

static void test_valid_values(void)
{
    static const char *const actions[] = {"raise", "hold", "mask", "log", "abort"};
    for (int i = 0; i < 5; i++) {
        lg_config_t c;
        char err[512];
        set_env("LABELGUARD_ACTION", actions[i]);
        g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
        g_assert_cmpint(c.action, ==, i);
        g_assert_cmpstr(lg_config_action_name(c.action), ==, actions[i]);
    }
    lg_config_t c;
    char err[512];
    set_env("LABELGUARD_MODE", "async");
    set_env("LABELGUARD_HOOKS", "interpose");
    set_env("LABELGUARD_LOG", "/tmp/some dir/logs");
    set_env("LABELGUARD_KERNELS", "a.conf:b.conf");
    set_env("LABELGUARD_BACKTRACE", "python");
    set_env("LABELGUARD_SAMPLES", "256");
    set_env("LABELGUARD_QUIET", "1");
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_cmpint(c.mode, ==, LG_MODE_ASYNC);
    g_assert_cmpint(c.hooks, ==, LG_HOOKS_INTERPOSE);
    g_assert_cmpstr(c.log_dir, ==, "/tmp/some dir/logs");
    g_assert_cmpstr(c.kernels, ==, "a.conf:b.conf");
    g_assert_false(c.backtrace_native);
    g_assert_true(c.backtrace_python);
    g_assert_cmpint(c.samples, ==, 256);
    g_assert_true(c.quiet);

    set_env("LABELGUARD_BACKTRACE", "none");
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_false(c.backtrace_native || c.backtrace_python);

    set_env("LABELGUARD_COMPILED", "off");
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_false(c.compiled);
    set_env("LABELGUARD_COMPILED", "on");
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_true(c.compiled);
    g_assert_false(c.launch_sites_all);
    set_env("LABELGUARD_LAUNCH_SITES", "all");
    g_assert_cmpint(parse(&c, err, sizeof err), ==, 0);
    g_assert_true(c.launch_sites_all);
}

static void expect_bad(const char *var, const char *value, const char *shown, const char *allowed)
{
    lg_config_t c = lg_cfg_defaults();
    c.samples = 99;
    char err[1024] = "";
    set_env(var, value);
    g_assert_cmpint(parse(&c, err, sizeof err), ==, -1);
    g_assert_nonnull(strstr(err, var));
    g_assert_nonnull(strstr(err, shown));
    g_assert_nonnull(strstr(err, allowed));
    g_assert_cmpint(c.samples, ==, 99); /* untouched on error */
    g_assert_null(strchr(err, '\n'));
    /* The one-variable check: the same verdict and the same message, word for word. */
    char msg[1024] = "";
    g_assert_cmpint(lg_config_check(var, value, msg, sizeof msg), ==, -1);
    g_assert_cmpstr(msg, ==, err);
    char tiny[8];
    g_assert_cmpint(lg_config_check(var, value, tiny, sizeof tiny), ==, -1);
    g_assert_cmpuint(strlen(tiny), ==, sizeof tiny - 1);
}

static void test_check(void)
{
    char msg[256] = "stale";
    const char *good[][2] = {
        {"LABELGUARD_ACTION", "raise"},      {"LABELGUARD_ACTION", "abort"},  {"LABELGUARD_MODE", "async"},
        {"LABELGUARD_HOOKS", "cupti"},       {"LABELGUARD_LOG", "/tmp/x"},    {"LABELGUARD_KERNELS", "a.conf:b.conf"},
        {"LABELGUARD_BACKTRACE", "python"},  {"LABELGUARD_SAMPLES", "256"},   {"LABELGUARD_QUIET", "1"},
        {"LABELGUARD_DEBUG_KERNELS", "0"},   {"LABELGUARD_LOGPROB_CHECK", "0"},
        {"LABELGUARD_COMPILED", "on"},       {"LABELGUARD_COMPILED", "off"},
        {"LABELGUARD_LAUNCH_SITES", "checked"}, {"LABELGUARD_LAUNCH_SITES", "all"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
        g_assert_cmpint(lg_config_check(good[i][0], good[i][1], msg, sizeof msg), ==, 0);
        g_assert_cmpstr(msg, ==, "");
    }
    /* Unset is the default, which is good. */
    g_assert_cmpint(lg_config_check("LABELGUARD_ACTION", NULL, msg, sizeof msg), ==, 0);
    /* Not a variable the library reads: -2, whatever the value. */
    g_assert_cmpint(lg_config_check("LABELGUARD_ACTIONS", "raise", msg, sizeof msg), ==, -2);
    g_assert_cmpint(lg_config_check("PATH", "/bin", msg, sizeof msg), ==, -2);
    g_assert_cmpint(lg_config_check("", "x", msg, sizeof msg), ==, -2);
    g_assert_cmpint(lg_config_check(NULL, "x", msg, sizeof msg), ==, -2);
    /* The real environment plays no part: a bad LABELGUARD_MODE there does not make a good
     * action bad, nor does a good one there make a bad value good. */
    setenv("LABELGUARD_MODE", "bogus", 1);
    g_assert_cmpint(lg_config_check("LABELGUARD_ACTION", "log", msg, sizeof msg), ==, 0);
    setenv("LABELGUARD_ACTION", "log", 1);
    g_assert_cmpint(lg_config_check("LABELGUARD_ACTION", "", msg, sizeof msg), ==, -1);
    g_assert_nonnull(strstr(msg, "LABELGUARD_ACTION=\"\" is not valid; allowed: raise, hold, mask, log, abort"));
    unsetenv("LABELGUARD_MODE");
    unsetenv("LABELGUARD_ACTION");
    /* NULL or empty msg buffers are fine. */
    g_assert_cmpint(lg_config_check("LABELGUARD_SAMPLES", "0", NULL, 0), ==, -1);
}

static void test_bad_values(void)
{
    expect_bad("LABELGUARD_ACTION", "", "\"\"", "raise, hold, mask, log, abort");
    expect_bad("LABELGUARD_ACTION", "Raise", "\"Raise\"", "raise, hold");
    expect_bad("LABELGUARD_ACTION", "raise ", "\"raise \"", "raise, hold");
    expect_bad("LABELGUARD_ACTION", "r\xc3\x28\xff", "r\\xc3(\\xff", "abort");
    expect_bad("LABELGUARD_MODE", "", "\"\"", "sync, async");
    expect_bad("LABELGUARD_MODE", "fast", "fast", "sync, async");
    expect_bad("LABELGUARD_HOOKS", "both", "both", "auto, interpose, cupti");
    expect_bad("LABELGUARD_LOG", "", "\"\"", "directory path");
    expect_bad("LABELGUARD_LOG", "a\nb", "a\\x0ab", "directory path");
    expect_bad("LABELGUARD_KERNELS", "", "\"\"", "spec files");
    expect_bad("LABELGUARD_BACKTRACE", "gdb", "gdb", "native,python, native, python, none");
    expect_bad("LABELGUARD_SAMPLES", "0", "\"0\"", "1 to 256");
    expect_bad("LABELGUARD_SAMPLES", "257", "257", "1 to 256");
    expect_bad("LABELGUARD_SAMPLES", "-3", "-3", "1 to 256");
    expect_bad("LABELGUARD_SAMPLES", "12abc", "12abc", "1 to 256");
    expect_bad("LABELGUARD_SAMPLES", "99999999999999999999999", "9999999999", "1 to 256");
    expect_bad("LABELGUARD_SAMPLES", "", "\"\"", "1 to 256");
    expect_bad("LABELGUARD_QUIET", "yes", "yes", "0, 1");
    expect_bad("LABELGUARD_DEBUG_KERNELS", "2", "\"2\"", "0, 1");
    expect_bad("LABELGUARD_COMPILED", "", "\"\"", "on, off");
    expect_bad("LABELGUARD_COMPILED", "1", "\"1\"", "on, off");
    expect_bad("LABELGUARD_COMPILED", "ON", "\"ON\"", "on, off");
    expect_bad("LABELGUARD_LAUNCH_SITES", "", "\"\"", "checked, all");
    expect_bad("LABELGUARD_LAUNCH_SITES", "1", "\"1\"", "checked, all");

    /* Overlong: the message stays one bounded line, the value shown truncated. */
    char *huge = g_malloc(10000);
    memset(huge, 'x', 9999);
    huge[9999] = '\0';
    expect_bad("LABELGUARD_LOG", huge, "xxxx...", "shorter than 4096");
    expect_bad("LABELGUARD_ACTION", huge, "xxxx...", "raise");
    g_free(huge);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/config/defaults", test_defaults);
    g_test_add_func("/config/valid", test_valid_values);
    g_test_add_func("/config/bad", test_bad_values);
    g_test_add_func("/config/check", test_check);
    return g_test_run();
}
