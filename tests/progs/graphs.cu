// graphs.cu: a training step captured into a CUDA graph with a static target, the way
// torch.cuda.graph and torch.compile(mode="reduce-overhead") run one, then replayed with one
// batch after another copied into the static target. Built as build/progs/graphs (<<<>>>),
// graphs_legacy (cudaLaunchKernel) and graphs_ptsz (per-thread default stream); --launch exc
// takes cudaLaunchKernelExC. Used by tests/e2e/test_graphs.sh (labelguard end to end) and
// tests/e2e/test_delivery.sh (which thread gets an error, and what else it keeps).
//
// usage: graphs [options] SCENARIO
//   SCENARIO  replay    capture, then one replay per letter of --batches
//             side      while this thread captures (in --capture mode), a second thread
//                       launches the loss kernel outside the capture (--batches[0]) and waits
//             poller    --batches replayed while a second thread polls cudaGetLastError (as
//                       c10's caching allocator and the NCCL watchdog do); --eager: the step is
//                       launched directly instead of replayed (async mode's verdicts)
//             late      (run WITHOUT the library preloaded; LG_LATE_LIB names it) a graph captured
//                       and instantiated, then the library dlopen'd and labelguard_arm() called
//                       (what `labelguard attach` does), then a second graph captured: the
//                       first replays unchecked (a graph_unchecked warning), the second checked
//             stale     a bad step's error, then a clean step: cudaGetErrorString of
//                       cudaErrorNotPermitted must be CUDA's own text again
//             apperror  the application's own pending error (a failed cudaMalloc) before a
//                       captured loss launch, and before one whose labels cannot be checked
//             exitthread  a second thread replays a bad batch and exits without checking;
//                       this thread's stream synchronization then reports it
//             reuse     PyTorch's order twice: graph A (the loss step) captured, instantiated and
//                       destroyed, then graph B (a memset, no loss kernel) captured at what is
//                       likely the same address (`reuse same=1` when it is) and instantiated; a
//                       second thread replays B twice on its own stream and stays alive, then
//                       this thread replays A once per letter of --batches: B must not have
//                       taken A's checks (A's bad replay raises here)
//             twoexecs  one graph captured, instantiated twice (exec A, exec B) and destroyed; A
//                       replays --batches[0] on stream A, then B replays --batches[1] on stream
//                       B: after A's replay (an event), or, with $TWOEXECS_GAP_US, that many µs
//                       after A's launch, while A's may still run; each loss is read on its own
//                       stream right after its replay
//             cycles    what cudagraph trees do for each new shape, --cycles times: capture the
//                       step, instantiate it (--execs 2: twice, the second exec on a stream of its
//                       own), destroy the graph, replay each exec with batch k of --batches (k
//                       modulo its length), read the loss, destroy the exec(s). Prints
//                       "cycles n=<cycles run> failed=<cycles with an error> loss_g=<v> loss_b=<v>
//                       changed=<replays whose loss differs from the first of its letter>
//                       device_growth=<bytes of device memory taken from cycle 100 to the end>
//                       host_growth=<kB of resident memory taken from cycle 100 to the end>"
//   options:
//     --cycles N                      cycles of the cycles scenario (default 10000)
//     --execs 1|2                     execs per cycle in the cycles scenario (default 1)
//     --rss-limit-mb M                cycles: stop once resident memory grew by more than M MiB
//                                     since cycle 100 ("cycles stopped k=<k>"; default 0: never)
//     --launch chevron|legacy|exc     entry point (default chevron; legacy in graphs_legacy)
//     --capture global|thread|relaxed capture mode (default global)
//     --kernels fwd|fwdbwd            the loss kernels in the graph (default fwd)
//     --batches LETTERS               g: labels i % 5, b: label 3 is 9 (out of range),
//                                     i: label 3 is -100 (ignored); default "gbg"
//     --wait stream|item|device|memcpy  how each replay is waited for: cudaStreamSynchronize,
//                                     cudaMemcpyAsync of the loss + cudaStreamSynchronize
//                                     (.item()), cudaDeviceSynchronize, or a blocking cudaMemcpy
//     --instantiate flags|plain       cudaGraphInstantiateWithFlags (PyTorch) or cudaGraphInstantiate
//
// output, one line per step:
//   fakecudart_identity=<fakecuda|none>
//   capture begin=<err> launch=<err> end=<err> instantiate=<err>
//   replay k=<k> batch=<g|b|i> launch=<err> wait=<err> last=<err> loss=<v|-> grad3=<v|-> text=
//     (grad3: d loss / d input[3][3], label 3's own class: 0 when label 3 is ignored or masked)"<...>"
//   (text: cudaGetErrorString of the first error of the replay, "" when none)
//   context alive=<0|1>          (a fresh allocation and copy work after the replays)
// Exit status 0 unless usage is wrong (2).
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const int64_t N = 8, C = 5, IGNORE = -100;

