// mixed_main.cu: a CUDA 13 program that dlopens a CUDA 12 library (libmix12.so, argv[1]), for
// tests/e2e/test_mixed_runtimes.sh: one process, two runtimes (the test double's libcudart.so.13
// and libcudart.so.12). It launches PyTorch's nll_loss_forward_reduce_cuda_kernel_2d itself
// (argv[2] "bad": one label == n_classes) and prints "main launch: <cudaGetLastError>" and
// "main sync: <cudaDeviceSynchronize>", then calls mix12_run(bad) (see libmix12.c).
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include "torch_kernels.cuh"
#include <cuda_runtime.h>

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
    const int64_t n = 4, c = 3;
    int64_t labels[4] = {0, 1, 2, bad ? 3 : 0};
    float *out, *tw, *in;
    int64_t *tgt;
    cudaMalloc(&out, sizeof(float));
    cudaMalloc(&tw, sizeof(float));
    cudaMalloc(&in, n * c * sizeof(float));
    cudaMalloc(&tgt, sizeof labels);
    cudaMemset(in, 0, n * c * sizeof(float));
    cudaMemcpy(tgt, labels, sizeof labels, cudaMemcpyHostToDevice);
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
        <<<1, 32>>>(out, tw, in, tgt, nullptr, true, n, c, c, -100);
    printf("main launch: %d\n", (int)cudaGetLastError());
    printf("main sync: %d\n", (int)cudaDeviceSynchronize());
    fflush(stdout);
    return run ? run(bad) : 3;
}
