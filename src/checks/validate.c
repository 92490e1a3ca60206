/* validate.c: the label scan of one launch, and the one rule for which backend runs it: the
 * GPU backend (validate_gpu.c) while it is active, the host backend (validate_host.c) when it
 * is not or when it hands the call back (no current context on this thread, no module in this
 * context), for labels and range targets (float probabilities) alike. Any other failure of
 * either is the caller's: it warns and lets the launch run.
 * Three calls use that rule: a sync verdict, a masked copy (act.c's mask), and an async check
 * whose verdict verdicts.c collects later (the host backend's published in stream order,
 * validate_defer.c); inside a graph capture the async check is captured
 * (validator kernel, or validate_node.c's host node) and handed to the capture sink the core
 * plugged in (graphs.c's table, which queues one verdict per replay): the checks never call up
 * into the core.
 * A range target (float probabilities, BCE) has no stand-in value: its async check makes no
 * copy and only reports, and inside a capture only the GPU backend takes it (a kernel node).
 * A graph instantiated again gets its checks rebound (lg_validate_rebind) by the backend that
 * captured them, and a check no graph or exec holds any more has its scratch handed back to
 * that backend (lg_validate_retire); both backends read and rewrite a loss launch's target in a
 * graph node with validate_loss.c's helpers.
 * The host backend runs in relaxed capture mode, so that none of its calls invalidates a
 * capture the application runs on another stream or thread.
 *
 * Called by launch.c and act.c on the launching thread, only for watched launches, with the
 * re-entry guard held, so our own CUDA calls are never judged again. All three take the
 * launch's stream as the application passed it, except that a NULL stream of a _ptsz entry
 * point is passed as cudaStreamPerThread. Targets may be strided (ndim 1..3, non-negative
 * strides); copies keep the target's element offsets, so the launch's strides stay valid.
 * n_classes <= 0 is not special: every non-ignored label is then bad, which is what the
 * kernel's own check would say.
 *
 * Tested by tests/unit/test_scan.c (host backend with a memcpy-backed fake runtime) and
 * tests/gpu/test_validator.cu (GPU backend against lg_scan_host, needs a GPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks/checks.h"

static const lg_runtime_t *rt;
static uint64_t ns_total; /* __atomic */
/* Where a captured check goes: graphs.c hands its table in (its constructor, before any launch). */
static lg_validate_capture_sink_t capture_sink;

void lg_validate_set_capture_sink(lg_validate_capture_sink_t sink) { capture_sink = sink; }
/* The runtime of the launch being decided on this thread (its caller's own libcudart, in a
 * process that holds two), else rt. */
static __thread const lg_runtime_t *launch_rt;

const lg_runtime_t *lg_validate_use_runtime(const lg_runtime_t *r)
{
    const lg_runtime_t *prev = launch_rt;
    launch_rt = r;
    return prev;
}

void lg_validate_init(const lg_runtime_t *runtime)
{
    __atomic_store_n(&rt, runtime, __ATOMIC_RELEASE);
    lg_validate_gpu_init();
}

void lg_validate_after_fork_child(void)
{
    lg_validate_gpu_after_fork();
    lg_validate_host_after_fork();
    lg_validate_defer_after_fork();
    lg_verdicts_after_fork();
}

lg_backend_t lg_validate_backend(void) { return lg_validate_gpu_active() ? LG_BACKEND_GPU : LG_BACKEND_HOST; }

uint64_t lg_validate_ns_total(void) { return __atomic_load_n(&ns_total, __ATOMIC_RELAXED); }

static void account(uint64_t t0) { __atomic_fetch_add(&ns_total, lg_now_ns() - t0, __ATOMIC_RELAXED); }

static int check_target(const lg_target_t *t, int64_t *span, char *why, size_t why_len)
{
    if (t->ndim > LG_MAX_TARGET_DIMS || t->dtype < LG_DTYPE_INT64 || t->dtype > LG_DTYPE_BFLOAT16) {
        snprintf(why, why_len, "unsupported target description (ndim %d, dtype %d)", t->ndim, (int)t->dtype);
        return -1;
    }
    *span = lg_scan_span(t);
    if (*span < 0) {
        snprintf(why, why_len, "target has a negative stride; labelguard does not validate such views");
        return -1;
    }
    if (t->data == 0) {
        snprintf(why, why_len, "the label pointer is NULL: the loss kernel was given no labels");
        return -1;
    }
    return 0;
}

/* One call to a backend: what is asked, and what came back. */
typedef struct call {
    const lg_target_t *t;
    void *stream;
    int samples;
    bool want_copy;     /* a sanitized copy, bad labels replaced by `replacement` */
    bool always_copy;   /* host backend: copy even when no label is bad */
    bool allow_capture; /* the stream may be capturing a graph (async only) */
    bool captured;      /* it is: the host backend captures its check (validate_node.c) */
    bool sanitize;      /* captured: the launch will read the copy */
    int64_t replacement;
    lg_verdict_t *v;  /* host backend's verdict */
    uint64_t copy;    /* host backend's copy */
    lg_gpu_run_t run; /* GPU backend's enqueued run */
} call_t;

