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
 * (kernels.h): tests/unit/test_names.c grows it while a reader thread looks up.
 *
 * Names are not copied: PyTorch registers some 24k kernels at import (2.10 and 2.15), and
 * copies of their names cost ~12 MB of RSS in every process (bench/torch_bench.py). A
 * registered name is the image's own string literal, valid while the image is loaded; it is kept
 * in a registration record (below), and a kernel's entry is only made at its first launch.
 * __cudaUnregisterFatBinary, which nvcc's code calls from the image's atexit handler before
 * dlclose unmaps it (and at exit), drops the names of that fatbin: its records lose their name,
 * and the entries named from them (on their module's chain) return to "unknown", so a kernel
 * that a later image registers at the same address is named and classified afresh. Names
 * learnt at a launch (CUPTI, cudaFuncGetName) have no such guarantee and are copied.
 * Entries come from a slab: no malloc header for each.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"

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

/* Registrations. PyTorch registers ~24k kernels at import (2.10 and 2.15) and launches a few
 * hundred of them, so a registration makes no entry of the launch table: it appends one record
 * (stub, name) to a log and indexes it by stub; the kernel's entry (56 bytes) is made at its
 * first launch, which takes the slow path once anyway (lg_names_info_insert), and takes its
 * name from the record then. A record is 16 bytes and an index slot 4: for torch 2.15, 386 KiB
 * and 128 KiB, where an entry and a launch-table slot for each kernel would take 2.4 MB
 * (bench/torch_bench.py). Everything here is under table_lock and read on the slow path only.
 *
 * The log is chunked so that records never move (the index holds record numbers + 1, 0 for an
 * empty slot); it starts empty, a process that registers nothing allocates nothing. */
typedef struct reg {
    const void *stub;
    const char *name; /* NULL once its image is unregistered */
} reg_t;
#define REC_CHUNK_BITS 11 /* 2048 records, 32 KiB */
#define REC_CHUNK      (1u << REC_CHUNK_BITS)
#define REC_CHUNKS_MAX 8192u /* 16M records */
static reg_t *rec_chunks[REC_CHUNKS_MAX];
static uint32_t n_recs;
static long n_registered; /* records whose name is live */
#define REC(i) (&rec_chunks[(i) >> REC_CHUNK_BITS][(i) & (REC_CHUNK - 1)])

/* The index: open addressing on the stub, at most 3/4 full, doubled when it would be more. A
 * slot holds a record's number + 1 (0: empty). The first 1024 slots are static (4 KiB, for the
 * few kernels of a small program); each doubling frees the table before. */
#define INDEX0_SLOTS 1024u
static uint32_t index0[INDEX0_SLOTS];
static uint32_t *index_slots = index0;
static uint32_t index_mask = INDEX0_SLOTS - 1;
static uint32_t index_fill;

/* Modules: one range of consecutive records per fatbin, in the order of the records (nvcc's
 * code registers a fatbin's functions one after the other at the image's load: torch 2.15 has
 * 477 ranges). A fatbin whose registrations interleave with another's gets one range per run,
 * each flagged `earlier` when a range of the same fatbin may exist before it. `head` chains the
 * launch-table entries named from the range's records. Sorted by `first`, so a record finds its
 * range by binary search. */
typedef struct module {
    void **fatbin;
    uint32_t first, end; /* records [first, end) */
    bool earlier;
    lg_kernel_info_t *head;
} module_t;
static module_t *modules;
static size_t n_modules, cap_modules;
/* Which fatbins may have a range already (hash bits, never cleared): a fatbin never seen, the
 * case of each new image, starts its range without a search. */
static uint64_t fatbin_seen[128];

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

/* Caller holds table_lock. The index slot of `stub`: its own, or the empty one where it goes. */
static uint32_t *index_probe(const void *stub)
{
    for (uint32_t i = lg_names_hash(stub) & index_mask;; i = (i + 1) & index_mask) {
        uint32_t r = index_slots[i];
        if (!r || REC(r - 1)->stub == stub)
            return &index_slots[i];
    }
}

/* Caller holds table_lock. The number + 1 of `stub`'s live record, or 0. */
static uint32_t record_of_locked(const void *stub)
{
    if (!stub)
        return 0;
    uint32_t r = *index_probe(stub);
    return r && REC(r - 1)->name ? r : 0;
}

/* Caller holds table_lock. Doubles the index, leaving out records whose image is gone (their
 * stubs then have no slot: the same answer, no name). False without memory. */
static bool index_grow_locked(void)
{
    uint32_t n = (index_mask + 1) * 2;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return false;
    uint32_t *old = index_slots, old_n = index_mask + 1;
    index_slots = slots;
    index_mask = n - 1;
    index_fill = 0;
    for (uint32_t j = 0; j < old_n; j++) {
        const reg_t *rec = old[j] ? REC(old[j] - 1) : NULL;
        if (rec && rec->name) {
            *index_probe(rec->stub) = old[j];
            index_fill++;
        }
    }
    if (old != index0)
        free(old);
    return true;
}

/* Caller holds table_lock. The range that `fatbin`'s next record goes to: the last one when it
 * is that fatbin's, else a new one. NULL without memory. */
static module_t *range_for_locked(void **fatbin)
{
    if (n_modules && modules[n_modules - 1].fatbin == fatbin)
        return &modules[n_modules - 1];
    if (n_modules == cap_modules) {
        size_t cap = cap_modules ? 2 * cap_modules : 256;
        module_t *m = realloc(modules, cap * sizeof *m);
        if (!m)
            return NULL;
        modules = m;
        cap_modules = cap;
    }
    uint32_t bit = lg_names_hash(fatbin) & 8191;
    bool earlier = false;
    if (fatbin_seen[bit >> 6] & (1ull << (bit & 63))) {
        for (size_t i = n_modules; i-- > 0 && !earlier;)
            earlier = modules[i].fatbin == fatbin;
    } else {
        fatbin_seen[bit >> 6] |= 1ull << (bit & 63);
    }
    modules[n_modules] = (module_t){fatbin, n_recs, n_recs, earlier, NULL};
    return &modules[n_modules++];
}

/* Caller holds table_lock. The range holding record number r, or NULL. */
static module_t *range_of_record_locked(uint32_t r)
{
    size_t lo = 0, hi = n_modules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (modules[mid].end <= r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_modules && modules[lo].first <= r ? &modules[lo] : NULL;
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

/* Caller holds table_lock. Names `info` after the live record number + 1 `r` (the image's own
 * string) and puts it on its range's chain, so that it forgets the name with the image. */
static void attach_record_locked(lg_kernel_info_t *info, uint32_t r, unsigned char how)
{
    module_t *m = r ? range_of_record_locked(r - 1) : NULL;
    if (!info || info->mangled || !m)
        return;
    info->mangled = REC(r - 1)->name;
    info->image_name = how;
    info->next_in_module = m->head;
    m->head = info;
}

/* Caller holds table_lock. Returns the existing or a new entry, named after its registration
 * when it has none; NULL when the table is full or out of memory (the kernel then goes through
 * the slow path on each launch, still correct). */
static lg_kernel_info_t *insert_locked(const void *func)
{
    const lg_names_gen_t *g = lg_names_current;
    lg_names_slot_t *s = probe(g, func);
    if (atomic_load_explicit(&s->key, memory_order_relaxed) == func) {
        lg_kernel_info_t *info = atomic_load_explicit(&s->info, memory_order_relaxed);
        if (info && !info->mangled)
            attach_record_locked(info, record_of_locked(func), LG_NAME_REGISTERED);
        return info;
    }
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
    attach_record_locked(info, record_of_locked(func), LG_NAME_REGISTERED);
    atomic_store_explicit(&s->info, info, memory_order_relaxed);
    atomic_store_explicit(&s->key, func, memory_order_release);
    table_fill++;
    return info;
}

lg_kernel_info_t *lg_names_info_insert(const void *func)
{
    pthread_mutex_lock(&table_lock);
    lg_forkpoint(LG_FORKPOINT_NAMES);
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

/* Appends the record; a stub that already has a live name keeps it (and is not counted). */
void lg_names_record_function(void **fatbin, const void *host_stub, const char *mangled)
{
    if (!host_stub || !mangled)
        return;
    pthread_mutex_lock(&table_lock);
    uint32_t *slot = index_probe(host_stub);
    if (*slot && REC(*slot - 1)->name)
        goto out;
    if (!*slot && index_fill + 1 > (index_mask + 1) / 4 * 3) {
        if (!index_grow_locked())
            goto out; /* the kernel is named at its launch, if the runtime can tell */
        slot = index_probe(host_stub);
    }
    uint32_t c = n_recs >> REC_CHUNK_BITS;
    if (c >= REC_CHUNKS_MAX)
        goto out;
    if (!rec_chunks[c] && !(rec_chunks[c] = malloc(REC_CHUNK * sizeof(reg_t))))
        goto out;
    module_t *m = range_for_locked(fatbin);
    if (!m)
        goto out;
    *REC(n_recs) = (reg_t){host_stub, mangled};
    index_fill += !*slot;
    *slot = ++n_recs; /* a slot whose record's image went away is reused */
    m->end = n_recs;
    n_registered++;
out:
    pthread_mutex_unlock(&table_lock);
}

/* A kernel handle (__cudaGetKernel, once per kernel at its first launch) takes its stub's
 * name: the registered one, dropped with the stub's image, or a copy of one learnt at a launch. */
void lg_names_record_kernel(const void *handle, const void *host_stub)
{
    if (!handle || handle == host_stub)
        return;
    pthread_mutex_lock(&table_lock);
    lg_kernel_info_t *h = insert_locked(handle);
    if (h && !h->mangled) {
        uint32_t r = record_of_locked(host_stub);
        if (r) {
            attach_record_locked(h, r, LG_NAME_FROM_STUB);
        } else {
            lg_kernel_info_t *stub = lg_names_info(host_stub);
            if (stub && stub->mangled && stub->image_name == LG_NAME_NONE)
                set_name_locked(h, stub->mangled);
        }
    }
    pthread_mutex_unlock(&table_lock);
}

/* Caller holds table_lock. Range m's image is going away: its records' names stop being valid,
 * and its entries forget name and classification (a launch through them now takes the slow path
 * and finds no name). The entries stay in the table: a lock-free reader may be looking at one. */
static void drop_range_locked(module_t *m)
{
    for (uint32_t r = m->first; r < m->end; r++)
        if (REC(r)->name) {
            REC(r)->name = NULL;
            n_registered--;
        }
    for (lg_kernel_info_t *e = m->head, *next; e; e = next) {
        next = e->next_in_module;
        atomic_store_explicit(&e->state, LG_KSTATE_UNKNOWN, memory_order_release);
        e->spec = NULL;
        e->mangled = NULL;
        e->next_in_module = NULL;
        atomic_store_explicit(&e->warned, 0, memory_order_relaxed); /* a later kernel here is new */
        e->image_name = LG_NAME_NONE;
    }
}

/* Images are mostly unregistered in the reverse order of their load (atexit), so the fatbin's
 * last range is found at the end; an `earlier` flag says to look further back. */
void lg_names_drop_module(void **fatbin)
{
    pthread_mutex_lock(&table_lock);
    bool more = true;
    for (size_t i = n_modules; more && i-- > 0;) {
        if (modules[i].fatbin != fatbin)
            continue;
        more = modules[i].earlier;
        drop_range_locked(&modules[i]);
        memmove(&modules[i], &modules[i + 1], (n_modules - i - 1) * sizeof *modules);
        n_modules--;
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
            /* Only watched kernels carry a short name: entries are many (one per launched kernel). The
             * string is never freed, a reader (an async check's verdict) may hold it. */
            char *name = strdup(facts->short_name);
            info->short_name = name ? name : spec->name;
        }
        atomic_store_explicit(&info->state, state, memory_order_release);
    }
    pthread_mutex_unlock(&table_lock);
}

/* The entry's name, else the registered one of a kernel not launched yet. */
const char *lg_names_lookup(const void *func)
{
    lg_kernel_info_t *info = lg_names_info(func);
    if (info && info->mangled)
        return info->mangled;
    pthread_mutex_lock(&table_lock);
    uint32_t r = record_of_locked(func);
    const char *name = r ? REC(r - 1)->name : NULL;
    pthread_mutex_unlock(&table_lock);
    return name;
}

void lg_names_atfork_prepare(void) { pthread_mutex_lock(&table_lock); }
void lg_names_atfork_parent(void) { pthread_mutex_unlock(&table_lock); }
void lg_names_atfork_child(void) { pthread_mutex_init(&table_lock, NULL); }
