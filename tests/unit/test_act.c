/* test_act.c: src/core/act.c tested directly, without LD_PRELOAD: the policy table for every
 * action in every situation (sync before a skippable launch, before a CUPTI-only one, async
 * after the launch ran on the sanitized copy), the mask fallbacks, and lg_act itself on a
 * host-memory runtime (tests/unit/fake_runtime.h): the decision handed to the hook, the
 * rewritten arguments of a masked launch, the pending error and its message, the event in the
 * log, and abort (in a child) writing the summary before SIGABRT.
 * Run: build/tests/unit/test_act (or LG_TESTS=test_act bash tests/run.sh).
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_runtime.h"
#include "hooks/hooks.h"

/* ------------------------------------------------------------------ the policy table */

typedef struct {
    lg_action_t action;
    lg_act_when_t when;
    lg_mask_state_t mask;
    lg_outcome_t outcome;
    bool try_mask, skip, raise, hold, abort, flush;
    const char *note; /* a substring of the note, or NULL for none */
} row_t;

#define B LG_ACT_BEFORE
#define U LG_ACT_BEFORE_UNSKIPPABLE
#define A LG_ACT_AFTER
#define I LG_ACT_AFTER_AS_IS
static const row_t table[] = {
    /* action            when mask             outcome              try  skip raise hold abort flush note */
    {LG_ACTION_RAISE, B, LG_MASK_UNTRIED, LG_OUTCOME_BLOCKED, 0, 1, 1, 0, 0, 0, NULL},
    {LG_ACTION_HOLD, B, LG_MASK_UNTRIED, LG_OUTCOME_HELD, 0, 1, 1, 1, 0, 1, NULL},
    {LG_ACTION_MASK, B, LG_MASK_UNTRIED, LG_OUTCOME_MASKED, 1, 0, 0, 0, 0, 0, NULL},
    {LG_ACTION_MASK, B, LG_MASK_DONE, LG_OUTCOME_MASKED, 0, 0, 0, 0, 0, 0, NULL},
    {LG_ACTION_MASK, B, LG_MASK_FAILED, LG_OUTCOME_BLOCKED, 0, 1, 1, 0, 0, 0, "mask fell back to raise"},
    {LG_ACTION_LOG, B, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, NULL},
    {LG_ACTION_ABORT, B, LG_MASK_UNTRIED, LG_OUTCOME_ABORTED, 0, 0, 0, 0, 1, 1, NULL},
    /* CUPTI saw the launch alone: nothing can be skipped */
    {LG_ACTION_RAISE, U, LG_MASK_UNTRIED, LG_OUTCOME_MASKED, 1, 0, 0, 0, 0, 0, "raise fell back to mask"},
    {LG_ACTION_RAISE, U, LG_MASK_DONE, LG_OUTCOME_MASKED, 0, 0, 0, 0, 0, 0, "raise fell back to mask"},
    {LG_ACTION_RAISE, U, LG_MASK_FAILED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, "cannot be skipped"},
    {LG_ACTION_HOLD, U, LG_MASK_DONE, LG_OUTCOME_MASKED, 0, 0, 0, 0, 0, 0, "hold fell back to mask"},
    {LG_ACTION_MASK, U, LG_MASK_FAILED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, "mask failed"},
    {LG_ACTION_LOG, U, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, NULL},
    {LG_ACTION_ABORT, U, LG_MASK_UNTRIED, LG_OUTCOME_ABORTED, 0, 0, 0, 0, 1, 1, NULL},
    /* async: the launch already ran on the sanitized copy */
    {LG_ACTION_RAISE, A, LG_MASK_UNTRIED, LG_OUTCOME_MASKED, 0, 0, 1, 0, 0, 0, "raised as the next CUDA error"},
    {LG_ACTION_HOLD, A, LG_MASK_UNTRIED, LG_OUTCOME_MASKED, 0, 0, 1, 0, 0, 1, "too late to hold"},
    {LG_ACTION_MASK, A, LG_MASK_UNTRIED, LG_OUTCOME_MASKED, 0, 0, 0, 0, 0, 1, "async mode"},
    /* log after the launch only happens for a graph replay, which read its own labels */
    {LG_ACTION_LOG, A, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, "captured into a CUDA graph"},
    {LG_ACTION_ABORT, A, LG_MASK_UNTRIED, LG_OUTCOME_ABORTED, 0, 0, 0, 0, 1, 1, "async mode"},
    /* a captured launch that read its own ids: it ran as it was, the error is still raised */
    {LG_ACTION_RAISE, I, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 1, 0, 0, 1, "read its own ids"},
    {LG_ACTION_HOLD, I, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 1, 0, 0, 1, "device assert"},
    {LG_ACTION_MASK, I, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 1, 0, 0, 1, "raised as the next CUDA error"},
    {LG_ACTION_LOG, I, LG_MASK_UNTRIED, LG_OUTCOME_LAUNCHED, 0, 0, 0, 0, 0, 1, "captured into a CUDA graph"},
    {LG_ACTION_ABORT, I, LG_MASK_UNTRIED, LG_OUTCOME_ABORTED, 0, 0, 0, 0, 1, 1, NULL},
};

