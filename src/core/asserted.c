/* asserted.c: a device-side assert in a kernel that labelguard did not check before its launch.
 * The context is lost by then and nothing can be copied back, so the report says what the
 * process knew before: the launches that may hold the assert (recent.c: the finding thread's
 * last ones, newest first, and the newest few of every other launching thread), each with its
 * kernel, grid, block and stream, whether labelguard checks that kernel, and, with
 * LABELGUARD_LAUNCH_SITES=all, the Python line that launched it; where it surfaced (the call,
 * its Python line); and the kernels torch.compile generated that assert on their own
 * (generated.c: file, line and text of each assert), a candidate of the same name marked: a
 * Triton kernel is a candidate only where CUPTI saw its driver-API launch (hooks/cupti.c).
 * CUDA never says which kernel asserted: the device's own "Assertion ... failed" line names the
 * file and condition, and with CUDA_LAUNCH_BLOCKING=1 the finding thread's newest launch is the
 * one (whether the blocking launch returned success or the assert itself: lg_asserted_launch_ran).
 *
 * Once per process: every later call returns the same sticky error. Not when a violation was
 * reported whose kernel ran on its bad values (async mode, action log): that report names the
 * values the kernel asserted on, and a second one would contradict it.
 *
 * Called by the hooks (preload.c, preload_sync.c) on the application's thread that got the error,
 * never for our own calls. Tested by tests/e2e/test_device_assert.sh (a program's own kernel
 * asserting, with and without launch sites, other threads' launches, an explained assert) and
 * tests/torch-fake/test_device_assert.sh (real torch).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define MAX_CANDIDATES   48
#define PER_OTHER_THREAD 4

static _Atomic int reported;

static _Atomic bool driver_seen;

void lg_asserted_after_fork(void) { atomic_store(&reported, 0); }

void lg_asserted_driver_launches_seen(bool seen) { atomic_store(&driver_seen, seen); }

/* CUDA_LAUNCH_BLOCKING=1: every launch waits for its kernel. */
static bool launch_blocking(void)
{
    const char *blocking = getenv("CUDA_LAUNCH_BLOCKING");
    return blocking && !strcmp(blocking, "1");
}

bool lg_asserted_launch_ran(int err)
{
    if (err != 710 /* cudaErrorAssert, CUDA_ERROR_ASSERT */ || atomic_load_explicit(&reported, memory_order_relaxed))
        return false;
    return launch_blocking();
}

static void fill(lg_assert_candidate_t *c, const lg_recent_launch_t *r, bool finder)
{
    memset(c, 0, sizeof *c);
    const char *mangled = r->graph ? NULL : lg_names_lookup(r->func);
    c->symbol = mangled;
    if (r->graph)
        snprintf(c->kernel, sizeof c->kernel, "CUDA graph replay (exec %p)", r->func);
    else if (!mangled || !lg_demangle_short(mangled, c->kernel, sizeof c->kernel))
        snprintf(c->kernel, sizeof c->kernel, "%s", mangled ? mangled : "?");
    memcpy(c->grid, r->grid, sizeof c->grid);
    memcpy(c->block, r->block, sizeof c->block);
    c->stream = r->stream;
    c->tid = r->tid;
    c->finder = finder;
    c->shared_slot = r->shared_slot;
    c->age = r->age;
    c->graph = r->graph;
    lg_kernel_info_t *info = r->graph ? NULL : lg_names_info(r->func);
    int st = info ? atomic_load_explicit(&info->state, memory_order_acquire) : LG_KSTATE_UNKNOWN;
    c->checked = st == LG_KSTATE_WATCHED || st == LG_KSTATE_GATHER;
    if (r->has_site) {
        c->python = malloc(sizeof *c->python);
        if (c->python)
            lg_pystack_resolve(&r->site, c->python);
    }
}

void lg_asserted_found(const char *api, bool at_query)
{
    if (atomic_load_explicit(&reported, memory_order_relaxed) || !lg_start_done())
        return;
    /* At a launch, a verdict of this thread may still wait to be read: its report comes first. */
    if (!at_query && (lg_verdicts_pending() || lg_verdicts_orphaned()))
        return;
    if (atomic_exchange(&reported, 1))
        return;
    if (lg_act_launched_bad()) {
        lg_report_note_once("device_assert_explained",
                            "a device-side assert fired after a reported violation whose kernel ran on its bad "
                            "values: that report is the assert's");
        return;
    }
    lg_runtime_in_library++;
    lg_recent_launch_t *recent = malloc(MAX_CANDIDATES * sizeof *recent);
    lg_assert_candidate_t *cand = malloc(MAX_CANDIDATES * sizeof *cand);
    lg_assert_report_t *r = calloc(1, sizeof *r);
    if (!recent || !cand || !r) {
        free(recent), free(cand), free(r);
        lg_report_warning("device_assert", "a device-side assert fired (CUDA error 710) in a kernel labelguard did "
                                           "not check; out of memory for its report");
        lg_runtime_in_library--;
        return;
    }
    int n_mine = 0;
    int n = lg_recent_read(recent, MAX_CANDIDATES, PER_OTHER_THREAD, &n_mine);
    for (int i = 0; i < n; i++)
        fill(&cand[i], &recent[i], i < n_mine);
    r->api = api;
    r->driver_launches_seen = atomic_load(&driver_seen);
    r->launch_blocking = launch_blocking();
    r->n = n;
    r->c = cand;
    lg_generated_kernel_t *gen = malloc(LG_GENERATED_MAX * sizeof *gen);
    if (gen) {
        r->n_generated = lg_generated_read(gen, LG_GENERATED_MAX, &r->generated_total);
        r->generated = gen;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < r->n_generated && !cand[i].generated; k++)
                if (!cand[i].graph && !strcmp(cand[i].kernel, gen[k].kernel))
                    cand[i].generated = &gen[k];
    }
    if (lg_config_values.backtrace_native)
        lg_stack_capture(&r->native);
    if (lg_config_values.backtrace_python)
        lg_pystack_capture(&r->python);
    lg_report_device_assert(r);
    for (int i = 0; i < n; i++)
        free(cand[i].python);
    free(recent), free(cand), free(r), free(gen);
    lg_runtime_in_library--;
}
