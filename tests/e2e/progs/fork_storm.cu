// fork_storm.cu: forks while other threads are in the middle of launching and reporting, for
// tests/e2e/test_fork.sh (a lock of labelguard's, or of the runtime, inherited in a held state
// deadlocks the child). Built by the Makefile with nvcc -cudart shared; runs under the runtime
// test double with FAKECUDA_FORK_OK=1 (else a forked child cannot use the runtime at all).
//
// usage: fork_storm [--threads T] [--forks K]      (defaults 4 and 150)
//   T threads loop launching PyTorch's nll_loss_forward_reduce_cuda_kernel_2d with a bad label
//   (value 7 of 3 classes) on their own streams until the forks are done. The main thread forks
//   K times: a burst of up to 30 as soon as the first thread launches (the library is starting),
//   then one at a time at random moments; each child at once launches the same kernel with a bad
//   label on fresh device memory, prints "child pid=<pid> launch_err=<e>" and _exits (status 0
//   when the launch returned an error, i.e. was checked and blocked; 1 when it ran). The parent
//   gives the children 5 s, then kills them and counts them as hung.
// output: fakecudart_identity=..., the children's lines, then
//   storm forks=<K> hung=<n> unblocked=<n> parent_launches=<n> parent_unblocked=<n>
// Exit status 0 when no child hung and every launch (parent's and children's) was blocked.
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

static std::atomic<bool> stop{ false }, first_launch{ false };
static std::atomic<int> parent_launches{ 0 }, parent_unblocked{ 0 };

struct bufs {
    int64_t *t;
    float *in, *out, *tw;
};

static bufs alloc_bufs()
{
    bufs b;
    cudaMalloc((void **)&b.t, 4 * sizeof(int64_t));
    cudaMalloc((void **)&b.in, 12 * sizeof(float));
    cudaMalloc((void **)&b.out, sizeof(float));
    cudaMalloc((void **)&b.tw, sizeof(float));
    float in[12];
    for (int k = 0; k < 12; k++) in[k] = -(float)(k + 1) / 4.0f;
    cudaMemcpy(b.in, in, sizeof in, cudaMemcpyHostToDevice);
    int64_t lab[4] = { 0, 1, 7, 1 };
    cudaMemcpy(b.t, lab, sizeof lab, cudaMemcpyHostToDevice);
    return b;
}

static cudaError_t launch_bad(const bufs &b, cudaStream_t s, lg_launch_mode mode = LG_DEFAULT_MODE)
{
    return lg_launch(mode, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1),
                     dim3(32), 0, s, b.out, b.tw, (const float *)b.in, (const int64_t *)b.t, (const float *)nullptr, true,
                     (int64_t)4, (int64_t)3, (int64_t)3, (int64_t)-100);
}

static void reporter()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    bufs b = alloc_bufs();
    while (!stop.load()) {
        first_launch = true;
        cudaError_t e = launch_bad(b, s);
        cudaStreamSynchronize(s);
        parent_launches++;
        if (e == cudaSuccess) parent_unblocked++;
    }
}

static void msleep_random(unsigned *rs, int max_us)
{
    struct timespec ts = { 0, (long)(rand_r(rs) % max_us) * 1000L };
    nanosleep(&ts, nullptr);
}

// The child: the parent's other threads do not exist here, so anything they held stays held
// unless the fork handlers reset it.
static void child()
{
    bufs b = alloc_bufs();
    // cudaLaunchKernel with the host stub, not <<<>>>: nvcc's launch stub initialises a
    // function-local static on its first call (__cxa_guard_acquire), and a fork while a parent
    // thread is inside that first call leaves the guard taken in the child: the program's own
    // hang, not the library's.
    cudaError_t e = launch_bad(b, (cudaStream_t)0, LG_LEGACY);
    printf("child pid=%d launch_err=%d\n", (int)getpid(), (int)e);
    fflush(stdout);
    _exit(e != cudaSuccess ? 0 : 1);
}

// Waits for the children, each until 5 s after the last fork (a child needs milliseconds),
// then kills the ones left; counts hung and unblocked children.
static void reap(std::vector<pid_t> &pids, int *hung, int *unblocked)
{
    for (int waited = 0; !pids.empty(); waited++) {
        for (size_t i = 0; i < pids.size();) {
            int status = 0;
            pid_t r = waitpid(pids[i], &status, WNOHANG);
            if (r == 0 && waited < 5000) { i++; continue; }
            if (r == 0) {
                printf("child pid=%d hung\n", (int)pids[i]);
                kill(pids[i], SIGKILL);
                waitpid(pids[i], &status, 0);
                ++*hung;
            } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                ++*unblocked;
            }
            pids.erase(pids.begin() + (long)i);
        }
        struct timespec ts1 = { 0, 1000000L };
        if (!pids.empty()) nanosleep(&ts1, nullptr);
    }
}

int main(int argc, char **argv)
{
    int threads = 4, forks = 150;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--forks")) forks = atoi(argv[i + 1]);
        else { fprintf(stderr, "fork_storm: unknown option %s\n", argv[i]); return 2; }
    }
    lg_print_identity();
    fflush(stdout);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) ts.emplace_back(reporter);
    unsigned rs = 12345;
    int hung = 0, unblocked = 0;
    std::vector<pid_t> pids;
    // A burst as soon as the first thread launches: forks that catch it inside the library's
    // lazy start (CUPTI, validator, registry); the children are reaped afterwards.
    int burst = forks < 30 ? forks : 30;
    while (!first_launch.load()) sched_yield();
    for (int k = 0; k < burst; k++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); break; }
        if (pid == 0) child();
        pids.push_back(pid);
        msleep_random(&rs, 100);
    }
    reap(pids, &hung, &unblocked);
    // Then one at a time at random moments: forks that catch threads in launches and reports.
    for (int k = burst; k < forks; k++) {
        msleep_random(&rs, 3000);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); break; }
        if (pid == 0) child();
        pids.push_back(pid);
        reap(pids, &hung, &unblocked);
    }
    stop = true;
    for (auto &th : ts) th.join();
    printf("storm forks=%d hung=%d unblocked=%d parent_launches=%d parent_unblocked=%d\n", forks, hung, unblocked,
           parent_launches.load(), parent_unblocked.load());
    return hung || unblocked || parent_unblocked.load() ? 1 : 0;
}
