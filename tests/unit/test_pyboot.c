/* test_pyboot.c: pyboot.c's rule for the PYTHONPATH a preloaded Python interpreter gets: the
 * bootstrap directory next to the library (the wheel's labelguard/_native/ layout, a checkout's
 * build/), first and once; nothing where `labelguard run` or a parent already put one; nothing
 * where no directory exists or a ':' would split it; `make install`'s layout. Python's options
 * that keep the bootstrap from running, read from a command line as CPython reads it. And that a
 * process without CPython (this test) is not taken for an interpreter.
 * Run: build/tests/unit/test_pyboot (or LG_TESTS=test_pyboot bash tests/run.sh).
 */
#include "hooks/hooks.h"

#include <glib.h>
#include <string.h>

/* ctx: a NULL-terminated list of directories that exist. */
static bool exists_in(const char *dir, void *ctx)
{
    for (const char **d = ctx; *d; d++)
        if (strcmp(*d, dir) == 0)
            return true;
    return false;
}

static void test_layouts(void)
{
    char out[512];
    const char *wheel[] = {"/venv/lib/python3.11/site-packages/labelguard/_bootstrap", NULL};
    g_assert_cmpint(lg_pyboot_pythonpath("/venv/lib/python3.11/site-packages/labelguard/_native/liblabelguard.so", NULL,
                                         exists_in, wheel, out, sizeof out),
                    ==, 1);
    g_assert_cmpstr(out, ==, "/venv/lib/python3.11/site-packages/labelguard/_bootstrap");
    const char *checkout[] = {"/src/lg/python/labelguard/_bootstrap", NULL};
    g_assert_cmpint(
        lg_pyboot_pythonpath("/src/lg/build/liblabelguard.so", "/opt/x:/opt/y", exists_in, checkout, out, sizeof out),
        ==, 1);
    g_assert_cmpstr(out, ==, "/src/lg/python/labelguard/_bootstrap:/opt/x:/opt/y");
    /* an empty PYTHONPATH gets no empty entry (that would put the working directory on sys.path) */
    g_assert_cmpint(lg_pyboot_pythonpath("/src/lg/build/liblabelguard.so", "", exists_in, checkout, out, sizeof out),
                    ==, 1);
    g_assert_cmpstr(out, ==, "/src/lg/python/labelguard/_bootstrap");
}

static void test_once(void)
{
    char out[512] = "untouched";
    const char *checkout[] = {"/src/lg/python/labelguard/_bootstrap", NULL};
    /* `labelguard run` (or the parent interpreter's constructor) already put it there */
    g_assert_cmpint(lg_pyboot_pythonpath("/src/lg/build/liblabelguard.so", "/a:/src/lg/python/labelguard/_bootstrap:/b",
                                         exists_in, checkout, out, sizeof out),
                    ==, 0);
    g_assert_cmpint(lg_pyboot_pythonpath("/src/lg/build/liblabelguard.so", "/wheel/site-packages/labelguard/_bootstrap",
                                         exists_in, checkout, out, sizeof out),
                    ==, 0);
    g_assert_cmpstr(out, ==, "untouched");
}

static void test_install_layout(void)
{
    char out[512];
    const char *installed[] = {"/usr/local/share/labelguard/python/labelguard/_bootstrap", NULL};
    g_assert_cmpint(lg_pyboot_pythonpath("/usr/local/lib/liblabelguard.so", NULL, exists_in, installed, out, sizeof out),
                    ==, 1);
    g_assert_cmpstr(out, ==, "/usr/local/share/labelguard/python/labelguard/_bootstrap");
}

static int flags_of(const char *line)
{
    char buf[256], *argv[16];
    int argc = 0;
    g_strlcpy(buf, line, sizeof buf);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w && argc < 15; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    return lg_pyboot_argv_flags(argc, argv);
}

static void test_argv_flags(void)
{
    enum { E = LG_PYBOOT_IGNORE_ENV, S = LG_PYBOOT_NO_SITE_CUSTOM };
    g_assert_cmpint(flags_of("python3 train.py -E -S"), ==, 0); /* the script's own options */
    g_assert_cmpint(flags_of("python3 -u train.py"), ==, 0);
    g_assert_cmpint(flags_of("python3 -E train.py"), ==, E);
    g_assert_cmpint(flags_of("python3 -S train.py"), ==, S);
    g_assert_cmpint(flags_of("python3 -I train.py"), ==, E | S);
    g_assert_cmpint(flags_of("python3 -uIB train.py"), ==, E | S); /* combined letters */
    g_assert_cmpint(flags_of("python3 -c import -S"), ==, 0);     /* -c ends the options */
    g_assert_cmpint(flags_of("python3 -Sc pass"), ==, S);
    g_assert_cmpint(flags_of("python3 -m torch.distributed.run -S"), ==, 0);
    g_assert_cmpint(flags_of("python3 -W error -E x.py"), ==, E); /* -W's value is the next word */
    g_assert_cmpint(flags_of("python3 -WE x.py"), ==, 0);         /* ... or the rest of this one */
    g_assert_cmpint(flags_of("python3 -X dev -S x.py"), ==, S);
    g_assert_cmpint(flags_of("python3 --check-hash-based-pycs never -E x.py"), ==, E);
    g_assert_cmpint(flags_of("python3 -- -E"), ==, 0);
    g_assert_cmpint(flags_of("python3 - -E"), ==, 0); /* stdin's script */
    g_assert_cmpint(flags_of("python3"), ==, 0);
}

static void test_nothing_to_add(void)
{
    char out[512];
    const char *none[] = {NULL};
    /* a library copied elsewhere, without the package beside it */
    g_assert_cmpint(lg_pyboot_pythonpath("/usr/lib/liblabelguard.so", NULL, exists_in, none, out, sizeof out), ==, -1);
    g_assert_cmpint(lg_pyboot_pythonpath("liblabelguard.so", NULL, exists_in, none, out, sizeof out), ==, -1);
    g_assert_cmpint(lg_pyboot_pythonpath(NULL, NULL, exists_in, none, out, sizeof out), ==, -1);
    /* a ':' in the directory cannot be a PYTHONPATH entry */
    const char *colon[] = {"/a:b/python/labelguard/_bootstrap", NULL};
    g_assert_cmpint(lg_pyboot_pythonpath("/a:b/build/liblabelguard.so", NULL, exists_in, colon, out, sizeof out), ==,
                    -1);
    /* too small an output */
    const char *checkout[] = {"/src/lg/python/labelguard/_bootstrap", NULL};
    g_assert_cmpint(lg_pyboot_pythonpath("/src/lg/build/liblabelguard.so", NULL, exists_in, checkout, out, 8), ==, -1);
}

/* This test program has no CPython: the constructor's probe leaves it alone, and the start
 * event would claim no check op. */
static void test_not_python(void)
{
    char *argv[] = {"python3", "-S", NULL};
    lg_pyboot_constructor(2, argv);
    g_assert_cmpint(lg_pyboot_state(), ==, LG_PYBOOT_NOT_PYTHON);
    g_assert_false(lg_pyboot_expected());
    g_assert_true(strncmp(lg_api_check_way(), "none: not a Python interpreter", 30) == 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pyboot/layouts", test_layouts);
    g_test_add_func("/pyboot/once", test_once);
    g_test_add_func("/pyboot/install_layout", test_install_layout);
    g_test_add_func("/pyboot/argv_flags", test_argv_flags);
    g_test_add_func("/pyboot/nothing_to_add", test_nothing_to_add);
    g_test_add_func("/pyboot/not_python", test_not_python);
    return g_test_run();
}
