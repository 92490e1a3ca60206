// gather.cu: a command-line driver that launches one of PyTorch's index kernels (declared
// exactly as PyTorch does, torch_index_kernels.cuh) on a float table of ROWS rows of DIM
// values (row r holds r*100 + column), with the ids you give it, the way ATen's index_select
// launches it, and prints what a PyTorch program would see. Built as build/progs/gather
// (<<<>>>), gather_legacy (cudaLaunchKernel) and gather_ptsz (per-thread default stream). Used by
// tests/fakecuda/test_index_kernels.sh (the test double) and tests/e2e/test_index.sh.
//
// usage: gather KERNEL [options] ID...
//   KERNEL  vgather   vectorized_gather_kernel<16, index_t>      (2.8+: rows >= 1 KiB)
//           small     indexSelectSmallIndex<float, index_t, unsigned, 2, 2, -2>  (<= 16 ids)
//           large     indexSelectLargeIndex<float, index_t, unsigned, 2, 2, -2, true>  (<= 2.7)
//           large64   indexSelectLargeIndex<float, index_t, uint64_t, -1, -1, -1, true>
//   ID      integers (negative allowed), or good:N (ids i % ROWS) / bad:N:POS:VALUE
//   options:
//     --dtype int64|int32   id type (default int64)
//     --rows R              rows of the table, the bound (default 10)
//     --dim D               values per row (default 4; vgather copies D*4 bytes per id)
//     --neg                 vgather: allow_neg_indices (x[idx] semantics)
//     --launch chevron|legacy|handle|exc   entry point
// output (stdout), one fact per line:
//   fakecudart_identity=<fakecuda|none>
//   launch_error_text="<cudaGetErrorString of the launch's error>"   (only when it failed)
//   kernel=<mangled name>
//   result launch_err=<int> sync_err=<int> last_err=<int>
//   rows n=<ids> <row of each output row, from its first value>   (only if they could be read)
//   after clean_launch_err=<int> clean_sync_err=<int>   (the same kernel with ids 0..: context alive?)
// Exit status: 0 if the launch and its synchronisation succeeded, 1 otherwise, 2 on bad usage.
#include "torch_index_kernels.cuh"
#include "lg_launch.cuh"
#include "lg_values.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct opts {
    std::string kernel;
    bool i32 = false, neg = false;
    int64_t rows = 10, dim = 4;
    lg_launch_mode mode = LG_DEFAULT_MODE;
    std::vector<int64_t> ids;
};

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "gather: %s\n(see the comment at the top of tests/progs/gather.cu for the usage)\n", why);
    exit(2);
}

void parse(int argc, char **argv, opts &o)
{
    if (argc < 2) usage("missing KERNEL");
    o.kernel = argv[1];
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "--dtype") { std::string v = val(); if (v == "int32") o.i32 = true; else if (v != "int64") usage("bad --dtype"); }
        else if (a == "--rows") o.rows = strtoll(val(), nullptr, 10);
        else if (a == "--dim") o.dim = strtoll(val(), nullptr, 10);
        else if (a == "--neg") o.neg = true;
        else if (a == "--launch") { if (lg_parse_mode(val(), &o.mode)) usage("bad --launch"); }
        else if (const char *why = lg_parse_values(a, o.rows, o.ids))
            usage(*why ? why : ("unknown argument " + a).c_str());
    }
    if (o.ids.empty()) usage("no ids");
    if (o.rows < 1 || o.dim < 1) usage("bad --rows/--dim");
}

template <typename T, typename I>
at::cuda::detail::TensorInfo<T, I> info2(T *data, I rows, I dim)
{
    at::cuda::detail::TensorInfo<T, I> t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dims = 2;
    t.sizes[0] = rows; t.sizes[1] = dim;
    t.strides[0] = dim; t.strides[1] = 1;
    return t;
}

// The ids: one dimension of n, contiguous.
template <typename T, typename I>
at::cuda::detail::TensorInfo<const T, I> info1(const T *data, I n)
{
    at::cuda::detail::TensorInfo<const T, I> t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dims = 1;
    t.sizes[0] = n;
    t.strides[0] = 1;
    return t;
}

