/* test_demangle.c: unit tests of src/base/demangle.c and the parser behind it (demangle_parse.c,
 * demangle_lex.c, demangle_sizes.c): short names, label type, parameter sizes, full names. The
 * mangled names are real: emitted by nvcc 13 for the PyTorch-shaped
 * declarations in tests/fuzz/nvcc_names.cu (`nvcc -cudart shared -arch=sm_80 -c [-DOLD]
 * [-rdc=true]`, then `strings x.o | grep ^_Z`), plus a CUDA 13 one.
 * Run: make build/tests/unit/test_demangle && build/tests/unit/test_demangle
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

#define ANON "_ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv"

typedef struct vec {
    const char *mangled;
    const char *short_name;
    char last_targ;       /* 0: not a builtin */
    int n;                /* -1: not sizable */
    int sizes[12];
} vec_t;

static const vec_t vectors[] = {
    {"_ZN2at6native41_GLOBAL__N__439a64bd_9_libnll_cu_ee528b0e38nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S6_bllll",
     "nll_loss_forward_reduce_cuda_kernel_2d", 'l', 10, {8, 8, 8, 8, 8, 1, 8, 8, 8, 8}},
    {ANON "38nll_loss_forward_no_reduce_cuda_kernelIflEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPKT0_PS4_PKS4_ll",
     "nll_loss_forward_no_reduce_cuda_kernel", 'l', 7, {8, 40, 8, 8, 8, 8, 8}},
    {ANON "38nll_loss_forward_no_reduce_cuda_kernelIN3c104HalfEhEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPKT0_PS6_PKS6_ll",
     "nll_loss_forward_no_reduce_cuda_kernel", 'h', 7, {8, 40, 8, 8, 8, 8, 8}},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_1dIdhEEvPT_S4_PKS3_PKT0_S6_bll",
     "nll_loss_forward_reduce_cuda_kernel_1d", 'h', 8, {8, 8, 8, 8, 8, 1, 8, 8}},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_2dIN3c108BFloat16EfhEEvPT_S6_PKS5_PKT1_S8_bllll",
     "nll_loss_forward_reduce_cuda_kernel_2d", 'h', 10, {8, 8, 8, 8, 8, 1, 8, 8, 8, 8}},
    {ANON "39nll_loss_backward_no_reduce_cuda_kernelIflEEviPKT0_NS_27GenericPackedTensorAccessorIKT_Lm1ENS_16DefaultPtrTraitsElEENS6_IS7_Lm2ES9_lEEPS8_ll",
     "nll_loss_backward_no_reduce_cuda_kernel", 'l', 7, {4, 8, 24, 40, 8, 8, 8}},
    {ANON "39nll_loss_backward_reduce_cuda_kernel_1dIflEEvPT_PKS3_S6_PKT0_S6_bll",
     "nll_loss_backward_reduce_cuda_kernel_1d", 'l', 8, {8, 8, 8, 8, 8, 1, 8, 8}},
    {ANON "39nll_loss_backward_reduce_cuda_kernel_2dIfhEEvPT_PKS3_PKT0_S6_S6_biill",
     "nll_loss_backward_reduce_cuda_kernel_2d", 'h', 10, {8, 8, 8, 8, 8, 1, 4, 4, 8, 8}},
    {ANON "35nll_loss2d_forward_no_reduce_kernelIfEEvlNS_27GenericPackedTensorAccessorIT_Lm4ENS_16DefaultPtrTraitsElEENS3_IlLm3ES5_lEENS3_IS4_Lm3ES5_lEEPKS4_l",
     "nll_loss2d_forward_no_reduce_kernel", 'f', 6, {8, 72, 56, 56, 8, 8}},
    {ANON "25nll_loss2d_forward_kernelIffiEEvPT_S4_PKS3_PKlS6_iiil", "nll_loss2d_forward_kernel", 'i', 9,
     {8, 8, 8, 8, 8, 4, 4, 4, 8}},
    {ANON "36nll_loss2d_backward_no_reduce_kernelIN3c104HalfEEEvlNS_27GenericPackedTensorAccessorIlLm3ENS_16DefaultPtrTraitsElEENS5_IT_Lm3ES6_lEENS5_IS8_Lm4ES6_lEEPKS8_l",
     "nll_loss2d_backward_no_reduce_kernel", 0, 6, {8, 56, 56, 72, 8, 8}},
    {ANON "26nll_loss2d_backward_kernelIfEEvPT_PKS3_PKlS6_S6_biiil", "nll_loss2d_backward_kernel", 'f', 10,
     {8, 8, 8, 8, 8, 1, 4, 4, 4, 8}},
    /* 1.10-1.12 widths (-DOLD) */
    {ANON "38nll_loss_forward_no_reduce_cuda_kernelIflEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPT0_PS4_S9_ii",
     "nll_loss_forward_no_reduce_cuda_kernel", 'l', 7, {8, 40, 8, 8, 8, 4, 4}},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_S4_PT0_S4_biiil",
     "nll_loss_forward_reduce_cuda_kernel_2d", 'l', 10, {8, 8, 8, 8, 8, 1, 4, 4, 4, 8}},
    /* internal-linkage form nvcc also emits (L before the name) */
    {ANON "L38nll_loss_forward_reduce_cuda_kernel_1dIdhEEvPT_S4_PKS3_PKT0_S6_bll",
     "nll_loss_forward_reduce_cuda_kernel_1d", 'h', 8, {8, 8, 8, 8, 8, 1, 8, 8}},
    /* THCUNN, global namespace, THCDeviceTensor by value */
    {"_Z42cunn_ClassNLLCriterion_updateOutput_kernelIffEvPT_S1_S1_PlS1_iiiil",
     "cunn_ClassNLLCriterion_updateOutput_kernel", 'f', 10, {8, 8, 8, 8, 8, 4, 4, 4, 4, 8}},
    {"_Z47ClassNLLCriterion_updateOutput_no_reduce_kernelIfEvi15THCDeviceTensorIT_Li2EiN2at16DefaultPtrTraitsEES0_IlLi1EiS3_ES0_IS1_Li1EiS3_EPS1_ii",
     "ClassNLLCriterion_updateOutput_no_reduce_kernel", 'f', 7, {4, 24, 16, 16, 8, 4, 4}},
    {"_Z49cunn_SpatialClassNLLCriterion_updateOutput_kernelIffEvPT_S1_S1_PlS1_iiiiil",
     "cunn_SpatialClassNLLCriterion_updateOutput_kernel", 'f', 11, {8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 8}},
    {"_Z54SpatialClassNLLCriterion_updateOutput_no_reduce_kernelIfEvl15THCDeviceTensorIT_Li4EiN2at16DefaultPtrTraitsEES0_IlLi3EiS3_ES0_IS1_Li3EiS3_EPS1_l",
     "SpatialClassNLLCriterion_updateOutput_no_reduce_kernel", 'f', 6, {8, 40, 32, 32, 8, 8}},
    /* -rdc=true prefix */
    {"__nv_static_25__a72d9355_4_k_cu__Z4instv__ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv25nll_loss2d_forward_kernelIffiEEvPT_S4_PKS3_PKlS6_iiil",
     "nll_loss2d_forward_kernel", 'i', 9, {8, 8, 8, 8, 8, 4, 4, 4, 8}},
    {"__nv_static_27__ec4c335d_6_nll_cu_35aa4975__ZN2at6native38_GLOBAL__N__ec4c335d_6_nll_cu_35aa497538nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S6_bllll",
     "nll_loss_forward_reduce_cuda_kernel_2d", 'l', 10, {8, 8, 8, 8, 8, 1, 8, 8, 8, 8}},
    /* plain C++ */
    {"_Z3fooiPcd", "foo", 0, 3, {4, 8, 8}},
    {"_ZN3bar3bazEv", "baz", 0, 0, {0}},
    /* TensorInfo by value: u32 and u64 index types */
    {"_Z6gatherIfjEvN2at4cuda6detail10TensorInfoIT_T0_EES6_",
     "gather", 'j', 2, {216, 216}},
    {"_Z6gatherIfmEvN2at4cuda6detail10TensorInfoIT_T0_EE", "gather", 'm', 1, {416}},
    /* PackedTensorAccessor32 via its generic form with int index */
    {"_Z1kIfEvN2at27GenericPackedTensorAccessorIT_Lm3ENS0_16DefaultPtrTraitsEiEE", "k", 'f', 1, {32}},
    /* an unknown class by value cannot be sized */
    {"_Z1kIfEv6Opaquel", "k", 'f', -1, {0}},
    /* 2.10 and later (names from the 2.15.0 wheel): torch::headeronly accessors,
     * <TensorAccessorT, IndexBoundsCheck<N, long>, T, N, PtrTraits, long> */
    {"_ZN2at6native39_GLOBAL__N__6bd09d29_7_Loss_cu_5b0651e138nll_loss_forward_no_reduce_cuda_kernelIflEEvlN5torch10headeronly6detail27GenericPackedTensorAccessorINS5_14TensorAccessorIN3c108ArrayRefIlEET_Lm1ENS4_16DefaultPtrTraitsElEENS_6detail16IndexBoundsCheckILm2ElEESB_Lm2ESC_lEEPKT0_PSB_PKSB_ll",
     "nll_loss_forward_no_reduce_cuda_kernel", 'l', 7, {8, 40, 8, 8, 8, 8, 8}},
    {"_ZN2at6native39_GLOBAL__N__6bd09d29_7_Loss_cu_5b0651e139nll_loss_backward_no_reduce_cuda_kernelIflEEviPKT0_N5torch10headeronly6detail27GenericPackedTensorAccessorINS8_14TensorAccessorIN3c108ArrayRefIlEEKT_Lm0ENS7_16DefaultPtrTraitsElEENS_6detail16IndexBoundsCheckILm1ElEESF_Lm1ESG_lEENS9_INSA_ISD_SE_Lm1ESG_lEENSJ_ILm2ElEESE_Lm2ESG_lEEPSF_ll",
     "nll_loss_backward_no_reduce_cuda_kernel", 'l', 7, {4, 8, 24, 40, 8, 8, 8}},
    {"_ZN2at6native45_GLOBAL__N__b215459d_12_NLLLoss2d_cu_e9278b4635nll_loss2d_forward_no_reduce_kernelIfEEvlN5torch10headeronly6detail27GenericPackedTensorAccessorINS5_14TensorAccessorIN3c108ArrayRefIlEET_Lm3ENS4_16DefaultPtrTraitsElEENS_6detail16IndexBoundsCheckILm4ElEESB_Lm4ESC_lEENS6_INS7_ISA_lLm2ESC_lEENSF_ILm3ElEElLm3ESC_lEENS6_INS7_ISA_SB_Lm2ESC_lEESJ_SB_Lm3ESC_lEEPKSB_l",
     "nll_loss2d_forward_no_reduce_kernel", 'f', 6, {8, 72, 56, 56, 8, 8}},
    {"_ZN2at6native45_GLOBAL__N__b215459d_12_NLLLoss2d_cu_e9278b4636nll_loss2d_backward_no_reduce_kernelIfEEvlN5torch10headeronly6detail27GenericPackedTensorAccessorINS5_14TensorAccessorIN3c108ArrayRefIlEElLm2ENS4_16DefaultPtrTraitsElEENS_6detail16IndexBoundsCheckILm3ElEElLm3ESB_lEENS6_INS7_ISA_T_Lm2ESB_lEESF_SH_Lm3ESB_lEENS6_INS7_ISA_SH_Lm3ESB_lEENSE_ILm4ElEESH_Lm4ESB_lEEPKSH_l",
     "nll_loss2d_backward_no_reduce_kernel", 'f', 6, {8, 56, 56, 72, 8, 8}},
};

