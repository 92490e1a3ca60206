// attach_target.cu: the running process `labelguard attach` arms, for tests/e2e/test_attach.sh
// (and the launching program of tests/e2e/test_cupti_unavailable.sh). Built by the Makefile
// with nvcc -cudart shared; run under the runtime test double (LD_LIBRARY_PATH=build/fakecuda).
//
// It launches PyTorch's nll_loss_forward_reduce_cuda_kernel_2d (same name and parameter list as
// v2.6, pytorch-kernels.md §2.3; the test double emulates it by name) once with clean labels,
// prints "ready PID", then waits until the file named by argv[1] exists (argv[1] "--now": no
// wait), then launches it with one label == n_classes and prints what the runtime said:
//   "launch: <cudaGetLastError> <its string>" and "sync: <cudaDeviceSynchronize>".
// Unguarded, the launch fires the kernel's device assert (sync: 710). Armed with the default
// action raise, it is blocked (launch: the library's error, naming the kernel; sync: 0).
// `attach_target --busy TRIGGER_FILE` (tests/e2e/test_attach_busy.sh): a training loop instead
// of the wait: each iteration launches the clean kernel 4 times and synchronizes the device,
// printing "iter N" (so a test sees it keep running while it is attached to), until
// TRIGGER_FILE exists; then the bad launch as above. Under FAKECUDA_ASYNC_US the loop spends
// nearly all its time waiting inside cudaDeviceSynchronize, where a debugger stops it.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

namespace at { namespace native { namespace {
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(
    scalar_t *output, scalar_t *total_weight, const scalar_t *input, const index_t *target,
    const scalar_t *weights, bool size_average, int64_t nframe, int64_t ndim, int64_t n_classes,
    int64_t ignore_index)
{
    // The body matters only on a GPU; the test double runs its own emulation of the kernel.
    accscalar_t sum = 0, wsum = 0;
    for (int64_t i = threadIdx.x; i < nframe; i += blockDim.x) {
        const index_t t = target[i];
        if (t == ignore_index) continue;
        assert(t >= 0 && t < n_classes);
        const scalar_t w = weights ? weights[t] : scalar_t(1);
        sum -= input[i * ndim + t] * w;
        wsum += w;
    }
    if (threadIdx.x == 0) {
        *output = size_average && wsum != 0 ? sum / wsum : sum;
        *total_weight = wsum;
    }
}
} } }

static int launch(float *out, float *tw, const float *in, const int64_t *tgt, int64_t n, int64_t c)
{
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
        <<<1, 32>>>(out, tw, in, tgt, nullptr, true, n, c, c, -100);
    cudaError_t e = cudaGetLastError();
    printf("launch: %d %s\n", (int)e, cudaGetErrorString(e));
    cudaError_t s = cudaDeviceSynchronize();
    printf("sync: %d\n", (int)s);
    fflush(stdout);
    return (int)s;
}

int main(int argc, char **argv)
{
    const bool busy = argc == 3 && strcmp(argv[1], "--busy") == 0;
    if (argc != 2 && !busy) {
        fprintf(stderr, "usage: attach_target TRIGGER_FILE|--now|--busy TRIGGER_FILE\n");
        return 2;
    }
    const int64_t n = 8, c = 5;
    float h_in[n * c];
    int64_t h_tgt[n];
    for (int i = 0; i < n * c; i++) h_in[i] = -0.1f * (float)(i % 7);
    for (int i = 0; i < n; i++) h_tgt[i] = i % c;
    float *in, *out, *tw;
    int64_t *tgt;
    if (cudaMalloc(&in, sizeof h_in) || cudaMalloc(&out, sizeof(float)) || cudaMalloc(&tw, sizeof(float)) ||
        cudaMalloc(&tgt, sizeof h_tgt)) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 3;
    }
    cudaMemcpy(in, h_in, sizeof h_in, cudaMemcpyHostToDevice);
    cudaMemcpy(tgt, h_tgt, sizeof h_tgt, cudaMemcpyHostToDevice);
    if (launch(out, tw, in, tgt, n, c) != 0) return 4;   // clean: must pass in every setup

    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (busy) {
        for (long it = 1; access(argv[2], F_OK) != 0; it++) {
            for (int k = 0; k < 4; k++)
                at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
                    <<<1, 32>>>(out, tw, in, tgt, nullptr, true, n, c, c, -100);
            cudaError_t e = cudaDeviceSynchronize();
            printf("iter %ld %d\n", it, (int)e);
            fflush(stdout);
            if (e != cudaSuccess) return 6;
            if (it > 20000) {                            // the test gave up on us
                fprintf(stderr, "attach_target: no trigger file %s\n", argv[2]);
                return 5;
            }
        }
    } else if (strcmp(argv[1], "--now") != 0) {
        for (int i = 0; access(argv[1], F_OK) != 0; i++) {
            if (i > 1200) {                              // 60 s: the test gave up on us
                fprintf(stderr, "attach_target: no trigger file %s\n", argv[1]);
                return 5;
            }
            struct timespec ts = { 0, 50 * 1000 * 1000 };
            nanosleep(&ts, nullptr);
        }
    }
    h_tgt[3] = c;                                        // one label == n_classes
    cudaMemcpy(tgt, h_tgt, sizeof h_tgt, cudaMemcpyHostToDevice);
    launch(out, tw, in, tgt, n, c);
    return 0;
}
