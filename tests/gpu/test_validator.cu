// test_validator.cu: the GPU validator, through the shipped path, against the CPU scan.
//
// Links src/checks/validate.c's object and the embedded fatbin exactly as liblabelguard.so does, and
// gives it a runtime table made of this program's own cudart, so lg_validate_init loads the
// fatbin with the driver API into the primary context and every lg_validate_* call below runs
// the kernels of cuda/validate.cu. Each verdict is compared with lg_scan_host (cuda/lg_scan.h,
// itself tested against a naive reference by tests/unit/test_scan.c) on the same bytes.
//
// Covers: int64/uint8/int32; 1 to 2^26 labels; random, bad at first/last, all bad, none bad,
// all ignored; strided 3-D views and unaligned starts (the generic kernels); samples 1/16/256;
// masked copies and the fused async kernel (copy + verdict in mapped memory); a captured CUDA
// graph replayed with changing labels; one graph instantiated twice (the second exec's validator
// node and loss launch pointed at scratch of their own by the driver); refusal of host memory and of spans past an
// allocation without harming the context. Then timing for 64, 65536 and 16M int64 labels.
//
// Built by `make gpu-tests` into build/tests/gpu/test_validator; run by tests/gpu/run.sh.
// Exit 0 pass, 1 fail, 77 no GPU (one line).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <random>

// The layer headers are C11; fields and globals this test never touches are _Atomic, which C++ does
// not know, in both spellings: `_Atomic int` and `_Atomic(T *)`. Same size and alignment as the
// plain types on every ABI we build for. The header gained `_Atomic(T)` and the
// old `#define _Atomic volatile` turned it into `volatile(T) x;`, so this test no longer
// compiled (`make gpu-tests` is not part of `make test`). `_Atomic` becomes `volatile`, and a
// function-like `volatile(...)` (expanded only when a `(` follows) turns `volatile(T) x` into
// `T volatile x`; both are dropped before any other header is read.
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#define _Atomic volatile
#define volatile(...) __VA_ARGS__ volatile
extern "C" {
#include "hooks/hooks.h"
}
#undef volatile
#undef _Atomic
#include "lg_validate.h"

static int failures;
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
            printf(__VA_ARGS__);                                                 \
            printf("\n");                                                        \
            if (failures > 30) {                                                 \
                printf("too many failures\n");                                   \
                exit(1);                                                         \
            }                                                                    \
        }                                                                        \
    } while (0)
#define CUDA_OK(call)                                                            \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) {                                                 \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

// ---------------------------------------------------------------- the runtime table
static int r_memcpy(void *d, const void *s, size_t n, int k, void *st) { return cudaMemcpyAsync(d, s, n, (cudaMemcpyKind)k, (cudaStream_t)st); }
static int r_sync(void *s) { return cudaStreamSynchronize((cudaStream_t)s); }
static int r_malloc(void **p, size_t n) { return cudaMalloc(p, n); }
static int r_free(void *p) { return cudaFree(p); }
static int r_malloc_host(void **p, size_t n) { return cudaMallocHost(p, n); }
static int r_free_host(void *p) { return cudaFreeHost(p); }
static int r_attr(void *a, const void *p) { return cudaPointerGetAttributes((cudaPointerAttributes *)a, p); }
static int r_capturing(void *s, int *st)
{
    cudaStreamCaptureStatus c;
    int rc = cudaStreamIsCapturing((cudaStream_t)s, &c);
    *st = (int)c;
    return rc;
}
static int r_get_device(int *d) { return cudaGetDevice(d); }
static int r_last_error(void) { return cudaGetLastError(); }

static size_t esize(lg_dtype_t d) { return lg_scan_elem_size(d); }
static const char *dname(lg_dtype_t d)
{
    static const char *const n[] = {"i64", "u8", "i32", "f32", "f64", "f16", "bf16"};
    return n[(int)d];
}

