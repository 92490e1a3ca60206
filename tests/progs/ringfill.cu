// ringfill.cu: a program that runs far ahead of its device: many checked loss launches (or
// replays of a captured loss step) on one stream, back to back, with no synchronization and no
// error query between them, one bad batch among them, and a single synchronization at the end.
// A labelguard verdict ring holds 64 runs, so the bad batch's verdict must be read, or kept,
// before 64 newer checks reuse its slot. Built as build/progs/ringfill (<<<>>> is not used: the
// launches go through cudaLaunchKernel, return value only, as CUDA 12 builds of PyTorch do),
// ringfill_legacy and ringfill_ptsz. Used by tests/e2e/test_ring_pressure.sh under the
// runtime test double with FAKECUDA_ASYNC_US (an asynchronous device).
//
// usage: ringfill eager|graph BEFORE AFTER
//   eager  BEFORE launches of the NLL forward kernel on good labels, one on a bad batch (label 3
//          is 9, with 5 classes), then AFTER good ones, then cudaStreamSynchronize
//   graph  the loss step captured once into a graph reading a static target; per step the batch
//          is copied into it (cudaMemcpyAsync, device to device) and the graph replayed:
//          BEFORE good steps, one bad, AFTER good, then cudaStreamSynchronize
//
// output:
//   fakecudart_identity=<fakecuda|none>
//   ringfill scenario=<s> steps=<n> launch_errors=<count> first_error_step=<k|0> sync=<err> last=<err>
//            text="<first 11 chars of the first error's text>"
// Exit status 0 unless usage is wrong (2).
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const int64_t N = 8, C = 5, IGNORE = -100;

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "ringfill: %s\nusage: ringfill eager|graph BEFORE AFTER\n", why);
    exit(2);
}

template <typename T> T *dev_copy(const std::vector<T> &v)
{
    T *p = nullptr;
    if (cudaMalloc((void **)&p, v.size() * sizeof(T)) != cudaSuccess) return nullptr;
    cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

std::vector<int64_t> batch(bool bad)
{
    std::vector<int64_t> b((size_t)N);
    for (int64_t i = 0; i < N; i++) b[(size_t)i] = i % C;
    if (bad) b[3] = 9;
    return b;
}

struct model {
    cudaStream_t s = nullptr;
    float *in, *out, *tw;
    int64_t *target, *good, *bad;
    model()
    {
        std::vector<float> hin((size_t)(N * C));
        for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
        in = dev_copy(hin);
        out = dev_copy(std::vector<float>(1, 0.0f));
        tw = dev_copy(std::vector<float>(1, 0.0f));
        target = dev_copy(batch(false));
        good = dev_copy(batch(false));
        bad = dev_copy(batch(true));
        cudaStreamCreate(&s);
    }
    cudaError_t loss(const int64_t *t)
    {
        return lg_launch(LG_LEGACY, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1),
                         dim3(32), 0, s, out, tw, (const float *)in, t, (const float *)nullptr, true, N, C, C, IGNORE);
    }
};

const char *text_of(cudaError_t e) { return e == cudaSuccess ? "" : cudaGetErrorString(e); }

} // namespace

int main(int argc, char **argv)
{
    if (argc != 4) usage("wrong arguments");
    std::string scenario = argv[1];
    long before = strtol(argv[2], nullptr, 10), after = strtol(argv[3], nullptr, 10);
    if ((scenario != "eager" && scenario != "graph") || before < 0 || after < 0) usage("bad arguments");
    lg_print_identity();
    model m;
    cudaStreamSynchronize(m.s); // the setup's copies are done: from here on, nothing waits
    cudaGraphExec_t x = nullptr;
    if (scenario == "graph") {
        cudaGraph_t g = nullptr;
        cudaStreamBeginCapture(m.s, cudaStreamCaptureModeGlobal);
        m.loss(m.target);
        if (cudaStreamEndCapture(m.s, &g) != cudaSuccess || cudaGraphInstantiateWithFlags(&x, g, 0) != cudaSuccess) {
            printf("ringfill capture failed\n");
            return 0;
        }
        cudaGraphDestroy(g);
    }
    long steps = before + 1 + after, errors = 0, first = 0;
    cudaError_t first_err = cudaSuccess;
    for (long k = 1; k <= steps; k++) {
        const int64_t *t = k == before + 1 ? m.bad : m.good;
        cudaError_t e;
        if (x) {
            e = cudaMemcpyAsync(m.target, t, N * sizeof(int64_t), cudaMemcpyDeviceToDevice, m.s);
            if (e == cudaSuccess) e = cudaGraphLaunch(x, m.s);
        } else {
            e = m.loss(t);
        }
        if (e != cudaSuccess && !errors++) {
            first = k;
            first_err = e;
        }
    }
    cudaError_t w = cudaStreamSynchronize(m.s);
    cudaError_t last = cudaGetLastError();
    std::string text = text_of(first_err);
    if (text.empty()) text = text_of(w);
    if (text.empty()) text = text_of(last);
    printf("ringfill scenario=%s steps=%ld launch_errors=%ld first_error_step=%ld sync=%d last=%d text=\"%.11s\"\n",
           scenario.c_str(), steps, errors, first, (int)w, (int)last, text.c_str());
    return 0;
}