struct opts {
    std::string scenario = "replay";
    lg_launch_mode mode = LG_DEFAULT_MODE;
    cudaStreamCaptureMode capture = cudaStreamCaptureModeGlobal;
    bool bwd = false;
    std::string batches = "gbg";
    std::string wait = "stream";
    bool plain_instantiate = false;
    bool eager = false;
    int cycles = 10000;
    int execs = 1;
    long rss_limit_mb = 0;
};

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "graphs: %s\n", why);
    exit(2);
}

void parse(int argc, char **argv, opts &o)
{
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) usage("option needs a value");
            return argv[++i];
        };
        if (a == "--launch") { if (lg_parse_mode(val(), &o.mode)) usage("bad --launch"); }
        else if (a == "--capture") {
            std::string m = val();
            o.capture = m == "global" ? cudaStreamCaptureModeGlobal : m == "thread" ? cudaStreamCaptureModeThreadLocal
                      : m == "relaxed" ? cudaStreamCaptureModeRelaxed : (usage("bad --capture"), cudaStreamCaptureModeGlobal);
        }
        else if (a == "--kernels") { std::string k = val(); if (k != "fwd" && k != "fwdbwd") usage("bad --kernels"); o.bwd = k == "fwdbwd"; }
        else if (a == "--batches") o.batches = val();
        else if (a == "--wait") o.wait = val();
        else if (a == "--instantiate") o.plain_instantiate = std::string(val()) == "plain";
        else if (a == "--eager") o.eager = true;
        else if (a == "--cycles") o.cycles = atoi(val());
        else if (a == "--rss-limit-mb") o.rss_limit_mb = atol(val());
        else if (a == "--execs") { o.execs = atoi(val()); if (o.execs != 1 && o.execs != 2) usage("bad --execs"); }
        else if (a[0] == '-') usage("unknown option");
        else o.scenario = a;
    }
}

template <typename T> T *dev_copy(const std::vector<T> &v)
{
    T *p = nullptr;
    if (cudaMalloc((void **)&p, v.size() * sizeof(T)) != cudaSuccess) return nullptr;
    cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
}

std::vector<int64_t> batch(char kind)
{
    std::vector<int64_t> b((size_t)N);
    for (int64_t i = 0; i < N; i++) b[(size_t)i] = i % C;
    if (kind == 'b') b[3] = 9;
    if (kind == 'i') b[3] = IGNORE;
    return b;
}

