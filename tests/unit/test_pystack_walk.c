/* test_pystack_walk.c: unit tests of src/base/pystack.c's frame walk on a free-threaded CPython
 * 3.14 (3.14t), which no interpreter on the test machines is: this binary plays the
 * interpreter. It defines the symbols pystack.c looks up with dlsym(RTLD_DEFAULT) (linked with
 * -rdynamic: Py_GetVersion, _PyRuntime with free-threaded debug offsets, the type objects,
 * PyGILState_GetThisThreadState, PyCode_Addr2Line) and lays out thread state, frames, code
 * objects, strings and the per-thread bytecode array the way 3.14t's headers do (the offsets
 * are _Py_DebugOffsets_INIT's values over Debian's 3.14.10 headers with Py_GIL_DISABLED).
 * Checked: the 32-byte object header, the string state 6 bits up, the tagged f_executable, and
 * that a frame on a worker thread's bytecode copy (tlbc_index 1) gets its offset from that copy,
 * not from the code object's own; an index past the array gives the first line, never a wrong
 * one. tests/e2e/test_pystack.sh runs the same walk in real interpreters (3.13t included).
 * Run: make build/tests/unit/test_pystack_walk && build/tests/unit/test_pystack_walk
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "hooks/hooks.h"

#define EXPORT __attribute__((visibility("default")))

/* The interpreter's side. */
EXPORT unsigned char _PyRuntime[LG_PY_DEBUG_OFFSETS_LEN];
EXPORT _Alignas(16) unsigned char PyCode_Type[64], PyUnicode_Type[64], PyBytes_Type[64];
static _Alignas(16) unsigned char tstate[832];
EXPORT const char *Py_GetVersion(void) { return "3.14.0 (fake, free-threaded)"; }
EXPORT int Py_IsInitialized(void) { return 1; }
EXPORT void *PyGILState_GetThisThreadState(void) { return tstate; }
/* The byte offset comes back as the line, so the tests see which offset the walk computed. */
EXPORT int PyCode_Addr2Line(void *code, int addr)
{
    (void)code;
    return 1000 + addr;
}

enum { CODE_SIZE = 240, CO_FILENAME = 128, CO_NAME = 136, CO_LINETABLE = 152, CO_FIRSTLINENO = 84,
       CO_CODE_ADAPTIVE = 232, CO_TLBC = 224, FR_PREVIOUS = 8, FR_INSTR_PTR = 56, FR_OWNER = 78,
       FR_TLBC_INDEX = 72, TS_CURRENT_FRAME = 72, OB_TYPE = 24 };

static void put(int at, uint64_t v) { memcpy(_PyRuntime + at, &v, sizeof(v)); }

/* _PyRuntime.debug_offsets of a 3.14t: the positions are 3.14's (pystack_offsets.c), the values
 * a free-threaded build's. */
static void fill_runtime(void)
{
    memcpy(_PyRuntime, "xdebugpy", 8);
    put(8, 0x030E00F0);   /* 3.14.0 final */
    put(16, 1);           /* free_threaded */
    static const int pos_val[][2] = {
        {48, 249976}, {72, 7344}, {80, 7360},                          /* interpreter_state */
        {176, 832}, {192, 8}, {208, TS_CURRENT_FRAME},                 /* thread_state */
        {248, 96}, {256, FR_PREVIOUS}, {264, 0}, {272, FR_INSTR_PTR},  /* interpreter_frame */
        {288, FR_OWNER}, {304, FR_TLBC_INDEX},
        {312, CODE_SIZE}, {320, CO_FILENAME}, {328, CO_NAME}, {344, CO_LINETABLE}, /* code_object */
        {352, CO_FIRSTLINENO}, {384, CO_CODE_ADAPTIVE}, {392, CO_TLBC},
        {400, 32}, {408, OB_TYPE},                                     /* pyobject */
        {592, 56}, {600, 32}, {608, 48},                               /* bytes_object */
        {616, 80}, {624, 48}, {632, 32}, {640, 56},                    /* unicode_object */
    };
    for (size_t i = 0; i < sizeof(pos_val) / sizeof(pos_val[0]); i++)
        put(pos_val[i][0], (uint64_t)pos_val[i][1]);
}

static void set_ptr(void *obj, int off, const void *p) { memcpy((char *)obj + off, &p, sizeof(p)); }

/* A compact ASCII str of a free-threaded build: state's kind, compact and ascii at bits 8, 11
 * and 12 (`interned` is the unsigned char below them). */
static void make_str(unsigned char *obj, const char *text)
{
    memset(obj, 0, 128);
    set_ptr(obj, OB_TYPE, PyUnicode_Type);
    int64_t len = (int64_t)strlen(text);
    memcpy(obj + 32, &len, sizeof(len));
    uint32_t state = (1u << 8) | (1u << 11) | (1u << 12) | 1u /* interned */;
    memcpy(obj + 48, &state, sizeof(state));
    memcpy(obj + 56, text, (size_t)len + 1);
}

