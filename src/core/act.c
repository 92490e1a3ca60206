/* act.c: the one place where LABELGUARD_ACTION becomes an outcome. A launch with bad labels
 * gets a violation record (cause, stacks, device), is reported, and then, by one policy table
 * (lg_act_policy) that is the same in sync and async mode:
 *   raise  blocked, the framework sees LG_RAISE_ERROR with our message at its next check;
 *   hold   the thread waits for SIGUSR1 (hold.c), then as raise;
 *   mask   the kernel runs on a copy whose bad labels are ignore_index (bad ids: padding_idx);
 *          no free value or no copy: raise where the launch can be skipped, else it runs as it
 *          is; a masked loss with class weights and the mean arms the gather guard (opaque.c);
 *   log    the launch runs as it would have;
 *   abort  everything written and flushed (summary included), then abort().
 * What differs between the modes is only when the verdict is known: before the launch (sync;
 * CUPTI-only launches cannot be skipped, so raise and hold become mask there) or after it ran
 * on the sanitized copy (async, LG_ACT_AFTER: the outcome is "masked", raise and hold deliver
 * the error at the next check, since nothing is left to block or hold), or after a captured
 * launch that read its own labels (LG_ACT_AFTER_AS_IS: "launched", the error raised all the same).
 *
 * Called by launch.c on the launching thread: before the launch (sync), or at that thread's
 * hook point or synchronizing call where the verdict was collected (async, graph replays: the
 * thread that made the launch or called cudaGraphLaunch; an exited thread's, by whichever thread
 * synchronizes its stream). Tested directly, without LD_PRELOAD, by
 * tests/unit/test_act.c (the policy table, the mask fallbacks, the pending error).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static _Atomic uint64_t violations, launch_seq;

static _Atomic bool launched_bad;
bool lg_act_launched_bad(void) { return atomic_load(&launched_bad); }

uint64_t lg_act_violations(void) { return atomic_load(&violations); }

void lg_act_counters(lg_counters_t *out)
{
    lg_counters_read(out);
    out->violations = atomic_load(&violations);
    out->host_fallbacks = lg_validate_gpu_host_fallbacks();
    out->suppressed_duplicates = lg_pairs_suppressed();
    out->validate_ns_total = lg_validate_ns_total(); /* validate.c times every call it serves */
}

const char *lg_act_outcome_name(lg_outcome_t o)
{
    static const char *const names[] = {"blocked", "held", "masked", "launched", "aborted"};
    return (unsigned)o < sizeof names / sizeof *names ? names[o] : "launched";
}

bool lg_act_mask_value(const lg_target_t *t, int64_t *value, bool *rewrite)
{
    *rewrite = false;
    if (!t->has_ignore_index)
        return false;
    if (t->dtype != LG_DTYPE_UINT8 || (t->ignore_index >= 0 && t->ignore_index <= 255)) {
        *value = t->ignore_index;
        return true;
    }
    if (t->n_classes <= 255) {
        /* A value the kernel would reject is free: nothing valid uses it. */
        *value = 255;
        *rewrite = true;
        return true;
    }
    return false;
}

bool lg_act_mask_id(const lg_target_t *t, int64_t *value)
{
    if (!t->has_ignore_index || t->ignore_index < 0 || t->ignore_index >= t->n_classes)
        return false;
    *value = t->ignore_index;
    return true;
}

int lg_act_run_on_copy(const lg_spec_t *spec, void **args, uint64_t copy, bool rewrite, int64_t value, lg_decision_t *d)
{
    if (!copy || !d || lg_decode_rewrite(spec, args, copy, rewrite, value, &d->args_copy) != 0)
        return -1;
    d->kind = LG_VERDICT_RUN_WITH;
    return 0;
}

#define ASYNC_NOTE "async check (async mode or a CUDA graph replay): the launch ran on a sanitized copy; the verdict was read after it"

