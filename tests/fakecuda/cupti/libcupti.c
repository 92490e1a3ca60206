/* libcupti.c: a CUPTI double with CUPTI's one subscriber slot, built as
 * build/fakecupti/libcupti.so.13 (soname libcupti.so.13) for tests/e2e/test_cupti_subscriber.sh
 * and test_cupti_layout.sh, and a second time as build/fakecupti12/libcupti.so.12: two CUPTI
 * instances in one process, each with its own slot.
 *
 * It models what a profiler sees of the slot and nothing else: cuptiSubscribe and
 * cuptiSubscribe_v2 succeed for the first subscriber and answer
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (with the holder's name, for v2) until it
 * unsubscribes; v2 takes CUPTI 13.0's params struct only (any other structSize is
 * CUPTI_ERROR_INVALID_PARAMETER), as a CUPTI older than 13.2 that knows no multi-subscriber
 * mode. FAKECUPTI_MULTI=unsupported makes it CUPTI 13.2 on a driver without multiple
 * subscribers (before CUDA 13.3, r610): v2 also takes 13.2's struct, and refuses
 * allowMultipleSubscribers=1 with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, naming no
 * holder, whether or not the slot is free; allowMultipleSubscribers=0 gets the one slot.
 * cuptiEnableCallback accepts every id and records it; the subscriber's callback is called
 * only through fakecupti_api, which the runtime double calls around its launch entry points
 * when FAKECUDA_CUPTI=1 (tests/fakecuda/fakecudart.c), and so does the driver double's launch
 * build around its driver launches (tests/fakecuda/driver/libcuda.c); nothing else calls back.
 * fakecupti_holder() names the current subscriber ("" none; "CUPTI for NAME" as CUPTI names a
 * v2 subscriber; "(unnamed)" for v1). FAKECUPTI_TRACE=1 prints each subscribe call and its
 * answer to stderr.
 * It also defines every other CUPTI function torch 2.15's Kineto imports (libtorch_cpu.so's
 * NEEDED libcupti.so.13), so that real torch runs on it (preloaded: its soname satisfies that
 * NEEDED entry; tests/torch-fake/test_profiler.sh): the activity API accepts every call and
 * records nothing (no activity buffer is ever requested or completed: a device records
 * activity, and there is none), cuptiEnableDomain enables a domain for the subscriber as
 * cuptiEnableCallback enables one id, cuptiGetVersion answers CUPTI_API_VERSION.
 */
#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FK_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define MAX_ENABLED 64
static struct CUpti_Subscriber_st {
    int in_use;
    char name[64];
    CUpti_CallbackFunc cb;
    void *userdata;
    struct {
        CUpti_CallbackDomain domain;
        CUpti_CallbackId id;
    } enabled[MAX_ENABLED]; /* the ids cuptiEnableCallback turned on */
    int n_enabled;
} slot;

FK_EXPORT const char *fakecupti_holder(void) { return slot.in_use ? slot.name : ""; }

static CUptiResult take(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud, const char *name, char *old,
                        size_t old_size)
{
    if (!s)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_SUCCESS;
    if (slot.in_use) {
        if (old && old_size)
            snprintf(old, old_size, "%s", slot.name);
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    } else {
        slot.in_use = 1;
        slot.cb = cb;
        slot.userdata = ud;
        slot.n_enabled = 0;
        if (name)
            snprintf(slot.name, sizeof slot.name, "CUPTI for %.40s", name);
        else
            snprintf(slot.name, sizeof slot.name, "(unnamed)");
        *s = &slot;
    }
    pthread_mutex_unlock(&lock);
    const char *t = getenv("FAKECUPTI_TRACE");
    if (t && *t && strcmp(t, "0") != 0)
        fprintf(stderr, "fakecupti: subscribe %s: %d\n", name ? name : "(v1)", (int)r);
    return r;
}

FK_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
    return take(s, cb, ud, NULL, NULL, 0);
}

FK_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                                        CUpti_SubscriberParams *p)
{
    const char *multi = getenv("FAKECUPTI_MULTI");
    if (p && multi && !strcmp(multi, "unsupported")) {
        /* CUPTI 13.2's struct: 13.0's fields, then allowMultipleSubscribers (one byte). */
        const size_t size_13_2 = CUpti_SubscriberParams_STRUCT_SIZE + 1;
        if (p->structSize != CUpti_SubscriberParams_STRUCT_SIZE && p->structSize < size_13_2)
            return CUPTI_ERROR_INVALID_PARAMETER;
        if (p->structSize >= size_13_2 && *((const unsigned char *)p + CUpti_SubscriberParams_STRUCT_SIZE))
            return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    } else if (p && p->structSize != CUpti_SubscriberParams_STRUCT_SIZE) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return take(s, cb, ud, p ? p->subscriberName : NULL, p ? p->oldSubscriberName : NULL, p ? p->oldSubscriberSize : 0);
}

