/* text.c: the words of a violation for people: the stderr block (kernel, offending values,
 * counts, cause, action, call site, log) and the one-line message a blocked launch's CUDA
 * error carries (cudaGetErrorString), which PyTorch puts in its RuntimeError.
 *
 * Called by report.c (the block, under its lock) and act.c through lg_report_violation_message,
 * on the reporting thread. Text from outside (kernel and file names) is made terminal-safe.
 * Tested by tests/unit/test_report.c and tests/e2e/test_report_fields.sh.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report/report.h"

/* "target[17]" for 1-D targets, "target[0][3][7]" for dense ones: the coordinates a user types
 * into a debugger. */
int lg_text_index(const lg_target_t *t, int64_t index, char *out, size_t len)
{
    if (t->ndim <= 1)
        return snprintf(out, len, "target[%" PRId64 "]", index);
    int64_t coord[LG_MAX_TARGET_DIMS];
    int nd = t->ndim > LG_MAX_TARGET_DIMS ? LG_MAX_TARGET_DIMS : t->ndim;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d] > 0 ? t->sizes[d] : 1;
        coord[d] = index % sz;
        index /= sz;
    }
    int n = snprintf(out, len, "target");
    for (int d = 0; d < nd && n < (int)len; d++)
        n += snprintf(out + n, len - (size_t)n, "[%" PRId64 "]", coord[d]);
    return n;
}

const char *lg_text_direction(const lg_violation_t *v)
{
    if (!v->spec)
        return NULL;
    return v->spec->direction == LG_DIR_BACKWARD ? "backward" : "forward";
}

/* In a job of several processes, what raise and hold do to the others. Empty otherwise. */
const char *lg_text_distributed(const char *outcome, char *buf, size_t len)
{
    long world = lg_log_world_size();
    buf[0] = '\0';
    if (world <= 1)
        return buf;
    if (!strcmp(outcome, "blocked") || !strcmp(outcome, "held"))
        snprintf(buf, len,
                 "WORLD_SIZE=%ld: this rank stops here, and the other ranks wait in their next collective "
                 "(all-reduce) until the NCCL timeout (10 minutes by default); catching the error and "
                 "skipping the batch on this rank alone desynchronises the collectives. For distributed "
                 "jobs use LABELGUARD_ACTION=mask (every rank goes on) or abort (the job ends now)",
                 world);
    else if (!strcmp(outcome, "aborted"))
        snprintf(buf, len,
                 "WORLD_SIZE=%ld: this rank's log is flushed; the launcher (torchrun, mpirun; srun with "
                 "--kill-on-bad-exit=1) ends the other ranks when it sees this one die",
                 world);
    return buf;
}

static bool ids(const lg_violation_t *v) { return v->spec && v->spec->ids; }
/* A torch._assert_async condition (asserts.c): one element of the kernel's own type. */
static bool flag(const lg_violation_t *v) { return v->spec && v->spec->assert_flag; }
static const char *flag_type(const lg_violation_t *v)
{
    lg_assert_elem_t e;
    return lg_asserts_element(v->mangled, &e) == 0 ? e.name : "?";
}
/* A range target (BCE's probabilities): float values, valid in [0, 1]. */
static bool range(const lg_violation_t *v) { return lg_scan_is_float(v->target.dtype); }
/* torch.multinomial's weights: rows of n_classes, each finite, >= 0, and summing above 0. */
static bool probs(const lg_violation_t *v) { return range(v) && v->target.rule == LG_SCAN_RULE_PROBS; }
/* A multinomial weight's position, probs[row, column]; a zero stands for its whole row (a row
 * of zeros, lg_scan_probs_rows), probs[row, :]. */
