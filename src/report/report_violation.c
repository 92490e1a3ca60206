/* report_violation.c: the violation event, as one JSON line (the bad labels, their samples,
 * the cause, the action taken, the native and Python stacks), its stderr block (text.c), and
 * the copy of the last violation line for labelguard_last_violation(); a torch.compile'd op's
 * check adds the model's line (model_line).
 *
 * Who calls it: act.c (lg_report_violation, lg_report_violation_message on the raise path),
 * opaque.c, and lg.c's public API (lg_report_violation_last), on whatever thread hit the event.
 * The line is built and written under report.c's lock (lg_report_lock, shared with every
 * event, so lines never interleave); the last line's copy has a lock of its own. Fork: the
 * child gets a fresh copy lock (lg_report_violation_after_fork, from lg.c's atfork handler).
 *
 * Tested by tests/unit/test_report.c (violation events parsed with json_check.h, 16 threads,
 * fork, the last violation's copy, the raise message).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

#define TEXT_CAP 8192 /* one stderr block */

static const char *dtype_name(lg_dtype_t d)
{
    switch (d) {
    case LG_DTYPE_UINT8: return "uint8";
    case LG_DTYPE_INT32: return "int32";
    case LG_DTYPE_FLOAT32: return "float32";
    case LG_DTYPE_FLOAT64: return "float64";
    case LG_DTYPE_FLOAT16: return "float16";
    case LG_DTYPE_BFLOAT16: return "bfloat16";
    default: return "int64";
    }
}

/* A forward's labels are read again by its backward: what happens to that launch, which is
 * not reported again (core/pairs.c). NULL for a backward, a range or a _assert_async check. */
static const char *backward_fate(const lg_violation_t *v)
{
    if (!v->spec || v->spec->direction != LG_DIR_FORWARD || v->spec->assert_flag || v->spec->range || !v->outcome)
        return NULL;
    if (!strcmp(v->outcome, "masked"))
        return "masked too if it reads these labels; not reported again";
    if (!strcmp(v->outcome, "blocked") || !strcmp(v->outcome, "held"))
        return "not launched by a step this error ends; if launched, masked where a copy can be made, not reported "
               "again";
    if (!strcmp(v->outcome, "launched"))
        return "runs on these labels as they are; not reported again";
    return NULL;
}

/* native_stack, python_stack and python_stack_thread. A frame whose code object went before
 * its recorded launch site was read has no file or line to give: said, not guessed. */
void lg_report_stacks_json(lg_json_t *j, char (*native)[256], int n_native, const lg_py_stack_t *py)
{
    if (native) { /* NULL: a stack that has no native part (a recorded launch's Python line) */
        lg_json_begin_array(j, "native_stack");
        for (int i = 0; i < n_native; i++)
            lg_json_string(j, NULL, native[i]);
        lg_json_end_array(j);
    }
    int np = py->n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : py->n;
    lg_json_begin_array(j, "python_stack");
    for (int i = 0; i < np; i++) {
        lg_json_begin_object(j, NULL);
        if (py->frames[i].gone) {
            lg_json_null(j, "file");
            lg_json_null(j, "line");
            lg_json_null(j, "function");
            lg_json_bool(j, "gone", true);
        } else {
            lg_json_string(j, "file", py->frames[i].file);
            lg_json_int(j, "line", py->frames[i].line);
            lg_json_string(j, "function", py->frames[i].function);
        }
        lg_json_end_object(j);
    }
    lg_json_end_array(j);
    if (np > 0)
        lg_json_string(j, "python_stack_thread", py->from_main_thread ? "main" : "launching");
}

