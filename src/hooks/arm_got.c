/* arm_got.c: late arming's GOT walk (arm.c decides what to arm and when; arm_dlopen.c asks
 * for the objects a dlopen brings). Every loaded object's R_*_JUMP_SLOT and R_*_GLOB_DAT
 * relocations against a hooked name are pointed at the hook, after the function the slot
 * pointed at is stored as the hook's real function; objects are remembered, so a walk after a
 * dlopen visits the new ones only. Also the lock that serialises enable and the walks, and the
 * requests of dlopens that found it taken.
 *
 * Which hook: a runtime's entry point exists once per libcudart version (preload.h); a slot gets
 * the copy bound to the runtime it calls, told by the libcudart its function lives in, else by
 * the version its reference asks for (libcudart.so.12), else, with one runtime loaded, the
 * default copy. A slot that cannot be told, or whose runtime's copy is bound to another
 * function already, is left alone and said once (arm_runtime_unknown): a launch sent into the
 * other runtime fails there (invalid device function) and kills the job.
 *
 * Why it is safe while other threads run: the real function is stored before the slot is
 * rewritten, and a slot is one aligned pointer-sized store, so a concurrent caller sees either
 * the old target or our hook with its real function set. A slot in a read-only page (RELRO,
 * -z now) is written after mprotect(RW) and the page's protection is restored, as read from
 * /proc/self/maps (once per walk); a slot still pointing into its object's PLT (lazy binding,
 * never called) gets its real function as the lazy resolver would bind it, looked up by hand in
 * the objects' own symbol tables (arm_objects.c). The objects are listed first (one
 * dl_iterate_phdr into a fixed table) and patched after it returns. Nothing here allocates,
 * uses stdio or calls the loader otherwise: a walk may run inside a debugger's call, on a
 * thread stopped anywhere.
 *
 * Who calls it: arm.c (labelguard_enable and labelguard_arm, under lg_arm_got_lock or its
 * trylock), arm_dlopen.c's wrapper (lg_arm_got_loaded, any thread, never waits for the lock:
 * its thread may hold the loader's lock that the holder's walk needs), lg.c's fork handler.
 * No CUDA call, no log I/O (a walk may run inside a debugger's call); what failed is said by
 * lg_arm_got_say_failed, from the start or an application's call.
 *
 * Tests: tests/unit/test_arm.c (lg_arm_got_patch on fixture libraries: JUMP_SLOT and GLOB_DAT,
 * lazy and -z now builds, slots already ours, the dlopen wrapper), tests/e2e/test_attach.sh,
 * test_arm_mixed.sh (two runtimes), test_attach_malloc.sh and tests/torch-fake/test_enable.sh
 * end to end.
 */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks/hooks.h"

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT  R_AARCH64_GLOB_DAT
#else
#error "arm_got.c: GOT patching supports x86_64 and aarch64"
#endif

typedef struct {
    const lg_hook_t *hooks;
    const int *majors; /* per hook: the runtime major of its copy (0: none); NULL: all 0 */
    int n_hooks;
    int n_counted;                   /* hooks[0..n_counted) are counted in `armed`; the rest (dlopen) are not */
    const struct dl_phdr_info *self; /* the object that holds this code: skipped */
    int runtimes;                    /* libcudart majors loaded */
    int armed;                       /* counted slots pointing at a replacement after the walk */
    int objects;                     /* objects with at least one such slot */
    int failed;                      /* slots that could not be written */
    int untold;                      /* runtime slots left alone: whose runtime they call is unknown */
} walk_t;

/* Dynamic-section pointers are relocated in place by glibc on x86_64 and aarch64, but not in
 * every loader (and not in the vDSO): an unrelocated value is an offset below the load bias. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static int write_slot(void **slot, void *value)
{
    int prot = lg_arm_objects_prot((uintptr_t)slot);
    if (prot < 0)
        return -1;
    if (prot & PROT_WRITE) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return 0;
    }
    long page_size = sysconf(_SC_PAGESIZE);
    void *page = (void *)((uintptr_t)slot & ~((uintptr_t)page_size - 1));
    if (mprotect(page, (size_t)page_size, prot | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    mprotect(page, (size_t)page_size, prot);
    return 0;
}

static int find_hook(const walk_t *w, const char *name)
{
    for (int i = 0; i < w->n_hooks; i++)
        if (name[0] == w->hooks[i].name[0] && strcmp(name, w->hooks[i].name) == 0)
            return i;
    return -1;
}

/* The copy of hooks[h] bound to runtime `major`; -1 if the set has none. */
static int copy_for(const walk_t *w, int h, int major)
{
    for (int i = h; i < w->n_hooks; i++)
        if (w->majors[i] == major && strcmp(w->hooks[i].name, w->hooks[h].name) == 0)
            return i;
    return -1;
}

