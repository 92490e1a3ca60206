/* report_assert.c: the device_assert event, for a device-side assert that labelguard did not
 * prevent (core/asserted.c gathers what it says): where CUDA returned the error, the launches
 * that may hold the assert, and what to do for an exact answer; as one JSON line and a stderr
 * block.
 *
 * Who calls it: asserted.c, once per process, on the thread that got the error. Built and
 * written under report.c's lock. Tested by tests/unit/test_report.c (the event parsed, the
 * text) and end to end by tests/e2e/test_device_assert.sh.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

#define TEXT_CAP    8192
#define TEXT_MINE   8 /* the finder's launches shown on stderr; the log has them all */
#define TEXT_OTHERS 6 /* other threads' */

static void dims_json(lg_json_t *j, const char *key, const unsigned d[3])
{
    lg_json_begin_array(j, key);
    for (int i = 0; i < 3; i++)
        lg_json_uint(j, NULL, d[i]);
    lg_json_end_array(j);
}

static void candidate_json(lg_json_t *j, const lg_assert_candidate_t *c)
{
    char buf[32];
    lg_json_begin_object(j, NULL);
    lg_json_int(j, "thread", c->tid);
    lg_json_bool(j, "finding_thread", c->finder);
    if (c->shared_slot)
        lg_json_bool(j, "thread_shared", true);
    lg_json_int(j, "age", c->age);
    lg_json_string(j, "kernel", c->kernel);
    lg_json_string(j, "symbol", c->symbol);
    dims_json(j, "grid", c->grid);
    dims_json(j, "block", c->block);
    snprintf(buf, sizeof buf, "0x%" PRIxPTR, (uintptr_t)c->stream);
    lg_json_string(j, "stream", buf);
    lg_json_bool(j, "checked", c->checked);
    if (c->graph)
        lg_json_bool(j, "graph_replay", true);
    if (c->python)
        lg_report_stacks_json(j, NULL, 0, c->python);
    lg_json_end_object(j);
}

static const char *const NOTE =
    "not checked before launch: labelguard does not judge this kernel's condition before it runs. CUDA "
    "does not say which kernel asserted: the device's own \"Assertion ... failed\" line names its source "
    "file and condition";

#define APPEND(...)                                               \
    do {                                                          \
        if (n < (int)cap)                                         \
            n += snprintf(out + n, cap - (size_t)n, __VA_ARGS__); \
    } while (0)

/* "train.py:40 in step", the user's frame of a stack; "" when none. */
static const char *py_line(const lg_py_stack_t *py, char *out, size_t len)
{
    char safe[256], fn[128];
    int k = py ? lg_text_user_frame(py) : -1;
    if (k < 0) {
        out[0] = '\0';
        return out;
    }
    if (py->frames[k].gone) {
        snprintf(out, len, "(a frame that no longer exists)");
        return out;
    }
    snprintf(out, len, "%s:%d in %s", lg_text_safe(py->frames[k].file, safe, sizeof safe), py->frames[k].line,
             lg_text_safe(py->frames[k].function, fn, sizeof fn));
    return out;
}

static void candidate_text(char *out, size_t cap, int *n_, const lg_assert_candidate_t *c, bool with_tid)
{
    int n = *n_;
    char kernel[160], line[512];
    APPEND("    ");
    if (with_tid)
        APPEND("tid %d%s: ", c->tid, c->shared_slot ? " (and others)" : "");
    if (c->graph)
        APPEND("%s stream 0x%" PRIxPTR ": any kernel of the graph", lg_text_safe(c->kernel, kernel, sizeof kernel),
               (uintptr_t)c->stream);
    else
        APPEND("%s grid [%u,%u,%u] block [%u,%u,%u] stream 0x%" PRIxPTR "%s",
               lg_text_safe(c->kernel, kernel, sizeof kernel), c->grid[0], c->grid[1], c->grid[2], c->block[0],
               c->block[1], c->block[2], (uintptr_t)c->stream, c->checked ? " (checked by labelguard)" : "");
    if (c->python && py_line(c->python, line, sizeof line)[0])
        APPEND(", launched at %s%s", line,
               c->python->from_main_thread ? " (the main thread's line: its own thread ran no Python)" : "");
    APPEND("\n");
    *n_ = n;
}