static void store(lg_dtype_t d, void *base, int64_t off, int64_t v)
{
    if (lg_scan_is_float(d)) // raw bits, the dtype's width (little-endian: the low bytes)
        memcpy((uint8_t *)base + (size_t)off * esize(d), &v, esize(d));
    else if (d == LG_DTYPE_UINT8)
        ((uint8_t *)base)[off] = (uint8_t)v;
    else if (d == LG_DTYPE_INT32)
        ((int32_t *)base)[off] = (int32_t)v;
    else
        ((int64_t *)base)[off] = v;
}

static lg_target_t flat(lg_dtype_t d, int64_t count, int64_t n_classes)
{
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.dtype = d;
    t.ndim = 1;
    t.sizes[0] = count;
    t.strides[0] = 1;
    t.count = count;
    t.n_classes = n_classes;
    t.ignore_index = d == LG_DTYPE_UINT8 ? 255 : -100;
    t.has_ignore_index = !lg_scan_is_float(d); // range targets (BCE) have none
    return t;
}

// Bits the range rule turns on (f32, f64, f16, bf16 rows): 0, -0, 1, next above 1, +-smallest
// subnormal, largest subnormal, 0.5, largest below 1, -1, +-inf, +-quiet NaN, signalling NaN,
// largest finite.
static const uint64_t special[4][16] = {
    {0x00000000, 0x80000000, 0x3f800000, 0x3f800001, 0x00000001, 0x80000001, 0x007fffff, 0x3f000000, 0x3f7fffff,
     0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7f7fffff},
    {0x0000000000000000ull, 0x8000000000000000ull, 0x3ff0000000000000ull, 0x3ff0000000000001ull, 0x1ull,
     0x8000000000000001ull, 0x000fffffffffffffull, 0x3fe0000000000000ull, 0x3fefffffffffffffull,
     0xbff0000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7ff8000000000000ull,
     0xfff8000000000000ull, 0x7ff0000000000001ull, 0x7fefffffffffffffull},
    {0x0000, 0x8000, 0x3c00, 0x3c01, 0x0001, 0x8001, 0x03ff, 0x3800, 0x3bff, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0xfe00,
     0x7c01, 0x7bff},
    {0x0000, 0x8000, 0x3f80, 0x3f81, 0x0001, 0x8001, 0x007f, 0x3f00, 0x3f7f, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffc0,
     0x7f81, 0x7f7f},
};

static int64_t span_of(const lg_target_t &t)
{
    if (t.ndim <= 1)
        return t.count ? 1 + (t.count - 1) * t.strides[0] : 0;
    int64_t s = 1;
    for (int d = 0; d < t.ndim; d++)
        s += (t.sizes[d] - 1) * t.strides[d];
    return s;
}

enum pattern { P_RANDOM, P_FIRST, P_LAST, P_ALL_BAD, P_CLEAN, P_ALL_IGNORED };
static const char *pname[] = {"random", "bad-first", "bad-last", "all-bad", "clean", "all-ignored"};

