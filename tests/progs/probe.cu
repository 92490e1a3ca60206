// probe.cu: asks the runtime questions and prints the answers, one per line, for the tests of
// the runtime test double (tests/fakecuda/test_*.sh); the same program on a GPU shows what the
// real runtime answers, which is how the double's behaviour can be checked against CUDA.
//
// usage: probe names | params | errors | memory | streams | capture
//   names    for each kernel of torch_kernels.cuh: the name by host stub and by cudaKernel_t
//            handle, and whether the handle differs from the stub
//   params   cudaFuncGetParamInfo offsets and sizes for each kernel
//   errors   cudaGetLastError / cudaPeekAtLastError semantics and error texts
//   memory   cudaPointerGetAttributes on device, pinned and ordinary memory; copy checks
//   streams  stream and event calls
//   capture  stream capture of a kernel launch, then a graph launch
//   execparams  two execs of one captured graph (a copy, a host function, a kernel); the
//            second's nodes changed with cudaGraphExec*NodeSetParams: the graph and the first
//            exec keep theirs
//   emulator (test double only) fakecudart_register_emulator replaces lg_test_add_one's emulation;
//            fakecudart_launch_count/fakecudart_emulated_count count what reached the device
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace at::native;

struct kern { const char *label; const void *stub; };
static const kern kernels[] = {
    { "fwd_none", (const void *)nll_loss_forward_no_reduce_cuda_kernel<float, int64_t> },
    { "fwd_none_u8", (const void *)nll_loss_forward_no_reduce_cuda_kernel<float, uint8_t> },
    { "fwd_1d", (const void *)nll_loss_forward_reduce_cuda_kernel_1d<float, int64_t> },
    { "fwd_2d", (const void *)nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t> },
    { "fwd_2d_double_u8", (const void *)nll_loss_forward_reduce_cuda_kernel_2d<double, double, uint8_t> },
    { "bwd_none", (const void *)nll_loss_backward_no_reduce_cuda_kernel<float, int64_t> },
    { "bwd_1d", (const void *)nll_loss_backward_reduce_cuda_kernel_1d<float, int64_t> },
    { "bwd_2d", (const void *)nll_loss_backward_reduce_cuda_kernel_2d<float, int64_t> },
    { "2d_fwd_none", (const void *)nll_loss2d_forward_no_reduce_kernel<float> },
    { "2d_fwd", (const void *)nll_loss2d_forward_kernel<float, float, int> },
    { "2d_size_average", (const void *)nll_loss2d_forward_size_average_kernel<float> },
    { "2d_bwd_none", (const void *)nll_loss2d_backward_no_reduce_kernel<float> },
    { "2d_bwd", (const void *)nll_loss2d_backward_kernel<float> },
    { "mismatch_fwd_2d", (const void *)lg_test_mismatch::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t> },
    { "add_one", (const void *)lg_test_add_one },
};

static void names()
{
    for (const kern &k : kernels) {
        const char *by_stub = nullptr, *by_handle = nullptr;
        cudaKernel_t h = nullptr;
        cudaError_t e1 = cudaFuncGetName(&by_stub, k.stub);
        cudaError_t e2 = cudaGetKernel(&h, k.stub);
        cudaError_t e3 = e2 == cudaSuccess ? cudaFuncGetName(&by_handle, (const void *)h) : e2;
        printf("name %s stub_err=%d handle_err=%d handle_name_err=%d handle_is_stub=%d same=%d %s\n", k.label, (int)e1, (int)e2,
               (int)e3, (const void *)h == k.stub, by_stub && by_handle && !strcmp(by_stub, by_handle), by_stub ? by_stub : "-");
    }
    const char *n = nullptr;
    int not_a_kernel = 0;
    printf("name not_a_kernel err=%d\n", (int)cudaFuncGetName(&n, (const void *)&not_a_kernel));
    cudaGetLastError();
}

static void params()
{
    for (const kern &k : kernels) {
        printf("params %s", k.label);
        size_t i = 0, off, size;
        cudaError_t e;
        while ((e = cudaFuncGetParamInfo(k.stub, i, &off, &size)) == cudaSuccess) {
            printf(" %zu@%zu", size, off);
            i++;
        }
        printf(" count=%zu end_err=%d\n", i, (int)e);
    }
    cudaGetLastError();
}

