// assert_async.cu: torch._assert_async's kernel as PyTorch launches it, with the condition built
// on the CPU, for tests/e2e/test_assert_async.sh. The kernel has PyTorch's name and parameters
// (at::native::_assert_async_cuda_kernel<scalar_t>(const scalar_t *, at::native::Msg) and the
// complex<float> overload, TensorCompare.cu); the launch comes from functions named as PyTorch's
// dispatcher names its ops, so that the native stack shows the op as in libtorch:
// at::_ops::index_put_::call (what index_put_(accumulate=True) checks its indices with) calls
// at::_ops::_assert_async_msg::call, which launches the kernel.
//
// usage: assert_async TYPE VALUE index_put|direct
//   TYPE   bool | float | int64 | complex64: the condition's dtype (the kernel's instance)
//   VALUE  the condition, parsed as a double (complex64: its real part, imaginary 0); "-0"
//          is negative zero
//   index_put  launched through at::_ops::index_put_::call; direct: through
//          at::_ops::_assert_async_msg::call alone (a user's torch._assert_async)
// Output:
//   launch=<err> sync=<err> after=<err>   (after: a copy and a sync once the launch is over,
//                                          so 0 means the CUDA context is alive)
//   msg=<cudaGetErrorString of the launch's error>   (only when the launch failed)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace c10 {
template <typename T> struct alignas(2 * sizeof(T)) complex {
    T real_, imag_;
};
} // namespace c10

namespace at {
namespace native {
struct Msg {
    static constexpr size_t MAX_MSG_LENGTH = 256;
    char msg[MAX_MSG_LENGTH];
};
template <typename scalar_t> static __global__ void _assert_async_cuda_kernel(const scalar_t *input, Msg msg)
{
    if (!(input[0] != 0))
        __trap();
}
__global__ void _assert_async_cuda_kernel(const c10::complex<float> *input, Msg msg)
{
    if (input[0].real_ == 0 && input[0].imag_ == 0)
        __trap();
}
} // namespace native

namespace _ops {
struct _assert_async_msg {
    template <typename T> static __attribute__((noinline)) cudaError_t call(const T *cond, const char *text);
};
struct index_put_ {
    template <typename T> static __attribute__((noinline)) cudaError_t call(const T *cond);
};

template <typename T> cudaError_t _assert_async_msg::call(const T *cond, const char *text)
{
    native::Msg msg;
    memset(&msg, 0, sizeof msg);
    strncpy(msg.msg, text, sizeof msg.msg - 1);
    native::_assert_async_cuda_kernel<<<1, 1, 0, 0>>>(cond, msg);
    return cudaGetLastError(); // C10_CUDA_KERNEL_LAUNCH_CHECK
}

template <typename T> cudaError_t index_put_::call(const T *cond)
{
    cudaError_t e = _assert_async_msg::call(cond, "");
    return e; // not a tail call: this frame stays on the stack
}
} // namespace _ops
} // namespace at

// The complex overload is not a template: its launch has its own caller.
static __attribute__((noinline)) cudaError_t launch_complex(const c10::complex<float> *cond, bool via_index_put);

template <typename T> static int run(T value, bool via_index_put)
{
    T *cond;
    cudaMalloc((void **)&cond, sizeof(T));
    cudaMemcpy(cond, &value, sizeof(T), cudaMemcpyHostToDevice);
    cudaError_t l = via_index_put ? at::_ops::index_put_::call(cond) : at::_ops::_assert_async_msg::call(cond, "");
    return (int)l;
}

namespace at {
namespace _ops {
template <> __attribute__((noinline)) cudaError_t index_put_::call(const c10::complex<float> *cond)
{
    native::Msg msg;
    memset(&msg, 0, sizeof msg);
    native::_assert_async_cuda_kernel<<<1, 1, 0, 0>>>(cond, msg);
    return cudaGetLastError();
}
template <> __attribute__((noinline)) cudaError_t _assert_async_msg::call(const c10::complex<float> *cond, const char *)
{
    native::Msg msg;
    memset(&msg, 0, sizeof msg);
    native::_assert_async_cuda_kernel<<<1, 1, 0, 0>>>(cond, msg);
    return cudaGetLastError();
}
} // namespace _ops
} // namespace at

static cudaError_t launch_complex(const c10::complex<float> *cond, bool via_index_put)
{
    return via_index_put ? at::_ops::index_put_::call(cond) : at::_ops::_assert_async_msg::call(cond, "");
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "index_put") && strcmp(argv[3], "direct"))) {
        fprintf(stderr, "usage: assert_async bool|float|int64|complex64 VALUE index_put|direct\n");
        return 2;
    }
    const double v = strcmp(argv[2], "-0") ? strtod(argv[2], nullptr) : -0.0;
    const bool via = !strcmp(argv[3], "index_put");
    int l;
    if (!strcmp(argv[1], "bool"))
        l = run<bool>(v != 0, via);
    else if (!strcmp(argv[1], "float"))
        l = run<float>((float)v, via);
    else if (!strcmp(argv[1], "int64"))
        l = run<long>((long)v, via);
    else if (!strcmp(argv[1], "complex64")) {
        c10::complex<float> c = {(float)v, 0.0f}, *cond;
        cudaMalloc((void **)&cond, sizeof c);
        cudaMemcpy(cond, &c, sizeof c, cudaMemcpyHostToDevice);
        l = (int)launch_complex(cond, via);
    } else {
        fprintf(stderr, "assert_async: unknown type %s\n", argv[1]);
        return 2;
    }
    cudaError_t s = cudaDeviceSynchronize();
    int probe = 1, back = 0, *dev = nullptr;
    cudaError_t a = cudaMalloc((void **)&dev, sizeof probe);
    if (a == cudaSuccess) a = cudaMemcpy(dev, &probe, sizeof probe, cudaMemcpyHostToDevice);
    if (a == cudaSuccess) a = cudaMemcpy(&back, dev, sizeof back, cudaMemcpyDeviceToHost);
    if (a == cudaSuccess) a = cudaDeviceSynchronize();
    printf("launch=%d sync=%d after=%d\n", l, (int)s, (int)a);
    if (l)
        printf("msg=%s\n", cudaGetErrorString((cudaError_t)l));
    return 0;
}
