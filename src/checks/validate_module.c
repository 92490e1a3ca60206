/* validate_module.c: the GPU backend's view of the driver: libcuda's entry points (from
 * runtime.c's handle, never linked), and the validator module (the fatbin embedded in the
 * library as lg_validator_fatbin, built from cuda/validate.cu) loaded with cuModuleLoadData
 * into each context the first time that context validates; also whether the GPU backend is
 * active at start.
 *
 * The fatbin (SASS for every architecture, PTX at a low ISA) is loaded first; if the driver
 * refuses it as an image it cannot use (UNSUPPORTED_PTX_VERSION, NO_BINARY_FOR_GPU,
 * INVALID_IMAGE, ...), the PTX alone (lg_validator_ptx) is tried, for the driver to JIT. Which
 * one loaded, and the loaded function's binary and PTX versions (cuFuncGetAttribute), go into
 * the start event (lg_validate_module_image).
 *
 * Called by validate_gpu.c and validate_scratch.c under the backend's lock (validate_scratch.c's),
 * on the launching thread (or the lazy start's).
 * Tested by tests/unit/test_gpu_driver.c (a fake driver table: refused fatbin, PTX fallback,
 * the backend undecided until a context exists),
 * tests/gpu/test_validator.cu (needs a GPU); without a driver, every e2e test takes
 * the path where nothing loads and the host backend is used.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "lg_validate.h"
#include "checks/checks.h"
#include "checks/validate_gpu.h"

extern const unsigned char lg_validator_fatbin[];
extern const char lg_validator_ptx[];

/* Which image of the validator the driver loaded (the first context's), for the start event. */
static char image[160];

/* In the order of validate_gpu.c's kernel_index. */
static const char *const kernel_names[LG_KERNEL_COUNT] = {
    LG_KERNEL_I64_VEC, LG_KERNEL_I64_GEN, LG_KERNEL_U8_VEC,  LG_KERNEL_U8_GEN,  LG_KERNEL_I32_VEC, LG_KERNEL_I32_GEN,
    LG_KERNEL_F32_VEC, LG_KERNEL_F32_GEN, LG_KERNEL_F16_VEC, LG_KERNEL_F16_GEN, LG_KERNEL_F64_VEC, LG_KERNEL_F64_GEN,
};

lg_validate_module_drv_t lg_validate_module_drv;
static lg_module_t modules[16];
static int n_modules;

