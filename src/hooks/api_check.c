/* api_check.c: the check of one loss target outside any launch, for torch.compile
 * (labelguard_check_target, labelguard_compiled; include/labelguard.h).
 *
 * Inductor fuses log_softmax and NLL into one Triton kernel, launched through the driver by
 * Triton's own launcher: no hook of ours sees it, and its parameters name no target. So the
 * compiled graph calls the custom op labelguard::check_target on the target first
 * (python/labelguard/_compiled.py puts it into Inductor's NLL decompositions), and the op hands
 * the target's buffer here. The check is the one a watched ATen NLL launch gets (launch.c's
 * check_launch), on a launch of our own making whose one parameter is the label pointer:
 *   sync mode     validate (validate.c, GPU or host backend), then act.c on bad labels;
 *   async mode    validate_async's sanitized copy, the verdict collected at this thread's next
 *                 hook point, as for an ATen launch;
 *   graph capture (torch.compile mode="reduce-overhead") the check is captured, runs at every
 *                 replay, and the replay's verdict is delivered as for a captured ATen launch.
 * The op's output is a copy of the labels that the fused kernel reads instead of the target:
 * that data dependency orders the check before the kernel and keeps Inductor from dropping it,
 * and it is what lets mask work without writing into the caller's tensor (the copy is masked,
 * never the target). raise and hold block as for a launch, but the error is handed back to the
 * caller (the op raises it in Python) instead of being left pending for a CUDA call.
 * A CPU tensor (on_host) is scanned on the host, and a mask on it is made here.
 * The index ops Inductor lowers into its own kernels (embedding, x[idx], gather, the scatters...:
 * labelguard::check_index) come the same way, with their made-up kernels from api_index.c; the
 * model's line that called the op (c->site) goes into the report of a verdict made here, and with
 * the pending check's site (a copy) into that of one read later, in async mode or at a replay.
 *
 * Called from Python (ctypes) on the thread that runs the compiled graph, with the GIL held;
 * it starts the library like a hook does. Tested by tests/torch-fake/test_compiled.sh (real
 * torch on the test double: the op in a compiled CPU graph, and the op on the double's CUDA
 * memory, eagerly and in a captured graph) and on a GPU by tests/torch/compiled_gpu.py.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"
#include "labelguard.h"

#define N_LOSSES 4
#define KIND_DEFAULT 4 /* cudaMemcpyDefault: UVA says where each side is */

static const char *const loss_names[N_LOSSES] = {"nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
                                                 "nll_loss2d_backward"};
static char short_names[N_LOSSES][64];
static char mangled[N_LOSSES][96];
static lg_spec_t specs[N_LOSSES];
static lg_kernel_info_t infos[N_LOSSES];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void no_field(lg_field_t *f) { f->param = -1; }

/* One made-up kernel per loss: a single 8-byte parameter, the label pointer. act.c's mask
 * rewrites it like a real launch's, and the report names the loss and the op. */
