// opaque.cu: kernels labelguard knows by name only (src/checks/opaque.c), launched the way their real
// counterparts are, for tests/e2e/test_opaque.sh. Built as build/progs/opaque (<<<>>>),
// opaque_legacy and opaque_ptsz.
//
// usage: opaque triton
//   Three kernels named as Inductor names them (extern "C", as Triton's are): a fused
//   log_softmax + nll_loss forward, an nll_loss backward and an unrelated add, each launched 3
//   times. On a GPU Triton launches them through the driver API (cuLaunchKernel, seen by CUPTI);
//   here through the runtime, which reaches the same classification.
// usage: opaque smoothing [--no-weights] [--sum] [--backward] [--gap N] [--scatter] [LABEL...]
//   What F.cross_entropy(weight=w, label_smoothing=s) launches: nll_loss's forward 2d kernel
//   (torch_kernels.cuh; 3 classes, weights 1,2,3 unless --no-weights, mean unless --sum) on the
//   labels (default 0 5 1: index 1 is bad), N unrelated launches (default 3), then PyTorch's
//   TensorIterator gather (at::native::_scatter_gather_elementwise_kernel of
//   _cuda_scatter_gather_internal_kernel<false, ...>; --scatter: the <true, ...> scatter form).
//   --backward: the NLL backward 2d kernel between the two (as a step without smoothing).
// output: "loss launch_err=E sync_err=E", "gather launch_err=E sync_err=E", launch_error_text=
//   of the gather when it failed, and "after clean_launch_err=E clean_sync_err=E".
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" __global__ void triton_red_fused__log_softmax_nll_loss_forward_1(float *out, const long *target, int n)
{
    if (threadIdx.x < n) out[threadIdx.x] = (float)target[threadIdx.x];
}
extern "C" __global__ void triton_poi_fused_nll_loss_backward_0(float *grad, const long *target, int n)
{
    if (threadIdx.x < n) grad[threadIdx.x] = -(float)target[threadIdx.x];
}
extern "C" __global__ void triton_poi_fused_add_0(float *p, int n)
{
    if (threadIdx.x < n) p[threadIdx.x] += 1.0f;
}

// The shape of PyTorch's TensorIterator gather (ScatterGatherKernel.cu): the kernel is a
// template on a functor type defined inside _cuda_scatter_gather_internal_kernel<is_scatter_like,
// scalar_t, index_t>, so its mangled name carries both names as PyTorch's does.
namespace at {
namespace native {
template <int nt, int vt, typename func_t>
__global__ void _scatter_gather_elementwise_kernel(int N, func_t f)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) f(i);
}
template <bool is_scatter_like, typename scalar_t, typename index_t>
struct _cuda_scatter_gather_internal_kernel {
    struct Loop {
        scalar_t *self;
        const scalar_t *src;
        const index_t *index;
        __device__ void operator()(int i) const
        {
            if (is_scatter_like) self[index[i]] = src[i];
            else self[i] = src[index[i]];
        }
    };
};
} // namespace native
} // namespace at

