/* preload.c: the interposed CUDA launch, registration and error-query entry points (LD_PRELOAD
 * layer), a thin translation; preload_sync.c holds the synchronizing and graph entry points,
 * preload.h what both share (the hook list), preload_bind.c the per-version bindings. Calls go
 * one way: preload.c -> preload_sync.c (its entry points in the hook table) -> preload_bind.c.
 *
 * Each launch entry point has a fast path (a kernel already classified as unwatched: one
 * cached lookup and a counter, then the real function) and one slow path for every entry
 * point (decide): start the library, turn the arguments into one lg_launch_t, ask the core
 * (lg_launch_decide) and carry out its decision (run, run with rewritten arguments, or return
 * the error). Registration entry points record kernel names (names.c); cudaGetLastError,
 * cudaPeekAtLastError and cudaGetErrorString deliver the pending error (runtime.c) of a
 * launch the core blocked, and are hook points where the calling thread's async verdicts are
 * collected.
 * Runs on whatever thread calls the runtime, possibly inside another library's constructor
 * before ours (a CUDA extension registering its kernels): nothing here may depend on our
 * constructor.
 *
 * Each entry point is defined once per libcudart version node (preload.h), and hands the core
 * its own runtime: a process holding a CUDA 12 torch and a CUDA 13 extension sends every
 * registration, launch, error query and label check to the caller's own runtime. Tested end
 * to end by tests/e2e/ and tests/fakecuda/ under the runtime test double
 * (test_mixed_runtimes.sh: both majors in one process; test_delivery.sh: the error's thread
 * and text); the fast path's cost by `make bench`.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hooks/preload.h"

LG_TLS int lg_preload_in_launch;

/* Late arming (arm.c) patches GOT slots by name with the default copy. */
#define HOOK_ENTRY(name, ret, params, args) \
    {#name, (void *)lg_preload_v13_##name, &lg_preload_bind_13.real[LG_IDX_##name]},
static const lg_hook_t hook_table[] = {LG_HOOKS(HOOK_ENTRY)};

const lg_hook_t *lg_preload_hooks(int *count)
{
    *count = (int)(sizeof hook_table / sizeof *hook_table);
    return hook_table;
}

/* ------------------------------------------------------------------ error delivery */


/* Called on every launch check PyTorch makes (C10_CUDA_KERNEL_LAUNCH_CHECK): a thread-local
 * test, then the real function. */
BODY cudaError_t body_cudaGetLastError(lg_preload_binding_t *b)
{
    cudaGetLastError_fn real = REAL(b, cudaGetLastError);
    lg_preload_hook_point(b);
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(e == cudaErrorAssert))
        lg_preload_assert_seen("cudaGetLastError", true);
    if (LG_UNLIKELY(lg_runtime_pending | lg_runtime_app_error))
        e = (cudaError_t)lg_runtime_take_error((int)e);
    return e;
}

BODY cudaError_t body_cudaPeekAtLastError(lg_preload_binding_t *b)
{
    cudaPeekAtLastError_fn real = REAL(b, cudaPeekAtLastError);
    lg_preload_hook_point(b);
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(e == cudaErrorAssert))
        lg_preload_assert_seen("cudaPeekAtLastError", true);
    if (LG_UNLIKELY(lg_runtime_pending | lg_runtime_app_error))
        e = (cudaError_t)lg_runtime_peek_error((int)e);
    return e;
}

BODY const char *body_cudaGetErrorString(lg_preload_binding_t *b, cudaError_t e)
{
    const char *ours = lg_runtime_error_message((int)e);
    if (ours)
        return ours;
    cudaGetErrorString_fn real = REAL(b, cudaGetErrorString);
    return real ? real(e) : "unknown error (labelguard: no CUDA runtime found)";
}

/* ------------------------------------------------------------------ registration */

BODY void body___cudaRegisterFunction(lg_preload_binding_t *b, void **fh, const char *hf, char *df, const char *dn,
                                      int tl, uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd, int *ws)
{
    lg_names_record_function(fh, hf, df ? df : dn);
    __cudaRegisterFunction_fn real = REAL(b, __cudaRegisterFunction);
    if (real)
        real(fh, hf, df, dn, tl, ti, bi, bd, gd, ws);
}

/* The image's names (kept by pointer, names.c) are about to go away with it. Async verdicts
 * still outstanding name kernels of this image (their spec and name are dropped with it), so
 * this thread's and exited threads' are collected first: at exit, nvcc's atexit handler runs
 * this before our destructor. */
