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
 *
 * Built a second time with -DFK_DRIVER_LAUNCH=1 as build/fakecuda-driver-launch/libcuda.so.1: a
 * driver that also loads modules and launches their kernels, as Triton's launcher uses it
 * (cuModuleLoadData, cuModuleGetFunction, cuFuncGetName, cuLaunchKernel, cuLaunchKernelEx,
 * cuCtxSynchronize), for
 * tests/e2e/test_driver_launch.sh. A module takes any image and has every function asked of it;
 * a function is a kernel of the runtime double (fakecudart_driver_function), so its launch runs
 * an emulator registered by name (fakecudart_register_emulator) or nothing, on the runtime's
 * streams, and a device assert poisons the one context both halves share. With
 * FAKECUDA_CUPTI=1 each launch calls the CUPTI double's driver-domain callbacks around it, with
 * the launch's params struct, the kernel's name and, at exit, the result, as CUPTI does. The
 * torch build above has none of these: torch and labelguard would take a driver that loads
 * modules for one that can run their kernels (labelguard's validator, torch's jiterator), and
 * this double runs only emulated ones.
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

#ifdef FK_DRIVER_LAUNCH
#include <cupti.h>
#include <stdio.h>

/* A module: the functions asked of it so far, so that one name is one CUfunction, as in the
 * driver. */
#define FK_MODULE_FUNCS 64
struct CUmod_st {
    pthread_mutex_t lock;
    int n;
    struct {
        char name[256];
        CUfunction f;
    } fn[FK_MODULE_FUNCS];
};

typedef void *(*rt_function_fn)(const char *);
typedef const char *(*rt_function_name_fn)(const void *);
typedef int (*rt_launch_fn)(const void *, dim3, dim3, void **, size_t, void *);
typedef void (*cupti_api_fn)(int, int, unsigned, const char *, const char *, const void *, void *);

static void *runtime_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

FK_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!atomic_load(&inited)) return CUDA_ERROR_NOT_INITIALIZED;
    if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *mod = calloc(1, sizeof *mod);
    if (!mod) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&mod->lock, NULL);
    *m = mod;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuModuleUnload(CUmodule m)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_destroy(&m->lock);
    free(m);
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (!*name || strlen(name) >= sizeof m->fn[0].name) return CUDA_ERROR_NOT_FOUND;
    rt_function_fn make = (rt_function_fn)runtime_sym("fakecudart_driver_function");
    if (!make) return CUDA_ERROR_NOT_SUPPORTED; /* no runtime double: nothing could run it */
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&m->lock);
    int i = 0;
    while (i < m->n && strcmp(m->fn[i].name, name)) i++;
    if (i == m->n) {
        void *k = m->n < FK_MODULE_FUNCS ? make(name) : NULL;
        if (!k) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            snprintf(m->fn[i].name, sizeof m->fn[i].name, "%s", name);
            m->fn[i].f = (CUfunction)k;
            m->n++;
        }
    }
    if (r == CUDA_SUCCESS) *f = m->fn[i].f;
    pthread_mutex_unlock(&m->lock);
    return r;
}

FK_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    rt_function_name_fn get = (rt_function_name_fn)runtime_sym("fakecudart_function_name");
    const char *n = get && f ? get(f) : NULL;
    if (!n) return CUDA_ERROR_INVALID_HANDLE;
    *name = n;
    return CUDA_SUCCESS;
}

/* FAKECUDA_CUPTI=1: the CUPTI double's entry, as the runtime double finds it. */
static cupti_api_fn cupti_api(void)
{
    const char *on = getenv("FAKECUDA_CUPTI");
    if (!on || strcmp(on, "1") != 0) return NULL;
    void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
    cupti_api_fn f = h ? (cupti_api_fn)dlsym(h, "fakecupti_api") : NULL;
    if (h) dlclose(h);
    return f;
}

/* The runtime's result as the driver says it. */
static CUresult driver_result(int e)
{
    switch (e) {
    case 0: return CUDA_SUCCESS;
    case 1: /* cudaErrorInvalidValue */
    case 9: /* cudaErrorInvalidConfiguration */ return CUDA_ERROR_INVALID_VALUE;
    case 3: /* cudaErrorInitializationError */ return CUDA_ERROR_NOT_INITIALIZED;
    case 98: /* cudaErrorInvalidDeviceFunction */
    case 400: /* cudaErrorInvalidResourceHandle */ return CUDA_ERROR_INVALID_HANDLE;
    default: return (CUresult)e; /* 700 illegal address, 710 assert, 999 unknown: the same numbers */
    }
}

/* One driver launch: CUPTI's callbacks around the runtime's launch of the function. */
static CUresult launch(unsigned cbid, const char *api_name, const void *params, CUfunction f, unsigned gx,
                       unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s,
                       void **args)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!atomic_load(&inited)) return CUDA_ERROR_NOT_INITIALIZED;
    rt_launch_fn run = (rt_launch_fn)runtime_sym("fakecudart_driver_launch");
    rt_function_name_fn get = (rt_function_name_fn)runtime_sym("fakecudart_function_name");
    if (!run || !get) return CUDA_ERROR_NOT_SUPPORTED;
    cupti_api_fn api = cupti_api();
    const char *symbol = f ? get(f) : NULL;
    if (api) api(CUPTI_CB_DOMAIN_DRIVER_API, 0, cbid, api_name, symbol, params, NULL);
    CUresult r = f ? driver_result(run(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, args, shm, s))
                   : CUDA_ERROR_INVALID_HANDLE;
    if (api) api(CUPTI_CB_DOMAIN_DRIVER_API, 1, cbid, api_name, symbol, params, &r);
    return r;
}

FK_EXPORT CUresult cuCtxSynchronize(void)
{
    if (poisoned()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!atomic_load(&inited)) return CUDA_ERROR_NOT_INITIALIZED;
    int (*sync)(void) = (int (*)(void))runtime_sym("fakecudart_driver_synchronize");
    return sync ? driver_result(sync()) : CUDA_ERROR_NOT_SUPPORTED;
}

FK_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shm, CUstream s, void **params, void **extra)
{
    if (extra) return CUDA_ERROR_NOT_SUPPORTED; /* CU_LAUNCH_PARAM_BUFFER_*: not modelled */
    cuLaunchKernel_params p = {f, gx, gy, gz, bx, by, bz, shm, s, params, extra};
    return launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &p, p.f, p.gridDimX, p.gridDimY,
                  p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes, p.hStream, p.kernelParams);
}

FK_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (extra) return CUDA_ERROR_NOT_SUPPORTED;
    cuLaunchKernelEx_params p = {c, f, params, extra};
    return launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", &p, p.f, c->gridDimX, c->gridDimY,
                  c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream,
                  p.kernelParams);
}
#endif
