/* validate.c: runs the label scan of one launch and returns the verdict (lg_validate_*).
 *
 * Called by launch.c on the launching thread, only for watched launches (the slow path), with
 * the library's re-entry guard held, so our own CUDA calls are never judged again. Two
 * backends, chosen once by lg_validate_init:
 *   GPU   libcuda.so.1 opened at run time (never linked), the validator fatbin embedded in the
 *         library (lg_validator_fatbin, built from cuda/validate.cu) loaded with
 *         cuModuleLoadData into each context the first time that context validates, kernels
 *         launched with cuLaunchKernel on the launch's own stream. The verdict is published by
 *         the kernel in mapped pinned memory (cuda/lg_validate.h), so sync mode waits for the
 *         stream and async mode only polls memory later.
 *   HOST  the labels are copied with the process's own runtime (lg_runtime_t, resolved by
 *         preload.c; never cuda* by name, which would re-enter our hooks) on the launch's stream,
 *         and lg_scan_host runs on the copy. Used when no driver module can be loaded, when the
 *         calling thread has no current context, and under the runtime test double.
 * Both backends judge with the same lines (cuda/lg_scan.h). n_classes <= 0 is not special:
 * every non-ignored label is then bad, which is exactly what the kernel's check would say.
 *
 * Scratch memory (accumulators, candidates, mapped verdict ring, sanitized copies) is kept per
 * (context, stream[, thread for the per-thread default stream]) in a table under one mutex.
 * Nothing is ever freed: a kernel still in flight, or a CUDA graph captured with a launch of
 * ours, may read it at any later time. Launches captured into a graph get scratch of their own
 * that no other launch touches, so each replay publishes its own verdict.
 *
 * Tested by tests/unit/test_scan.c (host backend with a memcpy-backed fake runtime) and
 * tests/gpu/test_validator.cu (GPU backend against lg_scan_host, needs a GPU).
 */
#include "internal.h"
#include "../cuda/lg_validate.h"

#include <cuda.h>             /* driver types only: the functions come from dlsym */
#include <cuda_runtime_api.h> /* struct cudaPointerAttributes */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const unsigned char lg_validator_fatbin[];
extern const unsigned char lg_validator_fatbin_end[];

/* cudaMemcpyKind values (driver_types.h), spelled out for the runtime table's int argument. */
enum { KIND_H2D = 1, KIND_D2H = 2, KIND_DEFAULT = 4 };

static const char *const kernel_names[6] = {
    LG_KERNEL_I64_VEC, LG_KERNEL_I64_GEN, LG_KERNEL_U8_VEC,
    LG_KERNEL_U8_GEN,  LG_KERNEL_I32_VEC, LG_KERNEL_I32_GEN,
};

/* The driver entry points we use, by their ABI names (cuda.h maps the API names to _v2). */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_ctx_get_state)(CUdevice, unsigned *, int *);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*ctx_get_id)(CUcontext, unsigned long long *); /* optional: CUDA >= 12.0 */
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*exchange_capture_mode)(CUstreamCaptureMode *);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_host_alloc)(void **, size_t, unsigned);
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
} drv;

/* One loaded module per context. */
typedef struct module_slot {
    CUcontext ctx;
    unsigned long long ctx_id; /* 0 when cuCtxGetId is missing */
    int state;                 /* 1 loaded, -1 failed */
    CUfunction fn[6];
    CUstream init_stream;      /* non-blocking, ours: initialises scratch outside any capture */
    int max_grid;              /* resident blocks: 4 per SM */
} module_slot_t;

typedef struct scratch {
    /* key */
    CUcontext ctx;
    unsigned long long ctx_id;
    CUstream stream;
    pthread_t thread;          /* only for CU_STREAM_PER_THREAD */
    bool captured;             /* dedicated to one captured launch; never looked up again */
    /* GPU memory */
    CUdeviceptr state, cand, cand_count, ring_dev, copy;
    int cand_samples;          /* samples per block the candidate area holds */
    size_t copy_bytes;
    lg_scan_ring_t *ring;      /* host view of ring_dev */
    uint64_t launched;         /* launches enqueued: the seq the next one will publish - 1 */
} scratch_t;

