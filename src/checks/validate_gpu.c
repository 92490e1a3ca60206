/* validate_gpu.c: the GPU backend of validate.c: the validator kernels (the module that
 * validate_module.c loads into each context) launched with cuLaunchKernel on the launch's own
 * stream, and the memory they work in. The verdict is
 * published by the kernel in mapped pinned memory (a ring per scratch, cuda/lg_validate.h), so
 * sync mode waits for the stream and async mode only reads memory later (verdicts.c).
 *
 * Scratch memory (accumulators, candidates, verdict ring, sanitized copies) is made at start for
 * the default stream (preallocate), grown with a backoff when refused (allocation_failed), and
 * a check it cannot serve goes to the host backend (to_host, counted in the summary). A
 * sanitized copy the device has no memory for goes to mapped pinned host memory instead. It is kept per
 * (context, stream, thread) under one mutex: threads share a stream (PyTorch's default stream
 * is every thread's, and autograd's backward runs on a thread of its own), and a validator of
 * another thread enqueued between this thread's validator and its loss launch would rewrite the
 * sanitized copy that loss is about to read; one thread's launches are enqueued in its program
 * order, so each copy is read before that thread's next validator writes it. Nothing is
 * ever freed: a kernel still in flight, or a CUDA graph captured with a launch of ours, may
 * read it at any later time; instead the table is bounded (MAX_STREAM_SCRATCH,
 * MAX_CAPTURED_SCRATCH) and checks past the bound go to the host backend. Launches captured
 * into a graph get scratch of their own that no other launch touches, so each replay publishes
 * its own verdict; a second exec of that graph gets a second set (lg_validate_gpu_rebind: the
 * exec's copies of the validator node and of the loss launch reading its sanitized copy are
 * rewritten with cuGraphExecKernelNodeSetParams), so two execs replaying at once stay apart.
 * When no graph or exec holds captured scratch any more (graphs.c, at cudaGraphDestroy and
 * cudaGraphExecDestroy: lg_validate_gpu_retire, with the runs queued on it), it is handed to
 * the next captured launch once its ring has published those runs; freeing it instead would
 * synchronize the device (cuMemFree), possibly inside the application's capture. So cudagraph
 * trees, which capture a graph per new shape and destroy the old ones, stay within the bound.
 *
 * Our driver calls run in relaxed capture mode: they must not invalidate a global-mode capture
 * the application has running on another stream (an "unsafe" call fails and poisons it), as
 * PyTorch's allocator does. Called by validate.c on the launching thread (guard held), and
 * lg_validate_gpu_ring_* by verdicts.c on any thread. Tested by tests/gpu/test_validator.cu
 * (against lg_scan_host, needs a GPU), tests/unit/test_kernel_emulation (the kernels) and
 * tests/unit/test_gpu_driver.c (fake driver: refused scratch memory, host fallback and backoff;
 * the sanitized copy in mapped pinned memory; labels on another device; the bounded table; a
 * second exec's rebinding, on a fake graph; copies per thread; captured scratch reused over
 * 10,000 capture / instantiate / replay / destroy cycles).
 */
#include "lg_validate.h"
#include "checks/checks.h"
#include "checks/validate_gpu.h"

#include <cuda.h> /* driver types only: the functions come from dlsym */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lg_scratch {
    /* key */
    CUcontext ctx;
    unsigned long long ctx_id;
    CUstream stream;
    pthread_t thread; /* the launching thread: it alone enqueues work on this scratch */
    bool captured;    /* dedicated to one captured launch; never looked up again */
    bool retired;     /* captured, and no graph or exec holds it any more (lg_validate_gpu_retire) */
    uint64_t due;     /* retired: the runs queued on it; reusable once its ring has published them */
    /* GPU memory */
    CUdeviceptr state, cand, cand_count, ring_dev, copy;
    int cand_samples; /* samples per block the candidate area holds */
    size_t copy_bytes;
    void *copy_pinned; /* host address of `copy` when it is mapped pinned host memory, else NULL */
    lg_scan_ring_t *ring; /* host view of ring_dev */
    uint64_t launched;    /* launches enqueued: the seq the next one will publish - 1 */
};
typedef struct lg_scratch scratch_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool gpu_active;
/* The start found a working driver but no CUDA context in the process (its first hook came
 * before the application's first context): the backend is decided at a later check, once a
 * context exists, rather than pinned to the host for good. */
