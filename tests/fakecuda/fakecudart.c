/* fakecudart.c: the CUDA runtime test double, built as build/fakecuda/libcudart.so.13.
 *
 * Programs built by nvcc 13 with `-cudart shared` run against it unchanged when
 * LD_LIBRARY_PATH points at build/fakecuda: kernels register here (__cudaRegisterFunction),
 * launches from every entry point run the kernel as host code chosen by a substring of its
 * mangled name (nll.c, or one added with fakecudart_register_emulator), and unknown kernels are
 * no-ops. Device memory is host memory, but allocations are tracked, so
 * cudaPointerGetAttributes and the copy checks behave like the real runtime's.
 *
 * Error semantics are CUDA's: every failing call sets the calling thread's last error
 * (cudaGetLastError returns and clears it, cudaPeekAtLastError does not). A kernel that fails a
 * device assert leaves the launch successful (launches are asynchronous); the error surfaces at
 * the next synchronising call (stream/device/event sync or query, cudaMemcpy, cudaMemset,
 * cudaFree...), with the device's assert lines printed to stderr at that moment, and from then
 * on it is sticky: every later call, cudaGetLastError included, returns cudaErrorAssert (710).
 * After fork(), a child that touches a runtime its parent had initialised gets
 * cudaErrorInitializationError, as with the real driver (FAKECUDA_FORK_OK=1 lifts this).
 * FAKECUDA_TRACE=1 prints one stderr line per launch.
 *
 * Called from any thread of the test program (16 threads on 16 streams in tests/progs/threads):
 * the registry, allocations and handle lists are behind one mutex each; kernels run on the
 * launching thread. Tested by tests/fakecuda/test_*.sh.
 */
#include "fakecudart.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ errors */

static __thread cudaError_t tl_last;          /* this thread's last error */
static _Atomic int pending_err;               /* a kernel failed; not yet seen by the host */
static _Atomic int sticky_err;                /* the context is dead */
static _Atomic int ctx_used;                  /* the process has made runtime calls */
static _Atomic int forked_child;              /* we are a child forked after ctx_used */

static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char msg_buf[16384];                   /* device assert lines not yet flushed */
static size_t msg_len;

static int trace_on;
static int fork_ok;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *t = getenv("FAKECUDA_TRACE");
    trace_on = t && *t && strcmp(t, "0") != 0;
    const char *f = getenv("FAKECUDA_FORK_OK");
    fork_ok = f && *f && strcmp(f, "0") != 0;
}

static void trace(const char *fmt, ...)
{
    pthread_once(&env_once, read_env);
    if (!trace_on) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) tl_last = e;
    return e;
}

static void flush_messages(void)
{
    pthread_mutex_lock(&msg_lock);
    if (msg_len) {
        fflush(stdout);
        ssize_t w = write(2, msg_buf, msg_len);
        (void)w;
        msg_len = 0;
    }
    pthread_mutex_unlock(&msg_lock);
}

void fk_device_assert(const char *file, unsigned line, const char *func, const unsigned block[3], const unsigned thread[3], const char *expr)
{
    pthread_mutex_lock(&msg_lock);
    if (msg_len < sizeof msg_buf) {
        int n = snprintf(msg_buf + msg_len, sizeof msg_buf - msg_len,
                         "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n",
                         file, line, func, block[0], block[1], block[2], thread[0], thread[1], thread[2], expr);
        if (n > 0) msg_len += (size_t)n < sizeof msg_buf - msg_len ? (size_t)n : sizeof msg_buf - msg_len - 1;
    }
    pthread_mutex_unlock(&msg_lock);
}

/* A kernel's error becomes visible: at a synchronising call. */
static void sync_point(void)
{
    int p = atomic_load(&pending_err);
    if (p) {
        int expected = 0;
        atomic_compare_exchange_strong(&sticky_err, &expected, p);
    }
    flush_messages();
}

/* The entry check of every call that needs a live context. */
static cudaError_t enter(void)
{
    if (atomic_load(&forked_child)) {
        pthread_once(&env_once, read_env);
        if (!fork_ok) return ret(cudaErrorInitializationError);
    }
    atomic_store(&ctx_used, 1);
    int s = atomic_load(&sticky_err);
    if (s) return ret((cudaError_t)s);
    return cudaSuccess;
}

static void poison(cudaError_t e)
{
    int expected = 0;
    atomic_compare_exchange_strong(&pending_err, &expected, (int)e);
}

/* Defined with their tables below. A child forked while another thread of the parent held one
 * of them must not inherit it held (FAKECUDA_FORK_OK lets the child use the runtime). */
