// mixed_main.cu: a CUDA 13 program that dlopens a CUDA 12 library (libmix12.so, argv[1]), for
// tests/e2e/test_mixed_runtimes.sh: one process, two runtimes (the test double's libcudart.so.13
// and libcudart.so.12). It launches PyTorch's nll_loss_forward_reduce_cuda_kernel_2d itself
// (argv[2] "bad": one label == n_classes) and prints "main launch: <cudaGetLastError>" and
// "main sync: <cudaDeviceSynchronize>", then calls mix12_run(bad) (see libmix12.c).
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include "lg_nll_once.cuh"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mixed_main LIBMIX12 good|bad\n");
        return 2;
    }
    int bad = !strcmp(argv[2], "bad");
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*run)(int) = (int (*)(int))dlsym(lib, "mix12_run");
    lg_nll_once(bad, "main");
    return run ? run(bad) : 3;
}
