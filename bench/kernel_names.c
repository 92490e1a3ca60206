/* kernel_names.c: a preload shim for `make bench` (bench/torch_bench.py) that writes down every
 * kernel a process registers, so that bench/register_loop.c can register the same kernels,
 * grouped in the same fatbins, under callgrind without starting torch there.
 *
 *   LD_PRELOAD=build/bench/libkernel_names.so LG_KERNEL_NAMES_OUT=FILE torch-python -c 'import torch'
 * FILE gets one line per __cudaRegisterFunction call: "<fatbin number> <device name>", the
 * fatbin numbered from 0 in the order of its first registration. Forwards every call to the
 * next definition (the runtime). Not part of the library; built by the Makefile's bench rules.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*register_fn)(void **, const char *, char *, const char *, int, void *, void *, void *, void *,
                            int *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static void **last_fatbin;
static long n_fatbins = -1;

void __cudaRegisterFunction(void **fh, const char *hf, char *df, const char *dn, int tl, void *ti, void *bi, void *bd,
                            void *gd, int *ws)
{
    static register_fn real;
    if (!real)
        real = (register_fn)dlsym(RTLD_NEXT, "__cudaRegisterFunction");
    const char *name = df ? df : dn;
    pthread_mutex_lock(&lock);
    if (!out) {
        const char *path = getenv("LG_KERNEL_NAMES_OUT");
        out = fopen(path && *path ? path : "/dev/null", "w");
    }
    if (fh != last_fatbin) {
        last_fatbin = fh;
        n_fatbins++;
    }
    if (out && name)
        fprintf(out, "%ld %s\n", n_fatbins, name);
    pthread_mutex_unlock(&lock);
    if (real)
        real(fh, hf, df, dn, tl, ti, bi, bd, gd, ws);
}

__attribute__((destructor)) static void done(void)
{
    if (out)
        fclose(out);
}
