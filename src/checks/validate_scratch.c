/* validate_scratch.c: the memory the GPU backend's validator kernels work in (accumulators,
 * candidates, verdict ring, sanitized copy), kept per (context, stream, thread), and the GPU
 * backend's one lock, which guards this table, the backend's decision (validate_gpu.c) and the
 * module table (validate_module.c).
 *
 * Scratch is made at start for the default stream (lg_validate_scratch_preallocate), grown with
 * a backoff when refused (allocation_failed); a caller it cannot serve sends the check to the
 * host backend. A sanitized copy the device has no memory for goes to mapped pinned host memory
 * instead. Threads share a stream (PyTorch's default stream is every thread's, and autograd's
 * backward runs on a thread of its own), and a validator of another thread enqueued between
 * this thread's validator and its loss launch would rewrite the sanitized copy that loss is
 * about to read; one thread's launches are enqueued in its program order, so each copy is read
 * before that thread's next validator writes it. Nothing is ever freed: a kernel still in
 * flight, or a CUDA graph captured with a launch of ours, may read it at any later time;
 * instead the table is bounded (MAX_STREAM_SCRATCH, MAX_CAPTURED_SCRATCH). Launches captured
 * into a graph get scratch of their own that no other launch touches, so each replay publishes
 * its own verdict. Captured scratch no graph or exec holds any more (retired,
 * validate_gpu_graph.c) is handed to the next captured launch once its ring has published the
 * runs queued on it; freeing it instead would synchronize the device (cuMemFree), possibly
 * inside the application's capture. So cudagraph trees, which capture a graph per new shape and
 * destroy the old ones, stay within the bound.
 *
 * Called by validate_gpu.c (launches, start) and validate_gpu_graph.c (a second exec's
 * scratch, retiring), with the lock held (lg_validate_scratch_lock) and in relaxed capture mode.
 * Tested by tests/unit/test_gpu_driver.c (fake driver: refused scratch memory and backoff; the
 * sanitized copy in mapped pinned memory; the bounded table; copies per thread; captured
 * scratch reused over 10,000 capture / instantiate / replay / destroy cycles).
 */
#include "lg_validate.h"
#include "checks/checks.h"
#include "checks/validate_gpu.h"

#include <cuda.h> /* driver types only: the functions come from dlsym */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lg_scratch scratch_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void lg_validate_scratch_lock(void) { pthread_mutex_lock(&lock); }
void lg_validate_scratch_unlock(void) { pthread_mutex_unlock(&lock); }

/* Scratch memory is cuMemAlloc'd outside the application's allocator (PyTorch's caching
 * allocator holds most of a busy GPU), so near a full GPU it is refused. Then the check goes to
 * the host backend instead, and new allocations are retried only after `backoff` more GPU
 * checks, doubling up to BACKOFF_MAX while they keep failing. All under `lock`. */
#define BACKOFF_MAX          4096
/* Scratch is never freed (an in-flight kernel or a graph may still use it), so the table is
 * bounded: a process that checks on more (stream, thread) pairs (or captures more checked
 * launches) than this sends the rest to the host backend (validate_gpu.c counts them and says
 * so once). A stream handle the runtime reuses after cudaStreamDestroy finds its predecessor's
 * scratch. */
#define MAX_STREAM_SCRATCH   256
#define MAX_CAPTURED_SCRATCH 4096
#define PREALLOC_COPY        (1u << 20) /* sanitized-copy area made at start: 128 Ki int64 labels */
static uint64_t attempts, retry_at, backoff = 1;

static bool may_allocate(void) { return attempts >= retry_at; }
static void allocation_failed(void)
{
    retry_at = attempts + backoff;
    backoff = backoff < BACKOFF_MAX ? backoff * 2 : BACKOFF_MAX;
}

static scratch_t **scratches;
static int n_scratches, cap_scratches;

/* Allocates device memory outside the rules of a capture in progress on this thread (as
 * PyTorch's allocator does): relaxed mode lets cuMemAlloc run during global capture. */
static CUresult alloc_dev(CUdeviceptr *p, size_t n)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_validate_module_drv.exchange_capture_mode(&mode);
    CUresult r = lg_validate_module_drv.mem_alloc(p, n);
    lg_validate_module_drv.exchange_capture_mode(&mode);
    return r;
}

