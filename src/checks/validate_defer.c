/* validate_defer.c: the host backend's async verdicts, published in stream order. The host
 * backend knows a verdict at the check itself (it copied and scanned the labels), but the
 * verdict belongs to the launch: it is due when the stream reaches the check, as the GPU
 * backend's (its validator kernel publishes into its ring when the stream runs it). So the
 * verdict is handed to a host function enqueued on the launch's stream, which writes it into a
 * ring of that stream; verdicts.c reads it from there as it reads the GPU's, and collects it
 * only once it is published. Async mode then behaves alike on both backends: what the
 * application launches before the stream gets there (another forward op, a backward on
 * autograd's thread) runs before the verdict is read, as on a GPU, and the runtime test double
 * under FAKECUDA_ASYNC_US shows what a design relying on an early verdict would let through.
 *
 * One ring per (runtime, stream, thread), never freed (a queued check points at it), at most
 * MAX_RINGS; past that, or without cudaLaunchHostFunc, the verdict is final at once, as the
 * caller had it. A run's seq is taken and its host function enqueued under one lock, so each
 * ring is published in seq order (verdicts.c reads a run older than `latest` that is not there
 * as lost). Before a run reuses a slot whose run a check still waits for, that verdict is taken
 * out of the ring (lg_verdicts_keep), after a wait for the stream (relaxed mode, the caller's)
 * if it is not published yet. Each verdict is collected by its launching thread, so a ring is per thread too: on
 * a stream shared by several threads (PyTorch's default stream), one thread that is slow to
 * collect must not have its runs overwritten by the others' in a shared ring of LG_RING_SLOTS.
 * A thread that ended leaves its ring to the next thread given its id: its seq goes on.
 * The host function calls no CUDA function.
 *
 * Called by validate.c (lg_validate_async, eager checks of the host backend) on the launching
 * thread with the re-entry guard held; the host function runs on CUDA's callback thread (the
 * test double's stream worker). Tested end to end under the test double by
 * tests/e2e/test_index_backward.sh (a verdict not yet due when the next launches come) and the
 * async:* reruns of tests/run.sh; the ring bound by tests/unit/test_ring.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lg_validate.h"
#include "checks/checks.h"

#define MAX_RINGS 64

typedef struct defer_ring {
    const lg_runtime_t *rt;
    void *stream;
    pthread_t thread;
    uint64_t enqueued; /* seq of the last run handed to a host function */
    lg_scan_ring_t ring;
    unsigned char *pinned; /* torch._assert_async conditions: one slot per run, one for sync reads */
} defer_ring_t;

/* One run in flight: freed by its host function. */
typedef struct defer_run {
    lg_scan_ring_t *ring;
    uint64_t seq;
    lg_verdict_t verdict;
} defer_run_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static defer_ring_t *rings[MAX_RINGS];
static int n_rings;

static void publish(void *user)
{
    defer_run_t *run = user;
    lg_verdicts_ring_write(run->ring, run->seq, &run->verdict);
    free(run);
}

/* The calling thread's ring of (rt, stream), made on first use. Caller holds `lock`. */
static defer_ring_t *ring_of(const lg_runtime_t *rt, void *stream)
{
    pthread_t self = pthread_self();
    for (int i = 0; i < n_rings; i++)
        if (rings[i]->stream == stream && rings[i]->rt == rt && pthread_equal(rings[i]->thread, self))
            return rings[i];
    if (n_rings == MAX_RINGS)
        return NULL;
    defer_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rt = rt;
    r->stream = stream;
    r->thread = self;
    rings[n_rings++] = r;
    return r;
}

/* The seq of r's next run, once no check waits for the run whose slot it reuses. Caller holds
 * `lock` (released across a wait). */
static uint64_t next_run(defer_ring_t *r, const lg_runtime_t *rt, void *stream)
{
    uint64_t next = r->enqueued + 1;
    if (lg_verdicts_keep(&r->ring, next, false) != 0) {
        /* A check still waits for the run whose slot `next` reuses: the stream publishes
         * it first. r is this thread's and never freed; the lock is not held across. */
        pthread_mutex_unlock(&lock);
        if (rt->stream_synchronize)
            (void)rt->stream_synchronize(stream);
        pthread_mutex_lock(&lock);
        lg_verdicts_keep(&r->ring, next, true);
    }
    return next;
}

