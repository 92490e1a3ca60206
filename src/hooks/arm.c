/* arm.c: late arming, in a process that did not preload the library: `labelguard attach PID`
 * (gdb dlopen's liblabelguard.so and calls labelguard_arm()) and the Python API's
 * labelguard_enable() (ctypes loads the library with RTLD_GLOBAL and calls it). There the
 * interposed entry points of preload.c are not first in the symbol lookup order, so objects
 * keep calling libcudart directly. Arming rewrites those objects' GOT slots (R_*_JUMP_SLOT and
 * R_*_GLOB_DAT relocations against a hooked name) to point at our hooks, after storing the
 * function the slot pointed at as the hook's real function. It also redirects every object's
 * `dlopen` slot to arm_dlopen.c's wrapper, which arms the objects each dlopen brings
 * (lg_arm_got_loaded): torch imported after enable, CUDA extensions, Triton's modules; and every
 * `cuptiSubscribe`/`cuptiSubscribe_v2` slot to cupti_slot.c's wrappers, so that a profiler's
 * subscription reaches the hand-over as under LD_PRELOAD.
 *
 * Arming is all it does: no CUDA or driver call, no CUPTI, no log I/O. The library starts at
 * the first hook, on the application thread that makes it (lg.c), like a preloaded one, and
 * CUPTI is subscribed there only where no interposable runtime exists (cupti_slot.c). So an
 * enable() made before the application's first CUDA call starts no CUDA (a parent that then
 * forks CUDA workers stays fork-safe; the backend is chosen once the application has its
 * context), and gdb's call of labelguard_arm(), made wherever the debugger stopped the job
 * (inside libcuda, holding its locks), never re-enters the CUDA libraries; nor does it allocate,
 * use stdio or call the loader but for one dl_iterate_phdr (arm_objects.c: fixed tables, symbols
 * looked up by hand), and the CLI moves the thread out of malloc and the loader first. What
 * arming finds that the user must hear about (slots it could not write) is said by the start
 * (lg_arm_after_start).
 *
 * Who calls it: gdb (via the CLI), a program through include/labelguard.h, and the dlopen
 * wrapper; any thread, serialised by one mutex, which a dlopen and gdb's call only ever try
 * (trylock): a dlopen that finds it taken leaves a request the holder serves before it lets
 * go, gdb's call is refused (attach again). Idempotent: a slot that already points into
 * our object (a hook, or every slot of a preloaded process) is counted, never rewritten, so a
 * preloaded library is not hooked twice. Not covered: function pointers the program copied
 * out of a GOT before arming, objects loaded by a dlopen reached through dlsym("dlopen") or
 * from libc itself. In a process holding two CUDA runtimes, each slot gets the copy of the hooks
 * of the runtime it calls (arm_got.c); one it cannot tell is left alone (docs/limits.md).
 *
 * Before arming, labelguard_enable refuses a process whose CUDA context is already dead (a
 * sticky error, e.g. 710 after a device-side assert: nothing can be checked or recovered
 * there; asked only where CUDA has started, i.e. libcuda is loaded) and one that launches
 * kernels through a static runtime CUPTI cannot watch (there, on the application's thread and
 * with its context made, enable starts the library itself: no hook would). labelguard_arm
 * (attach) asks neither (both are calls into the CUDA libraries) and refuses a process that
 * has CUDA but no shared libcudart: only CUPTI could see its launches, and subscribing is no
 * work for a debugger's call.
 *
 * Tests: tests/unit/test_arm.c (a fixture library's JUMP_SLOT and GLOB_DAT slots, lazy and -z
 * now builds; slots already pointing into the patching object; objects loaded after arming,
 * through the dlopen wrapper, with the caller's RUNPATH), tests/e2e/test_attach.sh (gdb attach
 * to a running program under the runtime test double), tests/e2e/test_enable_early.sh (enable
 * before any runtime is loaded, then a CUDA library dlopen'd), tests/torch-fake/test_enable.sh
 * (real torch: enable after and before `import torch`, a library dlopen'd after, a dead
 * context, disable; a fork child of a parent that enabled before CUDA), tests/e2e/
 * test_enable_fork.sh (no CUDA call before the application's first; fork), tests/e2e/
 * test_attach_busy.sh (ten attaches to a loop of launches and syncs on the asynchronous
 * double), tests/torch-fake/test_profiler.sh (torch.profiler after enable), tests/e2e/
 * test_arm_mixed.sh (two runtimes, armed by enable and by attach), tests/e2e/
 * test_attach_malloc.sh (attaches to a thread inside malloc), tests/unit/test_arm_alloc.c (no
 * malloc, fopen or dlopen inside labelguard_arm). */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/preload.h"
