/* verdicts.c: the queue of async checks whose verdict has not been read yet. validate.c adds
 * one per async launch (lg_verdicts_add); launch.c collects them at every hook point
 * (lg_verdicts_collect), oldest first, clean ones included so they leave the queue. A check
 * captured into a CUDA graph never leaves: every replay publishes one more verdict, read from
 * the GPU backend's ring. The count of queued checks is what the hooks test on every call
 * (lg_verdicts_pending, inline), so a captured loss kernel keeps them polling.
 *
 * Any thread; one mutex. Fork: the child drops the parent's checks (lg_verdicts_after_fork).
 * Tested by tests/unit/test_scan.c (host backend) and tests/gpu/test_validator.cu (the ring).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/lg_validate.h"
#include "internal.h"

_Atomic int lg_verdicts_outstanding;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int n_pendings;

typedef lg_pending_t pending_t;

static pending_t **pendings;
static int cap_pendings;

int lg_verdicts_add(pending_t *p)
{
    pthread_mutex_lock(&lock);
    if (n_pendings == cap_pendings) {
        int nc = cap_pendings ? cap_pendings * 2 : 16;
        pending_t **n = realloc(pendings, (size_t)nc * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        pendings = n;
        cap_pendings = nc;
    }
    pendings[n_pendings++] = p;
    __atomic_store_n(&lg_verdicts_outstanding, n_pendings, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* What pending check p says now: 1 and r filled when a report is due, 0 when not yet;
 * *done when p is finished for good. Caller holds `lock`. */
static int pending_poll(pending_t *p, lg_async_report_t *r, bool *done)
{
    *done = false;
    r->info = p->cookie;
    r->stream = p->stream;
    r->target = p->target;
    if (!p->s) {
        r->verdict = p->verdict;
        *done = true;
        return 1;
    }
    if (!p->repeating) {
        int got = lg_validate_gpu_ring_read(p->s, p->seq, &r->verdict);
        if (got == 0)
            return 0;
        if (got < 0) {
            lg_scan_clear(&r->verdict);
            r->verdict.checked = -1;
        }
        *done = true;
        return 1;
    }
    /* Captured launch: report the first bad replay not reported yet, or one clean report for
     * all new clean replays. Replays older than the ring are gone. */
    uint64_t latest = lg_validate_gpu_ring_latest(p->s);
    if (latest < p->seq)
        return 0;
    uint64_t first = p->seq;
    if (latest >= LG_RING_SLOTS && first < latest - LG_RING_SLOTS + 1)
        first = latest - LG_RING_SLOTS + 1;
    for (uint64_t k = first; k <= latest; k++) {
        if (lg_validate_gpu_ring_read(p->s, k, &r->verdict) == 1 && r->verdict.bad_count) {
            p->seq = k + 1;
            return 1;
        }
    }
    p->seq = latest + 1;
    lg_scan_clear(&r->verdict);
    return 1;
}

bool lg_verdicts_collect(lg_async_report_t *r)
{
    bool found = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_pendings && !found; i++) {
        bool done;
        if (pending_poll(pendings[i], r, &done) != 1)
            continue;
        found = true;
        if (done) {
            free(pendings[i]);
            /* Keep launch order: the oldest checks are looked at first. */
            memmove(&pendings[i], &pendings[i + 1], (size_t)(n_pendings - i - 1) * sizeof pendings[0]);
            n_pendings--;
            __atomic_store_n(&lg_verdicts_outstanding, n_pendings, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void lg_verdicts_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_pendings = 0;
    __atomic_store_n(&lg_verdicts_outstanding, 0, __ATOMIC_RELAXED);
}
