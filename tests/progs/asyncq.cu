// asyncq.cu: what a GPU's asynchrony looks like to a program, for the runtime double's
// FAKECUDA_ASYNC_US mode (tests/fakecuda/test_async.sh runs it with FAKECUDA_ASYNC_US=20000, so
// every kernel takes 20 ms). Each case prints key=value lines; the test script decides. Built
// as build/progs/asyncq (and _legacy, _ptsz). What a case claims about order or waiting is made
// a condition, not a time: a stream is held by a host function that blocks until the program
// releases it (hold, release), so whatever the program sees before the release happened while
// that stream could not have passed the hold, however the threads were scheduled. Cases:
//   timing      50 kernels on a held stream: the launches return (flag_after_launch: the host
//               function queued behind them has not run), the sync waits for all of them
//               (flag_after_sync); launch_ms and sync_ms are printed for people only
//   query       stream and event queries while a kernel is in flight and after the sync
//   wait_event  stream B waits (cudaStreamWaitEvent) for an event recorded behind a kernel on A
//   legacy      the legacy stream's implicit synchronisation with blocking streams only
//   per_thread  cudaStreamPerThread is each thread's own stream: another thread's is free while
//               this one's is busy, and the legacy stream waits for it (it is blocking)
//   copies      pageable and pinned copies: staging, host synchronisation, blocking cudaMemcpy
//   assert      a bad-label NLL launch queued behind a kernel: when its assert surfaces
//   lasterror   launch errors and cudaErrorNotReady as the thread's last error
//   destroy     cudaStreamDestroy with work in flight: the work still completes
//   args        kernel arguments whose storage dies right after the launch
//   exit        return from main with 50 kernels in flight
//   fork        fork with work in flight; the child (FAKECUDA_FORK_OK=1) launches and syncs
//   gate        (FAKECUDA_ASYNC_GATE=1) queued work waits for the program: not run after a
//               pause, a stream or event query loop ends at its second query, a sync runs it
#include "torch_kernels.cuh"
#include "lg_launch.cuh"
#include <atomic>
#include <sched.h>
#include <semaphore.h>
#include <thread>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__global__ void lg_async_spin(int tag) { (void)tag; }

static double now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void spin(cudaStream_t s, int n = 1)
{
    for (int i = 0; i < n; i++) lg_launch(LG_DEFAULT_MODE, lg_async_spin, dim3(1), dim3(32), 0, s, i);
}

// Host functions append their tag here, in the order the streams reach them.
static char order[64];
static std::atomic<int> n_order{0};
static void CUDART_CB mark(void *tag)
{
    int i = n_order.fetch_add(1);
    if (i < 63) order[i] = (char)(intptr_t)tag;
}
static void mark_on(cudaStream_t s, char tag) { cudaLaunchHostFunc(s, mark, (void *)(intptr_t)tag); }
static void print_order(const char *key)
{
    order[n_order.load() < 63 ? n_order.load() : 63] = 0;
    printf("%s=%s\n", key, order);
    n_order = 0;
}

// hold(s): a host function on s that blocks s's worker until release(); one release per hold.
static sem_t held;
static void CUDART_CB wait_release(void *) { sem_wait(&held); }
static void hold(cudaStream_t s) { cudaLaunchHostFunc(s, wait_release, nullptr); }
static void release() { sem_post(&held); }
static bool async_device()
{
    const char *a = getenv("FAKECUDA_ASYNC_US");
    return a && atoi(a) > 0;
}

static int flag;
static void CUDART_CB set_flag(void *) { flag = 1; }

static int case_timing()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    bool async = async_device();    // the synchronous double runs a host function in the call
    if (async) hold(s);
    double t0 = now_ms();
    spin(s, 50);
    cudaLaunchHostFunc(s, set_flag, nullptr);
    double t1 = now_ms();
    printf("flag_after_launch=%d\n", flag);
    if (async) release();
    int e = (int)cudaStreamSynchronize(s);
    double t2 = now_ms();
    printf("flag_after_sync=%d\n", flag);
    printf("launch_ms=%.0f\nsync_ms=%.0f\nsync=%d\n", t1 - t0, t2 - t1, e);
    return 0;
}