// Fills the span with labels; the logical first/last elements get the special values.
static void fill(std::mt19937_64 &g, const lg_target_t &t, std::vector<uint8_t> &host, pattern p)
{
    int64_t span = span_of(t);
    host.assign((size_t)span * esize(t.dtype), 0);
    if (lg_scan_is_float(t.dtype)) {
        // probabilities: valid, with specials; "ignored" here is all NaN, "clean" zeros of both signs
        const uint64_t *sp = special[t.dtype - LG_DTYPE_FLOAT32];
        static const int bad[] = {3, 5, 9, 10, 11, 12, 13, 14};
        for (int64_t o = 0; o < span; o++) {
            uint64_t x = g(), b = sp[7 + (x & 1)];
            if (p == P_RANDOM && x % 1000 < 5)
                b = sp[(x >> 20) % 16];
            else if (p == P_ALL_BAD)
                b = sp[bad[(x >> 20) % 8]];
            else if (p == P_CLEAN && x % 10 == 0)
                b = sp[(x >> 20) % 2];
            else if (p == P_ALL_IGNORED)
                b = sp[12 + (x >> 20) % 3];
            store(t.dtype, host.data(), o, (int64_t)b);
        }
        lg_target_t tt = t;
        if (p == P_FIRST)
            store(t.dtype, host.data(), 0, (int64_t)sp[12]);
        if (p == P_LAST)
            store(t.dtype, host.data(), lg_scan_offset(&tt, t.count - 1), (int64_t)sp[3]);
        return;
    }
    int64_t nc = t.n_classes;
    int64_t hi = t.dtype == LG_DTYPE_UINT8 ? 254 : nc + 1000;
    for (int64_t o = 0; o < span; o++) {
        uint64_t x = g();
        int64_t v = (int64_t)(x % (uint64_t)nc);
        switch (p) {
        case P_RANDOM:
            if (x % 1000 < 3)
                v = (x >> 20) % 2 && t.dtype != LG_DTYPE_UINT8 ? -1 - (int64_t)((x >> 24) % 50) : nc + (int64_t)((x >> 24) % (uint64_t)(hi - nc + 1));
            else if (x % 1000 < 20)
                v = t.ignore_index;
            break;
        case P_ALL_BAD: v = t.dtype == LG_DTYPE_UINT8 ? nc + (int64_t)(x % (uint64_t)(255 - nc)) : nc + (int64_t)(x % 7); break;
        case P_ALL_IGNORED: v = t.ignore_index; break;
        default: break;
        }
        store(t.dtype, host.data(), o, v);
    }
    if (p == P_FIRST)
        store(t.dtype, host.data(), 0, nc);
    if (p == P_LAST) {
        lg_target_t tt = t;
        store(t.dtype, host.data(), lg_scan_offset(&tt, t.count - 1), t.dtype == LG_DTYPE_UINT8 ? 254 : -7);
    }
}

static bool same(const lg_verdict_t &a, const lg_verdict_t &b, const char *what)
{
    bool ok = a.bad_count == b.bad_count && a.checked == b.checked && a.min == b.min && a.max == b.max &&
              a.n_samples == b.n_samples;
    for (int i = 0; ok && i < a.n_samples; i++)
        ok = a.samples[i].index == b.samples[i].index && a.samples[i].value == b.samples[i].value;
    CHECK(ok, "%s: gpu bad=%lld checked=%lld min=%lld max=%lld n=%d s0=(%lld,%lld) | cpu bad=%lld checked=%lld min=%lld max=%lld n=%d s0=(%lld,%lld)",
          what, (long long)a.bad_count, (long long)a.checked, (long long)a.min, (long long)a.max, a.n_samples,
          a.n_samples ? (long long)a.samples[0].index : -1LL, a.n_samples ? (long long)a.samples[0].value : -1LL,
          (long long)b.bad_count, (long long)b.checked, (long long)b.min, (long long)b.max, b.n_samples,
          b.n_samples ? (long long)b.samples[0].index : -1LL, b.n_samples ? (long long)b.samples[0].value : -1LL);
    return ok;
}

static lg_verdict_t gv, cv; // big: keep them off the stack

