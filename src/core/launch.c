/* launch.c: the core's entry: one launch through the stages, in order, each once:
 *   classify (classify.c, first launch of a kernel only) -> decode (decode.c) ->
 *   validate (validate.c: sync verdict, or async sanitized copy + verdict later) ->
 *   act (act.c, only when a label is bad).
 * A torch._assert_async kernel's condition is read instead (asserts.c), before the launch.
 * A watched NLL forward's input also gets the raw-logits check (logprobs.c, sync mode).
 * Plus the collection of async verdicts, and the report of one that was lost (verdict_lost;
 * the launch counters are counters.c's).
 *
 * Called by the hook layer (preload.c, cupti.c) on the launching thread with the runtime it
 * resolved, after it started the library; lg_launch_poll from every hook point (the calling
 * thread's own checks) and synchronizing call (also orphans of exited threads). An
 * unwatched kernel never gets here from preload.c (its fast path reads the cached state
 * itself); from CUPTI it costs the same lookup here.
 *
 * Tested end to end by tests/e2e/ and tests/fakecuda/ under the runtime test double, and on a
 * GPU by tests/gpu/; the report of a lost verdict by tests/unit/test_ring.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* ------------------------------------------------------------------ async verdicts */

/* A check whose verdict was never read (checked -1: verdicts.c could neither read its run nor
 * wait for it, or the process ended first). Its launch ran, and whether a label was bad is not
 * known: said each time (verdict_lost, naming the kernel), and under raise and hold the error
 * goes to this thread, the check's own, at its next check as a late violation's does; abort
 * aborts as after a violation. At exit (the queue closed) it is only said. */
static void report_lost(const lg_async_report_t *r)
{
    const lg_kernel_info_t *info = r->info;
    const char *name = !info ? "kernel" : info->short_name ? info->short_name : info->mangled;
    bool ending = atomic_load_explicit(&lg_verdicts_closed, memory_order_relaxed);
    char what[128];
    if (r->graph_id)
        snprintf(what, sizeof what, "replay %llu of CUDA graph %llu", (unsigned long long)r->replay,
                 (unsigned long long)r->graph_id);
    else
        snprintf(what, sizeof what, "an async check on stream %p", r->stream);
    bool raise = lg_config_values.action == LG_ACTION_RAISE || lg_config_values.action == LG_ACTION_HOLD;
    const char *then = ending                                       ? ""
                       : lg_config_values.action == LG_ACTION_ABORT ? "; the process aborts"
                       : raise                                      ? "; raised as the next CUDA error"
                                                                    : "";
    char detail[900];
    snprintf(detail, sizeof detail,
             "%s: the verdict of %s was lost before it was read (%s), so whether its labels were good is not known%s. "
             "Hint: %s",
             name, what,
             ending ? "the process ended before the device published it"
                    : "its stream failed or could not be waited for, or its graph no longer publishes it",
             then,
             ending ? "synchronize before exit to have every verdict read"
                    : "a CUDA error on that stream says why; a graph changed with cudaGraphExecUpdate or launched "
                      "inside a capture is not checked: capture it again");
    lg_report_warning_kernel("verdict_lost", name, detail);
    if (ending)
        return;
    if (raise) {
        char msg[1024];
        snprintf(msg, sizeof msg,
                 "labelguard: the label check of %s was lost before its verdict was read (%s): its labels are "
                 "unchecked, not known bad; details in %s",
                 name, what, lg_report_log_path()[0] ? lg_report_log_path() : "the log");
        lg_runtime_set_pending_error(LG_RAISE_ERROR, msg, true);
    } else if (lg_config_values.action == LG_ACTION_ABORT) {
        lg_counters_t c;
        lg_act_counters(&c);
        lg_report_summary(&c);
        abort();
    }
}

