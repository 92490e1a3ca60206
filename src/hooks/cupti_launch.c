/* cupti_launch.c: one CUPTI launch callback's parameters as the lg_launch_t that launch.c
 * decides on: the runtime's cudaLaunchKernel(_ptsz), __cudaLaunchKernel(_ptsz) (CUDA 13's
 * <<<>>>) and cudaLaunchKernelExC(_ptsz), the driver's cuLaunchKernel(Ex)(_ptsz); the null
 * stream of a _ptsz entry as the per-thread stream; a CUfunction named through libcuda's
 * cuFuncGetName once per handle. Kept apart from cupti.c (finding libcupti, the subscription,
 * the callback and its argument rewrite) because it is the one part that follows CUPTI's
 * parameter layouts, which change with CUDA releases.
 *
 * Called by cupti.c's callback, on the launching thread inside CUPTI. Tested by
 * tests/e2e/test_cupti_layout.sh (the layouts the CUPTI double delivers, as the real CUPTI is
 * documented to); the real CUPTI's only on a GPU (tests/gpu).
 */
#include <cupti.h>
#include <string.h>

#include "hooks/hooks.h"

typedef CUresult (*func_get_name_fn)(const char **, CUfunction);

/* __cudaLaunchKernel(_ptsz) (CUDA 13 <<<>>>, cbids 505/506 in cupti_runtime_cbid.h) has no
 * params struct in CUPTI 13's generated_cuda_runtime_api_meta.h; CUPTI passes its arguments in
 * prototype order, which is cudaLaunchKernel's: (cudaKernel_t, dim3, dim3, void **, size_t,
 * cudaStream_t), read here as cudaLaunchKernel_v7000_params' layout. The CUPTI double delivers
 * exactly that (tests/e2e/test_cupti_layout.sh); that the real CUPTI does only a GPU run shows. */
typedef struct {
    const void *func;
    dim3 gridDim;
    dim3 blockDim;
    void **args;
    size_t sharedMem;
    cudaStream_t stream;
} internal_launch_params_t;

static void set_launch(lg_launch_t *l, const void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t shared_mem, void *stream)
{
    l->func = func;
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
    l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
    l->shared_mem = shared_mem;
    l->stream = stream;
}

bool lg_cupti_launch_read(int dom_, uint32_t cbid, const void *data, void *name_fn, lg_launch_t *l, void ***args_slot)
{
    CUpti_CallbackDomain dom = (CUpti_CallbackDomain)dom_;
    const CUpti_CallbackData *cb = data;
    func_get_name_fn func_get_name = (func_get_name_fn)name_fn;
    bool ptsz = false;
    memset(l, 0, sizeof *l);
    l->can_block = false;
    l->mangled = cb->symbolName;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        l->entry = LG_ENTRY_CUPTI_RUNTIME;
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
            ptsz = true;
            /* fall through */
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000: {
            _Static_assert(sizeof(internal_launch_params_t) == sizeof(cudaLaunchKernel_v7000_params),
                           "__cudaLaunchKernel params must have cudaLaunchKernel's layout");
            const internal_launch_params_t *p = cb->functionParams;
            set_launch(l, p->func, p->gridDim.x, p->gridDim.y, p->gridDim.z, p->blockDim.x, p->blockDim.y,
                       p->blockDim.z, p->sharedMem, p->stream);
            *args_slot = p->args;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
            ptsz = true;
            /* fall through */
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: {
            const cudaLaunchKernelExC_v11060_params *p = cb->functionParams;
            const cudaLaunchConfig_t *c = p->config;
            if (!c)
                return false;
            set_launch(l, p->func, c->gridDim.x, c->gridDim.y, c->gridDim.z, c->blockDim.x, c->blockDim.y,
                       c->blockDim.z, c->dynamicSmemBytes, c->stream);
            *args_slot = p->args;
            break;
        }
        default: return false;
        }
    } else {
        l->entry = LG_ENTRY_CUPTI_DRIVER;
        switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
            ptsz = true;
            /* fall through */
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
            const cuLaunchKernel_params *p = cb->functionParams;
            set_launch(l, p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                       p->sharedMemBytes, p->hStream);
            *args_slot = p->kernelParams;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
            ptsz = true;
            /* fall through */
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
            const cuLaunchKernelEx_params *p = cb->functionParams;
            const CUlaunchConfig *c = p->config;
            if (!c)
                return false;
            set_launch(l, p->f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                       c->sharedMemBytes, c->hStream);
            *args_slot = p->kernelParams;
            break;
        }
        default: return false;
        }
        /* A CUfunction is not a registered host stub: launch.c can only name it from here.
         * Asked once per handle (the per-handle cache then has it). */
        if (!l->mangled && func_get_name && !lg_names_info(l->func)) {
            const char *name = NULL;
            lg_runtime_in_library++;
            if (func_get_name(&name, (CUfunction)l->func) == CUDA_SUCCESS)
                l->mangled = name;
            lg_runtime_in_library--;
        }
    }
    /* The null stream of a _ptsz entry point is the per-thread stream: the validator must run
     * on the stream the kernel runs on. */
    if (ptsz && !l->stream)
        l->stream = cudaStreamPerThread;
    l->args = *args_slot;
    return l->args != NULL && l->func != NULL;
}