struct step {
    const opts &o;
    cudaStream_t s = nullptr;
    float *in = nullptr, *out = nullptr, *tw = nullptr, *grad = nullptr, *go = nullptr;
    int64_t *target = nullptr;
    int64_t *batches[3] = {nullptr, nullptr, nullptr}; // g, b, i
    explicit step(const opts &opt) : o(opt)
    {
        std::vector<float> hin((size_t)(N * C));
        for (int64_t k = 0; k < N * C; k++) hin[(size_t)k] = -(float)(k + 1) / 4.0f;
        in = dev_copy(hin);
        out = dev_copy(std::vector<float>(1, 0.0f));
        tw = dev_copy(std::vector<float>(1, 0.0f));
        grad = dev_copy(std::vector<float>((size_t)(N * C), 0.0f));
        go = dev_copy(std::vector<float>(1, 1.0f));
        target = dev_copy(batch('g'));
        batches[0] = dev_copy(batch('g'));
        batches[1] = dev_copy(batch('b'));
        batches[2] = dev_copy(batch('i'));
    }
    int64_t *of(char k) const { return batches[k == 'b' ? 1 : k == 'i' ? 2 : 0]; }
    // The training step: forward loss (mean) and, with --kernels fwdbwd, its backward.
    cudaError_t launch(cudaStream_t st, const int64_t *t)
    {
        auto fwd = at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>;
        cudaError_t e = lg_launch(o.mode, fwd, dim3(1), dim3(32), 0, st, out, tw, (const float *)in, t, (const float *)nullptr,
                                  true, N, C, C, IGNORE);
        if (e != cudaSuccess || !o.bwd) return e;
        auto bwd = at::native::nll_loss_backward_reduce_cuda_kernel_2d<float, int64_t>;
        return lg_launch(o.mode, bwd, dim3(1), dim3(32), 0, st, grad, (const float *)go, t, (const float *)nullptr,
                         (const float *)tw, true, (int)N, (int)C, C, IGNORE);
    }
};

void print_value(const char *key, cudaError_t e, const float *dev)
{
    float v = 0;
    if (e == cudaSuccess && cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess) printf(" %s=%g", key, v);
    else printf(" %s=-", key);
}

// Waits for a replay as --wait says; returns the wait's error.
cudaError_t wait_for(const std::string &how, step &st)
{
    if (how == "item") {
        static float *pinned;
        if (!pinned) cudaMallocHost((void **)&pinned, sizeof(float));
        cudaError_t e = cudaMemcpyAsync(pinned, st.out, sizeof(float), cudaMemcpyDeviceToHost, st.s);
        return e != cudaSuccess ? e : cudaStreamSynchronize(st.s);
    }
    if (how == "device") return cudaDeviceSynchronize();
    if (how == "memcpy") { float v; return cudaMemcpy(&v, st.out, sizeof v, cudaMemcpyDeviceToHost); }
    return cudaStreamSynchronize(st.s);
}

cudaGraphExec_t capture(step &st)
{
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    cudaError_t b = cudaStreamBeginCapture(st.s, st.o.capture);
    cudaError_t l = st.launch(st.s, st.target);
    cudaError_t e = cudaStreamEndCapture(st.s, &g);
    cudaError_t i = e != cudaSuccess ? e : st.o.plain_instantiate ? cudaGraphInstantiate(&x, g, 0) : cudaGraphInstantiateWithFlags(&x, g, 0);
    printf("capture begin=%d launch=%d end=%d instantiate=%d\n", (int)b, (int)l, (int)e, (int)i);
    fflush(stdout);
    if (g) cudaGraphDestroy(g);
    return i == cudaSuccess ? x : nullptr;
}

// One replay: copy the batch into the static target, launch, wait, check, report.
void replay(step &st, cudaGraphExec_t x, int k, char kind)
{
    cudaMemcpyAsync(st.target, st.of(kind), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, st.s);
    cudaError_t l = cudaGraphLaunch(x, st.s);
    cudaError_t w = wait_for(st.o.wait, st);
    cudaError_t last = cudaGetLastError();
    cudaError_t first = l != cudaSuccess ? l : w != cudaSuccess ? w : last;
    printf("replay k=%d batch=%c launch=%d wait=%d last=%d", k, kind, (int)l, (int)w, (int)last);
    print_value("loss", first == cudaSuccess ? cudaSuccess : cudaErrorUnknown, st.out);
    if (st.o.bwd) {
        float g[N * C];
        if (first == cudaSuccess && cudaMemcpy(g, st.grad, sizeof g, cudaMemcpyDeviceToHost) == cudaSuccess) printf(" grad3=%g", g[3 * C + 3]);
        else printf(" grad3=-");
    }
    printf(" text=\"%s\"\n", first == cudaSuccess ? "" : cudaGetErrorString(first));
    fflush(stdout);
}

void context_check()
{
    void *p = nullptr;
    char h[8] = {0};
    cudaError_t a = cudaMalloc(&p, 8);
    cudaError_t c = a == cudaSuccess ? cudaMemcpy(h, p, 8, cudaMemcpyDeviceToHost) : a;
    printf("context alive=%d\n", a == cudaSuccess && c == cudaSuccess);
    if (p) cudaFree(p);
}