static void test_policy_table(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(table); i++) {
        const row_t *r = &table[i];
        lg_act_plan_t p = lg_act_policy(r->action, r->when, r->mask);
        g_test_message("row %zu: %s when=%d mask=%d -> %s", i, lg_config_action_name(r->action), r->when, r->mask,
                       lg_act_outcome_name(p.outcome));
        g_assert_cmpint(p.outcome, ==, r->outcome);
        g_assert_cmpint(p.try_mask, ==, r->try_mask);
        g_assert_cmpint(p.skip, ==, r->skip);
        g_assert_cmpint(p.raise, ==, r->raise);
        g_assert_cmpint(p.hold, ==, r->hold);
        g_assert_cmpint(p.abort, ==, r->abort);
        g_assert_cmpint(p.flush, ==, r->flush);
        if (r->note)
            g_assert_true(p.note && strstr(p.note, r->note));
        else
            g_assert_null(p.note);
    }
}

/* Sync and async agree wherever the launch's fate is not what differs: an abort always
 * writes the summary, and only a skippable launch is ever skipped. */
static void test_policy_invariants(void)
{
    for (int a = LG_ACTION_RAISE; a <= LG_ACTION_ABORT; a++)
        for (int w = LG_ACT_BEFORE; w <= LG_ACT_AFTER_AS_IS; w++)
            for (int m = LG_MASK_UNTRIED; m <= LG_MASK_FAILED; m++) {
                lg_act_plan_t p = lg_act_policy((lg_action_t)a, (lg_act_when_t)w, (lg_mask_state_t)m);
                g_assert_true(!p.skip || w == LG_ACT_BEFORE);
                g_assert_true(!p.hold || w == LG_ACT_BEFORE);
                g_assert_true(p.abort == (a == LG_ACTION_ABORT));
                g_assert_true(!p.abort || p.flush);
                g_assert_true(!p.try_mask || m == LG_MASK_UNTRIED);
                if (p.skip)
                    g_assert_true(p.raise); /* a skipped launch always leaves its error */
            }
}

static void test_mask_value(void)
{
    int64_t v;
    bool rw;
    lg_target_t t = {.dtype = LG_DTYPE_INT64, .n_classes = 5, .ignore_index = -100, .has_ignore_index = 1};
    g_assert_true(lg_act_mask_value(&t, &v, &rw));
    g_assert_cmpint(v, ==, -100);
    g_assert_false(rw);
    t.dtype = LG_DTYPE_UINT8; /* -100 does not fit: 255 is free with 5 classes */
    g_assert_true(lg_act_mask_value(&t, &v, &rw));
    g_assert_cmpint(v, ==, 255);
    g_assert_true(rw);
    t.ignore_index = 7;
    g_assert_true(lg_act_mask_value(&t, &v, &rw));
    g_assert_cmpint(v, ==, 7);
    g_assert_false(rw);
    t.ignore_index = -100;
    t.n_classes = 256; /* no free value */
    g_assert_false(lg_act_mask_value(&t, &v, &rw));
    t.has_ignore_index = 0;
    t.dtype = LG_DTYPE_INT64;
    g_assert_false(lg_act_mask_value(&t, &v, &rw));
}

