/* arm.c: late arming, in a process that did not preload the library: `labelguard attach PID`
 * (gdb dlopen's liblabelguard.so and calls labelguard_arm()) and the Python API's
 * labelguard_enable() (ctypes loads the library with RTLD_GLOBAL and calls it). There the
 * interposed entry points of preload.c are not first in the symbol lookup order, so objects
 * keep calling libcudart directly. Arming rewrites those objects' GOT slots (R_*_JUMP_SLOT and
 * R_*_GLOB_DAT relocations against a hooked name) to point at our hooks, after storing the
 * function the slot pointed at as the hook's real function. It also redirects every object's
 * `dlopen` slot to arm_dlopen.c's wrapper, which arms the objects each dlopen brings
 * (lg_arm_loaded): torch imported after enable, CUDA extensions, Triton's modules; and every
 * `cuptiSubscribe`/`cuptiSubscribe_v2` slot to cupti_slot.c's wrappers, so that a profiler's
 * subscription reaches the hand-over as under LD_PRELOAD.
 *
 * Arming is all it does: no CUDA or driver call, no CUPTI, no log I/O. The library starts at
 * the first hook, on the application thread that makes it (lg.c), like a preloaded one, and
 * CUPTI is subscribed there only where no interposable runtime exists (cupti_slot.c). So an
 * enable() made before the application's first CUDA call starts no CUDA (a parent that then
 * forks CUDA workers stays fork-safe; the backend is chosen once the application has its
 * context), and gdb's call of labelguard_arm(), made wherever the debugger stopped the job
 * (inside libcuda or malloc, holding their locks), never re-enters the CUDA libraries. What
 * arming finds that the user must hear about (slots it could not write) is said by the start
 * (lg_arm_after_start).
 *
 * Who calls it: gdb (via the CLI), a program through include/labelguard.h, and the dlopen
 * wrapper; any thread, serialised by one mutex, which a dlopen and gdb's call only ever try
 * (trylock): a dlopen that finds it taken leaves a request the holder serves before it lets
 * go, gdb's call is refused (attach again). Idempotent: a slot that already points into
 * our object (a hook, or every slot of a preloaded process) is counted, never rewritten, so a
 * preloaded library is not hooked twice. Not covered: function pointers the program copied
 * out of a GOT before arming, objects loaded by a dlopen reached through dlsym("dlopen") or
 * from libc itself, and (in a process holding two CUDA runtimes) the per-version binding:
 * every slot gets the CUDA 13 copy of the hooks (README: Limits).
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
 * Before arming, labelguard_enable refuses a process whose CUDA context is already dead (a
 * sticky error, e.g. 710 after a device-side assert: nothing can be checked or recovered
 * there; asked only where CUDA has started, i.e. libcuda is loaded) and one that launches
 * kernels through a static runtime CUPTI cannot watch (there, on the application's thread and
 * with its context made, enable starts the library itself: no hook would). labelguard_arm
 * (attach) asks neither (both are calls into the CUDA libraries) and refuses a process that
 * has CUDA but no shared libcudart: only CUPTI could see its launches, and subscribing is no
 * work for a debugger's call.
 *
 * Tests: tests/unit/test_arm.c (a fixture library's JUMP_SLOT and GLOB_DAT slots, lazy and -z
 * now builds; slots already pointing into the patching object; objects loaded after arming,
 * through the dlopen wrapper, with the caller's RUNPATH), tests/e2e/test_attach.sh (gdb attach
 * to a running program under the runtime test double), tests/e2e/test_enable_early.sh (enable
 * before any runtime is loaded, then a CUDA library dlopen'd), tests/torch-fake/test_enable.sh
 * (real torch: enable after and before `import torch`, a library dlopen'd after, a dead
 * context, disable; a fork child of a parent that enabled before CUDA), tests/e2e/
 * test_enable_fork.sh (no CUDA call before the application's first; fork), tests/e2e/
 * test_attach_busy.sh (ten attaches to a loop of launches and syncs on the asynchronous
 * double), tests/torch-fake/test_profiler.sh (torch.profiler after enable). */
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

