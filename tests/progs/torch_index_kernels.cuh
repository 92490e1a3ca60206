// torch_index_kernels.cuh: PyTorch's index kernels (what nn.Embedding, index_select and x[idx]
// launch), declared with PyTorch's exact names, namespaces and parameter lists, so that nvcc
// gives them the mangled names and parameter sizes of libtorch_cuda.so (tests/wheels/: the
// vectorized gather of IndexKernelUtils.cu from 2.8, indexSelectSmallIndex / LargeIndex of
// Indexing.cu, in at::native::(anonymous namespace), with at::cuda::detail::TensorInfo
// arguments). The bodies do what PyTorch's do, asserts included; under the test double
// (tests/fakecuda/gather.c) its host emulation runs instead.
// Included by tests/progs/gather.cu.
#pragma once
#include "torch_kernels.cuh"

namespace at {
namespace cuda {
namespace detail {

#define LG_MAX_TENSORINFO_DIMS 25

// at/cuda/detail/TensorInfo.cuh: data, sizes[25], strides[25], dims (216 bytes for unsigned
// int, 416 for uint64_t).
template <typename T, typename IndexType>
struct TensorInfo {
    T *data;
    IndexType sizes[LG_MAX_TENSORINFO_DIMS];
    IndexType strides[LG_MAX_TENSORINFO_DIMS];
    int dims;
};

// IndexToOffset<T, IndexType, -1>: the element offset of a linear index.
template <typename T, typename IndexType>
__host__ __device__ IndexType lg_index_to_offset(IndexType linear, const TensorInfo<T, IndexType> &info)
{
    IndexType off = 0;
    for (int d = info.dims - 1; d >= 0; d--) {
        IndexType cur = linear % info.sizes[d];
        off += cur * info.strides[d];
        linear /= info.sizes[d];
    }
    return off;
}

} // namespace detail
} // namespace cuda

namespace native {

// IndexKernelUtils.cu (2.8+): one block per id; sizes and strides in bytes.
template <int Alignment, typename index_t>
__global__ void vectorized_gather_kernel(char *out, char *inp, index_t *idx, int num_ind, int64_t slice_size,
                                         int64_t ind_dim_size, int64_t inp_stride, int64_t out_stride,
                                         bool allow_neg_indices)
{
    int64_t ind = idx[blockIdx.x];
    if (allow_neg_indices) ind = (ind < 0) ? ind + ind_dim_size : ind;
    LG_CUDA_KERNEL_ASSERT(ind >= 0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds");
    int32_t off = (blockDim.x * blockIdx.y + threadIdx.x) * Alignment;
    if (off >= slice_size) return;
    for (int k = 0; k < Alignment && off + k < slice_size; k++)
        out[blockIdx.x * out_stride + off + k] = inp[ind * inp_stride + off + k];
    (void)num_ind;
}

namespace {

using at::cuda::detail::TensorInfo;
using at::cuda::detail::lg_index_to_offset;

// Indexing.cu: at most 16 ids; every thread walks them all.
template <typename T, typename IndicesType, typename IndexType, int DstDim, int SrcDim, int IdxDim>
__global__ void indexSelectSmallIndex(TensorInfo<T, IndexType> dst, TensorInfo<const T, IndexType> src,
                                      TensorInfo<const IndicesType, IndexType> indices, int dstSelectDim,
                                      int srcSelectDim, IndexType innerSize, int64_t srcSelectDimSize)
{
    for (IndexType dstIndex = 0; dstIndex < indices.sizes[0]; ++dstIndex) {
        IndexType srcIndex = indices.data[lg_index_to_offset(dstIndex, indices)];
        LG_CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize);
        for (IndexType linearIndex = blockIdx.x * blockDim.x + threadIdx.x; linearIndex < innerSize;
             linearIndex += gridDim.x * blockDim.x) {
            IndexType dstOffset = lg_index_to_offset(linearIndex, dst) + dstIndex * dst.strides[dstSelectDim];
            IndexType srcOffset = lg_index_to_offset(linearIndex, src) + srcIndex * src.strides[srcSelectDim];
            dst.data[dstOffset] = src.data[srcOffset];
        }
    }
}

// Indexing.cu, 1.13-2.7: one element per linear index.
template <typename T, typename IndicesType, typename IndexType, int DstDim, int SrcDim, int IdxDim, bool IndexIsMajor>
__global__ void indexSelectLargeIndex(TensorInfo<T, IndexType> dst, TensorInfo<const T, IndexType> src,
                                      TensorInfo<const IndicesType, IndexType> indices, int dstSelectDim,
                                      int srcSelectDim, IndexType totalSize, IndexType innerSize,
                                      int64_t srcSelectDimSize)
{
    for (IndexType linearIndex = blockIdx.x * blockDim.x + threadIdx.x; linearIndex < totalSize;
         linearIndex += gridDim.x * blockDim.x) {
        IndexType dstIndex, elementInSlice;
        if (IndexIsMajor) {
            dstIndex = linearIndex / innerSize;
            elementInSlice = linearIndex % innerSize;
        } else {
            elementInSlice = linearIndex / indices.sizes[0];
            dstIndex = linearIndex % indices.sizes[0];
        }
        IndexType srcIndex = indices.data[lg_index_to_offset(dstIndex, indices)];
        LG_CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize);
        IndexType dstOffset = lg_index_to_offset(elementInSlice, dst) + dstIndex * dst.strides[dstSelectDim];
        IndexType srcOffset = lg_index_to_offset(elementInSlice, src) + srcIndex * src.strides[srcSelectDim];
        dst.data[dstOffset] = src.data[srcOffset];
    }
}

} // namespace
} // namespace native
} // namespace at
