// threads.cu: many host threads, each on its own stream, launching a watched kernel
// (nll_loss_forward_reduce_cuda_kernel_2d, int64 labels) and an unwatched one (lg_test_add_one)
// in turn, with a bad label at a random position in some launches. Exercises the runtime test
// double and labelguard under concurrency (tests/fakecuda, tests/e2e).
//
// usage: threads [--seed S] [--threads T] [--iters I] [--bad-every K] [--n N] [--classes C]
//                [--stream0 1] [--varied 1]
//   defaults: seed 1, 16 threads, 8 iterations, K=3 (iteration i of thread t has a bad label
//   when (i + t) % K == K - 1; 0: never), N=64 labels, C=10 classes.
//   --stream0 1: every thread launches on the legacy default stream (stream 0), which they then
//   share, as PyTorch's threads do unless they set a stream of their own.
//   --varied 1: the inputs differ per row and class (small integers, so every sum is exact), and
//   each watched loss read back is compared with the loss of the thread's own labels, the bad
//   one ignored (what mask makes of it): a loss computed from another thread's labels is a
//   mismatch, printed as "mismatch thread=<t> iter=<i> want=<v> got=<v>".
// output: fakecudart_identity=..., then one line per launch, in completion order:
//   launch thread=<t> iter=<i> kernel=<watched|unwatched> bad_index=<j|-1> bad_value=<v> launch_err=<e> sync_err=<e> out=<v|->
// and at the end: summary launches=<n> launch_errors=<n> sync_errors=<n> compared=<n> mismatches=<n>
// Exit status 0 when every launch and sync succeeded, 1 otherwise.
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

static std::mutex out_lock;
static std::atomic<int> n_launch{ 0 }, n_lerr{ 0 }, n_serr{ 0 }, n_compared{ 0 }, n_mismatch{ 0 };

// Input of row i, class c under --varied: an integer, so sums are exact in float.
static float varied_input(int i, int c) { return -(float)(1 + (i * 31 + c * 7) % 97); }

