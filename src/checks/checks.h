/* checks.h: the checks layer (src/checks/): the validator's backends (GPU kernels, host
 * scan), captured check nodes, the queue of late verdicts, the raw-logits and fused-loss
 * checks. Declares what the core calls; includes report.h. The GPU backend's driver-level
 * declarations are in validate_gpu.h, private to its files. See src/README.md. */
#ifndef LG_CHECKS_H
#define LG_CHECKS_H
#include "report/report.h"

/* ---------------------------------------------------------------- the launch record
 * (filled by the hooks, decided on by launch.c; the checks read it) */

typedef enum {
    LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL, /* __cudaLaunchKernel (nvcc 13 <<<>>>) */
    LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL_PTSZ,
    LG_ENTRY_CUDA_LAUNCH_KERNEL,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_PTSZ,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ,
    LG_ENTRY_CUPTI_RUNTIME,
    LG_ENTRY_CUPTI_DRIVER,
} lg_entry_t;

/* One launch, as the hook layers see it. */
typedef struct lg_launch {
    lg_entry_t entry;
    const void *func;    /* host stub, cudaKernel_t or CUfunction */
    const char *mangled; /* NULL: resolve from func */
    void **args;
    unsigned grid[3], block[3];
    size_t shared_mem;
    void *stream;
    bool can_block; /* false for CUPTI: the launch cannot be skipped */
    const void *caller; /* return address into the code that called the launch API; NULL: unknown */
} lg_launch_t;

/* What the hook must do with the launch. */
typedef enum {
    LG_VERDICT_RUN,      /* call the real function with the original args */
    LG_VERDICT_RUN_WITH, /* call it with `args_copy.args` (mask) */
    LG_VERDICT_SKIP,     /* do not launch; return `error` */
} lg_decision_kind_t;
typedef struct lg_decision {
    lg_decision_kind_t kind;
    int error; /* cudaError_t to return on SKIP */
    lg_args_copy_t args_copy;
} lg_decision_t;

/* ---------------------------------------------------------------- validate.c */

struct lg_scan_ring; /* cuda/lg_validate.h: a verdict ring, GPU- or host-written */

typedef enum { LG_BACKEND_HOST, LG_BACKEND_GPU } lg_backend_t;

/* Picks the backend: GPU when libcuda.so.1 opens, the embedded validator module loads and a
 * context is current (or a primary context is active); else HOST. `rt` may be NULL (static
 * cudart, CUPTI only): then only the GPU backend can validate. Call again after fork. */
LG_HIDDEN void lg_validate_init(const lg_runtime_t *rt);
LG_HIDDEN lg_backend_t lg_validate_backend(void);
/* Copies n bytes at device address ptr into out on `stream` and waits (relaxed capture mode;
 * the stream must not be capturing), through the thread's pinned slot when n fits one
 * (lg_validate_defer_read): 0, or -1 with why. */
LG_HIDDEN int lg_validate_read_bytes(const lg_runtime_t *rt, uint64_t ptr, size_t n, void *stream, void *out, char *why,
                                     size_t why_len);
/* From the atfork child handler: forgets the parent's modules, scratch and pending checks and
 * re-creates the lock (a parent thread may have held it). */
LG_HIDDEN void lg_validate_after_fork_child(void);
/* All functions below take the launch's stream as the application passed it to the runtime,
 * except that a NULL stream of a _ptsz entry point must be passed as (void *)2
 * (cudaStreamPerThread): the same handle means the same stream to the driver and runtime.
 * Targets may be strided (ndim 1..3, non-negative strides); copies keep the target's element
 * offsets, so the launch's accessor strides stay valid with the copy's address. */
/* Scans the target on `stream` and waits for the verdict. Returns 0, or -1 with a reason
 * (not device memory, copy failed...) in why: the caller warns and lets the launch run. */
/* The runtime this thread's next checks use (NULL: the one lg_validate_init was given); returns
 * the previous one. launch.c sets it for the duration of one launch's decision. */
LG_HIDDEN const struct lg_runtime *lg_validate_use_runtime(const struct lg_runtime *r);
LG_HIDDEN int lg_validate_sync(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, char *why,
                               size_t why_len);
