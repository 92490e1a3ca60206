/* test_report.c: unit tests of src/report/report.c: the JSONL events of DESIGN.md §4 (parsed with the
 * strict parser of json_check.h, every field checked), the stderr block, file naming with and
 * without rank variables, safe creation, unwritable directories, a full disk, 16 threads and
 * fork; the public API's copy of the last violation (the logged line, byte for byte, readable
 * from any thread while others report) and the configuration object. Each test points lg_config_values.log_dir at a fresh directory and resets the module with
 * lg_report_after_fork_child (its only reset).
 * Run: make build/tests/unit/test_report && build/tests/unit/test_report
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "json_check.h"

static char *tmp_root;

static void clear_rank_env(void)
{
    const char *vars[] = { "RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK" };
    for (size_t i = 0; i < G_N_ELEMENTS(vars); i++)
        unsetenv(vars[i]);
}

/* A fresh log directory (not created yet) and a reset module. Returns the directory. */
static char *fresh(const char *name)
{
    char *dir = g_strdup_printf("%s/%s/logs", tmp_root, name);
    snprintf(lg_config_values.log_dir, sizeof(lg_config_values.log_dir), "%s", dir);
    lg_config_values.quiet = false;
    lg_config_values.samples = 16;
    lg_config_values.action = LG_ACTION_RAISE;
    lg_config_values.backtrace_native = true;
    lg_config_values.backtrace_python = true;
    clear_rank_env();
    lg_report_after_fork_child();
    return dir;
}

/* stderr capture around a block of calls. */
static int saved_stderr = -1;
static char *capture_path;
static void capture_begin(void)
{
    fflush(stderr);
    capture_path = g_strdup_printf("%s/stderr-%d.txt", tmp_root, g_random_int());
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(fd, >=, 0);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}
static char *capture_end(void)
{
    dup2(saved_stderr, 2);
    close(saved_stderr);
    char *text = NULL;
    g_assert_true(g_file_get_contents(capture_path, &text, NULL, NULL));
    g_unlink(capture_path);
    g_free(capture_path);
    return text;
}

static char *expected_host(void)
{
    char h[256];
    gethostname(h, sizeof(h));
    h[255] = '\0';
    for (char *p = h; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '-' && *p != '.' && *p != '_')
            *p = '_';
    return g_strdup(h);
}

/* Parses every line of a JSONL text; fails the test on any invalid line. */
static GPtrArray *parse_lines(const char *text)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)jc_free);
    char **lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i]; i++) {
        if (!lines[i][0])
            continue;
        char err[160];
        jc_value_t *v = jc_parse(lines[i], strlen(lines[i]), err);
        if (!v)
            g_test_message("line %d not JSON (%s): %s", i, err, lines[i]);
        g_assert_nonnull(v);
        g_ptr_array_add(out, v);
    }
    g_strfreev(lines);
    return out;
}

static GPtrArray *read_log(const char *path)
{
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_true(g_str_has_suffix(text, "\n"));
    GPtrArray *lines = parse_lines(text);
    g_free(text);
    return lines;
}

static const char *str_at(const jc_value_t *v, const char *path)
{
    jc_value_t *x = jc_path(v, path);
    if (!x || x->type != JC_STRING)
        g_test_message("%s is not a string", path);
    g_assert_nonnull(x);
    g_assert_cmpint(x->type, ==, JC_STRING);
    return x->str;
}
static long long int_at(const jc_value_t *v, const char *path)
{
    jc_value_t *x = jc_path(v, path);
    if (!x || x->type != JC_NUMBER || !x->is_int)
        g_test_message("%s is not an integer", path);
    g_assert_nonnull(x);
    g_assert_true(x->type == JC_NUMBER && x->is_int);
    return x->i;
}
static bool is_null(const jc_value_t *v, const char *path)
{
    jc_value_t *x = jc_path(v, path);
    return x && x->type == JC_NULL;
}

/* Every line: v, event, time (RFC 3339 UTC), host, pid, tid, rank, local_rank. */
static void check_common(const jc_value_t *e, const char *event)
{
    g_assert_cmpint(int_at(e, "v"), ==, 1);
    g_assert_cmpstr(str_at(e, "event"), ==, event);
    g_assert_true(g_regex_match_simple("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z$", str_at(e, "time"), 0, 0));
    GDateTime *dt = g_date_time_new_from_iso8601(str_at(e, "time"), NULL);
    g_assert_nonnull(dt);
    GDateTime *now = g_date_time_new_now_utc();
    g_assert_cmpint(llabs(g_date_time_difference(now, dt)), <, 60 * G_TIME_SPAN_SECOND);
    g_date_time_unref(dt);
    g_date_time_unref(now);
    char *host = expected_host();
    g_assert_cmpstr(str_at(e, "host"), ==, host);
    g_free(host);
    g_assert_cmpint(int_at(e, "pid"), ==, getpid());
    g_assert_cmpint(int_at(e, "tid"), >, 0);
    g_assert_nonnull(jc_get(e, "rank"));
    g_assert_nonnull(jc_get(e, "local_rank"));
}

static lg_spec_t spec_2d = { .name = "nll_loss_forward_reduce_cuda_kernel_2d", .family = "nll_loss", .direction = LG_DIR_FORWARD };

/* The likely cause, as act.c computes it for every violation before it is reported. */
static void set_cause(lg_violation_t *v)
{
    bool dense = v->target.ndim >= 2 || (v->spec && strstr(v->spec->family, "2d"));
    v->cause = lg_cause_classify(&v->target, &v->verdict, dense);
    lg_cause_explain(v->cause, &v->target, &v->verdict, v->cause_text, sizeof v->cause_text);
}

/* The example of docs/guide.md "Reading a report": 64 labels 1..10 except some 0..9, 10 classes, three labels equal 10. */
static void make_violation(lg_violation_t *v)
{
    memset(v, 0, sizeof(*v));
    v->mangled = "_ZN2at6native51_GLOBAL__N__nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S3_PKT0_";
    v->spec = &spec_2d;
    snprintf(v->short_name, sizeof(v->short_name), "nll_loss_forward_reduce_cuda_kernel_2d");
    v->launch_seq = 42;
    v->stream = (void *)0x7f00beef;
    v->device = 0;
    int64_t labels[64];
    for (int i = 0; i < 64; i++)
        labels[i] = 1 + i % 9;
    labels[17] = labels[40] = labels[63] = 10;
    v->target = (lg_target_t){ .data = 0, .dtype = LG_DTYPE_INT64, .ndim = 1, .sizes = { 64 }, .strides = { 1 },
                               .count = 64, .n_classes = 10, .ignore_index = -100, .has_ignore_index = 1 };
    lg_scan_host(&v->target, labels, 16, &v->verdict);
    v->action = LG_ACTION_RAISE;
    v->outcome = "blocked";
    lg_stack_capture(&v->native);
    v->python.n = 2;
    snprintf(v->python.frames[0].file, 192, "train.py");
    snprintf(v->python.frames[0].function, 96, "<module>");
    v->python.frames[0].line = 80;
    snprintf(v->python.frames[1].file, 192, "train.py");
    snprintf(v->python.frames[1].function, 96, "train_step");
    v->python.frames[1].line = 42;
    set_cause(v);
}

