/* validate_node.c: the host backend inside a CUDA graph capture. A launch being captured does
 * not run now, and its labels are whatever the buffer holds at each replay (PyTorch copies
 * every batch into the same static target), so the check must be part of the graph:
 *   copy labels -> pinned host buffer     (memcpy node)
 *   host node: scan, publish the verdict of this run in a ring, replace the bad labels
 *   copy host buffer -> device copy       (memcpy node; the loss kernel reads the copy)
 * Each replay thus checks the labels it reads, in stream order, and replay k publishes run k
 * of the ring (the same ring format as the GPU backend's, lg_verdicts_ring_read reads both).
 * The host node calls no CUDA function (CUDA forbids it there): it reads and writes host
 * memory only. A graph can be replayed any time, so a node's buffers and ring live as long as
 * a graph or exec holding it does: when graphs.c finds that none does any more
 * (lg_validate_node_retire, after cudaGraphDestroy and cudaGraphExecDestroy) it says how many
 * replays were queued, and once the ring shows that many runs the node is taken by the next
 * check captured with buffers that fit (never freed: cudaFree and cudaFreeHost synchronize
 * the device, and a capture may be running). Its ring keeps counting, so a verdict still
 * queued from its last graph is read from its own run; graphs.c numbers the new check's
 * replays from the ring's latest run. cudagraph trees capture a new graph for every new shape
 * and destroy the old ones: the nodes are reused, and memory stays bounded.
 *
 * A graph instantiated twice: the second exec's copies of these nodes (and of the loss launch
 * reading the sanitized copy) are pointed at fresh buffers and a ring of their own
 * (lg_validate_node_rebind, called by graphs.c at instantiate), with
 * cudaGraphExecHostNodeSetParams, cudaGraphExecMemcpyNodeSetParams1D and
 * cudaGraphExecKernelNodeSetParams: the exec's nodes change, not the graph's nor another
 * exec's. The nodes are found by what they hold (this check's host node, copies to and from its
 * buffer, the one node of the loss kernel whose target is its sanitized copy: only that
 * kernel's arguments are read, as another kernel may have fewer parameters); on any failure
 * the exec is put back as instantiated and graphs.c warns that its scratch is shared.
 *
 * Only a capture that captures.c saw begin gets these nodes: a conditional node's body
 * (cudaStreamBeginCaptureToGraph) accepts no host node, and one there would invalidate the
 * application's capture; such a launch runs unchecked (capture_unchecked).
 *
 * Called by validate.c on the capturing thread with the core's error guard held. Our
 * allocations run in relaxed capture mode, so they never invalidate the application's
 * capture (global mode forbids cudaMalloc on every other thread). The host node runs on
 * whatever thread executes the graph (CUDA's callback thread; the test double's caller).
 * Tested by tests/e2e/test_graphs.sh, test_graph_execs.sh and test_graph_cond.sh under the test
 * double, which executes host nodes at replay and refuses them in conditional bodies, as CUDA does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lg_validate.h"
#include "checks/checks.h"

enum { KIND_H2D = 1 };

typedef struct node {
    lg_target_t t; /* geometry of the labels; t.data is not dereferenced here */
    void *host;    /* pinned: the labels' spanned range, element offsets as on the device */
    bool sanitize;
    int64_t replacement;
    int samples;
    uint64_t runs;
    lg_scan_ring_t ring;
    uint64_t src; /* what the first copy reads (the labels) */
    int kind;     /* that copy's cudaMemcpyKind */
    void *dev;    /* the sanitized copy the loss reads when `sanitize`; NULL when never made */
    size_t bytes;
    size_t cap;        /* bytes `host` (and `dev`) hold: a power of two, so that reuse fits */
    uint64_t due;      /* retired: the runs its graphs queued; reusable once ring.latest reaches it */
    int retired;       /* __atomic: 1 when no graph or exec holds it; 0 in use (or being taken) */
    struct node *next; /* every check's node, for lg_validate_node_rebind */
} node_t;

/* Every check's node, newest first. Nodes are never freed, so the list is only ever pushed to:
 * lock-free, hence safe in a child forked while another thread pushed. */
static node_t *nodes;

/* The buffer size a node of `bytes` gets: rounded up to a power of two (at least 256), so that
 * a retired node fits a later check of a similar size. */
static size_t node_cap(size_t bytes)
{
    size_t c = 256;
    while (c < bytes && c < ((size_t)1 << 62))
        c *= 2;
    return c;
}

