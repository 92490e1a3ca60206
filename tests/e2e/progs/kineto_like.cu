// kineto_like.cu: a program that uses CUPTI as torch.profiler's Kineto does, for
// tests/e2e/test_cupti_subscriber.sh. Linked against libcupti.so.13 (the test links the CUPTI
// double, tests/fakecuda/cupti/libcupti.c) so that cuptiSubscribe is bound dynamically, as in
// libtorch_cuda; run under the runtime test double.
//
// It launches one kernel (which starts a preloaded labelguard), then subscribes to CUPTI with
// cuptiSubscribe (argv[1] "v1") or cuptiSubscribe_v2 ("v2"), and prints
//   "subscribe: <CUptiResult>" and "holder: <who holds the slot now>".
// "v1-early" is v1 by a client that had subscribed (cuptiSubscribe) and unsubscribed before
// the first launch, as a v1 profiler initialised at import does; it prints "early: <result>"
// and, after the first launch, "started: <holder>" (who took the slot at labelguard's start).
// KINETO_LIKE_ENABLE=/path/liblabelguard.so: before anything else the program loads that library
// (RTLD_GLOBAL) and calls labelguard_enable, as labelguard.enable() does in a process that was
// not started under LD_PRELOAD; it prints "enable: <result>".
// Built twice: kineto_like against build/fakecupti/libcupti.so.13, kineto_like12 against a
// second instance of the double, build/fakecupti12/libcupti.so.12.
// 0 means the profiler got the slot; 39 (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) means
// someone else (labelguard) kept it and the profiler would record nothing.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <cuda_runtime.h>
#include <cupti.h>

__global__ void step(int *p) { if (p) *p = 1; }

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "v1") && strcmp(argv[1], "v2") && strcmp(argv[1], "v1-early"))) {
        fprintf(stderr, "usage: kineto_like v1|v2|v1-early\n");
        return 2;
    }
    if (const char *lg = getenv("KINETO_LIKE_ENABLE")) {
        void *h = dlopen(lg, RTLD_NOW | RTLD_GLOBAL);
        int (*enable)(char *, size_t) = h ? (int (*)(char *, size_t))dlsym(h, "labelguard_enable") : nullptr;
        char why[512] = "";
        printf("enable: %d %s\n", enable ? enable(why, sizeof why) : -99, why);
    }
    // KINETO_CUPTI_SONAME: the holder of that CUPTI instance (the one this build links against,
    // where the process holds two), not the first one in the global scope.
    const char *own = getenv("KINETO_CUPTI_SONAME");
    void *own_h = own ? dlopen(own, RTLD_LAZY | RTLD_NOLOAD) : nullptr;
    const char *(*holder)(void) = (const char *(*)(void))(own ? (own_h ? dlsym(own_h, "fakecupti_holder") : nullptr)
                                                                : dlsym(RTLD_DEFAULT, "fakecupti_holder"));
    CUpti_SubscriberHandle s = nullptr;
    CUptiResult r;
    if (!strcmp(argv[1], "v1-early")) {
        r = cuptiSubscribe(&s, on_callback, nullptr);
        printf("early: %d\n", (int)r);
        if (r == CUPTI_SUCCESS)
            cuptiUnsubscribe(s);
    }
    step<<<1, 1>>>(nullptr);
    cudaDeviceSynchronize();
    printf("started: %s\n", holder ? holder() : "?");
    char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
    if (strcmp(argv[1], "v2")) {
        r = cuptiSubscribe(&s, on_callback, nullptr);
    } else {
        CUpti_SubscriberParams p;
        memset(&p, 0, sizeof p);
        p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        p.subscriberName = "kineto";
        p.oldSubscriberName = old;
        p.oldSubscriberSize = sizeof old;
        r = cuptiSubscribe_v2(&s, on_callback, nullptr, &p);
    }
    printf("subscribe: %d\n", (int)r);
    printf("holder: %s\n", holder ? holder() : "?");
    printf("old: %s\n", old);
    step<<<1, 1>>>(nullptr);
    printf("sync: %d\n", (int)cudaDeviceSynchronize());
    if (r == CUPTI_SUCCESS)
        cuptiUnsubscribe(s);
    return 0;
}
