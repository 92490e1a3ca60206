// delivery.cu: how labelguard's error reaches a program that uses CUDA the way a training loop
// does, beyond a plain launch-and-sync: a graph replay followed by other work, an error that
// a call returned and the program ignored, and a bad step still unread when the process exits.
// Built as build/progs/delivery (<<<>>>), delivery_legacy and delivery_ptsz. Used by
// tests/e2e/test_delivery_steps.sh under the runtime test double.
//
// usage: delivery SCENARIO [--batches LETTERS] [--opt kernel|graph|peek] [--sync step|end] [--host-us N]
//   step       a loss step captured into a graph; per letter of --batches (g: good labels, b:
//              label 3 is 9, out of range) the batch is copied into the static target, the graph
//              replayed, then the "optimizer" runs (--opt kernel: one kernel launched with <<<>>>
//              and checked with cudaGetLastError, as C10_CUDA_KERNEL_LAUNCH_CHECK does; graph: a
//              second graph replayed, as a captured optimizer step is; peek: cudaPeekAtLastError,
//              then the kernel), then the stream is synchronized and cudaGetLastError read
//              (--sync end: no synchronization between steps, as a loop that reads the loss
//              only now and then; the last step synchronizes). --host-us N: N µs of host work
//              after each step (loading the next batch), so that a device that runs behind
//              the host catches up between steps.
//   lasterr    a bad loss launch through cudaLaunchKernel (return value only, no error query),
//              then a blocking cudaMemcpy whose return value the program ignores, a stream
//              synchronization, cudaPeekAtLastError twice and cudaGetLastError twice
//   exitlive   a second thread makes a bad loss launch (async mode: its verdict is read later)
//              and stays alive; the main thread calls exit(0) without any synchronization
//   exitgraph  the same with a captured loss step replayed on a bad batch by the second thread
//   implicit   the loss kernel launched on the legacy default stream while a blocking stream
//              captures (CUDA refuses it, and cudaStreamIsCapturing of that stream fails)
//
// output:
//   fakecudart_identity=<fakecuda|none>
//   step k=<k> batch=<c> replay=<err> opt=<err> sync=<err> last=<err> text="<first 11 chars>"
//     (text: cudaGetErrorString of the first error of the step, read right away; "" when none)
//   lasterr launch=<err> memcpy=<err> sync=<err> peek=<err>,<err> last=<err>,<err> text="<11>"
//   exit launch=<err>      (then the process exits)
//   implicit begin=<err> launch=<err> end=<err>
// Exit status 0 unless usage is wrong (2).
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const int64_t N = 8, C = 5, IGNORE = -100;

__global__ void optimizer_kernel(float *w, int n)
{
    if (w && threadIdx.x == 0 && blockIdx.x == 0)
        w[0] -= 0.1f * (float)n;
}

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "delivery: %s\n", why);
    exit(2);
}

template <typename T> T *dev_copy(const std::vector<T> &v)
{
    T *p = nullptr;
    if (cudaMalloc((void **)&p, v.size() * sizeof(T)) != cudaSuccess) return nullptr;
    cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

std::vector<int64_t> batch(char kind)
{
    std::vector<int64_t> b((size_t)N);
    for (int64_t i = 0; i < N; i++) b[(size_t)i] = i % C;
    if (kind == 'b') b[3] = 9;
    return b;
}

struct model {
    cudaStream_t s = nullptr;
    float *in, *out, *tw, *w;
    int64_t *target, *good, *bad;
    model()
    {
        std::vector<float> hin((size_t)(N * C));
        for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
        in = dev_copy(hin);
        out = dev_copy(std::vector<float>(1, 0.0f));
        tw = dev_copy(std::vector<float>(1, 0.0f));
        w = dev_copy(std::vector<float>(1, 1.0f));
        target = dev_copy(batch('g'));
        good = dev_copy(batch('g'));
        bad = dev_copy(batch('b'));
        cudaStreamCreate(&s);
    }
    cudaError_t loss(lg_launch_mode m, cudaStream_t st, const int64_t *t)
    {
        return lg_launch(m, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1), dim3(32),
                         0, st, out, tw, (const float *)in, t, (const float *)nullptr, true, N, C, C, IGNORE);
    }
    void copy_batch(char kind)
    {
        cudaMemcpyAsync(target, kind == 'b' ? bad : good, N * sizeof(int64_t), cudaMemcpyDeviceToDevice, s);
    }
};

cudaGraphExec_t capture(model &m, bool optimizer)
{
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    cudaStreamBeginCapture(m.s, cudaStreamCaptureModeGlobal);
    if (optimizer) optimizer_kernel<<<1, 1, 0, m.s>>>(m.w, 1);
    else m.loss(LG_DEFAULT_MODE, m.s, m.target);
    if (cudaStreamEndCapture(m.s, &g) != cudaSuccess) return nullptr;
    if (cudaGraphInstantiateWithFlags(&x, g, 0) != cudaSuccess) x = nullptr;
    cudaGraphDestroy(g);
    return x;
}

const char *text_of(cudaError_t e) { return e == cudaSuccess ? "" : cudaGetErrorString(e); }

