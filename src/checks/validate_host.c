/* validate_host.c: the host backend of validate.c. The labels are copied with the process's
 * own runtime (lg_runtime_t, never cuda* by name, which would re-enter our hooks) on the
 * launch's stream, waited for, and scanned with lg_scan_host, the same lines the GPU kernels
 * run (cuda/lg_scan.h). A contiguous target that is only scanned is copied in chunks through two
 * reused staging buffers (pinned where the runtime gives it), each chunk scanned while the next
 * is copied; the chunks' verdicts are merged into the one a single scan would give. A masked copy is the scanned buffer with its bad labels replaced,
 * uploaded into a device buffer kept per (stream, thread); where the device has no memory left
 * for it, into mapped pinned host memory, so that mask still masks on a full GPU.
 *
 * Used when no driver module can be loaded, when the calling thread has no current context,
 * and under the runtime test double. Called by validate.c only, on the launching thread with
 * the re-entry guard held. Tested by tests/unit/test_scan.c (a memcpy-backed fake runtime)
 * and every e2e test under the test double (a full device: tests/e2e/test_mask_full_gpu.sh).
 */
#include <cuda_runtime_api.h> /* struct cudaPointerAttributes */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks/checks.h"

/* cudaMemcpyKind values (driver_types.h), spelled out for the runtime table's int argument. */
enum { KIND_H2D = 1, KIND_D2H = 2, KIND_DEFAULT = 4 };

/* Device buffers for masked copies, per stream, thread and runtime (a process holding two
 * runtimes uploads each copy through the launching caller's own, into memory it allocated).
 * Threads share streams (PyTorch's default stream is every thread's), and the loss launch is
 * enqueued after the upload returns: a buffer shared by two threads could be rewritten by the
 * other's upload in between, and the loss would read the other thread's labels. One thread
 * enqueues its upload and its loss launch in order, so its own buffer is read before it is
 * written again; a thread id reused after its thread ended takes over a buffer whose last
 * reader is already ahead on the stream. Grown buffers are not freed: the previous loss kernel
 * on the stream may still read the old one. */
typedef struct host_slot {
    const lg_runtime_t *rt;
    void *stream;
    pthread_t thread;
    void *dev;    /* what the loss kernel reads */
    void *pinned; /* the host address of dev when it is mapped pinned host memory, else NULL */
    size_t bytes;
} host_slot_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static host_slot_t host_slots[512];
static int n_host_slots;

/* Is `ptr` memory the device can read? Uses the runtime, so it also works under the test
 * double. A failed query leaves a "last error" in the runtime: we consume it (it is ours; the
 * application's own was saved by the core's entry, lg_runtime_save_error). */
int lg_validate_host_pointer(const lg_runtime_t *rt, const void *ptr, int *kind, char *why, size_t why_len)
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
            snprintf(why, why_len,
                     "labels at %p: the CUDA runtime reports error %d "
                     "(a context already broken by an earlier error?)",
                     ptr, rc);
        return -1;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice: return 0;
    case cudaMemoryTypeManaged:
    case cudaMemoryTypeHost: *kind = KIND_DEFAULT; return 0; /* device-readable through UVA */
    default:
        snprintf(why, why_len,
                 "labels at %p are ordinary host memory, not device memory: the loss kernel "
                 "cannot read them (move the target tensor to the GPU)",
                 ptr);
        return -1;
    }
}

/* What every copy to the host needs: the runtime's calls, labels the device can read (*kind: how
 * to copy them), a stream that is not capturing. 0, or -1 with why. */
static int fetch_ready(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int *kind, char *why,
                       size_t why_len)
{
    if (!rt || !rt->memcpy_async || !rt->stream_synchronize) {
        snprintf(why, why_len, "no CUDA runtime functions to copy the labels with");
        return -1;
    }
    if (lg_validate_host_pointer(rt, (const void *)(uintptr_t)t->data, kind, why, why_len) != 0)
        return -1;
    if (rt->stream_is_capturing) {
        int st = 0;
        if (rt->stream_is_capturing(stream, &st) == 0 && st != 0) {
            snprintf(why, why_len, "the host backend cannot validate a launch captured into a CUDA graph");
            return -1;
        }
    }
    return 0;
}