/* A retired node whose graphs' replays have all run, with buffers for `bytes` (and a device
 * copy when `sanitize`), taken for a new check; NULL when none. Taking is one compare-and-swap
 * of `retired`, so two capturing threads never take the same node; what a node holds is read
 * again once it is taken, as it may have been taken and retired again meanwhile. */
static node_t *reuse(size_t bytes, bool sanitize)
{
    for (node_t *n = __atomic_load_n(&nodes, __ATOMIC_ACQUIRE); n; n = n->next) {
        int one = 1;
        if (__atomic_load_n(&n->retired, __ATOMIC_ACQUIRE) != 1 ||
            !__atomic_compare_exchange_n(&n->retired, &one, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        if (n->cap >= bytes && (n->dev || !sanitize) && __atomic_load_n(&n->ring.latest, __ATOMIC_ACQUIRE) >= n->due)
            return n;
        __atomic_store_n(&n->retired, 1, __ATOMIC_RELEASE); /* not this one: back */
    }
    return NULL;
}

/* Gives up a node taken by reuse() that no graph got: reusable at once, its runs unchanged. */
static void put_back(node_t *n)
{
    n->due = __atomic_load_n(&n->ring.latest, __ATOMIC_ACQUIRE);
    __atomic_store_n(&n->retired, 1, __ATOMIC_RELEASE);
}

/* A new node for `bytes` with its buffers (a device copy when `sanitize`), or NULL with why. */
static node_t *node_new(const lg_runtime_t *rt, size_t bytes, bool sanitize, char *why, size_t why_len)
{
    node_t *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(why, why_len, "out of memory for a graph check");
        return NULL;
    }
    n->cap = node_cap(bytes);
    int mode = lg_runtime_relax_capture(rt);
    int rc = rt->malloc_host(&n->host, n->cap);
    if (rc == 0 && sanitize)
        rc = rt->malloc_device(&n->dev, n->cap);
    lg_runtime_restore_capture(rt, mode);
    if (rc != 0) {
        snprintf(why, why_len, "allocating %zu bytes for a graph check failed (CUDA error %d)", n->cap, rc);
        free(n); /* what was allocated stays: rare, small */
        return NULL;
    }
    return n;
}

int lg_validate_node_retire(const struct lg_scan_ring *ring, uint64_t runs)
{
    for (node_t *n = __atomic_load_n(&nodes, __ATOMIC_ACQUIRE); n; n = n->next)
        if (&n->ring == ring) {
            n->due = runs;
            __atomic_store_n(&n->retired, 1, __ATOMIC_RELEASE);
            return 0;
        }
    return 1;
}

static void push(node_t *n)
{
    n->next = __atomic_load_n(&nodes, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&nodes, &n->next, n, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

/* The host node. Runs once per replay; nothing else writes this node's ring. */
static void node_run(void *user)
{
    node_t *n = user;
    lg_verdict_t *v = malloc(sizeof *v);
    if (!v)
        return; /* the run is never published: its replay is reported as lost */
    lg_scan_host(&n->t, n->host, n->samples, v);
    if (n->sanitize && v->bad_count)
        lg_validate_host_replace(&n->t, n->host, n->replacement);
    uint64_t seq = ++n->runs;
    lg_scan_ring_entry_t *e = &n->ring.entries[seq % LG_RING_SLOTS];
    __atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy((void *)&e->verdict, v, sizeof *v);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&n->ring.latest, seq, __ATOMIC_RELEASE);
    free(v);
}

int lg_validate_node_capture(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span, bool sanitize,
                             int64_t replacement, int samples, uint64_t *copy_out, const struct lg_scan_ring **ring,
                             char *why, size_t why_len)
{
    if (!rt || !rt->memcpy_async || !rt->launch_host_func || !rt->malloc_host || !rt->malloc_device) {
        snprintf(why, why_len, "the CUDA runtime lacks what a graph check needs (cudaLaunchHostFunc, copies)");
        return -1;
    }
    /* Only a graph whose capture began under our hooks is known to take a host node
     * (captures.c): a conditional node's body does not, and one there would invalidate the
     * application's capture. */
    unsigned long long id = 0;
    if (lg_runtime_capture_status(rt, stream, &id) <= 0 || !lg_captures_seen(id)) {
        snprintf(why, why_len,
                 "the capture captures into an existing graph (cudaStreamBeginCaptureToGraph, e.g. a torch.cond or "
                 "while_loop body: a conditional node's body, where CUDA accepts no host node) or began before "
                 "labelguard armed, and this check would need a host node there");
        return -1;
    }
    int kind;
    if (lg_validate_host_pointer(rt, (const void *)(uintptr_t)t->data, &kind, why, why_len) != 0)
        return -1;
    size_t bytes = (size_t)span * lg_scan_elem_size(t->dtype);
    node_t *n = reuse(bytes, sanitize);
    bool fresh = !n;
    if (fresh && !(n = node_new(rt, bytes, sanitize, why, why_len)))
        return -1;
    /* A reused node's replays have all run: nothing reads these fields until this capture's
     * graph replays. */
    n->t = *t;
    n->sanitize = sanitize;
    n->replacement = replacement;
    n->samples = samples;
    void *dev = sanitize ? n->dev : NULL;
    int rc = rt->memcpy_async(n->host, (const void *)(uintptr_t)t->data, bytes, kind, stream);
    if (rc == 0)
        rc = rt->launch_host_func(stream, node_run, n);
    if (rc == 0 && sanitize)
        rc = rt->memcpy_async(dev, n->host, bytes, KIND_H2D, stream);
    if (rc != 0) {
        /* The capture may now hold part of the chain; it is the application's capture, so it
         * is left as it is, and the launch runs unchecked. The node is not given back: the
         * graph, if the application still instantiates it, may run it. */
        snprintf(why, why_len, "capturing the graph check failed (CUDA error %d)", rc);
        return -1;
    }
    n->src = t->data;
    n->kind = kind;
    n->bytes = bytes;
    if (fresh)
        push(n);
    *copy_out = sanitize ? (uint64_t)(uintptr_t)dev : t->data;
    *ring = &n->ring;
    return 0;
}

/* CUDA's parameter structs (driver_types.h), as far as read here: stable since CUDA 10. */
enum { NODE_KERNEL = 0, NODE_MEMCPY = 1, NODE_HOST = 3 };
/* found_t.type of the copy of the labels into the host buffer (the other copy: NODE_MEMCPY). */
enum { FOUND_LABELS_COPY = 100 };
typedef struct {
    void (*fn)(void *);
    void *user;
} host_params_t;
typedef struct {
    unsigned x, y, z;
} dim3_t;
typedef struct {
    void *func;
    dim3_t grid, block;
    unsigned shm;
    void **args;
    void **extra;
} kernel_params_t;
typedef struct {
    size_t x, y, z;
} triple_t;
typedef struct {
    void *ptr;
    size_t pitch, xsize, ysize;
} pitched_t;
typedef struct {
    void *src_array;
    triple_t src_pos;
    pitched_t src;
    void *dst_array;
    triple_t dst_pos;
    pitched_t dst;
    triple_t extent;
    int kind;
} memcpy3d_t;

/* One of the check's nodes in the graph, and what the exec had in it at instantiate. */
typedef struct {
    void *node;
    int type;
    kernel_params_t kp; /* kernel: the loss launch reading n->dev */
} found_t;

/* Points the exec's copy of found node f at n2's scratch (back = false), or back at n's. */
static int point(const lg_runtime_t *rt, void *exec, const found_t *f, const node_t *n, const node_t *n2,
                 const lg_spec_t *spec, bool back)
{
    const node_t *to = back ? n : n2;
    if (f->type == NODE_HOST) {
        host_params_t hp = {node_run, (void *)to};
        return rt->graph_exec_host_node_set_params(exec, f->node, &hp);
    }
    if (f->type == FOUND_LABELS_COPY)
        return rt->graph_exec_memcpy_node_set_params_1d(exec, f->node, to->host, (const void *)(uintptr_t)n->src,
                                                        n->bytes, n->kind);
    if (f->type == NODE_MEMCPY) /* host -> sanitized copy */
        return rt->graph_exec_memcpy_node_set_params_1d(exec, f->node, to->dev, to->host, n->bytes, KIND_H2D);
    /* The loss kernel: its target pointer, in a copy of the one parameter that holds it. */
    unsigned char value[LG_RETARGET_MAX];
    void *args[LG_MAX_PARAMS];
    if (lg_validate_loss_retarget(spec, f->kp.args, args, value, (uint64_t)(uintptr_t)to->dev) != 0)
        return -1;
    kernel_params_t kp = f->kp;
    kp.args = args;
    return rt->graph_exec_kernel_node_set_params(exec, f->node, &kp);
}

int lg_validate_node_rebind(const lg_runtime_t *rt, void *exec, void *graph, const struct lg_scan_ring *ring,
                            const struct lg_kernel_info *info, const struct lg_scan_ring **own, char *why,
                            size_t why_len)
{
    const lg_spec_t *spec = info ? info->spec : NULL;
    node_t *n;
    for (n = __atomic_load_n(&nodes, __ATOMIC_ACQUIRE); n && &n->ring != ring; n = n->next)
        ;
    if (!n)
        return 1; /* not a host-node check: the GPU backend's, if anyone's */
    if (!rt || !rt->graph_get_nodes || !rt->graph_node_get_type || !rt->graph_host_node_get_params ||
        !rt->graph_memcpy_node_get_params || !rt->graph_kernel_node_get_params ||
        !rt->graph_exec_host_node_set_params || !rt->graph_exec_memcpy_node_set_params_1d ||
        !rt->graph_exec_kernel_node_set_params) {
        snprintf(why, why_len, "the CUDA runtime lacks the graph node calls (cudaGraphExec*NodeSetParams)");
        return -1;
    }
    if (n->sanitize && lg_validate_loss_param(spec) < 0) {
        snprintf(why, why_len, "the loss launch's target parameter cannot be rewritten");
        return -1;
    }
    size_t count = 0;
    void **all = NULL;
    int rc = rt->graph_get_nodes(graph, NULL, &count);
    if (rc == 0 && count > LG_REBIND_MAX_NODES)
        rc = -1;
    if (rc == 0 && count && !(all = malloc(count * sizeof *all)))
        rc = -1;
    if (rc == 0 && count)
        rc = rt->graph_get_nodes(graph, all, &count);
    /* The check's nodes: its two copies, its host node, and the loss kernel reading the copy. */
    found_t f[8];
    int nf = 0, want = n->sanitize ? 4 : 2, kernels = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        int type = -1;
        if (rt->graph_node_get_type(all[i], &type) != 0)
            continue;
        found_t g = {.node = all[i], .type = type};
        bool ours = false;
        if (type == NODE_HOST) {
            host_params_t hp;
            ours = rt->graph_host_node_get_params(all[i], &hp) == 0 && hp.fn == node_run && hp.user == n;
        } else if (type == NODE_MEMCPY) {
            memcpy3d_t mp;
            memset(&mp, 0, sizeof mp);
            if (rt->graph_memcpy_node_get_params(all[i], &mp) == 0) {
                if (mp.dst.ptr == n->host)
                    ours = true, g.type = FOUND_LABELS_COPY;
                else
                    ours = n->sanitize && mp.src.ptr == n->host;
            }
        } else if (type == NODE_KERNEL && n->sanitize) {
            /* Only the loss kernel's own arguments are read where spec puts the target: another
             * kernel may have fewer parameters than that. */
            uint64_t at = 0;
            if (rt->graph_kernel_node_get_params(all[i], &g.kp) == 0 && lg_validate_loss_is_kernel(info, g.kp.func) &&
                lg_validate_loss_target(spec, g.kp.args, &at) == 0) {
                ours = at == (uint64_t)(uintptr_t)n->dev;
                kernels += ours;
            }
        }
        if (ours && nf < 8)
            f[nf++] = g;
        else if (ours)
            nf++;
    }
    free(all);
    /* want: two copies and the host node (one copy when not sanitizing), plus one loss launch. */
    if (rc != 0 || nf != (n->sanitize ? 3 : 2) + kernels || (n->sanitize && kernels != 1)) {
        snprintf(why, why_len, "the graph's check nodes were not found as captured (%d of %d)", nf, want);
        return -1;
    }
    node_t *n2 = reuse(n->bytes, n->sanitize);
    bool fresh = !n2;
    if (fresh && !(n2 = node_new(rt, n->bytes, n->sanitize, why, why_len)))
        return -1;
    /* The check as captured, in n2's own buffers and ring. */
    n2->t = n->t;
    n2->sanitize = n->sanitize;
    n2->replacement = n->replacement;
    n2->samples = n->samples;
    n2->src = n->src;
    n2->kind = n->kind;
    n2->bytes = n->bytes;
    int done = 0;
    while (rc == 0 && done < nf && (rc = point(rt, exec, &f[done], n, n2, spec, false)) == 0)
        done++;
    if (rc != 0) {
        /* The exec goes back to the graph's scratch, as it was instantiated. */
        while (done-- > 0)
            point(rt, exec, &f[done], n, n2, spec, true);
        snprintf(why, why_len, "pointing the exec's check at scratch of its own failed (CUDA error %d)", rc);
        if (fresh)
            push(n2);
        put_back(n2); /* no exec runs it */
        return -1;
    }
    if (fresh)
        push(n2);
    *own = &n2->ring;
    return 0;
}
