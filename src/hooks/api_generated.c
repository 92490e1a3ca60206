/* api_generated.c: labelguard_generated_kernel (include/labelguard.h), the way in for the kernels
 * torch.compile generates that assert on their own: python/labelguard/_generated.py reads each
 * tl.device_assert in the output code Inductor loads and hands it here; base/generated.c keeps
 * it for the device_assert report (core/asserted.c). No start, no CUDA call: a kernel compiled
 * before the first launch is kept as well.
 *
 * Called from Python (ctypes), at compile time or at an Inductor cache hit, on any thread.
 * Tested by tests/unit/test_generated.c (the table behind it) and tests/torch-fake/test_generated.sh.
 */
#include "hooks/hooks.h"
#include "labelguard.h"

int labelguard_generated_kernel(const char *kernel, const char *file, int line, const char *message,
                                const char *source_nodes, const char *aten_ops)
{
    return lg_generated_add(kernel, file, line, message, source_nodes, aten_ops);
}