static bool gpu_undecided;

/* Scratch memory is cuMemAlloc'd outside the application's allocator (PyTorch's caching
 * allocator holds most of a busy GPU), so near a full GPU it is refused. Then the check goes to
 * the host backend instead, and new allocations are retried only after `backoff` more GPU
 * checks, doubling up to BACKOFF_MAX while they keep failing. All under `lock`. */
#define BACKOFF_MAX    4096
/* Scratch is never freed (an in-flight kernel or a graph may still use it), so the table is
 * bounded: a process that checks on more (stream, thread) pairs (or captures more checked
 * launches) than this sends the rest to the host backend, counted in host_fallbacks and said
 * once. A stream handle the runtime reuses after cudaStreamDestroy finds its predecessor's
 * scratch. */
#define MAX_STREAM_SCRATCH   256
#define MAX_CAPTURED_SCRATCH 4096
#define PREALLOC_COPY  (1u << 20) /* sanitized-copy area made at start: 128 Ki int64 labels */
static uint64_t attempts, retry_at, backoff = 1;
static uint64_t host_fallbacks; /* __atomic */

static bool may_allocate(void) { return attempts >= retry_at; }
static void allocation_failed(void)
{
    retry_at = attempts + backoff;
    backoff = backoff < BACKOFF_MAX ? backoff * 2 : BACKOFF_MAX;
}

uint64_t lg_validate_gpu_host_fallbacks(void) { return __atomic_load_n(&host_fallbacks, __ATOMIC_RELAXED); }
static scratch_t **scratches;
static int n_scratches, cap_scratches;

/* Allocates device memory outside the rules of a capture in progress on this thread (as
 * PyTorch's allocator does): relaxed mode lets cuMemAlloc run during global capture. */
