/* preload.h: what the two halves of the LD_PRELOAD layer share (preload.c: launches,
 * registration and error queries; preload_sync.c: synchronizing calls and graphs): the list of
 * hooked entry points, the per-version bindings of their real functions, and the macros that
 * define each entry point once per libcudart version node.
 *
 * Versions: each entry point is defined once per runtime version node (libcudart.so.13, the
 * default, libcudart.so.12 and libcudart.so.11.0; src/exports.map), so a caller's reference
 * `cudaLaunchKernel@libcudart.so.12` binds to the CUDA 12 copy and one `@libcudart.so.13` to
 * the CUDA 13 copy, by the dynamic loader, at no cost per call. Each copy has its own real
 * functions (a binding), resolved at its version node by runtime.c, and hands the core its own
 * runtime's table. An unversioned reference (dlsym without a version) gets the default copy,
 * which falls back to whichever runtime is loaded.
 *
 * Included only by preload.c, preload_sync.c and preload_bind.c; tested through them (tests/e2e, among them
 * test_mixed_runtimes.sh for both majors in one process).
 */
#ifndef LG_PRELOAD_H
#define LG_PRELOAD_H

#include <cuda_runtime_api.h>

#include "hooks/hooks.h"

/* name, return type, parameters, the body's arguments (B: the binding). */
// clang-format off
#define LG_HOOKS_LAUNCH(X)                                                                                        \
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

/* cudaStreamBeginCaptureToGraph (CUDA 12.3+) takes its edge data as `const cudaGraphEdgeData *`,
 * a type older headers lack: passed on untouched. */
/* cudaGraphInstantiate took five parameters before CUDA 12 (error node, log buffer and its
 * size) and takes three since: the hook takes five and passes them all on, which is right for
 * both (a CUDA 12 or 13 runtime ignores the extra ones). */
#define LG_HOOKS_SYNC(X)                                                                                          \
    X(cudaStreamSynchronize, cudaError_t, (cudaStream_t s), (B, s))                                               \
    X(cudaStreamSynchronize_ptsz, cudaError_t, (cudaStream_t s), (B, s))                                          \
    X(cudaEventSynchronize, cudaError_t, (cudaEvent_t ev), (B, ev))                                               \
    X(cudaDeviceSynchronize, cudaError_t, (void), (B))                                                            \
    X(cudaMemcpy, cudaError_t, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (B, d, s, n, k))        \
    X(cudaMemcpy_ptds, cudaError_t, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (B, d, s, n, k))   \
    X(cudaMemcpy2D, cudaError_t,                                                                                  \
      (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k),                  \
      (B, d, dp, s, sp, w, h, k))                                                                                 \
    X(cudaMemcpy2D_ptds, cudaError_t,                                                                             \
      (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k),                  \
      (B, d, dp, s, sp, w, h, k))                                                                                 \
    X(cudaGraphLaunch, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (B, x, s))                               \
    X(cudaGraphLaunch_ptsz, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (B, x, s))                          \
    X(cudaStreamBeginCapture, cudaError_t, (cudaStream_t s, enum cudaStreamCaptureMode m), (B, s, m))             \
    X(cudaStreamBeginCapture_ptsz, cudaError_t, (cudaStream_t s, enum cudaStreamCaptureMode m), (B, s, m))        \
    X(cudaStreamBeginCaptureToGraph, cudaError_t,                                                                 \
      (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *d, const void *ed, size_t n,                         \
       enum cudaStreamCaptureMode m),                                                                             \
      (B, s, g, d, ed, n, m))                                                                                     \
    X(cudaStreamBeginCaptureToGraph_ptsz, cudaError_t,                                                            \
      (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *d, const void *ed, size_t n,                         \
       enum cudaStreamCaptureMode m),                                                                             \
      (B, s, g, d, ed, n, m))                                                                                     \
    X(cudaStreamEndCapture, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (B, s, g))                             \
    X(cudaStreamEndCapture_ptsz, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (B, s, g))                        \
    X(cudaGraphInstantiate, cudaError_t, (cudaGraphExec_t *x, cudaGraph_t g, void *a3, void *a4, size_t a5),      \
      (B, x, g, a3, a4, a5))                                                                                      \
    X(cudaGraphInstantiateWithFlags, cudaError_t, (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f),      \
      (B, x, g, f))                                                                                               \
    X(cudaGraphInstantiateWithParams, cudaError_t,                                                                \
      (cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p), (B, x, g, p))                           \
    X(cudaGraphExecDestroy, cudaError_t, (cudaGraphExec_t x), (B, x))                                             \
    X(cudaGraphDestroy, cudaError_t, (cudaGraph_t g), (B, g))                                                     \
    X(cudaGraphCreate, cudaError_t, (cudaGraph_t *g, unsigned int f), (B, g, f))
// clang-format on

#define LG_HOOKS(X) LG_HOOKS_LAUNCH(X) LG_HOOKS_SYNC(X)

