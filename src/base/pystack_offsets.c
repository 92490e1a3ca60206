/* pystack_offsets.c: turns CPython's own description of its structures (_PyRuntime.debug_offsets,
 * a _Py_DebugOffsets, CPython 3.13 and newer) into the byte offsets pystack.c's frame walk reads.
 * A pure function on bytes pystack.c copied out of the interpreter: no CPython call, no
 * allocation, so it is tested on made-up buffers (tests/unit/test_pystack_offsets.c) as well as
 * in real interpreters (tests/e2e/test_pystack.sh on 3.14 and 3.15).
 *
 * Called once per process by pystack.c's resolve (pthread_once), for interpreters whose minor
 * version has no entry in pystack.c's table.
 *
 * What _Py_DebugOffsets is (Include/internal/pycore_debug_offsets.h in 3.14 and 3.15,
 * pycore_runtime.h in 3.13): the first member of _PyRuntime, filled at build time with
 * offsetof() and sizeof() over the interpreter's own structures, for out-of-process debuggers
 * and profilers (PEP 768 builds on it). It opens with char cookie[8] = "xdebugpy", uint64
 * version (PY_VERSION_HEX) and uint64 free_threaded, then groups of uint64, each opening with
 * the size of the structure it describes. The groups themselves grow from one minor version to
 * the next (3.14 added interpreter_state.threads_main, code_object_generation, tlbc_generation,
 * interpreter_frame.stackpointer, tlbc_index, code_object.co_tlbc and set_object; 3.15 added
 * interpreter_state.base_frame and two profiler fields, thread_state.holds_gil, gil_requested,
 * current_exception, exc_state, err_stackitem, type_object.tp_basicsize, tp_dictoffset,
 * heap_type_object and unicode_object.compactunicodeobject_size), and nothing inside
 * describes that: so where each needed uint64 sits is kept per minor version below, generated
 * with offsetof() over each version's header (3.13.0 from python.org, Debian's 3.14.10 and
 * 3.15.2 libpython3.1X-dev). A minor version newer than the last one listed is read with the
 * last one's positions and accepted only when every check below passes: the structure sizes
 * are sane and every member lies inside its structure, which positions shifted by a new field
 * would break (a size read where an offset is expected, or the reverse).
 *
 * Facts the walk relies on, from the same headers (default builds, LP64):
 *   - interpreter_frame.executable is f_executable: in 3.13 a PyObject *, from 3.14 a
 *     _PyStackRef, a uintptr_t whose low two bits are tags (Py_TAG_BITS 3; Py_TAG_REFCNT 1
 *     marks a deferred or immortal reference, Py_INT_TAG 3 a tagged int, never found in
 *     f_executable): the object is bits & ~3 (PyStackRef_AsPyObjectBorrow,
 *     BITS_TO_PTR_MASKED). It is a code object, or None for frames that run no code: the
 *     walk's type check skips those.
 *   - interpreter_frame.owner: enum _frameowner, THREAD 0, GENERATOR 1, FRAME_OBJECT 2, then
 *     CSTACK 3 (3.12, 3.13) or INTERPRETER 3 and CSTACK 4 (3.14) or INTERPRETER 3 (3.15):
 *     _PyFrame_IsIncomplete treats owner >= 3 as a frame no traceback shows.
 *   - _co_firsttraceable is not published, so the prologue test of _PyFrame_IsIncomplete cannot
 *     be made: a frame caught before its RESUME is reported (at its first line).
 *   - interpreter_frame.instr_ptr points at the instruction executing (the CALL that led to the
 *     launch); code_object.co_code_adaptive is the bytecode's start in a default build (a
 *     free-threaded one runs per-thread copies, co_tlbc + tlbc_index). instr_ptr minus it is
 *     the byte offset PyCode_Addr2Line takes.
 *   - Strings: the default build's PyASCIIObject.state bit field is interned:2, kind:3,
 *     compact:1, ascii:1; a compact str's characters follow the PyASCIIObject (ascii) or the
 *     PyCompactUnicodeObject, which adds utf8_length and utf8 (16 bytes; 3.15 publishes its
 *     size as compactunicodeobject_size).
 *   - A free-threaded build (free_threaded 1, from the same _Py_DebugOffsets layout: its
 *     members exist in both builds, the free-threaded values differ) has a 32-byte object
 *     header (ob_type at 24); from 3.14 its PyASCIIObject.state opens with an unsigned char
 *     `interned` instead of a 2-bit field, so kind, compact and ascii sit 6 bits higher (3.13t
 *     keeps the default bit field); from 3.14 each thread may run its own copy of the bytecode:
 *     interpreter_frame.tlbc_index (int32) picks the entry of code_object.co_tlbc, a
 *     _PyCodeArray {Py_ssize_t size; char *entries[]} whose entry 0 is co_code_adaptive.
 *     Positions of co_tlbc and tlbc_index, and the bit layout, from offsetof over Debian's
 *     3.14.10 and 3.15.2 headers built with Py_GIL_DISABLED; 3.13t is checked in a real
 *     interpreter (tests/pyroot builds one).
 */
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* Where the needed uint64 members sit inside _Py_DebugOffsets, in bytes; 0: absent in that
 * version (no member sits at 0: the cookie does). */
