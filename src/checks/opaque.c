/* opaque.c: kernels labelguard recognises by name but cannot decode.
 *
 * Compiled losses: under torch.compile, Inductor fuses log_softmax and nll_loss into a Triton
 * kernel (triton_red_fused__log_softmax_nll_loss_forward_1, ...) launched through the driver
 * API. Its target buffer and class count are arguments of a generated signature that no spec
 * can describe, so its labels are not checked: each such kernel gets exactly one
 * `unchecked_loss_kernel` warning naming it, with the way to have that step guarded.
 *
 * The gather after a masked weighted loss: F.cross_entropy(weight=w, label_smoothing=s) with a
 * mean reduction runs nll_loss (masked by labelguard on a copy of the labels), then
 * weight.gather(0, target[...]) with the original labels, in PyTorch's TensorIterator gather
 * kernel (_scatter_gather_elementwise_kernel), whose ids sit behind an OffsetCalculator no spec
 * describes. A bad label would trip that kernel's device-side assert even though the loss was
 * masked. So when act.c masks an NLL forward whose weight is set (and whose reduction is the
 * mean), this thread is armed: its next gather launch within ARM_WINDOW launches, before the
 * NLL backward, is blocked like `raise`, with a violation event and a message saying why.
 *
 * Called by classify.c (lg_opaque_classify, once per kernel handle), act.c (lg_opaque_arm)
 * and launch.c (lg_opaque_gather, lg_opaque_disarm), on the launching thread. Tested by
 * tests/e2e/test_opaque.sh (a Triton-named kernel through the runtime: the same classification
 * the CUPTI driver callback reaches; the armed gather blocked, its controls).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks/checks.h"

/* The smoothing path launches about ten kernels between the loss and the gather (mul, sum,
 * neg, eq, masked_fill, bitwise_not, the masked_select count and copy). */
#define ARM_WINDOW 64

/* ------------------------------------------------------------------ compiled losses */

/* The compiled loss kernels warned about: one warning each; past the set's bound, every time. */
static lg_seen_t warned = LG_SEEN_INIT;

/* A parent thread may have held the set's lock at fork time; the child keeps what was warned. */
void lg_opaque_after_fork(void) { lg_seen_after_fork(&warned); }

static bool first_warning(const char *name) { return lg_seen_add(&warned, lg_seen_hash(LG_SEEN_FNV_BASIS, name)) != 0; }

/* Inductor names a kernel after the aten ops it fuses (its default descriptive names). */
static bool compiled_loss(const char *name)
{
    return strncmp(name, "triton_", 7) == 0 && (strstr(name, "nll_loss") || strstr(name, "cross_entropy"));
}

static bool tensoriterator_gather(const char *name)
{
    return strstr(name, "34_scatter_gather_elementwise_kernelI") &&
           strstr(name, "36_cuda_scatter_gather_internal_kernelILb0E");
}

int lg_opaque_classify(const char *mangled)
{
    if (!mangled)
        return LG_KSTATE_UNWATCHED;
    if (tensoriterator_gather(mangled))
        return LG_KSTATE_GATHER;
    if (compiled_loss(mangled) && first_warning(mangled)) {
        char detail[900];
        snprintf(detail, sizeof detail,
                 "%s: a compiled loss (torch.compile / Inductor, launched through the driver API); its labels are "
                 "not checked: labelguard cannot locate its target buffer and n_classes, and a bad label trips the "
                 "kernel's `index out of bounds: 0 <= tmp < C` assert. ---> HINT: run that step uncompiled, or "
                 "wrap the loss in torch._dynamo.disable, to have it guarded",
                 mangled);
        lg_report_warning("unchecked_loss_kernel", detail);
    }
    return LG_KSTATE_UNWATCHED;
}

/* ------------------------------------------------------------------ the armed gather */

/* Per thread: the violation of the masked loss (NULL: not armed) and the launch count then. */
static pthread_key_t snapshot_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static LG_TLS lg_violation_t *armed;
static LG_TLS uint64_t armed_at;

static void make_key(void) { pthread_key_create(&snapshot_key, free); }

static uint64_t launches_so_far(void)
{
    lg_counter_slot_t *s = lg_counters_my_slot;
    return s ? __atomic_load_n((uint64_t *)&s->launches, __ATOMIC_RELAXED) : 0;
}

void lg_opaque_arm(const lg_violation_t *v)
{
    pthread_once(&key_once, make_key);
    lg_violation_t *snap = pthread_getspecific(snapshot_key);
    if (!snap) {
        snap = malloc(sizeof *snap);
        if (!snap)
            return;
        pthread_setspecific(snapshot_key, snap);
    }
    memcpy(snap, v, sizeof *snap);
    snap->model_line = NULL; /* the caller's string, gone by the time a gather reports the copy */
    armed = snap;
    armed_at = launches_so_far();
}

void lg_opaque_disarm(void) { armed = NULL; }

/* What the gather's violation says it is: PyTorch's TensorIterator gather. */
static const lg_spec_t gather_spec = {
    .name = "scatter_gather_elementwise_kernel (gather)",
    .family = "gather",
    .direction = LG_DIR_FORWARD,
    .source = "builtin:opaque.c",
};

void lg_opaque_gather(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info, lg_decision_t *d)
{
    lg_violation_t *v = armed;
    if (!v)
        return;
    armed = NULL;
    if (launches_so_far() - armed_at > ARM_WINDOW)
        return;
    char loss[128];
    snprintf(loss, sizeof loss, "%s", v->short_name);
    v->mangled = info->mangled;
    v->spec = &gather_spec;
    if (!info->mangled || !lg_demangle_short(info->mangled, v->short_name, sizeof v->short_name))
        snprintf(v->short_name, sizeof v->short_name, "_scatter_gather_elementwise_kernel");
    v->stream = l->stream;
    v->launch_seq = 0;
    bool block = l->can_block;
    v->outcome = block ? "blocked" : "launched";
    snprintf(v->note, sizeof v->note,
             "mask fell back to raise: the loss ran masked, but label_smoothing with weight= then gathers "
             "weight[target] with the original labels%s",
             block ? "; this gather would trip its device-side assert" : " (this launch cannot be skipped)");
    v->native.n = 0;
    if (lg_config_values.backtrace_native)
        lg_stack_capture(&v->native);
    v->python.n = 0;
    if (lg_config_values.backtrace_python)
        lg_pystack_capture(&v->python);
    lg_report_violation(v, !block);
    if (!block)
        return;
    char msg[1024], where[96] = "";
    if (v->verdict.n_samples > 0)
        snprintf(where, sizeof where, " (target[%lld] = %lld, outside [0, %lld))",
                 (long long)v->verdict.samples[0].index, (long long)v->verdict.samples[0].value,
                 (long long)v->target.n_classes);
    snprintf(msg, sizeof msg,
             "labelguard: mask cannot cover this step: %s ran on masked labels, but F.cross_entropy with weight= and "
             "label_smoothing= then gathers weight[target] with the original labels%s; that gather was blocked "
             "instead of hitting a device-side assert, the CUDA context is intact; details in %s",
             loss, where, lg_report_log_path()[0] ? lg_report_log_path() : "the log");
    lg_runtime_set_pending_error(LG_RAISE_ERROR, msg, false);
    d->kind = LG_VERDICT_SKIP;
    d->error = LG_RAISE_ERROR;
    (void)rt;
}
