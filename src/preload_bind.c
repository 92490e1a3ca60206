/* preload_bind.c: the per-version bindings of the LD_PRELOAD layer's real functions (one per
 * libcudart version node: 13, the default, 12 and 11.0; preload.h says why) and their
 * resolution on first use, at the binding's version node (runtime.c).
 *
 * Who calls it: preload.c and preload_sync.c, through preload.h's lg_preload_real (the first
 * call of each entry point per binding resolves here; every later call reads the cached
 * pointer inline), any thread: a resolution is one atomic store of what runtime.c found, and
 * two threads resolving at once store the same pointer. Below both halves of the layer, so
 * that neither calls the other for what they share.
 *
 * Tested through them end to end (tests/e2e, among them test_mixed_runtimes.sh for both
 * majors in one process).
 */
#include "preload.h"

#define LG_DEFINE_BINDING(v) lg_preload_binding_t lg_preload_bind_##v = {v, "libcudart.so." #v, {0}};
LG_DEFINE_BINDING(13)
LG_DEFINE_BINDING(12)
/* CUDA 11's version node carries a minor number. */
lg_preload_binding_t lg_preload_bind_11 = {11, "libcudart.so.11.0", {0}};

void *lg_preload_bind_resolve(lg_preload_binding_t *b, int idx, const char *name)
{
    void *f = lg_runtime_resolve_version(name, b->major, b->version, NULL);
    if (f)
        __atomic_store_n(&b->real[idx], f, __ATOMIC_RELEASE);
    return f;
}