typedef struct dbo_positions {
    int minor;
    int total; /* sizeof(_Py_DebugOffsets) */
    int interp_size, interp_threads_head, interp_threads_main;
    int ts_size, ts_next, ts_current_frame;
    int fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
    int co_size, co_filename, co_name, co_linetable, co_firstlineno, co_code_adaptive;
    int ob_size, ob_type;
    int by_size, by_ob_size, by_ob_sval;
    int un_size, un_state, un_length, un_ascii_size, un_compact_size;
    int co_tlbc, fr_tlbc_index; /* filled by free-threaded builds only (0 in default ones) */
} dbo_positions_t;

static const dbo_positions_t positions[] = {
    {13, 584, 48, 72, 0, 152, 168, 184, 224, 232, 240, 248, 264, 272, 280, 288, 304, 312, 344, 352, 360, 512, 520,
     528, 536, 544, 552, 560, 0, 0, 0},
    {14, 760, 48, 72, 80, 176, 192, 208, 248, 256, 264, 272, 288, 312, 320, 328, 344, 352, 384, 400, 408, 592, 600,
     608, 616, 624, 632, 640, 0, 392, 304},
    {15, 888, 48, 72, 80, 176, 192, 208, 312, 320, 328, 336, 352, 376, 384, 392, 408, 416, 448, 464, 472, 688, 696,
     704, 712, 720, 728, 736, 744, 456, 368},
};

#define COMPACT_EXTRA 16 /* PyCompactUnicodeObject after its PyASCIIObject: utf8_length, utf8 */
#define MAX_STRUCT    (1 << 16) /* bytes: larger "sizes" are misread positions */
#define MAX_INTERP    (1 << 24) /* PyInterpreterState holds caches: 195 KB in 3.13, 226 KB in 3.14 */

/* Byte offsets inside CPython's structures, by minor version. Generated with offsetof() over
 * each version's headers (Py_BUILD_CORE, internal/pycore_frame.h). The second line of each is
 * the same in all: every PyThreadState starts with `struct _ts *prev, *next;`, a PyObject with
 * ob_refcnt, ob_type; PyASCIIObject has length at 16 and its state bit field at 32; a
 * PyBytesObject is a PyVarObject (ob_size at 16) with ob_sval at 32; shim frames (owner
 * FRAME_OWNED_BY_CSTACK, 3) exist from 3.12; no tagged pointers. */