int run_replays(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraphExec_t x = capture(st);
    if (!x) { context_check(); return 0; }
    for (size_t k = 0; k < o.batches.size(); k++) replay(st, x, (int)k + 1, o.batches[k]);
    cudaGraphExecDestroy(x);
    context_check();
    return 0;
}

// --- side: an eager launch on a second thread while this one captures
struct side_arg { step *st; char kind; cudaError_t launch, wait; };
void *side_thread(void *p)
{
    side_arg *a = (side_arg *)p;
    cudaStream_t s2;
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    int64_t *t = a->st->of(a->kind);
    a->launch = a->st->launch(s2, t);
    a->wait = cudaStreamSynchronize(s2);
    cudaGetLastError();
    return nullptr;
}

int run_side(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraph_t g = nullptr;
    cudaError_t b = cudaStreamBeginCapture(st.s, o.capture);
    side_arg a = {&st, o.batches.empty() ? 'g' : o.batches[0], cudaSuccess, cudaSuccess};
    pthread_t th;
    pthread_create(&th, nullptr, side_thread, &a);
    pthread_join(th, nullptr);
    cudaError_t l = st.launch(st.s, st.target);
    cudaError_t e = cudaStreamEndCapture(st.s, &g);
    printf("side launch=%d wait=%d\n", (int)a.launch, (int)a.wait);
    printf("capture begin=%d launch=%d end=%d\n", (int)b, (int)l, (int)e);
    context_check();
    return 0;
}

// --- poller: another thread polls cudaGetLastError while this one replays
volatile int stop_polling;
volatile int stolen; // errors the poller saw
void *poll_thread(void *)
{
    while (!stop_polling) {
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) stolen = stolen + 1;
    }
    return nullptr;
}

int run_poller(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraphExec_t x = o.eager ? nullptr : capture(st);
    pthread_t th;
    pthread_create(&th, nullptr, poll_thread, nullptr);
    for (size_t k = 0; (x || o.eager) && k < o.batches.size(); k++) {
        // Give the poller every chance to get there first.
        cudaMemcpyAsync(st.target, st.of(o.batches[k]), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, st.s);
        cudaError_t l = o.eager ? lg_launch(LG_LEGACY, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>,
                                            dim3(1), dim3(32), 0, st.s, st.out, st.tw, (const float *)st.in,
                                            (const int64_t *)st.target, (const float *)nullptr, true, N, C, C, IGNORE)
                                : cudaGraphLaunch(x, st.s);
        for (int i = 0; i < 2000; i++) sched_yield();
        cudaError_t w = cudaStreamSynchronize(st.s);
        cudaError_t last = cudaGetLastError();
        printf("replay k=%zu batch=%c launch=%d wait=%d last=%d\n", k + 1, o.batches[k], (int)l, (int)w, (int)last);
    }
    stop_polling = 1;
    pthread_join(th, nullptr);
    printf("poller stolen=%d\n", (int)stolen);
    return 0;
}

// --- stale: our text is the meaning of cudaErrorNotPermitted only until the next launch
int run_stale(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaError_t l1 = st.launch(st.s, st.of('b')); // blocked (sync mode) or raised at the sync (async)
    cudaError_t w1 = cudaStreamSynchronize(st.s);
    cudaError_t e1 = l1 != cudaSuccess ? l1 : w1;
    printf("stale bad launch=%d wait=%d text=\"%.11s\"\n", (int)l1, (int)w1, cudaGetErrorString(e1));
    if (e1 != cudaSuccess) (void)cudaGetLastError(); // PyTorch's C10_CUDA_CHECK clears the error it raises
    cudaError_t l = st.launch(st.s, st.of('g'));
    cudaError_t w = cudaStreamSynchronize(st.s);
    printf("stale launch=%d wait=%d after_launch=\"%s\"\n", (int)l, (int)w, cudaGetErrorString(cudaErrorNotPermitted));
    return 0;
}