static void build_violation_json(lg_json_t *j, const lg_violation_t *v, char (*native)[256], int n_native,
                                 char (*read_native)[256], int n_read)
{
    lg_json_string(j, "kernel", v->short_name);
    lg_json_string(j, "symbol", v->mangled);
    lg_json_string(j, "family", v->spec ? v->spec->family : NULL);
    lg_json_string(j, "direction", lg_text_direction(v));
    lg_json_uint(j, "launch_seq", v->launch_seq);
    char stream[32];
    snprintf(stream, sizeof(stream), "0x%" PRIxPTR, (uintptr_t)v->stream);
    lg_json_string(j, "stream", stream);
    lg_json_int(j, "device", v->device);
    if (v->graph_id) {
        lg_json_begin_object(j, "graph");
        lg_json_uint(j, "id", v->graph_id);
        lg_json_uint(j, "replay", v->replay);
        lg_json_uint(j, "exec", v->exec);
        lg_json_end_object(j);
    }

    const lg_target_t *t = &v->target;
    lg_json_begin_object(j, "target");
    bool flag = v->spec && v->spec->assert_flag;
    lg_assert_elem_t elem = {0};
    if (flag && lg_asserts_element(v->mangled, &elem) != 0)
        elem.name = "unknown";
    lg_json_string(j, "dtype", flag ? elem.name : dtype_name(t->dtype));
    lg_json_int(j, "count", t->count);
    bool range = lg_scan_is_float(t->dtype);
    bool single = t->dtype != LG_DTYPE_FLOAT64;
    if (flag) {
        /* torch._assert_async's condition: the one element read, zero; no bound of any kind */
        lg_json_string(j, "kind", "assert");
        lg_json_null(j, "n_classes");
        lg_json_null(j, "ignore_index");
        char addr[24];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)t->data);
        lg_json_string(j, "data", addr);
    } else if (range && t->rule == LG_SCAN_RULE_PROBS) {
        /* torch.multinomial's weights: rows x categories, row-major (samples index it; a row of
         * zeros is its first element, value 0); valid: finite, >= 0, each row's sum > 0 */
        lg_json_string(j, "kind", "probs");
        lg_json_begin_array(j, "shape");
        lg_json_int(j, NULL, t->n_classes > 0 ? t->count / t->n_classes : 0);
        lg_json_int(j, NULL, t->n_classes);
        lg_json_end_array(j);
        char addr[24];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)t->data);
        lg_json_string(j, "data", addr); /* the op's contiguous copy of the probabilities */
        lg_json_string(j, "operand", "probs");
    } else if (range) {
        /* BCE's probabilities: the bound is the interval itself */
        lg_json_string(j, "kind", "range");
        lg_json_begin_array(j, "range");
        lg_json_int(j, NULL, 0);
        lg_json_int(j, NULL, 1);
        lg_json_end_array(j);
        char addr[24];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)t->data);
        lg_json_string(j, "data", addr); /* the operand's data_ptr() */
        lg_json_string(j, "operand", t->operand == 1 ? "target" : "input"); /* samples are operand[index] */
    } else {
        lg_json_int(j, "n_classes", t->n_classes);
        if (t->has_ignore_index)
            lg_json_int(j, "ignore_index", t->ignore_index);
        else
            lg_json_null(j, "ignore_index");
    }
    if (v->spec && v->spec->ids) {
        /* Ids of an index kernel: the same keys for tools that read labels, plus their names
         * for ids (n_classes is the row count, ignore_index the padding_idx). */
        lg_json_string(j, "kind", "ids");
        lg_json_int(j, "bound", t->n_classes);
        lg_json_string(j, "indexes", lg_cause_indexed_name(v->indexed));
        if (t->has_ignore_index)
            lg_json_int(j, "padding_idx", t->ignore_index);
        else
            lg_json_null(j, "padding_idx");
        lg_json_bool(j, "allow_negative", t->allow_negative != 0);
        /* Where the ids were read: the index tensor's data_ptr(), and for a view decoded from
         * a TensorIterator its strides in elements (expanded dimensions dropped). */
        char addr[24];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)t->data);
        lg_json_string(j, "data", addr);
        if (t->index_is_offset) {
            lg_json_begin_array(j, "strides");
            for (int d = 0; d < t->ndim && d < LG_MAX_TARGET_DIMS; d++)
                lg_json_int(j, NULL, t->strides[d]);
            lg_json_end_array(j);
        }
    }
    if (t->ndim >= 2) {
        lg_json_begin_array(j, "shape");
        for (int d = 0; d < t->ndim && d < LG_MAX_TARGET_DIMS; d++)
            lg_json_int(j, NULL, t->sizes[d]);
        lg_json_end_array(j);
    }
    lg_json_end_object(j);

    const lg_verdict_t *vd = &v->verdict;
    lg_json_begin_object(j, "bad");
    lg_json_int(j, "count", vd->bad_count);
    lg_json_int(j, "checked", vd->checked);
    if (range) {
        lg_json_float(j, "min", lg_scan_float(t->dtype, vd->min), single);
        lg_json_float(j, "max", lg_scan_float(t->dtype, vd->max), single);
    } else {
        lg_json_int(j, "min", vd->min);
        lg_json_int(j, "max", vd->max);
    }
    lg_json_begin_array(j, "samples");
    int ns = vd->n_samples;
    if (ns > LG_MAX_SAMPLES)
        ns = LG_MAX_SAMPLES;
    if (lg_config_values.samples > 0 && ns > lg_config_values.samples)
        ns = lg_config_values.samples;
    for (int i = 0; i < ns; i++) {
        lg_json_begin_object(j, NULL);
        lg_json_int(j, "index", vd->samples[i].index);
        if (range)
            lg_json_float(j, "value", lg_scan_float(t->dtype, vd->samples[i].value), single);
        else
            lg_json_int(j, "value", vd->samples[i].value);
        lg_json_end_object(j);
    }
    lg_json_end_array(j);
    lg_json_end_object(j);

    lg_json_string(j, "cause", lg_cause_name(v->cause));
    lg_json_string(j, "cause_text", v->cause_text);
    if (flag)
        lg_json_string(j, "op", v->op); /* the op whose torch._assert_async it is, from the native stack */
    lg_json_string(j, "action", lg_config_action_name(v->action));
    lg_json_string(j, "outcome", v->outcome ? v->outcome : "launched");
    if (v->note[0])
        lg_json_string(j, "note", v->note);
    const char *bw = backward_fate(v);
    if (bw)
        lg_json_string(j, "backward", bw);

    lg_report_stacks_json(j, native, n_native, &v->python);
    if (v->late) {
        /* The launch's stacks are above; this is the moment its verdict was read. */
        lg_json_begin_object(j, "verdict_read_at");
        lg_json_string(j, "when", v->found);
        lg_report_stacks_json(j, read_native, n_read, &v->read_python);
        lg_json_end_object(j);
    }
}

