/* cupti.c: the second hook layer, a CUPTI callback subscriber on the runtime and driver launch
 * entry points. It sees what symbol interposition cannot: a statically linked cudart, and
 * driver-API launches such as Triton's dlsym'd cuLaunchKernelEx. Each launch it sees becomes one
 * lg_launch_t handed to lg_launch_decide (launch.c) with the runtime from runtime.c, exactly
 * like an interposed hook does, after starting the library (lg_start_ensure).
 *
 * Who calls it: lg_cupti_start() once, from the lazy start (lg.c) when lg_cupti_slot_wanted
 * says so (LABELGUARD_HOOKS=cupti; auto only where interposition cannot see the launches: a
 * static runtime), on the application thread whose hook started the library, never from
 * labelguard_arm() (a debugger's call); it is idempotent. The callback runs on whatever
 * thread launches, inside CUPTI, before the launch (API_ENTER).
 *
 * The subscriber slot (which call takes it, and handing it to a profiler) is cupti_slot.c's;
 * reading one callback's launch parameters is cupti_launch.c's.
 *
 * libcupti is dlopen'd (RTLD_LOCAL), never linked: one already in the process first (the one
 * PyTorch's profiler or the application loaded), else the one matching the process's cudart
 * major version, searched next to libcudart, in CUDA_HOME, /usr/local/cuda and the pip wheel
 * layouts. Every failure (no libcupti, no driver: cuptiSubscribe returns CUPTI_ERROR_UNKNOWN,
 * slot taken by Kineto/Nsight/compute-sanitizer: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * to the single-slot request that cupti_slot.c falls back to) is one `warning` event
 * (cupti_unavailable) and interposition carries on alone.
 *
 * At API_EXIT a launch decided here joins the thread's recent launches when it was accepted
 * (core/asserted.c's candidates: Triton's driver launches are seen nowhere else), and one that
 * returned the device-side assert (710) is where the thread learns of it, as at an interposed
 * launch.
 *
 * CUPTI cannot skip a launch (its callbacks have no return value), so launches seen only here are decided with
 * can_block=false: the decision is RUN or RUN_WITH (mask), and for RUN_WITH the caller's
 * argument array is rewritten in place before the launch reads it and restored at API_EXIT.
 *
 * Exit and fork: the subscriber is not unsubscribed at exit. cuptiUnsubscribe would run at an
 * unspecified point relative to libcuda's and cudart's own teardown (atexit order), and CUPTI
 * calls after the driver is torn down are a known crash source in profilers; instead an atexit
 * handler clears `active`, which turns the callback into an immediate return. In a fork child
 * the copied CUPTI state refers to the parent's driver connection, which CUDA does not support
 * using; the child handler also only clears `active` (no CUPTI call in the child), and a start
 * that runs in a fork child (pthread_once re-runs one the fork interrupted) does not subscribe.
 *
 * Tests: tests/e2e/test_cupti_unavailable.sh (the no-driver path under the runtime test double:
 * one warning with LABELGUARD_HOOKS=cupti, none in auto where interposition covers the
 * launches), tests/e2e/test_cupti_subscriber.sh (a Kineto-like program subscribing through the
 * single-slot CUPTI double tests/fakecuda/cupti/libcupti.c: auto never takes the slot, cupti
 * hands it over).
 * tests/e2e/test_driver_launch.sh: Triton-like driver launches through the driver double's launch
 * build, which calls the CUPTI double's driver-domain callbacks (candidates, the assert seen at a
 * launch). That the real CUPTI calls back as documented, only a GPU run shows (tests/gpu). */
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"

typedef CUptiResult (*enable_callback_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);
typedef CUresult (*func_get_name_fn)(const char **, CUfunction);

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static bool active; /* read with __atomic in the callback */
static CUpti_SubscriberHandle subscriber;
static func_get_name_fn func_get_name; /* libcuda's cuFuncGetName, NULL if absent */
static char cupti_path[PATH_MAX];      /* the libcupti in use, for messages */