static size_t text(char *out, size_t cap, const lg_assert_report_t *r, const char *log_path)
{
    int n = 0;
    char line[512], safe[512];
    APPEND("labelguard: a device-side assert fired in a kernel labelguard does not check before launch\n");
    APPEND("  CUDA error 710 (device-side assert triggered), returned by %s: the CUDA context is lost; nothing more "
           "runs on the GPU in this process\n",
           r->api);
    if (py_line(&r->python, line, sizeof line)[0])
        APPEND("  found at: %s\n", line);
    APPEND("  %s\n", NOTE);
    int mine = 0, shown = 0;
    for (int i = 0; i < r->n; i++)
        mine += r->c[i].finder;
    if (mine && r->launch_blocking) {
        APPEND("  CUDA_LAUNCH_BLOCKING=1: the kernel is this thread's newest launch:\n");
        candidate_text(out, cap, &n, &r->c[0], false);
    } else if (mine) {
        APPEND("  the kernel is most likely one of this thread's last launches, newest first:\n");
        for (int i = 0; i < r->n && shown < TEXT_MINE; i++)
            if (r->c[i].finder)
                candidate_text(out, cap, &n, &r->c[i], false), shown++;
        if (mine > shown)
            APPEND("    ... %d more in the log\n", mine - shown);
    } else {
        APPEND("  this thread launched no kernel that labelguard saw\n");
    }
    int others = r->n - mine;
    if (others > 0 && !r->launch_blocking) {
        APPEND("  or of another thread's (autograd's backward runs on its own), newest first:\n");
        shown = 0;
        for (int i = 0; i < r->n && shown < TEXT_OTHERS; i++)
            if (!r->c[i].finder)
                candidate_text(out, cap, &n, &r->c[i], true), shown++;
        if (others > shown)
            APPEND("    ... %d more in the log\n", others - shown);
    }
    bool sites = false;
    for (int i = 0; i < r->n; i++)
        sites |= r->c[i].python != NULL;
    if (!r->launch_blocking || !sites)
        APPEND("  for the exact kernel and its line: rerun with CUDA_LAUNCH_BLOCKING=1%s\n",
               sites ? "" : " LABELGUARD_LAUNCH_SITES=all");
    APPEND("  which asserts labelguard checks before launch: labelguard audit --asserts\n");
    if (log_path && log_path[0])
        APPEND("  log: %s\n", lg_text_safe(log_path, safe, sizeof safe));
    return n < (int)cap ? (size_t)n : cap - 1;
}

void lg_report_device_assert(const lg_assert_report_t *r)
{
    char native[LG_MAX_FRAMES][256];
    int n_native = r->native.n > 0 ? lg_stack_symbolize(&r->native, native, LG_MAX_FRAMES) : 0;

    lg_report_lock();
    lg_json_t j;
    lg_report_line(&j, "device_assert");
    lg_json_int(&j, "error", 710);
    lg_json_string(&j, "error_name", "cudaErrorAssert");
    lg_json_string(&j, "found_at", r->api);
    lg_json_bool(&j, "checked_before_launch", false);
    lg_json_bool(&j, "launch_blocking", r->launch_blocking);
    lg_json_string(&j, "note", NOTE);
    lg_report_stacks_json(&j, native, n_native, &r->python);
    lg_json_begin_array(&j, "candidates");
    for (int i = 0; i < r->n; i++)
        candidate_json(&j, &r->c[i]);
    lg_json_end_array(&j);
    lg_report_emit(&j, true);
    if (!lg_config_values.quiet) {
        static char buf[TEXT_CAP];
        size_t n = text(buf, sizeof buf, r, lg_log_path());
        lg_log_stderr(buf, n);
    }
    lg_report_unlock();
}