// --- late: arming after a graph was instantiated
int run_late(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraphExec_t before = capture(st);
    const char *lib = getenv("LG_LATE_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW) : nullptr;
    int (*arm)(void) = h ? (int (*)(void))dlsym(h, "labelguard_arm") : nullptr;
    printf("late armed=%d\n", arm ? arm() > 0 : -1);
    cudaGraphExec_t after = capture(st);
    if (!before || !after) return 0;
    replay(st, before, 1, 'g'); // unknown to the library: runs unchecked, said once
    replay(st, after, 2, 'b');  // captured after arming: checked
    return 0;
}

// --- exitthread: the replaying thread exits; its error goes to the stream's next sync
struct exit_arg { step *st; cudaGraphExec_t x; };
void *exit_thread(void *p)
{
    exit_arg *a = (exit_arg *)p;
    cudaMemcpyAsync(a->st->target, a->st->of('b'), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, a->st->s);
    cudaGraphLaunch(a->x, a->st->s);
    return nullptr; // no check, no sync
}

int run_exitthread(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraphExec_t x = capture(st);
    if (!x) return 0;
    exit_arg a = {&st, x};
    pthread_t th;
    pthread_create(&th, nullptr, exit_thread, &a);
    pthread_join(th, nullptr);
    cudaError_t last0 = cudaGetLastError(); // not this thread's: nothing
    cudaError_t w = cudaStreamSynchronize(st.s);
    cudaError_t last = cudaGetLastError();
    printf("after_exit last_before=%d wait=%d last=%d text=\"%s\"\n", (int)last0, (int)w, (int)last,
           w != cudaSuccess ? cudaGetErrorString(w) : "");
    return 0;
}

// --- reuse: a destroyed graph's handle given to the next capture
struct reuse_arg { cudaGraphExec_t x; pthread_barrier_t *bar; cudaError_t launch, wait; };
void *reuse_thread(void *p)
{
    reuse_arg *a = (reuse_arg *)p;
    cudaStream_t s2 = nullptr;
    cudaStreamCreate(&s2);
    for (int k = 0; k < 2; k++) {
        a->launch = cudaGraphLaunch(a->x, s2);
        a->wait = cudaStreamSynchronize(s2);
    }
    pthread_barrier_wait(a->bar); // replays done
    pthread_barrier_wait(a->bar); // stays alive (its queued checks its own) until A replayed
    return nullptr;
}

int run_reuse(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    cudaGraph_t ga = nullptr, gb = nullptr;
    cudaGraphExec_t xa = nullptr, xb = nullptr;
    cudaStreamBeginCapture(st.s, o.capture);
    st.launch(st.s, st.target);
    cudaError_t e = cudaStreamEndCapture(st.s, &ga);
    cudaError_t i = e != cudaSuccess ? e : cudaGraphInstantiateWithFlags(&xa, ga, 0);
    const void *a_addr = ga;
    if (ga) cudaGraphDestroy(ga);
    cudaStreamBeginCapture(st.s, o.capture);
    cudaMemsetAsync(st.grad, 0, N * C * sizeof(float), st.s);
    cudaError_t eb = cudaStreamEndCapture(st.s, &gb);
    cudaError_t ib = eb != cudaSuccess ? eb : cudaGraphInstantiateWithFlags(&xb, gb, 0);
    printf("reuse capture end=%d instantiate=%d end_b=%d instantiate_b=%d same=%d\n", (int)e, (int)i, (int)eb, (int)ib,
           a_addr == (const void *)gb);
    if (gb) cudaGraphDestroy(gb);
    if (!xa || !xb) return 0;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, nullptr, 2);
    reuse_arg a = {xb, &bar, cudaSuccess, cudaSuccess};
    pthread_t th;
    pthread_create(&th, nullptr, reuse_thread, &a);
    pthread_barrier_wait(&bar);
    printf("reuse b launch=%d wait=%d\n", (int)a.launch, (int)a.wait);
    for (size_t k = 0; k < o.batches.size(); k++) replay(st, xa, (int)k + 1, o.batches[k]);
    pthread_barrier_wait(&bar);
    pthread_join(th, nullptr);
    return 0;
}

