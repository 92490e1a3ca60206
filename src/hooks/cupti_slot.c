/* cupti_slot.c: CUPTI's subscriber slot — whether we take it, how, and giving it to a profiler.
 *
 * CUPTI before 13.2, and 13.2 on a driver before CUDA 13.3 (r610), allows one subscriber per
 * process, and a profiler that finds the slot taken
 * (torch.profiler's Kineto in PyTorch 2.9-2.11, Nsight) records no GPU activity at all. So:
 *
 * - Whether (lg_cupti_slot_wanted, asked by lg.c's start): LABELGUARD_HOOKS=cupti always;
 *   interpose never; auto only where interposition cannot see the launches (no interposable
 *   libcudart in the process: a static runtime). The same rule on every path: LD_PRELOAD,
 *   labelguard_enable and `labelguard attach` (their GOT patching covers the runtime as the
 *   preload does). The answer's reason goes into the start event.
 * - How (lg_cupti_slot_take, cupti.c's start): cuptiSubscribe_v2, found with dlsym so that an
 *   older libcupti still works, names us ("CUPTI for labelguard") and asks for multiple
 *   subscribers with the params struct of CUPTI 13.2; a v2 that refuses that struct's size
 *   (INVALID_PARAMETER: 13.0/13.1) is asked again with the 13.0 struct; one that answers
 *   MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (CUPTI 13.2 on a driver before CUDA 13.3 / r610, which
 *   lacks the feature, says so even with the slot free) is asked again for the single slot
 *   (allowMultipleSubscribers=0); then, or with no v2, cuptiSubscribe. Once another client has
 *   subscribed with cuptiSubscribe through our export, only cuptiSubscribe is used (no mixing
 *   of v1 and v2). The attempts and answers go into the start event's hooks_reason.
 * - Handing over: this file exports cuptiSubscribe and cuptiSubscribe_v2. A preloaded library's
 *   definition wins over libcupti's for every caller that binds the name dynamically, as Kineto
 *   does. The call goes unchanged to the caller's own CUPTI (the libcupti its DT_NEEDED names,
 *   where two instances are loaded); only if CUPTI answers
 *   CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while we hold the slot do we unsubscribe,
 *   warn (cupti_released) and ask CUPTI again for the caller, whose answer it then gets. Where
 *   the library is armed late (enable, attach) the profiler's binding is libcupti's own: arming
 *   rewrites its cuptiSubscribe and cuptiSubscribe_v2 GOT slots to these wrappers
 *   (lg_cupti_slot_hooks), so the hand-over works there too.
 *
 * Threads: take runs inside cupti.c's pthread_once; the exported functions run on the
 * profiler's thread, serialised with each other by slot_lock. Tests:
 * tests/e2e/test_cupti_subscriber.sh, under the single-slot CUPTI double
 * tests/fakecuda/cupti/libcupti.c (FAKECUPTI_MULTI=unsupported: a driver without multiple
 * subscribers; FAKECUDA_CUPTI=1: launches reach our callback; a second instance of it,
 * build/fakecupti12/libcupti.so.12, that the client links against: its subscription must
 * reach that instance, not the first), and tests/torch-fake/test_profiler.sh (torch.profiler
 * after enable(), real torch on the same double). That a real CUPTI 13.2 on an
 * r610+ driver grants the second subscriber, and that Kineto then records kernels, only a GPU
 * run shows (docs/limits.md).
 */
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hooks/hooks.h"

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*subscribe_v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                       CUpti_SubscriberParams *);
typedef CUptiResult (*unsubscribe_fn)(CUpti_SubscriberHandle);

/* CUPTI 13.2's CUpti_SubscriberParams: 13.0's fields, then allowMultipleSubscribers. */
typedef struct {
    size_t structSize;
    const char *subscriberName;
    char *oldSubscriberName;
    size_t oldSubscriberSize;
    uint8_t allowMultipleSubscribers;
} params_13_2_t;
#define PARAMS_13_2_SIZE (offsetof(params_13_2_t, allowMultipleSubscribers) + sizeof(uint8_t))
_Static_assert(offsetof(params_13_2_t, oldSubscriberSize) == offsetof(CUpti_SubscriberParams, oldSubscriberSize),
               "13.2's params extend 13.0's");

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;                   /* the libcupti we subscribed through */
static CUpti_SubscriberHandle held; /* our subscriber while we hold the slot, else NULL */
static void (*stop_callback)(void); /* cupti.c's: our callback returns at once after it */
static char holder_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1];