/* What a thread's callback keeps from a launch's API_ENTER to its API_EXIT, allocated at the
 * first launch CUPTI decides on that thread and freed at thread exit (a pointer, not the state
 * itself, in thread-local storage: the library's static TLS block is bounded).
 * - The parameter values of a RUN_WITH decision must outlive the callback: the launch copies
 *   them after API_ENTER returns; `restore` undoes the in-place rewrite at API_EXIT.
 * - The launch decided: an accepted one joins the thread's recent launches at API_EXIT, the
 *   candidates of a device-side assert nobody checked, as the interposed hooks' launches do
 *   after their real call (Triton's kernels are launched through the driver API: only this
 *   records them). `count` is the thread's launch count after the decision: a launch counted in
 *   between (none is expected) leaves the entry unwritten rather than written into another
 *   launch's place. */
typedef struct {
    lg_args_copy_t copy;
    void **array;               /* the caller's args array we wrote into; NULL: none */
    uint32_t correlation;       /* of the launch that wrote it: only its API_EXIT restores */
    void *saved[LG_MAX_PARAMS]; /* its original slots */
    bool written[LG_MAX_PARAMS];
    struct {
        bool live;
        uint32_t correlation;
        uint64_t count;
        const void *func, *stream;
        lg_recent_dims_t dims;
    } decided;
} held_args_t;
static pthread_key_t held_key;
static __thread held_args_t *held;
static __thread int runtime_depth; /* inside a runtime launch: skip its nested driver launch */

static uint64_t launch_count(void)
{
    lg_counter_slot_t *s = lg_counters_my_slot;
    return s ? __atomic_load_n((uint64_t *)&s->launches, __ATOMIC_RELAXED) : 0;
}

/* API_EXIT of a launch this callback decided: CUPTI gives the call's result (a cudaError_t or a
 * CUresult: the same numbers for success and for the device-side assert, 710). */
static void launch_exited(CUpti_CallbackDomain dom, const CUpti_CallbackData *cb)
{
    held->decided.live = false;
    int result = 0;
    if (cb->functionReturnValue)
        result = dom == CUPTI_CB_DOMAIN_RUNTIME_API ? (int)*(const cudaError_t *)cb->functionReturnValue
                                                    : (int)*(const CUresult *)cb->functionReturnValue;
    if ((result == 0 || lg_asserted_launch_ran(result)) && launch_count() == held->decided.count)
        lg_recent_note(held->decided.func, held->decided.stream, held->decided.dims);
    if (result == (int)cudaErrorAssert) {
        /* The application learns of the assert from this launch (Triton raises on it): the report
         * is made here, unless a verdict of this thread still waits to be read. */
        lg_asserted_found(cb->functionName ? cb->functionName : "a kernel launch", false);
    }
}

/* ------------------------------------------------------------------ finding libcupti */

static void *try_open(const char *path)
{
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        if (!dlinfo(h, RTLD_DI_ORIGIN, cupti_path)) {
            size_t n = strlen(cupti_path);
            const char *base = strrchr(path, '/');
            snprintf(cupti_path + n, sizeof cupti_path - n, "/%s", base ? base + 1 : path);
        } else {
            snprintf(cupti_path, sizeof cupti_path, "%s", path);
        }
    }
    return h;
}

