// graph_into.cu: two graphs, each captured into with cudaStreamBeginCaptureToGraph (as torch
// 2.15 captures torch.cond / while_loop bodies, here into graphs of the program's own), each
// holding one NLL forward that reads its own static target and writes its own loss, then
// replayed on two streams, alternately and repeatedly, each round's batches copied into the
// static targets first. Every replay's loss must equal the eager loss of its batch (the same
// kernel launched directly, before the capture). For tests/e2e/test_graph_into.sh.
//
// usage: graph_into [--rounds R] [--bad G:K]
//   Graph a is made with cudaGraphCreate and captured into on stream a, its capture ended with
//   a NULL pGraph (what PyTorch and CUDA's samples do); graph b likewise on stream b, ended with
//   &got (CUDA hands back the graph captured into). Round k (from 0) gives graph a the batch of
//   shift k % 2 and graph b the batch of shift 2 + k % 2 (labels (i + shift) % 5); --bad b:3
//   makes graph b's batch of round 3 bad (label 3 is 9, of 5 classes), whose eager reference is
//   the same batch with label 3 ignored (-100): what mask makes of it. Both replays of a round
//   are launched before either is waited for.
// Output:
//   capture a id=<capture id> begin=<err> launch=<err> end=<err> got=<null|same|other>
//   capture b id=<capture id> begin=<err> launch=<err> end=<err> got=<null|same|other>
//   instantiate a=<err> b=<err> stream_b=<0x... the handle of stream b>
//   round k=<k> a=<loss> eager_a=<loss> b=<loss> eager_b=<loss> launch=<err> wait=<err>
//   into rounds=<R> mismatches=<replays whose loss differs from eager> errors=<calls that failed>
// Exit status 0 unless usage is wrong (2).
#include "torch_kernels.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

const int64_t N = 8, C = 5, IGNORE = -100;
const int SHIFTS = 4;

struct graph_side {
    cudaStream_t s = nullptr;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    int64_t *target = nullptr; // the static target the captured launch reads
    float *out = nullptr, *tw = nullptr;
    unsigned long long id = 0;
};

std::vector<int64_t> batch(int shift, bool bad, bool ignored)
{
    std::vector<int64_t> v((size_t)N);
    for (int64_t i = 0; i < N; i++) v[(size_t)i] = (i + shift) % C;
    if (bad) v[3] = 9;
    if (ignored) v[3] = IGNORE;
    return v;
}