/* Writes a copy of the labels in which every bad label is `replacement` (converted to the
 * target's dtype), into scratch memory owned by the validator (per stream, reused, never
 * freed). Returns the device address of logical element 0 of the copy, or 0 on failure. No
 * stream sync on the GPU backend: the copy is ready for work enqueued after it on `stream`. */
LG_HIDDEN uint64_t lg_validate_masked_copy(const lg_target_t *t, void *stream, int64_t replacement, char *why,
                                           size_t why_len);

/* Nanoseconds spent inside lg_validate_* so far (for the summary's validate_ns_total). */
LG_HIDDEN uint64_t lg_validate_ns_total(void);
/* Checks the host backend took over from an active GPU backend (scratch memory refused). */
LG_HIDDEN uint64_t lg_validate_gpu_host_fallbacks(void);
/* Why checks went to the host backend: returned once (then NULL), for the caller to report. */
LG_HIDDEN const char *lg_validate_gpu_take_fallback_note(void);
/* Once, when the GPU backend was chosen after a caller (the start event) had been answered
 * host for want of a context: the note for the log; NULL otherwise. */
LG_HIDDEN const char *lg_validate_gpu_take_backend_note(void);
/* Which validator image the driver loaded ("fatbin: sm_90 code, PTX ISA 6.5", "ptx: ..."),
 * NULL while none has loaded. */
LG_HIDDEN const char *lg_validate_module_image(void);
/* A launch being captured into a CUDA graph, as the check sees it. */
typedef struct lg_capture {
    unsigned long long id; /* the capture's id (cudaStreamGetCaptureInfo); 0 when unknown */
    bool sanitize;         /* the launch will read the sanitized copy (not in log mode) */
} lg_capture_t;
/* Async mode: enqueue validate+sanitize on `stream` with no stream synchronisation;
 * *sanitized gets the address of the sanitized copy the loss kernel must use (bad labels
 * replaced by `replacement`). `cookie` is returned with the verdict (verdicts.c). Returns 0 or
 * -1 with why. GPU backend: one launch writes the copy and publishes the verdict in mapped
 * pinned memory. Host backend: the scan runs before this returns, and when no label is bad
 * *sanitized is t->data itself. capture != NULL: the stream is capturing; the check becomes
 * part of the graph (validator kernel, or validate_node.c's host node) and is handed to
 * graphs.c, which queues one verdict per replay. */
struct lg_kernel_info;
LG_HIDDEN int lg_validate_async(const lg_target_t *t, void *stream, int64_t replacement, int samples,
                                struct lg_kernel_info *cookie, const lg_capture_t *capture, lg_site_t *site,
                                uint64_t *sanitized, char *why, size_t why_len);
/* A second (or later) exec of a graph holding the check whose ring is `ring` (captured for
 * kernel `info`, whose launch reads its target at `reads`: the sanitized copy, or 0 when it
 * reads its own labels): the exec's copies of the check's nodes get scratch of their own, *own
 * their ring, by whichever backend captured the check. 0, or -1 with why and the exec as it
 * was instantiated (the replays then share the graph's scratch). */
LG_HIDDEN int lg_validate_rebind(void *exec, void *graph, const struct lg_scan_ring *ring,
                                 const struct lg_kernel_info *info, uint64_t reads, const struct lg_scan_ring **own,
                                 char *why, size_t why_len);
/* No graph or exec holds the captured check whose ring is `ring` (or an exec's own scratch
 * with that ring) any more, and `runs` of its runs were queued: its scratch goes back to the
 * backend that made it, which hands it to a later captured check once the ring has published
 * `runs` (the last replay has run). The ring keeps counting: that check's replays publish from
 * lg_verdicts_ring_latest + 1. Any thread; never called twice for one capture of a ring. */
LG_HIDDEN void lg_validate_retire(const struct lg_scan_ring *ring, uint64_t runs);
/* Where a captured check goes: the core's table of graphs (graphs.c plugs in its add_check),
 * called with the capture's id, the check's kernel, stream, target, ring and where the launch
 * reads its target (the sanitized copy, or 0). 0, or -1 with why. */
typedef int (*lg_validate_capture_sink_t)(unsigned long long capture_id, struct lg_kernel_info *info, void *stream,
                                          const lg_target_t *t, const struct lg_scan_ring *ring, uint64_t reads,
                                          lg_site_t *site, char *why, size_t why_len);
LG_HIDDEN void lg_validate_set_capture_sink(lg_validate_capture_sink_t sink);
/* ---------------------------------------------------------------- validate_loss.c */

