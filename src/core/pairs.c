/* pairs.c: one bad batch, one report. A loss whose labels are bad is checked twice per step:
 * its forward and then its backward read the same label tensor. In sync mode under raise the
 * forward is blocked and the backward never comes; but where the forward runs on a masked copy
 * (mask, async mode, a graph replay) the backward is launched with the same bad labels, and
 * its verdict would be a second violation and, under raise, a second error: possibly inside
 * the next step, after the user's `except` already skipped this batch.
 *
 * So each reported violation is remembered by what identifies the bad labels it read: their
 * count, the bound, the bad count, the range of values and the first bad (position, value). Not
 * the tensor's address: a backward may read a copy of the forward's labels (a C++ program that
 * uploads them per kernel, a saved tensor made contiguous), and the same bad values at the same
 * positions are the same batch.
 * A later violation of the other direction (forward after backward: verdicts of different
 * threads may be read in either order) with the same key is the same bad batch: it is not
 * reported again, raises nothing, and is counted (suppressed_duplicates in the summary). A
 * remembered violation pairs once, so the next batch that happens to reuse the memory with
 * the same bad label still gets its own report. The table is small: a pair is read within a
 * step of each other.
 *
 * Called by act.c for every violation, under its own lock (violations are rare). Tested by
 * tests/unit/test_pairs.c and end to end by tests/torch-fake/test_launch_site.sh (async and
 * graph replays: one violation and one error per bad batch).
 */
#include <pthread.h>
#include <string.h>

#include "core/core.h"

#define REMEMBERED 16

typedef struct {
    int64_t count, n_classes, bad_count, index, value, min, max;
    int direction;
    bool paired;
} pair_key_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pair_key_t keys[REMEMBERED];
static int n_keys, next_key;
static _Atomic uint64_t suppressed;

static void key_of(const lg_spec_t *spec, const lg_target_t *t, const lg_verdict_t *v, pair_key_t *k)
{
    memset(k, 0, sizeof *k);
    k->count = t->count;
    k->n_classes = t->n_classes;
    k->min = v->min;
    k->max = v->max;
    k->bad_count = v->bad_count;
    k->index = v->n_samples > 0 ? v->samples[0].index : -1;
    k->value = v->n_samples > 0 ? v->samples[0].value : v->min;
    k->direction = spec->direction;
}

bool lg_pairs_duplicate(const lg_spec_t *spec, const lg_target_t *t, const lg_verdict_t *v)
{
    /* A _assert_async flag or a kernel without a spec has no direction and no labels. */
    if (!spec || spec->assert_flag || v->bad_count <= 0)
        return false;
    pair_key_t k;
    key_of(spec, t, v, &k);
    bool dup = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_keys && !dup; i++) {
        pair_key_t *o = &keys[i];
        if (o->paired || o->direction == k.direction || o->count != k.count || o->n_classes != k.n_classes ||
            o->bad_count != k.bad_count || o->index != k.index || o->value != k.value || o->min != k.min ||
            o->max != k.max)
            continue;
        o->paired = dup = true;
    }
    if (!dup) {
        keys[next_key] = k;
        next_key = (next_key + 1) % REMEMBERED;
        if (n_keys < REMEMBERED)
            n_keys++;
    }
    pthread_mutex_unlock(&lock);
    return dup;
}

void lg_pairs_count_suppressed(void) { __atomic_fetch_add(&suppressed, 1, __ATOMIC_RELAXED); }

uint64_t lg_pairs_suppressed(void) { return __atomic_load_n(&suppressed, __ATOMIC_RELAXED); }

void lg_pairs_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    n_keys = next_key = 0;
}
