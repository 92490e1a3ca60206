/* lg.c: bootstrap, lazy start, fork and exit — the library's whole life cycle in one place.
 *
 * Constructor (loader thread, before main): reads the configuration and does nothing else —
 * no CUDA call, no file, no thread — so a preloaded process that never launches a kernel
 * (a shell, the compiler, a DataLoader worker) is untouched; the one exception is a Python
 * interpreter that has not started, whose PYTHONPATH gets the torch.compile bootstrap that
 * `labelguard run` would have given it (pyboot.c says why this is safe there). A bad LABELGUARD_* value stops
 * the process with status 2 and one message: a job must not run unguarded by mistake.
 * Note that other libraries' constructors may reach our hooks before this constructor runs
 * (a CUDA extension registering its kernels): everything the hooks touch works from static
 * initialisation, and a launch there passes through unchecked and starts nothing (start.c:
 * the start routine is handed in at the end of this constructor; tests/e2e/test_early_ctor.sh).
 *
 * Lazy start (start(), handed to start.c by the constructor; start.c's lg_start_ensure runs it
 * once, from the hook layer's slow path, any thread): registry (unless a coverage report built
 * it first: lg_registry_ensure), runtime table (runtime.c), validator backend, CUPTI, the
 * `start` event. The core never starts the library: it is handed a started one. A hook
 * reached before this constructor ran starts nothing (start.c says why). The fork handlers
 * are registered by the constructor (see below why).
 * The same holds when the library was armed late (labelguard_enable, `labelguard attach`:
 * arm.c): arming only rewrites GOT slots, and the start waits for the first hook, so the
 * library makes no CUDA or driver call before the application's own first one (a parent that
 * enables and then forks CUDA workers has not initialised CUDA), none runs inside a debugger's
 * call, and the backend is chosen by a process that has its context. Tested by
 * tests/e2e/test_enable_fork.sh and tests/e2e/test_attach_busy.sh.
 *
 * Fork: the child keeps the parent's tables (read-only) but not its log file, locks or held
 * threads; it opens its own log on its first event. A fork waits for a start under way in
 * another thread (start.c) and for a registry being built (registry.c), and the child never
 * calls CUPTI. exec starts the library afresh.
 * Exit: an atexit handler, registered at the first launch (start.c's lg_start_arm_exit, from
 * launch.c; after the CUDA runtime's, so it runs
 * before CUDA's teardown), collects every thread's outstanding async checks; the destructor
 * writes a `summary` event, only in processes that started. Tested by
 * tests/e2e/test_delivery_steps.sh (a bad last step of a live thread, no sync, is logged).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "hooks/hooks.h"
#include "labelguard.h"

static const char *env_get(const char *name) { return getenv(name); }

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);
static void start(void);
static void lg_at_exit(void);

/* glibc hands ELF constructors the process's argc, argv and envp. */
__attribute__((constructor)) static void lg_constructor(int argc, char **argv, char **envp)
{
    (void)envp;
    char err[1024];
    lg_config_t cfg;
    if (lg_config_parse(&cfg, env_get, err, sizeof err) != 0) {
        size_t n = strlen(err);
        err[n < sizeof err - 1 ? n : sizeof err - 2] = '\n';
        (void)!write(2, err, n + 1 < sizeof err ? n + 1 : sizeof err);
        _exit(2);
    }
    lg_config_values = cfg;
    lg_recent_sites = cfg.launch_sites_all && cfg.backtrace_python;
    /* A Python interpreter preloaded by hand gets the torch.compile bootstrap `labelguard run`
     * would have given it (pyboot.c: before main, environment only). */
    lg_pyboot_constructor(argc, argv);
    /* Here, while the process is still one thread, not in the start: a fork between the start
     * taking start.c's lock and registering the handlers would leave the child's start waiting on
     * it forever. No CUDA, file or thread: only a mutex pair per fork until the start. */
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    /* Last: from here on a hook may start the library, with the configuration above. */
    lg_start_set(start, lg_at_exit);
}