static void say_failed_slots(void)
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
        if (in_object(&o.v[i], (uintptr_t)&lg_arm_patch))
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

int lg_arm_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects)
{
    return patch_walk(hooks, n_hooks, n_hooks, false, false, n_objects);
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

/* ------------------------------------------------------------------ enable */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static lg_hook_t arm_hooks[80]; /* our CUDA entry points, then the dlopen wrapper */
static int n_arm_hooks, n_cuda_hooks;
static bool armed; /* arm_hooks is complete and the dlopen wrapper arms what loads */

/* Sticky errors: the context is lost, every later call of the process returns the error. */
static bool sticky(int e)
{
    switch (e) {
    case 700: /* cudaErrorIllegalAddress */
    case 702: /* cudaErrorLaunchTimeout */
    case 710: /* cudaErrorAssert */
    case 714: /* cudaErrorHardwareStackError */
    case 715: /* cudaErrorIllegalInstruction */
    case 716: /* cudaErrorMisalignedAddress */
    case 717: /* cudaErrorInvalidAddressSpace */
    case 718: /* cudaErrorInvalidPc */
    case 719: /* cudaErrorLaunchFailure */ return true;
    default: return false;
    }
}

/* True where CUDA has started in this process: the runtime loads libcuda at its first call that
 * needs the driver. Asked without a CUDA call (a loaded object, RTLD_NOLOAD). */
static bool cuda_started(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (cuda)
        dlclose(cuda);
    return cuda != NULL;
}

/* True (why filled) when a loaded runtime reports a sticky error. cudaPeekAtLastError reads
 * it without clearing anything of the application's and without creating a context; it is
 * each libcudart's own, never our hook. Not asked before CUDA has started: no context can be
 * dead then, and the call would be the process's first CUDA call, not the application's. */
static bool context_dead(char *why, size_t cap)
{
    if (!cuda_started())
        return false;
    lg_cudart_t rts[4];
    int n = lg_runtime_cudarts(rts, 4);
    for (int i = 0; i < n; i++) {
        void *h = dlopen(rts[i].path, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        int (*peek)(void) = (int (*)(void))dlsym(h, "cudaPeekAtLastError");
        const char *(*name)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorName");
        const char *(*text)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorString");
        lg_in_library++;
        int e = peek ? peek() : 0;
        char what[256];
        snprintf(what, sizeof what, "%s %d: %s", name ? name(e) : "error", e, text ? text(e) : "");
        lg_in_library--;
        dlclose(h);
        if (sticky(e)) {
            if (why && cap)
                snprintf(why, cap,
                         "the CUDA context of this process is already dead (%s) from an earlier launch, e.g. a "
                         "device-side assert: nothing can be checked in it any more ---> HINT: restart the "
                         "process/kernel and enable labelguard first",
                         what);
            return true;
        }
    }
    return false;
}

/* Kernels launched with no shared libcudart in the process: a CUDA context is current or
 * the primary one is active, through a libcuda someone loaded. Only CUPTI can see those. */
static bool static_runtime_in_use(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!cuda)
        return false;
    int (*state)(int, unsigned *, int *) = (int (*)(int, unsigned *, int *))dlsym(cuda, "cuDevicePrimaryCtxGetState");
    int (*current)(void **) = (int (*)(void **))dlsym(cuda, "cuCtxGetCurrent");
    unsigned flags = 0;
    int active = 0;
    void *ctx = NULL;
    bool in_use = (state && state(0, &flags, &active) == 0 && active) || (current && current(&ctx) == 0 && ctx);
    dlclose(cuda);
    return in_use;
}

/* The hook set, once: our own definitions of the CUDA entry points (counted), then dlopen and
 * CUPTI's subscribe calls (not counted: they launch nothing). */
static int build_hooks(void)
{
    if (n_arm_hooks)
        return n_arm_hooks;
    int n = 0;
    const lg_hook_t *table = lg_preload_hooks(&n);
    int cap = (int)(sizeof arm_hooks / sizeof *arm_hooks) - 3;
    n_cuda_hooks = table ? own_definitions(table, n, arm_hooks, cap) : 0;
    if (n_cuda_hooks == 0)
        return 0;
    lg_arm_dlopen_hook(&arm_hooks[n_cuda_hooks]);
    lg_hook_t cupti[2];
    int n_cupti = lg_cupti_slot_hooks(cupti, 2);
    n_arm_hooks = n_cuda_hooks + 1 + own_definitions(cupti, n_cupti, &arm_hooks[n_cuda_hooks + 1], 2);
    /* Other objects' GOT slots will point into this library: a dlclose of it (ctypes handles
     * can be closed) must never unmap it. Our initial-exec TLS already keeps glibc from
     * unloading it; NODELETE on a NOLOAD open says so explicitly, whatever the TLS model. */
    Dl_info self;
    if (dladdr((void *)&labelguard_enable, &self) && self.dli_fname)
        (void)dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    return n_arm_hooks;
}

/* True when the process binds cudaLaunchKernel to our definition already (LD_PRELOAD): nothing
 * was instantiated behind our back, so graphs need no "armed late" bookkeeping. */
static bool preloaded(void)
{
    Dl_info a, b;
    void *p = dlsym(RTLD_DEFAULT, "cudaLaunchKernel");
    return p && dladdr(p, &a) && dladdr((void *)&labelguard_enable, &b) && a.dli_fbase == b.dli_fbase;
}

/* Graphs instantiated before arming are replayed unseen: graphs.c is told, by the start when
 * arming ran inside a debugger's call (graphs.c takes a lock the stopped job may hold). */
static _Atomic int armed_late_pending;

/* labelguard_enable and labelguard_arm without the lock; *objects: objects with an armed slot.
 * debugger: called by gdb (or the CLI's injector) wherever it stopped the job: no call into
 * the CUDA libraries, CUPTI, the log or another module's lock, only the GOT walk. */
static int enable_locked(char *why, size_t cap, int *objects, bool debugger)
{
    *objects = 0;
    if (!debugger && context_dead(why, cap))
        return -1;
    bool have_runtime = lg_runtime_cudart_handle() != NULL;
    if (!have_runtime && debugger && cuda_started()) {
        if (why && cap)
            snprintf(why, cap,
                     "this process uses CUDA without a shared libcudart (a static runtime, or the driver API alone): "
                     "only CUPTI could see its launches, and attach does not subscribe to CUPTI from inside the "
                     "debugger's call ---> HINT: start the program under `labelguard run` with "
                     "LABELGUARD_HOOKS=cupti, or call labelguard.enable() from the program itself");
        return -1;
    }
    if (!have_runtime && !debugger && static_runtime_in_use()) {
        /* A context without a shared libcudart: a static runtime (or a driver-API program).
         * CUPTI is the only layer that sees its launches, and no hook will ever start the
         * library: start it here, on the application's thread, its context made. */
        if (lg_cfg.hooks != LG_HOOKS_INTERPOSE)
            (void)lg_start_ensure(); /* CUPTI stays off before our constructor: said just below */
        if (!lg_cupti_active()) {
            if (why && cap)
                snprintf(why, cap,
                         "kernels are launched through a CUDA runtime linked statically into the program (no "
                         "libcudart to redirect) and CUPTI cannot subscribe ---> HINT: run it under `labelguard "
                         "run` with a shared runtime (nvcc -cudart shared), or free CUPTI's slot (no profiler) "
                         "and keep LABELGUARD_HOOKS=auto");
            return -1;
        }
    }
    /* Patched under LABELGUARD_HOOKS=cupti too: the hooks then start the library and pass
     * every call straight through, as preloaded ones do. */
    int n = build_hooks();
    bool late = !preloaded();
    /* Everything loaded now, remembered: the dlopen wrapper's walks then visit new objects only. */
    int n_armed = n > 0 ? patch_walk(arm_hooks, n, n_cuda_hooks, false, true, objects) : -1;
    if (n_armed < 0) {
        if (why && cap)
            snprintf(why, cap,
                     "no GOT slot of the CUDA launch functions could be rewritten (mprotect refused, or the "
                     "library's own hooks were not found) ---> HINT: start the program under `labelguard run` "
                     "(LD_PRELOAD) instead");
        return -1;
    }
    if (n_armed > 0 && late) {
        if (debugger)
            atomic_store(&armed_late_pending, 1);
        else
            lg_graphs_armed_late(); /* graphs instantiated before now were not seen */
    }
    __atomic_store_n(&armed, true, __ATOMIC_RELEASE);
    atomic_store(&lg_launch_disabled, 0);
    return n_armed;
}

void lg_arm_after_start(void)
{
    if (atomic_exchange(&armed_late_pending, 0))
        lg_graphs_armed_late();
    say_failed_slots();
}

/* Set by a dlopen whose walk found the lock taken: the holder walks again before it lets go.
 * A dlopen must never wait for the lock: its thread may hold the loader's lock (a constructor's
 * dlopen inside an outer one) that the holder's walk needs for dlsym. */
static _Atomic int rewalk;

/* Takes the lock if free and walks until no dlopen asked for another walk; returns the slots
 * armed. A caller that finds the lock taken leaves its request in `rewalk` for the holder. */
static int walk_requests(void)
{
    int n = 0;
    while (atomic_load(&rewalk)) {
        if (pthread_mutex_trylock(&lock) != 0)
            return n; /* the holder sees the request before it unlocks, or after, in this loop */
        while (atomic_exchange(&rewalk, 0)) {
            int objects = 0, k = patch_walk(arm_hooks, n_arm_hooks, n_cuda_hooks, true, true, &objects);
            n += k > 0 ? k : 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return n;
}

void lg_arm_atfork_child(void)
{
    /* A thread of the parent may have held the lock (an enable, a walk): the child's dlopens
     * would find it taken for good and never arm again. */
    pthread_mutex_init(&lock, NULL);
    atomic_store(&rewalk, 0);
}

int lg_arm_loaded(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
        return 0;
    atomic_store(&rewalk, 1);
    int n = walk_requests();
    if (lg_start_done()) /* an application's dlopen, never a debugger's call */
        say_failed_slots();
    return n;
}

LG_EXPORT int labelguard_enable(char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    pthread_mutex_lock(&lock);
    int objects = 0;
    int n = enable_locked(why, cap, &objects, false);
    pthread_mutex_unlock(&lock);
    walk_requests(); /* dlopens that finished while we held the lock */
    if (lg_start_done())
        say_failed_slots();
    return n;
}

LG_EXPORT int labelguard_disable(void)
{
    atomic_store(&lg_launch_disabled, 1);
    return 0;
}

/* gdb's (or the CLI injector's) call, on whichever thread the debugger stopped, possibly inside
 * libcuda or malloc: the GOT walk and one write(2) of the result, nothing else. The lock is
 * arm.c's own (only enable and the walks take it, never while calling CUDA); a thread stopped
 * holding it is inside a walk, which takes no lock of ours: trylock, and a busy lock is a
 * refusal, never a wait. */
LG_EXPORT int labelguard_arm(void)
{
    char why[512] = "";
    int objects = 0, armed_n = -1;
    if (pthread_mutex_trylock(&lock) == 0) {
        armed_n = enable_locked(why, sizeof why, &objects, true);
        pthread_mutex_unlock(&lock);
    } else {
        snprintf(why, sizeof why, "another thread is arming this process right now ---> HINT: attach again");
    }
    walk_requests(); /* dlopens that finished while we held the lock (trylock: never waits) */
    if (!lg_cfg.quiet) {
        char line[700];
        int len = armed_n >= 0 ? snprintf(line, sizeof line, "labelguard: armed %d launch entries in %d objects\n",
                                          armed_n, objects)
                               : snprintf(line, sizeof line, "labelguard: arming failed: %s\n", why);
        if (len > 0 && write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1) < 0) {
            /* stderr gone: nothing to tell */
        }
    }
    return armed_n;
}
