/* core.h: the core layer (src/core/): one launch through its stages (launch.c), the start
 * gate, classification, the action on a verdict, the graphs that hold checked launches.
 * Declares what the hooks call; includes checks.h. See src/README.md for the layers. */
#ifndef LG_CORE_H
#define LG_CORE_H
#include "checks/checks.h"

/* ---------------------------------------------------------------- graphs.c */

/* A loss launch captured into capture `capture_id` whose check publishes run k of `ring` at
 * the graph's k-th execution. 0, or -1 with why. */
LG_HIDDEN int lg_graphs_add_check(unsigned long long capture_id, struct lg_kernel_info *info, void *stream,
                                  const lg_target_t *t, const struct lg_scan_ring *ring, uint64_t reads,
                                  lg_site_t *site, char *why, size_t why_len);
/* The hooks of cudaStreamEndCapture (the capture's id, asked before the real call, or 0 for
 * a capture without checks, and the graph it made: it replaces whatever that handle mapped),
 * cudaGraphDestroy (before the real call, so a capture on another thread that gets the freed
 * handle is not unmapped), cudaGraphInstantiate*, cudaGraphExecDestroy and cudaGraphLaunch
 * (after it succeeded: queues one verdict per check for the calling thread; true when the exec
 * was instantiated before the library armed, so its launches are not checked). */
LG_HIDDEN void lg_graphs_end_capture(unsigned long long capture_id, const void *graph);
LG_HIDDEN void lg_graphs_destroyed(const void *graph);
LG_HIDDEN void lg_graphs_instantiated(const void *exec, const void *graph);
LG_HIDDEN void lg_graphs_exec_destroyed(const void *exec);
LG_HIDDEN bool lg_graphs_launched(const void *exec, void *stream); /* true: an exec made before arming */
/* The end of a capture into an existing graph `target` (cudaStreamBeginCaptureToGraph, or a
 * capture ended without a graph handed back): its checks join the target's, and their scratch
 * stays while the target or an exec of it can replay them. `ok`: the real call succeeded. */
LG_HIDDEN void lg_graphs_end_into(unsigned long long capture_id, const void *target, bool ok);
/* labelguard_arm: execs made before now are unknown, and their replays say so once. */
LG_HIDDEN void lg_graphs_armed_late(void);
LG_HIDDEN void lg_graphs_after_fork(void);
/* Checks in captures not ended yet; execs with checks (plus one after a late arming). The
 * hooks test these first (one relaxed load each). */
extern LG_HIDDEN _Atomic int lg_graphs_open;
extern LG_HIDDEN _Atomic int lg_graphs_watched;
/* Graphs with checks not destroyed yet: the destroy and end-capture hooks test it first. */
extern LG_HIDDEN _Atomic int lg_graphs_graphs;
static inline bool lg_graphs_mapped(void) { return __atomic_load_n((int *)&lg_graphs_graphs, __ATOMIC_RELAXED) != 0; }
static inline bool lg_graphs_capturing(void) { return __atomic_load_n((int *)&lg_graphs_open, __ATOMIC_RELAXED) != 0; }
static inline bool lg_graphs_watching(void) { return __atomic_load_n((int *)&lg_graphs_watched, __ATOMIC_RELAXED) != 0; }
/* ---------------------------------------------------------------- graphs_own.c */

/* An exec's own scratch for one check of its graph (lg_validate_rebind): the replays of that
 * exec publish into `ring`, not into the check's (`shared`). */
typedef struct lg_graphs_own {
    const struct lg_scan_ring *shared, *ring;
    uint64_t launched;
} lg_graphs_own_t;
/* A second exec of `graph`: each of own[0..n) (shared set, infos/reads its check's kernel and
 * where the loss reads its target) rebound to scratch of its own by the backend that captured
 * it; the ones that were are compacted to the front of own. Returns how many; why says why the
 * first that could not be stays shared. Calls the runtime: never under graphs.c's lock. */
