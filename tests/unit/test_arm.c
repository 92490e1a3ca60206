/* test_arm.c: arm_got.c's GOT patching (lg_arm_got_patch) on real ELF objects. The fixture libraries
 * (arm_fixture.c, built by the Makefile next to this binary) call armdep_value from
 * libarmdep.so through a JUMP_SLOT and take its address through a GLOB_DAT slot; after
 * patching, both must lead to our replacement, which reaches the original through the stored
 * real pointer. The -z now fixture has its GOT in a read-only RELRO page (mprotect path); the
 * lazy one is patched before its first call (the slot still points into its own PLT).
 * A slot that already points into the patching object (a preloaded library's hook, or another
 * version's copy of it) is counted and left alone. The dlopen wrapper (arm_dlopen.c), patched
 * into a loader fixture's `dlopen` slot, still finds the sibling that only the loader's own
 * RUNPATH or RPATH names, and leaves dlopen's own error when nothing is found.
 * Run: build/tests/unit/test_arm (or LG_TESTS=test_arm make test). */
#include <dlfcn.h>
#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"

static int (*real_value)(int), (*real_other)(int);
static int replacement_calls;

static int replacement_value(int x)
{
    replacement_calls++;
    return real_value(x) * 100;
}

static int replacement_other(int x)
{
    return real_other(x) * 1000;
}

static lg_hook_t hooks[] = {
    { "armdep_not_imported_anywhere", (void *)replacement_value, NULL },
    { "armdep_value", (void *)replacement_value, (void **)&real_value },
    { "armdep_other", (void *)replacement_other, (void **)&real_other },
};
#define N_HOOKS 3

static char fixture_dir[PATH_MAX];

static void *open_fixture(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!h) g_error("dlopen %s: %s", path, dlerror());
    return h;
}

static void *dep_symbol(const char *name)
{
    void *dep = dlopen("libarmdep.so", RTLD_LAZY | RTLD_NOLOAD);
    g_assert_nonnull(dep);
    void *p = dlsym(dep, name);
    dlclose(dep);
    return p;
}

/* The /proc/self/maps lines of one object (address range and protection), concatenated:
 * patching must leave them as they were (RELRO pages read-only again, nothing left writable). */
static GString *maps_of(const char *object)
{
    FILE *f = fopen("/proc/self/maps", "r");
    g_assert_nonnull(f);
    GString *s = g_string_new(NULL);
    char line[1024];
    int readonly = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, object)) continue;
        char range[64], perms[5];
        g_assert_cmpint(sscanf(line, "%63s %4s", range, perms), ==, 2);
        g_string_append_printf(s, "%s %s\n", range, perms);
        readonly += strcmp(perms, "r--p") == 0;
    }
    fclose(f);
    g_assert_cmpint(readonly, >=, 1);
    return s;
}

static void test_now(void)
{
    void *h = open_fixture("libarmfix_now.so");
    int (*call)(int) = (int (*)(int))dlsym(h, "armfix_call");
    int (*(*ptr)(void))(int) = (int (*(*)(void))(int))dlsym(h, "armfix_ptr");
    g_assert_nonnull(call);
    g_assert_nonnull(ptr);
    g_assert_cmpint(call(3), ==, 4);
    g_assert_true((void *)ptr() == dep_symbol("armdep_other"));

    /* Its GOT is in a read-only RELRO page: written through mprotect, then restored. */
    GString *maps_before = maps_of("libarmfix_now.so");
    int objects = -1;
    int armed = lg_arm_got_patch(hooks, N_HOOKS, &objects);
    GString *maps_after = maps_of("libarmfix_now.so");
    g_assert_cmpstr(maps_after->str, ==, maps_before->str);
    g_string_free(maps_before, TRUE);
    g_string_free(maps_after, TRUE);
    g_assert_cmpint(armed, ==, 2);          /* the call's JUMP_SLOT and the address's GLOB_DAT */
    g_assert_cmpint(objects, ==, 1);
    g_assert_true((void *)real_value == dep_symbol("armdep_value"));
    g_assert_true((void *)real_other == dep_symbol("armdep_other"));
    replacement_calls = 0;
    g_assert_cmpint(call(3), ==, 400);
    g_assert_cmpint(replacement_calls, ==, 1);
    /* The pointer the library hands out now leads to the replacement too. */
    g_assert_true((void *)ptr() == (void *)replacement_other);
    g_assert_cmpint(ptr()(5), ==, 7000);
}

