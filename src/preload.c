/* preload.c: the interposed CUDA runtime entry points (LD_PRELOAD layer), a thin translation.
 *
 * Each launch entry point has a fast path (a kernel already classified as unwatched: one
 * cached lookup and a counter, then the real function) and one slow path for every entry
 * point (decide): start the library, turn the arguments into one lg_launch_t, ask the core
 * (lg_launch_decide) and carry out its decision (run, run with rewritten arguments, or return
 * the error). Registration entry points record kernel names (names.c); cudaGetLastError,
 * cudaPeekAtLastError and cudaGetErrorString deliver the pending error (runtime.c) of a
 * launch the core blocked, and are hook points where the calling thread's async verdicts are
 * collected. The synchronizing calls (stream, event and device synchronization, blocking
 * copies) collect them too, after the real call, and return a raise verdict's error, as CUDA
 * returns an asynchronous error there. The graph entry points (cudaStreamEndCapture,
 * cudaGraphInstantiate*, cudaGraphExecDestroy, cudaGraphLaunch) tell graphs.c which graphs
 * hold checked launches and queue each replay's verdicts.
 * Runs on whatever thread calls the runtime, possibly inside another library's constructor
 * before ours (a CUDA extension registering its kernels): nothing here may depend on our
 * constructor.
 *
 * Real functions come from runtime.c (dlsym(RTLD_NEXT), then the loaded libcudart). The
 * exported names are unversioned on purpose: an unversioned definition in the preload wins
 * over `cudaLaunchKernel@libcudart.so.13`. Tested end to end by tests/e2e/ and tests/fakecuda/
 * under the runtime test double (test_graphs.sh, test_delivery.sh for graphs and delivery);
 * the fast path's and a synchronizing call's cost by `make bench`.
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
    X(cudaGetErrorString, const char *, (cudaError_t e), (e))                                                     \
    X(cudaStreamSynchronize, cudaError_t, (cudaStream_t s), (s))                                                  \
    X(cudaStreamSynchronize_ptsz, cudaError_t, (cudaStream_t s), (s))                                             \
    X(cudaEventSynchronize, cudaError_t, (cudaEvent_t ev), (ev))                                                  \
    X(cudaDeviceSynchronize, cudaError_t, (void), ())                                                             \
    X(cudaMemcpy, cudaError_t, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))           \
    X(cudaMemcpy_ptds, cudaError_t, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))      \
    X(cudaMemcpy2D, cudaError_t,                                                                                  \
      (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k),                  \
      (d, dp, s, sp, w, h, k))                                                                                    \
    X(cudaMemcpy2D_ptds, cudaError_t,                                                                             \
      (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k),                  \
      (d, dp, s, sp, w, h, k))                                                                                    \
    X(cudaGraphLaunch, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (x, s))                                  \
    X(cudaGraphLaunch_ptsz, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (x, s))                             \
    X(cudaStreamEndCapture, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (s, g))                                \
    X(cudaStreamEndCapture_ptsz, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (s, g))                           \
    X(cudaGraphInstantiateWithFlags, cudaError_t, (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f),      \
      (x, g, f))                                                                                                  \
    X(cudaGraphInstantiateWithParams, cudaError_t,                                                                \
      (cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p), (x, g, p))                              \
    X(cudaGraphExecDestroy, cudaError_t, (cudaGraphExec_t x), (x))
// clang-format on

/* Prototypes for the internal registration/launch entry points, which only C++ headers declare. */
cudaError_t __cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t __cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a);
cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);
LG_EXPORT void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi,
                                      dim3 *bd, dim3 *gd, int *ws);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *f);
/* The per-thread-default-stream twins, which the headers declare only under that build mode. */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g);
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

/* cudaGraphInstantiate took five parameters before CUDA 12 (error node, log buffer and its
 * size) and takes three since: the hook takes five and passes them all on, which is right for
 * both (the extra ones are ignored by a CUDA 12 runtime). So its C name is not the header's. */
cudaError_t lg_preload_graph_instantiate(cudaGraphExec_t *x, cudaGraph_t g, void *a3, void *a4, size_t a5) __asm__(
    "cudaGraphInstantiate");
typedef cudaError_t (*graph_instantiate_fn)(cudaGraphExec_t *, cudaGraph_t, void *, void *, size_t);
static void *real_cudaGraphInstantiate;

#define HOOK_ENTRY(name, ret, params, args) {#name, (void *)name, &real_##name},
static const lg_hook_t hook_table[] = {
    LG_HOOKS(HOOK_ENTRY){"cudaGraphInstantiate", (void *)lg_preload_graph_instantiate, &real_cudaGraphInstantiate}};

