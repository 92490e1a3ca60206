/* forkpoint.c: a test's way into the library's critical sections. Each section that a fork's
 * prepare handler waits for (the start, a registry build, the kernel-name table, a stack
 * capture, a runtime version lookup, a loader walk) calls lg_forkpoint with its name while it
 * holds its lock; with no callback set (always, in the library: only a test that links the
 * objects directly can set one) that is one relaxed load. A test's callback makes another
 * thread fork right there and proves that the fork waits and the child never does.
 *
 * Called by start.c (through the test's own start routine), registry.c, names.c, stack.c and
 * runtime.c; set by tests/unit/test_forkpoint.c, which is its test.
 */
#include <stdatomic.h>

#include "base/base.h"

static void (*_Atomic callback)(int section);

void lg_forkpoint_set(void (*fn)(int section)) { atomic_store(&callback, fn); }

void lg_forkpoint(int section)
{
    void (*fn)(int) = atomic_load_explicit(&callback, memory_order_relaxed);
    if (fn)
        fn(section);
}