FK_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (s == &slot && slot.in_use) {
        slot.in_use = 0;
        slot.n_enabled = 0;
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

FK_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                          CUpti_CallbackId id)
{
    pthread_mutex_lock(&lock);
    CUptiResult r = s == &slot && slot.in_use ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
    if (r == CUPTI_SUCCESS && enable && slot.n_enabled < MAX_ENABLED) {
        slot.enabled[slot.n_enabled].domain = d;
        slot.enabled[slot.n_enabled].id = id;
        slot.n_enabled++;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* cuptiEnableDomain: every id of the domain, recorded as id ~0u. */
FK_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
    return cuptiEnableCallback(enable, s, d, ~0u);
}

FK_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
    (void)d, (void)cbid;
    if (!name)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *name = "fakecupti_callback";
    return CUPTI_SUCCESS;
}

FK_EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

FK_EXPORT CUptiResult cuptiFinalize(void) { return CUPTI_SUCCESS; }

/* The activity API: accepted, nothing recorded (see the header). */
FK_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
FK_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
FK_EXPORT CUptiResult cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t e) { (void)e; return CUPTI_SUCCESS; }
FK_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId id, uint8_t e)
{
    (void)id, (void)e;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId id, uint8_t e)
{
    (void)id, (void)e;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) { (void)flag; return CUPTI_SUCCESS; }
FK_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t size, CUpti_Activity **rec)
{
    (void)buf, (void)size, (void)rec;
    return CUPTI_ERROR_MAX_LIMIT_REACHED; /* no record in any buffer */
}
FK_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx, (void)stream;
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = 0;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t id)
{
    (void)k, (void)id;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t *last)
{
    (void)k;
    if (last)
        *last = 0;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                     CUpti_BuffersCallbackCompleteFunc done)
{
    (void)req, (void)done;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    (void)f;
    return CUPTI_SUCCESS;
}
FK_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    (void)attr, (void)size, (void)value;
    return CUPTI_SUCCESS;
}

/* Called by the runtime double (domain CUPTI_CB_DOMAIN_RUNTIME_API) around a launch entry point,
 * and by the driver double's launch build (CUPTI_CB_DOMAIN_DRIVER_API) around cuLaunchKernel and
 * cuLaunchKernelEx, with the entry point's CUPTI callback id and params struct (exit_site 0:
 * API_ENTER, before the launch reads its arguments; 1: API_EXIT): calls the subscriber's callback
 * if it enabled that id in that domain, as CUPTI does, with one correlation id per enter/exit
 * pair on the calling thread. As CUPTI documents for launch callbacks, symbolName names the
 * kernel (NULL where the caller does not know it) and, at API_EXIT only, functionReturnValue
 * points at the call's result (a cudaError_t or a CUresult). The callback runs without the lock
 * (it may subscribe or unsubscribe). */
FK_EXPORT void fakecupti_api(int domain, int exit_site, unsigned cbid, const char *name, const char *symbol,
                             const void *params, void *result)
{
    static _Atomic unsigned next_correlation;
    static __thread uint32_t correlation;
    pthread_mutex_lock(&lock);
    CUpti_CallbackFunc cb = NULL;
    void *ud = slot.userdata;
    for (int i = 0; slot.in_use && i < slot.n_enabled; i++)
        if (slot.enabled[i].domain == (CUpti_CallbackDomain)domain && slot.enabled[i].id == cbid)
            cb = slot.cb;
    pthread_mutex_unlock(&lock);
    if (!exit_site)
        correlation = ++next_correlation;
    if (!cb)
        return;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = exit_site ? CUPTI_API_EXIT : CUPTI_API_ENTER;
    d.functionName = name;
    d.symbolName = symbol;
    d.functionParams = params;
    d.functionReturnValue = exit_site ? result : NULL;
    d.correlationId = correlation;
    cb(ud, (CUpti_CallbackDomain)domain, cbid, &d);
}

FK_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (r) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}