int run_step(const std::string &batches, const std::string &opt, bool sync_each, long host_us)
{
    model m;
    cudaGraphExec_t x = capture(m, false);
    cudaGraphExec_t ox = opt == "graph" ? capture(m, true) : nullptr;
    if (!x || (opt == "graph" && !ox)) { printf("step capture failed\n"); return 0; }
    for (size_t k = 0; k < batches.size(); k++) {
        m.copy_batch(batches[k]);
        cudaError_t r = cudaGraphLaunch(x, m.s);
        std::string text = text_of(r);
        cudaError_t o;
        if (opt == "graph") {
            o = cudaGraphLaunch(ox, m.s);
        } else {
            if (opt == "peek") (void)cudaPeekAtLastError();
            optimizer_kernel<<<1, 1, 0, m.s>>>(m.w, (int)k);
            o = cudaGetLastError();
        }
        if (text.empty()) text = text_of(o);
        cudaError_t w = sync_each || k + 1 == batches.size() ? cudaStreamSynchronize(m.s) : cudaSuccess;
        if (text.empty()) text = text_of(w);
        cudaError_t last = cudaGetLastError();
        if (text.empty()) text = text_of(last);
        printf("step k=%zu batch=%c replay=%d opt=%d sync=%d last=%d text=\"%.11s\"\n", k + 1, batches[k], (int)r, (int)o,
               (int)w, (int)last, text.c_str());
        fflush(stdout);
        if (host_us > 0) usleep((useconds_t)host_us);
    }
    return 0;
}

int run_lasterr()
{
    model m;
    cudaError_t l = m.loss(LG_LEGACY, m.s, m.bad);
    float v = 0;
    cudaError_t c = cudaMemcpy(&v, m.out, sizeof v, cudaMemcpyDeviceToHost); // return value "ignored"
    cudaError_t w = cudaStreamSynchronize(m.s);
    cudaError_t p1 = cudaPeekAtLastError();
    cudaError_t p2 = cudaPeekAtLastError();
    cudaError_t g1 = cudaGetLastError();
    std::string text = text_of(g1);
    cudaError_t g2 = cudaGetLastError();
    printf("lasterr launch=%d memcpy=%d sync=%d peek=%d,%d last=%d,%d text=\"%.11s\"\n", (int)l, (int)c, (int)w, (int)p1,
           (int)p2, (int)g1, (int)g2, text.c_str());
    return 0;
}

struct live_arg { model *m; cudaGraphExec_t x; pthread_barrier_t *bar; cudaError_t launch; };
void *live_thread(void *p)
{
    live_arg *a = (live_arg *)p;
    if (a->x) {
        a->m->copy_batch('b');
        a->launch = cudaGraphLaunch(a->x, a->m->s);
    } else {
        a->launch = a->m->loss(LG_LEGACY, a->m->s, a->m->bad);
    }
    pthread_barrier_wait(a->bar);
    for (;;) pause(); // alive until the process exits, as PyTorch's autograd threads are
    return nullptr;
}

int run_exitlive(bool graph)
{
    model m;
    cudaGraphExec_t x = graph ? capture(m, false) : nullptr;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, nullptr, 2);
    live_arg a = {&m, x, &bar, cudaSuccess};
    pthread_t th;
    pthread_create(&th, nullptr, live_thread, &a);
    pthread_barrier_wait(&bar);
    printf("exit launch=%d\n", (int)a.launch);
    fflush(stdout);
    exit(0);
}

int run_implicit()
{
    model m;
    cudaGraph_t g = nullptr;
    cudaError_t b = cudaStreamBeginCapture(m.s, cudaStreamCaptureModeRelaxed);
    cudaError_t l = m.loss(LG_LEGACY, (cudaStream_t)0, m.bad);
    cudaError_t e = cudaStreamEndCapture(m.s, &g);
    cudaGetLastError();
    printf("implicit begin=%d launch=%d end=%d\n", (int)b, (int)l, (int)e);
    if (g) cudaGraphDestroy(g);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    std::string scenario, batches = "gbgb", opt = "kernel", sync = "step";
    long host_us = 0;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--batches" && i + 1 < argc) batches = argv[++i];
        else if (a == "--opt" && i + 1 < argc) opt = argv[++i];
        else if (a == "--sync" && i + 1 < argc) sync = argv[++i];
        else if (a == "--host-us" && i + 1 < argc) host_us = strtol(argv[++i], nullptr, 10);
        else if (a[0] == '-') usage("unknown option");
        else scenario = a;
    }
    if (opt != "kernel" && opt != "graph" && opt != "peek") usage("bad --opt");
    if (sync != "step" && sync != "end") usage("bad --sync");
    lg_print_identity();
    if (scenario == "step") return run_step(batches, opt, sync == "step", host_us);
    if (scenario == "lasterr") return run_lasterr();
    if (scenario == "exitlive") return run_exitlive(false);
    if (scenario == "exitgraph") return run_exitlive(true);
    if (scenario == "implicit") return run_implicit();
    usage("unknown scenario");
}
