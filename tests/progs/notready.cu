// notready.cu: a bad-label NLL launch (PyTorch's kernel, torch_kernels.cuh) whose first error
// check comes after an event query of the work in flight, which answers cudaErrorNotReady; the
// program then clears that status with cudaGetLastError, as PyTorch's caching allocators do
// ((void)cudaGetLastError() after NotReady), and checks again. Built as build/progs/notready
// (and _legacy, _ptsz); run by tests/e2e/test_notready.sh.
// output: fakecudart_identity=..., then "query=Q cleared=C next=N sync=S" (cudaError_t values).
#include "torch_kernels.cuh"
#include "lg_launch.cuh"
int main()
{
    lg_print_identity();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *out, *tw, *in;
    int64_t *t;
    cudaMalloc((void **)&out, 4); cudaMalloc((void **)&tw, 4);
    cudaMalloc((void **)&in, 8 * 3 * 4); cudaMalloc((void **)&t, 8 * 8);
    int64_t h[8] = { 0, 1, 2, 5, 0, 1, 2, 0 };
    float hin[24];
    for (int i = 0; i < 24; i++) hin[i] = -1.0f;
    cudaMemcpy(t, h, sizeof h, cudaMemcpyHostToDevice);
    cudaMemcpy(in, hin, sizeof hin, cudaMemcpyHostToDevice);
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t><<<1, 32, 0, s>>>(out, tw, in, t, nullptr, true, 8, 3, 3, -100);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    cudaEventRecord(ev, s);
    int q = (int)cudaEventQuery(ev);
    int cleared = (int)cudaGetLastError();
    int next = (int)cudaGetLastError();
    int sync = (int)cudaStreamSynchronize(s);
    printf("query=%d cleared=%d next=%d sync=%d\n", q, cleared, next, sync);
    return 0;
}