static int scratch_init(scratch_t *s, lg_module_t *m, int samples, char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult r;
    lg_scan_state_t init;
    memset(&init, 0, sizeof init);
    init.min = INT64_MAX;
    init.max = INT64_MIN;
    init.first_zero = INT64_MAX;
    int cap = samples > 0 ? samples : 1;
    if ((r = alloc_dev(&s->state, sizeof(lg_scan_state_t))) != CUDA_SUCCESS ||
        (r = alloc_dev(&s->cand, (size_t)m->max_grid * (size_t)cap * sizeof(lg_sample_t))) != CUDA_SUCCESS ||
        (r = alloc_dev(&s->cand_count, (size_t)m->max_grid * sizeof(int))) != CUDA_SUCCESS)
        goto fail;
    s->cand_samples = cap;
    lg_validate_module_drv.exchange_capture_mode(&mode);
    r = lg_validate_module_drv.mem_host_alloc((void **)&s->ring, sizeof(lg_scan_ring_t),
                                              CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        memset(s->ring, 0, sizeof *s->ring);
        r = lg_validate_module_drv.mem_host_get_device_pointer(&s->ring_dev, s->ring, 0);
    }
    /* Our own non-blocking stream: neither ordered after the application's work nor part of
     * any capture; the copy's source lives on our stack, hence the wait. */
    if (r == CUDA_SUCCESS)
        r = lg_validate_module_drv.memcpy_htod_async(s->state, &init, sizeof init, m->init_stream);
    if (r == CUDA_SUCCESS)
        r = lg_validate_module_drv.stream_synchronize(m->init_stream);
    lg_validate_module_drv.exchange_capture_mode(&mode);
    if (r != CUDA_SUCCESS)
        goto fail;
    return 0;
fail:
    snprintf(why, why_len, "allocating validator scratch memory failed: %s", lg_validate_module_error(r));
    return -1;
}

/* Captured scratch handed back (retired) whose last replay has run, in this context: the one
 * with the smallest sanitized-copy area that holds `copy_bytes`, else any. NULL when none.
 * Caller holds `lock`. */
static scratch_t *reusable(const lg_module_t *m, size_t copy_bytes)
{
    scratch_t *best = NULL;
    for (int i = 0; i < n_scratches; i++) {
        scratch_t *c = scratches[i];
        if (!c->retired || c->ctx != m->ctx || c->ctx_id != m->ctx_id ||
            __atomic_load_n(&c->ring->latest, __ATOMIC_ACQUIRE) < c->due)
            continue;
        bool fits = c->copy_bytes >= copy_bytes, best_fits = best && best->copy_bytes >= copy_bytes;
        if (!best || (fits && (!best_fits || c->copy_bytes < best->copy_bytes)))
            best = c;
    }
    return best;
}

/* The scratch of (ctx, stream, calling thread), created on first use; `captured`: one that no
 * other launch uses while a graph or exec holds it, a retired one whose replays have all run if
 * there is one (`copy_bytes`: the sanitized copy it should hold), else a fresh one. A thread id
 * the system reuses after its thread ended finds that thread's scratch, whose last loss launch
 * is ahead of anything enqueued now on the stream. Caller holds `lock`. */
static scratch_t *scratch_for(lg_module_t *m, CUstream stream, bool captured, int samples, size_t copy_bytes, char *why,
                              size_t why_len)
{
    if (stream == CU_STREAM_LEGACY)
        stream = NULL;
    pthread_t self = captured ? (pthread_t)0 : pthread_self();
    scratch_t *s = NULL;
    if (!captured) {
        for (int i = 0; i < n_scratches; i++) {
            scratch_t *c = scratches[i];
            if (!c->captured && c->ctx == m->ctx && c->ctx_id == m->ctx_id && c->stream == stream &&
                pthread_equal(c->thread, self)) {
                s = c;
                break;
            }
        }
    } else if ((s = reusable(m, copy_bytes))) {
        /* Its accumulators are back at their identities (the last block of each run resets
         * them) and its run count equals the ring's latest: the new check counts on from it. */
        s->retired = false;
        s->stream = stream;
    }
    if (!s) {
        if (!may_allocate()) {
            snprintf(why, why_len, "validator scratch memory was refused recently; retrying later");
            return NULL;
        }
        int kept = 0;
        for (int i = 0; i < n_scratches; i++)
            kept += scratches[i]->captured == captured;
        if (kept >= (captured ? MAX_CAPTURED_SCRATCH : MAX_STREAM_SCRATCH)) {
            snprintf(why, why_len,
                     captured ? "%d captured launches already have validator scratch of their own (it is kept while a "
                                "graph may replay them)"
                              : "%d (stream, thread) pairs already have validator scratch (kept for each thread "
                                "and stream a check ran on)",
                     kept);
            return NULL;
        }
        if (n_scratches == cap_scratches) {
            int nc = cap_scratches ? cap_scratches * 2 : 16;
            scratch_t **n = realloc(scratches, (size_t)nc * sizeof *n);
            if (!n) {
                snprintf(why, why_len, "out of memory for the validator's stream table");
                return NULL;
            }
            scratches = n;
            cap_scratches = nc;
        }
        s = calloc(1, sizeof *s);
        if (!s) {
            snprintf(why, why_len, "out of memory for validator scratch");
            return NULL;
        }
        s->ctx = m->ctx;
        s->ctx_id = m->ctx_id;
        s->stream = stream;
        s->thread = self;
        s->captured = captured;
        if (scratch_init(s, m, samples, why, why_len) != 0) {
            free(s); /* the device buffers that did get allocated are leaked: rare, small */
            allocation_failed();
            return NULL;
        }
        scratches[n_scratches++] = s;
    }
    if (samples > s->cand_samples) {
        /* LABELGUARD_SAMPLES is fixed per process, so this happens at most once in practice;
         * the old area stays allocated because an earlier launch may still be writing it. */
        CUdeviceptr c;
        CUresult r = alloc_dev(&c, (size_t)m->max_grid * (size_t)samples * sizeof(lg_sample_t));
        if (r != CUDA_SUCCESS) {
            snprintf(why, why_len, "allocating validator candidates failed: %s", lg_validate_module_error(r));
            return NULL;
        }
        s->cand = c;
        s->cand_samples = samples;
    }
    return s;
}