static pthread_mutex_t reg_lock, mem_lock, obj_lock;

static void after_fork_child(void)
{
    if (atomic_load(&ctx_used)) atomic_store(&forked_child, 1);
    pthread_mutex_init(&msg_lock, NULL);
    pthread_mutex_init(&reg_lock, NULL);
    pthread_mutex_init(&mem_lock, NULL);
    pthread_mutex_init(&obj_lock, NULL);
}

__attribute__((constructor)) static void fk_init(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((destructor)) static void fk_fini(void)
{
    /* A context torn down with a failed kernel still prints the device's lines. */
    if (atomic_load(&pending_err)) flush_messages();
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return name;
#include "errtab.h"
#undef X
    default: return "unrecognized error code";
    }
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return text;
#include "errtab.h"
#undef X
    default: return "unrecognized error code";
    }
}

cudaError_t cudaGetLastError(void)
{
    int s = atomic_load(&sticky_err);
    if (s) return (cudaError_t)s;      /* sticky: reported, never cleared */
    cudaError_t e = tl_last;
    tl_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    int s = atomic_load(&sticky_err);
    if (s) return (cudaError_t)s;
    return tl_last;
}

FK_EXPORT const char *fakecudart_identity(void) { return "fakecuda"; }

/* ------------------------------------------------------------------ registry */

/* A registered kernel. cudaKernel_t handles are pointers to these, distinct from the host stub,
 * as in the real runtime. Never freed: a handle stays comparable after unregistration. */
struct CUkern_st {
    unsigned magic;
    const void *stub;
    char *name;
    void **module;                 /* NULL once the module is unregistered */
    fk_sig_t sig;
    _Atomic unsigned long launches, emulated;
};
#define KERN_MAGIC 0x6b65726eu

typedef struct fk_module { void *fatbin; int ended; } fk_module_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUkern_st **kernels;
static size_t n_kernels, cap_kernels;

typedef struct user_emu { char *substring; fakecudart_emulator_fn fn; } user_emu_t;
static user_emu_t user_emus[64];
static int n_user_emus;

void **__cudaRegisterFatBinary(void *fatCubin)
{
    fk_module_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->fatbin = fatCubin;
    return (void **)m;
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
    if (handle) ((fk_module_t *)handle)->ended = 1;
}

void __cudaUnregisterFatBinary(void **handle)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < n_kernels; i++)
        if (kernels[i]->module == handle) kernels[i]->module = NULL;
    pthread_mutex_unlock(&reg_lock);
}

char __cudaInitModule(void **handle) { (void)handle; return 1; }

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    struct CUkern_st *k = calloc(1, sizeof *k);
    if (!k) return;
    k->magic = KERN_MAGIC;
    k->stub = hostFun;
    k->name = strdup(deviceName ? deviceName : deviceFun);
    k->module = handle;
    fk_sig_parse(k->name, &k->sig);
    pthread_mutex_lock(&reg_lock);
    if (n_kernels == cap_kernels) {
        size_t cap = cap_kernels ? cap_kernels * 2 : 64;
        struct CUkern_st **nk = realloc(kernels, cap * sizeof *nk);
        if (!nk) { pthread_mutex_unlock(&reg_lock); free(k->name); free(k); return; }
        kernels = nk;
        cap_kernels = cap;
    }
    kernels[n_kernels++] = k;
    pthread_mutex_unlock(&reg_lock);
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                       int ext, size_t size, int constant, int global)
{
    /* Device variables live in their host shadow: nothing to record. */
}

void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global)
{
}

/* Stub or handle -> live registry entry, or NULL. */
static struct CUkern_st *find_kernel(const void *func)
{
    struct CUkern_st *found = NULL;
    if (!func) return NULL;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < n_kernels; i++) {
        struct CUkern_st *k = kernels[i];
        if ((const void *)k == func || (k->stub == func && k->module)) {
            found = k->module ? k : NULL;
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *stub)
{
    struct CUkern_st *k = find_kernel(stub);
    if (!out) return ret(cudaErrorInvalidValue);
    if (!k) return ret(cudaErrorInvalidDeviceFunction);
    *out = k;
    return cudaSuccess;
}

cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    cudaError_t e = enter();
    if (e) return e;
    return __cudaGetKernel(kernelPtr, entryFuncAddr);
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!functionPtr) return ret(cudaErrorInvalidValue);
    struct CUkern_st *k = find_kernel(symbolPtr);
    if (!k) return ret(cudaErrorInvalidDeviceFunction);
    *functionPtr = (cudaFunction_t)(void *)k;
    return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    if (!name) return ret(cudaErrorInvalidValue);
    struct CUkern_st *k = find_kernel(func);
    if (!k) return ret(cudaErrorInvalidDeviceFunction);
    *name = k->name;
    return cudaSuccess;
}

