/* pystack.c: the Python stack of the thread that launched a bad kernel, read the way
 * faulthandler's dump_traceback does: without the GIL (PyTorch releases it around every
 * kernel launch), without allocating, without taking references, and without linking
 * libpython: every CPython symbol is looked up at run time with dlsym(RTLD_DEFAULT), so a
 * process without Python pays one failed lookup and gets n = 0.
 *
 * Called by act.c on the launching thread, for launches with bad labels only; and by site.c
 * at every launch whose verdict comes later (async mode, captures): lg_pystack_record keeps only
 * the code objects and instruction offsets, read with plain loads from the calling thread's own
 * chain (it sits in our hook, inside a C call, so its frames hold still and stay alive), and
 * lg_pystack_resolve turns them into lines only when the verdict is bad, after checking that
 * each code object is still the one recorded (its type, filename, name and first line). The
 * fallback to the main thread (below) reads through the fault-safe peek in both cases.
 *
 * Why raw structures: the public frame API (PyThreadState_GetFrame, PyFrame_GetBack, ...)
 * returns new references since 3.9, which must not be touched without the GIL. So the walk
 * reads CPython's internal frame structures with per-version offsets: the table below for 3.8
 * to 3.13, and for 3.14 and newer the interpreter's own description of them,
 * _PyRuntime.debug_offsets (decoded and checked by pystack_offsets.c). Every read of
 * interpreter memory goes through process_vm_readv on our own pid, which
 * returns EFAULT instead of crashing on a stale pointer (a pipe write/read fallback where a
 * seccomp filter blocks it). The only CPython functions called are plain reads:
 * Py_GetVersion, Py_IsInitialized, PyGILState_GetThisThreadState (a TSS lookup),
 * PyInterpreterState_Main/Head, PyInterpreterState_ThreadHead, and PyCode_Addr2Line (walks
 * the code object's immutable line table; called only when the object's type and its line
 * table's bytes were checked).
 *
 * When the launching thread has no Python frames (autograd's engine threads, any C++ thread),
 * the main thread's stack is reported instead, with from_main_thread set. The main thread's
 * thread state is the oldest one in the main interpreter's list (new ones are pushed at the
 * head). That thread may be running, so its frames can change under the walk: the checks on
 * every pointer keep that safe, and the result is best effort.
 *
 * Verified versions (tests/e2e/test_pystack.sh run against them): 3.8 to 3.13 through the
 * table (struct offsets generated from each version's own internal headers), 3.14 and 3.15
 * (Debian's builds) through the debug offsets, on x86-64; nothing here depends on the
 * architecture beyond LP64 (aarch64 shares the layouts). Newer minor versions take the debug
 * offsets path when its checks pass. Debug builds (Py_DEBUG/Py_TRACE_REFS): the type checks
 * fail and the stack comes back empty.
 *
 * Free-threaded builds (3.13t, 3.14t and newer; their debug offsets say free_threaded) are read
 * through the debug offsets too, 3.13t included (the table describes 3.13's default build).
 * With no GIL, "another thread cannot run Python while this one is in a C call" no longer
 * holds, so the rule is per chain: the launching thread reads only its own chain, which no
 * other thread mutates (frames are pushed and popped by their own thread; the code objects they
 * run are kept alive by the frames' references, deferred ones included, which the collector
 * treats as roots); everything another thread may change or free is read through the
 * fault-safe peek and checked per object: other threads' frames (the main-thread fallback), and
 * the per-thread bytecode array (co_tlbc), which a thread starting elsewhere may reallocate.
 * A frame running the bytecode copy inside its code object (tlbc_index 0: the main thread's)
 * needs no such read; a worker thread's frames switch to that thread's own copy at their first
 * instruction.
 *
 * Tested by tests/e2e/test_pystack.sh (tests/unit/pystack_probe.c loaded by python3 through
 * ctypes, from the main thread, a Python worker thread and a native thread; 3.14, 3.15 and a
 * free-threaded 3.13t in the Debian root of tests/pyroot/install.sh),
 * tests/unit/test_pystack_walk.c (a made-up 3.14t: its object header, string state and
 * per-thread bytecode), tests/unit/test_pystack_offsets.c (the checks on
 * the debug offsets), tests/torch-fake/test_pystack_torch.sh and tests/pip/test_pystack_wheel.sh
 * (real torch and the wheel on 3.14 and 3.15).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"

enum { OWNED_BY_GENERATOR = 1 };

#define MAX_WALK 1024 /* frames or thread states visited, against cycles in torn lists */

