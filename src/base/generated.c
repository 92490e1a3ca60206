/* generated.c: the kernels torch.compile generated in this process that assert on their own
 * (Inductor's index asserts in Triton kernels, a user's tl.device_assert): name, the generated
 * file and the assert's line in it, the assert's text, and the graph nodes and ATen ops
 * Inductor says the kernel was made from. labelguard does not judge these conditions before the
 * kernel runs (compiled index ops are checked by labelguard::check_index instead, where it
 * applies); should one fire, the device_assert report lists them, so that the device's own
 * "Assertion `...` failed" line, which names only the text, leads to the kernel and its file.
 *
 * A bounded ring (the newest LG_GENERATED_MAX) under a mutex: entries arrive when Inductor loads
 * output code (compile time, or a cache hit), never on a launch; the report reads a copy once.
 * Strings are copied into fixed fields, cut where longer.
 *
 * Called by hooks/api_generated.c (labelguard_generated_kernel, from the Python package) and
 * core/asserted.c (the report). Tested by tests/unit/test_generated.c (copy, duplicates, the
 * ring, bad input, threads) and end to end by tests/torch-fake/test_generated.sh (an Inductor
 * output module's kernels in the report).
 */
#include <pthread.h>
#include <string.h>

#include "base/base.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static lg_generated_kernel_t ring[LG_GENERATED_MAX];
static unsigned long added; /* entries ever added: the newest is ring[(added - 1) % MAX] */

static void copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

static bool same(const lg_generated_kernel_t *k, const char *kernel, const char *file, int line)
{
    return k->line == line && !strncmp(k->kernel, kernel, sizeof k->kernel - 1) &&
           !strncmp(k->file, file, sizeof k->file - 1);
}

int lg_generated_add(const char *kernel, const char *file, int line, const char *message, const char *source_nodes,
                     const char *aten_ops)
{
    if (!kernel || !*kernel || !file || !*file || !message || !*message)
        return -1;
    pthread_mutex_lock(&lock);
    unsigned long kept = added < LG_GENERATED_MAX ? added : LG_GENERATED_MAX;
    for (unsigned long i = 0; i < kept; i++)
        if (same(&ring[i], kernel, file, line)) {
            pthread_mutex_unlock(&lock);
            return 0;
        }
    lg_generated_kernel_t *k = &ring[added % LG_GENERATED_MAX];
    copy(k->kernel, sizeof k->kernel, kernel);
    copy(k->file, sizeof k->file, file);
    copy(k->message, sizeof k->message, message);
    copy(k->source_nodes, sizeof k->source_nodes, source_nodes);
    copy(k->aten_ops, sizeof k->aten_ops, aten_ops);
    k->line = line;
    added++;
    pthread_mutex_unlock(&lock);
    return 1;
}

int lg_generated_read(lg_generated_kernel_t *out, int max, int *total)
{
    pthread_mutex_lock(&lock);
    unsigned long kept = added < LG_GENERATED_MAX ? added : LG_GENERATED_MAX;
    int n = 0;
    for (unsigned long i = 0; i < kept && n < max; i++)
        out[n++] = ring[(added - 1 - i) % LG_GENERATED_MAX];
    if (total)
        *total = added > (unsigned long)INT32_MAX ? INT32_MAX : (int)added;
    pthread_mutex_unlock(&lock);
    return n;
}

void lg_generated_after_fork(void) { pthread_mutex_init(&lock, NULL); }
