/* lg.c: bootstrap, lazy start, fork and exit — the library's whole life cycle in one place.
 *
 * Constructor (loader thread, before main): reads the configuration and does nothing else —
 * no CUDA call, no file, no thread — so a preloaded process that never launches a kernel
 * (a shell, the compiler, a DataLoader worker) is untouched. A bad LABELGUARD_* value stops
 * the process with status 2 and one message: a job must not run unguarded by mistake.
 * Note that other libraries' constructors may reach our hooks before this constructor runs
 * (feasibility §2): everything the hooks touch works from static initialisation.
 *
 * Lazy start (first launch that is not already classified, any thread, pthread_once):
 * registry, runtime functions, validator backend, CUPTI, fork handlers, the `start` event.
 *
 * Fork: the child keeps the parent's tables (read-only) but not its log file, locks or held
 * threads; it opens its own log on its first event. exec starts the library afresh.
 * Exit: a `summary` event, only in processes that started.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "labelguard.h"

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static _Atomic int started;

uint64_t lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *env_get(const char *name) { return getenv(name); }

__attribute__((constructor)) static void lg_constructor(void)
{
    char err[1024];
    lg_config_t cfg;
    if (lg_config_parse(&cfg, env_get, err, sizeof err) != 0) {
        size_t n = strlen(err);
        err[n < sizeof err - 1 ? n : sizeof err - 2] = '\n';
        (void)!write(2, err, n + 1 < sizeof err ? n + 1 : sizeof err);
        _exit(2);
    }
    lg_cfg = cfg;
}

static void atfork_prepare(void) { lg_names_atfork_prepare(); }
static void atfork_parent(void) { lg_names_atfork_parent(); }
static void atfork_child(void)
{
    lg_names_atfork_child();
    lg_preload_atfork_child();
    lg_launch_atfork_child();
    lg_report_after_fork_child();
}

static void start(void)
{
    lg_in_library++;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    const lg_runtime_t *rt = lg_preload_runtime();
    lg_registry_init(lg_cfg.kernels[0] ? lg_cfg.kernels : NULL);
    lg_validate_init(rt);
    if (lg_cfg.hooks != LG_HOOKS_INTERPOSE)
        lg_cupti_start();
    lg_report_start();
    atomic_store(&started, 1);
    lg_in_library--;
}

void lg_ensure_started(void) { pthread_once(&start_once, start); }

__attribute__((destructor)) static void lg_destructor(void)
{
    if (!atomic_load(&started))
        return;
    lg_in_library++;
    if (lg_launch_async_pending())
        lg_launch_poll_async();
    lg_counters_t c;
    lg_launch_counters(&c);
    lg_report_summary(&c);
    lg_in_library--;
}

/* ------------------------------------------------------------------ public API */

const char *labelguard_version(void) { return LG_VERSION; }

int labelguard_counters(labelguard_counters_t *out)
{
    if (!out)
        return -1;
    lg_counters_t c;
    lg_launch_counters(&c);
    out->launches = c.launches;
    out->watched = c.watched;
    out->validated = c.validated;
    out->violations = c.violations;
    out->validate_ns_total = c.validate_ns_total;
    return 0;
}
