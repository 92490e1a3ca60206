/* graphs_into.c: captures into an existing graph, and the graphs known to take host nodes.
 *
 * cudaStreamBeginCaptureToGraph adds a capture's nodes to a graph the caller already holds:
 * a graph of its own (cudaGraphCreate) or a conditional node's body (torch 2.15's torch.cond
 * and while_loop under a CUDA graph). cudaStreamEndCapture then hands back no graph (PyTorch
 * and NVIDIA's samples pass a NULL pGraph), or the same graph again: either way the nodes,
 * and the checks captured with them, live on in that graph for as long as it, or an exec made
 * from it, can replay them. Here:
 *   capture id -> target graph   (the begin hook, until the capture's end takes it)
 *   graphs made by cudaGraphCreate and not destroyed yet
 * graphs.c maps the checks to the target (lg_graphs_end_into) instead of treating the missing
 * handle as a failed capture, which would hand their scratch to the next captured check while
 * the graph still replays them. A target made by cudaGraphCreate is a graph of its own, which
 * takes host nodes (a conditional body does not, and CUDA says nothing to tell them apart), so
 * the begin hook records such a capture in captures.c and the host backend checks in it.
 * A graph made by cudaGraphCreate and destroyed through the driver (cuGraphDestroy, not seen
 * here) stays in the set; if a conditional body then got its address, a host node captured
 * there would invalidate the capture: the runtime's own calls are the ones PyTorch and CUDA's
 * samples make.
 *
 * Called by the hooks in preload_sync.c on application threads (one mutex; nothing on the
 * launch path), by graphs.c (its fork handler; whether a target is a graph of the caller's
 * own). Tested by tests/unit/test_gpu_driver.c (captured_into_graph: the checks' scratch stays
 * until the graph and its execs are gone), tests/unit/test_graphs.c (a body's checks beside a
 * checked parent: said unreported) and tests/e2e/test_graph_into.sh (two such graphs replayed on
 * two streams, each loss equal to the eager one) under the runtime test double.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/core.h"

typedef struct into {
    unsigned long long id; /* the capture's id */
    const void *graph;     /* the cudaGraph_t it captures into */
} into_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static into_t *intos; /* captures into a graph, begun and not ended */
static int n_intos, cap_intos;
static const void **made; /* graphs made by cudaGraphCreate, not destroyed */
static int n_made, cap_made;
_Atomic int lg_graphs_into_open; /* n_intos */
_Atomic int lg_graphs_into_made; /* n_made */

/* Room for one more element of `elem` bytes. 0, or -1 when out of memory. */
static int grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* Out of memory: the capture is not recorded, and its end is taken for a capture that made a
 * graph of its own (a NULL handle back then counts as a capture into a graph: graphs.c). */
void lg_graphs_into_begun(unsigned long long id, const void *graph)
{
    if (!id || !graph)
        return;
    pthread_mutex_lock(&lock);
    if (grow((void **)&intos, &cap_intos, n_intos, sizeof *intos) == 0) {
        intos[n_intos++] = (into_t){.id = id, .graph = graph};
        __atomic_store_n(&lg_graphs_into_open, n_intos, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
}

const void *lg_graphs_into_take(unsigned long long id)
{
    const void *g = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_intos && !g; i++)
        if (intos[i].id == id) {
            g = intos[i].graph;
            intos[i] = intos[--n_intos];
        }
    __atomic_store_n(&lg_graphs_into_open, n_intos, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return g;
}

void lg_graphs_into_made_graph(const void *graph)
{
    if (!graph)
        return;
    pthread_mutex_lock(&lock);
    bool known = false;
    for (int i = 0; i < n_made && !known; i++)
        known = made[i] == graph;
    if (!known && grow((void **)&made, &cap_made, n_made, sizeof *made) == 0) {
        made[n_made++] = graph;
        __atomic_store_n(&lg_graphs_into_made, n_made, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
}

bool lg_graphs_into_standalone(const void *graph)
{
    bool known = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_made && !known; i++)
        known = made[i] == graph;
    pthread_mutex_unlock(&lock);
    return known;
}

void lg_graphs_into_destroyed(const void *graph)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_made; i++)
        if (made[i] == graph) {
            made[i] = made[--n_made];
            break;
        }
    __atomic_store_n(&lg_graphs_into_made, n_made, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

/* CUDA does not survive fork: the parent's graphs and captures mean nothing in the child, and
 * the lock may have been held by a thread that is not there. */
void lg_graphs_into_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_intos = n_made = 0;
    __atomic_store_n(&lg_graphs_into_open, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lg_graphs_into_made, 0, __ATOMIC_RELAXED);
}
