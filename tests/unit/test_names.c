/* test_names.c: unit tests of src/kernels/names.c, the kernel name and classification cache.
 * Registered names are kept by pointer (the registering image's own strings), so they must be
 * dropped when that image's fatbin is unregistered, and an image registered later at the same
 * addresses must get its own names and a fresh classification. Kernel handles named after a
 * host stub go with it; names learnt at a launch are copies and stay. Also the registered count
 * the start event reports. A registration makes no entry of the launch table: the entry is made
 * at the kernel's first launch (lg_names_info_insert) and named from the registration then; what
 * a registration costs in memory (torch registers 24k kernels and launches a few hundred); a
 * fatbin whose registrations interleave with another's, and many fatbins dropped in any order. The table's growth (generations, kernels.h): 200k kernels, the
 * size of several large CUDA libraries together, while another thread looks up the first ones
 * (each lookup finds its own entry or, while a generation is outgrown, nothing; never another's).
 * Run: make build/tests/unit/test_names && build/tests/unit/test_names
 */
#include <glib.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks/hooks.h"

/* Stand-ins for two images' host stubs, kernel handles and fatbin handles: only addresses. */
static char stubs[4], handles[4];
static void *fatbin_a[1], *fatbin_b[1];

static void test_pointer_not_copy(void)
{
    static const char name[] = "_Z6kernelPl";
    long before = lg_names_registered();
    lg_names_record_function(fatbin_a, &stubs[0], name);
    g_assert_true(lg_names_lookup(&stubs[0]) == name); /* the image's string itself */
    g_assert_cmpint(lg_names_registered(), ==, before + 1);
    /* A second registration of the same stub keeps the first name and is not counted. */
    lg_names_record_function(fatbin_a, &stubs[0], "_Z5otherv");
    g_assert_true(lg_names_lookup(&stubs[0]) == name);
    g_assert_cmpint(lg_names_registered(), ==, before + 1);
    lg_names_drop_module(fatbin_a);
    g_assert_cmpint(lg_names_registered(), ==, before);
}

static void test_drop_and_reregister(void)
{
    static const char a0[] = "_Z2a0Pl", a1[] = "_Z2a1Pl", b0[] = "_Z2b0Pl";
    lg_names_record_function(fatbin_a, &stubs[1], a0);
    lg_names_record_function(fatbin_a, &stubs[2], a1);
    lg_names_record_function(fatbin_b, &stubs[3], b0);
    lg_names_record_kernel(&handles[1], &stubs[1]);
    g_assert_true(lg_names_lookup(&handles[1]) == a0);
    lg_kernel_info_t *info = lg_names_info_insert(&stubs[1]); /* its first launch */
    g_assert_nonnull(info);
    g_assert_true(info->mangled == a0);
    lg_names_publish(info, NULL, &(lg_kernel_facts_t){0}, LG_KSTATE_UNWATCHED);
    g_assert_cmpint(atomic_load(&info->state), ==, LG_KSTATE_UNWATCHED);
    long before = lg_names_registered();

    /* Image A goes: its names, its handle's name and its classification go with it. */
    lg_names_drop_module(fatbin_a);
    g_assert_null(lg_names_lookup(&stubs[1]));
    g_assert_null(lg_names_lookup(&stubs[2]));
    g_assert_null(lg_names_lookup(&handles[1]));
    g_assert_cmpint(atomic_load(&info->state), ==, LG_KSTATE_UNKNOWN);
    g_assert_true(lg_names_info(&stubs[1]) == info); /* the entry itself stays */
    g_assert_cmpint(lg_names_registered(), ==, before - 2);
    /* Image B is untouched. */
    g_assert_true(lg_names_lookup(&stubs[3]) == b0);

    /* A new image at A's addresses: its own names, classified afresh. */
    static const char c0[] = "_Z2c0Pl";
    lg_names_record_function(fatbin_a, &stubs[1], c0);
    g_assert_true(lg_names_lookup(&stubs[1]) == c0);
    g_assert_true(lg_names_info_insert(&stubs[1]) == info); /* its next launch names it again */
    g_assert_true(info->mangled == c0);
    lg_names_publish(info, NULL, &(lg_kernel_facts_t){0}, LG_KSTATE_WATCHED);
    g_assert_cmpint(atomic_load(&info->state), ==, LG_KSTATE_WATCHED);
    lg_names_drop_module(fatbin_a);
    lg_names_drop_module(fatbin_b);
    g_assert_null(lg_names_lookup(&stubs[3]));
    lg_names_drop_module(fatbin_b); /* unknown fatbin: nothing happens */
}