static void atfork_prepare(void)
{
    lg_start_atfork_prepare();
    lg_registry_atfork_prepare();
    lg_names_atfork_prepare();
    lg_stack_atfork_prepare();
    lg_runtime_atfork_prepare();
}
static void atfork_parent(void)
{
    lg_runtime_atfork_parent();
    lg_stack_atfork_parent();
    lg_names_atfork_parent();
    lg_registry_atfork_parent();
    lg_start_atfork_parent();
}
static void atfork_child(void)
{
    lg_start_atfork_child();
    lg_registry_atfork_child();
    lg_stack_atfork_child();
    lg_names_atfork_child();
    lg_runtime_atfork_child();
    lg_hold_atfork_child();
    lg_arm_got_atfork_child();
    lg_act_after_fork();
    lg_asserted_after_fork();
    lg_generated_after_fork();
    lg_logprobs_after_fork();
    lg_opaque_after_fork();
    lg_pystack_peek_after_fork();
    lg_cupti_slot_after_fork();
    lg_validate_after_fork_child();
    lg_graphs_after_fork();
    lg_report_after_fork_child();
    lg_report_violation_after_fork();
    /* No start is under way here (the fork waited for it) unless this thread forked from inside
     * it. A parent that never started leaves CUPTI to its children (fork-then-CUDA workers). */
    if (lg_start_done() || lg_start_running_here())
        lg_cupti_after_fork_child();
}

/* torch's version, when torch is in the process: read from the version.py next to the
 * libtorch that /proc/self/maps shows. Reading Python objects here would need the GIL. */
static bool torch_version(char *out, size_t len)
{
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps)
        return false;
    char line[4096];
    char dir[4096] = "";
    while (fgets(line, sizeof line, maps)) {
        char *p = strstr(line, "/torch/lib/libtorch");
        if (p) {
            char *start = strchr(line, '/');
            if (start && start < p) {
                size_t n = (size_t)(p - start) + strlen("/torch/");
                if (n < sizeof dir) {
                    memcpy(dir, start, n);
                    dir[n] = '\0';
                }
            }
            break;
        }
    }
    fclose(maps);
    if (!dir[0] || strlen(dir) + 16 > sizeof dir)
        return false;
    strcat(dir, "version.py");
    FILE *f = fopen(dir, "re");
    if (!f)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *q = NULL;
        if (strncmp(line, "__version__", 11) == 0 && (q = strchr(line, '\'')) != NULL) {
            char *e = strchr(q + 1, '\'');
            if (e && (size_t)(e - q - 1) < len) {
                memcpy(out, q + 1, (size_t)(e - q - 1));
                out[e - q - 1] = '\0';
                found = true;
            }
        }
    }
    fclose(f);
    return found;
}

static void describe_environment(const lg_runtime_t *rt, bool interposed, const char *why)
{
    static char device_name[256];
    static char torch[64];
    static char reason[1024];
    lg_report_env_t env = {0};
    bool cupti = lg_cupti_active();
    env.hooks = interposed && cupti ? "interpose,cupti" : interposed ? "interpose" : cupti ? "cupti" : "";
    /* Which subscribe call got CUPTI's slot, or what each attempt answered when none did. */
    if (lg_cupti_slot_how()[0])
        snprintf(reason, sizeof reason, "%s (%s)", why, lg_cupti_slot_how());
    else
        snprintf(reason, sizeof reason, "%s", why);
    env.hooks_reason = reason;
    env.backend = lg_validate_backend() == LG_BACKEND_GPU ? "gpu" : "host";
    env.validator = lg_validate_module_image();
    if (rt->runtime_get_version)
        rt->runtime_get_version(&env.cuda_runtime);
    if (rt->driver_get_version)
        rt->driver_get_version(&env.driver);
    env.device_index = -1;
    if (rt->get_device && rt->get_device(&env.device_index) != 0)
        env.device_index = -1;
    if (rt->get_device_properties && env.device_index >= 0) {
        /* Room for any runtime's layout: CUDA 12's struct is 24 bytes larger than the CUDA 13
         * one these headers declare; only the name, which every layout puts first, is read. */
        static union {
            struct cudaDeviceProp p;
            char room[4096];
        } prop;
        if (rt->get_device_properties(&prop.p, env.device_index) == cudaSuccess) {
            snprintf(device_name, sizeof device_name, "%s", prop.p.name);
            env.device_name = device_name;
        }
    }
    if (torch_version(torch, sizeof torch))
        env.torch = torch;
    env.compiled = lg_api_check_way();
    lg_report_set_environment(&env);
}

