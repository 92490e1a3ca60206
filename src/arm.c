/* arm.c: late arming, for `labelguard attach PID`. labelguard_arm() is called in a process that
 * did not preload the library: gdb dlopen's liblabelguard.so into it and calls this function.
 * There the interposed entry points of preload.c are not in the symbol lookup order, so every
 * object already loaded keeps calling libcudart directly. Arming rewrites those objects'
 * GOT slots (R_*_JUMP_SLOT and R_*_GLOB_DAT relocations against a hooked name) to point at our
 * hooks, after storing the function the slot pointed at as the hook's real function, and starts
 * CUPTI (if LABELGUARD_HOOKS allows it) for what the GOT does not show.
 *
 * Who calls it: gdb (via the CLI), or a program through include/labelguard.h; any thread,
 * serialised by a mutex. Idempotent: a slot that already points at our hook is counted, not
 * rewritten. Not covered: objects dlopen'd after arming (call labelguard_arm() again) and
 * function pointers the program copied out of a GOT before arming.
 *
 * Why it is safe while other threads run: the real function is stored before the slot is
 * rewritten, and a slot is one aligned pointer-sized store, so a concurrent caller sees either
 * the old target or our hook with its real function set. A slot in a read-only page (RELRO,
 * -z now) is written after mprotect(RW) and the page's protection is restored, as read from
 * /proc/self/maps; a slot still pointing into its object's PLT (lazy binding, never called) gets
 * its real function from dlsym in that object's own lookup scope, i.e. what the lazy resolver
 * would have bound.
 *
 * Tests: tests/unit/test_arm.c (redirects a small fixture library's JUMP_SLOT and GLOB_DAT slots,
 * lazy and -z now builds), tests/e2e/test_attach.sh (gdb attach to a running program under the
 * runtime test double; a bad label launched after arming is caught). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#if __has_include("labelguard.h")
#include "labelguard.h" /* declares labelguard_arm: checked against the definition */
#endif

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT  R_AARCH64_GLOB_DAT
#else
#error "arm.c: GOT patching supports x86_64 and aarch64"
#endif

typedef struct {
    const lg_hook_t *hooks;
    int n_hooks;
    uintptr_t self; /* an address inside the object that holds this code: skipped */
    int armed;      /* slots pointing at a replacement after the walk */
    int objects;    /* objects with at least one such slot */
    int failed;     /* slots that could not be written */
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

static const lg_hook_t *find_hook(const walk_t *w, const char *name)
{
    for (int i = 0; i < w->n_hooks; i++)
        if (name[0] == w->hooks[i].name[0] && strcmp(name, w->hooks[i].name) == 0)
            return &w->hooks[i];
    return NULL;
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
        const lg_hook_t *hook = find_hook(w, strtab + symtab[sym].st_name);
        if (!hook)
            continue;
        void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
        void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (current == hook->replacement) {
            (*armed_here)++;
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
        (*armed_here)++;
    }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *data)
{
    walk_t *w = data;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    /* Our own object calls the real functions through the hooks' `real` pointers; libcudart's
     * internal calls are not the application's launches; the vDSO and the loader import none. */
    if (in_object(info, w->self) || strncmp(base, "libcudart", 9) == 0 || strncmp(base, "linux-vdso", 10) == 0 ||
        strncmp(base, "linux-gate", 10) == 0 || strncmp(base, "ld-linux", 8) == 0)
        return 0;

    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;

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
        return 0;

    int armed_here = 0;
    if (jmprel && pltrel == DT_RELA)
        patch_relocs(info, w, (const ElfW(Rela) *)jmprel, pltrelsz / sizeof(ElfW(Rela)), (const ElfW(Sym) *)symtab,
                     (const char *)strtab, &armed_here);
    if (rela)
        patch_relocs(info, w, (const ElfW(Rela) *)rela, relasz / sizeof(ElfW(Rela)), (const ElfW(Sym) *)symtab,
                     (const char *)strtab, &armed_here);
    w->armed += armed_here;
    w->objects += armed_here > 0;
    return 0;
}

int lg_arm_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects)
{
    walk_t w = {.hooks = hooks, .n_hooks = n_hooks, .self = (uintptr_t)&lg_arm_patch};
    if (n_objects)
        *n_objects = 0;
    if (!hooks || n_hooks <= 0)
        return -1;
    dl_iterate_phdr(patch_object, &w);
    if (n_objects)
        *n_objects = w.objects;
    /* A slot left unpatched would let some launches bypass the check: report it as failure
     * only when nothing was armed at all, else arm what we can and say what failed. */
    if (w.failed) {
        char detail[160];
        snprintf(detail, sizeof detail,
                 "%d GOT slot(s) of hooked CUDA functions could not be "
                 "rewritten (no real function or mprotect refused)",
                 w.failed);
        lg_report_warning_once("arm_incomplete", detail);
        if (w.armed == 0)
            return -1;
    }
    return w.armed;
}

/* Copies the hook table with each replacement set to the definition inside our own object.
 * In a library dlopen'd into a running process, `(void *)cudaLaunchKernel` taken inside it binds
 * like any reference to an exported name: global scope first, i.e. to libcudart's definition,
 * and patching a GOT slot with that would arm nothing. dlsym on our own handle searches our
 * object first. Returns the count copied (hooks not found in our object are left out). */
static int own_definitions(const lg_hook_t *in, int n, lg_hook_t *out, int cap)
{
    Dl_info self;
    if (!dladdr((void *)&labelguard_arm, &self) || !self.dli_fname)
        return 0;
    void *h = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    int k = 0;
    for (int i = 0; i < n && k < cap; i++) {
        Dl_info where;
        void *p = dlsym(h, in[i].name);
        if (!p || !dladdr(p, &where) || where.dli_fbase != self.dli_fbase)
            continue;
        out[k] = in[i];
        out[k++].replacement = p;
    }
    dlclose(h);
    return k;
}

LG_EXPORT int labelguard_arm(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    lg_ensure_started_for_attach();
    if (lg_cfg.hooks != LG_HOOKS_INTERPOSE)
        lg_cupti_start();
    int armed = 0, objects = 0;
    if (lg_cfg.hooks != LG_HOOKS_CUPTI) {
        int n = 0;
        const lg_hook_t *table = lg_preload_hooks(&n);
        lg_hook_t hooks[64];
        n = table ? own_definitions(table, n, hooks, 64) : 0;
        armed = lg_arm_patch(hooks, n, &objects);
        if (armed > 0)
            lg_graphs_armed_late(); /* graphs instantiated before now were not seen */
    }
    if (!lg_cfg.quiet) {
        char line[160];
        int len = armed >= 0
                      ? snprintf(line, sizeof line, "labelguard: armed %d launch entries in %d objects%s\n", armed,
                                 objects, lg_cupti_active() ? " (and CUPTI)" : "")
                      : snprintf(line, sizeof line, "labelguard: arming failed: no GOT slot could be rewritten\n");
        if (len > 0 && write(2, line, (size_t)len) < 0) { /* stderr gone: nothing to tell */
        }
    }
    pthread_mutex_unlock(&lock);
    return armed;
}