static const lg_py_layout_t layouts[] = {
    {8, LG_PY_FRAME_OBJECTS, 24, -1, 0, -1, 24, 32, 104, -1, 1, 104, 112, 40, -1, -1, 48, 72, 120,
     8, -1, 8, 16, 32, 16, 32, -1, 0, false, 0, 0, 0},
    {9, LG_PY_FRAME_OBJECTS, 24, -1, 0, -1, 24, 32, 104, -1, 1, 104, 112, 40, -1, -1, 48, 72, 120,
     8, -1, 8, 16, 32, 16, 32, -1, 0, false, 0, 0, 0},
    {10, LG_PY_FRAME_OBJECTS, 24, -1, 0, -1, 24, 32, 96, -1, 2, 104, 112, 40, -1, -1, 48, 72, 120,
     8, -1, 8, 16, 32, 16, 32, -1, 0, false, 0, 0, 0},
    {11, LG_PY_INTERP_FRAMES, -1, 56, 8, -1, 48, 32, 56, 69, 2, 112, 120, 72, 184, 168, 48, 72, 136,
     8, -1, 8, 16, 32, 16, 32, -1, 0, false, 0, 0, 0},
    {12, LG_PY_INTERP_FRAMES, -1, 56, 0, -1, 8, 0, 56, 70, 2, 112, 120, 68, 192, 176, 40, 56, 136,
     8, -1, 8, 16, 32, 16, 32, 3, 0, false, 0, 0, 0},
    {13, LG_PY_INTERP_FRAMES, -1, -1, 0, 72, 8, 0, 56, 70, 2, 112, 120, 68, 200, 184, 40, 56, 136,
     8, -1, 8, 16, 32, 16, 32, 3, 0, false, 0, 0, 0},
};

bool lg_pystack_offsets_table(int minor, lg_py_layout_t *out)
{
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        if (layouts[i].minor == minor) {
            *out = layouts[i];
            return true;
        }
    return false;
}

static uint64_t u64(const unsigned char *raw, int at)
{
    uint64_t v;
    memcpy(&v, raw + at, sizeof(v));
    return v;
}

/* True when a member at offset off, width bytes wide, lies inside a structure of size bytes. */
static bool inside(uint64_t off, uint64_t width, uint64_t size)
{
    return off < MAX_INTERP && off + width <= size;
}

static bool sane_size(uint64_t size, uint64_t max)
{
    return size >= 8 && size < max;
}