/* Rebinding a loss launch's node: where spec says the launch holds its target, read (*at) from
 * the launch's argument array, or set to `to` in out[] (spec->n_params slots; the parameter
 * holding it rewritten in `value`, LG_RETARGET_MAX bytes). 0, or -1 when spec cannot say;
 * lg_validate_loss_param: the parameter's index, or -1 when spec cannot say. */
#define LG_RETARGET_MAX 512
/* The most nodes a graph may have for its checks to be rebound (both backends search them all;
 * PyTorch's captured steps hold hundreds). */
#define LG_REBIND_MAX_NODES 4096
LG_HIDDEN int lg_validate_loss_param(const struct lg_spec *spec);
/* Is a graph kernel node's function `func` kernel `info` (its pointer, or a stub or handle of
 * the same mangled name)? */
LG_HIDDEN bool lg_validate_loss_is_kernel(const struct lg_kernel_info *info, const void *func);
LG_HIDDEN int lg_validate_loss_target(const struct lg_spec *spec, void *const *args, uint64_t *at);
LG_HIDDEN int lg_validate_loss_retarget(const struct lg_spec *spec, void *const *in, void **out, unsigned char *value,
                                        uint64_t to);
/* ---------------------------------------------------------------- validate_defer.c */

/* Hands the host backend's verdict v of an eager async check to a host function enqueued on
 * `stream`, which publishes it as run *seq of *ring when the stream gets there. 0, or -1 when it
 * cannot (the verdict is then final at once). */
LG_HIDDEN int lg_validate_defer(const lg_runtime_t *rt, void *stream, const lg_verdict_t *v,
                                const struct lg_scan_ring **ring, uint64_t *seq);
/* A torch._assert_async condition (e, at device address ptr) read without waiting: copied into
 * the calling thread's pinned slot on `stream` and judged by a host function there, before the
 * assert kernel runs; its verdict is queued as an async check (as_is: nothing stands in for a
 * condition) for `cookie`, launched at `site` with the op's message `msg` ("" or NULL: none).
 * 0, or -1 with why (the caller reads it in sync). */
LG_HIDDEN int lg_validate_defer_flag(const lg_runtime_t *rt, void *stream, uint64_t ptr, const lg_assert_elem_t *e,
                                     struct lg_kernel_info *cookie, lg_site_t *site, const char *msg, char *why,
                                     size_t why_len);
/* n bytes at ptr into out through the calling thread's pinned slot on `stream` and one wait:
 * no staging, no pointer query. 0; -1 the copy or the wait failed; 1 no pinned slot (the caller
 * reads it another way). */
LG_HIDDEN int lg_validate_defer_read(const lg_runtime_t *rt, void *stream, uint64_t ptr, size_t n, void *out);
LG_HIDDEN void lg_validate_defer_after_fork(void);
/* ---------------------------------------------------------------- validate_host.c */

/* The host backend. `span`: elements spanned by the target (lg_scan_span), already checked.
 * scan: the verdict, 0 or -1 with why. sanitize: the verdict and a device copy of the labels
 * with each bad one replaced (*copy_out: logical element 0), or t->data when nothing was bad
 * and !always_copy. */
LG_HIDDEN int lg_validate_host_scan(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                    int samples, lg_verdict_t *v, char *why, size_t why_len);
/* scan copies a contiguous target in chunks of at most this many bytes (staging reused across
 * calls); a strided one, and sanitize's copy, in one piece. */
#define LG_VALIDATE_HOST_STAGE_BYTES ((size_t)1 << 20)
LG_HIDDEN int lg_validate_host_sanitize(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                        int64_t replacement, int samples, bool always_copy, lg_verdict_t *v,
                                        uint64_t *copy_out, char *why, size_t why_len);
LG_HIDDEN void lg_validate_host_after_fork(void);
/* Is ptr memory the device can read: 0 with the cudaMemcpyKind to copy it to the host with
 * (kind), or -1 with why. */
LG_HIDDEN int lg_validate_host_pointer(const lg_runtime_t *rt, const void *ptr, int *kind, char *why, size_t why_len);
/* In a host copy laid out like t (element offsets from logical element 0), each bad label
 * becomes `replacement`. */
LG_HIDDEN void lg_validate_host_replace(const lg_target_t *t, void *buf, int64_t replacement);
/* ---------------------------------------------------------------- validate_node.c */