lg_act_plan_t lg_act_policy(lg_action_t action, lg_act_when_t when, lg_mask_state_t mask)
{
    lg_act_plan_t p = {.outcome = LG_OUTCOME_LAUNCHED};
    if (action == LG_ACTION_ABORT) {
        p.outcome = LG_OUTCOME_ABORTED;
        p.flush = p.abort = true;
        p.note = when == LG_ACT_AFTER ? ASYNC_NOTE : NULL;
        return p;
    }
    if (when == LG_ACT_AFTER_AS_IS && action != LG_ACTION_LOG) {
        /* A captured launch that kept its own ids (launch.c's async_id: no row may stand in
         * for a bad id that a backward writes at): it read the bad id itself, so its own
         * assert, if it has one, stopped the replay as without labelguard. The error is still
         * raised, with the ids, for a kernel that has none. */
        p.outcome = LG_OUTCOME_LAUNCHED;
        p.flush = true;
        p.raise = true;
        p.note = "the launch, captured into a CUDA graph, read its own ids (a backward writes at them: no id may "
                 "stand in); its device assert stops it as without labelguard; this replay's verdict, read after it "
                 "ran, is raised as the next CUDA error";
        return p;
    }
    if (when >= LG_ACT_AFTER && action == LG_ACTION_LOG) {
        /* A graph replay in log mode: its kernel read the labels as they were. */
        p.outcome = LG_OUTCOME_LAUNCHED;
        p.flush = true;
        p.note = "the launch was captured into a CUDA graph; this replay's verdict was read after it ran";
        return p;
    }
    if (when == LG_ACT_AFTER) {
        p.outcome = LG_OUTCOME_MASKED;
        p.flush = action != LG_ACTION_RAISE;
        p.raise = action == LG_ACTION_RAISE || action == LG_ACTION_HOLD;
        p.note = action == LG_ACTION_RAISE  ? ASYNC_NOTE " and is raised as the next CUDA error"
                 : action == LG_ACTION_HOLD ? ASYNC_NOTE ", too late to hold it: raised as the next CUDA error"
                                            : ASYNC_NOTE;
        return p;
    }
    bool can_block = when == LG_ACT_BEFORE;
    if (action == LG_ACTION_LOG) {
        p.flush = true;
        return p;
    }
    if (action == LG_ACTION_RAISE && can_block) {
        p.outcome = LG_OUTCOME_BLOCKED;
        p.skip = p.raise = true;
        return p;
    }
    if (action == LG_ACTION_HOLD && can_block) {
        p.outcome = LG_OUTCOME_HELD;
        p.flush = p.hold = p.skip = p.raise = true;
        return p;
    }
    /* mask, or raise/hold of a launch only CUPTI saw, which cannot be skipped */
    if (action == LG_ACTION_RAISE)
        p.note = "raise fell back to mask: only CUPTI saw this launch, which cannot be skipped";
    else if (action == LG_ACTION_HOLD)
        p.note = "hold fell back to mask: only CUPTI saw this launch";
    p.outcome = LG_OUTCOME_MASKED;
    if (mask == LG_MASK_UNTRIED)
        p.try_mask = true;
    if (mask != LG_MASK_FAILED)
        return p;
    if (can_block) {
        p.outcome = LG_OUTCOME_BLOCKED;
        p.skip = p.raise = true;
        p.note = "mask fell back to raise: %s";
    } else {
        p.outcome = LG_OUTCOME_LAUNCHED;
        p.flush = true;
        p.note = "mask failed (%s) and the launch cannot be skipped: it runs as is";
    }
    return p;
}

/* ------------------------------------------------------------------ the violation record */

/* A violation record is ~15 KiB (samples, stacks): too big for a launching thread's stack or
 * for TLS in every thread of the host. Violations are rare, so the heap is fine; if it fails,
 * one static record serialised by a mutex still lets the report go out. */
