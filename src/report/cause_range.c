/* cause_range.c: the likely cause of bad float targets, and its words. BCE's probability input
 * (target_kind=range, valid in [0, 1]) and torch.bernoulli's p have two: values outside [0, 1]
 * are logits given without a sigmoid; NaN means the model's output diverged before. The words
 * name the op (family bernoulli, else binary_cross_entropy). torch.multinomial's weights
 * (target_kind=probs) have three, the classic failures of sampling in text generation: NaN or inf
 * from half-precision logits that overflowed, a row masked to all zeros by top-k/top-p, and
 * logits given where probabilities go. cause.c keeps the names and the fixes of every cause.
 *
 * Called by act.c (once per violation) and text.c (the raise message), on the reporting thread;
 * pure functions, no state, no lock. Tested by tests/unit/test_cause.c.
 */
#include <stdio.h>
#include <inttypes.h>
#include <string.h>

#include "report/report.h"

const char *lg_cause_range_target_fix(void)
{
    return "binary_cross_entropy's target must hold probabilities in [0, 1], never NaN: check how the targets are "
           "built (soft labels: clamp them to [0, 1])";
}

static bool bernoulli(const char *family) { return family && !strcmp(family, "bernoulli"); }

/* A range verdict's smallest and largest bad value, as the report writes floats. */
static void span(const lg_target_t *t, const lg_verdict_t *v, char *lo, char *hi, size_t len)
{
    bool single = t->dtype != LG_DTYPE_FLOAT64;
    lg_json_format_float(lo, len, lg_scan_float(t->dtype, v->min), single);
    lg_json_format_float(hi, len, lg_scan_float(t->dtype, v->max), single);
}

const char *lg_cause_range_fix(lg_cause_t c, const char *family)
{
    if (bernoulli(family) && c == LG_CAUSE_NO_SIGMOID)
        return "apply torch.sigmoid to the logits first, or draw with torch.distributions.Bernoulli(logits=...)";
    return lg_cause_fix(c);
}

void lg_cause_explain_family_range(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, const char *family,
                                   char *out, size_t out_len)
{
    if (!bernoulli(family) || t->rule == LG_SCAN_RULE_PROBS) {
        lg_cause_explain_range(c, t, v, out, out_len);
        return;
    }
    char lo[40], hi[40];
    span(t, v, lo, hi, sizeof lo);
    if (c == LG_CAUSE_NAN_INPUT)
        snprintf(out, out_len, "the probabilities given to torch.bernoulli are NaN: %s", lg_cause_fix(c));
    else
        snprintf(out, out_len,
                 "torch.bernoulli draws with probabilities in [0, 1], these span [%s, %s]: they look like raw logits "
                 "or an unnormalized score; %s",
                 lo, hi, lg_cause_range_fix(c, family));
}

/* A multinomial weight's bits: NaN or infinite, negative (not -0). */
static bool probs_nonfinite(lg_dtype_t d, int64_t raw)
{
    return ((uint64_t)raw & (lg_scan_range_sign(d) - 1)) >= lg_scan_range_inf(d);
}

static bool probs_negative(lg_dtype_t d, int64_t raw)
{
    return ((uint64_t)raw & lg_scan_range_sign(d)) && ((uint64_t)raw & (lg_scan_range_sign(d) - 1));
}

static lg_cause_t classify_probs(const lg_target_t *t, const lg_verdict_t *v)
{
    lg_dtype_t d = t->dtype;
    if (v->n_samples <= 0) /* samples off: min and max cover the numbers (NaN's bits when all are NaN) */
        return probs_nonfinite(d, v->min) || probs_nonfinite(d, v->max) ? LG_CAUSE_FP16_OVERFLOW
               : probs_negative(d, v->min)                              ? LG_CAUSE_NEGATIVE_PROBS
                                                                        : LG_CAUSE_ALL_MASKED;
    bool negative = false;
    for (int i = 0; i < v->n_samples; i++) {
        if (probs_nonfinite(d, v->samples[i].value))
            return LG_CAUSE_FP16_OVERFLOW;
        negative |= probs_negative(d, v->samples[i].value);
    }
    return negative ? LG_CAUSE_NEGATIVE_PROBS : LG_CAUSE_ALL_MASKED;
}

