/* validate.cu: the label validator kernels. No policy: they count, bound and sample the bad
 * labels of one target (lg_scan.h decides what "bad" means) and optionally write a sanitized
 * copy; src/checks/validate.c decides when to launch them and what to do with the verdict. The range
 * kernels (BCE's probabilities, one per float width) are the same scan over a float dtype's bits
 * with lg_scan.h's range rules.
 *
 * Built by `make` into build/validate.fatbin (every sm_75..sm_121 SASS plus compute_75 PTX),
 * embedded in liblabelguard.so and loaded with cuModuleLoadData into the application's own
 * context; launched with cuLaunchKernel on the launch's stream, so they see exactly the labels
 * the loss kernel will see. Tested against lg_scan_host by tests/gpu/test_validator.cu (GPU) and
 * tests/gpu/kernel_emulation.cpp (on the CPU, in `make test`).
 *
 * One launch does everything, so async mode needs no second launch and no stream sync:
 *   - each block owns a contiguous run of tiles (not a grid-stride interleave): the first
 *     offenders of block 0, then block 1, ... are then the first offenders overall, in order;
 *   - per tile, one __syncthreads_or tells whether any thread saw a bad label; only then the
 *     block enumerates them in index order (block prefix sum) into its candidate slots;
 *   - totals go through warp reductions and one atomic per warp;
 *   - the last block to finish (threadfence + counter) merges the candidates, publishes the
 *     verdict in mapped host memory with its sequence number written last, and resets the
 *     accumulators for the next launch (which also makes CUDA graph replays work).
 */
#include <stdint.h>
#include "lg_validate.h"

#define WARPS (LG_SCAN_THREADS / 32)

template <typename T> struct vec_of;
template <> struct vec_of<int64_t> {
    enum { K = 2 };
};
template <> struct vec_of<int32_t> {
    enum { K = 4 };
};
template <> struct vec_of<uint8_t> {
    enum { K = 16 };
};/* the raw bits of the float dtypes (range kernels) */
template <> struct vec_of<uint64_t> {
    enum { K = 2 };
};
template <> struct vec_of<uint32_t> {
    enum { K = 4 };
};
template <> struct vec_of<uint16_t> {
    enum { K = 8 };
};

template <typename T> union vec16 {
    uint4 q;
    T e[16 / sizeof(T)];
};

/* Exclusive prefix sum of v over the block; *total gets the sum. All threads must call. */
__device__ __forceinline__ int block_exclusive_scan(int v, int *total, int *smem /* WARPS+1 */)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int incl = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        int n = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d)
            incl += n;
    }
    if (lane == 31)
        smem[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int w = 0; w < WARPS; w++) {
            int s = smem[w];
            smem[w] = run;
            run += s;
        }
        smem[WARPS] = run;
    }
    __syncthreads();
    int out = smem[warp] + incl - v;
    *total = smem[WARPS];
    __syncthreads(); /* smem is reused by the next call */
    return out;
}

template <typename T>
__device__ __forceinline__ void store_elem(const lg_target_t &t, uint64_t base, int64_t i, int64_t v)
{
    ((T *)base)[lg_scan_offset(&t, i)] = (T)v;
}

/* The scan of one (dtype, layout). VEC: contiguous and 16-byte aligned, so each thread reads
 * its elements with one 16-byte load per unrolled step. RANGE: T is a float dtype's bits; min
 * and max reduce order keys over the numbers (NaN left out), and the least index of a zero is
 * kept so that a zero min or max reports the first zero's sign, as lg_scan_host does. */