/* ------------------------------------------------------------------ lg_act on a fake runtime */

/* A kernel (target*, count, n_classes, ignore_index), all 8-byte parameters. */
static lg_spec_t spec = {
    .name = "k", .family = "nll_loss", .n_params = 4, .param_sizes = {8, 8, 8, 8},
    .target = {.param = 0, .offset = 0, .width = 8}, .ignore_index = {.param = 3, .offset = 0, .width = 8, .is_signed = 1},
};
static lg_kernel_info_t info = {.mangled = "_Z1kPlllx", .spec = &spec, .short_name = "k"};

typedef struct {
    int64_t labels[8];
    uint64_t data;
    int64_t count, n_classes, ignore;
    void *args[4];
    lg_target_t t;
    lg_verdict_t v;
} launch_t;

static void make_launch(launch_t *l, bool has_ignore)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < 8; i++)
        l->labels[i] = i % 5;
    l->labels[3] = 9;
    l->data = (uint64_t)(uintptr_t)dev_copy_of(l->labels, sizeof l->labels);
    l->count = 8;
    l->n_classes = 5;
    l->ignore = -100;
    l->args[0] = &l->data;
    l->args[1] = &l->count;
    l->args[2] = &l->n_classes;
    l->args[3] = &l->ignore;
    l->t = (lg_target_t){.data = l->data, .dtype = LG_DTYPE_INT64, .ndim = 1, .sizes = {8}, .strides = {1}, .count = 8,
                         .n_classes = 5, .ignore_index = -100, .has_ignore_index = has_ignore};
    lg_scan_host(&l->t, l->labels, 16, &l->v);
    g_assert_cmpint(l->v.bad_count, ==, 1);
}

static char *log_dir;

/* The last event of the log, as text. */
static char *last_event(void)
{
    char *text = NULL;
    g_assert_true(g_file_get_contents(lg_report_log_path(), &text, NULL, NULL));
    char **lines = g_strsplit(text, "\n", -1);
    int n = (int)g_strv_length(lines);
    char *last = g_strdup(n >= 2 ? lines[n - 2] : "");
    g_strfreev(lines);
    g_free(text);
    return last;
}

static void act(lg_action_t action, lg_act_when_t when, launch_t *l, lg_decision_t *d)
{
    lg_config_values.action = action;
    lg_runtime_pending = 0;
    if (d) {
        memset(d, 0, sizeof *d);
        d->kind = LG_VERDICT_RUN;
    }
    lg_act_input_t in = {.when = when, .info = &info, .stream = NULL, .args = when >= LG_ACT_AFTER ? NULL : l->args,
                         .target = &l->t, .verdict = &l->v};
    lg_act(&fake_rt, &in, d);
}

static void test_act_raise(void)
{
    launch_t l;
    lg_decision_t d;
    make_launch(&l, true);
    uint64_t before = lg_act_violations();
    act(LG_ACTION_RAISE, LG_ACT_BEFORE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_SKIP);
    g_assert_cmpint(d.error, ==, LG_RAISE_ERROR);
    g_assert_cmpint(lg_runtime_pending, ==, LG_RAISE_ERROR);
    const char *msg = lg_runtime_error_message(LG_RAISE_ERROR);
    g_assert_nonnull(msg);
    g_assert_nonnull(strstr(msg, "bad label target[3] = 9, outside [0, 5)"));
    g_assert_null(lg_runtime_error_message(700));
    g_assert_cmpuint(lg_act_violations(), ==, before + 1);
    char *e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"blocked\""));
    g_assert_nonnull(strstr(e, "\"cause\":\"head_too_small\""));
    g_free(e);
}

