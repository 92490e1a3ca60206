// libnllpy.cu: a shared library that python3 loads with ctypes.CDLL, standing in for PyTorch's
// CUDA bindings in tests/e2e/test_python_stack.sh. Its functions launch PyTorch's
// nll_loss_{forward,backward}_reduce_cuda_kernel_2d (declared exactly as PyTorch does,
// torch_kernels.cuh) with the caller's labels, either on the calling thread or on a native
// std::thread this library creates while the caller waits (no Python frames on it, like
// autograd's backward threads). ctypes.CDLL releases the GIL around each call, as PyTorch's
// bindings do around a launch, so the library under test must read the Python stack without it.
// Built by the Makefile rule for $(BUILD)/progs/lib%.so; runs under the test double.
//
// C API (every function returns a cudaError_t as int, 0 = success):
//   lgpy_launch(backward, in_thread, labels, n, n_classes, ignore_index, err, err_len)
//       launches the forward (backward = 0) or backward (1) reduce kernel over n int64 labels
//       and returns cudaGetLastError() right after the launch, as C10_CUDA_KERNEL_LAUNCH_CHECK
//       does; err receives cudaGetErrorString of that error (empty on success). in_thread = 1:
//       the launch happens on a new std::thread, joined before returning.
//   lgpy_memcheck()  a host->device->host round trip of 64 floats: cudaSuccess only when the
//       CUDA context still works and the data came back intact.
#include "torch_kernels.cuh"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

namespace {

struct job {
    int backward;
    const int64_t *labels;
    int n;
    int64_t n_classes, ignore_index;
    char *err;
    int err_len;
    int rc;
};

void copy_error(cudaError_t e, char *out, int len)
{
    if (len <= 0)
        return;
    snprintf(out, (size_t)len, "%s", e == cudaSuccess ? "" : cudaGetErrorString(e));
}

// Allocates the operands, launches, reads the launch status; frees everything on the way out.
void run(job *j)
{
    const int64_t n = j->n, C = j->n_classes;
    float *d_in = nullptr, *d_out = nullptr, *d_tw = nullptr, *d_grad = nullptr, *d_go = nullptr;
    int64_t *d_t = nullptr;
    std::vector<float> in((size_t)(n * C));
    for (size_t i = 0; i < in.size(); i++)
        in[i] = -(float)(i + 1) / 4;
    float one = 1, tw = (float)n;
    cudaError_t e = cudaMalloc(&d_in, in.size() * sizeof(float));
    if (!e) e = cudaMalloc(&d_t, (size_t)n * sizeof(int64_t));
    if (!e) e = cudaMalloc(&d_out, sizeof(float));
    if (!e) e = cudaMalloc(&d_tw, sizeof(float));
    if (!e) e = cudaMalloc(&d_go, sizeof(float));
    if (!e) e = cudaMalloc(&d_grad, in.size() * sizeof(float));
    if (!e) e = cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(d_t, j->labels, (size_t)n * sizeof(int64_t), cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(d_go, &one, sizeof(float), cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(d_tw, &tw, sizeof(float), cudaMemcpyHostToDevice);
    if (!e) e = cudaMemset(d_grad, 0, in.size() * sizeof(float));
    if (!e) {
        if (!j->backward) {
            at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t><<<1, 32>>>(
                d_out, d_tw, d_in, d_t, nullptr, true, n, C, C, j->ignore_index);
        } else {
            at::native::nll_loss_backward_reduce_cuda_kernel_2d<float, int64_t><<<1, 32>>>(
                d_grad, d_go, d_t, nullptr, d_tw, true, (int)n, (int)C, C, j->ignore_index);
        }
        e = cudaGetLastError();
        if (!e)
            e = cudaDeviceSynchronize();
    }
    copy_error(e, j->err, j->err_len);
    j->rc = (int)e;
    cudaFree(d_in);
    cudaFree(d_t);
    cudaFree(d_out);
    cudaFree(d_tw);
    cudaFree(d_go);
    cudaFree(d_grad);
}

} // namespace

extern "C" __attribute__((visibility("default"))) int lgpy_launch(int backward, int in_thread, const int64_t *labels,
                                                                  int n, int64_t n_classes, int64_t ignore_index,
                                                                  char *err, int err_len)
{
    job j = { backward, labels, n, n_classes, ignore_index, err, err_len, -1 };
    if (in_thread) {
        std::thread t(run, &j);
        t.join();
    } else {
        run(&j);
    }
    return j.rc;
}

extern "C" __attribute__((visibility("default"))) int lgpy_memcheck(void)
{
    float h[64], back[64];
    for (int i = 0; i < 64; i++)
        h[i] = (float)i * 1.5f;
    float *d = nullptr;
    cudaError_t e = cudaMalloc(&d, sizeof h);
    if (!e) e = cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost);
    if (d)
        cudaFree(d);
    if (!e && memcmp(h, back, sizeof h) != 0)
        return (int)cudaErrorUnknown;
    return (int)e;
}
