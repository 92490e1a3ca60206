/* graphs.c: which CUDA graphs hold checked loss launches, and one verdict per replay. A loss
 * launch captured into a graph gets its check captured with it (validator kernel or host
 * node, validate.c), which publishes run k of its ring at the k-th execution. Here:
 *   capture id -> checks          (lg_graphs_add_check, while the capture runs)
 *   graph      -> capture id      (cudaStreamEndCapture; cudaGraphDestroy erases it)
 *   exec       -> capture id      (cudaGraphInstantiate*: an exec replays its graph's checks)
 * and at each cudaGraphLaunch of an exec with checks, one entry per check {ring, run k, graph
 * id, replay k} is queued in verdicts.c for the launching thread, read like an async check's.
 *
 * A graph handle is an address the runtime reuses (PyTorch destroys each graph right after
 * instantiating it): a destroyed graph's mapping is erased, and the end of a capture replaces
 * whatever its handle mapped before, else a new graph would replay an old one's checks. An
 * exec made before the destroy keeps its checks (kept by capture id while anything refers to it).
 *
 * The graph's id in events is its capture id, unique in the process. An exec instantiated
 * before the library armed is unknown here (`graph_unchecked`, said once by the hook); graphs
 * built node by node are not seen at all (docs/graphs-and-compile.md). Checks captured into a graph whose own execs
 * never replay it (a child graph node, a conditional body, a clone's source) sanitize but
 * cannot report: said once (`graph_checks_unreported`) when such a graph is destroyed without
 * an exec, or when an exec without checks replays while a checked graph has none yet. A second
 * (or later) exec of a checked graph gets scratch of its own, its copies of the check's nodes
 * rewritten at instantiate by the backend that captured them (validate.c), so overlapping
 * replays never read each other's labels; its replays are numbered from 1 and read from its
 * own ring (`graph.exec` in events; the rebinding and the retiring of that scratch are
 * graphs_own.c's). A check that cannot be rewritten stays shared, said once
 * (`graph_exec_shares_checks`, with why).
 *
 * A capture into an existing graph (cudaStreamBeginCaptureToGraph; graphs_into.c) hands back
 * no graph, or the one it captured into: its checks join that graph's mapping
 * (lg_graphs_end_into), never replace it, and their scratch stays while the graph can replay
 * them. The warnings below are graphs_notes.c's.
 *
 * The checks layer never calls up into this table: the constructor hands lg_graphs_add_check
 * to validate.c (lg_validate_set_capture_sink), which calls it for each captured check.
 * Called by the hooks in preload.c on application threads (one mutex); the launch hook asks
 * lg_graphs_watching() first, and the graph-destroy hook lg_graphs_mapped(), one relaxed load
 * each, so a process without checked graphs pays nothing more. Tested by
 * tests/unit/test_graphs.c (the bookkeeping, handle reuse, graph_checks_unreported, replay
 * numbers per exec) and tests/e2e/test_graphs.sh and test_graph_execs.sh (two execs of one
 * graph) under the test double.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

typedef struct check {
    unsigned long long capture_id;
    struct lg_kernel_info *info;
    void *stream; /* the stream it was captured on, for the event */
    lg_target_t target;
    const struct lg_scan_ring *ring;
    uint64_t reads;    /* where the loss launch reads its target: the sanitized copy, or 0 (its own labels) */
    uint64_t launched; /* runs of its ring queued so far: the next replay publishes launched + 1 */
    bool kept;         /* its graph went without an exec: its nodes may live on in another graph */
    lg_site_t *site;   /* where the captured launch was made: every replay's reports name it */
} check_t;

typedef lg_graphs_own_t own_t;

