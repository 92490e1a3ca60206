/* index_backward.c: host emulation, for the runtime test double, of the backward kernel that
 * writes an embedding's gradient at the forward's ids: embedding_backward_feature_kernel of
 * Embedding.cu (nn.Embedding's backward for at most 3072 ids without scale_grad_by_freq; both
 * wheels, tests/wheels/). It has no bounds check: each id, cast to int, is the row of
 * grad_weight it adds the id's gradient row into (padding_idx skipped). The emulation does the
 * same for float and double, and where a row lies outside grad_weight's allocation it writes
 * nothing there: it prints what compute-sanitizer's memcheck would ("Invalid __global__ write")
 * and returns cudaErrorIllegalAddress, which poisons the context as a wild write does on a GPU.
 * So a test sees an out-of-bounds write that plain PyTorch would have stopped with the forward's
 * device assert. Other element types only check the rows.
 *
 * fakecudart.c picks an entry of fk_index_backward_emulators by a substring of the mangled name
 * and runs it only when the parameter sizes read from the name (sig.c) match. Runs on the
 * launching thread, or the stream's worker under FAKECUDA_ASYNC_US; no state. Tested by
 * tests/e2e/test_index_backward.sh (tests/progs/embed_step.cu) and, through real torch, by
 * tests/torch-fake/test_embedding_backward.sh.
 */
#include "fakecudart.h"

#include <stdio.h>
#include <string.h>

/* embedding_backward_feature_kernel<scalar_t, accscalar_t, index_t>(const index_t *indices,
 * const scalar_t *grad, scalar_t *grad_weight, int n, int64_t stride, int padding_idx). */
static cudaError_t emu_embedding_backward_feature(const fk_launch_t *l)
{
    const fk_sig_t *s = l->sig;
    if (s->n_targs < 3) return cudaSuccess;
    const int is64 = !strcmp(s->targ[2], "l");
    if (!is64 && strcmp(s->targ[2], "i") != 0) return cudaSuccess;
    const size_t elem = !strcmp(s->targ[0], "f") ? 4 : !strcmp(s->targ[0], "d") ? 8 : 0;
    const char *ids;
    const char *grad;
    char *gw;
    int n, padding_idx;
    int64_t stride;
    memcpy(&ids, l->args[0], 8);
    memcpy(&grad, l->args[1], 8);
    memcpy(&gw, l->args[2], 8);
    memcpy(&n, l->args[3], 4);
    memcpy(&stride, l->args[4], 8);
    memcpy(&padding_idx, l->args[5], 4);
    fk_region_t ri, rg, rw;
    fk_region(ids, &ri);
    fk_region(grad, &rg);
    fk_region(gw, &rw);
    const size_t width = elem ? elem : 2; /* Half / BFloat16: the rows are checked, not summed */
    for (int i = 0; i < n; i++) {
        const char *p = ids + (size_t)i * (is64 ? 8 : 4);
        if (!fk_inside(&ri, p, is64 ? 8 : 4)) return cudaErrorIllegalAddress;
        int row;
        if (is64) {
            int64_t v;
            memcpy(&v, p, 8);
            row = (int)v;
        } else {
            memcpy(&row, p, 4);
        }
        if (row == padding_idx) continue;
        char *dst = gw + ((int64_t)row * stride) * (int64_t)width;
        if (!fk_inside(&rw, dst, (size_t)stride * width)) {
            fprintf(stderr,
                    "========= Invalid __global__ write of size %zu bytes\n"
                    "=========     at embedding_backward_feature_kernel (emulated by the test double)\n"
                    "=========     id %d (indices[%d]) writes grad_weight row %d at %p, outside its allocation "
                    "[%p, %p)\n",
                    width, row, i, row, (void *)dst, (const void *)rw.lo, (const void *)rw.hi);
            return cudaErrorIllegalAddress;
        }
        const char *src = grad + (size_t)i * (size_t)stride * width;
        if (!elem) continue;
        if (!fk_inside(&rg, src, (size_t)stride * elem)) return cudaErrorIllegalAddress;
        for (int64_t f = 0; f < stride; f++) {
            if (elem == 4) {
                float a, b;
                memcpy(&a, dst + f * 4, 4);
                memcpy(&b, src + f * 4, 4);
                a += b;
                memcpy(dst + f * 4, &a, 4);
            } else {
                double a, b;
                memcpy(&a, dst + f * 8, 8);
                memcpy(&b, src + f * 8, 8);
                a += b;
                memcpy(dst + f * 8, &a, 8);
            }
        }
    }
    return cudaSuccess;
}

static const size_t L_FEATURE[] = { 8, 8, 8, 4, 8, 4 };

#define E(sub, fn, layout) { sub, fn, (int)(sizeof layout / sizeof layout[0]), layout }
const fk_emulator_t fk_index_backward_emulators[] = {
    E("33embedding_backward_feature_kernelI", emu_embedding_backward_feature, L_FEATURE),
    { NULL, NULL, 0, NULL },
};