LG_HIDDEN int lg_graphs_own_rebind(const void *exec, const void *graph, lg_graphs_own_t *own,
                                   struct lg_kernel_info **infos, const uint64_t *reads, int n, char *why,
                                   size_t why_len);
/* Hands own[0..n)'s scratch back to its backend, with the runs queued on it. */
LG_HIDDEN void lg_graphs_own_retire(const lg_graphs_own_t *own, int n);
/* ---------------------------------------------------------------- graphs_notes.c */

/* graphs.c's two warnings, each said once: a text is kept (the first of its kind) while
 * graphs.c holds its lock, and said by lg_graphs_notes_say after it released it. */
LG_HIDDEN void lg_graphs_notes_unreported(unsigned long long graph_id, int n_checks, const char *how);
LG_HIDDEN void lg_graphs_notes_into_late(unsigned long long graph_id, int n_checks);
LG_HIDDEN void lg_graphs_notes_shared(unsigned long long graph_id, const char *why);
LG_HIDDEN bool lg_graphs_notes_unreported_said(void);
LG_HIDDEN void lg_graphs_notes_say(void);
LG_HIDDEN void lg_graphs_notes_after_fork(void);
/* ---------------------------------------------------------------- graphs_into.c */

/* The hooks of cudaStreamBeginCaptureToGraph (after it succeeded: the capture's id and the
 * graph it captures into, until lg_graphs_into_take at its end returns that graph, or NULL
 * for a capture not begun so), cudaGraphCreate (a graph of its own, which takes host nodes:
 * lg_graphs_into_standalone) and cudaGraphDestroy. */
LG_HIDDEN void lg_graphs_into_begun(unsigned long long capture_id, const void *graph);
LG_HIDDEN const void *lg_graphs_into_take(unsigned long long capture_id);
LG_HIDDEN void lg_graphs_into_made_graph(const void *graph);
LG_HIDDEN bool lg_graphs_into_standalone(const void *graph);
LG_HIDDEN void lg_graphs_into_destroyed(const void *graph);
LG_HIDDEN void lg_graphs_into_after_fork(void);
/* Captures into a graph running; graphs made by cudaGraphCreate alive. The end and destroy
 * hooks test these first (one relaxed load each). */
extern LG_HIDDEN _Atomic int lg_graphs_into_open;
extern LG_HIDDEN _Atomic int lg_graphs_into_made;
static inline bool lg_graphs_into_any(void) { return __atomic_load_n((int *)&lg_graphs_into_open, __ATOMIC_RELAXED) != 0; }
static inline bool lg_graphs_into_tracked(void) { return __atomic_load_n((int *)&lg_graphs_into_made, __ATOMIC_RELAXED) != 0; }
/* ---------------------------------------------------------------- launch.c */


/* The one entry from every hook, after the hook started the library: classify, decode,
 * validate, act. `rt` is the runtime the hook resolved. */
LG_HIDDEN void lg_launch_decide(const lg_runtime_t *rt, const lg_launch_t *l, lg_decision_t *d);
/* Set by labelguard_disable (cleared by labelguard_enable): watched launches are not checked.
 * Read on the watched path only; the unwatched fast path never looks at it. */
extern LG_HIDDEN _Atomic int lg_launch_disabled;
/* Collects the calling thread's async verdicts that are ready (and, at a synchronizing call,
 * the orphans `scope` names) and acts on the bad ones. */
LG_HIDDEN void lg_launch_poll(const lg_runtime_t *rt, lg_collect_t scope, void *stream);
/* ---------------------------------------------------------------- classify.c */

/* First launch of a handle: name, spec and layout check, dtype, short name, published in the
 * kernel's entry (created when info is NULL). Returns the entry, NULL when the table is full. */
struct lg_launch;
LG_HIDDEN lg_kernel_info_t *lg_classify(const lg_runtime_t *rt, const struct lg_launch *l, lg_kernel_info_t *info);
/* ---------------------------------------------------------------- act.c */