static lg_violation_t fallback_violation;
static pthread_mutex_t fallback_lock = PTHREAD_MUTEX_INITIALIZER;

/* A parent thread may have been reporting through the static record at fork time. */
void lg_act_after_fork(void)
{
    pthread_mutex_init(&fallback_lock, NULL);
    lg_pairs_after_fork();
}

static lg_violation_t *violation_acquire(void)
{
    lg_violation_t *v = malloc(sizeof *v);
    if (v)
        return v;
    pthread_mutex_lock(&fallback_lock);
    return &fallback_violation;
}

static void violation_release(lg_violation_t *v)
{
    if (v == &fallback_violation)
        pthread_mutex_unlock(&fallback_lock);
    else
        free(v);
}

/* What cause.c needs to tell what a launch's ids index: whether the call site is an embedding
 * (torch/nn/functional.py's embedding(), under nn.Embedding too), and for a scatter of one
 * scalar (its calculator has no source operand) whether it writes a one-hot. A verdict that
 * comes after its launch ran (async, graph replay) has no arguments left: the family decides. */
static void ids_facts(const lg_act_input_t *in, const lg_py_stack_t *py, lg_ids_facts_t *f)
{
    memset(f, 0, sizeof *f);
    int np = py->n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : py->n;
    f->python = np > 0;
    for (int i = 0; i < np && !f->embedding_call; i++) {
        const char *file = py->frames[i].file;
        size_t len = strlen(file), tail = strlen("/torch/nn/functional.py");
        f->embedding_call = strcmp(py->frames[i].function, "embedding") == 0 && len >= tail &&
                            strcmp(file + len - tail, "/torch/nn/functional.py") == 0;
    }
    const lg_spec_t *s = in->info->spec;
    if (in->args && s->calc.width != 0 && s->calc_nargs == 2 && s->calc_arg == 1 &&
        (lg_family_flags(s->family) & LG_FAMILY_NODE_IDS)) {
        int64_t sizes[32], strides[32];
        int dims = lg_decode_calc_operand(s, in->args, 0, sizes, strides, 32);
        f->one_per_row = dims >= 0 && lg_cause_one_per_row(sizes, strides, dims, in->target->n_classes);
    }
}

/* A torch._assert_async condition that is false: the op that asserted, from the native stack
 * (symbolized here, so that the error PyTorch raises names it too), and what its check means.
 * Only the condition was read: the text claims nothing about the values behind it. */
static void assert_cause(lg_violation_t *v, const char *msg)
{
    char (*lines)[256] = v->native.n > 0 ? malloc(sizeof(char[LG_MAX_FRAMES][256])) : NULL;
    int n = lines ? lg_stack_symbolize(&v->native, lines, LG_MAX_FRAMES) : 0;
    lg_asserts_op(lines, n, v->op, sizeof v->op);
    free(lines);
    v->cause = LG_CAUSE_OTHER;
    /* an op whose message asserts.c knows (torch.multinomial) has its own cause and sentence */
    const char *known = lg_asserts_meaning(msg, v->op, sizeof v->op, v->cause_text, sizeof v->cause_text);
    if (known) {
        v->cause = lg_cause_by_name(known);
        return;
    }
    if (strstr(v->op, "index_put"))
        snprintf(v->cause_text, sizeof v->cause_text,
                 "%s checks on the device that its indices are in range for their dimensions, and that check "
                 "is false: an index is out of range (only the check was read, not the indices)",
                 v->op);
    else if (strcmp(v->op, "torch._assert_async") == 0 && msg[0])
        snprintf(v->cause_text, sizeof v->cause_text,
                 "a torch._assert_async condition is false (zero), with the message \"%.150s\"; only the condition "
                 "was read",
                 msg);
    else if (strcmp(v->op, "torch._assert_async") == 0)
        snprintf(v->cause_text, sizeof v->cause_text,
                 "the condition given to torch._assert_async is false (zero); only the condition was read");
    else
        snprintf(v->cause_text, sizeof v->cause_text,
                 "%s checks its arguments on the device with torch._assert_async, and that check is false "
                 "(only the check was read)",
                 v->op);
}