static struct {
    bool ok;
    lg_py_layout_t layout;
    int (*is_initialized)(void);
    void *(*this_thread_state)(void);
    void *(*interp_main)(void);
    void *(*thread_head)(void *interp);
    int (*addr2line)(void *code, int addr);
    const void *code_type, *frame_type, *unicode_type, *bytes_type;
    lg_py_info_t info; /* what resolve found */
} py;

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

/* Copies n bytes at addr into out; false when any of it is unmapped (pystack_peek.c). */
static bool peek(const void *addr, void *out, size_t n) { return lg_pystack_peek(addr, out, n); }

/* The layout of a 3.13 or newer interpreter: its _PyRuntime.debug_offsets, read with the same
 * fault-safe peek as the frames. 3.13's default build keeps its table entry (which also knows
 * where _co_firsttraceable is); its free-threaded build is decoded like 3.14's. */
static bool offsets_layout(int minor)
{
    const void *runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
    static unsigned char raw[LG_PY_DEBUG_OFFSETS_LEN]; /* once, under pthread_once */
    if (!runtime || !peek(runtime, raw, sizeof(raw))) {
        py.info.why = "_PyRuntime cannot be read";
        return minor == 13 && lg_pystack_offsets_table(minor, &py.layout);
    }
    uint64_t free_threaded;
    memcpy(&free_threaded, raw + 16, sizeof(free_threaded));
    py.info.free_threaded = memcmp(raw, "xdebugpy", 8) == 0 && free_threaded != 0;
    if (minor == 13 && !py.info.free_threaded)
        return lg_pystack_offsets_table(minor, &py.layout);
    py.info.why = lg_pystack_offsets_decode(raw, sizeof(raw), minor, &py.layout);
    return py.info.why == NULL;
}