/* Host backend: device buffers for masked copies, per stream. */
typedef struct host_slot {
    void *stream;
    void *dev;
    size_t bytes;
} host_slot_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const lg_runtime_t *rt;
static lg_backend_t backend = LG_BACKEND_HOST;
static module_slot_t modules[16];
static int n_modules;
static scratch_t **scratches;
static int n_scratches, cap_scratches;
static host_slot_t host_slots[64];
static int n_host_slots;
static uint64_t ns_total; /* __atomic */
static int n_pendings; /* async checks not collected yet (below) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *cu_err(CUresult r)
{
    const char *s = NULL;
    if (drv.get_error_string && drv.get_error_string(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown driver error";
}

static size_t elem_size(lg_dtype_t d)
{
    return d == LG_DTYPE_UINT8 ? 1 : d == LG_DTYPE_INT32 ? 4 : 8;
}

/* Elements from logical element 0 to the last one, inclusive, in memory: what a copy of the
 * target must hold so that the same element offsets stay valid. -1 for negative strides
 * (PyTorch never makes them; we refuse rather than read before the buffer). */
static int64_t span_elems(const lg_target_t *t)
{
    if (t->count <= 0)
        return 0;
    int64_t span = 1;
    int nd = t->ndim < 1 ? 1 : t->ndim;
    for (int d = 0; d < nd; d++) {
        if (t->strides[d] < 0)
            return -1;
        int64_t sz = nd == 1 ? t->count : t->sizes[d];
        if (sz > 1)
            span += (sz - 1) * t->strides[d];
    }
    return span;
}

/* A row-major contiguous view becomes ndim 1, stride 1: the kernels' vector path. */
static void normalize(const lg_target_t *in, lg_target_t *out)
{
    *out = *in;
    if (out->ndim < 1)
        out->ndim = 1;
    if (out->ndim == 1) {
        out->sizes[0] = out->count;
        return;
    }
    int64_t expect = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        if (out->sizes[d] != 1 && out->strides[d] != expect)
            return;
        expect *= out->sizes[d];
    }
    out->ndim = 1;
    out->sizes[0] = out->count;
    out->strides[0] = 1;
}