static void errors()
{
    printf("initial get=%d\n", (int)cudaGetLastError());
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 50);
    printf("huge_malloc=%d\n", (int)e);
    printf("peek1=%d peek2=%d\n", (int)cudaPeekAtLastError(), (int)cudaPeekAtLastError());
    // printf's arguments are evaluated in no fixed order: each call is its own statement.
    int g1 = cudaGetLastError(), g2 = cudaGetLastError();
    printf("get1=%d get2=%d\n", g1, g2);
    int sd = cudaSetDevice(1);
    g1 = cudaGetLastError();
    printf("set_device_1=%d get=%d\n", sd, g1);
    cudaStream_t bogus = (cudaStream_t)(uintptr_t)0x1234560;
    printf("bogus_stream_sync=%d\n", (int)cudaStreamSynchronize(bogus));
    cudaGetLastError();
    int bc = lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(2048), 0, (cudaStream_t)0, (float *)nullptr, 0);
    g1 = cudaGetLastError();
    printf("bad_config=%d get=%d\n", bc, g1);
    int codes[] = { 0, 1, 2, 17, 35, 98, 100, 400, 600, 700, 710, 719, 800, 801, 900, 12345 };
    for (int c : codes) printf("error %d %s \"%s\"\n", c, cudaGetErrorName((cudaError_t)c), cudaGetErrorString((cudaError_t)c));
    int v = 0, d = -1, n = 0;
    cudaRuntimeGetVersion(&v);
    printf("runtime_version=%d", v);
    cudaDriverGetVersion(&v);
    cudaGetDevice(&d);
    cudaGetDeviceCount(&n);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf(" driver_version=%d device=%d count=%d name=\"%s\"\n", v, d, n, prop.name);
}

static void memory()
{
    void *d = nullptr, *h = nullptr, *dp = nullptr;
    int local[4] = { 0 };
    printf("malloc=%d malloc_host=%d\n", (int)cudaMalloc(&d, 64), (int)cudaMallocHost(&h, 64));
    cudaPointerAttributes a;
    for (auto [label, ptr] : { std::pair<const char *, const void *>{ "device", d }, { "device_interior", (char *)d + 8 },
                               { "pinned", h }, { "stack", local } }) {
        cudaError_t e = cudaPointerGetAttributes(&a, ptr);
        printf("attr %s err=%d type=%d\n", label, (int)e, (int)a.type);
    }
    int r1 = cudaHostGetDevicePointer(&dp, h, 0), r2 = cudaHostGetDevicePointer(&dp, local, 0);
    printf("host_get_device_pointer pinned=%d stack=%d\n", r1, r2);
    cudaGetLastError();
    int c1 = cudaMemcpy(d, local, 16, cudaMemcpyHostToDevice), c2 = cudaMemcpy(local, d, 16, cudaMemcpyDeviceToHost);
    int c3 = cudaMemcpy(local, local + 2, 8, cudaMemcpyDeviceToHost), c4 = cudaMemcpy(h, d, 128, cudaMemcpyDeviceToHost);
    printf("copy h2d=%d d2h=%d d2h_from_stack=%d d2h_overrun=%d\n", c1, c2, c3, c4);
    cudaGetLastError();
    int m1 = cudaMemset(d, 0, 64), f1 = cudaFree(d), f2 = cudaFree(d), f3 = cudaFreeHost(h);
    printf("memset=%d free=%d double_free=%d free_host=%d\n", m1, f1, f2, f3);
    cudaGetLastError();
    printf("attr_after_free type=%d\n", (cudaPointerGetAttributes(&a, d), (int)a.type));
}

static void streams()
{
    cudaStream_t s, s2;
    cudaEvent_t e0, e1, e2;
    int a1 = cudaStreamCreate(&s), a2 = cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    printf("create=%d create_flags=%d\n", a1, a2);
    a1 = cudaStreamQuery(s);
    a2 = cudaStreamSynchronize(s);
    printf("query=%d sync=%d\n", a1, a2);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
    float ms = -1;
    printf("elapsed_unrecorded=%d\n", (int)cudaEventElapsedTime(&ms, e0, e1));
    cudaGetLastError();
    printf("record=%d", (int)cudaEventRecord(e0, s));
    a1 = cudaEventRecord(e1, s);
    a2 = cudaEventSynchronize(e1);
    int a3 = cudaEventQuery(e1);
    printf(" record2=%d sync=%d query=%d", a1, a2, a3);
    cudaError_t el = cudaEventElapsedTime(&ms, e0, e1);
    printf(" elapsed_err=%d elapsed_nonneg=%d\n", (int)el, ms >= 0);
    cudaEventRecord(e2, s);
    printf("elapsed_no_timing=%d\n", (int)cudaEventElapsedTime(&ms, e0, e2));
    cudaGetLastError();
    a1 = cudaStreamDestroy(s2);
    a2 = cudaStreamDestroy(s2);
    printf("destroy=%d destroy_again=%d\n", a1, a2);
    cudaGetLastError();
    a1 = cudaEventDestroy(e0);
    a2 = cudaDeviceSynchronize();
    printf("event_destroy=%d device_sync=%d\n", a1, a2);
    cudaStreamDestroy(s);
}