// --- twoexecs: two execs of one graph, replayed at the same time on two streams
int run_twoexecs(const opts &o)
{
    step st(o);
    cudaStream_t sa = nullptr, sb = nullptr;
    cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
    st.s = sa;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t xa = nullptr, xb = nullptr;
    cudaStreamBeginCapture(sa, o.capture);
    st.launch(sa, st.target);
    cudaError_t e = cudaStreamEndCapture(sa, &g);
    cudaError_t ia = e != cudaSuccess ? e : cudaGraphInstantiateWithFlags(&xa, g, 0);
    cudaError_t ib = e != cudaSuccess ? e : cudaGraphInstantiateWithFlags(&xb, g, 0);
    if (g) cudaGraphDestroy(g);
    printf("twoexecs capture end=%d instantiate_a=%d instantiate_b=%d\n", (int)e, (int)ia, (int)ib);
    if (!xa || !xb || o.batches.size() < 2) return 0;
    const char *gap = getenv("TWOEXECS_GAP_US");
    float *pinned = nullptr;
    cudaMallocHost((void **)&pinned, 2 * sizeof(float));
    cudaMemcpyAsync(st.target, st.of(o.batches[0]), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, sa);
    cudaError_t la = cudaGraphLaunch(xa, sa);
    cudaMemcpyAsync(&pinned[0], st.out, sizeof(float), cudaMemcpyDeviceToHost, sa);
    // The two copies into the one static target must not cross: B's comes after A's replay
    // (an event), or, with a gap, after A's check has read the labels (its loss kernel runs on).
    cudaEvent_t done = nullptr;
    if (gap) usleep((useconds_t)atoi(gap));
    else if (cudaEventCreate(&done) == cudaSuccess && cudaEventRecord(done, sa) == cudaSuccess) cudaStreamWaitEvent(sb, done, 0);
    cudaMemcpyAsync(st.target, st.of(o.batches[1]), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, sb);
    cudaError_t lb = cudaGraphLaunch(xb, sb);
    cudaMemcpyAsync(&pinned[1], st.out, sizeof(float), cudaMemcpyDeviceToHost, sb);
    cudaError_t wa = cudaStreamSynchronize(sa);
    cudaError_t wb = cudaStreamSynchronize(sb);
    cudaError_t last = cudaGetLastError();
    printf("twoexecs a batch=%c launch=%d wait=%d loss=%g\n", o.batches[0], (int)la, (int)wa, pinned[0]);
    printf("twoexecs b batch=%c launch=%d wait=%d loss=%g last=%d\n", o.batches[1], (int)lb, (int)wb, pinned[1], (int)last);
    cudaGraphExecDestroy(xa);
    cudaGraphExecDestroy(xb);
    context_check();
    return 0;
}

