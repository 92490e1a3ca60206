/* lg_validate.h: the binary interface between the validator kernels (cuda/validate.cu, built
 * into build/validate.fatbin) and their launcher (src/checks/validate.c, which loads the fatbin with
 * the driver API and passes one lg_scan_params_t by value). Both sides include this header, so
 * the layouts cannot drift; test_scan.c checks the sizes the C side sees.
 *
 * Memory a launch uses, all owned by validate.c (one set per stream, reused):
 *   state       device memory, lg_scan_state_t: accumulators the blocks add into; the last
 *               block to finish reads them, publishes the verdict and resets them to their
 *               identities, so the next launch needs no memset (also true for graph replays).
 *   cand        device memory, grid * samples lg_sample_t: block b's first offenders, in order.
 *   cand_count  device memory, grid ints: how many of block b's candidates are valid.
 *   ring        mapped pinned host memory, lg_scan_ring_t: run k's verdict goes to
 *               entries[k % LG_RING_SLOTS]: its seq is cleared first and written last (each
 *               after a system fence), a seqlock the host re-checks after copying,
 *               so the host reads a verdict without synchronising the stream (async mode).
 *   copy        optional device buffer laid out like the target (same element offsets, i.e.
 *               a copy of the spanned range): each label, or `replacement` where it is bad.
 */
#ifndef LG_VALIDATE_H
#define LG_VALIDATE_H

#include "lg_scan.h"

#define LG_SCAN_THREADS 256 /* threads per block: the block scan below assumes 8 warps */
#define LG_SCAN_UNROLL  4   /* 16-byte loads in flight per thread per tile */
#define LG_RING_SLOTS   64  /* verdicts kept per stream before the oldest is overwritten */

typedef struct lg_scan_state {
    unsigned long long bad;
    unsigned long long checked;
    long long min; /* identity INT64_MAX */
    long long max; /* identity INT64_MIN */
    unsigned int blocks_done;
    unsigned int pad;
    unsigned long long runs; /* completed launches: the seq of the last one */
    long long first_zero;    /* range kernels: least logical index of a zero, identity INT64_MAX */
} lg_scan_state_t;

typedef struct lg_scan_ring_entry {
    volatile unsigned long long seq; /* written last; 0: never written, or being rewritten */
    unsigned long long pad;
    lg_verdict_t verdict;
} lg_scan_ring_entry_t;

typedef struct lg_scan_ring {
    volatile unsigned long long latest; /* seq of the newest complete entry */
    unsigned long long pad;
    lg_scan_ring_entry_t entries[LG_RING_SLOTS];
} lg_scan_ring_t;

typedef struct lg_scan_params {
    lg_target_t t;           /* t.data: device address of logical element 0 */
    uint64_t state;          /* lg_scan_state_t * */
    uint64_t cand;           /* lg_sample_t[gridDim.x][samples] */
    uint64_t cand_count;     /* int[gridDim.x] */
    uint64_t ring;           /* lg_scan_ring_t *, device view of mapped host memory */
    uint64_t copy;           /* 0: no copy; else the copy's address of logical element 0 */
    int64_t replacement;     /* value written into the copy for each bad label */
    int64_t tiles_per_block; /* each block owns a contiguous run of tiles: keeps order */
    int samples;             /* 0..LG_MAX_SAMPLES */
    int pad;
} lg_scan_params_t;

/* Elements one tile covers: every thread loads LG_SCAN_UNROLL vectors of 16 bytes. */
#define LG_SCAN_TILE(elem_size) ((int64_t)LG_SCAN_THREADS * LG_SCAN_UNROLL * (16 / (elem_size)))

/* Kernel names in the fatbin, one per (dtype, layout). "vec": ndim 1, stride 1, data aligned
 * to 16 bytes; "gen": anything else (any strides, any alignment). */
#define LG_KERNEL_I64_VEC "lg_validate_scan_i64_vec"
#define LG_KERNEL_I64_GEN "lg_validate_scan_i64_gen"
#define LG_KERNEL_U8_VEC  "lg_validate_scan_u8_vec"
#define LG_KERNEL_U8_GEN  "lg_validate_scan_u8_gen"
#define LG_KERNEL_I32_VEC "lg_validate_scan_i32_vec"
#define LG_KERNEL_I32_GEN "lg_validate_scan_i32_gen"
/* Range kernels (BCE's probabilities, lg_scan_range_*): min and max are order keys in the state
 * (lg_scan_range_key), bits in the verdict. "f16" serves half and bfloat16 (t.dtype tells them
 * apart). */
#define LG_KERNEL_F32_VEC "lg_validate_range_f32_vec"
#define LG_KERNEL_F32_GEN "lg_validate_range_f32_gen"
#define LG_KERNEL_F16_VEC "lg_validate_range_f16_vec"
#define LG_KERNEL_F16_GEN "lg_validate_range_f16_gen"
#define LG_KERNEL_F64_VEC "lg_validate_range_f64_vec"
#define LG_KERNEL_F64_GEN "lg_validate_range_f64_gen"
#define LG_KERNEL_COUNT   12

#endif