static void worker(int t, unsigned seed, int iters, int bad_every, int n, int classes, bool stream0, bool varied)
{
    unsigned rs = seed * 7919u + (unsigned)t;
    cudaStream_t s = 0;
    if (!stream0)
        cudaStreamCreate(&s);
    int64_t *d_t = nullptr;
    float *d_in = nullptr, *d_out = nullptr, *d_tw = nullptr, *d_u = nullptr;
    cudaMalloc((void **)&d_t, n * sizeof(int64_t));
    cudaMalloc((void **)&d_in, (size_t)n * classes * sizeof(float));
    cudaMalloc((void **)&d_out, sizeof(float));
    cudaMalloc((void **)&d_tw, sizeof(float));
    cudaMalloc((void **)&d_u, 4 * sizeof(float));
    std::vector<float> in((size_t)n * classes, -0.5f);
    if (varied)
        for (int i = 0; i < n; i++)
            for (int c = 0; c < classes; c++) in[(size_t)i * classes + c] = varied_input(i, c);
    cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice);
    for (int i = 0; i < iters; i++) {
        std::vector<int64_t> lab((size_t)n);
        for (int k = 0; k < n; k++) lab[(size_t)k] = rand_r(&rs) % classes;
        int bad = -1;
        int64_t bad_value = 0;
        if (bad_every > 0 && (i + t) % bad_every == bad_every - 1) {
            bad = rand_r(&rs) % n;
            bad_value = classes + rand_r(&rs) % 5;
            lab[(size_t)bad] = bad_value;
        }
        cudaMemcpyAsync(d_t, lab.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, s);
        if (varied) { // a launch that does not run leaves NaN: not compared
            const float nan = NAN;
            cudaMemcpyAsync(d_out, &nan, sizeof nan, cudaMemcpyHostToDevice, s);
        }
        for (int which = 0; which < 2; which++) {
            cudaError_t le;
            if (which == 0)
                le = lg_launch(LG_DEFAULT_MODE, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1),
                               dim3(32), 0, s, d_out, d_tw, (const float *)d_in, (const int64_t *)d_t, (const float *)nullptr, true,
                               (int64_t)n, (int64_t)classes, (int64_t)classes, (int64_t)-100);
            else
                le = lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, s, d_u, 4);
            cudaError_t se = cudaStreamSynchronize(s);
            float out = 0;
            // async raise: a verdict is delivered at a later synchronizing call (800, not sticky),
            // and that call still waited for the stream: the loss can be read back after it too
            bool synced = se == cudaSuccess || se == cudaErrorNotPermitted;
            cudaError_t re = which == 0 && synced ? cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost) : cudaErrorNotReady;
            if (re == cudaErrorNotPermitted) // the next verdict came with the copy, which still ran
                re = cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost);
            n_launch++;
            if (le) n_lerr++;
            if (se) n_serr++;
            std::lock_guard<std::mutex> g(out_lock);
            // async raise: the launch ran on the sanitized copy, and its error may come back
            // from this very launch's cudaGetLastError; what decides is that the loss was written
            if (varied && which == 0 && re == cudaSuccess && !std::isnan(out)) {
                // the loss of this thread's own labels, the bad one ignored (ignore_index)
                float sum = 0, cnt = 0;
                for (int k = 0; k < n; k++)
                    if (k != bad) { sum -= in[(size_t)k * classes + lab[(size_t)k]]; cnt += 1; }
                float want = sum / cnt;
                n_compared++;
                if (want != out) {
                    n_mismatch++;
                    printf("mismatch thread=%d iter=%d want=%.6g got=%.6g\n", t, i, want, out);
                }
            }
            printf("launch thread=%d iter=%d kernel=%s bad_index=%d bad_value=%lld launch_err=%d sync_err=%d out=", t, i,
                   which == 0 ? "watched" : "unwatched", which == 0 ? bad : -1, which == 0 ? (long long)bad_value : 0LL, (int)le, (int)se);
            if (re == cudaSuccess) printf("%.6g\n", out);
            else printf("-\n");
        }
    }
    cudaFree(d_t); cudaFree(d_in); cudaFree(d_out); cudaFree(d_tw); cudaFree(d_u);
    if (!stream0)
        cudaStreamDestroy(s);
}

int main(int argc, char **argv)
{
    unsigned seed = 1;
    int threads = 16, iters = 8, bad_every = 3, n = 64, classes = 10, stream0 = 0, varied = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) { fprintf(stderr, "threads: missing value for %s\n", argv[i]); return 2; }
        const char *v = argv[++i];
        if (!strcmp(argv[i - 1], "--seed")) seed = (unsigned)atoi(v);
        else if (!strcmp(argv[i - 1], "--threads")) threads = atoi(v);
        else if (!strcmp(argv[i - 1], "--iters")) iters = atoi(v);
        else if (!strcmp(argv[i - 1], "--bad-every")) bad_every = atoi(v);
        else if (!strcmp(argv[i - 1], "--n")) n = atoi(v);
        else if (!strcmp(argv[i - 1], "--classes")) classes = atoi(v);
        else if (!strcmp(argv[i - 1], "--stream0")) stream0 = atoi(v);
        else if (!strcmp(argv[i - 1], "--varied")) varied = atoi(v);
        else { fprintf(stderr, "threads: unknown option %s\n", argv[i - 1]); return 2; }
    }
    if (threads < 1 || n < 1 || classes < 1) { fprintf(stderr, "threads: bad value\n"); return 2; }
    lg_print_identity();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) ts.emplace_back(worker, t, seed, iters, bad_every, n, classes, stream0 != 0, varied != 0);
    for (auto &th : ts) th.join();
    printf("summary launches=%d launch_errors=%d sync_errors=%d compared=%d mismatches=%d\n", n_launch.load(),
           n_lerr.load(), n_serr.load(), n_compared.load(), n_mismatch.load());
    return n_lerr.load() || n_serr.load() ? 1 : 0;
}