/* A parent thread may have been subscribing at fork time; the child never uses CUPTI. */
void lg_cupti_slot_after_fork(void) { pthread_mutex_init(&slot_lock, NULL); }

bool lg_cupti_slot_wanted(bool interposable, char *why, size_t why_len)
{
    switch (lg_config_values.hooks) {
    case LG_HOOKS_INTERPOSE: snprintf(why, why_len, "LABELGUARD_HOOKS=interpose: CUPTI not used"); return false;
    case LG_HOOKS_CUPTI: snprintf(why, why_len, "LABELGUARD_HOOKS=cupti: CUPTI only"); return true;
    default: break;
    }
    if (!interposable) {
        snprintf(why, why_len, "no interposable CUDA runtime in the process (static cudart?): CUPTI");
        return true;
    }
    snprintf(why, why_len,
             "interposition sees the runtime's launches: CUPTI's subscriber slot is left to profilers "
             "(torch.profiler, Nsight)");
    return false;
}

/* Set by our exported cuptiSubscribe when another client in the process subscribes with the v1
 * call (Kineto in torch 2.15 imports only cuptiSubscribe). NVIDIA forbids mixing v1 and v2
 * subscribers in one process, so once one is seen our own start keeps to v1. This is the only
 * signal we have: a v1 client that subscribes only after our start is handled by the handover
 * below (its refused cuptiSubscribe makes us give the slot up), and one that called libcupti
 * through a pointer it took before arming is not seen at all. */
static bool v1_client_seen; /* __atomic */

/* One subscribe attempt: appends "CALL SETTING: RESULT" to how (attempts separated by "; ") and
 * returns CUPTI's answer. A v2 attempt clears holder_name first so that it names the holder of
 * that attempt's refusal only. */
static CUptiResult attempt(subscribe_v2_fn v2, subscribe_fn v1, params_13_2_t *p, CUpti_CallbackFunc cb,
                           CUpti_SubscriberHandle *out, const char *what, char *how, size_t how_len)
{
    if (v2)
        holder_name[0] = '\0'; /* v1 names no holder: keep what v2's refusal said */
    CUptiResult r = v2 ? v2(out, cb, NULL, (CUpti_SubscriberParams *)p) : v1(out, cb, NULL);
    holder_name[sizeof holder_name - 1] = '\0';
    size_t n = strlen(how);
    if (n < how_len)
        snprintf(how + n, how_len - n, "%s%s: %s", n ? "; " : "", what,
                 r == CUPTI_SUCCESS                                   ? "subscribed"
                 : r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "refused (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
                 : r == CUPTI_ERROR_INVALID_PARAMETER                  ? "refused (INVALID_PARAMETER)"
                                                                       : "failed");
    return r;
}

/* The order, and why:
 * 1. a v1 client already subscribed in this process: cuptiSubscribe only (no mixing);
 * 2. cuptiSubscribe_v2 with CUPTI 13.2's struct and allowMultipleSubscribers=1;
 * 3. INVALID_PARAMETER: a CUPTI before 13.2 that does not know the larger struct: 13.0's struct;
 * 4. MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUPTI 13.2 says so also when the driver lacks the
 *    feature (it needs a CUDA 13.3 driver, r610+), not only when the slot is taken, so ask
 *    again for the single slot with allowMultipleSubscribers=0;
 * 5. v2 still refused (or absent): cuptiSubscribe.
 * *how lists every attempt and its answer, the last one being the call that got the slot or
 * the final refusal (lg_cupti_slot_how); lg.c puts it into the start event's hooks_reason. */
/* The subscribe attempts and their answers, for the start event (lg_cupti_slot_how). */
static char how_text[768];

const char *lg_cupti_slot_how(void) { return how_text; }

