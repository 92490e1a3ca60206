/* nll_body.h: the bodies of the emulated PyTorch NLL kernels, included twice by nll.c, once
 * with SCALAR=float and once with SCALAR=double (ACC is at::acc_type<SCALAR, true>), so the
 * arithmetic is done in the kernel's own types, in the kernel's own order.
 * Each mirrors aten/src/ATen/native/cuda/Loss.cu or NLLLoss2d.cu of PyTorch v2.6
 * (/work/shared/pytorch-kernels.md §2.1-2.6, §3.1-3.4): same outputs, same asserts, same
 * skipping of ignore_index. `u8` says the label type is uint8 (checked only t < n_classes).
 * Every memory access is checked against the allocation the pointer came from; one outside it
 * is what a GPU reports as an illegal address.
 */

/* §2.1: CUDA_KERNEL_LOOP over batch_size; output[i] = -w[t] * input[i][t]. */
static cudaError_t SFX(fwd_no_reduce)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    const int64_t batch = *(const int64_t *)a[0];
    const pta_t in = pta(a[1], 2);
    const char *target = *(char *const *)a[2];
    SCALAR *output = *(SCALAR *const *)a[3];
    const SCALAR *weights = *(const SCALAR *const *)a[4];
    const int64_t n_classes = *(const int64_t *)a[5], ignore = *(const int64_t *)a[6];
    fk_region_t rin, rt, rout, rw;
    fk_region(in.data, &rin); fk_region(target, &rt); fk_region(output, &rout); fk_region(weights, &rw);
    cudaError_t err = cudaSuccess;
    for (int64_t i = 0; i < batch; i++) {
        if (!fk_inside(&rt, target + i * (u8 ? 1 : 8), u8 ? 1 : 8)) return cudaErrorIllegalAddress;
        const int64_t t = label(target, i, u8);
        if (!fk_inside(&rout, output + i, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        if (t == ignore) { output[i] = (SCALAR)0; continue; }
        if (!class_ok(t, n_classes, u8)) {
            unsigned b[3], th[3];
            loop_coords(l, (uint64_t)i, b, th);
            fk_device_assert(LOSS_CU, 200, "nll_loss_forward_no_reduce_cuda_kernel", b, th,
                             u8 ? "cur_target < n_classes" : "cur_target >= 0 && cur_target < n_classes");
            err = cudaErrorAssert;
            continue;
        }
        const SCALAR *x = (const SCALAR *)in.data + i * in.stride[0] + t * in.stride[1];
        if (!fk_inside(&rin, x, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        SCALAR w = (SCALAR)1;
        if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; w = weights[t]; }
        output[i] = -w * *x;
    }
    return err;
}

/* §2.2: one thread; a mean over one element is the element itself (NaN for weight 0). */
static cudaError_t SFX(fwd_1d)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    SCALAR *output = *(SCALAR *const *)a[0];
    SCALAR *total_weight = *(SCALAR *const *)a[1];
    const SCALAR *input = *(const SCALAR *const *)a[2];
    const char *target = *(char *const *)a[3];
    const SCALAR *weights = *(const SCALAR *const *)a[4];
    const bool size_average = *(const bool *)a[5];
    const int64_t n_classes = *(const int64_t *)a[6], ignore = *(const int64_t *)a[7];
    if (one_thread_assert(l, "nll_loss_forward_reduce_cuda_kernel_1d", 261)) return cudaErrorAssert;
    fk_region_t ro, rtw, rin, rt, rw;
    fk_region(output, &ro); fk_region(total_weight, &rtw); fk_region(input, &rin); fk_region(target, &rt); fk_region(weights, &rw);
    if (!fk_inside(&rt, target, u8 ? 1 : 8) || !fk_inside(&ro, output, sizeof(SCALAR)) || !fk_inside(&rtw, total_weight, sizeof(SCALAR)))
        return cudaErrorIllegalAddress;
    const int64_t t = label(target, 0, u8);
    if (t != ignore) {
        if (!class_ok(t, n_classes, u8)) {
            const unsigned z[3] = { 0, 0, 0 };
            fk_device_assert(LOSS_CU, 265, "nll_loss_forward_reduce_cuda_kernel_1d", z, z,
                             u8 ? "t < n_classes" : "t >= 0 && t < n_classes");
            return cudaErrorAssert;
        }
        SCALAR w = (SCALAR)1;
        if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; w = weights[t]; }
        if (!fk_inside(&rin, input + t, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        *total_weight = w;
        if (size_average) *output = w == (SCALAR)0 ? (SCALAR)NAN : -input[t];
        else *output = -w * input[t];
    } else {
        *output = (SCALAR)0;
        *total_weight = (SCALAR)0;
    }
    return cudaSuccess;
}

/* §2.3: blockDim.x threads stride over nframe, each with its own partial sums; thread 0 adds
 * them up in thread order and divides by the total weight for a mean (0/0 = NaN, as on GPU). */
static cudaError_t SFX(fwd_2d)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    SCALAR *output = *(SCALAR *const *)a[0];
    SCALAR *total_weight = *(SCALAR *const *)a[1];
    const SCALAR *input = *(const SCALAR *const *)a[2];
    const char *target = *(char *const *)a[3];
    const SCALAR *weights = *(const SCALAR *const *)a[4];
    const bool size_average = *(const bool *)a[5];
    const int64_t nframe = *(const int64_t *)a[6], ndim = *(const int64_t *)a[7];
    const int64_t n_classes = *(const int64_t *)a[8], ignore = *(const int64_t *)a[9];
    const unsigned nthreads = l->block.x;
    ACC sh_inputs[1024], acc_weight[1024];
    fk_region_t ro, rtw, rin, rt, rw;
    fk_region(output, &ro); fk_region(total_weight, &rtw); fk_region(input, &rin); fk_region(target, &rt); fk_region(weights, &rw);
    cudaError_t err = cudaSuccess;
    for (unsigned th = 0; th < nthreads; th++) {
        sh_inputs[th] = 0;
        acc_weight[th] = 0;
        for (int64_t i = th; i < nframe; i += nthreads) {
            if (!fk_inside(&rt, target + i * (u8 ? 1 : 8), u8 ? 1 : 8)) return cudaErrorIllegalAddress;
            const int64_t t = label(target, i, u8);
            if (t == ignore) continue;
            if (!class_ok(t, n_classes, u8)) {
                const unsigned b[3] = { 0, 0, 0 }, thr[3] = { th, 0, 0 };
                fk_device_assert(LOSS_CU, 304, "nll_loss_forward_reduce_cuda_kernel_2d", b, thr,
                                 u8 ? "t < n_classes" : "t >= 0 && t < n_classes");
                err = cudaErrorAssert;
                break; /* this thread has trapped */
            }
            SCALAR w = (SCALAR)1;
            if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; w = weights[t]; }
            if (!fk_inside(&rin, input + i * ndim + t, sizeof(SCALAR))) return cudaErrorIllegalAddress;
            sh_inputs[th] -= input[i * ndim + t] * w;
            acc_weight[th] += w;
        }
    }
    if (err) return err;
    ACC out = 0, tw = 0;
    for (unsigned th = 0; th < nthreads; th++) { out += sh_inputs[th]; tw += acc_weight[th]; }
    if (!fk_inside(&ro, output, sizeof(SCALAR)) || !fk_inside(&rtw, total_weight, sizeof(SCALAR))) return cudaErrorIllegalAddress;
    *total_weight = (SCALAR)tw;
    *output = size_average ? (SCALAR)(out / tw) : (SCALAR)out;
    return cudaSuccess;
}