/* Grows the sanitized-copy area to hold `bytes`: half again as much where that is granted, else
 * exactly `bytes`. Grown, never freed: an in-flight or captured loss kernel may read the old
 * one. Caller holds `lock`. */
int lg_validate_scratch_grow_copy(scratch_t *s, size_t bytes, char *why, size_t why_len)
{
    if (!may_allocate()) {
        snprintf(why, why_len, "GPU memory for the sanitized copy was refused recently; retrying later");
        return -1;
    }
    size_t want = s->captured ? bytes : (bytes < 4096 ? 4096 : bytes + bytes / 2);
    CUdeviceptr c;
    CUresult r = alloc_dev(&c, want);
    if (r != CUDA_SUCCESS && want > bytes)
        r = alloc_dev(&c, want = bytes);
    void *pinned = NULL;
    if (r != CUDA_SUCCESS) {
        /* No device memory left: mapped pinned host memory, which the validator writes and the
         * loss kernel reads over the bus. Slower, but mask still masks; failing here would
         * block the launch instead, which under DDP hangs the other ranks. */
        CUresult rh =
            lg_validate_module_drv.mem_host_alloc(&pinned, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (rh == CUDA_SUCCESS)
            rh = lg_validate_module_drv.mem_host_get_device_pointer(&c, pinned, 0); /* DEVICEMAP: not refused */
        if (rh != CUDA_SUCCESS) {
            allocation_failed();
            snprintf(why, why_len,
                     "allocating %zu bytes for the sanitized copy failed: %s (and mapped pinned host memory too)", want,
                     lg_validate_module_error(r));
            return -1;
        }
        want = bytes;
    }
    backoff = 1;
    s->copy = c;
    s->copy_bytes = want;
    s->copy_pinned = pinned;
    return 0;
}

/* At start, while the GPU is still empty: the starting thread's scratch of the legacy default
 * stream (where PyTorch's current stream is unless changed; the thread whose first CUDA call
 * starts the library is most often the one that runs the forward), with a sanitized-copy area.
 * Other threads get theirs at their first check. A refusal here only
 * starts the backoff. Caller holds `lock`. */
void lg_validate_scratch_preallocate(void)
{
    CUcontext ctx = NULL;
    char why[256];
    if (lg_validate_module_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    lg_module_t *m = lg_validate_module_for(ctx, why, sizeof why);
    if (!m)
        return;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_validate_module_drv.exchange_capture_mode(&mode);
    /* One sample per block: the first check grows the candidate area to LABELGUARD_SAMPLES. */
    scratch_t *s = scratch_for(m, NULL, false, 1, 0, why, sizeof why);
    if (s && s->copy_bytes < PREALLOC_COPY)
        (void)lg_validate_scratch_grow_copy(s, PREALLOC_COPY, why, sizeof why);
    lg_validate_module_drv.exchange_capture_mode(&mode);
}

scratch_t *lg_validate_scratch_for(lg_module_t *m, CUstream stream, bool captured, int samples, size_t copy_bytes,
                                   char *why, size_t why_len)
{
    attempts++;
    return scratch_for(m, stream, captured, samples, copy_bytes, why, why_len);
}

scratch_t *lg_validate_scratch_captured(const struct lg_scan_ring *ring)
{
    for (int i = 0; i < n_scratches; i++)
        if (scratches[i]->captured && scratches[i]->ring == ring)
            return scratches[i];
    return NULL;
}

/* The parent's CUDA objects mean nothing in a fork child (CUDA does not survive fork), and
 * the lock may have been held by a parent thread that does not exist there. The table is
 * dropped, not freed: its memory belonged to the parent's contexts. */
void lg_validate_scratch_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_scratches = 0;
}