template <typename index_t>
int run(const opts &o)
{
    const int64_t n = (int64_t)o.ids.size(), R = o.rows, D = o.dim;
    std::vector<float> table((size_t)(R * D));
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < D; c++) table[(size_t)(r * D + c)] = (float)(r * 100 + c);
    std::vector<index_t> ids(o.ids.begin(), o.ids.end()), good((size_t)n);
    for (int64_t k = 0; k < n; k++) good[(size_t)k] = (index_t)(k % R);
    float *d_in = nullptr, *d_out = nullptr;
    index_t *d_ids = nullptr, *d_good = nullptr;
    cudaMalloc((void **)&d_in, table.size() * sizeof(float));
    cudaMalloc((void **)&d_out, (size_t)(n * D) * sizeof(float));
    cudaMalloc((void **)&d_ids, (size_t)n * sizeof(index_t));
    cudaMalloc((void **)&d_good, (size_t)n * sizeof(index_t));
    cudaMemcpy(d_in, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_ids, ids.data(), (size_t)n * sizeof(index_t), cudaMemcpyHostToDevice);
    cudaMemcpy(d_good, good.data(), (size_t)n * sizeof(index_t), cudaMemcpyHostToDevice);
    cudaMemset(d_out, 0, (size_t)(n * D) * sizeof(float));
    cudaStream_t stream;
    cudaStreamCreate(&stream);

    const void *stub = nullptr;
    // index_select(table, 0, ids): dst and src have the select dimension (0) reduced to size 1.
    auto launch = [&](index_t *d) -> cudaError_t {
        using namespace at::native;
        if (o.kernel == "vgather") {
            auto k = vectorized_gather_kernel<16, index_t>;
            stub = (const void *)k;
            const int64_t row = D * (int64_t)sizeof(float);
            return lg_launch(o.mode, k, dim3((unsigned)n), dim3(64), 0, stream, (char *)d_out, (char *)d_in, d, (int)n, row, R,
                             row, row, o.neg);
        }
        if (o.kernel == "small" || o.kernel == "large") {
            auto dst = info2<float, unsigned>(d_out, 1, (unsigned)D);
            auto src = info2<const float, unsigned>(d_in, 1, (unsigned)D);
            auto ind = info1<index_t, unsigned>(d, (unsigned)n);
            if (o.kernel == "small") {
                auto k = indexSelectSmallIndex<float, index_t, unsigned, 2, 2, -2>;
                stub = (const void *)k;
                return lg_launch(o.mode, k, dim3(1), dim3(32), 0, stream, dst, src, ind, 0, 0, (unsigned)D, R);
            }
            auto k = indexSelectLargeIndex<float, index_t, unsigned, 2, 2, -2, true>;
            stub = (const void *)k;
            return lg_launch(o.mode, k, dim3(1), dim3(128), 0, stream, dst, src, ind, 0, 0, (unsigned)(n * D), (unsigned)D, R);
        }
        if (o.kernel == "large64") {
            auto dst = info2<float, uint64_t>(d_out, 1, (uint64_t)D);
            auto src = info2<const float, uint64_t>(d_in, 1, (uint64_t)D);
            auto ind = info1<index_t, uint64_t>(d, (uint64_t)n);
            auto k = indexSelectLargeIndex<float, index_t, uint64_t, -1, -1, -1, true>;
            stub = (const void *)k;
            return lg_launch(o.mode, k, dim3(1), dim3(128), 0, stream, dst, src, ind, 0, 0, (uint64_t)(n * D), (uint64_t)D, R);
        }
        usage(("unknown kernel " + o.kernel).c_str());
    };

    cudaError_t launch_err = launch(d_ids);
    if (launch_err != cudaSuccess) printf("launch_error_text=\"%s\"\n", cudaGetErrorString(launch_err));
    const char *name = nullptr;
    if (stub && cudaFuncGetName(&name, stub) == cudaSuccess) printf("kernel=%s\n", name);
    else printf("kernel=?\n");
    cudaError_t sync_err = cudaStreamSynchronize(stream);
    cudaError_t last_err = cudaGetLastError();
    printf("result launch_err=%d sync_err=%d last_err=%d\n", (int)launch_err, (int)sync_err, (int)last_err);
    std::vector<float> out((size_t)(n * D));
    if (cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess) {
        printf("rows n=%lld", (long long)n);
        for (int64_t k = 0; k < n; k++) printf(" %g", out[(size_t)(k * D)] / 100.0f);
        printf("\n");
    }
    cudaError_t clean_launch = launch(d_good);
    cudaError_t clean_sync = cudaStreamSynchronize(stream);
    printf("after clean_launch_err=%d clean_sync_err=%d\n", (int)clean_launch, (int)clean_sync);
    fflush(stdout);
    for (void *p : { (void *)d_in, (void *)d_out, (void *)d_ids, (void *)d_good }) cudaFree(p);
    cudaStreamDestroy(stream);
    return launch_err == cudaSuccess && sync_err == cudaSuccess ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, o);
    lg_print_identity();
    return o.i32 ? run<int32_t>(o) : run<int64_t>(o);
}