static int case_query()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    spin(s, 3);
    cudaEventRecord(ev, s);
    // Asked twice: an answer that only counts polls turns ready at the second.
    printf("stream_query=%d\n", (int)cudaStreamQuery(s));
    printf("stream_query_again=%d\n", (int)cudaStreamQuery(s));
    printf("event_query=%d\n", (int)cudaEventQuery(ev));
    printf("event_query_again=%d\n", (int)cudaEventQuery(ev));
    printf("last_error=%d\n", (int)cudaGetLastError());
    printf("sync=%d\n", (int)cudaEventSynchronize(ev));
    printf("event_query_after=%d\n", (int)cudaEventQuery(ev));
    printf("stream_query_after=%d\n", (int)cudaStreamQuery(s));
    printf("last_error_after=%d\n", (int)cudaGetLastError());
    return 0;
}

static int case_wait_event()
{
    cudaStream_t a, b, c;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    float *d, *h;
    cudaMalloc((void **)&d, 4 * sizeof(float));
    cudaMallocHost((void **)&h, 4 * sizeof(float));
    bool async = async_device();
    if (async) hold(a);             // A cannot reach its event until the release below
    cudaMemsetAsync(d, 0, 4 * sizeof(float), a);
    spin(a, 2);
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, a, d, 4);
    mark_on(a, 'A');
    cudaEventRecord(ev, a);
    cudaStreamWaitEvent(b, ev, 0);
    printf("wait_call_returns_at_once=1\n"); // it returned while A was held
    mark_on(b, 'B');
    cudaMemcpyAsync(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, b);
    mark_on(c, 'C');
    cudaStreamSynchronize(c);       // C's stream is free: done while A is held
    if (async) release();
    cudaStreamSynchronize(b);
    print_order("order");
    printf("copied=%g\n", h[0]);
    // A wait for an event recorded later does not apply: the wait is for the latest record.
    return 0;
}

static int case_legacy()
{
    cudaStream_t s1, s2, nb;
    cudaStreamCreate(&s1);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    bool async = async_device();
    if (async) hold(nb);       // nb is held until T is done: if L waited for nb, this would hang
    spin(s1, 1);
    mark_on(s1, 'S');          // blocking stream
    spin(nb, 4);
    mark_on(nb, 'N');          // non-blocking stream
    mark_on(0, 'L');           // legacy: waits for s1, not for nb
    cudaStreamCreate(&s2);
    mark_on(s2, 'T');          // blocking stream, queued after the legacy work: waits for it
    cudaStreamSynchronize(s2);
    if (async) release();
    cudaStreamSynchronize(nb);
    print_order("order");
    // cudaStreamSynchronize(0) waits for blocking streams, not for non-blocking ones.
    if (async) hold(nb);
    spin(s1, 2);
    mark_on(s1, 'S');
    spin(nb, 5);
    mark_on(nb, 'N');
    cudaStreamSynchronize(0);  // returns while nb is held
    mark_on(0, 'X');
    cudaStreamSynchronize(0);
    if (async) release();
    cudaDeviceSynchronize();
    print_order("sync0_order");
    return 0;
}

static int case_copies()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d1, *d2, *pin, *page = (float *)malloc(sizeof(float));
    cudaMalloc((void **)&d1, sizeof(float));
    cudaMalloc((void **)&d2, sizeof(float));
    cudaMallocHost((void **)&pin, sizeof(float));
    // H2D from pageable memory: the source is taken at the call.
    *page = 1;
    spin(s, 1);
    cudaMemcpyAsync(d1, page, sizeof(float), cudaMemcpyHostToDevice, s);
    *page = 2;
    // H2D from pinned memory: read when the stream gets there.
    *pin = 1;
    cudaMemcpyAsync(d2, pin, sizeof(float), cudaMemcpyHostToDevice, s);
    *pin = 2;
    cudaStreamSynchronize(s);
    float r1 = 0, r2 = 0;
    cudaMemcpy(&r1, d1, sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(&r2, d2, sizeof(float), cudaMemcpyDeviceToHost);
    printf("h2d_pageable=%g\nh2d_pinned=%g\n", r1, r2);
    // D2H to pageable memory: synchronous with the host (the value the kernel queued before it
    // wrote is there when the call returns). To pinned memory: not (the call returns while the
    // stream is held, and the memory changes only after the release).
    *page = -1;
    spin(s, 1);
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, s, d2, 1); // 2 -> 3
    cudaMemcpyAsync(page, d2, sizeof(float), cudaMemcpyDeviceToHost, s);
    printf("d2h_pageable_value=%g\n", *page);
    *pin = -1;
    bool async = async_device();
    if (async) hold(s);
    spin(s, 1);
    cudaMemcpyAsync(pin, d2, sizeof(float), cudaMemcpyDeviceToHost, s);
    printf("d2h_pinned_before_sync=%g\n", *pin);
    if (async) release();
    cudaStreamSynchronize(s);
    printf("d2h_pinned_after_sync=%g\n", *pin);
    // A blocking cudaMemcpy waits for the legacy stream and the blocking streams.
    cudaStream_t b;
    cudaStreamCreate(&b);
    cudaMemset(d1, 0, sizeof(float));
    spin(b, 2);
    lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, b, d1, 1);
    float r3 = -1;
    cudaMemcpy(&r3, d1, sizeof(float), cudaMemcpyDeviceToHost);
    printf("blocking_d2h=%g\n", r3);
    // Host to host: synchronous.
    float hh = 0;
    spin(s, 1);
    *page = 5;
    cudaMemcpyAsync(&hh, page, sizeof(float), cudaMemcpyHostToHost, s);
    printf("h2h=%g\n", hh);
    return 0;
}

