// graph_cond.cu: a loss launch captured into a conditional node's body, as torch 2.15 captures
// torch.cond / while_loop: the parent graph is captured with cudaStreamBeginCapture, an IF node
// is added to it (cudaGraphConditionalHandleCreate, cudaGraphAddNode, then
// cudaStreamUpdateCaptureDependencies), and the body is captured on a second stream with
// cudaStreamBeginCaptureToGraph. CUDA accepts no host node in a body, so a check that needs
// one must not be captured there. For tests/e2e/test_graph_cond.sh.
//
// usage: graph_cond cond|plain|late|hostfn good|bad
//   cond    the NLL forward inside the IF body (condition: default 1, applied at each launch)
//   plain   control: the same launch captured straight into the parent graph
//   late    as plain, but the capture begins before labelguard is armed: the program dlopens
//           $LG_LATE_LIB and calls labelguard_arm() (as `labelguard attach`) inside the capture
//           and prints "late armed=<1|0|-1>"
//   hostfn  the rule itself: a cudaLaunchHostFunc inside the body (the launch is not made)
//   good|bad  the labels: all valid, or one 9 of 5 classes
// Output:
//   capture begin=<err> body_begin=<err> launch=<err> body_end=<err> end=<err>
//   replay instantiate=<err> launch=<err> sync=<err> loss_ok=<0|1>
// (plain: body_begin and body_end are 0, nothing is captured to a body; loss_ok: the replay
// computed the loss of the labels, so the launch ran.)
#include "torch_kernels.cuh"

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

static void host_fn(void *) {}

int main(int argc, char **argv)
{
    if (argc != 3 ||
        (strcmp(argv[1], "cond") && strcmp(argv[1], "plain") && strcmp(argv[1], "late") && strcmp(argv[1], "hostfn")) ||
        (strcmp(argv[2], "good") && strcmp(argv[2], "bad"))) {
        fprintf(stderr, "usage: graph_cond cond|plain|late|hostfn good|bad\n");
        return 2;
    }
    const bool late = !strcmp(argv[1], "late");
    const bool plain = late || !strcmp(argv[1], "plain"), hostfn = !strcmp(argv[1], "hostfn");
    const int64_t N = 8, C = 5, IGNORE = -100;
    std::vector<float> hin((size_t)(N * C));
    for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
    std::vector<int64_t> hlab((size_t)N);
    double expect = 0;
    for (int64_t i = 0; i < N; i++) {
        hlab[(size_t)i] = i % C;
        expect += (double)(i * C + i % C + 1) / 4.0 / (double)N;
    }
    if (!strcmp(argv[2], "bad")) hlab[3] = 9;
    float *in, *out, *tw, *scratch;
    int64_t *lab;
    cudaMalloc((void **)&in, hin.size() * sizeof(float));
    cudaMalloc((void **)&out, sizeof(float));
    cudaMalloc((void **)&tw, sizeof(float));
    cudaMalloc((void **)&scratch, 4 * sizeof(float));
    cudaMalloc((void **)&lab, hlab.size() * sizeof(int64_t));
    cudaMemcpy(in, hin.data(), hin.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(lab, hlab.data(), hlab.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, sizeof(float));
    cudaStream_t s, s2;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);

    cudaGraph_t parent = nullptr, got = nullptr;
    cudaError_t b = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    lg_test_add_one<<<1, 1, 0, s>>>(scratch, 4); // an unwatched kernel before the conditional node
    cudaError_t bb = cudaSuccess, l = cudaSuccess, be = cudaSuccess;
    if (late) {
        const char *lib = getenv("LG_LATE_LIB");
        void *h = lib ? dlopen(lib, RTLD_NOW) : nullptr;
        int (*arm)(void) = h ? (int (*)(void))dlsym(h, "labelguard_arm") : nullptr;
        printf("late armed=%d\n", arm ? arm() > 0 : -1);
    }
    if (plain) {
        at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
            <<<1, 32, 0, s>>>(out, tw, in, lab, nullptr, true, N, C, C, IGNORE);
        l = cudaGetLastError();
    } else {
        cudaStreamCaptureStatus st;
        cudaGraph_t capturing = nullptr;
        const cudaGraphNode_t *deps = nullptr;
        size_t ndeps = 0;
        cudaError_t q = cudaStreamGetCaptureInfo(s, &st, nullptr, &capturing, &deps, nullptr, &ndeps);
        cudaGraphConditionalHandle h = 0;
        cudaError_t hc = cudaGraphConditionalHandleCreate(&h, capturing, 1, cudaGraphCondAssignDefault);
        static unsigned char pbuf[sizeof(cudaGraphNodeParams)] __attribute__((aligned(16))); // zeroed
        cudaGraphNodeParams &p = *reinterpret_cast<cudaGraphNodeParams *>(pbuf);
        p.type = cudaGraphNodeTypeConditional;
        p.conditional.handle = h;
        p.conditional.type = cudaGraphCondTypeIf;
        p.conditional.size = 1;
        cudaGraphNode_t node = nullptr;
        cudaError_t an = cudaGraphAddNode(&node, capturing, deps, nullptr, ndeps, &p);
        cudaError_t ud = cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies);
        if (q || hc || an || ud) {
            printf("setup info=%d handle=%d add=%d deps=%d\n", (int)q, (int)hc, (int)an, (int)ud);
            return 1;
        }
        cudaGraph_t body = p.conditional.phGraph_out[0], body_got = nullptr;
        bb = cudaStreamBeginCaptureToGraph(s2, body, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal);
        if (hostfn) {
            l = cudaLaunchHostFunc(s2, host_fn, nullptr);
        } else {
            at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>
                <<<1, 32, 0, s2>>>(out, tw, in, lab, nullptr, true, N, C, C, IGNORE);
            l = cudaGetLastError();
        }
        be = cudaStreamEndCapture(s2, &body_got);
        cudaGetLastError();
    }
    cudaError_t e = cudaStreamEndCapture(s, &parent);
    cudaGetLastError();
    printf("capture begin=%d body_begin=%d launch=%d body_end=%d end=%d\n", (int)b, (int)bb, (int)l, (int)be, (int)e);

    cudaGraphExec_t x = nullptr;
    cudaError_t i = parent ? cudaGraphInstantiateWithFlags(&x, parent, 0) : cudaErrorInvalidValue;
    cudaError_t r = i == cudaSuccess ? cudaGraphLaunch(x, s) : i;
    cudaError_t w = cudaStreamSynchronize(s);
    float loss = 0;
    cudaMemcpy(&loss, out, sizeof loss, cudaMemcpyDeviceToHost);
    printf("replay instantiate=%d launch=%d sync=%d loss_ok=%d\n", (int)i, (int)r, (int)w,
           std::fabs((double)loss - expect) < 1e-3);
    cudaGetLastError();
    if (x) cudaGraphExecDestroy(x);
    if (parent) cudaGraphDestroy(parent);
    (void)got;
    return 0;
}