static void test_vectors(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(vectors); i++) {
        const vec_t *v = &vectors[i];
        char s[128];
        g_test_message("%s", v->mangled);
        g_assert_true(lg_demangle_short(v->mangled, s, sizeof s));
        g_assert_cmpstr(s, ==, v->short_name);
        g_assert_cmpint(lg_demangle_last_template_arg(v->mangled), ==, v->last_targ);
        size_t sz[LG_MAX_PARAMS];
        int n = lg_demangle_param_sizes(v->mangled, sz, LG_MAX_PARAMS);
        g_assert_cmpint(n, ==, v->n);
        for (int k = 0; k < n; k++)
            g_assert_cmpuint(sz[k], ==, (size_t)v->sizes[k]);
    }
}

static void test_not_mangled(void)
{
    char s[16];
    g_assert_false(lg_demangle_short("cudaMemcpy", s, sizeof s));
    g_assert_cmpstr(s, ==, "cudaMemcpy");
    g_assert_false(lg_demangle_short("a_very_long_unmangled_name", s, sizeof s));
    g_assert_cmpstr(s, ==, "a_very_long_unm"); /* truncated to the buffer */
    g_assert_false(lg_demangle_short(NULL, s, sizeof s));
    g_assert_cmpstr(s, ==, "");
    g_assert_cmpint(lg_demangle_param_sizes("my_kernel", (size_t[4]){0}, 4), ==, -1);
    g_assert_cmpint(lg_demangle_last_template_arg("my_kernel"), ==, 0);
    g_assert_cmpint(lg_demangle_last_template_arg(NULL), ==, 0);
}