static CUresult alloc_dev(CUdeviceptr *p, size_t n)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_drv.exchange_capture_mode(&mode);
    CUresult r = lg_drv.mem_alloc(p, n);
    lg_drv.exchange_capture_mode(&mode);
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
    lg_drv.exchange_capture_mode(&mode);
    r = lg_drv.mem_host_alloc((void **)&s->ring, sizeof(lg_scan_ring_t),
                              CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        memset(s->ring, 0, sizeof *s->ring);
        r = lg_drv.mem_host_get_device_pointer(&s->ring_dev, s->ring, 0);
    }
    /* Our own non-blocking stream: neither ordered after the application's work nor part of
     * any capture; the copy's source lives on our stack, hence the wait. */
    if (r == CUDA_SUCCESS)
        r = lg_drv.memcpy_htod_async(s->state, &init, sizeof init, m->init_stream);
    if (r == CUDA_SUCCESS)
        r = lg_drv.stream_synchronize(m->init_stream);
    lg_drv.exchange_capture_mode(&mode);
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
static scratch_t *scratch_for(lg_module_t *m, CUstream stream, bool captured, int samples, size_t copy_bytes,
                              char *why, size_t why_len)
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
static int grow_copy(scratch_t *s, size_t bytes, char *why, size_t why_len)
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
        CUresult rh = lg_drv.mem_host_alloc(&pinned, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (rh == CUDA_SUCCESS)
            rh = lg_drv.mem_host_get_device_pointer(&c, pinned, 0); /* DEVICEMAP: not refused */
        if (rh != CUDA_SUCCESS) {
            allocation_failed();
            snprintf(why, why_len,
                     "allocating %zu bytes for the sanitized copy failed: %s (and mapped pinned host memory too)",
                     want, lg_validate_module_error(r));
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

/* Why the first check went to the host backend, for launch.c to report once (this file does
 * not report: the GPU tests link it without the report module). 0 none, 1 set, 2 taken. */
static char fallback_note[700];
static int fallback_state; /* __atomic */

/* A check the GPU backend could not take for want of memory goes to the host backend. */
static void to_host(bool *use_host, const char *why)
{
    *use_host = true;
    __atomic_fetch_add(&host_fallbacks, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&fallback_state, __ATOMIC_ACQUIRE) != 0)
        return;
    pthread_mutex_lock(&lock);
    if (fallback_state == 0) {
        snprintf(fallback_note, sizeof fallback_note,
                 "%.500s: this check and others like it run on the host backend (a copy and a stream sync "
                 "per launch) until GPU memory is granted again; the summary counts them (host_fallbacks)",
                 why);
        __atomic_store_n(&fallback_state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
}

const char *lg_validate_gpu_take_fallback_note(void)
{
    int expected = 1;
    return __atomic_compare_exchange_n(&fallback_state, &expected, 2, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
               ? fallback_note
               : NULL;
}

static int kernel_index(const lg_target_t *t, uint64_t copy)
{
    int base;
    switch (t->dtype) {
    case LG_DTYPE_UINT8: base = 2; break;
    case LG_DTYPE_INT32: base = 4; break;
    case LG_DTYPE_FLOAT32: base = 6; break;
    case LG_DTYPE_FLOAT16:
    case LG_DTYPE_BFLOAT16: base = 8; break;
    case LG_DTYPE_FLOAT64: base = 10; break;
    default: base = 0; break;
    }
    bool vec = t->ndim == 1 && t->strides[0] == 1 && (t->data % 16) == 0 && (copy % 16) == 0;
    return base + (vec ? 0 : 1);
}

/* Enqueues one scan. Returns 0; or -1 with why, and *use_host set when the host backend should
 * take this call instead (no current context, module not loadable). */
static int gpu_launch_body(const lg_runtime_t *rt, const lg_target_t *tin, CUstream stream, int64_t span, int samples,
                           bool want_copy, int64_t replacement, bool allow_capture, lg_gpu_run_t *out, bool *use_host,
                           char *why, size_t why_len)
{
    *use_host = false;
    lg_target_t t;
    lg_scan_normalize(tin, &t);
    if (samples > LG_MAX_SAMPLES)
        samples = LG_MAX_SAMPLES;
    if (samples < 0)
        samples = 0;

    CUcontext ctx = NULL;
    if (lg_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
        /* The runtime makes its context current lazily, at a thread's first runtime call. */
        if (rt && rt->pointer_attributes) {
            _Alignas(16) char a[256]; /* a struct cudaPointerAttributes, and room to spare */
            if (rt->pointer_attributes(a, (const void *)(uintptr_t)t.data) != 0 && rt->get_last_error)
                rt->get_last_error();
        }
        if (lg_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
            snprintf(why, why_len, "no current CUDA context on this thread");
            *use_host = true;
            return -1;
        }
    }

    /* The labels must be memory the device can read, and the whole span inside one
     * allocation: otherwise our kernel would fault and take the context down with it. */
    unsigned int mtype = 0;
    CUresult r = lg_drv.pointer_get_attribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)t.data);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "labels at 0x%llx are not CUDA memory (%s): the loss kernel cannot read them",
                 (unsigned long long)t.data, lg_validate_module_error(r));
        return -1;
    }
    /* Labels on another device (a kernel named in LABELGUARD_KERNELS may take any pointer):
     * this context's validator cannot read them, the runtime's copy can (unified addressing). */
    int ordinal = -1;
    CUdevice here = -1;
    if (mtype == CU_MEMORYTYPE_DEVICE &&
        lg_drv.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)t.data) ==
            CUDA_SUCCESS &&
        lg_drv.ctx_get_device(&here) == CUDA_SUCCESS && ordinal >= 0 && ordinal != (int)here) {
        snprintf(why, why_len, "the labels are on device %d and the current context on device %d", ordinal, (int)here);
        *use_host = true;
        return -1;
    }
    size_t bytes = (size_t)span * lg_scan_elem_size(t.dtype);
    CUdeviceptr start = 0;
    size_t range = 0;
    if (lg_drv.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)t.data) ==
            CUDA_SUCCESS &&
        lg_drv.pointer_get_attribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)t.data) == CUDA_SUCCESS &&
        range > 0 && (t.data < start || t.data - start + bytes > range)) {
        snprintf(why, why_len,
                 "the labels (%zu bytes at 0x%llx) run past the end of their allocation (%zu bytes at 0x%llx)", bytes,
                 (unsigned long long)t.data, range, (unsigned long long)start);
        return -1;
    }

    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    r = lg_drv.stream_is_capturing(stream, &cap);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuStreamIsCapturing failed: %s", lg_validate_module_error(r));
        return -1;
    }
    bool captured = cap != CU_STREAM_CAPTURE_STATUS_NONE;
    if (captured && !allow_capture) {
        snprintf(why, why_len, "the stream is capturing a CUDA graph: only async validation can run inside a capture");
        return -1;
    }

    pthread_mutex_lock(&lock);
    lg_module_t *m = lg_validate_module_for(ctx, why, why_len);
    if (!m) {
        /* The first context decides for the process: the start event must tell the truth. */
        if (lg_validate_module_count() <= 1)
            gpu_active = false;
        pthread_mutex_unlock(&lock);
        *use_host = true;
        return -1;
    }
    attempts++;
    scratch_t *s = scratch_for(m, stream, captured, samples, want_copy ? bytes : 0, why, why_len);
    if (!s) {
        pthread_mutex_unlock(&lock);
        to_host(use_host, why);
        return -1;
    }
    uint64_t copy = 0;
    if (want_copy) {
        if (s->copy_bytes < bytes && grow_copy(s, bytes, why, why_len) != 0) {
            pthread_mutex_unlock(&lock);
            to_host(use_host, why);
            return -1;
        }
        copy = s->copy;
    }

    lg_scan_params_t p;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.state = s->state;
    p.cand = s->cand;
    p.cand_count = s->cand_count;
    p.ring = s->ring_dev;
    p.copy = copy;
    p.replacement = replacement;
    p.samples = samples;
    const int64_t tile = LG_SCAN_TILE(lg_scan_elem_size(t.dtype));
    int64_t ntiles = (t.count + tile - 1) / tile;
    /* One wave of resident blocks: 4 per SM, 2 for the uint8 kernels (cuda/validate.cu). */
    int64_t max_grid = t.dtype == LG_DTYPE_UINT8 ? m->max_grid / 2 : m->max_grid;
    int64_t grid = ntiles < max_grid ? ntiles : max_grid;
    p.tiles_per_block = (ntiles + grid - 1) / grid;
    grid = (ntiles + p.tiles_per_block - 1) / p.tiles_per_block;
    void *params[] = {&p};
    r = lg_drv.launch_kernel(m->fn[kernel_index(&t, copy)], (unsigned)grid, 1, 1, LG_SCAN_THREADS, 1, 1, 0, stream,
                             params, NULL);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        snprintf(why, why_len, "launching the validator failed: %s", lg_validate_module_error(r));
        return -1;
    }
    out->s = s;
    out->seq = ++s->launched;
    out->ring = s->ring;
    out->copy = copy;
    out->captured = captured;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Our driver calls must not invalidate a global-mode capture the application has running on
 * another stream (an "unsafe" call there fails and poisons the capture), so this thread runs
 * them in relaxed mode, as PyTorch's allocator does. The mode is per thread and restored. */
