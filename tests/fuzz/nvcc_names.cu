#include <cstdint>
namespace c10 { struct Half { unsigned short x; }; struct BFloat16 { unsigned short x; }; }
namespace at {
template <typename T> struct DefaultPtrTraits { typedef T* PtrType; };
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
struct GenericPackedTensorAccessor { T* data_; index_t sizes_[N]; index_t strides_[N]; };
template <typename T, size_t N> using PackedTensorAccessor64 = GenericPackedTensorAccessor<T, N, DefaultPtrTraits, int64_t>;
namespace native { namespace {
#ifndef OLD
template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_no_reduce_cuda_kernel(int64_t batch_size, PackedTensorAccessor64<scalar_t, 2> input, const index_t* target, scalar_t* output, const scalar_t* weights, int64_t n_classes, int64_t ignore_index) {}
#endif
template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_1d(scalar_t* output, scalar_t* total_weight, const scalar_t* input, const index_t* target, const scalar_t* weights, bool size_average, int64_t n_classes, int64_t ignore_index) {}
#ifndef OLD
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(scalar_t* output, scalar_t* total_weight, const scalar_t* input, const index_t* target, const scalar_t* weights, bool size_average, int64_t nframe, int64_t ndim, int64_t n_classes, int64_t ignore_index) {}
#endif
template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_no_reduce_cuda_kernel(int batch_size, const index_t* target, PackedTensorAccessor64<const scalar_t, 1> grad_output, PackedTensorAccessor64<scalar_t, 2> grad_input, const scalar_t* weights, int64_t n_classes, int64_t ignore_index) {}
template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_reduce_cuda_kernel_1d(scalar_t* grad_input, const scalar_t* grad_output, const scalar_t* weights, const index_t* target, const scalar_t* total_weight, bool size_average, int64_t n_classes, int64_t ignore_index) {}
template <typename scalar_t, typename index_t>
__global__ void nll_loss_backward_reduce_cuda_kernel_2d(scalar_t* grad_input, const scalar_t* grad_output, const index_t* target, const scalar_t* weights, const scalar_t* total_weight, bool size_average, int nframe, int ndim, int64_t n_classes, int64_t ignore_index) {}
template <typename scalar_t>
__global__ void nll_loss2d_forward_no_reduce_kernel(int64_t n_threads, PackedTensorAccessor64<scalar_t, 4> input, PackedTensorAccessor64<int64_t, 3> target, PackedTensorAccessor64<scalar_t, 3> output, const scalar_t* weight, int64_t ignore_index) {}
#ifndef OLD
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss2d_forward_kernel(scalar_t* output, scalar_t* total_weight, const scalar_t* input, const int64_t* target, const scalar_t* weight, int n_classes, int map_nelem, int blocks_per_sample, int64_t ignore_index) {}
#endif
template <typename scalar_t>
__global__ void nll_loss2d_backward_no_reduce_kernel(int64_t n_threads, PackedTensorAccessor64<int64_t, 3> target, PackedTensorAccessor64<scalar_t, 3> grad_output, PackedTensorAccessor64<scalar_t, 4> grad_input, const scalar_t* weight, int64_t ignore_index) {}
template <typename scalar_t>
__global__ void nll_loss2d_backward_kernel(scalar_t* grad_input, const scalar_t* grad_output, const int64_t* target, const scalar_t* weights, const scalar_t* total_weight, bool size_average, int n_classes, int map_nelem, int blocks_per_sample, int64_t ignore_index) {}
#ifdef OLD
/* 1.10-1.12 widths */
template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_no_reduce_cuda_kernel(int64_t batch_size, PackedTensorAccessor64<scalar_t, 2> input, index_t* target, scalar_t* output, scalar_t* weights, int n_classes, int ignore_index) {}
template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(scalar_t* output, scalar_t* total_weight, scalar_t* input, index_t* target, scalar_t* weights, bool size_average, int nframe, int ndim, int n_classes, int64_t ignore_index) {}
template <typename scalar_t>
__global__ void nll_loss2d_forward_kernel(scalar_t* output, scalar_t* total_weight, const scalar_t* input, const int64_t* target, const scalar_t* weight, int n_classes, int map_nelem, int blocks_per_sample, int64_t ignore_index) {}
#endif
}}}
template <typename T, int Dim, typename IndexT = int, template <typename U> class PtrTraits = at::DefaultPtrTraits>
struct THCDeviceTensor { T* data_; IndexT stride_[Dim]; IndexT size_[Dim]; };
template <typename Dtype>
__global__ void ClassNLLCriterion_updateOutput_no_reduce_kernel(int batch_size, THCDeviceTensor<Dtype, 2> input, THCDeviceTensor<int64_t, 1> target, THCDeviceTensor<Dtype, 1> output, Dtype* weights, int n_classes, int ignore_index) {}
template <typename Dtype, typename Acctype>
__global__ void cunn_ClassNLLCriterion_updateOutput_kernel(Dtype* output, Dtype* total_weight, Dtype* input, int64_t* target, Dtype* weights, int size_average, int nframe, int ndim, int n_classes, int64_t ignore_index) {}
template <typename T, typename AccumT>
__global__ void cunn_SpatialClassNLLCriterion_updateOutput_kernel(T* output, T* total_weight, T* input, int64_t* target, T* weights, int size_average, int batch_size, int n_classes, int map_nelem, int blocks_per_sample, int64_t ignore_index) {}
template <typename Dtype>
__global__ void SpatialClassNLLCriterion_updateOutput_no_reduce_kernel(int64_t nthreads, THCDeviceTensor<Dtype, 4> input, THCDeviceTensor<int64_t, 3> target, THCDeviceTensor<Dtype, 3> output, Dtype* weights, int64_t ignore_index) {}

using namespace at::native;
void inst() {
  void *p[] = {
#ifdef OLD
  (void*)nll_loss_forward_no_reduce_cuda_kernel<float, int64_t>,
  (void*)nll_loss_forward_reduce_cuda_kernel_2d<float, int64_t>,
  (void*)nll_loss2d_forward_kernel<float>,
#else
  (void*)nll_loss_forward_no_reduce_cuda_kernel<float, int64_t>,
  (void*)nll_loss_forward_no_reduce_cuda_kernel<c10::Half, uint8_t>,
  (void*)nll_loss_forward_reduce_cuda_kernel_1d<double, uint8_t>,
  (void*)nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>,
  (void*)nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, uint8_t>,
  (void*)nll_loss_backward_no_reduce_cuda_kernel<float, int64_t>,
  (void*)nll_loss_backward_reduce_cuda_kernel_1d<float, int64_t>,
  (void*)nll_loss_backward_reduce_cuda_kernel_2d<float, uint8_t>,
  (void*)nll_loss2d_forward_no_reduce_kernel<float>,
  (void*)nll_loss2d_forward_kernel<float, float, int>,
  (void*)nll_loss2d_backward_no_reduce_kernel<c10::Half>,
  (void*)nll_loss2d_backward_kernel<float>,
#endif
  (void*)ClassNLLCriterion_updateOutput_no_reduce_kernel<float>,
  (void*)cunn_ClassNLLCriterion_updateOutput_kernel<float, float>,
  (void*)cunn_SpatialClassNLLCriterion_updateOutput_kernel<float, float>,
  (void*)SpatialClassNLLCriterion_updateOutput_no_reduce_kernel<float>,
  };
  (void)p;
}
