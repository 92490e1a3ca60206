// torch_kernels.cuh: PyTorch's NLL loss kernels, declared with PyTorch's exact names,
// namespaces (at::native::(anonymous namespace)) and v2.6 parameter lists, so that nvcc gives
// them the same mangled names as libtorch_cuda.so does (pytorch-kernels.md §2.1-2.6, §3.1-3.4).
// The bodies do what PyTorch's do, asserts included; on a GPU they would run, under the test
// double (tests/fakecuda) its host emulation runs instead. Also: a kernel of the same name with
// another parameter list (at::native::lg_test_mismatch) and an unwatched kernel.
// Included by the test programs in tests/progs/; each translation unit gets its own anonymous
// namespace, as each PyTorch .cu file does.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>

namespace at {

template <typename T>
struct DefaultPtrTraits {
    typedef T *PtrType;
};

// A faithful copy of at::GenericPackedTensorAccessor's layout: data_, sizes_[N], strides_[N]
// (TensorAccessor.h). Only what the kernel bodies below need is implemented.
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
class GenericPackedTensorAccessor {
public:
    typedef typename PtrTraits<T>::PtrType PtrType;
    PtrType data_;
    index_t sizes_[N];
    index_t strides_[N];

    __host__ __device__ index_t size(index_t i) const { return sizes_[i]; }
    __host__ __device__ index_t stride(index_t i) const { return strides_[i]; }
    // Element at the given indices (one per dimension), through the strides.
    template <typename... I>
    __host__ __device__ T &at(I... idx) const
    {
        const index_t ix[] = { static_cast<index_t>(idx)... };
        static_assert(sizeof...(I) == N, "one index per dimension");
        index_t off = 0;
        for (size_t d = 0; d < N; d++) off += ix[d] * strides_[d];
        return data_[off];
    }
};

template <typename T, size_t N>
using PackedTensorAccessor64 = GenericPackedTensorAccessor<T, N, DefaultPtrTraits, int64_t>;

} // namespace at