int lg_validate_gpu_launch(const lg_runtime_t *rt, const lg_target_t *tin, void *stream, int64_t span, int samples,
                           bool want_copy, int64_t replacement, bool allow_capture, lg_gpu_run_t *out, bool *use_host,
                           char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_drv.exchange_capture_mode(&mode);
    int rc = gpu_launch_body(rt, tin, (CUstream)stream, span, samples, want_copy, replacement, allow_capture, out,
                             use_host, why, why_len);
    lg_drv.exchange_capture_mode(&mode);
    return rc;
}

int lg_validate_gpu_ring_read(const lg_scratch_t *s, uint64_t seq, lg_verdict_t *v)
{
    return lg_verdicts_ring_read(s->ring, seq, v);
}

/* The graph's node that runs the validator writing scratch s: a kernel node of one of m's
 * functions whose parameter block names s's accumulators and ring. 1 and *node, *kp, *p filled
 * when exactly one is; 0 when none; -1 with why on a driver failure or several. */
static int find_validator_node(CUgraph graph, const lg_module_t *m, const scratch_t *s, CUgraphNode *node,
                               CUDA_KERNEL_NODE_PARAMS_v2 *kp, lg_scan_params_t *p, char *why, size_t why_len)
{
    size_t count = 0;
    CUresult r = lg_drv.graph_get_nodes(graph, NULL, &count);
    if (r == CUDA_SUCCESS && count > LG_REBIND_MAX_NODES) {
        snprintf(why, why_len, "the graph has %zu nodes, more than the %d searched for the check's", count,
                 LG_REBIND_MAX_NODES);
        return -1;
    }
    CUgraphNode *all = count ? malloc(count * sizeof *all) : NULL;
    if (r == CUDA_SUCCESS && count && !all) {
        snprintf(why, why_len, "out of memory for the graph's node list");
        return -1;
    }
    if (r == CUDA_SUCCESS && count)
        r = lg_drv.graph_get_nodes(graph, all, &count);
    if (r != CUDA_SUCCESS) {
        free(all);
        snprintf(why, why_len, "listing the graph's nodes failed: %s", lg_validate_module_error(r));
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        CUDA_KERNEL_NODE_PARAMS_v2 k;
        memset(&k, 0, sizeof k);
        if (lg_drv.graph_node_get_type(all[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL ||
            lg_drv.graph_kernel_node_get_params(all[i], &k) != CUDA_SUCCESS || !k.kernelParams || !k.kernelParams[0])
            continue;
        bool ours = false;
        for (size_t f = 0; f < sizeof m->fn / sizeof m->fn[0] && !ours; f++)
            ours = k.func && k.func == m->fn[f];
        if (!ours)
            continue; /* only our own kernels' parameter block is known to be an lg_scan_params_t */
        lg_scan_params_t q;
        memcpy(&q, k.kernelParams[0], sizeof q);
        if (q.ring != s->ring_dev || q.state != s->state)
            continue;
        if (found++ == 0) {
            *node = all[i];
            *kp = k;
            *p = q;
        }
    }
    free(all);
    if (found > 1) {
        snprintf(why, why_len, "the check's validator node is in the graph %d times", found);
        return -1;
    }
    return found;
}

/* Does kernel function f have spec's target parameter, of spec's size? Asked where the driver
 * can say (CUDA 12.4+), so that a node that is not the loss launch is not read past its
 * parameters; else the node's place in the graph has to do. */
static bool has_target_param(CUfunction f, const lg_spec_t *spec)
{
    int param = lg_validate_loss_param(spec);
    size_t off = 0, size = 0;
    if (param < 0)
        return false;
    if (!lg_drv.func_get_param_info || !f)
        return true;
    CUresult r = lg_drv.func_get_param_info(f, (size_t)param, &off, &size);
    return r != CUDA_SUCCESS ? r == CUDA_ERROR_NOT_SUPPORTED : size == (size_t)spec->param_sizes[param];
}

/* The loss launch reading the sanitized copy at `reads`: the one kernel node that depends on
 * the validator node (the launch was enqueued right after it on the captured stream) and
 * holds `reads` where spec puts its target. 0 and *node, *kp filled, or -1 with why. */
static int find_loss_node(CUgraphNode validator, const lg_spec_t *spec, uint64_t reads, CUgraphNode *node,
                          CUDA_KERNEL_NODE_PARAMS_v2 *kp, char *why, size_t why_len)
{
    CUgraphNode deps[8];
    size_t nd = sizeof deps / sizeof *deps;
    CUresult r = lg_drv.graph_node_get_dependent_nodes(validator, deps, &nd);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "asking what follows the validator node failed: %s", lg_validate_module_error(r));
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < nd && i < sizeof deps / sizeof *deps; i++) {
        CUgraphNodeType type;
        CUDA_KERNEL_NODE_PARAMS_v2 k;
        memset(&k, 0, sizeof k);
        uint64_t at = 0;
        if (deps[i] && lg_drv.graph_node_get_type(deps[i], &type) == CUDA_SUCCESS &&
            type == CU_GRAPH_NODE_TYPE_KERNEL && lg_drv.graph_kernel_node_get_params(deps[i], &k) == CUDA_SUCCESS &&
            has_target_param(k.func, spec) && lg_validate_loss_target(spec, k.kernelParams, &at) == 0 &&
            at == reads && found++ == 0) {
            *node = deps[i];
            *kp = k;
        }
    }
    if (found != 1) {
        snprintf(why, why_len, "the loss launch reading the check's sanitized copy was not found after it (%d found)",
                 found);
        return -1;
    }
    return 0;
}