static const char *probs_index(const lg_target_t *t, const lg_sample_t *s, char *buf, size_t len)
{
    int64_t cols = t->n_classes > 0 ? t->n_classes : 1;
    if (!((uint64_t)s->value & (lg_scan_range_sign(t->dtype) - 1)))
        snprintf(buf, len, "probs[%" PRId64 ", :]", s->index / cols);
    else
        snprintf(buf, len, "probs[%" PRId64 ", %" PRId64 "]", s->index / cols, s->index % cols);
    return buf;
}
static const char *family(const lg_violation_t *v) { return v->spec ? v->spec->family : NULL; }
/* Which operand of a range kernel the values are: BCE's input (0) or its target (1); torch.bernoulli's p. */
static const char *operand(const lg_violation_t *v)
{
    if (family(v) && !strcmp(family(v), "bernoulli"))
        return "p";
    return v->target.operand == 1 ? "target" : "input";
}
static const char *fmt_value(const lg_target_t *t, int64_t raw, char *buf, size_t len)
{
    lg_json_format_float(buf, len, lg_scan_float(t->dtype, raw), t->dtype != LG_DTYPE_FLOAT64);
    return buf;
}

/* The valid range as the kernel sees it: [0, n) or, when it wraps negative ids, [-n, n). */
static int64_t low_bound(const lg_target_t *t) { return t->allow_negative ? -t->n_classes : 0; }

static const char *action_text(const lg_violation_t *v, char *buf, size_t len)
{
    const char *outcome = v->outcome ? v->outcome : "launched";
    const char *a = lg_config_action_name(v->action);
    if (!strcmp(outcome, "blocked"))
        snprintf(buf, len, "%s → launch blocked, CUDA context intact; PyTorch raises RuntimeError", a);
    else if (!strcmp(outcome, "held"))
        snprintf(buf, len,
                 "%s → launch blocked, thread %ld waits: attach a debugger (gdb -p %ld) or send SIGCONT "
                 "(kill -CONT %ld) to go on",
                 a, (long)syscall(SYS_gettid), (long)getpid(), (long)getpid());
    else if (!strcmp(outcome, "masked"))
        snprintf(buf, len, "%s → %" PRId64 " bad %s%s replaced by %s in a copy; the kernel ran on it", a,
                 v->verdict.bad_count, ids(v) ? "id" : "label", v->verdict.bad_count == 1 ? "" : "s",
                 ids(v) ? "padding_idx" : "ignore_index");
    else if (!strcmp(outcome, "aborted"))
        snprintf(buf, len, "%s → aborting for a core dump", a);
    else if (!strcmp(outcome, "launched") && range(v))
        /* Nothing stands in for a bad probability: the kernel read the values shown. */
        snprintf(buf, len, "%s → the kernel ran on these %s as they were (its device-side assert may fire)", a,
                 v->target.operand == 1 ? "targets" : "probabilities");
    else if (!strcmp(outcome, "launched") && flag(v))
        snprintf(buf, len,
                 "%s → the kernel read its condition as it was and asserted (async mode reads it without "
                 "waiting)",
                 a);
    else if (!strcmp(outcome, "launched"))
        snprintf(buf, len, "%s → the kernel ran with these %s (its device-side assert may fire)", a,
                 ids(v) ? "ids" : "labels");
    else
        snprintf(buf, len, "%s → %s", a, outcome);
    return buf;
}

/* Text from outside (kernel names, Python file names) for the terminal: control characters
 * and invalid UTF-8 become '?', so a hostile name cannot move the cursor or fake a line. */
const char *lg_text_safe(const char *in, char *out, size_t len)
{
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)in;
    while (*s && o + 5 < len) {
        unsigned char c = *s;
        size_t u = 1;
        if (c >= 0x80) {
            /* Accept well-formed sequences only (same table as json.c, minus its code). */
            size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            bool ok = need > 0;
            for (size_t k = 1; ok && k < need; k++)
                ok = (s[k] & 0xC0) == 0x80;
            if (ok && need == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F)))
                ok = false;
            if (ok && need == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F)))
                ok = false;
            if (ok) {
                memcpy(out + o, s, need);
                o += need;
                s += need;
                continue;
            }
            out[o++] = '?';
        } else
            out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        s += u;
    }
    out[o] = '\0';
    return out;
}