/* §2.4: grad_input[i][t] = -w[t] * grad_output[i]; batch_size is an int. */
static cudaError_t SFX(bwd_no_reduce)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    const int batch = *(const int *)a[0];
    const char *target = *(char *const *)a[1];
    const pta_t go = pta(a[2], 1), gi = pta(a[3], 2);
    const SCALAR *weights = *(const SCALAR *const *)a[4];
    const int64_t n_classes = *(const int64_t *)a[5], ignore = *(const int64_t *)a[6];
    fk_region_t rt, rgo, rgi, rw;
    fk_region(target, &rt); fk_region(go.data, &rgo); fk_region(gi.data, &rgi); fk_region(weights, &rw);
    cudaError_t err = cudaSuccess;
    for (int64_t i = 0; i < batch; i++) {
        if (!fk_inside(&rt, target + i * (u8 ? 1 : 8), u8 ? 1 : 8)) return cudaErrorIllegalAddress;
        const int64_t t = label(target, i, u8);
        if (t == ignore) continue;
        if (!class_ok(t, n_classes, u8)) {
            unsigned b[3], th[3];
            loop_coords(l, (uint64_t)i, b, th);
            fk_device_assert(LOSS_CU, 392, "nll_loss_backward_no_reduce_cuda_kernel", b, th,
                             u8 ? "cur_target < n_classes" : "cur_target >= 0 && cur_target < n_classes");
            err = cudaErrorAssert;
            continue;
        }
        SCALAR w = (SCALAR)1;
        if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; w = weights[t]; }
        const SCALAR *g = (const SCALAR *)go.data + i * go.stride[0];
        SCALAR *dst = (SCALAR *)gi.data + i * gi.stride[0] + t * gi.stride[1];
        if (!fk_inside(&rgo, g, sizeof(SCALAR)) || !fk_inside(&rgi, dst, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        *dst = -w * *g;
    }
    return err;
}

