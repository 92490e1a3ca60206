/* libmix12.c: a CUDA 12 library, for tests/e2e/test_mixed_runtimes.sh: linked against
 * libcudart.so.12 (the test double's CUDA 12 build, build/fakecuda12), so that every runtime
 * reference it makes names version node libcudart.so.12, and dlopen'd (RTLD_LOCAL, as Python
 * loads extensions) by build/e2e/mixed_main, a CUDA 13 program. It registers and launches
 * PyTorch's nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t> the way a CUDA 12
 * build of PyTorch does (host stub + __cudaRegisterFunction, cudaLaunchKernel), in C because
 * nvcc 13 code calls CUDA 13-only entry points.
 *
 * mix12_run(bad): one launch over 4 labels (bad = 1: one label == n_classes), then prints
 *   "mix12 registered: <cudaFuncGetName through libcudart.so.12>" (0: the kernel's registration
 *   reached the CUDA 12 runtime), "mix12 launch: <cudaGetLastError>" and
 *   "mix12 sync: <cudaDeviceSynchronize>" (710: the kernel ran, and asserted, in the CUDA 12
 *   runtime). Returns 0.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, uint3 *ti, uint3 *bi,
                            dim3 *bd, dim3 *gd, int *ws);

#define KERNEL "_ZN2at6native12_GLOBAL__N_138nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S4_PKS3_PKT1_S6_bllll"

static void stub(void) {}
static const struct {
    int magic, version;
    const void *data;
    void *filename;
} wrapper = {0x466243b1, 1, "", NULL};

__attribute__((constructor)) static void register_kernels(void)
{
    void **h = __cudaRegisterFatBinary((void *)&wrapper);
    __cudaRegisterFunction(h, (const char *)stub, (char *)KERNEL, KERNEL, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
}

__attribute__((visibility("default"))) int mix12_run(int bad)
{
    const int64_t n = 4, c = 3;
    int64_t labels[4] = {0, 1, 2, bad ? 3 : 0};
    float logits[12] = {0};
    float *out, *tw, *in;
    int64_t *tgt;
    cudaMalloc((void **)&out, sizeof(float));
    cudaMalloc((void **)&tw, sizeof(float));
    cudaMalloc((void **)&in, sizeof logits);
    cudaMalloc((void **)&tgt, sizeof labels);
    cudaMemcpy(in, logits, sizeof logits, cudaMemcpyHostToDevice);
    cudaMemcpy(tgt, labels, sizeof labels, cudaMemcpyHostToDevice);
    const char *name = NULL;
    printf("mix12 registered: %d\n", (int)cudaFuncGetName(&name, (const void *)stub));
    const float *weights = NULL;
    _Bool size_average = 1;
    int64_t nframe = n, ndim = c, n_classes = c, ignore = -100;
    void *args[] = {&out, &tw, &in, &tgt, &weights, &size_average, &nframe, &ndim, &n_classes, &ignore};
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    cudaLaunchKernel((const void *)stub, grid, block, args, 0, NULL);
    printf("mix12 launch: %d\n", (int)cudaGetLastError());
    printf("mix12 sync: %d\n", (int)cudaDeviceSynchronize());
    fflush(stdout);
    return 0;
}