/* The last violation's line as written to the log (without its newline), for
 * labelguard_last_violation(): a copy made here, on the reporting path, under its own lock so
 * that a reader in any thread never waits for the log's writes nor sees half a line. */
/* Where a late verdict was read matters less than where it was launched: fewer frames, and
 * less of the reporting thread's stack. */
#define READ_FRAMES 16

static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_line[LG_REPORT_LINE_CAP];
static size_t last_len;

static void keep_last(const char *line, size_t len)
{
    pthread_mutex_lock(&last_lock);
    last_len = len < sizeof last_line ? len : sizeof last_line - 1;
    memcpy(last_line, line, last_len);
    last_line[last_len] = '\0';
    pthread_mutex_unlock(&last_lock);
}

int lg_report_violation_last(char *buf, size_t cap)
{
    pthread_mutex_lock(&last_lock);
    int r = lg_report_copy_out(buf, cap, last_line, last_len);
    pthread_mutex_unlock(&last_lock);
    return r;
}

/* The stderr block (NUL-terminated, n bytes) with "  model line: ..." inserted above its `at`
 * line (the Python frame), or at its end; unchanged when it would not fit in cap. */
static size_t add_site(char *text, size_t n, size_t cap, const char *site)
{
    char line[600], safe[512];
    int len = snprintf(line, sizeof line, "  model line: %s\n", lg_text_safe(site, safe, sizeof safe));
    if (len <= 0 || (size_t)len >= sizeof line || n + (size_t)len >= cap)
        return n;
    char *at = strstr(text, "\n  at ");
    size_t pos = at ? (size_t)(at - text) + 1 : n;
    memmove(text + pos + len, text + pos, n - pos + 1);
    memcpy(text + pos, line, (size_t)len);
    return n + (size_t)len;
}

void lg_report_violation(const lg_violation_t *v, bool sync_to_disk)
{
    /* Symbolization takes the loader's lock and may allocate: done before ours. */
    char native[LG_MAX_FRAMES][256], read_native[READ_FRAMES][256];
    int n_native = 0, n_read = 0;
    if (v->native.n > 0)
        n_native = lg_stack_symbolize(&v->native, native, LG_MAX_FRAMES);
    if (v->late && v->read_native.n > 0)
        n_read = lg_stack_symbolize(&v->read_native, read_native, READ_FRAMES);

    lg_report_lock();
    lg_json_t j;
    lg_report_line(&j, "violation");
    build_violation_json(&j, v, native, n_native, read_native, n_read);
    if (v->model_line)
        lg_json_string(&j, "model_line", v->model_line);
    lg_report_emit(&j, sync_to_disk);
    keep_last(j.buf, j.len);
    if (!lg_config_values.quiet) {
        static char text[TEXT_CAP];
        size_t n = lg_text_violation(text, sizeof(text), v, native, n_native, lg_log_path());
        if (v->model_line)
            n = add_site(text, n, sizeof(text), v->model_line);
        lg_log_stderr(text, n);
    }
    lg_report_unlock();
}

void lg_report_violation_message(const lg_violation_t *v, char *out, size_t out_len)
{
    lg_report_lock();
    lg_text_error_message(v, lg_log_path(), out, out_len);
    lg_report_unlock();
}

/* The child keeps the parent's last violation, with a fresh lock. */
void lg_report_violation_after_fork(void) { pthread_mutex_init(&last_lock, NULL); }
