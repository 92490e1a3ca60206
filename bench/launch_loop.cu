// launch_loop.cu: the fast-path benchmark program of bench/run.sh (`make bench`). Launches one
// unwatched kernel N times and prints how long the launch loop took, so the cost labelguard
// adds to every launch it does not watch can be measured with and without LD_PRELOAD:
// instruction counts under callgrind, and wall-clock time of the loop alone (start-up excluded).
// Runs under the runtime test double (build/fakecuda) or a real runtime alike.
//
// usage: launch_loop [N] [chevron|legacy|sync|lasterr_graph|pending]   (default 100000, chevron)
//   chevron: kernel<<<>>> (nvcc 13: __cudaLaunchKernel); legacy: cudaLaunchKernel with the stub
//   sync: N cudaStreamSynchronize calls with nothing outstanding (a synchronizing call's cost)
//   lasterr_graph: a loss kernel captured into a graph and replayed once (clean labels), then
//            N cudaGetLastError calls (what polling costs once a checked graph exists)
//   pending: the same graph replayed while its stream is stuck behind a kernel that has not
//            finished (under the test double: one that failed a device assert, so the stream's
//            later work never runs), so the replay's verdict is outstanding and not ready; then
//            N unwatched launches (<<<>>>) on the default stream: what a launch costs while a
//            verdict is awaited, as during a backward pass after an async loss or a replay.
//            Needs the test double (fakecudart_register_emulator); the final error is ignored.
// output: "launches=N mode=M loop_ns=T ns_per_launch=T/N"; exit 0, 1 on a CUDA error, 2 on usage.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <cuda_runtime.h>

#include "torch_kernels.cuh"

__global__ void bench_unwatched_kernel(int *out, int n)
{
    if (out && threadIdx.x == 0 && blockIdx.x == 0)
        out[0] = n;
}

__global__ void bench_stuck_kernel(int *out)
{
    if (out && threadIdx.x == 0)
        out[0] = 0;
}

typedef cudaError_t (*emulator_fn)(const char *, dim3, dim3, void **, size_t, cudaStream_t);
static cudaError_t stuck(const char *, dim3, dim3, void **, size_t, cudaStream_t) { return cudaErrorAssert; }

static long long now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], nullptr, 10) : 100000;
    const char *mode = argc > 2 ? argv[2] : "chevron";
    bool legacy = !strcmp(mode, "legacy"), sync = !strcmp(mode, "sync"), graph = !strcmp(mode, "lasterr_graph");
    bool pending = !strcmp(mode, "pending");
    if (n < 0 || (!legacy && !sync && !graph && !pending && strcmp(mode, "chevron"))) {
        fprintf(stderr, "usage: launch_loop [N] [chevron|legacy|sync|lasterr_graph|pending]\n");
        return 2;
    }
    typedef int (*register_fn)(const char *, emulator_fn);
    register_fn reg = (register_fn)dlsym(RTLD_DEFAULT, "fakecudart_register_emulator");
    if (pending && (!reg || reg("bench_stuck_kernel", stuck) != 0)) {
        fprintf(stderr, "launch_loop: pending needs the runtime test double\n");
        return 2;
    }
    int *buf = nullptr;
    if (cudaMalloc(&buf, sizeof(int)) != cudaSuccess) {
        fprintf(stderr, "launch_loop: cudaMalloc failed\n");
        return 1;
    }
    // One launch before timing: first-launch work (registration lookups, lazy start) is not
    // the per-launch cost being measured.
    bench_unwatched_kernel<<<1, 1>>>(buf, -1);
    cudaDeviceSynchronize();
    cudaStream_t s = nullptr;
    if (graph || pending) {
        // One forward loss launch with 4 good labels, captured and replayed once.
        float *in, *out;
        int64_t *target, h[4] = {0, 1, 2, 0};
        cudaMalloc(&in, 16 * sizeof(float));
        cudaMalloc(&out, 2 * sizeof(float));
        cudaMalloc(&target, sizeof h);
        cudaMemcpy(target, h, sizeof h, cudaMemcpyHostToDevice);
        cudaStreamCreate(&s);
        cudaGraph_t g;
        cudaGraphExec_t x;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t><<<1, 32, 0, s>>>(
            out, out + 1, in, target, nullptr, true, 4, 4, 4, -100);
        cudaStreamEndCapture(s, &g);
        cudaGraphInstantiateWithFlags(&x, g, 0);
        if (pending)
            bench_stuck_kernel<<<1, 1, 0, s>>>(buf);
        cudaGraphLaunch(x, s);
        if (!pending) {
            cudaStreamSynchronize(s);
            cudaGetLastError();
        }
    }
    int k = 0;
    void *args[] = {&buf, &k};
    long long t0 = now_ns();
    for (long i = 0; i < n; i++) {
        k = (int)i;
        if (sync)
            cudaStreamSynchronize(nullptr);
        else if (graph)
            cudaGetLastError();
        else if (legacy)
            cudaLaunchKernel((const void *)bench_unwatched_kernel, dim3(1), dim3(1), args, 0, nullptr);
        else
            bench_unwatched_kernel<<<1, 1>>>(buf, k);
    }
    long long t1 = now_ns();
    cudaError_t e = cudaDeviceSynchronize();
    printf("launches=%ld mode=%s loop_ns=%lld ns_per_launch=%.2f\n", n, mode,
           t1 - t0, n ? (double)(t1 - t0) / (double)n : 0.0);
    cudaFree(buf);
    return e == cudaSuccess || pending ? 0 : 1;
}
