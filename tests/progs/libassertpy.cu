// libassertpy.cu: a shared library that python3 loads with ctypes.CDLL, standing in for a CUDA
// extension whose own kernel asserts on the device, which no labelguard spec watches
// (tests/e2e/test_device_assert.sh). `lgas_histogram` counts bins and asserts that each is in
// [0, nbins); `lgas_scale` is a clean kernel launched around it. On the runtime test double the
// library registers its own emulation of `lgas_histogram` (fakecudart_register_emulator): it
// prints the device's assert line, as a GPU does at the next synchronization, and returns
// cudaErrorAssert, which kills the context as on a GPU. On a GPU the kernel asserts by itself.
// Built by the Makefile rule for $(BUILD)/progs/lib%.so.
//
// C API (every function returns a cudaError_t as int, 0 = success):
//   lgas_clean(times)             launches lgas_scale `times` times (cudaGetLastError after)
//   lgas_histogram(bins, n, nbins, in_thread)  copies n int bins to the device and launches the
//                                 histogram on them, on a new std::thread when in_thread = 1
//   lgas_histogram_graph(bins, n, nbins)  the same launch captured into a CUDA graph on a stream
//                                 of its own, then replayed there once
//   lgas_sync()                   cudaDeviceSynchronize()
#include <cassert>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <thread>
#include <cuda_runtime.h>

__global__ void lgas_scale(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 2.0f;
}

__global__ void lgas_histogram(const int *bins, int n, int nbins, int *counts)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(bins[i] >= 0 && bins[i] < nbins);
        atomicAdd(&counts[bins[i]], 1);
    }
}

namespace {

typedef cudaError_t (*emu_fn)(const char *, dim3, dim3, void **, size_t, cudaStream_t);

// The double's stand-in for the kernel: device memory is host memory there.
cudaError_t emulate_histogram(const char *, dim3, dim3, void **args, size_t, cudaStream_t)
{
    const int *bins = *(const int **)args[0];
    int n = *(int *)args[1], nbins = *(int *)args[2];
    for (int i = 0; i < n; i++)
        if (bins[i] < 0 || bins[i] >= nbins) {
            fprintf(stderr, "libassertpy.cu:33: lgas_histogram: block: [0,0,0], thread: [%d,0,0] Assertion "
                            "`bins[i] >= 0 && bins[i] < nbins` failed.\n", i);
            return cudaErrorAssert;
        }
    return cudaSuccess;
}

void register_once()
{
    static bool done;
    if (done)
        return;
    done = true;
    auto reg = (int (*)(const char *, emu_fn))dlsym(RTLD_DEFAULT, "fakecudart_register_emulator");
    if (reg)
        reg("lgas_histogram", emulate_histogram);
}

float *scratch;
int *bins_dev, *counts_dev;

// The bins on the device, the emulation registered.
cudaError_t upload(const int *bins, int n, int nbins)
{
    register_once();
    if (!bins_dev && (cudaMalloc((void **)&bins_dev, 1024 * sizeof(int)) != cudaSuccess ||
                      cudaMalloc((void **)&counts_dev, 1024 * sizeof(int)) != cudaSuccess))
        return cudaGetLastError();
    if (n > 1024 || nbins > 1024)
        return cudaErrorInvalidValue;
    return cudaMemcpy(bins_dev, bins, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);
}

void launch_histogram(int n, int nbins, cudaError_t *out)
{
    lgas_histogram<<<1, 128>>>(bins_dev, n, nbins, counts_dev);
    *out = cudaGetLastError();
}

} // namespace

extern "C" int lgas_clean(int times)
{
    if (!scratch && cudaMalloc((void **)&scratch, 256 * sizeof(float)) != cudaSuccess)
        return (int)cudaGetLastError();
    for (int i = 0; i < times; i++)
        lgas_scale<<<2, 128>>>(scratch, 256);
    return (int)cudaGetLastError();
}

extern "C" int lgas_histogram(const int *bins, int n, int nbins, int in_thread)
{
    cudaError_t e = upload(bins, n, nbins);
    if (e != cudaSuccess)
        return (int)e;
    if (in_thread) {
        std::thread t(launch_histogram, n, nbins, &e);
        t.join();
    } else {
        launch_histogram(n, nbins, &e);
    }
    return (int)e;
}

extern "C" int lgas_histogram_graph(const int *bins, int n, int nbins)
{
    cudaError_t e = upload(bins, n, nbins);
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    if (e != cudaSuccess || (e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess)
        return (int)e;
    if ((e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)) != cudaSuccess)
        return (int)e;
    lgas_histogram<<<1, 128, 0, s>>>(bins_dev, n, nbins, counts_dev);
    if ((e = cudaStreamEndCapture(s, &g)) != cudaSuccess || (e = cudaGraphInstantiate(&x, g, 0)) != cudaSuccess)
        return (int)e;
    return (int)cudaGraphLaunch(x, s);
}

extern "C" int lgas_sync(void) { return (int)cudaDeviceSynchronize(); }