static int check_target(const lg_target_t *t, int64_t *span, char *why, size_t why_len)
{
    if (t->ndim > LG_MAX_TARGET_DIMS || t->dtype < LG_DTYPE_INT64 || t->dtype > LG_DTYPE_INT32) {
        snprintf(why, why_len, "unsupported target description (ndim %d, dtype %d)", t->ndim, (int)t->dtype);
        return -1;
    }
    *span = span_elems(t);
    if (*span < 0) {
        snprintf(why, why_len, "target has a negative stride; labelguard does not validate such views");
        return -1;
    }
    if (t->data == 0) {
        snprintf(why, why_len, "the label pointer is NULL: the loss kernel was given no labels");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ host backend */

/* Is `ptr` memory the device can read? Uses the runtime, so it also works under the test
 * double. A failed query leaves a sticky "last error" in the runtime that the application
 * would see at its next cudaGetLastError: we consume it (it is ours). */
static int host_check_pointer(const void *ptr, int *kind, char *why, size_t why_len)
{
    *kind = KIND_D2H;
    if (!rt->pointer_attributes)
        return 0;
    /* Room to spare: a newer runtime than our headers may fill a longer struct. */
    union {
        struct cudaPointerAttributes a;
        char pad[256];
    } u;
    memset(&u, 0, sizeof u);
    int rc = rt->pointer_attributes(&u, ptr);
    const struct cudaPointerAttributes a = u.a;
    if (rc != 0) {
        if (rt->get_last_error)
            rt->get_last_error();
        /* Only cudaErrorInvalidValue (1) says "not ours"; any other code is the context's own
         * state (710 after a device-side assert), which the user must not read as a bad pointer. */
        if (rc == cudaErrorInvalidValue)
            snprintf(why, why_len, "labels at %p are not CUDA memory (cudaPointerGetAttributes error %d)", ptr, rc);
        else
            snprintf(why, why_len, "labels at %p: the CUDA runtime reports error %d "
                     "(a context already broken by an earlier error?)", ptr, rc);
        return -1;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice: return 0;
    case cudaMemoryTypeManaged:
    case cudaMemoryTypeHost: *kind = KIND_DEFAULT; return 0; /* device-readable through UVA */
    default:
        snprintf(why, why_len, "labels at %p are ordinary host memory, not device memory: the loss kernel "
                 "cannot read them (move the target tensor to the GPU)", ptr);
        return -1;
    }
}

/* Copies the spanned range of the labels to a malloc'd host buffer (caller frees) and waits. */
static void *host_fetch(const lg_target_t *t, void *stream, int64_t span, char *why, size_t why_len)
{
    if (!rt || !rt->memcpy_async || !rt->stream_synchronize) {
        snprintf(why, why_len, "no CUDA runtime functions to copy the labels with");
        return NULL;
    }
    int kind;
    if (host_check_pointer((const void *)(uintptr_t)t->data, &kind, why, why_len) != 0)
        return NULL;
    if (rt->stream_is_capturing) {
        int st = 0;
        if (rt->stream_is_capturing(stream, &st) == 0 && st != 0) {
            snprintf(why, why_len, "the host backend cannot validate a launch captured into a CUDA graph");
            return NULL;
        }
    }
    size_t bytes = (size_t)span * elem_size(t->dtype);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        snprintf(why, why_len, "cannot allocate %zu bytes of host memory for the label copy", bytes);
        return NULL;
    }
    int rc = rt->memcpy_async(buf, (const void *)(uintptr_t)t->data, bytes, kind, stream);
    if (rc == 0)
        rc = rt->stream_synchronize(stream);
    if (rc != 0) {
        if (rt->get_last_error)
            rt->get_last_error();
        free(buf);
        snprintf(why, why_len, "copying %zu bytes of labels from %p failed (CUDA error %d)", bytes,
                 (void *)(uintptr_t)t->data, rc);
        return NULL;
    }
    return buf;
}

/* Checks the target, copies its labels to the host and scans them. Returns the host copy
 * (caller frees; *span elements long), or NULL with why. */
static void *fetch_and_scan(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, int64_t *span,
                            char *why, size_t why_len)
{
    if (check_target(t, span, why, why_len) != 0)
        return NULL;
    void *buf = host_fetch(t, stream, *span, why, why_len);
    if (buf)
        lg_scan_host(t, buf, samples, v);
    return buf;
}

static int host_validate(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, char *why, size_t why_len)
{
    int64_t span;
    void *buf = fetch_and_scan(t, stream, samples, v, &span, why, why_len);
    if (!buf)
        return -1;
    free(buf);
    return 0;
}

/* Device buffer of at least `bytes` for this stream's masked copies (host backend). Grown
 * buffers are not freed: the previous loss kernel on the stream may still read the old one. */
static void *host_scratch(void *stream, size_t bytes, char *why, size_t why_len)
{
    pthread_mutex_lock(&lock);
    host_slot_t *s = NULL;
    for (int i = 0; i < n_host_slots; i++)
        if (host_slots[i].stream == stream)
            s = &host_slots[i];
    if (!s && n_host_slots < (int)(sizeof host_slots / sizeof host_slots[0])) {
        s = &host_slots[n_host_slots++];
        s->stream = stream;
    }
    void *out = NULL;
    if (!s) {
        snprintf(why, why_len, "too many streams with masked copies (%d)", n_host_slots);
    } else if (s->bytes >= bytes) {
        out = s->dev;
    } else if (!rt->malloc_device) {
        snprintf(why, why_len, "no cudaMalloc in the runtime table");
    } else {
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
        void *p = NULL;
        int rc = rt->malloc_device(&p, want);
        if (rc != 0 || !p) {
            if (rt->get_last_error)
                rt->get_last_error();
            snprintf(why, why_len, "cudaMalloc of %zu bytes for the masked copy failed (error %d)", want, rc);
        } else {
            s->dev = p;
            s->bytes = want;
            out = p;
        }
    }
    pthread_mutex_unlock(&lock);
    return out;
}

/* Scan on the host and, when any label is bad, upload a copy with each bad one replaced.
 * *copy_out is the copy's address of logical element 0, or t->data when nothing was bad and
 * `always_copy` is false. */
static int host_sanitize(const lg_target_t *t, void *stream, int64_t replacement, int samples, bool always_copy,
                         lg_verdict_t *v, uint64_t *copy_out, char *why, size_t why_len)
{
    int64_t span;
    void *buf = fetch_and_scan(t, stream, samples, v, &span, why, why_len);
    if (!buf)
        return -1;
    if (v->bad_count == 0 && !always_copy) {
        free(buf);
        *copy_out = t->data;
        return 0;
    }
    for (int64_t i = 0; i < t->count; i++) {
        int64_t val = lg_scan_load(t, buf, i);
        if (lg_scan_is_ignored(t, val) || !lg_scan_is_bad(t, val))
            continue;
        int64_t off = lg_scan_offset(t, i);
        switch (t->dtype) {
        case LG_DTYPE_UINT8: ((uint8_t *)buf)[off] = (uint8_t)replacement; break;
        case LG_DTYPE_INT32: ((int32_t *)buf)[off] = (int32_t)replacement; break;
        default: ((int64_t *)buf)[off] = replacement; break;
        }
    }
    size_t bytes = (size_t)span * elem_size(t->dtype);
    void *dev = host_scratch(stream, bytes, why, why_len);
    int rc = -1;
    if (dev) {
        rc = rt->memcpy_async(dev, buf, bytes, KIND_H2D, stream);
        if (rc == 0)
            rc = rt->stream_synchronize(stream); /* buf is freed below */
        if (rc != 0) {
            if (rt->get_last_error)
                rt->get_last_error();
            snprintf(why, why_len, "uploading the masked copy failed (CUDA error %d)", rc);
        }
    }
    free(buf);
    if (rc != 0)
        return -1;
    *copy_out = (uint64_t)(uintptr_t)dev;
    return 0;
}

/* ------------------------------------------------------------------ GPU backend */

static void *open_libcuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h;
}

