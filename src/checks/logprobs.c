/* logprobs.c: the raw-logits check. NLLLoss expects log-probabilities, which never exceed 0;
 * a model whose output goes to nll_loss without log_softmax trains on garbage without any
 * error. For a watched NLL forward whose spec names its `input`, the first values of that
 * input (at most LG_LOGPROBS_MAX_VALUES, i.e. the first rows) are copied to the host and
 * checked; values above LG_LOGPROBS_TOLERANCE give one `nll_input_not_log_probs` warning per
 * kernel and Python call site (per kernel without Python), naming how many values, the max
 * and the fix. It never blocks and never changes the launch.
 *
 * Only float and double inputs (the first template argument of the kernel) are read: AMP runs
 * nll_loss in float32, and Half/BFloat16 NLL inputs are rare. Sync mode only (async mode never
 * synchronises a stream), never inside graph capture. LABELGUARD_LOGPROB_CHECK=0 turns it off.
 *
 * The copy and the wait run in relaxed capture mode, so that they never invalidate a global-mode
 * capture another thread has running.
 *
 * Called by launch.c on the launching thread, before the label check of a watched launch.
 * Tested by tests/e2e/test_logprobs.sh (raw logits, the clean control, one warning per call
 * site, the opt-out, another thread's global-mode capture left valid) and measured by `make bench` (bench/bench.py logprob_check).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks/checks.h"

/* log_softmax of float inputs can round to a hair above 0; raw logits are far above that. */
#define LG_LOGPROBS_TOLERANCE  1e-4
/* 16 KiB of float per launch: the first rows decide, and the cost stays that of one small copy. */
#define LG_LOGPROBS_MAX_VALUES 4096

/* The (kernel, call site) pairs warned about: one warning each, none once the set is full. */
static lg_seen_t sites = LG_SEEN_INIT;

/* A parent thread may have held the set's lock at fork time; the child keeps the sites seen. */
void lg_logprobs_after_fork(void) { lg_seen_after_fork(&sites); }

/* The Python line that called the loss: the innermost frame outside installed packages and the
 * standard library (as text.c shows it); "" without Python frames. */
static void call_site(char *site, size_t len)
{
    site[0] = 0;
    if (!lg_config_values.backtrace_python)
        return;
    lg_py_stack_t *py = malloc(sizeof *py);
    if (!py)
        return;
    py->n = 0;
    lg_pystack_capture(py);
    int k = lg_text_user_frame(py);
    if (k >= 0)
        snprintf(site, len, "%s:%d in %s", py->frames[k].file, py->frames[k].line, py->frames[k].function);
    free(py);
}

void lg_logprobs_check(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info, const lg_target_t *t)
{
    const lg_spec_t *s = info->spec;
    if (!lg_config_values.logprob_check || lg_config_values.mode != LG_MODE_SYNC || s->input.param < 0 ||
        s->direction != LG_DIR_FORWARD)
        return;
    if (!rt || !rt->memcpy_async || !rt->stream_synchronize || t->n_classes <= 0 || t->count <= 0)
        return;
    char c = lg_demangle_template_arg(info->mangled, 1);
    size_t esz = c == 'f' ? 4 : c == 'd' ? 8 : 0;
    int64_t ptr = 0;
    if (!esz || lg_decode_field(s, l->args, &s->input, &ptr) != 0 || ptr == 0)
        return;
    int64_t n = t->count > LG_LOGPROBS_MAX_VALUES / t->n_classes ? LG_LOGPROBS_MAX_VALUES : t->count * t->n_classes;
    if (n > LG_LOGPROBS_MAX_VALUES)
        n = LG_LOGPROBS_MAX_VALUES;
    void *buf = malloc((size_t)n * esz);
    if (!buf)
        return;
    lg_runtime_in_library++;
    int saved = lg_runtime_save_error(rt);
    /* A copy into pageable memory and a stream wait are "unsafe" calls while another thread
     * captures in global mode: in relaxed mode they leave that capture valid. */
    int mode = lg_runtime_relax_capture(rt);
    int rc =
        rt->memcpy_async(buf, (const void *)(uintptr_t)ptr, (size_t)n * esz, 2 /* cudaMemcpyDeviceToHost */, l->stream);
    if (rc == 0)
        rc = rt->stream_synchronize(l->stream);
    lg_runtime_restore_capture(rt, mode);
    lg_runtime_restore_error(rt, saved);
    lg_runtime_in_library--;
    int64_t above = 0;
    double max = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        double v = esz == 4 ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
        if (v > LG_LOGPROBS_TOLERANCE) {
            if (above == 0 || v > max)
                max = v;
            above++;
        }
    }
    free(buf);
    if (above == 0)
        return;
    char site[400];
    call_site(site, sizeof site);
    uint64_t key = lg_seen_hash(lg_seen_hash(LG_SEEN_FNV_BASIS, info->mangled ? info->mangled : "?"), site);
    if (lg_seen_add(&sites, key) != 1)
        return;
    char detail[1200];
    snprintf(detail, sizeof detail,
             "%s: %lld of the first %lld input values are above 0 (max %g)%s%s: log-probabilities never exceed 0, "
             "so nll_loss is given raw logits (model output without log_softmax) and trains on the wrong loss. "
             "---> HINT: apply log_softmax before nll_loss, or use CrossEntropyLoss (F.cross_entropy) on the logits",
             info->short_name, (long long)above, (long long)n, max, site[0] ? " at " : "", site);
    lg_report_warning("nll_input_not_log_probs", detail);
}