static void test_no_event_no_file(void)
{
    char *dir = fresh("none");
    g_assert_cmpstr(lg_report_log_path(), ==, "");
    lg_violation_t v;
    make_violation(&v);
    char msg[1024];
    lg_report_violation_message(&v, msg, sizeof(msg)); /* not an event */
    g_assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
    g_assert_cmpstr(lg_report_log_path(), ==, "");
    g_free(dir);
}

static void test_violation_event(void)
{
    char *dir = fresh("violation");
    lg_violation_t v;
    make_violation(&v);
    capture_begin();
    lg_report_violation(&v, true);
    char *err = capture_end();

    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    g_assert_cmpstr(lg_report_log_path(), ==, path);
    struct stat st;
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0600);
    g_assert_cmpint(stat(dir, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0700);

    GPtrArray *lines = read_log(path);
    g_assert_cmpuint(lines->len, ==, 1);
    jc_value_t *e = lines->pdata[0];
    check_common(e, "violation");
    g_assert_true(is_null(e, "rank"));
    g_assert_true(is_null(e, "local_rank"));
    g_assert_cmpstr(str_at(e, "kernel"), ==, "nll_loss_forward_reduce_cuda_kernel_2d");
    g_assert_cmpstr(str_at(e, "symbol"), ==, v.mangled);
    g_assert_cmpstr(str_at(e, "family"), ==, "nll_loss");
    g_assert_cmpstr(str_at(e, "direction"), ==, "forward");
    g_assert_cmpint(int_at(e, "launch_seq"), ==, 42);
    g_assert_cmpstr(str_at(e, "stream"), ==, "0x7f00beef");
    g_assert_cmpint(int_at(e, "device"), ==, 0);
    g_assert_cmpstr(str_at(e, "target.dtype"), ==, "int64");
    g_assert_cmpint(int_at(e, "target.count"), ==, 64);
    g_assert_cmpint(int_at(e, "target.n_classes"), ==, 10);
    g_assert_cmpint(int_at(e, "target.ignore_index"), ==, -100);
    g_assert_cmpint(int_at(e, "bad.count"), ==, 3);
    g_assert_cmpint(int_at(e, "bad.min"), ==, 1);
    g_assert_cmpint(int_at(e, "bad.max"), ==, 10);
    jc_value_t *samples = jc_path(e, "bad.samples");
    g_assert_cmpint(samples->type, ==, JC_ARRAY);
    g_assert_cmpint(samples->n, ==, 3);
    g_assert_cmpint(int_at(samples->items[0], "index"), ==, 17);
    g_assert_cmpint(int_at(samples->items[0], "value"), ==, 10);
    g_assert_cmpint(int_at(samples->items[2], "index"), ==, 63);
    g_assert_cmpstr(str_at(e, "cause"), ==, "one_based");
    g_assert_cmpstr(str_at(e, "action"), ==, "raise");
    g_assert_cmpstr(str_at(e, "outcome"), ==, "blocked");
    g_assert_null(jc_get(e, "note"));
    jc_value_t *ns = jc_get(e, "native_stack");
    g_assert_cmpint(ns->type, ==, JC_ARRAY);
    g_assert_cmpint(ns->n, >=, 1); /* libc/glib frames below this test's own */
    for (int i = 0; i < ns->n; i++)
        g_assert_cmpint(ns->items[i]->type, ==, JC_STRING);
    jc_value_t *py = jc_get(e, "python_stack");
    g_assert_cmpint(py->n, ==, 2);
    g_assert_cmpstr(str_at(py->items[1], "file"), ==, "train.py");
    g_assert_cmpint(int_at(py->items[1], "line"), ==, 42);
    g_assert_cmpstr(str_at(py->items[1], "function"), ==, "train_step");
    g_assert_cmpstr(str_at(e, "python_stack_thread"), ==, "launching");

    /* The stderr block, line by line. */
    g_test_message("stderr:\n%s", err);
    char **tl = g_strsplit(err, "\n", -1);
    g_assert_cmpstr(tl[0], ==, "labelguard: bad labels in nll_loss_forward_reduce_cuda_kernel_2d (forward)");
    g_assert_true(g_regex_match_simple("^  target\\[17\\] = 10 +target\\[40\\] = 10 +target\\[63\\] = 10$", tl[1], 0, 0));
    g_assert_cmpstr(tl[2], ==, "  3 of 64 labels outside [0, 10)  (ignore_index = -100)  min 1, max 10");
    g_assert_true(g_str_has_prefix(tl[3], "  likely cause: one_based — labels span 1..10 with 10 classes; they look 1-based: subtract 1"));
    g_assert_true(g_str_has_prefix(tl[4], "  action: raise → launch blocked, CUDA context intact"));
    g_assert_cmpstr(tl[5], ==, "  at train.py:42 in train_step   (python)");
    char *logline = g_strdup_printf("  log: %s", path);
    g_assert_cmpstr(tl[6], ==, logline);
    g_assert_cmpstr(tl[7], ==, "");
    g_assert_null(tl[8]);
    g_strfreev(tl);

    /* The raise message. */
    char msg[1024], want[1024];
    lg_report_violation_message(&v, msg, sizeof(msg));
    snprintf(want, sizeof(want), "labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted and "
             "CUDA_LAUNCH_BLOCKING hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad label target[17] = 10, outside [0, 10) "
             "(ignore_index -100; 3 of 64 labels bad); launch blocked, the CUDA context is intact; likely cause: one_based: "
             "subtract 1; details in %s", path);
    g_assert_cmpstr(msg, ==, want);
    /* Without samples the range stands in for the value. */
    v.verdict.n_samples = 0;
    lg_report_violation_message(&v, msg, sizeof(msg));
    g_assert_true(strstr(msg, "hints below): nll_loss_forward_reduce_cuda_kernel_2d: bad labels (min 1, max 10), outside [0, 10)"));
    /* A short buffer truncates, never overflows. */
    char small[16];
    memset(small, 'X', sizeof(small));
    lg_report_violation_message(&v, small, 8);
    g_assert_cmpstr(small, ==, "labelgu");
    g_assert_cmpint(small[8], ==, 'X');

    g_free(logline);
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(path);
    g_free(host);
    g_free(dir);
}

