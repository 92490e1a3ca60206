/* verdicts.c: the checks whose verdict is read after their launch: async-mode checks, and the
 * replays of loss launches captured into a CUDA graph (one entry per replay, added by
 * graphs.c at cudaGraphLaunch). Each belongs to the thread that made the launch (or the graph
 * launch): only that thread collects it, so its error reaches the thread whose CUDA calls
 * PyTorch checks, not a thread that happens to poll cudaGetLastError (the caching allocator,
 * the NCCL watchdog). When that thread has exited, its checks are orphans, collected at the
 * next synchronizing call on their stream by any thread.
 *
 * The hooks test `lg_verdicts_mine` (a thread-local count of the calling thread's checks) on
 * every launch and error query, and `lg_verdicts_orphans` (one relaxed load) at synchronizing
 * calls: with nothing outstanding neither takes a lock. While the calling thread's oldest check
 * is not yet published, its launches and error queries compare that check's seq with its ring's
 * `latest` (lg_verdicts_due, thread-locals kept here), still without a lock. The queue itself
 * has one mutex.
 *
 * No verdict is dropped because its ring slot was reused: a ring holds LG_RING_SLOTS runs, and
 * before a run is enqueued whose slot an outstanding check's run holds, that check gets its
 * verdict copied out of the ring (lg_verdicts_keep), after a wait for its stream when the run is
 * not published yet: the GPU backend and validate_defer.c before each eager run, lg_verdicts_add
 * after each graph replay it queues (for the next replay, which the hook enqueues before it can
 * look). A verdict that even the wait cannot bring (the stream failed, a replay launched into
 * a capture, an exec that no longer publishes) is given up: collected as lost (checked -1), which
 * launch.c reports (verdict_lost). So a graph replay's entries stay bounded by its ring's size.
 *
 * Rings are the GPU validator's (mapped pinned memory), a captured host node's, or the host
 * backend's eager async checks' (validate_defer.c, written by lg_verdicts_ring_write from a host
 * function on the launch's stream).
 *
 * Called by validate.c and graphs.c (add) and launch.c (collect), on application threads.
 * Exit: lg.c's atexit handler waits a little for unpublished runs, takes every thread's checks
 * (LG_COLLECT_EXIT) and closes the queue: no ring is read after that, CUDA's teardown may unmap
 * them. Fork: the child drops the parent's checks. Tested by tests/unit/test_scan.c (the queue,
 * ownership), tests/unit/test_verdicts.c (what the hooks read while a check is outstanding),
 * tests/unit/test_graphs.c (the bound), tests/unit/test_ring.c (slots kept before reuse, a
 * device far behind) and tests/e2e/test_delivery.sh, test_graphs.sh, test_ring_pressure.sh (end
 * to end).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lg_validate.h"
#include "checks/checks.h"

LG_TLS int lg_verdicts_mine;
LG_TLS const lg_pending_t *lg_verdicts_wait;
_Atomic int lg_verdicts_orphans;
_Atomic int lg_verdicts_closed;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static lg_pending_t **pendings;
static int n_pendings, cap_pendings;

/* Threads are told apart by a serial number, not a pthread_t or tid, which a later thread
 * may reuse. The key's destructor tells the queue when a thread with checks exits. */
static _Atomic uint64_t next_owner;
static LG_TLS uint64_t my_owner;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;

static void thread_gone(void *value)
{
    uint64_t id = (uint64_t)(uintptr_t)value;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_pendings; i++)
        if (pendings[i]->owner == id) {
            pendings[i]->owner = 0;
            __atomic_fetch_add(&lg_verdicts_orphans, 1, __ATOMIC_RELAXED);
        }
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { key_ok = pthread_key_create(&exit_key, thread_gone) == 0; }

static uint64_t owner_id(void)
{
    if (LG_LIKELY(my_owner))
        return my_owner;
    my_owner = __atomic_add_fetch(&next_owner, 1, __ATOMIC_RELAXED);
    pthread_once(&key_once, make_key);
    if (key_ok)
        pthread_setspecific(exit_key, (void *)(uintptr_t)my_owner);
    return my_owner;
}

/* Points the calling thread's hooks at its oldest check (lg_verdicts_due). Caller holds `lock`. */
static void wait_for_oldest(uint64_t me)
{
    lg_verdicts_wait = NULL;
    for (int i = 0; me && i < n_pendings; i++) {
        const lg_pending_t *p = pendings[i];
        if (p->owner != me)
            continue;
        if (p->ring)
            lg_verdicts_wait = p;
        return;
    }
}

/* The checks of `ring` whose run shares a slot with run `next` (LG_RING_SLOTS or more runs
 * older): a published verdict is copied into its check, which no longer reads the ring; one
 * already overwritten is marked lost, and so is one not published yet when give_up is set, but
 * only the calling thread's or an exited thread's (another live thread's own hooks wait for
 * it). Returns how many are not published yet and kept waiting. Caller holds `lock`. */