static void test_launch_names_are_copies(void)
{
    char name[] = "_Z4seenv";
    lg_kernel_info_t *info = lg_names_info_insert(&handles[2]);
    g_assert_nonnull(info);
    lg_names_set_name(info, name);
    name[3] = 'X'; /* the caller's buffer changes: the cache kept its own copy */
    g_assert_cmpstr(lg_names_lookup(&handles[2]), ==, "_Z4seenv");
    lg_names_drop_module(fatbin_a);
    g_assert_cmpstr(lg_names_lookup(&handles[2]), ==, "_Z4seenv");
}

/* Registration leaves the launch table alone; the first launch makes the entry, named by the
 * image's own string, and a kernel handle made then takes its stub's registered name. */
static void test_entry_at_first_launch(void)
{
    static char stub[2], handle[1];
    static void *fatbin[1];
    static const char name[] = "_Z6lazy_kPl", other[] = "_Z7other_kPl";
    lg_names_record_function(fatbin, &stub[0], name);
    lg_names_record_function(fatbin, &stub[1], other);
    g_assert_null(lg_names_info(&stub[0]));
    g_assert_null(lg_names_info(&stub[1]));
    g_assert_true(lg_names_lookup(&stub[0]) == name);
    lg_kernel_info_t *info = lg_names_info_insert(&stub[0]);
    g_assert_nonnull(info);
    g_assert_true(lg_names_info(&stub[0]) == info);
    g_assert_true(info->mangled == name);
    g_assert_cmpint(atomic_load(&info->state), ==, LG_KSTATE_UNKNOWN);
    /* A handle of a kernel whose stub never launched. */
    lg_names_record_kernel(&handle[0], &stub[1]);
    g_assert_null(lg_names_info(&stub[1]));
    lg_kernel_info_t *h = lg_names_info(&handle[0]);
    g_assert_nonnull(h);
    g_assert_true(h->mangled == other);
    lg_names_drop_module(fatbin);
    g_assert_null(info->mangled);
    g_assert_null(h->mangled);
    g_assert_null(lg_names_lookup(&stub[1]));
}

/* Bytes of heap a registration costs, amortized: torch's 24k must not each carry a 56-byte
 * entry (plus its slots) that only the few hundred launched kernels need. */
#define MEM_KERNELS 100000
static char mem_stubs[MEM_KERNELS];
static void *mem_fatbins[100];
static void test_registration_memory(void)
{
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < MEM_KERNELS; i++)
        lg_names_record_function(&mem_fatbins[i / 1000], &mem_stubs[i], "_Z6kernelPl");
    struct mallinfo2 after = mallinfo2();
    size_t used = (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
    g_test_message("%zu bytes of heap for %d registrations: %.1f each", used, MEM_KERNELS,
                   (double)used / MEM_KERNELS);
    g_assert_cmpuint(used, <=, (size_t)MEM_KERNELS * 32);
    g_assert_null(lg_names_info(&mem_stubs[MEM_KERNELS / 2]));
    g_assert_nonnull(lg_names_lookup(&mem_stubs[MEM_KERNELS / 2]));
    for (int i = 0; i < 100; i++)
        lg_names_drop_module(&mem_fatbins[i]);
    g_assert_null(lg_names_lookup(&mem_stubs[MEM_KERNELS / 2]));
}

/* Two fatbins registering by turns (threads loading two images at once): each keeps its own
 * names, and dropping one drops all of its runs and only them. */
static void test_interleaved_fatbins(void)
{
    static char s[8];
    static void *fa[1], *fb[1];
    static const char *names[8] = {"_Z2a0v", "_Z2b0v", "_Z2a1v", "_Z2b1v", "_Z2a2v", "_Z2b2v", "_Z2a3v", "_Z2b3v"};
    long before = lg_names_registered();
    for (int i = 0; i < 8; i++)
        lg_names_record_function(i % 2 ? fb : fa, &s[i], names[i]);
    g_assert_cmpint(lg_names_registered(), ==, before + 8);
    lg_kernel_info_t *e[8];
    for (int i = 0; i < 8; i++) {
        e[i] = lg_names_info_insert(&s[i]);
        g_assert_true(e[i]->mangled == names[i]);
    }
    /* A stub of A registered again by B keeps A's name. */
    lg_names_record_function(fb, &s[0], "_Z5againv");
    g_assert_true(lg_names_lookup(&s[0]) == names[0]);
    lg_names_drop_module(fa);
    g_assert_cmpint(lg_names_registered(), ==, before + 4);
    for (int i = 0; i < 8; i++) {
        if (i % 2) {
            g_assert_true(e[i]->mangled == names[i]);
            g_assert_true(lg_names_lookup(&s[i]) == names[i]);
        } else {
            g_assert_null(e[i]->mangled);
            g_assert_null(lg_names_lookup(&s[i]));
        }
    }
    lg_names_drop_module(fb);
    g_assert_cmpint(lg_names_registered(), ==, before);
    for (int i = 1; i < 8; i += 2)
        g_assert_null(e[i]->mangled);
}