static int host_call(const lg_runtime_t *r, call_t *c, int64_t span, char *why, size_t why_len);

/* The fallback rule. Returns 1 when the GPU backend took the call (c->run), 0 when the host
 * backend did (c->v, c->copy), -1 with why on failure. */
static int dispatch(call_t *c, char *why, size_t why_len)
{
    int64_t span;
    if (check_target(c->t, &span, why, why_len) != 0)
        return -1;
    const lg_runtime_t *r = launch_rt ? launch_rt : __atomic_load_n(&rt, __ATOMIC_ACQUIRE);
    if (lg_validate_gpu_active()) {
        bool use_host = false;
        if (lg_validate_gpu_launch(r, c->t, c->stream, span, c->samples, c->want_copy, c->replacement, c->allow_capture,
                                   &c->run, &use_host, why, why_len) == 0)
            return 1;
        if (!use_host)
            return -1;
    }
    /* The host backend's allocations, copies and waits are "unsafe" calls while any global-mode
     * capture runs in the process: in relaxed mode they leave the application's capture valid. */
    int mode = lg_runtime_relax_capture(r);
    int rc = host_call(r, c, span, why, why_len);
    lg_runtime_restore_capture(r, mode);
    return rc;
}

static int host_call(const lg_runtime_t *r, call_t *c, int64_t span, char *why, size_t why_len)
{
    if (c->captured && lg_scan_is_float(c->t->dtype)) {
        /* Only the GPU validator checks a captured range target (a kernel node): here it would
         * take a host node and a copy to host memory at every replay. */
        snprintf(why, why_len,
                 "a range check (binary_cross_entropy's probabilities) inside a capture runs on the GPU validator only, "
                 "and the GPU backend is not serving this launch");
        return -1;
    }
    if (c->captured) {
        const struct lg_scan_ring *ring = NULL;
        if (lg_validate_node_capture(r, c->t, c->stream, span, c->sanitize, c->replacement, c->samples, &c->copy, &ring,
                                     why, why_len) != 0)
            return -1;
        c->run.ring = ring;
        c->run.captured = true;
        return 0;
    }
    if (!c->want_copy)
        return lg_validate_host_scan(r, c->t, c->stream, span, c->samples, c->v, why, why_len);
    return lg_validate_host_sanitize(r, c->t, c->stream, span, c->replacement, c->samples, c->always_copy, c->v,
                                     &c->copy, why, why_len);
}

int lg_validate_sync(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, char *why, size_t why_len)
{
    uint64_t t0 = lg_now_ns();
    lg_scan_clear(v);
    int rc = 0;
    if (t->count > 0) {
        call_t c = {.t = t, .stream = stream, .samples = samples, .v = v};
        rc = dispatch(&c, why, why_len);
        if (rc == 1) {
            rc = lg_validate_gpu_wait(stream, why, why_len);
            if (rc == 0 && lg_validate_gpu_ring_read(c.run.s, c.run.seq, v) != 1) {
                snprintf(why, why_len,
                         "the validator's verdict was not published (concurrent launches on one stream?)");
                rc = -1;
            }
        }
    }
    account(t0);
    return rc < 0 ? -1 : 0;
}

uint64_t lg_validate_masked_copy(const lg_target_t *t, void *stream, int64_t replacement, char *why, size_t why_len)
{
    uint64_t t0 = lg_now_ns();
    uint64_t out = t->data;
    if (t->count > 0) {
        out = 0;
        lg_verdict_t *v = malloc(sizeof *v);
        if (!v) {
            snprintf(why, why_len, "out of memory");
        } else {
            /* No wait on the GPU backend: the loss kernel that reads the copy is enqueued after
             * it on the same stream. */
            call_t c = {
                .t = t, .stream = stream, .want_copy = true, .always_copy = true, .replacement = replacement, .v = v};
            int rc = dispatch(&c, why, why_len);
            out = rc == 1 ? c.run.copy : rc == 0 ? c.copy : 0;
            free(v);
        }
    }
    account(t0);
    return out;
}

