// kernel_emulation.cpp: runs the validator kernels of cuda/validate.cu on the CPU, one
// std::thread per CUDA thread, and checks their verdicts, samples and copies against
// lg_scan_host. This is how the kernels' own logic (block-ordered candidates, prefix sums,
// warp reductions, last-block merge, self-reset, verdict ring) is tested where no GPU exists.
//
// The source is compiled by g++ with a small emulation of the CUDA built-ins it uses
// (__syncthreads[_or], __shfl_*_sync, atomics, fences); blocks run one after another, the 256
// threads of a block concurrently, so barriers and shuffles really synchronise. Memory model
// subtleties (fences between blocks) are not exercised here: tests/gpu/test_validator.cu
// covers them on a real GPU.
//
// Built as build/tests/unit/test_kernel_emulation (Makefile), so `make test` runs it.
// Exit status 0 pass, 1 fail.
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

// ---------------------------------------------------------------- CUDA emulation
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
struct uint4 { unsigned x, y, z, w; } __attribute__((aligned(16)));
struct emu_dim { unsigned x = 0, y = 0, z = 0; };
static thread_local emu_dim threadIdx;
static emu_dim blockIdx, gridDim;
static std::barrier<> *block_bar;
static std::barrier<> *warp_bar[8];
static uint64_t warp_xchg[8][32];
static int or_flag[2];
static thread_local int or_gen;