/* What the slot of an object that never called `name` (lazy binding) would have been bound to,
 * looked up as the loader would, without it: at the version the reference asks for, in the
 * library that must provide it; with no version, in the object itself, then in load order. */
static void *resolve_lazy(const walk_t *w, const struct dl_phdr_info *info, const char *name, const char *version,
                          const char *file)
{
    if (version && file) {
        const struct dl_phdr_info *o = lg_arm_objects_at(lg_arm_objects_by_soname(file));
        return o ? lg_arm_objects_lookup(o, name, version) : NULL;
    }
    void *p = lg_arm_objects_lookup(info, name, NULL);
    for (int i = 0; !p && lg_arm_objects_at(i); i++)
        if (lg_arm_objects_at(i) != w->self && lg_arm_objects_at(i) != info)
            p = lg_arm_objects_lookup(lg_arm_objects_at(i), name, NULL);
    return p;
}

/* The major of the libcudart the slot's function lives in, or the reference asks for; 0 if
 * neither tells. */
static int major_of(const void *real, const char *file)
{
    int m = lg_arm_objects_cudart_major(lg_arm_objects_find((uintptr_t)real));
    if (m > 0)
        return m;
    const char *so = file && strncmp(file, "libcudart", 9) == 0 ? strstr(file, ".so.") : NULL;
    return so ? atoi(so + 4) : 0;
}