static void start(void)
{
    lg_runtime_in_library++;
    const lg_runtime_t *rt = lg_runtime_get();
    /* The first hook of the process may come with an error of the application pending. */
    int saved = lg_runtime_save_error(rt);
    lg_registry_ensure(lg_report_warning);
    lg_validate_init(rt);
    /* Interposition is a layer only where there is a shared runtime to interpose. */
    bool interposed = lg_config_values.hooks != LG_HOOKS_CUPTI && lg_runtime_resolve("cudaLaunchKernel", NULL) != NULL;
    char why[256];
    if (lg_cupti_slot_wanted(lg_runtime_resolve("cudaLaunchKernel", NULL) != NULL, why, sizeof why))
        lg_cupti_start();
    describe_environment(rt, interposed, why);
    lg_runtime_restore_error(rt, saved);
    lg_report_start();
    lg_cupti_report_status();
    lg_arm_after_start();
    if (lg_config_values.action == LG_ACTION_RAISE || lg_config_values.action == LG_ACTION_HOLD) {
        /* Said once at start too, in the log: the choice of action matters before anything is bad. */
        char ddp[512];
        if (lg_text_distributed(lg_config_values.action == LG_ACTION_HOLD ? "held" : "blocked", ddp, sizeof ddp)[0])
            lg_report_note_once("distributed_action", ddp);
    }
    lg_runtime_in_library--;
}

/* At exit the last async checks are still outstanding when the job ends without a final sync
 * (or their threads, autograd's, live on): collected here, in an atexit handler registered at
 * the first launch, so after the CUDA runtime's own (its teardown, which may unmap the pinned
 * verdict rings, then runs after this). Every thread's checks, given a moment for the GPU to
 * publish them; then no ring is read again. */
#define EXIT_WAIT_NS 2000000000ull

static void lg_at_exit(void)
{
    if (!lg_start_done())
        return;
    lg_runtime_in_library++;
    if (lg_verdicts_outstanding()) {
        lg_verdicts_wait_published(EXIT_WAIT_NS);
        lg_launch_poll(lg_runtime_get(), LG_COLLECT_EXIT, NULL);
    }
    lg_verdicts_close();
    lg_runtime_in_library--;
}

/* The summary. A library unloaded without its atexit handler having run (a failed dlopen's
 * cleanup) still reads no ring: the runtime may be going away first. */
__attribute__((destructor)) static void lg_destructor(void)
{
    if (!lg_start_done())
        return;
    lg_runtime_in_library++;
    lg_verdicts_close();
    if (lg_verdicts_pending() || lg_verdicts_orphaned())
        lg_launch_poll(lg_runtime_get(), LG_COLLECT_SYNC_ALL, NULL);
    lg_counters_t c;
    lg_act_counters(&c);
    lg_report_summary(&c);
    lg_runtime_in_library--;
}

/* ------------------------------------------------------------------ public API */

const char *labelguard_version(void) { return LG_VERSION; }

int labelguard_start(void)
{
    lg_start_ensure();
    return 0;
}

int labelguard_counters(labelguard_counters_t *out)
{
    if (!out)
        return -1;
    lg_counters_t c;
    lg_act_counters(&c);
    out->launches = c.launches;
    out->watched = c.watched;
    out->validated = c.validated;
    out->violations = c.violations;
    out->validate_ns_total = c.validate_ns_total;
    return 0;
}

int labelguard_last_violation(char *buf, size_t cap) { return lg_report_violation_last(buf, cap); }

int labelguard_config(char *buf, size_t cap) { return lg_report_config_json(buf, cap); }

int labelguard_config_check(const char *name, const char *value, char *msg, size_t cap)
{
    return lg_config_check(name, value, msg, cap);
}
