// fork_storm.cu: forks while other threads are in the middle of launching and reporting, for
// tests/e2e/test_fork.sh (a lock of labelguard's, or of the runtime, inherited in a held state
// deadlocks the child). Built by the Makefile with nvcc -cudart shared; runs under the runtime
// test double with FAKECUDA_FORK_OK=1 (else a forked child cannot use the runtime at all).
//
// usage: fork_storm [--threads T] [--forks K] [--hung-after S] [--cap S] [--hang-child N]
//                   [--busy-child N:S]        (defaults 4, 150, 30 and 600; no hang, no busy child)
//   T threads loop launching PyTorch's nll_loss_forward_reduce_cuda_kernel_2d with a bad label
//   (value 7 of 3 classes) on their own streams until the forks are done. The main thread forks
//   K times: a burst of up to 30 as soon as the first thread launches (the library is starting),
//   then one at a time at random moments; each child at once launches the same kernel with a bad
//   label on fresh device memory, prints "child pid=<pid> launch_err=<e>" and _exits (status 0
//   when the launch returned an error, i.e. was checked and blocked; 1 when it ran).
//   "Hung" is judged by progress, not by a time: the parent samples each live child's
//   /proc/PID/stat twice a second, and a child that is moving (a thread running, or its CPU time
//   rising) gets more time, however loaded the machine. One asleep with flat CPU time for S
//   seconds (--hung-after) cannot finish: its threads' syscall, wchan and stat, and the mapping
//   of each blocked syscall's first argument (a futex's address: in the program's libraries, a
//   lock of theirs; in qemu-aarch64's own image under qemu-user, a lock of qemu's) are printed,
//   then it is killed and counted as hung, unless it is qemu-user hung in its own locks
//   (qemu_hung, see dump_child). --cap is only a guard against a child that runs
//   forever (livelock), far above any child's time. For the verdict's own test, child number N
//   (counting from 1) can be made to hang on a futex of its own (--hang-child: a default mutex
//   locked twice) or to compute for S seconds before its launch (--busy-child), which must not
//   count as hung however long it takes.
// output: fakecudart_identity=..., the children's lines, then
//   storm forks=<K> hung=<n> unblocked=<n> parent_launches=<n> parent_unblocked=<n> qemu_hung=<n>
// Exit status 0 when no child hung and every launch (parent's and children's) was blocked.
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <ctime>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

static std::atomic<bool> stop{ false }, first_launch{ false };

static double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
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
static int hang_child = 0, busy_child = 0, busy_s = 0;

static void child(int n)
{
    if (n == hang_child) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        pthread_mutex_lock(&m);    // a default mutex: the second lock sleeps on its futex forever
    }
    if (n == busy_child) {
        volatile unsigned long x = 0;
        for (double end = now_s() + busy_s; now_s() < end;) x = x + 1;
    }
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

static int hung_after_s = 30, cap_s = 600;