static int case_assert()
{
    cudaStream_t s, idle;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking);
    float *out, *tw, *in;
    int64_t *t;
    cudaMalloc((void **)&out, 4); cudaMalloc((void **)&tw, 4);
    cudaMalloc((void **)&in, 8 * 3 * 4); cudaMalloc((void **)&t, 8 * 8);
    int64_t h[8] = { 0, 1, 2, 5, 0, 1, 2, 0 };
    float hin[24];
    for (int i = 0; i < 24; i++) hin[i] = -1.0f;
    cudaMemcpy(t, h, sizeof h, cudaMemcpyHostToDevice);
    cudaMemcpy(in, hin, sizeof hin, cudaMemcpyHostToDevice);
    spin(s, 2);
    int le = (int)lg_launch(LG_DEFAULT_MODE, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>,
                            dim3(1), dim3(32), 0, s, out, tw, in, t, (float *)nullptr, true, 8, 3, 3, -100);
    printf("launch=%d\n", le);
    printf("idle_query_before=%d\n", (int)cudaStreamQuery(idle));
    printf("stream_query_before=%d\n", (int)cudaStreamQuery(s));
    printf("last_error_before=%d\n", (int)cudaGetLastError());
    fflush(stdout);
    printf("sync=%d\n", (int)cudaStreamSynchronize(s));
    printf("idle_query_after=%d\n", (int)cudaStreamQuery(idle));
    printf("last_error_after=%d\n", (int)cudaGetLastError());
    return 0;
}

static int case_lasterror()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    spin(s, 1);
    printf("after_launch=%d\n", (int)cudaGetLastError());
    // cudaLaunchKernel leaves the error as the last error (<<<>>> through lg_launch reads it).
    int bad = (int)lg_launch(LG_LEGACY, lg_async_spin, dim3(1), dim3(2048), 0, s, 0);
    printf("bad_launch=%d\n", bad);
    printf("good_launch=%d\n", (int)lg_launch(LG_LEGACY, lg_async_spin, dim3(1), dim3(32), 0, s, 0));
    printf("peek=%d\n", (int)cudaPeekAtLastError());
    printf("get=%d\n", (int)cudaGetLastError());
    printf("get_again=%d\n", (int)cudaGetLastError());
    int q = (int)cudaStreamQuery(s);
    int g = (int)cudaGetLastError();
    printf("query=%d\nget_after_query=%d\n", q, g);
    int e = (int)cudaStreamSynchronize(s);
    printf("sync=%d\nget_after_sync=%d\n", e, (int)cudaGetLastError());
    return 0;
}

static int case_destroy()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    spin(s, 3);
    cudaLaunchHostFunc(s, set_flag, nullptr);
    printf("destroy=%d\n", (int)cudaStreamDestroy(s));
    printf("flag_at_destroy=%d\n", flag);
    int e = (int)cudaDeviceSynchronize();
    printf("device_sync=%d\nflag_after_sync=%d\n", e, flag);
    return 0;
}

static int case_args()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    float *d;
    cudaMalloc((void **)&d, 8 * sizeof(float));
    cudaMemset(d, 0, 8 * sizeof(float));
    spin(s, 1);
    // Each launch's argument array dies when lg_launch returns (legacy and ExC paths build it
    // on their stack); the second launch's array takes the first one's place.
    lg_launch(LG_LEGACY, lg_test_add_one, dim3(1), dim3(32), 0, s, d, 8);
    lg_launch(LG_EXC, lg_test_add_one, dim3(1), dim3(32), 0, s, d + 4, 4);
    float h[8];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("values=%g,%g,%g,%g,%g,%g,%g,%g\n", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    return 0;
}

