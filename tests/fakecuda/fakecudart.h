/* fakecudart.h: what the files of the CUDA runtime test double share (the .c files of tests/fakecuda).
 *
 * The double is build/fakecuda/libcudart.so.13: a host-only stand-in for NVIDIA's runtime,
 * so nvcc-built test programs (tests/progs/) run, and labelguard can be tested, on machines
 * without a GPU. fakecudart.c is the runtime (registration, launches, memory, streams, errors),
 * sig.c reads parameter sizes from a mangled kernel name, nll.c emulates PyTorch's NLL kernels,
 * gather.c and named_index.c its index kernels, index_backward.c an embedding's backward,
 * assert_async.c torch._assert_async's kernel.
 * Internal names are fk_*; exported names are the real runtime's (exports-<major>.txt, through the
 * version script gen_stubs.sh writes) plus fakecudart_*.
 * Tested by tests/fakecuda/test_*.sh.
 */
#ifndef FAKECUDART_H
#define FAKECUDART_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#define FK_EXPORT __attribute__((visibility("default")))
#define FK_MAX_PARAMS 32
#define FK_MAX_TARGS 8

/* The parameter list read from a mangled kernel name (sig.c). ok=0: the name could not be read
 * (extern "C" kernel, construct the parser does not know); then nothing else is valid. */
typedef struct fk_sig {
    int ok;
    int n_params;
    size_t size[FK_MAX_PARAMS];     /* bytes */
    size_t offset[FK_MAX_PARAMS];   /* bytes, aligned like the device ABI */
    int n_targs;                    /* the kernel's own template arguments */
    char targ[FK_MAX_TARGS][4];     /* builtin code of a type argument ("f", "d", "l", "h", "Dh"), "" if not builtin */
} fk_sig_t;

/* Fills *sig from `mangled` (with or without nvcc's __nv_static_ prefix). Returns sig->ok. */
int fk_sig_parse(const char *mangled, fk_sig_t *sig);

/* One launch as the emulators see it. */
typedef struct fk_launch {
    const char *name;               /* mangled device name */
    const fk_sig_t *sig;
    dim3 grid, block;
    void **args;
    size_t shared_mem;
    cudaStream_t stream;
} fk_launch_t;

/* A built-in emulator: returns cudaSuccess, or the error the kernel would leave in the context
 * (cudaErrorAssert after a failed device assert, cudaErrorIllegalAddress after a bad access). */
typedef cudaError_t (*fk_emu_fn)(const fk_launch_t *l);

typedef struct fk_emulator {
    const char *substring;          /* matched against the mangled name */
    fk_emu_fn fn;
    int n_params;                   /* expected layout; a name match with another one is a no-op */
    const size_t *sizes;
} fk_emulator_t;

/* nll.c: the table of built-in emulators, NULL-terminated. */
extern const fk_emulator_t fk_nll_emulators[];
/* gather.c: PyTorch's index kernels (index_select, embedding, x[idx]), NULL-terminated. */
extern const fk_emulator_t fk_index_emulators[];
/* named_index.c: index_add_ / index_reduce_ and nn.EmbeddingBag id checks, NULL-terminated. */
extern const fk_emulator_t fk_named_index_emulators[];
/* index_backward.c: nn.Embedding's backward, which writes at the ids unchecked, NULL-terminated. */
extern const fk_emulator_t fk_index_backward_emulators[];
/* assert_async.c: torch._assert_async's kernel, NULL-terminated. */
extern const fk_emulator_t fk_assert_emulators[];

/* fakecudart.c, for the emulators. */
/* [lo, hi) of the tracked allocation (device or pinned) holding p; 0 if none. Thread-safe. */
int fk_mem_range(const void *p, const char **lo, const char **hi);
/* The allocation holding p, for bounds checks of what an emulated kernel reads. */
typedef struct fk_region { const char *lo, *hi; } fk_region_t;
static inline void fk_region(const void *p, fk_region_t *r)
{
    r->lo = r->hi = NULL;
    if (p) fk_mem_range(p, &r->lo, &r->hi);
}
static inline int fk_inside(const fk_region_t *r, const void *p, size_t n)
{
    const char *c = (const char *)p;
    return r->lo && c >= r->lo && c + n <= r->hi;
}
/* Queues a device-assert line, printed to stderr when the error surfaces (as the device's printf
 * buffer is flushed at the next synchronisation). */
void fk_device_assert(const char *file, unsigned line, const char *func, const unsigned block[3], const unsigned thread[3], const char *expr);

/* The exported extras (also declared here so the build checks their prototypes). */
FK_EXPORT const char *fakecudart_identity(void);
FK_EXPORT int fakecudart_context_active(void);
typedef cudaError_t (*fakecudart_emulator_fn)(const char *name, dim3 grid, dim3 block, void **args, size_t shared_mem, cudaStream_t stream);
FK_EXPORT int fakecudart_register_emulator(const char *substring, fakecudart_emulator_fn fn);
FK_EXPORT unsigned long fakecudart_launch_count(const char *substring);
FK_EXPORT unsigned long fakecudart_emulated_count(const char *substring);
/* The driver double's launch build (driver/libcuda.c): a kernel by name with no host stub (its
 * CUfunction), its name, a launch of it through the runtime's path, and the device's
 * synchronization (cudaError_t results; the thread's runtime error left as it was). */
FK_EXPORT void *fakecudart_driver_function(const char *name);
FK_EXPORT const char *fakecudart_function_name(const void *f);
FK_EXPORT int fakecudart_driver_launch(const void *f, dim3 g, dim3 b, void **args, size_t shm, void *stream);
FK_EXPORT int fakecudart_driver_synchronize(void); /* cuCtxSynchronize */

#endif