/* Caller holds `lock`; our driver calls run in relaxed capture mode (lg_validate_gpu_rebind). */
static int rebind_locked(CUgraphExec exec, CUgraph graph, scratch_t *s, const lg_spec_t *spec, uint64_t reads,
                         const struct lg_scan_ring **own, char *why, size_t why_len)
{
    if (!lg_drv.graph_get_nodes || !lg_drv.graph_node_get_type || !lg_drv.graph_node_get_dependent_nodes ||
        !lg_drv.graph_kernel_node_get_params || !lg_drv.graph_exec_kernel_node_set_params) {
        snprintf(why, why_len, "the CUDA driver lacks the graph node calls (cuGraphExecKernelNodeSetParams)");
        return -1;
    }
    CUcontext ctx = NULL;
    if (lg_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != s->ctx) {
        snprintf(why, why_len, "the exec is made in another CUDA context than the one the check was captured in");
        return -1;
    }
    lg_module_t *m = lg_validate_module_for(ctx, why, why_len);
    if (!m)
        return -1;
    CUgraphNode vnode = NULL, lnode = NULL;
    CUDA_KERNEL_NODE_PARAMS_v2 vkp, lkp;
    lg_scan_params_t p;
    int rc = find_validator_node(graph, m, s, &vnode, &vkp, &p, why, why_len);
    if (rc == 0)
        snprintf(why, why_len, "the graph's validator node was not found as captured");
    if (rc != 1)
        return -1;
    if (reads && find_loss_node(vnode, spec, reads, &lnode, &lkp, why, why_len) != 0)
        return -1;
    attempts++;
    scratch_t *s2 = scratch_for(m, s->stream, true, s->cand_samples, p.copy ? s->copy_bytes : 0, why, why_len);
    if (!s2)
        return -1;
    if (p.copy && s2->copy_bytes < s->copy_bytes && grow_copy(s2, s->copy_bytes, why, why_len) != 0) {
        s2->retired = true; /* unused: the next captured check may take it */
        s2->due = __atomic_load_n(&s2->ring->latest, __ATOMIC_ACQUIRE);
        return -1;
    }
    lg_scan_params_t p2 = p;
    p2.state = s2->state;
    p2.cand = s2->cand;
    p2.cand_count = s2->cand_count;
    p2.ring = s2->ring_dev;
    p2.copy = p.copy ? s2->copy : 0;
    void *vargs[] = {&p2};
    CUDA_KERNEL_NODE_PARAMS_v2 v2 = vkp;
    v2.kernelParams = vargs;
    v2.extra = NULL;
    CUresult r = lg_drv.graph_exec_kernel_node_set_params(exec, vnode, &v2);
    if (r == CUDA_SUCCESS && reads) {
        void *largs[LG_MAX_PARAMS];
        unsigned char value[LG_RETARGET_MAX];
        CUDA_KERNEL_NODE_PARAMS_v2 l2 = lkp;
        if (lg_validate_loss_retarget(spec, lkp.kernelParams, largs, value, s2->copy) != 0) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            l2.kernelParams = largs;
            l2.extra = NULL;
            r = lg_drv.graph_exec_kernel_node_set_params(exec, lnode, &l2);
        }
        if (r != CUDA_SUCCESS) /* the exec goes back to the graph's scratch, as it was instantiated */
            (void)lg_drv.graph_exec_kernel_node_set_params(exec, vnode, &vkp);
    }
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "pointing the exec's validator at scratch of its own failed: %s",
                 lg_validate_module_error(r));
        s2->retired = true; /* the exec is back on the graph's scratch: s2 is free again */
        s2->due = __atomic_load_n(&s2->ring->latest, __ATOMIC_ACQUIRE);
        return -1;
    }
    *own = s2->ring;
    return 0;
}

