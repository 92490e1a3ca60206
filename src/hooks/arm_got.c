/* arm_got.c: late arming's GOT walk (arm.c decides what to arm and when; arm_dlopen.c asks
 * for the objects a dlopen brings). Every loaded object's R_*_JUMP_SLOT and R_*_GLOB_DAT
 * relocations against a hooked name are pointed at the hook, after the function the slot
 * pointed at is stored as the hook's real function; objects are remembered, so a walk after a
 * dlopen visits the new ones only. Also the lock that serialises enable and the walks, and the
 * requests of dlopens that found it taken.
 *
 * Why it is safe while other threads run: the real function is stored before the slot is
 * rewritten, and a slot is one aligned pointer-sized store, so a concurrent caller sees either
 * the old target or our hook with its real function set. A slot in a read-only page (RELRO,
 * -z now) is written after mprotect(RW) and the page's protection is restored, as read from
 * /proc/self/maps; a slot still pointing into its object's PLT (lazy binding, never called) gets
 * its real function from dlsym in that object's own lookup scope, i.e. what the lazy resolver
 * would have bound. The objects are listed first and patched after dl_iterate_phdr returns:
 * that dlsym needs the loader's lock, which another thread's dlopen may hold while it waits
 * for the lock dl_iterate_phdr holds.
 *
 * Who calls it: arm.c (labelguard_enable and labelguard_arm, under lg_arm_got_lock or its
 * trylock), arm_dlopen.c's wrapper (lg_arm_got_loaded, any thread, never waits for the lock:
 * its thread may hold the loader's lock that the holder's walk needs), lg.c's fork handler.
 * No CUDA call, no log I/O (a walk may run inside a debugger's call); what failed is said by
 * lg_arm_got_say_failed, from the start or an application's call.
 *
 * Tests: tests/unit/test_arm.c (lg_arm_got_patch on fixture libraries: JUMP_SLOT and GLOB_DAT,
 * lazy and -z now builds, slots already ours, the dlopen wrapper), tests/e2e/test_attach.sh
 * and tests/torch-fake/test_enable.sh end to end.
 */
#include <dlfcn.h>
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
    int n_hooks;
    int n_counted;                   /* hooks[0..n_counted) are counted in `armed`; the rest (dlopen) are not */
    const struct dl_phdr_info *self; /* the object that holds this code: skipped */
    int armed;                       /* counted slots pointing at a replacement after the walk */
    int objects;                     /* objects with at least one such slot */
    int failed;                      /* slots that could not be written */
} walk_t;

static bool in_object(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (addr >= lo && addr < lo + ph->p_memsz)
            return true;
    }
    return false;
}

/* The protection (PROT_*) of the mapping that holds addr, from /proc/self/maps; -1 if unknown. */
static int prot_of(uintptr_t addr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[512];
    int prot = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
            continue;
        if (addr < lo || addr >= hi)
            continue;
        prot =
            (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
        break;
    }
    fclose(f);
    return prot;
}