// One case: sync verdict vs the CPU, then the masked copy and the async kernel vs the CPU.
static void run_case(std::mt19937_64 &g, lg_target_t t, pattern p, int samples, int64_t offset_elems, cudaStream_t s,
                     bool copies)
{
    std::vector<uint8_t> host;
    fill(g, t, host, p);
    size_t bytes = host.size();
    size_t off = (size_t)offset_elems * esize(t.dtype);
    uint8_t *dev;
    CUDA_OK(cudaMalloc(&dev, bytes + off + 16));
    CUDA_OK(cudaMemcpy(dev + off, host.data(), bytes, cudaMemcpyHostToDevice));
    t.data = (uint64_t)(uintptr_t)(dev + off);
    char what[200], why[512] = "";
    snprintf(what, sizeof what, "%s n=%lld ndim=%d %s samples=%d off=%lld", dname(t.dtype), (long long)t.count, t.ndim,
             pname[p], samples, (long long)offset_elems);

    lg_scan_host(&t, host.data(), samples, &cv);
    memset(&gv, 0x5a, sizeof gv);
    int rc = lg_validate_sync(&t, s, samples, &gv, why, sizeof why);
    CHECK(rc == 0, "%s: lg_validate_sync: %s", what, why);
    if (rc == 0)
        same(gv, cv, what);

    if (copies) {
        // Expected copy: same offsets, bad labels replaced.
        int64_t repl = lg_scan_is_float(t.dtype) ? 0 : t.dtype == LG_DTYPE_UINT8 ? 255 : -100; // 0.0's bits
        std::vector<uint8_t> want = host;
        for (int64_t i = 0; i < t.count; i++) {
            int64_t v = lg_scan_load(&t, host.data(), i);
            if (!lg_scan_is_ignored(&t, v) && lg_scan_is_bad(&t, v))
                store(t.dtype, want.data(), lg_scan_offset(&t, i), repl);
        }
        std::vector<uint8_t> got(bytes);
        uint64_t c = lg_validate_masked_copy(&t, s, repl, why, sizeof why);
        CHECK(c != 0, "%s: masked copy: %s", what, why);
        if (c) {
            CUDA_OK(cudaMemcpyAsync(got.data(), (void *)(uintptr_t)c, bytes, cudaMemcpyDeviceToHost, s));
            CUDA_OK(cudaStreamSynchronize(s));
            bool eq = true;
            for (int64_t i = 0; i < t.count && eq; i++) {
                int64_t o = lg_scan_offset(&t, i);
                eq = memcmp(&got[(size_t)o * esize(t.dtype)], &want[(size_t)o * esize(t.dtype)], esize(t.dtype)) == 0;
                if (!eq)
                    CHECK(eq, "%s: masked copy differs at logical index %lld", what, (long long)i);
            }
        }
        // The fused async kernel: copy and verdict from one launch, collected after a sync.
        lg_async_report_t *r = (lg_async_report_t *)calloc(1, sizeof *r);
        while (lg_verdicts_collect(r, LG_COLLECT_MINE, NULL))
            ;
        uint64_t san = 0;
        struct lg_kernel_info *cookie = (struct lg_kernel_info *)(uintptr_t)0xc0ffee;
        rc = lg_validate_async(&t, s, repl, samples, cookie, NULL, NULL, &san, why, sizeof why);
        CHECK(rc == 0 && san != 0, "%s: async: %s", what, why);
        if (rc == 0) {
            CUDA_OK(cudaStreamSynchronize(s));
            CHECK(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "%s: async verdict not ready after a stream sync", what);
            CHECK(r->info == cookie && r->stream == (void *)s, "%s: async report mixed up", what);
            same(r->verdict, cv, "async");
            CUDA_OK(cudaMemcpy(got.data(), (void *)(uintptr_t)san, bytes, cudaMemcpyDeviceToHost));
            for (int64_t i = 0; i < t.count; i++) {
                int64_t o = lg_scan_offset(&t, i);
                if (memcmp(&got[(size_t)o * esize(t.dtype)], &want[(size_t)o * esize(t.dtype)], esize(t.dtype))) {
                    CHECK(false, "%s: async sanitized copy differs at logical index %lld", what, (long long)i);
                    break;
                }
            }
            CHECK(!lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "%s: a second report for one async check", what);
        }
        free(r);
    }
    CUDA_OK(cudaFree(dev));
}

// The loss launch of test_graph_execs: reads its target (the sanitized copy) as a loss kernel
// does, into `out`.
__global__ void copy_target(const int64_t *target, int64_t n, int64_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = target[i];
}

