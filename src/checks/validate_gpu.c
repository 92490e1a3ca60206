/* validate_gpu.c: the GPU backend of validate.c: the validator kernels (the module that
 * validate_module.c loads into each context) launched with cuLaunchKernel on the launch's own
 * stream, in scratch memory of validate_scratch.c. The verdict is published by the kernel in
 * mapped pinned memory (a ring per scratch, cuda/lg_validate.h), so sync mode waits for the
 * stream and async mode only reads memory later (verdicts.c), which gets each outstanding run
 * out of the ring before a later one reuses its slot (make_room). A check the scratch table cannot
 * serve goes to the host backend (to_host, counted in the summary). Also here: the start's
 * decision whether the backend is active, made again at a later check while the process has no
 * context yet, and the notes launch.c reports once.
 *
 * Our driver calls run in relaxed capture mode: they must not invalidate a global-mode capture
 * the application has running on another stream (an "unsafe" call fails and poisons it), as
 * PyTorch's allocator does. Called by validate.c on the launching thread (guard held), and
 * lg_validate_gpu_ring_read by verdicts.c on any thread. Tested by tests/gpu/test_validator.cu
 * (against lg_scan_host, needs a GPU), tests/unit/test_kernel_emulation (the kernels) and
 * tests/unit/test_gpu_driver.c (fake driver: host fallback; labels on another device; the
 * backend decided after start) and tests/unit/test_ring.c (a device 300 checks behind: make_room).
 */
#include "lg_validate.h"
#include "checks/checks.h"
#include "checks/validate_gpu.h"

#include <cuda.h> /* driver types only: the functions come from dlsym */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lg_scratch scratch_t;

/* Both under the backend's lock (lg_validate_scratch_lock). */
static bool gpu_active;
/* The start found a working driver but no CUDA context in the process (its first hook came
 * before the application's first context): the backend is decided at a later check, once a
 * context exists, rather than pinned to the host for good. */
static bool gpu_undecided;

static uint64_t host_fallbacks; /* __atomic */
uint64_t lg_validate_gpu_host_fallbacks(void) { return __atomic_load_n(&host_fallbacks, __ATOMIC_RELAXED); }

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
    lg_validate_scratch_lock();
    if (fallback_state == 0) {
        snprintf(fallback_note, sizeof fallback_note,
                 "%.500s: this check and others like it run on the host backend (a copy and a stream sync "
                 "per launch) until GPU memory is granted again; the summary counts them (host_fallbacks)",
                 why);
        __atomic_store_n(&fallback_state, 1, __ATOMIC_RELEASE);
    }
    lg_validate_scratch_unlock();
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

/* Run s->launched + 1 takes the ring slot of run s->launched + 1 - LG_RING_SLOTS: an async
 * check still waiting for that run gets its verdict out of the ring first (lg_verdicts_keep).
 * When that run is not published yet, the stream is waited for (outside capture: this is the
 * launching thread's own stream; relaxed mode, as the caller set it), with the backend's lock
 * released, since s is this thread's alone and never freed. What the wait cannot bring (the
 * stream failed) is given up and reported lost when collected. Only a thread LG_RING_SLOTS
 * checks ahead of its stream ever waits. Caller holds the lock. */
static void make_room(scratch_t *s, CUstream stream)
{
    uint64_t next = s->launched + 1;
    if (lg_verdicts_keep(s->ring, next, false) == 0)
        return;
    lg_validate_scratch_unlock();
    (void)lg_validate_module_drv.stream_synchronize(stream);
    lg_validate_scratch_lock();
    lg_verdicts_keep(s->ring, next, true);
}

/* Enqueues one scan. Returns 0; or -1 with why, and *use_host set when the host backend should
 * take this call instead (no current context, module not loadable). */
