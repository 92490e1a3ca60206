/* test_pystack_offsets.c: unit tests of src/base/pystack_offsets.c, the decoding and checking of
 * CPython's _PyRuntime.debug_offsets. The buffers are built here with the values Debian's
 * CPython 3.14.10 and 3.15.2 publish (read from their _PyRuntime through ctypes), at the
 * positions their pycore_debug_offsets.h gives, and free-threaded variants of them (the object
 * header, str and per-thread bytecode members as Py_GIL_DISABLED's headers place them); tests/e2e/test_pystack.sh runs the same code
 * in those interpreters. Each refusal must leave the caller without a layout (the stack stays
 * empty), never with a wrong one.
 * Run: make build/tests/unit/test_pystack_offsets && build/tests/unit/test_pystack_offsets
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "hooks/hooks.h"

static unsigned char raw[LG_PY_DEBUG_OFFSETS_LEN];

static void put(int at, uint64_t v)
{
    memcpy(raw + at, &v, sizeof(v));
}

/* Where 3.14 and 3.15 keep each member in _Py_DebugOffsets (offsetof over their headers), and
 * the values Debian's 3.14.10 and 3.15.2 store there. */
static const struct { int at; uint64_t v314, v315; int at315; } fields[] = {
    {48, 225864, 226240, 48},   /* interpreter_state.size */
    {72, 7344, 7336, 72},       /* interpreter_state.threads_head */
    {80, 7360, 7352, 80},       /* interpreter_state.threads_main */
    {176, 832, 888, 176},       /* thread_state.size */
    {192, 8, 8, 192},           /* thread_state.next */
    {208, 72, 72, 208},         /* thread_state.current_frame */
    {248, 88, 88, 312},         /* interpreter_frame.size */
    {256, 8, 8, 320},           /* interpreter_frame.previous */
    {264, 0, 0, 328},           /* interpreter_frame.executable */
    {272, 56, 56, 336},         /* interpreter_frame.instr_ptr */
    {288, 74, 74, 352},         /* interpreter_frame.owner */
    {312, 216, 216, 376},       /* code_object.size */
    {320, 112, 112, 384},       /* code_object.filename */
    {328, 120, 120, 392},       /* code_object.name */
    {344, 136, 136, 408},       /* code_object.linetable */
    {352, 68, 68, 416},         /* code_object.firstlineno */
    {384, 208, 208, 448},       /* code_object.co_code_adaptive */
    {400, 16, 16, 464},         /* pyobject.size */
    {408, 8, 8, 472},           /* pyobject.ob_type */
    {592, 40, 40, 688},         /* bytes_object.size */
    {600, 16, 16, 696},         /* bytes_object.ob_size */
    {608, 32, 32, 704},         /* bytes_object.ob_sval */
    {616, 64, 64, 712},         /* unicode_object.size */
    {624, 32, 32, 720},         /* unicode_object.state */
    {632, 16, 16, 728},         /* unicode_object.length */
    {640, 40, 40, 736},         /* unicode_object.asciiobject_size */
    {0, 0, 56, 744},            /* unicode_object.compactunicodeobject_size (3.15 only) */
};

/* A default build's debug offsets as 3.<minor> (14 or 15 layout) publishes them. */
static void fill(int minor, int layout)
{
    memset(raw, 0xA5, sizeof(raw));
    memcpy(raw, "xdebugpy", 8);
    put(8, 0x030000f0ULL | ((uint64_t)minor << 16) | (2 << 8)); /* 3.<minor>.2 final */
    put(16, 0);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (layout == 14 && fields[i].at)
            put(fields[i].at, fields[i].v314);
        else if (layout == 15)
            put(fields[i].at315, fields[i].v315);
    }
}

/* A free-threaded build's: the same positions, its own values where the tests read them (the
 * 32-byte object header moves every object's members by 16; per-thread bytecode). */
