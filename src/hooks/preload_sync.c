/* preload_sync.c: the interposed synchronizing and CUDA graph entry points (LD_PRELOAD layer),
 * a thin translation; preload.c holds the launches, registration and error queries.
 *
 * The synchronizing calls (stream, event and device synchronization, blocking copies) collect
 * the calling thread's async verdicts after the real call, and return a raise verdict's error,
 * as CUDA returns an asynchronous error there; a graph replay returns one read at its own hook
 * point, before replaying. Such a returned error is also the thread's last error until
 * cudaGetLastError reads it, as CUDA's own errors are. The graph entry points (cudaStreamEndCapture,
 * cudaGraphInstantiate*, cudaGraphExecDestroy, cudaGraphDestroy, cudaGraphLaunch) tell
 * graphs.c which graphs hold checked launches and queue each replay's verdicts;
 * cudaStreamBeginCapture and cudaStreamEndCapture tell captures.c which captures build a graph
 * of their own (the only ones that get host nodes: test_graph_cond.sh);
 * cudaStreamBeginCaptureToGraph and cudaGraphCreate tell graphs_into.c which captures add to a
 * graph the caller holds, and which graphs are the caller's own (test_graph_into.sh). Defined once
 * per libcudart version node like every hook (preload.h). Runs on whatever thread calls the
 * runtime.
 *
 * Tested end to end under the runtime test double: tests/e2e/test_graphs.sh (capture, replay,
 * late arming), test_delivery.sh (an error returned at the launching thread's sync point),
 * test_delivery_steps.sh (a replay followed by other work, the last error after a blocking copy)
 * and the real-torch cases; the cost of a synchronizing call by `make bench`.
 */
#include "hooks/preload.h"

/* ------------------------------------------------------------------ synchronizing calls */

/* Where PyTorch waits for the GPU (.item(), .cpu(), torch.cuda.synchronize) and checks the
 * result with AT_CUDA_CHECK: an async verdict that says raise is returned here, as CUDA
 * returns an asynchronous error at the next synchronization. With nothing outstanding the
 * cost is two thread-local reads and one relaxed load, after the real call. */
static inline bool sync_due(void) { return (lg_verdicts_mine | lg_runtime_pending_sync) || lg_verdicts_orphaned(); }

static __attribute__((noinline)) cudaError_t after_sync(lg_preload_binding_t *b, cudaError_t e, lg_collect_t scope,
                                                        void *stream)
{
    if (lg_runtime_in_library)
        return e;
    if ((lg_verdicts_pending() || lg_verdicts_orphaned()) && lg_start_ensure())
        lg_launch_poll(lg_preload_runtime(b), scope, stream);
    return (cudaError_t)lg_runtime_deliver_async((int)e);
}

/* An application's call returned cudaErrorAssert: a device-side assert fired. Core/asserted.c
 * reports it once unless a report explains it (here for preload.c's error queries and launches
 * too: calls go preload.c -> preload_sync.c). */
void lg_preload_assert_seen(const char *api, bool at_query)
{
    if (lg_runtime_in_library)
        return;
    lg_asserted_found(api, at_query);
}

/* A device-side assert surfaced here: every thread's outstanding verdicts are read first (the
 * kernel that asserted may be one labelguard checked, whose report then explains it), then
 * lg_preload_assert_seen reports it unless one does. */
static __attribute__((noinline, cold)) cudaError_t asserted(lg_preload_binding_t *b, cudaError_t e, const char *api)
{
    if (!lg_runtime_in_library && (lg_verdicts_pending() || lg_verdicts_orphaned()) && lg_start_ensure())
        lg_launch_poll(lg_preload_runtime(b), LG_COLLECT_SYNC_ALL, NULL);
    lg_preload_assert_seen(api, true);
    return lg_runtime_in_library ? e : (cudaError_t)lg_runtime_deliver_async((int)e);
}

/* A stream's synchronization covers its own orphans; the legacy stream's covers every
 * blocking stream, so all of them. */
