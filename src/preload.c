/* preload.c: the interposed CUDA runtime entry points (LD_PRELOAD layer).
 *
 * Each launch entry point turns its arguments into one lg_launch_t and asks launch.c what to
 * do; registration entry points record kernel names (names.c); cudaGetLastError,
 * cudaPeekAtLastError and cudaGetErrorString carry the error of a launch that `raise` blocked.
 * Runs on whatever thread calls the runtime, possibly inside another library's constructor
 * before ours (see notes/feasibility.md §2): nothing here may depend on our constructor.
 *
 * Real functions: dlsym(RTLD_NEXT), then the libcudart already in the process
 * (dlopen(..., RTLD_NOLOAD) by soname, then by the path dl_iterate_phdr finds), because
 * PyTorch's runtime arrives through dlopen and RTLD_NEXT does not see it.
 *
 * The exported names are unversioned on purpose: an unversioned definition in the preload
 * wins over `cudaLaunchKernel@libcudart.so.13` (feasibility §3). Tested end to end by
 * tests/e2e/ under the runtime test double.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal.h"

LG_TLS int lg_in_library;
LG_TLS int lg_launch_in_progress;

/* The error a blocked launch reports. Not 710: the context is fine, and frameworks treat 710
 * as fatal. cudaErrorNotPermitted is non-sticky and otherwise rare around kernel launches. */
#define LG_RAISE_ERROR cudaErrorNotPermitted

/* ------------------------------------------------------------------ resolving real functions */

static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcudart.so", 12) == 0) {
        void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            *(void **)data = h;
            return 1;
        }
    }
    return 0;
}

static void *cudart_handle(void)
{
    static void *handle;
    void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    for (size_t i = 0; i < sizeof sonames / sizeof *sonames && !h; i++)
        h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        dl_iterate_phdr(find_cudart, &h);
    if (h)
        __atomic_store_n(&handle, h, __ATOMIC_RELEASE);
    return h;
}

static void *resolve(const char *name, void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f || f == self) {
        void *h = cudart_handle();
        f = h ? dlsym(h, name) : NULL;
    }
    return f == self ? NULL : f;
}

/* The hooked entry points: name, return type, parameters, argument names. One list drives the
 * real-pointer storage, the resolvers and the table late arming patches (arm.c). */
#define LG_HOOKS(X)                                                                                        \
    X(__cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), (f, g, b, a, sm, s)) \
    X(__cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), (f, g, b, a, sm, s)) \
    X(cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), (f, g, b, a, sm, s)) \
    X(cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), (f, g, b, a, sm, s)) \
    X(cudaLaunchKernelExC, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (c, f, a))  \
    X(cudaLaunchKernelExC_ptsz, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (c, f, a)) \
    X(__cudaRegisterFunction, void, (void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd, int *ws), (fh, hf, df, dn, tl, ti, bi, bd, gd, ws)) \
    X(__cudaGetKernel, cudaError_t, (cudaKernel_t *k, const void *f), (k, f))                              \
    X(__cudaUnregisterFatBinary, void, (void **fh), (fh))                                                 \
    X(cudaGetLastError, cudaError_t, (void), ())                                                          \
    X(cudaPeekAtLastError, cudaError_t, (void), ())                                                       \
    X(cudaGetErrorString, const char *, (cudaError_t e), (e))

/* Prototypes for the internal registration/launch entry points, which only C++ headers declare. */
cudaError_t __cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t __cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a);
cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
LG_EXPORT void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd, int *ws);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *f);
LG_EXPORT void __cudaUnregisterFatBinary(void **fh);

#define DECLARE_REAL(name, ret, params, args)                                                  \
    typedef ret(*name##_fn) params;                                                            \
    static void *real_##name;                                                                  \
    static inline name##_fn get_##name(void)                                                   \
    {                                                                                          \
        void *f = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);                             \
        if (LG_UNLIKELY(!f)) {                                                                 \
            f = resolve(#name, (void *)name);                                                  \
            if (f)                                                                             \
                __atomic_store_n(&real_##name, f, __ATOMIC_RELEASE);                           \
        }                                                                                      \
        return (name##_fn)f;                                                                   \
    }
LG_HOOKS(DECLARE_REAL)

#define HOOK_ENTRY(name, ret, params, args) {#name, (void *)name, &real_##name},
static const lg_hook_t hook_table[] = {LG_HOOKS(HOOK_ENTRY)};

const lg_hook_t *lg_preload_hooks(int *count)
{
    *count = (int)(sizeof hook_table / sizeof *hook_table);
    return hook_table;
}

/* ------------------------------------------------------------------ error injection (raise) */

static LG_TLS int pending_error;
static __thread char thread_message[1024];
static char shared_message[1024];
static pthread_mutex_t message_lock = PTHREAD_MUTEX_INITIALIZER;

void lg_preload_set_pending_error(int code, const char *message)
{
    pending_error = code;
    if (!message)
        return;
    snprintf(thread_message, sizeof thread_message, "%s", message);
    pthread_mutex_lock(&message_lock);
    snprintf(shared_message, sizeof shared_message, "%s", message);
    pthread_mutex_unlock(&message_lock);
}

int lg_preload_raise_error_code(void) { return LG_RAISE_ERROR; }

/* Called on every launch check PyTorch makes (C10_CUDA_KERNEL_LAUNCH_CHECK): a thread-local
 * test, then the real function. Async verdicts are collected here too (next hook point). */
LG_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaGetLastError_fn real = get_cudaGetLastError();
    if (LG_UNLIKELY(lg_launch_async_pending()) && !lg_in_library)
        lg_launch_poll_async();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    /* cudaErrorNotReady is a status that PyTorch reads and discards ((void)cudaGetLastError()
     * after querying work in flight): our error waits for the next check instead of vanishing. */
    if (LG_UNLIKELY(pending_error) && e != cudaErrorNotReady) {
        if (e == cudaSuccess)
            e = (cudaError_t)pending_error;
        pending_error = 0;
    }
    return e;
}

LG_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    cudaPeekAtLastError_fn real = get_cudaPeekAtLastError();
    if (LG_UNLIKELY(lg_launch_async_pending()) && !lg_in_library)
        lg_launch_poll_async();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(pending_error) && e == cudaSuccess)
        e = (cudaError_t)pending_error;
    return e;
}