int lg_validate_defer(const lg_runtime_t *rt, void *stream, const lg_verdict_t *v, const struct lg_scan_ring **ring,
                      uint64_t *seq)
{
    if (!rt || !rt->launch_host_func)
        return -1;
    defer_run_t *run = malloc(sizeof *run);
    if (!run)
        return -1;
    run->verdict = *v;
    pthread_mutex_lock(&lock);
    defer_ring_t *r = ring_of(rt, stream);
    int rc = -1;
    if (r) {
        uint64_t next = next_run(r, rt, stream);
        /* The host function may run before the call returns (and frees run). */
        run->ring = &r->ring;
        run->seq = next;
        rc = rt->launch_host_func(stream, publish, run);
        if (rc == 0) {
            r->enqueued = next;
            *ring = &r->ring;
            *seq = next;
        } else if (rt->get_last_error) {
            rt->get_last_error();
        }
    }
    pthread_mutex_unlock(&lock);
    if (rc != 0)
        free(run);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ torch._assert_async conditions */

#define FLAG_SLOT 16 /* bytes per condition: the widest element is a complex double */

/* r's pinned slots, allocated on first use (no capture is running on this thread's stream:
 * launch.c reads no condition inside one). NULL when the runtime gives no pinned memory. */
static unsigned char *pinned_of(defer_ring_t *r)
{
    if (!r->pinned && r->rt->malloc_host) {
        void *p = NULL;
        int mode = lg_runtime_relax_capture(r->rt);
        if (r->rt->malloc_host(&p, (LG_RING_SLOTS + 1) * FLAG_SLOT) == 0)
            r->pinned = p;
        else if (r->rt->get_last_error)
            r->rt->get_last_error();
        lg_runtime_restore_capture(r->rt, mode);
    }
    return r->pinned;
}

int lg_validate_defer_read(const lg_runtime_t *rt, void *stream, uint64_t ptr, size_t n, void *out)
{
    if (!rt || !rt->memcpy_async || !rt->stream_synchronize || n > FLAG_SLOT)
        return 1;
    pthread_mutex_lock(&lock);
    defer_ring_t *r = ring_of(rt, stream);
    unsigned char *slot = r ? pinned_of(r) : NULL;
    pthread_mutex_unlock(&lock);
    if (!slot)
        return 1;
    /* The last slot is the sync reads': only this thread reads through its ring. Pinned, so the
     * copy needs no staging; cudaMemcpyDefault, so no pointer query per read. */
    slot += LG_RING_SLOTS * FLAG_SLOT;
    int mode = lg_runtime_relax_capture(rt);
    int rc = rt->memcpy_async(slot, (const void *)(uintptr_t)ptr, n, LG_MEMCPY_DEFAULT, stream);
    if (rc == 0)
        rc = rt->stream_synchronize(stream);
    lg_runtime_restore_capture(rt, mode);
    if (rc != 0)
        return -1;
    memcpy(out, slot, n);
    return 0;
}

/* One condition in flight: its slot, read by the host function the stream runs after the copy
 * (and before the assert kernel), which publishes the verdict and frees the run. */
typedef struct flag_run {
    lg_scan_ring_t *ring;
    uint64_t seq, ptr;
    const unsigned char *slot;
    lg_assert_elem_t elem;
    lg_verdict_t verdict;
} flag_run_t;

static void publish_flag(void *user)
{
    flag_run_t *run = user;
    lg_target_t t;
    lg_asserts_verdict(&run->elem, run->ptr, run->slot, &t, &run->verdict);
    lg_verdicts_ring_write(run->ring, run->seq, &run->verdict);
    free(run);
}

int lg_validate_defer_flag(const lg_runtime_t *rt, void *stream, uint64_t ptr, const lg_assert_elem_t *e,
                           struct lg_kernel_info *cookie, lg_site_t *site, const char *msg, char *why, size_t why_len)
{
    if (!rt || !rt->launch_host_func || !rt->memcpy_async || e->bytes > FLAG_SLOT) {
        snprintf(why, why_len, "the CUDA runtime lacks cudaLaunchHostFunc or cudaMemcpyAsync");
        return -1;
    }
    lg_pending_t *p = calloc(1, sizeof *p);
    flag_run_t *run = malloc(sizeof *run);
    if (!p || !run) {
        free(p);
        free(run);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    run->ptr = ptr;
    run->elem = *e;
    int rc = -1;
    pthread_mutex_lock(&lock);
    defer_ring_t *r = ring_of(rt, stream);
    unsigned char *pinned = r ? pinned_of(r) : NULL;
    if (pinned) {
        uint64_t next = next_run(r, rt, stream);
        run->ring = &r->ring;
        run->seq = next;
        run->slot = pinned + (next % LG_RING_SLOTS) * FLAG_SLOT;
        int mode = lg_runtime_relax_capture(rt);
        rc = rt->memcpy_async((void *)run->slot, (const void *)(uintptr_t)ptr, (size_t)e->bytes, LG_MEMCPY_DEFAULT,
                              stream);
        /* The host function may run before the call returns (and frees run). */
        if (rc == 0)
            rc = rt->launch_host_func(stream, publish_flag, run);
        lg_runtime_restore_capture(rt, mode);
        if (rc == 0) {
            r->enqueued = next;
            p->ring = &r->ring;
            p->seq = next;
        } else if (rt->get_last_error) {
            rt->get_last_error();
        }
    }
    pthread_mutex_unlock(&lock);
    if (rc != 0) {
        free(run);
        free(p);
        snprintf(why, why_len, "%s", pinned ? "the condition's copy could not be enqueued" : "no pinned memory");
        return -1;
    }
    /* The target names the condition's element; the verdict comes from the ring. */
    static const unsigned char one[FLAG_SLOT] = {1};
    lg_asserts_verdict(e, ptr, one, &p->target, &p->verdict);
    p->cookie = cookie;
    p->stream = stream;
    p->as_is = true; /* the assert kernel reads the condition itself: nothing stands in for it */
    p->site = lg_site_hold(site);
    p->msg = msg && msg[0] ? strdup(msg) : NULL; /* without it the op is unnamed, not wrong */
    if (lg_verdicts_add(p) != 0) {
        lg_site_drop(p->site);
        free(p->msg);
        free(p); /* the run still publishes; nobody collects it */
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    return 0;
}

void lg_validate_defer_after_fork(void)
{
    /* The parent's host functions never run in the child, and verdicts.c drops the parent's
     * checks: the child starts with no ring (the parent's stay allocated, unused). */
    pthread_mutex_init(&lock, NULL);
    n_rings = 0;
}
