// triton_like.cu: a program that launches kernels as Triton's launcher does, for
// tests/e2e/test_driver_launch.sh: libcuda.so.1 dlopen'd and its functions dlsym'd (so no
// interposition sees them), a module loaded from an image, its functions got by name and
// launched with cuLaunchKernel and cuLaunchKernelEx, between the runtime launches PyTorch makes.
// Run under the runtime test double and the driver double's launch build
// (build/fakecuda-driver-launch), where the module's kernels are the runtime double's and this
// program registers the emulation of its one asserting kernel; on a GPU nothing here would load
// (the image is not a cubin).
//
// The kernels stand for Inductor's: triton_poi_fused_embedding_0 reads tokens[i] as a row of a
// 32000-row table and asserts `0 <= tmp3 < 32000` (emulated: prints the device's assert line and
// fails with 710); triton_poi_fused_index_1 is clean. Before launching, the program records both
// as labelguard's compiled reader would (labelguard_generated_kernel, found with dlsym: absent
// without labelguard).
//
// argv[1]:
//   sync    runtime scale x2, index_1 (cuLaunchKernel), embedding_0 on a bad id (cuLaunchKernelEx),
//           then cudaDeviceSynchronize: prints "sync=<error>"
//   driver  the same launches, then cuCtxSynchronize ("ctxsync=<CUresult>") and one more
//           cuLaunchKernelEx of embedding_0 ("relaunch=<CUresult>"): the error surfaces at driver
//           calls only, as in a process whose GPU work is all Triton's; then
//           cudaDeviceSynchronize ("final=<error>")
//   clean   the same launches with a good id, then cudaDeviceSynchronize ("sync=0")
// Exit 0 when every call it made returned what it printed; 2 on a usage or setup error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void lg_scale(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 2.0f;
}

namespace {

const int ROWS = 32000;
const int N = 64;

typedef cudaError_t (*emu_fn)(const char *, dim3, dim3, void **, size_t, cudaStream_t);

// The double's stand-in for the generated embedding kernel: device memory is host memory there.
cudaError_t emulate_embedding(const char *, dim3, dim3 block, void **args, size_t, cudaStream_t)
{
    const long *tokens = *(const long **)args[0];
    int n = *(int *)args[2];
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= ROWS) {
            fprintf(stderr, "/tmp/torchinductor/ab/cabxyz.py:27: triton_poi_fused_embedding_0: block: [%d,0,0], "
                            "thread: [%u,0,0] Assertion `index out of bounds: 0 <= tmp3 < 32000` failed.\n",
                    i / (int)block.x, (unsigned)(i % (int)block.x));
            return cudaErrorAssert;
        }
    return cudaSuccess;
}

struct Driver {
    CUresult (*init)(unsigned);
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*get)(CUfunction *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*sync)(void);
};

template <typename F> bool sym(void *h, const char *name, F *out)
{
    *(void **)out = dlsym(h, name);
    if (!*out)
        fprintf(stderr, "triton_like: libcuda.so.1 has no %s\n", name);
    return *out != nullptr;
}

}  // namespace

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    if (strcmp(mode, "sync") && strcmp(mode, "driver") && strcmp(mode, "clean")) {
        fprintf(stderr, "usage: triton_like sync|driver|clean\n");
        return 2;
    }
    // Triton finds the driver as this does: by name, its symbols by dlsym.
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    Driver d;
    if (!cuda || !sym(cuda, "cuInit", &d.init) || !sym(cuda, "cuModuleLoadData", &d.load) ||
        !sym(cuda, "cuModuleGetFunction", &d.get) || !sym(cuda, "cuLaunchKernel", &d.launch) ||
        !sym(cuda, "cuLaunchKernelEx", &d.launch_ex) || !sym(cuda, "cuCtxSynchronize", &d.sync)) {
        fprintf(stderr, "triton_like: no usable libcuda.so.1: %s\n", cuda ? "symbols missing" : dlerror());
        return 2;
    }
    auto reg = (int (*)(const char *, emu_fn))dlsym(RTLD_DEFAULT, "fakecudart_register_emulator");
    if (!reg || reg("triton_poi_fused_embedding_0", emulate_embedding) != 0) {
        fprintf(stderr, "triton_like: not on the runtime test double\n");
        return 2;
    }
    auto generated = (int (*)(const char *, const char *, int, const char *, const char *, const char *))dlsym(
        RTLD_DEFAULT, "labelguard_generated_kernel");
    if (generated) {
        printf("generated=%d\n", generated("triton_poi_fused_embedding_0", "/tmp/torchinductor/ab/cabxyz.py", 27,
                                           "index out of bounds: 0 <= tmp3 < 32000", "embedding",
                                           "aten.embedding.default"));
        printf("generated=%d\n", generated("triton_poi_fused_index_1", "/tmp/torchinductor/cd/ccdxyz.py", 31,
                                           "index out of bounds: 0 <= tmp5 < 8", "index", "aten.index.Tensor"));
    }

    float *x;
    long *tokens;
    float *out;
    long host[N];
    for (int i = 0; i < N; i++)
        host[i] = i * 7;
    if (strcmp(mode, "clean"))
        host[N - 3] = ROWS;  // the id equal to the vocabulary size
    if (d.init(0) != CUDA_SUCCESS || cudaMalloc((void **)&x, N * sizeof *x) != cudaSuccess ||
        cudaMalloc((void **)&tokens, sizeof host) != cudaSuccess ||
        cudaMalloc((void **)&out, N * sizeof *out) != cudaSuccess ||
        cudaMemcpy(tokens, host, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "triton_like: setup failed\n");
        return 2;
    }
    static const char image[] = "not a cubin: the double's modules take any image";
    CUmodule mod;
    CUfunction embedding, index;
    if (d.load(&mod, image) != CUDA_SUCCESS || d.get(&embedding, mod, "triton_poi_fused_embedding_0") != CUDA_SUCCESS ||
        d.get(&index, mod, "triton_poi_fused_index_1") != CUDA_SUCCESS) {
        fprintf(stderr, "triton_like: module setup failed\n");
        return 2;
    }

    int ok = 1;
    lg_scale<<<1, N>>>(x, N);
    lg_scale<<<1, N>>>(x, N);
    ok &= cudaGetLastError() == cudaSuccess;
    int n = N;
    void *index_args[] = {&tokens, &out, &n};
    CUresult r = d.launch(index, 2, 1, 1, 32, 1, 1, 0, nullptr, index_args, nullptr);
    printf("index=%d\n", (int)r);
    ok &= r == CUDA_SUCCESS;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 2, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = 32, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    void *embedding_args[] = {&tokens, &out, &n};
    r = d.launch_ex(&cfg, embedding, embedding_args, nullptr);
    printf("embedding=%d\n", (int)r);
    ok &= r == CUDA_SUCCESS;

    if (!strcmp(mode, "driver")) {
        r = d.sync();
        printf("ctxsync=%d\n", (int)r);
        ok &= r == CUDA_ERROR_ASSERT;
        r = d.launch_ex(&cfg, embedding, embedding_args, nullptr);
        printf("relaunch=%d\n", (int)r);
        ok &= r == CUDA_ERROR_ASSERT;
        cudaError_t e = cudaDeviceSynchronize();
        printf("final=%d\n", (int)e);
        ok &= e == cudaErrorAssert;
    } else {
        cudaError_t e = cudaDeviceSynchronize();
        printf("sync=%d\n", (int)e);
        ok &= e == (strcmp(mode, "clean") ? cudaErrorAssert : cudaSuccess);
    }
    fflush(stdout);
    return ok ? 0 : 1;
}