static void count_call(void *p) { ++*(int *)p; }

static void execparams()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d, *copy_a, *copy_b, *d_b;
    cudaMalloc((void **)&d, 4 * sizeof(float));
    cudaMalloc((void **)&copy_a, 4 * sizeof(float));
    cudaMalloc((void **)&copy_b, 4 * sizeof(float));
    cudaMalloc((void **)&d_b, 4 * sizeof(float));
    cudaMemset(d, 0, 4 * sizeof(float));
    cudaMemset(d_b, 0, 4 * sizeof(float));
    cudaDeviceSynchronize(); /* the memsets ran on the legacy stream, which s does not wait for */
    static int calls_a, calls_b;
    cudaGraph_t g = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaMemcpyAsync(copy_a, d, 4 * sizeof(float), cudaMemcpyDeviceToDevice, s);
    cudaLaunchHostFunc(s, count_call, &calls_a);
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, s, d, 4);
    cudaStreamEndCapture(s, &g);
    cudaGraphNode_t nodes[8];
    size_t n = 8;
    cudaGraphGetNodes(g, nodes, &n);
    cudaGraphNode_t copy = nullptr, host = nullptr, kernel = nullptr;
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType t;
        cudaGraphNodeGetType(nodes[i], &t);
        if (t == cudaGraphNodeTypeMemcpy) copy = nodes[i];
        if (t == cudaGraphNodeTypeHost) host = nodes[i];
        if (t == cudaGraphNodeTypeKernel) kernel = nodes[i];
    }
    printf("nodes=%zu copy=%d host=%d kernel=%d\n", n, copy != nullptr, host != nullptr, kernel != nullptr);
    cudaGraphExec_t xa, xb;
    int ia = cudaGraphInstantiate(&xa, g, 0), ib = cudaGraphInstantiate(&xb, g, 0);
    cudaHostNodeParams hp = {count_call, &calls_b};
    int sh = cudaGraphExecHostNodeSetParams(xb, host, &hp);
    int sc = cudaGraphExecMemcpyNodeSetParams1D(xb, copy, copy_b, d_b, 4 * sizeof(float), cudaMemcpyDeviceToDevice);
    cudaKernelNodeParams kp;
    cudaGraphKernelNodeGetParams(kernel, &kp);
    void *args[2] = {&d_b, kp.kernelParams[1]};
    cudaKernelNodeParams kb = kp;
    kb.kernelParams = args;
    int sk = cudaGraphExecKernelNodeSetParams(xb, kernel, &kb);
    kb.func = (void *)lg_test_mismatch::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>;
    int sf = cudaGraphExecKernelNodeSetParams(xb, kernel, &kb);
    cudaGetLastError();
    printf("instantiate=%d,%d set host=%d copy=%d kernel=%d other_func=%d\n", ia, ib, sh, sc, sk, sf);
    cudaHostNodeParams gh;
    cudaGraphHostNodeGetParams(host, &gh);
    cudaMemcpy3DParms gc;
    cudaGraphMemcpyNodeGetParams(copy, &gc);
    cudaKernelNodeParams gk;
    cudaGraphKernelNodeGetParams(kernel, &gk);
    printf("graph keeps host=%d copy=%d kernel=%d\n", gh.userData == &calls_a, gc.dstPtr.ptr == copy_a && gc.srcPtr.ptr == d,
           *(float **)gk.kernelParams[0] == d);
    int la = cudaGraphLaunch(xa, s), lb = cudaGraphLaunch(xb, s), lb2 = cudaGraphLaunch(xb, s), w = cudaStreamSynchronize(s);
    float hd[4], hdb[4], hcb[4];
    cudaMemcpy(hd, d, sizeof hd, cudaMemcpyDeviceToHost);
    cudaMemcpy(hdb, d_b, sizeof hdb, cudaMemcpyDeviceToHost);
    cudaMemcpy(hcb, copy_b, sizeof hcb, cudaMemcpyDeviceToHost);
    printf("launch=%d,%d,%d sync=%d calls_a=%d calls_b=%d d=%g d_b=%g copy_b=%g\n", la, lb, lb2, w, calls_a, calls_b, hd[0],
           hdb[0], hcb[0]);
    cudaGraphExecDestroy(xa);
    cudaGraphExecDestroy(xb);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
}

