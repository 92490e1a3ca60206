// mixed_late.cu: two CUDA runtimes in one process, armed late, for tests/e2e/test_arm_mixed.sh.
// A CUDA 13 program (the test double's libcudart.so.13) that dlopens libmix12.so (argv[1],
// linked against libcudart.so.12, see libmix12.c), runs both runtimes' launches once with
// clean labels (so each object's GOT slots are bound, as in a job that has been running), then
// is armed, then launches both with one label == n_classes. Armed by:
//   --enable LIB   dlopen(LIB, RTLD_NOW|RTLD_GLOBAL) and labelguard_enable() (the Python API's
//                  way), printing "enable: <its return>";
//   --wait FILE    nothing of its own: prints "ready PID" and waits until FILE exists, while
//                  `labelguard attach` (or its injector) arms it.
// Prints "main launch: <cudaGetLastError>", "main sync: <cudaDeviceSynchronize>" for its own
// launch and libmix12's "mix12 ..." lines for the CUDA 12 one (each bad launch: 800 and sync 0
// when blocked; a launch sent into the other runtime fails with its own error instead).
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lg_nll_once.cuh"

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "--enable") && strcmp(argv[2], "--wait"))) {
        fprintf(stderr, "usage: mixed_late LIBMIX12 --enable LIB|--wait FILE\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*run)(int) = (int (*)(int))dlsym(lib, "mix12_run");
    if (!run)
        return 3;
    lg_nll_once(0, "warm");
    run(0);
    if (!strcmp(argv[2], "--enable")) {
        void *lg = dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL);
        int (*enable)(char *, size_t) = lg ? (int (*)(char *, size_t))dlsym(lg, "labelguard_enable") : NULL;
        char why[512] = "";
        printf("enable: %d %s\n", enable ? enable(why, sizeof why) : -99, why);
    } else {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        struct stat st;
        struct timespec pause = {0, 10 * 1000 * 1000};
        while (stat(argv[3], &st) != 0)
            nanosleep(&pause, NULL);
    }
    fflush(stdout);
    lg_nll_once(1, "main");
    return run(1);
}