#if __has_include("labelguard.h")
#include "labelguard.h" /* declares labelguard_arm: checked against the definition */
#endif

/* Each runtime version's copies of the hooks (preload.h: one per libcudart version node): a
 * slot gets the copy of the runtime it calls, so a CUDA 12 library's launches stay in
 * libcudart.so.12 next to a CUDA 13 torch. Their C names are local to our object, so these
 * addresses are our own definitions. */
#define LG_DECLARE_COPY(name, ret, params, args) \
    ret lg_preload_v12_##name params;            \
    ret lg_preload_v11_##name params;
LG_HOOKS(LG_DECLARE_COPY)
#undef LG_DECLARE_COPY
#define LG_COPY_12(name, ret, params, args) \
    {#name, (void *)lg_preload_v12_##name, &lg_preload_bind_12.real[LG_IDX_##name]},
#define LG_COPY_11(name, ret, params, args) \
    {#name, (void *)lg_preload_v11_##name, &lg_preload_bind_11.real[LG_IDX_##name]},
static const lg_hook_t copies_12[] = {LG_HOOKS(LG_COPY_12)};
static const lg_hook_t copies_11[] = {LG_HOOKS(LG_COPY_11)};

/* The object holding this code, in arm_objects.c's last listing. */
static const struct dl_phdr_info *self_object(void)
{
    return lg_arm_objects_at(lg_arm_objects_find((uintptr_t)&labelguard_arm));
}

/* ------------------------------------------------------------------ enable */

/* Our CUDA entry points, one copy per runtime version (13, the default, first), then the dlopen
 * wrapper and CUPTI's subscribe calls; arm_majors: the runtime each is the copy for (0: none). */
static lg_hook_t arm_hooks[3 * LG_N_HOOKS + 3];
static int arm_majors[3 * LG_N_HOOKS + 3];
static int n_arm_hooks, n_cuda_hooks;

/* Sticky errors: the context is lost, every later call of the process returns the error. */
static bool sticky(int e)
{
    switch (e) {
    case 700: /* cudaErrorIllegalAddress */
    case 702: /* cudaErrorLaunchTimeout */
    case 710: /* cudaErrorAssert */
    case 714: /* cudaErrorHardwareStackError */
    case 715: /* cudaErrorIllegalInstruction */
    case 716: /* cudaErrorMisalignedAddress */
    case 717: /* cudaErrorInvalidAddressSpace */
    case 718: /* cudaErrorInvalidPc */
    case 719: /* cudaErrorLaunchFailure */ return true;
    default: return false;
    }
}

/* True where CUDA has started in this process: the runtime loads libcuda at its first call that
 * needs the driver. Asked without a CUDA call or the loader: libcuda in the listing (enable_locked
 * lists the objects first). */
static bool cuda_started(void) { return lg_arm_objects_named("libcuda.so"); }

/* True (why filled) when a loaded runtime reports a sticky error. cudaPeekAtLastError reads
 * it without clearing anything of the application's and without creating a context; it is
 * each libcudart's own, never our hook. Not asked before CUDA has started: no context can be
 * dead then, and the call would be the process's first CUDA call, not the application's. */
static bool context_dead(char *why, size_t cap)
{
    if (!cuda_started())
        return false;
    lg_cudart_t rts[4];
    int n = lg_runtime_cudarts(rts, 4);
    for (int i = 0; i < n; i++) {
        lg_runtime_loader_lock();
        void *h = dlopen(rts[i].path, RTLD_LAZY | RTLD_NOLOAD);
        lg_runtime_loader_unlock();
        if (!h)
            continue;
        int (*peek)(void) = (int (*)(void))dlsym(h, "cudaPeekAtLastError");
        const char *(*name)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorName");
        const char *(*text)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorString");
        lg_runtime_in_library++;
        int e = peek ? peek() : 0;
        char what[256];
        snprintf(what, sizeof what, "%s %d: %s", name ? name(e) : "error", e, text ? text(e) : "");
        lg_runtime_in_library--;
        dlclose(h);
        if (sticky(e)) {
            if (why && cap)
                snprintf(why, cap,
                         "the CUDA context of this process is already dead (%s) from an earlier launch, e.g. a "
                         "device-side assert: nothing can be checked in it any more ---> HINT: restart the "
                         "process/kernel and enable labelguard first",
                         what);
            return true;
        }
    }
    return false;
}

/* Kernels launched with no shared libcudart in the process: a CUDA context is current or
 * the primary one is active, through a libcuda someone loaded. Only CUPTI can see those. */
static bool static_runtime_in_use(void)
{
    lg_runtime_loader_lock();
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    lg_runtime_loader_unlock();
    if (!cuda)
        return false;
    int (*state)(int, unsigned *, int *) = (int (*)(int, unsigned *, int *))dlsym(cuda, "cuDevicePrimaryCtxGetState");
    int (*current)(void **) = (int (*)(void **))dlsym(cuda, "cuCtxGetCurrent");
    unsigned flags = 0;
    int active = 0;
    void *ctx = NULL;
    bool in_use = (state && state(0, &flags, &active) == 0 && active) || (current && current(&ctx) == 0 && ctx);
    dlclose(cuda);
    return in_use;
}

static int add_copies(int k, const lg_hook_t *copies, int n, int major)
{
    for (int i = 0; i < n; i++, k++) {
        arm_hooks[k] = copies[i];
        arm_majors[k] = major;
    }
    return k;
}

/* The hook set, once (the objects listed): our CUDA entry points per runtime version
 * (counted), then dlopen and CUPTI's subscribe calls (not counted: they launch nothing), whose
 * exported definitions are looked up in our own object: in a library dlopen'd into a running
 * process, `(void *)cuptiSubscribe` taken inside it would bind to libcupti's. */
static int build_hooks(void)
{
    if (n_arm_hooks)
        return n_arm_hooks;
    const struct dl_phdr_info *self = self_object();
    int n = 0;
    const lg_hook_t *table = lg_preload_hooks(&n);
    if (!self || !table || n != LG_N_HOOKS)
        return 0;
    int k = add_copies(0, table, n, 13);
    k = add_copies(k, copies_12, LG_N_HOOKS, 12);
    k = add_copies(k, copies_11, LG_N_HOOKS, 11);
    n_cuda_hooks = k;
    lg_arm_dlopen_hook(&arm_hooks[k]);
    arm_majors[k++] = 0;
    lg_hook_t cupti[2];
    int n_cupti = lg_cupti_slot_hooks(cupti, 2);
    for (int i = 0; i < n_cupti; i++) {
        cupti[i].replacement = lg_arm_objects_lookup(self, cupti[i].name, NULL);
        if (cupti[i].replacement)
            arm_majors[k] = 0, arm_hooks[k++] = cupti[i];
    }
    n_arm_hooks = k;
    return n_arm_hooks;
}

/* Other objects' GOT slots will point into this library: a dlclose of it (ctypes handles can be
 * closed) must never unmap it. Our initial-exec TLS already keeps glibc from unloading it;
 * NODELETE on a NOLOAD open says so explicitly, whatever the TLS model. Not from a debugger's
 * call (a dlopen): there the debugger's own dlopen holds a reference nobody drops. */
static void keep_loaded(void)
{
    Dl_info self;
    if (!dladdr((void *)&labelguard_enable, &self) || !self.dli_fname)
        return;
    lg_runtime_loader_lock();
    (void)dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    lg_runtime_loader_unlock();
}

/* True when the process binds cudaLaunchKernel to our definition already (LD_PRELOAD): nothing
 * was instantiated behind our back, so graphs need no "armed late" bookkeeping. The first
 * listed object that defines it is the one the global scope finds (the executable, then the
 * preloaded objects, then the rest in load order). */
static bool preloaded(void)
{
    for (int i = 0; lg_arm_objects_at(i); i++)
        if (lg_arm_objects_lookup(lg_arm_objects_at(i), "cudaLaunchKernel", NULL))
            return lg_arm_objects_at(i) == self_object();
    return false;
}

/* Graphs instantiated before arming are replayed unseen: graphs.c is told, by the start when
 * arming ran inside a debugger's call (graphs.c takes a lock the stopped job may hold). */
static _Atomic int armed_late_pending;

/* labelguard_enable and labelguard_arm without the lock; *objects: objects with an armed slot.
 * debugger: called by gdb (or the CLI's injector) wherever it stopped the job: no call into
 * the CUDA libraries, CUPTI, the log or another module's lock, only the GOT walk. */
static int enable_locked(char *why, size_t cap, int *objects, bool debugger)
{
    *objects = 0;
    lg_arm_objects_list(NULL, NULL, NULL);
    if (!debugger && context_dead(why, cap))
        return -1;
    bool have_runtime = lg_arm_objects_majors(NULL) > 0;
    if (!have_runtime && debugger && cuda_started()) {
        if (why && cap)
            snprintf(why, cap,
                     "this process uses CUDA without a shared libcudart (a static runtime, or the driver API alone): "
                     "only CUPTI could see its launches, and attach does not subscribe to CUPTI from inside the "
                     "debugger's call ---> HINT: start the program under `labelguard run` with "
                     "LABELGUARD_HOOKS=cupti, or call labelguard.enable() from the program itself");
        return -1;
    }
    if (!have_runtime && !debugger && static_runtime_in_use()) {
        /* A context without a shared libcudart: a static runtime (or a driver-API program).
         * CUPTI is the only layer that sees its launches, and no hook will ever start the
         * library: start it here, on the application's thread, its context made. */
        if (lg_config_values.hooks != LG_HOOKS_INTERPOSE)
            (void)lg_start_ensure(); /* CUPTI stays off before our constructor: said just below */
        if (!lg_cupti_active()) {
            if (why && cap)
                snprintf(why, cap,
                         "kernels are launched through a CUDA runtime linked statically into the program (no "
                         "libcudart to redirect) and CUPTI cannot subscribe ---> HINT: run it under `labelguard "
                         "run` with a shared runtime (nvcc -cudart shared), or free CUPTI's slot (no profiler) "
                         "and keep LABELGUARD_HOOKS=auto");
            return -1;
        }
    }
    /* Patched under LABELGUARD_HOOKS=cupti too: the hooks then start the library and pass
     * every call straight through, as preloaded ones do. */
    lg_arm_objects_list(NULL, NULL, NULL); /* the start above may have loaded objects */
    int n = build_hooks();
    bool late = !preloaded();
    if (!debugger && n > 0)
        keep_loaded();
    /* Everything loaded now, remembered: the dlopen wrapper's walks then visit new objects only. */
    int n_armed = n > 0 ? lg_arm_got_walk_all(arm_hooks, arm_majors, n, n_cuda_hooks, objects) : -1;
    if (n_armed < 0) {
        if (why && cap)
            snprintf(why, cap,
                     "no GOT slot of the CUDA launch functions could be rewritten (mprotect refused, or the "
                     "library's own hooks were not found) ---> HINT: start the program under `labelguard run` "
                     "(LD_PRELOAD) instead");
        return -1;
    }
    if (n_armed > 0 && late) {
        if (debugger)
            atomic_store(&armed_late_pending, 1);
        else
            lg_graphs_armed_late(); /* graphs instantiated before now were not seen */
    }
    lg_arm_got_armed();
    atomic_store(&lg_launch_disabled, 0);
    return n_armed;
}

void lg_arm_after_start(void)
{
    if (atomic_exchange(&armed_late_pending, 0))
        lg_graphs_armed_late();
    lg_arm_got_say_failed();
}

LG_EXPORT int labelguard_enable(char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    lg_arm_got_lock();
    int objects = 0;
    int n = enable_locked(why, cap, &objects, false);
    lg_arm_got_unlock();
    lg_arm_got_requests(); /* dlopens that finished while we held the lock */
    if (lg_start_done())
        lg_arm_got_say_failed();
    return n;
}

LG_EXPORT int labelguard_disable(void)
{
    atomic_store(&lg_launch_disabled, 1);
    return 0;
}

/* gdb's (or the CLI injector's) call, on whichever thread the debugger stopped, possibly inside
 * libcuda or malloc: the GOT walk and one write(2) of the result, nothing else. The lock is
 * arm_got.c's (only enable and the walks take it, never while calling CUDA); a thread stopped
 * holding it is inside a walk, which takes no lock of ours: trylock, and a busy lock is a
 * refusal, never a wait. */
LG_EXPORT int labelguard_arm(void)
{
    char why[512] = "";
    int objects = 0, armed_n = -1;
    if (lg_arm_got_trylock()) {
        armed_n = enable_locked(why, sizeof why, &objects, true);
        lg_arm_got_unlock();
    } else {
        snprintf(why, sizeof why, "another thread is arming this process right now ---> HINT: attach again");
    }
    lg_arm_got_requests(); /* dlopens that finished while we held the lock (trylock: never waits) */
    if (!lg_config_values.quiet) {
        char line[700];
        int len = armed_n >= 0 ? snprintf(line, sizeof line, "labelguard: armed %d launch entries in %d objects\n",
                                          armed_n, objects)
                               : snprintf(line, sizeof line, "labelguard: arming failed: %s\n", why);
        if (len > 0 && write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1) < 0) {
            /* stderr gone: nothing to tell */
        }
    }
    return armed_n;
}