static bool load_driver(void)
{
    void *h = open_libcuda();
    if (!h)
        return false;
#define SYM(field, name, required)                                         \
    do {                                                                   \
        *(void **)&drv.field = dlsym(h, name);                             \
        if ((required) && !drv.field)                                      \
            return false;                                                  \
    } while (0)
    SYM(init, "cuInit", 1);
    SYM(get_error_string, "cuGetErrorString", 1);
    SYM(device_get_count, "cuDeviceGetCount", 1);
    SYM(device_get_attribute, "cuDeviceGetAttribute", 1);
    SYM(primary_ctx_get_state, "cuDevicePrimaryCtxGetState", 1);
    SYM(ctx_get_current, "cuCtxGetCurrent", 1);
    SYM(ctx_get_device, "cuCtxGetDevice", 1);
    SYM(ctx_get_id, "cuCtxGetId", 0);
    SYM(module_load_data, "cuModuleLoadData", 1);
    SYM(module_get_function, "cuModuleGetFunction", 1);
    SYM(launch_kernel, "cuLaunchKernel", 1);
    SYM(stream_synchronize, "cuStreamSynchronize", 1);
    SYM(stream_is_capturing, "cuStreamIsCapturing", 1);
    SYM(exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", 1);
    SYM(stream_create, "cuStreamCreate", 1);
    SYM(mem_alloc, "cuMemAlloc_v2", 1);
    SYM(mem_host_alloc, "cuMemHostAlloc", 1);
    SYM(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", 1);
    SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", 1);
    SYM(pointer_get_attribute, "cuPointerGetAttribute", 1);
#undef SYM
    return true;
}

static unsigned long long ctx_id_of(CUcontext ctx)
{
    unsigned long long id = 0;
    if (drv.ctx_get_id && drv.ctx_get_id(ctx, &id) != CUDA_SUCCESS)
        id = 0;
    return id;
}

/* The module of the current context, loaded on first use. Caller holds `lock`. */
static module_slot_t *module_for(CUcontext ctx, char *why, size_t why_len)
{
    unsigned long long id = ctx_id_of(ctx);
    for (int i = 0; i < n_modules; i++) {
        if (modules[i].ctx == ctx && modules[i].ctx_id == id) {
            if (modules[i].state < 0) {
                snprintf(why, why_len, "the validator module could not be loaded in this context");
                return NULL;
            }
            return &modules[i];
        }
    }
    module_slot_t *m;
    if (n_modules < (int)(sizeof modules / sizeof modules[0])) {
        m = &modules[n_modules++];
    } else {
        /* A process that destroyed and re-created more contexts than the table holds: reuse
         * the oldest slot; its context is most likely gone. */
        memmove(&modules[0], &modules[1], sizeof modules - sizeof modules[0]);
        m = &modules[n_modules - 1];
    }
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    m->ctx_id = id;
    m->state = -1;
    CUmodule mod;
    CUresult r = drv.module_load_data(&mod, lg_validator_fatbin);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuModuleLoadData of the validator failed: %s", cu_err(r));
        return NULL;
    }
    for (int k = 0; k < 6; k++) {
        r = drv.module_get_function(&m->fn[k], mod, kernel_names[k]);
        if (r != CUDA_SUCCESS) {
            snprintf(why, why_len, "validator kernel %s not found: %s", kernel_names[k], cu_err(r));
            return NULL;
        }
    }
    CUdevice dev;
    int sms = 0;
    if (drv.ctx_get_device(&dev) != CUDA_SUCCESS ||
        drv.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS || sms <= 0)
        sms = 16;
    m->max_grid = sms * 4;
    r = drv.stream_create(&m->init_stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuStreamCreate failed: %s", cu_err(r));
        return NULL;
    }
    m->state = 1;
    return m;
}

/* Allocates device memory outside the rules of a capture in progress on this thread (as
 * PyTorch's allocator does): relaxed mode lets cuMemAlloc run during global capture. */
static CUresult alloc_dev(CUdeviceptr *p, size_t n)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    drv.exchange_capture_mode(&mode);
    CUresult r = drv.mem_alloc(p, n);
    drv.exchange_capture_mode(&mode);
    return r;
}

