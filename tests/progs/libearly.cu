// libearly.cu: a shared library whose constructor launches a kernel, as a CUDA extension's
// static initialiser may. Preloaded after the library (LD_PRELOAD="liblabelguard.so
// libearly.so"), its constructor runs before the library's own (the loader initialises in
// reverse of the search order) and its launch binds to the library's hook: the hook is reached
// before our constructor has read the configuration. Prints early_launch=<cudaError_t of the
// launch> on stderr. Used by tests/e2e/test_early_ctor.sh. Built by the Makefile rule for
// $(BUILD)/progs/lib%.so; runs under the test double.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void lg_test_early(int *p)
{
    if (p)
        *p = 1;
}

__attribute__((constructor)) static void early(void)
{
    lg_test_early<<<1, 1>>>(nullptr);
    fprintf(stderr, "early_launch=%d\n", (int)cudaGetLastError());
}