/* Returns a handle on libcupti or NULL with what was searched in why. */
static void *open_cupti(char *why, size_t why_len)
{
    static const char *const loaded[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; i < sizeof loaded / sizeof loaded[0]; i++) {
        void *h = dlopen(loaded[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            snprintf(cupti_path, sizeof cupti_path, "%s (already loaded)", loaded[i]);
            return h;
        }
    }

    static lg_cudart_t rt; /* the first libcudart the loader holds guides the search */
    bool have_rt = lg_runtime_cudarts(&rt, 1) == 1;
    int majors[2] = {rt.major, 0};
    if (rt.major == 0) {
        majors[0] = 13;
        majors[1] = 12;
    }
    const char *cuda_home = getenv("CUDA_HOME");

    for (int m = 0; m < 2 && majors[m]; m++) {
        char dirs[8][PATH_MAX];
        int nd = 0;
        if (have_rt) {
            snprintf(dirs[nd++], PATH_MAX, "%s", rt.dir);
            /* pip wheels: nvidia/cuda_runtime/lib next to nvidia/cuda_cupti/lib (cu12), and
             * torch/lib next to nvidia/ (a cudart bundled with torch) */
            snprintf(dirs[nd++], PATH_MAX, "%.4000s/../../cuda_cupti/lib", rt.dir);
            snprintf(dirs[nd++], PATH_MAX, "%.4000s/../../nvidia/cuda_cupti/lib", rt.dir);
            snprintf(dirs[nd++], PATH_MAX, "%.4000s/../extras/CUPTI/lib64", rt.dir);
        }
        if (cuda_home && *cuda_home) {
            snprintf(dirs[nd++], PATH_MAX, "%s/extras/CUPTI/lib64", cuda_home);
            snprintf(dirs[nd++], PATH_MAX, "%s/lib64", cuda_home);
        }
        snprintf(dirs[nd++], PATH_MAX, "/usr/local/cuda/extras/CUPTI/lib64");
        snprintf(dirs[nd++], PATH_MAX, "/usr/local/cuda/lib64");
        for (int d = 0; d < nd; d++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%.4000s/libcupti.so.%d", dirs[d], majors[m]);
            if (access(path, R_OK) != 0)
                continue;
            void *h = try_open(path);
            if (h)
                return h;
        }
        /* Last: the loader's own search path (LD_LIBRARY_PATH, ld.so.cache). */
        char soname[32];
        snprintf(soname, sizeof soname, "libcupti.so.%d", majors[m]);
        void *h = try_open(soname);
        if (h)
            return h;
    }
    if (have_rt)
        snprintf(why, why_len,
                 "libcupti.so.%d not found (looked next to %s/libcudart, in the pip "
                 "wheel layout, $CUDA_HOME, /usr/local/cuda and the library path)",
                 rt.major, rt.dir);
    else
        snprintf(why, why_len,
                 "libcupti.so.13/.12 not found (no libcudart loaded to guide the "
                 "search; looked in $CUDA_HOME, /usr/local/cuda and the library path)");
    return NULL;
}

/* ------------------------------------------------------------------ the callback */

static void held_free(void *p) { free(p); }

/* This thread's state, allocated on first use; NULL when out of memory. */
static held_args_t *thread_state(void)
{
    if (!held) {
        held = calloc(1, sizeof *held);
        if (held)
            pthread_setspecific(held_key, held);
    }
    return held;
}

/* Writes the RUN_WITH arguments into the caller's array. Only the slots the decision rewrote
 * are touched (their pointers point into copy.storage); the array length is the kernel's
 * parameter count, which only launch.c knows, so untouched slots are never read or written. */
static void apply_rewrite(void **args, lg_decision_t *d, uint32_t correlation)
{
    if (!thread_state()) {
        lg_report_warning_once("cupti_mask_failed", "out of memory for the masked arguments of "
                                                    "a launch seen only by CUPTI; it runs with its original labels");
        return;
    }
    const unsigned char *lo = (const unsigned char *)d->args_copy.storage;
    const unsigned char *hi = lo + sizeof d->args_copy.storage;
    memcpy(held->copy.storage, d->args_copy.storage, sizeof held->copy.storage);
    held->array = args;
    held->correlation = correlation;
    for (int i = 0; i < LG_MAX_PARAMS; i++) {
        const unsigned char *p = d->args_copy.args[i];
        held->written[i] = p >= lo && p < hi;
        if (!held->written[i])
            continue;
        held->saved[i] = args[i];
        args[i] = (unsigned char *)held->copy.storage + (p - lo);
    }
}

static void restore_rewrite(uint32_t correlation)
{
    if (!held || !held->array || held->correlation != correlation)
        return;
    for (int i = 0; i < LG_MAX_PARAMS; i++)
        if (held->written[i])
            held->array[i] = held->saved[i];
    held->array = NULL;
}

static void CUPTIAPI callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
    const CUpti_CallbackData *cb = data;
    if (cb->callbackSite == CUPTI_API_EXIT) {
        if (dom == CUPTI_CB_DOMAIN_RUNTIME_API && runtime_depth > 0)
            runtime_depth--;
        /* Even after `active` was cleared: the caller's array must not keep our pointers. */
        restore_rewrite(cb->correlationId);
        if (held && held->decided.live && held->decided.correlation == cb->correlationId)
            launch_exited(dom, cb);
        return;
    }
    if (!__atomic_load_n(&active, __ATOMIC_RELAXED))
        return;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
        runtime_depth++;
    else if (runtime_depth > 0)
        return; /* the runtime launch around it was handled */
    /* The interposition layer is handling this launch, or it is our own (validator) launch. */
    if (lg_preload_in_launch || lg_runtime_in_library)
        return;
    /* read_launch dereferences functionParams, and for the CUDA 13 __cudaLaunchKernel ids the
     * headers define no params struct at all: a CUPTI that passes none must not crash the
     * application. */
    if (!cb->functionParams)
        return;

    lg_launch_t l;
    void **args = NULL;
    if (!lg_cupti_launch_read(dom, cbid, cb, (void *)func_get_name, &l, &args))
        return;

    lg_decision_t d;
    d.kind = LG_VERDICT_RUN;
    /* Zeroed so that a slot pointing into storage is one this decision rewrote. */
    memset(d.args_copy.args, 0, sizeof d.args_copy.args);
    if (!lg_start_ensure())
        return;
    lg_preload_in_launch++;
    lg_launch_decide(lg_runtime_get(), &l, &d);
    lg_preload_in_launch--;
    held_args_t *st = thread_state();
    if (st) {
        st->decided.live = true;
        st->decided.correlation = cb->correlationId;
        st->decided.count = launch_count();
        st->decided.func = l.func;
        st->decided.stream = l.stream;
        st->decided.dims = lg_recent_dims(l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2]);
    }
    /* SKIP cannot be honoured (can_block=false); launch.c is told so and never asks for it. */
    if (d.kind == LG_VERDICT_RUN_WITH)
        apply_rewrite(args, &d, cb->correlationId);
}