static void test_act_mask(void)
{
    launch_t l;
    lg_decision_t d;
    make_launch(&l, true);
    act(LG_ACTION_MASK, LG_ACT_BEFORE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN_WITH);
    g_assert_cmpint(lg_runtime_pending, ==, 0);
    /* The copy's target pointer is new, the other arguments are the launch's own. */
    uint64_t copy;
    memcpy(&copy, d.args_copy.args[0], 8);
    g_assert_true(copy != l.data);
    g_assert_true(d.args_copy.args[1] == l.args[1]);
    const int64_t *masked = (const int64_t *)(uintptr_t)copy;
    g_assert_cmpint(masked[3], ==, -100);
    g_assert_cmpint(masked[4], ==, 4);
    char *e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"masked\""));
    g_free(e);
}

static void test_act_mask_falls_back(void)
{
    launch_t l;
    lg_decision_t d;
    make_launch(&l, false); /* no ignore_index: nothing to mask with */
    act(LG_ACTION_MASK, LG_ACT_BEFORE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_SKIP);
    g_assert_cmpint(lg_runtime_pending, ==, LG_RAISE_ERROR);
    char *e = last_event();
    g_assert_nonnull(strstr(e, "mask fell back to raise: this kernel has no ignore_index"));
    g_assert_nonnull(strstr(e, "\"outcome\":\"blocked\""));
    g_free(e);
    /* Seen only by CUPTI: the launch cannot be skipped either, so it runs as is. */
    act(LG_ACTION_RAISE, LG_ACT_BEFORE_UNSKIPPABLE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN);
    g_assert_cmpint(lg_runtime_pending, ==, 0);
    e = last_event();
    g_assert_nonnull(strstr(e, "cannot be skipped: it runs as is"));
    g_assert_nonnull(strstr(e, "\"outcome\":\"launched\""));
    g_free(e);
    /* ... and with an ignore_index the CUPTI-only raise becomes a mask. */
    make_launch(&l, true);
    act(LG_ACTION_RAISE, LG_ACT_BEFORE_UNSKIPPABLE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN_WITH);
    e = last_event();
    g_assert_nonnull(strstr(e, "raise fell back to mask"));
    g_free(e);
}

static void test_act_async(void)
{
    launch_t l;
    make_launch(&l, true);
    act(LG_ACTION_RAISE, LG_ACT_AFTER, &l, NULL);
    g_assert_cmpint(lg_runtime_pending, ==, LG_RAISE_ERROR); /* delivered at the next check */
    char *e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"masked\""));
    g_assert_nonnull(strstr(e, "raised as the next CUDA error"));
    g_free(e);
    act(LG_ACTION_HOLD, LG_ACT_AFTER, &l, NULL); /* returns: nothing is left to hold */
    g_assert_cmpint(lg_runtime_pending, ==, LG_RAISE_ERROR);
    act(LG_ACTION_MASK, LG_ACT_AFTER, &l, NULL);
    g_assert_cmpint(lg_runtime_pending, ==, 0);
    /* log after the launch (a graph replay in log mode): it ran on its own labels */
    act(LG_ACTION_LOG, LG_ACT_AFTER, &l, NULL);
    g_assert_cmpint(lg_runtime_pending, ==, 0);
    e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"launched\""));
    g_assert_nonnull(strstr(e, "captured into a CUDA graph"));
    g_free(e);
    /* a captured launch that kept its own ids: launched, and the error raised at the next sync */
    act(LG_ACTION_RAISE, LG_ACT_AFTER_AS_IS, &l, NULL);
    g_assert_cmpint(lg_runtime_pending, ==, LG_RAISE_ERROR);
    g_assert_true(lg_runtime_pending_sync);
    e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"launched\""));
    g_assert_nonnull(strstr(e, "read its own ids"));
    g_free(e);
    lg_runtime_forget_message();
}

