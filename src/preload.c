/* preload.c: the interposed CUDA runtime entry points (LD_PRELOAD layer), a thin translation.
 *
 * Each launch entry point has a fast path (a kernel already classified as unwatched: one
 * cached lookup and a counter, then the real function) and one slow path for every entry
 * point (decide): start the library, turn the arguments into one lg_launch_t, ask the core
 * (lg_launch_decide) and carry out its decision (run, run with rewritten arguments, or return
 * the error). Registration entry points record kernel names (names.c); cudaGetLastError,
 * cudaPeekAtLastError and cudaGetErrorString deliver the pending error (runtime.c) of a
 * launch the core blocked, and are hook points where async verdicts are collected.
 * Runs on whatever thread calls the runtime, possibly inside another library's constructor
 * before ours (a CUDA extension registering its kernels): nothing here may depend on our
 * constructor.
 *
 * Real functions come from runtime.c (dlsym(RTLD_NEXT), then the loaded libcudart). The
 * exported names are unversioned on purpose: an unversioned definition in the preload wins
 * over `cudaLaunchKernel@libcudart.so.13`. Tested end to end by tests/e2e/ and tests/fakecuda/
 * under the runtime test double; the fast path's cost by `make bench`.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal.h"

LG_TLS int lg_preload_in_launch;

/* The hooked entry points: name, return type, parameters, argument names. One list drives the
 * real-pointer storage, the resolvers and the table late arming patches (arm.c). */
// clang-format off
#define LG_HOOKS(X)                                                                                               \
    X(__cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),      \
      (f, g, b, a, sm, s))                                                                                        \
    X(__cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), \
      (f, g, b, a, sm, s))                                                                                        \
    X(cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),        \
      (f, g, b, a, sm, s))                                                                                        \
    X(cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),   \
      (f, g, b, a, sm, s))                                                                                        \
    X(cudaLaunchKernelExC, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (c, f, a))        \
    X(cudaLaunchKernelExC_ptsz, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (c, f, a))   \
    X(__cudaRegisterFunction, void,                                                                               \
      (void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd,     \
       int *ws),                                                                                                  \
      (fh, hf, df, dn, tl, ti, bi, bd, gd, ws))                                                                   \
    X(__cudaGetKernel, cudaError_t, (cudaKernel_t *k, const void *f), (k, f))                                    \
    X(__cudaUnregisterFatBinary, void, (void **fh), (fh))                                                         \
    X(cudaGetLastError, cudaError_t, (void), ())                                                                  \
    X(cudaPeekAtLastError, cudaError_t, (void), ())                                                               \
    X(cudaGetErrorString, const char *, (cudaError_t e), (e))
// clang-format on

/* Prototypes for the internal registration/launch entry points, which only C++ headers declare. */
cudaError_t __cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t __cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a);
cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
LG_EXPORT void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi,
                                      dim3 *bd, dim3 *gd, int *ws);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *f);
LG_EXPORT void __cudaUnregisterFatBinary(void **fh);

#define DECLARE_REAL(name, ret, params, args)                        \
    typedef ret(*name##_fn) params;                                  \
    static void *real_##name;                                        \
    static inline name##_fn get_##name(void)                         \
    {                                                                \
        void *f = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);   \
        if (LG_UNLIKELY(!f)) {                                       \
            f = lg_runtime_resolve(#name, (const void *)name);       \
            if (f)                                                   \
                __atomic_store_n(&real_##name, f, __ATOMIC_RELEASE); \
        }                                                            \
        return (name##_fn)f;                                         \
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

/* Async verdicts are read at every hook point; the pending error of a blocked launch is
 * returned by the first error query on the thread it belongs to. */
static inline void hook_point(void)
{
    if (LG_UNLIKELY(lg_verdicts_pending()) && !lg_in_library) {
        lg_ensure_started();
        lg_launch_poll_async(lg_runtime_get());
    }
}

/* Called on every launch check PyTorch makes (C10_CUDA_KERNEL_LAUNCH_CHECK): a thread-local
 * test, then the real function. */
LG_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaGetLastError_fn real = get_cudaGetLastError();
    hook_point();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    /* cudaErrorNotReady is a status that PyTorch reads and discards ((void)cudaGetLastError()
     * after querying work in flight): our error waits for the next check instead of vanishing. */
    if (LG_UNLIKELY(lg_runtime_pending) && e != cudaErrorNotReady) {
        if (e == cudaSuccess)
            e = (cudaError_t)lg_runtime_pending;
        lg_runtime_pending = 0;
    }
    return e;
}

LG_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    cudaPeekAtLastError_fn real = get_cudaPeekAtLastError();
    hook_point();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(lg_runtime_pending) && e == cudaSuccess)
        e = (cudaError_t)lg_runtime_pending;
    return e;
}

LG_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    const char *ours = lg_runtime_error_message((int)e);
    if (ours)
        return ours;
    cudaGetErrorString_fn real = get_cudaGetErrorString();
    return real ? real(e) : "unknown error (labelguard: no CUDA runtime found)";
}