static void capture()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d;
    cudaMalloc((void **)&d, 4 * sizeof(float));
    cudaMemset(d, 0, 4 * sizeof(float));
    cudaStreamCaptureStatus st;
    /* Stream 0 is the legacy stream, which cannot be captured; built with --default-stream
     * per-thread it is the thread's per-thread stream, which can (that capture is ended here). */
    cudaError_t cl = cudaStreamBeginCapture((cudaStream_t)0, cudaStreamCaptureModeGlobal);
    printf("capture_legacy=%d\n", (int)cl);
    if (cl == cudaSuccess) {
        cudaGraph_t g0 = nullptr;
        if (cudaStreamEndCapture((cudaStream_t)0, &g0) == cudaSuccess && g0) cudaGraphDestroy(g0);
    }
    cudaGetLastError();
    printf("begin=%d", (int)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamIsCapturing(s, &st);
    printf(" status=%d", (int)st);
    cudaError_t le = lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, s, d, 4);
    float h[4] = { 0 };
    /* A blocking copy is an unsafe call in a global-mode capture; relaxed mode allows it, and
     * the legacy stream it runs on does not wait for the (non-blocking) capturing stream. */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaThreadExchangeStreamCaptureMode(&mode);
    printf(" launch=%d value_during_capture=%g", (int)le, h[0]);
    cudaGraph_t g = nullptr;
    printf(" end=%d", (int)cudaStreamEndCapture(s, &g));
    cudaStreamIsCapturing(s, &st);
    printf(" status_after=%d\n", (int)st);
    cudaGraphExec_t x;
    printf("instantiate=%d", (int)cudaGraphInstantiate(&x, g, 0));
    int l1 = cudaGraphLaunch(x, s), l2 = cudaGraphLaunch(x, s), l3 = cudaStreamSynchronize(s);
    printf(" launch1=%d launch2=%d sync=%d", l1, l2, l3);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf(" value=%g\n", h[0]);
    printf("begin2=%d", (int)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    printf(" sync_in_capture=%d", (int)cudaStreamSynchronize(s));
    cudaStreamIsCapturing(s, &st);
    printf(" status=%d", (int)st);
    cudaGraph_t g2 = nullptr;
    printf(" end=%d\n", (int)cudaStreamEndCapture(s, &g2));
    cudaGetLastError();
    /* The same blocking copy without relaxed mode fails and invalidates the capture. */
    printf("begin3=%d", (int)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    printf(" unsafe_copy=%d", (int)cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    cudaGraph_t g3 = nullptr;
    printf(" end=%d\n", (int)cudaStreamEndCapture(s, &g3));
    cudaGetLastError();
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
}

typedef cudaError_t (*emu_fn)(const char *, dim3, dim3, void **, size_t, cudaStream_t);
static cudaError_t set_42(const char *name, dim3, dim3, void **args, size_t, cudaStream_t)
{
    float *p = *(float **)args[0];
    p[0] = 42.0f;
    return strstr(name, "lg_test_add_one") ? cudaSuccess : cudaErrorLaunchFailure;
}

static void emulator()
{
    auto reg = (int (*)(const char *, emu_fn))dlsym(RTLD_DEFAULT, "fakecudart_register_emulator");
    auto launches = (unsigned long (*)(const char *))dlsym(RTLD_DEFAULT, "fakecudart_launch_count");
    auto emulated = (unsigned long (*)(const char *))dlsym(RTLD_DEFAULT, "fakecudart_emulated_count");
    if (!reg || !launches || !emulated) { printf("emulator unavailable\n"); return; }
    float *d, h = 0;
    cudaMalloc((void **)&d, 4 * sizeof(float));
    cudaMemset(d, 0, 4 * sizeof(float));
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, (cudaStream_t)0, d, 4);
    cudaDeviceSynchronize();
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("builtin value=%g", h);
    int r = reg("lg_test_add_one", set_42);
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, (cudaStream_t)0, d, 4);
    cudaDeviceSynchronize();
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf(" register=%d user value=%g launches=%lu emulated=%lu nll_launches=%lu\n", r, h, launches("lg_test_add_one"),
           emulated("lg_test_add_one"), launches("nll_loss"));
}

int main(int argc, char **argv)
{
    lg_print_identity();
    std::string what = argc > 1 ? argv[1] : "";
    if (what == "names") names();
    else if (what == "params") params();
    else if (what == "errors") errors();
    else if (what == "memory") memory();
    else if (what == "streams") streams();
    else if (what == "capture") capture();
    else if (what == "execparams") execparams();
    else if (what == "emulator") emulator();
    else { fprintf(stderr, "usage: probe names|params|errors|memory|streams|capture|emulator\n"); return 2; }
    return 0;
}