static void patch_relocs(const struct dl_phdr_info *info, walk_t *w, const ElfW(Rela) * rel, size_t n,
                         const ElfW(Sym) * symtab, const char *strtab, int *armed_here)
{
    for (size_t i = 0; i < n; i++) {
        unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
        if (type != JUMP_SLOT && type != GLOB_DAT)
            continue;
        size_t sym = ELF64_R_SYM(rel[i].r_info);
        if (sym == 0)
            continue;
        const char *name = strtab + symtab[sym].st_name;
        int h = find_hook(w, name);
        if (h < 0)
            continue;
        int counted = h < w->n_counted;
        void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
        void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        /* Already ours: a hook (preloaded library, an object that bound to our RTLD_GLOBAL
         * definitions, an earlier walk), whichever version's copy, which is the right one. */
        if (w->self && current && lg_arm_objects_contains(w->self, (uintptr_t)current)) {
            *armed_here += counted;
            continue;
        }
        const char *file = NULL, *version = lg_arm_objects_wanted(info, (uint32_t)sym, &file);
        void *real = current;
        if (!current || lg_arm_objects_contains(info, (uintptr_t)current))
            real = resolve_lazy(w, info, name, version, file);
        if (!real) {
            w->failed++;
            continue;
        }
        if (w->majors && w->majors[h]) {
            /* A runtime's entry point: the copy bound to the runtime the slot calls, so that its
             * launches stay in that libcudart. Told by where the function lives, else by the
             * version the reference asks for, else by there being one runtime only. */
            int major = major_of(real, file);
            int c = major ? copy_for(w, h, major) : -1;
            if (c < 0 && w->runtimes <= 1)
                c = h; /* the default copy, as an unversioned reference gets under LD_PRELOAD */
            void *expected = NULL;
            if (c < 0 || (!__atomic_compare_exchange_n(w->hooks[c].real, &expected, real, false, __ATOMIC_ACQ_REL,
                                                       __ATOMIC_ACQUIRE) &&
                          expected != real)) {
                w->untold++; /* left as it is: a launch in the wrong runtime kills the job */
                continue;
            }
            h = c;
        } else {
            void *expected = NULL;
            __atomic_compare_exchange_n(w->hooks[h].real, &expected, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        }
        if (write_slot(slot, w->hooks[h].replacement) != 0) {
            w->failed++;
            continue;
        }
        *armed_here += counted;
    }
}

static void patch_object(const struct dl_phdr_info *info, walk_t *w)
{
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    /* Our own object calls the real functions through the hooks' `real` pointers; libcudart's
     * internal calls are not the application's launches; the vDSO and the loader import none. */
    if (info == w->self || strncmp(base, "libcudart", 9) == 0 || strncmp(base, "linux-vdso", 10) == 0 ||
        strncmp(base, "linux-gate", 10) == 0 || strncmp(base, "ld-linux", 8) == 0)
        return;

    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return;

    uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltrelsz = 0, relasz = 0;
    ElfW(Sxword) pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_JMPREL: jmprel = dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltrelsz = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel = (ElfW(Sxword))dyn->d_un.d_val; break;
        case DT_RELA: rela = dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        case DT_SYMTAB: symtab = dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = dyn_ptr(info, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    if (!symtab || !strtab)
        return;

    int armed_here = 0;
    if (jmprel && pltrel == DT_RELA)
        patch_relocs(info, w, (const ElfW(Rela) *)jmprel, pltrelsz / sizeof(ElfW(Rela)), (const ElfW(Sym) *)symtab,
                     (const char *)strtab, &armed_here);
    if (rela)
        patch_relocs(info, w, (const ElfW(Rela) *)rela, relasz / sizeof(ElfW(Rela)), (const ElfW(Sym) *)symtab,
                     (const char *)strtab, &armed_here);
    w->armed += armed_here;
    w->objects += armed_here > 0;
}

/* ------------------------------------------------------------------ which objects */

/* An object is the same one while it stays loaded: its load bias and program headers. A full
 * table leaves the rest unmarked: walked again next time, which is harmless (idempotent). */
typedef struct {
    uintptr_t addr;
    const void *phdr;
} seen_t;
static seen_t seen[4096];
static int n_seen;
static unsigned long long seen_subs = ~0ull; /* unloads at the last walk; ~0: none yet */
static unsigned long long seen_adds = ~0ull; /* loads at the last walk */

static bool was_seen(const struct dl_phdr_info *info)
{
    for (int i = 0; i < n_seen; i++)
        if (seen[i].addr == info->dlpi_addr && seen[i].phdr == (const void *)info->dlpi_phdr)
            return true;
    return false;
}

static void mark_seen(const struct dl_phdr_info *info)
{
    if (n_seen < (int)(sizeof seen / sizeof *seen))
        seen[n_seen++] = (seen_t){info->dlpi_addr, (const void *)info->dlpi_phdr};
}

/* The most GOT slots one walk could not write, for the start's arm_incomplete warning; and
 * whether a walk left a runtime's slot alone because it could not tell which runtime it calls. */
static _Atomic int failed_slots;
static _Atomic int failed_said; /* the count the warning last said */
static _Atomic int untold_slots;

void lg_arm_got_say_failed(void)
{
    int untold = atomic_load(&untold_slots);
    if (untold) {
        char detail[320];
        snprintf(detail, sizeof detail,
                 "%d GOT slot(s) of hooked CUDA functions were left unguarded: this process holds more than one CUDA "
                 "runtime and it is not clear which one they call ---> HINT: start the job under `labelguard run` "
                 "(LD_PRELOAD binds each caller to its own runtime)",
                 untold);
        lg_report_warning_once("arm_runtime_unknown", detail);
    }
    int n = atomic_load(&failed_slots);
    if (n <= atomic_load(&failed_said) || atomic_exchange(&failed_said, n) >= n)
        return;
    char detail[160];
    snprintf(detail, sizeof detail,
             "%d GOT slot(s) of hooked CUDA functions could not be "
             "rewritten (no real function or mprotect refused)",
             n);
    lg_report_warning_once("arm_incomplete", detail);
}

static void raise_to(_Atomic int *at, int v)
{
    int prev = atomic_load(at);
    while (prev < v && !atomic_compare_exchange_weak(at, &prev, v)) {
    }
}

/* Patches every loaded object (only_new: those not patched by an earlier walk that marked
 * them; after any unload, all of them again, since a new object may have taken an old one's
 * address). mark: remember the objects patched. The caller serialises; everything is static
 * (arm_objects.c's tables, `seen`): no allocation, no stdio, no loader call but the listing. */
static int patch_walk(const lg_hook_t *hooks, const int *majors, int n_hooks, int n_counted, bool only_new, bool mark,
                      int *n_objects)
{
    if (n_objects)
        *n_objects = 0;
    if (!hooks || n_hooks <= 0)
        return -1;
    unsigned long long adds = 0, subs = 0;
    bool cut = false;
    int n = lg_arm_objects_list(&adds, &subs, &cut);
    /* A dlopen of something already loaded (most of Python's, ctypes' repeats) loads nothing. */
    if (only_new && mark && adds == seen_adds && subs == seen_subs)
        return 0;
    lg_arm_objects_forget_maps(); /* read again at the first slot to write */
    walk_t w = {.hooks = hooks, .majors = majors, .n_hooks = n_hooks, .n_counted = n_counted, .failed = cut};
    w.self = lg_arm_objects_at(lg_arm_objects_find((uintptr_t)&lg_arm_got_patch));
    w.runtimes = lg_arm_objects_majors(NULL);
    if (mark && (!only_new || subs != seen_subs)) {
        n_seen = 0;
        seen_subs = subs;
    }
    for (int i = 0; i < n; i++) {
        const struct dl_phdr_info *info = lg_arm_objects_at(i);
        if (only_new && was_seen(info))
            continue;
        patch_object(info, &w);
        if (mark)
            mark_seen(info);
    }
    if (mark)
        seen_adds = adds;
    if (n_objects)
        *n_objects = w.objects;
    raise_to(&untold_slots, w.untold);
    /* A slot left unpatched would let some launches bypass the check: report it as failure
     * only when nothing was armed at all, else arm what we can and say what failed (the
     * start says it: a walk may run inside a debugger's call). */
    if (w.failed) {
        raise_to(&failed_slots, w.failed);
        if (w.armed == 0)
            return -1;
    }
    return w.armed;
}

int lg_arm_got_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects)
{
    return patch_walk(hooks, NULL, n_hooks, n_hooks, false, false, n_objects);
}

/* ------------------------------------------------------------------ the lock and the walks */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The hook set the walks a dlopen asks for use: arm.c's, complete before `armed` is set. */
static const lg_hook_t *walk_hooks;
static const int *walk_majors;
static int n_walk_hooks, n_walk_counted;
static bool armed; /* the hook set is complete and the dlopen wrapper arms what loads */

void lg_arm_got_lock(void) { pthread_mutex_lock(&lock); }
bool lg_arm_got_trylock(void) { return pthread_mutex_trylock(&lock) == 0; }
void lg_arm_got_unlock(void) { pthread_mutex_unlock(&lock); }

int lg_arm_got_walk_all(const lg_hook_t *hooks, const int *majors, int n_hooks, int n_counted, int *n_objects)
{
    walk_hooks = hooks;
    walk_majors = majors;
    n_walk_hooks = n_hooks;
    n_walk_counted = n_counted;
    return patch_walk(hooks, majors, n_hooks, n_counted, false, true, n_objects);
}

void lg_arm_got_armed(void) { __atomic_store_n(&armed, true, __ATOMIC_RELEASE); }

/* Set by a dlopen whose walk found the lock taken: the holder walks again before it lets go.
 * A dlopen must never wait for the lock: its thread may hold the loader's lock (a constructor's
 * dlopen inside an outer one) that the holder's walk needs for dlsym. */
static _Atomic int rewalk;

/* Takes the lock if free and walks until no dlopen asked for another walk; returns the slots
 * armed. A caller that finds the lock taken leaves its request in `rewalk` for the holder. */
int lg_arm_got_requests(void)
{
    int n = 0;
    while (atomic_load(&rewalk)) {
        if (pthread_mutex_trylock(&lock) != 0)
            return n; /* the holder sees the request before it unlocks, or after, in this loop */
        while (atomic_exchange(&rewalk, 0)) {
            int objects = 0, k = patch_walk(walk_hooks, walk_majors, n_walk_hooks, n_walk_counted, true, true, &objects);
            n += k > 0 ? k : 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return n;
}

void lg_arm_got_atfork_child(void)
{
    /* A thread of the parent may have held the lock (an enable, a walk): the child's dlopens
     * would find it taken for good and never arm again. */
    pthread_mutex_init(&lock, NULL);
    atomic_store(&rewalk, 0);
}

int lg_arm_got_loaded(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
        return 0;
    atomic_store(&rewalk, 1);
    int n = lg_arm_got_requests();
    if (lg_start_done()) /* an application's dlopen, never a debugger's call */
        lg_arm_got_say_failed();
    return n;
}
