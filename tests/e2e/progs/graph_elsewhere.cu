// graph_elsewhere.cu: a loss launch captured into a graph that is then replayed only through
// another graph's exec, as a child graph node's graph or a clone is, for
// tests/e2e/test_graph_elsewhere.sh. The runtime double has no child graph nodes nor
// cudaGraphClone, so "another graph" is an empty one made with cudaGraphCreate, standing for
// the graph that would hold the captured one; labelguard cannot tell the difference, which is
// the point: the exec it sees replaying maps to no checks. (A conditional node's body, the
// other such graph, is captured with cudaStreamBeginCaptureToGraph and gets no host-backend
// check at all: tests/e2e/test_graph_cond.sh.)
//
// usage: graph_elsewhere elsewhere|itself
//   elsewhere  the captured graph is never instantiated; the other graph's exec is replayed
//   itself     control: the captured graph itself is instantiated and replayed
// The labels hold one bad value (9 of 5 classes). Output:
//   capture begin=<err> launch=<err> end=<err> graph=<0|1>   (graph: EndCapture gave a graph)
//   replay instantiate=<err> launch=<err> sync=<err>
#include "torch_kernels.cuh"

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "elsewhere") && strcmp(argv[1], "itself"))) {
        fprintf(stderr, "usage: graph_elsewhere elsewhere|itself\n");
        return 2;
    }
    const int64_t N = 8, C = 5, IGNORE = -100;
    std::vector<float> hin((size_t)(N * C));
    for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
    std::vector<int64_t> hlab((size_t)N);
    for (int64_t i = 0; i < N; i++) hlab[(size_t)i] = i % C;
    hlab[3] = 9;
    float *in, *out, *tw;
    int64_t *lab;
    cudaMalloc((void **)&in, hin.size() * sizeof(float));
    cudaMalloc((void **)&out, sizeof(float));
    cudaMalloc((void **)&tw, sizeof(float));
    cudaMalloc((void **)&lab, hlab.size() * sizeof(int64_t));
    cudaMemcpy(in, hin.data(), hin.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(lab, hlab.data(), hlab.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreate(&s);

    cudaGraph_t body = nullptr, other = nullptr;
    cudaError_t b = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
        <<<1, 32, 0, s>>>(out, tw, in, lab, nullptr, true, N, C, C, IGNORE);
    cudaError_t l = cudaGetLastError();
    cudaError_t e = cudaStreamEndCapture(s, &body);
    printf("capture begin=%d launch=%d end=%d graph=%d\n", (int)b, (int)l, (int)e, body != nullptr);

    cudaGraph_t replayed = body;
    if (!strcmp(argv[1], "elsewhere")) {
        cudaGraphCreate(&other, 0);
        replayed = other;
    }
    cudaGraphExec_t x = nullptr;
    cudaError_t i = cudaGraphInstantiateWithFlags(&x, replayed, 0);
    cudaError_t r = i == cudaSuccess ? cudaGraphLaunch(x, s) : i;
    cudaError_t w = cudaStreamSynchronize(s);
    printf("replay instantiate=%d launch=%d sync=%d\n", (int)i, (int)r, (int)w);
    cudaGetLastError();
    if (x) cudaGraphExecDestroy(x);
    if (other) cudaGraphDestroy(other);
    if (body) cudaGraphDestroy(body);
    return 0;
}