static int scratch_init(scratch_t *s, module_slot_t *m, int samples, char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult r;
    lg_scan_state_t init;
    memset(&init, 0, sizeof init);
    init.min = INT64_MAX;
    init.max = INT64_MIN;
    int cap = samples > 0 ? samples : 1;
    if ((r = alloc_dev(&s->state, sizeof(lg_scan_state_t))) != CUDA_SUCCESS ||
        (r = alloc_dev(&s->cand, (size_t)m->max_grid * (size_t)cap * sizeof(lg_sample_t))) != CUDA_SUCCESS ||
        (r = alloc_dev(&s->cand_count, (size_t)m->max_grid * sizeof(int))) != CUDA_SUCCESS)
        goto fail;
    s->cand_samples = cap;
    drv.exchange_capture_mode(&mode);
    r = drv.mem_host_alloc((void **)&s->ring, sizeof(lg_scan_ring_t),
                           CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        memset(s->ring, 0, sizeof *s->ring);
        r = drv.mem_host_get_device_pointer(&s->ring_dev, s->ring, 0);
    }
    /* Our own non-blocking stream: neither ordered after the application's work nor part of
     * any capture; the copy's source lives on our stack, hence the wait. */
    if (r == CUDA_SUCCESS)
        r = drv.memcpy_htod_async(s->state, &init, sizeof init, m->init_stream);
    if (r == CUDA_SUCCESS)
        r = drv.stream_synchronize(m->init_stream);
    drv.exchange_capture_mode(&mode);
    if (r != CUDA_SUCCESS)
        goto fail;
    return 0;
fail:
    snprintf(why, why_len, "allocating validator scratch memory failed: %s", cu_err(r));
    return -1;
}

/* The scratch of (ctx, stream), created on first use; `captured`: a fresh one that nobody
 * else will use. Caller holds `lock`. */
static scratch_t *scratch_for(module_slot_t *m, CUstream stream, bool captured, int samples, char *why, size_t why_len)
{
    if (stream == CU_STREAM_LEGACY)
        stream = NULL;
    pthread_t self = stream == CU_STREAM_PER_THREAD ? pthread_self() : (pthread_t)0;
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
    }
    if (!s) {
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
            snprintf(why, why_len, "allocating validator candidates failed: %s", cu_err(r));
            return NULL;
        }
        s->cand = c;
        s->cand_samples = samples;
    }
    return s;
}

static int kernel_index(const lg_target_t *t, uint64_t copy)
{
    int base = t->dtype == LG_DTYPE_UINT8 ? 2 : t->dtype == LG_DTYPE_INT32 ? 4 : 0;
    bool vec = t->ndim == 1 && t->strides[0] == 1 && (t->data % 16) == 0 && (copy % 16) == 0;
    return base + (vec ? 0 : 1);
}

/* What the GPU path hands back to its callers. */
typedef struct gpu_run {
    scratch_t *s;
    uint64_t seq;     /* the run's sequence number (not meaningful for captured scratch) */
    uint64_t copy;    /* sanitized copy, address of logical element 0 */
    bool captured;
} gpu_run_t;

/* Enqueues one scan. Returns 0; or -1 with why, and *use_host set when the host backend should
 * take this call instead (no current context, module not loadable). */
