/* test_forkpoint.c: a fork that lands inside any of the library's critical sections waits for
 * the section to end, and the child never waits on a lock the parent held. For each section
 * (the start, the registry build, the kernel-name table, a stack capture, a runtime version
 * lookup, a loader walk) a thread enters it; at its fork point (base/forkpoint.c) another
 * thread forks. The section's thread goes on only once that fork has either returned (the
 * fork did not wait: a failure) or sleeps in the prepare handler (as it must); the child then
 * enters the same section itself, under a 60 s alarm that only a hang reaches.
 * The fork handlers are the library's own: referencing labelguard_version links lg.c, whose
 * constructor registers them exactly as in the preloaded library.
 * Run: build/tests/unit/test_forkpoint (or LG_TESTS=test_forkpoint bash tests/run.sh).
 */
#include "core/core.h"
#include "labelguard.h"

#include <glib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int want;                 /* the section under test */
static _Atomic int fired;        /* its fork point was reached (once) */
static _Atomic int go;           /* the forker may fork */
static _Atomic int about;        /* the forker is about to call fork() */
static _Atomic int returned;     /* fork() returned in the parent */
static _Atomic pid_t forker_tid;
static pid_t child;
static int fork_had_returned = -1; /* when the section went on: 1 = the fork did not wait */

/* The thread's scheduler state from /proc: 'S' while it sleeps on a lock. */
static char thread_state(pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : '?';
}

static void enter(int section); /* the section's operation, in the parent or the child */

static void *forker(void *arg)
{
    (void)arg;
    atomic_store(&forker_tid, (pid_t)syscall(SYS_gettid));
    while (!atomic_load(&go))
        sched_yield();
    atomic_store(&about, 1);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a hang guard: only a child that waits forever meets it */
        enter(want);
        _exit(0);
    }
    child = pid;
    atomic_store(&returned, 1);
    return NULL;
}

static void at_point(int section)
{
    if (section != want || atomic_exchange(&fired, 1))
        return;
    atomic_store(&go, 1);
    /* Wait for one of the two outcomes; both come, whatever the machine's load. */
    const struct timespec ms = {0, 1000000};
    for (;;) {
        if (atomic_load(&returned))
            break;
        if (atomic_load(&about) && thread_state(atomic_load(&forker_tid)) == 'S')
            break;
        nanosleep(&ms, NULL);
    }
    fork_had_returned = atomic_load(&returned);
}

static void test_start(void) { lg_forkpoint(-1); }
static _Atomic int version_calls;

static void enter(int section)
{
    switch (section) {
    case -1: /* the start: the child must find it done, never half done */
        lg_start_ensure();
        if (!lg_start_done())
            _exit(3);
        break;
    case LG_FORKPOINT_LOADER_WALK: {
        lg_cudart_t found[4];
        (void)lg_runtime_cudarts(found, 4);
        break;
    }
    case LG_FORKPOINT_VERSION:
        /* a major not looked up yet in this process, so the lookup runs again in the child */
        (void)lg_runtime_for(atomic_fetch_add(&version_calls, 1) == 0 ? 12 : 11, "libcudart.so.12");
        break;
    case LG_FORKPOINT_STACK: {
        lg_native_stack_t s;
        lg_stack_capture(&s);
        break;
    }
    case LG_FORKPOINT_REGISTRY:
        lg_registry_ensure(NULL);
        break;
    case LG_FORKPOINT_NAMES:
        (void)lg_names_info_insert((const void *)(uintptr_t)(0x1000 + getpid()));
        break;
    }
}

static void run_section(gconstpointer data)
{
    want = GPOINTER_TO_INT(data);
    atomic_store(&fired, 0);
    atomic_store(&go, 0);
    atomic_store(&about, 0);
    atomic_store(&returned, 0);
    atomic_store(&forker_tid, 0);
    fork_had_returned = -1;
    pthread_t t;
    g_assert_cmpint(pthread_create(&t, NULL, forker, NULL), ==, 0);
    while (!atomic_load(&forker_tid))
        sched_yield();
    lg_forkpoint_set(at_point);
    if (want == -1)
        lg_start_set(test_start, NULL);
    enter(want);
    lg_forkpoint_set(NULL);
    g_assert_cmpint(atomic_load(&fired), ==, 1); /* the section was entered */
    pthread_join(t, NULL);
    g_assert_cmpint(fork_had_returned, ==, 0); /* the fork waited for the section */
    int status = 0;
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    if (WIFSIGNALED(status))
        g_error("the child of a fork inside section %d was killed by signal %d (a hang, for SIGALRM)", want,
                WTERMSIG(status));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_assert_nonnull(labelguard_version()); /* links lg.c: its constructor registers the fork handlers */
    g_test_add_data_func("/forkpoint/start", GINT_TO_POINTER(-1), run_section);
    g_test_add_data_func("/forkpoint/registry", GINT_TO_POINTER(LG_FORKPOINT_REGISTRY), run_section);
    g_test_add_data_func("/forkpoint/names", GINT_TO_POINTER(LG_FORKPOINT_NAMES), run_section);
    g_test_add_data_func("/forkpoint/stack", GINT_TO_POINTER(LG_FORKPOINT_STACK), run_section);
    g_test_add_data_func("/forkpoint/version", GINT_TO_POINTER(LG_FORKPOINT_VERSION), run_section);
    g_test_add_data_func("/forkpoint/loader_walk", GINT_TO_POINTER(LG_FORKPOINT_LOADER_WALK), run_section);
    return g_test_run();
}