// One captured check and its loss launch, instantiated twice: exec A replays clean labels, exec
// B bad ones after it. B's verdict comes from its own ring (exec 2), its loss reads its own
// sanitized copy, and A's sanitized copy keeps A's labels: with shared scratch B's validator
// would have written its replacements into A's copy.
static void test_graph_execs(cudaStream_t s)
{
    const int64_t n = 5000;
    lg_target_t t = flat(LG_DTYPE_INT64, n, 10);
    std::vector<int64_t> h(n, 3);
    int64_t *dev, *out;
    CUDA_OK(cudaMalloc(&dev, n * 8));
    CUDA_OK(cudaMalloc(&out, n * 8));
    CUDA_OK(cudaMemcpy(dev, h.data(), n * 8, cudaMemcpyHostToDevice));
    t.data = (uint64_t)(uintptr_t)dev;
    lg_spec_t spec;
    memset(&spec, 0, sizeof spec);
    spec.n_params = 3;
    spec.param_sizes[0] = spec.param_sizes[1] = spec.param_sizes[2] = 8;
    spec.target.param = 0;
    spec.target.offset = 0;
    static lg_kernel_info_t info;
    memset(&info, 0, sizeof info);
    info.spec = &spec;
    info.func = (const void *)copy_target;
    lg_async_report_t *r = (lg_async_report_t *)calloc(1, sizeof *r);
    while (lg_verdicts_collect(r, LG_COLLECT_SYNC_ALL, NULL))
        ;
    char why[512] = "";
    uint64_t san = 0;
    cudaGraph_t graph;
    cudaGraphExec_t xa, xb;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus cst;
    unsigned long long cid = 0;
    CUDA_OK(cudaStreamGetCaptureInfo(s, &cst, &cid));
    lg_capture_t cap = {cid, true};
    int rc = lg_validate_async(&t, s, -100, 16, &info, &cap, NULL, &san, why, sizeof why);
    copy_target<<<8, 256, 0, s>>>((const int64_t *)(uintptr_t)san, n, out);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    lg_graphs_end_capture(cid, graph);
    CHECK(rc == 0, "graph execs: async inside capture: %s", why);
    if (rc != 0)
        return;
    CUDA_OK(cudaGraphInstantiate(&xa, graph, 0));
    lg_graphs_instantiated(xa, graph);
    CUDA_OK(cudaGraphInstantiate(&xb, graph, 0));
    lg_graphs_instantiated(xb, graph);
    std::vector<int64_t> got(n);
    for (int k = 0; k < 2; k++) {
        h.assign(n, 3);
        if (k == 1)
            h[17] = 99, h[n - 1] = -2;
        CUDA_OK(cudaMemcpy(dev, h.data(), n * 8, cudaMemcpyHostToDevice));
        CUDA_OK(cudaGraphLaunch(k ? xb : xa, s));
        lg_graphs_launched(k ? xb : xa, s);
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "graph execs: exec %d's replay not reported", k + 1);
        CHECK(r->exec == (uint64_t)(k + 1) && r->replay == 1, "graph execs: exec %llu replay %llu, want exec %d replay 1",
              (unsigned long long)r->exec, (unsigned long long)r->replay, k + 1);
        CHECK(r->verdict.bad_count == (k ? 2 : 0), "graph execs: exec %d bad=%lld", k + 1,
              (long long)r->verdict.bad_count);
        CUDA_OK(cudaMemcpy(got.data(), out, n * 8, cudaMemcpyDeviceToHost));
        CHECK(k ? got[17] == -100 && got[n - 1] == -100 && got[0] == 3 : got[17] == 3 && got[n - 1] == 3,
              "graph execs: exec %d's loss read %lld at 17", k + 1, (long long)got[17]);
    }
    CUDA_OK(cudaMemcpy(got.data(), (void *)(uintptr_t)san, n * 8, cudaMemcpyDeviceToHost));
    CHECK(got[17] == 3 && got[n - 1] == 3, "graph execs: exec B's validator wrote into exec A's copy (%lld at 17)",
          (long long)got[17]);
    cudaGraphExecDestroy(xa);
    cudaGraphExecDestroy(xb);
    lg_graphs_exec_destroyed(xa);
    lg_graphs_exec_destroyed(xb);
    cudaGraphDestroy(graph);
    lg_graphs_destroyed(graph);
    cudaFree(dev);
    cudaFree(out);
    free(r);
}

