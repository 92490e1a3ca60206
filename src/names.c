/* names.c: kernel handle / host stub -> mangled name and per-kernel classification cache.
 *
 * Written from __cudaRegisterFunction and __cudaGetKernel (preload.c), which run inside other
 * libraries' constructors, before our own constructor: so its first generation is plain
 * zeroed static memory plus a statically initialised mutex, usable with no initialisation.
 * Read on every kernel launch (preload.c, launch.c) from any thread, without a lock;
 * classify.c publishes what it learned once per kernel (lg_names_publish): that lookup is the
 * whole cost of an unwatched launch (preload.c's fast path). Tested through tests/fakecuda/
 * test_registration.sh and every e2e test.
 *
 * Open addressing on the pointer value; a slot's key is published with release ordering after
 * its entry is complete, so a reader that sees the key sees a complete entry. Entries are never
 * removed (a lock-free reader may hold one). The table starts in BSS and grows by generations
 * (internal.h): tests/unit/test_names.c grows it while a reader thread looks up.
 *
 * Names are not copied: PyTorch registers some 24k kernels at import (2.10 and 2.15), and
 * copies of their names cost ~12 MB of RSS in every process (bench/torch_bench.py). A registered name is the image's own string literal, valid while the
 * image is loaded; __cudaUnregisterFatBinary, which nvcc's code calls from the image's atexit
 * handler before dlclose unmaps it (and at exit), drops the names of that fatbin: each module
 * keeps its entries on a chain, and a dropped entry returns to "unknown", so a kernel that a
 * later image registers at the same address is named and classified afresh. Names learnt at a
 * launch (CUPTI, cudaFuncGetName) have no such guarantee and are copied.
 * Entries come from a slab: no malloc header for each of those 24k.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Generation 0 is static (usable before any constructor, costs nothing until touched); each
 * later one is mapped, four times the size of the one before. Entries move to a new generation
 * when one is half full. */
#define GEN0_SLOTS 4096u
#define MAX_GENS   8 /* up to 4096 * 4^7 = 67M slots */
static lg_names_slot_t gen0_slots[GEN0_SLOTS];
static lg_names_gen_t gens[MAX_GENS] = {{gen0_slots, GEN0_SLOTS - 1}};
const lg_names_gen_t *lg_names_current = &gens[0];
static int n_gens = 1;
static unsigned table_fill;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Registered modules (one per fatbin, a few thousand for PyTorch) and their entry chains.
 * Registration of one fatbin is consecutive, and unregistration mostly runs in reverse order,
 * so `last` and a search from the end find the module at once. All under table_lock. */
typedef struct module {
    void **fatbin;
    lg_kernel_info_t *head;
} module_t;
static module_t *modules;
static size_t n_modules, cap_modules, last_module;
static long n_registered;

#define SLAB_ENTRIES 1024
static lg_kernel_info_t *slab;
static size_t slab_used = SLAB_ENTRIES;

/* Caller holds table_lock. A zeroed entry; never freed. */
static lg_kernel_info_t *new_info_locked(void)
{
    if (slab_used == SLAB_ENTRIES) {
        lg_kernel_info_t *s = calloc(SLAB_ENTRIES, sizeof *s);
        if (!s)
            return NULL;
        slab = s;
        slab_used = 0;
    }
    return &slab[slab_used++];
}

/* Caller holds table_lock. The module of `fatbin`, added when new; NULL without memory. */
static module_t *module_locked(void **fatbin, bool add)
{
    if (last_module < n_modules && modules[last_module].fatbin == fatbin)
        return &modules[last_module];
    for (size_t i = n_modules; i-- > 0;)
        if (modules[i].fatbin == fatbin)
            return &modules[last_module = i];
    if (!add)
        return NULL;
    if (n_modules == cap_modules) {
        size_t cap = cap_modules ? 2 * cap_modules : 256;
        module_t *m = realloc(modules, cap * sizeof *m);
        if (!m)
            return NULL;
        modules = m;
        cap_modules = cap;
    }
    modules[n_modules] = (module_t){fatbin, NULL};
    return &modules[last_module = n_modules++];
}