/* The host backend inside a CUDA graph capture on `stream`: captures a copy of the labels to
 * pinned host memory, a host node that scans it (and, when sanitize, replaces the bad labels
 * and a copy back into a device buffer, *copy_out), so that every replay checks the labels the
 * replay reads. Replay k publishes its verdict as run k of *ring. 0, or -1 with why. */
LG_HIDDEN int lg_validate_node_capture(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                       bool sanitize, int64_t replacement, int samples, uint64_t *copy_out,
                                       const struct lg_scan_ring **ring, char *why, size_t why_len);
/* A second (or later) exec of a graph holding the check whose ring is `ring`: its copies of the
 * check's nodes (the label copy, the host node, the sanitized copy and the loss launch reading
 * it: the node of kernel `info` that holds the copy where info's spec puts its target) are
 * pointed at fresh scratch with a ring of its own, *own, so that its replays neither overwrite
 * another exec's labels nor publish into its verdicts. 0; 1 when `ring` is not a host-node
 * check's; or -1 with why and the exec as it was (nodes not found as captured, a runtime
 * without the calls). */
LG_HIDDEN int lg_validate_node_rebind(const lg_runtime_t *rt, void *exec, void *graph, const struct lg_scan_ring *ring,
                                      const struct lg_kernel_info *info, const struct lg_scan_ring **own, char *why,
                                      size_t why_len);
/* lg_validate_retire for a host-node check: 0, or 1 when `ring` is not one. */
LG_HIDDEN int lg_validate_node_retire(const struct lg_scan_ring *ring, uint64_t runs);
/* ---------------------------------------------------------------- validate_gpu.c */

typedef struct lg_scratch lg_scratch_t; /* per (context, stream) memory of the GPU backend */
/* One enqueued run of the validator. */
typedef struct lg_gpu_run {
    const lg_scratch_t *s;
    uint64_t seq;  /* the run's sequence number in s's ring (captured: replay k publishes k) */
    const struct lg_scan_ring *ring; /* s's ring, host view */
    uint64_t copy; /* sanitized copy, address of logical element 0 */
    bool captured;
} lg_gpu_run_t;
/* Loads the driver and decides whether the GPU backend is active: a current context that
 * loads the module, or a primary context active on some device. Returns that. */
LG_HIDDEN bool lg_validate_gpu_init(void);
LG_HIDDEN bool lg_validate_gpu_active(void);
/* Enqueues one scan on `stream`. Returns 0; or -1 with why, and *use_host set when the host
 * backend should take this call instead (no current context, module not loadable). */
LG_HIDDEN int lg_validate_gpu_launch(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                     int samples, bool want_copy, int64_t replacement, bool allow_capture,
                                     lg_gpu_run_t *out, bool *use_host, char *why, size_t why_len);
/* Waits for `stream` (relaxed capture mode). 0, or -1 with why. */
LG_HIDDEN int lg_validate_gpu_wait(void *stream, char *why, size_t why_len);
/* Run `seq` of s's ring: 1 read into v, 0 not yet written, -1 already overwritten. */
LG_HIDDEN int lg_validate_gpu_ring_read(const lg_scratch_t *s, uint64_t seq, lg_verdict_t *v);
LG_HIDDEN void lg_validate_gpu_after_fork(void);

/* ---------------------------------------------------------------- validate_gpu_graph.c */

/* The GPU backend's lg_validate_rebind: the exec's copy of the validator node (and, when the
 * loss launch reads the sanitized copy at `reads`, of that launch) pointed at fresh captured
 * scratch, *own its ring. 0; 1 when `ring` is not a captured validator's; -1 with why and the
 * exec as it was. */
LG_HIDDEN int lg_validate_gpu_graph_rebind(void *exec, void *graph, const struct lg_scan_ring *ring,
                                           const struct lg_spec *spec, uint64_t reads,
                                           const struct lg_scan_ring **own, char *why, size_t why_len);
/* lg_validate_retire for captured validator scratch: 0, or 1 when `ring` is not one. */
LG_HIDDEN int lg_validate_gpu_graph_retire(const struct lg_scan_ring *ring, uint64_t runs);
/* ---------------------------------------------------------------- verdicts.c */