cudaError_t cudaFuncGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    struct CUkern_st *k = find_kernel(func);
    if (!k) return ret(cudaErrorInvalidDeviceFunction);
    if (!k->sig.ok) return ret(cudaErrorNotSupported); /* a name the fake cannot read */
    if (paramIndex >= (size_t)k->sig.n_params) return ret(cudaErrorInvalidValue);
    if (paramOffset) *paramOffset = k->sig.offset[paramIndex];
    if (paramSize) *paramSize = k->sig.size[paramIndex];
    return cudaSuccess;
}

FK_EXPORT int fakecudart_register_emulator(const char *substring, fakecudart_emulator_fn fn)
{
    if (!substring || !*substring || !fn) return -1;
    int rc = -1;
    pthread_mutex_lock(&reg_lock);
    if (n_user_emus < (int)(sizeof user_emus / sizeof user_emus[0])) {
        user_emus[n_user_emus].substring = strdup(substring);
        user_emus[n_user_emus].fn = fn;
        n_user_emus++;
        rc = 0;
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

static unsigned long count_matching(const char *substring, int emulated)
{
    unsigned long n = 0;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < n_kernels; i++)
        if (!substring || strstr(kernels[i]->name, substring))
            n += emulated ? atomic_load(&kernels[i]->emulated) : atomic_load(&kernels[i]->launches);
    pthread_mutex_unlock(&reg_lock);
    return n;
}

/* Launches of kernels whose mangled name contains substring (NULL: all) that reached the
 * device, and how many of them ran an emulator: tests use these to see whether a launch was
 * let through, skipped or rewritten by the library above. */
FK_EXPORT unsigned long fakecudart_launch_count(const char *substring) { return count_matching(substring, 0); }
FK_EXPORT unsigned long fakecudart_emulated_count(const char *substring) { return count_matching(substring, 1); }

/* ------------------------------------------------------------------ memory */

enum { MEM_DEVICE = 1, MEM_HOST = 2 };
typedef struct alloc { char *base; size_t size; int kind; } alloc_t;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static alloc_t *allocs;
static size_t n_allocs, cap_allocs;

static int mem_add(void *p, size_t size, int kind)
{
    pthread_mutex_lock(&mem_lock);
    if (n_allocs == cap_allocs) {
        size_t cap = cap_allocs ? cap_allocs * 2 : 256;
        alloc_t *na = realloc(allocs, cap * sizeof *na);
        if (!na) { pthread_mutex_unlock(&mem_lock); return -1; }
        allocs = na;
        cap_allocs = cap;
    }
    allocs[n_allocs++] = (alloc_t){ p, size, kind };
    pthread_mutex_unlock(&mem_lock);
    return 0;
}

/* Removes the allocation starting exactly at p; returns its kind or 0. */
static int mem_remove(void *p, int kind)
{
    int found = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < n_allocs; i++) {
        if (allocs[i].base == p && allocs[i].kind == kind) {
            found = kind;
            allocs[i] = allocs[--n_allocs];
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

/* The kind of the allocation containing [p, p+n), 0 if none holds all of it. */
static int mem_kind(const void *p, size_t n, const char **lo, const char **hi)
{
    int kind = 0;
    const char *c = p;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < n_allocs; i++) {
        const alloc_t *a = &allocs[i];
        if (c >= a->base && c < a->base + (a->size ? a->size : 1)) {
            if ((size_t)(c - a->base) + n <= a->size || (n == 0)) {
                kind = a->kind;
                if (lo) *lo = a->base;
                if (hi) *hi = a->base + a->size;
            }
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return kind;
}

int fk_mem_range(const void *p, const char **lo, const char **hi) { return mem_kind(p, 0, lo, hi); }

static cudaError_t alloc_tracked(void **out, size_t size, int kind)
{
    if (!out) return ret(cudaErrorInvalidValue);
    if (size == 0) { *out = NULL; return cudaSuccess; }
    void *p = NULL;
    if (size > ((size_t)1 << 40) || posix_memalign(&p, 256, (size + 255) & ~(size_t)255) != 0) return ret(cudaErrorMemoryAllocation);
    memset(p, 0xa5, size);         /* device memory starts as garbage, not zeros */
    if (mem_add(p, size, kind) != 0) { free(p); return ret(cudaErrorMemoryAllocation); }
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    cudaError_t e = enter();
    if (e) return e;
    return alloc_tracked(devPtr, size, MEM_DEVICE);
}

cudaError_t cudaFree(void *devPtr)
{
    sync_point(); /* cudaFree synchronises the device */
    cudaError_t e = enter();
    if (e) return e;
    if (!devPtr) return cudaSuccess;
    if (!mem_remove(devPtr, MEM_DEVICE)) return ret(cudaErrorInvalidValue);
    free(devPtr);
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s) { (void)s; return cudaMalloc(devPtr, size); }
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t s) { (void)s; return cudaMalloc(devPtr, size); }
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t s) { (void)s; return cudaFree(devPtr); }
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s) { (void)s; return cudaFree(devPtr); }

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    cudaError_t e = enter();
    if (e) return e;
    return alloc_tracked(ptr, size, MEM_HOST);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    cudaError_t e = enter();
    if (e) return e;
    if (flags & ~0xfu) return ret(cudaErrorInvalidValue);
    return alloc_tracked(pHost, size, MEM_HOST);
}