// Reads /proc/<path>/stat: the state letter and utime+stime in clock ticks. False when the task
// is gone.
static bool read_stat(const char *path, char *state, unsigned long long *cpu)
{
    char name[96], buf[1024];
    snprintf(name, sizeof name, "%s/stat", path);
    FILE *f = fopen(name, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');     // the command name may hold spaces and parentheses
    unsigned long long ut = 0, st = 0;
    // after ") ": state, then fields 4..13, then utime (14) and stime (15)
    if (!p || sscanf(p + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", state, &ut, &st) != 3) return false;
    *cpu = ut + st;
    return true;
}

// Whether a thread of pid is running or runnable (R), and the process's CPU time (all threads).
static bool progress(pid_t pid, bool *running, unsigned long long *cpu)
{
    char path[64], state;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (!read_stat(path, &state, cpu)) return false;
    *running = state == 'R';
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return true;
    for (struct dirent *e; (e = readdir(d)) != nullptr;) {
        if (e->d_name[0] == '.') continue;
        char tpath[96];
        unsigned long long tcpu;
        snprintf(tpath, sizeof tpath, "/proc/%d/task/%s", (int)pid, e->d_name);
        if (read_stat(tpath, &state, &tcpu) && state == 'R') *running = true;
    }
    closedir(d);
    return true;
}

static void print_file(const char *label, const char *name)
{
    char buf[512] = "";
    FILE *f = fopen(name, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    }
    printf("  %s: %s\n", label, f ? buf : "(unreadable)");
}

// Prints the line of /proc/<pid>/maps holding addr. Returns whether addr is in the data or bss
// of the process's executable: from start_data up to the end of the mapping that holds end_data,
// or of the anonymous mapping (the bss) that starts at end_data's next page.
static bool print_mapping(pid_t pid, unsigned long long addr, unsigned long long start_data,
                          unsigned long long end_data)
{
    char name[64], line[512];
    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(name, "r");
    if (!f) { printf("    no maps\n"); return false; }
    unsigned long long bss = (end_data + 4095) & ~4095ULL;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, inode = 0;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &lo, &hi, &inode) >= 2 && addr >= lo && addr < hi) {
            printf("    0x%llx is in: %s", addr, line);
            fclose(f);
            return start_data && addr >= start_data && (lo <= end_data || (lo == bss && inode == 0));
        }
    }
    fclose(f);
    printf("    0x%llx is in no mapping\n", addr);
    return false;
}

// What a hung child is doing, thread by thread. /proc/PID/task/TID/syscall reads
// "NR arg1 ... arg6 sp pc" for a thread blocked in a syscall (NR: the kernel's own numbering,
// the host's under qemu-user: futex is 202 on x86_64, 98 on aarch64); arg1 of a futex is the
// lock's address, whose mapping says whose lock it is. Returns true when the child is
// qemu-user itself (the host process is qemu-*) and every blocked thread waits on an address in
// qemu's own image (its data or bss: a lock of qemu, or of the glib and libc linked into it,
// inherited held from a parent thread that was inside it at the fork). That is a qemu-user bug,
// seen in qemu 7.2 with a child that never ran a guest instruction; a lock of the program or of
// a guest library lives in guest memory, never there, so no guest hang is classed this way.
static bool dump_child(pid_t pid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    print_file("process stat", (std::string("/proc/") + std::to_string(pid) + "/stat").c_str());
    char comm[64] = "";
    unsigned long long start_data = 0, end_data = 0;
    {
        FILE *f = fopen((std::string("/proc/") + std::to_string(pid) + "/stat").c_str(), "r");
        char buf[1024];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        const char *o = strchr(buf, '('), *c = strrchr(buf, ')');
        if (o && c && c > o) {
            snprintf(comm, sizeof comm, "%.*s", (int)(c - o - 1), o + 1);
            // after ") ": fields 3.. ; start_data and end_data are fields 45 and 46
            const char *p = c + 2;
            for (int field = 3; field < 45 && p; field++) { p = strchr(p, ' '); if (p) p++; }
            if (p) sscanf(p, "%llu %llu", &start_data, &end_data);
        }
    }
    bool qemu = strncmp(comm, "qemu-", 5) == 0, all_in_qemu = qemu, blocked = false;
    DIR *d = opendir(path);
    if (!d) { printf("  no tasks\n"); return false; }
    for (struct dirent *e; (e = readdir(d)) != nullptr;) {
        if (e->d_name[0] == '.') continue;
        std::string t = std::string(path) + "/" + e->d_name;
        printf(" task %s:\n", e->d_name);
        print_file("stat", (t + "/stat").c_str());
        print_file("wchan", (t + "/wchan").c_str());
        print_file("syscall", (t + "/syscall").c_str());
        FILE *f = fopen((t + "/syscall").c_str(), "r");
        long nr = -1;
        unsigned long long a1 = 0;
        if (f) {
            if (fscanf(f, "%ld %llx", &nr, &a1) == 2 && nr >= 0) {
                blocked = true;
                if (!print_mapping(pid, a1, start_data, end_data)) all_in_qemu = false;
            }
            fclose(f);
        }
    }
    closedir(d);
    fflush(stdout);
    return qemu && blocked && all_in_qemu;
}

