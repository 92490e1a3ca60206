// lg_launch.cuh: how the test programs launch a kernel, and the runtime identity check.
//
// lg_launch(mode, kernel, grid, block, shm, stream, args...) launches through the entry point
// chosen by mode, and returns the launch's status as PyTorch sees it (C10_CUDA_KERNEL_LAUNCH_CHECK
// reads cudaGetLastError after <<<>>>):
//   LG_CHEVRON  kernel<<<>>>: nvcc 13 emits __cudaGetKernel + __cudaLaunchKernel(_ptsz)
//   LG_LEGACY   cudaLaunchKernel((const void *)kernel, ...) with the host stub, as CUDA 12 builds
//               of PyTorch do (the default in builds with -DLG_TEST_LEGACY_LAUNCH=1)
//   LG_HANDLE   cudaLaunchKernel with the cudaKernel_t from cudaGetKernel
//   LG_EXC      cudaLaunchKernelExC with a cudaLaunchConfig_t
// lg_print_identity() prints "fakecudart_identity=<what the runtime says>", or "=none" on the
// real runtime, so a test can prove which runtime it ran on.
#pragma once
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <tuple>
#include <utility>
#include <cuda_runtime.h>

enum lg_launch_mode { LG_CHEVRON, LG_LEGACY, LG_HANDLE, LG_EXC };

#ifdef LG_TEST_LEGACY_LAUNCH
static const lg_launch_mode LG_DEFAULT_MODE = LG_LEGACY;
#else
static const lg_launch_mode LG_DEFAULT_MODE = LG_CHEVRON;
#endif

static inline int lg_parse_mode(const char *s, lg_launch_mode *m)
{
    if (!strcmp(s, "chevron")) *m = LG_CHEVRON;
    else if (!strcmp(s, "legacy")) *m = LG_LEGACY;
    else if (!strcmp(s, "handle")) *m = LG_HANDLE;
    else if (!strcmp(s, "exc")) *m = LG_EXC;
    else return -1;
    return 0;
}

template <typename Tuple, size_t... I>
static void lg_fill_args(Tuple &t, void **argv, std::index_sequence<I...>)
{
    ((argv[I] = (void *)&std::get<I>(t)), ...);
}

template <typename... KArgs, typename... Args>
static cudaError_t lg_launch(lg_launch_mode mode, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shm,
                             cudaStream_t stream, Args... args)
{
    if (mode == LG_CHEVRON) {
#ifdef LG_TEST_LEGACY_LAUNCH
        // nvcc -DLG_TEST_LEGACY_LAUNCH still compiles <<<>>> the modern way; keep the
        // program's entry point honest by not offering it there.
        mode = LG_LEGACY;
#else
        kernel<<<grid, block, shm, stream>>>(args...);
        return cudaGetLastError();
#endif
    }
    std::tuple<KArgs...> vals(args...);
    void *argv[sizeof...(KArgs) + 1];
    lg_fill_args(vals, argv, std::index_sequence_for<KArgs...>{});
    if (mode == LG_LEGACY) return cudaLaunchKernel((const void *)kernel, grid, block, argv, shm, stream);
    if (mode == LG_HANDLE) {
        cudaKernel_t h;
        cudaError_t e = cudaGetKernel(&h, (const void *)kernel);
        if (e != cudaSuccess) return e;
        return cudaLaunchKernel((const void *)h, grid, block, argv, shm, stream);
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shm;
    cfg.stream = stream;
    return cudaLaunchKernelExC(&cfg, (const void *)kernel, argv);
}

static inline void lg_print_identity(void)
{
    typedef const char *(*identity_fn)(void);
    identity_fn f = (identity_fn)dlsym(RTLD_DEFAULT, "fakecudart_identity");
    printf("fakecudart_identity=%s\n", f ? f() : "none");
    fflush(stdout);
}