cudaError_t cudaFreeHost(void *ptr)
{
    sync_point();
    cudaError_t e = enter();
    if (e) return e;
    if (!ptr) return cudaSuccess;
    if (!mem_remove(ptr, MEM_HOST)) return ret(cudaErrorInvalidValue);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!pDevice || flags != 0) return ret(cudaErrorInvalidValue);
    if (mem_kind(pHost, 0, NULL, NULL) != MEM_HOST) return ret(cudaErrorInvalidValue);
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!attr) return ret(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    int kind = mem_kind(ptr, 0, NULL, NULL);
    if (kind == MEM_DEVICE) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = 0;
        attr->devicePointer = (void *)ptr;
    } else if (kind == MEM_HOST) {
        attr->type = cudaMemoryTypeHost;
        attr->device = 0;
        attr->devicePointer = (void *)ptr;
        attr->hostPointer = (void *)ptr;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = -2;          /* CU_DEVICE_INVALID, what the real runtime reports */
    }
    return cudaSuccess;
}

/* The checks the real runtime makes on a copy: the device side must be memory it knows. */
static cudaError_t check_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return cudaErrorInvalidValue;
    switch (kind) {
    case cudaMemcpyHostToHost: return cudaSuccess;
    case cudaMemcpyHostToDevice: return mem_kind(dst, n, NULL, NULL) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return mem_kind(src, n, NULL, NULL) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
        return mem_kind(src, n, NULL, NULL) && mem_kind(dst, n, NULL, NULL) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault: return cudaSuccess;
    default: return cudaErrorInvalidMemcpyDirection;
    }
}

/* ------------------------------------------------------------------ streams, graphs */

enum { NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET };
typedef struct node {
    int type;
    struct CUkern_st *kernel;
    dim3 grid, block;
    size_t shm;
    unsigned char *argbuf;         /* copies of the parameter values, taken at capture */
    void *argv[FK_MAX_PARAMS];
    void *dst;
    const void *src;
    size_t n;
    int value;
    enum cudaMemcpyKind kind;
    struct node *next;
} node_t;

#define STREAM_MAGIC 0x73747265u
#define GRAPH_MAGIC 0x67726170u
#define EXEC_MAGIC 0x65786563u
#define EVENT_MAGIC 0x6576656eu

struct CUgraph_st { unsigned magic; node_t *head, *tail; struct CUgraph_st *next_live; };
struct CUgraphExec_st { unsigned magic; struct CUgraph_st *graph; struct CUgraphExec_st *next_live; };
struct CUstream_st {
    unsigned magic;
    unsigned flags;
    int priority;
    enum cudaStreamCaptureStatus capture;
    struct CUgraph_st *graph;      /* being captured */
    struct CUstream_st *next_live;
};
struct CUevent_st {
    unsigned magic;
    unsigned flags;
    int recorded;
    struct timespec when;
    struct CUevent_st *next_live;
};

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *live_streams;
static struct CUevent_st *live_events;
static struct CUgraph_st *live_graphs;
static struct CUgraphExec_st *live_execs;

/* Unlink from a singly linked live list; returns 1 if it was there. */
#define LIVE_REMOVE(head, obj, found) do { \
        __typeof__(head) *pp_ = &(head); found = 0; \
        while (*pp_) { if (*pp_ == (obj)) { *pp_ = (obj)->next_live; found = 1; break; } pp_ = &(*pp_)->next_live; } \
    } while (0)
