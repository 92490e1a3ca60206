/* validate_loss.c: where a loss launch keeps its target among its parameters, read and
 * rewritten in a captured graph's kernel node: the rebinds of both backends (validate_gpu_graph.c,
 * validate_node.c) use them when a second exec of a graph gets scratch of its own, and
 * validate_node.c to find the loss node its host node feeds. Pure functions of the spec and
 * the parameter array, no CUDA call.
 *
 * Tested through the rebinds: tests/unit/test_scan.c (host backend, a second exec rewritten)
 * and tests/gpu/test_validator.cu (GPU backend, needs a GPU).
 */
#include <string.h>

#include "checks/checks.h"

/* A loss launch holds its target in the 8 bytes at spec->target.offset of parameter
 * spec->target.param: that parameter, or -1 when spec cannot say (no spec, a parameter past the
 * table or too large to copy). Both backends' rebinds read and rewrite it. */
int lg_validate_loss_param(const lg_spec_t *spec)
{
    if (!spec || spec->target.param < 0 || spec->target.param >= spec->n_params || spec->n_params > LG_MAX_PARAMS)
        return -1;
    int size = spec->param_sizes[spec->target.param];
    if (size > LG_RETARGET_MAX || spec->target.offset < 0 || spec->target.offset + 8 > size)
        return -1;
    return spec->target.param;
}

int lg_validate_loss_target(const lg_spec_t *spec, void *const *args, uint64_t *at)
{
    int param = lg_validate_loss_param(spec);
    if (param < 0 || !args || !args[param])
        return -1;
    memcpy(at, (const unsigned char *)args[param] + spec->target.offset, 8);
    return 0;
}

int lg_validate_loss_retarget(const lg_spec_t *spec, void *const *in, void **out, unsigned char *value, uint64_t to)
{
    int param = lg_validate_loss_param(spec);
    if (param < 0 || !in || !in[param])
        return -1;
    for (int i = 0; i < spec->n_params; i++)
        out[i] = in[i];
    memcpy(value, in[param], (size_t)spec->param_sizes[param]);
    memcpy(value + spec->target.offset, &to, 8);
    out[param] = value;
    return 0;
}

/* Weak: the GPU tests (tests/gpu) link the validators without the name table; there a kernel
 * node is known by its function pointer alone. */
#pragma weak lg_names_lookup

bool lg_validate_loss_is_kernel(const struct lg_kernel_info *info, const void *func)
{
    if (!info || !func)
        return false;
    if (func == info->func)
        return true;
    /* A graph's kernel node may name the kernel by its host stub where the launch gave a
     * kernel handle (cudaGetKernel, CUDA 12+), or the other way round: the same mangled name
     * is the same function, with the same parameters. */
    const char *name = lg_names_lookup ? lg_names_lookup(func) : NULL;
    return name && info->mangled && strcmp(name, info->mangled) == 0;
}
