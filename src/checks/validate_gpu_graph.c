/* validate_gpu_graph.c: a captured check in a CUDA graph instantiated more than once, on the
 * GPU backend. A second exec of a graph holding a validator node gets scratch of its own: the
 * exec's copies of the validator node and of the loss launch reading its sanitized copy are
 * rewritten with cuGraphExecKernelNodeSetParams, so two execs replaying at once publish apart.
 * When no graph or exec holds captured scratch any more, it is retired, for
 * validate_scratch.c to hand to the next captured launch once its ring has published the runs
 * queued on it.
 *
 * Called by validate.c (lg_validate_rebind at cudaGraphInstantiate, lg_validate_retire at
 * cudaGraphDestroy and cudaGraphExecDestroy, from graphs.c); takes the GPU backend's lock
 * (validate_scratch.c) and runs its driver calls in relaxed capture mode. Tested by
 * tests/unit/test_gpu_driver.c on a fake graph (a second exec's rebinding, its failures, and
 * captured scratch reused over 10,000 capture / instantiate / replay / destroy cycles).
 */
#include "lg_validate.h"
#include "checks/checks.h"
#include "checks/validate_gpu.h"

#include <cuda.h> /* driver types only: the functions come from dlsym */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lg_scratch scratch_t;

/* The graph's node that runs the validator writing scratch s: a kernel node of one of m's
 * functions whose parameter block names s's accumulators and ring. 1 and *node, *kp, *p filled
 * when exactly one is; 0 when none; -1 with why on a driver failure or several. */
static int find_validator_node(CUgraph graph, const lg_module_t *m, const scratch_t *s, CUgraphNode *node,
                               CUDA_KERNEL_NODE_PARAMS_v2 *kp, lg_scan_params_t *p, char *why, size_t why_len)
{
    size_t count = 0;
    CUresult r = lg_validate_module_drv.graph_get_nodes(graph, NULL, &count);
    if (r == CUDA_SUCCESS && count > LG_REBIND_MAX_NODES) {
        snprintf(why, why_len, "the graph has %zu nodes, more than the %d searched for the check's", count,
                 LG_REBIND_MAX_NODES);
        return -1;
    }
    CUgraphNode *all = count ? malloc(count * sizeof *all) : NULL;
    if (r == CUDA_SUCCESS && count && !all) {
        snprintf(why, why_len, "out of memory for the graph's node list");
        return -1;
    }
    if (r == CUDA_SUCCESS && count)
        r = lg_validate_module_drv.graph_get_nodes(graph, all, &count);
    if (r != CUDA_SUCCESS) {
        free(all);
        snprintf(why, why_len, "listing the graph's nodes failed: %s", lg_validate_module_error(r));
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        CUDA_KERNEL_NODE_PARAMS_v2 k;
        memset(&k, 0, sizeof k);
        if (lg_validate_module_drv.graph_node_get_type(all[i], &type) != CUDA_SUCCESS ||
            type != CU_GRAPH_NODE_TYPE_KERNEL ||
            lg_validate_module_drv.graph_kernel_node_get_params(all[i], &k) != CUDA_SUCCESS || !k.kernelParams ||
            !k.kernelParams[0])
            continue;
        bool ours = false;
        for (size_t f = 0; f < sizeof m->fn / sizeof m->fn[0] && !ours; f++)
            ours = k.func && k.func == m->fn[f];
        if (!ours)
            continue; /* only our own kernels' parameter block is known to be an lg_scan_params_t */
        lg_scan_params_t q;
        memcpy(&q, k.kernelParams[0], sizeof q);
        if (q.ring != s->ring_dev || q.state != s->state)
            continue;
        if (found++ == 0) {
            *node = all[i];
            *kp = k;
            *p = q;
        }
    }
    free(all);
    if (found > 1) {
        snprintf(why, why_len, "the check's validator node is in the graph %d times", found);
        return -1;
    }
    return found;
}

/* Does kernel function f have spec's target parameter, of spec's size? Asked where the driver
 * can say (CUDA 12.4+), so that a node that is not the loss launch is not read past its
 * parameters; else the node's place in the graph has to do. */
static bool has_target_param(CUfunction f, const lg_spec_t *spec)
{
    int param = lg_validate_loss_param(spec);
    size_t off = 0, size = 0;
    if (param < 0)
        return false;
    if (!lg_validate_module_drv.func_get_param_info || !f)
        return true;
    CUresult r = lg_validate_module_drv.func_get_param_info(f, (size_t)param, &off, &size);
    return r != CUDA_SUCCESS ? r == CUDA_ERROR_NOT_SUPPORTED : size == (size_t)spec->param_sizes[param];
}

/* The loss launch reading the sanitized copy at `reads`: the one kernel node that depends on
 * the validator node (the launch was enqueued right after it on the captured stream) and
 * holds `reads` where spec puts its target. 0 and *node, *kp filled, or -1 with why. */
static int find_loss_node(CUgraphNode validator, const lg_spec_t *spec, uint64_t reads, CUgraphNode *node,
                          CUDA_KERNEL_NODE_PARAMS_v2 *kp, char *why, size_t why_len)
{
    CUgraphNode deps[8];
    size_t nd = sizeof deps / sizeof *deps;
    CUresult r = lg_validate_module_drv.graph_node_get_dependent_nodes(validator, deps, &nd);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "asking what follows the validator node failed: %s", lg_validate_module_error(r));
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < nd && i < sizeof deps / sizeof *deps; i++) {
        CUgraphNodeType type;
        CUDA_KERNEL_NODE_PARAMS_v2 k;
        memset(&k, 0, sizeof k);
        uint64_t at = 0;
        if (deps[i] && lg_validate_module_drv.graph_node_get_type(deps[i], &type) == CUDA_SUCCESS &&
            type == CU_GRAPH_NODE_TYPE_KERNEL &&
            lg_validate_module_drv.graph_kernel_node_get_params(deps[i], &k) == CUDA_SUCCESS &&
            has_target_param(k.func, spec) && lg_validate_loss_target(spec, k.kernelParams, &at) == 0 && at == reads &&
            found++ == 0) {
            *node = deps[i];
            *kp = k;
        }
    }
    if (found != 1) {
        snprintf(why, why_len, "the loss launch reading the check's sanitized copy was not found after it (%d found)",
                 found);
        return -1;
    }
    return 0;
}