/* Dense target, main-thread Python stack, a note, a masked outcome, uint8, samples capped. */
static void test_violation_variants(void)
{
    char *dir = fresh("variants");
    lg_config_values.samples = 2;
    lg_violation_t v;
    memset(&v, 0, sizeof(v));
    v.mangled = "_Z25nll_loss2d_forward_kernelIhEvv";
    v.spec = NULL; /* no spec: family/direction null */
    snprintf(v.short_name, sizeof(v.short_name), "nll_loss2d \"quoted\"\n\x01name\xff");
    static uint8_t labels[2 * 4 * 4];
    for (int i = 0; i < 32; i++)
        labels[i] = (uint8_t)(i % 5 == 0 ? 255 : i % 3);
    v.target = (lg_target_t){ .dtype = LG_DTYPE_UINT8, .ndim = 3, .sizes = { 2, 4, 4 }, .strides = { 16, 4, 1 }, .count = 32,
                              .n_classes = 3, .ignore_index = -100, .has_ignore_index = 1 };
    lg_scan_host(&v.target, labels, 16, &v.verdict);
    set_cause(&v);
    v.action = LG_ACTION_MASK;
    v.outcome = "masked";
    snprintf(v.note, sizeof(v.note), "uint8 target: bad labels set to 254 and ignore_index rewritten to match");
    v.python.n = 1;
    v.python.from_main_thread = true;
    snprintf(v.python.frames[0].file, 192, "/srv/job/train \"x\".py");
    snprintf(v.python.frames[0].function, 96, "main");
    v.python.frames[0].line = 7;
    capture_begin();
    lg_report_violation(&v, false);
    char *err = capture_end();
    g_test_message("stderr:\n%s", err);
    g_assert_true(g_utf8_validate(err, -1, NULL));

    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpuint(lines->len, ==, 1);
    jc_value_t *e = lines->pdata[0];
    check_common(e, "violation");
    g_assert_cmpstr(str_at(e, "kernel"), ==, "nll_loss2d \"quoted\"\n\x01name\xef\xbf\xbd");
    g_assert_true(is_null(e, "family"));
    g_assert_true(is_null(e, "direction"));
    g_assert_cmpstr(str_at(e, "target.dtype"), ==, "uint8");
    g_assert_cmpint(jc_path(e, "bad.samples")->n, ==, 2); /* LABELGUARD_SAMPLES=2 */
    g_assert_cmpint(int_at(e, "bad.count"), ==, v.verdict.bad_count);
    g_assert_cmpstr(str_at(e, "cause"), ==, "void_255");
    g_assert_cmpstr(str_at(e, "outcome"), ==, "masked");
    g_assert_cmpstr(str_at(e, "action"), ==, "mask");
    g_assert_cmpstr(str_at(e, "note"), ==, v.note);
    g_assert_cmpint(jc_get(e, "native_stack")->n, ==, 0);
    g_assert_cmpstr(str_at(e, "python_stack_thread"), ==, "main");
    g_assert_cmpstr(str_at(jc_get(e, "python_stack")->items[0], "file"), ==, "/srv/job/train \"x\".py");

    /* Coordinates for a dense target: index 5 of a 2x4x4 target is [0][1][1]. */
    g_assert_nonnull(strstr(err, "target[0][0][0] = 255"));
    g_assert_nonnull(strstr(err, "target[0][1][1] = 255"));
    g_assert_nonnull(strstr(err, "likely cause: void_255"));
    g_assert_nonnull(strstr(err, "  note: uint8 target"));
    g_assert_nonnull(strstr(err, "(python, main thread"));
    /* Control characters and invalid UTF-8 of the kernel name never reach the terminal. */
    g_assert_nonnull(strstr(err, "labelguard: bad labels in nll_loss2d \"quoted\"??name?\n"));
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(dir);
}

/* The "at" line names the user's frame, not torch's, and the innermost one as "via". */
static void test_user_frame(void)
{
    char *dir = fresh("userframe");
    lg_violation_t v;
    make_violation(&v);
    v.python.n = 4;
    snprintf(v.python.frames[2].file, 192, "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py");
    snprintf(v.python.frames[2].function, 96, "cross_entropy");
    v.python.frames[2].line = 3053;
    snprintf(v.python.frames[3].file, 192, "/usr/lib/python3.11/contextlib.py");
    snprintf(v.python.frames[3].function, 96, "inner");
    v.python.frames[3].line = 81;
    capture_begin();
    lg_report_violation(&v, false);
    char *err = capture_end();
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, "\n  at train.py:42 in train_step   (python)\n    via contextlib.py:81 in inner\n"));
    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpint(jc_get(lines->pdata[0], "python_stack")->n, ==, 4);
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(dir);
}

/* A compiled graph's check op (python/labelguard/_compiled.py, a checkout's path: no installed
 * package) runs under Inductor's output code; the user's line is the compiled function's caller. */
/* A range target (BCE) that ran: the action line speaks of its values, not of labels. */
static void test_range_launched(void)
{
    char *dir = fresh("range_launched");
    lg_violation_t v;
    make_violation(&v);
    v.target.dtype = LG_DTYPE_FLOAT32;
    v.target.operand = 1;
    v.outcome = "launched";
    capture_begin();
    lg_report_violation(&v, true);
    char *err = capture_end();
    g_test_message("stderr:\n%s", err);
    g_assert_nonnull(strstr(err, " → the kernel ran on these targets as they were (its device-side assert may fire)"));
    g_assert_null(strstr(err, "labels (its device-side"));
    g_free(err);
    g_free(dir);
}

/* The same, read after the launch (async mode): the raised text says the kernel ran on the
 * values shown, never that the launch was blocked or that labels were masked. */
static void test_range_late_message(void)
{
    lg_violation_t v;
    make_violation(&v);
    v.target.dtype = LG_DTYPE_FLOAT32;
    v.outcome = "launched";
    v.late = true;
    char msg[1024];
    lg_text_error_message(&v, "", msg, sizeof msg);
    g_test_message("%s", msg);
    g_assert_nonnull(strstr(msg, "the kernel ran on these values as they were (checked after it ran)"));
    g_assert_null(strstr(msg, "launch blocked"));
    g_assert_null(strstr(msg, "masked"));
    v.late = false;
    lg_text_error_message(&v, "", msg, sizeof msg);
    g_assert_nonnull(strstr(msg, "launch blocked"));
}

static void test_user_frame_compiled(void)
{
    lg_py_stack_t py;
    memset(&py, 0, sizeof py);
    const char *frames[][2] = {
        {"/srv/job/train.py", "<module>"},
        {"/opt/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", "compile_wrapper"},
        {"/srv/job/train.py", "step"},
        {"/opt/venv/lib/python3.11/site-packages/torch/_inductor/output_code.py", "__call__"},
        {"/tmp/torchinductor_me/lf/clfl3ww6rr7ezpmdn3uiri7mcysr5dbyxdh4eyojatkot5klgqd6.py", "call"},
        {"/opt/venv/lib/python3.11/site-packages/torch/_ops.py", "__call__"},
        {"/src/labelguard/python/labelguard/_compiled.py", "check"},
    };
    py.n = (int)G_N_ELEMENTS(frames);
    for (int i = 0; i < py.n; i++) {
        snprintf(py.frames[i].file, sizeof py.frames[i].file, "%s", frames[i][0]);
        snprintf(py.frames[i].function, sizeof py.frames[i].function, "%s", frames[i][1]);
    }
    g_assert_cmpint(lg_text_user_frame(&py), ==, 2);
    /* a user's file that only looks like Inductor's (wrong directory, short name) stays the user's */
    snprintf(py.frames[4].file, sizeof py.frames[4].file, "/srv/job/xx/clfl3ww6rr7ezpmdn3uiri7mcysr5dbyx.py");
    g_assert_cmpint(lg_text_user_frame(&py), ==, 4);
    snprintf(py.frames[4].file, sizeof py.frames[4].file, "/srv/job/lf/clf.py");
    g_assert_cmpint(lg_text_user_frame(&py), ==, 4);
}

