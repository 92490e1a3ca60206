/* arm_objects.c: what late arming knows about the loaded objects, found without the loader's
 * help: the list of objects (one dl_iterate_phdr into a fixed table), which of them is a
 * libcudart and of which major, a symbol's definition in an object (its own hash table and
 * version definitions, as the loader would look it up), the version a reference asks for
 * (its object's version needs), and the protection of a page (/proc/self/maps, read once per
 * walk with open/read into a fixed table).
 *
 * Why by hand: arming runs inside a debugger's call (labelguard attach), on a thread stopped
 * wherever the job was: there it may not allocate, use stdio, or enter the loader (dlopen,
 * dlsym, dladdr take its lock, and a failed lookup allocates its error). Everything here lives
 * in static storage, read by the caller under arm_got.c's lock; the one loader call, the walk,
 * runs under runtime.c's loader lock, so a fork never copies it half done.
 *
 * Who calls it: arm_got.c (the walks) and arm.c (our own definitions, what is loaded), under
 * arm_got.c's lock. Tested through them: tests/unit/test_arm.c (lazy slots resolved in the
 * object's dependency, -z now pages) and tests/e2e/test_arm_mixed.sh (two runtimes' slots).
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks/hooks.h"

#define MAX_OBJECTS 4096
#define MAX_MAPS 16384

static struct dl_phdr_info objects[MAX_OBJECTS];
static int n_objects;
static bool truncated;
static unsigned long long list_adds, list_subs;

static int list_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    list_adds = info->dlpi_adds;
    list_subs = info->dlpi_subs;
    if (n_objects == MAX_OBJECTS) {
        truncated = true;
        return 1;
    }
    objects[n_objects++] = *info;
    return 0;
}

int lg_arm_objects_list(unsigned long long *adds, unsigned long long *subs, bool *cut)
{
    n_objects = 0;
    truncated = false;
    lg_runtime_loader_lock();
    dl_iterate_phdr(list_one, NULL);
    lg_runtime_loader_unlock();
    if (adds)
        *adds = list_adds;
    if (subs)
        *subs = list_subs;
    if (cut)
        *cut = truncated;
    return n_objects;
}

const struct dl_phdr_info *lg_arm_objects_at(int i) { return i >= 0 && i < n_objects ? &objects[i] : NULL; }

bool lg_arm_objects_contains(const struct dl_phdr_info *info, uintptr_t addr)
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

int lg_arm_objects_find(uintptr_t addr)
{
    for (int i = 0; i < n_objects; i++)
        if (lg_arm_objects_contains(&objects[i], addr))
            return i;
    return -1;
}

/* ------------------------------------------------------------------ dynamic sections */

typedef struct {
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu_hash, *hash;
    const ElfW(Half) *versym;
    uintptr_t verdef, verneed;
    size_t verdefnum, verneednum;
    const char *soname;
} dyn_t;

/* glibc relocates some dynamic-section pointers in place (symtab, strtab, hashes, versym) and
 * leaves others (verdef, verneed) as offsets: an offset is below the load bias. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static bool read_dyn(const struct dl_phdr_info *info, dyn_t *d)
{
    memset(d, 0, sizeof *d);
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return false;
    ElfW(Addr) soname = 0;
    bool has_soname = false;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: d->symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: d->strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: d->gnu_hash = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_HASH: d->hash = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_VERSYM: d->versym = (const ElfW(Half) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_VERDEF: d->verdef = dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_VERDEFNUM: d->verdefnum = dyn->d_un.d_val; break;
        case DT_VERNEED: d->verneed = dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_VERNEEDNUM: d->verneednum = dyn->d_un.d_val; break;
        case DT_SONAME: soname = dyn->d_un.d_val, has_soname = true; break;
        default: break;
        }
    }
    if (!d->symtab || !d->strtab)
        return false;
    d->soname = has_soname ? d->strtab + soname : "";
    return true;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The major of "libcudart.so.12" / "libcudart-d0da41ae.so.11.0"; 0 when it has none. */