/* Our text means cudaErrorNotPermitted only from the raise until the thread's next launch; a
 * second raise before it is delivered keeps the first one's text. */
static void test_act_message_lifetime(void)
{
    launch_t l;
    lg_decision_t d;
    make_launch(&l, true);
    act(LG_ACTION_RAISE, LG_ACT_BEFORE, &l, &d);
    const char *msg = lg_runtime_error_message(LG_RAISE_ERROR);
    g_assert_nonnull(msg);
    g_assert_true(g_str_has_prefix(msg, "labelguard: bad labels, not a CUDA fault (ignore the cudaErrorNotPermitted"));
    g_assert_false(lg_runtime_pending_sync); /* a blocked launch: returned by the launch itself */
    lg_runtime_forget_message();
    g_assert_null(lg_runtime_error_message(LG_RAISE_ERROR));
    /* async: delivered at the next synchronizing call too */
    act(LG_ACTION_RAISE, LG_ACT_AFTER, &l, NULL);
    g_assert_true(lg_runtime_pending_sync);
    lg_runtime_forget_message();
}

static void test_act_log(void)
{
    launch_t l;
    lg_decision_t d;
    make_launch(&l, true);
    act(LG_ACTION_LOG, LG_ACT_BEFORE, &l, &d);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN);
    g_assert_cmpint(lg_runtime_pending, ==, 0);
    char *e = last_event();
    g_assert_nonnull(strstr(e, "\"outcome\":\"launched\""));
    g_free(e);
}

/* abort writes the event and the summary, in both modes, then SIGABRT. */
static void test_act_abort(void)
{
    for (int w = LG_ACT_BEFORE; w <= LG_ACT_AFTER; w += LG_ACT_AFTER - LG_ACT_BEFORE) {
        char *dir = g_strdup_printf("%s/abort-%d", log_dir, w);
        pid_t pid = fork();
        g_assert_cmpint(pid, >=, 0);
        if (pid == 0) {
            signal(SIGABRT, SIG_DFL);
            lg_report_after_fork_child();
            snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s", dir);
            launch_t l;
            lg_decision_t d;
            make_launch(&l, true);
            act(LG_ACTION_ABORT, (lg_act_when_t)w, &l, w == LG_ACT_AFTER ? NULL : &d);
            _exit(0);
        }
        int st = 0;
        g_assert_cmpint(waitpid(pid, &st, 0), ==, pid);
        g_assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        GDir *gd = g_dir_open(dir, 0, NULL);
        g_assert_nonnull(gd);
        const char *name = g_dir_read_name(gd);
        g_assert_nonnull(name);
        char *path = g_build_filename(dir, name, NULL), *text = NULL;
        g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
        g_assert_nonnull(strstr(text, "\"outcome\":\"aborted\""));
        g_assert_nonnull(strstr(text, "\"event\":\"summary\""));
        g_free(text);
        g_free(path);
        g_dir_close(gd);
        g_free(dir);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_dir = g_dir_make_tmp("lg-test-act-XXXXXX", NULL);
    g_assert_nonnull(log_dir);
    lg_config_values = lg_cfg_defaults();
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s/logs", log_dir);
    lg_config_values.quiet = true;
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = false;
    lg_validate_init(&fake_rt);
    g_test_add_func("/act/policy_table", test_policy_table);
    g_test_add_func("/act/policy_invariants", test_policy_invariants);
    g_test_add_func("/act/mask_value", test_mask_value);
    g_test_add_func("/act/raise", test_act_raise);
    g_test_add_func("/act/mask", test_act_mask);
    g_test_add_func("/act/mask_falls_back", test_act_mask_falls_back);
    g_test_add_func("/act/message_lifetime", test_act_message_lifetime);
    g_test_add_func("/act/async", test_act_async);
    g_test_add_func("/act/log", test_act_log);
    g_test_add_func("/act/abort", test_act_abort);
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", log_dir);
    (void)!system(cmd);
    g_free(cmd);
    return rc;
}