void lg_launch_poll(const lg_runtime_t *rt, lg_collect_t scope, void *stream)
{
    lg_async_report_t r;
    lg_runtime_in_library++;
    int saved = lg_runtime_save_error(rt);
    while (lg_verdicts_collect(&r, scope, stream)) {
        if (LG_UNLIKELY(r.verdict.checked < 0))
            report_lost(&r);
        if (r.verdict.checked < 0 || r.verdict.bad_count == 0) {
            lg_site_drop(r.site);
            free(r.msg);
            continue;
        }
        lg_act_input_t in = {.when = r.as_is ? LG_ACT_AFTER_AS_IS : LG_ACT_AFTER,
                             .info = r.info,
                             .stream = r.stream,
                             .args = NULL,
                             .target = &r.target,
                             .verdict = &r.verdict,
                             .graph_id = r.graph_id,
                             .replay = r.replay,
                             .exec = r.exec,
                             .site = r.site,
                             .assert_msg = r.msg,
                             .model_line = lg_site_line(r.site),
                             .found = scope == LG_COLLECT_MINE   ? "at a later CUDA call of the launching thread"
                                      : scope == LG_COLLECT_EXIT ? "at exit"
                                                                 : "at the next sync"};
        lg_act(rt, &in, NULL);
        lg_site_drop(r.site);
        free(r.msg);
    }
    lg_runtime_restore_error(rt, saved);
    lg_runtime_in_library--;
}

/* ------------------------------------------------------------------ the stages */

/* What the backends owe the log, said once: the GPU backend's first hand-over to the host
 * backend, and its late start in a process that had no context when labelguard started. */
static void report_fallback(void)
{
    const char *note = lg_validate_gpu_take_fallback_note();
    if (LG_UNLIKELY(note != NULL))
        lg_report_warning_once("scratch_fallback", note);
    note = lg_validate_gpu_take_backend_note();
    if (LG_UNLIKELY(note != NULL))
        lg_report_note_once("backend_gpu", note);
}

/* "<kernel>: " and fmt with why: the detail of a warning about one kernel. */
static const char *kernel_detail(char *out, size_t len, const lg_kernel_info_t *info, const char *fmt, const char *why)
{
    snprintf(out, len, "%s: ", info->mangled);
    size_t n = strlen(out);
    snprintf(out + n, len - n, fmt, why);
    return out;
}

/* A watched launch that runs unchecked: counted every time, said once per kernel and reason
 * (two kernels unchecked for the same reason are two warnings; the report caps the terminal's
 * copies of one kind, the log gets each). */
static void warn_unchecked(const char *what, int bit, lg_kernel_info_t *info, const char *fmt, const char *why)
{
    lg_counters_count_unchecked();
    if (atomic_fetch_or(&info->warned, (unsigned char)bit) & bit)
        return;
    char detail[900];
    lg_report_warning(what, kernel_detail(detail, sizeof detail, info, fmt, why));
}

/* What a sanitized copy of ids may hold in place of a bad one: padding_idx, and only where
 * nothing after the launch reads the caller's ids (spec no_mask empty: nn.EmbeddingBag's max
 * mode, whose backward reads the max_indices the forward wrote from the copy, padding left out).
 * No other row may stand in for a bad id, in any mode: autograd saves the caller's id tensor,
 * never our copy, and the backward kernels write gradient rows at those ids unchecked and
 * unwatched (embedding: embedding_backward_feature_kernel, or compute_grad_weight /
 * sum_and_scatter on ids sorted from them; x[idx]: index_put_with_sort_kernel /
 * indexing_backward_kernel with unsafe=True; gather: scatter_add; take: put; EmbeddingBag
 * sum/mean). A forward run on row 0 would let them write past the weight's gradient after the
 * forward's deferred verdict was read on another thread, or not yet read at all. Watching each
 * backward instead would mean following tensors the backward derives from the ids (the sort).
 * So a launch without such a value is checked synchronously outside capture (blocked before it
 * runs), and inside a capture, where no synchronous check exists, keeps its own ids: its own
 * assert stops a bad replay as it would without labelguard, and the captured check reports. */
static bool async_id(const lg_spec_t *spec, const lg_target_t *t, int64_t *value)
{
    return !spec->no_mask[0] && lg_act_mask_id(t, value);
}

/* Async mode and graph capture: the validator writes a sanitized copy that the kernel reads,
 * and the verdict is collected later (captured: at every replay). A range kernel's (BCE's)
 * check makes no copy: it only reports, after the launch ran on its own operands. Returns true when the
 * launch is taken care of (run on the copy, or left unchecked inside a capture); false to fall
 * back to a sync check. In log mode a captured launch keeps its own labels (it asserts, as it
 * would have) and its check only reports; so does a captured ids launch without padding_idx
 * (async_id). */