/* The output code Inductor wrote for a compiled graph: <cache>/<xy>/c<xy...>.py, the directory
 * named after the file's second and third characters (torch._inductor.codecache.get_path), in
 * whatever directory TORCHINDUCTOR_CACHE_DIR names. Its `call` runs the compiled graph; the
 * user's line is the one that called the compiled function. */
static bool inductor_code(const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash || slash - file < 3 || slash[-3] != '/')
        return false;
    const char *base = slash + 1;
    size_t n = strlen(base);
    return n >= 24 && base[0] == 'c' && strcmp(base + n - 3, ".py") == 0 && base[1] == slash[-2] &&
           base[2] == slash[-1];
}

/* A Python file that belongs to an installed package or the standard library, labelguard's own
 * check op (run from inside a compiled graph; in a checkout it is no installed package), or a
 * compiled graph's generated code. */
static bool library_frame(const char *file)
{
    size_t n = strlen(file), tail = strlen("/labelguard/_compiled.py");
    return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") || strstr(file, "/lib/python3") ||
           file[0] == '<' || (n >= tail && strcmp(file + n - tail, "/labelguard/_compiled.py") == 0) ||
           inductor_code(file);
}

int lg_text_user_frame(const lg_py_stack_t *py)
{
    int np = py->n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : py->n;
    if (np <= 0)
        return -1;
    int k = np - 1;
    while (k > 0 && library_frame(py->frames[k].file))
        k--;
    return library_frame(py->frames[k].file) ? np - 1 : k;
}

#define APPEND(...)                                               \
    do {                                                          \
        if (n < (int)cap)                                         \
            n += snprintf(out + n, cap - (size_t)n, __VA_ARGS__); \
    } while (0)

/* A late verdict: "; found at the next sync (train.py:47)", the reading thread's user frame. */
static void found_at(char *out, size_t cap, int *n_, const lg_violation_t *v)
{
    int n = *n_;
    char safe[512];
    APPEND("; found %s", v->found ? v->found : "later");
    int r = lg_text_user_frame(&v->read_python);
    if (r >= 0) {
        const char *file = v->read_python.frames[r].file, *base = strrchr(file, '/');
        APPEND(" (%s:%d)", lg_text_safe(base ? base + 1 : file, safe, sizeof(safe)), v->read_python.frames[r].line);
    }
    *n_ = n;
}