static int keep_locked(const lg_scan_ring_t *ring, uint64_t next, bool give_up)
{
    int waiting = 0;
    bool changed = false;
    for (int i = 0; i < n_pendings; i++) {
        lg_pending_t *q = pendings[i];
        if (q->ring != ring || q->seq + LG_RING_SLOTS > next)
            continue;
        int got = lg_verdicts_ring_read(ring, q->seq, &q->verdict);
        if (got == 0 && (!give_up || (q->owner && q->owner != my_owner))) {
            waiting++;
            continue;
        }
        if (got != 1) {
            lg_scan_clear(&q->verdict);
            q->verdict.checked = -1;
        }
        q->ring = NULL; /* final: collected as any other, in launch order */
        changed = true;
    }
    if (changed)
        wait_for_oldest(my_owner);
    return waiting;
}

int lg_verdicts_keep(const struct lg_scan_ring *ring, uint64_t next, bool give_up)
{
    /* An eager ring is one thread's: only its checks, or an exited thread's, are in it. */
    if (!ring || next <= LG_RING_SLOTS || (lg_verdicts_mine == 0 && !lg_verdicts_orphaned()))
        return 0;
    pthread_mutex_lock(&lock);
    int waiting = __atomic_load_n(&lg_verdicts_closed, __ATOMIC_RELAXED) ? 0 : keep_locked(ring, next, give_up);
    pthread_mutex_unlock(&lock);
    return waiting;
}

/* Waits for `stream` on the calling thread, where that can end: not while it captures (a graph
 * launched into a capture is a node; nothing runs). The application's error and capture mode
 * are kept (relaxed: a global-mode capture elsewhere stays valid). */
static void wait_stream(void *stream)
{
    const lg_runtime_t *rt = lg_runtime_get();
    unsigned long long id = 0;
    if (!rt || !rt->stream_synchronize || lg_runtime_capture_status(rt, stream, &id) != 0)
        return;
    lg_runtime_in_library++;
    int saved = lg_runtime_save_error(rt);
    int mode = lg_runtime_relax_capture(rt);
    (void)rt->stream_synchronize(stream);
    lg_runtime_restore_capture(rt, mode);
    lg_runtime_restore_error(rt, saved);
    lg_runtime_in_library--;
}

/* A graph replay was queued as run p->seq of its check's ring, and the hook enqueues the next
 * replay before it can look again: the run that replay's slot holds is read now, after a wait
 * for the replay's stream if it is not published yet. CUDA orders the launches of one exec,
 * so the wait brings every earlier replay of it; what it does not bring never comes (an exec
 * changed with cudaGraphExecUpdate, a host node that could not allocate, a replay captured
 * into another graph) and is given up rather than kept forever. The caller (graphs.c) holds its
 * own lock, never this one, across the wait. Caller holds `lock`, which it still holds after. */
static void keep_for_next_replay(const lg_pending_t *p)
{
    if (p->seq + 1 <= LG_RING_SLOTS || __atomic_load_n(&lg_verdicts_closed, __ATOMIC_RELAXED) ||
        keep_locked(p->ring, p->seq + 1, false) == 0)
        return;
    const lg_scan_ring_t *ring = p->ring;
    uint64_t next = p->seq + 1; /* p may be collected by another thread while unlocked */
    void *stream = p->stream;
    pthread_mutex_unlock(&lock);
    wait_stream(stream);
    pthread_mutex_lock(&lock);
    if (!__atomic_load_n(&lg_verdicts_closed, __ATOMIC_RELAXED))
        keep_locked(ring, next, true);
}

int lg_verdicts_add(lg_pending_t *p)
{
    p->owner = owner_id();
    p->latest = p->ring ? &p->ring->latest : NULL;
    pthread_mutex_lock(&lock);
    if (n_pendings == cap_pendings) {
        int nc = cap_pendings ? cap_pendings * 2 : 16;
        lg_pending_t **n = realloc(pendings, (size_t)nc * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        pendings = n;
        cap_pendings = nc;
    }
    pendings[n_pendings++] = p;
    lg_verdicts_mine++;
    if (p->graph_id && p->ring)
        keep_for_next_replay(p);
    wait_for_oldest(my_owner);
    pthread_mutex_unlock(&lock);
    return 0;
}

uint64_t lg_verdicts_ring_latest(const struct lg_scan_ring *ring)
{
    return __atomic_load_n(&ring->latest, __ATOMIC_ACQUIRE);
}

int lg_verdicts_ring_read(const lg_scan_ring_t *ring, uint64_t seq, lg_verdict_t *v)
{
    const lg_scan_ring_entry_t *e = &ring->entries[seq % LG_RING_SLOTS];
    uint64_t got = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if (got < seq)
        return 0;
    if (got > seq)
        return -1;
    v->bad_count = e->verdict.bad_count;
    v->checked = e->verdict.checked;
    v->min = e->verdict.min;
    v->max = e->verdict.max;
    int n = e->verdict.n_samples;
    n = n < 0 ? 0 : n > LG_MAX_SAMPLES ? LG_MAX_SAMPLES : n;
    memcpy(v->samples, (const void *)e->verdict.samples, (size_t)n * sizeof(lg_sample_t));
    v->n_samples = n;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    /* A later run may have reused the slot while we copied. */
    return __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == seq ? 1 : -1;
}

void lg_verdicts_ring_write(lg_scan_ring_t *ring, uint64_t seq, const lg_verdict_t *v)
{
    lg_scan_ring_entry_t *e = &ring->entries[seq % LG_RING_SLOTS];
    __atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy((void *)&e->verdict, v, sizeof *v);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&ring->latest, seq, __ATOMIC_RELEASE);
}