static void test_short_truncates(void)
{
    char s[8];
    g_assert_true(lg_demangle_short(vectors[0].mangled, s, sizeof s));
    g_assert_cmpstr(s, ==, "nll_los");
}

/* Truncated and corrupted names: never a crash or a read past the end (ASan/fuzzer prove the
 * latter), never a size list from a name that was cut. */
static void test_truncated(void)
{
    const char *m = vectors[1].mangled;
    size_t len = strlen(m);
    for (size_t cut = 0; cut < len; cut++) {
        char *t = g_strndup(m, cut);
        char s[128];
        size_t sz[LG_MAX_PARAMS];
        lg_demangle_short(t, s, sizeof s);
        int n = lg_demangle_param_sizes(t, sz, LG_MAX_PARAMS);
        g_assert_true(n == -1 || n < 7); /* a cut signature never claims the full layout */
        lg_demangle_last_template_arg(t);
        g_free(t);
    }
    size_t sz[4];
    g_assert_cmpint(lg_demangle_param_sizes("_Z1fIiEvS9_", sz, 4), ==, -1); /* bad substitution */
    g_assert_cmpint(lg_demangle_param_sizes("_Z1fIiEvT5_", sz, 4), ==, -1); /* bad template param */
    g_assert_cmpint(lg_demangle_param_sizes("_Z4000f", sz, 4), ==, -1);     /* length past the end */
    g_assert_cmpint(lg_demangle_param_sizes(vectors[0].mangled, sz, 4), ==, -1); /* too many for cap */
}

static void test_full(void)
{
    char *f = lg_demangle_full(vectors[0].mangled);
    g_assert_nonnull(f);
    /* libstdc++ is on every build machine; without it the short name comes back */
    if (strstr(f, "(anonymous namespace)"))
        g_assert_nonnull(strstr(f, "nll_loss_forward_reduce_cuda_kernel_2d<float, long>(float*"));
    else
        g_assert_cmpstr(f, ==, "nll_loss_forward_reduce_cuda_kernel_2d");
    free(f);
    /* the -rdc prefix is removed before __cxa_demangle sees the name */
    f = lg_demangle_full(vectors[19].mangled);
    g_assert_nonnull(strstr(f, "nll_loss2d_forward_kernel"));
    free(f);
    f = lg_demangle_full("plain_c_kernel");
    g_assert_cmpstr(f, ==, "plain_c_kernel");
    free(f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/demangle/nvcc-vectors", test_vectors);
    g_test_add_func("/demangle/not-mangled", test_not_mangled);
    g_test_add_func("/demangle/short-truncates", test_short_truncates);
    g_test_add_func("/demangle/truncated-input", test_truncated);
    g_test_add_func("/demangle/full", test_full);
    return g_test_run();
}