static _Alignas(16) unsigned char file_str[128], outer_name[128], inner_name[128], table[64];
static _Alignas(16) unsigned char outer_code[CODE_SIZE + 64], inner_code[CODE_SIZE + 64];
static _Alignas(16) unsigned char inner_copy[64]; /* the worker thread's copy of inner's bytecode */
static _Alignas(16) unsigned char tlbc_array[8 + 2 * 8];
static _Alignas(16) unsigned char outer_frame[96], inner_frame[96];

static void make_code(unsigned char *code, unsigned char *name, int firstline)
{
    memset(code, 0, CODE_SIZE);
    set_ptr(code, OB_TYPE, PyCode_Type);
    set_ptr(code, CO_FILENAME, file_str);
    set_ptr(code, CO_NAME, name);
    set_ptr(code, CO_LINETABLE, table);
    memcpy(code + CO_FIRSTLINENO, &firstline, sizeof(firstline));
}

static void make_frame(unsigned char *frame, unsigned char *code, const unsigned char *previous,
                       const unsigned char *instr, int32_t tlbc_index)
{
    memset(frame, 0, 96);
    set_ptr(frame, 0, (const void *)((uintptr_t)code | 1)); /* a deferred _PyStackRef */
    set_ptr(frame, FR_PREVIOUS, previous);
    set_ptr(frame, FR_INSTR_PTR, instr);
    memcpy(frame + FR_TLBC_INDEX, &tlbc_index, sizeof(tlbc_index));
}

/* A worker thread: train() (on the code object's own bytecode, index 0) calls step(), which
 * runs on the thread's copy (index 1 of inner's co_tlbc). */
static void build(int32_t inner_index)
{
    fill_runtime();
    make_str(file_str, "/srv/job/train.py");
    make_str(outer_name, "train");
    make_str(inner_name, "step");
    memset(table, 0, sizeof table);
    set_ptr(table, OB_TYPE, PyBytes_Type);
    int64_t table_len = 8;
    memcpy(table + 32, &table_len, sizeof(table_len));
    make_code(outer_code, outer_name, 10);
    make_code(inner_code, inner_name, 20);
    int64_t n = 2;
    memcpy(tlbc_array, &n, sizeof(n));
    set_ptr(tlbc_array, 8, inner_code + CO_CODE_ADAPTIVE);
    set_ptr(tlbc_array, 16, inner_copy);
    set_ptr(inner_code, CO_TLBC, tlbc_array);
    set_ptr(outer_code, CO_TLBC, NULL);
    make_frame(outer_frame, outer_code, NULL, outer_code + CO_CODE_ADAPTIVE + 12, 0);
    make_frame(inner_frame, inner_code, outer_frame, inner_copy + 6, inner_index);
    memset(tstate, 0, sizeof tstate);
    set_ptr(tstate, TS_CURRENT_FRAME, inner_frame);
}

static void test_free_threaded_walk(void)
{
    build(1);
    lg_py_stack_t s;
    lg_pystack_capture(&s);
    g_assert_cmpint(s.n, ==, 2);
    g_assert_false(s.from_main_thread);
    /* Innermost last. */
    g_assert_cmpstr(s.frames[0].function, ==, "train");
    g_assert_cmpstr(s.frames[0].file, ==, "/srv/job/train.py");
    g_assert_cmpint(s.frames[0].line, ==, 1012); /* offset 12 into its own bytecode */
    g_assert_cmpstr(s.frames[1].function, ==, "step");
    g_assert_cmpint(s.frames[1].line, ==, 1006); /* offset 6 into the thread's copy */

    /* Recorded at a launch with plain loads, resolved later: the same. */
    lg_py_site_t site;
    lg_pystack_record(&site);
    lg_pystack_resolve(&site, &s);
    g_assert_cmpint(s.n, ==, 2);
    g_assert_cmpint(s.frames[1].line, ==, 1006);

    lg_py_info_t info;
    lg_pystack_info(&info);
    g_assert_true(info.python);
    g_assert_true(info.free_threaded);
    g_assert_true(info.stacks);
    g_assert_null(info.why);
    g_assert_cmpstr(info.version, ==, "3.14.0");
}

static void test_index_past_the_array(void)
{
    /* A thread index the array does not have (another thread replaced it meanwhile): no
     * offset, so the frame's first line, never an offset into the wrong copy. */
    build(7);
    lg_py_stack_t s;
    lg_pystack_capture(&s);
    g_assert_cmpint(s.n, ==, 2);
    g_assert_cmpstr(s.frames[1].function, ==, "step");
    g_assert_cmpint(s.frames[1].line, ==, 20);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pystack_walk/free_threaded_314", test_free_threaded_walk);
    g_test_add_func("/pystack_walk/index_past_the_array", test_index_past_the_array);
    return g_test_run();
}