/* ------------------------------------------------------------------ start */

static void on_exit_or_fork(void) { __atomic_store_n(&active, false, __ATOMIC_RELAXED); }

static const char *result_text(result_string_fn fn, CUptiResult r)
{
    const char *s = NULL;
    if (fn && fn(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* Why CUPTI is not in use, reported by lg_cupti_report_status once the start event is out:
 * the log must open with `start`. */
static char unavailable_detail[2048];

void lg_cupti_report_status(void)
{
    if (!unavailable_detail[0])
        return;
    if (lg_config_values.hooks == LG_HOOKS_CUPTI)
        lg_report_warning_once("cupti_unavailable", unavailable_detail);
    else
        lg_report_note_once("cupti_unavailable", unavailable_detail);
}

static void unavailable(const char *reason)
{
    char *detail = unavailable_detail;
    const size_t detail_size = sizeof unavailable_detail;
    if (lg_config_values.hooks == LG_HOOKS_CUPTI)
        snprintf(detail, detail_size,
                 "%.1800s; LABELGUARD_HOOKS=cupti leaves no hook layer: launches "
                 "are not checked. HINT: use LABELGUARD_HOOKS=auto",
                 reason);
    else
        snprintf(detail, detail_size, "%.1800s; interposition carries on alone", reason);
}

/* Set in a fork child of a process that had started the library (lg.c registers the fork
 * handler before anything else of the start). If the fork caught another thread inside this
 * start, pthread_once runs it again in the child, and cuptiSubscribe on CUPTI's half-copied
 * state waits forever (tests/e2e/test_fork.sh, fork storm). */
static bool forked_child;

void lg_cupti_after_fork_child(void)
{
    forked_child = true;
    on_exit_or_fork();
    lg_asserted_driver_launches_seen(false);
}

/* cupti_slot.c's, before it gives the slot up for a profiler: the callback returns at once. */
static void deactivate(void)
{
    __atomic_store_n(&active, false, __ATOMIC_RELEASE);
    lg_asserted_driver_launches_seen(false);
}

static void start(void)
{
    char why[PATH_MAX + 256];
    if (forked_child) {
        unavailable("not started in a fork child of a process that used CUDA (CUDA does not survive fork)");
        return;
    }
    void *lib = open_cupti(why, sizeof why);
    if (!lib) {
        unavailable(why);
        return;
    }

    enable_callback_fn enable = (enable_callback_fn)dlsym(lib, "cuptiEnableCallback");
    result_string_fn result_string = (result_string_fn)dlsym(lib, "cuptiGetResultString");
    if (!enable) {
        snprintf(why, sizeof why, "%s lacks cuptiEnableCallback", cupti_path);
        unavailable(why);
        return;
    }
    if (pthread_key_create(&held_key, held_free) != 0) {
        unavailable("pthread_key_create failed");
        return;
    }

    CUptiResult r = (CUptiResult)lg_cupti_slot_take(lib, (void *)callback, deactivate, (void **)&subscriber);
    if (r != CUPTI_SUCCESS) {
        char hint[256] = "";
        /* The last attempt asked for the single slot (cupti_slot.c): its refusal means the slot
         * is held. A refusal of allowMultipleSubscribers=1 alone (the driver's) never ends here. */
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            snprintf(hint, sizeof hint,
                     ": another tool holds CUPTI's only subscriber slot (%s)",
                     lg_cupti_slot_holder()[0] ? lg_cupti_slot_holder()
                                               : "PyTorch profiler/Kineto, Nsight Systems/Compute, compute-sanitizer");
        else if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED)
            snprintf(hint, sizeof hint, ": no usable CUDA driver?");
        snprintf(why, sizeof why, "%.700s; last answer %s (%d)%s [%.3000s]", lg_cupti_slot_how(),
                 result_text(result_string, r), (int)r, hint, cupti_path);
        unavailable(why);
        return;
    }

    static const CUpti_CallbackId runtime_ids[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,  CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    };
    static const CUpti_CallbackId driver_ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    };
    int enabled = 0;
    for (size_t i = 0; i < sizeof runtime_ids / sizeof runtime_ids[0]; i++)
        enabled += enable(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]) == CUPTI_SUCCESS;
    for (size_t i = 0; i < sizeof driver_ids / sizeof driver_ids[0]; i++)
        enabled += enable(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]) == CUPTI_SUCCESS;
    if (enabled == 0) {
        /* An older CUPTI that knows none of the ids: the subscription stays (harmless, no
         * callback fires) because unsubscribing is what we avoid at any time but start. */
        snprintf(why, sizeof why, "%s accepted none of the launch callbacks", cupti_path);
        unavailable(why);
        return;
    }

    /* cuptiSubscribe loaded libcuda; the driver names CUfunction handles of driver launches. */
    void *cuda = lg_runtime_libcuda();
    if (cuda)
        func_get_name = (func_get_name_fn)dlsym(cuda, "cuFuncGetName");

    /* Fork children: lg.c's handler (lg_cupti_after_fork_child). A pthread_atfork here, under
     * the start's lock, deadlocks a fork on glibc < 2.36 (prepare runs under its atfork lock). */
    atexit(on_exit_or_fork);
    __atomic_store_n(&active, true, __ATOMIC_RELEASE);
    lg_asserted_driver_launches_seen(true);
}

void lg_cupti_start(void)
{
    /* CUPTI's own calls must not be taken for the application's. */
    lg_runtime_in_library++;
    pthread_once(&start_once, start);
    lg_runtime_in_library--;
}

bool lg_cupti_active(void) { return __atomic_load_n(&active, __ATOMIC_ACQUIRE); }