static void resolve(void)
{
    const char *(*get_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    if (!get_version)
        return; /* not a Python process */
    const char *v = get_version();
    int major = 0, minor = 0;
    py.info.python = true;
    if (v)
        snprintf(py.info.version, sizeof py.info.version, "%.*s", (int)strcspn(v, " "), v);
    py.info.why = "version not understood";
    if (!v || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 3)
        return;
    py.info.why = "no frame layout for this version";
    if (!(minor >= 13 ? offsets_layout(minor) : lg_pystack_offsets_table(minor, &py.layout)))
        return;
    py.info.why = "CPython functions missing";
    py.is_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    py.this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    py.interp_main = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
    if (!py.interp_main)
        py.interp_main = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyInterpreterState_Head");
    py.thread_head = (void *(*)(void *))dlsym(RTLD_DEFAULT, "PyInterpreterState_ThreadHead");
    py.addr2line = (int (*)(void *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    py.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.frame_type = dlsym(RTLD_DEFAULT, "PyFrame_Type");
    py.unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    py.bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
    py.ok = py.is_initialized && py.this_thread_state && py.addr2line && py.code_type && py.unicode_type &&
            py.bytes_type && (py.layout.kind == LG_PY_INTERP_FRAMES || py.frame_type);
    py.info.stacks = py.ok;
    if (py.ok)
        py.info.why = NULL;
}

void lg_pystack_info(lg_py_info_t *out)
{
    /* Not (yet) a Python process: say so without resolving, which happens once; a program
     * that embeds Python may load it after this call. */
    if (!dlsym(RTLD_DEFAULT, "Py_GetVersion")) {
        memset(out, 0, sizeof(*out));
        return;
    }
    pthread_once(&resolve_once, resolve);
    *out = py.info;
}

static bool peek_ptr(const void *base, int off, void **out)
{
    return off >= 0 && peek((const char *)base + off, out, sizeof(void *));
}

static bool has_type(const void *obj, const void *type)
{
    void *t;
    return obj && peek_ptr(obj, py.layout.ob_type, &t) && t == type;
}

/* Appends code point cp as UTF-8 if it fits (with the NUL). */
static void put_utf8(char *out, size_t len, size_t *o, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 0xFFFD; /* lone surrogates (surrogateescape'd file names) */
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 63));
        b[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 63));
        b[2] = (char)(0x80 | ((cp >> 6) & 63));
        b[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    if (*o + n + 1 > len)
        return;
    memcpy(out + *o, b, n);
    *o += n;
}

/* A str object as UTF-8. Long strings keep their tail when keep_tail (a path's file name
 * matters more than its first directories), behind "...". False when obj is not a compact
 * str. */
static bool read_unicode(const void *obj, char *out, size_t len, bool keep_tail)
{
    const lg_py_layout_t *L = &py.layout;
    out[0] = '\0';
    if (!has_type(obj, py.unicode_type))
        return false;
    int64_t length;
    uint32_t state;
    if (!peek((const char *)obj + L->uni_length, &length, sizeof(length)) ||
        !peek((const char *)obj + L->uni_state, &state, sizeof(state)))
        return false;
    state >>= L->uni_state_shift;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length < 0 || length > (1 << 20) || (kind != 1 && kind != 2 && kind != 4))
        return false;
    const char *data = (const char *)obj + (ascii ? L->ascii_size : L->compact_size);
    /* Characters that fit: at most len-1 bytes, each character 1..4 bytes. */
    int64_t max_chars = (int64_t)len - 1;
    int64_t start = 0;
    size_t o = 0;
    if (length > max_chars && keep_tail) {
        start = length - (max_chars - 3);
        memcpy(out, "...", 3);
        o = 3;
    }
    unsigned char chunk[256];
    int64_t i = start;
    while (i < length && o + 1 < len) {
        int64_t take = length - i;
        if (take > (int64_t)(sizeof(chunk) / kind))
            take = (int64_t)(sizeof(chunk) / kind);
        if (!peek(data + i * kind, chunk, (size_t)(take * kind)))
            return false;
        for (int64_t k = 0; k < take; k++) {
            uint32_t cp = kind == 1 ? chunk[k] : kind == 2 ? ((uint16_t *)chunk)[k] : ((uint32_t *)chunk)[k];
            put_utf8(out, len, &o, cp);
        }
        i += take;
    }
    out[o] = '\0';
    return true;
}

/* Fills one frame from a code object and a byte offset into its bytecode (< 0: unknown).
 * False when code is not a code object. */
static bool record(void *code, int addr, lg_py_frame_t *f)
{
    const lg_py_layout_t *L = &py.layout;
    if (!has_type(code, py.code_type))
        return false;
    void *filename, *name;
    if (!peek_ptr(code, L->co_filename, &filename) || !peek_ptr(code, L->co_name, &name))
        return false;
    if (!read_unicode(filename, f->file, sizeof(f->file), true))
        snprintf(f->file, sizeof(f->file), "?");
    if (!read_unicode(name, f->function, sizeof(f->function), false))
        snprintf(f->function, sizeof(f->function), "?");
    int first = 0;
    peek((const char *)code + L->co_firstlineno, &first, sizeof(first));
    f->line = first;
    /* PyCode_Addr2Line reads the line table without checks: call it only when that table is
     * a bytes object whose data is mapped (a main-thread frame can die under the walk). */
    void *table;
    int64_t table_len;
    unsigned char edge;
    if (addr >= 0 && peek_ptr(code, L->co_lines, &table) && has_type(table, py.bytes_type) &&
        peek((const char *)table + L->bytes_size, &table_len, sizeof(table_len)) && table_len >= 0 &&
        table_len < (1 << 24) &&
        (table_len == 0 || (peek((const char *)table + L->bytes_data, &edge, 1) &&
                            peek((const char *)table + L->bytes_data + table_len - 1, &edge, 1))))
        f->line = py.addr2line(code, addr);
    return true;
}

/* How a walk reads interpreter memory: the fault-safe peek, or plain loads (load) for the
 * calling thread's own chain while it sits in a C call: its frames and their code objects are
 * alive and hold still until it returns. */
typedef bool (*read_fn)(const void *addr, void *out, size_t n);

