// nll.cu: a command-line driver that launches one of PyTorch's NLL loss kernels (declared
// exactly as PyTorch does, torch_kernels.cuh) with the labels you give it, the way ATen's host
// code launches it, and prints what a PyTorch program would see. Built as build/progs/nll
// (<<<>>>), nll_legacy (cudaLaunchKernel with the host stub) and nll_ptsz (per-thread default
// stream). Used by tests/fakecuda/ (the test double) and tests/e2e/ (labelguard end to end).
//
// usage: nll KERNEL [options] LABEL...
//   KERNEL  fwd_none   nll_loss_forward_no_reduce_cuda_kernel      (reduction='none', 2-D input)
//           fwd_1d     nll_loss_forward_reduce_cuda_kernel_1d      (1-D input: exactly one label)
//           fwd_2d     nll_loss_forward_reduce_cuda_kernel_2d      (mean/sum, the CrossEntropy path)
//           bwd_none   nll_loss_backward_no_reduce_cuda_kernel
//           bwd_1d     nll_loss_backward_reduce_cuda_kernel_1d
//           bwd_2d     nll_loss_backward_reduce_cuda_kernel_2d
//           2d_fwd_none  nll_loss2d_forward_no_reduce_kernel       (segmentation, int64 labels only)
//           2d_fwd       nll_loss2d_forward_kernel (+ nll_loss2d_forward_size_average_kernel for mean)
//           2d_bwd_none  nll_loss2d_backward_no_reduce_kernel
//           2d_bwd       nll_loss2d_backward_kernel
//           mismatch_fwd_2d  at::native::lg_test_mismatch::nll_loss_forward_reduce_cuda_kernel_2d:
//                        PyTorch's name, one extra int parameter (an unknown layout)
//           add_one    lg_test_add_one, an unwatched kernel (labels are ignored)
//   LABEL   integers (negative allowed), or one pattern word instead of a list:
//           good:N (N labels i % C), bad:N:POS:VALUE (good, but VALUE at index POS)
//   options:
//     --dtype int64|uint8      label type (default int64; the 2d_* kernels take int64 only)
//     --scalar float|double    input type (default float)
//     --classes C              number of classes (default 3)
//     --ignore I               ignore_index (default -100)
//     --reduction mean|sum     for the reduce kernels (default mean)
//     --weights off|on|W,W,..  class weights (on: weight[c] = c + 1; default off)
//     --hw H,W                 2d_* kernels: spatial size; N = labels / (H*W) (default 1,labels)
//     --stride S               2d_*_none kernels: store the target with a row stride of S >= W
//                              elements (a non-contiguous target, read through its strides); the
//                              padding holds the bad label C+100
//     --launch chevron|legacy|handle|exc   entry point (default chevron; legacy in nll_legacy)
//     --stream created|legacy|perthread    launch stream (default created)
//     --repeat K               launch K times before synchronising (default 1)
//     --no-follow              skip the follow-up launches
//     --logits                 inputs are raw logits (k % 4) - 1.5 instead of log-probabilities
// Inputs are log-probabilities x = -(flat_index + 1) / 4 (flat_index over [N, C] or
// [N, C, H, W] contiguous), exact in float, so expected outputs can be computed by hand.
// Backward kernels use grad_output = 1 (reduce; for mean with total_weight = the weight sum of
// the non-ignored labels) or grad_output[i] = i + 1 (none); grad_input starts at 0.
//
// output (stdout), one fact per line:
//   fakecudart_identity=<fakecuda|none>
//   launch_error_text="<cudaGetErrorString of the launch's error>"   (only when it failed)
//   kernel=<mangled name from cudaFuncGetName>
//   result launch_err=<int> sync_err=<int> last_err=<int> last_err_str="<text>" out=<v|-> total_weight=<v|->
//   values n=<count> <v0> <v1> ...      (per-sample outputs / gradients; only if they could be read)
//   after memcpy_err=<int> clean_launch_err=<int> clean_sync_err=<int> same_launch_err=<int> same_sync_err=<int>
// "after": a device-to-host cudaMemcpy, then an unwatched kernel (add_one), then the same kernel
// with all labels 0, each on the same stream. Exit status: 0 if the launch and its
// synchronisation succeeded, 1 if either failed (as a PyTorch program raises), 2 on bad usage.
#include "torch_kernels.cuh"
#include "lg_launch.cuh"
#include "lg_values.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct opts {
    std::string kernel;
    bool u8 = false, dbl = false;
    int64_t classes = 3, ignore = -100;
    bool mean = true;
    std::vector<double> weights;  // empty: none
    int64_t H = 1, W = 0, stride = 0;
    lg_launch_mode mode = LG_DEFAULT_MODE;
    std::string stream = "created";
    int repeat = 1;
    bool follow = true;
    bool logits = false;
    std::vector<int64_t> labels;
};

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "nll: %s\n(see the comment at the top of tests/progs/nll.cu for the usage)\n", why);
    exit(2);
}

