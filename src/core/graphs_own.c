/* graphs_own.c: a second (or later) exec of a checked graph gets scratch of its own, so that
 * overlapping replays of two execs never read each other's labels: each of the exec's copies of
 * a check's nodes is rebound (lg_validate_rebind, by the backend that captured the check) to
 * fresh scratch with a ring of its own, and that scratch goes back (lg_validate_retire) with the
 * exec. The rebinding calls the runtime, so graphs.c calls it out of its lock; the application's
 * pending error stays its own, and what a failed call of ours leaves is taken back.
 *
 * Called by graphs.c (cudaGraphInstantiate of a second exec; an exec destroyed or its handle
 * reused). Tested end to end by tests/e2e/test_graph_execs.sh (two execs of one graph, replays
 * overlapping) and tests/unit/test_graphs.c through graphs.c; the backends' rebinding itself by
 * tests/unit/test_gpu_driver.c (against the fake driver).
 */
#include <stdio.h>

#include "core/core.h"

int lg_graphs_own_rebind(const void *exec, const void *graph, lg_graphs_own_t *own, struct lg_kernel_info **infos,
                         const uint64_t *reads, int n, char *why, size_t why_len)
{
    const lg_runtime_t *rt = lg_runtime_get();
    int kept = 0;
    why[0] = '\0';
    lg_runtime_in_library++;
    int saved = lg_runtime_save_error(rt);
    for (int i = 0; i < n; i++) {
        const struct lg_scan_ring *ring = NULL;
        char w[256] = "";
        if (own[i].shared &&
            lg_validate_rebind((void *)exec, (void *)graph, own[i].shared, infos[i], reads[i], &ring, w, sizeof w) == 0)
            own[kept++] =
                (lg_graphs_own_t){.shared = own[i].shared, .ring = ring, .launched = lg_verdicts_ring_latest(ring)};
        else if (!why[0])
            snprintf(why, why_len, "%s", own[i].shared ? w : "the check has no verdict ring");
    }
    lg_runtime_restore_error(rt, saved);
    lg_runtime_in_library--;
    return kept;
}

void lg_graphs_own_retire(const lg_graphs_own_t *own, int n)
{
    for (int i = 0; own && i < n; i++)
        lg_validate_retire(own[i].ring, own[i].launched);
}