int lg_validate_async(const lg_target_t *t, void *stream, int64_t replacement, int samples,
                      struct lg_kernel_info *cookie, const lg_capture_t *capture, lg_site_t *site, uint64_t *sanitized,
                      char *why, size_t why_len)
{
    uint64_t t0 = lg_now_ns();
    int rc = -1;
    lg_pending_t *p = NULL;
    *sanitized = t->data;
    if (t->count <= 0) {
        rc = capture ? -1 : 0; /* nothing to check; a capture keeps no entry for it */
        if (capture)
            snprintf(why, why_len, "no labels");
        goto out;
    }
    if (!capture && !(p = calloc(1, sizeof *p))) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    /* A range target (float probabilities) has no stand-in value: its check only reports, the
     * launch reads its own operands, and its verdict is late (lg_pending_t.as_is). */
    bool report_only = lg_scan_is_float(t->dtype);
    call_t c = {.t = t,
                .stream = stream,
                .samples = samples,
                .want_copy = !report_only,
                .allow_capture = capture != NULL,
                .captured = capture != NULL,
                .sanitize = !report_only && (!capture || capture->sanitize),
                .replacement = replacement,
                .v = p ? &p->verdict : NULL}; /* captured: each replay publishes its own */
    rc = dispatch(&c, why, why_len);
    if (rc < 0)
        goto out;
    uint64_t copy = report_only ? t->data : rc == 1 ? c.run.copy : c.copy;
    if (capture) {
        if (rc == 1 && !c.run.captured) {
            snprintf(why, why_len, "the stream stopped capturing");
            rc = -1;
            goto out;
        }
        if (!capture_sink) {
            snprintf(why, why_len, "no table of captured checks in this process");
            rc = -1;
            goto out;
        }
        rc = capture_sink(capture->id, cookie, stream, t, c.run.ring, capture->sanitize ? copy : 0, site, why, why_len);
        if (rc == 0 && capture->sanitize)
            *sanitized = copy;
        goto out;
    }
    p->cookie = cookie;
    p->stream = stream;
    p->target = *t;
    p->as_is = report_only;
    p->site = lg_site_hold(site);
    if (rc == 1) {
        p->ring = c.run.ring;
        p->seq = c.run.seq;
    } else {
        /* The host backend's verdict is due when the stream reaches the check, as the GPU's. */
        const lg_runtime_t *r = launch_rt ? launch_rt : __atomic_load_n(&rt, __ATOMIC_ACQUIRE);
        int mode = lg_runtime_relax_capture(r);
        lg_validate_defer(r, stream, &p->verdict, &p->ring, &p->seq);
        lg_runtime_restore_capture(r, mode);
    }
    *sanitized = copy; /* host backend, nothing bad: the labels themselves */
    rc = 0;
    if (lg_verdicts_add(p) != 0) {
        snprintf(why, why_len, "out of memory");
        rc = -1; /* the copy was made, but the caller must not count on a verdict */
    } else {
        p = NULL;
    }
out:
    if (p)
        lg_site_drop(p->site);
    free(p);
    account(t0);
    return rc;
}

/* Each backend recognises its own rings and answers 1 for a ring it does not know. */
void lg_validate_retire(const struct lg_scan_ring *ring, uint64_t runs)
{
    if (ring && lg_validate_node_retire(ring, runs) == 1)
        (void)lg_validate_gpu_graph_retire(ring, runs);
}

/* The check is one backend's or the other's: each recognises its own ring and answers 1 for
 * a ring it does not know. */
int lg_validate_rebind(void *exec, void *graph, const struct lg_scan_ring *ring, const struct lg_kernel_info *info,
                       uint64_t reads, const struct lg_scan_ring **own, char *why, size_t why_len)
{
    const lg_runtime_t *r = launch_rt ? launch_rt : __atomic_load_n(&rt, __ATOMIC_ACQUIRE);
    const lg_spec_t *spec = info ? info->spec : NULL;
    int rc = lg_validate_node_rebind(r, exec, graph, ring, info, own, why, why_len);
    if (rc == 1)
        rc = lg_validate_gpu_graph_rebind(exec, graph, ring, spec, reads, own, why, why_len);
    if (rc == 1) {
        snprintf(why, why_len, "the check's scratch is neither backend's");
        rc = -1;
    }
    return rc;
}

/* A few bytes of device (or device-readable) memory, copied on `stream` and waited for, in
 * relaxed capture mode: the copy and the wait are "unsafe" calls while another stream captures
 * in global mode, and relaxed mode leaves that capture valid (this stream must not capture). */
int lg_validate_read_bytes(const lg_runtime_t *rt, uint64_t ptr, size_t n, void *stream, void *out, char *why,
                           size_t why_len)
{
    if (!rt || !rt->memcpy_async || !rt->stream_synchronize) {
        snprintf(why, why_len, "the CUDA runtime lacks cudaMemcpyAsync or cudaStreamSynchronize");
        return -1;
    }
    /* Through the thread's pinned slot where there is one: no staging, no pointer query. */
    int pinned = lg_validate_defer_read(rt, stream, ptr, n, out);
    if (pinned <= 0) {
        if (pinned < 0)
            snprintf(why, why_len, "the copy failed");
        return pinned;
    }
    int kind;
    if (lg_validate_host_pointer(rt, (const void *)(uintptr_t)ptr, &kind, why, why_len) != 0)
        return -1;
    int mode = lg_runtime_relax_capture(rt);
    int rc = rt->memcpy_async(out, (const void *)(uintptr_t)ptr, n, kind, stream);
    if (rc == 0)
        rc = rt->stream_synchronize(stream);
    lg_runtime_restore_capture(rt, mode);
    if (rc != 0) {
        snprintf(why, why_len, "the copy failed (CUDA error %d)", rc);
        return -1;
    }
    return 0;
}
