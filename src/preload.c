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
 * Versions: each entry point is defined once per runtime version node (libcudart.so.13, the
 * default, libcudart.so.12 and libcudart.so.11.0; src/exports.map), so a caller's reference
 * `cudaLaunchKernel@libcudart.so.12` binds to the CUDA 12 copy and one `@libcudart.so.13` to
 * the CUDA 13 copy, by the dynamic loader, at no cost per call. Each copy has its own real
 * functions (a `binding`), resolved at its version node by runtime.c, and hands the core its
 * own runtime's table: a process holding a CUDA 12 torch and a CUDA 13 extension sends every
 * registration, launch, error query and label check to the caller's own runtime. An
 * unversioned reference (dlsym without a version) gets the default copy, which falls back to
 * whichever runtime is loaded. Tested end to end by tests/e2e/ and tests/fakecuda/ under the
 * runtime test double (tests/e2e/test_mixed_runtimes.sh: both majors in one process); the fast
 * path's cost by `make bench`.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal.h"

LG_TLS int lg_preload_in_launch;

/* The hooked entry points: name, return type, parameters, the body's arguments (B: the binding).
 * One list drives the real-pointer storage, the per-version definitions and the table late
 * arming patches (arm.c). */
// clang-format off
#define LG_HOOKS(X)                                                                                               \
    X(__cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),      \
      (B, f, g, b, a, sm, s))                                                                                     \
    X(__cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), \
      (B, f, g, b, a, sm, s))                                                                                     \
    X(cudaLaunchKernel, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),        \
      (B, f, g, b, a, sm, s))                                                                                     \
    X(cudaLaunchKernel_ptsz, cudaError_t, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s),   \
      (B, f, g, b, a, sm, s))                                                                                     \
    X(cudaLaunchKernelExC, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (B, c, f, a))     \
    X(cudaLaunchKernelExC_ptsz, cudaError_t, (const cudaLaunchConfig_t *c, const void *f, void **a), (B, c, f, a))\
    X(__cudaRegisterFunction, void,                                                                               \
      (void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd,     \
       int *ws),                                                                                                  \
      (B, fh, hf, df, dn, tl, ti, bi, bd, gd, ws))                                                                \
    X(__cudaGetKernel, cudaError_t, (cudaKernel_t *k, const void *f), (B, k, f))                                 \
    X(__cudaUnregisterFatBinary, void, (void **fh), (B, fh))                                                      \
    X(cudaGetLastError, cudaError_t, (void), (B))                                                                 \
    X(cudaPeekAtLastError, cudaError_t, (void), (B))                                                              \
    X(cudaGetErrorString, const char *, (cudaError_t e), (B, e))
// clang-format on

/* The real functions of one runtime version node, resolved on first use. */
enum {
#define HOOK_INDEX(name, ret, params, args) IDX_##name,
    LG_HOOKS(HOOK_INDEX)
#undef HOOK_INDEX
    N_HOOKS
};
typedef struct binding {
    int major;
    const char *version;
    void *real[N_HOOKS];
} binding_t;
#define LG_VERSIONS(V) V(13, "libcudart.so.13") V(12, "libcudart.so.12") V(11, "libcudart.so.11.0")
#define DEFINE_BINDING(v, node) static binding_t binding_##v = {v, node, {0}};
LG_VERSIONS(DEFINE_BINDING)

static __attribute__((noinline)) void *resolve_real(binding_t *b, int idx, const char *name)
{
    void *f = lg_runtime_resolve_version(name, b->major, b->version, NULL);
    if (f)
        __atomic_store_n(&b->real[idx], f, __ATOMIC_RELEASE);
    return f;
}

static inline __attribute__((always_inline)) void *real_of(binding_t *b, int idx, const char *name)
{
    void *f = __atomic_load_n(&b->real[idx], __ATOMIC_ACQUIRE);
    return LG_LIKELY(f != NULL) ? f : resolve_real(b, idx, name);
}
#define REAL(b, name) ((name##_fn)real_of((b), IDX_##name, #name))
#define DECLARE_FN(name, ret, params, args) typedef ret(*name##_fn) params;
LG_HOOKS(DECLARE_FN)