BODY void body___cudaUnregisterFatBinary(lg_preload_binding_t *b, void **fh)
{
    if (LG_UNLIKELY(lg_verdicts_pending() || lg_verdicts_orphaned()) && !lg_runtime_in_library)
        lg_launch_poll(lg_preload_runtime(b), LG_COLLECT_SYNC_ALL, NULL);
    lg_names_drop_module(fh);
    __cudaUnregisterFatBinary_fn real = REAL(b, __cudaUnregisterFatBinary);
    if (real)
        real(fh);
}

BODY cudaError_t body___cudaGetKernel(lg_preload_binding_t *b, cudaKernel_t *k, const void *f)
{
    __cudaGetKernel_fn real = REAL(b, __cudaGetKernel);
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
 * read or our error text to retire. A verdict outstanding but not yet published keeps the
 * launch here (lg_verdicts_due: its ring's `latest`, no lock). */
static inline __attribute__((always_inline)) bool unwatched(const void *f)
{
    lg_kernel_info_t *info = lg_names_info(f);
    if (LG_UNLIKELY(!info))
        return false;
    int st = __atomic_load_n((int *)&info->state, __ATOMIC_ACQUIRE);
    if (LG_UNLIKELY(st != LG_KSTATE_UNWATCHED && st != LG_KSTATE_BAD_LAYOUT) ||
        (LG_UNLIKELY(lg_verdicts_mine | lg_runtime_message_live) && (lg_runtime_message_live || lg_verdicts_due())))
        return false;
    return true; /* counted after the real call (lg_recent_count) */
}

/* The slow path of every launch entry point: starts the library, asks the core, and says with
 * which argument array the real function must run (NULL: not at all, return d->error). Our own
 * launches (the guard) and LABELGUARD_HOOKS=cupti pass straight through, unmarked, so that
 * the CUPTI layer still sees them; otherwise *marked is set and the caller unmarks after the
 * real call. */
static inline void **decide(lg_preload_binding_t *bd, lg_entry_t entry, const void *f, dim3 g, dim3 b, void **a,
                            size_t sm, cudaStream_t s, bool per_thread, const void *caller, lg_decision_t *d,
                            bool *marked)
{
    /* Not started only before our constructor ran: the call passes through unmarked. */
    bool started = lg_start_ensure();
    d->kind = LG_VERDICT_RUN;
    /* The thread's next launch after our error was read: our text is no longer current. While
     * the error is still this thread's last error, the text stays with it. */
    if (!lg_runtime_in_library && !lg_runtime_pending)
        lg_runtime_forget_message();
    *marked = started && !lg_runtime_in_library && lg_config_values.hooks != LG_HOOKS_CUPTI;
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
    l.caller = caller;
    /* The caller's own runtime: its memory, its streams, its kernel registrations. */
    lg_launch_decide(lg_preload_runtime(bd), &l, d);
    if (LG_LIKELY(d->kind == LG_VERDICT_RUN))
        return a;
    return d->kind == LG_VERDICT_RUN_WITH ? d->args_copy.args : NULL;
}

typedef cudaError_t (*launch_fn)(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);

/* After the real launch: an accepted one joins the thread's recent launches, the candidates of a
 * device-side assert that nothing checked, and so does a blocking launch that returned its own
 * kernel's assert (CUDA_LAUNCH_BLOCKING=1: lg_asserted_launch_ran); a launch that returned
 * cudaErrorAssert is where this thread learns that one fired (core/asserted.c reports it once). */
static __attribute__((noinline)) void launch_failed(cudaError_t r)
{
    if (r == cudaErrorAssert)
        lg_preload_assert_seen("a kernel launch", false);
}

static inline lg_recent_dims_t dims(dim3 g, dim3 b)
{
    return lg_recent_dims(g.x, g.y, g.z, b.x, b.y, b.z);
}

static inline __attribute__((always_inline)) void launched(cudaError_t r, const void *f, dim3 g, dim3 b,
                                                           cudaStream_t s)
{
    if (LG_LIKELY(r == cudaSuccess) || lg_asserted_launch_ran((int)r))
        lg_recent_note(f, s, dims(g, b));
    if (LG_UNLIKELY(r != cudaSuccess))
        launch_failed(r);
}

/* The fast path's: the launch is counted here too. */
static inline __attribute__((always_inline)) void launched_fast(cudaError_t r, const void *f, dim3 g, dim3 b,
                                                                cudaStream_t s)
{
    lg_recent_count(LG_LIKELY(r == cudaSuccess) || lg_asserted_launch_ran((int)r), f, s, dims(g, b));
    if (LG_UNLIKELY(r != cudaSuccess))
        launch_failed(r);
}

/* Each launch shape's slow path only calls its real function with what decide() says: out of
 * line, so that the decision's 4 KiB of argument storage is no part of the fast path's frame. */
static __attribute__((noinline)) cudaError_t launch_slow(lg_preload_binding_t *bd, lg_entry_t entry, launch_fn real,
                                                         const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                                         cudaStream_t s, bool per_thread, const void *caller)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    lg_decision_t d;
    bool marked;
    void **args = decide(bd, entry, f, g, b, a, sm, s, per_thread, caller, &d, &marked);
    cudaError_t r = args ? real(f, g, b, args, sm, s) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    if (marked && args)
        launched(r, f, g, b, s);
    return r;
}

static inline __attribute__((always_inline)) cudaError_t launch(lg_preload_binding_t *bd, lg_entry_t entry,
                                                                launch_fn real, const void *f, dim3 g, dim3 b,
                                                                void **a, size_t sm, cudaStream_t s, bool per_thread)
{
    if (LG_LIKELY(real != NULL) && LG_LIKELY(unwatched(f))) {
        /* Marked in progress so the CUPTI layer, which sees the same launch, skips it. */
        lg_preload_in_launch++;
        cudaError_t r = real(f, g, b, a, sm, s);
        lg_preload_in_launch--;
        launched_fast(r, f, g, b, s);
        return r;
    }
    /* Inlined into the exported entry point: the return address into its caller, which an
     * async verdict's report names as the launch site. */
    return launch_slow(bd, entry, real, f, g, b, a, sm, s, per_thread, __builtin_return_address(0));
}

BODY cudaError_t body___cudaLaunchKernel(lg_preload_binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                         cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL, REAL(B, __cudaLaunchKernel), f, g, b, a, sm, s, false);
}

