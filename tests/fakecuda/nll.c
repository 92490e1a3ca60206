/* nll.c: host emulations of PyTorch's NLL loss kernels (Loss.cu and NLLLoss2d.cu, v2.6 forms),
 * plus a generic test kernel, for the runtime test double.
 *
 * fakecudart.c picks an entry of fk_nll_emulators by a substring of the mangled name (the
 * anonymous namespace differs per file) and runs it only when the parameter sizes read from
 * the name match the entry's layout; a kernel of the same name with another parameter list is
 * a no-op. The scalar type (float or double) and the label type (uint8 or int64) come from the
 * kernel's template arguments; other types (Half, BFloat16) run as no-ops.
 * A failed CUDA_KERNEL_ASSERT queues the device's assert line and makes the kernel return
 * cudaErrorAssert, which poisons the context. The file:line in those lines are nominal: the
 * real ones depend on the PyTorch build.
 * Runs on the launching thread; no state. Tested by tests/fakecuda/test_nll_*.sh.
 */
#include "fakecudart.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define LOSS_CU "/pytorch/aten/src/ATen/native/cuda/Loss.cu"
#define NLL2D_CU "/pytorch/aten/src/ATen/native/cuda/NLLLoss2d.cu"

/* at::GenericPackedTensorAccessor<T, N, DefaultPtrTraits, int64_t>: data, sizes[N], strides[N]. */
typedef struct pta { const void *data; int64_t size[4], stride[4]; } pta_t;

static pta_t pta(const void *arg, int n)
{
    pta_t p;
    memset(&p, 0, sizeof p);
    memcpy(&p.data, arg, 8);
    memcpy(p.size, (const char *)arg + 8, 8 * (size_t)n);
    memcpy(p.stride, (const char *)arg + 8 + 8 * n, 8 * (size_t)n);
    return p;
}

static int64_t label(const char *target, int64_t i, int u8)
{
    if (u8) return ((const uint8_t *)target)[i];
    int64_t v;
    memcpy(&v, target + 8 * i, 8);
    return v;
}

/* CHECK_INDEX_IN_CLASS of v2.6: unsigned labels are only checked against the upper bound. */
static int class_ok(int64_t t, int64_t n_classes, int u8)
{
    return u8 ? t < n_classes : (t >= 0 && t < n_classes);
}

/* Block and thread of the thread that handles element i of a CUDA_KERNEL_LOOP. */
static void loop_coords(const fk_launch_t *l, uint64_t i, unsigned b[3], unsigned th[3])
{
    const uint64_t total = (uint64_t)l->grid.x * l->block.x;
    const uint64_t g = total ? i % total : 0;
    b[0] = (unsigned)(g / l->block.x); b[1] = b[2] = 0;
    th[0] = (unsigned)(g % l->block.x); th[1] = th[2] = 0;
}

/* The 1d kernels assert they run on thread 0 only: every other thread fails. */
static int one_thread_assert(const fk_launch_t *l, const char *func, unsigned line)
{
    int failed = 0;
    for (unsigned bz = 0; bz < l->grid.z; bz++)
        for (unsigned by = 0; by < l->grid.y; by++)
            for (unsigned bx = 0; bx < l->grid.x; bx++)
                for (unsigned z = 0; z < l->block.z; z++)
                    for (unsigned y = 0; y < l->block.y; y++)
                        for (unsigned x = 0; x < l->block.x; x++) {
                            if (!x && !y && !z) continue;
                            const unsigned b[3] = { bx, by, bz }, th[3] = { x, y, z };
                            fk_device_assert(LOSS_CU, line, func, b, th, "threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0");
                            failed = 1;
                        }
    return failed;
}

#define SCALAR float
#define ACC float
#define SFX(name) name##_f
#include "nll_body.h"
#undef SCALAR
#undef ACC
#undef SFX
#define SCALAR double
#define ACC double
#define SFX(name) name##_d
#include "nll_body.h"
#undef SCALAR
#undef ACC
#undef SFX

/* Dispatch on the template arguments: scalar at 0, label type at label_pos (-1: int64 always). */
#define DISPATCH(name, label_pos) \
    static cudaError_t emu_##name(const fk_launch_t *l) \
    { \
        const fk_sig_t *s = l->sig; \
        int u8 = 0; \
        if ((label_pos) >= 0) { \
            if ((label_pos) >= s->n_targs) return cudaSuccess; \
            if (!strcmp(s->targ[(label_pos) < 0 ? 0 : (label_pos)], "h")) u8 = 1; \
            else if (strcmp(s->targ[(label_pos) < 0 ? 0 : (label_pos)], "l") != 0) return cudaSuccess; \
        } \
        if (s->n_targs < 1) return cudaSuccess; \
        if (!strcmp(s->targ[0], "f")) return name##_f(l, u8); \
        if (!strcmp(s->targ[0], "d")) return name##_d(l, u8); \
        return cudaSuccess; /* Half, BFloat16: not emulated */ \
    }