static int gpu_launch_body(const lg_target_t *tin, CUstream stream, int samples, bool want_copy, int64_t replacement,
                           bool allow_capture, gpu_run_t *out, bool *use_host, char *why, size_t why_len)
{
    *use_host = false;
    int64_t span;
    if (check_target(tin, &span, why, why_len) != 0)
        return -1;
    lg_target_t t;
    normalize(tin, &t);
    if (samples > LG_MAX_SAMPLES)
        samples = LG_MAX_SAMPLES;
    if (samples < 0)
        samples = 0;

    CUcontext ctx = NULL;
    if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
        /* The runtime makes its context current lazily, at a thread's first runtime call. */
        if (rt && rt->pointer_attributes) {
            _Alignas(16) char a[256]; /* a struct cudaPointerAttributes, and room to spare */
            if (rt->pointer_attributes(a, (const void *)(uintptr_t)t.data) != 0 && rt->get_last_error)
                rt->get_last_error();
        }
        if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
            snprintf(why, why_len, "no current CUDA context on this thread");
            *use_host = true;
            return -1;
        }
    }

    /* The labels must be memory the device can read, and the whole span inside one
     * allocation: otherwise our kernel would fault and take the context down with it. */
    unsigned int mtype = 0;
    CUresult r = drv.pointer_get_attribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)t.data);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "labels at 0x%llx are not CUDA memory (%s): the loss kernel cannot read them",
                 (unsigned long long)t.data, cu_err(r));
        return -1;
    }
    size_t bytes = (size_t)span * elem_size(t.dtype);
    CUdeviceptr start = 0;
    size_t range = 0;
    if (drv.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)t.data) == CUDA_SUCCESS &&
        drv.pointer_get_attribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)t.data) == CUDA_SUCCESS &&
        range > 0 && (t.data < start || t.data - start + bytes > range)) {
        snprintf(why, why_len, "the labels (%zu bytes at 0x%llx) run past the end of their allocation (%zu bytes at 0x%llx)",
                 bytes, (unsigned long long)t.data, range, (unsigned long long)start);
        return -1;
    }

    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    r = drv.stream_is_capturing(stream, &cap);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuStreamIsCapturing failed: %s", cu_err(r));
        return -1;
    }
    bool captured = cap != CU_STREAM_CAPTURE_STATUS_NONE;
    if (captured && !allow_capture) {
        snprintf(why, why_len, "the stream is capturing a CUDA graph: only async validation can run inside a capture");
        return -1;
    }

    pthread_mutex_lock(&lock);
    module_slot_t *m = module_for(ctx, why, why_len);
    if (!m) {
        /* The first context decides for the process: the start event must tell the truth. */
        if (n_modules <= 1)
            backend = LG_BACKEND_HOST;
        pthread_mutex_unlock(&lock);
        *use_host = true;
        return -1;
    }
    scratch_t *s = scratch_for(m, stream, captured, samples, why, why_len);
    if (!s) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    uint64_t copy = 0;
    if (want_copy) {
        if (s->copy_bytes < bytes) {
            /* Grown, never freed: an in-flight or captured loss kernel may read the old one. */
            size_t want = s->captured ? bytes : (bytes < 4096 ? 4096 : bytes + bytes / 2);
            CUdeviceptr c;
            r = alloc_dev(&c, want);
            if (r != CUDA_SUCCESS) {
                pthread_mutex_unlock(&lock);
                snprintf(why, why_len, "allocating %zu bytes for the sanitized copy failed: %s", want, cu_err(r));
                return -1;
            }
            s->copy = c;
            s->copy_bytes = want;
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
    const int64_t tile = LG_SCAN_TILE(elem_size(t.dtype));
    int64_t ntiles = (t.count + tile - 1) / tile;
    /* One wave of resident blocks: 4 per SM, 2 for the uint8 kernels (cuda/validate.cu). */
    int64_t max_grid = t.dtype == LG_DTYPE_UINT8 ? m->max_grid / 2 : m->max_grid;
    int64_t grid = ntiles < max_grid ? ntiles : max_grid;
    p.tiles_per_block = (ntiles + grid - 1) / grid;
    grid = (ntiles + p.tiles_per_block - 1) / p.tiles_per_block;
    void *params[] = {&p};
    r = drv.launch_kernel(m->fn[kernel_index(&t, copy)], (unsigned)grid, 1, 1, LG_SCAN_THREADS, 1, 1, 0, stream,
                          params, NULL);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        snprintf(why, why_len, "launching the validator failed: %s", cu_err(r));
        return -1;
    }
    out->s = s;
    out->seq = ++s->launched;
    out->copy = copy;
    out->captured = captured;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Our driver calls must not invalidate a global-mode capture the application has running on
 * another stream (an "unsafe" call there fails and poisons the capture), so this thread runs
 * them in relaxed mode, as PyTorch's allocator does. The mode is per thread and restored. */
static int gpu_launch(const lg_target_t *tin, CUstream stream, int samples, bool want_copy, int64_t replacement,
                      bool allow_capture, gpu_run_t *out, bool *use_host, char *why, size_t why_len)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    drv.exchange_capture_mode(&mode);
    int rc = gpu_launch_body(tin, stream, samples, want_copy, replacement, allow_capture, out, use_host, why, why_len);
    drv.exchange_capture_mode(&mode);
    return rc;
}