static void __syncthreads() { block_bar->arrive_and_wait(); }
static int __syncthreads_or(int p)
{
    if (p)
        __atomic_store_n(&or_flag[or_gen], 1, __ATOMIC_SEQ_CST);
    block_bar->arrive_and_wait();
    int r = __atomic_load_n(&or_flag[or_gen], __ATOMIC_SEQ_CST);
    block_bar->arrive_and_wait();
    if (threadIdx.x == 0)
        __atomic_store_n(&or_flag[or_gen ^ 1], 0, __ATOMIC_SEQ_CST);
    block_bar->arrive_and_wait();
    or_gen ^= 1;
    return r;
}
template <typename V> static V shfl(V v, int src_lane, bool valid)
{
    const unsigned w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint64_t x = 0;
    memcpy(&x, &v, sizeof v);
    warp_xchg[w][lane] = x;
    warp_bar[w]->arrive_and_wait();
    V r = v;
    if (valid)
        memcpy(&r, &warp_xchg[w][src_lane], sizeof r);
    warp_bar[w]->arrive_and_wait();
    return r;
}
template <typename V> static V __shfl_up_sync(unsigned, V v, int d)
{
    int lane = threadIdx.x & 31;
    return shfl(v, lane - d, lane >= d);
}
template <typename V> static V __shfl_down_sync(unsigned, V v, int d)
{
    int lane = threadIdx.x & 31;
    return shfl(v, lane + d, lane + d < 32);
}
static int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static uint4 __ldg(const uint4 *p) { return *p; }
static void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename V> static V atomicAdd(V *p, V v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static long long atomicMin(long long *p, long long v)
{
    long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return o;
}
static long long atomicMax(long long *p, long long v)
{
    long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return o;
}

#include "../../cuda/validate.cu"

// ---------------------------------------------------------------- launcher (as validate.c)
typedef void (*kernel_fn)(const lg_scan_params_t);

static void launch(kernel_fn k, const lg_scan_params_t &p, unsigned grid)
{
    gridDim.x = grid;
    std::barrier<> bb(LG_SCAN_THREADS);
    block_bar = &bb;
    std::vector<std::barrier<> *> wb;
    for (int w = 0; w < 8; w++)
        warp_bar[w] = new std::barrier<>(32);
    for (unsigned b = 0; b < grid; b++) {
        blockIdx.x = b;
        or_flag[0] = or_flag[1] = 0;
        std::vector<std::thread> th;
        for (unsigned t = 0; t < LG_SCAN_THREADS; t++)
            th.emplace_back([&, t] {
                threadIdx.x = t;
                or_gen = 0;
                k(p);
            });
        for (auto &x : th)
            x.join();
    }
    for (int w = 0; w < 8; w++)
        delete warp_bar[w];
}

struct scratch {
    lg_scan_state_t state;
    std::vector<lg_sample_t> cand;
    std::vector<int> cand_count;
    lg_scan_ring_t *ring;
    uint64_t launched = 0;
    scratch(int max_grid)
        : cand((size_t)max_grid * LG_MAX_SAMPLES), cand_count(max_grid)
    {
        memset(&state, 0, sizeof state);
        state.min = INT64_MAX;
        state.max = INT64_MIN;
        state.first_zero = INT64_MAX;
        ring = (lg_scan_ring_t *)calloc(1, sizeof *ring);
    }
};

static int failures;
#define CHECK(c, ...)                                                 \
    do {                                                              \
        if (!(c)) {                                                   \
            failures++;                                               \
            printf("FAIL line %d: %s: ", __LINE__, #c);               \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
        }                                                             \
    } while (0)

static size_t esize(lg_dtype_t d) { return lg_scan_elem_size(d); }

// Runs one validation the way src/validate.c does and checks it against lg_scan_host.
static void run(scratch &s, const lg_target_t &t, std::vector<uint8_t> &buf, int samples, int max_grid, bool vec,
                bool copy, const char *what)
{
    const int64_t tile = LG_SCAN_TILE(esize(t.dtype));
    int64_t ntiles = (t.count + tile - 1) / tile;
    int64_t grid = ntiles < max_grid ? ntiles : max_grid;
    lg_scan_params_t p;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.t.data = (uint64_t)(uintptr_t)buf.data();
    p.state = (uint64_t)(uintptr_t)&s.state;
    p.cand = (uint64_t)(uintptr_t)s.cand.data();
    p.cand_count = (uint64_t)(uintptr_t)s.cand_count.data();
    p.ring = (uint64_t)(uintptr_t)s.ring;
    std::vector<uint8_t> out(buf.size() + 16);
    uint8_t *outp = out.data() + ((16 - ((uintptr_t)out.data() & 15)) & 15);
    p.copy = copy ? (uint64_t)(uintptr_t)outp : 0;
    if (copy)
        memcpy(outp, buf.data(), buf.size()); // gaps of a strided copy are not written
    p.replacement = lg_scan_is_float(t.dtype) ? 0 : t.dtype == LG_DTYPE_UINT8 ? 255 : -100; // 0.0's bits
    p.samples = samples;
    p.tiles_per_block = (ntiles + grid - 1) / grid;
    grid = (ntiles + p.tiles_per_block - 1) / p.tiles_per_block;
    kernel_fn k;
    if (t.dtype == LG_DTYPE_FLOAT32)
        k = vec ? lg_validate_range_f32_vec : lg_validate_range_f32_gen;
    else if (t.dtype == LG_DTYPE_FLOAT16 || t.dtype == LG_DTYPE_BFLOAT16)
        k = vec ? lg_validate_range_f16_vec : lg_validate_range_f16_gen;
    else if (t.dtype == LG_DTYPE_FLOAT64)
        k = vec ? lg_validate_range_f64_vec : lg_validate_range_f64_gen;
    else if (t.dtype == LG_DTYPE_UINT8)
        k = vec ? lg_validate_scan_u8_vec : lg_validate_scan_u8_gen;
    else if (t.dtype == LG_DTYPE_INT32)
        k = vec ? lg_validate_scan_i32_vec : lg_validate_scan_i32_gen;
    else
        k = vec ? lg_validate_scan_i64_vec : lg_validate_scan_i64_gen;
    launch(k, p, (unsigned)grid);
    uint64_t seq = ++s.launched;

    static lg_verdict_t want;
    lg_scan_host(&t, buf.data(), samples, &want);
    const lg_scan_ring_entry_t &e = s.ring->entries[seq % LG_RING_SLOTS];
    const lg_verdict_t &got = e.verdict;
    CHECK(e.seq == seq && s.ring->latest == seq, "%s: seq %llu, want %llu", what, (unsigned long long)e.seq,
          (unsigned long long)seq);
    bool ok = got.bad_count == want.bad_count && got.checked == want.checked && got.min == want.min &&
              got.max == want.max && got.n_samples == want.n_samples;
    for (int i = 0; ok && i < got.n_samples; i++)
        ok = got.samples[i].index == want.samples[i].index && got.samples[i].value == want.samples[i].value;
    // with index_is_offset every sample's index is an element offset that holds its value
    for (int i = 0; ok && t.index_is_offset && i < got.n_samples; i++) {
        int64_t o = got.samples[i].index;
        int64_t v = t.dtype == LG_DTYPE_UINT8 ? (int64_t)buf[(size_t)o] : ((const int64_t *)buf.data())[o];
        ok = v == got.samples[i].value;
    }
    CHECK(ok, "%s (grid %lld): got bad=%lld checked=%lld min=%lld max=%lld n=%d; want bad=%lld checked=%lld min=%lld max=%lld n=%d",
          what, (long long)grid, (long long)got.bad_count, (long long)got.checked, (long long)got.min, (long long)got.max,
          got.n_samples, (long long)want.bad_count, (long long)want.checked, (long long)want.min, (long long)want.max,
          want.n_samples);
    CHECK(s.state.bad == 0 && s.state.checked == 0 && s.state.blocks_done == 0 && s.state.min == INT64_MAX &&
              s.state.max == INT64_MIN && s.state.first_zero == INT64_MAX && s.state.runs == seq,
          "%s: state not reset for the next launch", what);
    if (copy) {
        for (int64_t i = 0; i < t.count; i++) {
            int64_t off = lg_scan_offset(&t, i);
            int64_t v = lg_scan_load(&t, buf.data(), i);
            int64_t w = !lg_scan_is_ignored(&t, v) && lg_scan_is_bad(&t, v) ? p.replacement : v;
            if (t.dtype == LG_DTYPE_UINT8)
                w = (uint8_t)w;
            int64_t c = lg_scan_load(&t, outp, i);
            if (c != w) {
                CHECK(c == w, "%s: copy[%lld] = %lld, want %lld", what, (long long)i, (long long)c, (long long)w);
                break;
            }
            (void)off;
        }
    }
}

// Bits the range rule turns on, per float dtype: 0, -0, 1, next above 1, +-smallest subnormal,
// largest subnormal, 0.5, largest below 1, -1, +-inf, +-quiet NaN, signalling NaN, largest finite.
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

static void put_bits(lg_dtype_t d, std::vector<uint8_t> &buf, size_t i, uint64_t b)
{
    size_t e = esize(d);
    memcpy(buf.data() + i * e, &b, e); // little-endian: the low bytes
}

// The range kernels (BCE's probabilities) on each float dtype: valid values, specials sprinkled
// in, all NaN, zeros of both signs (which zero min and max report), contiguous and strided.
static int range_cases(std::mt19937_64 &g)
{
    const lg_dtype_t dts[] = {LG_DTYPE_FLOAT32, LG_DTYPE_FLOAT64, LG_DTYPE_FLOAT16, LG_DTYPE_BFLOAT16};
    const int64_t sizes[] = {1, 7, 2049, 16384 + 5, 40001};
    int cases = 0;
    for (int di = 0; di < 4; di++) {
        const lg_dtype_t d = dts[di];
        const uint64_t *sp = special[di];
        scratch s(16);
        for (int64_t n : sizes)
            for (int pat = 0; pat < 5; pat++) {
                lg_target_t t;
                memset(&t, 0, sizeof t);
                t.dtype = d;
                t.ndim = 1;
                t.sizes[0] = n;
                t.strides[0] = 1;
                t.count = n;
                std::vector<uint8_t> buf((size_t)n * esize(d) + 64);
                for (int64_t i = 0; i < n; i++) {
                    uint64_t x = g();
                    uint64_t b = sp[7 + (x & 1)]; // 0.5 or the largest below 1
                    if (pat == 1 && x % 97 < 3)
                        b = sp[(x >> 8) % 16];
                    if (pat == 2)
                        b = sp[12 + (x >> 8) % 3]; // all NaN
                    if (pat == 3)
                        b = sp[(x >> 8) % 2]; // zeros of both signs only
                    if (pat == 4)
                        b = i < n / 2 ? sp[12] : sp[(x >> 8) % 3 == 0 ? 9 : 1 - (i & 1)]; // NaN, then zeros and -1
                    put_bits(d, buf, (size_t)i, b);
                }
                char what[128];
                snprintf(what, sizeof what, "range dtype %d n %lld pattern %d", (int)d, (long long)n, pat);
                const int samples[] = {0, 1, 16, 256};
                const int grids[] = {1, 3, 16};
                run(s, t, buf, samples[cases % 4], grids[cases % 3], cases % 2 == 0, cases % 3 != 1, what);
                cases++;
            }
        // strided 3-D, a broadcast dimension included
        for (int k = 0; k < 2; k++) {
            lg_target_t t;
            memset(&t, 0, sizeof t);
            t.dtype = d;
            t.ndim = 3;
            t.sizes[0] = 3; t.sizes[1] = 37; t.sizes[2] = 41;
            t.count = 3 * 37 * 41;
            if (k == 0) { t.strides[0] = 40 * 50; t.strides[1] = 50; t.strides[2] = 1; }
            if (k == 1) { t.strides[0] = 41; t.strides[1] = 0; t.strides[2] = 1; }
            std::vector<uint8_t> buf(3 * 40 * 50 * esize(d));
            for (size_t i = 0; i < buf.size() / esize(d); i++) {
                uint64_t x = g();
                put_bits(d, buf, i, x % 50 == 0 ? sp[(x >> 8) % 16] : sp[7 + (x & 1)]);
            }
            char what[64];
            snprintf(what, sizeof what, "range strided dtype %d kind %d", (int)d, k);
            run(s, t, buf, 16, 5, false, true, what);
            cases++;
        }
    }
    return cases;
}

int main()
{
    std::mt19937_64 g(42);
    const lg_dtype_t dts[] = {LG_DTYPE_INT64, LG_DTYPE_UINT8, LG_DTYPE_INT32};
    const int64_t sizes[] = {1, 5, 300, 2048, 2049, 4096 + 17, 16384 * 2 + 5, 70001};
    int cases = 0;
    for (lg_dtype_t d : dts) {
        scratch s(16);
        for (int64_t n : sizes)
            for (int pat = 0; pat < 5; pat++) {
                lg_target_t t;
                memset(&t, 0, sizeof t);
                t.dtype = d;
                t.ndim = 1;
                t.sizes[0] = n;
                t.strides[0] = 1;
                t.count = n;
                t.n_classes = d == LG_DTYPE_UINT8 ? 21 : 1000;
                t.ignore_index = d == LG_DTYPE_UINT8 ? 255 : -100;
                t.has_ignore_index = 1;
                t.truncate_to_int32 = pat == 4;
                std::vector<uint8_t> buf((size_t)n * esize(d) + 64);
                for (int64_t i = 0; i < n; i++) {
                    uint64_t x = g();
                    int64_t v = (int64_t)(x % (uint64_t)t.n_classes);
                    if (pat == 0 && x % 997 < 5)
                        v = (int64_t)t.n_classes + (int64_t)(x >> 40) % 20;
                    if (pat == 1 && (x % 13 == 0))
                        v = -1 - (int64_t)(x >> 50);
                    if (pat == 2)
                        v = t.n_classes + 1; // all bad
                    if (pat == 3 && x % 5 == 0)
                        v = t.ignore_index;
                    if (pat == 4 && x % 7 == 0)
                        v += (int64_t)(x % 3) << 32; // only bad without narrowing
                    if (d == LG_DTYPE_UINT8)
                        buf[i] = (uint8_t)v;
                    else if (d == LG_DTYPE_INT32)
                        ((int32_t *)buf.data())[i] = (int32_t)v;
                    else
                        ((int64_t *)buf.data())[i] = v;
                }
                if (pat == 3 && n > 1) { // bad at the first and last positions only
                    if (d == LG_DTYPE_UINT8) { buf[0] = 200; buf[n - 1] = 201; }
                    else if (d == LG_DTYPE_INT32) { ((int32_t *)buf.data())[0] = -5; ((int32_t *)buf.data())[n - 1] = 5000; }
                    else { ((int64_t *)buf.data())[0] = -5; ((int64_t *)buf.data())[n - 1] = 5000; }
                }
                char what[128];
                snprintf(what, sizeof what, "dtype %d n %lld pattern %d", (int)d, (long long)n, pat);
                const int samples[] = {0, 1, 16, 256};
                int grids[] = {1, 3, 16};
                run(s, t, buf, samples[cases % 4], grids[cases % 3], cases % 2 == 0, cases % 3 != 1, what);
                cases++;
            }
    }
    // Strided 3-D (generic kernels), including a broadcast dimension.
    for (lg_dtype_t d : {LG_DTYPE_INT64, LG_DTYPE_UINT8}) {
        scratch s(8);
        for (int k = 0; k < 3; k++) {
            lg_target_t t;
            memset(&t, 0, sizeof t);
            t.dtype = d;
            t.ndim = 3;
            t.sizes[0] = 3; t.sizes[1] = 37; t.sizes[2] = 41;
            t.count = 3 * 37 * 41;
            if (k == 0) { t.strides[0] = 37 * 41; t.strides[1] = 1; t.strides[2] = 37; }
            if (k == 1) { t.strides[0] = 40 * 50; t.strides[1] = 50; t.strides[2] = 1; }
            if (k == 2) { t.strides[0] = 41; t.strides[1] = 0; t.strides[2] = 1; }
            t.n_classes = 19;
            t.ignore_index = d == LG_DTYPE_UINT8 ? 255 : -100;
            t.has_ignore_index = 1;
            std::vector<uint8_t> buf(3 * 40 * 50 * esize(d));
            for (size_t i = 0; i < buf.size() / esize(d); i++) {
                uint64_t x = g();
                int64_t v = x % 50 == 0 ? 19 + (int64_t)(x % 30) : (int64_t)(x % 19);
                if (d == LG_DTYPE_UINT8) buf[i] = (uint8_t)v; else ((int64_t *)buf.data())[i] = v;
            }
            char what[64];
            snprintf(what, sizeof what, "strided dtype %d kind %d", (int)d, k);
            run(s, t, buf, 16, 5, false, true, what);
            cases++;
            // A view decoded from a TensorIterator closure: samples are element offsets.
            t.index_is_offset = 1;
            snprintf(what, sizeof what, "strided dtype %d kind %d, offsets", (int)d, k);
            run(s, t, buf, 16, 5, false, true, what);
            cases++;
        }
    }
    cases += range_cases(g);
    printf("%d emulated kernel runs, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