const char *lg_validate_module_error(CUresult r)
{
    const char *s = NULL;
    if (lg_validate_module_drv.get_error_string && lg_validate_module_drv.get_error_string(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown driver error";
}

static bool load_driver(void)
{
    void *h = lg_runtime_libcuda();
    if (!h)
        return false;
#define SYM(field, name, required)                                \
    do {                                                          \
        *(void **)&lg_validate_module_drv.field = dlsym(h, name); \
        if ((required) && !lg_validate_module_drv.field)          \
            return false;                                         \
    } while (0)
    SYM(init, "cuInit", 1);
    SYM(get_error_string, "cuGetErrorString", 1);
    SYM(device_get_count, "cuDeviceGetCount", 1);
    SYM(device_get_attribute, "cuDeviceGetAttribute", 1);
    SYM(primary_ctx_get_state, "cuDevicePrimaryCtxGetState", 1);
    SYM(ctx_get_current, "cuCtxGetCurrent", 1);
    SYM(ctx_get_device, "cuCtxGetDevice", 1);
    SYM(ctx_get_id, "cuCtxGetId", 0);
    SYM(module_load_data, "cuModuleLoadData", 1);
    SYM(module_get_function, "cuModuleGetFunction", 1);
    SYM(launch_kernel, "cuLaunchKernel", 1);
    SYM(stream_synchronize, "cuStreamSynchronize", 1);
    SYM(stream_is_capturing, "cuStreamIsCapturing", 1);
    SYM(exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", 1);
    SYM(stream_create, "cuStreamCreate", 1);
    SYM(mem_alloc, "cuMemAlloc_v2", 1);
    SYM(mem_host_alloc, "cuMemHostAlloc", 1);
    SYM(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", 1);
    SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", 1);
    SYM(pointer_get_attribute, "cuPointerGetAttribute", 1);
    SYM(func_get_attribute, "cuFuncGetAttribute", 0);
    SYM(func_get_param_info, "cuFuncGetParamInfo", 0);
    SYM(graph_get_nodes, "cuGraphGetNodes", 0);
    SYM(graph_node_get_type, "cuGraphNodeGetType", 0);
    SYM(graph_node_get_dependent_nodes, "cuGraphNodeGetDependentNodes", 0);
    SYM(graph_kernel_node_get_params, "cuGraphKernelNodeGetParams_v2", 0);
    if (!lg_validate_module_drv.graph_kernel_node_get_params)
        SYM(graph_kernel_node_get_params, "cuGraphKernelNodeGetParams", 0);
    SYM(graph_exec_kernel_node_set_params, "cuGraphExecKernelNodeSetParams_v2", 0);
    if (!lg_validate_module_drv.graph_exec_kernel_node_set_params)
        SYM(graph_exec_kernel_node_set_params, "cuGraphExecKernelNodeSetParams", 0);
#undef SYM
    return true;
}

/* The driver's answers for an image it cannot run here, as opposed to a broken driver. */
static bool refused_image(CUresult r)
{
    return r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
           r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX;
}

/* "fatbin: SASS sm_90 (PTX ISA 6.5)", or "ptx: JIT for sm_90 ...": the loaded function's
 * binary version says which SASS runs, its PTX version the ISA it was built from. */
static void describe_image(const char *which, CUfunction f)
{
    int bin = 0, ptx = 0;
    if (lg_validate_module_drv.func_get_attribute) {
        if (lg_validate_module_drv.func_get_attribute(&bin, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f) != CUDA_SUCCESS)
            bin = 0;
        if (lg_validate_module_drv.func_get_attribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f) != CUDA_SUCCESS)
            ptx = 0;
    }
    if (bin > 0)
        snprintf(image, sizeof image, "%s: sm_%d code, PTX ISA %d.%d", which, bin, ptx / 10, ptx % 10);
    else
        snprintf(image, sizeof image, "%s", which);
}

static unsigned long long ctx_id_of(CUcontext ctx)
{
    unsigned long long id = 0;
    if (lg_validate_module_drv.ctx_get_id && lg_validate_module_drv.ctx_get_id(ctx, &id) != CUDA_SUCCESS)
        id = 0;
    return id;
}

/* The module of the current context, loaded on first use. Caller holds `lock`. */
lg_module_t *lg_validate_module_for(CUcontext ctx, char *why, size_t why_len)
{
    unsigned long long id = ctx_id_of(ctx);
    for (int i = 0; i < n_modules; i++) {
        if (modules[i].ctx == ctx && modules[i].ctx_id == id) {
            if (modules[i].state < 0) {
                snprintf(why, why_len, "the validator module could not be loaded in this context");
                return NULL;
            }
            return &modules[i];
        }
    }
    lg_module_t *m;
    if (n_modules < (int)(sizeof modules / sizeof modules[0])) {
        m = &modules[n_modules++];
    } else {
        /* A process that destroyed and re-created more contexts than the table holds: reuse
         * the oldest slot; its context is most likely gone. */
        memmove(&modules[0], &modules[1], sizeof modules - sizeof modules[0]);
        m = &modules[n_modules - 1];
    }
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    m->ctx_id = id;
    m->state = -1;
    CUmodule mod;
    const char *which = "fatbin";
    CUresult r = lg_validate_module_drv.module_load_data(&mod, lg_validator_fatbin);
    if (refused_image(r)) {
        /* A driver that cannot use the fatbin's SASS (or takes it for invalid) may still JIT
         * the PTX, declared at a low ISA for old drivers. */
        CUresult r2 = lg_validate_module_drv.module_load_data(&mod, lg_validator_ptx);
        if (r2 == CUDA_SUCCESS) {
            which = "ptx";
            r = r2;
        } else {
            snprintf(why, why_len, "cuModuleLoadData of the validator failed: fatbin: %s; PTX alone: %s",
                     lg_validate_module_error(r), lg_validate_module_error(r2));
            return NULL;
        }
    }
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuModuleLoadData of the validator failed: %s", lg_validate_module_error(r));
        return NULL;
    }
    for (int k = 0; k < LG_KERNEL_COUNT; k++) {
        r = lg_validate_module_drv.module_get_function(&m->fn[k], mod, kernel_names[k]);
        if (r != CUDA_SUCCESS) {
            snprintf(why, why_len, "validator kernel %s not found: %s", kernel_names[k], lg_validate_module_error(r));
            return NULL;
        }
    }
    CUdevice dev;
    int sms = 0;
    if (lg_validate_module_drv.ctx_get_device(&dev) != CUDA_SUCCESS ||
        lg_validate_module_drv.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) !=
            CUDA_SUCCESS ||
        sms <= 0)
        sms = 16;
    m->max_grid = sms * 4;
    r = lg_validate_module_drv.stream_create(&m->init_stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuStreamCreate failed: %s", lg_validate_module_error(r));
        return NULL;
    }
    m->state = 1;
    if (!image[0])
        describe_image(which, m->fn[0]);
    return m;
}

const char *lg_validate_module_image(void) { return image[0] ? image : NULL; }

int lg_validate_module_count(void) { return n_modules; }

void lg_validate_module_forget(void) { n_modules = 0; }

int lg_validate_module_decide(void)
{
    CUcontext ctx = NULL;
    if (lg_validate_module_drv.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) {
        char why[256];
        return lg_validate_module_for(ctx, why, sizeof why) ? 1 : 0;
    }
    /* No context on this thread: GPU when the runtime has started a primary context on some
     * device (a real runtime that is in use, not the test double); undecided while the
     * process has none. cuInit here is never the process's first: the backend is decided at
     * the first hook, inside the application's own CUDA call. */
    int n = 0;
    if (lg_validate_module_drv.init(0) != CUDA_SUCCESS || lg_validate_module_drv.device_get_count(&n) != CUDA_SUCCESS)
        return 0;
    for (int d = 0; d < n; d++) {
        unsigned flags;
        int active = 0;
        if (lg_validate_module_drv.primary_ctx_get_state((CUdevice)d, &flags, &active) == CUDA_SUCCESS && active)
            return 1;
    }
    return n > 0 ? -1 : 0;
}

int lg_validate_module_init(void) { return load_driver() ? lg_validate_module_decide() : 0; }