#define LIVE_FIND(head, obj, found) do { \
        __typeof__(head) p_ = (head); found = 0; \
        while (p_) { if (p_ == (obj)) { found = 1; break; } p_ = p_->next_live; } \
    } while (0)

/* 0 (legacy), cudaStreamLegacy and cudaStreamPerThread are always valid; NULL *out for them. */
static int stream_ok(cudaStream_t s, struct CUstream_st **out)
{
    *out = NULL;
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return 1;
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_FIND(live_streams, s, found);
    pthread_mutex_unlock(&obj_lock);
    if (found) *out = s;
    return found;
}

static int any_capture_active(void)
{
    int active = 0;
    pthread_mutex_lock(&obj_lock);
    for (struct CUstream_st *s = live_streams; s; s = s->next_live)
        if (s->capture == cudaStreamCaptureStatusActive) active = 1;
    pthread_mutex_unlock(&obj_lock);
    return active;
}

static void graph_free_nodes(struct CUgraph_st *g)
{
    node_t *n = g->head;
    while (n) { node_t *next = n->next; free(n->argbuf); free(n); n = next; }
    g->head = g->tail = NULL;
}

static void capture_append(struct CUstream_st *s, node_t *n)
{
    pthread_mutex_lock(&obj_lock);
    if (s->graph) {
        if (s->graph->tail) s->graph->tail->next = n; else s->graph->head = n;
        s->graph->tail = n;
        n = NULL;
    }
    pthread_mutex_unlock(&obj_lock);
    if (n) { free(n->argbuf); free(n); }
}

static cudaError_t stream_create(cudaStream_t *p, unsigned flags, int priority)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!p || flags > 1) return ret(cudaErrorInvalidValue);
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return ret(cudaErrorMemoryAllocation);
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    s->priority = priority;
    s->capture = cudaStreamCaptureStatusNone;
    pthread_mutex_lock(&obj_lock);
    s->next_live = live_streams;
    live_streams = s;
    pthread_mutex_unlock(&obj_lock);
    *p = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *p) { return stream_create(p, 0, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags) { return stream_create(p, flags, 0); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *p, unsigned int flags, int priority) { return stream_create(p, flags, priority); }

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    cudaError_t e = enter();
    if (e) return e;
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return ret(cudaErrorInvalidResourceHandle);
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_REMOVE(live_streams, s, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidResourceHandle);
    if (s->graph) { graph_free_nodes(s->graph); free(s->graph); }
    s->magic = 0;
    free(s);
    return cudaSuccess;
}

static cudaError_t stream_sync(cudaStream_t s)
{
    struct CUstream_st *st;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    if (st && st->capture != cudaStreamCaptureStatusNone) {
        st->capture = cudaStreamCaptureStatusInvalidated;
        return ret(cudaErrorStreamCaptureUnsupported);
    }
    sync_point();
    return enter();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) { return stream_sync(s); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return stream_sync(s); }
/* All work is done by the time a call returns, so a query is a synchronisation. */
cudaError_t cudaStreamQuery(cudaStream_t s) { return stream_sync(s); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return stream_sync(s); }

cudaError_t cudaDeviceSynchronize(void)
{
    if (any_capture_active()) return ret(cudaErrorStreamCaptureUnsupported);
    sync_point();
    return enter();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    (void)ev;
    (void)flags;
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t ev, unsigned int flags) { return cudaStreamWaitEvent(s, ev, flags); }

static cudaError_t begin_capture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    if (!st) return ret(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot be captured */
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed) return ret(cudaErrorInvalidValue);
    if (st->capture != cudaStreamCaptureStatusNone) return ret(cudaErrorIllegalState);
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g) return ret(cudaErrorMemoryAllocation);
    g->magic = GRAPH_MAGIC;
    pthread_mutex_lock(&obj_lock);
    st->graph = g;
    st->capture = cudaStreamCaptureStatusActive;
    pthread_mutex_unlock(&obj_lock);
    return cudaSuccess;
}