typedef struct mapping {
    const void *key; /* a cudaGraph_t or cudaGraphExec_t */
    unsigned long long capture_id;
    bool instantiated; /* graphs: an exec was made from this graph */
    bool suspect;      /* execs: made without checks while a checked graph had none (see launched) */
    bool body;         /* graphs: captured into, not made by cudaGraphCreate: likely a conditional body */
    uint64_t replays;  /* execs: replays queued so far; each exec numbers its own from 1 */
    uint64_t exec_no;  /* execs: which exec of its graph, from 1 (graphs: how many were made) */
    own_t *own;        /* execs: checks it has scratch of its own for (malloc'd) */
    int n_own;
} mapping_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static check_t *checks;
static int n_checks, cap_checks;
static mapping_t *graphs, *execs;
static int n_graphs, cap_graphs, n_execs, cap_execs;
_Atomic int lg_graphs_open;    /* checks whose capture has not ended */
_Atomic int lg_graphs_watched; /* execs with checks, plus one after a late arming */
_Atomic int lg_graphs_graphs;  /* graphs with checks not destroyed yet (n_graphs) */
static bool armed_late;

static int grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static mapping_t *find(mapping_t *arr, int n, const void *key)
{
    for (int i = 0; i < n; i++)
        if (arr[i].key == key)
            return &arr[i];
    return NULL;
}

static int count_checks(unsigned long long id)
{
    int k = 0;
    for (int i = 0; i < n_checks; i++)
        k += checks[i].capture_id == id;
    return k;
}

/* Drops a capture's checks, and hands their scratch back to the backend that captured it
 * (lg_validate_retire), with the runs queued on it, except where the checks' nodes may still
 * be replayed by a graph no handle here leads to (`kept`). Caller holds `lock`. */
static void drop_checks(unsigned long long id)
{
    int j = 0;
    for (int i = 0; i < n_checks; i++) {
        if (checks[i].capture_id != id) {
            checks[j++] = checks[i];
            continue;
        }
        lg_site_drop(checks[i].site); /* replays still queued hold their own */
        if (!checks[i].kept && checks[i].ring)
            lg_validate_retire(checks[i].ring, checks[i].launched);
    }
    n_checks = j;
}

/* An exec's own scratch goes back with the exec (or its handle's reuse). Caller holds `lock`. */
static void drop_own(mapping_t *m)
{
    lg_graphs_own_retire(m->own, m->n_own);
    free(m->own);
    m->own = NULL;
    m->n_own = 0;
}

/* A capture's checks once neither a graph nor an exec refers to it: nothing can replay them
 * again, so they go (the table does not grow with every capture of a long run), and so does
 * their scratch once its last replay has run (cudagraph trees capture a graph per new shape).
 * Queued verdicts hold copies of what they need. Caller holds `lock`. */
static void release(unsigned long long id)
{
    if (!id)
        return;
    for (int i = 0; i < n_graphs; i++)
        if (graphs[i].capture_id == id)
            return;
    for (int i = 0; i < n_execs; i++)
        if (execs[i].capture_id == id)
            return;
    drop_checks(id);
}

/* Forgets what `graph` mapped to, if anything. Caller holds `lock`. */
static void unmap_graph(const void *graph)
{
    mapping_t *m = find(graphs, n_graphs, graph);
    if (!m)
        return;
    unsigned long long id = m->capture_id;
    if (!m->instantiated) {
        lg_graphs_notes_unreported(
            m->capture_id, count_checks(id),
            "a CUDA graph holding checks was destroyed (or its handle reused) before any exec was made from it");
        /* It may have become a child graph node or a clone's source: another graph may replay
         * these checks, so their scratch is never handed back. */
        for (int i = 0; i < n_checks; i++)
            if (checks[i].capture_id == id)
                checks[i].kept = true;
    }
    *m = graphs[--n_graphs];
    __atomic_store_n(&lg_graphs_graphs, n_graphs, __ATOMIC_RELAXED);
    release(id);
}