/* The slot of `func` in generation g: its own, or the empty one where it belongs. */
static lg_names_slot_t *probe(const lg_names_gen_t *g, const void *func)
{
    uint32_t i = lg_names_hash(func) & g->mask;
    for (;;) {
        const void *k = atomic_load_explicit(&g->slots[i].key, memory_order_relaxed);
        if (k == func || !k)
            return &g->slots[i];
        i = (i + 1) & g->mask;
    }
}

/* Caller holds table_lock. Copies every entry into a generation four times the size, publishes
 * it, and gives the outgrown slots' memory back to the kernel (MADV_DONTNEED: still mapped, and
 * read as zeros by a reader that was probing them). False when no larger one can be had. */
static bool grow_locked(void)
{
    if (n_gens == MAX_GENS)
        return false;
    const lg_names_gen_t *old = &gens[n_gens - 1];
    size_t n = ((size_t)old->mask + 1) * 4;
    void *m = mmap(NULL, n * sizeof(lg_names_slot_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    lg_names_gen_t *g = &gens[n_gens];
    g->slots = m;
    g->mask = (uint32_t)(n - 1);
    for (size_t j = 0; j <= old->mask; j++) {
        const void *k = atomic_load_explicit(&old->slots[j].key, memory_order_relaxed);
        if (!k)
            continue;
        lg_names_slot_t *s = probe(g, k);
        atomic_store_explicit(&s->info, atomic_load_explicit(&old->slots[j].info, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&s->key, k, memory_order_relaxed);
    }
    n_gens++;
    __atomic_store_n(&lg_names_current, g, __ATOMIC_RELEASE);
    if (old->slots != gen0_slots)
        madvise(old->slots, ((size_t)old->mask + 1) * sizeof(lg_names_slot_t), MADV_DONTNEED);
    return true;
}

/* Caller holds table_lock. Returns the existing or a new entry; NULL when the table is full
 * or out of memory (the kernel then goes through the slow path on each launch, still correct). */
static lg_kernel_info_t *insert_locked(const void *func)
{
    const lg_names_gen_t *g = lg_names_current;
    lg_names_slot_t *s = probe(g, func);
    if (atomic_load_explicit(&s->key, memory_order_relaxed) == func)
        return atomic_load_explicit(&s->info, memory_order_relaxed);
    size_t size = (size_t)g->mask + 1;
    if (table_fill + 1 > size / 2 && grow_locked()) {
        g = lg_names_current;
        s = probe(g, func);
        size = (size_t)g->mask + 1;
    }
    if (table_fill + 1 > size / 4 * 3)
        return NULL;
    lg_kernel_info_t *info = new_info_locked();
    if (!info)
        return NULL;
    info->func = func;
    atomic_store_explicit(&s->info, info, memory_order_relaxed);
    atomic_store_explicit(&s->key, func, memory_order_release);
    table_fill++;
    return info;
}

lg_kernel_info_t *lg_names_info_insert(const void *func)
{
    pthread_mutex_lock(&table_lock);
    lg_kernel_info_t *info = insert_locked(func);
    pthread_mutex_unlock(&table_lock);
    return info;
}

/* A name learnt at a launch: copied, because nothing says how long it stays valid. */
static void set_name_locked(lg_kernel_info_t *info, const char *mangled)
{
    if (!info || !mangled || info->mangled)
        return;
    info->mangled = strdup(mangled);
}

/* Caller holds table_lock. `mangled` lives in the image of `m` (or of the entry `after`,
 * which is on m's chain): info joins that chain. */
static void set_image_name_locked(lg_kernel_info_t *info, const char *mangled, module_t *m, lg_kernel_info_t *after)
{
    if (!info || !mangled || info->mangled)
        return;
    info->mangled = mangled;
    info->image_name = after ? LG_NAME_FROM_STUB : LG_NAME_REGISTERED;
    if (after) {
        info->next_in_module = after->next_in_module;
        after->next_in_module = info;
    } else {
        info->next_in_module = m->head;
        m->head = info;
    }
}

void lg_names_record_function(void **fatbin, const void *host_stub, const char *mangled)
{
    if (!host_stub || !mangled)
        return;
    pthread_mutex_lock(&table_lock);
    lg_kernel_info_t *info = insert_locked(host_stub);
    module_t *m = info && !info->mangled ? module_locked(fatbin, true) : NULL;
    if (m) {
        set_image_name_locked(info, mangled, m, NULL);
        n_registered++;
    }
    pthread_mutex_unlock(&table_lock);
}

void lg_names_record_kernel(const void *handle, const void *host_stub)
{
    if (!handle || handle == host_stub)
        return;
    pthread_mutex_lock(&table_lock);
    lg_kernel_info_t *stub = insert_locked(host_stub);
    lg_kernel_info_t *h = insert_locked(handle);
    if (stub && h && stub->mangled) {
        if (stub->image_name != LG_NAME_NONE)
            set_image_name_locked(h, stub->mangled, NULL, stub); /* dropped with the stub */
        else
            set_name_locked(h, stub->mangled);
    }
    pthread_mutex_unlock(&table_lock);
}

/* The image behind `fatbin` is going away: its names stop being valid, so its entries forget
 * name and classification (a launch through them now takes the slow path and finds no name).
 * The entries stay in the table: a lock-free reader may be looking at one. */
void lg_names_drop_module(void **fatbin)
{
    pthread_mutex_lock(&table_lock);
    module_t *m = module_locked(fatbin, false);
    if (m) {
        for (lg_kernel_info_t *e = m->head, *next; e; e = next) {
            next = e->next_in_module;
            atomic_store_explicit(&e->state, LG_KSTATE_UNKNOWN, memory_order_release);
            e->spec = NULL;
            e->mangled = NULL;
            e->next_in_module = NULL;
            atomic_store_explicit(&e->warned, 0, memory_order_relaxed); /* a later kernel here is new */
            if (e->image_name == LG_NAME_REGISTERED)
                n_registered--;
            e->image_name = LG_NAME_NONE;
        }
        *m = modules[--n_modules];
        last_module = 0;
    }
    pthread_mutex_unlock(&table_lock);
}

long lg_names_registered(void)
{
    pthread_mutex_lock(&table_lock);
    long n = n_registered;
    pthread_mutex_unlock(&table_lock);
    return n;
}

void lg_names_set_name(lg_kernel_info_t *info, const char *mangled)
{
    pthread_mutex_lock(&table_lock);
    set_name_locked(info, mangled);
    pthread_mutex_unlock(&table_lock);
}

/* Two threads may classify the same new kernel at once: the first to publish wins, so `spec`
 * is written once, under the lock, before the release store of the state that launches
 * acquire (a second plain write of it raced with their reads: tests/e2e/test_tsan.sh). */
void lg_names_publish(lg_kernel_info_t *info, const lg_spec_t *spec, const lg_kernel_facts_t *facts, int state)
{
    pthread_mutex_lock(&table_lock);
    if (atomic_load_explicit(&info->state, memory_order_relaxed) == LG_KSTATE_UNKNOWN) {
        info->spec = spec;
        info->dtype = facts->dtype;
        if (spec) {
            /* Only watched kernels carry a short name: entries are many (PyTorch: 24k). The
             * string is never freed, a reader (an async check's verdict) may hold it. */
            char *name = strdup(facts->short_name);
            info->short_name = name ? name : spec->name;
        }
        atomic_store_explicit(&info->state, state, memory_order_release);
    }
    pthread_mutex_unlock(&table_lock);
}

const char *lg_names_lookup(const void *func)
{
    lg_kernel_info_t *info = lg_names_info(func);
    return info ? info->mangled : NULL;
}

void lg_names_atfork_prepare(void) { pthread_mutex_lock(&table_lock); }
void lg_names_atfork_parent(void) { pthread_mutex_unlock(&table_lock); }
void lg_names_atfork_child(void) { pthread_mutex_init(&table_lock, NULL); }
