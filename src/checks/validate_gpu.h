/* validate_gpu.h: what the GPU backend's files share: validate_gpu.c (the entry points: start,
 * launches, verdict ring), validate_gpu_graph.c (a second exec's scratch, retiring),
 * validate_scratch.c (the scratch table and the backend's lock) and validate_module.c (the
 * driver's entry points and the validator module of each context). Calls go one way:
 * validate_gpu.c and validate_gpu_graph.c -> validate_scratch.c -> validate_module.c. Kept out
 * of checks.h because it needs the driver's types (cuda.h). */
#ifndef LG_VALIDATE_GPU_H
#define LG_VALIDATE_GPU_H

#include <cuda.h> /* driver types only: the functions come from dlsym */
#include <pthread.h>

#include "lg_validate.h" /* LG_KERNEL_COUNT */

/* The driver entry points we use, by their ABI names (cuda.h maps the API names to _v2),
 * resolved from runtime.c's libcuda handle. */
typedef struct lg_validate_module_drv {
    CUresult (*init)(unsigned);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_ctx_get_state)(CUdevice, unsigned *, int *);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*ctx_get_id)(CUcontext, unsigned long long *); /* optional: CUDA >= 12.0 */
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*exchange_capture_mode)(CUstreamCaptureMode *);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_host_alloc)(void **, size_t, unsigned);
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*func_get_attribute)(int *, CUfunction_attribute, CUfunction); /* optional */
    /* Optional: a second exec of a graph holding validator nodes gets scratch of its own
     * (lg_validate_gpu_graph_rebind). The kernel-node pair is the _v2 ABI (CUDA 12.0+) where the
     * driver has it, else the first; CUDA_KERNEL_NODE_PARAMS_v2 begins with the v1 fields. */
    CUresult (*graph_get_nodes)(CUgraph, CUgraphNode *, size_t *);
    CUresult (*graph_node_get_type)(CUgraphNode, CUgraphNodeType *);
    CUresult (*graph_node_get_dependent_nodes)(CUgraphNode, CUgraphNode *, size_t *); /* the v1 ABI */
    CUresult (*graph_kernel_node_get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2 *);
    CUresult (*graph_exec_kernel_node_set_params)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *);
    CUresult (*func_get_param_info)(CUfunction, size_t, size_t *, size_t *); /* CUDA 12.4+ */
} lg_validate_module_drv_t;
extern LG_HIDDEN lg_validate_module_drv_t lg_validate_module_drv;

/* One loaded module per context. */
typedef struct lg_module {
    CUcontext ctx;
    unsigned long long ctx_id; /* 0 when cuCtxGetId is missing */
    int state;                 /* 1 loaded, -1 failed */
    CUfunction fn[LG_KERNEL_COUNT];
    CUstream init_stream; /* non-blocking, ours: initialises scratch outside any capture */
    int max_grid;         /* resident blocks: 4 per SM */
} lg_module_t;

/* The rest take the GPU backend's lock (lg_validate_scratch_lock) from their caller. */
/* Loads the driver's entry points and decides whether the GPU backend is active
 * (lg_validate_module_decide); 0 without a usable driver. */
LG_HIDDEN int lg_validate_module_init(void);
/* With the driver loaded: 1 when the GPU backend is active (a current context that loads the
 * module, or a primary context active on some device), 0 when it is not (the module does not
 * load, no driver or device), -1 while the process has no context yet (ask again later). */
LG_HIDDEN int lg_validate_module_decide(void);
/* lg_validate_gpu_init once the driver table is filled: the decision alone (the fake driver of
 * tests/unit/test_gpu_driver.c fills lg_validate_module_drv itself). Takes the backend's lock. */
LG_HIDDEN bool lg_validate_gpu_init_loaded(void);
/* The module of context ctx, loaded on first use; NULL with why. */
LG_HIDDEN lg_module_t *lg_validate_module_for(CUcontext ctx, char *why, size_t why_len);
LG_HIDDEN int lg_validate_module_count(void);
/* In a fork child: the parent's modules mean nothing there. */
LG_HIDDEN void lg_validate_module_forget(void);
LG_HIDDEN const char *lg_validate_module_error(CUresult r);

/* ---------------------------------------------------------------- validate_scratch.c */

/* The memory one validator launch works in: per (context, stream, thread), or dedicated to one
 * captured launch. Never freed (an in-flight kernel or a graph may still use it). */
struct lg_scratch {
    /* key */
    CUcontext ctx;
    unsigned long long ctx_id;
    CUstream stream;
    pthread_t thread; /* the launching thread: it alone enqueues work on this scratch */
    bool captured;    /* dedicated to one captured launch; never looked up again */
    bool retired;     /* captured, and no graph or exec holds it any more (lg_validate_gpu_graph_retire) */
    uint64_t due;     /* retired: the runs queued on it; reusable once its ring has published them */
    /* GPU memory */
    CUdeviceptr state, cand, cand_count, ring_dev, copy;
    int cand_samples; /* samples per block the candidate area holds */
    size_t copy_bytes;
    void *copy_pinned;    /* host address of `copy` when it is mapped pinned host memory, else NULL */
    lg_scan_ring_t *ring; /* host view of ring_dev */
    uint64_t launched;    /* launches enqueued: the seq the next one will publish - 1 */
};

/* The GPU backend's one lock: it guards the scratch table, the backend's decision and the
 * module table. The functions below and validate_module.c's take it from their caller. */
LG_HIDDEN void lg_validate_scratch_lock(void);
LG_HIDDEN void lg_validate_scratch_unlock(void);
/* The scratch of (m's context, stream, calling thread), created on first use, its candidate
 * area grown to `samples`; `captured`: scratch no other launch uses while a graph or exec holds
 * it (a retired one whose runs have all published, holding `copy_bytes` if one does, else
 * fresh). Counts an attempt toward the backoff. NULL with why: refused, the table full, or in
 * backoff; the caller sends the check to the host backend. */
LG_HIDDEN struct lg_scratch *lg_validate_scratch_for(lg_module_t *m, CUstream stream, bool captured, int samples,
                                                     size_t copy_bytes, char *why, size_t why_len);
/* Grows s's sanitized-copy area to hold `bytes` (device memory, else mapped pinned host
 * memory). 0, or -1 with why (and the backoff started). */
LG_HIDDEN int lg_validate_scratch_grow_copy(struct lg_scratch *s, size_t bytes, char *why, size_t why_len);
/* At start, while the GPU is still empty: the starting thread's scratch of the default stream,
 * with a sanitized-copy area. A refusal only starts the backoff. */
LG_HIDDEN void lg_validate_scratch_preallocate(void);
/* The captured scratch whose ring is `ring` (host view), or NULL. */
LG_HIDDEN struct lg_scratch *lg_validate_scratch_captured(const struct lg_scan_ring *ring);
/* In a fork child: the lock re-initialised, the parent's table dropped. Takes no lock. */
LG_HIDDEN void lg_validate_scratch_after_fork(void);

#endif