/* A torch.compile'd op's violation carries the model's line (api_check.c, through act.c): the
 * event has model_line, the stderr block a "model line:" right above its `at` line; a violation
 * without one has neither. */
static void test_model_line(void)
{
    char *dir = fresh("model_line");
    lg_violation_t v;
    make_violation(&v);
    v.model_line = "/srv/job/model.py:12 in forward: h = self.tok_embeddings(tokens)";
    capture_begin();
    lg_report_violation(&v, true);
    char *err = capture_end();
    v.model_line = NULL;
    g_test_message("stderr:\n%s", err);
    const char *model =
        strstr(err, "\n  model line: /srv/job/model.py:12 in forward: h = self.tok_embeddings(tokens)\n");
    g_assert_nonnull(model);
    g_assert_true(strncmp(strchr(model + 1, '\n'), "\n  at train.py:42 in train_step", 31) == 0);
    capture_begin();
    lg_report_violation(&v, true);
    char *after = capture_end();
    g_assert_null(strstr(after, "model line"));

    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    GPtrArray *lines = read_log(path);
    g_assert_cmpuint(lines->len, ==, 2);
    g_assert_cmpstr(str_at(lines->pdata[0], "model_line"), ==,
                    "/srv/job/model.py:12 in forward: h = self.tok_embeddings(tokens)");
    g_assert_null(jc_get(lines->pdata[1], "model_line"));
    g_ptr_array_unref(lines);
    g_free(path);
    g_free(host);
    g_free(after);
    g_free(err);
    g_free(dir);
}

/* The device_assert event: where it was found, the candidates (the finder's, with a recorded
 * launch line, then another thread's), and the stderr block that lists them. */
static const jc_value_t *nth(const jc_value_t *v, const char *path, int i)
{
    const jc_value_t *a = jc_path(v, path);
    g_assert_true(a && a->type == JC_ARRAY && i < a->n);
    return a->items[i];
}

