/* test_arm_runtimes.c: which runtime's copy of a hook arm_got.c gives a slot, on fixture
 * libraries (arm_fixture.c). Two copies of libarmdep.so are loaded under the names
 * libcudart.so.12 and libcudart.so.13 (two runtimes, as far as the walk can tell), and the
 * hook set holds one copy of armdep_value per runtime (majors 13 and 12). libarmfix_now.so's
 * slot points into libarmdep.so itself, a library of neither runtime, with no symbol version:
 *   two runtimes loaded -> the slot cannot be told: left alone (its call unchanged, no real
 *                          function stored, nothing armed), and lg_arm_got_say_failed says so;
 *   one runtime (the libcudart.so.13 copy closed) -> the default copy (the first, 13) is
 *                          bound, as an unversioned reference is under LD_PRELOAD.
 * The slot bound by where its function lives, or by the version it asks for, is tested end to
 * end by tests/e2e/test_arm_mixed.sh. Run: build/tests/unit/test_arm_runtimes. */
#include <dlfcn.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"

static int (*real13)(int), (*real12)(int);
static int repl13(int x) { return real13(x) * 100; }
static int repl12(int x) { return real12(x) * 1000; }
static const lg_hook_t hooks[] = {{"armdep_value", (void *)repl13, (void **)&real13},
                                  {"armdep_value", (void *)repl12, (void **)&real12}};
static const int majors[] = {13, 12};

static char fixture_dir[PATH_MAX], tmp_dir[PATH_MAX];

static void *open_copy(const char *name)
{
    char from[PATH_MAX + 32], to[PATH_MAX + 32];
    snprintf(from, sizeof from, "%s/libarmdep.so", fixture_dir);
    snprintf(to, sizeof to, "%s/%s", tmp_dir, name);
    gchar *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(from, &data, &len, NULL));
    g_assert_true(g_file_set_contents(to, data, (gssize)len, NULL));
    g_free(data);
    void *h = dlopen(to, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        g_error("dlopen %s: %s", to, dlerror());
    return h;
}

static void test_runtimes(void)
{
    void *rt12 = open_copy("libcudart.so.12");
    void *rt13 = open_copy("libcudart.so.13");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/libarmfix_now.so", fixture_dir);
    void *fix = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    g_assert_nonnull(fix);
    int (*call)(int) = (int (*)(int))dlsym(fix, "armfix_call");
    g_assert_cmpint(call(3), ==, 4);

    int objects = -1;
    g_assert_cmpint(lg_arm_got_walk_all(hooks, majors, 2, 2, &objects), ==, 0);
    g_assert_cmpint(objects, ==, 0);
    g_assert_cmpint(call(3), ==, 4); /* left alone */
    g_assert_null(real13);
    g_assert_null(real12);
    lg_arm_got_say_failed(); /* the arm_runtime_unknown warning; a second call says nothing new */
    lg_arm_got_say_failed();

    dlclose(rt13);
    g_assert_cmpint(lg_arm_got_walk_all(hooks, majors, 2, 2, &objects), ==, 1);
    g_assert_cmpint(objects, ==, 1);
    g_assert_cmpint(call(3), ==, 400); /* the default copy, bound to the function it replaced */
    g_assert_nonnull(real13);
    g_assert_null(real12);
    (void)rt12;
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", fixture_dir, sizeof fixture_dir - 1);
    g_assert_cmpint(n, >, 0);
    fixture_dir[n] = 0;
    *strrchr(fixture_dir, '/') = 0;
    gchar *tmp = g_dir_make_tmp("lg-arm-rt.XXXXXX", NULL);
    g_assert_nonnull(tmp);
    snprintf(tmp_dir, sizeof tmp_dir, "%s", tmp);
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/arm_runtimes/untold_then_default", test_runtimes);
    int rc = g_test_run();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    g_free(tmp);
    return rc;
}
