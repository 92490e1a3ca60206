// malloc_loop.cu: a process that nearly always has a thread inside malloc or free, for
// tests/e2e/test_attach_malloc.sh. It launches nll_loss_forward_reduce_cuda_kernel_2d once with
// clean labels (libcudart loaded and bound, as in a running job), starts 3 threads that loop on
// malloc/free of sizes past the tcache (so each call takes its arena's lock), prints
// "ready PID", and loops on malloc/free itself on the main thread (where `labelguard attach`'s
// injector stops it) until the file argv[1] exists (watched by a fourth thread). Then it
// launches once more with one label == n_classes and prints "launch: <cudaGetLastError>" and
// "sync: <cudaDeviceSynchronize>" (armed, with the default action: 800 and 0). Exit 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lg_nll_once.cuh"

static volatile int stop;

static void churn(unsigned seed)
{
    void *held[8] = {0};
    for (unsigned i = 0; !stop; i++) {
        unsigned k = (i * 7 + seed) % 8;
        free(held[k]);
        held[k] = malloc(2048 + (size_t)((i * 2654435761u + seed) % 60000));
    }
    for (int k = 0; k < 8; k++)
        free(held[k]);
}

static void *worker(void *arg)
{
    churn((unsigned)(size_t)arg);
    return NULL;
}

static void *watch(void *path)
{
    struct stat st;
    struct timespec pause = {0, 5 * 1000 * 1000};
    while (stat((const char *)path, &st) != 0)
        nanosleep(&pause, NULL);
    stop = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: malloc_loop TRIGGER_FILE\n");
        return 2;
    }
    lg_nll_once(0, "");
    pthread_t t[4];
    for (size_t i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    pthread_create(&t[3], NULL, watch, argv[1]);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    churn(0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    lg_nll_once(1, "");
    return 0;
}