static bool validate_async(const lg_launch_t *l, lg_kernel_info_t *info, const lg_target_t *t,
                           const lg_capture_t *capture, lg_decision_t *d)
{
    int64_t value = 0;
    bool rewrite = false;
    char why[512] = "";
    lg_capture_t as_is;
    bool have_value, report_only = false;
    if (info->spec->ids) {
        have_value = async_id(info->spec, t, &value);
        if (!have_value && capture) {
            as_is = *capture;
            as_is.sanitize = false;
            capture = &as_is;
            have_value = true;
        }
    } else if (info->spec->range) {
        /* A probability has no stand-in (act.c's make_mask): the check only reports, and the
         * launch reads its own operands. The verdict comes after it: at the next check or sync
         * (async mode), or at each replay (captured: a validator kernel node, GPU backend only). */
        if (capture) {
            as_is = *capture;
            as_is.sanitize = false;
            capture = &as_is;
        }
        report_only = true;
        have_value = true;
    } else {
        have_value = lg_act_mask_value(t, &value, &rewrite);
    }
    if (have_value) {
        uint64_t copy = 0;
        lg_runtime_in_library++;
        /* Recorded here, on the launching thread: the verdict is read at a later call. */
        lg_site_t *site = lg_site_new(l->caller);
        int rc = lg_validate_async(t, l->stream, value, lg_config_values.samples, info, capture, site, &copy, why,
                                   sizeof why);
        lg_site_drop(site);
        lg_runtime_in_library--;
        report_fallback();
        if (rc == 0 && (report_only || (capture && !capture->sanitize))) {
            lg_counters_count_validated();
            return true;
        }
        if (rc == 0 && lg_act_run_on_copy(info->spec, l->args, copy, rewrite, value, d) == 0) {
            lg_counters_count_validated();
            return true;
        }
    }
    if (!capture) {
        /* A synchronous check instead: none is wanted without a sanitizing value, but a copy
         * that could not be made is said (in the log: async mode is then slower, not blind). */
        if (why[0]) {
            char detail[900];
            lg_report_note_once("async_check_failed",
                                kernel_detail(detail, sizeof detail, info, "%s; checked synchronously instead", why));
        }
        return false;
    }
    warn_unchecked("capture_unchecked", LG_WARNED_CAPTURE, info,
                   "cannot validate inside CUDA graph capture (%s); the launch runs unchecked",
                   why[0] ? why : "no ignore_index to sanitize with");
    return true;
}

/* A verdict read before its launch: counted as validated, and acted on when a label is bad. */
static void act_before(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, const lg_target_t *t,
                       const lg_verdict_t *verdict, lg_decision_t *d)
{
    lg_counters_count_validated();
    if (verdict->bad_count == 0)
        return;
    lg_act_input_t in = {.when = l->can_block ? LG_ACT_BEFORE : LG_ACT_BEFORE_UNSKIPPABLE,
                         .info = info,
                         .stream = l->stream,
                         .args = l->args,
                         .target = t,
                         .verdict = verdict};
    lg_act(rt, &in, d);
}

static void validate_sync(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, const lg_target_t *t,
                          lg_decision_t *d)
{
    lg_verdict_t *verdict = malloc(sizeof *verdict); /* 4 KiB of samples: not on the caller's stack */
    if (!verdict) {
        lg_counters_count_unchecked();
        lg_report_warning_once("validate_failed", "out of memory for a verdict; the launch runs unchecked");
        return;
    }
    char why[512] = "";
    lg_runtime_in_library++;
    int rc = lg_validate_sync(t, l->stream, lg_config_values.samples, verdict, why, sizeof why);
    lg_runtime_in_library--;
    report_fallback();
    if (rc != 0)
        warn_unchecked("validate_failed", LG_WARNED_VALIDATE, info, "labels not checked: %s", why);
    else
        act_before(rt, l, info, t, verdict, d);
    free(verdict);
}

/* torch._assert_async's condition (asserts.c). No copy can stand in for it (a true one would
 * let the op go on to write at its bad ids). In sync mode it is read before the launch, through
 * the thread's pinned slot with one wait, and a zero one blocks the launch before it asserts.
 * In async mode, which must not drain the stream (multinomial asserts at every sampling step),
 * it is copied out on the stream ahead of the kernel and its verdict read later, like the other
 * late verdicts, with the launch's site: the kernel reads it as it is and asserts as it would
 * have, and the report says where and what. Inside a capture the condition is only computed at
 * each replay: the launch is captured as it is, and asserts there as it would have. */
