/* launch.c: what happens to one kernel launch — the core behind every hook layer.
 *
 * preload.c (interposed symbols) and cupti.c (CUPTI callbacks) describe a launch as an
 * lg_launch_t and call lg_launch_decide on the launching thread. An unwatched kernel costs one
 * lock-free cached lookup (names.c) and a per-thread counter increment. A watched kernel is
 * decoded (decode.c), validated (validate.c) and, when a label is bad, reported (report.c) and
 * acted upon per LABELGUARD_ACTION: raise, hold, mask, log or abort.
 *
 * Tested end to end by tests/e2e/ (under the runtime test double) and tests/gpu/ on a GPU.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ------------------------------------------------------------------ counters */

/* Per-thread slots on their own cache lines: counting every launch must not make 16 launching
 * threads fight over one line. Summed only for the summary event. */
#define COUNTER_SLOTS 64
static lg_counter_slot_t launch_slots[COUNTER_SLOTS];
static _Atomic unsigned next_slot;
LG_TLS lg_counter_slot_t *lg_launch_my_slot;

static _Atomic uint64_t watched, validated, violations, launch_seq;

lg_counter_slot_t *lg_launch_assign_slot(void)
{
    lg_counter_slot_t *s = &launch_slots[atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % COUNTER_SLOTS];
    lg_launch_my_slot = s;
    return s;
}

void lg_launch_counters(lg_counters_t *out)
{
    uint64_t n = 0;
    for (int i = 0; i < COUNTER_SLOTS; i++)
        n += atomic_load_explicit(&launch_slots[i].launches, memory_order_relaxed);
    out->launches = n;
    out->watched = atomic_load(&watched);
    out->validated = atomic_load(&validated);
    out->violations = atomic_load(&violations);
    out->validate_ns_total = lg_validate_ns_total(); /* validate.c times every call it serves */
}

/* ------------------------------------------------------------------ classification */

/* Our queries to the runtime may leave an error behind (the end of a parameter list is
 * reported as one). Save the application's pending error before, clear ours after, and hand
 * the application's back through the pending-error path of preload.c. */
static int save_app_error(const lg_runtime_t *rt)
{
    return rt->get_last_error ? rt->get_last_error() : 0;
}

static void restore_app_error(const lg_runtime_t *rt, int saved)
{
    if (rt->get_last_error)
        rt->get_last_error();
    if (saved)
        lg_preload_set_pending_error(saved, NULL);
}

static const char *resolve_name(const lg_launch_t *l, lg_kernel_info_t *info)
{
    if (l->mangled)
        return l->mangled;
    if (info && info->mangled)
        return info->mangled;
    const lg_runtime_t *rt = lg_preload_runtime();
    const char *name = NULL;
    if (rt->func_get_name) {
        lg_in_library++;
        int saved = save_app_error(rt);
        if (rt->func_get_name(&name, l->func) != 0)
            name = NULL;
        restore_app_error(rt, saved);
        lg_in_library--;
    }
    return name;
}

/* Parameter sizes from the runtime; -1 when it cannot tell (older runtime, driver missing). */
static int runtime_param_sizes(const void *func, size_t *sizes, int cap)
{
    const lg_runtime_t *rt = lg_preload_runtime();
    if (!rt->func_get_param_info)
        return -1;
    int n = 0;
    lg_in_library++;
    int saved = save_app_error(rt);
    for (; n < cap; n++) {
        size_t off = 0, sz = 0;
        if (rt->func_get_param_info(func, (size_t)n, &off, &sz) != 0)
            break;
        sizes[n] = sz;
    }
    restore_app_error(rt, saved);
    lg_in_library--;
    return n > 0 ? n : -1;
}

static void format_sizes(const size_t *sizes, int n, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%zu", i ? "," : "", sizes[i]);
}

