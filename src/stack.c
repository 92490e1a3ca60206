/* stack.c: the native backtrace of a bad launch, captured as raw return addresses at the
 * launch (cheap) and turned into text only when the event is reported (STYLE.md: record
 * compactly, interpret later).
 *
 * Capture: glibc backtrace(), which uses libgcc_s's unwinder (loaded by glibc on first use),
 * never libunwind (linking it slows every C++ exception in the host: notes/feasibility.md).
 * Runs on the launching thread, only for watched launches with bad labels.
 * Symbolize: dladdr per frame -> "module+0xoffset (function+0xoff)", C++ names demangled by
 * demangle.c; frames inside the module that holds this code (liblabelguard.so) and inside
 * sanitizer runtimes (SANITIZER= test builds) are dropped, so the first line is the caller's. Report path only (takes the loader lock, may allocate).
 *
 * Tested by tests/unit/test_stack.c.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Weak: the stack unit test links without demangle.o (the archive does not pull a member for a
 * weak reference) and then prints mangled names; the library links every object. */
#pragma weak lg_demangle_full

void lg_stack_capture(lg_native_stack_t *s)
{
    int n = backtrace(s->ips, LG_MAX_FRAMES);
    s->n = n > 0 ? n : 0;
}

/* Base address of the object this code is linked into. */
static void *own_base(void)
{
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&lg_stack_capture, &info) && info.dli_fbase)
        return info.dli_fbase;
    return NULL;
}

static const char *base_name(const char *path)
{
    if (!path || !*path)
        return "?";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int lg_stack_symbolize(const lg_native_stack_t *s, char (*lines)[256], int max)
{
    void *self = own_base();
    int out = 0;
    for (int i = 0; i < s->n && out < max; i++) {
        uintptr_t ip = (uintptr_t)s->ips[i];
        if (ip == 0)
            continue;
        /* A return address points after the call; look up the call itself, which matters when
         * the call is a function's last instruction (noreturn callees, tail positions). */
        uintptr_t look = i > 0 ? ip - 1 : ip;
        Dl_info info;
        memset(&info, 0, sizeof(info));
        if (!dladdr((void *)look, &info) || !info.dli_fbase) {
            snprintf(lines[out++], 256, "?+0x%lx", (unsigned long)ip);
            continue;
        }
        if (self && info.dli_fbase == self)
            continue;
        const char *mod = base_name(info.dli_fname);
        /* Sanitizer runtimes intercept backtrace() and other calls: tool frames, not the user's. */
        if (!strncmp(mod, "libasan.", 8) || !strncmp(mod, "libtsan.", 8) || !strncmp(mod, "libubsan.", 9))
            continue;
        unsigned long off = (unsigned long)(ip - (uintptr_t)info.dli_fbase);
        if (info.dli_sname && info.dli_saddr) {
            char *dem = NULL;
            if (lg_demangle_full && info.dli_sname[0] == '_' && info.dli_sname[1] == 'Z')
                dem = lg_demangle_full(info.dli_sname);
            snprintf(lines[out++], 256, "%s+0x%lx (%s+0x%lx)", mod, off, dem ? dem : info.dli_sname,
                     (unsigned long)(ip - (uintptr_t)info.dli_saddr));
            free(dem);
        } else
            snprintf(lines[out++], 256, "%s+0x%lx", mod, off);
    }
    return out;
}
