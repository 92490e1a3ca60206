/* classify.c: the first stage of a launch, run once per kernel handle: its mangled name, the
 * registry spec that fits its parameter list, its label dtype and its short name, all cached
 * in the kernel's entry of names.c's table. Every later launch of the kernel reads the cached
 * state: an unwatched kernel costs that one lookup (preload.c's fast path), a watched one goes
 * straight to decode.
 *
 * Called by launch.c on the launching thread, the first time a handle is seen (two threads may
 * classify the same handle at once: names.c publishes the first answer). The runtime is the
 * one the hook handed to the core. A kernel whose name matches a spec but whose parameters do
 * not gets one `unknown_layout` warning and is never decoded.
 *
 * Tested by tests/fakecuda/test_paraminfo.sh and test_layout.sh (under the test double),
 * tests/unit/test_registry.c for the matching itself.
 */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

/* Our queries may leave an error in the runtime (the end of a parameter list is reported as
 * one): the application's own pending error is saved before and handed back after. */
static const char *resolve_name(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info)
{
    if (l->mangled)
        return l->mangled;
    if (info && info->mangled)
        return info->mangled;
    const char *name = NULL;
    if (rt && rt->func_get_name) {
        lg_runtime_in_library++;
        int saved = lg_runtime_save_error(rt);
        if (rt->func_get_name(&name, l->func) != 0)
            name = NULL;
        lg_runtime_restore_error(rt, saved);
        lg_runtime_in_library--;
    }
    return name;
}

/* Parameter sizes from the runtime; -1 when it cannot tell (older runtime, driver missing). */
static int runtime_param_sizes(const lg_runtime_t *rt, const void *func, size_t *sizes, int cap)
{
    if (!rt || !rt->func_get_param_info)
        return -1;
    int n = 0;
    lg_runtime_in_library++;
    int saved = lg_runtime_save_error(rt);
    for (; n < cap; n++) {
        size_t off = 0, sz = 0;
        if (rt->func_get_param_info(func, (size_t)n, &off, &sz) != 0)
            break;
        sizes[n] = sz;
    }
    lg_runtime_restore_error(rt, saved);
    lg_runtime_in_library--;
    return n > 0 ? n : -1;
}

static void debug_kernel(const char *mangled, const lg_spec_t *spec, const size_t *sizes, int n)
{
    char detail[1024], sz[256] = "?";
    size_t o = 0;
    for (int i = 0; i < n && o < sizeof sz; i++)
        o += (size_t)snprintf(sz + o, sizeof sz - o, "%s%zu", i ? "," : "", sizes[i]);
    snprintf(detail, sizeof detail, "symbol=%s spec=%s params=%s", mangled, spec->name, sz);
    lg_report_warning("kernel_seen", detail);
}

/* The spec for `mangled` (NULL: not watched) and the state to cache. */
static const lg_spec_t *find_spec(const lg_runtime_t *rt, const lg_launch_t *l, const char *mangled, int *state)
{
    *state = LG_KSTATE_UNWATCHED;
    if (!mangled || !lg_registry_maybe_watched(mangled)) {
        *state = lg_opaque_classify(mangled);
        return NULL;
    }
    size_t sizes[LG_MAX_PARAMS];
    char why[512] = "";
    int n = runtime_param_sizes(rt, l->func, sizes, LG_MAX_PARAMS);
    const lg_spec_t *spec = lg_registry_find(mangled, n >= 0 ? sizes : NULL, n, why, sizeof why);
    if (spec) {
        *state = LG_KSTATE_WATCHED;
        if (lg_config_values.debug_kernels)
            debug_kernel(mangled, spec, sizes, n > 0 ? n : 0);
        return spec;
    }
    if (why[0]) {
        *state = LG_KSTATE_BAD_LAYOUT;
        char detail[1200];
        snprintf(detail, sizeof detail,
                 "%s: %s; the launch runs unchecked. ---> HINT: add a spec for this build with "
                 "LABELGUARD_KERNELS (see specs/pytorch.conf)",
                 mangled, why);
        lg_report_warning("unknown_layout", detail);
    }
    return NULL;
}

lg_kernel_info_t *lg_classify(const lg_runtime_t *rt, const lg_launch_t *l, lg_kernel_info_t *info)
{
    /* The entry is made here, at the kernel's first launch, and takes its registered name. */
    if (!info || !info->mangled)
        info = lg_names_info_insert(l->func);
    const char *mangled = resolve_name(rt, l, info);
    if (info && mangled && !info->mangled)
        lg_names_set_name(info, mangled);
    if (info && info->mangled)
        mangled = info->mangled;

    int state;
    const lg_spec_t *spec = find_spec(rt, l, mangled, &state);
    if (!info)
        return NULL;
    lg_kernel_facts_t facts = {.dtype = LG_DTYPE_INT64};
    if (spec) {
        char why[512] = "";
        if (lg_decode_dtype(spec, mangled, &facts.dtype, why, sizeof why) != 0) {
            char detail[900];
            snprintf(detail, sizeof detail, "%s: %s; the launch runs unchecked", mangled, why);
            lg_report_warning_once("decode_failed", detail);
            spec = NULL;
            state = LG_KSTATE_BAD_LAYOUT;
        } else if (!lg_demangle_short(mangled, facts.short_name, sizeof facts.short_name)) {
            snprintf(facts.short_name, sizeof facts.short_name, "%s", spec->name);
        }
    }
    lg_names_publish(info, spec, &facts, state);
    return info;
}