static int case_exit()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    spin(s, 50);
    printf("returning\n");
    return 0;
}

static int case_fork()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    spin(s, 10);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        float *d;
        int e1 = (int)cudaMalloc((void **)&d, sizeof(float));
        int e2 = (int)cudaMemset(d, 0, sizeof(float));
        spin(0, 2);
        lg_launch(LG_DEFAULT_MODE, lg_test_add_one, dim3(1), dim3(32), 0, 0, d, 1);
        float h = -1;
        int e3 = (int)cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
        int e4 = (int)cudaDeviceSynchronize();
        printf("child=%d,%d,%d,%d value=%g\n", e1, e2, e3, e4, h);
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    printf("child_exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    printf("parent_sync=%d\n", (int)cudaStreamSynchronize(s));
    return 0;
}

static int case_gate()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    spin(s, 2);
    cudaLaunchHostFunc(s, set_flag, nullptr);
    struct timespec pause = { 0, 200 * 1000000L }; // ten times the queued work's 40 ms, ungated
    nanosleep(&pause, nullptr);
    printf("flag_before_wait=%d\n", flag);
    int q = (int)cudaStreamQuery(s), polls = 1;
    while (cudaStreamQuery(s) == cudaErrorNotReady) polls++;
    printf("stream_query=%d\npolls=%d\nflag_after_loop=%d\n", q, polls, flag);
    cudaGetLastError();
    flag = 0;
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    spin(s, 2);
    cudaLaunchHostFunc(s, set_flag, nullptr);
    cudaEventRecord(ev, s);
    q = (int)cudaEventQuery(ev);
    polls = 1;
    while (cudaEventQuery(ev) == cudaErrorNotReady) polls++;
    printf("event_query=%d\nevent_polls=%d\nevent_flag=%d\n", q, polls, flag);
    cudaGetLastError();
    flag = 0;
    spin(s, 2);
    cudaLaunchHostFunc(s, set_flag, nullptr);
    printf("sync=%d\n", (int)cudaStreamSynchronize(s));
    printf("sync_flag=%d\n", flag);
    return 0;
}

static int case_per_thread()
{
    bool async = async_device();
    if (async) hold(cudaStreamPerThread); // the main thread's per-thread stream, until released
    spin(cudaStreamPerThread, 5);
    mark_on(cudaStreamPerThread, 'M');
    int query = -1, sync_fast = -1;
    std::thread other([&] {
        query = (int)cudaStreamQuery(cudaStreamPerThread); // its own stream: empty
        mark_on(cudaStreamPerThread, 'W');
        cudaStreamSynchronize(cudaStreamPerThread);
        sync_fast = 1;                                      // returned while main's is held
    });
    other.join();
    printf("other_query=%d other_sync_fast=%d\n", query, sync_fast);
    if (async) release();
    cudaStreamSynchronize(cudaStreamPerThread);
    print_order("order");
    // The legacy stream, used from another thread, waits for this thread's per-thread stream:
    // L is queued while P cannot have run, and released only then.
    if (async) hold(cudaStreamPerThread);
    spin(cudaStreamPerThread, 2);
    mark_on(cudaStreamPerThread, 'P');
    std::atomic<bool> queued{ false };
    std::thread legacy([&] { mark_on(0, 'L'); queued = true; cudaStreamSynchronize(0); });
    while (!queued.load()) sched_yield();
    if (async) release();
    legacy.join();
    print_order("legacy_order");
    return 0;
}

int main(int argc, char **argv)
{
    lg_print_identity();
    sem_init(&held, 0, 0);
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "timing")) return case_timing();
    if (!strcmp(c, "query")) return case_query();
    if (!strcmp(c, "wait_event")) return case_wait_event();
    if (!strcmp(c, "legacy")) return case_legacy();
    if (!strcmp(c, "per_thread")) return case_per_thread();
    if (!strcmp(c, "copies")) return case_copies();
    if (!strcmp(c, "assert")) return case_assert();
    if (!strcmp(c, "lasterror")) return case_lasterror();
    if (!strcmp(c, "destroy")) return case_destroy();
    if (!strcmp(c, "args")) return case_args();
    if (!strcmp(c, "exit")) return case_exit();
    if (!strcmp(c, "fork")) return case_fork();
    if (!strcmp(c, "gate")) return case_gate();
    fprintf(stderr, "usage: asyncq CASE\n");
    return 2;
}
