/* arm_dlopen.c: the dlopen wrapper of late arming. labelguard_enable (arm.c) points every
 * object's `dlopen` GOT slot here; the wrapper calls the real dlopen and, when that loaded
 * something, has arm_got.c patch the new objects (lg_arm_got_loaded): `import torch` after enable,
 * CUDA extensions, Triton's generated modules, a second torch library. Only the outermost
 * dlopen of a thread walks (a constructor's nested dlopen is covered by it), and only objects
 * no walk has seen (arm_got.c keeps the list), so each import costs one dl_iterate_phdr.
 *
 * Who calls it: any code of the process that calls dlopen through a patched slot (Python's
 * import machinery, ctypes, torch), on any thread. Never on a launch path.
 *
 * Why the search path is rebuilt here: glibc searches a name without '/' in the DT_RPATH or
 * DT_RUNPATH of the object that called dlopen, found from the return address. Called from here,
 * that object would be us (no RUNPATH), and a library that dlopen's a sibling by name relying
 * on its RUNPATH ($ORIGIN/../nvidia/...: torch's lazily loaded NVRTC, pip CUDA libraries)
 * would no longer find it. So for a caller that has an RPATH or RUNPATH, the wrapper tries the
 * directories glibc would try for that caller, in glibc's order (caller's RPATH when it has no
 * RUNPATH; LD_LIBRARY_PATH; caller's RUNPATH), with $ORIGIN expanded, before the plain call
 * (ld.so.cache, default directories); a name already loaded is left to the plain call, which
 * finds it by name as glibc would. Entries with other $TOKENs are skipped.
 *
 * dlerror: a successful dlopen leaves no error of ours behind (cleared after the walk); a
 * failed one leaves the real dlopen's own error.
 *
 * Tested by tests/unit/test_arm.c (an object dlopen'd after arming is armed; a fixture whose
 * RUNPATH alone finds its sibling still loads it through the wrapper) and end to end by
 * tests/e2e/test_enable_early.sh and tests/torch-fake/test_enable.sh.
 */
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"

typedef void *(*dlopen_fn)(const char *, int);
static void *real_dlopen;  /* what the first patched slot pointed at (glibc's dlopen) */
static __thread int depth; /* this thread's dlopen calls through the wrapper in progress */

/* DT_RPATH / DT_RUNPATH of a loaded object (NULL when absent). */
static void search_paths(const struct link_map *lm, const char **rpath, const char **runpath)
{
    *rpath = *runpath = NULL;
    const char *strtab = NULL;
    ElfW(Addr) rp = 0, rn = 0;
    bool has_rp = false, has_rn = false;
    for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            /* Relocated in place by glibc on x86_64 and aarch64; an offset elsewhere. */
            strtab = (const char *)(d->d_un.d_ptr < lm->l_addr ? lm->l_addr + d->d_un.d_ptr : d->d_un.d_ptr);
        else if (d->d_tag == DT_RPATH)
            rp = d->d_un.d_val, has_rp = true;
        else if (d->d_tag == DT_RUNPATH)
            rn = d->d_un.d_val, has_rn = true;
    }
    if (!strtab)
        return;
    if (has_rp)
        *rpath = strtab + rp;
    if (has_rn)
        *runpath = strtab + rn;
}

/* Tries `file` in each ':'-separated directory of `list` ($ORIGIN: origin) where it exists;
 * the first that loads wins. NULL if none did. */
static void *try_dirs(dlopen_fn real, const char *list, const char *origin, const char *file, int mode)
{
    char path[PATH_MAX];
    while (list && *list) {
        const char *end = strchr(list, ':');
        size_t n = end ? (size_t)(end - list) : strlen(list);
        char dir[PATH_MAX];
        size_t o = 0;
        bool ok = n > 0 && n < sizeof dir;
        for (size_t i = 0; ok && i < n;) {
            if (list[i] == '$') {
                size_t t = strncmp(list + i, "$ORIGIN", 7) == 0 ? 7 : strncmp(list + i, "${ORIGIN}", 9) == 0 ? 9 : 0;
                ok = t && origin && o + strlen(origin) < sizeof dir;
                if (ok) {
                    memcpy(dir + o, origin, strlen(origin));
                    o += strlen(origin);
                    i += t;
                }
            } else if (o + 1 < sizeof dir) {
                dir[o++] = list[i++];
            } else {
                ok = false;
            }
        }
        if (ok) {
            dir[o] = '\0';
            if (snprintf(path, sizeof path, "%s/%s", dir, file) < (int)sizeof path && access(path, F_OK) == 0) {
                void *h = real(path, mode);
                if (h)
                    return h;
            }
        }
        list = end ? end + 1 : NULL;
    }
    return NULL;
}

/* True when `file` exists in a directory of `list` (no $TOKENs: LD_LIBRARY_PATH). */
static bool exists_in(const char *list, const char *file)
{
    char path[PATH_MAX];
    while (list && *list) {
        const char *end = strchr(list, ':');
        int n = end ? (int)(end - list) : (int)strlen(list);
        if (n > 0 && snprintf(path, sizeof path, "%.*s/%s", n, list, file) < (int)sizeof path &&
            access(path, F_OK) == 0)
            return true;
        list = end ? end + 1 : NULL;
    }
    return false;
}

/* dlopen(file, mode) as glibc would do it for `caller`'s object. */
static void *open_for(dlopen_fn real, const void *caller, const char *file, int mode)
{
    if (!file || strchr(file, '/') || (mode & RTLD_NOLOAD))
        return real(file, mode);
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return real(file, mode);
    const char *rpath, *runpath;
    search_paths(lm, &rpath, &runpath);
    bool main_program = !lm->l_name || !lm->l_name[0];
    /* From us, glibc searches the executable's RPATH and LD_LIBRARY_PATH too: only the
     * caller's own entries differ (the executable's RUNPATH applies to itself alone). */
    if (!runpath && (!rpath || main_program))
        return real(file, mode);
    void *h = real(file, mode | RTLD_NOLOAD);
    if (h) { /* loaded already: glibc returns it, whatever the caller's path says */
        void *again = real(file, mode);
        dlclose(h);
        return again;
    }
    char origin[PATH_MAX];
    if (main_program) {
        ssize_t n = readlink("/proc/self/exe", origin, sizeof origin - 1);
        origin[n > 0 ? n : 0] = '\0';
    } else {
        snprintf(origin, sizeof origin, "%s", lm->l_name);
    }
    char *slash = strrchr(origin, '/');
    if (slash)
        *slash = '\0';
    if (!runpath) {
        h = try_dirs(real, rpath, origin, file, mode);
    } else if (!exists_in(getenv("LD_LIBRARY_PATH"), file)) {
        h = try_dirs(real, runpath, origin, file, mode);
    }
    return h ? h : real(file, mode);
}

static void *wrapper(const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    dlopen_fn real = (dlopen_fn)__atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE);
    if (!real)
        real = dlopen; /* our own reference: glibc's */
    depth++;
    void *h = open_for(real, caller, file, mode);
    depth--;
    if (h && depth == 0 && !(mode & RTLD_NOLOAD) && file) {
        lg_arm_got_loaded();
        (void)dlerror(); /* our lookups' errors are not the caller's */
    }
    return h;
}

void lg_arm_dlopen_hook(lg_hook_t *out)
{
    out->name = "dlopen";
    out->replacement = (void *)wrapper;
    out->real = &real_dlopen;
}