std::vector<int64_t> parse_list(const char *s)
{
    std::vector<int64_t> v;
    while (*s) {
        char *end;
        v.push_back(strtoll(s, &end, 10));
        if (end == s) usage("bad number in list");
        s = *end == ',' ? end + 1 : end;
    }
    return v;
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
        if (a == "--dtype") { std::string v = val(); if (v == "uint8") o.u8 = true; else if (v != "int64") usage("bad --dtype"); }
        else if (a == "--scalar") { std::string v = val(); if (v == "double") o.dbl = true; else if (v != "float") usage("bad --scalar"); }
        else if (a == "--classes") o.classes = strtoll(val(), nullptr, 10);
        else if (a == "--ignore") o.ignore = strtoll(val(), nullptr, 10);
        else if (a == "--reduction") { std::string v = val(); if (v == "sum") o.mean = false; else if (v != "mean") usage("bad --reduction"); }
        else if (a == "--weights") {
            std::string v = val();
            if (v == "on") { for (int64_t c = 0; c < o.classes; c++) o.weights.push_back((double)(c + 1)); }
            else if (v != "off") { for (char *s = &v[0]; *s;) { char *e; o.weights.push_back(strtod(s, &e)); if (e == s) usage("bad --weights"); s = *e == ',' ? e + 1 : e; } }
        }
        else if (a == "--hw") { auto v = parse_list(val()); if (v.size() != 2) usage("bad --hw"); o.H = v[0]; o.W = v[1]; }
        else if (a == "--stride") o.stride = strtoll(val(), nullptr, 10);
        else if (a == "--launch") { if (lg_parse_mode(val(), &o.mode)) usage("bad --launch"); }
        else if (a == "--stream") o.stream = val();
        else if (a == "--repeat") o.repeat = atoi(val());
        else if (a == "--no-follow") o.follow = false;
        else if (a == "--logits") o.logits = true;
        else if (const char *why = lg_parse_values(a, o.classes, o.labels))
            usage(*why ? why : ("unknown argument " + a).c_str());
    }
    if (!o.weights.empty() && (int64_t)o.weights.size() < o.classes) usage("fewer weights than classes");
}

// Device buffers are tracked so that every one can be freed; any failure is reported, not fatal.
template <typename T>
T *dev_alloc(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, (n ? n : 1) * sizeof(T)) != cudaSuccess) return nullptr;
    return (T *)p;
}