static cudaError_t end_capture(cudaStream_t s, cudaGraph_t *out)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!out) return ret(cudaErrorInvalidValue);
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    if (!st || st->capture == cudaStreamCaptureStatusNone) return ret(cudaErrorIllegalState);
    pthread_mutex_lock(&obj_lock);
    struct CUgraph_st *g = st->graph;
    int invalid = st->capture == cudaStreamCaptureStatusInvalidated;
    st->graph = NULL;
    st->capture = cudaStreamCaptureStatusNone;
    if (!invalid) { g->next_live = live_graphs; live_graphs = g; }
    pthread_mutex_unlock(&obj_lock);
    if (invalid) {
        graph_free_nodes(g);
        free(g);
        *out = NULL;
        return ret(cudaErrorStreamCaptureInvalidated);
    }
    *out = g;
    return cudaSuccess;
}

static cudaError_t is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!status) return ret(cudaErrorInvalidValue);
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    *status = st ? st->capture : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) { return begin_capture(s, mode); }
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode) { return begin_capture(s, mode); }
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) { return end_capture(s, g); }
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g) { return end_capture(s, g); }
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) { return is_capturing(s, st); }
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st) { return is_capturing(s, st); }

/* ------------------------------------------------------------------ copies */

static cudaError_t memcpy_on(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, int is_async)
{
    if (!is_async) sync_point();
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    e = check_copy(dst, src, n, kind);
    if (e) return ret(e);
    if (st && st->capture == cudaStreamCaptureStatusActive && is_async) {
        node_t *nd = calloc(1, sizeof *nd);
        if (!nd) return ret(cudaErrorMemoryAllocation);
        nd->type = NODE_MEMCPY;
        nd->dst = dst; nd->src = src; nd->n = n; nd->kind = kind;
        capture_append(st, nd);
        return cudaSuccess;
    }
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) { return memcpy_on(dst, src, n, kind, 0, 0); }
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) { return memcpy_on(dst, src, n, kind, cudaStreamPerThread, 0); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) { return memcpy_on(dst, src, n, kind, s, 1); }
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) { return memcpy_on(dst, src, n, kind, s, 1); }

static cudaError_t memset_on(void *dst, int value, size_t n, cudaStream_t s, int is_async)
{
    if (!is_async) sync_point();
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    if (n && !mem_kind(dst, n, NULL, NULL)) return ret(cudaErrorInvalidValue);
    if (st && st->capture == cudaStreamCaptureStatusActive && is_async) {
        node_t *nd = calloc(1, sizeof *nd);
        if (!nd) return ret(cudaErrorMemoryAllocation);
        nd->type = NODE_MEMSET;
        nd->dst = dst; nd->value = value; nd->n = n;
        capture_append(st, nd);
        return cudaSuccess;
    }
    if (n) memset(dst, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *dst, int value, size_t n) { return memset_on(dst, value, n, 0, 0); }
cudaError_t cudaMemset_ptds(void *dst, int value, size_t n) { return memset_on(dst, value, n, cudaStreamPerThread, 0); }
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) { return memset_on(dst, value, n, s, 1); }
cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t n, cudaStream_t s) { return memset_on(dst, value, n, s, 1); }

/* ------------------------------------------------------------------ launches */

static int config_ok(dim3 g, dim3 b)
{
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) return 0;
    if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) return 0;
    if (b.x > 1024 || b.y > 1024 || b.z > 64) return 0;
    if ((unsigned long long)b.x * b.y * b.z > 1024) return 0;
    return 1;
}

/* Runs the kernel's emulator (user-registered first, then built-in), on this thread.
 * Returns the error the kernel leaves in the context. */
static cudaError_t run_kernel(struct CUkern_st *k, dim3 grid, dim3 block, void **args, size_t shm, cudaStream_t stream)
{
    atomic_fetch_add(&k->launches, 1);
    fakecudart_emulator_fn user = NULL;
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < n_user_emus; i++)
        if (strstr(k->name, user_emus[i].substring)) { user = user_emus[i].fn; break; }
    pthread_mutex_unlock(&reg_lock);
    if (user) {
        atomic_fetch_add(&k->emulated, 1);
        trace("[fakecuda] launch %s grid=(%u,%u,%u) block=(%u,%u,%u) stream=%p: user emulator", k->name,
              grid.x, grid.y, grid.z, block.x, block.y, block.z, (void *)stream);
        return user(k->name, grid, block, args, shm, stream);
    }
    for (const fk_emulator_t *em = fk_nll_emulators; em->substring; em++) {
        if (!strstr(k->name, em->substring)) continue;
        int layout_ok = k->sig.ok && k->sig.n_params == em->n_params;
        for (int i = 0; layout_ok && i < em->n_params; i++)
            if (k->sig.size[i] != em->sizes[i]) layout_ok = 0;
        if (!layout_ok) {
            trace("[fakecuda] launch %s: name matches %s but the parameter list differs: no-op", k->name, em->substring);
            return cudaSuccess;
        }
        fk_launch_t l = { k->name, &k->sig, grid, block, args, shm, stream };
        atomic_fetch_add(&k->emulated, 1);
        cudaError_t e = em->fn(&l);
        trace("[fakecuda] launch %s grid=(%u,%u,%u) block=(%u,%u,%u) stream=%p: emulated -> %d", k->name,
              grid.x, grid.y, grid.z, block.x, block.y, block.z, (void *)stream, (int)e);
        return e;
    }
    trace("[fakecuda] launch %s grid=(%u,%u,%u) block=(%u,%u,%u) stream=%p: no emulator, no-op", k->name,
          grid.x, grid.y, grid.z, block.x, block.y, block.z, (void *)stream);
    return cudaSuccess;
}