int lg_cupti_slot_take(void *cupti, void *callback, void (*stop)(void), void **handle)
{
    char *how = how_text;
    size_t how_len = sizeof how_text;
    CUpti_CallbackFunc cb = (CUpti_CallbackFunc)callback;
    CUpti_SubscriberHandle *out = (CUpti_SubscriberHandle *)handle;
    subscribe_v2_fn v2 = (subscribe_v2_fn)dlsym(cupti, "cuptiSubscribe_v2");
    subscribe_fn v1 = (subscribe_fn)dlsym(cupti, "cuptiSubscribe");
    CUptiResult r = CUPTI_ERROR_NOT_INITIALIZED;
    bool v1_only = __atomic_load_n(&v1_client_seen, __ATOMIC_ACQUIRE);
    how[0] = '\0';
    holder_name[0] = '\0';
    if (v2 && !v1_only) {
        params_13_2_t p = {
            .structSize = PARAMS_13_2_SIZE,
            .subscriberName = "labelguard",
            .oldSubscriberName = holder_name,
            .oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN,
            .allowMultipleSubscribers = 1,
        };
        /* Subscribed is all its answer says: a CUPTI before 13.2 may take the larger struct and
         * ignore the field, granting the single slot. */
        r = attempt(v2, NULL, &p, cb, out, "cuptiSubscribe_v2 allowMultipleSubscribers=1", how, how_len);
        if (r == CUPTI_ERROR_INVALID_PARAMETER) {
            p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
            r = attempt(v2, NULL, &p, cb, out, "cuptiSubscribe_v2 with CUPTI 13.0's params (CUPTI before 13.2)",
                        how, how_len);
        } else if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
            p.allowMultipleSubscribers = 0;
            r = attempt(v2, NULL, &p, cb, out,
                        "cuptiSubscribe_v2 allowMultipleSubscribers=0 (multiple subscribers need a CUDA 13.3 "
                        "driver, r610+)",
                        how, how_len);
        }
    } else if (v2) {
        size_t n = strlen(how);
        snprintf(how + n, how_len - n,
                 "another CUPTI client subscribed with cuptiSubscribe (v1) and v1 and v2 subscribers must not "
                 "be mixed");
    }
    if (r != CUPTI_SUCCESS && v1)
        r = attempt(NULL, v1, NULL, cb, out, "cuptiSubscribe (single subscriber)", how, how_len);
    else if (r != CUPTI_SUCCESS && !v2)
        snprintf(how, how_len, "no cuptiSubscribe in libcupti");
    if (r == CUPTI_SUCCESS) {
        pthread_mutex_lock(&slot_lock);
        lib = cupti;
        held = *out;
        stop_callback = stop;
        pthread_mutex_unlock(&slot_lock);
    }
    return (int)r;
}

const char *lg_cupti_slot_holder(void) { return holder_name; }

/* Gives the slot up for a profiler. Returns true if we held it (the caller asks CUPTI again). */
static bool release(const char *entry)
{
    pthread_mutex_lock(&slot_lock);
    CUpti_SubscriberHandle s = held;
    unsubscribe_fn unsubscribe = lib ? (unsubscribe_fn)dlsym(lib, "cuptiUnsubscribe") : NULL;
    bool released = false;
    if (s && unsubscribe) {
        if (stop_callback)
            stop_callback();
        lg_runtime_in_library++;
        released = unsubscribe(s) == CUPTI_SUCCESS;
        lg_runtime_in_library--;
        if (released)
            held = NULL;
    }
    pthread_mutex_unlock(&slot_lock);
    if (released) {
        char detail[512];
        snprintf(detail, sizeof detail,
                 "another CUPTI client (a profiler: torch.profiler, Nsight) called %s and CUPTI has one "
                 "subscriber slot: labelguard gave its CUPTI subscription up so that the profiler works. %s",
                 entry,
                 lg_config_values.hooks == LG_HOOKS_CUPTI
                     ? "LABELGUARD_HOOKS=cupti leaves no hook layer: launches are no longer checked"
                     : "Launches interposition sees are still checked; those only CUPTI saw (static "
                       "runtime, driver-API launches) are not");
        lg_report_warning("cupti_released", detail);
    }
    return released;
}

/* The libcupti the calling object names in its DT_NEEDED entries, if it is loaded: a handle
 * (dlopen of its path, RTLD_NOLOAD) whose dlsym searches that object first. With two CUPTI
 * instances in the process (an Nsight injection, a CUDA 12 extension beside a CUDA 13 torch)
 * the caller's binding is to the one it was linked against, which need not be the first one the
 * loader's global scope holds. NULL when the caller names none (it dlopen'd libcupti, or it is
 * not an ELF object we can read), or that one is not loaded. */