/* Late arming (arm.c) patches GOT slots by name with the default copy. */
#define HOOK_ENTRY(name, ret, params, args) {#name, (void *)lg_v13_##name, &binding_13.real[IDX_##name]},
#define DECLARE_V13(name, ret, params, args) ret lg_v13_##name params;
LG_HOOKS(DECLARE_V13)
static const lg_hook_t hook_table[] = {LG_HOOKS(HOOK_ENTRY)};

const lg_hook_t *lg_preload_hooks(int *count)
{
    *count = (int)(sizeof hook_table / sizeof *hook_table);
    return hook_table;
}

/* ------------------------------------------------------------------ error injection (raise) */

/* Each entry point's body takes its binding (B) first; the exported per-version definitions at
 * the end of the file are one call each. */
#define BODY static inline __attribute__((always_inline))

/* Async verdicts are read at every hook point; the pending error of a blocked launch is
 * returned by the first error query on the thread it belongs to. */
static inline void hook_point(binding_t *b)
{
    if (LG_UNLIKELY(lg_verdicts_pending()) && !lg_in_library) {
        lg_ensure_started();
        lg_launch_poll_async(lg_runtime_for(b->major, b->version));
    }
}

/* Called on every launch check PyTorch makes (C10_CUDA_KERNEL_LAUNCH_CHECK): a thread-local
 * test, then the real function. */
BODY cudaError_t body_cudaGetLastError(binding_t *b)
{
    cudaGetLastError_fn real = REAL(b, cudaGetLastError);
    hook_point(b);
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

BODY cudaError_t body_cudaPeekAtLastError(binding_t *b)
{
    cudaPeekAtLastError_fn real = REAL(b, cudaPeekAtLastError);
    hook_point(b);
    cudaError_t e = real ? real() : cudaErrorInitializationError;
    if (LG_UNLIKELY(lg_runtime_pending) && e == cudaSuccess)
        e = (cudaError_t)lg_runtime_pending;
    return e;
}

BODY const char *body_cudaGetErrorString(binding_t *b, cudaError_t e)
{
    const char *ours = lg_runtime_error_message((int)e);
    if (ours)
        return ours;
    cudaGetErrorString_fn real = REAL(b, cudaGetErrorString);
    return real ? real(e) : "unknown error (labelguard: no CUDA runtime found)";
}

/* ------------------------------------------------------------------ registration */

BODY void body___cudaRegisterFunction(binding_t *b, void **fh, const char *hf, char *df, const char *dn, int tl,
                                      uint3 *ti, uint3 *bi, dim3 *bd, dim3 *gd, int *ws)
{
    lg_names_record_function(fh, hf, df ? df : dn);
    __cudaRegisterFunction_fn real = REAL(b, __cudaRegisterFunction);
    if (real)
        real(fh, hf, df, dn, tl, ti, bi, bd, gd, ws);
}

/* The image's names (kept by pointer, names.c) are about to go away with it. Async verdicts
 * still outstanding name kernels of this image (their spec and name are dropped with it), so
 * they are collected first: at exit, nvcc's atexit handler runs this before our destructor. */
BODY void body___cudaUnregisterFatBinary(binding_t *b, void **fh)
{
    hook_point(b);
    lg_names_drop_module(fh);
    __cudaUnregisterFatBinary_fn real = REAL(b, __cudaUnregisterFatBinary);
    if (real)
        real(fh);
}

BODY cudaError_t body___cudaGetKernel(binding_t *b, cudaKernel_t *k, const void *f)
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
static inline void **decide(binding_t *bd, lg_entry_t entry, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                            cudaStream_t s, bool per_thread, lg_decision_t *d, bool *marked)
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
    /* The caller's own runtime: its memory, its streams, its kernel registrations. */
    lg_launch_decide(lg_runtime_for(bd->major, bd->version), &l, d);
    if (LG_LIKELY(d->kind == LG_VERDICT_RUN))
        return a;
    return d->kind == LG_VERDICT_RUN_WITH ? d->args_copy.args : NULL;
}

typedef cudaError_t (*launch_fn)(const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s);

/* Each launch shape's slow path only calls its real function with what decide() says: out of
 * line, so that the decision's 4 KiB of argument storage is no part of the fast path's frame. */
static __attribute__((noinline)) cudaError_t launch_slow(binding_t *bd, lg_entry_t entry, launch_fn real,
                                                         const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                                         cudaStream_t s, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    lg_decision_t d;
    bool marked;
    void **args = decide(bd, entry, f, g, b, a, sm, s, per_thread, &d, &marked);
    cudaError_t r = args ? real(f, g, b, args, sm, s) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    return r;
}