static void fill_violation(const lg_runtime_t *rt, lg_violation_t *v, const lg_act_input_t *in)
{
    const lg_kernel_info_t *info = in->info;
    memset(v, 0, offsetof(lg_violation_t, verdict));
    v->mangled = info->mangled;
    v->spec = info->spec;
    snprintf(v->short_name, sizeof v->short_name, "%s", info->short_name ? info->short_name : "");
    v->launch_seq = atomic_fetch_add(&launch_seq, 1) + 1;
    v->stream = in->stream;
    v->graph_id = in->graph_id;
    v->replay = in->replay;
    v->exec = in->exec;
    if (rt && rt->get_device) {
        lg_runtime_in_library++;
        rt->get_device(&v->device);
        lg_runtime_in_library--;
    }
    v->target = *in->target;
    memcpy(&v->verdict, in->verdict, sizeof *in->verdict);
    v->action = lg_config_values.action;
    v->outcome = "launched";
    v->note[0] = '\0';
    v->op[0] = '\0';
    /* A late verdict's stacks of this moment say where it was read; the launch's own come from
     * its recorded site (none recorded: only where it was read is known). */
    v->model_line = in->model_line && in->model_line[0] ? in->model_line : NULL;
    v->late = in->when >= LG_ACT_AFTER;
    v->found = in->found ? in->found : "later";
    v->native.n = v->read_native.n = 0;
    v->python.n = v->read_python.n = 0;
    v->python.from_main_thread = v->read_python.from_main_thread = false;
    if (in->site)
        lg_site_resolve(in->site, &v->native, &v->python);
    if (lg_config_values.backtrace_native)
        lg_stack_capture(v->late ? &v->read_native : &v->native);
    if (lg_config_values.backtrace_python)
        lg_pystack_capture(v->late ? &v->read_python : &v->python);
    /* The cause after the stacks: what ids index is read off the call site as well as the launch.
     * spec is NULL only when the kernel's image was unloaded before its async verdict came. */
    v->indexed = LG_INDEXED_VOCAB;
    if (info->spec && info->spec->assert_flag) {
        /* The op's message: from the launch, or kept with a late verdict (launch.c). */
        char msg[LG_ASSERT_MSG] = "";
        if (in->args)
            lg_asserts_message(info->spec, in->args, msg, sizeof msg);
        else if (in->assert_msg)
            snprintf(msg, sizeof msg, "%s", in->assert_msg);
        assert_cause(v, msg);
    } else if (lg_scan_is_float(in->target->dtype)) {
        v->cause = lg_cause_classify_range(in->target, in->verdict);
        lg_cause_explain_family_range(v->cause, in->target, in->verdict, info->spec ? info->spec->family : NULL,
                                      v->cause_text, sizeof v->cause_text);
    } else if (info->spec && info->spec->ids) {
        lg_ids_facts_t facts;
        ids_facts(in, &v->python, &facts);
        v->indexed = lg_cause_indexed(info->spec->family, &facts);
        v->cause = lg_cause_classify_indexed(v->indexed, in->target, in->verdict);
        lg_cause_explain_indexed(v->cause, v->indexed, in->target, in->verdict, v->cause_text, sizeof v->cause_text);
    } else {
        bool dense = in->target->ndim >= 2 || (info->spec && (lg_family_flags(info->spec->family) & LG_FAMILY_DENSE));
        v->cause = lg_cause_classify(in->target, in->verdict, dense);
        lg_cause_explain(v->cause, in->target, in->verdict, v->cause_text, sizeof v->cause_text);
    }
}

