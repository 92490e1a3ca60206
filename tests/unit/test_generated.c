/* test_generated.c: unit tests of src/base/generated.c, the kernels torch.compile generated that
 * assert on their own, kept for the device_assert report: strings copied and cut to their
 * fields, a kernel recorded twice kept once, the newest LG_GENERATED_MAX kept newest first with
 * the total counted, empty input refused, and entries added from several threads at once.
 * Run: build/tests/unit/test_generated (or LG_TESTS=test_generated bash tests/run.sh).
 */
#include "base/base.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

static lg_generated_kernel_t out[LG_GENERATED_MAX];

/* One process-wide table: each test reads only what it added, newest first. */
static void test_copy_and_duplicates(void)
{
    char file[64];
    snprintf(file, sizeof file, "/cache/ab/cab%d.py", 1);
    g_assert_cmpint(lg_generated_add("triton_poi_fused_embedding_0", file, 45, "index out of bounds: 0 <= tmp3 < 32000",
                                     "[embedding]", "[aten.embedding]"),
                    ==, 1);
    g_assert_cmpint(lg_generated_add("triton_poi_fused_embedding_0", file, 45, "another text", NULL, NULL), ==, 0);
    g_assert_cmpint(
        lg_generated_add("triton_poi_fused_embedding_0", file, 46, "index out of bounds: 0 <= tmp4 < 8", NULL, ""), ==,
        1);
    int total = 0;
    int n = lg_generated_read(out, LG_GENERATED_MAX, &total);
    g_assert_cmpint(n, >=, 2);
    g_assert_cmpint(total, >=, 2);
    g_assert_cmpint(out[0].line, ==, 46); /* newest first */
    g_assert_cmpstr(out[0].source_nodes, ==, "");
    g_assert_cmpstr(out[0].aten_ops, ==, "");
    g_assert_cmpint(out[1].line, ==, 45);
    g_assert_cmpstr(out[1].kernel, ==, "triton_poi_fused_embedding_0");
    g_assert_cmpstr(out[1].file, ==, file);
    g_assert_cmpstr(out[1].message, ==, "index out of bounds: 0 <= tmp3 < 32000"); /* the first text stays */
    g_assert_cmpstr(out[1].source_nodes, ==, "[embedding]");
    g_assert_cmpstr(out[1].aten_ops, ==, "[aten.embedding]");
}

static void test_cut_to_fields(void)
{
    char long_file[2000];
    memset(long_file, 'f', sizeof long_file - 1);
    long_file[sizeof long_file - 1] = '\0';
    g_assert_cmpint(lg_generated_add("k_long", long_file, 1, "m", NULL, NULL), ==, 1);
    g_assert_cmpint(lg_generated_read(out, 1, NULL), ==, 1);
    g_assert_cmpuint(strlen(out[0].file), ==, sizeof out[0].file - 1);
    /* the same kernel again, by its full (longer than kept) path: kept once */
    g_assert_cmpint(lg_generated_add("k_long", long_file, 1, "m", NULL, NULL), ==, 0);
}

static void test_refused(void)
{
    int before = 0, after = 0;
    lg_generated_read(out, 0, &before);
    g_assert_cmpint(lg_generated_add(NULL, "f", 1, "m", NULL, NULL), ==, -1);
    g_assert_cmpint(lg_generated_add("", "f", 1, "m", NULL, NULL), ==, -1);
    g_assert_cmpint(lg_generated_add("k", NULL, 1, "m", NULL, NULL), ==, -1);
    g_assert_cmpint(lg_generated_add("k", "f", 1, "", NULL, NULL), ==, -1);
    g_assert_cmpint(lg_generated_add("k", "f", 1, NULL, NULL, NULL), ==, -1);
    lg_generated_read(out, 0, &after);
    g_assert_cmpint(after, ==, before);
}

static void test_ring_keeps_newest(void)
{
    char name[32];
    int before = 0, total = 0;
    lg_generated_read(out, 0, &before);
    for (int i = 0; i < LG_GENERATED_MAX + 10; i++) {
        snprintf(name, sizeof name, "triton_ring_%d", i);
        g_assert_cmpint(lg_generated_add(name, "/cache/ring.py", i, "x < 4", NULL, NULL), ==, 1);
    }
    int n = lg_generated_read(out, LG_GENERATED_MAX, &total);
    g_assert_cmpint(n, ==, LG_GENERATED_MAX);
    g_assert_cmpint(total, ==, before + LG_GENERATED_MAX + 10);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "triton_ring_%d", LG_GENERATED_MAX + 9 - i);
        g_assert_cmpstr(out[i].kernel, ==, name);
    }
    /* a dropped one is new again */
    g_assert_cmpint(lg_generated_add("triton_ring_0", "/cache/ring.py", 0, "x < 4", NULL, NULL), ==, 1);
}

static gpointer adder(gpointer arg)
{
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "t%d_k%d", GPOINTER_TO_INT(arg), i);
        if (lg_generated_add(name, "/cache/threads.py", i, "cond", "[n]", "[aten.x]") != 1)
            return GINT_TO_POINTER(1);
    }
    return NULL;
}

static void test_threads(void)
{
    int before = 0, total = 0;
    lg_generated_read(out, 0, &before);
    GThread *t[4];
    for (int i = 0; i < 4; i++)
        t[i] = g_thread_new("adder", adder, GINT_TO_POINTER(i));
    for (int i = 0; i < 4; i++)
        g_assert_null(g_thread_join(t[i]));
    int n = lg_generated_read(out, LG_GENERATED_MAX, &total);
    g_assert_cmpint(total, ==, before + 800);
    for (int i = 0; i < n; i++) { /* each entry whole: its kernel's number is its line */
        int th = -1, k = -1;
        g_assert_cmpint(sscanf(out[i].kernel, "t%d_k%d", &th, &k), ==, 2);
        g_assert_cmpint(out[i].line, ==, k);
        g_assert_cmpstr(out[i].aten_ops, ==, "[aten.x]");
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/generated/copy_and_duplicates", test_copy_and_duplicates);
    g_test_add_func("/generated/cut_to_fields", test_cut_to_fields);
    g_test_add_func("/generated/refused", test_refused);
    g_test_add_func("/generated/ring_keeps_newest", test_ring_keeps_newest);
    g_test_add_func("/generated/threads", test_threads);
    return g_test_run();
}
