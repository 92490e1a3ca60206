// lg_nll_once.cuh: one NLL forward launch on four rows of three classes, the smallest job a test
// program runs to see whether a launch is checked (tests/e2e/progs/mixed_main.cu, mixed_late.cu,
// malloc_loop.cu). With bad set, the last label is 3 == n_classes. Prints
// "<what> launch: <cudaGetLastError>" and "<what> sync: <cudaDeviceSynchronize>" (no prefix when
// what is empty): a blocked launch gives 800 and then 0.
#pragma once
#include <cstdio>
#include "torch_kernels.cuh"
#include <cuda_runtime.h>

static void lg_nll_once(int bad, const char *what)
{
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
    const char *sep = what[0] ? " " : "";
    printf("%s%slaunch: %d\n", what, sep, (int)cudaGetLastError());
    printf("%s%ssync: %d\n", what, sep, (int)cudaDeviceSynchronize());
    fflush(stdout);
}