/* The stderr block: one read tells kernel, values, counts, cause, action, call site, log. */
size_t lg_text_violation(char *out, size_t cap, const lg_violation_t *v, char (*native)[256], int n_native,
                         const char *log_path)
{
    int n = 0;
    const char *dir = lg_text_direction(v);
    char safe[512], safe2[256];
    const lg_verdict_t *vd = &v->verdict;
    const lg_target_t *t = &v->target;
    int shown = vd->n_samples < 6 ? vd->n_samples : 6;
    if (flag(v)) {
        /* torch._assert_async: one element was read, and it is all there is to show */
        APPEND("labelguard: torch._assert_async %s in %s (%s)\n", v->late ? "failed" : "would fail",
               v->short_name[0] ? lg_text_safe(v->short_name, safe, sizeof(safe)) : "(unknown kernel)",
               lg_text_safe(v->op, safe2, sizeof(safe2)));
        APPEND("  condition = 0  (%s, 1 element: false; the kernel %s)\n", flag_type(v),
               v->late ? "read it after this copy of it was made, and asserted: the CUDA context is lost"
                       : "would assert and kill the CUDA context");
        shown = 0;
    } else {
        APPEND("labelguard: bad %s in %s",
               range(v) ? (v->target.operand == 1 ? "targets" : "probabilities") : ids(v) ? "ids" : "labels",
               v->short_name[0] ? lg_text_safe(v->short_name, safe, sizeof(safe)) : "(unknown kernel)");
        if (ids(v) || (range(v) && v->spec))
            APPEND(" (%s)", v->spec->family);
        else if (dir)
            APPEND(" (%s)", dir);
        APPEND("\n");
    }
    if (shown > 0) {
        APPEND(" ");
        for (int i = 0; i < shown; i++) {
            char idx[96], cell[160];
            lg_text_index(t, vd->samples[i].index, idx, sizeof(idx));
            if (ids(v))
                snprintf(idx, sizeof(idx), "ids[%" PRId64 "]", vd->samples[i].index);
            if (range(v)) {
                char num[40];
                if (probs(v))
                    probs_index(t, &vd->samples[i], idx, sizeof idx);
                else
                    snprintf(idx, sizeof(idx), "%s[%" PRId64 "]", operand(v), vd->samples[i].index);
                snprintf(cell, sizeof(cell), "%s = %s", idx, fmt_value(t, vd->samples[i].value, num, sizeof num));
            } else
                snprintf(cell, sizeof(cell), "%s = %" PRId64, idx, vd->samples[i].value);
            if (i > 0 && i % 3 == 0)
                APPEND("\n ");
            bool last_in_row = i % 3 == 2 || i == shown - 1;
            if (last_in_row)
                APPEND(" %s", cell);
            else
                APPEND(" %-20s", cell);
        }
        if (vd->bad_count > shown)
            APPEND(" (first %d of %" PRId64 ")", shown, vd->bad_count);
        APPEND("\n");
    }
    if (flag(v)) {
        /* said above */
    } else if (probs(v)) {
        char lo[40], hi[40];
        APPEND("  %" PRId64 " bad of %" PRId64 " (%" PRId64 " rows of %" PRId64
               "; valid: finite, >= 0, each row's sum > 0)",
               vd->bad_count, t->count, t->n_classes > 0 ? t->count / t->n_classes : 0, t->n_classes);
        if (vd->checked > 0)
            APPEND("  min %s, max %s", fmt_value(t, vd->min, lo, sizeof lo), fmt_value(t, vd->max, hi, sizeof hi));
    } else if (range(v)) {
        char lo[40], hi[40];
        APPEND("  %" PRId64 " of %" PRId64 " values outside [0, 1] or NaN", vd->bad_count, t->count);
        if (vd->checked > 0)
            APPEND("  min %s, max %s", fmt_value(t, vd->min, lo, sizeof lo), fmt_value(t, vd->max, hi, sizeof hi));
    } else if (ids(v)) {
        APPEND("  %" PRId64 " of %" PRId64 " ids outside [%" PRId64 ", %" PRId64 ")  (bound = %" PRId64 " %s",
               vd->bad_count, t->count, low_bound(t), t->n_classes, t->n_classes, lg_cause_indexed_unit(v->indexed));
        if (t->has_ignore_index)
            APPEND(", padding_idx = %" PRId64 ")", t->ignore_index);
        else
            APPEND(", no padding_idx)");
    } else {
        APPEND("  %" PRId64 " of %" PRId64 " labels outside [0, %" PRId64 ")", vd->bad_count, t->count, t->n_classes);
        if (t->has_ignore_index)
            APPEND("  (ignore_index = %" PRId64 ")", t->ignore_index);
        else
            APPEND("  (no ignore_index)");
    }
    if (vd->checked > 0 && !range(v) && !flag(v))
        APPEND("  min %" PRId64 ", max %" PRId64, vd->min, vd->max);
    if (!flag(v))
        APPEND("\n");
    APPEND("  likely cause: %s — %s\n", lg_cause_name(v->cause), v->cause_text);
    char act[512];
    APPEND("  action: %s\n", action_text(v, act, sizeof(act)));
    if (lg_text_distributed(v->outcome ? v->outcome : "launched", act, sizeof act)[0])
        APPEND("  distributed: %s\n", act);
    if (v->note[0])
        APPEND("  note: %s\n", lg_text_safe(v->note, safe, sizeof(safe)));
    if (v->python.n > 0) {
        /* The user's line, not torch/nn/functional.py: the innermost frame outside installed
         * packages and the standard library, then the innermost one as "via". */
        int np = v->python.n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : v->python.n;
        int k = lg_text_user_frame(&v->python);
        const lg_py_frame_t *f = &v->python.frames[k];
        if (f->gone)
            APPEND("  %s a function whose code object was freed before the verdict was read (line unknown)",
                   v->late ? "launched in" : "at");
        else
            APPEND("  %s %s:%d in %s", v->late ? "launched at" : "at", lg_text_safe(f->file, safe, sizeof(safe)),
                   f->line, lg_text_safe(f->function, safe2, sizeof(safe2)));
        if (v->late)
            found_at(out, cap, &n, v);
        APPEND("   (python%s)\n",
               v->python.from_main_thread ? ", main thread: the launching thread runs no Python" : "");
        if (k != np - 1) {
            const lg_py_frame_t *in = &v->python.frames[np - 1];
            const char *base = strrchr(in->file, '/');
            APPEND("    via %s:%d in %s\n", lg_text_safe(base ? base + 1 : in->file, safe, sizeof(safe)), in->line,
                   lg_text_safe(in->function, safe2, sizeof(safe2)));
        }
    } else if (v->late && v->read_python.n > 0) {
        APPEND("  launch site not recorded");
        found_at(out, cap, &n, v);
        APPEND("   (python)\n");
    } else if (n_native > 0) {
        /* The first frame outside the CUDA stack itself (CUPTI sees launches from inside it). */
        int k = 0;
        while (k < n_native - 1 && (!strncmp(native[k], "libcudart", 9) || !strncmp(native[k], "libcuda.", 8) ||
                                    !strncmp(native[k], "libcupti", 8)))
            k++;
        /* Then the kernel's host stub (nvcc names it after the kernel; it only calls the launch
         * API): its caller is the code that chose these labels. */
        if (k < n_native - 1 && v->short_name[0] && strstr(native[k], v->short_name))
            k++;
        APPEND("  at %s   (native)\n", lg_text_safe(native[k], safe, sizeof(safe)));
    }
    APPEND("  log: %s\n", log_path[0] ? lg_text_safe(log_path, safe, sizeof(safe)) : "(none)");
    if (n >= (int)cap) {
        n = (int)cap - 1;
        out[n - 1] = '\n';
    }
    return (size_t)n;
}