/* Reads run `seq` from the ring. 1: read, 0: not yet written, -1: already overwritten. */
static int ring_read(const scratch_t *s, uint64_t seq, lg_verdict_t *v)
{
    const lg_scan_ring_entry_t *e = &s->ring->entries[seq % LG_RING_SLOTS];
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

static void clean_verdict(lg_verdict_t *v)
{
    v->bad_count = v->checked = v->min = v->max = 0;
    v->n_samples = 0;
}

/* ------------------------------------------------------------------ API */

void lg_validate_init(const lg_runtime_t *runtime)
{
    pthread_mutex_lock(&lock);
    rt = runtime;
    backend = LG_BACKEND_HOST;
    if (load_driver()) {
        CUcontext ctx = NULL;
        if (drv.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) {
            char why[256];
            if (module_for(ctx, why, sizeof why))
                backend = LG_BACKEND_GPU;
        } else if (drv.init(0) == CUDA_SUCCESS) {
            /* No context on this thread yet: GPU when the runtime has started a primary
             * context on some device (a real runtime that is in use, not the test double). */
            int n = 0;
            if (drv.device_get_count(&n) == CUDA_SUCCESS)
                for (int d = 0; d < n && backend == LG_BACKEND_HOST; d++) {
                    unsigned flags;
                    int active = 0;
                    if (drv.primary_ctx_get_state((CUdevice)d, &flags, &active) == CUDA_SUCCESS && active)
                        backend = LG_BACKEND_GPU;
                }
        }
    }
    pthread_mutex_unlock(&lock);
}

/* In a forked child: the parent's CUDA objects mean nothing here (CUDA does not survive fork)
 * and the lock may have been held by a parent thread that does not exist in the child. The
 * tables are dropped, not freed: their memory belonged to the parent's contexts. */
void lg_validate_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    n_modules = 0;
    n_scratches = 0;
    n_pendings = 0;
    n_host_slots = 0;
}

lg_backend_t lg_validate_backend(void)
{
    pthread_mutex_lock(&lock);
    lg_backend_t b = backend;
    pthread_mutex_unlock(&lock);
    return b;
}

uint64_t lg_validate_ns_total(void)
{
    return __atomic_load_n(&ns_total, __ATOMIC_RELAXED);
}

static void account(uint64_t t0)
{
    __atomic_fetch_add(&ns_total, now_ns() - t0, __ATOMIC_RELAXED);
}

int lg_validate_sync(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, char *why, size_t why_len)
{
    uint64_t t0 = now_ns();
    int rc = -1;
    clean_verdict(v);
    if (t->count <= 0) {
        rc = 0;
        goto out;
    }
    if (lg_validate_backend() == LG_BACKEND_GPU) {
        gpu_run_t run;
        bool use_host;
        if (gpu_launch(t, (CUstream)stream, samples, false, 0, false, &run, &use_host, why, why_len) == 0) {
            /* Review fix: the wait ran in the thread's own capture mode, so a global-mode capture
             * on another thread made it an "unsafe" call that fails and invalidates that
             * capture; relaxed for the wait too, like everything in gpu_launch. */
            CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
            drv.exchange_capture_mode(&mode);
            CUresult r = drv.stream_synchronize((CUstream)stream);
            drv.exchange_capture_mode(&mode);
            if (r != CUDA_SUCCESS) {
                snprintf(why, why_len, "waiting for the validator failed: %s", cu_err(r));
                goto out;
            }
            if (ring_read(run.s, run.seq, v) != 1) {
                snprintf(why, why_len, "the validator's verdict was not published (concurrent launches on one stream?)");
                goto out;
            }
            rc = 0;
            goto out;
        }
        if (!use_host)
            goto out;
    }
    rc = host_validate(t, stream, samples, v, why, why_len);
out:
    account(t0);
    return rc;
}