struct lg_scan_ring;
/* One check whose verdict is read after its launch. */
typedef struct lg_pending {
    struct lg_kernel_info *cookie;
    void *stream;
    lg_target_t target;
    const struct lg_scan_ring *ring; /* where run `seq` publishes (GPU validator, graph host
                                        node, validate_defer.c); NULL: `verdict` is final */
    uint64_t seq;
    uint64_t graph_id; /* a graph replay: the graph's id (its capture's); 0 otherwise */
    uint64_t replay;   /* a graph replay: which replay of that launch, from 1 */
    uint64_t exec;     /* a graph replay: which exec of the graph replayed it, from 1 */
    uint64_t owner;    /* the thread that added it (lg_verdicts_add sets it); 0: exited */
    bool as_is;        /* the launch read its own labels, not a sanitized copy */
    lg_site_t *site;   /* where the launch was made (held; NULL: not recorded) */
    char *msg;         /* a torch._assert_async launch's message (owned; NULL: none) */
    const volatile unsigned long long *latest; /* &ring->latest (lg_verdicts_add sets it) */
    lg_verdict_t verdict;
} lg_pending_t;
/* What a collected check says. */
typedef struct lg_async_report {
    struct lg_kernel_info *info; /* the cookie */
    void *stream;
    lg_target_t target;
    lg_verdict_t verdict;
    uint64_t graph_id, replay, exec;
    bool as_is; /* the launch read its own labels (lg_pending_t.as_is) */
    lg_site_t *site; /* the pending check's, handed over: the collector drops it */
    char *msg;       /* the pending check's, handed over: the collector frees it */
} lg_async_report_t;
/* Queues p (malloc'd; the queue frees it), owned by the calling thread. 0, or -1 when out of
 * memory. A graph replay's p (graph_id set): the run its next replay overwrites is read first,
 * waiting for p->stream if it is not published yet (the caller's lock is held across). */
LG_HIDDEN int lg_verdicts_add(lg_pending_t *p);
/* Before run `next` of `ring` (an eager ring: the calling thread's own) is enqueued: every
 * outstanding check of that ring whose run shares next's slot gets its verdict out of the ring
 * now (overwritten already: lost). Returns how many of those runs are not published yet: the
 * caller waits for the stream and calls again with give_up, which marks what is still missing
 * lost (lg_launch_poll reports them). With no check outstanding: two loads, no lock. */
LG_HIDDEN int lg_verdicts_keep(const struct lg_scan_ring *ring, uint64_t next, bool give_up);
/* Which checks a collection may take besides the calling thread's own: none (a launch or an
 * error query), the orphans of one stream (its synchronization), or every orphan. */
typedef enum { LG_COLLECT_MINE, LG_COLLECT_SYNC_STREAM, LG_COLLECT_SYNC_ALL } lg_collect_t;
/* At exit (lg.c's atexit handler): every thread's checks, live threads' too. */
#define LG_COLLECT_EXIT ((lg_collect_t)(LG_COLLECT_SYNC_ALL + 1))
/* True and r filled for each finished check (clean ones included), oldest first; false when
 * none is ready. A check whose verdict was lost has r->verdict.checked -1. Thread-safe. */
LG_HIDDEN bool lg_verdicts_collect(lg_async_report_t *r, lg_collect_t scope, void *stream);
/* Run `seq` of a verdict ring (GPU: mapped pinned memory; graph host nodes: host memory):
 * 1 read into v, 0 not yet written, -1 already overwritten. Lock-free, any thread. */
LG_HIDDEN int lg_verdicts_ring_read(const struct lg_scan_ring *ring, uint64_t seq, lg_verdict_t *v);
/* The newest run a ring has published (0: none). Lock-free, any thread. */
LG_HIDDEN uint64_t lg_verdicts_ring_latest(const struct lg_scan_ring *ring);
/* Publishes run `seq` of a host-memory ring (its only writer, in seq order): the seqlock that
 * lg_verdicts_ring_read reads. Calls no CUDA function (a host function may call it). */
LG_HIDDEN void lg_verdicts_ring_write(struct lg_scan_ring *ring, uint64_t seq, const lg_verdict_t *v);
LG_HIDDEN void lg_verdicts_after_fork(void);
/* At exit, before CUDA's teardown: waits up to timeout_ns for the runs of every outstanding
 * check to be published (the process leaves without waiting for its GPU work). */