void lg_text_error_message(const lg_violation_t *v, const char *log_path, char *out, size_t out_len)
{
    lg_cause_t cause = v->cause;
    const lg_verdict_t *vd = &v->verdict;
    const lg_target_t *t = &v->target;
    char idx[96] = "";
    int64_t value = 0;
    if (vd->n_samples > 0) {
        lg_text_index(t, vd->samples[0].index, idx, sizeof(idx));
        value = vd->samples[0].value;
    }
    const char *noun = ids(v) ? "id" : "label";
    if (ids(v) && vd->n_samples > 0)
        snprintf(idx, sizeof(idx), "ids[%" PRId64 "]", vd->samples[0].index);
    char ign[64];
    if (t->has_ignore_index)
        snprintf(ign, sizeof(ign), "%s %" PRId64, ids(v) ? "padding_idx" : "ignore_index", t->ignore_index);
    else
        snprintf(ign, sizeof(ign), "no %s", ids(v) ? "padding_idx" : "ignore_index");
    const char *path0 = log_path && log_path[0] ? log_path : "the log";
    if (flag(v)) {
        bool own = !v->op[0] || strcmp(v->op, "torch._assert_async") == 0; /* the user's own call */
        char who[128];
        if (own)
            snprintf(who, sizeof who, "a torch._assert_async condition is false");
        else
            snprintf(who, sizeof who, "%s's device-side check (torch._assert_async) is false", v->op);
        snprintf(out, out_len,
                 "labelguard: %s, not a CUDA fault (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints "
                 "below): %s: its condition (%s) is 0; %s; likely cause: %s; details in %s",
                 who, v->short_name[0] ? v->short_name : "kernel", flag_type(v),
                 v->late ? "the kernel read it and its device-side assert fired (async mode reads the condition "
                           "without waiting; LABELGUARD_MODE=sync blocks it): the CUDA context is lost"
                         : "launch blocked, the CUDA context is intact",
                 v->cause_text, path0);
        return;
    }
    if (probs(v)) {
        char what[160], num[40], at[64];
        if (vd->n_samples > 0)
            snprintf(what, sizeof what, "bad probability %s = %s", probs_index(t, &vd->samples[0], at, sizeof at),
                     fmt_value(t, vd->samples[0].value, num, sizeof num));
        else
            snprintf(what, sizeof what, "bad probabilities");
        snprintf(out, out_len,
                 "labelguard: bad probabilities for sampling, not a CUDA fault (ignore the cudaErrorNotPermitted and "
                 "CUDA_LAUNCH_BLOCKING hints below): %s: %s (valid: finite, >= 0, each row's sum > 0; %" PRId64
                 " bad); %s; likely cause: %s: %s; details in %s",
                 v->short_name[0] ? v->short_name : "kernel", what, vd->bad_count,
                 v->outcome && !strcmp(v->outcome, "launched")
                     ? "the launch ran on them (its verdict was read after it: async mode or a graph replay)"
                     : "launch blocked, the CUDA context is intact",
                 lg_cause_name(cause), lg_cause_fix(cause), path0);
        return;
    }
    if (range(v)) {
        char what[160], num[40];
        if (vd->n_samples > 0)
            snprintf(what, sizeof what, "bad %s %s[%" PRId64 "] = %s", t->operand == 1 ? "target value" : "probability",
                     operand(v), vd->samples[0].index, fmt_value(t, vd->samples[0].value, num, sizeof num));
        else
            snprintf(what, sizeof what, "bad probabilities");
        /* A late verdict: the launch ran on the values shown (none can stand in for them). */
        snprintf(out, out_len,
                 "labelguard: bad %s, not a CUDA fault (ignore the cudaErrorNotPermitted and "
                 "CUDA_LAUNCH_BLOCKING hints below): %s: %s, outside [0, 1] (%" PRId64 " of %" PRId64
                 " values bad); %s; likely cause: %s: %s; details in %s",
                 t->operand == 1 ? "targets" : "probabilities", v->short_name[0] ? v->short_name : "kernel", what,
                 vd->bad_count, t->count,
                 v->late ? "the kernel ran on these values as they were (checked after it ran); its device-side "
                           "assert may have fired"
                         : "launch blocked, the CUDA context is intact",
                 lg_cause_name(cause),
                 t->operand == 1 ? lg_cause_range_target_fix() : lg_cause_range_fix(cause, family(v)), path0);
        return;
    }
    char what[160];
    if (vd->n_samples > 0)
        snprintf(what, sizeof(what), "bad %s %s = %" PRId64, noun, idx, value);
    else /* samples off: the range still says what is wrong */
        snprintf(what, sizeof(what), "bad %ss (min %" PRId64 ", max %" PRId64 ")", noun, vd->min, vd->max);
    const char *path = log_path && log_path[0] ? log_path : "the log";
    /* PyTorch appends cudaErrorNotPermitted's documentation link and the CUDA_LAUNCH_BLOCKING
     * hint to this text; both point away from the labels, so the text says so first. */
    bool ran = v->outcome && !strcmp(v->outcome, "masked");
    bool as_is = v->late && v->outcome && !strcmp(v->outcome, "launched");
    snprintf(out, out_len,
             "labelguard: bad %ss, not a CUDA fault (ignore the cudaErrorNotPermitted and "
             "CUDA_LAUNCH_BLOCKING hints below): %s: %s, outside [%" PRId64 ", %" PRId64 ") (%s; %" PRId64
             " of %" PRId64 " %ss bad); %s; likely cause: %s: %s; details in %s",
             noun, v->short_name[0] ? v->short_name : "kernel", what, low_bound(t), t->n_classes, ign, vd->bad_count,
             t->count, noun,
             ran     ? "the kernel ran with them masked (checked after launch), the CUDA context is intact"
             : as_is ? "the kernel read them as they were (checked after it ran); its device-side assert may have "
                       "fired"
                     : "launch blocked, the CUDA context is intact",
             lg_cause_name(cause), lg_cause_fix(cause), path);
}