static void fill_ft(int minor)
{
    fill(minor, minor);
    const int at = minor == 14 ? 0 : 64; /* 3.15 moved the groups from interpreter_frame on */
    put(16, 1);
    put(400 + at, 32);       /* pyobject.size */
    put(408 + at, 24);       /* pyobject.ob_type */
    /* 3.14t's values (_Py_DebugOffsets_INIT over 3.14.10's headers with Py_GIL_DISABLED). */
    put(248 + at, 96);       /* interpreter_frame.size */
    put(288 + at, 78);       /* interpreter_frame.owner */
    put(304 + at, 72);       /* interpreter_frame.tlbc_index */
    put(312 + at, 240);      /* code_object.size */
    put(320 + at, 128);      /* code_object.filename */
    put(328 + at, 136);      /* code_object.name */
    put(344 + at, 152);      /* code_object.linetable */
    put(352 + at, 84);       /* code_object.firstlineno */
    put(384 + at, 232);      /* code_object.co_code_adaptive */
    put(392 + at, 224);      /* code_object.co_tlbc */
    put(592 + at + (minor == 15 ? 32 : 0), 56); /* bytes_object.size */
    put(600 + at + (minor == 15 ? 32 : 0), 32); /* ob_size */
    put(608 + at + (minor == 15 ? 32 : 0), 48); /* ob_sval */
    put(616 + at + (minor == 15 ? 32 : 0), 80); /* unicode_object.size */
    put(624 + at + (minor == 15 ? 32 : 0), 48); /* state */
    put(632 + at + (minor == 15 ? 32 : 0), 32); /* length */
    put(640 + at + (minor == 15 ? 32 : 0), 56); /* asciiobject_size */
    if (minor == 15)
        put(744, 72);        /* compactunicodeobject_size */
}

static void test_free_threaded_decoded(void)
{
    lg_py_layout_t L;
    for (int minor = 14; minor <= 15; minor++) {
        fill_ft(minor);
        const char *why = lg_pystack_offsets_decode(raw, sizeof(raw), minor, &L);
        g_assert_null(why);
        g_assert_true(L.free_threaded);
        g_assert_cmpint(L.ob_type, ==, 24);
        g_assert_cmpint(L.uni_state_shift, ==, 6); /* unsigned char interned: kind at bit 8 */
        g_assert_cmpint(L.uni_state, ==, 48);
        g_assert_cmpint(L.uni_length, ==, 32);
        g_assert_cmpint(L.ascii_size, ==, 56);
        g_assert_cmpint(L.compact_size, ==, 72);
        g_assert_cmpint(L.co_tlbc, ==, 224);
        g_assert_cmpint(L.f_tlbc_index, ==, 72);
        g_assert_cmpint(L.f_owner, ==, 78);
        g_assert_cmpint(L.co_code_adaptive, ==, 232);
        g_assert_cmpint(L.co_filename, ==, 128);
        g_assert_cmpint(L.bytes_size, ==, 32);
        g_assert_cmpint(L.bytes_data, ==, 48);
    }
    /* A default build says none of it. */
    fill(14, 14);
    g_assert_null(lg_pystack_offsets_decode(raw, sizeof(raw), 14, &L));
    g_assert_false(L.free_threaded);
    g_assert_cmpint(L.uni_state_shift, ==, 0);
    g_assert_cmpint(L.co_tlbc, ==, 0);
    g_assert_cmpint(L.f_tlbc_index, ==, 0);
}

static void test_314_decoded(void)
{
    lg_py_layout_t L;
    fill(14, 14);
    const char *why = lg_pystack_offsets_decode(raw, sizeof(raw), 14, &L);
    g_assert_null(why);
    g_assert_cmpint(L.kind, ==, LG_PY_INTERP_FRAMES);
    g_assert_cmpint(L.ts_current, ==, 72);
    g_assert_cmpint(L.ts_cframe, ==, -1);
    g_assert_cmpint(L.ts_next, ==, 8);
    g_assert_cmpint(L.interp_main_ts, ==, 7360);
    g_assert_cmpint(L.f_back, ==, 8);
    g_assert_cmpint(L.f_code, ==, 0);
    g_assert_cmpint(L.f_lasti, ==, 56);
    g_assert_cmpint(L.f_owner, ==, 74);
    g_assert_cmpuint(L.ref_tag_bits, ==, 3); /* f_executable is a _PyStackRef */
    g_assert_cmpint(L.owner_incomplete, ==, 3);
    g_assert_cmpint(L.co_firsttraceable, ==, -1);
    g_assert_cmpint(L.co_filename, ==, 112);
    g_assert_cmpint(L.co_name, ==, 120);
    g_assert_cmpint(L.co_lines, ==, 136);
    g_assert_cmpint(L.co_firstlineno, ==, 68);
    g_assert_cmpint(L.co_code_adaptive, ==, 208);
    g_assert_cmpint(L.ob_type, ==, 8);
    g_assert_cmpint(L.bytes_size, ==, 16);
    g_assert_cmpint(L.bytes_data, ==, 32);
    g_assert_cmpint(L.uni_length, ==, 16);
    g_assert_cmpint(L.uni_state, ==, 32);
    g_assert_cmpint(L.ascii_size, ==, 40);
    g_assert_cmpint(L.compact_size, ==, 56); /* PyASCIIObject + utf8_length + utf8 */
}