/* Makes the masked copy and the rewritten arguments. Returns false with why. */
static bool make_mask(const lg_act_input_t *in, lg_decision_t *d, bool *rewrite, int64_t *value, char *why,
                      size_t why_len)
{
    const lg_spec_t *spec = in->info->spec;
    if (spec && spec->assert_flag) {
        snprintf(why, why_len, "a torch._assert_async condition has no stand-in: a true one would let the op go on "
                               "with the arguments its check rejected");
        return false;
    }
    if (spec && spec->ids) {
        /* A bad id can only become padding_idx, which the kernel skips; a kernel without one
         * (index_select, the vectorized gather) has no id that leaves the output unchanged. */
        if (!lg_act_mask_id(in->target, value)) {
            snprintf(why, why_len, "%s",
                     in->target->has_ignore_index ? "padding_idx is not a valid row, so no id can replace a bad one"
                     : spec->ignore_index.param >= 0
                         ? "the op was built without a padding_idx (padding_idx=None), so no id can replace a bad one"
                     : spec->no_mask[0] ? spec->no_mask
                     : strcmp(spec->family, "index_add") == 0
                         ? "this kernel has no padding_idx to put in place of a bad id (index_add_ and "
                           "index_reduce_ have none)"
                         : "this kernel has no padding_idx to put in place of a bad id (an embedding's "
                           "forward runs as index_select, which has none)");
            return false;
        }
        if (spec->no_mask[0]) { /* what reads the caller's ids later would still fault */
            snprintf(why, why_len, "padding_idx %lld could replace the bad ids, but %s", (long long)*value,
                     spec->no_mask);
            return false;
        }
        *rewrite = false;
        lg_runtime_in_library++;
        uint64_t copy = lg_validate_masked_copy(in->target, in->stream, *value, why, why_len);
        lg_runtime_in_library--;
        return lg_act_run_on_copy(spec, in->args, copy, false, *value, d) == 0;
    }
    if (lg_scan_is_float(in->target->dtype)) {
        /* Any value put in place of a bad probability still adds its own loss and gradient:
         * unlike a label's ignore_index, no probability leaves the loss unchanged. */
        snprintf(why, why_len, "%s",
                 spec && spec->no_mask[0] ? spec->no_mask /* the spec says why (multinomial) */
                                          : "binary_cross_entropy has no ignore value for a probability: any value "
                                            "put in place of a bad one would still add its loss and gradient");
        return false;
    }
    if (!lg_act_mask_value(in->target, value, rewrite)) {
        snprintf(why, why_len, "%s",
                 in->target->has_ignore_index ? "no free label value for this dtype"
                                              : "this kernel has no ignore_index");
        return false;
    }
    lg_runtime_in_library++;
    uint64_t copy = lg_validate_masked_copy(in->target, in->stream, *value, why, why_len);
    lg_runtime_in_library--;
    return lg_act_run_on_copy(in->info->spec, in->args, copy, *rewrite, *value, d) == 0;
}

/* An NLL forward with class weights and the mean reduction: what F.cross_entropy's
 * label-smoothing path follows with weight.gather(0, target) (opaque.c). */
static bool weighted_mean(const lg_act_input_t *in)
{
    const lg_spec_t *s = in->info->spec;
    int64_t w = 0, mean = 1;
    if (!s || !in->args || s->weight.param < 0 || lg_decode_field(s, in->args, &s->weight, &w) != 0 || w == 0)
        return false;
    if (s->size_average.param >= 0 && lg_decode_field(s, in->args, &s->size_average, &mean) != 0)
        return false;
    return mean != 0;
}

/* A range check's verdict read after its launch (async mode, or a graph replay): no probability
 * can stand in for a bad one, so the launch ran on its operands as they were; the note says the
 * verdict is late, and what follows. */