/* ------------------------------------------------------------------ registration */

void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi, dim3 *bd,
                            dim3 *gd, int *ws)
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
    hook_point();
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

/* The whole cost of an unwatched launch: one inline lookup of the kernel's cached state, the
 * per-thread counter, and a check for async verdicts waiting to be read. */
static inline __attribute__((always_inline)) bool unwatched(const void *f)
{
    lg_kernel_info_t *info = lg_names_info(f);
    if (LG_UNLIKELY(!info))
        return false;
    int st = __atomic_load_n((int *)&info->state, __ATOMIC_ACQUIRE);
    if (LG_UNLIKELY(st != LG_KSTATE_UNWATCHED && st != LG_KSTATE_BAD_LAYOUT) || LG_UNLIKELY(lg_verdicts_pending()))
        return false;
    lg_launch_count();
    return true;
}

/* The slow path of every launch entry point: starts the library, asks the core, and says with
 * which argument array the real function must run (NULL: not at all, return d->error). Our own
 * launches (the guard) and LABELGUARD_HOOKS=cupti pass straight through, unmarked, so that
 * the CUPTI layer still sees them; otherwise *marked is set and the caller unmarks after the
 * real call. */
static inline void **decide(lg_entry_t entry, const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s,
                            bool per_thread, lg_decision_t *d, bool *marked)
{
    lg_ensure_started();
    d->kind = LG_VERDICT_RUN;
    *marked = !lg_in_library && lg_cfg.hooks != LG_HOOKS_CUPTI;
    if (LG_UNLIKELY(!*marked))
        return a;
    lg_preload_in_launch++;
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
    lg_launch_decide(lg_runtime_get(), &l, d);
    if (LG_LIKELY(d->kind == LG_VERDICT_RUN))
        return a;
    return d->kind == LG_VERDICT_RUN_WITH ? d->args_copy.args : NULL;
}

typedef cudaError_t (*launch_fn)(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);

/* Each launch shape's slow path only calls its real function with what decide() says: out of
 * line, so that the decision's 4 KiB of argument storage is no part of the fast path's frame. */
static __attribute__((noinline)) cudaError_t launch_slow(lg_entry_t entry, launch_fn real, const void *f, dim3 g,
                                                         dim3 b, void **a, size_t sm, cudaStream_t s, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    lg_decision_t d;
    bool marked;
    void **args = decide(entry, f, g, b, a, sm, s, per_thread, &d, &marked);
    cudaError_t r = args ? real(f, g, b, args, sm, s) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    return r;
}

static inline __attribute__((always_inline)) cudaError_t launch(lg_entry_t entry, launch_fn real, const void *f, dim3 g,
                                                                dim3 b, void **a, size_t sm, cudaStream_t s,
                                                                bool per_thread)
{
    if (LG_LIKELY(real != NULL) && LG_LIKELY(unwatched(f))) {
        /* Marked in progress so the CUPTI layer, which sees the same launch, skips it. */
        lg_preload_in_launch++;
        cudaError_t r = real(f, g, b, a, sm, s);
        lg_preload_in_launch--;
        return r;
    }
    return launch_slow(entry, real, f, g, b, a, sm, s, per_thread);
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

static __attribute__((noinline)) cudaError_t launch_ex_slow(lg_entry_t entry, launch_ex_fn real,
                                                            const cudaLaunchConfig_t *c, const void *f, void **a,
                                                            bool per_thread)
{
    lg_decision_t d;
    bool marked;
    void **args = decide(entry, f, c->gridDim, c->blockDim, a, c->dynamicSmemBytes, c->stream, per_thread, &d, &marked);
    cudaError_t r = args ? real(c, f, args) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    return r;
}

static inline __attribute__((always_inline)) cudaError_t
launch_ex(lg_entry_t entry, launch_ex_fn real, const cudaLaunchConfig_t *c, const void *f, void **a, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    if (LG_LIKELY(c != NULL) && LG_LIKELY(unwatched(f))) {
        lg_preload_in_launch++;
        cudaError_t r = real(c, f, a);
        lg_preload_in_launch--;
        return r;
    }
    if (LG_UNLIKELY(!c))
        return real(c, f, a); /* the runtime reports the missing configuration */
    return launch_ex_slow(entry, real, c, f, a, per_thread);
}

LG_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC, get_cudaLaunchKernelExC(), c, f, a, false);
}

LG_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ, get_cudaLaunchKernelExC_ptsz(), c, f, a, true);
}
