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

#ifdef __cplusplus
}
#endif

#endif
