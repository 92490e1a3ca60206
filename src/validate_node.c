/* validate_node.c: the host backend inside a CUDA graph capture. A launch being captured does
 * not run now, and its labels are whatever the buffer holds at each replay (PyTorch copies
 * every batch into the same static target), so the check must be part of the graph:
 *   copy labels -> pinned host buffer     (memcpy node)
 *   host node: scan, publish the verdict of this run in a ring, replace the bad labels
 *   copy host buffer -> device copy       (memcpy node; the loss kernel reads the copy)
 * Each replay thus checks the labels it reads, in stream order, and replay k publishes run k
 * of the ring (the same ring format as the GPU backend's, lg_verdicts_ring_read reads both).
 * The host node calls no CUDA function (CUDA forbids it there): it reads and writes host
 * memory only. The buffers live as long as the process: a graph can be replayed any time.
 *
 * Called by validate.c on the capturing thread with the core's error guard held. Our
 * allocations run in relaxed capture mode, so they never invalidate the application's
 * capture (global mode forbids cudaMalloc on every other thread). The host node runs on
 * whatever thread executes the graph (CUDA's callback thread; the test double's caller).
 * Tested by tests/e2e/test_graphs.sh under the test double, which executes host nodes at
 * replay as CUDA does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/lg_validate.h"
#include "internal.h"

enum { KIND_H2D = 1 };

typedef struct node {
    lg_target_t t; /* geometry of the labels; t.data is not dereferenced here */
    void *host;    /* pinned: the labels' spanned range, element offsets as on the device */
    bool sanitize;
    int64_t replacement;
    int samples;
    uint64_t runs;
    lg_scan_ring_t ring;
} node_t;

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
    int kind;
    if (lg_validate_host_pointer(rt, (const void *)(uintptr_t)t->data, &kind, why, why_len) != 0)
        return -1;
    size_t bytes = (size_t)span * lg_scan_elem_size(t->dtype);
    node_t *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(why, why_len, "out of memory for a graph check");
        return -1;
    }
    n->t = *t;
    n->sanitize = sanitize;
    n->replacement = replacement;
    n->samples = samples;
    void *dev = NULL;
    int mode = lg_runtime_relax_capture(rt);
    int rc = rt->malloc_host(&n->host, bytes ? bytes : 1);
    if (rc == 0 && sanitize)
        rc = rt->malloc_device(&dev, bytes ? bytes : 1);
    lg_runtime_restore_capture(rt, mode);
    if (rc != 0) {
        snprintf(why, why_len, "allocating %zu bytes for a graph check failed (CUDA error %d)", bytes, rc);
        free(n); /* what was allocated stays: rare, small */
        return -1;
    }
    rc = rt->memcpy_async(n->host, (const void *)(uintptr_t)t->data, bytes, kind, stream);
    if (rc == 0)
        rc = rt->launch_host_func(stream, node_run, n);
    if (rc == 0 && sanitize)
        rc = rt->memcpy_async(dev, n->host, bytes, KIND_H2D, stream);
    if (rc != 0) {
        /* The capture may now hold part of the chain; it is the application's capture, so it
         * is left as it is, and the launch runs unchecked. */
        snprintf(why, why_len, "capturing the graph check failed (CUDA error %d)", rc);
        return -1;
    }
    *copy_out = sanitize ? (uint64_t)(uintptr_t)dev : t->data;
    *ring = &n->ring;
    return 0;
}
