/* names.c: kernel handle / host stub -> mangled name and per-kernel classification cache.
 *
 * Written from __cudaRegisterFunction and __cudaGetKernel (preload.c), which run inside other
 * libraries' constructors, before our own constructor: so the table is plain zeroed static
 * memory plus a statically initialised mutex, usable with no initialisation at all.
 * Read on every kernel launch (preload.c, launch.c) from any thread, without a lock;
 * classify.c publishes what it learned once per kernel (lg_names_publish): that lookup is the
 * whole cost of an unwatched launch (preload.c's fast path). Tested through tests/fakecuda/
 * test_registration.sh and every e2e test.
 *
 * Open addressing on the pointer value; a slot's key is published with release ordering after
 * its entry is complete, so a reader that sees the key sees a complete entry. Entries are never
 * removed: a module unloaded by dlclose leaves its entries behind (names are copied, so they
 * stay valid), which costs a little memory and nothing else.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TABLE_SIZE     LG_NAMES_SIZE
#define TABLE_MAX_FILL (TABLE_SIZE / 4 * 3)

lg_names_slot_t lg_names_table[LG_NAMES_SIZE];
#define table lg_names_table
static unsigned table_fill;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
#define hash_ptr lg_names_hash

/* Caller holds table_lock. Returns the existing or a new entry; NULL when the table is full
 * or out of memory (the kernel then goes through the slow path on each launch, still correct). */
static lg_kernel_info_t *insert_locked(const void *func)
{
    uint32_t i = hash_ptr(func);
    for (;;) {
        const void *k = atomic_load_explicit(&table[i].key, memory_order_relaxed);
        if (k == func)
            return atomic_load_explicit(&table[i].info, memory_order_relaxed);
        if (!k)
            break;
        i = (i + 1) & (TABLE_SIZE - 1);
    }
    if (table_fill >= TABLE_MAX_FILL)
        return NULL;
    lg_kernel_info_t *info = calloc(1, sizeof *info);
    if (!info)
        return NULL;
    info->func = func;
    atomic_store_explicit(&table[i].info, info, memory_order_relaxed);
    atomic_store_explicit(&table[i].key, func, memory_order_release);
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

/* Names are copied: the registering module may be unloaded while its entry stays. */
static void set_name_locked(lg_kernel_info_t *info, const char *mangled)
{
    if (!info || !mangled || info->mangled)
        return;
    info->mangled = strdup(mangled);
}

void lg_names_record_function(const void *host_stub, const char *mangled)
{
    if (!host_stub || !mangled)
        return;
    pthread_mutex_lock(&table_lock);
    set_name_locked(insert_locked(host_stub), mangled);
    pthread_mutex_unlock(&table_lock);
}

void lg_names_record_kernel(const void *handle, const void *host_stub)
{
    if (!handle || handle == host_stub)
        return;
    pthread_mutex_lock(&table_lock);
    lg_kernel_info_t *stub = insert_locked(host_stub);
    lg_kernel_info_t *h = insert_locked(handle);
    if (stub && h && stub->mangled)
        set_name_locked(h, stub->mangled);
    pthread_mutex_unlock(&table_lock);
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
        memcpy(info->short_name, facts->short_name, sizeof info->short_name);
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