/* Copies the spanned range of the labels to a malloc'd host buffer (caller frees) and waits. */
static void *host_fetch(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span, char *why,
                        size_t why_len)
{
    int kind;
    if (fetch_ready(rt, t, stream, &kind, why, why_len) != 0)
        return NULL;
    size_t bytes = (size_t)span * lg_scan_elem_size(t->dtype);
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
static void *fetch_and_scan(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int samples, lg_verdict_t *v,
                            int64_t span, char *why, size_t why_len)
{
    void *buf = host_fetch(rt, t, stream, span, why, why_len);
    if (buf)
        lg_scan_host(t, buf, samples, v);
    return buf;
}

/* Staging for the chunked scan: two host buffers of LG_VALIDATE_HOST_STAGE_BYTES, pinned where
 * the runtime gives pinned memory (a copy into pageable memory is staged by the driver and
 * synchronous), so that the copy of one chunk runs while the other is scanned. A set is only used
 * inside one call, so sets are taken from a small pool rather than kept per (stream, thread):
 * memory is bounded by the checks running at once (MAX_STAGES; past it, the one-piece copy). A set
 * belongs to the runtime that allocated it. Never freed (cudaFreeHost synchronizes the device). */
#define MAX_STAGES 16
typedef struct stage {
    const lg_runtime_t *rt;
    void *buf[2];
    bool busy;
    lg_verdict_t part; /* one chunk's verdict */
} stage_t;
static stage_t *stages[MAX_STAGES];
static int n_stages;

static void *stage_alloc(const lg_runtime_t *rt)
{
    void *p = NULL;
    if (rt->malloc_host && rt->malloc_host(&p, LG_VALIDATE_HOST_STAGE_BYTES) == 0 && p)
        return p;
    if (rt->get_last_error)
        rt->get_last_error();
    return malloc(LG_VALIDATE_HOST_STAGE_BYTES);
}

static void stage_give(stage_t *st)
{
    pthread_mutex_lock(&lock);
    st->busy = false;
    pthread_mutex_unlock(&lock);
}

/* A free staging set of rt's with both buffers, or NULL (the caller copies in one piece). */
static stage_t *stage_take(const lg_runtime_t *rt)
{
    stage_t *st = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_stages && !st; i++)
        if (!stages[i]->busy && stages[i]->rt == rt)
            st = stages[i];
    if (!st && n_stages < MAX_STAGES && (st = calloc(1, sizeof *st)) != NULL) {
        st->rt = rt;
        stages[n_stages++] = st;
    }
    if (st)
        st->busy = true;
    pthread_mutex_unlock(&lock);
    /* Allocated outside the lock (pinning takes milliseconds); a set whose allocation failed
     * stays in the pool, to be tried again by the next call that takes it. */
    for (int b = 0; st && b < 2; b++)
        if (!st->buf[b] && !(st->buf[b] = stage_alloc(rt))) {
            stage_give(st);
            st = NULL;
        }
    return st;
}

/* Adds one chunk's verdict p (its elements from logical index `start`) to v, as one scan over
 * both would have: min and max by lg_scan_extends (the earlier of equal values stays, a NaN
 * never replaces a number), samples the first offenders in index order. */
static void merge_part(const lg_target_t *t, lg_verdict_t *v, const lg_verdict_t *p, int64_t start, int max_samples)
{
    if (p->checked) {
        if (v->checked == 0 || lg_scan_extends(t, p->min, v->min, 0))
            v->min = p->min;
        if (v->checked == 0 || lg_scan_extends(t, p->max, v->max, 1))
            v->max = p->max;
    }
    v->checked += p->checked;
    v->bad_count += p->bad_count;
    for (int i = 0; i < p->n_samples && v->n_samples < max_samples; i++) {
        v->samples[v->n_samples] = p->samples[i];
        v->samples[v->n_samples].index += start;
        v->n_samples++;
    }
}

/* A contiguous target (ndim 1, stride 1 once normalized) in chunks through a staging set: the
 * next chunk's copy is enqueued before this one is scanned. 1 when the set could not be had
 * (nothing done: copy in one piece), 0, or -1 with why. */