int64_t *dev_labels(const std::vector<int64_t> &v)
{
    int64_t *d = nullptr;
    cudaMalloc((void **)&d, v.size() * sizeof(int64_t));
    cudaMemcpy(d, v.data(), v.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    return d;
}

void nll(cudaStream_t s, float *out, float *tw, const float *in, const int64_t *lab)
{
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
        <<<1, 32, 0, s>>>(out, tw, in, lab, nullptr, true, N, C, C, IGNORE);
}

// The eager loss of labels `lab` on stream s: the kernel launched directly, its loss read back.
float eager(cudaStream_t s, const float *in, const int64_t *lab, float *out, float *tw)
{
    nll(s, out, tw, in, lab);
    float v = NAN;
    cudaMemcpyAsync(&v, out, sizeof v, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    return v;
}

const char *got_name(cudaGraph_t got, cudaGraph_t g) { return !got ? "null" : got == g ? "same" : "other"; }

} // namespace

int main(int argc, char **argv)
{
    int rounds = 6;
    char bad_graph = 0;
    int bad_round = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--bad") && i + 1 < argc && (argv[i + 1][0] == 'a' || argv[i + 1][0] == 'b') &&
                   argv[i + 1][1] == ':') {
            bad_graph = argv[++i][0];
            bad_round = atoi(argv[i] + 2);
        } else {
            fprintf(stderr, "usage: graph_into [--rounds R] [--bad a|b:K]\n");
            return 2;
        }
    }
    std::vector<float> hin((size_t)(N * C));
    for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
    float *in = nullptr;
    cudaMalloc((void **)&in, hin.size() * sizeof(float));
    cudaMemcpy(in, hin.data(), hin.size() * sizeof(float), cudaMemcpyHostToDevice);
    // The batches, on the device: shift 0..3 good, and each shift's bad and ignored variants.
    int64_t *good[SHIFTS], *bad[SHIFTS];
    float ref[SHIFTS], ref_bad[SHIFTS];
    graph_side side[2];
    int errors = 0;
    for (auto &g : side) {
        cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking);
        cudaMalloc((void **)&g.out, sizeof(float));
        cudaMalloc((void **)&g.tw, sizeof(float));
        cudaMalloc((void **)&g.target, N * sizeof(int64_t));
    }
    for (int k = 0; k < SHIFTS; k++) {
        good[k] = dev_labels(batch(k, false, false));
        bad[k] = dev_labels(batch(k, true, false));
        int64_t *ign = dev_labels(batch(k, false, true));
        ref[k] = eager(side[0].s, in, good[k], side[0].out, side[0].tw);
        ref_bad[k] = eager(side[1].s, in, ign, side[1].out, side[1].tw);
        cudaFree(ign);
    }

    for (int i = 0; i < 2; i++) {
        graph_side &g = side[i];
        errors += cudaGraphCreate(&g.g, 0) != cudaSuccess;
        cudaError_t b = cudaStreamBeginCaptureToGraph(g.s, g.g, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal);
        cudaStreamCaptureStatus st;
        if (cudaStreamGetCaptureInfo(g.s, &st, &g.id, nullptr, nullptr, nullptr, nullptr) != cudaSuccess) g.id = 0;
        nll(g.s, g.out, g.tw, in, g.target);
        cudaError_t l = cudaGetLastError();
        cudaGraph_t got = nullptr;
        cudaError_t e = cudaStreamEndCapture(g.s, i == 0 ? nullptr : &got);
        printf("capture %c id=%llu begin=%d launch=%d end=%d got=%s\n", 'a' + i, g.id, (int)b, (int)l, (int)e,
               got_name(got, g.g));
        errors += b != cudaSuccess || l != cudaSuccess || e != cudaSuccess;
    }
    cudaError_t ia = cudaGraphInstantiateWithFlags(&side[0].x, side[0].g, 0);
    cudaError_t ib = cudaGraphInstantiateWithFlags(&side[1].x, side[1].g, 0);
    printf("instantiate a=%d b=%d stream_b=%p\n", (int)ia, (int)ib, (void *)side[1].s);
    errors += ia != cudaSuccess || ib != cudaSuccess;
    if (ia || ib) {
        printf("into rounds=0 mismatches=0 errors=%d\n", errors);
        return 0;
    }

    float *pinned = nullptr;
    cudaMallocHost((void **)&pinned, 2 * sizeof(float));
    int mismatches = 0;
    for (int r = 0; r < rounds; r++) {
        float want[2];
        cudaError_t launch = cudaSuccess, wait = cudaSuccess;
        for (int i = 0; i < 2; i++) {
            graph_side &g = side[i];
            int shift = (i == 0 ? 0 : 2) + r % 2;
            bool is_bad = bad_graph == 'a' + i && bad_round == r;
            want[i] = is_bad ? ref_bad[shift] : ref[shift];
            pinned[i] = NAN;
            cudaMemcpyAsync(g.target, is_bad ? bad[shift] : good[shift], N * sizeof(int64_t),
                            cudaMemcpyDeviceToDevice, g.s);
            cudaError_t e = cudaGraphLaunch(g.x, g.s);
            if (e != cudaSuccess && launch == cudaSuccess) launch = e;
            cudaMemcpyAsync(&pinned[i], g.out, sizeof(float), cudaMemcpyDeviceToHost, g.s);
        }
        for (int i = 0; i < 2; i++) {
            cudaError_t e = cudaStreamSynchronize(side[i].s);
            if (e != cudaSuccess && wait == cudaSuccess) wait = e;
        }
        for (int i = 0; i < 2; i++) mismatches += !(std::fabs(pinned[i] - want[i]) < 1e-5f);
        errors += launch != cudaSuccess || wait != cudaSuccess;
        printf("round k=%d a=%g eager_a=%g b=%g eager_b=%g launch=%d wait=%d\n", r, pinned[0], want[0], pinned[1],
               want[1], (int)launch, (int)wait);
    }
    cudaGetLastError();
    printf("into rounds=%d mismatches=%d errors=%d\n", rounds, mismatches, errors);
    for (auto &g : side) {
        cudaGraphExecDestroy(g.x);
        cudaGraphDestroy(g.g);
    }
    return 0;
}
