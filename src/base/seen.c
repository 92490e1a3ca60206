/* seen.c: a small bounded set of 64-bit keys that answers "is this the first time?" under its
 * own lock, and the FNV-1a step its callers key strings with. logprobs.c keeps the (kernel,
 * call site) pairs it has already warned about; opaque.c the compiled loss kernels it has said
 * are unchecked. Both run on a watched launch's slow path only. A set is static in its caller
 * (LG_SEEN_INIT); a fork child re-initialises its lock through the caller's fork handler
 * (lg_seen_after_fork), and keeps what the parent had seen.
 *
 * Tested by tests/e2e/test_logprobs.sh and test_opaque.sh (one warning per site or kernel) and
 * by tests/e2e/test_fork.sh (every set's lock is reset in a fork child).
 */
#include <pthread.h>

#include "base/base.h"

int lg_seen_add(lg_seen_t *s, uint64_t key)
{
    int r = 1;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n && r; i++)
        if (s->keys[i] == key)
            r = 0;
    if (r && s->n < LG_SEEN_CAP)
        s->keys[s->n++] = key;
    else if (r)
        r = -1;
    pthread_mutex_unlock(&s->lock);
    return r;
}

void lg_seen_after_fork(lg_seen_t *s) { pthread_mutex_init(&s->lock, NULL); }
