/* recent.c: each thread's last launches, read back when a device-side assert fires in a kernel
 * that labelguard did not check. CUDA returns cudaErrorAssert at some later call and never says
 * which kernel asserted; the report names the candidates instead: the launches the runtime
 * accepted on the thread that found the error (newest first) and the newest few of every other
 * launching thread (autograd's backward runs on a thread of its own).
 *
 * The entries live in the launch counter slots (counters.c: one per thread, on their own cache
 * lines, never freed, so an exited thread's launches are still there). The launch path writes
 * one with relaxed stores and no lock (lg_recent_count and lg_recent_note, inline in base.h,
 * after the real call): the thread's launch count first, then the entry, then the entry's launch
 * number with release ordering. The reader keeps an entry whose number is the one it expects and
 * whose slot the count says was not reached again while it copied. Neither side fences on the
 * launch path, so on a weakly ordered CPU (aarch64) an entry its thread rewrites during the read
 * could mix two launches; the report is read after the context died, when that thread's launches
 * fail and are no longer kept.
 * With LABELGUARD_LAUNCH_SITES=all each entry also gets the launch's Python frames (pystack.c's
 * record, about 0.1 µs for 20 frames), in an array allocated once per slot; a slot shared by two
 * threads (more than 64 launching threads) records no frames, since two writers could mix them.
 *
 * Called by preload.c (the launch hooks, any thread) and core/asserted.c (the report path).
 * Tested by tests/unit/test_recent.c (order, wrap-around, other threads' slots, sites) and end
 * to end by tests/e2e/test_device_assert.sh.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

bool lg_recent_sites;

#define SLOTS 64
static lg_py_site_t *_Atomic site_rows[SLOTS]; /* per slot: LG_RECENT records */

static int slot_index(const lg_counter_slot_t *s)
{
    int n;
    const lg_counter_slot_t *base = lg_counters_slots(&n);
    return (int)(s - base);
}

void lg_recent_record_site(lg_counter_slot_t *s, uint64_t n)
{
    int i = slot_index(s);
    if (i < 0 || i >= SLOTS || atomic_load_explicit(&s->shared, memory_order_relaxed))
        return;
    lg_py_site_t *row = atomic_load_explicit(&site_rows[i], memory_order_acquire);
    if (!row) {
        lg_py_site_t *fresh = calloc(LG_RECENT, sizeof *fresh);
        if (!fresh)
            return;
        lg_py_site_t *expected = NULL;
        if (!atomic_compare_exchange_strong(&site_rows[i], &expected, fresh)) {
            free(fresh);
            row = expected;
        } else {
            row = fresh;
        }
    }
    lg_pystack_record(&row[n & (LG_RECENT - 1)]);
}

void lg_recent_graph(const void *exec, const void *stream)
{
    lg_counters_count_graph();
    lg_recent_count(true, exec, stream, (lg_recent_dims_t){0, 0, 0, 0});
}

/* Slot s's entries from its newest back, at most max of them, into out (cap left). */
static int read_slot(const lg_counter_slot_t *s, int si, lg_recent_launch_t *out, int cap, int max)
{
    uint64_t total = __atomic_load_n((const uint64_t *)&s->launches, __ATOMIC_ACQUIRE);
    const lg_py_site_t *row = si >= 0 && si < SLOTS ? atomic_load_explicit(&site_rows[si], memory_order_acquire) : NULL;
    int k = 0;
    for (uint64_t age = 0; age < LG_RECENT && age < total && k < cap && k < max; age++) {
        uint64_t n = total - 1 - age;
        const struct lg_recent_entry *e = &s->recent[n & (LG_RECENT - 1)];
        if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != n + 1)
            continue; /* refused, being written, or already rewritten */
        lg_recent_launch_t *r = &out[k];
        r->func = (const void *)(uintptr_t)__atomic_load_n(&e->func, __ATOMIC_RELAXED);
        r->stream = (const void *)(uintptr_t)__atomic_load_n(&e->stream, __ATOMIC_RELAXED);
        uint64_t g = __atomic_load_n(&e->grid_xy, __ATOMIC_RELAXED),
                 b = __atomic_load_n(&e->block_xy, __ATOMIC_RELAXED);
        r->grid[0] = (unsigned)g, r->grid[1] = (unsigned)(g >> 32);
        r->grid[2] = __atomic_load_n(&e->grid_z, __ATOMIC_RELAXED);
        r->block[0] = (unsigned)b, r->block[1] = (unsigned)(b >> 32);
        r->block[2] = __atomic_load_n(&e->block_z, __ATOMIC_RELAXED);
        r->graph = r->grid[2] == 0 && r->block[2] == 0; /* a launch the runtime accepted has neither 0 */
        r->has_site = false;
        if (row && !atomic_load_explicit(&s->shared, memory_order_relaxed)) {
            memcpy(&r->site, &row[n & (LG_RECENT - 1)], sizeof r->site);
            r->has_site = r->site.n > 0;
        }
        /* Rewritten meanwhile: the writer counts launch n + LG_RECENT before it stores over it. */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n((const uint64_t *)&s->launches, __ATOMIC_RELAXED) > n + LG_RECENT)
            continue;
        r->tid = atomic_load_explicit(&s->tid, memory_order_relaxed);
        r->shared_slot = atomic_load_explicit(&s->shared, memory_order_relaxed);
        r->age = (int)age;
        k++;
    }
    return k;
}

int lg_recent_read(lg_recent_launch_t *out, int cap, int per_other, int *n_mine)
{
    int n_slots;
    const lg_counter_slot_t *slots = lg_counters_slots(&n_slots);
    const lg_counter_slot_t *mine = lg_counters_my_slot;
    int k = 0;
    if (mine)
        k += read_slot(mine, (int)(mine - slots), out, cap, LG_RECENT);
    *n_mine = k;
    for (int i = 0; i < n_slots && k < cap; i++)
        if (&slots[i] != mine)
            k += read_slot(&slots[i], i, out + k, cap - k, per_other);
    return k;
}