const lg_hook_t *lg_preload_hooks(int *count)
{
    *count = (int)(sizeof hook_table / sizeof *hook_table);
    return hook_table;
}

/* ------------------------------------------------------------------ error delivery */

/* Every hook point collects the calling thread's own async verdicts (nothing else: another
 * thread's error is that thread's); a blocked launch's pending error is returned by the first
 * error query on its thread. With nothing outstanding: one thread-local read. */
static inline void hook_point(void)
{
    if (LG_UNLIKELY(lg_verdicts_pending()) && !lg_in_library) {
        lg_ensure_started();
        lg_launch_poll(lg_runtime_get(), LG_COLLECT_MINE, NULL);
    }
}

/* Called on every launch check PyTorch makes (C10_CUDA_KERNEL_LAUNCH_CHECK): a thread-local
 * test, then the real function. */
LG_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaGetLastError_fn real = get_cudaGetLastError();
    hook_point();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(lg_runtime_pending | lg_runtime_app_error))
        e = (cudaError_t)lg_runtime_take_error((int)e);
    return e;
}

LG_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    cudaPeekAtLastError_fn real = get_cudaPeekAtLastError();
    hook_point();
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(lg_runtime_pending | lg_runtime_app_error))
        e = (cudaError_t)lg_runtime_peek_error((int)e);
    return e;
}

/* ------------------------------------------------------------------ synchronizing calls */

/* Where PyTorch waits for the GPU (.item(), .cpu(), torch.cuda.synchronize) and checks the
 * result with AT_CUDA_CHECK: an async verdict that says raise is returned here, as CUDA
 * returns an asynchronous error at the next synchronization. With nothing outstanding the
 * cost is two thread-local reads and one relaxed load, after the real call. */
static inline bool sync_due(void) { return (lg_verdicts_mine | lg_runtime_pending_sync) || lg_verdicts_orphaned(); }

static __attribute__((noinline)) cudaError_t after_sync(cudaError_t e, lg_collect_t scope, void *stream)
{
    if (lg_in_library)
        return e;
    if (lg_verdicts_pending() || lg_verdicts_orphaned()) {
        lg_ensure_started();
        lg_launch_poll(lg_runtime_get(), scope, stream);
    }
    if (lg_runtime_pending_sync) {
        if (e == cudaSuccess)
            e = (cudaError_t)lg_runtime_pending;
        lg_runtime_pending = 0;
        lg_runtime_pending_sync = 0;
    }
    return e;
}

/* A stream's synchronization covers its own orphans; the legacy stream's covers every
 * blocking stream, so all of them. */
static inline cudaError_t synced_stream(cudaError_t e, cudaStream_t s, bool per_thread)
{
    if (LG_LIKELY(!sync_due()))
        return e;
    void *st = (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s;
    return after_sync(e, st && st != (void *)cudaStreamLegacy ? LG_COLLECT_SYNC_STREAM : LG_COLLECT_SYNC_ALL, st);
}

static inline cudaError_t synced_all(cudaError_t e)
{
    return LG_LIKELY(!sync_due()) ? e : after_sync(e, LG_COLLECT_SYNC_ALL, NULL);
}

#define REAL_OR_INIT(name, args) (get_##name() ? get_##name() args : cudaErrorInitializationError)

LG_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return synced_stream(REAL_OR_INIT(cudaStreamSynchronize, (s)), s, false);
}

LG_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
    return synced_stream(REAL_OR_INIT(cudaStreamSynchronize_ptsz, (s)), s, true);
}

LG_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev) { return synced_all(REAL_OR_INIT(cudaEventSynchronize, (ev))); }

LG_EXPORT cudaError_t cudaDeviceSynchronize(void) { return synced_all(REAL_OR_INIT(cudaDeviceSynchronize, ())); }

LG_EXPORT cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return synced_all(REAL_OR_INIT(cudaMemcpy, (d, s, n, k)));
}

LG_EXPORT cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return synced_all(REAL_OR_INIT(cudaMemcpy_ptds, (d, s, n, k)));
}

LG_EXPORT cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                   enum cudaMemcpyKind k)
{
    return synced_all(REAL_OR_INIT(cudaMemcpy2D, (d, dp, s, sp, w, h, k)));
}

LG_EXPORT cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                        enum cudaMemcpyKind k)
{
    return synced_all(REAL_OR_INIT(cudaMemcpy2D_ptds, (d, dp, s, sp, w, h, k)));
}

/* ------------------------------------------------------------------ graphs */