DISPATCH(fwd_no_reduce, 1)
DISPATCH(fwd_1d, 1)
DISPATCH(fwd_2d, 2)
DISPATCH(bwd_no_reduce, 1)
DISPATCH(bwd_1d, 1)
DISPATCH(bwd_2d, 1)
DISPATCH(nll2d_fwd_no_reduce, -1)
DISPATCH(nll2d_fwd, -1)
DISPATCH(nll2d_size_average, -1)
DISPATCH(nll2d_bwd_no_reduce, -1)
DISPATCH(nll2d_bwd, -1)

/* The pass-through test kernel lg_test_add_one(float *p, int n): p[i] += 1 for i < n. */
static cudaError_t emu_add_one(const fk_launch_t *l)
{
    float *p = *(float *const *)l->args[0];
    const int n = *(const int *)l->args[1];
    fk_region_t r;
    fk_region(p, &r);
    for (int i = 0; i < n; i++) {
        if (!fk_inside(&r, p + i, sizeof(float))) return cudaErrorIllegalAddress;
        p[i] += 1.0f;
    }
    return cudaSuccess;
}

/* Layouts (parameter sizes in bytes), pytorch-kernels.md §2 and §3. */
static const size_t L_FWD_NO_REDUCE[] = { 8, 40, 8, 8, 8, 8, 8 };
static const size_t L_REDUCE_1D[] = { 8, 8, 8, 8, 8, 1, 8, 8 };
static const size_t L_FWD_2D[] = { 8, 8, 8, 8, 8, 1, 8, 8, 8, 8 };
static const size_t L_BWD_NO_REDUCE[] = { 4, 8, 24, 40, 8, 8, 8 };
static const size_t L_BWD_2D[] = { 8, 8, 8, 8, 8, 1, 4, 4, 8, 8 };
static const size_t L_2D_FWD_NO_REDUCE[] = { 8, 72, 56, 56, 8, 8 };
static const size_t L_2D_FWD[] = { 8, 8, 8, 8, 8, 4, 4, 4, 8 };
static const size_t L_2D_SIZE_AVERAGE[] = { 8, 8 };
static const size_t L_2D_BWD_NO_REDUCE[] = { 8, 56, 56, 72, 8, 8 };
static const size_t L_2D_BWD[] = { 8, 8, 8, 8, 8, 1, 4, 4, 4, 8 };
static const size_t L_ADD_ONE[] = { 8, 4 };

#define E(sub, fn, layout) { sub, fn, (int)(sizeof layout / sizeof layout[0]), layout }
/* The length prefix of the source name makes each substring match one kernel name only. */
const fk_emulator_t fk_nll_emulators[] = {
    E("38nll_loss_forward_no_reduce_cuda_kernelI", emu_fwd_no_reduce, L_FWD_NO_REDUCE),
    E("38nll_loss_forward_reduce_cuda_kernel_1dI", emu_fwd_1d, L_REDUCE_1D),
    E("38nll_loss_forward_reduce_cuda_kernel_2dI", emu_fwd_2d, L_FWD_2D),
    E("39nll_loss_backward_no_reduce_cuda_kernelI", emu_bwd_no_reduce, L_BWD_NO_REDUCE),
    E("39nll_loss_backward_reduce_cuda_kernel_1dI", emu_bwd_1d, L_REDUCE_1D),
    E("39nll_loss_backward_reduce_cuda_kernel_2dI", emu_bwd_2d, L_BWD_2D),
    E("35nll_loss2d_forward_no_reduce_kernelI", emu_nll2d_fwd_no_reduce, L_2D_FWD_NO_REDUCE),
    E("25nll_loss2d_forward_kernelI", emu_nll2d_fwd, L_2D_FWD),
    E("38nll_loss2d_forward_size_average_kernelI", emu_nll2d_size_average, L_2D_SIZE_AVERAGE),
    E("36nll_loss2d_backward_no_reduce_kernelI", emu_nll2d_bwd_no_reduce, L_2D_BWD_NO_REDUCE),
    E("26nll_loss2d_backward_kernelI", emu_nll2d_bwd, L_2D_BWD),
    E("lg_test_add_one", emu_add_one, L_ADD_ONE),
    { NULL, NULL, 0, NULL },
};