static void test_315_decoded(void)
{
    lg_py_layout_t L;
    fill(15, 15);
    g_assert_null(lg_pystack_offsets_decode(raw, sizeof(raw), 15, &L));
    g_assert_cmpint(L.f_owner, ==, 74);
    g_assert_cmpint(L.co_code_adaptive, ==, 208);
    g_assert_cmpint(L.compact_size, ==, 56);
    /* 3.15's positions differ from 3.14's: read with 3.14's, the checks refuse them. */
    fill(15, 14);
    g_assert_nonnull(lg_pystack_offsets_decode(raw, sizeof(raw), 15, &L));
    fill(14, 15);
    g_assert_nonnull(lg_pystack_offsets_decode(raw, sizeof(raw), 14, &L));
}

static void test_newer_minor_uses_last_positions(void)
{
    lg_py_layout_t L;
    fill(16, 15);
    g_assert_null(lg_pystack_offsets_decode(raw, sizeof(raw), 16, &L));
    g_assert_cmpint(L.minor, ==, 16);
    g_assert_cmpint(L.f_lasti, ==, 56);
}

/* Each refusal: the reason, and *out untouched. */
static void refused(int minor, const char *reason_part)
{
    lg_py_layout_t L;
    memset(&L, 0x5A, sizeof(L));
    const char *why = lg_pystack_offsets_decode(raw, sizeof(raw), minor, &L);
    g_assert_nonnull(why);
    g_test_message("refused: %s", why);
    g_assert_nonnull(strstr(why, reason_part));
    g_assert_cmpint(L.minor, ==, 0x5A5A5A5A);
}

static void test_refusals(void)
{
    fill(14, 14);
    raw[0] = 'X';
    refused(14, "cookie");

    fill(14, 14);
    refused(15, "version"); /* Py_GetVersion says 3.15, the offsets 3.14 */

    fill(14, 14);
    put(16, 1); /* free-threaded, with a default build's object header */
    refused(14, "free-threaded build's");

    fill_ft(14);
    put(392, 0); /* free-threaded 3.14 without co_tlbc */
    refused(14, "per-thread bytecode");

    fill_ft(14);
    put(304, 400); /* tlbc_index beyond the interpreter frame */
    refused(14, "per-thread bytecode");

    fill(14, 14);
    put(248, 70); /* interpreter_frame.size below owner (74) + 1 */
    refused(14, "interpreter frame");

    fill(14, 14);
    put(176, 64); /* thread_state.size below current_frame (72) + 8 */
    refused(14, "thread state");

    fill(14, 14);
    put(312, 200); /* code_object.size at or below co_code_adaptive (208) */
    refused(14, "code object");

    fill(14, 14);
    put(400, 32); /* a free-threaded object header (ob_tid, ... ob_type at 24) */
    put(408, 24);
    refused(14, "object header");

    fill(14, 14);
    put(640, 80); /* asciiobject_size beyond unicode_object.size */
    refused(14, "str object");

    fill(14, 14);
    put(600, 48); /* bytes ob_size beyond bytes_object.size */
    refused(14, "bytes object");

    fill(14, 14);
    put(48, 1ULL << 40); /* interpreter_state.size: a pointer where a size belongs */
    refused(14, "size out of range");

    fill(14, 14);
    put(72, 300000); /* threads_head beyond the interpreter state */
    refused(14, "interpreter state");

    fill(12, 14);
    refused(12, "before CPython 3.13");

    lg_py_layout_t L;
    fill(14, 14);
    g_assert_nonnull(lg_pystack_offsets_decode(raw, 700, 14, &L)); /* shorter than 3.14's 760 bytes */
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pystack_offsets/314_decoded", test_314_decoded);
    g_test_add_func("/pystack_offsets/315_decoded", test_315_decoded);
    g_test_add_func("/pystack_offsets/newer_minor_uses_last_positions", test_newer_minor_uses_last_positions);
    g_test_add_func("/pystack_offsets/free_threaded_decoded", test_free_threaded_decoded);
    g_test_add_func("/pystack_offsets/refusals", test_refusals);
    return g_test_run();
}