/* Is p this collector's to take? */
static bool takes(const lg_pending_t *p, uint64_t me, lg_collect_t scope, void *stream)
{
    if (scope == LG_COLLECT_EXIT)
        return true;
    if (p->owner)
        return p->owner == me;
    return scope == LG_COLLECT_SYNC_ALL || (scope == LG_COLLECT_SYNC_STREAM && p->stream == stream);
}

/* 1 and r filled when p's verdict is there (a run overwritten before it was read is reported
 * clean with checked = -1); 0 when not yet. Caller holds `lock`. */
static int pending_poll(const lg_pending_t *p, lg_async_report_t *r)
{
    r->info = p->cookie;
    r->stream = p->stream;
    r->target = p->target;
    r->graph_id = p->graph_id;
    r->replay = p->replay;
    r->exec = p->exec;
    r->as_is = p->as_is;
    r->site = NULL;
    r->msg = NULL;
    if (!p->ring) {
        r->verdict = p->verdict;
        return 1;
    }
    if (__atomic_load_n(&lg_verdicts_closed, __ATOMIC_RELAXED)) {
        lg_scan_clear(&r->verdict); /* its ring may be gone: the run is reported lost */
        r->verdict.checked = -1;
        return 1;
    }
    int got = lg_verdicts_ring_read(p->ring, p->seq, &r->verdict);
    if (got == 0 && __atomic_load_n(&p->ring->latest, __ATOMIC_ACQUIRE) >= p->seq) {
        /* A ring publishes its runs in order: with a later one there, this run was never
         * published (its host node could not allocate) unless it just was. */
        got = lg_verdicts_ring_read(p->ring, p->seq, &r->verdict);
        if (got == 0)
            got = -1;
    }
    if (got == 0)
        return 0;
    if (got < 0) {
        lg_scan_clear(&r->verdict);
        r->verdict.checked = -1;
    }
    return 1;
}

bool lg_verdicts_collect(lg_async_report_t *r, lg_collect_t scope, void *stream)
{
    bool found = false;
    uint64_t me = my_owner;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_pendings && !found; i++) {
        lg_pending_t *p = pendings[i];
        if (!takes(p, me, scope, stream) || pending_poll(p, r) != 1)
            continue;
        found = true;
        r->site = p->site; /* handed over */
        r->msg = p->msg;
        p->site = NULL;
        p->msg = NULL;
        if (p->owner == me && me) {
            lg_verdicts_mine--;
            free(p);
        } else if (p->owner) {
            /* A live thread's, taken at exit: left allocated (its thread-locals may point at it,
             * read without the lock) and no longer read; the process is ending. */
        } else {
            __atomic_fetch_sub(&lg_verdicts_orphans, 1, __ATOMIC_RELAXED);
            free(p);
        }
        /* Keep launch order: the oldest checks are looked at first. */
        memmove(&pendings[i], &pendings[i + 1], (size_t)(n_pendings - i - 1) * sizeof pendings[0]);
        n_pendings--;
    }
    wait_for_oldest(me);
    pthread_mutex_unlock(&lock);
    return found;
}

/* Is every outstanding run published? Caller holds `lock`. */
static bool all_published(void)
{
    for (int i = 0; i < n_pendings; i++) {
        const lg_pending_t *p = pendings[i];
        if (p->ring && __atomic_load_n(&p->ring->latest, __ATOMIC_ACQUIRE) < p->seq)
            return false;
    }
    return true;
}

void lg_verdicts_wait_published(uint64_t timeout_ns)
{
    uint64_t deadline = lg_now_ns() + timeout_ns;
    for (;;) {
        pthread_mutex_lock(&lock);
        bool done = __atomic_load_n(&lg_verdicts_closed, __ATOMIC_RELAXED) || all_published();
        pthread_mutex_unlock(&lock);
        if (done || lg_now_ns() >= deadline)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

bool lg_verdicts_outstanding(void)
{
    pthread_mutex_lock(&lock);
    bool any = n_pendings > 0;
    pthread_mutex_unlock(&lock);
    return any;
}

void lg_verdicts_close(void)
{
    pthread_mutex_lock(&lock);
    __atomic_store_n(&lg_verdicts_closed, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

void lg_verdicts_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_pendings = 0;
    lg_verdicts_mine = 0;
    lg_verdicts_wait = NULL;
    __atomic_store_n(&lg_verdicts_orphans, 0, __ATOMIC_RELAXED);
}