/* Caller holds the lock; our driver calls run in relaxed capture mode (lg_validate_gpu_graph_rebind). */
static int rebind_locked(CUgraphExec exec, CUgraph graph, scratch_t *s, const lg_spec_t *spec, uint64_t reads,
                         const struct lg_scan_ring **own, char *why, size_t why_len)
{
    if (!lg_validate_module_drv.graph_get_nodes || !lg_validate_module_drv.graph_node_get_type ||
        !lg_validate_module_drv.graph_node_get_dependent_nodes ||
        !lg_validate_module_drv.graph_kernel_node_get_params ||
        !lg_validate_module_drv.graph_exec_kernel_node_set_params) {
        snprintf(why, why_len, "the CUDA driver lacks the graph node calls (cuGraphExecKernelNodeSetParams)");
        return -1;
    }
    CUcontext ctx = NULL;
    if (lg_validate_module_drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != s->ctx) {
        snprintf(why, why_len, "the exec is made in another CUDA context than the one the check was captured in");
        return -1;
    }
    lg_module_t *m = lg_validate_module_for(ctx, why, why_len);
    if (!m)
        return -1;
    CUgraphNode vnode = NULL, lnode = NULL;
    CUDA_KERNEL_NODE_PARAMS_v2 vkp, lkp;
    lg_scan_params_t p;
    int rc = find_validator_node(graph, m, s, &vnode, &vkp, &p, why, why_len);
    if (rc == 0)
        snprintf(why, why_len, "the graph's validator node was not found as captured");
    if (rc != 1)
        return -1;
    if (reads && find_loss_node(vnode, spec, reads, &lnode, &lkp, why, why_len) != 0)
        return -1;
    scratch_t *s2 =
        lg_validate_scratch_for(m, s->stream, true, s->cand_samples, p.copy ? s->copy_bytes : 0, why, why_len);
    if (!s2)
        return -1;
    if (p.copy && s2->copy_bytes < s->copy_bytes &&
        lg_validate_scratch_grow_copy(s2, s->copy_bytes, why, why_len) != 0) {
        s2->retired = true; /* unused: the next captured check may take it */
        s2->due = __atomic_load_n(&s2->ring->latest, __ATOMIC_ACQUIRE);
        return -1;
    }
    lg_scan_params_t p2 = p;
    p2.state = s2->state;
    p2.cand = s2->cand;
    p2.cand_count = s2->cand_count;
    p2.ring = s2->ring_dev;
    p2.copy = p.copy ? s2->copy : 0;
    void *vargs[] = {&p2};
    CUDA_KERNEL_NODE_PARAMS_v2 v2 = vkp;
    v2.kernelParams = vargs;
    v2.extra = NULL;
    CUresult r = lg_validate_module_drv.graph_exec_kernel_node_set_params(exec, vnode, &v2);
    if (r == CUDA_SUCCESS && reads) {
        void *largs[LG_MAX_PARAMS];
        unsigned char value[LG_RETARGET_MAX];
        CUDA_KERNEL_NODE_PARAMS_v2 l2 = lkp;
        if (lg_validate_loss_retarget(spec, lkp.kernelParams, largs, value, s2->copy) != 0) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            l2.kernelParams = largs;
            l2.extra = NULL;
            r = lg_validate_module_drv.graph_exec_kernel_node_set_params(exec, lnode, &l2);
        }
        if (r != CUDA_SUCCESS) /* the exec goes back to the graph's scratch, as it was instantiated */
            (void)lg_validate_module_drv.graph_exec_kernel_node_set_params(exec, vnode, &vkp);
    }
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "pointing the exec's validator at scratch of its own failed: %s",
                 lg_validate_module_error(r));
        s2->retired = true; /* the exec is back on the graph's scratch: s2 is free again */
        s2->due = __atomic_load_n(&s2->ring->latest, __ATOMIC_ACQUIRE);
        return -1;
    }
    *own = s2->ring;
    return 0;
}

int lg_validate_gpu_graph_retire(const struct lg_scan_ring *ring, uint64_t runs)
{
    int rc = 1;
    lg_validate_scratch_lock();
    scratch_t *s = lg_validate_scratch_captured(ring);
    if (s) {
        s->due = runs;
        s->retired = true;
        rc = 0;
    }
    lg_validate_scratch_unlock();
    return rc;
}

int lg_validate_gpu_graph_rebind(void *exec, void *graph, const struct lg_scan_ring *ring, const lg_spec_t *spec,
                                 uint64_t reads, const struct lg_scan_ring **own, char *why, size_t why_len)
{
    lg_validate_scratch_lock();
    scratch_t *s = lg_validate_scratch_captured(ring);
    int rc = 1;
    if (s) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        lg_validate_module_drv.exchange_capture_mode(&mode);
        rc = rebind_locked((CUgraphExec)exec, (CUgraph)graph, s, spec, reads, own, why, why_len);
        lg_validate_module_drv.exchange_capture_mode(&mode);
    }
    lg_validate_scratch_unlock();
    return rc;
}
