/* counters.c: the launch counters of the summary event and labelguard_counters(): launches
 * (one slot per thread), watched launches, those validated, and those that ran unchecked.
 *
 * Who calls it: the launch fast path of preload.c and launch.c (lg_counters_count_launch,
 * inline in base.h, on the launching thread), launch.c and api_check.c for the watched
 * counts (any thread), act.c to read them all (lg_act_counters adds the checks' own figures).
 * Lock-free: relaxed atomics, a per-thread slot on its own cache line. Nothing to do at fork:
 * the child counts on from the parent's figures, as before the fork.
 *
 * Tested by tests/unit/test_launch.c (the counts a launch adds) and end to end through the
 * summary event (tests/e2e); the fast path's cost by `make bench`.
 */
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

/* Per-thread slots on their own cache lines: counting every launch must not make 16 launching
 * threads fight over one line. Summed only for the summary event. */
#define COUNTER_SLOTS 64
static lg_counter_slot_t launch_slots[COUNTER_SLOTS];
static _Atomic unsigned next_slot;
LG_TLS lg_counter_slot_t *lg_counters_my_slot;

static _Atomic uint64_t watched, validated, graphs;
/* Watched launches that ran without a check (every warn_unchecked, whatever the reason). */
static _Atomic uint64_t unchecked;

lg_counter_slot_t *lg_counters_assign_slot(void)
{
    unsigned i = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    lg_counter_slot_t *s = &launch_slots[i % COUNTER_SLOTS];
    if (i < COUNTER_SLOTS)
        atomic_store_explicit(&s->tid, (int)syscall(SYS_gettid), memory_order_relaxed);
    else
        atomic_store_explicit(&s->shared, 1, memory_order_relaxed);
    lg_counters_my_slot = s;
    return s;
}

lg_counter_slot_t *lg_counters_slots(int *n)
{
    unsigned used = atomic_load_explicit(&next_slot, memory_order_relaxed);
    *n = used < COUNTER_SLOTS ? (int)used : COUNTER_SLOTS;
    return launch_slots;
}

void lg_counters_count_watched(void) { atomic_fetch_add(&watched, 1); }

void lg_counters_count_validated(void) { atomic_fetch_add(&validated, 1); }

void lg_counters_count_unchecked(void) { atomic_fetch_add(&unchecked, 1); }

void lg_counters_count_graph(void) { atomic_fetch_add_explicit(&graphs, 1, memory_order_relaxed); }

void lg_counters_count_check(bool validated_too)
{
    atomic_fetch_add(&watched, 1);
    if (validated_too)
        atomic_fetch_add(&validated, 1);
}

void lg_counters_read(lg_counters_t *out)
{
    uint64_t n = 0;
    for (int i = 0; i < COUNTER_SLOTS; i++)
        n += atomic_load_explicit(&launch_slots[i].launches, memory_order_relaxed);
    uint64_t g = atomic_load_explicit(&graphs, memory_order_relaxed);
    out->launches = n > g ? n - g : 0;
    out->watched = atomic_load(&watched);
    out->validated = atomic_load(&validated);
    out->unchecked = atomic_load(&unchecked);
    out->violations = 0;
    out->validate_ns_total = 0;
    out->host_fallbacks = 0;
}