static int gpu_launch_body(const lg_runtime_t *rt, const lg_target_t *tin, CUstream stream, int64_t span, int samples,
                           bool want_copy, int64_t replacement, bool allow_capture, lg_gpu_run_t *out, bool *use_host,
                           char *why, size_t why_len)
{
    *use_host = false;
    if (tin->rule == LG_SCAN_RULE_PROBS) {
        /* torch.multinomial's row rule (a row of zeros) needs whole rows: the host backend's */
        snprintf(why, why_len, "multinomial weights are judged by row, on the host backend");
        *use_host = true;
        return -1;
    }
    lg_target_t t;
    lg_scan_normalize(tin, &t);
    if (samples > LG_MAX_SAMPLES)
        samples = LG_MAX_SAMPLES;
    if (samples < 0)
        samples = 0;

    CUcontext ctx = NULL;
    if (lg_validate_module_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
        /* The runtime makes its context current lazily, at a thread's first runtime call. */
        if (rt && rt->pointer_attributes) {
            _Alignas(16) char a[256]; /* a struct cudaPointerAttributes, and room to spare */
            if (rt->pointer_attributes(a, (const void *)(uintptr_t)t.data) != 0 && rt->get_last_error)
                rt->get_last_error();
        }
        if (lg_validate_module_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
            snprintf(why, why_len, "no current CUDA context on this thread");
            *use_host = true;
            return -1;
        }
    }

    /* The labels must be memory the device can read, and the whole span inside one
     * allocation: otherwise our kernel would fault and take the context down with it. */
    unsigned int mtype = 0;
    CUresult r =
        lg_validate_module_drv.pointer_get_attribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)t.data);
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
        lg_validate_module_drv.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                     (CUdeviceptr)t.data) == CUDA_SUCCESS &&
        lg_validate_module_drv.ctx_get_device(&here) == CUDA_SUCCESS && ordinal >= 0 && ordinal != (int)here) {
        snprintf(why, why_len, "the labels are on device %d and the current context on device %d", ordinal, (int)here);
        *use_host = true;
        return -1;
    }
    size_t bytes = (size_t)span * lg_scan_elem_size(t.dtype);
    CUdeviceptr start = 0;
    size_t range = 0;
    if (lg_validate_module_drv.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                                     (CUdeviceptr)t.data) == CUDA_SUCCESS &&
        lg_validate_module_drv.pointer_get_attribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)t.data) ==
            CUDA_SUCCESS &&
        range > 0 && (t.data < start || t.data - start + bytes > range)) {
        snprintf(why, why_len,
                 "the labels (%zu bytes at 0x%llx) run past the end of their allocation (%zu bytes at 0x%llx)", bytes,
                 (unsigned long long)t.data, range, (unsigned long long)start);
        return -1;
    }

    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    r = lg_validate_module_drv.stream_is_capturing(stream, &cap);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuStreamIsCapturing failed: %s", lg_validate_module_error(r));
        return -1;
    }
    bool captured = cap != CU_STREAM_CAPTURE_STATUS_NONE;
    if (captured && !allow_capture) {
        snprintf(why, why_len, "the stream is capturing a CUDA graph: only async validation can run inside a capture");
        return -1;
    }

    lg_validate_scratch_lock();
    lg_module_t *m = lg_validate_module_for(ctx, why, why_len);
    if (!m) {
        /* The first context decides for the process: the start event must tell the truth. */
        if (lg_validate_module_count() <= 1)
            gpu_active = false;
        lg_validate_scratch_unlock();
        *use_host = true;
        return -1;
    }
    scratch_t *s = lg_validate_scratch_for(m, stream, captured, samples, want_copy ? bytes : 0, why, why_len);
    if (!s) {
        lg_validate_scratch_unlock();
        to_host(use_host, why);
        return -1;
    }
    if (!captured)
        make_room(s, stream);
    uint64_t copy = 0;
    if (want_copy) {
        if (s->copy_bytes < bytes && lg_validate_scratch_grow_copy(s, bytes, why, why_len) != 0) {
            lg_validate_scratch_unlock();
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
    r = lg_validate_module_drv.launch_kernel(m->fn[kernel_index(&t, copy)], (unsigned)grid, 1, 1, LG_SCAN_THREADS, 1, 1,
                                             0, stream, params, NULL);
    if (r != CUDA_SUCCESS) {
        lg_validate_scratch_unlock();
        snprintf(why, why_len, "launching the validator failed: %s", lg_validate_module_error(r));
        return -1;
    }
    out->s = s;
    out->seq = ++s->launched;
    out->ring = s->ring;
    out->copy = copy;
    out->captured = captured;
    lg_validate_scratch_unlock();
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
    lg_validate_module_drv.exchange_capture_mode(&mode);
    int rc = gpu_launch_body(rt, tin, (CUstream)stream, span, samples, want_copy, replacement, allow_capture, out,
                             use_host, why, why_len);
    lg_validate_module_drv.exchange_capture_mode(&mode);
    return rc;
}

int lg_validate_gpu_ring_read(const lg_scratch_t *s, uint64_t seq, lg_verdict_t *v)
{
    return lg_verdicts_ring_read(s->ring, seq, v);
}

static bool decide(int r);

bool lg_validate_gpu_init(void)
{
    lg_validate_scratch_lock();
    return decide(lg_validate_module_init());
}

bool lg_validate_gpu_init_loaded(void)
{
    lg_validate_scratch_lock();
    return decide(lg_validate_module_decide());
}

/* Under the lock, which it releases. */
static bool decide(int r)
{
    gpu_undecided = r < 0;
    gpu_active = r > 0;
    if (gpu_active)
        lg_validate_scratch_preallocate();
    bool active = gpu_active;
    lg_validate_scratch_unlock();
    return active;
}

/* The wait runs in relaxed capture mode too, like everything in lg_validate_gpu_launch. */
int lg_validate_gpu_wait(void *stream, char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    lg_validate_module_drv.exchange_capture_mode(&mode);
    CUresult r = lg_validate_module_drv.stream_synchronize((CUstream)stream);
    lg_validate_module_drv.exchange_capture_mode(&mode);
    if (r == CUDA_SUCCESS)
        return 0;
    snprintf(why, why_len, "waiting for the validator failed: %s", lg_validate_module_error(r));
    return -1;
}

/* Set when a caller was answered "host" while no context existed yet (the start event's
 * backend among them): a later choice of the GPU backend is then owed a note in the log,
 * which the launch path reports (lg_validate_gpu_take_backend_note). Under the lock. */
static bool answered_undecided;
static int backend_note_state; /* 0 none, 1 pending, 2 taken */

bool lg_validate_gpu_active(void)
{
    lg_validate_scratch_lock();
    if (gpu_undecided) {
        int r = lg_validate_module_decide();
        if (r >= 0) {
            gpu_undecided = false;
            gpu_active = r > 0;
            if (gpu_active)
                lg_validate_scratch_preallocate();
            if (gpu_active && answered_undecided)
                __atomic_store_n(&backend_note_state, 1, __ATOMIC_RELEASE);
        }
    }
    if (gpu_undecided)
        answered_undecided = true;
    bool a = gpu_active;
    lg_validate_scratch_unlock();
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

/* The parent's CUDA objects mean nothing in a fork child (CUDA does not survive fork): the
 * lock and the tables start afresh there (validate_scratch.c, validate_module.c). */
void lg_validate_gpu_after_fork(void)
{
    lg_validate_scratch_after_fork();
    lg_validate_module_forget();
}