static cudaError_t launch(const void *func, dim3 grid, dim3 block, void **args, size_t shm, cudaStream_t stream)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUkern_st *k = find_kernel(func);
    if (!k) return ret(cudaErrorInvalidDeviceFunction);
    if (!config_ok(grid, block)) return ret(cudaErrorInvalidConfiguration);
    if (shm > 227 * 1024) return ret(cudaErrorInvalidValue);
    struct CUstream_st *st;
    if (!stream_ok(stream, &st)) return ret(cudaErrorInvalidResourceHandle);
    if (st && st->capture == cudaStreamCaptureStatusActive) {
        /* Recorded, not run; the parameter values are copied now, as cudaGraph kernel nodes do. */
        node_t *nd = calloc(1, sizeof *nd);
        if (!nd) return ret(cudaErrorMemoryAllocation);
        nd->type = NODE_KERNEL;
        nd->kernel = k; nd->grid = grid; nd->block = block; nd->shm = shm;
        if (k->sig.ok && k->sig.n_params > 0 && args) {
            size_t total = k->sig.offset[k->sig.n_params - 1] + k->sig.size[k->sig.n_params - 1];
            nd->argbuf = malloc(total);
            if (!nd->argbuf) { free(nd); return ret(cudaErrorMemoryAllocation); }
            for (int i = 0; i < k->sig.n_params; i++) {
                memcpy(nd->argbuf + k->sig.offset[i], args[i], k->sig.size[i]);
                nd->argv[i] = nd->argbuf + k->sig.offset[i];
            }
        }
        capture_append(st, nd);
        return cudaSuccess;
    }
    if (atomic_load(&pending_err)) return cudaSuccess; /* the device is dead; it runs nothing more */
    e = run_kernel(k, grid, block, args, shm, stream);
    if (e != cudaSuccess) poison(e);
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s) { return launch(kernel, g, b, args, shm, s); }
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s) { return launch(kernel, g, b, args, shm, s); }
cudaError_t cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s) { return launch(func, g, b, args, shm, s); }
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s) { return launch(func, g, b, args, shm, s); }

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    if (!config) return ret(cudaErrorInvalidValue);
    return launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream);
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args) { return cudaLaunchKernelExC(config, func, args); }

/* <<<>>> pushes its configuration; the host stub pops it. One stack per thread. */
static __thread struct { dim3 grid, block; size_t shm; void *stream; } call_stack[16];
static __thread int call_depth;

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shm, struct CUstream_st *stream)
{
    if (call_depth >= 16) return 1;
    call_stack[call_depth].grid = grid;
    call_stack[call_depth].block = block;
    call_stack[call_depth].shm = shm;
    call_stack[call_depth].stream = stream;
    call_depth++;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shm, void *stream)
{
    if (call_depth <= 0) return ret(cudaErrorMissingConfiguration);
    call_depth--;
    *grid = call_stack[call_depth].grid;
    *block = call_stack[call_depth].block;
    *shm = call_stack[call_depth].shm;
    *(void **)stream = call_stack[call_depth].stream;
    return cudaSuccess;
}

/* ------------------------------------------------------------------ graphs */

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pExec, cudaGraph_t graph, unsigned long long flags)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!pExec) return ret(cudaErrorInvalidValue);
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_FIND(live_graphs, graph, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidValue);
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x) return ret(cudaErrorMemoryAllocation);
    x->magic = EXEC_MAGIC;
    x->graph = graph;
    pthread_mutex_lock(&obj_lock);
    x->next_live = live_execs;
    live_execs = x;
    pthread_mutex_unlock(&obj_lock);
    *pExec = x;
    return cudaSuccess;
}