template <typename T, bool VEC, bool RANGE = false> __device__ __forceinline__ void scan(const lg_scan_params_t &p)
{
    constexpr int K = vec_of<T>::K;
    constexpr int U = LG_SCAN_UNROLL;
    constexpr int64_t TILE = (int64_t)LG_SCAN_THREADS * U * K;
    constexpr int64_t SUB = (int64_t)LG_SCAN_THREADS * K;
    static_assert(U * K <= 64, "one bit per element in a 64-bit mask");

    __shared__ int smem[WARPS + 1];
    __shared__ unsigned long long s_bad[WARPS], s_checked[WARPS];
    __shared__ long long s_min[WARPS], s_max[WARPS], s_zero[WARPS];
    __shared__ int s_last;

    const lg_target_t &t = p.t;
    const int64_t count = t.count;
    const int64_t ntiles = (count + TILE - 1) / TILE;
    const int64_t tile_begin = (int64_t)blockIdx.x * p.tiles_per_block;
    int64_t tile_end = tile_begin + p.tiles_per_block;
    if (tile_end > ntiles)
        tile_end = ntiles;
    const int samples = p.samples;
    lg_sample_t *cand = (lg_sample_t *)p.cand + (int64_t)blockIdx.x * samples;

    unsigned long long bad = 0, checked = 0;
    long long mn = INT64_MAX, mx = INT64_MIN, zero_at = INT64_MAX;
    int have = 0; /* offenders this block has seen so far (saturates at samples) */

    for (int64_t tile = tile_begin; tile < tile_end; tile++) {
        const int64_t tbase = tile * TILE;
        const bool full = tbase + TILE <= count;
        vec16<T> raw[U];
        if (VEC && full) {
            const uint4 *src = (const uint4 *)((const T *)t.data + tbase) + threadIdx.x;
#pragma unroll
            for (int u = 0; u < U; u++)
                raw[u].q = __ldg(src + u * LG_SCAN_THREADS);
        } else if (VEC) {
            /* The partial last tile of a contiguous target. */
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int k = 0; k < K; k++) {
                    int64_t i = tbase + u * SUB + (int64_t)threadIdx.x * K + k;
                    raw[u].e[k] = i < count ? ((const T *)t.data)[i] : (T)0;
                }
        } else {
            /* Strided or unaligned: T is the target's dtype (the launcher picks the kernel).
             * Not unrolled: 64 inlined offset computations made the module ten times bigger
             * for a path that only accessor targets take. */
#pragma unroll 1
            for (int u = 0; u < U; u++)
#pragma unroll 1
                for (int k = 0; k < K; k++) {
                    int64_t i = tbase + u * SUB + (int64_t)threadIdx.x * K + k;
                    raw[u].e[k] = i < count ? ((const T *)t.data)[lg_scan_offset(&t, i)] : (T)0;
                }
        }

        unsigned long long mask = 0;
#pragma unroll
        for (int u = 0; u < U; u++) {
            vec16<T> out;
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int64_t i = tbase + u * SUB + (int64_t)threadIdx.x * K + k;
                const int64_t v = (int64_t)raw[u].e[k];
                int is_bad = 0;
                if (full || i < count) {
                    if (RANGE) {
                        checked++;
                        if (!lg_scan_range_nan(t.dtype, v)) {
                            const long long key = lg_scan_range_key(t.dtype, v);
                            mn = key < mn ? key : mn;
                            mx = key > mx ? key : mx;
                            zero_at = key == 0 && i < zero_at ? i : zero_at;
                        }
                        is_bad = lg_scan_range_bad(t.dtype, v);
                    } else if (!lg_scan_is_ignored(&t, v)) {
                        checked++;
                        mn = v < mn ? v : mn;
                        mx = v > mx ? v : mx;
                        is_bad = lg_scan_is_bad(&t, v);
                    }
                }
                if (is_bad)
                    mask |= 1ull << (u * K + k);
                out.e[k] = is_bad ? (T)p.replacement : raw[u].e[k];
            }
            if (p.copy) {
                if (VEC && full) {
                    ((uint4 *)((T *)p.copy + tbase) + threadIdx.x)[u * LG_SCAN_THREADS] = out.q;
                } else if (VEC) {
#pragma unroll
                    for (int k = 0; k < K; k++) {
                        int64_t i = tbase + u * SUB + (int64_t)threadIdx.x * K + k;
                        if (i < count)
                            ((T *)p.copy)[i] = out.e[k];
                    }
                } else {
#pragma unroll 1
                    for (int k = 0; k < K; k++) {
                        int64_t i = tbase + u * SUB + (int64_t)threadIdx.x * K + k;
                        if (i < count)
                            store_elem<T>(t, p.copy, i, (int64_t)out.e[k]);
                    }
                }
            }
        }
        bad += __popcll(mask);

        /* Rare path: enumerate this tile's offenders in index order. `have` is block-uniform. */
        if (__syncthreads_or(mask != 0) && have < samples) {
#pragma unroll 1
            for (int u = 0; u < U && have < samples; u++) {
                const unsigned long long m = (mask >> (u * K)) & ((K == 64) ? ~0ull : ((1ull << K) - 1));
                int total;
                int pos = have + block_exclusive_scan(__popcll(m), &total, smem);
                for (int k = 0; k < K; k++) {
                    if (!((m >> k) & 1))
                        continue;
                    if (pos < samples) {
                        cand[pos].index = lg_scan_sample_index(&t, tbase + u * SUB + (int64_t)threadIdx.x * K + k);
                        cand[pos].value = (int64_t)raw[u].e[k];
                    }
                    pos++;
                }
                have += total;
            }
            if (have > samples)
                have = samples;
        }
    }

    /* Block totals: warp reduce, then one atomic per block. */
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        bad += __shfl_down_sync(0xffffffffu, bad, d);
        checked += __shfl_down_sync(0xffffffffu, checked, d);
        long long omn = __shfl_down_sync(0xffffffffu, mn, d);
        long long omx = __shfl_down_sync(0xffffffffu, mx, d);
        mn = omn < mn ? omn : mn;
        mx = omx > mx ? omx : mx;
        if (RANGE) {
            long long oz = __shfl_down_sync(0xffffffffu, zero_at, d);
            zero_at = oz < zero_at ? oz : zero_at;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __threadfence(); /* every thread's candidate writes, before thread 0 signs the block off */
    if (lane == 0) {
        s_bad[warp] = bad;
        s_checked[warp] = checked;
        s_min[warp] = mn;
        s_max[warp] = mx;
        s_zero[warp] = zero_at;
    }
    __syncthreads();
    lg_scan_state_t *st = (lg_scan_state_t *)p.state;
    if (threadIdx.x == 0) {
        for (int w = 1; w < WARPS; w++) {
            s_bad[0] += s_bad[w];
            s_checked[0] += s_checked[w];
            s_min[0] = s_min[w] < s_min[0] ? s_min[w] : s_min[0];
            s_max[0] = s_max[w] > s_max[0] ? s_max[w] : s_max[0];
            s_zero[0] = s_zero[w] < s_zero[0] ? s_zero[w] : s_zero[0];
        }
        if (s_bad[0])
            atomicAdd(&st->bad, s_bad[0]);
        if (s_checked[0]) {
            atomicAdd(&st->checked, s_checked[0]);
            atomicMin(&st->min, s_min[0]);
            atomicMax(&st->max, s_max[0]);
            if (RANGE && s_zero[0] != INT64_MAX)
                atomicMin(&st->first_zero, s_zero[0]);
        }
        ((int *)p.cand_count)[blockIdx.x] = have;
        __threadfence();
        s_last = atomicAdd(&st->blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last)
        return;

    /* Last block: everything the others wrote is visible after this fence. */
    __threadfence();
    volatile lg_scan_state_t *vst = st;
    const unsigned long long total_bad = vst->bad;
    const unsigned long long seq = vst->runs + 1;
    lg_scan_ring_t *ring = (lg_scan_ring_t *)p.ring;
    lg_scan_ring_entry_t *e = &ring->entries[seq % LG_RING_SLOTS];
    __shared__ int s_taken;
    if (threadIdx.x == 0) {
        s_taken = 0;
        /* The slot still holds run seq - LG_RING_SLOTS, which a host may be reading right now
         * (lg_validate_gpu_ring_read: seq, copy, seq again): with seq unchanged while the
         * fields below change, that reader would keep a torn verdict. Cleared and fenced before
         * any field is written, so the reader's second look at seq catches the rewrite. */
        e->seq = 0;
        __threadfence_system();
    }
    __syncthreads();
    if (total_bad && samples > 0) {
        const int *cc = (const int *)p.cand_count;
        const lg_sample_t *all = (const lg_sample_t *)p.cand;
        for (unsigned int b0 = 0; b0 < gridDim.x && s_taken < samples; b0 += LG_SCAN_THREADS) {
            const unsigned int b = b0 + threadIdx.x;
            const int c = b < gridDim.x ? ((volatile const int *)cc)[b] : 0;
            int total;
            const int base = s_taken;
            int off = base + block_exclusive_scan(c, &total, smem);
            for (int j = 0; j < c && off + j < samples; j++) {
                e->verdict.samples[off + j].index = ((volatile const lg_sample_t *)all)[(int64_t)b * samples + j].index;
                e->verdict.samples[off + j].value = ((volatile const lg_sample_t *)all)[(int64_t)b * samples + j].value;
            }
            __syncthreads();
            if (threadIdx.x == 0)
                s_taken = base + total < samples ? base + total : samples;
            __syncthreads();
        }
    }
    __threadfence_system(); /* the samples other threads wrote, before seq is published */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned long long chk = vst->checked;
        e->verdict.bad_count = (int64_t)total_bad;
        e->verdict.checked = (int64_t)chk;
        int64_t vmin = chk ? (int64_t)vst->min : 0, vmax = chk ? (int64_t)vst->max : 0;
        if (RANGE && chk) {
            /* keys to bits; no number at all: the first element's bits (all NaN), and a zero
             * is the first zero (its sign), as the host scan's element order keeps them */
            const T *data = (const T *)t.data;
            if (vmin == INT64_MAX) {
                vmin = vmax = (int64_t)data[0];
            } else {
                const int64_t z = vmin == 0 || vmax == 0 ? (int64_t)data[lg_scan_offset(&t, vst->first_zero)] : 0;
                vmin = vmin == 0 ? z : lg_scan_range_unkey(t.dtype, vmin);
                vmax = vmax == 0 ? z : lg_scan_range_unkey(t.dtype, vmax);
            }
        }
        e->verdict.min = vmin;
        e->verdict.max = vmax;
        e->verdict.n_samples = s_taken;
        /* Reset for the next launch before publishing, so a host that sees `seq` may launch
         * again at once (the next launch is ordered after this one on the stream anyway). */
        vst->bad = 0;
        vst->checked = 0;
        vst->min = INT64_MAX;
        vst->max = INT64_MIN;
        vst->first_zero = INT64_MAX;
        vst->blocks_done = 0;
        vst->runs = seq;
        __threadfence_system();
        e->seq = seq;
        __threadfence_system();
        ring->latest = seq;
        __threadfence_system();
    }
}