LG_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    if (e == LG_RAISE_ERROR) {
        if (thread_message[0])
            return thread_message;
        if (__atomic_load_n(&shared_message[0], __ATOMIC_ACQUIRE))
            return shared_message;
    }
    cudaGetErrorString_fn real = get_cudaGetErrorString();
    return real ? real(e) : "unknown error (labelguard: no CUDA runtime found)";
}

/* ------------------------------------------------------------------ registration */

void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi,
                            dim3 *bd, dim3 *gd, int *ws)
{
    lg_names_record_function(fh, hf, df ? df : dn);
    __cudaRegisterFunction_fn real = get___cudaRegisterFunction();
    if (real)
        real(fh, hf, df, dn, tl, ti, bi, bd, gd, ws);
}

/* The image's names (kept by pointer, names.c) are about to go away with it. Async verdicts
 * still outstanding name kernels of this image (their spec and name are dropped with it), so
 * they are collected first: at exit, nvcc's atexit handler runs this before our destructor. */
void __cudaUnregisterFatBinary(void **fh)
{
    if (LG_UNLIKELY(lg_launch_async_pending()) && !lg_in_library)
        lg_launch_poll_async();
    lg_names_drop_module(fh);
    __cudaUnregisterFatBinary_fn real = get___cudaUnregisterFatBinary();
    if (real)
        real(fh);
}

LG_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *f)
{
    __cudaGetKernel_fn real = get___cudaGetKernel();
    if (!real)
        return cudaErrorInitializationError;
    cudaError_t e = real(k, f);
    if (k && *k)
        lg_names_record_kernel((const void *)*k, f);
    return e;
}

/* ------------------------------------------------------------------ launches */

typedef cudaError_t (*launch_fn)(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);

/* The whole cost of an unwatched launch: one inline lookup of the kernel's cached state, the
 * per-thread counter, and a check for async verdicts waiting to be read. */
static inline __attribute__((always_inline)) bool unwatched(const void *f)
{
    lg_kernel_info_t *info = lg_names_info(f);
    if (LG_UNLIKELY(!info))
        return false;
    int st = __atomic_load_n((int *)&info->state, __ATOMIC_ACQUIRE);
    if (LG_UNLIKELY(st != LG_KSTATE_UNWATCHED && st != LG_KSTATE_BAD_LAYOUT) || LG_UNLIKELY(lg_launch_async_pending()))
        return false;
    lg_launch_count();
    return true;
}

static cudaError_t launch_checked(lg_entry_t entry, launch_fn real, const void *f, dim3 g, dim3 b, void **a,
                                  size_t sm, cudaStream_t s, bool per_thread);

static inline __attribute__((always_inline)) cudaError_t launch(lg_entry_t entry, launch_fn real, const void *f,
                                                                 dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s,
                                                                 bool per_thread)
{
    if (LG_LIKELY(real != NULL) && LG_LIKELY(unwatched(f))) {
        /* Marked in progress so the CUPTI layer, which sees the same launch, skips it. */
        lg_launch_in_progress++;
        cudaError_t r = real(f, g, b, a, sm, s);
        lg_launch_in_progress--;
        return r;
    }
    return launch_checked(entry, real, f, g, b, a, sm, s, per_thread);
}