static lg_kernel_info_t *classify(const lg_launch_t *l, lg_kernel_info_t *info)
{
    lg_ensure_started();
    if (!info)
        info = lg_names_info_insert(l->func);
    const char *mangled = resolve_name(l, info);
    if (info && mangled && !info->mangled)
        lg_names_set_name(info, mangled);
    if (info && info->mangled)
        mangled = info->mangled;

    int state = LG_KSTATE_UNWATCHED;
    const lg_spec_t *spec = NULL;
    if (mangled) {
        size_t sizes[LG_MAX_PARAMS];
        int n = -1;
        char why[512] = "";
        if (lg_registry_maybe_watched(mangled)) {
            n = runtime_param_sizes(l->func, sizes, LG_MAX_PARAMS);
            spec = lg_registry_find(mangled, n >= 0 ? sizes : NULL, n, why, sizeof why);
            if (spec) {
                state = LG_KSTATE_WATCHED;
                if (lg_cfg.debug_kernels) {
                    char detail[1024], sz[256] = "?";
                    if (n > 0)
                        format_sizes(sizes, n, sz, sizeof sz);
                    snprintf(detail, sizeof detail, "symbol=%s spec=%s params=%s", mangled, spec->name, sz);
                    lg_report_warning("kernel_seen", detail);
                }
            } else if (why[0]) {
                state = LG_KSTATE_BAD_LAYOUT;
                char detail[1200];
                snprintf(detail, sizeof detail,
                         "%s: %s; the launch runs unchecked. ---> HINT: add a spec for this build with "
                         "LABELGUARD_KERNELS (see specs/pytorch.conf)",
                         mangled, why);
                lg_report_warning("unknown_layout", detail);
            }
        }
    }
    if (!info)
        return NULL;
    lg_names_publish(info, spec, state);
    return info;
}

/* ------------------------------------------------------------------ hold */

static sem_t hold_sem;
static _Atomic int hold_waiters;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static int hold_users;
static struct sigaction hold_saved;

static void on_release_signal(int sig)
{
    (void)sig;
    int n = atomic_load(&hold_waiters);
    for (int i = 0; i < n; i++)
        sem_post(&hold_sem);
}

/* Blocks the calling thread until SIGUSR1. The handler exists only while some thread is held;
 * the application's own SIGUSR1 disposition (SLURM uses it) is restored afterwards. */
