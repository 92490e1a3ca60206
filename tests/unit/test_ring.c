/* test_ring.c: no verdict is lost to the reuse of its ring slot (a ring holds LG_RING_SLOTS
 * runs), without CUDA: the GPU backend over a fake driver whose device runs behind (a validator
 * launch publishes nothing until the stream is synchronized, as a GPU 64 checks behind its host
 * thread), graph replays queued through graphs.c on a ring written by hand, and the report of a
 * verdict lost anyway (launch.c's lg_launch_poll):
 *   - 200 async checks, one bad, 100 more, no synchronization: every verdict is read, the bad
 *     one with its sample, after a few waits for the stream (make_room in validate_gpu.c);
 *   - the same with the host backend's verdicts, published by host functions on the stream
 *     (validate_defer.c), on a stream that runs nothing until it is synchronized;
 *   - 200 graph replays published one after another and never collected: all 200 verdicts are
 *     kept and read, the bad replay's among them (verdicts.c: none is dropped when the ring wraps);
 *   - a verdict overwritten anyway: one verdict_lost warning naming the kernel, raised as the
 *     next CUDA error under raise, only said under log.
 * Run: make build/tests/unit/test_ring && build/tests/unit/test_ring
 */
#include "../../cuda/lg_validate.h"
#include "hooks/hooks.h"
#include "checks/validate_gpu.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a driver whose device runs behind its host thread ------------------------------------- */

enum { MAX_QUEUED = 4096 };
static lg_scan_params_t queued[MAX_QUEUED]; /* validator launches not yet run */
static int n_queued, syncs;

/* The device catches up: each queued validator run publishes the CPU scan of its labels into
 * its ring, as the kernel does (the sanitized copy is not needed here). */
static void run_queued(void)
{
    for (int k = 0; k < n_queued; k++) {
        lg_scan_params_t *sp = &queued[k];
        lg_scan_state_t *st = (lg_scan_state_t *)(uintptr_t)sp->state;
        lg_scan_ring_t *ring = (lg_scan_ring_t *)(uintptr_t)sp->ring;
        uint64_t seq = ++st->runs;
        lg_scan_ring_entry_t *e = &ring->entries[seq % LG_RING_SLOTS];
        e->seq = 0;
        lg_scan_host(&sp->t, (const void *)(uintptr_t)sp->t.data, sp->samples, (lg_verdict_t *)&e->verdict);
        e->seq = seq;
        ring->latest = seq;
    }
    n_queued = 0;
}