static int write_slot(void **slot, void *value)
{
    int prot = prot_of((uintptr_t)slot);
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

/* What the slot of an object that never called `name` (lazy binding) would have been bound to:
 * dlsym in the object's own scope (itself, then its dependencies), else in libcudart. */
static void *resolve_lazy(const struct dl_phdr_info *info, const lg_hook_t *hook)
{
    void *h = dlopen(info->dlpi_name[0] ? info->dlpi_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
    void *p = h ? dlsym(h, hook->name) : NULL;
    if (h)
        dlclose(h);
    if (p && p != hook->replacement)
        return p;
    void *rt = lg_runtime_cudart_handle();
    p = rt ? dlsym(rt, hook->name) : NULL;
    return p != hook->replacement ? p : NULL;
}

/* Dynamic-section pointers are relocated in place by glibc on x86_64 and aarch64, but not in
 * every loader (and not in the vDSO): an unrelocated value is an offset below the load bias. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
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
        int h = find_hook(w, strtab + symtab[sym].st_name);
        if (h < 0)
            continue;
        const lg_hook_t *hook = &w->hooks[h];
        int counted = h < w->n_counted;
        void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
        void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        /* Already ours: this hook, or (preloaded library, or an object that bound to our
         * RTLD_GLOBAL definitions) another version's copy of it, which is the right one. */
        if (current == hook->replacement || (w->self && current && in_object(w->self, (uintptr_t)current))) {
            *armed_here += counted;
            continue;
        }
        void *real = current;
        if (in_object(info, (uintptr_t)current) || !current)
            real = resolve_lazy(info, hook);
        if (!real) {
            w->failed++;
            continue;
        }
        void *expected = NULL;
        __atomic_compare_exchange_n(hook->real, &expected, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        if (write_slot(slot, hook->replacement) != 0) {
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

/* The loaded objects, copied out of dl_iterate_phdr (their names and headers stay mapped while
 * they are loaded), and which of them the incremental walk has armed already. */
typedef struct {
    struct dl_phdr_info *v;
    int n, cap;
    unsigned long long adds, subs; /* the loader's load and unload counts at the listing */
} objects_t;

static int list_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    objects_t *o = data;
    o->adds = info->dlpi_adds;
    o->subs = info->dlpi_subs;
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 256;
        void *p = realloc(o->v, (size_t)cap * sizeof *o->v);
        if (!p)
            return 1;
        o->v = p;
        o->cap = cap;
    }
    o->v[o->n] = *info;
    o->n++;
    return 0;
}

/* An object is the same one while it stays loaded: its load bias and program headers. */
typedef struct {
    uintptr_t addr;
    const void *phdr;
} seen_t;
static seen_t *seen;
static int n_seen, cap_seen;
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
    if (n_seen == cap_seen) {
        int cap = cap_seen ? cap_seen * 2 : 256;
        void *p = realloc(seen, (size_t)cap * sizeof *seen);
        if (!p)
            return; /* walked again next time: patching is idempotent */
        seen = p;
        cap_seen = cap;
    }
    seen[n_seen++] = (seen_t){info->dlpi_addr, (const void *)info->dlpi_phdr};
}

/* The most GOT slots one walk could not write, for the start's arm_incomplete warning. */
static _Atomic int failed_slots;
static _Atomic int failed_said; /* the count the warning last said */

void lg_arm_got_say_failed(void)
{
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

/* Patches every loaded object (only_new: those not patched by an earlier walk that marked
 * them; after any unload, all of them again, since a new object may have taken an old one's
 * address). mark: remember the objects patched. The caller serialises. */
static int patch_walk(const lg_hook_t *hooks, int n_hooks, int n_counted, bool only_new, bool mark, int *n_objects)
{
    if (n_objects)
        *n_objects = 0;
    if (!hooks || n_hooks <= 0)
        return -1;
    objects_t o = {0};
    dl_iterate_phdr(list_object, &o);
    /* A dlopen of something already loaded (most of Python's, ctypes' repeats) loads nothing. */
    if (only_new && mark && o.adds == seen_adds && o.subs == seen_subs) {
        free(o.v);
        return 0;
    }
    walk_t w = {.hooks = hooks, .n_hooks = n_hooks, .n_counted = n_counted};
    for (int i = 0; i < o.n; i++)
        if (in_object(&o.v[i], (uintptr_t)&lg_arm_got_patch))
            w.self = &o.v[i];
    if (mark && (!only_new || o.subs != seen_subs)) {
        n_seen = 0;
        seen_subs = o.subs;
    }
    for (int i = 0; i < o.n; i++) {
        if (only_new && was_seen(&o.v[i]))
            continue;
        patch_object(&o.v[i], &w);
        if (mark)
            mark_seen(&o.v[i]);
    }
    if (mark)
        seen_adds = o.adds;
    free(o.v);
    if (n_objects)
        *n_objects = w.objects;
    /* A slot left unpatched would let some launches bypass the check: report it as failure
     * only when nothing was armed at all, else arm what we can and say what failed (the
     * start says it: a walk may run inside a debugger's call). */
    if (w.failed) {
        int prev = atomic_load(&failed_slots);
        while (prev < w.failed && !atomic_compare_exchange_weak(&failed_slots, &prev, w.failed)) {
        }
        if (w.armed == 0)
            return -1;
    }
    return w.armed;
}

int lg_arm_got_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects)
{
    return patch_walk(hooks, n_hooks, n_hooks, false, false, n_objects);
}

/* ------------------------------------------------------------------ the lock and the walks */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The hook set the walks a dlopen asks for use: arm.c's, complete before `armed` is set. */
static const lg_hook_t *walk_hooks;
static int n_walk_hooks, n_walk_counted;
static bool armed; /* the hook set is complete and the dlopen wrapper arms what loads */

void lg_arm_got_lock(void) { pthread_mutex_lock(&lock); }
bool lg_arm_got_trylock(void) { return pthread_mutex_trylock(&lock) == 0; }
void lg_arm_got_unlock(void) { pthread_mutex_unlock(&lock); }

int lg_arm_got_walk_all(const lg_hook_t *hooks, int n_hooks, int n_counted, int *n_objects)
{
    walk_hooks = hooks;
    n_walk_hooks = n_hooks;
    n_walk_counted = n_counted;
    return patch_walk(hooks, n_hooks, n_counted, false, true, n_objects);
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
            int objects = 0, k = patch_walk(walk_hooks, n_walk_hooks, n_walk_counted, true, true, &objects);
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
