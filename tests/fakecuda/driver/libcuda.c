/* libcuda.c: the driver-API half of the runtime test double, built as
 * build/fakecuda-driver/libcuda.so.1 and put on the library path by build/torch-python only.
 *
 * PyTorch's CUDA initialisation reads the primary context's state through the driver API
 * (at::cuda::detail::_stubs::cuDevicePrimaryCtxGetState, which dlopens libcuda.so.1), so real
 * torch cannot start without some libcuda. This one has only the few functions torch needs to
 * start and to report a driver error; everything else is absent, as on a machine whose driver
 * lacks it: dlsym fails, torch raises where it needed one (NVRTC/jiterator kernels), labelguard
 * finds no cuModuleLoadData and uses its host backend, CUPTI finds no driver and stays off.
 * The context is "active" once the runtime double has been used (fakecudart_context_active).
 * It launches and copies nothing (no cuLaunchKernel, cuMemcpy*, cuStream*), so the runtime's
 * FAKECUDA_ASYNC_US stream ordering has nothing to order here; a driver function that queues
 * work must go through the runtime double's stream queues when one is added.
 * The existing fakecuda tests never see this library (it is not in build/fakecuda).
 * Fork: cuInit initialises CUDA for the runtime double too (fakecudart_driver_init: one
 * initialisation per process, as runtime and driver share one), and a child forked after the
 * process initialised CUDA, through either, gets CUDA_ERROR_NOT_INITIALIZED from every call
 * here, as the runtime double's child gets cudaErrorInitializationError (CUDA does not survive
 * fork; FAKECUDA_FORK_OK=1 lifts it in both).
 * Tested through tests/torch-fake/test_smoke.sh and tests/torch-fake/test_enable.sh (fork).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FK_EXPORT __attribute__((visibility("default")))

/* The runtime double's side of the one initialisation, found once (not in the fork handler). */
static void (*rt_init)(void);
static int (*rt_initialised)(void);
static _Atomic int inited, forked_child;

static void after_fork_child(void)
{
    if (atomic_load(&inited) || (rt_initialised && rt_initialised()))
        atomic_store(&forked_child, 1);
}

__attribute__((constructor)) static void fk_driver_init(void)
{
    *(void **)&rt_init = dlsym(RTLD_DEFAULT, "fakecudart_driver_init");
    *(void **)&rt_initialised = dlsym(RTLD_DEFAULT, "fakecudart_initialised");
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* Every call but the error-string ones: a fork child of an initialised process fails. */
static int poisoned(void)
{
    if (!atomic_load(&forked_child))
        return 0;
    const char *ok = getenv("FAKECUDA_FORK_OK");
    return !(ok && *ok && strcmp(ok, "0") != 0);
}

static int context_active(void)
{
    int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fakecudart_context_active");
    return f ? f() : 0;
}

FK_EXPORT CUresult cuInit(unsigned int flags)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&inited, 1);
    if (rt_init) rt_init();
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = context_active();
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported"; break;
    default: *s = "unknown error (the fakecuda driver models few)"; break;
    }
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGetErrorName(CUresult e, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
    }
    return CUDA_SUCCESS;
}