static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned sm, CUstream s, void **p, void **e)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sm, (void)s, (void)e;
    g_assert_cmpint(n_queued, <, MAX_QUEUED);
    queued[n_queued++] = *(const lg_scan_params_t *)p[0];
    return CUDA_SUCCESS;
}
static CUresult f_sync(CUstream s)
{
    (void)s;
    syncs++;
    run_queued();
    return CUDA_SUCCESS;
}
static CUresult f_load(CUmodule *m, const void *image)
{
    (void)image;
    *m = (CUmodule)0x1000;
    return CUDA_SUCCESS;
}
static CUresult f_get_function(CUfunction *f, CUmodule m, const char *name)
{
    (void)m, (void)name;
    *f = (CUfunction)0x2000;
    return CUDA_SUCCESS;
}
static CUresult f_error_string(CUresult r, const char **s)
{
    (void)r;
    *s = "refused";
    return CUDA_SUCCESS;
}
static CUresult f_ctx_current(CUcontext *c)
{
    *c = (CUcontext)0x3000;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_device(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult f_dev_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a, (void)d;
    *v = 4;
    return CUDA_SUCCESS;
}
static CUresult f_stream_create(CUstream *s, unsigned flags)
{
    (void)flags;
    *s = (CUstream)0x4000;
    return CUDA_SUCCESS;
}
static CUresult f_exchange(CUstreamCaptureMode *m)
{
    (void)m;
    return CUDA_SUCCESS;
}
static CUresult f_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
static CUresult f_pointer_attr(void *out, CUpointer_attribute a, CUdeviceptr p)
{
    (void)p;
    if (a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *(unsigned *)out = CU_MEMORYTYPE_DEVICE;
    else if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)out = 0;
    else if (a == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *(size_t *)out = 0; /* unknown: the range check is skipped */
    else if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *(int *)out = 0;
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
static CUresult f_mem_alloc(CUdeviceptr *p, size_t n)
{
    *p = (CUdeviceptr)(uintptr_t)calloc(1, n); /* leaked, as the backend's scratch is */
    return CUDA_SUCCESS;
}
static CUresult f_host_alloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    *p = calloc(1, n);
    return CUDA_SUCCESS;
}
static CUresult f_host_dev_ptr(CUdeviceptr *d, void *p, unsigned flags)
{
    (void)flags;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult f_htod(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    (void)st;
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}

static void fake_driver(void)
{
    memset(&lg_validate_module_drv, 0, sizeof lg_validate_module_drv);
    lg_validate_module_drv.get_error_string = f_error_string;
    lg_validate_module_drv.ctx_get_current = f_ctx_current;
    lg_validate_module_drv.ctx_get_device = f_ctx_device;
    lg_validate_module_drv.device_get_attribute = f_dev_attr;
    lg_validate_module_drv.module_load_data = f_load;
    lg_validate_module_drv.module_get_function = f_get_function;
    lg_validate_module_drv.stream_create = f_stream_create;
    lg_validate_module_drv.exchange_capture_mode = f_exchange;
    lg_validate_module_drv.stream_is_capturing = f_is_capturing;
    lg_validate_module_drv.pointer_get_attribute = f_pointer_attr;
    lg_validate_module_drv.mem_alloc = f_mem_alloc;
    lg_validate_module_drv.mem_host_alloc = f_host_alloc;
    lg_validate_module_drv.mem_host_get_device_pointer = f_host_dev_ptr;
    lg_validate_module_drv.memcpy_htod_async = f_htod;
    lg_validate_module_drv.stream_synchronize = f_sync;
    lg_validate_module_drv.launch_kernel = f_launch;
}

/* 64 int64 labels, 10 classes; the bad batch has 12 at index 7. */
static int64_t good_labels[64], bad_labels[64];
static lg_target_t labels(const int64_t *data)
{
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.data = (uint64_t)(uintptr_t)data;
    t.dtype = LG_DTYPE_INT64;
    t.count = 64;
    t.ndim = 1;
    t.sizes[0] = 64;
    t.strides[0] = 1;
    t.n_classes = 10;
    t.has_ignore_index = true;
    t.ignore_index = -100;
    return t;
}

/* 200 async checks, one bad, 100 more, on one stream of one thread with no synchronization
 * between: the ring holds 64 runs, so without a bound the bad run (201) is overwritten by run
 * 265 before anyone reads it. Each is read, in launch order, none lost, the bad one with its
 * sample, and the thread waited for its stream only when it was a ring ahead. */
static void test_async_checks_bounded(void)
{
    fake_driver();
    g_assert_true(lg_validate_gpu_init_loaded());
    for (int i = 0; i < 64; i++)
        good_labels[i] = bad_labels[i] = i % 10;
    bad_labels[7] = 12;
    lg_target_t good = labels(good_labels), bad = labels(bad_labels);
    void *stream = (void *)0x7000;
    syncs = 0;
    const int before = 200, after = 100, total = before + 1 + after;
    for (int k = 1; k <= total; k++) {
        uint64_t copy = 0;
        char why[512] = "";
        int rc = lg_validate_async(k == before + 1 ? &bad : &good, stream, -100, 4, NULL, NULL, NULL, &copy, why,
                                   sizeof why);
        if (rc != 0)
            g_test_message("check %d: %s", k, why);
        g_assert_cmpint(rc, ==, 0);
        g_assert_cmphex(lg_validate_gpu_host_fallbacks(), ==, 0);
    }
    g_assert_cmpint(syncs, >=, 1);
    g_assert_cmpint(syncs, <=, total / (LG_RING_SLOTS - 1) + 1);
    f_sync(stream); /* the application's own synchronization at the end */
    lg_async_report_t r;
    int n = 0, bad_at = 0;
    while (lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL)) {
        n++;
        g_assert_cmpint(r.verdict.checked, ==, 64); /* read, not lost */
        if (r.verdict.bad_count) {
            g_assert_cmpint(bad_at, ==, 0);
            bad_at = n;
            g_assert_cmpint(r.verdict.bad_count, ==, 1);
            g_assert_cmpint(r.verdict.samples[0].index, ==, 7);
            g_assert_cmpint(r.verdict.samples[0].value, ==, 12);
        }
    }
    g_assert_cmpint(n, ==, total);
    g_assert_cmpint(bad_at, ==, before + 1);
    g_assert_cmpint(lg_verdicts_mine, ==, 0);
}

/* ---- the host backend's deferred verdicts ---------------------------------------------------- */

/* A runtime whose stream runs host functions only when synchronized. */
static struct {
    void (*fn)(void *);
    void *user;
} host_fns[MAX_QUEUED];
static int n_host_fns, host_syncs;
static int rt_host_func(void *stream, void (*fn)(void *), void *user)
{
    (void)stream;
    g_assert_cmpint(n_host_fns, <, MAX_QUEUED);
    host_fns[n_host_fns].fn = fn;
    host_fns[n_host_fns++].user = user;
    return 0;
}
static int rt_sync(void *stream)
{
    (void)stream;
    host_syncs++;
    for (int k = 0; k < n_host_fns; k++)
        host_fns[k].fn(host_fns[k].user);
    n_host_fns = 0;
    return 0;
}
static lg_runtime_t host_rt = {.launch_host_func = rt_host_func, .stream_synchronize = rt_sync};

/* The host backend's verdicts are published by a host function on the stream (validate_defer.c):
 * 200 of them queued, one bad, 100 more, on a stream that runs nothing until it is waited for.
 * Each is read, the bad one too; the stream was waited for only when the ring was full. */
static void test_deferred_bounded(void)
{
    const int before = 200, after = 100, total = before + 1 + after;
    host_syncs = 0;
    for (int k = 1; k <= total; k++) {
        lg_pending_t *p = calloc(1, sizeof *p);
        lg_scan_clear(&p->verdict);
        p->verdict.checked = 64;
        if (k == before + 1) {
            p->verdict.bad_count = 1;
            p->verdict.n_samples = 1;
            p->verdict.samples[0].index = 7;
            p->verdict.samples[0].value = 12;
        }
        g_assert_cmpint(lg_validate_defer(&host_rt, (void *)0x7200, &p->verdict, &p->ring, &p->seq), ==, 0);
        g_assert_cmpint(lg_verdicts_add(p), ==, 0);
    }
    g_assert_cmpint(host_syncs, >=, 1);
    g_assert_cmpint(host_syncs, <=, total / (LG_RING_SLOTS - 1) + 1);
    rt_sync(NULL);
    lg_async_report_t r;
    int n = 0, bad_at = 0;
    while (lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL)) {
        n++;
        g_assert_cmpint(r.verdict.checked, ==, 64);
        if (r.verdict.bad_count) {
            bad_at = n;
            g_assert_cmpint(r.verdict.samples[0].value, ==, 12);
        }
    }
    g_assert_cmpint(n, ==, total);
    g_assert_cmpint(bad_at, ==, before + 1);
}

/* ---- graph replays -------------------------------------------------------------------------- */

/* 200 replays of an exec with one check, each published right after it was queued (the device
 * keeps up) but none collected, and replay 5 bad: all 200 verdicts are read, oldest first, the
 * bad one among them; none is given up (before, an entry 64 runs old was freed unread). */
static void test_graph_replays_kept(void)
{
    static char graph_h, exec_a;
    static lg_scan_ring_t ring;
    lg_target_t t = labels(good_labels);
    char why[128] = "";
    g_assert_cmpint(lg_graphs_add_check(61, NULL, NULL, &t, &ring, 0, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(61, &graph_h);
    lg_graphs_instantiated(&exec_a, &graph_h);
    const int replays = 200, bad_replay = 5;
    for (int k = 1; k <= replays; k++) {
        g_assert_false(lg_graphs_launched(&exec_a, NULL));
        lg_scan_ring_entry_t *e = &ring.entries[k % LG_RING_SLOTS];
        e->seq = 0;
        memset((void *)&e->verdict, 0, sizeof e->verdict);
        e->verdict.checked = 64;
        if (k == bad_replay) {
            e->verdict.bad_count = 1;
            e->verdict.n_samples = 1;
            e->verdict.samples[0].index = 3;
            e->verdict.samples[0].value = 9;
        }
        e->seq = (unsigned long long)k;
        ring.latest = (unsigned long long)k;
    }
    lg_async_report_t r;
    int n = 0;
    while (lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL)) {
        n++;
        g_assert_cmpuint(r.graph_id, ==, 61);
        g_assert_cmpuint(r.replay, ==, (uint64_t)n);
        g_assert_cmpint(r.verdict.checked, ==, 64);
        g_assert_cmpint(r.verdict.bad_count, ==, n == bad_replay ? 1 : 0);
        if (n == bad_replay)
            g_assert_cmpint(r.verdict.samples[0].value, ==, 9);
    }
    g_assert_cmpint(n, ==, replays);
    lg_graphs_exec_destroyed(&exec_a);
    lg_graphs_destroyed(&graph_h);
}

/* ---- a verdict lost anyway ------------------------------------------------------------------ */

static char *log_dir;

/* The run's log lines that mention `what`, joined (a fresh string). */
static char *log_lines(const char *what)
{
    GString *out = g_string_new("");
    GDir *d = g_dir_open(log_dir, 0, NULL);
    for (const char *f; d && (f = g_dir_read_name(d));) {
        char *path = g_build_filename(log_dir, f, NULL), *text = NULL;
        if (g_file_get_contents(path, &text, NULL, NULL)) {
            char **lines = g_strsplit(text, "\n", -1);
            for (char **l = lines; *l; l++)
                if (strstr(*l, what))
                    g_string_append_printf(out, "%s\n", *l);
            g_strfreev(lines);
        }
        g_free(text);
        g_free(path);
    }
    if (d)
        g_dir_close(d);
    return g_string_free(out, false);
}

static lg_runtime_t no_rt; /* nothing to call: the poll only saves and restores errors */

/* An async check whose run was overwritten before it was read (run 1, slot taken by run 65):
 * lg_launch_poll says verdict_lost with the kernel's name, and under raise the thread's next
 * error query returns labelguard's error; under log it is only said. */
static void lost_once(lg_action_t action, const char *name)
{
    static lg_scan_ring_t ring;
    static lg_kernel_info_t info;
    info.mangled = "_ZN2at6native37nll_loss_forward_reduce_cuda_kernel_2dIffEEvPT_S3_PKS2_PKlS5_bllll";
    info.short_name = name;
    lg_pending_t *p = calloc(1, sizeof *p);
    p->cookie = &info;
    p->stream = (void *)0x7100;
    p->ring = &ring;
    p->seq = ring.latest + 1;
    g_assert_cmpint(lg_verdicts_add(p), ==, 0);
    uint64_t over = p->seq + LG_RING_SLOTS;
    ring.entries[over % LG_RING_SLOTS].seq = over;
    ring.latest = over;
    lg_config_values.action = action;
    lg_launch_poll(&no_rt, LG_COLLECT_MINE, NULL);
    g_assert_cmpint(lg_verdicts_mine, ==, 0);
    char *lines = log_lines(name);
    g_test_message("%s", lines);
    g_assert_nonnull(strstr(lines, "\"what\":\"verdict_lost\""));
    char kernel[200];
    snprintf(kernel, sizeof kernel, "\"kernel\":\"%s\"", name);
    g_assert_nonnull(strstr(lines, kernel));
    g_free(lines);
}

static void test_lost_reported(void)
{
    lost_once(LG_ACTION_RAISE, "lost_kernel_raise");
    g_assert_cmpint(lg_runtime_take_error(0), ==, LG_RAISE_ERROR);
    const char *text = lg_runtime_error_message(LG_RAISE_ERROR);
    g_assert_nonnull(text);
    g_assert_nonnull(strstr(text, "lost_kernel_raise"));
    g_assert_nonnull(strstr(text, "lost"));
    lost_once(LG_ACTION_LOG, "lost_kernel_log");
    g_assert_cmpint(lg_runtime_take_error(0), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_dir = g_dir_make_tmp("lg-test-ring-XXXXXX", NULL);
    g_assert_nonnull(log_dir);
    lg_config_values.quiet = true;
    lg_config_values.samples = 16;
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s", log_dir);
    g_test_add_func("/ring/async_checks_bounded", test_async_checks_bounded);
    g_test_add_func("/ring/deferred_bounded", test_deferred_bounded);
    g_test_add_func("/ring/graph_replays_kept", test_graph_replays_kept);
    g_test_add_func("/ring/lost_reported", test_lost_reported);
    int rc = g_test_run();
    char *cmd = g_strdup_printf("rm -rf '%s'", log_dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    g_free(cmd);
    return rc;
}
