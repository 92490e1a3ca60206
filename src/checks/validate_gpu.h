/* validate_gpu.h: what the GPU backend's two files share (validate_gpu.c: scratch, launches,
 * verdict ring; validate_module.c: the driver's entry points and the validator module of each
 * context). Kept out of checks.h because it needs the driver's types (cuda.h). */
#ifndef LG_VALIDATE_GPU_H
#define LG_VALIDATE_GPU_H

#include <cuda.h> /* driver types only: the functions come from dlsym */

#include "lg_validate.h" /* LG_KERNEL_COUNT */

/* The driver entry points we use, by their ABI names (cuda.h maps the API names to _v2),
 * resolved from runtime.c's libcuda handle. */
typedef struct lg_drv {
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
     * (lg_validate_gpu_rebind). The kernel-node pair is the _v2 ABI (CUDA 12.0+) where the
     * driver has it, else the first; CUDA_KERNEL_NODE_PARAMS_v2 begins with the v1 fields. */
    CUresult (*graph_get_nodes)(CUgraph, CUgraphNode *, size_t *);
    CUresult (*graph_node_get_type)(CUgraphNode, CUgraphNodeType *);
    CUresult (*graph_node_get_dependent_nodes)(CUgraphNode, CUgraphNode *, size_t *); /* the v1 ABI */
    CUresult (*graph_kernel_node_get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2 *);
    CUresult (*graph_exec_kernel_node_set_params)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *);
    CUresult (*func_get_param_info)(CUfunction, size_t, size_t *, size_t *); /* CUDA 12.4+ */
} lg_drv_t;
extern LG_HIDDEN lg_drv_t lg_drv;

/* One loaded module per context. */
typedef struct lg_module {
    CUcontext ctx;
    unsigned long long ctx_id; /* 0 when cuCtxGetId is missing */
    int state;                 /* 1 loaded, -1 failed */
    CUfunction fn[LG_KERNEL_COUNT];
    CUstream init_stream; /* non-blocking, ours: initialises scratch outside any capture */
    int max_grid;         /* resident blocks: 4 per SM */
} lg_module_t;

/* The rest take the GPU backend's lock (validate_gpu.c) from their caller. */
/* Loads the driver's entry points and decides whether the GPU backend is active
 * (lg_validate_module_decide); 0 without a usable driver. */
LG_HIDDEN int lg_validate_module_init(void);
/* With the driver loaded: 1 when the GPU backend is active (a current context that loads the
 * module, or a primary context active on some device), 0 when it is not (the module does not
 * load, no driver or device), -1 while the process has no context yet (ask again later). */
LG_HIDDEN int lg_validate_module_decide(void);
/* lg_validate_gpu_init once the driver table is filled: the decision alone (the fake driver of
 * tests/unit/test_gpu_driver.c fills lg_drv itself). Takes the backend's lock. */
LG_HIDDEN bool lg_validate_gpu_init_loaded(void);
/* The module of context ctx, loaded on first use; NULL with why. */
LG_HIDDEN lg_module_t *lg_validate_module_for(CUcontext ctx, char *why, size_t why_len);
LG_HIDDEN int lg_validate_module_count(void);
/* In a fork child: the parent's modules mean nothing there. */
LG_HIDDEN void lg_validate_module_forget(void);
LG_HIDDEN const char *lg_validate_module_error(CUresult r);

#endif
