/* captures.c: the stream captures labelguard saw begin, by capture id, while they run.
 *
 * The host backend checks a captured launch with a host node (validate_node.c), and CUDA
 * accepts host nodes only in some graphs: a conditional node's body takes kernel, empty,
 * child graph, memset, memcpy and conditional nodes only, and a host node captured into it
 * invalidates the application's capture. torch 2.15 captures torch.cond / while_loop bodies
 * that way: cudaGraphAddNode makes the body, cudaStreamBeginCaptureToGraph captures into it.
 * No runtime call says whether a graph is such a body, so the rule goes by how the capture
 * began: a capture begun by cudaStreamBeginCapture (or _ptsz) after labelguard's hooks were in
 * place builds a graph of its own, which takes host nodes, and so does one begun by
 * cudaStreamBeginCaptureToGraph into a graph the program made with cudaGraphCreate (the hook
 * records both here); any other (cudaStreamBeginCaptureToGraph into a conditional body or
 * another graph not known to be the program's own, or a capture begun before the hooks were
 * armed) gets no host node,
 * and its launches run unchecked with a capture_unchecked warning (launch.c).
 *
 * Called by preload_sync.c's begin and end hooks and by validate_node.c, on application
 * threads. A fixed table of ids, written with compare-and-swap: no lock, so nothing to reset in
 * a forked child (which cannot use its parent's captures anyway). A capture that finds the table
 * full is not recorded and counts as unseen: it costs a check, never a host node where CUDA
 * forbids one. Tested by tests/unit/test_captures.c and tests/e2e/test_graph_cond.sh.
 */
#include "checks/checks.h"

#define MAX_OPEN 64 /* captures running at once that labelguard saw begin */

static unsigned long long open_ids[MAX_OPEN]; /* __atomic; 0: free */
int lg_captures_n_open;                       /* __atomic: used slots, for the end hook's fast path */

void lg_captures_begun(unsigned long long id)
{
    if (!id)
        return;
    for (int i = 0; i < MAX_OPEN; i++) {
        unsigned long long free_slot = 0;
        if (__atomic_compare_exchange_n(&open_ids[i], &free_slot, id, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&lg_captures_n_open, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

void lg_captures_ended(unsigned long long id)
{
    if (!id)
        return;
    for (int i = 0; i < MAX_OPEN; i++) {
        unsigned long long want = id;
        if (__atomic_compare_exchange_n(&open_ids[i], &want, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            __atomic_fetch_sub(&lg_captures_n_open, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

bool lg_captures_seen(unsigned long long id)
{
    if (!id)
        return false;
    for (int i = 0; i < MAX_OPEN; i++)
        if (__atomic_load_n(&open_ids[i], __ATOMIC_ACQUIRE) == id)
            return true;
    return false;
}
