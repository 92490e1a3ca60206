/* preload_bind.c: the per-version bindings of the LD_PRELOAD layer's real functions, one per
 * libcudart version node (13, the default, 12 and 11.0; preload.h says why), each resolved on
 * first use at its version node (preload.h's lg_preload_real and lg_preload_bind_resolve).
 *
 * Who uses it: preload.c and preload_sync.c, any thread (every call reads the cached pointer
 * inline; a resolution is one atomic store). Below both halves of the layer, so that neither
 * calls the other for what they share.
 *
 * Tested through them end to end (tests/e2e, among them test_mixed_runtimes.sh for both
 * majors in one process).
 */
#include "hooks/preload.h"

#define LG_DEFINE_BINDING(v) lg_preload_binding_t lg_preload_bind_##v = {v, "libcudart.so." #v, {0}};
LG_DEFINE_BINDING(13)
LG_DEFINE_BINDING(12)
/* CUDA 11's version node carries a minor number. */
lg_preload_binding_t lg_preload_bind_11 = {11, "libcudart.so.11.0", {0}};