static void test_lazy_before_first_call(void)
{
    void *h = open_fixture("libarmfix_lazy.so");
    int (*call)(int) = (int (*)(int))dlsym(h, "armfix_call");
    g_assert_nonnull(call);
    int objects = -1;
    int armed = lg_arm_got_patch(hooks, N_HOOKS, &objects);
    /* Both fixtures now: the -z now one counted as already armed. */
    g_assert_cmpint(armed, ==, 4);
    g_assert_cmpint(objects, ==, 2);
    replacement_calls = 0;
    g_assert_cmpint(call(7), ==, 800);
    g_assert_cmpint(replacement_calls, ==, 1);
    g_assert_true((void *)real_value == dep_symbol("armdep_value"));
}

static void test_idempotent(void)
{
    void *before = (void *)real_value;
    int objects = -1;
    g_assert_cmpint(lg_arm_got_patch(hooks, N_HOOKS, &objects), ==, 4);
    g_assert_cmpint(objects, ==, 2);
    g_assert_true((void *)real_value == before);
    void *h = open_fixture("libarmfix_now.so");
    int (*call)(int) = (int (*)(int))dlsym(h, "armfix_call");
    replacement_calls = 0;
    g_assert_cmpint(call(1), ==, 200);      /* not 20000: the replacement is not chained */
    g_assert_cmpint(replacement_calls, ==, 1);
}

static void test_nothing_to_patch(void)
{
    int objects = -1;
    g_assert_cmpint(lg_arm_got_patch(&hooks[0], 1, &objects), ==, 0);
    g_assert_cmpint(objects, ==, 0);
    g_assert_cmpint(lg_arm_got_patch(NULL, 0, &objects), ==, -1);
}

static int other_value(int x) { return real_value(x) * 7; }

/* Arming over slots that point into this object already (the hooks of the earlier tests)
 * rewrites nothing: not even to another of our functions. A preloaded library's slots are
 * bound to its per-version copies, which a walk must never replace with the default copy. */
static void test_ours_left_alone(void)
{
    lg_hook_t other[] = {{"armdep_value", (void *)other_value, (void **)&real_value}};
    int objects = -1;
    g_assert_cmpint(lg_arm_got_patch(other, 1, &objects), ==, 2); /* counted in both fixtures */
    g_assert_cmpint(objects, ==, 2);
    void *h = open_fixture("libarmfix_now.so");
    int (*call)(int) = (int (*)(int))dlsym(h, "armfix_call");
    replacement_calls = 0;
    g_assert_cmpint(call(1), ==, 200); /* still replacement_value, not other_value */
    g_assert_cmpint(replacement_calls, ==, 1);
}

/* The loader's dlopen slot goes through the wrapper, which then calls dlopen from this
 * object: glibc would search our (empty) RUNPATH, not the loader's. */
static void check_loader(const char *loader)
{
    void *h = open_fixture(loader);
    void *(*open_by_name)(const char *) = (void *(*)(const char *))dlsym(h, "armload_open");
    g_assert_nonnull(open_by_name);
    lg_hook_t dl;
    lg_arm_dlopen_hook(&dl);
    int objects = -1;
    g_assert_cmpint(lg_arm_got_patch(&dl, 1, &objects), >=, 1);
    void *leaf = open_by_name("libarmleaf.so");
    if (!leaf)
        g_test_message("%s: %s", loader, dlerror());
    g_assert_nonnull(leaf);
    int (*value)(void) = (int (*)(void))dlsym(leaf, "armleaf_value");
    g_assert_nonnull(value);
    g_assert_cmpint(value(), ==, 42);
    /* Loaded already: found by name again, the same object. */
    g_assert_true(open_by_name("libarmleaf.so") == leaf);
    /* Nothing found anywhere: NULL, and dlerror is dlopen's own, naming the file. */
    g_assert_null(open_by_name("libarm_no_such_library.so"));
    const char *e = dlerror();
    g_assert_nonnull(e);
    g_assert_nonnull(strstr(e, "libarm_no_such_library.so"));
    dlclose(leaf);
    dlclose(leaf);
}

static void test_dlopen_runpath(void) { check_loader("libarmload_runpath.so"); }
static void test_dlopen_rpath(void) { check_loader("libarmload_rpath.so"); }

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", fixture_dir, sizeof fixture_dir - 1);
    g_assert_cmpint(n, >, 0);
    fixture_dir[n] = 0;
    *strrchr(fixture_dir, '/') = 0;
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/arm/now", test_now);
    g_test_add_func("/arm/lazy_before_first_call", test_lazy_before_first_call);
    g_test_add_func("/arm/idempotent", test_idempotent);
    g_test_add_func("/arm/nothing_to_patch", test_nothing_to_patch);
    g_test_add_func("/arm/ours_left_alone", test_ours_left_alone);
    g_test_add_func("/arm/dlopen_runpath", test_dlopen_runpath);
    g_test_add_func("/arm/dlopen_rpath", test_dlopen_rpath);
    return g_test_run();
}