static void range_late_note(lg_violation_t *v, const lg_act_input_t *in, const lg_act_plan_t *p)
{
    snprintf(v->note, sizeof v->note,
             "verdict late: %s on its probabilities as they were (none can stand in for a bad one; its device-side "
             "assert may fire), and this verdict was read after it ran%s",
             in->graph_id ? "the captured launch replayed" : "the launch (async mode) ran",
             p->abort   ? "; the process aborts"
             : p->raise ? "; raised as the next CUDA error"
                        : "");
}

/* The other half of a bad batch already reported (pairs.c): no report and no error. A launch
 * not run yet still must not read the bad labels: it runs on a masked copy where one can be
 * made, and is acted on as a violation of its own where none can (false). */
static bool act_duplicate(const lg_act_input_t *in, lg_decision_t *d)
{
    if (in->when >= LG_ACT_AFTER || lg_config_values.action == LG_ACTION_LOG)
        return true; /* it ran already (on the copy, or as is), or runs as it would have */
    bool rewrite = false;
    int64_t value = 0;
    char why[256];
    return in->copy_made || make_mask(in, d, &rewrite, &value, why, sizeof why);
}

void lg_act(const lg_runtime_t *rt, const lg_act_input_t *in, lg_decision_t *d)
{
    if (lg_pairs_duplicate(in->info->spec, in->target, in->verdict) && act_duplicate(in, d)) {
        lg_pairs_count_suppressed();
        return;
    }
    lg_violation_t *v = violation_acquire();
    atomic_fetch_add(&violations, 1);
    fill_violation(rt, v, in);

    lg_act_plan_t p = lg_act_policy(lg_config_values.action, in->when, LG_MASK_UNTRIED);
    char why[256] = "";
    if (p.try_mask) {
        bool rewrite = false;
        int64_t value = 0;
        bool ok = in->copy_made || make_mask(in, d, &rewrite, &value, why, sizeof why);
        p = lg_act_policy(lg_config_values.action, in->when, ok ? LG_MASK_DONE : LG_MASK_FAILED);
        if (ok && rewrite && !p.note)
            snprintf(v->note, sizeof v->note,
                     "uint8 target: bad labels set to %lld and ignore_index rewritten to match", (long long)value);
    }
    if (p.note)
        snprintf(v->note, sizeof v->note, p.note, why);
    if (in->when == LG_ACT_AFTER_AS_IS && lg_scan_is_float(in->target->dtype))
        range_late_note(v, in, &p);
    if (in->when == LG_ACT_AFTER_AS_IS && in->info->spec && in->info->spec->assert_flag)
        snprintf(v->note, sizeof v->note,
                 "async mode: the condition was copied out ahead of its kernel without waiting for the stream, and "
                 "read after: the kernel read it as it was and asserted, as without labelguard "
                 "(LABELGUARD_MODE=sync blocks it, at one wait per launch)");
    v->outcome = lg_act_outcome_name(p.outcome);
    if (p.outcome == LG_OUTCOME_LAUNCHED)
        atomic_store(&launched_bad, true);
    if (p.outcome == LG_OUTCOME_MASKED && weighted_mean(in)) {
        lg_opaque_arm(v);
        if (!v->note[0])
            snprintf(v->note, sizeof v->note,
                     "class weights with a mean: if label_smoothing follows, its gather of weight[target] (with the "
                     "original labels) is blocked as with raise");
    }

    lg_report_violation(v, p.flush);
    if (p.hold)
        lg_hold_thread(v->short_name, &v->verdict);
    if (p.raise) {
        char msg[1024];
        lg_report_violation_message(v, msg, sizeof msg);
        lg_runtime_set_pending_error(LG_RAISE_ERROR, msg, in->when >= LG_ACT_AFTER);
    }
    if (p.skip && d) {
        d->kind = LG_VERDICT_SKIP;
        d->error = LG_RAISE_ERROR;
    }
    if (p.abort) {
        lg_counters_t c;
        lg_act_counters(&c);
        lg_report_summary(&c);
        abort();
    }
    violation_release(v);
}
