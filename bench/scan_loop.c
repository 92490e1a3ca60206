/* scan_loop.c: the host scan benchmark of `make bench` (bench/bench.py, scan rows). Fills N
 * elements of one dtype with valid values (labels in [0, 1000), probabilities in [0, 1]) and runs
 * lg_scan_host (cuda/lg_scan.h, what the host backend and captured host nodes run) over them
 * REPS times, then memcpy of the same bytes REPS times: the scan's cost next to the copy it
 * follows. bench.py runs it under callgrind at two REPS (instructions per element) and plain
 * (ns per element, median of the program's own loop timings). Figures only; nothing asserted.
 *
 * usage: scan_loop DTYPE N REPS [nocopy]   DTYPE: int64 float32 float16 bfloat16 float64
 *   nocopy: skip the memcpy loop (callgrind counts the scan alone)
 * output: "scan_ns_per_elem=X memcpy_ns_per_elem=Y bad=B"; exit 0, 2 on usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lg_scan.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        lg_dtype_t d;
    } dtypes[] = {{"int64", LG_DTYPE_INT64},     {"float32", LG_DTYPE_FLOAT32},   {"float16", LG_DTYPE_FLOAT16},
                  {"bfloat16", LG_DTYPE_BFLOAT16}, {"float64", LG_DTYPE_FLOAT64}};
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "nocopy")))
        return 2;
    int di = -1;
    for (int i = 0; i < (int)(sizeof dtypes / sizeof dtypes[0]); i++)
        if (!strcmp(argv[1], dtypes[i].name))
            di = i;
    long long n = atoll(argv[2]);
    int reps = atoi(argv[3]);
    if (di < 0 || n <= 0 || reps <= 0)
        return 2;
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.dtype = dtypes[di].d;
    t.ndim = 1;
    t.sizes[0] = t.count = n;
    t.strides[0] = 1;
    t.n_classes = 1000;
    size_t esz = lg_scan_elem_size(t.dtype), bytes = (size_t)n * esz;
    unsigned char *buf = malloc(bytes), *dst = malloc(bytes);
    lg_verdict_t *v = malloc(sizeof *v);
    if (!buf || !dst || !v)
        return 1;
    unsigned s = 12345;
    for (long long i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        unsigned r = (s >> 8) % 1001; /* 0..1000 */
        float f = r / 1000.0f;
        union {
            float f;
            unsigned u;
        } fu = {f};
        switch (t.dtype) {
        case LG_DTYPE_FLOAT32: memcpy(buf + i * 4, &f, 4); break;
        case LG_DTYPE_FLOAT64: {
            double d = r / 1000.0;
            memcpy(buf + i * 8, &d, 8);
            break;
        }
        case LG_DTYPE_BFLOAT16: {
            unsigned short h = (unsigned short)(fu.u >> 16);
            memcpy(buf + i * 2, &h, 2);
            break;
        }
        case LG_DTYPE_FLOAT16: {
            unsigned short h = r == 1000 ? 0x3C00 : (unsigned short)(0x3800 + r % 1000); /* [0.5, 1) and 1 */
            memcpy(buf + i * 2, &h, 2);
            break;
        }
        default: {
            long long l = r % 1000;
            memcpy(buf + i * 8, &l, 8);
        }
        }
    }
    double t0 = now_ns();
    long long bad = 0;
    for (int r = 0; r < reps; r++) {
        lg_scan_host(&t, buf, 16, v);
        bad += v->bad_count;
    }
    double t1 = now_ns();
    for (int r = 0; r < reps && argc == 4; r++) {
        memcpy(dst, buf, bytes);
        __asm__ volatile("" : : "r"(dst) : "memory");
    }
    double t2 = now_ns();
    printf("scan_ns_per_elem=%.3f memcpy_ns_per_elem=%.3f bad=%lld\n", (t1 - t0) / reps / n, (t2 - t1) / reps / n,
           bad);
    free(buf);
    free(dst);
    free(v);
    return 0;
}
