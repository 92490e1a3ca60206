/* test_runtime.c: src/base/runtime.c's finder of the process's libcudart objects. PyTorch 1.13.1's
 * wheel bundles its runtime under a hashed name (torch/lib/libcudart-e409450e.so.11.0), other
 * builds load libcudart.so.N; both must be found with their major version, and libcudadevrt or
 * a name that merely starts alike must not. The test double (LG_FAKE_DIR, exported by
 * tests/run.sh) is copied under each name and dlopen'ed, so the loader really holds it.
 * Run: make build/tests/unit/test_runtime && LG_TESTS=unit/test_runtime bash tests/run.sh
 */
#include <dlfcn.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

static char *fake_runtime(void)
{
    const char *dir = getenv("LG_FAKE_DIR");
    char *p = g_build_filename(dir && *dir ? dir : "build/fakecuda", "libcudart.so.13", NULL);
    if (!g_file_test(p, G_FILE_TEST_EXISTS))
        g_error("%s: missing (make test-programs)", p);
    return p;
}

/* dlopens a copy of the double named `name` in a fresh directory; returns the handle. */
static void *load_as(const char *name, char **dir_out)
{
    char *src = fake_runtime(), *text = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(src, &text, &len, NULL));
    char *dir = g_dir_make_tmp("lg-runtime-XXXXXX", NULL);
    char *dst = g_build_filename(dir, name, NULL);
    g_assert_true(g_file_set_contents(dst, text, (gssize)len, NULL));
    void *h = dlopen(dst, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        g_error("dlopen %s: %s", dst, dlerror());
    g_free(text);
    g_free(src);
    g_free(dst);
    *dir_out = dir;
    return h;
}

static const lg_cudart_t *find(const lg_cudart_t *c, int n, const char *base)
{
    for (int i = 0; i < n; i++) {
        const char *b = strrchr(c[i].path, '/');
        if (b && strcmp(b + 1, base) == 0)
            return &c[i];
    }
    return NULL;
}

static void test_hashed_and_plain_names(void)
{
    char *d1, *d2, *d3;
    void *h1 = load_as("libcudart-e409450e.so.11.0", &d1);
    void *h2 = load_as("libcudart.so.12", &d2);
    void *h3 = load_as("libcudartfake.so.9", &d3); /* starts alike, is not a runtime */
    lg_cudart_t c[8];
    int n = lg_runtime_cudarts(c, 8);
    const lg_cudart_t *hashed = find(c, n, "libcudart-e409450e.so.11.0");
    const lg_cudart_t *plain = find(c, n, "libcudart.so.12");
    g_assert_nonnull(hashed);
    g_assert_cmpint(hashed->major, ==, 11);
    g_assert_cmpstr(hashed->dir, ==, d1);
    g_assert_nonnull(plain);
    g_assert_cmpint(plain->major, ==, 12);
    g_assert_null(find(c, n, "libcudartfake.so.9"));
    dlclose(h1);
    dlclose(h2);
    dlclose(h3);
    g_free(d1);
    g_free(d2);
    g_free(d3);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/runtime/hashed-and-plain-names", test_hashed_and_plain_names);
    return g_test_run();
}