static void check_assert(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, lg_decision_t *d)
{
    unsigned long long id = 0;
    int status = lg_runtime_capture_status(rt, l->stream, &id);
    if (status != 0) {
        warn_unchecked(status > 0 ? "capture_unchecked" : "capture_query_failed",
                       status > 0 ? LG_WARNED_CAPTURE : LG_WARNED_CAPTURE_QUERY, info, "%s; the launch runs unchecked",
                       status > 0 ? "a torch._assert_async condition inside CUDA graph capture is computed at each "
                                    "replay, so it cannot be read before the launch"
                                  : "the stream's capture state cannot be asked");
        return;
    }
    lg_verdict_t *verdict = malloc(sizeof *verdict);
    if (!verdict) {
        lg_counters_count_unchecked();
        lg_report_warning_once("validate_failed", "out of memory for a verdict; the launch runs unchecked");
        return;
    }
    lg_target_t t;
    char why[512] = "";
    lg_assert_elem_t e;
    int64_t ptr = 0;
    unsigned char bytes[16] = {0};
    int rc = -1;
    if (lg_asserts_element(info->mangled, &e) != 0) {
        snprintf(why, sizeof why, "the condition's type is not one torch._assert_async's kernel takes");
    } else if (lg_decode_field(info->spec, l->args, &info->spec->target, &ptr) != 0 || ptr == 0) {
        snprintf(why, sizeof why, "the condition's pointer cannot be read from the launch");
    } else {
        lg_runtime_in_library++;
        if (lg_config_values.mode == LG_MODE_ASYNC) {
            /* The op's message names it in the report, as the native frames do in sync mode. */
            char msg[LG_ASSERT_MSG];
            lg_asserts_message(info->spec, l->args, msg, sizeof msg);
            lg_site_t *site = lg_site_new(l->caller);
            rc = lg_validate_defer_flag(rt, l->stream, (uint64_t)ptr, &e, info, site, msg, why, sizeof why);
            lg_site_drop(site);
            if (rc == 0) {
                lg_runtime_in_library--;
                lg_counters_count_validated();
                free(verdict);
                return;
            }
            lg_report_note_once("async_check_failed", why); /* read synchronously instead */
        }
        rc = lg_validate_read_bytes(rt, (uint64_t)ptr, (size_t)e.bytes, l->stream, bytes, why, sizeof why);
        lg_runtime_in_library--;
        if (rc == 0)
            lg_asserts_verdict(&e, (uint64_t)ptr, bytes, &t, verdict);
    }
    if (rc != 0)
        warn_unchecked("validate_failed", LG_WARNED_VALIDATE, info, "condition not read: %s", why);
    else
        act_before(rt, l, info, &t, verdict, d);
    free(verdict);
}

/* Decode, then the check the mode and the stream's capture state call for; once per index
 * tensor for a kernel that reads several (x[rows, cols]: decode.c), and per checked operand
 * of a range kernel (BCE's input, then its target), until one is blocked. */
static void check_one(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, int k, lg_decision_t *d);

static void check_launch(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, lg_decision_t *d)
{
    lg_counters_count_watched();
    if (info->spec->assert_flag) {
        check_assert(rt, l, info, d);
        return;
    }
    char why[512] = "";
    int n = lg_decode_targets(info->spec, l->args, why, sizeof why);
    if (n < 0) {
        warn_unchecked("decode_failed", LG_WARNED_DECODE, info, "%s; the launch runs unchecked", why);
        return;
    }
    for (int k = 0; k < n && d->kind == LG_VERDICT_RUN; k++)
        check_one(rt, l, info, k, d);
}