static void test_device_assert(void)
{
    char *dir = fresh("device_assert");
    static lg_py_stack_t found, launched;
    memset(&found, 0, sizeof found);
    memset(&launched, 0, sizeof launched);
    found.n = 1;
    snprintf(found.frames[0].file, sizeof found.frames[0].file, "train.py");
    snprintf(found.frames[0].function, sizeof found.frames[0].function, "train");
    found.frames[0].line = 47;
    launched = found;
    launched.frames[0].line = 42;
    lg_assert_candidate_t c[2];
    memset(c, 0, sizeof c);
    snprintf(c[0].kernel, sizeof c[0].kernel, "lgas_histogram");
    c[0].symbol = "_Z14lgas_histogramPKiiiPi";
    c[0].grid[0] = c[0].grid[1] = c[0].grid[2] = 1;
    c[0].block[0] = 128, c[0].block[1] = c[0].block[2] = 1;
    c[0].tid = 100, c[0].finder = true, c[0].python = &launched;
    snprintf(c[1].kernel, sizeof c[1].kernel, "embedding_backward_kernel");
    c[1].grid[0] = 4, c[1].grid[1] = c[1].grid[2] = 1;
    c[1].block[0] = 256, c[1].block[1] = c[1].block[2] = 1;
    c[1].stream = (const void *)0x5000, c[1].tid = 101, c[1].checked = true;
    lg_assert_report_t r;
    memset(&r, 0, sizeof r);
    r.api = "cudaStreamSynchronize";
    r.python = found;
    r.n = 2;
    r.c = c;
    capture_begin();
    lg_report_device_assert(&r);
    char *err = capture_end();
    g_test_message("stderr:\n%s", err);
    g_assert_nonnull(strstr(err, "labelguard: a device-side assert fired in a kernel labelguard does not check"));
    g_assert_nonnull(strstr(err, "returned by cudaStreamSynchronize"));
    g_assert_nonnull(strstr(err, "  found at: train.py:47 in train\n"));
    g_assert_nonnull(strstr(err, "\n    lgas_histogram grid [1,1,1] block [128,1,1] stream 0x0, launched at "
                                 "train.py:42 in train\n"));
    g_assert_nonnull(strstr(err, "\n    tid 101: embedding_backward_kernel grid [4,1,1] block [256,1,1] stream "
                                 "0x5000 (checked by labelguard)\n"));
    g_assert_nonnull(strstr(err, "rerun with CUDA_LAUNCH_BLOCKING=1\n")); /* sites recorded: no more to ask */

    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    GPtrArray *lines = read_log(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const jc_value_t *e = lines->pdata[0];
    check_common(e, "device_assert");
    g_assert_cmpint(int_at(e, "error"), ==, 710);
    g_assert_cmpstr(str_at(e, "error_name"), ==, "cudaErrorAssert");
    g_assert_cmpstr(str_at(e, "found_at"), ==, "cudaStreamSynchronize");
    g_assert_cmpint(int_at(nth(e, "python_stack", 0), "line"), ==, 47);
    const jc_value_t *c0 = nth(e, "candidates", 0), *c1 = nth(e, "candidates", 1);
    g_assert_cmpstr(str_at(c0, "kernel"), ==, "lgas_histogram");
    g_assert_cmpstr(str_at(c0, "symbol"), ==, "_Z14lgas_histogramPKiiiPi");
    g_assert_cmpint(int_at(nth(c0, "python_stack", 0), "line"), ==, 42);
    g_assert_cmpint(nth(c0, "block", 0)->i, ==, 128);
    g_assert_null(jc_path(c0, "native_stack")); /* a recorded launch has no native part */
    g_assert_cmpint(int_at(c1, "thread"), ==, 101);
    g_assert_true(is_null(c1, "symbol"));
    g_assert_cmpstr(str_at(c1, "stream"), ==, "0x5000");
    g_assert_null(jc_path(c1, "python_stack"));
    g_ptr_array_unref(lines);
    g_free(path);
    g_free(host);
    g_free(err);
    g_free(dir);
}

/* The device_assert event with kernels torch.compile generated: each listed newest first with its
 * file, line, text and origin, the one a candidate launched marked on both sides, the dropped
 * ones counted; and the stderr lines that list them. */
static void test_device_assert_generated(void)
{
    char *dir = fresh("device_assert_generated");
    lg_generated_kernel_t g[2];
    memset(g, 0, sizeof g);
    snprintf(g[0].kernel, sizeof g[0].kernel, "triton_poi_fused_index_1");
    snprintf(g[0].file, sizeof g[0].file, "/tmp/torchinductor_u/ab/cab.py");
    snprintf(g[0].message, sizeof g[0].message, "index out of bounds: 0 <= tmp4 < 6");
    g[0].line = 21;
    snprintf(g[1].kernel, sizeof g[1].kernel, "triton_poi_fused_embedding_0");
    snprintf(g[1].file, sizeof g[1].file, "/tmp/torchinductor_u/xy/cxy.py");
    snprintf(g[1].message, sizeof g[1].message, "index out of bounds: 0 <= tmp3 < 32000");
    snprintf(g[1].source_nodes, sizeof g[1].source_nodes, "embedding");
    snprintf(g[1].aten_ops, sizeof g[1].aten_ops, "aten.embedding");
    g[1].line = 18;
    lg_assert_candidate_t c[1];
    memset(c, 0, sizeof c);
    snprintf(c[0].kernel, sizeof c[0].kernel, "triton_poi_fused_embedding_0");
    c[0].grid[0] = 8, c[0].grid[1] = c[0].grid[2] = 1;
    c[0].block[0] = 128, c[0].block[1] = c[0].block[2] = 1;
    c[0].tid = 100, c[0].finder = true, c[0].generated = &g[1];
    lg_assert_report_t r;
    memset(&r, 0, sizeof r);
    r.api = "cudaStreamSynchronize";
    r.driver_launches_seen = true;
    r.n = 1;
    r.c = c;
    r.n_generated = 2;
    r.generated_total = 5;
    r.generated = g;
    capture_begin();
    lg_report_device_assert(&r);
    char *err = capture_end();
    g_test_message("stderr:\n%s", err);
    g_assert_nonnull(strstr(err,
                            "\n    triton_poi_fused_embedding_0 grid [8,1,1] block [128,1,1] stream 0x0 (generated "
                            "by torch.compile: below)\n"));
    g_assert_nonnull(strstr(err, "kernels torch.compile generated with asserts of their own, not checked"));
    g_assert_nonnull(strstr(err, "\n    triton_poi_fused_index_1: `index out of bounds: 0 <= tmp4 < 6` at "
                                 "/tmp/torchinductor_u/ab/cab.py:21\n"));
    g_assert_nonnull(strstr(err, "\n    triton_poi_fused_embedding_0: `index out of bounds: 0 <= tmp3 < 32000` at "
                                 "/tmp/torchinductor_u/xy/cxy.py:18; source nodes: embedding; ATen: aten.embedding "
                                 "[launched: among the candidates above]\n"));
    g_assert_nonnull(strstr(err, "\n    (3 older ones not kept)\n"));
    g_assert_null(strstr(err, "LABELGUARD_HOOKS=cupti"));

    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    GPtrArray *lines = read_log(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const jc_value_t *e = lines->pdata[0];
    check_common(e, "device_assert");
    const jc_value_t *c0 = nth(e, "candidates", 0);
    g_assert_true(jc_path(c0, "generated") && jc_path(c0, "generated")->b);
    const jc_value_t *g0 = nth(e, "generated_kernels", 0), *g1 = nth(e, "generated_kernels", 1);
    g_assert_cmpstr(str_at(g0, "kernel"), ==, "triton_poi_fused_index_1");
    g_assert_cmpint(int_at(g0, "line"), ==, 21);
    g_assert_null(jc_path(g0, "source_nodes"));
    g_assert_false(jc_path(g0, "among_candidates")->b);
    g_assert_cmpstr(str_at(g1, "file"), ==, "/tmp/torchinductor_u/xy/cxy.py");
    g_assert_cmpstr(str_at(g1, "message"), ==, "index out of bounds: 0 <= tmp3 < 32000");
    g_assert_cmpstr(str_at(g1, "source_nodes"), ==, "embedding");
    g_assert_cmpstr(str_at(g1, "aten_ops"), ==, "aten.embedding");
    g_assert_true(jc_path(g1, "among_candidates")->b);
    g_assert_cmpint(int_at(e, "generated_kernels_dropped"), ==, 3);
    g_assert_true(jc_path(e, "driver_launches_seen")->b);
    g_ptr_array_unref(lines);
    g_free(path);
    g_free(host);
    g_free(err);
    g_free(dir);
}

/* Without CUPTI (driver launches unseen), a generated kernel is never a candidate: the event says
 * so (driver_launches_seen false) and stderr says how to get Triton's launches listed. */
static void test_device_assert_driver_unseen(void)
{
    char *dir = fresh("device_assert_driver_unseen");
    lg_generated_kernel_t g;
    memset(&g, 0, sizeof g);
    snprintf(g.kernel, sizeof g.kernel, "triton_poi_fused_embedding_0");
    snprintf(g.file, sizeof g.file, "/tmp/torchinductor_u/xy/cxy.py");
    snprintf(g.message, sizeof g.message, "index out of bounds: 0 <= tmp3 < 32000");
    g.line = 18;
    lg_assert_candidate_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.kernel, sizeof c.kernel, "vectorized_elementwise_kernel");
    c.grid[0] = c.grid[1] = c.grid[2] = 1;
    c.block[0] = c.block[1] = c.block[2] = 1;
    c.tid = 100, c.finder = true;
    lg_assert_report_t r;
    memset(&r, 0, sizeof r);
    r.api = "cudaStreamSynchronize";
    r.n = 1;
    r.c = &c;
    r.n_generated = r.generated_total = 1;
    r.generated = &g;
    capture_begin();
    lg_report_device_assert(&r);
    char *err = capture_end();
    g_test_message("stderr:\n%s", err);
    g_assert_nonnull(strstr(err, "/tmp/torchinductor_u/xy/cxy.py:18\n  Triton launches these through the driver API, "
                                 "which only CUPTI shows labelguard: none is among the candidates above. To see "
                                 "which ran last: rerun with LABELGUARD_HOOKS=cupti"));
    g_assert_null(strstr(err, "[launched"));
    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    GPtrArray *lines = read_log(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const jc_value_t *e = lines->pdata[0];
    g_assert_false(jc_path(e, "driver_launches_seen")->b);
    g_assert_false(jc_path(nth(e, "generated_kernels", 0), "among_candidates")->b);
    g_ptr_array_unref(lines);
    g_free(path);
    g_free(host);
    g_free(err);
    g_free(dir);
}

static void check_rank_file(const char *env_setup[], const char *suffix, long long rank, long long local_rank)
{
    char *dir = fresh("rank");
    char *sub = g_strdup_printf("%s/%d", dir, g_random_int());
    snprintf(lg_config_values.log_dir, sizeof(lg_config_values.log_dir), "%s", sub);
    for (int i = 0; env_setup[i]; i += 2)
        setenv(env_setup[i], env_setup[i + 1], 1);
    lg_config_values.quiet = true;
    lg_report_warning("test_rank", "detail");
    char *host = expected_host();
    char *path = g_strdup_printf("%s/%s-%d%s.jsonl", sub, host, (int)getpid(), suffix);
    g_assert_cmpstr(lg_report_log_path(), ==, path);
    GPtrArray *lines = read_log(path);
    jc_value_t *e = lines->pdata[0];
    check_common(e, "warning");
    if (rank < 0)
        g_assert_true(is_null(e, "rank"));
    else
        g_assert_cmpint(int_at(e, "rank"), ==, rank);
    if (local_rank < 0)
        g_assert_true(is_null(e, "local_rank"));
    else
        g_assert_cmpint(int_at(e, "local_rank"), ==, local_rank);
    g_ptr_array_unref(lines);
    g_free(path);
    g_free(host);
    g_free(sub);
    g_free(dir);
    clear_rank_env();
}

static void test_rank_naming(void)
{
    const char *torchrun[] = { "RANK", "3", "LOCAL_RANK", "1", NULL };
    check_rank_file(torchrun, "-rank3", 3, 1);
    const char *slurm[] = { "SLURM_PROCID", "12", "SLURM_LOCALID", "0", NULL };
    check_rank_file(slurm, "-rank12", 12, 0);
    const char *ompi[] = { "OMPI_COMM_WORLD_RANK", "7", "OMPI_COMM_WORLD_LOCAL_RANK", "3", NULL };
    check_rank_file(ompi, "-rank7", 7, 3);
    const char *invalid[] = { "RANK", "abc", "LOCAL_RANK", "-1", NULL };
    check_rank_file(invalid, "", -1, -1);
    const char *empty_and_huge[] = { "RANK", "", "LOCAL_RANK", "99999999999999999999", NULL };
    check_rank_file(empty_and_huge, "", -1, -1);
    const char *none[] = { NULL };
    check_rank_file(none, "", -1, -1);
}

static void test_start_and_summary(void)
{
    char *dir = fresh("start");
    lg_report_env_t env = { .hooks = "interpose,cupti", .backend = "host", .cuda_runtime = 13000, .driver = 0,
                            .device_name = "NVIDIA H200", .device_index = 0, .torch = NULL };
    lg_report_set_environment(&env);
    lg_report_start();
    lg_counters_t c = { .launches = 100, .watched = 10, .validated = 9, .violations = 1, .validate_ns_total = 123456789 };
    capture_begin();
    lg_report_summary(&c);
    char *err = capture_end();
    g_assert_nonnull(strstr(err, "1 launch with bad labels out of 10 watched"));
    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpuint(lines->len, ==, 2);
    jc_value_t *s = lines->pdata[0];
    check_common(s, "start");
    g_assert_cmpstr(str_at(s, "version"), ==, LG_VERSION);
    g_assert_cmpstr(str_at(s, "config.action"), ==, "raise");
    g_assert_cmpstr(str_at(s, "config.mode"), ==, lg_config_mode_name(lg_config_values.mode));
    g_assert_cmpstr(str_at(s, "config.log"), ==, dir);
    g_assert_cmpint(int_at(s, "config.samples"), ==, 16);
    g_assert_cmpstr(str_at(s, "config.backtrace"), ==, "native,python");
    jc_value_t *hooks = jc_get(s, "hooks");
    g_assert_cmpint(hooks->type, ==, JC_ARRAY);
    g_assert_cmpint(hooks->n, ==, 2);
    g_assert_cmpstr(hooks->items[0]->str, ==, "interpose");
    g_assert_cmpstr(hooks->items[1]->str, ==, "cupti");
    g_assert_cmpstr(str_at(s, "backend"), ==, "host");
    g_assert_cmpstr(str_at(s, "cuda_runtime"), ==, "13.0");
    g_assert_true(is_null(s, "driver"));
    g_assert_cmpstr(str_at(s, "device.name"), ==, "NVIDIA H200");
    g_assert_cmpint(int_at(s, "device.index"), ==, 0);
    g_assert_true(is_null(s, "torch"));
    jc_value_t *m = lines->pdata[1];
    check_common(m, "summary");
    g_assert_cmpint(int_at(m, "launches"), ==, 100);
    g_assert_cmpint(int_at(m, "watched"), ==, 10);
    g_assert_cmpint(int_at(m, "validated"), ==, 9);
    g_assert_cmpint(int_at(m, "violations"), ==, 1);
    g_assert_cmpint(int_at(m, "validate_ns_total"), ==, 123456789);
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(dir);
}

static void test_warnings(void)
{
    char *dir = fresh("warnings");
    capture_begin();
    lg_report_warning_once("cupti_unavailable", "no driver");
    lg_report_warning_once("cupti_unavailable", "no driver again");
    for (int i = 0; i < 15; i++)
        lg_report_warning("unknown_layout", "kernel \"x\" has 9 params");
    lg_report_note_once("cupti_slot_taken", "log only");
    lg_report_note_once("cupti_slot_taken", "log only, again");
    char *err = capture_end();
    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpuint(lines->len, ==, 17); /* once + 15 + note once: the log keeps every repeat */
    g_assert_cmpstr(str_at(lines->pdata[16], "what"), ==, "cupti_slot_taken");
    check_common(lines->pdata[0], "warning");
    g_assert_cmpstr(str_at(lines->pdata[0], "what"), ==, "cupti_unavailable");
    g_assert_cmpstr(str_at(lines->pdata[0], "detail"), ==, "no driver");
    g_assert_cmpstr(str_at(lines->pdata[1], "detail"), ==, "kernel \"x\" has 9 params");
    /* stderr: the once-warning once, the repeated one capped at 10 plus one line saying so. */
    char **tl = g_strsplit(err, "\n", -1);
    g_assert_cmpuint(g_strv_length(tl), ==, 1 + 10 + 1 + 1);
    g_assert_cmpstr(tl[0], ==, "labelguard: warning: cupti_unavailable: no driver");
    g_assert_nonnull(strstr(tl[11], "further warnings of this kind go to the log only"));
    g_strfreev(tl);
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(dir);
}

static void test_quiet(void)
{
    char *dir = fresh("quiet");
    lg_config_values.quiet = true;
    lg_violation_t v;
    make_violation(&v);
    capture_begin();
    lg_report_violation(&v, false);
    lg_report_warning("w", "d");
    char *err = capture_end();
    g_assert_cmpstr(err, ==, "");
    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpuint(lines->len, ==, 2);
    g_ptr_array_unref(lines);
    g_free(err);
    g_free(dir);
}

/* The log directory cannot be used: one warning with a hint, events on stderr as JSON lines. */
static void check_fallback(const char *log_dir)
{
    lg_report_after_fork_child();
    snprintf(lg_config_values.log_dir, sizeof(lg_config_values.log_dir), "%s", log_dir);
    lg_violation_t v;
    make_violation(&v);
    capture_begin();
    lg_report_warning("first", "one");
    lg_report_violation(&v, true);
    lg_report_warning("second", "two");
    char *err = capture_end();
    g_test_message("fallback for %s:\n%s", log_dir, err);
    g_assert_cmpstr(lg_report_log_path(), ==, "stderr");
    char **tl = g_strsplit(err, "\n", -1);
    int warnings = 0, json = 0;
    for (int i = 0; tl[i]; i++) {
        if (g_str_has_prefix(tl[i], "labelguard: warning: cannot write the log")) {
            warnings++;
            g_assert_true(g_str_has_prefix(tl[i + 1], "  hint: set LABELGUARD_LOG"));
        }
        if (tl[i][0] == '{') {
            char perr[160];
            jc_value_t *e = jc_parse(tl[i], strlen(tl[i]), perr);
            g_assert_nonnull(e);
            check_common(e, json == 1 ? "violation" : "warning");
            jc_free(e);
            json++;
        }
    }
    g_assert_cmpint(warnings, ==, 1);
    g_assert_cmpint(json, ==, 3);
    g_assert_nonnull(strstr(err, "  log: stderr"));
    g_strfreev(tl);
    g_free(err);
}

static void test_unwritable(void)
{
    char *dir = fresh("unwritable");
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    /* A regular file where the directory should be. */
    char *file = g_strdup_printf("%s/afile", dir);
    g_assert_true(g_file_set_contents(file, "x", 1, NULL));
    check_fallback(file);
    char *under_file = g_strdup_printf("%s/afile/sub", dir);
    check_fallback(under_file);
    /* A dangling symlink. */
    char *dangling = g_strdup_printf("%s/dangling", dir);
    g_assert_cmpint(symlink("/nonexistent/labelguard-target", dangling), ==, 0);
    check_fallback(dangling);
    g_assert_false(g_file_test("/nonexistent/labelguard-target", G_FILE_TEST_EXISTS));
    /* Read-only: root ignores mode bits, so use a file system that refuses writes to everyone. */
    check_fallback("/proc/self/labelguard-logs");
    check_fallback(""); /* config.c refuses it; report.c must not index before the string */
    if (geteuid() != 0) {
        char *ro = g_strdup_printf("%s/readonly", dir);
        g_assert_cmpint(g_mkdir(ro, 0500), ==, 0);
        check_fallback(ro);
        g_free(ro);
    }
    g_free(file);
    g_free(under_file);
    g_free(dangling);
    g_free(dir);
}

/* A planted symlink (or an old file) at the log's name is never written through. */
static void test_no_symlink_follow(void)
{
    char *dir = fresh("symlink");
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    char *host = expected_host();
    char *victim = g_strdup_printf("%s/victim", tmp_root);
    g_assert_true(g_file_set_contents(victim, "precious\n", -1, NULL));
    char *planted = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)getpid());
    g_assert_cmpint(symlink(victim, planted), ==, 0);
    lg_config_values.quiet = true;
    lg_report_warning("w", "d");
    char *content = NULL;
    g_assert_true(g_file_get_contents(victim, &content, NULL, NULL));
    g_assert_cmpstr(content, ==, "precious\n");
    char *next = g_strdup_printf("%s/%s-%d-2.jsonl", dir, host, (int)getpid());
    g_assert_cmpstr(lg_report_log_path(), ==, next);
    GPtrArray *lines = read_log(next);
    g_assert_cmpuint(lines->len, ==, 1);
    g_ptr_array_unref(lines);
    g_free(content);
    g_free(next);
    g_free(planted);
    g_free(victim);
    g_free(host);
    g_free(dir);
}