/* Four resident blocks per SM (<= 64 registers) fit the 8-byte and 4-byte kernels; the uint8
 * ones handle 64 labels per thread per tile and spill at 64 registers, so they get two
 * (src/checks/validate.c sizes their grid to match). */
#define LG_KERNEL(name, T, VEC, MIN_BLOCKS, RANGE)                                                           \
    extern "C" __global__ void __launch_bounds__(LG_SCAN_THREADS, MIN_BLOCKS) name(const lg_scan_params_t p) \
    {                                                                                                        \
        scan<T, VEC, RANGE>(p);                                                                              \
    }

LG_KERNEL(lg_validate_scan_i64_vec, int64_t, true, 4, false)
LG_KERNEL(lg_validate_scan_i64_gen, int64_t, false, 4, false)
LG_KERNEL(lg_validate_scan_u8_vec, uint8_t, true, 2, false)
LG_KERNEL(lg_validate_scan_u8_gen, uint8_t, false, 2, false)
LG_KERNEL(lg_validate_scan_i32_vec, int32_t, true, 4, false)
LG_KERNEL(lg_validate_scan_i32_gen, int32_t, false, 4, false)
LG_KERNEL(lg_validate_range_f32_vec, uint32_t, true, 4, true)
LG_KERNEL(lg_validate_range_f32_gen, uint32_t, false, 4, true)
LG_KERNEL(lg_validate_range_f16_vec, uint16_t, true, 4, true)
LG_KERNEL(lg_validate_range_f16_gen, uint16_t, false, 4, true)
LG_KERNEL(lg_validate_range_f64_vec, uint64_t, true, 4, true)
LG_KERNEL(lg_validate_range_f64_gen, uint64_t, false, 4, true)