BODY cudaError_t body___cudaLaunchKernel_ptsz(lg_preload_binding_t *B, const void *f, dim3 g, dim3 b, void **a,
                                              size_t sm, cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL_PTSZ, REAL(B, __cudaLaunchKernel_ptsz), f, g, b, a, sm, s,
                  true);
}

BODY cudaError_t body_cudaLaunchKernel(lg_preload_binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                       cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL, REAL(B, cudaLaunchKernel), f, g, b, a, sm, s, false);
}

BODY cudaError_t body_cudaLaunchKernel_ptsz(lg_preload_binding_t *B, const void *f, dim3 g, dim3 b, void **a,
                                            size_t sm, cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_PTSZ, REAL(B, cudaLaunchKernel_ptsz), f, g, b, a, sm, s, true);
}

typedef cudaError_t (*launch_ex_fn)(const cudaLaunchConfig_t *c, const void *f, void **a);

static __attribute__((noinline)) cudaError_t launch_ex_slow(lg_preload_binding_t *bd, lg_entry_t entry,
                                                            launch_ex_fn real, const cudaLaunchConfig_t *c,
                                                            const void *f, void **a, bool per_thread,
                                                            const void *caller)
{
    lg_decision_t d;
    bool marked;
    void **args = decide(bd, entry, f, c->gridDim, c->blockDim, a, c->dynamicSmemBytes, c->stream, per_thread, caller,
                         &d, &marked);
    cudaError_t r = args ? real(c, f, args) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    if (marked && args)
        launched(r, f, c->gridDim, c->blockDim, c->stream);
    return r;
}

static inline __attribute__((always_inline)) cudaError_t launch_ex(lg_preload_binding_t *bd, lg_entry_t entry,
                                                                   launch_ex_fn real, const cudaLaunchConfig_t *c,
                                                                   const void *f, void **a, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    if (LG_LIKELY(c != NULL) && LG_LIKELY(unwatched(f))) {
        lg_preload_in_launch++;
        cudaError_t r = real(c, f, a);
        lg_preload_in_launch--;
        launched_fast(r, f, c->gridDim, c->blockDim, c->stream);
        return r;
    }
    if (LG_UNLIKELY(!c))
        return real(c, f, a); /* the runtime reports the missing configuration */
    return launch_ex_slow(bd, entry, real, c, f, a, per_thread, __builtin_return_address(0));
}

BODY cudaError_t body_cudaLaunchKernelExC(lg_preload_binding_t *B, const cudaLaunchConfig_t *c, const void *f,
                                          void **a)
{
    return launch_ex(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC, REAL(B, cudaLaunchKernelExC), c, f, a, false);
}

BODY cudaError_t body_cudaLaunchKernelExC_ptsz(lg_preload_binding_t *B, const cudaLaunchConfig_t *c, const void *f,
                                               void **a)
{
    return launch_ex(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ, REAL(B, cudaLaunchKernelExC_ptsz), c, f, a, true);
}

/* ------------------------------------------------------------------ the exported definitions */

LG_DEFINE_VERSIONS(LG_HOOKS_LAUNCH)