/* A full disk (simulated with RLIMIT_FSIZE, which fails write() with EFBIG like ENOSPC would):
 * the first line fits, the second does not; it and the following events go to stderr. */
static void test_full_disk(void)
{
    char *dir = fresh("full");
    fflush(stdout);
    fflush(stderr);
    int pfd[2];
    g_assert_cmpint(pipe(pfd), ==, 0); /* stderr into a pipe: the file size limit must not cut it */
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        lg_config_values.quiet = true;
        close(pfd[0]);
        dup2(pfd[1], 2);
        lg_report_warning("small", "fits");
        struct rlimit rl = { 1000, 1000 };
        setrlimit(RLIMIT_FSIZE, &rl);
        lg_violation_t v;
        make_violation(&v);
        lg_report_violation(&v, true);
        lg_report_warning("after", "goes to stderr");
        FILE *f = fopen(g_strdup_printf("%s/child-path", tmp_root), "w");
        fputs(lg_report_log_path(), f);
        fclose(f);
        _exit(0);
    }
    close(pfd[1]);
    GString *es = g_string_new(NULL);
    char chunk[4096];
    ssize_t r;
    while ((r = read(pfd[0], chunk, sizeof(chunk))) > 0)
        g_string_append_len(es, chunk, r);
    close(pfd[0]);
    char *err = g_string_free(es, FALSE);
    int status;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *p = g_strdup_printf("%s/child-path", tmp_root), *path = NULL;
    g_assert_true(g_file_get_contents(p, &path, NULL, NULL));
    g_assert_cmpstr(path, ==, "stderr");
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, "cannot write the log"));
    g_assert_nonnull(strstr(err, "\"event\":\"violation\""));
    g_assert_nonnull(strstr(err, "\"what\":\"after\""));
    /* The file holds the first line, complete; nothing torn after it. */
    char *host = expected_host();
    char *logp = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)pid);
    char *text = NULL;
    g_assert_true(g_file_get_contents(logp, &text, NULL, NULL));
    GPtrArray *lines = parse_lines(text);
    g_assert_cmpuint(lines->len, ==, 1);
    g_assert_cmpstr(str_at(lines->pdata[0], "what"), ==, "small");
    g_ptr_array_unref(lines);
    g_free(text);
    g_free(logp);
    g_free(host);
    g_free(err);
    g_free(path);
    g_free(p);
    g_free(dir);
}