int lg_validate_gpu_retire(const struct lg_scan_ring *ring, uint64_t runs)
{
    int rc = 1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_scratches && rc; i++)
        if (scratches[i]->captured && scratches[i]->ring == ring) {
            scratches[i]->due = runs;
            scratches[i]->retired = true;
            rc = 0;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

int lg_validate_gpu_rebind(void *exec, void *graph, const struct lg_scan_ring *ring, const lg_spec_t *spec,
                           uint64_t reads, const struct lg_scan_ring **own, char *why, size_t why_len)
{
    pthread_mutex_lock(&lock);
    scratch_t *s = NULL;
    for (int i = 0; i < n_scratches && !s; i++)
        if (scratches[i]->captured && scratches[i]->ring == ring)
            s = scratches[i];
    int rc = 1;
    if (s) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        lg_drv.exchange_capture_mode(&mode);
        rc = rebind_locked((CUgraphExec)exec, (CUgraph)graph, s, spec, reads, own, why, why_len);
        lg_drv.exchange_capture_mode(&mode);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* At start, while the GPU is still empty: the starting thread's scratch of the legacy default
 * stream (where PyTorch's current stream is unless changed; the thread whose first CUDA call
 * starts the library is most often the one that runs the forward), with a sanitized-copy area.
 * Other threads get theirs at their first check. A refusal here only
 * starts the backoff. Caller holds `lock`. */
static void preallocate(void)
{
    CUcontext ctx = NULL;
    char why[256];
    if (lg_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    lg_module_t *m = lg_validate_module_for(ctx, why, sizeof why);
    if (!m)
        return;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_drv.exchange_capture_mode(&mode);
    /* One sample per block: the first check grows the candidate area to LABELGUARD_SAMPLES. */
    scratch_t *s = scratch_for(m, NULL, false, 1, 0, why, sizeof why);
    if (s && s->copy_bytes < PREALLOC_COPY)
        (void)grow_copy(s, PREALLOC_COPY, why, sizeof why);
    lg_drv.exchange_capture_mode(&mode);
}

static bool decide(int r);

bool lg_validate_gpu_init(void)
{
    pthread_mutex_lock(&lock);
    return decide(lg_validate_module_init());
}

bool lg_validate_gpu_init_loaded(void)
{
    pthread_mutex_lock(&lock);
    return decide(lg_validate_module_decide());
}

/* Under lock, which it releases. */
static bool decide(int r)
{
    gpu_undecided = r < 0;
    gpu_active = r > 0;
    if (gpu_active)
        preallocate();
    bool active = gpu_active;
    pthread_mutex_unlock(&lock);
    return active;
}

/* The wait runs in relaxed capture mode too, like everything in lg_validate_gpu_launch. */
int lg_validate_gpu_wait(void *stream, char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_drv.exchange_capture_mode(&mode);
    CUresult r = lg_drv.stream_synchronize((CUstream)stream);
    lg_drv.exchange_capture_mode(&mode);
    if (r == CUDA_SUCCESS)
        return 0;
    snprintf(why, why_len, "waiting for the validator failed: %s", lg_validate_module_error(r));
    return -1;
}

/* Set when a caller was answered "host" while no context existed yet (the start event's
 * backend among them): a later choice of the GPU backend is then owed a note in the log,
 * which the launch path reports (lg_validate_gpu_take_backend_note). Under lock. */
static bool answered_undecided;
static int backend_note_state; /* 0 none, 1 pending, 2 taken */

bool lg_validate_gpu_active(void)
{
    pthread_mutex_lock(&lock);
    if (gpu_undecided) {
        int r = lg_validate_module_decide();
        if (r >= 0) {
            gpu_undecided = false;
            gpu_active = r > 0;
            if (gpu_active)
                preallocate();
            if (gpu_active && answered_undecided)
                __atomic_store_n(&backend_note_state, 1, __ATOMIC_RELEASE);
        }
    }
    if (gpu_undecided)
        answered_undecided = true;
    bool a = gpu_active;
    pthread_mutex_unlock(&lock);
    return a;
}

const char *lg_validate_gpu_take_backend_note(void)
{
    int expected = 1;
    return __atomic_compare_exchange_n(&backend_note_state, &expected, 2, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
               ? "the GPU backend is active from here on: the application made its CUDA context after labelguard "
                 "started (the start event says backend host)"
               : NULL;
}

/* The parent's CUDA objects mean nothing in a fork child (CUDA does not survive fork), and
 * the lock may have been held by a parent thread that does not exist there. The tables are
 * dropped, not freed: their memory belonged to the parent's contexts. */
void lg_validate_gpu_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    lg_validate_module_forget();
    n_scratches = 0;
}
