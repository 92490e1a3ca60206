/* labelguard.h: the small public C API of liblabelguard.so.
 *
 * Most users never include this: preloading the library (LD_PRELOAD or `labelguard run`) is
 * enough. A program that links or dlopens the library can query it, and `labelguard attach`
 * calls labelguard_arm() in a running process through gdb.
 */
#ifndef LABELGUARD_H
#define LABELGUARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LABELGUARD_API __attribute__((visibility("default")))

/* Library version, e.g. "0.1.0". */
LABELGUARD_API const char *labelguard_version(void);

typedef struct labelguard_counters {
    uint64_t launches;          /* kernel launches seen */
    uint64_t watched;           /* launches of NLL/CrossEntropy kernels */
    uint64_t validated;         /* of those, labels actually checked */
    uint64_t violations;        /* launches with at least one bad label */
    uint64_t validate_ns_total; /* time spent validating, nanoseconds */
} labelguard_counters_t;

/* Fills *out; returns 0, or -1 when out is NULL. */
LABELGUARD_API int labelguard_counters(labelguard_counters_t *out);

/* Arms the guard in a process that did not preload the library (it was dlopen'd, e.g. by
 * `labelguard attach`): starts CUPTI where possible and redirects the launch entry points of
 * the objects already loaded. Returns the number of entries redirected, or -1 on failure.
 * Safe to call more than once. */
LABELGUARD_API int labelguard_arm(void);

/* The loss-kernel coverage of a PyTorch build (what `labelguard audit` and doctor show), by
 * this library's own registry: the built-in specs plus LABELGUARD_KERNELS. table_path is a
 * kernel table (tests/wheels/<version>+cu<NNN>.tsv, labelguard/data/wheels/ in the wheel);
 * known_gaps_path (may be NULL; a missing file means none) lists the kernels no spec can
 * cover, "match<TAB>reason". Writes one line per loss kernel to out_fd,
 *     covered<TAB>KERNEL<TAB>[SPEC]<TAB>SYMBOL
 *     known gap<TAB>KERNEL<TAB>REASON<TAB>SYMBOL
 *     NOT covered<TAB>KERNEL<TAB>WHY (the first differing parameter)<TAB>SYMBOL
 * (none when quiet is nonzero), then "torch BUILD: N loss kernels, M covered[, G known
 * gaps][, U NOT covered]". Returns 0 when every loss kernel is covered or a known gap, 1 when
 * some is not, 2 on an unreadable or malformed input (one "labelguard: ..." line on stderr).
 * Report path only: starts no CUDA, hooks nothing, and builds the registry only if the guard
 * has not (then a problem with a LABELGUARD_KERNELS file is a warning on stderr). Thread-safe. */
LABELGUARD_API int labelguard_coverage(const char *table_path, const char *known_gaps_path, int quiet, int out_fd);

#ifdef __cplusplus
}
#endif

#endif