static cudaError_t graph_launch(cudaGraphExec_t x, cudaStream_t s)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    int found;
    if (!stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&obj_lock);
    LIVE_FIND(live_execs, x, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidResourceHandle);
    for (node_t *n = x->graph->head; n; n = n->next) {
        if (atomic_load(&pending_err)) break;
        if (n->type == NODE_MEMCPY) memmove(n->dst, n->src, n->n);
        else if (n->type == NODE_MEMSET) memset(n->dst, n->value, n->n);
        else {
            cudaError_t ke = run_kernel(n->kernel, n->grid, n->block, n->argbuf ? n->argv : NULL, n->shm, s);
            if (ke != cudaSuccess) poison(ke);
        }
    }
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) { return graph_launch(x, s); }
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s) { return graph_launch(x, s); }

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_REMOVE(live_execs, x, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidValue);
    free(x);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_REMOVE(live_graphs, g, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidValue);
    graph_free_nodes(g);
    free(g);
    return cudaSuccess;
}

/* ------------------------------------------------------------------ events */

static int event_ok(cudaEvent_t ev)
{
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_FIND(live_events, ev, found);
    pthread_mutex_unlock(&obj_lock);
    return found;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!ev || flags > 0xf) return ret(cudaErrorInvalidValue);
    struct CUevent_st *x = calloc(1, sizeof *x);
    if (!x) return ret(cudaErrorMemoryAllocation);
    x->magic = EVENT_MAGIC;
    x->flags = flags;
    pthread_mutex_lock(&obj_lock);
    x->next_live = live_events;
    live_events = x;
    pthread_mutex_unlock(&obj_lock);
    *ev = x;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev) { return cudaEventCreateWithFlags(ev, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    cudaError_t e = enter();
    if (e) return e;
    int found;
    pthread_mutex_lock(&obj_lock);
    LIVE_REMOVE(live_events, ev, found);
    pthread_mutex_unlock(&obj_lock);
    if (!found) return ret(cudaErrorInvalidResourceHandle);
    free(ev);
    return cudaSuccess;
}

static cudaError_t event_record(cudaEvent_t ev, cudaStream_t s)
{
    cudaError_t e = enter();
    if (e) return e;
    struct CUstream_st *st;
    if (!event_ok(ev) || !stream_ok(s, &st)) return ret(cudaErrorInvalidResourceHandle);
    clock_gettime(CLOCK_MONOTONIC, &ev->when);
    ev->recorded = 1;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) { return event_record(ev, s); }
cudaError_t cudaEventRecord_ptsz(cudaEvent_t ev, cudaStream_t s) { return event_record(ev, s); }
cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned int f) { (void)f; return event_record(ev, s); }
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t ev, cudaStream_t s, unsigned int f) { (void)f; return event_record(ev, s); }

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    if (!event_ok(ev)) return ret(cudaErrorInvalidResourceHandle);
    sync_point();
    return enter();
}

cudaError_t cudaEventQuery(cudaEvent_t ev) { return cudaEventSynchronize(ev); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    cudaError_t e = enter();
    if (e) return e;
    if (!ms) return ret(cudaErrorInvalidValue);
    if (!event_ok(start) || !event_ok(end)) return ret(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return ret(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return ret(cudaErrorInvalidResourceHandle);
    *ms = (float)((double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
                  (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6);
    return cudaSuccess;
}

/* ------------------------------------------------------------------ devices */

static __thread int tl_device;

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count) return ret(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device) return ret(cudaErrorInvalidValue);
    *device = tl_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device != 0) return ret(cudaErrorInvalidDevice);
    tl_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void)
{
    /* A context that has seen a device assert cannot be recovered (CUDA: "the process must be
     * terminated and relaunched"), so the sticky error survives this too. */
    sync_point();
    return enter();
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop) return ret(cudaErrorInvalidValue);
    if (device != 0) return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "fakecuda host emulation");
    prop->totalGlobalMem = (size_t)16 << 30;
    prop->sharedMemPerBlock = 48 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024; prop->maxThreadsDim[1] = 1024; prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647; prop->maxGridSize[1] = 65535; prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 65536;
    prop->major = 8;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->unifiedAddressing = 1;
    prop->canMapHostMemory = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value) return ret(cudaErrorInvalidValue);
    if (device != 0) return ret(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *value = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *value = 64; break;
    case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = 1; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 8; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    default: *value = 0; break;
    }
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v) return ret(cudaErrorInvalidValue);
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v) return ret(cudaErrorInvalidValue);
    *v = 13000;
    return cudaSuccess;
}