const char *lg_pystack_offsets_decode(const void *raw_, size_t len, int minor, lg_py_layout_t *out)
{
    const unsigned char *raw = raw_;
    const size_t n_positions = sizeof(positions) / sizeof(positions[0]);
    const dbo_positions_t *P = NULL;
    for (size_t i = 0; i < n_positions; i++)
        if (positions[i].minor == minor)
            P = &positions[i];
    if (!P && minor > positions[n_positions - 1].minor)
        P = &positions[n_positions - 1];
    if (!P)
        return "no debug offsets before CPython 3.13";
    if (len < (size_t)P->total)
        return "debug offsets: short read";
    if (memcmp(raw, "xdebugpy", 8) != 0)
        return "debug offsets: no xdebugpy cookie";
    uint64_t version = u64(raw, 8); /* PY_VERSION_HEX: 0xMMmmppRS */
    if ((version >> 24) != 3 || ((version >> 16) & 0xff) != (uint64_t)minor)
        return "debug offsets: version differs from Py_GetVersion";
    const bool ft = u64(raw, 16) != 0;

    uint64_t interp = u64(raw, P->interp_size), head = u64(raw, P->interp_threads_head);
    uint64_t main_ts = P->interp_threads_main ? u64(raw, P->interp_threads_main) : 0;
    uint64_t ts = u64(raw, P->ts_size), next = u64(raw, P->ts_next), cur = u64(raw, P->ts_current_frame);
    uint64_t fr = u64(raw, P->fr_size), prev = u64(raw, P->fr_previous), exe = u64(raw, P->fr_executable);
    uint64_t ip = u64(raw, P->fr_instr_ptr), owner = u64(raw, P->fr_owner);
    uint64_t co = u64(raw, P->co_size), file = u64(raw, P->co_filename), name = u64(raw, P->co_name);
    uint64_t lines = u64(raw, P->co_linetable), first = u64(raw, P->co_firstlineno);
    uint64_t code = u64(raw, P->co_code_adaptive);
    uint64_t ob = u64(raw, P->ob_size), ob_type = u64(raw, P->ob_type);
    uint64_t by = u64(raw, P->by_size), by_len = u64(raw, P->by_ob_size), by_data = u64(raw, P->by_ob_sval);
    uint64_t un = u64(raw, P->un_size), state = u64(raw, P->un_state), length = u64(raw, P->un_length);
    uint64_t ascii = u64(raw, P->un_ascii_size);
    uint64_t compact = P->un_compact_size ? u64(raw, P->un_compact_size) : ascii + COMPACT_EXTRA;

    if (!sane_size(interp, MAX_INTERP) || !sane_size(ts, MAX_STRUCT) || !sane_size(fr, MAX_STRUCT) ||
        !sane_size(co, MAX_STRUCT) || !sane_size(ob, MAX_STRUCT) || !sane_size(by, MAX_STRUCT) ||
        !sane_size(un, MAX_STRUCT))
        return "debug offsets: a structure size out of range";
    if (!inside(head, 8, interp) || (P->interp_threads_main && !inside(main_ts, 8, interp)))
        return "debug offsets: interpreter state too small";
    if (!inside(next, 8, ts) || !inside(cur, 8, ts))
        return "debug offsets: thread state too small";
    if (!inside(prev, 8, fr) || !inside(exe, 8, fr) || !inside(ip, 8, fr) || !inside(owner, 1, fr))
        return "debug offsets: interpreter frame too small";
    if (!inside(file, 8, co) || !inside(name, 8, co) || !inside(lines, 8, co) || !inside(first, 4, co) ||
        code >= co || code < 8) /* co_code_adaptive[1]: the last member, the bytecode beyond */
        return "debug offsets: code object too small";
    /* The walk compares ob_type to the type objects' addresses: a default build's header is
     * ob_refcnt (8 bytes) then ob_type; a free-threaded one's ob_tid, the flags, mutex, GC bits
     * and local count (8 bytes), ob_ref_shared, then ob_type. */
    if (!ft && (ob != 16 || ob_type != 8))
        return "debug offsets: object header is not a default build's";
    if (ft && (ob != 32 || ob_type != 24))
        return "debug offsets: object header is not a free-threaded build's";
    /* Per-thread bytecode (free-threaded 3.14+): without its offsets a worker thread's line
     * would be read against the wrong copy. */
    uint64_t tlbc = 0, tlbc_index = 0;
    if (ft && minor >= 14) {
        if (!P->co_tlbc)
            return "debug offsets: free-threaded, no per-thread bytecode offsets";
        tlbc = u64(raw, P->co_tlbc);
        tlbc_index = u64(raw, P->fr_tlbc_index);
        if (!inside(tlbc, 8, co) || tlbc < 8 || !inside(tlbc_index, 4, fr) || tlbc_index < 8)
            return "debug offsets: per-thread bytecode outside its structures";
    }
    if (!inside(by_len, 8, by) || !inside(by_data, 1, by))
        return "debug offsets: bytes object too small";
    if (!inside(length, 8, ascii) || !inside(state, 4, ascii) || ascii > un || compact < ascii ||
        compact > un)
        return "debug offsets: str object too small";

    memset(out, 0, sizeof(*out));
    out->minor = minor;
    out->kind = LG_PY_INTERP_FRAMES;
    out->ts_frame = out->ts_cframe = -1;
    out->ts_current = (int)cur;
    out->ts_next = (int)next;
    out->interp_main_ts = P->interp_threads_main ? (int)main_ts : -1;
    out->f_back = (int)prev;
    out->f_code = (int)exe;
    out->f_lasti = (int)ip;
    out->f_owner = (int)owner;
    out->lasti_scale = 1;
    out->owner_incomplete = 3;
    out->ref_tag_bits = minor >= 14 ? 3 : 0;
    out->co_filename = (int)file;
    out->co_name = (int)name;
    out->co_firstlineno = (int)first;
    out->co_code_adaptive = (int)code;
    out->co_firsttraceable = -1;
    out->co_lines = (int)lines;
    out->ob_type = (int)ob_type;
    out->uni_length = (int)length;
    out->uni_state = (int)state;
    out->ascii_size = (int)ascii;
    out->compact_size = (int)compact;
    out->bytes_size = (int)by_len;
    out->bytes_data = (int)by_data;
    out->free_threaded = ft;
    out->uni_state_shift = ft && minor >= 14 ? 6 : 0;
    out->co_tlbc = (int)tlbc;
    out->f_tlbc_index = (int)tlbc_index;
    return NULL;
}
