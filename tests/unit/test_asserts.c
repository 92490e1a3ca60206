/* test_asserts.c: asserts.c, the torch._assert_async condition check: the element type of every
 * instance of _assert_async_cuda_kernel in real torch 2.10 (cu128) and 2.15 (cu132) libtorch_cuda
 * (names read from their cubins), zero as the kernel's `!= 0` sees it (-0.0 is zero, NaN is
 * not), the op named from symbolized native frames (demangled or mangled), and the built-in spec
 * matching those names with the layout read from the cubins (a pointer, the 256-byte Msg).
 * Run: build/tests/unit/test_asserts (or LG_TESTS=test_asserts bash tests/run.sh).
 */
#include "hooks/hooks.h"

#include <glib.h>
#include <math.h>
#include <string.h>

/* The instances of torch 2.15.0+cu132 (2.10.0+cu128 has the same names and layout). */
static const struct {
    const char *mangled;
    int bytes, float_bits, parts;
    const char *name;
} instances[] = {
    {"_ZN2at6native25_assert_async_cuda_kernelIbEEvPKT_NS0_3MsgE", 1, 0, 1, "bool"},
    {"_ZN2at6native25_assert_async_cuda_kernelIhEEvPKT_NS0_3MsgE", 1, 0, 1, "uint8"},
    {"_ZN2at6native25_assert_async_cuda_kernelIaEEvPKT_NS0_3MsgE", 1, 0, 1, "int8"},
    {"_ZN2at6native25_assert_async_cuda_kernelIsEEvPKT_NS0_3MsgE", 2, 0, 1, "int16"},
    {"_ZN2at6native25_assert_async_cuda_kernelIiEEvPKT_NS0_3MsgE", 4, 0, 1, "int32"},
    {"_ZN2at6native25_assert_async_cuda_kernelIlEEvPKT_NS0_3MsgE", 8, 0, 1, "int64"},
    {"_ZN2at6native25_assert_async_cuda_kernelIfEEvPKT_NS0_3MsgE", 4, 32, 1, "float32"},
    {"_ZN2at6native25_assert_async_cuda_kernelIdEEvPKT_NS0_3MsgE", 8, 64, 1, "float64"},
    {"_ZN2at6native25_assert_async_cuda_kernelIN3c104HalfEEEvPKT_NS0_3MsgE", 2, 16, 1, "float16"},
    {"_ZN2at6native25_assert_async_cuda_kernelIN3c108BFloat16EEEvPKT_NS0_3MsgE", 2, 16, 1, "bfloat16"},
    {"_ZN2at6native25_assert_async_cuda_kernelEPKN3c107complexIfEENS0_3MsgE", 8, 32, 2, "complex64"},
    {"_ZN2at6native25_assert_async_cuda_kernelEPKN3c107complexIdEENS0_3MsgE", 16, 64, 2, "complex128"},
    /* nvcc's name for a static kernel in the registration of an application's own copy */
    {"__nv_static_51__tmpxft_00001234_00000000_7_assert_async_cpp1_ii_0123abcd__ZN2at6native25_assert_async_cuda_"
     "kernelIbEEvPKT_NS0_3MsgE",
     1, 0, 1, "bool"},
};

static void test_elements(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(instances); i++) {
        lg_assert_elem_t e;
        g_test_message("%s", instances[i].mangled);
        g_assert_cmpint(lg_asserts_element(instances[i].mangled, &e), ==, 0);
        g_assert_cmpint(e.bytes, ==, instances[i].bytes);
        g_assert_cmpint(e.float_bits, ==, instances[i].float_bits);
        g_assert_cmpint(e.parts, ==, instances[i].parts);
        g_assert_cmpstr(e.name, ==, instances[i].name);
    }
    lg_assert_elem_t e;
    g_assert_cmpint(lg_asserts_element(NULL, &e), ==, -1);
    g_assert_cmpint(lg_asserts_element("_ZN2at6native25_assert_async_cuda_kernelIjEEvPKT_NS0_3MsgE", &e), ==, -1);
    g_assert_cmpint(lg_asserts_element("_ZN2at6native25_assert_async_cuda_kernelIN3c104HalfEiEEvPKT_NS0_3MsgE", &e),
                    ==, -1);
    g_assert_cmpint(lg_asserts_element("_ZN2at6native38nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_", &e), ==, -1);
}

static bool zero_of(const char *mangled, const void *bytes)
{
    lg_assert_elem_t e;
    g_assert_cmpint(lg_asserts_element(mangled, &e), ==, 0);
    return lg_asserts_is_zero(&e, bytes);
}

