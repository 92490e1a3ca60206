/* fake_runtime.h: a runtime table (lg_runtime_t) backed by host memory, for unit tests of the
 * host backend and of what uses it (test_scan.c, test_act.c). "Device" memory is what f_malloc
 * handed out; copies are memcpy; the counters let a test see what the backend did.
 * Included once per test program. */
#ifndef LG_TEST_FAKE_RUNTIME_H
#define LG_TEST_FAKE_RUNTIME_H

#include <cuda_runtime_api.h>
#include <glib.h>
#include <string.h>

#include "hooks/hooks.h"

typedef struct fake_alloc { char *p; size_t n; } fake_alloc_t;
static fake_alloc_t allocs[64];
static int n_allocs, fail_copies, copies, syncs, last_error_reads;
static size_t max_copy_bytes; /* the largest copy asked for */

static int f_malloc(void **p, size_t n)
{
    *p = g_malloc0(n);
    allocs[n_allocs].p = *p;
    allocs[n_allocs].n = n;
    n_allocs++;
    return 0;
}
static int f_free(void *p) { (void)p; return 0; }
static bool is_dev(const void *p)
{
    for (int i = 0; i < n_allocs; i++)
        if ((const char *)p >= allocs[i].p && (const char *)p < allocs[i].p + allocs[i].n)
            return true;
    return false;
}
static int f_memcpy(void *dst, const void *src, size_t n, int kind, void *stream)
{
    (void)kind;
    (void)stream;
    copies++;
    if (n > max_copy_bytes)
        max_copy_bytes = n;
    if (fail_copies)
        return 700;
    /* The real runtime refuses host memory posing as device memory in a D2H copy. */
    if (kind == 2 && !is_dev(src))
        return 1;
    memcpy(dst, src, n);
    return 0;
}
static int f_sync(void *s) { (void)s; syncs++; return 0; }
static int f_attr(void *attr, const void *ptr)
{
    struct cudaPointerAttributes *a = attr;
    memset(a, 0, sizeof *a);
    a->type = is_dev(ptr) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    return 0;
}
static int f_capturing(void *s, int *st) { (void)s; *st = 0; return 0; }
static int f_get_device(int *d) { *d = 0; return 0; }
static int f_last_error(void) { last_error_reads++; return 0; }

static lg_runtime_t fake_rt = {
    .memcpy_async = f_memcpy,
    .stream_synchronize = f_sync,
    .malloc_device = f_malloc,
    .free_device = f_free,
    .pointer_attributes = f_attr,
    .stream_is_capturing = f_capturing,
    .get_device = f_get_device,
    .get_last_error = f_last_error,
};


static void *dev_copy_of(const void *host, size_t n)
{
    void *d;
    f_malloc(&d, n);
    memcpy(d, host, n);
    return d;
}

#endif