static void check_one(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, int k, lg_decision_t *d)
{
    lg_target_t t;
    char why[512] = "";
    if (lg_decode_nth(info->spec, info->dtype, l->args, l->grid, k, &t, why, sizeof why) != 0) {
        /* A TensorIterator gather whose closure is not the spec's still gets the guard that
         * follows a masked weighted loss (opaque.c), as before its closure could be read. */
        if (lg_opaque_classify(info->mangled) == LG_KSTATE_GATHER) {
            lg_opaque_gather(rt, l, info, d);
            return;
        }
        warn_unchecked("decode_failed", LG_WARNED_DECODE, info, "%s; the launch runs unchecked", why);
        return;
    }
    if (t.count == 0)
        return;
    lg_capture_t cap = {.sanitize = lg_config_values.action != LG_ACTION_LOG};
    int status = lg_runtime_capture_status(rt, l->stream, &cap.id);
    if (status < 0) {
        /* Without the stream's capture state no call of ours on it is safe: on the legacy
         * stream while a blocking stream captures (the launch itself then fails with
         * cudaErrorStreamCaptureImplicit) any would invalidate the application's capture. */
        char why[256];
        int code = (int)cap.id;
        const char *text = rt->get_error_string ? rt->get_error_string(code) : NULL;
        if (code == 906 /* cudaErrorStreamCaptureImplicit */)
            snprintf(why, sizeof why, "the legacy default stream is used while a blocking stream captures");
        else
            snprintf(why, sizeof why, "cudaStreamIsCapturing failed: %s", text ? text : "unknown error");
        char reason[320];
        snprintf(reason, sizeof reason, "%s (CUDA error %d)", why, code);
        warn_unchecked("capture_query_failed", LG_WARNED_CAPTURE_QUERY, info,
                       "the stream's capture state cannot be asked: %s; the launch runs unchecked", reason);
        return;
    }
    if (status > 0) {
        validate_async(l, info, &t, &cap, d);
        return;
    }
    /* A sanitized copy replaces index tensor 0's pointer only (decode.c's rewrite); a range
     * kernel's operands get no copy, so each is checked asynchronously. */
    if ((k == 0 || info->spec->range) && lg_config_values.mode == LG_MODE_ASYNC &&
        lg_config_values.action != LG_ACTION_LOG && validate_async(l, info, &t, NULL, d))
        return;
    if (info->spec->input.param >= 0)
        lg_logprobs_check(rt, l, info, &t);
    validate_sync(rt, l, info, &t, d);
}

/* A launch past the fast path: collect what is outstanding, classify, check. */
static void decide_slow(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info, int state,
                        lg_decision_t *d)
{
    if (LG_UNLIKELY(lg_verdicts_due()))
        lg_launch_poll(rt, LG_COLLECT_MINE, NULL);
    if (state == LG_KSTATE_UNKNOWN) {
        info = lg_classify(rt, l, info);
        state = info ? atomic_load_explicit(&info->state, memory_order_acquire) : LG_KSTATE_UNKNOWN;
    }
    if (state == LG_KSTATE_GATHER) {
        lg_opaque_gather(rt, l, info, d);
        return;
    }
    if (state != LG_KSTATE_WATCHED)
        return;
    /* labelguard_disable(): a watched launch runs as it is; read only here, past the fast path. */
    if (LG_UNLIKELY(atomic_load_explicit(&lg_launch_disabled, memory_order_relaxed)))
        return;
    if (info->spec->direction == LG_DIR_BACKWARD)
        lg_opaque_disarm();
    /* Nothing of ours may reach the application's error state, nor take its own error. */
    int saved = lg_runtime_save_error(rt);
    check_launch(rt, l, info, d);
    lg_runtime_restore_error(rt, saved);
}

_Atomic int lg_launch_disabled;

void lg_launch_decide(const lg_runtime_t *rt, const lg_launch_t *l, lg_decision_t *d)
{
    d->kind = LG_VERDICT_RUN;
    lg_counters_count_launch();
    static _Atomic int exit_armed;
    if (LG_UNLIKELY(!atomic_load_explicit(&exit_armed, memory_order_relaxed))) {
        atomic_store_explicit(&exit_armed, 1, memory_order_relaxed);
        lg_start_arm_exit();
    }
    lg_kernel_info_t *info = lg_names_info(l->func);
    int state = info ? atomic_load_explicit(&info->state, memory_order_acquire) : LG_KSTATE_UNKNOWN;
    if (LG_LIKELY(state == LG_KSTATE_UNWATCHED || state == LG_KSTATE_BAD_LAYOUT) && !lg_verdicts_due())
        return;
    /* The checks read the labels through the launching caller's own runtime. */
    const lg_runtime_t *prev = lg_validate_use_runtime(rt);
    decide_slow(rt, l, info, state, d);
    lg_validate_use_runtime(prev);
}