enum {
#define LG_HOOK_INDEX(name, ret, params, args) LG_IDX_##name,
    LG_HOOKS(LG_HOOK_INDEX)
#undef LG_HOOK_INDEX
        LG_N_HOOKS
};

/* The real functions of one runtime version node, resolved on first use. */
typedef struct lg_preload_binding {
    int major;
    const char *version;
    void *real[LG_N_HOOKS];
} lg_preload_binding_t;

#define LG_VERSIONS(V) V(13) V(12) V(11)
/* The bindings and their resolution are preload_bind.c's. */
#define LG_DECLARE_BINDING(v) extern LG_HIDDEN lg_preload_binding_t lg_preload_bind_##v;
LG_VERSIONS(LG_DECLARE_BINDING)
#undef LG_DECLARE_BINDING

/* Resolves one real function at its binding's version node (the first call only; runtime.c
 * finds it). Here, not in preload_bind.c: seen inline, its store lets the compiler keep the
 * launch fast path as short as it is (make bench's instruction counts). Two threads resolving
 * at once store the same pointer. */
static inline void *lg_preload_bind_resolve(lg_preload_binding_t *b, int idx, const char *name)
{
    void *f = lg_runtime_resolve_version(name, b->major, b->version, NULL);
    if (f)
        __atomic_store_n(&b->real[idx], f, __ATOMIC_RELEASE);
    return f;
}

static inline __attribute__((always_inline)) void *lg_preload_real(lg_preload_binding_t *b, int idx, const char *name)
{
    void *f = __atomic_load_n(&b->real[idx], __ATOMIC_ACQUIRE);
    return LG_LIKELY(f != NULL) ? f : lg_preload_bind_resolve(b, idx, name);
}

#define LG_DECLARE_FN(name, ret, params, args) typedef ret(*name##_fn) params;
LG_HOOKS(LG_DECLARE_FN)
#undef LG_DECLARE_FN
#define REAL(b, name) ((name##_fn)lg_preload_real((b), LG_IDX_##name, #name))
#define REAL_OR_INIT(b, name, args) (REAL(b, name) ? REAL(b, name) args : cudaErrorInitializationError)

/* The runtime table the core gets for a hook of this binding. */
static inline const lg_runtime_t *lg_preload_runtime(const lg_preload_binding_t *b)
{
    return lg_runtime_for(b->major, b->version);
}

/* Every hook point collects the calling thread's own async verdicts (nothing else: another
 * thread's error is that thread's); a blocked launch's pending error is returned by the first
 * error query on its thread. With nothing outstanding: one thread-local read; with verdicts
 * outstanding but the oldest not yet published: a few more reads, no lock (lg_verdicts_due). */
static inline void lg_preload_hook_point(lg_preload_binding_t *b)
{
    if (LG_UNLIKELY(lg_verdicts_due()) && !lg_runtime_in_library && lg_start_ensure())
        lg_launch_poll(lg_preload_runtime(b), LG_COLLECT_MINE, NULL);
}

/* An application's call returned cudaErrorAssert (preload.c): cold, out of line. */
LG_HIDDEN __attribute__((cold, noinline)) void lg_preload_assert_seen(const char *api, bool at_query);

/* The default copies' C names, which late arming (arm.c) patches into GOT slots by name. */
#define LG_DECLARE_V13(name, ret, params, args) ret lg_preload_v13_##name params;
LG_HOOKS(LG_DECLARE_V13)
#undef LG_DECLARE_V13

/* Each entry point's body takes its binding (B) first; LG_DEFINE_VERSIONS emits the exported
 * definitions, one call each: NAME@@libcudart.so.13 (the default, also what an unversioned
 * reference binds to), NAME@libcudart.so.12 and NAME@libcudart.so.11.0. The lg_preload_v* names
 * themselves are local (src/exports.map). */
#define BODY static inline __attribute__((always_inline))
#define LG_SYMVER_13(name) LG_EXPORT __attribute__((symver(#name "@@libcudart.so.13")))
#define LG_SYMVER_12(name) LG_EXPORT __attribute__((symver(#name "@libcudart.so.12")))
#define LG_SYMVER_11(name) LG_EXPORT __attribute__((symver(#name "@libcudart.so.11.0")))
#define LG_DEFINE_VERSION(v, name, ret, params, args)         \
    LG_SYMVER_##v(name) ret lg_preload_v##v##_##name params   \
    {                                                         \
        lg_preload_binding_t *const B = &lg_preload_bind_##v; \
        return body_##name args;                              \
    }
#define LG_DEFINE_13(name, ret, params, args) LG_DEFINE_VERSION(13, name, ret, params, args)
#define LG_DEFINE_12(name, ret, params, args) LG_DEFINE_VERSION(12, name, ret, params, args)
#define LG_DEFINE_11(name, ret, params, args) LG_DEFINE_VERSION(11, name, ret, params, args)
#define LG_DEFINE_VERSIONS(LIST) LIST(LG_DEFINE_13) LIST(LG_DEFINE_12) LIST(LG_DEFINE_11)

#endif