static void test_graph(cudaStream_t s)
{
    // Capture one async validation, then replay with changing labels: each replay is judged.
    const int64_t n = 5000;
    lg_target_t t = flat(LG_DTYPE_INT64, n, 10);
    std::vector<int64_t> h(n, 3);
    int64_t *dev;
    CUDA_OK(cudaMalloc(&dev, n * 8));
    CUDA_OK(cudaMemcpy(dev, h.data(), n * 8, cudaMemcpyHostToDevice));
    t.data = (uint64_t)(uintptr_t)dev;
    lg_async_report_t *r = (lg_async_report_t *)calloc(1, sizeof *r);
    while (lg_verdicts_collect(r, LG_COLLECT_MINE, NULL))
        ;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    char why[512] = "";
    uint64_t san = 0;
    // What the hooks do (preload.c): the capture's id, then the graph and exec it became.
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus cst;
    unsigned long long cid = 0;
    CUDA_OK(cudaStreamGetCaptureInfo(s, &cst, &cid));
    lg_capture_t cap = {cid, true};
    int rc = lg_validate_async(&t, s, -100, 16, NULL, &cap, NULL, &san, why, sizeof why);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    lg_graphs_end_capture(cid, graph);
    CHECK(rc == 0, "graph: async inside capture: %s", why);
    if (rc != 0)
        return;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    lg_graphs_instantiated(exec, graph);
    CHECK(!lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "graph: a report before any replay");
    for (int rep = 0; rep < 3; rep++) {
        h.assign(n, 3);
        if (rep == 1) {
            h[17] = 99;
            h[n - 1] = -2;
        }
        CUDA_OK(cudaMemcpy(dev, h.data(), n * 8, cudaMemcpyHostToDevice));
        CUDA_OK(cudaGraphLaunch(exec, s));
        lg_graphs_launched(exec, s);
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "graph: replay %d not reported", rep);
        CHECK(r->verdict.bad_count == (rep == 1 ? 2 : 0), "graph: replay %d bad=%lld", rep, (long long)r->verdict.bad_count);
        if (rep == 1) {
            CHECK(r->verdict.n_samples == 2 && r->verdict.samples[0].index == 17 && r->verdict.samples[1].index == n - 1,
                  "graph: samples n=%d", r->verdict.n_samples);
            std::vector<int64_t> got(n);
            CUDA_OK(cudaMemcpy(got.data(), (void *)(uintptr_t)san, n * 8, cudaMemcpyDeviceToHost));
            CHECK(got[17] == -100 && got[n - 1] == -100 && got[0] == 3, "graph: sanitized copy wrong");
        }
        CHECK(!lg_verdicts_collect(r, LG_COLLECT_MINE, NULL), "graph: more than one report for replay %d", rep);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(dev);
    free(r);
}

static void test_refusals(cudaStream_t s)
{
    char why[512] = "";
    lg_target_t t = flat(LG_DTYPE_INT64, 100, 10);
    std::vector<int64_t> host(100, 1);
    t.data = (uint64_t)(uintptr_t)host.data();
    int rc = lg_validate_sync(&t, s, 16, &gv, why, sizeof why);
    if (rc == 0) {
        // Only where the driver reports pageable memory as device-readable (HMM/ATS): then
        // the loss kernel could read it too, and the verdict must be right.
        CHECK(gv.checked == 100 && gv.bad_count == 0, "host memory accepted with a wrong verdict");
        printf("note: pageable host memory is device-readable here and was validated\n");
    } else {
        printf("refused host memory: %s\n", why);
    }
    int64_t *dev;
    CUDA_OK(cudaMalloc(&dev, 100 * 8));
    t.data = (uint64_t)(uintptr_t)dev;
    t.count = t.sizes[0] = 1000000; // runs far past the allocation
    rc = lg_validate_sync(&t, s, 16, &gv, why, sizeof why);
    CHECK(rc == -1, "a span past the allocation was accepted");
    printf("refused overlong span: %s\n", why);
    t.data = 0;
    rc = lg_validate_sync(&t, s, 16, &gv, why, sizeof why);
    CHECK(rc == -1, "NULL was accepted");
    CHECK(cudaGetLastError() == cudaSuccess, "a refusal left a CUDA error behind");
    CUDA_OK(cudaDeviceSynchronize()); // the context is alive
    cudaFree(dev);
}

