/* demangle_sizes.c: the LP64 byte sizes the demangler gives a parameter type: builtin types by
 * their code, and the by-value structs PyTorch passes to its watched kernels (tensor accessors,
 * TensorInfo, Half, the assert kernel's Msg) by their name and template arguments
 * (pytorch-kernels.md §6). A size the registry's layout check compares with a spec's params=.
 *
 * Callers: demangle_parse.c, while it parses a signature (any thread; no state). Tested by
 * tests/unit/test_demangle.c (parameter sizes of nvcc-compiled PyTorch-shaped declarations) and
 * tests/unit/test_wheels.c (the sizes real wheels' kernels record).
 */
#include "demangle_lex.h"

/* Sizes of the by-value structs PyTorch passes to its watched kernels (pytorch-kernels.md §6). */
long lg_demangle_sizes_class(const desc_t *d)
{
    if (!d->id)
        return -1;
#define IS(name) (d->id_len == (int)sizeof(name) - 1 && memcmp(d->id, name, sizeof(name) - 1) == 0)
    if (IS("Half") || IS("BFloat16"))
        return d->nargs == 0 ? 2 : -1;
    if (IS("GenericPackedTensorAccessor") || IS("PackedTensorAccessor") || IS("PackedTensorAccessor64") ||
        IS("PackedTensorAccessor32")) {
        /* <T, N, PtrTraits, index_t>; since PyTorch 2.10 torch::headeronly::detail's
         * <TensorAccessorT, IndexBoundsCheck<N, index_t>, T, N, PtrTraits, index_t>, whose two
         * leading policy types hold no data (the wheels' KPARAM_INFO: still 8 + 2 * 8 * N). */
        int n_at = 1, idx_at = 3;
        if (d->nargs == 6 && !d->args[1].is_literal && d->args[3].is_literal)
            n_at = 3, idx_at = 5;
        if (d->nargs <= n_at || !d->args[n_at].is_literal || d->args[n_at].literal < 1 || d->args[n_at].literal > 64)
            return -1;
        long idx = IS("PackedTensorAccessor32") ? 4 : 8;
        if (d->nargs > idx_at) {
            char b = d->args[idx_at].builtin;
            idx = (b == 'i' || b == 'j') ? 4 : (b == 'l' || b == 'm' || b == 'x' || b == 'y') ? 8 : -1;
        }
        return idx < 0 ? -1 : 8 + 2 * idx * d->args[n_at].literal;
    }
    if (IS("THCDeviceTensor")) {
        if (d->nargs < 2 || !d->args[1].is_literal || d->args[1].literal < 1 || d->args[1].literal > 64)
            return -1;
        long idx = 4; /* IndexT defaults to int */
        if (d->nargs >= 3) {
            char b = d->args[2].builtin;
            idx = (b == 'i' || b == 'j') ? 4 : (b == 'l' || b == 'm' || b == 'x' || b == 'y') ? 8 : -1;
        }
        return idx < 0 ? -1 : 8 + 2 * idx * d->args[1].literal;
    }
    if (IS("TensorInfo")) {
        if (d->nargs != 2)
            return -1;
        char b = d->args[1].builtin;
        return b == 'j' ? 216 : (b == 'm' || b == 'y') ? 416 : -1;
    }
    if (IS("Msg")) /* at::native::Msg of torch._assert_async's kernel: char msg[256] (TensorCompare.cu) */
        return d->nargs == 0 ? 256 : -1;
#undef IS
    return -1;
}

long lg_demangle_sizes_builtin(char c)
{
    switch (c) {
    case 'b':
    case 'c':
    case 'a':
    case 'h': return 1;
    case 's':
    case 't': return 2;
    case 'w':
    case 'i':
    case 'j':
    case 'f': return 4;
    case 'l':
    case 'm':
    case 'x':
    case 'y':
    case 'd': return 8;
    case 'e':
    case 'g':
    case 'n':
    case 'o': return 16;
    case 'v':
    case 'z': return 0;
    default: return -1;
    }
}