static void *caller_cupti(const void *caller)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!caller || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld)
        return NULL;
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            /* The loader relocates this entry in place where .dynamic is writable (x86_64,
             * aarch64); where it is read-only it is still the link-time address. */
            strtab = (const char *)(d->d_un.d_ptr < lm->l_addr ? lm->l_addr + d->d_un.d_ptr : d->d_un.d_ptr);
    if (!strtab)
        return NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag != DT_NEEDED)
            continue;
        const char *needed = strtab + d->d_un.d_val;
        if (strncmp(needed, "libcupti.so", 11) != 0)
            continue;
        /* The loaded object the loader bound that entry to: the one whose file name it is. */
        struct link_map *m = lm;
        while (m->l_prev)
            m = m->l_prev;
        for (; m; m = m->l_next) {
            const char *slash = m->l_name ? strrchr(m->l_name, '/') : NULL;
            if (slash && strcmp(slash + 1, needed) == 0) {
                void *h = dlopen(m->l_name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
                if (h)
                    return h; /* kept: libcupti stays loaded while its client is */
            }
        }
    }
    return NULL;
}

/* `name` as the calling shared object's own dependencies define it: dlsym on a handle of the
 * object searches it and its dependency tree, breadth first, which is the libcupti it was
 * linked against even where another copy of the same file name is loaded (an Nsight
 * injection). Not for the main program: its handle's scope is the global one, ours first. */
static void *caller_scope(const char *name, const void *caller)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!caller || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name || !lm->l_name[0])
        return NULL;
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL; /* h kept: the caller stays loaded while it calls */
}

/* libcupti's own definition for the caller: in the caller's own dependencies, else in the
 * libcupti the caller names (the main program), else the next one after ours in the lookup
 * order, else the one we subscribed through, else any libcupti the loader holds (a profiler's
 * libcupti loaded in a local scope is not in RTLD_NEXT's). */
static void *real(const char *name, const void *self, const void *caller)
{
    void *f = caller_scope(name, caller);
    if (f && f != self)
        return f;
    void *own = caller_cupti(caller);
    f = own ? dlsym(own, name) : NULL;
    if (f && f != self)
        return f;
    f = dlsym(RTLD_NEXT, name);
    if (f && f != self)
        return f;
    pthread_mutex_lock(&slot_lock);
    void *h = lib;
    pthread_mutex_unlock(&slot_lock);
    static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; !h && i < sizeof sonames / sizeof *sonames; i++)
        h = dlopen(sonames[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    f = h ? dlsym(h, name) : NULL;
    return f == self ? NULL : f;
}

LG_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
    subscribe_fn f =
        (subscribe_fn)real("cuptiSubscribe", (const void *)cuptiSubscribe, __builtin_return_address(0));
    __atomic_store_n(&v1_client_seen, true, __ATOMIC_RELEASE);
    if (!f)
        return CUPTI_ERROR_NOT_INITIALIZED;
    CUptiResult r = f(subscriber, callback, userdata);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && release("cuptiSubscribe"))
        r = f(subscriber, callback, userdata);
    return r;
}

LG_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                        void *userdata, CUpti_SubscriberParams *params)
{
    subscribe_v2_fn f = (subscribe_v2_fn)real("cuptiSubscribe_v2", (const void *)cuptiSubscribe_v2,
                                              __builtin_return_address(0));
    if (!f)
        return CUPTI_ERROR_NOT_INITIALIZED;
    CUptiResult r = f(subscriber, callback, userdata, params);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && release("cuptiSubscribe_v2")) {
        /* The first answer named us as the holder: the caller must not keep that. */
        if (params && params->oldSubscriberName && params->oldSubscriberSize)
            params->oldSubscriberName[0] = '\0';
        r = f(subscriber, callback, userdata, params);
    }
    return r;
}

/* Where arming keeps what a patched slot pointed at (libcupti's function); the wrappers find
 * the caller's own libcupti themselves (real() above), so this is only arm.c's bookkeeping. */
static void *armed_subscribe, *armed_subscribe_v2;

int lg_cupti_slot_hooks(lg_hook_t *out, int cap)
{
    if (cap < 2)
        return 0;
    out[0] = (lg_hook_t){"cuptiSubscribe", NULL, &armed_subscribe};
    out[1] = (lg_hook_t){"cuptiSubscribe_v2", NULL, &armed_subscribe_v2};
    return 2;
}