int lg_graphs_add_check(unsigned long long capture_id, struct lg_kernel_info *info, void *stream, const lg_target_t *t,
                        const struct lg_scan_ring *ring, uint64_t reads, lg_site_t *site, char *why, size_t why_len)
{
    if (!capture_id) {
        snprintf(why, why_len, "the runtime does not say which capture the stream belongs to");
        return -1;
    }
    pthread_mutex_lock(&lock);
    int rc = grow((void **)&checks, &cap_checks, n_checks, sizeof *checks);
    if (rc == 0) {
        /* Scratch handed back and taken again keeps counting its runs: this check's first
         * replay publishes the run after the ring's latest. */
        checks[n_checks++] = (check_t){.capture_id = capture_id,
                                       .info = info,
                                       .stream = stream,
                                       .target = *t,
                                       .ring = ring,
                                       .reads = reads,
                                       .site = lg_site_hold(site),
                                       .launched = ring ? lg_verdicts_ring_latest(ring) : 0};
        __atomic_fetch_add(&lg_graphs_open, 1, __ATOMIC_RELAXED);
    } else {
        snprintf(why, why_len, "out of memory for the graph's check table");
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Only a pointer store: the library's constructor rule (no CUDA, no file, no thread) holds. */
__attribute__((constructor)) static void hand_in(void) { lg_validate_set_capture_sink(lg_graphs_add_check); }

/* capture_id 0: a capture without checks, reported so that a stale mapping of its handle
 * goes. What the handle mapped before is replaced, never merged; a failed capture's go. */
void lg_graphs_end_capture(unsigned long long capture_id, const void *graph)
{
    pthread_mutex_lock(&lock);
    int k = capture_id ? count_checks(capture_id) : 0;
    if (graph)
        unmap_graph(graph);
    if (k > 0 && graph && grow((void **)&graphs, &cap_graphs, n_graphs, sizeof *graphs) == 0) {
        graphs[n_graphs++] = (mapping_t){.key = graph, .capture_id = capture_id};
        __atomic_store_n(&lg_graphs_graphs, n_graphs, __ATOMIC_RELAXED);
    } else if (k > 0) {
        /* The capture failed (or its graph cannot be remembered): its checks will never run. */
        drop_checks(capture_id);
    }
    __atomic_fetch_sub(&lg_graphs_open, k, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    lg_graphs_notes_say();
}

/* A capture into an existing graph adds nodes to it: its checks join what the graph maps to
 * (never replace it), and go with the graph's (release) once nothing can replay it. A
 * conditional body is never instantiated or destroyed itself: its mapping stays until its
 * handle is reused, and its checks are then kept (unmap_graph). Kept, never handed back: the
 * checks of a failed capture (its nodes may be in the graph), and of one into a graph
 * instantiated before (its execs lack the new nodes; a later one has them, which is not known). */
void lg_graphs_end_into(unsigned long long capture_id, const void *target, bool ok)
{
    pthread_mutex_lock(&lock);
    int k = capture_id ? count_checks(capture_id) : 0;
    mapping_t *m = k > 0 && ok && target ? find(graphs, n_graphs, target) : NULL;
    if (k > 0 && m && !m->instantiated) {
        for (int i = 0; i < n_checks; i++)
            if (checks[i].capture_id == capture_id)
                checks[i].capture_id = m->capture_id;
    } else if (k > 0 && !m && ok && target && grow((void **)&graphs, &cap_graphs, n_graphs, sizeof *graphs) == 0) {
        graphs[n_graphs++] =
            (mapping_t){.key = target, .capture_id = capture_id, .body = !lg_graphs_into_standalone(target)};
        __atomic_store_n(&lg_graphs_graphs, n_graphs, __ATOMIC_RELAXED);
    } else if (k > 0) {
        if (m)
            lg_graphs_notes_into_late(m->capture_id, k);
        for (int i = 0; i < n_checks; i++)
            if (checks[i].capture_id == capture_id)
                checks[i].kept = true;
        drop_checks(capture_id);
    }
    __atomic_fetch_sub(&lg_graphs_open, k, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    lg_graphs_notes_say();
}

/* Execs already made from `graph` own their copy of its nodes, and keep their mappings. */
void lg_graphs_destroyed(const void *graph)
{
    pthread_mutex_lock(&lock);
    unmap_graph(graph);
    pthread_mutex_unlock(&lock);
    lg_graphs_notes_say();
}

/* Once every checked graph has an exec of its own, no exec is suspect. Caller holds `lock`. */
static void clear_suspects(void)
{
    for (int i = 0; i < n_graphs; i++)
        if (!graphs[i].instantiated)
            return;
    for (int i = 0; i < n_execs; i++)
        if (execs[i].suspect) {
            execs[i].suspect = false;
            __atomic_fetch_sub(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
        }
}

/* A second exec of graph `graph` (capture id): each of its checks gets scratch of its own, its
 * copies of the check's nodes rewritten (validate.c, by the backend that captured it); a check
 * whose nodes cannot be stays shared, and is warned about once. */
static void give_own(const void *exec, const void *graph, unsigned long long id, own_t *own,
                     struct lg_kernel_info **infos, const uint64_t *reads, int n)
{
    char why[256] = "";
    int kept = lg_graphs_own_rebind(exec, graph, own, infos, reads, n, why, sizeof why);
    pthread_mutex_lock(&lock);
    mapping_t *m = find(execs, n_execs, exec);
    if (m && m->capture_id == id && !m->own && kept > 0) {
        m->own = own;
        m->n_own = kept;
        own = NULL;
    }
    /* The exec went meanwhile (or its handle is another graph's now): nothing replays these. */
    if (own && (!m || m->capture_id != id))
        lg_graphs_own_retire(own, kept);
    if (why[0])
        lg_graphs_notes_shared(id, why);
    pthread_mutex_unlock(&lock);
    free(own);
}

/* Every exec is remembered, checked or not, so that an unknown one means "made before we
 * armed". capture_id 0: a graph without checks. */
void lg_graphs_instantiated(const void *exec, const void *graph)
{
    pthread_mutex_lock(&lock);
    mapping_t *g = find(graphs, n_graphs, graph);
    unsigned long long id = g ? g->capture_id : 0;
    /* A graph with no checks of its own while a checked one has no exec yet: the checks may
     * have reached this graph inside a node (child graph, conditional body) or a clone. Its
     * exec is watched until its first replay, which tells (see lg_graphs_launched). */
    bool suspect = false;
    own_t *own = NULL;
    struct lg_kernel_info **infos = NULL;
    uint64_t *reads = NULL;
    int n_own = 0;
    uint64_t exec_no = g ? ++g->exec_no : 0;
    if (g && !g->instantiated) {
        g->instantiated = true;
        clear_suspects();
    } else if (g) {
        bool other = false;
        for (int i = 0; i < n_execs && !other; i++)
            other = execs[i].capture_id == id && execs[i].key != exec;
        /* Another exec replays the graph's check nodes: this one gets scratch of its own, below,
         * out of the lock (it calls the runtime). */
        int k = other ? count_checks(id) : 0;
        if (k > 0 && (own = calloc((size_t)k, sizeof *own)) && (infos = calloc((size_t)k, sizeof *infos)) &&
            (reads = calloc((size_t)k, sizeof *reads))) {
            for (int i = 0; i < n_checks; i++)
                if (checks[i].capture_id == id) {
                    infos[n_own] = checks[i].info;
                    reads[n_own] = checks[i].reads;
                    own[n_own++].shared = checks[i].ring;
                }
        } else if (k > 0) {
            lg_graphs_notes_shared(id, "out of memory");
        }
    } else if (!g && !lg_graphs_notes_unreported_said())
        for (int i = 0; i < n_graphs && !suspect; i++)
            suspect = !graphs[i].instantiated;
    mapping_t *m = find(execs, n_execs, exec);
    unsigned long long old = 0;
    if (m) {
        /* An exec handle reused: it no longer holds the checks of its former graph. */
        old = m->capture_id;
        if (m->capture_id || m->suspect)
            __atomic_fetch_sub(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
        drop_own(m);
    } else if (grow((void **)&execs, &cap_execs, n_execs, sizeof *execs) == 0) {
        m = &execs[n_execs++]; /* fresh memory: nothing to take back */
    }
    if (m) {
        *m = (mapping_t){.key = exec, .capture_id = id, .suspect = suspect, .exec_no = exec_no};
        if (id || suspect)
            __atomic_fetch_add(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
    }
    if (old != id)
        release(old);
    pthread_mutex_unlock(&lock);
    if (n_own > 0)
        give_own(exec, graph, id, own, infos, reads, n_own);
    else
        free(own);
    free(infos);
    free(reads);
    lg_graphs_notes_say();
}

void lg_graphs_exec_destroyed(const void *exec)
{
    pthread_mutex_lock(&lock);
    mapping_t *m = find(execs, n_execs, exec);
    if (m) {
        unsigned long long id = m->capture_id;
        if (id || m->suspect)
            __atomic_fetch_sub(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
        drop_own(m);
        *m = execs[--n_execs];
        release(id);
    }
    pthread_mutex_unlock(&lock);
}

void lg_graphs_armed_late(void)
{
    pthread_mutex_lock(&lock);
    if (!armed_late) {
        armed_late = true;
        __atomic_fetch_add(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
}

bool lg_graphs_launched(const void *exec, void *stream)
{
    bool unknown = false;
    pthread_mutex_lock(&lock);
    mapping_t *m = find(execs, n_execs, exec);
    unknown = !m && armed_late;
    if (m && m->suspect) {
        /* Replayed while a checked graph still has no exec: what replays those checks is
         * this exec, most likely (the checks came in a child graph node, a conditional body,
         * a clone), and no verdict of theirs can be read. Watched no longer either way. */
        for (int i = 0; i < n_graphs; i++)
            if (!graphs[i].instantiated) {
                lg_graphs_notes_unreported(graphs[i].capture_id, count_checks(graphs[i].capture_id),
                                           "a CUDA graph without checks of its own was replayed");
                break;
            }
        m->suspect = false;
        __atomic_fetch_sub(&lg_graphs_watched, 1, __ATOMIC_RELAXED);
    }
    /* A checked exec is never suspect, but it may be the parent of a conditional body holding
     * checks (torch.cond with a loss beside it): those go unreported, which is said (once). */
    for (int i = 0; m && i < n_graphs; i++)
        if (graphs[i].body && !graphs[i].instantiated) {
            lg_graphs_notes_unreported(graphs[i].capture_id, count_checks(graphs[i].capture_id),
                                       "a CUDA graph was replayed while checks captured into another one with "
                                       "cudaStreamBeginCaptureToGraph (a conditional node's body) had no exec");
            break;
        }
    unsigned long long id = m ? m->capture_id : 0;
    /* The replay's number is this exec's own: a graph's execs replay independently. Which run
     * of a check's ring the replay publishes is the check's count, over every exec replaying
     * that check's nodes. */
    uint64_t replay = id ? ++m->replays : 0;
    for (int i = 0; id && i < n_checks; i++) {
        check_t *c = &checks[i];
        if (c->capture_id != id)
            continue;
        lg_pending_t *p = calloc(1, sizeof *p);
        if (!p)
            break; /* this replay's verdicts are not read; the next ones are */
        /* The exec's own scratch for this check, if it has one. */
        own_t *o = NULL;
        for (int j = 0; j < m->n_own && !o; j++)
            if (m->own[j].shared == c->ring)
                o = &m->own[j];
        p->cookie = c->info;
        p->stream = stream;
        p->target = c->target;
        p->ring = o ? o->ring : c->ring;
        p->seq = o ? ++o->launched : ++c->launched;
        p->graph_id = id;
        p->replay = replay;
        p->exec = m->exec_no;
        p->as_is = c->reads == 0;
        p->site = lg_site_hold(c->site);
        if (lg_verdicts_add(p) != 0) {
            lg_site_drop(p->site);
            free(p);
        }
    }
    pthread_mutex_unlock(&lock);
    lg_graphs_notes_say();
    return unknown;
}

void lg_graphs_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_checks = n_graphs = n_execs = 0;
    __atomic_store_n(&lg_graphs_open, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lg_graphs_graphs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lg_graphs_watched, armed_late ? 1 : 0, __ATOMIC_RELAXED);
    lg_graphs_into_after_fork();
    lg_graphs_notes_after_fork();
}
