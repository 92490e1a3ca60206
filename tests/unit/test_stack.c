/* test_stack.c: unit tests of src/base/stack.c (native backtrace capture and symbolization).
 * In this binary the "own module" whose frames are dropped is the test executable itself
 * (liblg.a is linked in), so a stack captured through glib's sort must come out as glib/libc frames
 * only. Run: make build/tests/unit/test_stack && build/tests/unit/test_stack
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <dlfcn.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

static lg_native_stack_t captured;

static int compare_and_capture(const void *a, const void *b, void *data)
{
    if (captured.n == 0)
        lg_stack_capture(&captured);
    return *(const int *)a - *(const int *)b;
}

static void test_capture_through_glib(void)
{
    int v[8] = { 5, 3, 7, 1, 2, 8, 6, 4 };
    captured.n = 0;
    /* glib's own sort, not libc's qsort, which sanitizer runtimes intercept. */
    g_qsort_with_data(v, 8, sizeof(int), compare_and_capture, NULL);
    g_assert_cmpint(captured.n, >=, 4);

    char lines[LG_MAX_FRAMES][256];
    int n = lg_stack_symbolize(&captured, lines, LG_MAX_FRAMES);
    g_assert_cmpint(n, >=, 1);
    g_assert_cmpint(n, <, captured.n); /* our own frames (this executable) were dropped */
    bool glib = false;
    for (int i = 0; i < n; i++) {
        g_test_message("frame %d: %s", i, lines[i]);
        g_assert_null(strstr(lines[i], "test_stack+"));
        g_assert_null(strstr(lines[i], "compare_and_capture"));
        if (g_str_has_prefix(lines[i], "libglib-2.0.so.0+0x"))
            glib = true;
    }
    g_assert_true(glib);
    /* The innermost remaining frame is the sort that called our comparator. */
    g_assert_true(g_str_has_prefix(lines[0], "libglib-2.0.so.0+0x"));
}

/* "module+0xoffset (function+0xoff)" with offsets that agree with dladdr. */
static void test_format(void)
{
    void *fn = (void *)(uintptr_t)&g_test_init;
    Dl_info info;
    g_assert_true(dladdr(fn, &info));
    lg_native_stack_t s = { .n = 2 };
    s.ips[0] = (char *)fn + 0x10; /* first frame: looked up as is */
    s.ips[1] = (char *)fn + 0x21; /* later frames: looked up at ip - 1 */
    char lines[4][256];
    int n = lg_stack_symbolize(&s, lines, 4);
    g_assert_cmpint(n, ==, 2);
    char want[256];
    const char *mod = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    snprintf(want, sizeof(want), "%s+0x%lx (g_test_init+0x10)", mod, (unsigned long)((char *)fn + 0x10 - (char *)info.dli_fbase));
    g_assert_cmpstr(lines[0], ==, want);
    snprintf(want, sizeof(want), "%s+0x%lx (g_test_init+0x21)", mod, (unsigned long)((char *)fn + 0x21 - (char *)info.dli_fbase));
    g_assert_cmpstr(lines[1], ==, want);
}

/* C++ frames come out demangled (demangle.c, through libstdc++'s __cxa_demangle). */
static void test_demangled(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        g_test_skip("libstdc++.so.6 not loadable");
        return;
    }
    /* The deleting destructor: the complete one is a lone `ret` on aarch64 (4 bytes), so
     * fn + 4 would lie past its end there (x86_64's is endbr64 + ret, 5 bytes). */
    void *fn = dlsym(h, "_ZNSt9exceptionD0Ev");
    g_assert_nonnull(fn);
    lg_native_stack_t s = { .n = 1 };
    s.ips[0] = (char *)fn + 4;
    char lines[1][256];
    g_assert_cmpint(lg_stack_symbolize(&s, lines, 1), ==, 1);
    g_test_message("%s", lines[0]);
    g_assert_true(g_str_has_prefix(lines[0], "libstdc++.so.6+0x"));
    /* D0 demangles like D1/D2: the name is demangled. */
    g_assert_nonnull(strstr(lines[0], "(std::exception::~exception()+0x4)"));
    /* Pulls demangle.o into this binary; the weak reference in stack.c alone would not. */
    g_free(lg_demangle_full("_Z1fv"));
}

/* Named only in this executable's .symtab (no -rdynamic): found through the file. */
__attribute__((noinline)) int lg_test_symtab_only_function(int x)
{
    return x * 3 + 1;
}

static void test_symbol_from_file(void)
{
    void *fn = (void *)(uintptr_t)&lg_test_symtab_only_function;
    Dl_info info;
    g_assert_true(dladdr(fn, &info));
    g_assert_null(info.dli_sname); /* dladdr alone cannot name it */
    char name[128];
    uintptr_t off = 0;
    g_assert_true(lg_stack_symbol_from_file("/proc/self/exe", info.dli_fbase, (char *)fn + 3, name, sizeof(name), &off));
    g_assert_cmpstr(name, ==, "lg_test_symtab_only_function");
    g_assert_cmpuint(off, ==, 3);
    /* Not ELF, missing, truncated: false, no crash. */
    char *tmp = g_strdup_printf("%s/lg-test-stack-%d", g_get_tmp_dir(), (int)getpid());
    g_assert_true(g_file_set_contents(tmp, "not an ELF file at all, just text that is long enough to pass the size check........", -1, NULL));
    g_assert_false(lg_stack_symbol_from_file(tmp, info.dli_fbase, fn, name, sizeof(name), &off));
    g_assert_false(lg_stack_symbol_from_file("/nonexistent/file", info.dli_fbase, fn, name, sizeof(name), &off));
    char *exe = NULL;
    gsize exe_len = 0;
    g_assert_true(g_file_get_contents("/proc/self/exe", &exe, &exe_len, NULL));
    for (gsize cut = 64; cut < exe_len; cut = cut * 4) {
        g_assert_true(g_file_set_contents(tmp, exe, (gssize)cut, NULL));
        g_assert_false(lg_stack_symbol_from_file(tmp, info.dli_fbase, (char *)fn + 3, name, sizeof(name), &off));
    }
    g_unlink(tmp);
    g_free(exe);
    g_free(tmp);
    g_assert_cmpint(lg_test_symtab_only_function(1), ==, 4);
}

static void test_unmapped_and_limits(void)
{
    lg_native_stack_t s = { .n = 3 };
    s.ips[0] = (void *)0x10;
    s.ips[1] = NULL;                                  /* skipped */
    s.ips[2] = (void *)(uintptr_t)&lg_stack_capture;  /* our own: dropped */
    char lines[4][256];
    int n = lg_stack_symbolize(&s, lines, 4);
    g_assert_cmpint(n, ==, 1);
    g_assert_cmpstr(lines[0], ==, "?+0x10");
    /* max bounds the output. */
    lg_native_stack_t many = { .n = 10 };
    for (int i = 0; i < 10; i++)
        many.ips[i] = (void *)0x20;
    g_assert_cmpint(lg_stack_symbolize(&many, lines, 4), ==, 4);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/stack/capture_through_glib", test_capture_through_glib);
    g_test_add_func("/stack/format", test_format);
    g_test_add_func("/stack/demangled", test_demangled);
    g_test_add_func("/stack/symbol_from_file", test_symbol_from_file);
    g_test_add_func("/stack/unmapped_and_limits", test_unmapped_and_limits);
    return g_test_run();
}