struct kid {
    pid_t pid;
    double born, last_move, last_sample;
    unsigned long long cpu;
};

// Waits for the children (polled every millisecond, sampled every 0.5 s); kills and counts as
// hung a child asleep with flat CPU time for hung_after_s, or alive after cap_s; counts the
// children whose launch was not blocked.
static int qemu_hung;

static void reap(std::vector<kid> &kids, int *hung, int *unblocked)
{
    while (!kids.empty()) {
        double now = now_s();
        for (size_t i = 0; i < kids.size();) {
            kid &k = kids[i];
            int status = 0;
            pid_t r = waitpid(k.pid, &status, WNOHANG);
            if (r == 0) {
                const char *why = nullptr;
                if (now - k.last_sample >= 0.5) {
                    bool running = false;
                    unsigned long long cpu = 0;
                    k.last_sample = now;
                    if (progress(k.pid, &running, &cpu) && (running || cpu != k.cpu)) k.last_move = now;
                    k.cpu = cpu;
                    if (now - k.last_move >= hung_after_s) why = "asleep with flat CPU time";
                    else if (now - k.born >= cap_s) why = "still running at the cap";
                }
                if (!why) { i++; continue; }
                printf("child pid=%d hung: %s for %.0f s (alive %.0f s, cpu %llu ticks)\n", (int)k.pid, why,
                       now - k.last_move, now - k.born, k.cpu);
                bool in_qemu = dump_child(k.pid);
                kill(k.pid, SIGKILL);
                waitpid(k.pid, &status, 0);
                if (in_qemu) {
                    printf("child pid=%d: every thread waits on a lock in qemu-user's own image: a qemu-user bug, "
                           "not counted as hung (qemu_hung)\n", (int)k.pid);
                    qemu_hung++;
                } else {
                    ++*hung;
                }
            } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                ++*unblocked;
            }
            kids.erase(kids.begin() + (long)i);
        }
        struct timespec ts1 = { 0, 1000000L };
        if (!kids.empty()) nanosleep(&ts1, nullptr);
    }
}

static kid forked(pid_t pid)
{
    double t = now_s();
    return kid{ pid, t, t, t, 0 };
}

int main(int argc, char **argv)
{
    int threads = 4, forks = 150;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--forks")) forks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hung-after")) hung_after_s = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cap")) cap_s = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hang-child")) hang_child = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--busy-child")) sscanf(argv[i + 1], "%d:%d", &busy_child, &busy_s);
        else { fprintf(stderr, "fork_storm: unknown option %s\n", argv[i]); return 2; }
    }
    lg_print_identity();
    fflush(stdout);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) ts.emplace_back(reporter);
    unsigned rs = 12345;
    int hung = 0, unblocked = 0;
    std::vector<kid> pids;
    // A burst as soon as the first thread launches: forks that catch it inside the library's
    // lazy start (CUPTI, validator, registry); the children are reaped afterwards.
    int burst = forks < 30 ? forks : 30;
    while (!first_launch.load()) sched_yield();
    for (int k = 0; k < burst; k++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); break; }
        if (pid == 0) child(k + 1);
        pids.push_back(forked(pid));
        msleep_random(&rs, 100);
    }
    reap(pids, &hung, &unblocked);
    // Then one at a time at random moments: forks that catch threads in launches and reports.
    for (int k = burst; k < forks; k++) {
        msleep_random(&rs, 3000);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); break; }
        if (pid == 0) child(k + 1);
        pids.push_back(forked(pid));
        reap(pids, &hung, &unblocked);
    }
    stop = true;
    for (auto &th : ts) th.join();
    printf("storm forks=%d hung=%d unblocked=%d parent_launches=%d parent_unblocked=%d qemu_hung=%d\n", forks, hung,
           unblocked, parent_launches.load(), parent_unblocked.load(), qemu_hung);
    return hung || unblocked || parent_unblocked.load() ? 1 : 0;
}