static void *thread_main(void *arg)
{
    int id = GPOINTER_TO_INT(arg);
    lg_violation_t *v = g_new(lg_violation_t, 1);
    make_violation(v);
    v->launch_seq = (uint64_t)id;
    for (int i = 0; i < 20; i++) {
        v->launch_seq = (uint64_t)(id * 1000 + i);
        lg_report_violation(v, false);
        char detail[64];
        snprintf(detail, sizeof(detail), "thread %d event %d", id, i);
        lg_report_warning("thread_test", detail);
    }
    g_free(v);
    return NULL;
}

static void test_threads(void)
{
    char *dir = fresh("threads");
    lg_config_values.quiet = true;
    pthread_t t[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&t[i], NULL, thread_main, GINT_TO_POINTER(i));
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    GPtrArray *lines = read_log(lg_report_log_path());
    g_assert_cmpuint(lines->len, ==, 16 * 20 * 2);
    bool seen[16][20] = { { false } };
    for (guint i = 0; i < lines->len; i++) {
        jc_value_t *e = lines->pdata[i];
        if (strcmp(str_at(e, "event"), "violation") == 0) {
            long long seq = int_at(e, "launch_seq");
            int id = (int)(seq / 1000), k = (int)(seq % 1000);
            g_assert_false(seen[id][k]);
            seen[id][k] = true;
        }
    }
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 20; k++)
            g_assert_true(seen[i][k]);
    g_ptr_array_unref(lines);
    g_free(dir);
}

/* After fork the child writes its own file, never the parent's; with the atfork reset and
 * without it (the pid check). */
