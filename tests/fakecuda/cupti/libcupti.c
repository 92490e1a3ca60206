/* libcupti.c: a CUPTI double with CUPTI's one subscriber slot, built as
 * build/fakecupti/libcupti.so.13 (soname libcupti.so.13) for tests/e2e/test_cupti_subscriber.sh.
 *
 * It models what a profiler sees of the slot and nothing else: cuptiSubscribe and
 * cuptiSubscribe_v2 succeed for the first subscriber and answer
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (with the holder's name, for v2) until it
 * unsubscribes; v2 takes CUPTI 13.0's params struct only (any other structSize is
 * CUPTI_ERROR_INVALID_PARAMETER), as a CUPTI older than 13.2 that knows no multi-subscriber
 * mode. cuptiEnableCallback accepts every id; no callback is ever called (no driver).
 * fakecupti_holder() names the current subscriber ("" none; "CUPTI for NAME" as CUPTI names a
 * v2 subscriber; "(unnamed)" for v1).
 */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FK_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUpti_Subscriber_st {
    int in_use;
    char name[64];
} slot;

FK_EXPORT const char *fakecupti_holder(void) { return slot.in_use ? slot.name : ""; }

static CUptiResult take(CUpti_SubscriberHandle *s, const char *name, char *old, size_t old_size)
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
        if (name)
            snprintf(slot.name, sizeof slot.name, "CUPTI for %.40s", name);
        else
            snprintf(slot.name, sizeof slot.name, "(unnamed)");
        *s = &slot;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

FK_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
    (void)cb, (void)ud;
    return take(s, NULL, NULL, 0);
}

FK_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                                        CUpti_SubscriberParams *p)
{
    (void)cb, (void)ud;
    if (p && p->structSize != CUpti_SubscriberParams_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return take(s, p ? p->subscriberName : NULL, p ? p->oldSubscriberName : NULL, p ? p->oldSubscriberSize : 0);
}

FK_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (s == &slot && slot.in_use) {
        slot.in_use = 0;
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

FK_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                          CUpti_CallbackId id)
{
    (void)enable, (void)d, (void)id;
    return s == &slot && slot.in_use ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
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
