// forker.cu: launches a watched kernel, forks, and in the child optionally launches again
// before exec'ing a command; the parent launches once more after the child ends. For the
// fork/exec behaviour of labelguard and of the runtime (tests/e2e, tests/fakecuda).
//
// usage: forker [--bad] [--child-launch] [--child-bad] [-- CMD ARGS...]
//   --bad           the parent's first launch has a bad label (value 7 of 3 classes)
//   --child-launch  the child launches the kernel too (on a real GPU, and under the test double,
//                   a child of a process that used CUDA gets cudaErrorInitializationError, 3)
//   --child-bad     the child's launch has a bad label
//   CMD             what the child execs (default: sh -c 'echo exec-ok')
// output: fakecudart_identity=..., then
//   parent first launch_err=<e> sync_err=<e>
//   child launch_err=<e> sync_err=<e>          (with --child-launch)
//   <the exec'd command's output>
//   parent child_status=<exit status> second launch_err=<e> sync_err=<e>
#include "torch_kernels.cuh"
#include "lg_launch.cuh"

#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

static int64_t *d_t;
static float *d_in, *d_out, *d_tw;

static void launch(const char *who, bool bad)
{
    int64_t lab[4] = { 0, 1, bad ? 7 : 2, 1 };
    cudaError_t ce = cudaMemcpy(d_t, lab, sizeof lab, cudaMemcpyHostToDevice);
    cudaError_t le = lg_launch(LG_DEFAULT_MODE, at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, int64_t>, dim3(1),
                               dim3(32), 0, (cudaStream_t)0, d_out, d_tw, (const float *)d_in, (const int64_t *)d_t,
                               (const float *)nullptr, true, (int64_t)4, (int64_t)3, (int64_t)3, (int64_t)-100);
    cudaError_t se = cudaDeviceSynchronize();
    printf("%s copy_err=%d launch_err=%d sync_err=%d\n", who, (int)ce, (int)le, (int)se);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bool bad = false, child_launch = false, child_bad = false;
    int cmd = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bad")) bad = true;
        else if (!strcmp(argv[i], "--child-launch")) child_launch = true;
        else if (!strcmp(argv[i], "--child-bad")) child_launch = child_bad = true;
        else if (!strcmp(argv[i], "--")) { cmd = i + 1; break; }
        else { fprintf(stderr, "forker: unknown option %s\n", argv[i]); return 2; }
    }
    lg_print_identity();
    cudaMalloc((void **)&d_t, 4 * sizeof(int64_t));
    cudaMalloc((void **)&d_in, 12 * sizeof(float));
    cudaMalloc((void **)&d_out, sizeof(float));
    cudaMalloc((void **)&d_tw, sizeof(float));
    float in[12];
    for (int k = 0; k < 12; k++) in[k] = -(float)(k + 1) / 4.0f;
    cudaMemcpy(d_in, in, sizeof in, cudaMemcpyHostToDevice);
    launch("parent first", bad);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        if (child_launch) launch("child", child_bad);
        if (cmd > 0 && cmd < argc) execvp(argv[cmd], argv + cmd);
        else execlp("sh", "sh", "-c", "echo exec-ok", (char *)nullptr);
        perror("exec");
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    launch("parent second", false);
    return 0;
}