static void test_zero(void)
{
    unsigned char b0 = 0, b1 = 1;
    g_assert_true(zero_of(instances[0].mangled, &b0));
    g_assert_false(zero_of(instances[0].mangled, &b1));
    int64_t l0 = 0, lneg = INT64_MIN, l256 = 256;
    g_assert_true(zero_of(instances[5].mangled, &l0));
    g_assert_false(zero_of(instances[5].mangled, &lneg)); /* the top bit of an integer is not a sign to drop */
    g_assert_false(zero_of(instances[5].mangled, &l256));
    int16_t sneg = INT16_MIN;
    g_assert_false(zero_of(instances[3].mangled, &sneg));
    float f0 = 0.0f, fneg0 = -0.0f, fnan = NAN, ftiny = 1e-45f;
    g_assert_true(zero_of(instances[6].mangled, &f0));
    g_assert_true(zero_of(instances[6].mangled, &fneg0));
    g_assert_false(zero_of(instances[6].mangled, &fnan));
    g_assert_false(zero_of(instances[6].mangled, &ftiny));
    double dneg0 = -0.0, d1 = 1.0;
    g_assert_true(zero_of(instances[7].mangled, &dneg0));
    g_assert_false(zero_of(instances[7].mangled, &d1));
    uint16_t hneg0 = 0x8000, hnan = 0x7e00, bf1 = 0x3f80;
    g_assert_true(zero_of(instances[8].mangled, &hneg0));
    g_assert_false(zero_of(instances[8].mangled, &hnan));
    g_assert_false(zero_of(instances[9].mangled, &bf1));
    float c00[2] = {-0.0f, 0.0f}, c01[2] = {0.0f, 1.0f};
    g_assert_true(zero_of(instances[10].mangled, c00));
    g_assert_false(zero_of(instances[10].mangled, c01)); /* the imaginary part counts */
    double z00[2] = {0.0, -0.0}, z10[2] = {2.0, 0.0};
    g_assert_true(zero_of(instances[11].mangled, z00));
    g_assert_false(zero_of(instances[11].mangled, z10));
}

static void op_of(const char *const *frames, int n, const char *want)
{
    char lines[8][256];
    for (int i = 0; i < n; i++)
        g_strlcpy(lines[i], frames[i], sizeof lines[i]);
    char op[64];
    lg_asserts_op(lines, n, op, sizeof op);
    g_assert_cmpstr(op, ==, want);
}

static void test_op(void)
{
    /* innermost first, as stack.c symbolizes */
    const char *index_put[] = {
        "libtorch_cuda.so+0x1 (void at::native::_assert_async_cuda_kernel<bool>(bool const*, at::native::Msg)+0x9)",
        "libtorch_cuda.so+0x2 (at::native::_assert_async_msg_cuda(at::Tensor const&, std::basic_string_view<char>)+0x1)",
        "libtorch_cpu.so+0x3 (at::_ops::_assert_async_msg::call(at::Tensor const&, std::basic_string_view<char>)+0x4)",
        "libtorch_cuda.so+0x4 (at::native::index_put_with_sort_kernel(at::Tensor&, c10::List<...> const&)+0x5)",
        "libtorch_cpu.so+0x5 (at::_ops::_index_put_impl_::call(at::Tensor&, c10::List<...> const&, bool, bool)+0x6)",
        "libtorch_cpu.so+0x6 (at::_ops::index_put_::call(at::Tensor&, c10::List<...> const&, at::Tensor const&, bool)+0x7)",
        "libtorch_python.so+0x7",
    };
    op_of(index_put, G_N_ELEMENTS(index_put), "index_put_");
    /* libstdc++ not loaded: the mangled names */
    const char *mangled[] = {
        "libtorch_cpu.so+0x3 (_ZN2at4_ops13_assert_async4callERKNS_6TensorE+0x4)",
        "libtorch_cpu.so+0x6 (_ZN2at4_ops10index_put_4callERNS_6TensorE+0x7)",
    };
    op_of(mangled, G_N_ELEMENTS(mangled), "index_put_");
    /* the user's own torch._assert_async: no other op on the stack */
    const char *own[] = {
        "libtorch_cpu.so+0x3 (at::_ops::_assert_async_msg::call(at::Tensor const&, std::basic_string_view<char>)+0x4)",
        "libtorch_python.so+0x8 (torch::autograd::THPVariable__assert_async(_object*, _object*, _object*)+0x1)",
    };
    op_of(own, G_N_ELEMENTS(own), "torch._assert_async");
    op_of(NULL, 0, "torch._assert_async");
    /* a truncated or hostile mangled length claims nothing */
    const char *bad[] = {"x (_ZN2at4_ops99abc+0x1)", "x (_ZN2at4_ops0+0x1)"};
    op_of(bad, G_N_ELEMENTS(bad), "torch._assert_async");
}

