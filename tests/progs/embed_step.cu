// embed_step.cu: one nn.Embedding training step as PyTorch runs it, on the ids you give, over a
// float table of ROWS rows of 4 values (row r holds r*100 + column): the forward
// index_select(weight, 0, ids) (indexSelectSmallIndex, PyTorch's name and layout from
// torch_index_kernels.cuh), a "loss" kernel on the same thread, then the backward
// embedding_backward_feature_kernel (declared below as Embedding.cu declares it), which adds
// each id's gradient row into grad_weight at that id, unchecked, launched from a second thread
// as autograd's engine does. A bad id that reaches the backward is an out-of-bounds write (the
// test double's emulation reports it, tests/fakecuda/index_backward.c).
// Built as build/progs/embed_step (and _legacy, _ptsz). Used by tests/e2e/test_index_backward.sh.
//
// usage: embed_step eager|graph [--rows R] ID...
//   eager  the three launches on one stream; each launch's error is checked as PyTorch's
//          C10_CUDA_KERNEL_LAUNCH_CHECK does, and the step stops at the first (Python raises)
//   graph  the three captured into one CUDA graph (global mode) with good ids in the buffer,
//          instantiated; then the ids are copied into the captured buffer and the graph
//          replayed once (a captured training step, torch.cuda.graph / CUDAGraph.replay)
// output (stdout), one fact per line:
//   forward launch_err=N, loss launch_err=N, backward launch_err=N   (eager; those that ran)
//   capture end=N instantiate=N replay=N                             (graph)
//   stopped_at=forward|loss|backward|none
//   sync err=N last_err=N
//   rows n=<ids> <row read for each id>   (the forward's output, when it can be read)
// Exit status: 0 when the step ran and synchronised cleanly, 1 otherwise, 2 on bad usage.
#include "torch_index_kernels.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <string>
#include <vector>

namespace at {
namespace native {
namespace {

// Embedding.cu: grid over the feature dimension; every id's gradient row is added into
// grad_weight at row (int)id, padding_idx skipped. No bounds check.
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void embedding_backward_feature_kernel(const index_t *indices, const scalar_t *__restrict__ grad,
                                                  scalar_t *__restrict__ grad_weight, int n, int64_t stride,
                                                  int padding_idx)
{
    const int f = threadIdx.x + blockIdx.x * blockDim.x;
    if (f >= stride || threadIdx.y != 0) return;
    for (int i = 0; i < n; i++) {
        const int row = (int)indices[i];
        if (row != padding_idx) atomicAdd(&grad_weight[(int64_t)row * stride + f], (accscalar_t)grad[(int64_t)i * stride + f]);
    }
}

} // namespace
} // namespace native
} // namespace at

// The loss: any kernel of the forward after the embedding (a reduction in PyTorch).
__global__ void lg_step_loss(const float *out, float *loss, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        float s = 0;
        for (int i = 0; i < n; i++) s += out[i];
        *loss = s;
    }
}

namespace {

constexpr int D = 4;

struct step {
    int64_t rows = 10;
    std::vector<int64_t> ids;
    cudaStream_t s = nullptr;
    float *weight = nullptr, *out = nullptr, *loss = nullptr, *grad_out = nullptr, *grad_weight = nullptr;
    int64_t *d_ids = nullptr;
};

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "embed_step: %s\n(see the comment at the top of tests/progs/embed_step.cu)\n", why);
    exit(2);
}

at::cuda::detail::TensorInfo<float, unsigned> info2(float *data, unsigned rows)
{
    at::cuda::detail::TensorInfo<float, unsigned> t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dims = 2;
    t.sizes[0] = rows;
    t.sizes[1] = D;
    t.strides[0] = D;
    t.strides[1] = 1;
    return t;
}

cudaError_t forward(step &st)
{
    const unsigned n = (unsigned)st.ids.size();
    auto dst = info2(st.out, 1);
    at::cuda::detail::TensorInfo<const float, unsigned> src;
    memcpy(&src, &dst, sizeof src);
    src.data = st.weight;
    at::cuda::detail::TensorInfo<const int64_t, unsigned> ind;
    memset(&ind, 0, sizeof ind);
    ind.data = st.d_ids;
    ind.dims = 1;
    ind.sizes[0] = n;
    ind.strides[0] = 1;
    at::native::indexSelectSmallIndex<float, int64_t, unsigned, 2, 2, -2>
        <<<1, 32, 0, st.s>>>(dst, src, ind, 0, 0, (unsigned)D, st.rows);
    return cudaGetLastError();
}

cudaError_t loss(step &st)
{
    lg_step_loss<<<1, 32, 0, st.s>>>(st.out, st.loss, (int)st.ids.size() * D);
    return cudaGetLastError();
}