static int chunked_scan(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int samples, lg_verdict_t *v,
                        char *why, size_t why_len)
{
    int kind;
    if (fetch_ready(rt, t, stream, &kind, why, why_len) != 0)
        return -1;
    size_t es = lg_scan_elem_size(t->dtype);
    int64_t n = t->count, chunk = (int64_t)(LG_VALIDATE_HOST_STAGE_BYTES / es);
    if (t->rule == LG_SCAN_RULE_PROBS) /* whole rows per chunk: the row rule reads a row at once */
        chunk = t->n_classes > 0 && t->n_classes <= chunk ? chunk - chunk % t->n_classes : 0;
    if (chunk <= 0)
        return 1;
    stage_t *st = stage_take(rt);
    if (!st)
        return 1;
    if (samples > LG_MAX_SAMPLES)
        samples = LG_MAX_SAMPLES;
    const char *src = (const char *)(uintptr_t)t->data;
    lg_scan_clear(v);
    int cur = 0;
    int rc = rt->memcpy_async(st->buf[0], src, (size_t)(n < chunk ? n : chunk) * es, kind, stream);
    if (rc == 0)
        rc = rt->stream_synchronize(stream);
    for (int64_t start = 0; rc == 0 && start < n; start += chunk, cur ^= 1) {
        int64_t len = n - start < chunk ? n - start : chunk, next = start + chunk;
        if (next < n) {
            int64_t len2 = n - next < chunk ? n - next : chunk;
            rc = rt->memcpy_async(st->buf[cur ^ 1], src + (size_t)next * es, (size_t)len2 * es, kind, stream);
            if (rc != 0)
                break;
        }
        lg_target_t part = *t;
        part.data = (uint64_t)(uintptr_t)st->buf[cur];
        part.count = part.sizes[0] = len;
        lg_scan_host(&part, st->buf[cur], samples - v->n_samples, &st->part);
        merge_part(t, v, &st->part, start, samples);
        if (next < n)
            rc = rt->stream_synchronize(stream);
    }
    if (rc != 0) {
        /* An enqueued copy may still write a buffer: the set is given back only after the stream
         * is drained, and when that fails it is left out of the pool. */
        if (rt->get_last_error)
            rt->get_last_error();
        snprintf(why, why_len, "copying %zu bytes of labels from %p failed (CUDA error %d)", (size_t)n * es,
                 (void *)src, rc);
        if (rt->stream_synchronize(stream) != 0) {
            if (rt->get_last_error)
                rt->get_last_error();
            return -1;
        }
    }
    stage_give(st);
    return rc == 0 ? 0 : -1;
}

int lg_validate_host_scan(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span, int samples,
                          lg_verdict_t *v, char *why, size_t why_len)
{
    lg_target_t c;
    lg_scan_normalize(t, &c);
    if (c.ndim == 1 && c.strides[0] == 1 && span == c.count && (size_t)span * lg_scan_elem_size(c.dtype) > 4096) {
        int rc = chunked_scan(rt, &c, stream, samples, v, why, why_len);
        if (rc != 1)
            return rc;
    }
    void *buf = fetch_and_scan(rt, t, stream, samples, v, span, why, why_len);
    if (!buf)
        return -1;
    free(buf);
    return 0;
}

/* Mapped pinned host memory of `bytes` for a masked copy, when the device refuses more memory:
 * the loss kernel reads it over the bus (slower, but the launch runs masked; the alternative is
 * blocking it, which under DDP hangs the other ranks). *dev is its device address. */
static void *pinned_scratch(const lg_runtime_t *rt, size_t bytes, void **dev)
{
    void *p = NULL;
    if (!rt->malloc_host || rt->malloc_host(&p, bytes) != 0 || !p) {
        if (rt->get_last_error)
            rt->get_last_error();
        return NULL;
    }
    *dev = p; /* unified addressing: the host address is the device's */
    if (rt->host_get_device_pointer && rt->host_get_device_pointer(dev, p, 0) != 0) {
        if (rt->get_last_error)
            rt->get_last_error();
        if (rt->free_host)
            rt->free_host(p);
        return NULL;
    }
    return p;
}

/* Device-readable buffer of at least `bytes` for the calling thread's masked copies on this
 * stream (host backend): device memory, else mapped pinned host memory (*pinned set to its host
 * address). Grown buffers are not freed: the previous loss kernel on the stream may still read
 * the old one. */