/* §2.5: grad_input[t] = w[t] * -(mean ? grad_output / total_weight : grad_output). */
static cudaError_t SFX(bwd_1d)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    SCALAR *grad_input = *(SCALAR *const *)a[0];
    const SCALAR *grad_output = *(const SCALAR *const *)a[1];
    const SCALAR *weights = *(const SCALAR *const *)a[2];
    const char *target = *(char *const *)a[3];
    const SCALAR *total_weight = *(const SCALAR *const *)a[4];
    const bool size_average = *(const bool *)a[5];
    const int64_t n_classes = *(const int64_t *)a[6], ignore = *(const int64_t *)a[7];
    fk_region_t rgi, rgo, rw, rt, rtw;
    fk_region(grad_input, &rgi); fk_region(grad_output, &rgo); fk_region(weights, &rw); fk_region(target, &rt); fk_region(total_weight, &rtw);
    if (!fk_inside(&rt, target, u8 ? 1 : 8)) return cudaErrorIllegalAddress;
    const int64_t t = label(target, 0, u8);
    if (t == ignore) return cudaSuccess;
    if (!class_ok(t, n_classes, u8)) {
        const unsigned z[3] = { 0, 0, 0 };
        fk_device_assert(LOSS_CU, 420, "nll_loss_backward_reduce_cuda_kernel_1d", z, z,
                         u8 ? "t < n_classes" : "t >= 0 && t < n_classes");
        return cudaErrorAssert;
    }
    if (!fk_inside(&rgo, grad_output, sizeof(SCALAR)) || (size_average && !fk_inside(&rtw, total_weight, sizeof(SCALAR))))
        return cudaErrorIllegalAddress;
    const SCALAR grad = -(size_average ? *grad_output / *total_weight : *grad_output);
    if (!fk_inside(&rgi, grad_input + t, sizeof(SCALAR))) return cudaErrorIllegalAddress;
    if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; grad_input[t] = weights[t] * grad; }
    else grad_input[t] = grad;
    return cudaSuccess;
}

/* §2.6: nframe and ndim are ints; grad_input[i*ndim + t]. */
static cudaError_t SFX(bwd_2d)(const fk_launch_t *l, int u8)
{
    void **a = l->args;
    SCALAR *grad_input = *(SCALAR *const *)a[0];
    const SCALAR *grad_output = *(const SCALAR *const *)a[1];
    const char *target = *(char *const *)a[2];
    const SCALAR *weights = *(const SCALAR *const *)a[3];
    const SCALAR *total_weight = *(const SCALAR *const *)a[4];
    const bool size_average = *(const bool *)a[5];
    const int nframe = *(const int *)a[6], ndim = *(const int *)a[7];
    const int64_t n_classes = *(const int64_t *)a[8], ignore = *(const int64_t *)a[9];
    const unsigned nthreads = l->block.x;
    fk_region_t rgi, rgo, rt, rw, rtw;
    fk_region(grad_input, &rgi); fk_region(grad_output, &rgo); fk_region(target, &rt); fk_region(weights, &rw); fk_region(total_weight, &rtw);
    if (!fk_inside(&rgo, grad_output, sizeof(SCALAR)) || (size_average && !fk_inside(&rtw, total_weight, sizeof(SCALAR))))
        return cudaErrorIllegalAddress;
    const SCALAR grad = -(size_average ? *grad_output / *total_weight : *grad_output);
    cudaError_t err = cudaSuccess;
    for (unsigned th = 0; th < nthreads; th++) {
        for (int64_t i = th; i < nframe; i += nthreads) {
            if (!fk_inside(&rt, target + i * (u8 ? 1 : 8), u8 ? 1 : 8)) return cudaErrorIllegalAddress;
            const int64_t t = label(target, i, u8);
            if (t == ignore) continue;
            if (!class_ok(t, n_classes, u8)) {
                const unsigned b[3] = { 0, 0, 0 }, thr[3] = { th, 0, 0 };
                fk_device_assert(LOSS_CU, 455, "nll_loss_backward_reduce_cuda_kernel_2d", b, thr,
                                 u8 ? "t < n_classes" : "t >= 0 && t < n_classes");
                err = cudaErrorAssert;
                break;
            }
            SCALAR *dst = grad_input + i * ndim + t;
            if (!fk_inside(&rgi, dst, sizeof(SCALAR))) return cudaErrorIllegalAddress;
            if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; *dst = weights[t] * grad; }
            else *dst = grad;
        }
    }
    return err;
}

