/* site.c: where a launch whose verdict comes later was made. An async check's verdict is read
 * at a later hook of the launching thread (or at a synchronizing call), and a captured check's
 * at each replay: the stacks of that moment name opt.step() or the replay, not the loss line.
 * So the launching thread records its site at the launch, cheaply (no symbolization, no
 * unwinding): the Python frames as code objects and offsets (pystack.c's record) and the return
 * address into the code that called the launch API. Only a bad verdict turns it into text.
 *
 * Why no unwound native frames: the static libunwind takes 2 to 7 µs for a few frames (it
 * searches each module's unwind tables per step), against a budget of half a microsecond per
 * watched launch; the caller's return address names the op's launch site at no cost. (For
 * torch._assert_async, launched by many ops, the op is named from the message the op passes in
 * the launch, kept with the check, where the native frames are not unwound.)
 *
 * Called by launch.c (async and captured checks: lg_site_new, then held by each pending check
 * and by graphs.c's captured check, shared by its replays) and act.c (lg_site_resolve). Tested
 * by tests/unit/test_site.c (references, the caller frame) and end to end by
 * tests/e2e/test_pystack.sh (a record resolved after its function returned) and
 * tests/torch-fake/test_launch_site.sh (async and graph verdicts on real torch name the loss
 * line). A code object freed before its verdict is read is checked for (pystack.c), but no test
 * frees one at a known moment: a freed object's memory may still read as the one recorded.
 *
 * A torch.compile'd op's check (hooks/api_check.c) adds the model's line (the FX node's, a
 * string of the caller's that is gone when a late verdict is read): a copy of it lives in the
 * site, so that an async or replayed verdict reports it as a sync one does. Tested end to end by
 * tests/torch-fake/test_compiled_index_more.sh (async and replay verdicts with model_line).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

struct lg_site {
    int refs; /* atomic: held by pending checks of several threads */
    const void *caller;
    const char *line; /* the model's line (lg_site_new_line: in the same block), or NULL */
    lg_py_site_t py;
};

/* Fills a new site: one reference, the caller if native frames are wanted, the Python frames'
 * record if those are. Not calloc'd: only the frames the walk writes are read. */
static lg_site_t *init(lg_site_t *s, const void *caller, const char *line)
{
    s->refs = 1;
    s->caller = lg_config_values.backtrace_native ? caller : NULL;
    s->line = line;
    s->py.n = 0;
    s->py.from_main_thread = false;
    if (lg_config_values.backtrace_python)
        lg_pystack_record(&s->py);
    return s;
}

lg_site_t *lg_site_new(const void *caller)
{
    if (!lg_config_values.backtrace_python && !lg_config_values.backtrace_native)
        return NULL;
    lg_site_t *s = malloc(sizeof *s);
    return s ? init(s, caller, NULL) : NULL;
}

/* One block: the site, then the line's copy, freed with it. Made even with no backtrace wanted,
 * for the line alone. */
lg_site_t *lg_site_new_line(const void *caller, const char *line)
{
    if (!line || !line[0])
        return lg_site_new(caller);
    size_t n = strlen(line) + 1; /* bytes, including the NUL */
    lg_site_t *s = malloc(sizeof *s + n);
    if (!s)
        return NULL;
    char *copy = (char *)(s + 1);
    memcpy(copy, line, n);
    return init(s, caller, copy);
}

const char *lg_site_line(const lg_site_t *s) { return s ? s->line : NULL; }

lg_site_t *lg_site_hold(lg_site_t *s)
{
    if (s)
        __atomic_fetch_add(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

void lg_site_drop(lg_site_t *s)
{
    if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(s);
}

void lg_site_resolve(const lg_site_t *s, lg_native_stack_t *native, lg_py_stack_t *py)
{
    native->n = 0;
    if (s->caller) {
        /* A return address: slot 0 left empty so that lg_stack_symbolize looks up the call
         * before it, as for every frame past the first. */
        native->ips[0] = NULL;
        native->ips[1] = (void *)s->caller;
        native->n = 2;
    }
    py->n = 0;
    py->from_main_thread = false;
    if (s->py.n > 0)
        lg_pystack_resolve(&s->py, py);
}