typedef enum {
    LG_OUTCOME_BLOCKED,
    LG_OUTCOME_HELD,
    LG_OUTCOME_MASKED,
    LG_OUTCOME_LAUNCHED,
    LG_OUTCOME_ABORTED
} lg_outcome_t;
/* When the verdict is known: before a launch that can be skipped (interposed), before one that
 * cannot (seen only by CUPTI), after the launch ran on the sanitized copy (async), or after a
 * captured launch that read its own labels ran (its check only reports: log mode, and ids with
 * no value that may stand in for a bad one, launch.c's async_id). */
typedef enum { LG_ACT_BEFORE, LG_ACT_BEFORE_UNSKIPPABLE, LG_ACT_AFTER, LG_ACT_AFTER_AS_IS } lg_act_when_t;
typedef enum { LG_MASK_UNTRIED, LG_MASK_DONE, LG_MASK_FAILED } lg_mask_state_t;
/* What an action does, decided by lg_act_policy. */
typedef struct lg_act_plan {
    lg_outcome_t outcome;
    bool try_mask;    /* make the masked copy, then ask again with the result */
    bool skip;        /* the launch is not made; it returns LG_RAISE_ERROR */
    bool raise;       /* LG_RAISE_ERROR becomes this thread's pending error */
    bool hold;        /* the thread waits for SIGUSR1 after the report */
    bool abort;       /* summary, then abort() */
    bool flush;       /* the event is fsync'ed before going on */
    const char *note; /* why the outcome is not the action's plain one; may hold one %s (why) */
} lg_act_plan_t;
/* The policy table: pure, the same for sync and async. */
LG_HIDDEN lg_act_plan_t lg_act_policy(lg_action_t action, lg_act_when_t when, lg_mask_state_t mask);
/* One launch with bad labels, as act sees it. */
typedef struct lg_act_input {
    lg_act_when_t when;
    const lg_kernel_info_t *info;
    void *stream;
    void **args; /* the launch's own; NULL after it ran */
    const lg_target_t *target;
    const lg_verdict_t *verdict;
    uint64_t graph_id, replay, exec; /* a graph replay's (graphs.c); 0 otherwise */
    bool copy_made; /* mask: the caller made the masked copy itself (api_check.c, host labels) */
    const lg_site_t *site;  /* a late verdict's launch site (launch.c); NULL: the stacks are read now */
    const char *found;      /* a late verdict: where it was read ("at the next sync"); static text */
    const char *assert_msg; /* a late torch._assert_async verdict: the op's message (NULL: none) */
    const char *model_line; /* a torch.compile'd op's model line (api_check.c; a late one: its site's); NULL: none */
} lg_act_input_t;
/* Reports the violation and carries out LABELGUARD_ACTION; d (NULL for LG_ACT_AFTER) gets
 * what the hook must do. May not return (abort) or return after a hold. */
LG_HIDDEN void lg_act(const lg_runtime_t *rt, const lg_act_input_t *in, lg_decision_t *d);
/* The value a masked copy puts in place of a bad label, and whether the launch's ignore_index
 * must be rewritten to it (uint8 targets cannot hold -100). false: no value works. */
LG_HIDDEN bool lg_act_mask_value(const lg_target_t *t, int64_t *value, bool *rewrite);
/* For ids (target_kind=ids): the kernel's padding_idx (its ignore_index field) when it names a
 * valid row; false otherwise: then mask falls back to raise. */
LG_HIDDEN bool lg_act_mask_id(const lg_target_t *t, int64_t *value);
/* d becomes RUN_WITH the launch's arguments pointing at `copy`. 0, or -1 (copy 0, or the
 * rewrite does not fit). */
LG_HIDDEN int lg_act_run_on_copy(const lg_spec_t *spec, void **args, uint64_t copy, bool rewrite, int64_t value,
                                 lg_decision_t *d);
