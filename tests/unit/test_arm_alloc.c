/* test_arm_alloc.c: the arming path allocates nothing, opens no stream and calls no dlopen, so
 * that `labelguard attach` may call it on a thread stopped anywhere (arm_got.c, arm_objects.c,
 * arm.c's labelguard_arm). This program defines malloc, calloc, realloc, free, fopen and
 * dlopen itself (the process's definitions, in front of libc's), counting the calls the test's
 * own thread makes while `counting` is set, and passing every call on to libc. Then:
 *   lg_arm_got_patch on the fixture libraries (test_arm.c's: a -z now one whose GOT needs
 *   mprotect, a lazy one whose slot is resolved by looking the symbol up), and labelguard_arm()
 *   itself, are called with counting on: no call of any of them.
 * Run: build/tests/unit/test_arm_alloc (or LG_TESTS=test_arm_alloc make test). */
#include <dlfcn.h>
#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "labelguard.h"

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static __thread int counting;
static int calls;
static FILE *(*real_fopen)(const char *, const char *);
static void *(*real_dlopen)(const char *, int);

void *malloc(size_t n)
{
    calls += counting;
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size)
{
    calls += counting;
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n)
{
    calls += counting;
    return __libc_realloc(p, n);
}
void free(void *p)
{
    calls += counting && p;
    __libc_free(p);
}
FILE *fopen(const char *path, const char *mode)
{
    calls += counting;
    return real_fopen(path, mode);
}
void *dlopen(const char *file, int mode)
{
    calls += counting;
    return real_dlopen(file, mode);
}

static int (*real_value)(int);
static int replacement_value(int x) { return real_value(x) * 100; }
static lg_hook_t hooks[] = {{"armdep_value", (void *)replacement_value, (void **)&real_value}};

static char fixture_dir[PATH_MAX];

static void test_patch(void)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/libarmfix_now.so", fixture_dir);
    void *now = real_dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    snprintf(path, sizeof path, "%s/libarmfix_lazy.so", fixture_dir);
    void *lazy = real_dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    g_assert_nonnull(now);
    g_assert_nonnull(lazy);
    int (*call)(int) = (int (*)(int))dlsym(lazy, "armfix_call");
    calls = 0;
    counting = 1;
    int objects = -1;
    int armed = lg_arm_got_patch(hooks, 1, &objects);
    counting = 0;
    g_assert_cmpint(calls, ==, 0);
    g_assert_cmpint(armed, ==, 2); /* the call slot of each fixture */
    g_assert_cmpint(call(7), ==, 800);
}

static void test_arm(void)
{
    calls = 0;
    counting = 1;
    int armed = labelguard_arm();
    counting = 0;
    g_assert_cmpint(calls, ==, 0);
    g_assert_cmpint(armed, >=, 0);
}

int main(int argc, char **argv)
{
    real_fopen = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
    real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    ssize_t n = readlink("/proc/self/exe", fixture_dir, sizeof fixture_dir - 1);
    g_assert_cmpint(n, >, 0);
    fixture_dir[n] = 0;
    *strrchr(fixture_dir, '/') = 0;
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/arm_alloc/patch", test_patch);
    g_test_add_func("/arm_alloc/labelguard_arm", test_arm);
    return g_test_run();
}
