// bad_buffers.cu: launches PyTorch's nll_loss_forward_reduce_cuda_kernel_2d (declared as
// PyTorch does, tests/progs/torch_kernels.cuh) with pathological arguments, for
// tests/e2e/test_bad_input.sh: what labelguard says about each, and whether the CUDA context
// stays usable afterwards. Built by the Makefile with nvcc -cudart shared; runs under the
// runtime test double (LD_LIBRARY_PATH=build/fakecuda).
//
// usage: bad_buffers CASE
//   null        target pointer NULL, 4 labels
//   host        target in ordinary host memory (malloc, not device memory), labels 0 1 2 1
//   count_repeat nframe = -5 (no label count makes sense), twice, then once through the int32
//               kernel (another kernel)
//   zero        0 labels (nframe = 0)
//   classes0    n_classes = 0, labels 0 0 0 0 (every label is out of range)
//   classes_neg n_classes = -3, labels 0 0 0 0
//   mismatch    a kernel with PyTorch's name but one extra parameter (lg_test_mismatch), label 7
//               of 3 classes: the layout check must refuse to decode it
//   big         2^31 + 1 uint8 labels (2 GiB of device memory), all 1 but the last, 200, of 10
//               classes: counts above INT32_MAX. The input pointer is a small buffer: a launch
//               that is not blocked reads past it (as a truncated count would let happen).
// output: fakecudart_identity=..., then
//   case=<CASE> launch_err=<e> sync_err=<e>
//   after memcpy_err=<e> clean_launch_err=<e> clean_sync_err=<e> add_one_err=<e>
// where "after" is a device-to-host copy, the same kernel with 4 good labels, and an unwatched
// kernel: all 0 when the context survived. Exit status 0 unless the program could not set up.
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using at::native::nll_loss_forward_reduce_cuda_kernel_2d;

template <typename T>
static cudaError_t launch(const T *target, int64_t n, int64_t classes, float *out, float *tw, const float *in)
{
    return lg_launch(LG_DEFAULT_MODE, nll_loss_forward_reduce_cuda_kernel_2d<float, float, T>, dim3(1), dim3(32), 0,
                     (cudaStream_t)0, out, tw, in, target, (const float *)nullptr, true, n, classes, classes, (int64_t)-100);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: bad_buffers CASE\n"); return 2; }
    const char *c = argv[1];
    lg_print_identity();
    int64_t *d_t = nullptr;
    float *d_in = nullptr, *d_out = nullptr, *d_tw = nullptr;
    if (cudaMalloc((void **)&d_t, 4 * sizeof(int64_t)) || cudaMalloc((void **)&d_in, 12 * sizeof(float)) ||
        cudaMalloc((void **)&d_out, sizeof(float)) || cudaMalloc((void **)&d_tw, sizeof(float))) {
        fprintf(stderr, "bad_buffers: cudaMalloc failed\n");
        return 1;
    }
    float in[12];
    for (int k = 0; k < 12; k++) in[k] = -(float)(k + 1) / 4.0f;
    cudaMemcpy(d_in, in, sizeof in, cudaMemcpyHostToDevice);
    int64_t zeros[4] = { 0, 0, 0, 0 };
    cudaMemcpy(d_t, zeros, sizeof zeros, cudaMemcpyHostToDevice);

    cudaError_t le;
    if (!strcmp(c, "null")) {
        le = launch((const int64_t *)nullptr, 4, 3, d_out, d_tw, d_in);
    } else if (!strcmp(c, "host")) {
        int64_t *h = (int64_t *)malloc(4 * sizeof(int64_t));
        h[0] = 0, h[1] = 1, h[2] = 2, h[3] = 1;
        le = launch((const int64_t *)h, 4, 3, d_out, d_tw, d_in);
        cudaDeviceSynchronize();
        free(h);
    } else if (!strcmp(c, "count_repeat")) {
        le = launch((const int64_t *)d_t, -5, 3, d_out, d_tw, d_in);
        if (!le) le = launch((const int64_t *)d_t, -5, 3, d_out, d_tw, d_in);
        if (!le) le = launch((const int32_t *)d_t, -5, 3, d_out, d_tw, d_in);
    } else if (!strcmp(c, "zero")) {
        le = launch((const int64_t *)d_t, 0, 3, d_out, d_tw, d_in);
    } else if (!strcmp(c, "classes0")) {
        le = launch((const int64_t *)d_t, 4, 0, d_out, d_tw, d_in);
    } else if (!strcmp(c, "classes_neg")) {
        le = launch((const int64_t *)d_t, 4, -3, d_out, d_tw, d_in);
    } else if (!strcmp(c, "mismatch")) {
        int64_t lab[4] = { 0, 1, 7, 1 };
        cudaMemcpy(d_t, lab, sizeof lab, cudaMemcpyHostToDevice);
        le = lg_launch(LG_DEFAULT_MODE, at::native::lg_test_mismatch::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>,
                       dim3(1), dim3(32), 0, (cudaStream_t)0, d_out, d_tw, (const float *)d_in, (const int64_t *)d_t,
                       (const float *)nullptr, true, (int64_t)4, (int64_t)3, (int64_t)3, (int64_t)-100, 5);
        cudaDeviceSynchronize();
        cudaMemcpy(d_t, zeros, sizeof zeros, cudaMemcpyHostToDevice);
    } else if (!strcmp(c, "big")) {
        const size_t n = (size_t(1) << 31) + 1;
        uint8_t *d_big = nullptr;
        if (cudaMalloc((void **)&d_big, n) != cudaSuccess) { fprintf(stderr, "bad_buffers: cannot allocate 2 GiB\n"); return 1; }
        cudaMemset(d_big, 1, n);
        cudaMemset(d_big + n - 1, 200, 1);
        le = launch((const uint8_t *)d_big, (int64_t)n, 10, d_out, d_tw, d_in);
        cudaDeviceSynchronize();
        cudaFree(d_big);
    } else {
        fprintf(stderr, "bad_buffers: unknown case %s\n", c);
        return 2;
    }
    cudaError_t se = cudaDeviceSynchronize();
    printf("case=%s launch_err=%d sync_err=%d\n", c, (int)le, (int)se);
    fflush(stdout);

    float out = 0;
    cudaError_t me = cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost);
    cudaError_t cle = launch((const int64_t *)d_t, 4, 3, d_out, d_tw, d_in);
    cudaError_t cse = cudaDeviceSynchronize();
    cudaError_t ae = lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, (cudaStream_t)0, d_in, 4);
    if (!ae) ae = cudaDeviceSynchronize();
    printf("after memcpy_err=%d clean_launch_err=%d clean_sync_err=%d add_one_err=%d\n", (int)me, (int)cle, (int)cse, (int)ae);
    return 0;
}
