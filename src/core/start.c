/* start.c: the start gate: whether the library has started, the one start (pthread_once,
 * under a lock a fork waits for) and the exit collection's arming. The start itself and the
 * exit handler are lg.c's, handed in by its constructor (lg_start_set) once the configuration
 * is parsed: the hooks and the core call down into this file, and only lg.c calls the hook
 * files' start and fork functions.
 *
 * Who calls it: every hook on its slow path (lg_start_ensure, any thread; cheap after the
 * first call), arm.c (lg_start_done), launch.c at the first launch (lg_start_arm_exit), lg.c
 * (lg_start_set from the constructor, the fork handlers). A hook reached before our
 * constructor ran (another library's constructor launching a kernel) finds no start routine:
 * lg_start_ensure returns false and the hook passes the call through unchecked, as it would
 * with the library not loaded; the first hook after the constructor starts it, with the
 * parsed configuration.
 *
 * Fork: a fork waits for a start under way in another thread (lg_start_atfork_prepare takes
 * the lock), so a child never runs the start again on state another thread of the parent was
 * changing; a fork from within the start itself does not wait for itself. Tested by
 * tests/e2e/test_fork.sh (fork storm, every lock re-initialised in the child) and end to end by
 * every e2e test (the start event).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/core.h"

static void (*_Atomic start_fn)(void);
static void (*_Atomic exit_fn)(void);
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static _Atomic int started;

/* Held for the whole start; fork waits for it. A child forked in the middle of the start would
 * run it again (pthread_once restarts an initialisation a fork interrupted) on state that
 * another thread of the parent was changing: GLib's slice allocator lock or CUPTI's, inherited
 * held, and the child's first launch hangs (tests/e2e/test_fork.sh, fork storm). A fork from
 * within the start itself (start_owner) does not wait for itself. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool start_owner;
static __thread bool fork_waited;

void lg_start_set(void (*start)(void), void (*at_exit)(void))
{
    atomic_store(&exit_fn, at_exit);
    atomic_store(&start_fn, start);
}

static void run_start(void)
{
    pthread_mutex_lock(&start_lock);
    start_owner = true;
    void (*start)(void) = atomic_load(&start_fn);
    start();
    atomic_store(&started, 1);
    start_owner = false;
    pthread_mutex_unlock(&start_lock);
}

bool lg_start_ensure(void)
{
    if (LG_UNLIKELY(!atomic_load_explicit(&start_fn, memory_order_acquire)))
        return false;
    pthread_once(&start_once, run_start);
    return true;
}

bool lg_start_done(void) { return atomic_load(&started) != 0; }

static _Atomic int exit_armed;

void lg_start_arm_exit(void)
{
    void (*fn)(void) = atomic_load(&exit_fn);
    if (!fn || atomic_exchange(&exit_armed, 1))
        return;
    /* Under the start's lock, which a fork waits for: atexit takes glibc's exit-functions lock,
     * which a fork child does not get back, and a child whose parent forked at this instant
     * would hang in its own exit(). */
    bool own = start_owner;
    if (!own)
        pthread_mutex_lock(&start_lock);
    atexit(fn);
    if (!own)
        pthread_mutex_unlock(&start_lock);
}

bool lg_start_running_here(void) { return start_owner; }

void lg_start_atfork_prepare(void)
{
    fork_waited = !start_owner;
    if (fork_waited)
        pthread_mutex_lock(&start_lock);
}

void lg_start_atfork_parent(void)
{
    if (fork_waited)
        pthread_mutex_unlock(&start_lock);
}

void lg_start_atfork_child(void) { pthread_mutex_init(&start_lock, NULL); }
