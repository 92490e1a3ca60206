/* hold.c: the `hold` action's wait. The launching thread stops until the process gets SIGUSR1,
 * so a debugger or py-spy can look at it while the CUDA context is intact; the message says
 * how. The SIGUSR1 handler exists only while some thread is held, and the application's own
 * disposition (SLURM uses SIGUSR1) is restored after the last one is released.
 *
 * Called by act.c on the thread whose launch had bad labels, after the event was written and
 * flushed. Uses only async-signal-safe calls in the handler (sem_post). Fork: the child starts
 * with no held thread (lg_hold_atfork_child, from lg.c).
 *
 * Tested by tests/e2e/test_hold_signal.sh and test_actions.sh (hold, then kill -USR1).
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

static sem_t hold_sem;
static _Atomic int hold_waiters;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static int hold_users;
static struct sigaction hold_saved;

static void on_release_signal(int sig)
{
    (void)sig;
    int n = atomic_load(&hold_waiters);
    for (int i = 0; i < n; i++)
        sem_post(&hold_sem);
}

/* Blocks the calling thread until SIGUSR1. The handler exists only while some thread is held;
 * the application's own SIGUSR1 disposition (SLURM uses it) is restored afterwards. */
void lg_hold_thread(const char *kernel, const lg_verdict_t *verdict)
{
    pthread_mutex_lock(&hold_lock);
    if (hold_users++ == 0) {
        sem_init(&hold_sem, 0, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_release_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, &hold_saved);
    }
    atomic_fetch_add(&hold_waiters, 1);
    pthread_mutex_unlock(&hold_lock);

    /* The signal must be deliverable to some thread; make sure this one does not block it. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &set, &old);

    char msg[2048];
    int pid = (int)getpid();
    int n = snprintf(msg, sizeof msg,
                     "labelguard: HOLDING thread %ld of process %d before %s (bad label target[%lld] = %lld).\n"
                     "  The launch was not made; the CUDA context is intact. Inspect the process now:\n"
                     "    gdb -p %d        cuda-gdb -p %d        py-spy dump --pid %d\n"
                     "  Release it with:  kill -USR1 %d   (the launch then fails as with LABELGUARD_ACTION=raise;\n"
                     "  SIGCONT alone does not release it)\n",
                     (long)syscall(SYS_gettid), pid, kernel,
                     (long long)(verdict->n_samples ? verdict->samples[0].index : -1),
                     (long long)(verdict->n_samples ? verdict->samples[0].value : 0), pid, pid, pid, pid);
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);

    while (sem_wait(&hold_sem) != 0 && errno == EINTR)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    pthread_mutex_lock(&hold_lock);
    atomic_fetch_sub(&hold_waiters, 1);
    if (--hold_users == 0) {
        sigaction(SIGUSR1, &hold_saved, NULL);
        sem_destroy(&hold_sem);
    }
    pthread_mutex_unlock(&hold_lock);
    static const char released[] = "labelguard: released by SIGUSR1; the launch fails as with raise\n";
    (void)!write(2, released, sizeof released - 1);
}

void lg_hold_atfork_child(void)
{
    pthread_mutex_init(&hold_lock, NULL);
    hold_users = 0;
    atomic_store(&hold_waiters, 0);
}