/* 300 fatbins of 40 kernels, one launched in each: each entry keeps its name until its own
 * fatbin goes, whatever the order (reverse, as at exit, then from the front). */
#define MANY_FATBINS 300
#define MANY_PER     40
static char many_stubs[MANY_FATBINS * MANY_PER];
static void *many_fatbins[MANY_FATBINS];
static void test_many_fatbins(void)
{
    static char names[MANY_FATBINS][16];
    lg_kernel_info_t *e[MANY_FATBINS];
    for (int f = 0; f < MANY_FATBINS; f++) {
        snprintf(names[f], sizeof names[f], "_Z1k%dv", f);
        for (int k = 0; k < MANY_PER; k++)
            lg_names_record_function(&many_fatbins[f], &many_stubs[f * MANY_PER + k], names[f]);
    }
    for (int f = 0; f < MANY_FATBINS; f++) {
        e[f] = lg_names_info_insert(&many_stubs[f * MANY_PER + f % MANY_PER]);
        g_assert_true(e[f]->mangled == names[f]);
    }
    for (int f = MANY_FATBINS; f-- > MANY_FATBINS / 2;) {
        lg_names_drop_module(&many_fatbins[f]);
        g_assert_null(e[f]->mangled);
        g_assert_true(e[f - 1]->mangled == names[f - 1]);
    }
    for (int f = 0; f < MANY_FATBINS / 2; f++) {
        lg_names_drop_module(&many_fatbins[f]);
        g_assert_null(e[f]->mangled);
        if (f + 1 < MANY_FATBINS / 2)
            g_assert_true(e[f + 1]->mangled == names[f + 1]);
    }
}

#define GROW_KEYS 200000
#define READ_KEYS 1000
static char grow_keys[GROW_KEYS];
static char grow_absent; /* never inserted: one past grow_keys may be another test's key */
static lg_kernel_info_t *grow_infos[READ_KEYS];
static atomic_int grow_done;
static atomic_long grow_misses, grow_wrong;

static void *grow_reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&grow_done))
        for (int i = 0; i < READ_KEYS; i++) {
            lg_kernel_info_t *e = lg_names_info(&grow_keys[i]);
            if (!e)
                atomic_fetch_add(&grow_misses, 1);
            else if (e != grow_infos[i])
                atomic_fetch_add(&grow_wrong, 1);
        }
    return NULL;
}

static void test_growth(void)
{
    const lg_names_gen_t *first = lg_names_current;
    for (int i = 0; i < READ_KEYS; i++)
        g_assert_nonnull(grow_infos[i] = lg_names_info_insert(&grow_keys[i]));
    pthread_t reader;
    g_assert_cmpint(pthread_create(&reader, NULL, grow_reader, NULL), ==, 0);
    for (int i = READ_KEYS; i < GROW_KEYS; i++) {
        lg_kernel_info_t *e = lg_names_info_insert(&grow_keys[i]);
        g_assert_nonnull(e);
        g_assert_true(e->func == &grow_keys[i]);
    }
    atomic_store(&grow_done, 1);
    pthread_join(reader, NULL);
    g_assert_cmpint(atomic_load(&grow_wrong), ==, 0);
    g_assert_true(lg_names_current != first);
    g_assert_cmpuint(lg_names_current->mask + 1, >=, 2 * GROW_KEYS); /* at most half full */
    for (int i = 0; i < GROW_KEYS; i++) {
        lg_kernel_info_t *e = lg_names_info(&grow_keys[i]);
        g_assert_nonnull(e);
        g_assert_true(e->func == &grow_keys[i]);
        if (i < READ_KEYS)
            g_assert_true(e == grow_infos[i]);
    }
    g_assert_null(lg_names_info(&grow_absent));
    g_assert_true(lg_names_info_insert(&grow_keys[5]) == grow_infos[5]); /* no second entry */
    g_test_message("lookups that found nothing while a generation was outgrown: %ld", atomic_load(&grow_misses));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/names/pointer_not_copy", test_pointer_not_copy);
    g_test_add_func("/names/drop_and_reregister", test_drop_and_reregister);
    g_test_add_func("/names/launch_names_are_copies", test_launch_names_are_copies);
    g_test_add_func("/names/entry_at_first_launch", test_entry_at_first_launch);
    g_test_add_func("/names/registration_memory", test_registration_memory);
    g_test_add_func("/names/interleaved_fatbins", test_interleaved_fatbins);
    g_test_add_func("/names/many_fatbins", test_many_fatbins);
    g_test_add_func("/names/growth", test_growth);
    return g_test_run();
}