uint64_t lg_validate_masked_copy(const lg_target_t *t, void *stream, int64_t replacement, char *why, size_t why_len)
{
    uint64_t t0 = now_ns();
    uint64_t out = 0;
    if (t->count <= 0) {
        out = t->data;
        goto done;
    }
    if (lg_validate_backend() == LG_BACKEND_GPU) {
        gpu_run_t run;
        bool use_host;
        /* No wait: the loss kernel that reads the copy is enqueued after us on the same stream. */
        if (gpu_launch(t, (CUstream)stream, 0, true, replacement, false, &run, &use_host, why, why_len) == 0) {
            out = run.copy;
            goto done;
        }
        if (!use_host)
            goto done;
    }
    lg_verdict_t *v = malloc(sizeof *v);
    if (!v) {
        snprintf(why, why_len, "out of memory");
        goto done;
    }
    uint64_t copy;
    if (host_sanitize(t, stream, replacement, 0, true, v, &copy, why, why_len) == 0)
        out = copy;
    free(v);
done:
    account(t0);
    return out;
}

/* One async check not collected yet. */
typedef struct pending {
    struct lg_kernel_info *cookie;
    void *stream;
    lg_target_t target;
    scratch_t *s;        /* NULL: host backend, verdict already final */
    uint64_t seq;        /* run to read next */
    bool repeating;      /* captured into a graph: every replay is one more run */
    lg_verdict_t verdict;
} pending_t;


static pending_t **pendings;
static int cap_pendings;

static int pending_add(pending_t *p)
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
    pthread_mutex_unlock(&lock);
    return 0;
}

int lg_validate_async(const lg_target_t *t, void *stream, int64_t replacement, int samples, struct lg_kernel_info *cookie,
                      uint64_t *sanitized, char *why, size_t why_len)
{
    uint64_t t0 = now_ns();
    int rc = -1;
    pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    p->cookie = cookie;
    p->stream = stream;
    p->target = *t;
    if (t->count <= 0) {
        *sanitized = t->data;
        rc = 0;
    } else {
        bool use_host = true;
        if (lg_validate_backend() == LG_BACKEND_GPU) {
            gpu_run_t run;
            if (gpu_launch(t, (CUstream)stream, samples, true, replacement, true, &run, &use_host, why, why_len) == 0) {
                *sanitized = run.copy;
                p->s = run.s;
                p->repeating = run.captured;
                p->seq = run.captured ? 1 : run.seq; /* a graph's first replay publishes run 1 */
                rc = 0;
            }
        }
        /* Host backend: same contract, but the verdict is known before we return. */
        if (rc != 0 && use_host)
            rc = host_sanitize(t, stream, replacement, samples, false, &p->verdict, sanitized, why, why_len);
    }
    if (rc == 0 && pending_add(p) != 0) {
        snprintf(why, why_len, "out of memory");
        rc = -1; /* the copy was made, but the caller must not count on a verdict */
    }
    if (rc != 0)
        free(p);
out:
    account(t0);
    return rc;
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
        int got = ring_read(p->s, p->seq, &r->verdict);
        if (got == 0)
            return 0;
        if (got < 0) {
            clean_verdict(&r->verdict);
            r->verdict.checked = -1;
        }
        *done = true;
        return 1;
    }
    /* Captured launch: report the first bad replay not reported yet, or one clean report for
     * all new clean replays. Replays older than the ring are gone. */
    uint64_t latest = __atomic_load_n(&p->s->ring->latest, __ATOMIC_ACQUIRE);
    if (latest < p->seq)
        return 0;
    uint64_t first = p->seq;
    if (latest >= LG_RING_SLOTS && first < latest - LG_RING_SLOTS + 1)
        first = latest - LG_RING_SLOTS + 1;
    for (uint64_t k = first; k <= latest; k++) {
        if (ring_read(p->s, k, &r->verdict) == 1 && r->verdict.bad_count) {
            p->seq = k + 1;
            return 1;
        }
    }
    p->seq = latest + 1;
    clean_verdict(&r->verdict);
    return 1;
}

bool lg_validate_async_collect(lg_async_report_t *r)
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
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}