static void check_fork(bool call_reset)
{
    char *dir = fresh(call_reset ? "fork_reset" : "fork_nocall");
    lg_config_values.quiet = true;
    lg_report_warning("parent", "before fork");
    char *parent_path = g_strdup(lg_report_log_path());
    fflush(stdout);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        if (call_reset)
            lg_report_after_fork_child();
        lg_report_warning("child", "in child");
        _exit(strcmp(lg_report_log_path(), parent_path) == 0 ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    lg_report_warning("parent", "after fork");
    GPtrArray *lines = read_log(parent_path);
    g_assert_cmpuint(lines->len, ==, 2);
    for (guint i = 0; i < lines->len; i++)
        g_assert_cmpstr(str_at(lines->pdata[i], "what"), ==, "parent");
    g_ptr_array_unref(lines);
    char *host = expected_host();
    char *child_path = g_strdup_printf("%s/%s-%d.jsonl", dir, host, (int)pid);
    char *text = NULL;
    g_assert_true(g_file_get_contents(child_path, &text, NULL, NULL));
    lines = parse_lines(text);
    g_assert_cmpuint(lines->len, ==, 1);
    g_assert_cmpstr(str_at(lines->pdata[0], "what"), ==, "child");
    g_assert_cmpint(int_at(lines->pdata[0], "pid"), ==, pid);
    g_ptr_array_unref(lines);
    g_free(text);
    g_free(child_path);
    g_free(host);
    g_free(parent_path);
    g_free(dir);
}

static void test_fork(void)
{
    check_fork(true);
    check_fork(false);
}

/* labelguard_last_violation's record: 0 before any violation, then the logged line exactly
 * (without its newline), snprintf-like on a short buffer. Registered first: no violation has
 * been reported in this process before it. */
static void test_last_violation(void)
{
    char *dir = fresh("last");
    lg_config_values.quiet = true;
    char small[16] = "untouched";
    g_assert_cmpint(lg_report_violation_last(NULL, 0), ==, 0);
    g_assert_cmpint(lg_report_violation_last(small, sizeof small), ==, 0);
    g_assert_cmpstr(small, ==, "");
    lg_violation_t v;
    make_violation(&v);
    lg_report_violation(&v, false);
    v.launch_seq = 43;
    lg_report_violation(&v, false);

    char *text = NULL;
    g_assert_true(g_file_get_contents(lg_report_log_path(), &text, NULL, NULL));
    char **lines = g_strsplit(text, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 3); /* two lines and the empty tail */
    const char *last = lines[1];
    int n = lg_report_violation_last(small, sizeof small);
    g_assert_cmpint(n, ==, (int)strlen(last));
    g_assert_cmpuint(strlen(small), ==, sizeof small - 1);
    g_assert_true(strncmp(small, last, sizeof small - 1) == 0);
    char *buf = g_malloc((size_t)n + 1);
    g_assert_cmpint(lg_report_violation_last(buf, (size_t)n + 1), ==, n);
    g_assert_cmpstr(buf, ==, last);
    char err[160];
    jc_value_t *e = jc_parse(buf, strlen(buf), err);
    g_assert_nonnull(e);
    g_assert_cmpint(int_at(e, "launch_seq"), ==, 43);
    g_assert_cmpstr(str_at(e, "event"), ==, "violation");
    jc_free(e);
    g_free(buf);
    g_strfreev(lines);
    g_free(text);
    lg_config_values.quiet = false;
    g_free(dir);
}

static _Atomic int reporters_done;

static void *reporter(void *arg)
{
    lg_violation_t *v = g_new(lg_violation_t, 1);
    make_violation(v);
    for (int i = 0; i < 200; i++) {
        v->launch_seq = (uint64_t)(GPOINTER_TO_INT(arg) * 1000 + i);
        lg_report_violation(v, false);
    }
    g_free(v);
    reporters_done++;
    return NULL;
}

/* Read while four threads report: every copy is one whole event (never half of one line and
 * half of another). */
static void test_last_violation_threads(void)
{
    char *dir = fresh("last_threads");
    lg_config_values.quiet = true;
    reporters_done = 0;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, reporter, GINT_TO_POINTER(i + 1));
    static char buf[96 * 1024];
    int reads = 0;
    while (reporters_done < 4 || reads < 10) {
        int n = lg_report_violation_last(buf, sizeof buf);
        g_assert_cmpint(n, >, 0);
        g_assert_cmpint(n, <, (int)sizeof buf);
        char err[160];
        jc_value_t *e = jc_parse(buf, (size_t)n, err);
        if (!e)
            g_test_message("torn copy (%s): %s", err, buf);
        g_assert_nonnull(e);
        g_assert_cmpint(int_at(e, "launch_seq") % 1000, <, 200);
        jc_free(e);
        reads++;
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    lg_config_values.quiet = false;
    g_free(dir);
}

/* labelguard_config: the start event's `config`, the same object. */
static void test_config_json(void)
{
    char *dir = fresh("config");
    lg_config_values.samples = 7;
    lg_config_values.mode = LG_MODE_ASYNC;
    lg_report_start();
    GPtrArray *lines = read_log(lg_report_log_path());
    jc_value_t *cfg = jc_get(lines->pdata[0], "config");
    g_assert_nonnull(cfg);
    char tiny[4];
    int n = lg_report_config_json(tiny, sizeof tiny);
    g_assert_cmpint(n, >, (int)sizeof tiny);
    g_assert_cmpuint(strlen(tiny), ==, 3);
    char *buf = g_malloc((size_t)n + 1);
    g_assert_cmpint(lg_report_config_json(buf, (size_t)n + 1), ==, n);
    char err[160];
    jc_value_t *c = jc_parse(buf, strlen(buf), err);
    g_assert_nonnull(c);
    g_assert_cmpint(int_at(c, "samples"), ==, 7);
    g_assert_cmpstr(str_at(c, "mode"), ==, "async");
    g_assert_cmpstr(str_at(c, "log"), ==, dir);
    const char *keys[] = {"action", "mode", "hooks", "log", "backtrace"};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        g_assert_cmpstr(str_at(c, keys[i]), ==, str_at(cfg, keys[i]));
    g_assert_cmpint(int_at(c, "samples"), ==, int_at(cfg, "samples"));
    g_assert_true(is_null(c, "kernels") && is_null(cfg, "kernels"));
    jc_free(c);
    g_free(buf);
    g_ptr_array_unref(lines);
    lg_config_values.samples = 16;
    lg_config_values.mode = LG_MODE_SYNC;
    g_free(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp_root = g_dir_make_tmp("lg-test-report-XXXXXX", NULL);
    g_assert_nonnull(tmp_root);
    g_test_add_func("/report/last_violation", test_last_violation);
    g_test_add_func("/report/last_violation_threads", test_last_violation_threads);
    g_test_add_func("/report/config_json", test_config_json);
    g_test_add_func("/report/no_event_no_file", test_no_event_no_file);
    g_test_add_func("/report/violation_event", test_violation_event);
    g_test_add_func("/report/violation_variants", test_violation_variants);
    g_test_add_func("/report/user_frame", test_user_frame);
    g_test_add_func("/report/user_frame_compiled", test_user_frame_compiled);
    g_test_add_func("/report/range_launched", test_range_launched);
    g_test_add_func("/report/range_late_message", test_range_late_message);
    g_test_add_func("/report/model_line", test_model_line);
    g_test_add_func("/report/device_assert", test_device_assert);
    g_test_add_func("/report/device_assert_generated", test_device_assert_generated);
    g_test_add_func("/report/device_assert_driver_unseen", test_device_assert_driver_unseen);
    g_test_add_func("/report/rank_naming", test_rank_naming);
    g_test_add_func("/report/start_and_summary", test_start_and_summary);
    g_test_add_func("/report/warnings", test_warnings);
    g_test_add_func("/report/quiet", test_quiet);
    g_test_add_func("/report/unwritable", test_unwritable);
    g_test_add_func("/report/no_symlink_follow", test_no_symlink_follow);
    g_test_add_func("/report/full_disk", test_full_disk);
    g_test_add_func("/report/threads", test_threads);
    g_test_add_func("/report/fork", test_fork);
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    g_free(cmd);
    return rc;
}