LG_HIDDEN void lg_verdicts_wait_published(uint64_t timeout_ns);
/* After the exit collection: no ring is read again (CUDA's teardown may unmap them), and no
 * hook of any thread looks for verdicts any more. */
LG_HIDDEN void lg_verdicts_close(void);
/* Is any thread's check outstanding? (Takes the queue's lock.) */
LG_HIDDEN bool lg_verdicts_outstanding(void);
extern LG_HIDDEN _Atomic int lg_verdicts_closed;
/* The calling thread's checks not collected yet, and the orphans of exited threads. */
extern LG_HIDDEN LG_TLS int lg_verdicts_mine;
extern LG_HIDDEN _Atomic int lg_verdicts_orphans;
static inline bool lg_verdicts_pending(void) { return lg_verdicts_mine != 0; }
/* The oldest of this thread's checks when it waits for its ring (NULL: it is final, or none is
 * outstanding). Set by verdicts.c under its lock, read here without one: only this thread frees
 * its own checks (the exit collection leaves a live thread's allocated). One pointer, not the
 * ring and seq: the library's static TLS block stays within 128 bytes. */
extern LG_HIDDEN LG_TLS const lg_pending_t *lg_verdicts_wait;
/* Is a verdict of this thread worth collecting now? With none outstanding: one thread-local
 * read. With the oldest not yet published: two more and one load of its ring, no lock, no
 * runtime call. Verdicts are read in launch order, so a newer one waits for the oldest (a
 * synchronizing call reads every one that is there). */
static inline bool lg_verdicts_due(void)
{
    if (LG_LIKELY(lg_verdicts_mine == 0))
        return false;
    if (__atomic_load_n((int *)&lg_verdicts_closed, __ATOMIC_RELAXED))
        return false;
    const lg_pending_t *p = lg_verdicts_wait;
    return !p || __atomic_load_n(p->latest, __ATOMIC_ACQUIRE) >= p->seq;
}
static inline bool lg_verdicts_orphaned(void)
{
    return __atomic_load_n((int *)&lg_verdicts_orphans, __ATOMIC_RELAXED) != 0;
}
/* ---------------------------------------------------------------- captures.c */

/* The captures begun by cudaStreamBeginCapture while the hooks were in place (their graphs take
 * host nodes), by capture id (0 is ignored): recorded by the begin hook after the real call,
 * dropped by the end hook; seen: validate_node.c's test before it captures a host node. */
LG_HIDDEN void lg_captures_begun(unsigned long long id);
LG_HIDDEN void lg_captures_ended(unsigned long long id);
LG_HIDDEN bool lg_captures_seen(unsigned long long id);
/* Recorded captures not ended: the end hook asks the capture id only while some are. */
extern LG_HIDDEN int lg_captures_n_open;
static inline bool lg_captures_open(void) { return __atomic_load_n(&lg_captures_n_open, __ATOMIC_RELAXED) != 0; }
/* ---------------------------------------------------------------- logprobs.c */

/* The raw-logits check of a watched NLL forward (sync mode, spec key `input`): one
 * nll_input_not_log_probs warning per kernel and call site when its input holds values above
 * 0. Never blocks. */
LG_HIDDEN void lg_logprobs_check(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info,
                                 const lg_target_t *t);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_logprobs_after_fork(void);
/* ---------------------------------------------------------------- opaque.c */

/* The state for a kernel no spec matched: LG_KSTATE_GATHER for PyTorch's TensorIterator gather,
 * else LG_KSTATE_UNWATCHED; a compiled (Triton) loss gets its one unchecked_loss_kernel warning
 * here. Once per kernel handle (classify.c). */
LG_HIDDEN int lg_opaque_classify(const char *mangled);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_opaque_after_fork(void);
/* After a masked NLL forward with class weights and a mean: this thread's next gather within a
 * few launches is blocked (label smoothing gathers weight[target] with the original labels). */
struct lg_violation;
LG_HIDDEN void lg_opaque_arm(const struct lg_violation *v);
/* The loss's backward came: no smoothing gather follows any more. */
LG_HIDDEN void lg_opaque_disarm(void);
/* A launch of the gather kernel: blocked (d: SKIP, the pending error says why) when armed. */
LG_HIDDEN void lg_opaque_gather(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info,
                                lg_decision_t *d);

#endif /* LG_CHECKS_H */