static void hold_thread(const lg_violation_t *v)
{
    pthread_mutex_lock(&hold_lock);
    if (hold_users++ == 0) {
        sem_init(&hold_sem, 0, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_release_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, &hold_saved);
    }
    atomic_fetch_add(&hold_waiters, 1);
    pthread_mutex_unlock(&hold_lock);

    /* The signal must be deliverable to some thread; make sure this one does not block it. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &set, &old);

    char msg[2048];
    int pid = (int)getpid();
    int n = snprintf(msg, sizeof msg,
                     "labelguard: HOLDING thread %ld of process %d before %s (bad label target[%lld] = %lld).\n"
                     "  The launch was not made; the CUDA context is intact. Inspect the process now:\n"
                     "    gdb -p %d        cuda-gdb -p %d        py-spy dump --pid %d\n"
                     "  Release it with:  kill -USR1 %d   (the launch then fails as with LABELGUARD_ACTION=raise;\n"
                     "  SIGCONT alone does not release it)\n",
                     (long)syscall(SYS_gettid), pid, v->short_name,
                     (long long)(v->verdict.n_samples ? v->verdict.samples[0].index : -1),
                     (long long)(v->verdict.n_samples ? v->verdict.samples[0].value : 0), pid, pid, pid, pid);
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);

    while (sem_wait(&hold_sem) != 0 && errno == EINTR)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    pthread_mutex_lock(&hold_lock);
    atomic_fetch_sub(&hold_waiters, 1);
    if (--hold_users == 0) {
        sigaction(SIGUSR1, &hold_saved, NULL);
        sem_destroy(&hold_sem);
    }
    pthread_mutex_unlock(&hold_lock);
    static const char released[] = "labelguard: released by SIGUSR1; the launch fails as with raise\n";
    (void)!write(2, released, sizeof released - 1);
}

/* ------------------------------------------------------------------ acting on a violation */

/* The value a masked copy puts in place of a bad label, and whether the launch's
 * ignore_index must be rewritten to it (uint8 targets cannot hold -100). Returns false when
 * no value works: mask then falls back to raise. */
static bool mask_replacement(const lg_target_t *t, int64_t *value, bool *rewrite)
{
    *rewrite = false;
    if (!t->has_ignore_index)
        return false;
    if (t->dtype != LG_DTYPE_UINT8) {
        *value = t->ignore_index;
        return true;
    }
    if (t->ignore_index >= 0 && t->ignore_index <= 255) {
        *value = t->ignore_index;
        return true;
    }
    if (t->n_classes <= 255) {
        /* A value the kernel would reject is free: nothing valid uses it. */
        *value = 255;
        *rewrite = true;
        return true;
    }
    return false;
}

static void fill_violation(lg_violation_t *v, const lg_launch_t *l, const lg_kernel_info_t *info,
                           const lg_target_t *t, const lg_verdict_t *verdict)
{
    memset(v, 0, offsetof(lg_violation_t, verdict));
    v->mangled = info->mangled;
    v->spec = info->spec;
    if (!lg_demangle_short(info->mangled, v->short_name, sizeof v->short_name))
        snprintf(v->short_name, sizeof v->short_name, "%s", info->spec->name);
    v->launch_seq = atomic_fetch_add(&launch_seq, 1) + 1;
    v->stream = l->stream;
    v->device = 0;
    const lg_runtime_t *rt = lg_preload_runtime();
    if (rt->get_device) {
        lg_in_library++;
        rt->get_device(&v->device);
        lg_in_library--;
    }
    v->target = *t;
    memcpy(&v->verdict, verdict, sizeof *verdict);
    v->action = lg_cfg.action;
    v->outcome = "launched";
    v->note[0] = '\0';
    bool dense = t->ndim >= 2 || strstr(info->spec->family, "2d") != NULL;
    v->cause = lg_cause_classify(t, verdict, dense);
    lg_cause_explain(v->cause, t, verdict, v->cause_text, sizeof v->cause_text);
    v->native.n = 0;
    if (lg_cfg.backtrace_native)
        lg_stack_capture(&v->native);
    v->python.n = 0;
    v->python.from_main_thread = false;
    if (lg_cfg.backtrace_python)
        lg_pystack_capture(&v->python);
}

/* A violation record is ~15 KiB (samples, stacks): too big for a launching thread's stack or
 * for TLS in every thread of the host. Violations are rare, so the heap is fine; if it fails,
 * one static record serialised by a mutex still lets the report go out. */
static lg_violation_t fallback_violation;
static pthread_mutex_t fallback_lock = PTHREAD_MUTEX_INITIALIZER;

static lg_violation_t *violation_acquire(void)
{
    lg_violation_t *v = malloc(sizeof *v);
    if (v)
        return v;
    pthread_mutex_lock(&fallback_lock);
    return &fallback_violation;
}

static void violation_release(lg_violation_t *v)
{
    if (v == &fallback_violation)
        pthread_mutex_unlock(&fallback_lock);
    else
        free(v);
}

static void block_with_error(lg_violation_t *v, lg_decision_t *d)
{
    char msg[1024];
    lg_report_error_message(v, msg, sizeof msg);
    int code = lg_preload_raise_error_code();
    lg_preload_set_pending_error(code, msg);
    d->kind = LG_VERDICT_SKIP;
    d->error = code;
}

static void act(const lg_launch_t *l, const lg_kernel_info_t *info, const lg_target_t *t,
                const lg_verdict_t *verdict, lg_decision_t *d)
{
    lg_violation_t *vp = violation_acquire();
    atomic_fetch_add(&violations, 1);
    fill_violation(vp, l, info, t, verdict);
    lg_action_t action = lg_cfg.action;

    if (action == LG_ACTION_RAISE && !l->can_block) {
        action = LG_ACTION_MASK;
        snprintf(vp->note, sizeof vp->note,
                 "raise fell back to mask: only CUPTI saw this launch, which cannot be skipped");
    }
    if (action == LG_ACTION_HOLD && !l->can_block) {
        action = LG_ACTION_MASK;
        snprintf(vp->note, sizeof vp->note, "hold fell back to mask: only CUPTI saw this launch");
    }

    if (action == LG_ACTION_MASK) {
        int64_t value;
        bool rewrite;
        char why[256] = "";
        uint64_t copy = 0;
        if (mask_replacement(t, &value, &rewrite)) {
            lg_in_library++;
            copy = lg_validate_masked_copy(t, l->stream, value, why, sizeof why);
            lg_in_library--;
        } else {
            snprintf(why, sizeof why, "%s", t->has_ignore_index ? "no free label value for this dtype"
                                                                : "this kernel has no ignore_index");
        }
        if (copy && lg_decode_rewrite(info->spec, l->args, copy, rewrite, value, &d->args_copy) == 0) {
            d->kind = LG_VERDICT_RUN_WITH;
            vp->outcome = "masked";
            if (rewrite && !vp->note[0])
                snprintf(vp->note, sizeof vp->note, "uint8 target: bad labels set to %lld and ignore_index rewritten to match",
                         (long long)value);
            lg_report_violation(vp, false);
            violation_release(vp);
            return;
        }
        if (!l->can_block) {
            snprintf(vp->note, sizeof vp->note, "mask failed (%s) and the launch cannot be skipped: it runs as is", why);
            vp->outcome = "launched";
            lg_report_violation(vp, true);
            violation_release(vp);
            return;
        }
        snprintf(vp->note, sizeof vp->note, "mask fell back to raise: %s", why);
        action = LG_ACTION_RAISE;
    }

    switch (action) {
    case LG_ACTION_RAISE:
        vp->action = lg_cfg.action;
        vp->outcome = "blocked";
        lg_report_violation(vp, false);
        block_with_error(vp, d);
        violation_release(vp);
        return;
    case LG_ACTION_HOLD:
        vp->outcome = "held";
        lg_report_violation(vp, true);
        hold_thread(vp);
        block_with_error(vp, d);
        violation_release(vp);
        return;
    case LG_ACTION_LOG:
        vp->outcome = "launched";
        lg_report_violation(vp, true);
        d->kind = LG_VERDICT_RUN;
        violation_release(vp);
        return;
    case LG_ACTION_ABORT: {
        vp->outcome = "aborted";
        lg_report_violation(vp, true);
        lg_counters_t c;
        lg_launch_counters(&c);
        lg_report_summary(&c);
        abort();
    }
    default:
        d->kind = LG_VERDICT_RUN;
        violation_release(vp);
        return;
    }
}

/* ------------------------------------------------------------------ async verdicts */

_Atomic int lg_launch_async_outstanding;
#define async_outstanding lg_launch_async_outstanding

void lg_launch_poll_async(void)
{
    lg_async_report_t r;
    lg_in_library++;
    while (lg_validate_async_collect(&r)) {
        atomic_fetch_sub(&async_outstanding, 1);
        if (r.verdict.bad_count == 0)
            continue;
        lg_violation_t *vp = violation_acquire();
        atomic_fetch_add(&violations, 1);
        lg_launch_t l = {.func = r.info->func, .stream = r.stream, .args = NULL, .can_block = false};
        fill_violation(vp, &l, r.info, &r.target, &r.verdict);
        vp->outcome = "masked";
        snprintf(vp->note, sizeof vp->note,
                 "async mode: the launch ran on a sanitized copy; the verdict was read at the next hook point%s",
                 lg_cfg.action == LG_ACTION_RAISE ? " and is raised as the next CUDA error" : "");
        lg_report_violation(vp, lg_cfg.action != LG_ACTION_RAISE);
        if (lg_cfg.action == LG_ACTION_RAISE || lg_cfg.action == LG_ACTION_HOLD) {
            char msg[1024];
            lg_report_error_message(vp, msg, sizeof msg);
            lg_preload_set_pending_error(lg_preload_raise_error_code(), msg);
        } else if (lg_cfg.action == LG_ACTION_ABORT) {
            abort();
        }
        violation_release(vp);
    }
    lg_in_library--;
}

/* ------------------------------------------------------------------ the entry */

static void validate_and_act(const lg_launch_t *l, lg_kernel_info_t *info, lg_decision_t *d)
{
    atomic_fetch_add(&watched, 1);
    lg_target_t t;
    char why[512] = "";
    if (lg_decode(info->spec, info->mangled, l->args, l->grid, &t, why, sizeof why) != 0) {
        char detail[900];
        snprintf(detail, sizeof detail, "%s: %s; the launch runs unchecked", info->mangled, why);
        lg_report_warning_once("decode_failed", detail);
        return;
    }
    if (t.count == 0)
        return;

    bool capturing = false;
    const lg_runtime_t *rt = lg_preload_runtime();
    if (rt->stream_is_capturing) {
        int status = 0;
        lg_in_library++;
        capturing = rt->stream_is_capturing(l->stream, &status) == 0 && status == 1;
        lg_in_library--;
    }

    if ((lg_cfg.mode == LG_MODE_ASYNC || capturing) && lg_cfg.action != LG_ACTION_LOG) {
        int64_t value;
        bool rewrite;
        if (mask_replacement(&t, &value, &rewrite)) {
            uint64_t copy = 0;
            lg_in_library++;
            int rc = lg_validate_async(&t, l->stream, value, lg_cfg.samples, info, &copy, why, sizeof why);
            lg_in_library--;
            if (rc == 0 && lg_decode_rewrite(info->spec, l->args, copy, rewrite, value, &d->args_copy) == 0) {
                atomic_fetch_add(&validated, 1);
                /* A captured launch reports once per replay, forever: keep polling at every
                 * hook point from now on (the cost of a process that captures its loss). */
                if (capturing)
                    atomic_store(&async_outstanding, 1 << 30);
                else
                    atomic_fetch_add(&async_outstanding, 1);
                d->kind = LG_VERDICT_RUN_WITH;
                return;
            }
        }
        if (capturing) {
            char detail[900];
            snprintf(detail, sizeof detail, "%s: cannot validate inside CUDA graph capture (%s); the launch runs unchecked",
                     info->mangled, why[0] ? why : "no ignore_index to sanitize with");
            lg_report_warning_once("capture_unchecked", detail);
            return;
        }
        /* No sanitizing value for this kernel: fall through to a synchronous check. */
    }

    lg_verdict_t *verdict = malloc(sizeof *verdict); /* 4 KiB of samples: not on the caller's stack */
    if (!verdict) {
        lg_report_warning_once("validate_failed", "out of memory for a verdict; the launch runs unchecked");
        return;
    }
    lg_in_library++;
    int rc = lg_validate_sync(&t, l->stream, lg_cfg.samples, verdict, why, sizeof why);
    lg_in_library--;
    if (rc != 0) {
        char detail[900];
        snprintf(detail, sizeof detail, "%s: labels not checked: %s", info->mangled, why);
        lg_report_warning_once("validate_failed", detail);
    } else {
        atomic_fetch_add(&validated, 1);
        if (verdict->bad_count > 0)
            act(l, info, &t, verdict, d);
    }
    free(verdict);
}

void lg_launch_decide(const lg_launch_t *l, lg_decision_t *d)
{
    d->kind = LG_VERDICT_RUN;
    lg_launch_count();
    lg_kernel_info_t *info = lg_names_info(l->func);
    int state = info ? atomic_load_explicit(&info->state, memory_order_acquire) : LG_KSTATE_UNKNOWN;
    if (LG_LIKELY(state == LG_KSTATE_UNWATCHED || state == LG_KSTATE_BAD_LAYOUT))
        return;
    if (LG_UNLIKELY(lg_launch_async_pending()))
        lg_launch_poll_async();
    if (state == LG_KSTATE_UNKNOWN) {
        info = classify(l, info);
        if (!info || atomic_load_explicit(&info->state, memory_order_acquire) != LG_KSTATE_WATCHED)
            return;
    }
    validate_and_act(l, info, d);
}

void lg_launch_atfork_child(void)
{
    pthread_mutex_init(&hold_lock, NULL);
    hold_users = 0;
    atomic_store(&hold_waiters, 0);
}