/* torch.multinomial's two messages (the launch's Msg, as lg_asserts_message reads it) name the op
 * and the sampling cause; any other message, a missing argument or another layout leave the
 * caller's op and text alone. */
static void test_meaning(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), >, 0);
    const size_t sizes[2] = {8, 256};
    char why[512] = "";
    const lg_spec_t *s = lg_registry_find(instances[0].mangled, sizes, 2, why, sizeof why);
    g_assert_nonnull(s);
    struct {
        const char *msg, *cause, *words;
    } k[] = {
        {"probability tensor contains either `inf`, `nan` or element < 0", "fp16_overflow", "float32"},
        {"invalid multinomial distribution (sum of probabilities <= 0)", "all_masked", "top-k"},
        {"probability tensor contains either", NULL, NULL}, /* a prefix is not the message */
        {"index out of bounds", NULL, NULL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        char msg[256] = {0}, op[64] = "index_put_", text[256] = "unchanged";
        g_strlcpy(msg, k[i].msg, sizeof msg);
        uint64_t cond = 0x1000;
        void *args[2] = {&cond, msg};
        char read[LG_ASSERT_MSG];
        lg_asserts_message(s, args, read, sizeof read); /* what the launch (or a late verdict) keeps */
        g_assert_cmpstr(read, ==, k[i].msg);
        const char *cause = lg_asserts_meaning(read, op, sizeof op, text, sizeof text);
        if (!k[i].cause) {
            g_assert_null(cause);
            g_assert_cmpstr(op, ==, "index_put_");
            g_assert_cmpstr(text, ==, "unchanged");
            continue;
        }
        g_assert_cmpstr(cause, ==, k[i].cause);
        g_assert_cmpstr(op, ==, "multinomial");
        g_assert_nonnull(strstr(text, "torch.multinomial"));
        g_assert_nonnull(strstr(text, k[i].words));
    }
    char op[64] = "x", text[256] = "y", read[LG_ASSERT_MSG] = "z";
    lg_asserts_message(s, NULL, read, sizeof read); /* no arguments: no message */
    g_assert_cmpstr(read, ==, "");
    lg_asserts_message(NULL, NULL, read, sizeof read);
    g_assert_cmpstr(read, ==, "");
    g_assert_null(lg_asserts_meaning(read, op, sizeof op, text, sizeof text));
    g_assert_null(lg_asserts_meaning(NULL, op, sizeof op, text, sizeof text));
}

static void test_spec(void)
{
    g_assert_cmpint(lg_registry_init_with(NULL, NULL), >, 0);
    const size_t sizes[2] = {8, 256};
    for (size_t i = 0; i < G_N_ELEMENTS(instances); i++) {
        char why[512] = "";
        const lg_spec_t *s = lg_registry_find(instances[i].mangled, sizes, 2, why, sizeof why);
        g_assert_nonnull(s);
        g_assert_true(s->assert_flag);
        g_assert_cmpstr(s->family, ==, "assert_async");
        /* without runtime sizes, from the name: the pointer and at::native::Msg */
        s = lg_registry_find(instances[i].mangled, NULL, -1, why, sizeof why);
        g_assert_nonnull(s);
        lg_dtype_t dt;
        g_assert_cmpint(lg_decode_dtype(s, instances[i].mangled, &dt, why, sizeof why), ==, 0);
    }
    size_t got[4];
    g_assert_cmpint(lg_demangle_param_sizes(instances[0].mangled, got, 4), ==, 2);
    g_assert_cmpuint(got[0], ==, 8);
    g_assert_cmpuint(got[1], ==, 256);
    /* another layout (an older kernel without the message) is not decoded */
    const size_t one[1] = {8};
    char why[512] = "";
    g_assert_null(lg_registry_find("_ZN2at6native25_assert_async_cuda_kernelIbEEvPKT_", one, 1, why, sizeof why));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/asserts/elements", test_elements);
    g_test_add_func("/asserts/zero", test_zero);
    g_test_add_func("/asserts/op", test_op);
    g_test_add_func("/asserts/spec", test_spec);
    g_test_add_func("/asserts/meaning", test_meaning);
    return g_test_run();
}
