/* test_launch.c: src/core/launch.c's entry (lg_launch_decide) driven directly, as a hook drives it,
 * on a host-memory runtime (tests/unit/fake_runtime.h) with the built-in registry: a
 * registered PyTorch NLL kernel launched with a bad label is skipped (raise) and counted; after
 * labelguard_disable() the same launch runs unchecked (the decision is RUN, nothing is watched,
 * validated or reported); with checking back on it is skipped again.
 * Run: build/tests/unit/test_launch (or LG_TESTS=test_launch make test).
 */
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_runtime.h"
#include "hooks/hooks.h"
#include "labelguard.h"

/* nll_loss_forward_reduce_cuda_kernel_2d<float, long>: output, total_weight, input, target,
 * weights, size_average, nframe, ndim, n_classes, ignore_index. */
static const char mangled[] = "_ZN2at6native41_GLOBAL__N__439a64bd_9_libnll_cu_ee528b0e38nll_loss_forward_reduce_"
                              "cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S6_bllll";
static char stub;
static void *fatbin[1];
static char *log_dir;

static lg_decision_t launch_bad(void)
{
    static float out, tw, in[12];
    int64_t labels[4] = {0, 1, 2, 3}; /* 3 == n_classes: out of range */
    void *d_labels = dev_copy_of(labels, sizeof labels);
    float *o = &out, *t = &tw, *i = in;
    const float *w = NULL;
    bool size_average = true;
    int64_t nframe = 4, ndim = 3, n_classes = 3, ignore = -100;
    void *args[] = {&o, &t, &i, &d_labels, &w, &size_average, &nframe, &ndim, &n_classes, &ignore};
    lg_launch_t l = {.entry = LG_ENTRY_CUDA_LAUNCH_KERNEL,
                     .func = &stub,
                     .args = args,
                     .grid = {1, 1, 1},
                     .block = {32, 1, 1},
                     .can_block = true};
    lg_decision_t d;
    lg_launch_decide(&fake_rt, &l, &d);
    return d;
}

static void test_disable(void)
{
    lg_counters_t c0, c1, c2;
    lg_act_counters(&c0);
    lg_decision_t d = launch_bad();
    g_assert_cmpint(d.kind, ==, LG_VERDICT_SKIP);
    g_assert_cmpint(d.error, ==, LG_RAISE_ERROR);
    lg_runtime_set_pending_error(0, NULL, false);
    lg_act_counters(&c1);
    g_assert_cmpuint(c1.watched, ==, c0.watched + 1);
    g_assert_cmpuint(c1.violations, ==, c0.violations + 1);
    char first[8192];
    int n_first = labelguard_last_violation(first, sizeof first);
    g_assert_cmpint(n_first, >, 0);

    g_assert_cmpint(labelguard_disable(), ==, 0);
    d = launch_bad();
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN); /* the bad launch goes through as it is */
    lg_act_counters(&c2);
    g_assert_cmpuint(c2.launches, ==, c1.launches + 1);
    g_assert_cmpuint(c2.watched, ==, c1.watched);
    g_assert_cmpuint(c2.validated, ==, c1.validated);
    g_assert_cmpuint(c2.violations, ==, c1.violations);
    char again[8192];
    g_assert_cmpint(labelguard_last_violation(again, sizeof again), ==, n_first);
    g_assert_cmpstr(again, ==, first); /* no new event */

    /* Checking back on (what labelguard_enable does once it armed): skipped again. */
    atomic_store(&lg_launch_disabled, 0);
    d = launch_bad();
    g_assert_cmpint(d.kind, ==, LG_VERDICT_SKIP);
    lg_runtime_set_pending_error(0, NULL, false);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_dir = g_dir_make_tmp("lg-test-launch-XXXXXX", NULL);
    g_assert_nonnull(log_dir);
    lg_config_values = lg_cfg_defaults();
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s/logs", log_dir);
    lg_config_values.quiet = true;
    lg_config_values.logprob_check = false;
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = false;
    lg_registry_init_with(NULL, NULL);
    lg_validate_init(&fake_rt);
    lg_names_record_function(fatbin, &stub, mangled);
    g_test_add_func("/launch/disable", test_disable);
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", log_dir);
    (void)!system(cmd);
    g_free(cmd);
    return rc;
}