static inline __attribute__((always_inline)) cudaError_t launch(binding_t *bd, lg_entry_t entry, launch_fn real,
                                                                const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                                                cudaStream_t s, bool per_thread)
{
    if (LG_LIKELY(real != NULL) && LG_LIKELY(unwatched(f))) {
        /* Marked in progress so the CUPTI layer, which sees the same launch, skips it. */
        lg_preload_in_launch++;
        cudaError_t r = real(f, g, b, a, sm, s);
        lg_preload_in_launch--;
        return r;
    }
    return launch_slow(bd, entry, real, f, g, b, a, sm, s, per_thread);
}

BODY cudaError_t body___cudaLaunchKernel(binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                         cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL, REAL(B, __cudaLaunchKernel), f, g, b, a, sm, s, false);
}

BODY cudaError_t body___cudaLaunchKernel_ptsz(binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                              cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL_PTSZ, REAL(B, __cudaLaunchKernel_ptsz), f, g, b, a, sm, s,
                  true);
}

BODY cudaError_t body_cudaLaunchKernel(binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                       cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL, REAL(B, cudaLaunchKernel), f, g, b, a, sm, s, false);
}

BODY cudaError_t body_cudaLaunchKernel_ptsz(binding_t *B, const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                            cudaStream_t s)
{
    return launch(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_PTSZ, REAL(B, cudaLaunchKernel_ptsz), f, g, b, a, sm, s, true);
}

typedef cudaError_t (*launch_ex_fn)(const cudaLaunchConfig_t *c, const void *f, void **a);

static __attribute__((noinline)) cudaError_t launch_ex_slow(binding_t *bd, lg_entry_t entry, launch_ex_fn real,
                                                            const cudaLaunchConfig_t *c, const void *f, void **a,
                                                            bool per_thread)
{
    lg_decision_t d;
    bool marked;
    void **args =
        decide(bd, entry, f, c->gridDim, c->blockDim, a, c->dynamicSmemBytes, c->stream, per_thread, &d, &marked);
    cudaError_t r = args ? real(c, f, args) : (cudaError_t)d.error;
    lg_preload_in_launch -= marked;
    return r;
}

static inline __attribute__((always_inline)) cudaError_t launch_ex(binding_t *bd, lg_entry_t entry, launch_ex_fn real,
                                                                   const cudaLaunchConfig_t *c, const void *f,
                                                                   void **a, bool per_thread)
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
    return launch_ex_slow(bd, entry, real, c, f, a, per_thread);
}

BODY cudaError_t body_cudaLaunchKernelExC(binding_t *B, const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC, REAL(B, cudaLaunchKernelExC), c, f, a, false);
}

BODY cudaError_t body_cudaLaunchKernelExC_ptsz(binding_t *B, const cudaLaunchConfig_t *c, const void *f, void **a)
{
    return launch_ex(B, LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ, REAL(B, cudaLaunchKernelExC_ptsz), c, f, a, true);
}

/* ------------------------------------------------------------------ the exported definitions */

/* NAME@@libcudart.so.13 (the default, also what an unversioned reference binds to),
 * NAME@libcudart.so.12 and NAME@libcudart.so.11.0; the lg_v* names themselves are local
 * (src/exports.map). */
#define SYMVER_13(name) LG_EXPORT __attribute__((symver(#name "@@libcudart.so.13")))
#define SYMVER_12(name) LG_EXPORT __attribute__((symver(#name "@libcudart.so.12")))
#define SYMVER_11(name) LG_EXPORT __attribute__((symver(#name "@libcudart.so.11.0")))
#define DEFINE_VERSION(v, name, ret, params, args) \
    SYMVER_##v(name) ret lg_v##v##_##name params   \
    {                                              \
        binding_t *const B = &binding_##v;         \
        return body_##name args;                   \
    }
#define DEFINE_13(name, ret, params, args) DEFINE_VERSION(13, name, ret, params, args)
#define DEFINE_12(name, ret, params, args) DEFINE_VERSION(12, name, ret, params, args)
#define DEFINE_11(name, ret, params, args) DEFINE_VERSION(11, name, ret, params, args)
LG_HOOKS(DEFINE_13)
LG_HOOKS(DEFINE_12)
LG_HOOKS(DEFINE_11)