static double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void timing(cudaStream_t s)
{
    int dev, clk = 0, bus = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev);
    double peak = 2.0 * clk * 1e3 * bus / 8 / 1e9; // GB/s, DDR
    const int64_t sizes[] = {64, 65536, 16 << 20};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int64_t n : sizes) {
        lg_target_t t = flat(LG_DTYPE_INT64, n, 1000);
        int64_t *d;
        CUDA_OK(cudaMalloc(&d, n * 8));
        CUDA_OK(cudaMemset(d, 0, n * 8));
        t.data = (uint64_t)(uintptr_t)d;
        char why[512];
        for (int w = 0; w < 3; w++)
            lg_validate_sync(&t, s, 16, &gv, why, sizeof why);
        // Copy time of the same bytes (read + write) as a measured bandwidth reference.
        int64_t *d2;
        CUDA_OK(cudaMalloc(&d2, n * 8));
        int reps = n < 1000000 ? 200 : 20;
        cudaEventRecord(e0, s);
        for (int i = 0; i < reps; i++)
            cudaMemcpyAsync(d2, d, n * 8, cudaMemcpyDeviceToDevice, s);
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float copy_ms;
        cudaEventElapsedTime(&copy_ms, e0, e1);
        double copy_gbs = 2.0 * n * 8 * reps / (copy_ms * 1e-3) / 1e9;
        // Kernel time (events around the launch) and wall time of the whole sync call.
        float ms_sum = 0;
        double wall = 0;
        for (int i = 0; i < reps; i++) {
            cudaEventRecord(e0, s);
            double w0 = now_s();
            int rc = lg_validate_sync(&t, s, 16, &gv, why, sizeof why);
            wall += now_s() - w0;
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            ms_sum += ms;
            CHECK(rc == 0 && gv.bad_count == 0 && gv.checked == n, "timing run wrong: %s", why);
        }
        double ns = ms_sum * 1e6 / reps, gbs = n * 8 / (ns * 1e-9) / 1e9;
        printf("labels %lld bytes %lld ns %.0f GB/s %.1f (sync call wall %.0f ns; memcpy D2D %.1f GB/s; peak %.0f GB/s)%s\n",
               (long long)n, (long long)n * 8, ns, gbs, wall * 1e9 / reps, copy_gbs, peak,
               n >= (16 << 20) ? (gbs * 2 >= copy_gbs ? " PERF-OK (within 2x of copy bandwidth)" : " PERF-SLOW (more than 2x below copy bandwidth)") : "");
        cudaFree(d);
        cudaFree(d2);
    }
}

