/* stack.c: the native backtrace of a bad launch, captured as raw return addresses at the
 * launch (cheap) and turned into text only when the event is reported (STYLE.md: record
 * compactly, interpret later).
 *
 * Capture: LLVM libunwind's local unwinder (unw_step), linked into the library statically with
 * its symbols hidden. Not glibc's backtrace(), which dlopens libgcc_s on first use, from inside
 * a launch hook; and never a shared libunwind, whose exported _Unwind_* would take over the
 * host's C++ exceptions (bench/throw_loop.cpp measures that they do not get slower).
 * Runs on the launching thread, only for watched launches with bad labels.
 * Symbolize: dladdr per frame -> "module+0xoffset (function+0xoff)" (the file's .symtab when
 * the dynamic symbols do not name the frame), C++ names demangled by
 * demangle.c; frames inside the module that holds this code (liblabelguard.so) and inside
 * sanitizer runtimes (SANITIZER= test builds) are dropped, so the first line is the caller's. Report path only (takes the loader lock, may allocate).
 *
 * Tested by tests/unit/test_stack.c.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libunwind.h> /* LLVM's (-idirafter /usr/include/libunwind), static, hidden */

#include "base/base.h"

/* Weak: the stack unit test links without demangle.o (the archive does not pull a member for a
 * weak reference) and then prints mangled names; the library links every object. */
#pragma weak lg_demangle_full

/* libunwind keeps its unwind-info cache under a pthread rwlock that knows nothing of fork: a
 * child forked while another thread was unwinding would inherit it held and hang at its own
 * first capture (tests/e2e/test_fork.sh, fork storm). So captures hold capture_lock, and a
 * fork takes it first (lg_stack_atfork_*, from lg.c's handlers): no thread is inside libunwind
 * when the child is made. */
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

void lg_stack_capture(lg_native_stack_t *s)
{
    s->n = 0;
    unw_context_t ctx;
    unw_cursor_t cur;
    pthread_mutex_lock(&capture_lock);
    lg_forkpoint(LG_FORKPOINT_STACK);
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cur, &ctx) == 0) {
        do {
            unw_word_t ip = 0;
            if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
                break;
            s->ips[s->n++] = (void *)(uintptr_t)ip;
        } while (s->n < LG_MAX_FRAMES && unw_step(&cur) > 0);
    }
    pthread_mutex_unlock(&capture_lock);
}

void lg_stack_atfork_prepare(void) { pthread_mutex_lock(&capture_lock); }
void lg_stack_atfork_parent(void) { pthread_mutex_unlock(&capture_lock); }
void lg_stack_atfork_child(void) { pthread_mutex_init(&capture_lock, NULL); }

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

/* dladdr sees only the dynamic symbol table; executables built without -rdynamic (and
 * static functions everywhere) are named only in .symtab. Reads it from the file, mapped
 * read-only, checking every offset against the file size. */
bool lg_stack_symbol_from_file(const char *path, const void *base, const void *ip, char *name, size_t len,
                               uintptr_t *off)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return false;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return false;
    bool found = false;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
        (size_t)eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
        goto out;
    /* Symbol values are link-time addresses: relative to the load base for a shared object or
     * PIE, absolute for a fixed-address executable. */
    uintptr_t addr = eh->e_type == ET_DYN ? (uintptr_t)ip - (uintptr_t)base : (uintptr_t)ip;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(map + eh->e_shoff);
    uintptr_t best = 0;
    const char *best_name = NULL;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || strs->sh_offset > size ||
            strs->sh_size > size - strs->sh_offset)
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(map + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *strtab = (const char *)map + strs->sh_offset;
        for (size_t k = 0; k < n; k++) {
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || sym[k].st_shndx == SHN_UNDEF || sym[k].st_value > addr)
                continue;
            if (sym[k].st_size && addr >= sym[k].st_value + sym[k].st_size)
                continue;
            if (sym[k].st_name >= strs->sh_size || (best_name && sym[k].st_value < best))
                continue;
            /* The name must end inside the string table. */
            if (!memchr(strtab + sym[k].st_name, '\0', strs->sh_size - sym[k].st_name))
                continue;
            best = sym[k].st_value;
            best_name = strtab + sym[k].st_name;
        }
    }
    if (best_name && best_name[0]) {
        snprintf(name, len, "%s", best_name);
        *off = addr - best;
        found = true;
    }
out:
    munmap((void *)map, size);
    return found;
}

/* The file behind a module: dladdr's name, or /proc/self/exe for the main program, whose name
 * dladdr gives as argv[0] (relative, or empty). */
static const char *module_file(const Dl_info *info)
{
    if (info->dli_fname && info->dli_fname[0] == '/')
        return info->dli_fname;
    const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    Dl_info main_info;
    if (phdr && dladdr(phdr, &main_info) && main_info.dli_fbase == info->dli_fbase)
        return "/proc/self/exe";
    return info->dli_fname;
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
        } else {
            char name[200];
            uintptr_t foff;
            const char *file = module_file(&info);
            if (file && lg_stack_symbol_from_file(file, info.dli_fbase, (void *)look, name, sizeof(name), &foff)) {
                char *dem = NULL;
                if (lg_demangle_full && name[0] == '_' && name[1] == 'Z')
                    dem = lg_demangle_full(name);
                snprintf(lines[out++], 256, "%s+0x%lx (%s+0x%lx)", mod, off, dem ? dem : name,
                         (unsigned long)(foff + (ip - look)));
                free(dem);
            } else
                snprintf(lines[out++], 256, "%s+0x%lx", mod, off);
        }
    }
    return out;
}
