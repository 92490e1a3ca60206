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

void lg_validate_defer_after_fork(void)
{
    /* The parent's host functions never run in the child, and verdicts.c drops the parent's
     * checks: the child starts with no ring (the parent's stay allocated, unused). */
    pthread_mutex_init(&lock, NULL);
    n_rings = 0;
}
