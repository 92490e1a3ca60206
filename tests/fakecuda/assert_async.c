/* assert_async.c: a host emulation of torch._assert_async's kernel for the runtime test double:
 * _assert_async_cuda_kernel<scalar_t>(const scalar_t *input, at::native::Msg msg) and its
 * complex<float> / complex<double> overloads (aten/src/ATen/native/cuda/TensorCompare.cu), one
 * thread, CUDA_KERNEL_ASSERT_MSG(input[0] != 0, msg.msg). A zero condition queues the device's
 * assert line (with the message, when there is one) and returns cudaErrorAssert, which poisons
 * the context as on a GPU. File:line in the assert line are nominal.
 *
 * The double computes no reductions, so the condition real PyTorch derives on the device
 * (index_put_(accumulate=True): index.max() < size) is whatever its buffer holds here; tests
 * build the condition on the CPU and copy it (tests/progs/assert_async.cu).
 *
 * fakecudart.c picks the entry by a substring of the mangled name and runs it only when the
 * parameter sizes read from the name (sig.c: a pointer and the 256-byte Msg) match. Runs on
 * the launching thread (or the stream's worker); no state. Tested by tests/e2e/test_assert_async.sh
 * (without labelguard: the context dies, as on a GPU).
 */
#include "fakecudart.h"

#include <stdio.h>
#include <string.h>

#define TENSOR_COMPARE_CU "/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu"

/* Whether the element at p is nonzero as the kernel's `!=` sees it; -1: a type it does not take. */
static int nonzero(const char *name, const fk_sig_t *s, const unsigned char *p)
{
    if (strstr(name, "7complexIfE")) {
        float re, im;
        memcpy(&re, p, 4);
        memcpy(&im, p + 4, 4);
        return re != 0.0f || im != 0.0f;
    }
    if (strstr(name, "7complexIdE")) {
        double re, im;
        memcpy(&re, p, 8);
        memcpy(&im, p + 8, 8);
        return re != 0.0 || im != 0.0;
    }
    if (strstr(name, "IN3c104HalfE") || strstr(name, "IN3c108BFloat16E")) {
        unsigned short h;
        memcpy(&h, p, 2);
        return (h & 0x7fff) != 0; /* +-0 is zero; a NaN compares unequal */
    }
    if (s->n_targs < 1) return -1;
    const char *t = s->targ[0];
    if (!strcmp(t, "f")) { float f; memcpy(&f, p, 4); return f != 0.0f; }
    if (!strcmp(t, "d")) { double d; memcpy(&d, p, 8); return d != 0.0; }
    size_t n = !strcmp(t, "b") || !strcmp(t, "h") || !strcmp(t, "a") ? 1 : !strcmp(t, "s") ? 2
             : !strcmp(t, "i") ? 4 : !strcmp(t, "l") || !strcmp(t, "x") ? 8 : 0;
    if (!n) return -1;
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 1;
    return 0;
}

static cudaError_t emu_assert_async(const fk_launch_t *l)
{
    const unsigned char *input;
    memcpy(&input, l->args[0], 8);
    fk_region_t r;
    fk_region(input, &r);
    if (!fk_inside(&r, input, 1)) return cudaErrorIllegalAddress;
    unsigned char elem[16] = {0};
    size_t have = (size_t)(r.hi - (const char *)input);
    memcpy(elem, input, have < sizeof elem ? have : sizeof elem);
    if (nonzero(l->name, l->sig, elem) != 0) return cudaSuccess;
    const char *msg = (const char *)l->args[1]; /* Msg by value: its bytes are the argument */
    char expr[300];
    snprintf(expr, sizeof expr, "input[0] != 0%s%.256s", msg[0] ? "\" && \"" : "", msg);
    const unsigned z[3] = {0, 0, 0};
    fk_device_assert(TENSOR_COMPARE_CU, 156, "_assert_async_cuda_kernel", z, z, expr);
    return cudaErrorAssert;
}

static const size_t L_ASSERT[] = { 8, 256 };

const fk_emulator_t fk_assert_emulators[] = {
    { "25_assert_async_cuda_kernel", emu_assert_async, 2, L_ASSERT },
    { NULL, NULL, 0, NULL },
};