static inline __attribute__((always_inline)) bool load(const void *addr, void *out, size_t n)
{
    if ((uintptr_t)addr < 4096)
        return false;
    memcpy(out, addr, n);
    return true;
}

static inline __attribute__((always_inline)) bool read_ptr(read_fn rd, const void *base, int off, void **out)
{
    return off >= 0 && rd((const char *)base + off, out, sizeof(void *));
}

/* Where a free-threaded thread's copy of code's bytecode starts (entry index of co_tlbc), or
 * NULL. Always through the fault-safe peek: another thread may replace the array meanwhile. */
static const char *thread_bytecode(const void *code, int32_t index)
{
    void *array, *entry;
    int64_t size;
    if (index < 0 || !peek_ptr(code, py.layout.co_tlbc, &array) || !peek(array, &size, sizeof(size)) ||
        index >= size || !peek((const char *)array + 8 + 8 * (size_t)index, &entry, sizeof(entry)))
        return NULL;
    return entry;
}

/* One frame's code object and what identifies it, when code is one. */
static inline __attribute__((always_inline)) bool raw_frame(read_fn rd, void *code, int addr, lg_py_raw_frame_t *f)
{
    const lg_py_layout_t *L = &py.layout;
    void *type, *filename, *name;
    if (!read_ptr(rd, code, L->ob_type, &type) || type != py.code_type ||
        !read_ptr(rd, code, L->co_filename, &filename) || !read_ptr(rd, code, L->co_name, &name) ||
        !rd((const char *)code + L->co_firstlineno, &f->firstlineno, sizeof(f->firstlineno)))
        return false;
    f->code = code;
    f->filename = filename;
    f->name = name;
    f->addr = addr;
    return true;
}

/* Walks one thread state's frames, innermost first into s->frames; returns the count. Inlined
 * into walk_own and walk_peek, so that the launch path's plain loads are plain moves. */
static inline __attribute__((always_inline)) int walk(read_fn rd, void *tstate, lg_py_site_t *s)
{
    const lg_py_layout_t *L = &py.layout;
    void *frame = NULL;
    if (L->kind == LG_PY_FRAME_OBJECTS) {
        if (!read_ptr(rd, tstate, L->ts_frame, &frame))
            return 0;
    } else if (L->ts_current >= 0) {
        if (!read_ptr(rd, tstate, L->ts_current, &frame))
            return 0;
    } else {
        void *cframe;
        if (!read_ptr(rd, tstate, L->ts_cframe, &cframe) || !cframe || !read_ptr(rd, cframe, L->cf_current, &frame))
            return 0;
    }
    int n = 0;
    for (int guard = 0; frame && n < LG_MAX_PY_FRAMES && guard < MAX_WALK; guard++) {
        void *code, *back;
        if (!read_ptr(rd, frame, L->f_code, &code) || !read_ptr(rd, frame, L->f_back, &back))
            break;
        /* From 3.14 f_executable is a _PyStackRef: a pointer with tag bits (pystack_offsets.c). */
        code = (void *)((uintptr_t)code & ~(uintptr_t)L->ref_tag_bits);
        lg_py_raw_frame_t *f = &s->frames[n];
        if (L->kind == LG_PY_FRAME_OBJECTS) {
            void *type;
            int lasti;
            if (!read_ptr(rd, frame, L->ob_type, &type) || type != py.frame_type ||
                !rd((const char *)frame + L->f_lasti, &lasti, sizeof(lasti)))
                break;
            n += raw_frame(rd, code, lasti < 0 ? -1 : lasti * L->lasti_scale, f);
        } else {
            char owner = 0;
            void *instr;
            int firsttraceable = 0;
            if (!rd((const char *)frame + L->f_owner, &owner, 1) || !read_ptr(rd, frame, L->f_lasti, &instr))
                break;
            /* Shim frames of the C stack or the interpreter (3.12+) and frames still in their
             * prologue are skipped, as CPython's own traceback does (_PyFrame_IsIncomplete);
             * the prologue's end (_co_firsttraceable) is known for the table's versions only.
             * 3.11/3.12 point at the last executed instruction, 3.13+ at the current one: both
             * lie inside the call's line. */
            const char *code_start = (const char *)code + L->co_code_adaptive;
            int32_t tlbc_index = 0;
            if (L->f_tlbc_index > 0 && rd((const char *)frame + L->f_tlbc_index, &tlbc_index, sizeof(tlbc_index)) &&
                tlbc_index != 0)
                code_start = thread_bytecode(code, tlbc_index);
            long addr = code_start ? (const char *)instr - code_start : -1;
            if (addr < 0 || addr > (1L << 30))
                addr = -1;
            bool shim = L->owner_incomplete >= 0 && owner >= L->owner_incomplete;
            if (!shim && raw_frame(rd, code, (int)addr, f)) {
                bool prologue = L->co_firsttraceable >= 0 && owner != OWNED_BY_GENERATOR &&
                                rd((const char *)code + L->co_firsttraceable, &firsttraceable, sizeof(int)) &&
                                (const char *)instr < code_start + (ptrdiff_t)firsttraceable * 2;
                n += !prologue;
            }
        }
        frame = back;
    }
    s->n = n;
    return n;
}