template <typename T>
T *dev_copy(const std::vector<T> &v)
{
    T *p = dev_alloc<T>(v.size());
    if (p && !v.empty()) cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

template <typename T, size_t N>
at::PackedTensorAccessor64<T, N> accessor(T *data, const int64_t (&sizes)[N], const int64_t (&strides)[N])
{
    at::PackedTensorAccessor64<T, N> a;
    a.data_ = data;
    for (size_t d = 0; d < N; d++) { a.sizes_[d] = sizes[d]; a.strides_[d] = strides[d]; }
    return a;
}

void print_value(double v)
{
    if (std::isnan(v)) printf("nan");
    else printf("%.9g", v);
}

// One run: everything a PyTorch op would do on the host around the launch.
template <typename scalar_t, typename index_t>
int run(const opts &o)
{
    typedef scalar_t acc_t;
    const int64_t C = o.classes;
    const bool is2d = o.kernel.rfind("2d_", 0) == 0;
    const int64_t nlab = (int64_t)o.labels.size();
    int64_t N = nlab, H = 1, W = 1;
    if (is2d) {
        H = o.H;
        W = o.W ? o.W : nlab;
        if (H <= 0 || W <= 0 || nlab % (H * W)) usage("labels must be N*H*W for --hw");
        N = nlab / (H * W);
    }
    if (o.kernel.find("1d") != std::string::npos && nlab != 1) usage("1d kernels take exactly one label");
    const int64_t tstride = o.stride ? o.stride : W;
    if (tstride < W) usage("--stride must be >= W");
    if (o.stride && (!is2d || o.kernel.find("none") == std::string::npos)) usage("--stride is for 2d_fwd_none and 2d_bwd_none only");

    cudaStream_t stream = nullptr;
    if (o.stream == "created") cudaStreamCreate(&stream);
    else if (o.stream == "perthread") stream = cudaStreamPerThread;
    else if (o.stream != "legacy") usage("bad --stream");

    // Labels: 2d kernels get an [N,H,W] target with row stride tstride. The padding holds an
    // out-of-range label, so whoever ignores the strides reads a bad label.
    std::vector<index_t> hl;
    if (is2d) {
        hl.assign((size_t)(N * H * tstride), (index_t)(C + 100));
        for (int64_t b = 0; b < N; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) hl[(size_t)((b * H + h) * tstride + w)] = (index_t)o.labels[(size_t)((b * H + h) * W + w)];
    } else {
        for (int64_t l : o.labels) hl.push_back((index_t)l);
    }
    std::vector<index_t> good(hl.size(), (index_t)0);
    const int64_t in_count = is2d ? N * C * H * W : (o.kernel.find("1d") != std::string::npos ? C : nlab * C);
    std::vector<scalar_t> hin((size_t)in_count);
    for (int64_t k = 0; k < in_count; k++) hin[(size_t)k] = (scalar_t)(-(double)(k + 1) / 4.0);
    if (o.logits) // raw logits: a model output without log_softmax, every other value above 0
        for (int64_t k = 0; k < in_count; k++) hin[(size_t)k] = (scalar_t)((double)(k % 4) - 1.5);
    std::vector<scalar_t> hw;
    for (double w : o.weights) hw.push_back((scalar_t)w);

    // Backward inputs: total weight of the non-ignored labels (what the forward computed).
    double tw = 0;
    for (int64_t l : o.labels)
        if (l != o.ignore && (hw.empty() || (l >= 0 && l < C))) tw += hw.empty() ? 1.0 : (double)hw[(size_t)l];
    if (o.kernel.find("1d") != std::string::npos && o.labels[0] == o.ignore) tw = 0;

    index_t *d_target = dev_copy(hl), *d_good = dev_copy(good);
    scalar_t *d_in = dev_copy(hin);
    scalar_t *d_w = hw.empty() ? nullptr : dev_copy(hw);
    const int64_t out_count = is2d ? N * H * W : nlab;
    const int64_t grad_count = in_count;
    scalar_t *d_out = dev_copy(std::vector<scalar_t>((size_t)std::max<int64_t>(out_count, 1), (scalar_t)12345));
    scalar_t *d_tw = dev_copy(std::vector<scalar_t>(1, (scalar_t)0));
    scalar_t *d_grad = dev_copy(std::vector<scalar_t>((size_t)grad_count, (scalar_t)0));
    std::vector<scalar_t> hgo((size_t)std::max<int64_t>(out_count, 1));
    for (size_t k = 0; k < hgo.size(); k++) hgo[k] = (scalar_t)(k + 1);
    const bool is_bwd = o.kernel.rfind("bwd", 0) == 0 || o.kernel.rfind("2d_bwd", 0) == 0;
    const bool none = o.kernel.find("none") != std::string::npos;
    if (is_bwd && !none) hgo.assign(1, (scalar_t)1);
    scalar_t *d_go = dev_copy(hgo);
    scalar_t *d_gtw = dev_copy(std::vector<scalar_t>(1, (scalar_t)tw));
    float *d_unwatched = dev_copy(std::vector<float>(4, 0.0f));

    const void *stub = nullptr;
    // Launches the chosen kernel with `target` as its label buffer.
    auto launch = [&](const index_t *target) -> cudaError_t {
        const bool mean = o.mean;
        const int64_t b1 = (nlab + 1023) / 1024 > 0 ? (nlab + 1023) / 1024 : 1;
        const int64_t bps = 1;   // nll_loss2d: one block per sample is enough here
        const int64_t count = N * H * W;
        const int64_t sizes2[2] = { nlab, C }, strides2[2] = { C, 1 };
        const int64_t sizes1[1] = { nlab }, strides1[1] = { 1 };
        const int64_t sizes4[4] = { N, C, H, W }, strides4[4] = { C * H * W, H * W, W, 1 };
        const int64_t sizes3[3] = { N, H, W }, strides3[3] = { H * W, W, 1 };
        const int64_t tstrides3[3] = { H * tstride, tstride, 1 };
        const int64_t *t64 = (const int64_t *)target;
        const std::string &k = o.kernel;
        if (k == "fwd_none") {
            auto kern = at::native::nll_loss_forward_no_reduce_cuda_kernel<scalar_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3((unsigned)b1), dim3(1024), 0, stream, nlab, accessor(d_in, sizes2, strides2),
                             target, d_out, (const scalar_t *)d_w, C, o.ignore);
        } else if (k == "fwd_1d") {
            auto kern = at::native::nll_loss_forward_reduce_cuda_kernel_1d<scalar_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3(1), dim3(1), 0, stream, d_out, d_tw, (const scalar_t *)d_in, target,
                             (const scalar_t *)d_w, mean, C, o.ignore);
        } else if (k == "fwd_2d") {
            auto kern = at::native::nll_loss_forward_reduce_cuda_kernel_2d<scalar_t, acc_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3(1), dim3(32), 0, stream, d_out, d_tw, (const scalar_t *)d_in, target,
                             (const scalar_t *)d_w, mean, nlab, C, C, o.ignore);
        } else if (k == "mismatch_fwd_2d") {
            auto kern = at::native::lg_test_mismatch::nll_loss_forward_reduce_cuda_kernel_2d<scalar_t, acc_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3(1), dim3(32), 0, stream, d_out, d_tw, (const scalar_t *)d_in, target,
                             (const scalar_t *)d_w, mean, nlab, C, C, o.ignore, 7);
        } else if (k == "bwd_none") {
            auto kern = at::native::nll_loss_backward_no_reduce_cuda_kernel<scalar_t, index_t>;
            stub = (const void *)kern;
            at::PackedTensorAccessor64<const scalar_t, 1> go;
            go.data_ = d_go; go.sizes_[0] = sizes1[0]; go.strides_[0] = strides1[0];
            return lg_launch(o.mode, kern, dim3((unsigned)b1), dim3(1024), 0, stream, (int)nlab, target, go,
                             accessor(d_grad, sizes2, strides2), (const scalar_t *)d_w, C, o.ignore);
        } else if (k == "bwd_1d") {
            auto kern = at::native::nll_loss_backward_reduce_cuda_kernel_1d<scalar_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3(1), dim3(1), 0, stream, d_grad, (const scalar_t *)d_go, (const scalar_t *)d_w,
                             target, (const scalar_t *)d_gtw, mean, C, o.ignore);
        } else if (k == "bwd_2d") {
            auto kern = at::native::nll_loss_backward_reduce_cuda_kernel_2d<scalar_t, index_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3(1), dim3(32), 0, stream, d_grad, (const scalar_t *)d_go, target,
                             (const scalar_t *)d_w, (const scalar_t *)d_gtw, mean, (int)nlab, (int)C, C, o.ignore);
        } else if (k == "2d_fwd_none") {
            auto kern = at::native::nll_loss2d_forward_no_reduce_kernel<scalar_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3((unsigned)((count + 1023) / 1024)), dim3(1024), 0, stream, count,
                             accessor(d_in, sizes4, strides4), accessor((int64_t *)t64, sizes3, tstrides3),
                             accessor(d_out, sizes3, strides3), (const scalar_t *)d_w, o.ignore);
        } else if (k == "2d_fwd") {
            auto kern = at::native::nll_loss2d_forward_kernel<scalar_t, acc_t, int>;
            stub = (const void *)kern;
            cudaMemsetAsync(d_out, 0, sizeof(scalar_t), stream);   // output.zero_(), total_weight.zero_()
            cudaMemsetAsync(d_tw, 0, sizeof(scalar_t), stream);
            cudaError_t e = lg_launch(o.mode, kern, dim3((unsigned)(bps * N)), dim3(1024), 0, stream, d_out, d_tw,
                                      (const scalar_t *)d_in, t64, (const scalar_t *)d_w, (int)C, (int)(H * W), (int)bps, o.ignore);
            if (e == cudaSuccess && mean)
                e = lg_launch(o.mode, at::native::nll_loss2d_forward_size_average_kernel<scalar_t>, dim3(1), dim3(1), 0, stream,
                              d_out, (const scalar_t *)d_tw);
            return e;
        } else if (k == "2d_bwd_none") {
            auto kern = at::native::nll_loss2d_backward_no_reduce_kernel<scalar_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3((unsigned)((count + 1023) / 1024)), dim3(1024), 0, stream, count,
                             accessor((int64_t *)t64, sizes3, tstrides3), accessor(d_go, sizes3, strides3),
                             accessor(d_grad, sizes4, strides4), (const scalar_t *)d_w, o.ignore);
        } else if (k == "2d_bwd") {
            auto kern = at::native::nll_loss2d_backward_kernel<scalar_t>;
            stub = (const void *)kern;
            return lg_launch(o.mode, kern, dim3((unsigned)(bps * N)), dim3(1024), 0, stream, d_grad, (const scalar_t *)d_go,
                             t64, (const scalar_t *)d_w, (const scalar_t *)d_gtw, mean, (int)C, (int)(H * W), (int)bps, o.ignore);
        } else if (k == "add_one") {
            stub = (const void *)lg_test_add_one;
            return lg_launch(o.mode, lg_test_add_one, dim3(1), dim3(32), 0, stream, d_unwatched, 4);
        }
        usage(("unknown kernel " + k).c_str());
    };

    cudaError_t launch_err = cudaSuccess;
    for (int r = 0; r < o.repeat; r++) {
        cudaError_t e = launch(d_target);
        if (launch_err == cudaSuccess) launch_err = e;
    }
    // What PyTorch's launch check shows the user: cudaGetErrorString of the launch's error.
    if (launch_err != cudaSuccess) printf("launch_error_text=\"%s\"\n", cudaGetErrorString(launch_err));
    const char *name = nullptr;
    if (stub && cudaFuncGetName(&name, stub) == cudaSuccess) printf("kernel=%s\n", name);
    else printf("kernel=?\n");
    cudaError_t sync_err = cudaStreamSynchronize(stream);
    cudaError_t last_err = cudaGetLastError();
    printf("result launch_err=%d sync_err=%d last_err=%d last_err_str=\"%s\"", (int)launch_err, (int)sync_err, (int)last_err,
           cudaGetErrorString(last_err));
    const bool reduce_fwd = o.kernel == "fwd_1d" || o.kernel == "fwd_2d" || o.kernel == "2d_fwd" || o.kernel == "mismatch_fwd_2d";
    std::vector<scalar_t> hv;
    cudaError_t read_err = cudaSuccess;
    if (reduce_fwd) {
        scalar_t out = 0, t = 0;
        read_err = cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost);
        if (read_err == cudaSuccess) read_err = cudaMemcpy(&t, d_tw, sizeof t, cudaMemcpyDeviceToHost);
        if (read_err == cudaSuccess) { printf(" out="); print_value((double)out); printf(" total_weight="); print_value((double)t); printf("\n"); }
        else printf(" out=- total_weight=-\n");
    } else {
        printf(" out=- total_weight=-\n");
        std::vector<float> hf;
        if (o.kernel == "add_one") { hf.resize(4); read_err = cudaMemcpy(hf.data(), d_unwatched, 4 * sizeof(float), cudaMemcpyDeviceToHost); }
        else if (is_bwd) { hv.resize((size_t)grad_count); read_err = cudaMemcpy(hv.data(), d_grad, hv.size() * sizeof(scalar_t), cudaMemcpyDeviceToHost); }
        else { hv.resize((size_t)out_count); read_err = cudaMemcpy(hv.data(), d_out, hv.size() * sizeof(scalar_t), cudaMemcpyDeviceToHost); }
        if (read_err == cudaSuccess) {
            printf("values n=%zu", hf.empty() ? hv.size() : hf.size());
            for (float x : hf) { printf(" "); print_value(x); }
            for (scalar_t x : hv) { printf(" "); print_value((double)x); }
            printf("\n");
        }
    }
    fflush(stdout);

    if (o.follow) {
        char probe[8];
        cudaError_t memcpy_err = cudaMemcpy(probe, d_in, sizeof probe, cudaMemcpyDeviceToHost);
        cudaError_t clean_launch = lg_launch(o.mode, lg_test_add_one, dim3(1), dim3(32), 0, stream, d_unwatched, 4);
        cudaError_t clean_sync = cudaStreamSynchronize(stream);
        cudaError_t same_launch = o.kernel == "add_one" ? cudaSuccess : launch(d_good);
        cudaError_t same_sync = cudaStreamSynchronize(stream);
        printf("after memcpy_err=%d clean_launch_err=%d clean_sync_err=%d same_launch_err=%d same_sync_err=%d\n", (int)memcpy_err,
               (int)clean_launch, (int)clean_sync, (int)same_launch, (int)same_sync);
    }
    fflush(stdout);
    for (void *p : { (void *)d_target, (void *)d_good, (void *)d_in, (void *)d_w, (void *)d_out, (void *)d_tw, (void *)d_grad,
                     (void *)d_go, (void *)d_gtw, (void *)d_unwatched })
        cudaFree(p);
    if (stream && o.stream == "created") cudaStreamDestroy(stream);
    return launch_err == cudaSuccess && sync_err == cudaSuccess ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, o);
    lg_print_identity();
    if (o.labels.empty() && o.kernel != "add_one") usage("no labels");
    if (o.kernel == "add_one" && o.labels.empty()) o.labels.push_back(0);
    const bool is2d = o.kernel.rfind("2d_", 0) == 0;
    if (is2d && o.u8) usage("the nll_loss2d kernels take int64 labels only");
    if (o.dbl) return o.u8 ? run<double, uint8_t>(o) : run<double, int64_t>(o);
    return o.u8 ? run<float, uint8_t>(o) : run<float, int64_t>(o);
}