namespace {

int triton()
{
    float *d_f = nullptr;
    long *d_t = nullptr;
    cudaMalloc((void **)&d_f, 16 * sizeof(float));
    cudaMalloc((void **)&d_t, 16 * sizeof(long));
    cudaMemset(d_t, 0, 16 * sizeof(long));
    int failed = 0;
    for (int r = 0; r < 3; r++) {
        failed |= lg_launch(LG_DEFAULT_MODE, triton_red_fused__log_softmax_nll_loss_forward_1, dim3(1), dim3(16), 0, 0,
                            d_f, (const long *)d_t, 16) != cudaSuccess;
        failed |= lg_launch(LG_DEFAULT_MODE, triton_poi_fused_nll_loss_backward_0, dim3(1), dim3(16), 0, 0, d_f,
                            (const long *)d_t, 16) != cudaSuccess;
        failed |= lg_launch(LG_DEFAULT_MODE, triton_poi_fused_add_0, dim3(1), dim3(16), 0, 0, d_f, 16) != cudaSuccess;
    }
    cudaError_t s = cudaDeviceSynchronize();
    printf("triton launches_failed=%d sync_err=%d\n", failed, (int)s);
    cudaFree(d_f);
    cudaFree(d_t);
    return failed || s != cudaSuccess;
}

int smoothing(int argc, char **argv)
{
    bool weights = true, mean = true, backward = false, scatter = false;
    int gap = 3;
    std::vector<int64_t> labels;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--no-weights") weights = false;
        else if (a == "--sum") mean = false;
        else if (a == "--backward") backward = true;
        else if (a == "--scatter") scatter = true;
        else if (a == "--gap" && i + 1 < argc) gap = atoi(argv[++i]);
        else labels.push_back(strtoll(argv[i], nullptr, 10));
    }
    if (labels.empty()) labels = {0, 5, 1};
    const int64_t n = (int64_t)labels.size(), C = 3;
    float *d_in, *d_w, *d_out, *d_tw, *d_grad, *d_go, *d_f;
    int64_t *d_t;
    cudaMalloc((void **)&d_in, (size_t)(n * C) * sizeof(float));
    cudaMalloc((void **)&d_w, C * sizeof(float));
    cudaMalloc((void **)&d_out, sizeof(float));
    cudaMalloc((void **)&d_tw, sizeof(float));
    cudaMalloc((void **)&d_grad, (size_t)(n * C) * sizeof(float));
    cudaMalloc((void **)&d_go, sizeof(float));
    cudaMalloc((void **)&d_f, (size_t)n * sizeof(float));
    cudaMalloc((void **)&d_t, (size_t)n * sizeof(int64_t));
    std::vector<float> hin((size_t)(n * C), -1.0f), hw = {1, 2, 3};
    cudaMemcpy(d_in, hin.data(), hin.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_w, hw.data(), hw.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_t, labels.data(), (size_t)n * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaMemset(d_grad, 0, (size_t)(n * C) * sizeof(float));
    cudaMemcpy(d_go, hw.data(), sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_tw, hw.data(), sizeof(float), cudaMemcpyHostToDevice);

    auto fwd = at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>;
    cudaError_t le = lg_launch(LG_DEFAULT_MODE, fwd, dim3(1), dim3(32), 0, 0, d_out, d_tw, (const float *)d_in,
                               (const int64_t *)d_t, weights ? (const float *)d_w : nullptr, mean, n, C, C, (int64_t)-100);
    cudaError_t se = cudaDeviceSynchronize();
    printf("loss launch_err=%d sync_err=%d\n", (int)le, (int)se);
    if (backward) {
        auto bwd = at::native::nll_loss_backward_reduce_cuda_kernel_2d<float, int64_t>;
        lg_launch(LG_DEFAULT_MODE, bwd, dim3(1), dim3(32), 0, 0, d_grad, (const float *)d_go, (const int64_t *)d_t,
                  weights ? (const float *)d_w : nullptr, (const float *)d_tw, mean, (int)n, (int)C, C, (int64_t)-100);
    }
    for (int g = 0; g < gap; g++) lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, 0, d_f, (int)n);
    cudaError_t ge;
    if (scatter) {
        at::native::_cuda_scatter_gather_internal_kernel<true, float, int64_t>::Loop f = { d_f, d_w, d_t };
        ge = lg_launch(LG_DEFAULT_MODE, at::native::_scatter_gather_elementwise_kernel<128, 8, decltype(f)>, dim3(1),
                       dim3(128), 0, 0, (int)n, f);
    } else {
        at::native::_cuda_scatter_gather_internal_kernel<false, float, int64_t>::Loop f = { d_f, d_w, d_t };
        ge = lg_launch(LG_DEFAULT_MODE, at::native::_scatter_gather_elementwise_kernel<128, 8, decltype(f)>, dim3(1),
                       dim3(128), 0, 0, (int)n, f);
    }
    if (ge != cudaSuccess) printf("launch_error_text=\"%s\"\n", cudaGetErrorString(ge));
    cudaError_t gs = cudaDeviceSynchronize();
    printf("gather launch_err=%d sync_err=%d\n", (int)ge, (int)gs);
    cudaError_t cl = lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, 0, d_f, (int)n);
    cudaError_t cs = cudaDeviceSynchronize();
    printf("after clean_launch_err=%d clean_sync_err=%d\n", (int)cl, (int)cs);
    fflush(stdout);
    for (void *p : { (void *)d_in, (void *)d_w, (void *)d_out, (void *)d_tw, (void *)d_grad, (void *)d_go, (void *)d_f,
                     (void *)d_t })
        cudaFree(p);
    return le == cudaSuccess && ge == cudaSuccess ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    lg_print_identity();
    if (argc >= 2 && !strcmp(argv[1], "triton")) return triton();
    if (argc >= 2 && !strcmp(argv[1], "smoothing")) return smoothing(argc, argv);
    fprintf(stderr, "usage: opaque triton | opaque smoothing [options] [LABEL...] (see tests/progs/opaque.cu)\n");
    return 2;
}