/* One launch record for launch.c, whichever entry point it came through. */
static void decide(lg_entry_t entry, const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s,
                   bool per_thread, lg_decision_t *d)
{
    lg_launch_t l;
    l.entry = entry;
    l.func = f;
    l.mangled = NULL;
    l.args = a;
    l.grid[0] = g.x, l.grid[1] = g.y, l.grid[2] = g.z;
    l.block[0] = b.x, l.block[1] = b.y, l.block[2] = b.z;
    l.shared_mem = sm;
    /* The validator must see what the kernel sees: on a _ptsz entry the null stream means this
     * thread's default stream. */
    l.stream = (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s;
    l.can_block = true;
    lg_launch_decide(&l, d);
}

static __attribute__((noinline)) cudaError_t launch_checked(lg_entry_t entry, launch_fn real, const void *f, dim3 g,
                                                            dim3 b, void **a, size_t sm, cudaStream_t s,
                                                            bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    if (LG_UNLIKELY(lg_cfg.hooks == LG_HOOKS_CUPTI))
        lg_ensure_started(); /* the CUPTI subscriber starts with the library */
    if (LG_UNLIKELY(lg_in_library || lg_cfg.hooks == LG_HOOKS_CUPTI))
        return real(f, g, b, a, sm, s);
    lg_decision_t d;
    lg_launch_in_progress++;
    decide(entry, f, g, b, a, sm, s, per_thread, &d);
    cudaError_t r;
    if (LG_LIKELY(d.kind == LG_VERDICT_RUN))
        r = real(f, g, b, a, sm, s);
    else if (d.kind == LG_VERDICT_RUN_WITH)
        r = real(f, g, b, d.args_copy.args, sm, s);
    else
        r = (cudaError_t)d.error;
    lg_launch_in_progress--;
    return r;
}

LG_EXPORT cudaError_t __cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s)
{
    return launch(LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL, get___cudaLaunchKernel(), f, g, b, a, sm, s, false);
}

LG_EXPORT cudaError_t __cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s)
{
    return launch(LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL_PTSZ, get___cudaLaunchKernel_ptsz(), f, g, b, a, sm, s, true);
}

LG_EXPORT cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s)
{
    return launch(LG_ENTRY_CUDA_LAUNCH_KERNEL, get_cudaLaunchKernel(), f, g, b, a, sm, s, false);
}

LG_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s)
{
    return launch(LG_ENTRY_CUDA_LAUNCH_KERNEL_PTSZ, get_cudaLaunchKernel_ptsz(), f, g, b, a, sm, s, true);
}

typedef cudaError_t (*launch_ex_fn)(const cudaLaunchConfig_t *c, const void *f, void **a);

static cudaError_t launch_ex(lg_entry_t entry, launch_ex_fn real, const cudaLaunchConfig_t *c, const void *f,
                             void **a, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    if (LG_LIKELY(c != NULL) && LG_LIKELY(unwatched(f))) {
        lg_launch_in_progress++;
        cudaError_t r = real(c, f, a);
        lg_launch_in_progress--;
        return r;
    }
    if (LG_UNLIKELY(lg_cfg.hooks == LG_HOOKS_CUPTI))
        lg_ensure_started(); /* the CUPTI subscriber starts with the library */
    if (LG_UNLIKELY(lg_in_library || !c || lg_cfg.hooks == LG_HOOKS_CUPTI))
        return real(c, f, a);
    lg_decision_t d;
    lg_launch_in_progress++;
    decide(entry, f, c->gridDim, c->blockDim, a, c->dynamicSmemBytes, c->stream, per_thread, &d);
    cudaError_t r;
    if (LG_LIKELY(d.kind == LG_VERDICT_RUN))
        r = real(c, f, a);
    else if (d.kind == LG_VERDICT_RUN_WITH)
        r = real(c, f, d.args_copy.args);
    else
        r = (cudaError_t)d.error;
    lg_launch_in_progress--;
    return r;
}

LG_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC, get_cudaLaunchKernelExC(), c, f, a, false);
}

LG_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ, get_cudaLaunchKernelExC_ptsz(), c, f, a, true);
}

/* ------------------------------------------------------------------ the runtime table */

static lg_runtime_t runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

#define RT_RESOLVE(field, name) runtime.field = (__typeof__(runtime.field))resolve(name, NULL)

static void resolve_runtime(void)
{
    RT_RESOLVE(memcpy_async, "cudaMemcpyAsync");
    RT_RESOLVE(stream_synchronize, "cudaStreamSynchronize");
    RT_RESOLVE(malloc_device, "cudaMalloc");
    RT_RESOLVE(free_device, "cudaFree");
    RT_RESOLVE(malloc_host, "cudaMallocHost");
    RT_RESOLVE(free_host, "cudaFreeHost");
    RT_RESOLVE(pointer_attributes, "cudaPointerGetAttributes");
    RT_RESOLVE(stream_is_capturing, "cudaStreamIsCapturing");
    RT_RESOLVE(get_device, "cudaGetDevice");
    runtime.get_last_error = (int (*)(void))get_cudaGetLastError();
    RT_RESOLVE(func_get_name, "cudaFuncGetName");
    RT_RESOLVE(func_get_param_info, "cudaFuncGetParamInfo");
    runtime.get_error_string = (const char *(*)(int))get_cudaGetErrorString();
    RT_RESOLVE(runtime_get_version, "cudaRuntimeGetVersion");
    RT_RESOLVE(driver_get_version, "cudaDriverGetVersion");
}

const lg_runtime_t *lg_preload_runtime(void)
{
    pthread_once(&runtime_once, resolve_runtime);
    return &runtime;
}

void lg_preload_atfork_child(void)
{
    pending_error = 0;
    pthread_mutex_init(&message_lock, NULL);
}