cudaError_t backward(step &st)
{
    at::native::embedding_backward_feature_kernel<float, float, int64_t>
        <<<1, dim3(32, 32), 0, st.s>>>(st.d_ids, st.grad_out, st.grad_weight, (int)st.ids.size(), (int64_t)D, -1);
    return cudaGetLastError();
}

// autograd's engine: the backward runs on a thread of its own.
struct backward_job {
    step *st;
    cudaError_t err;
};

void *backward_thread(void *arg)
{
    auto *j = static_cast<backward_job *>(arg);
    j->err = backward(*j->st);
    return nullptr;
}

const char *run_eager(step &st)
{
    cudaError_t e = forward(st);
    printf("forward launch_err=%d\n", (int)e);
    if (e != cudaSuccess) return "forward";
    e = loss(st);
    printf("loss launch_err=%d\n", (int)e);
    if (e != cudaSuccess) return "loss";
    backward_job j = {&st, cudaSuccess};
    pthread_t t;
    if (pthread_create(&t, nullptr, backward_thread, &j) != 0) usage("pthread_create failed");
    pthread_join(t, nullptr);
    printf("backward launch_err=%d\n", (int)j.err);
    return j.err != cudaSuccess ? "backward" : "none";
}

const char *run_graph(step &st, const std::vector<int64_t> &good)
{
    cudaMemcpy(st.d_ids, good.data(), good.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal);
    cudaError_t fe = forward(st), le = loss(st), be = backward(st);
    cudaError_t end = cudaStreamEndCapture(st.s, &g);
    cudaError_t inst = end == cudaSuccess ? cudaGraphInstantiate(&x, g, 0) : end;
    // the batch's ids, copied into the captured buffer as PyTorch's static inputs are
    cudaMemcpy(st.d_ids, st.ids.data(), st.ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaError_t rep = inst == cudaSuccess ? cudaGraphLaunch(x, st.s) : inst;
    printf("capture launches=%d,%d,%d end=%d instantiate=%d replay=%d\n", (int)fe, (int)le, (int)be, (int)end, (int)inst,
           (int)rep);
    return rep != cudaSuccess ? "replay" : "none";
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) usage("missing eager|graph");
    std::string mode = argv[1];
    if (mode != "eager" && mode != "graph") usage("mode is eager or graph");
    step st;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--rows" && i + 1 < argc) st.rows = strtoll(argv[++i], nullptr, 10);
        else st.ids.push_back(strtoll(a.c_str(), nullptr, 10));
    }
    if (st.ids.empty() || st.ids.size() > 16) usage("1 to 16 ids");
    if (st.rows < 1) usage("bad --rows");
    const size_t n = st.ids.size();
    std::vector<float> table((size_t)st.rows * D), ones(n * D, 1.0f);
    for (int64_t r = 0; r < st.rows; r++)
        for (int c = 0; c < D; c++) table[(size_t)(r * D + c)] = (float)(r * 100 + c);
    std::vector<int64_t> good(n);
    for (size_t k = 0; k < n; k++) good[k] = (int64_t)k % st.rows;
    cudaStreamCreate(&st.s);
    cudaMalloc((void **)&st.weight, table.size() * sizeof(float));
    cudaMalloc((void **)&st.grad_weight, table.size() * sizeof(float));
    cudaMalloc((void **)&st.out, n * D * sizeof(float));
    cudaMalloc((void **)&st.grad_out, n * D * sizeof(float));
    cudaMalloc((void **)&st.loss, sizeof(float));
    cudaMalloc((void **)&st.d_ids, n * sizeof(int64_t));
    cudaMemcpy(st.weight, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(st.grad_out, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(st.d_ids, st.ids.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaMemset(st.grad_weight, 0, table.size() * sizeof(float));
    cudaMemset(st.out, 0, n * D * sizeof(float));

    const char *stopped = mode == "eager" ? run_eager(st) : run_graph(st, good);
    printf("stopped_at=%s\n", stopped);
    cudaError_t sync = cudaStreamSynchronize(st.s);
    cudaError_t last = cudaGetLastError();
    printf("sync err=%d last_err=%d\n", (int)sync, (int)last);
    std::vector<float> out(n * D);
    if (cudaMemcpy(out.data(), st.out, out.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess) {
        printf("rows n=%zu", n);
        for (size_t k = 0; k < n; k++) printf(" %g", out[k * D] / 100.0f);
        printf("\n");
    }
    fflush(stdout);
    return strcmp(stopped, "none") == 0 && sync == cudaSuccess ? 0 : 1;
}