/* §3.1: over N*H*W with b = i % N, h = (i / N) % H, w = (i / (N*H)) % W; the target is read
 * through its accessor strides (it is not made contiguous). C comes from input.size(1). */
static cudaError_t SFX(nll2d_fwd_no_reduce)(const fk_launch_t *l, int u8)
{
    (void)u8;
    void **a = l->args;
    const int64_t n_threads = *(const int64_t *)a[0];
    const pta_t in = pta(a[1], 4), tg = pta(a[2], 3), out = pta(a[3], 3);
    const SCALAR *weight = *(const SCALAR *const *)a[4];
    const int64_t ignore = *(const int64_t *)a[5];
    const int64_t N = in.size[0], C = in.size[1], H = in.size[2], W = in.size[3];
    fk_region_t rin, rt, ro, rw;
    fk_region(in.data, &rin); fk_region(tg.data, &rt); fk_region(out.data, &ro); fk_region(weight, &rw);
    cudaError_t err = cudaSuccess;
    if (N <= 0 || H <= 0 || W <= 0) return cudaSuccess;
    for (int64_t i = 0; i < n_threads; i++) {
        const int64_t b = i % N, h = (i / N) % H, w = (i / (N * H)) % W;
        const int64_t *tp = (const int64_t *)tg.data + b * tg.stride[0] + h * tg.stride[1] + w * tg.stride[2];
        SCALAR *op = (SCALAR *)out.data + b * out.stride[0] + h * out.stride[1] + w * out.stride[2];
        if (!fk_inside(&rt, tp, 8) || !fk_inside(&ro, op, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        const int64_t t = *tp;
        if (t == ignore) { *op = (SCALAR)0; continue; }
        if (!(t >= 0 && t < C)) {
            unsigned bl[3], th[3];
            loop_coords(l, (uint64_t)i, bl, th);
            fk_device_assert(NLL2D_CU, 60, "nll_loss2d_forward_no_reduce_kernel", bl, th, "cur_target >= 0 && cur_target < n_classes");
            err = cudaErrorAssert;
            continue;
        }
        const SCALAR *x = (const SCALAR *)in.data + b * in.stride[0] + t * in.stride[1] + h * in.stride[2] + w * in.stride[3];
        if (!fk_inside(&rin, x, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        SCALAR cw = (SCALAR)1;
        if (weight) { if (!fk_inside(&rw, weight + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; cw = weight[t]; }
        *op = -*x * cw;
    }
    return err;
}

/* §3.2: blocks_per_sample blocks per sample; each block adds its sums to *output and
 * *total_weight (atomically on the GPU; the host zeroed them before the launch). */
static cudaError_t SFX(nll2d_fwd)(const fk_launch_t *l, int u8)
{
    (void)u8;
    void **a = l->args;
    SCALAR *output = *(SCALAR *const *)a[0];
    SCALAR *total_weight = *(SCALAR *const *)a[1];
    const SCALAR *input = *(const SCALAR *const *)a[2];
    const int64_t *target = *(const int64_t *const *)a[3];
    const SCALAR *weight = *(const SCALAR *const *)a[4];
    const int n_classes = *(const int *)a[5], map_nelem = *(const int *)a[6], bps = *(const int *)a[7];
    const int64_t ignore = *(const int64_t *)a[8];
    fk_region_t ro, rtw, rin, rt, rw;
    fk_region(output, &ro); fk_region(total_weight, &rtw); fk_region(input, &rin); fk_region(target, &rt); fk_region(weight, &rw);
    if (bps <= 0) return cudaSuccess;
    const unsigned bdim = l->block.x;
    const int64_t step = (int64_t)bdim * bps;
    cudaError_t err = cudaSuccess;
    ACC out_sum = 0, w_sum = 0;
    for (unsigned blk = 0; blk < l->grid.x; blk++) {
        const int64_t sample = blk / (unsigned)bps;
        const int64_t toffset = sample * map_nelem, ioffset = sample * map_nelem * n_classes;
        ACC block_in = 0, block_w = 0;
        for (unsigned th = 0; th < bdim; th++) {
            ACC input_sum = 0, acc_weight = 0;
            for (int64_t i = (int64_t)(blk % (unsigned)bps) * bdim + th; i < map_nelem; i += step) {
                if (!fk_inside(&rt, target + toffset + i, 8)) return cudaErrorIllegalAddress;
                const int64_t t = target[toffset + i];
                if (t == ignore) continue;
                if (!(t >= 0 && t < n_classes)) {
                    const unsigned b[3] = { blk, 0, 0 }, thr[3] = { th, 0, 0 };
                    fk_device_assert(NLL2D_CU, 140, "nll_loss2d_forward_kernel", b, thr, "t >= 0 && t < n_classes");
                    err = cudaErrorAssert;
                    break;
                }
                SCALAR cw = (SCALAR)1;
                if (weight) { if (!fk_inside(&rw, weight + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; cw = weight[t]; }
                const int64_t input_index = ioffset + i + (int64_t)map_nelem * t;
                if (!fk_inside(&rin, input + input_index, sizeof(SCALAR))) return cudaErrorIllegalAddress;
                input_sum -= input[input_index] * cw;
                acc_weight += cw;
            }
            block_in += input_sum;
            block_w += acc_weight;
        }
        out_sum += block_in;
        w_sum += block_w;
        if (!err) {
            if (!fk_inside(&ro, output, sizeof(SCALAR)) || !fk_inside(&rtw, total_weight, sizeof(SCALAR))) return cudaErrorIllegalAddress;
            *total_weight += (SCALAR)block_w;
            *output += (SCALAR)block_in;
        }
    }
    (void)out_sum;
    (void)w_sum;
    return err;
}

/* The mean step after §3.2: *output /= *total_weight. */
static cudaError_t SFX(nll2d_size_average)(const fk_launch_t *l, int u8)
{
    (void)u8;
    SCALAR *output = *(SCALAR *const *)l->args[0];
    const SCALAR *total_weight = *(const SCALAR *const *)l->args[1];
    fk_region_t ro, rtw;
    fk_region(output, &ro); fk_region(total_weight, &rtw);
    if (!fk_inside(&ro, output, sizeof(SCALAR)) || !fk_inside(&rtw, total_weight, sizeof(SCALAR))) return cudaErrorIllegalAddress;
    *output /= *total_weight;
    return cudaSuccess;
}

/* §3.3: no assert in v2.6: a label out of range writes outside the class plane, which is
 * silent corruption inside the allocation and an illegal address outside it. */
static cudaError_t SFX(nll2d_bwd_no_reduce)(const fk_launch_t *l, int u8)
{
    (void)u8;
    void **a = l->args;
    const int64_t n_threads = *(const int64_t *)a[0];
    const pta_t tg = pta(a[1], 3), go = pta(a[2], 3), gi = pta(a[3], 4);
    const SCALAR *weight = *(const SCALAR *const *)a[4];
    const int64_t ignore = *(const int64_t *)a[5];
    const int64_t N = tg.size[0], H = tg.size[1], W = tg.size[2];
    fk_region_t rt, rgo, rgi, rw;
    fk_region(tg.data, &rt); fk_region(go.data, &rgo); fk_region(gi.data, &rgi); fk_region(weight, &rw);
    if (N <= 0 || H <= 0 || W <= 0) return cudaSuccess;
    for (int64_t i = 0; i < n_threads; i++) {
        const int64_t b = i % N, h = (i / N) % H, w = (i / (N * H)) % W;
        const int64_t *tp = (const int64_t *)tg.data + b * tg.stride[0] + h * tg.stride[1] + w * tg.stride[2];
        if (!fk_inside(&rt, tp, 8)) return cudaErrorIllegalAddress;
        const int64_t t = *tp;
        if (t == ignore) continue;
        SCALAR cw = (SCALAR)1;
        if (weight) { if (!fk_inside(&rw, weight + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; cw = weight[t]; }
        const SCALAR value = -cw;
        const SCALAR *g = (const SCALAR *)go.data + b * go.stride[0] + h * go.stride[1] + w * go.stride[2];
        SCALAR *dst = (SCALAR *)gi.data + b * gi.stride[0] + t * gi.stride[1] + h * gi.stride[2] + w * gi.stride[3];
        if (!fk_inside(&rgo, g, sizeof(SCALAR)) || !fk_inside(&rgi, dst, sizeof(SCALAR))) return cudaErrorIllegalAddress;
        *dst = value * *g;
    }
    return cudaSuccess;
}

/* §3.4: grad_input[ioffset + i + map_nelem*t] = -w[t] * norm * grad_output[0]. */
static cudaError_t SFX(nll2d_bwd)(const fk_launch_t *l, int u8)
{
    (void)u8;
    void **a = l->args;
    SCALAR *grad_input = *(SCALAR *const *)a[0];
    const SCALAR *grad_output = *(const SCALAR *const *)a[1];
    const int64_t *target = *(const int64_t *const *)a[2];
    const SCALAR *weights = *(const SCALAR *const *)a[3];
    const SCALAR *total_weight = *(const SCALAR *const *)a[4];
    const bool size_average = *(const bool *)a[5];
    const int n_classes = *(const int *)a[6], map_nelem = *(const int *)a[7], bps = *(const int *)a[8];
    const int64_t ignore = *(const int64_t *)a[9];
    fk_region_t rgi, rgo, rt, rw, rtw;
    fk_region(grad_input, &rgi); fk_region(grad_output, &rgo); fk_region(target, &rt); fk_region(weights, &rw); fk_region(total_weight, &rtw);
    if (bps <= 0) return cudaSuccess;
    if (!fk_inside(&rgo, grad_output, sizeof(SCALAR)) || (size_average && !fk_inside(&rtw, total_weight, sizeof(SCALAR))))
        return cudaErrorIllegalAddress;
    const SCALAR norm = size_average ? ((SCALAR)1 / *total_weight) : (SCALAR)1;
    const unsigned bdim = l->block.x;
    const int64_t step = (int64_t)bdim * bps;
    cudaError_t err = cudaSuccess;
    for (unsigned blk = 0; blk < l->grid.x; blk++) {
        const int64_t sample = blk / (unsigned)bps;
        const int64_t toffset = sample * map_nelem, ioffset = sample * map_nelem * n_classes;
        for (unsigned th = 0; th < bdim; th++) {
            for (int64_t i = (int64_t)(blk % (unsigned)bps) * bdim + th; i < map_nelem; i += step) {
                if (!fk_inside(&rt, target + toffset + i, 8)) return cudaErrorIllegalAddress;
                const int64_t t = target[toffset + i];
                if (t == ignore) continue;
                if (!(t >= 0 && t < n_classes)) {
                    const unsigned b[3] = { blk, 0, 0 }, thr[3] = { th, 0, 0 };
                    fk_device_assert(NLL2D_CU, 224, "nll_loss2d_backward_kernel", b, thr, "t >= 0 && t < n_classes");
                    err = cudaErrorAssert;
                    break;
                }
                SCALAR *dst = grad_input + ioffset + i + (int64_t)map_nelem * t;
                if (!fk_inside(&rgi, dst, sizeof(SCALAR))) return cudaErrorIllegalAddress;
                SCALAR cw = (SCALAR)1;
                if (weights) { if (!fk_inside(&rw, weights + t, sizeof(SCALAR))) return cudaErrorIllegalAddress; cw = weights[t]; }
                *dst = -cw * norm * grad_output[0];
            }
        }
    }
    return err;
}