#define LG_CUDA_KERNEL_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)
// CUDA_KERNEL_ASSERT: checked even under NDEBUG (c10/macros/Macros.h).
#define LG_CUDA_KERNEL_ASSERT(cond) \
    if (!(cond)) { __assert_fail(#cond, __FILE__, static_cast<unsigned int>(__LINE__), __func__); }
// CHECK_INDEX_IN_CLASS of v2.6: unsigned labels are only checked against the upper bound.
#define LG_CHECK_INDEX_IN_CLASS(t, n_classes) \
    if constexpr (std::is_unsigned<std::remove_cv_t<decltype(t)>>::value) { LG_CUDA_KERNEL_ASSERT(t < n_classes); } \
    else { LG_CUDA_KERNEL_ASSERT(t >= 0 && t < n_classes); }

#include <type_traits>

namespace at {
namespace native {
namespace {

constexpr int NLL_LOSS_THREADS = 32;

template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_no_reduce_cuda_kernel(
    int64_t batch_size, PackedTensorAccessor64<scalar_t, 2> input, const index_t *target, scalar_t *output,
    const scalar_t *weights, int64_t n_classes, int64_t ignore_index)
{
    LG_CUDA_KERNEL_LOOP(index, batch_size)
    {
        index_t cur_target = target[index];
        if (cur_target == ignore_index) {
            output[index] = static_cast<scalar_t>(0);
            continue;
        }
        LG_CHECK_INDEX_IN_CLASS(cur_target, n_classes);
        auto cur_weight = weights != nullptr ? weights[cur_target] : static_cast<scalar_t>(1);
        output[index] = -cur_weight * input.at(index, cur_target);
    }
}

template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_1d(
    scalar_t *output, scalar_t *total_weight, const scalar_t *input, const index_t *target, const scalar_t *weights,
    bool size_average, int64_t n_classes, int64_t ignore_index)
{
    LG_CUDA_KERNEL_ASSERT(threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0);
    const index_t t = *target;
    if (t != ignore_index) {
        LG_CHECK_INDEX_IN_CLASS(t, n_classes);
        const auto cur_weight = weights != nullptr ? weights[t] : scalar_t{ 1 };
        *total_weight = cur_weight;
        if (size_average) {
            *output = cur_weight == 0 ? static_cast<scalar_t>(0.0 / 0.0) : -input[t];
        } else {
            *output = -cur_weight * input[t];
        }
    } else {
        *output = scalar_t{ 0 };
        *total_weight = scalar_t{ 0 };
    }
}

template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(
    scalar_t *output, scalar_t *total_weight, const scalar_t *input, const index_t *target, const scalar_t *weights,
    bool size_average, int64_t nframe, int64_t ndim, int64_t n_classes, int64_t ignore_index)
{
    __shared__ accscalar_t sh_inputs[NLL_LOSS_THREADS], acc_weight[NLL_LOSS_THREADS];
    sh_inputs[threadIdx.x] = static_cast<accscalar_t>(0);
    acc_weight[threadIdx.x] = static_cast<accscalar_t>(0);
    for (int i = threadIdx.x; i < nframe; i += NLL_LOSS_THREADS) {
        index_t t = target[i];
        if (t != ignore_index) {
            LG_CHECK_INDEX_IN_CLASS(t, n_classes);
            scalar_t cur_weight = weights != nullptr ? weights[t] : static_cast<scalar_t>(1);
            sh_inputs[threadIdx.x] -= input[i * ndim + t] * cur_weight;
            acc_weight[threadIdx.x] += cur_weight;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        accscalar_t output_acc = 0, total_weight_acc = 0;
        for (int i = 0; i < NLL_LOSS_THREADS; ++i) {
            output_acc += sh_inputs[i];
            total_weight_acc += acc_weight[i];
        }
        *total_weight = static_cast<scalar_t>(total_weight_acc);
        *output = size_average ? static_cast<scalar_t>(output_acc / total_weight_acc) : static_cast<scalar_t>(output_acc);
    }
}

template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_no_reduce_cuda_kernel(
    int batch_size, const index_t *target, PackedTensorAccessor64<const scalar_t, 1> grad_output,
    PackedTensorAccessor64<scalar_t, 2> grad_input, const scalar_t *weights, int64_t n_classes, int64_t ignore_index)
{
    LG_CUDA_KERNEL_LOOP(index, batch_size)
    {
        const index_t cur_target = target[index];
        if (cur_target == ignore_index) continue;
        LG_CHECK_INDEX_IN_CLASS(cur_target, n_classes);
        const auto weight = weights != nullptr ? weights[cur_target] : static_cast<scalar_t>(1);
        grad_input.at(index, cur_target) = -weight * grad_output.at(index);
    }
}

template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_reduce_cuda_kernel_1d(
    scalar_t *grad_input, const scalar_t *grad_output, const scalar_t *weights, const index_t *target,
    const scalar_t *total_weight, bool size_average, int64_t n_classes, int64_t ignore_index)
{
    const index_t t = *target;
    if (t != ignore_index) {
        LG_CHECK_INDEX_IN_CLASS(t, n_classes);
        const auto grad = -(size_average ? *grad_output / *total_weight : *grad_output);
        grad_input[t] = weights != nullptr ? weights[t] * grad : grad;
    }
}

template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_reduce_cuda_kernel_2d(
    scalar_t *grad_input, const scalar_t *grad_output, const index_t *target, const scalar_t *weights,
    const scalar_t *total_weight, bool size_average, int nframe, int ndim, int64_t n_classes, int64_t ignore_index)
{
    const auto grad = -(size_average ? *grad_output / *total_weight : *grad_output);
    for (int i = threadIdx.x; i < nframe; i += NLL_LOSS_THREADS) {
        const index_t t = target[i];
        if (t != ignore_index) {
            LG_CHECK_INDEX_IN_CLASS(t, n_classes);
            const uint64_t index = static_cast<uint64_t>(i) * ndim + t;
            grad_input[index] = weights != nullptr ? weights[t] * grad : grad;
        }
    }
}

template <typename scalar_t>
__global__ void nll_loss2d_forward_no_reduce_kernel(
    int64_t n_threads, PackedTensorAccessor64<scalar_t, 4> input, PackedTensorAccessor64<int64_t, 3> target,
    PackedTensorAccessor64<scalar_t, 3> output, const scalar_t *weight, int64_t ignore_index)
{
    int64_t batch_size = input.size(0);
    int64_t n_classes = input.size(1);
    int64_t H = input.size(2);
    int64_t W = input.size(3);
    LG_CUDA_KERNEL_LOOP(index, n_threads)
    {
        const int64_t b = index % batch_size;
        const int64_t h = (index / batch_size) % H;
        const int64_t w = (index / (batch_size * H)) % W;
        int64_t cur_target = target.at(b, h, w);
        if (cur_target == ignore_index) {
            output.at(b, h, w) = static_cast<scalar_t>(0);
            continue;
        }
        LG_CUDA_KERNEL_ASSERT(cur_target >= 0 && cur_target < n_classes);
        scalar_t value = input.at(b, cur_target, h, w);
        scalar_t cur_weight = weight != nullptr ? weight[cur_target] : static_cast<scalar_t>(1);
        output.at(b, h, w) = -value * cur_weight;
    }
}

template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss2d_forward_kernel(
    scalar_t *output, scalar_t *total_weight, const scalar_t *input, const int64_t *target, const scalar_t *weight,
    int n_classes, int map_nelem, int blocks_per_sample, int64_t ignore_index)
{
    __shared__ accscalar_t partial_sums[1024];
    accscalar_t input_sum = 0, acc_weight = 0;
    index_t sample = blockIdx.x / blocks_per_sample;
    index_t toffset = sample * map_nelem;
    index_t ioffset = sample * map_nelem * n_classes;
    int step = blockDim.x * blocks_per_sample;
    for (int i = (blockIdx.x % blocks_per_sample) * blockDim.x + threadIdx.x; i < map_nelem; i += step) {
        int64_t t = target[toffset + i];
        if (t != ignore_index) {
            LG_CUDA_KERNEL_ASSERT(t >= 0 && t < n_classes);
            scalar_t cur_weight = weight != nullptr ? weight[t] : static_cast<scalar_t>(1);
            const auto input_index = ioffset + i + map_nelem * t;
            LG_CUDA_KERNEL_ASSERT(input_index >= 0);
            input_sum -= input[input_index] * cur_weight;
            acc_weight += cur_weight;
        }
    }
    // BlockReduceSum, written plainly: the test double never runs this body.
    partial_sums[threadIdx.x] = input_sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned k = 1; k < blockDim.x; k++) input_sum += partial_sums[k];
    }
    __syncthreads();
    partial_sums[threadIdx.x] = acc_weight;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned k = 1; k < blockDim.x; k++) acc_weight += partial_sums[k];
        atomicAdd(total_weight, static_cast<scalar_t>(acc_weight));
        atomicAdd(output, static_cast<scalar_t>(input_sum));
    }
}

template <typename scalar_t>
__global__ void nll_loss2d_forward_size_average_kernel(scalar_t *output, const scalar_t *total_weight)
{
    *output /= *total_weight;
}

template <typename scalar_t>
__global__ void nll_loss2d_backward_no_reduce_kernel(
    int64_t n_threads, PackedTensorAccessor64<int64_t, 3> target, PackedTensorAccessor64<scalar_t, 3> grad_output,
    PackedTensorAccessor64<scalar_t, 4> grad_input, const scalar_t *weight, int64_t ignore_index)
{
    int64_t batch_size = target.size(0);
    int64_t H = target.size(1);
    int64_t W = target.size(2);
    LG_CUDA_KERNEL_LOOP(index, n_threads)
    {
        const int64_t b = index % batch_size;
        const int64_t h = (index / batch_size) % H;
        const int64_t w = (index / (batch_size * H)) % W;
        int64_t cur_target = target.at(b, h, w);
        if (cur_target == ignore_index) continue;
        scalar_t value = -(weight != nullptr ? weight[cur_target] : static_cast<scalar_t>(1));
        grad_input.at(b, cur_target, h, w) = value * grad_output.at(b, h, w);
    }
}

template <typename scalar_t>
__global__ void nll_loss2d_backward_kernel(
    scalar_t *grad_input, const scalar_t *grad_output, const int64_t *target, const scalar_t *weights,
    const scalar_t *total_weight, bool size_average, int n_classes, int map_nelem, int blocks_per_sample,
    int64_t ignore_index)
{
    int sample = blockIdx.x / blocks_per_sample;
    int step = blockDim.x * blocks_per_sample;
    int toffset = sample * map_nelem;
    int ioffset = sample * map_nelem * n_classes;
    scalar_t norm = size_average ? (static_cast<scalar_t>(1) / *total_weight) : static_cast<scalar_t>(1);
    for (int i = (blockIdx.x % blocks_per_sample) * blockDim.x + threadIdx.x; i < map_nelem; i += step) {
        int64_t t = target[toffset + i];
        if (t != ignore_index) {
            LG_CUDA_KERNEL_ASSERT(t >= 0 && t < n_classes);
            const auto grad_input_index = ioffset + i + map_nelem * t;
            LG_CUDA_KERNEL_ASSERT(grad_input_index >= 0);
            grad_input[grad_input_index] = -(weights != nullptr ? weights[t] : static_cast<scalar_t>(1)) * norm * grad_output[0];
        }
    }
}

} // namespace
} // namespace native
} // namespace at

// Same name as PyTorch's forward 2d kernel, another parameter list (one more int): a layout the
// guard must recognise as unknown and leave alone.
namespace at {
namespace native {
namespace lg_test_mismatch {
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(
    scalar_t *output, scalar_t *total_weight, const scalar_t *input, const index_t *target, const scalar_t *weights,
    bool size_average, int64_t nframe, int64_t ndim, int64_t n_classes, int64_t ignore_index, int extra)
{
    if (threadIdx.x == 0) *output = static_cast<scalar_t>(extra);
}
} // namespace lg_test_mismatch
} // namespace native
} // namespace at

// An unwatched kernel; the test double emulates it (adds 1 to each of the n floats).
__global__ void lg_test_add_one(float *p, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) p[i] += 1.0f;
}