LG_HIDDEN const char *lg_act_outcome_name(lg_outcome_t o);
LG_HIDDEN uint64_t lg_act_violations(void);
/* Whether a reported violation's kernel ran on its bad values (async, log, an as-is launch): a
 * device-side assert that follows is that report's, not one of a kernel nothing checked. */
LG_HIDDEN bool lg_act_launched_bad(void);
/* The summary's figures: counters.c's counts, the violations, and the checks' own figures
 * (GPU-backend fallbacks, time spent validating). Any thread. */
LG_HIDDEN void lg_act_counters(lg_counters_t *out);
/* Fork child: a fresh lock for the static violation record (lg.c's atfork handler). */
LG_HIDDEN void lg_act_after_fork(void);
/* ---------------------------------------------------------------- pairs.c */

/* Is this violation the other direction's half of one already reported (the same labels read
 * by a forward and its backward)? Remembered when false. */
LG_HIDDEN bool lg_pairs_duplicate(const lg_spec_t *spec, const lg_target_t *t, const lg_verdict_t *v);
/* One duplicate left unreported (act.c: not when it had to be acted on as a violation after
 * all); lg_pairs_suppressed() is the summary's count. */
LG_HIDDEN void lg_pairs_count_suppressed(void);
LG_HIDDEN uint64_t lg_pairs_suppressed(void);
LG_HIDDEN void lg_pairs_after_fork(void);
/* ---------------------------------------------------------------- start.c */

/* From lg.c's constructor, once the configuration is parsed: the start routine (registry,
 * runtime, backend, CUPTI, start event) and the exit collection. Before it, no hook starts. */
LG_HIDDEN void lg_start_set(void (*start)(void), void (*at_exit)(void));
/* The lazy start, from the first hook that needs it (pthread_once, under the lock a fork
 * waits for). Cheap after the first call. False before lg.c's constructor handed its start
 * routine in (a hook reached from an earlier constructor): the caller passes the call through
 * unchecked. */
LG_HIDDEN bool lg_start_ensure(void);
/* True once the start has finished (the start event is out). */
LG_HIDDEN bool lg_start_done(void);
/* True on the thread running the start, while it runs (a fork from inside the start). */
LG_HIDDEN bool lg_start_running_here(void);
/* Registers the exit collection (lg.c's handler) once; from the first launch, so that it runs
 * before the teardown of a CUDA runtime that was started by then. */
LG_HIDDEN void lg_start_arm_exit(void);
/* lg.c's fork handlers: a fork waits for a start under way in another thread. */
LG_HIDDEN void lg_start_atfork_prepare(void);
LG_HIDDEN void lg_start_atfork_parent(void);
LG_HIDDEN void lg_start_atfork_child(void);
/* ---------------------------------------------------------------- asserted.c */

/* An application call (`api`) returned cudaErrorAssert: a device-side assert fired and the
 * context is lost. Reports it once per process, with the candidate launches, unless a
 * violation already reported explains it. `at_query`: found by a synchronizing call or an error
 * query, where outstanding verdicts were read first; at a launch they may not be yet, and the
 * report waits for the next such call. */
LG_HIDDEN void lg_asserted_found(const char *api, bool at_query);
/* Whether CUPTI's callbacks see the launches now (cupti.c: on at its start, off when it hands
 * CUPTI to a profiler or in a fork child): then driver-API launches (Triton's) are among the
 * candidates; else the report says they are not. */
LG_HIDDEN void lg_asserted_driver_launches_seen(bool seen);
/* A launch that returned `err` (a cudaError_t or CUresult): whether its kernel ran all the same,
 * so that it is a candidate. Under CUDA_LAUNCH_BLOCKING=1 a launch waits for its kernel, and the
 * first device-side assert (710) it returns, before any was reported, is that kernel's own; any
 * other failed launch was refused and ran nothing. Cold path (failed launches only). */
LG_HIDDEN bool lg_asserted_launch_ran(int err);
/* After fork in the child: its own report, if its context fails. */
LG_HIDDEN void lg_asserted_after_fork(void);

#endif /* LG_CORE_H */