static int major_in(const char *name)
{
    const char *so = strstr(name, ".so.");
    return so ? atoi(so + 4) : 0;
}

int lg_arm_objects_cudart_major(int i)
{
    const struct dl_phdr_info *info = lg_arm_objects_at(i);
    if (!info || !info->dlpi_name)
        return 0;
    const char *base = base_name(info->dlpi_name);
    if (strncmp(base, "libcudart", 9) != 0 || (base[9] != '.' && base[9] != '-'))
        return 0;
    int major = major_in(base);
    dyn_t d;
    if (major == 0 && read_dyn(info, &d)) /* an unversioned libcudart.so: its SONAME says */
        major = major_in(d.soname);
    return major > 0 ? major : -1;
}

int lg_arm_objects_majors(int *first)
{
    int seen[8], n = 0;
    for (int i = 0; i < n_objects; i++) {
        int m = lg_arm_objects_cudart_major(i), known = 0;
        if (m == 0)
            continue;
        for (int k = 0; k < n; k++)
            known |= seen[k] == m;
        if (!known && n < 8)
            seen[n++] = m;
    }
    if (first)
        *first = n ? seen[0] : 0;
    return n;
}

bool lg_arm_objects_named(const char *prefix)
{
    size_t len = strlen(prefix);
    for (int i = 0; i < n_objects; i++)
        if (objects[i].dlpi_name && strncmp(base_name(objects[i].dlpi_name), prefix, len) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------ symbols and versions */

/* The name of version index ndx in d's version definitions; NULL if none. */
static const char *version_name(const dyn_t *d, unsigned ndx)
{
    uintptr_t p = d->verdef;
    for (size_t k = 0; p && k < d->verdefnum; k++) {
        const ElfW(Verdef) *vd = (const ElfW(Verdef) *)p;
        if (vd->vd_ndx == ndx && vd->vd_cnt > 0)
            return d->strtab + ((const ElfW(Verdaux) *)(p + vd->vd_aux))->vda_name;
        if (!vd->vd_next)
            break;
        p += vd->vd_next;
    }
    return NULL;
}

/* Symbol index s of d is a definition of `name` that a reference asking for `version` (NULL:
 * none, i.e. the default) binds to. IFUNCs are refused: their address is a resolver's. */
static bool matches(const dyn_t *d, uint32_t s, const char *name, const char *version)
{
    const ElfW(Sym) *sym = &d->symtab[s];
    int type = ELF64_ST_TYPE(sym->st_info), bind = ELF64_ST_BIND(sym->st_info);
    if (sym->st_shndx == SHN_UNDEF || sym->st_value == 0 || (type != STT_FUNC && type != STT_OBJECT) ||
        (bind != STB_GLOBAL && bind != STB_WEAK) || strcmp(d->strtab + sym->st_name, name) != 0)
        return false;
    if (!d->versym)
        return true;
    ElfW(Half) v = d->versym[s];
    if (!version)
        return !(v & 0x8000);
    const char *have = version_name(d, v & 0x7fff);
    return have && strcmp(have, version) == 0;
}

static uint32_t gnu_hash_of(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash_of(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        uint32_t g = h & 0xf0000000u;
        h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

void *lg_arm_objects_lookup(const struct dl_phdr_info *info, const char *name, const char *version)
{
    dyn_t d;
    if (!read_dyn(info, &d))
        return NULL;
    if (d.gnu_hash) {
        uint32_t nbuckets = d.gnu_hash[0], symoffset = d.gnu_hash[1], bloom_size = d.gnu_hash[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)&d.gnu_hash[4] + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t h = gnu_hash_of(name);
        uint32_t s = nbuckets ? buckets[h % nbuckets] : 0;
        for (; s >= symoffset && s != 0; s++) {
            uint32_t c = chain[s - symoffset];
            if ((c | 1) == (h | 1) && matches(&d, s, name, version))
                return (void *)(info->dlpi_addr + d.symtab[s].st_value);
            if (c & 1)
                break;
        }
        return NULL;
    }
    if (d.hash) {
        uint32_t nbucket = d.hash[0];
        const uint32_t *bucket = &d.hash[2], *chain = bucket + nbucket;
        for (uint32_t s = nbucket ? bucket[sysv_hash_of(name) % nbucket] : 0; s; s = chain[s])
            if (matches(&d, s, name, version))
                return (void *)(info->dlpi_addr + d.symtab[s].st_value);
    }
    return NULL;
}

const char *lg_arm_objects_wanted(const struct dl_phdr_info *info, uint32_t sym, const char **file)
{
    dyn_t d;
    *file = NULL;
    if (!read_dyn(info, &d) || !d.versym || !d.verneed)
        return NULL;
    unsigned ndx = d.versym[sym] & 0x7fff;
    if (ndx < 2) /* local or global: no version asked */
        return NULL;
    uintptr_t p = d.verneed;
    for (size_t k = 0; k < d.verneednum; k++) {
        const ElfW(Verneed) *vn = (const ElfW(Verneed) *)p;
        uintptr_t a = p + vn->vn_aux;
        for (unsigned j = 0; j < vn->vn_cnt; j++) {
            const ElfW(Vernaux) *va = (const ElfW(Vernaux) *)a;
            if (va->vna_other == ndx) {
                *file = d.strtab + vn->vn_file;
                return d.strtab + va->vna_name;
            }
            if (!va->vna_next)
                break;
            a += va->vna_next;
        }
        if (!vn->vn_next)
            break;
        p += vn->vn_next;
    }
    return NULL;
}

int lg_arm_objects_by_soname(const char *soname)
{
    for (int i = 0; i < n_objects; i++) {
        dyn_t d;
        if (objects[i].dlpi_name && (strcmp(base_name(objects[i].dlpi_name), soname) == 0 ||
                                     (read_dyn(&objects[i], &d) && strcmp(d.soname, soname) == 0)))
            return i;
    }
    return -1;
}

/* ------------------------------------------------------------------ page protections */

static struct {
    uintptr_t lo, hi;
    int prot;
} maps[MAX_MAPS];
static int n_maps = -1; /* -1: not read in this walk */

static void add_line(const char *s, const char *end)
{
    uintptr_t lo = 0, hi = 0;
    while (s < end && *s != '-')
        lo = lo * 16 + (uintptr_t)(*s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10), s++;
    for (s++; s < end && *s != ' '; s++)
        hi = hi * 16 + (uintptr_t)(*s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10);
    if (end - s < 4 || n_maps >= MAX_MAPS)
        return;
    s++;
    maps[n_maps].lo = lo;
    maps[n_maps].hi = hi;
    maps[n_maps++].prot = (s[0] == 'r' ? PROT_READ : 0) | (s[1] == 'w' ? PROT_WRITE : 0) | (s[2] == 'x' ? PROT_EXEC : 0);
}

void lg_arm_objects_forget_maps(void) { n_maps = -1; }

static void read_maps(void)
{
    static char buf[8192];
    n_maps = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t have = 0;
    for (;;) {
        ssize_t got = read(fd, buf + have, sizeof buf - have);
        if (got <= 0)
            break;
        have += (size_t)got;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            add_line(line, nl);
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf)
            have = 0; /* a line longer than the buffer: its range was read, the rest is a path */
    }
    close(fd);
}

int lg_arm_objects_prot(uintptr_t addr)
{
    if (n_maps < 0)
        read_maps();
    for (int i = 0; i < n_maps; i++)
        if (addr >= maps[i].lo && addr < maps[i].hi)
            return maps[i].prot;
    return -1;
}