/* The main thread's state: the one running __main__ where the interpreter records it
 * (threads.main, 3.14+), else the main interpreter's oldest thread state (the main thread's,
 * unless it was replaced). */
static void *main_thread_state(void)
{
    if (!py.interp_main || !py.thread_head)
        return NULL;
    void *interp = py.interp_main();
    if (!interp)
        return NULL;
    void *ts = NULL, *last = NULL;
    if (peek_ptr(interp, py.layout.interp_main_ts, &ts) && ts)
        return ts;
    ts = py.thread_head(interp);
    for (int guard = 0; ts && guard < MAX_WALK; guard++) {
        last = ts;
        if (!peek_ptr(ts, py.layout.ts_next, &ts))
            return NULL;
    }
    return ts ? NULL : last;
}

static int walk_own(void *tstate, lg_py_site_t *s) { return walk(load, tstate, s); }
static int walk_peek(void *tstate, lg_py_site_t *s) { return walk(peek, tstate, s); }

/* The calling thread's frames (own: how to read them), or the main thread's when it runs no
 * Python. */
static void site_of(lg_py_site_t *s, bool own_plain)
{
    s->n = 0;
    s->from_main_thread = false;
    pthread_once(&resolve_once, resolve);
    if (!py.ok || !py.is_initialized())
        return;
    void *ts = py.this_thread_state();
    if (ts && (own_plain ? walk_own(ts, s) : walk_peek(ts, s)) > 0)
        return;
    void *main_ts = main_thread_state();
    if (main_ts && main_ts != ts)
        s->from_main_thread = walk_peek(main_ts, s) > 0;
}

void lg_pystack_record(lg_py_site_t *s) { site_of(s, true); }

/* A recorded frame as text when its code object is still the one recorded (a freed one's
 * memory may hold another object, or another code object, by now). */
static void resolve_frame(const lg_py_raw_frame_t *r, lg_py_frame_t *f)
{
    const lg_py_layout_t *L = &py.layout;
    void *filename, *name;
    int first;
    f->gone = !has_type(r->code, py.code_type) || !peek_ptr(r->code, L->co_filename, &filename) ||
              filename != r->filename || !peek_ptr(r->code, L->co_name, &name) || name != r->name ||
              !peek((const char *)r->code + L->co_firstlineno, &first, sizeof(first)) || first != r->firstlineno ||
              !record((void *)r->code, r->addr, f);
    if (f->gone) {
        snprintf(f->file, sizeof f->file, "?");
        snprintf(f->function, sizeof f->function, "?");
        f->line = 0;
    }
}

void lg_pystack_resolve(const lg_py_site_t *raw, lg_py_stack_t *s)
{
    int n = raw->n > LG_MAX_PY_FRAMES ? LG_MAX_PY_FRAMES : raw->n;
    /* Innermost last, like a Python traceback. */
    for (int i = 0; i < n; i++)
        resolve_frame(&raw->frames[i], &s->frames[n - 1 - i]);
    s->n = n;
    s->from_main_thread = raw->from_main_thread;
}

void lg_pystack_capture(lg_py_stack_t *s)
{
    lg_py_site_t raw;
    site_of(&raw, false);
    lg_pystack_resolve(&raw, s);
}