static inline cudaError_t synced_stream(lg_preload_binding_t *b, cudaError_t e, cudaStream_t s, bool per_thread)
{
    if (LG_UNLIKELY(e == cudaErrorAssert))
        return asserted(b, e, "cudaStreamSynchronize");
    if (LG_LIKELY(!sync_due()))
        return e;
    void *st = (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s;
    return after_sync(b, e, st && st != (void *)cudaStreamLegacy ? LG_COLLECT_SYNC_STREAM : LG_COLLECT_SYNC_ALL, st);
}

static inline cudaError_t synced_all(lg_preload_binding_t *b, cudaError_t e, const char *api)
{
    if (LG_UNLIKELY(e == cudaErrorAssert))
        return asserted(b, e, api);
    return LG_LIKELY(!sync_due()) ? e : after_sync(b, e, LG_COLLECT_SYNC_ALL, NULL);
}

BODY cudaError_t body_cudaStreamSynchronize(lg_preload_binding_t *b, cudaStream_t s)
{
    return synced_stream(b, REAL_OR_INIT(b, cudaStreamSynchronize, (s)), s, false);
}

BODY cudaError_t body_cudaStreamSynchronize_ptsz(lg_preload_binding_t *b, cudaStream_t s)
{
    return synced_stream(b, REAL_OR_INIT(b, cudaStreamSynchronize_ptsz, (s)), s, true);
}

BODY cudaError_t body_cudaEventSynchronize(lg_preload_binding_t *b, cudaEvent_t ev)
{
    return synced_all(b, REAL_OR_INIT(b, cudaEventSynchronize, (ev)), "cudaEventSynchronize");
}

BODY cudaError_t body_cudaDeviceSynchronize(lg_preload_binding_t *b)
{
    return synced_all(b, REAL_OR_INIT(b, cudaDeviceSynchronize, ()), "cudaDeviceSynchronize");
}

BODY cudaError_t body_cudaMemcpy(lg_preload_binding_t *b, void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return synced_all(b, REAL_OR_INIT(b, cudaMemcpy, (d, s, n, k)), "cudaMemcpy");
}

BODY cudaError_t body_cudaMemcpy_ptds(lg_preload_binding_t *b, void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return synced_all(b, REAL_OR_INIT(b, cudaMemcpy_ptds, (d, s, n, k)), "cudaMemcpy");
}

BODY cudaError_t body_cudaMemcpy2D(lg_preload_binding_t *b, void *d, size_t dp, const void *s, size_t sp, size_t w,
                                   size_t h, enum cudaMemcpyKind k)
{
    return synced_all(b, REAL_OR_INIT(b, cudaMemcpy2D, (d, dp, s, sp, w, h, k)), "cudaMemcpy2D");
}

BODY cudaError_t body_cudaMemcpy2D_ptds(lg_preload_binding_t *b, void *d, size_t dp, const void *s, size_t sp,
                                        size_t w, size_t h, enum cudaMemcpyKind k)
{
    return synced_all(b, REAL_OR_INIT(b, cudaMemcpy2D_ptds, (d, dp, s, sp, w, h, k)), "cudaMemcpy2D");
}

/* ------------------------------------------------------------------ graphs */

/* A replay of an exec with checks queues one verdict per check for this thread (graphs.c);
 * the replay itself is a hook point. Without checked graphs: one relaxed load. */
static inline cudaError_t graph_launch(lg_preload_binding_t *b, cudaGraphLaunch_fn real, cudaGraphExec_t x,
                                       cudaStream_t s, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    lg_preload_hook_point(b);
    /* An earlier replay's verdict read here says raise: this call returns it, as CUDA returns
     * an asynchronous error at the next call, and does not replay (a failed call does nothing).
     * Returned here, our text is still current when the application reads it. */
    if (LG_UNLIKELY(lg_runtime_pending_sync) && !lg_runtime_in_library)
        return (cudaError_t)lg_runtime_deliver_async(cudaSuccess);
    cudaError_t e = real(x, s);
    if (LG_LIKELY(e == cudaSuccess) && !lg_runtime_in_library)
        lg_recent_graph(x, (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s);
    else if (e == cudaErrorAssert)
        lg_preload_assert_seen("cudaGraphLaunch", false);
    if (LG_UNLIKELY(lg_graphs_watching()) && e == cudaSuccess && !lg_runtime_in_library && lg_start_ensure()) {
        if (lg_graphs_launched(x, (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s))
            lg_report_warning_once("graph_unchecked",
                                   "a CUDA graph instantiated before labelguard armed is replayed: its loss launches "
                                   "are not checked (capture it again after arming)");
    }
    return e;
}

BODY cudaError_t body_cudaGraphLaunch(lg_preload_binding_t *b, cudaGraphExec_t x, cudaStream_t s)
{
    return graph_launch(b, REAL(b, cudaGraphLaunch), x, s, false);
}

BODY cudaError_t body_cudaGraphLaunch_ptsz(lg_preload_binding_t *b, cudaGraphExec_t x, cudaStream_t s)
{
    return graph_launch(b, (cudaGraphLaunch_fn)REAL(b, cudaGraphLaunch_ptsz), x, s, true);
}

/* A capture begun here builds a graph of its own, which takes host nodes: its id is recorded
 * (captures.c) once the real call succeeded. One capture query per capture begun; the
 * application's own call came first, so this is never the process's first CUDA call. */
static inline cudaError_t begin_capture(lg_preload_binding_t *b, cudaStreamBeginCapture_fn real, cudaStream_t s,
                                        enum cudaStreamCaptureMode m, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    cudaError_t e = real(s, m);
    if (e == cudaSuccess && !lg_runtime_in_library) {
        unsigned long long id = 0;
        if (lg_runtime_capture_status(lg_preload_runtime(b), (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s,
                                      &id) > 0)
            lg_captures_begun(id);
    }
    return e;
}

BODY cudaError_t body_cudaStreamBeginCapture(lg_preload_binding_t *b, cudaStream_t s, enum cudaStreamCaptureMode m)
{
    return begin_capture(b, REAL(b, cudaStreamBeginCapture), s, m, false);
}

BODY cudaError_t body_cudaStreamBeginCapture_ptsz(lg_preload_binding_t *b, cudaStream_t s,
                                                  enum cudaStreamCaptureMode m)
{
    return begin_capture(b, (cudaStreamBeginCapture_fn)REAL(b, cudaStreamBeginCapture_ptsz), s, m, true);
}

/* A capture into a graph the caller holds (a conditional node's body, or a graph of its own)
 * is recorded with its target once the real call succeeded (graphs_into.c): its end hands
 * back no graph, or that one again, and its checks must stay with the target. A target made
 * by cudaGraphCreate takes host nodes: the capture is recorded as begun here too (captures.c);
 * a body does not, and gets none. */
static inline cudaError_t begin_capture_to_graph(lg_preload_binding_t *b, cudaStreamBeginCaptureToGraph_fn real,
                                                 cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *d,
                                                 const void *ed, size_t n, enum cudaStreamCaptureMode m,
                                                 bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    cudaError_t e = real(s, g, d, ed, n, m);
    if (e == cudaSuccess && g && !lg_runtime_in_library) {
        unsigned long long id = 0;
        void *st = (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s;
        if (lg_runtime_capture_status(lg_preload_runtime(b), st, &id) > 0 && id) {
            lg_graphs_into_begun(id, g);
            if (lg_graphs_into_tracked() && lg_graphs_into_standalone(g))
                lg_captures_begun(id);
        }
    }
    return e;
}

BODY cudaError_t body_cudaStreamBeginCaptureToGraph(lg_preload_binding_t *b, cudaStream_t s, cudaGraph_t g,
                                                    const cudaGraphNode_t *d, const void *ed, size_t n,
                                                    enum cudaStreamCaptureMode m)
{
    return begin_capture_to_graph(b, REAL(b, cudaStreamBeginCaptureToGraph), s, g, d, ed, n, m, false);
}

BODY cudaError_t body_cudaStreamBeginCaptureToGraph_ptsz(lg_preload_binding_t *b, cudaStream_t s, cudaGraph_t g,
                                                         const cudaGraphNode_t *d, const void *ed, size_t n,
                                                         enum cudaStreamCaptureMode m)
{
    return begin_capture_to_graph(b, (cudaStreamBeginCaptureToGraph_fn)REAL(b, cudaStreamBeginCaptureToGraph_ptsz), s,
                                  g, d, ed, n, m, true);
}

/* The graph a capture builds, asked before its end (cudaStreamGetCaptureInfo's graph, the
 * fourth parameter of every version that has one; NULL where the runtime cannot say). */
static const void *capturing_graph(const lg_runtime_t *rt, void *stream)
{
    void *graph = NULL;
    int status = 0;
    unsigned long long id = 0;
    if (!rt || !rt->stream_get_capture_info)
        return NULL;
    int saved = lg_runtime_save_error(rt);
    if (rt->stream_get_capture_info(stream, &status, &id, &graph, NULL, NULL, NULL) != 0)
        graph = NULL;
    lg_runtime_restore_error(rt, saved);
    return graph;
}

/* The capture's id is asked before the real call ends it, only while some capture holds a
 * check, was recorded as begun here, or captures into an existing graph. A capture without
 * checks still reports its graph while some graph handle maps to checks: the handle may be a
 * destroyed graph's, reused, whose mapping must go. A capture into an existing graph (recorded
 * at its begin, or one that succeeded without handing back a graph: begun by the driver, or
 * before arming; its graph is asked before the end) maps its checks to that graph. */
static inline cudaError_t end_capture(lg_preload_binding_t *b, cudaStreamEndCapture_fn real, cudaStream_t s,
                                      cudaGraph_t *g, bool per_thread)
{
    if (LG_UNLIKELY(!real))
        return cudaErrorInitializationError;
    unsigned long long id = 0;
    bool track = lg_graphs_capturing() && !lg_runtime_in_library;
    bool begun = lg_captures_open() && !lg_runtime_in_library;
    bool into = lg_graphs_into_any() && !lg_runtime_in_library;
    void *st = (per_thread && !s) ? (void *)cudaStreamPerThread : (void *)s;
    const void *capturing = NULL;
    if (LG_UNLIKELY(track || begun || into))
        lg_runtime_capture_status(lg_preload_runtime(b), st, &id);
    if (LG_UNLIKELY(track) && id)
        capturing = capturing_graph(lg_preload_runtime(b), st);
    cudaError_t e = real(s, g);
    if (LG_UNLIKELY(begun))
        lg_captures_ended(id);
    const void *graph = e == cudaSuccess && g ? (const void *)*g : NULL;
    const void *target = LG_UNLIKELY(into) && id ? lg_graphs_into_take(id) : NULL;
    if (LG_UNLIKELY(track) && id && (target || (e == cudaSuccess && !graph)))
        lg_graphs_end_into(id, target ? target : capturing, e == cudaSuccess);
    else if (LG_UNLIKELY(track) && id)
        lg_graphs_end_capture(id, graph);
    else if (LG_UNLIKELY(graph && graph != target && lg_graphs_mapped()) && !lg_runtime_in_library)
        lg_graphs_end_capture(0, graph);
    return e;
}

BODY cudaError_t body_cudaStreamEndCapture(lg_preload_binding_t *b, cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(b, REAL(b, cudaStreamEndCapture), s, g, false);
}

BODY cudaError_t body_cudaStreamEndCapture_ptsz(lg_preload_binding_t *b, cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(b, (cudaStreamEndCapture_fn)REAL(b, cudaStreamEndCapture_ptsz), s, g, true);
}

static inline cudaError_t instantiated(cudaError_t e, cudaGraphExec_t *x, cudaGraph_t g)
{
    if (e == cudaSuccess && x && !lg_runtime_in_library)
        lg_graphs_instantiated(*x, g);
    return e;
}

BODY cudaError_t body_cudaGraphInstantiate(lg_preload_binding_t *b, cudaGraphExec_t *x, cudaGraph_t g, void *a3,
                                           void *a4, size_t a5)
{
    return instantiated(REAL_OR_INIT(b, cudaGraphInstantiate, (x, g, a3, a4, a5)), x, g);
}

BODY cudaError_t body_cudaGraphInstantiateWithFlags(lg_preload_binding_t *b, cudaGraphExec_t *x, cudaGraph_t g,
                                                    unsigned long long f)
{
    return instantiated(REAL_OR_INIT(b, cudaGraphInstantiateWithFlags, (x, g, f)), x, g);
}

BODY cudaError_t body_cudaGraphInstantiateWithParams(lg_preload_binding_t *b, cudaGraphExec_t *x, cudaGraph_t g,
                                                     cudaGraphInstantiateParams *p)
{
    return instantiated(REAL_OR_INIT(b, cudaGraphInstantiateWithParams, (x, g, p)), x, g);
}

BODY cudaError_t body_cudaGraphExecDestroy(lg_preload_binding_t *b, cudaGraphExec_t x)
{
    cudaError_t e = REAL_OR_INIT(b, cudaGraphExecDestroy, (x));
    if (e == cudaSuccess && !lg_runtime_in_library)
        lg_graphs_exec_destroyed(x);
    return e;
}

/* PyTorch destroys each graph right after instantiating it; the runtime may hand its address
 * to the next capture. The mapping goes before the real call: after it, another thread's
 * capture could already hold the same handle, and its fresh mapping would be erased. Without
 * checked graphs: one relaxed load. */
BODY cudaError_t body_cudaGraphDestroy(lg_preload_binding_t *b, cudaGraph_t g)
{
    if (LG_UNLIKELY(lg_graphs_mapped()) && g && !lg_runtime_in_library)
        lg_graphs_destroyed(g);
    if (LG_UNLIKELY(lg_graphs_into_tracked()) && g && !lg_runtime_in_library)
        lg_graphs_into_destroyed(g);
    return REAL_OR_INIT(b, cudaGraphDestroy, (g));
}

/* A graph of the caller's own, which takes host nodes (a conditional body is made by
 * cudaGraphAddNode instead): a capture into it gets the host backend's checks. */
BODY cudaError_t body_cudaGraphCreate(lg_preload_binding_t *b, cudaGraph_t *g, unsigned int f)
{
    cudaError_t e = REAL_OR_INIT(b, cudaGraphCreate, (g, f));
    if (e == cudaSuccess && g && !lg_runtime_in_library)
        lg_graphs_into_made_graph(*g);
    return e;
}

/* ------------------------------------------------------------------ the exported definitions */

LG_DEFINE_VERSIONS(LG_HOOKS_SYNC)