/* A replay of an exec with checks queues one verdict per check for this thread (graphs.c);
 * the replay itself is a hook point. Without checked graphs: one relaxed load. */
static inline cudaError_t graph_launch(cudaGraphLaunch_fn real, cudaGraphExec_t x, cudaStream_t s, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    hook_point();
    cudaError_t e = real(x, s);
    if (LG_UNLIKELY(lg_graphs_watching()) && e == cudaSuccess && !lg_in_library) {
        lg_ensure_started();
        if (lg_graphs_launched(x, (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s))
            lg_report_warning_once("graph_unchecked",
                                   "a CUDA graph instantiated before labelguard armed is replayed: its loss launches "
                                   "are not checked (capture it again after arming)");
    }
    return e;
}

LG_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
    return graph_launch(get_cudaGraphLaunch(), x, s, false);
}

LG_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s)
{
    return graph_launch((cudaGraphLaunch_fn)get_cudaGraphLaunch_ptsz(), x, s, true);
}

/* The capture's id is asked before the real call ends it, only while some capture holds a
 * check. */
static inline cudaError_t end_capture(cudaStreamEndCapture_fn real, cudaStream_t s, cudaGraph_t *g, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    unsigned long long id = 0;
    bool track = lg_graphs_capturing() && !lg_in_library;
    if (LG_UNLIKELY(track))
        lg_runtime_capture_status(lg_runtime_get(), (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s,
                                  &id);
    cudaError_t e = real(s, g);
    if (LG_UNLIKELY(track) && id)
        lg_graphs_end_capture(id, e == cudaSuccess && g ? (const void *)*g : NULL);
    return e;
}

LG_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(get_cudaStreamEndCapture(), s, g, false);
}

LG_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture((cudaStreamEndCapture_fn)get_cudaStreamEndCapture_ptsz(), s, g, true);
}

static inline cudaError_t instantiated(cudaError_t e, cudaGraphExec_t *x, cudaGraph_t g)
{
    if (e == cudaSuccess && x && !lg_in_library)
        lg_graphs_instantiated(*x, g);
    return e;
}

LG_EXPORT cudaError_t lg_preload_graph_instantiate(cudaGraphExec_t *x, cudaGraph_t g, void *a3, void *a4, size_t a5)
{
    graph_instantiate_fn real = __atomic_load_n(&real_cudaGraphInstantiate, __ATOMIC_ACQUIRE);
    if (LG_UNLIKELY(!real)) {
        real = (graph_instantiate_fn)lg_runtime_resolve("cudaGraphInstantiate",
                                                        (const void *)lg_preload_graph_instantiate);
        if (!real)
            return cudaErrorInitializationError;
        __atomic_store_n(&real_cudaGraphInstantiate, (void *)real, __ATOMIC_RELEASE);
    }
    return instantiated(real(x, g, a3, a4, a5), x, g);
}

LG_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f)
{
    return instantiated(REAL_OR_INIT(cudaGraphInstantiateWithFlags, (x, g, f)), x, g);
}

LG_EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p)
{
    return instantiated(REAL_OR_INIT(cudaGraphInstantiateWithParams, (x, g, p)), x, g);
}

LG_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    cudaError_t e = REAL_OR_INIT(cudaGraphExecDestroy, (x));
    if (e == cudaSuccess && !lg_in_library)
        lg_graphs_exec_destroyed(x);
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
 * this thread's and exited threads' are collected first: at exit, nvcc's atexit handler runs
 * this before our destructor. */
void __cudaUnregisterFatBinary(void **fh)
{
    if (LG_UNLIKELY(lg_verdicts_pending() || lg_verdicts_orphaned()) && !lg_in_library)
        lg_launch_poll(lg_runtime_get(), LG_COLLECT_SYNC_ALL, NULL);
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
 * per-thread counter, and a thread-local check for this thread's async verdicts waiting to be
 * read or our error text to retire. */
static inline __attribute__((always_inline)) bool unwatched(const void *f)
{
    lg_kernel_info_t *info = lg_names_info(f);
    if (LG_UNLIKELY(!info))
        return false;
    int st = __atomic_load_n((int *)&info->state, __ATOMIC_ACQUIRE);
    if (LG_UNLIKELY(st != LG_KSTATE_UNWATCHED && st != LG_KSTATE_BAD_LAYOUT) ||
        LG_UNLIKELY(lg_verdicts_mine | lg_runtime_message_live))
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
    if (!lg_in_library)
        lg_runtime_forget_message(); /* the thread's next launch: our text is no longer current */
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