int main(int argc, char **argv)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: test_validator skipped\n");
        return 77;
    }
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    CUDA_OK(cudaFree(0)); // the primary context is current, as in a process that launched kernels
    static lg_runtime_t rt;
    rt.memcpy_async = r_memcpy;
    rt.stream_synchronize = r_sync;
    rt.malloc_device = r_malloc;
    rt.free_device = r_free;
    rt.malloc_host = r_malloc_host;
    rt.free_host = r_free_host;
    rt.pointer_attributes = r_attr;
    rt.stream_is_capturing = r_capturing;
    rt.get_device = r_get_device;
    rt.get_last_error = r_last_error;
    lg_validate_init(&rt);
    // LG_TEST_HOST_BACKEND=1 (under the runtime test double): a dry run of this program's own
    // logic through the host backend, so its CPU side is tested where no GPU exists.
    bool dry = getenv("LG_TEST_HOST_BACKEND") && lg_validate_backend() == LG_BACKEND_HOST;
    if (dry)
        printf("dry run: host backend (no GPU kernel runs)\n");
    else if (lg_validate_backend() != LG_BACKEND_GPU) {
        printf("FAIL: the GPU backend did not load (the fatbin has no code for this device?)\n");
        return 1;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("device %s sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::mt19937_64 g(20240601);
    const lg_dtype_t dts[] = {LG_DTYPE_INT64, LG_DTYPE_UINT8, LG_DTYPE_INT32};
    const int64_t sizes[] = {1, 2, 15, 63, 64, 65, 1000, 2047, 2048, 2049, 16383, 16384, 16385, 65536, 1000003};
    const int samples[] = {1, 16, 256};
    int cases = 0;
    for (lg_dtype_t d : dts)
        for (int64_t sz : sizes)
            for (int p = 0; p < 6; p++) {
                lg_target_t t = flat(d, sz, d == LG_DTYPE_UINT8 ? 21 : 1000);
                run_case(g, t, (pattern)p, samples[(cases++) % 3], 0, s, sz <= 70000);
            }
    // Range targets (BCE's probabilities), each float dtype: the range kernels against lg_scan_host.
    for (lg_dtype_t d : {LG_DTYPE_FLOAT32, LG_DTYPE_FLOAT64, LG_DTYPE_FLOAT16, LG_DTYPE_BFLOAT16})
        for (int64_t sz : {1LL, 65LL, 2049LL, 16385LL, 1000003LL})
            for (int p = 0; p < 6; p++)
                run_case(g, flat(d, sz, 0), (pattern)p, samples[(cases++) % 3], (sz % 2) * (p % 2), s, sz <= 70000);
    // Unaligned starts (generic kernel on contiguous data) and the default stream.
    for (lg_dtype_t d : dts)
        for (int64_t sz : {5LL, 4099LL, 100000LL}) {
            lg_target_t t = flat(d, sz, 50);
            run_case(g, t, P_RANDOM, 16, 1, s, true);
            run_case(g, t, P_LAST, 256, 3, 0, true);
        }
    // Strided 3-D views: permuted, padded, broadcast.
    for (lg_dtype_t d : {LG_DTYPE_INT64, LG_DTYPE_UINT8})
        for (int k = 0; k < 3; k++) {
            lg_target_t t = flat(d, 0, 19);
            t.ndim = 3;
            t.sizes[0] = 7;
            t.sizes[1] = 33;
            t.sizes[2] = 65;
            t.count = 7 * 33 * 65;
            if (k == 0) { t.strides[0] = 33 * 65; t.strides[1] = 1; t.strides[2] = 33; }
            if (k == 1) { t.strides[0] = 40 * 70; t.strides[1] = 70; t.strides[2] = 1; }
            if (k == 2) { t.strides[0] = 65; t.strides[1] = 0; t.strides[2] = 1; }
            for (int p = 0; p < 4; p++)
                run_case(g, t, (pattern)p, 16, 0, s, true);
        }
    // Large: 2^24 and 2^26 (int64: 512 MiB), 2^26 uint8.
    for (int64_t sz : {1LL << 24, 1LL << 26}) {
        if (quick && sz > (1LL << 24))
            break;
        for (int p : {P_RANDOM, P_LAST, P_ALL_BAD}) {
            run_case(g, flat(LG_DTYPE_INT64, sz, 1000), (pattern)p, 256, 0, s, sz <= (1LL << 24));
            run_case(g, flat(LG_DTYPE_UINT8, sz, 21), (pattern)p, 16, 0, s, false);
        }
    }
    printf("%d comparison cases done, %d failures so far\n", cases, failures);
    if (!dry) {
        test_graph(s); // the host backend refuses captures by design
        test_graph_execs(s);
    }
    test_refusals(s);
    timing(s);
    CUDA_OK(cudaDeviceSynchronize());
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