// --- cycles: capture, instantiate, replay, destroy, over and over
long resident_kb()
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    if (f) fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int run_cycles(const opts &o)
{
    step st(o);
    cudaStream_t sx[2] = {nullptr, nullptr};
    cudaStreamCreateWithFlags(&sx[0], cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sx[1], cudaStreamNonBlocking);
    st.s = sx[0];
    float first[2] = {NAN, NAN}; // g, b
    int failed = 0, changed = 0, done = 0;
    size_t free100 = 0, total = 0, free_end = 0;
    long rss100 = 0;
    for (int k = 0; k < o.cycles; k++, done++) {
        if (k == 100) { cudaMemGetInfo(&free100, &total); rss100 = resident_kb(); }
        if (k > 100 && k % 100 == 0 && o.rss_limit_mb > 0 && resident_kb() - rss100 > o.rss_limit_mb * 1024) {
            printf("cycles stopped k=%d host_growth=%ld\n", k, resident_kb() - rss100);
            break;
        }
        char kind = o.batches[(size_t)k % o.batches.size()];
        cudaGraph_t g = nullptr;
        cudaGraphExec_t x[2] = {nullptr, nullptr};
        cudaError_t b = cudaStreamBeginCapture(st.s, o.capture);
        cudaError_t l = st.launch(st.s, st.target);
        cudaError_t e = cudaStreamEndCapture(st.s, &g);
        cudaError_t i = cudaSuccess;
        for (int j = 0; j < o.execs && e == cudaSuccess && i == cudaSuccess; j++)
            i = cudaGraphInstantiateWithFlags(&x[j], g, 0);
        if (g) cudaGraphDestroy(g);
        bool bad = b || l || e || i;
        for (int j = 0; j < o.execs && !bad; j++) {
            cudaMemcpyAsync(st.target, st.of(kind), N * sizeof(int64_t), cudaMemcpyDeviceToDevice, sx[j]);
            float v = NAN;
            cudaError_t r = cudaGraphLaunch(x[j], sx[j]);
            if (r == cudaSuccess) r = cudaMemcpyAsync(&v, st.out, sizeof v, cudaMemcpyDeviceToHost, sx[j]);
            if (r == cudaSuccess) r = cudaStreamSynchronize(sx[j]);
            if (r != cudaSuccess) { bad = true; break; }
            float &f = first[kind == 'b' ? 1 : 0];
            if (std::isnan(f)) f = v;
            else if (v != f && changed++ < 3) printf("cycle k=%d exec=%d batch=%c loss=%g first=%g\n", k, j, kind, v, f);
        }
        for (int j = 0; j < 2; j++)
            if (x[j]) cudaGraphExecDestroy(x[j]);
        if (bad && failed++ < 3) printf("cycle k=%d failed begin=%d launch=%d end=%d instantiate=%d\n", k, (int)b, (int)l, (int)e, (int)i);
    }
    cudaMemGetInfo(&free_end, &total);
    printf("cycles n=%d failed=%d loss_g=%g loss_b=%g changed=%d device_growth=%lld host_growth=%ld\n", done, failed, first[0],
           first[1], changed, done > 100 ? (long long)free100 - (long long)free_end : 0LL,
           done > 100 ? resident_kb() - rss100 : 0L);
    context_check();
    return 0;
}

// --- apperror: the application's own error survives what labelguard does
int run_apperror(const opts &o)
{
    step st(o);
    cudaStreamCreate(&st.s);
    void *huge = nullptr;
    // 1. A loss launch captured (global mode by default) while the application's own error (a
    //    failed cudaMalloc it has not checked yet) is pending: that error must still be there.
    cudaError_t m = cudaMalloc(&huge, (size_t)1 << 62);
    cudaGraph_t g = nullptr;
    cudaError_t b = cudaStreamBeginCapture(st.s, o.capture);
    cudaError_t l = lg_launch(LG_LEGACY, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1),
                              dim3(32), 0, st.s, st.out, st.tw, (const float *)st.in, (const int64_t *)st.target,
                              (const float *)nullptr, true, N, C, C, IGNORE);
    cudaError_t last = cudaGetLastError();
    cudaError_t e = cudaStreamEndCapture(st.s, &g);
    printf("apperror capture malloc=%d begin=%d launch=%d last=%d end=%d\n", (int)m, (int)b, (int)l, (int)last, (int)e);
    // 2. The same with a launch whose labels cannot be checked (ordinary host memory): our
    //    failed query must not take the application's error either. (The kernel then faults.)
    m = cudaMalloc(&huge, (size_t)1 << 62);
    static int64_t host_labels[N];
    l = lg_launch(LG_LEGACY, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1), dim3(32), 0,
                  st.s, st.out, st.tw, (const float *)st.in, (const int64_t *)host_labels, (const float *)nullptr, true, N, C,
                  C, IGNORE);
    last = cudaGetLastError();
    printf("apperror unchecked malloc=%d launch=%d last=%d\n", (int)m, (int)l, (int)last);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, o);
    lg_print_identity();
    if (o.scenario == "replay") return run_replays(o);
    if (o.scenario == "side") return run_side(o);
    if (o.scenario == "poller") return run_poller(o);
    if (o.scenario == "exitthread") return run_exitthread(o);
    if (o.scenario == "stale") return run_stale(o);
    if (o.scenario == "late") return run_late(o);
    if (o.scenario == "reuse") return run_reuse(o);
    if (o.scenario == "apperror") return run_apperror(o);
    if (o.scenario == "twoexecs") return run_twoexecs(o);
    if (o.scenario == "cycles") return run_cycles(o);
    usage("unknown scenario");
}