/* The sentence for torch.multinomial's weights: which row and what it holds, and the fix. */
static void explain_probs(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len)
{
    int64_t cols = t->n_classes > 0 ? t->n_classes : 1, rows = t->count / cols;
    bool single = t->dtype != LG_DTYPE_FLOAT64;
    char lo[40];
    lg_json_format_float(lo, sizeof lo, lg_scan_float(t->dtype, v->min), single);
    int64_t at = -1; /* the first sample that shows the cause */
    for (int i = 0; i < v->n_samples && at < 0; i++) {
        int64_t raw = v->samples[i].value;
        if (c == LG_CAUSE_FP16_OVERFLOW    ? probs_nonfinite(t->dtype, raw)
            : c == LG_CAUSE_NEGATIVE_PROBS ? probs_negative(t->dtype, raw)
                                           : !probs_nonfinite(t->dtype, raw) && !probs_negative(t->dtype, raw))
            at = v->samples[i].index;
    }
    char row[64] = "";
    if (at >= 0)
        snprintf(row, sizeof row, " (row %" PRId64 " of %" PRId64 ")", at / cols, rows);
    if (c == LG_CAUSE_FP16_OVERFLOW)
        snprintf(out, out_len, "torch.multinomial's probabilities hold NaN or inf%s: %s; %s", row,
                 t->dtype == LG_DTYPE_FLOAT16 ? "half-precision logits overflowed (fp16 ends at 65504)"
                                              : "the logits overflowed before the softmax (an fp16 model or autocast)",
                 lg_cause_fix(c));
    else if (c == LG_CAUSE_NEGATIVE_PROBS)
        snprintf(out, out_len,
                 "torch.multinomial takes probabilities (weights >= 0), these reach %s%s: logits were passed where "
                 "probabilities were expected; %s",
                 lo, row, lg_cause_fix(c));
    else
        snprintf(out, out_len,
                 "all %" PRId64 " probabilities of a row are 0%s, nothing to sample: top-k/top-p or a mask removed "
                 "every token; %s",
                 cols, row, lg_cause_fix(c));
}

lg_cause_t lg_cause_classify_range(const lg_target_t *t, const lg_verdict_t *v)
{
    if (t->rule == LG_SCAN_RULE_PROBS)
        return classify_probs(t, v);
    if (t->operand == 1) /* BCE's target: no model output, neither cause applies */
        return LG_CAUSE_OTHER;
    if (v->n_samples <= 0) /* samples off: min and max cover the numbers only */
        return lg_scan_float(t->dtype, v->min) < 0.0 || lg_scan_float(t->dtype, v->max) > 1.0 ? LG_CAUSE_NO_SIGMOID
                                                                                              : LG_CAUSE_NAN_INPUT;
    for (int i = 0; i < v->n_samples; i++) {
        double x = lg_scan_float(t->dtype, v->samples[i].value);
        if (x == x)
            return LG_CAUSE_NO_SIGMOID;
    }
    return LG_CAUSE_NAN_INPUT;
}

void lg_cause_explain_range(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len)
{
    if (t->rule == LG_SCAN_RULE_PROBS) {
        explain_probs(c, t, v, out, out_len);
        return;
    }
    char lo[40], hi[40];
    span(t, v, lo, hi, sizeof lo);
    if (t->operand == 1)
        snprintf(out, out_len, "%s", lg_cause_range_target_fix());
    else if (c == LG_CAUSE_NAN_INPUT)
        snprintf(out, out_len, "the probabilities given to binary_cross_entropy are NaN: %s", lg_cause_fix(c));
    else
        snprintf(out, out_len,
                 "binary_cross_entropy takes probabilities in [0, 1], these span [%s, %s]: they look like raw "
                 "logits; %s",
                 lo, hi, lg_cause_fix(c));
}
