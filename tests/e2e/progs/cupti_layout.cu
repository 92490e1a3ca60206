// cupti_layout.cu: what a CUPTI subscriber reads from a launch callback's functionParams, for
// tests/e2e/test_cupti_layout.sh. Linked against the CUPTI double (tests/fakecuda/cupti/
// libcupti.c) and run under the runtime double with FAKECUDA_CUPTI=1, which reports launches to
// it as the real runtime reports them to CUPTI.
//
// CUPTI 13's headers (cupti_runtime_cbid.h) give __cudaLaunchKernel (nvcc 13's <<<>>>) the ids
// 505 and 506 (_ptsz) but generated_cuda_runtime_api_meta.h defines no params struct for them;
// labelguard (src/hooks/cupti.c) reads them as cudaLaunchKernel_v7000_params, the struct of
// cudaLaunchKernel (211, _ptsz 214), whose prototype order __cudaLaunchKernel shares. This
// program reads every launch callback it gets through that header struct and prints, per
// callback site, what it found:
//   cb cbid=<id> site=<enter|exit> grid=X,Y,Z block=X,Y,Z shm=<bytes> stream=<ok|bad> args=<ok|bad>
// for one launch of step<<<(3,5,7), (32,2,1), 48, s>>>(p) (argv[1] "chevron") or the same
// through cudaLaunchKernel ("legacy"). Built as cupti_layout and cupti_layout_ptsz
// (--default-stream per-thread: ids 506 and 214). Then "launch=<err> sync=<err>".
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <cupti.h> // includes generated_cuda_runtime_api_meta.h (cudaLaunchKernel_v7000_params)

__global__ void step(int *p) { if (p) *p = 7; }

static cudaStream_t expected_stream;
static int *expected_arg;

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    if (dom != CUPTI_CB_DOMAIN_RUNTIME_API || !cb->functionParams) return;
    const cudaLaunchKernel_v7000_params *p = (const cudaLaunchKernel_v7000_params *)cb->functionParams;
    bool args_ok = p->args && *(int **)p->args[0] == expected_arg;
    printf("cb cbid=%u site=%s grid=%u,%u,%u block=%u,%u,%u shm=%zu stream=%s args=%s\n", (unsigned)cbid,
           cb->callbackSite == CUPTI_API_ENTER ? "enter" : "exit", p->gridDim.x, p->gridDim.y, p->gridDim.z,
           p->blockDim.x, p->blockDim.y, p->blockDim.z, p->sharedMem, p->stream == expected_stream ? "ok" : "bad",
           args_ok ? "ok" : "bad");
}

int main(int argc, char **argv)
{
    bool legacy = argc > 1 && !strcmp(argv[1], "legacy");
    int *p = nullptr;
    cudaMalloc((void **)&p, sizeof(int));
    cudaStreamCreate(&expected_stream);
    expected_arg = p;
    CUpti_SubscriberHandle s;
    if (cuptiSubscribe(&s, on_callback, nullptr) != CUPTI_SUCCESS) { printf("subscribe failed\n"); return 1; }
    const CUpti_CallbackId ids[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
                                    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000};
    for (CUpti_CallbackId id : ids) cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    cudaError_t e;
    if (legacy) {
        void *args[] = {&p};
        e = cudaLaunchKernel((const void *)step, dim3(3, 5, 7), dim3(32, 2, 1), args, 48, expected_stream);
    } else {
        step<<<dim3(3, 5, 7), dim3(32, 2, 1), 48, expected_stream>>>(p);
        e = cudaGetLastError();
    }
    cudaError_t w = cudaStreamSynchronize(expected_stream);
    printf("launch=%d sync=%d\n", (int)e, (int)w);
    cuptiUnsubscribe(s);
    return 0;
}