static void build_tables(void)
{
    for (int i = 0; i < N_LOSSES; i++) {
        lg_spec_t *s = &specs[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", loss_names[i]);
        snprintf(s->family, sizeof s->family, "%s", i < 2 ? "nll_loss" : "nll_loss2d");
        snprintf(s->source, sizeof s->source, "torch.compile (labelguard::check_target)");
        s->direction = (i % 2) ? LG_DIR_BACKWARD : LG_DIR_FORWARD;
        s->n_params = 1;
        s->param_sizes[0] = 8;
        s->target = (lg_field_t){.param = 0, .offset = 0, .width = 8, .is_signed = false};
        s->count_kind = LG_COUNT_PARAM;
        no_field(&s->allow_negative);
        no_field(&s->weight);
        no_field(&s->size_average);
        no_field(&s->input);
        no_field(&s->count);
        no_field(&s->map_nelem);
        no_field(&s->blocks_per_sample);
        no_field(&s->n_classes);
        no_field(&s->ignore_index); /* the kernel's is a constant of the compiled code: never rewritten */
        snprintf(short_names[i], sizeof short_names[i], "%s (torch.compile)", loss_names[i]);
        snprintf(mangled[i], sizeof mangled[i], "labelguard::check_target(%s)", loss_names[i]);
        lg_api_index_publish(&infos[i], s, mangled[i], short_names[i]);
    }
}

/* Set once python/labelguard/_compiled.py has armed the check in this interpreter (its install()
 * asks labelguard_compiled(NULL) for the setting). */
static _Atomic bool python_armed;

/* Only what is true at the start: the op is installed (or the bootstrap will install it when
 * Inductor is imported), or it is not and nothing checks compiled losses. */
const char *lg_api_check_way(void)
{
    if (!lg_config_values.compiled)
        return "off: torch.compile'd losses run as Inductor made them, unchecked (LABELGUARD_COMPILED=off)";
    if (atomic_load(&python_armed) || lg_pyboot_expected())
        return "check_op: a torch.compile'd NLL/cross-entropy calls labelguard::check_target on its target before "
               "Inductor's fused kernel (no B x C log-probabilities kept), and embedding, x[idx], gather, index_select, "
               "index_add/copy/fill, the scatters, take, put, index_reduce, one_hot, max_unpool2d, multi_margin_loss "
               "and binary_cross_entropy call labelguard::check_index on their ids or probabilities before Inductor's "
               "kernels";
    switch (lg_pyboot_state()) {
    case LG_PYBOOT_NOT_PYTHON:
        return "none: not a Python interpreter (torch.compile'd losses are checked from Python)";
    case LG_PYBOOT_LATE:
        return "none: the check op is not installed in this interpreter: labelguard.enable() installs it, "
               "`labelguard attach` does not";
    default:
        return "none: this interpreter does not run labelguard's bootstrap (python -E, -I or -S, or no "
               "labelguard/_bootstrap next to the library): torch.compile'd losses are not checked; run the job "
               "under `labelguard run`, or call labelguard.enable() in it";
    }
}

int labelguard_compiled(const char *traced)
{
    if (!traced)
        atomic_store(&python_armed, true);
    if (!lg_config_values.compiled && traced && lg_start_ensure()) {
        char detail[512];
        char safe[128];
        snprintf(detail, sizeof detail,
                 "torch.compile traced %s: Inductor fuses it into a Triton kernel that no hook sees, so its labels "
                 "are not checked (LABELGUARD_COMPILED=off; unset it to check them)",
                 lg_text_safe(traced, safe, sizeof safe));
        lg_report_warning_once("unchecked_loss_kernel", detail);
    }
    return lg_config_values.compiled ? 1 : 0;
}

static int say(char *msg, size_t cap, const char *text)
{
    if (msg && cap)
        snprintf(msg, cap, "%s", text);
    return -2;
}

/* The labels (or the copy) into the op's output, on the loss's stream; a capture records it. */
static int copy_out(const lg_runtime_t *rt, const labelguard_target_check_t *c, uint64_t src)
{
    size_t bytes = (size_t)c->count * lg_scan_elem_size((lg_dtype_t)c->dtype);
    if (c->on_host) {
        memmove(c->out, (const void *)(uintptr_t)src, bytes);
        return 0;
    }
    if (!rt->memcpy_async)
        return -1;
    lg_runtime_in_library++;
    int rc = rt->memcpy_async(c->out, (const void *)(uintptr_t)src, bytes, KIND_DEFAULT, c->stream);
    lg_runtime_in_library--;
    return rc == 0 ? 0 : -1;
}

/* Unchecked: said once per loss and reason in the log, and the labels go through as they are. */
static int unchecked(const lg_runtime_t *rt, const labelguard_target_check_t *c, lg_kernel_info_t *info,
                     const char *what, int bit, const char *why, char *msg, size_t cap)
{
    char detail[900];
    snprintf(detail, sizeof detail, "%s: %s; the compiled op runs unchecked", info->mangled, why);
    if (!(atomic_fetch_or(&info->warned, (unsigned char)bit) & bit))
        lg_report_warning(what, detail);
    copy_out(rt, c, (uint64_t)(uintptr_t)c->target);
    return say(msg, cap, detail);
}

/* What act decided, as the op's result. */
static int finish(const lg_runtime_t *rt, const labelguard_target_check_t *c, const lg_decision_t *d,
                  int prev_pending, int prev_sync, char *msg, size_t cap)
{
    if (d->kind == LG_VERDICT_SKIP) {
        const char *text = lg_runtime_error_message(LG_RAISE_ERROR);
        if (msg && cap)
            snprintf(msg, cap, "%s", text ? text : "labelguard: bad labels; launch blocked");
        /* The op raises it: no CUDA call of the application may fail with it afterwards. */
        lg_runtime_pending = prev_pending;
        lg_runtime_pending_sync = prev_sync;
        return -1;
    }
    if (d->kind == LG_VERDICT_RUN_WITH) {
        uint64_t copy;
        memcpy(&copy, d->args_copy.args[0], sizeof copy);
        return copy_out(rt, c, copy) == 0 ? 1 : say(msg, cap, "the masked copy could not be copied out");
    }
    copy_out(rt, c, (uint64_t)(uintptr_t)c->target);
    return 0;
}

static int check_host(const lg_runtime_t *rt, const labelguard_target_check_t *c, lg_kernel_info_t *info,
                      const lg_target_t *t, void **args, char *msg, size_t cap)
{
    lg_verdict_t *v = malloc(sizeof *v);
    if (!v)
        return unchecked(rt, c, info, "validate_failed", LG_WARNED_VALIDATE, "out of memory for a verdict", msg, cap);
    lg_scan_host(t, c->target, lg_config_values.samples, v);
    lg_counters_count_check(true);
    int rc = 0;
    if (v->bad_count == 0) {
        copy_out(rt, c, (uint64_t)(uintptr_t)c->target);
    } else {
        int64_t value = 0;
        bool rewrite = false;
        lg_act_input_t in = {.when = LG_ACT_BEFORE,
                             .info = info,
                             .stream = NULL,
                             .args = args,
                             .target = t,
                             .verdict = v,
                             .model_line = c->site};
        bool maskable = info->spec->ids ? lg_act_mask_id(t, &value) && !info->spec->no_mask[0]
                                        : lg_act_mask_value(t, &value, &rewrite) && !rewrite;
        if (lg_config_values.action == LG_ACTION_MASK && maskable) {
            /* The host copy is the op's own output: the caller's tensor is never written. */
            memmove(c->out, c->target, (size_t)c->count * lg_scan_elem_size(t->dtype));
            lg_target_t o = *t;
            o.data = (uint64_t)(uintptr_t)c->out;
            lg_validate_host_replace(&o, c->out, value);
            in.copy_made = true;
        }
        int prev = lg_runtime_pending, prev_sync = lg_runtime_pending_sync;
        lg_decision_t d = {.kind = LG_VERDICT_RUN};
        lg_act(rt, &in, &d);
        if (in.copy_made && d.kind == LG_VERDICT_RUN)
            rc = 1;
        else
            rc = finish(rt, c, &d, prev, prev_sync, msg, cap);
    }
    free(v);
    return rc;
}

static int check_device(const lg_runtime_t *rt, const labelguard_target_check_t *c, lg_kernel_info_t *info,
                        const lg_target_t *t, void **args, char *msg, size_t cap)
{
    char why[512] = "";
    lg_capture_t capture = {.sanitize = lg_config_values.action != LG_ACTION_LOG};
    int status = lg_runtime_capture_status(rt, c->stream, &capture.id);
    if (status < 0) {
        lg_counters_count_check(false);
        return unchecked(rt, c, info, "capture_unchecked", LG_WARNED_CAPTURE,
                         "the legacy stream while another stream captures a CUDA graph", msg, cap);
    }
    if (status > 0 || (lg_config_values.mode == LG_MODE_ASYNC && lg_config_values.action != LG_ACTION_LOG)) {
        int64_t value = 0;
        bool rewrite = false;
        bool maskable = info->spec->ids ? lg_act_mask_id(t, &value) && !info->spec->no_mask[0]
                                        : lg_act_mask_value(t, &value, &rewrite) && !rewrite;
        if (maskable) {
            uint64_t copy = 0;
            lg_runtime_in_library++;
            /* The model's line travels with the site to the late verdict (a replay's too). */
            lg_site_t *site = lg_site_new_line(NULL, c->site);
            int rc = lg_validate_async(t, c->stream, value, lg_config_values.samples, info,
                                       status > 0 ? &capture : NULL, site, &copy, why, sizeof why);
            lg_site_drop(site);
            lg_runtime_in_library--;
            if (rc == 0) {
                lg_counters_count_check(true);
                return copy_out(rt, c, copy) == 0 ? 0 : say(msg, cap, "the checked labels could not be copied out");
            }
        } else if (!why[0]) {
            snprintf(why, sizeof why, "%s",
                     info->spec->ids ? "no padding_idx to sanitize ids with" : "no free label value to sanitize with");
        }
        if (status > 0) {
            lg_counters_count_check(false);
            char detail[600];
            snprintf(detail, sizeof detail, "cannot validate inside CUDA graph capture (%s)", why);
            return unchecked(rt, c, info, "capture_unchecked", LG_WARNED_CAPTURE, detail, msg, cap);
        }
        char detail[900];
        snprintf(detail, sizeof detail, "%s: %s; checked synchronously instead", info->mangled, why);
        lg_report_note_once("async_check_failed", detail);
    }
    lg_verdict_t *v = malloc(sizeof *v);
    if (!v) {
        lg_counters_count_check(false);
        return unchecked(rt, c, info, "validate_failed", LG_WARNED_VALIDATE, "out of memory for a verdict", msg, cap);
    }
    lg_runtime_in_library++;
    int rc = lg_validate_sync(t, c->stream, lg_config_values.samples, v, why, sizeof why);
    lg_runtime_in_library--;
    if (rc != 0) {
        free(v);
        lg_counters_count_check(false);
        char detail[600];
        snprintf(detail, sizeof detail, "labels not checked: %s", why);
        return unchecked(rt, c, info, "validate_failed", LG_WARNED_VALIDATE, detail, msg, cap);
    }
    lg_counters_count_check(true);
    if (v->bad_count == 0) {
        free(v);
        return copy_out(rt, c, (uint64_t)(uintptr_t)c->target) == 0 ? 0
                                                                    : say(msg, cap, "the labels could not be copied out");
    }
    lg_act_input_t in = {.when = LG_ACT_BEFORE,
                         .info = info,
                         .stream = c->stream,
                         .args = args,
                         .target = t,
                         .verdict = v,
                         .model_line = c->site};
    int prev = lg_runtime_pending, prev_sync = lg_runtime_pending_sync;
    lg_decision_t d = {.kind = LG_VERDICT_RUN};
    lg_act(rt, &in, &d);
    free(v);
    return finish(rt, c, &d, prev, prev_sync, msg, cap);
}

int labelguard_check_target(const labelguard_target_check_t *c, char *msg, size_t cap)
{
    if (msg && cap)
        msg[0] = '\0';
    lg_kernel_info_t *info = c ? lg_api_index_info(c->loss) : NULL;
    /* BCE's kinds take probabilities (float dtypes), every other kind integers */
    bool range = info && info->spec->range;
    bool dtype_ok = c && (range ? lg_scan_is_float((lg_dtype_t)c->dtype)
                                : c->dtype >= LG_DTYPE_INT64 && c->dtype <= LG_DTYPE_INT32);
    if (!c || (!info && (c->loss < 0 || c->loss >= N_LOSSES)) || !dtype_ok || c->count < 0 ||
        (c->count > 0 && (!c->target || !c->out)) || c->ndim < 0 || c->ndim > LG_MAX_TARGET_DIMS)
        return say(msg, cap, "labelguard_check_target: bad arguments (loss, dtype, count, buffers or ndim)");
    if (!lg_start_ensure())
        return say(msg, cap, "labelguard_check_target: called before labelguard's constructor ran");
    pthread_once(&tables_once, build_tables);
    if (!info)
        info = &infos[c->loss];
    const lg_runtime_t *rt = lg_runtime_get();
    if (c->count == 0)
        return 0;

    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.data = (uint64_t)(uintptr_t)c->target;
    t.dtype = (lg_dtype_t)c->dtype;
    t.count = c->count;
    t.n_classes = c->n_classes;
    t.ignore_index = c->ignore_index;
    t.has_ignore_index = 1;
    if (info->spec->ids) {
        /* ids: padding_idx (only an embedding's, -1 none) is no exemption, only mask's stand-in */
        t.has_ignore_index = c->ignore_index >= 0 && c->ignore_index < c->n_classes;
        t.allow_negative = info->spec->allow_negative_always;
    } else if (range) {
        /* BCE's probabilities: [0, 1], no class count, nothing ignored (decode.c's range rule) */
        t.has_ignore_index = 0;
        t.n_classes = 0;
        t.rule = LG_SCAN_RULE_UNIT;
        t.operand = lg_api_index_operand(c->loss);
    } else if (c->loss >= N_LOSSES) {
        /* A loss of api_index.c's (multi_margin_loss): class labels with no ignore_index */
        t.has_ignore_index = 0;
    }
    int64_t product = 1;
    for (int d = 0; d < c->ndim; d++)
        product *= c->sizes[d] > 0 ? c->sizes[d] : 0;
    if (c->ndim >= 2 && product == c->count) {
        /* The shape only names the labels in reports (target[0][3][7]); the buffer is dense. */
        t.ndim = c->ndim;
        int64_t stride = 1;
        for (int d = c->ndim - 1; d >= 0; d--) {
            t.sizes[d] = c->sizes[d];
            t.strides[d] = stride;
            stride *= c->sizes[d];
        }
    } else {
        t.ndim = 1;
        t.sizes[0] = c->count;
        t.strides[0] = 1;
    }
    uint64_t ptr = t.data;
    void *args[1] = {&ptr};

    /* labelguard_disable(): as for a launch, the labels go through unchecked. */
    if (atomic_load_explicit(&lg_launch_disabled, memory_order_relaxed)) {
        copy_out(rt, c, t.data);
        return 0;
    }
    /* This thread's outstanding async verdicts first, as at any hook point. */
    if (LG_UNLIKELY(lg_verdicts_pending()))
        lg_launch_poll(rt, LG_COLLECT_MINE, NULL);
    if (info->spec->direction == LG_DIR_BACKWARD)
        lg_opaque_disarm();
    int saved = lg_runtime_save_error(rt);
    int rc = c->on_host ? check_host(rt, c, info, &t, args, msg, cap) : check_device(rt, c, info, &t, args, msg, cap);
    lg_runtime_restore_error(rt, saved);
    return rc;
}