static void *host_scratch(const lg_runtime_t *rt, void *stream, size_t bytes, void **pinned, char *why,
                          size_t why_len)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&lock);
    host_slot_t *s = NULL;
    for (int i = 0; i < n_host_slots && !s; i++)
        if (host_slots[i].stream == stream && host_slots[i].rt == rt && pthread_equal(host_slots[i].thread, self))
            s = &host_slots[i];
    if (!s && n_host_slots < (int)(sizeof host_slots / sizeof host_slots[0])) {
        s = &host_slots[n_host_slots++];
        s->rt = rt;
        s->stream = stream;
        s->thread = self;
    }
    void *out = NULL;
    *pinned = NULL;
    if (!s) {
        snprintf(why, why_len, "too many (stream, thread) pairs with masked copies (%d)", n_host_slots);
    } else if (s->bytes >= bytes) {
        out = s->dev;
        *pinned = s->pinned;
    } else if (!rt->malloc_device) {
        snprintf(why, why_len, "no cudaMalloc in the runtime table");
    } else {
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
        void *p = NULL, *host = NULL;
        int rc = rt->malloc_device(&p, want);
        if (rc != 0 || !p) {
            if (rt->get_last_error)
                rt->get_last_error();
            p = NULL;
            host = pinned_scratch(rt, want = bytes, &p);
            if (!host)
                snprintf(why, why_len,
                         "cudaMalloc of %zu bytes for the masked copy failed (error %d), and so did mapped pinned "
                         "host memory",
                         want, rc);
        }
        if (p) {
            s->dev = p;
            s->pinned = host;
            s->bytes = want;
            out = p;
            *pinned = host;
        }
    }
    pthread_mutex_unlock(&lock);
    return out;
}

void lg_validate_host_replace(const lg_target_t *t, void *buf, int64_t replacement)
{
    for (int64_t i = 0; i < t->count; i++) {
        int64_t val = lg_scan_load(t, buf, i);
        if (lg_scan_is_ignored(t, val) || !lg_scan_is_bad(t, val))
            continue;
        int64_t off = lg_scan_offset(t, i);
        switch (t->dtype) {
        case LG_DTYPE_UINT8: ((uint8_t *)buf)[off] = (uint8_t)replacement; break;
        case LG_DTYPE_INT32: ((int32_t *)buf)[off] = (int32_t)replacement; break;
        /* range targets: replacement is raw bits of the dtype (0: the value 0.0) */
        case LG_DTYPE_FLOAT32: ((uint32_t *)buf)[off] = (uint32_t)replacement; break;
        case LG_DTYPE_FLOAT16:
        case LG_DTYPE_BFLOAT16: ((uint16_t *)buf)[off] = (uint16_t)replacement; break;
        default: ((int64_t *)buf)[off] = replacement; break;
        }
    }
}

/* Scan on the host and, when any label is bad, upload a copy with each bad one replaced.
 * *copy_out is the copy's address of logical element 0, or t->data when nothing was bad and
 * `always_copy` is false. */
int lg_validate_host_sanitize(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                              int64_t replacement, int samples, bool always_copy, lg_verdict_t *v, uint64_t *copy_out,
                              char *why, size_t why_len)
{
    void *buf = fetch_and_scan(rt, t, stream, samples, v, span, why, why_len);
    if (!buf)
        return -1;
    if (v->bad_count == 0 && !always_copy) {
        free(buf);
        *copy_out = t->data;
        return 0;
    }
    lg_validate_host_replace(t, buf, replacement);
    size_t bytes = (size_t)span * lg_scan_elem_size(t->dtype);
    void *pinned = NULL;
    void *dev = host_scratch(rt, stream, bytes, &pinned, why, why_len);
    int rc = -1;
    if (dev) {
        /* On the stream, so ordered after what it runs; cudaMemcpyDefault for pinned memory. */
        rc = pinned ? rt->memcpy_async(pinned, buf, bytes, KIND_DEFAULT, stream)
                    : rt->memcpy_async(dev, buf, bytes, KIND_H2D, stream);
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

void lg_validate_host_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_host_slots = 0;
    n_stages = 0; /* the parent's staging is not the child's to use (a thread may have held a set) */
}
