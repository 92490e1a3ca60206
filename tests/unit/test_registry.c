/* test_registry.c: unit tests of src/kernels/registry.c: the built-in table (specs/pytorch.conf, as
 * embedded), the spec parser's errors on malformed files (src/kernels/spec.c, spec_value.c,
 * spec_closure.c, spec_text.c; each names file, line, group and field), user files through
 * lg_registry_init (a bad file is skipped, the built-in table
 * stays), and the layout check choosing the PyTorch version entry (>=1.13 vs 1.10-1.12 vs
 * THCUNN) for real nvcc-mangled names, and rejecting a name whose layout fits none.
 * Run: make build/tests/unit/test_registry && build/tests/unit/test_registry
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "hooks/hooks.h"

#define ANON "_ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv"

static GString *warnings;
static int n_warnings;

static void collect(const char *what, const char *detail)
{
    g_assert_cmpstr(what, ==, "spec_file");
    g_string_append_printf(warnings, "%s\n", detail);
    n_warnings++;
}

static void reset_warnings(void)
{
    if (!warnings)
        warnings = g_string_new(NULL);
    g_string_truncate(warnings, 0);
    n_warnings = 0;
}

/* index_add_ (indexFunc{Small,Large}Index: 5 alpha sizes; large also 64-bit index math) and
 * nn.EmbeddingBag (max, sum_mean; int64 and int32 ids) */
#define NAMED_INDEX_SPECS (5 + 5 + 5 + 4)
#define CLOSURE_SPECS 15 /* specs/pytorch.conf, closure section */
#define RANGE_SPECS 20 /* BCE's probability input: 2 kernels x 4 dtypes x 2 data-array types, 4 closures */
#define MARGIN_SPECS 6 /* MultiMarginLoss forward and backward, 3 margin sizes each */
#define ASSERT_SPECS 1 /* torch._assert_async's condition */
#define PROBS_SPECS       8 /* torch.multinomial: renormRowsL1 and the sampling kernel, 4 dtypes each */
#define UNPOOL_SPECS      1 /* max_unpooling2d_forward_kernel: ids against outputHeight * outputWidth */
#define BERNOULLI_SPECS   12 /* torch.bernoulli's p: 2 dtypes x 3 layouts x 2 Philox capture sizes */
#define RENORM_SPECS      1  /* embedding_renorm_wrap_indices_kernel: F.embedding(max_norm=)'s ids, 2.15 */
#define BUILTIN_SPECS \
    (31 + NAMED_INDEX_SPECS + CLOSURE_SPECS + RANGE_SPECS + MARGIN_SPECS + ASSERT_SPECS + PROBS_SPECS + UNPOOL_SPECS + \
     BERNOULLI_SPECS + RENORM_SPECS)

static void test_builtin(void)
{
    reset_warnings();
    int n = lg_registry_init_with(NULL, collect);
    g_assert_cmpint(n_warnings, ==, 0);
    g_assert_cmpint(n, ==, BUILTIN_SPECS);
    g_assert_cmpint(lg_registry_count(), ==, BUILTIN_SPECS);
    int families[4] = {0, 0, 0, 0}, assert_specs = 0, probs_specs = 0, bernoulli_specs = 0;
    for (int i = 0; i < n; i++) {
        const lg_spec_t *s = lg_registry_get(i);
        g_assert_nonnull(s);
        g_assert_cmpint(s->n_params, >, 0);
        g_assert_cmpint(s->target.param, <, s->n_params);
        g_assert_cmpint(s->param_sizes[s->target.param], >=, s->target.offset + 8);
        g_assert_true(g_str_has_prefix(s->source, "builtin:"));
        if (s->probs) { /* torch.multinomial's rows: count_field rows of n_classes weights */
            g_assert_true(s->range);
            g_assert_cmpstr(s->family, ==, "multinomial");
            g_assert_cmpint(s->n_classes.param, >=, 0);
            g_assert_cmpint(s->ignore_index.param, ==, -1);
            g_assert_cmpint(s->count_kind, ==, LG_COUNT_PARAM);
            g_assert_cmpstr(s->no_mask, !=, "");
            probs_specs++;
            continue;
        }
        if (s->range && strcmp(s->family, "bernoulli") == 0) { /* torch.bernoulli's p: [0, 1] */
            g_assert_cmpint(s->n_classes.param, ==, -1);
            g_assert_cmpint(s->target_ndim, >=, 1);
            g_assert_cmpstr(s->no_mask, !=, "");
            bernoulli_specs++;
            continue;
        }
        if (s->range) { /* BCE's probabilities: [0, 1], no class count */
            g_assert_cmpstr(s->family, ==, "binary_cross_entropy");
            g_assert_cmpint(s->n_classes.param, ==, -1);
            families[3]++;
            continue;
        }
        if (s->assert_flag) { /* torch._assert_async's condition: one element, no bound */
            g_assert_cmpstr(s->family, ==, "assert_async");
            g_assert_cmpint(s->n_classes.param, ==, -1);
            g_assert_cmpint(s->ignore_index.param, ==, -1);
            g_assert_cmpint(s->count_kind, ==, LG_COUNT_ONE);
            assert_specs++;
            continue;
        }
        g_assert_cmpint(s->n_classes.param, >=, 0);
        families[s->ids ? 2 : strcmp(s->family, "nll_loss2d") == 0]++;
        g_assert_true(!s->ids || strcmp(s->family, "index_select") == 0 || strcmp(s->family, "gather") == 0 ||
                      strcmp(s->family, "scatter") == 0 || g_str_has_prefix(s->family, "index") ||
                      strcmp(s->family, "take") == 0 || strcmp(s->family, "put") == 0 ||
                      strcmp(s->family, "embedding_bag") == 0 || strcmp(s->family, "max_unpool2d") == 0 ||
                      strcmp(s->family, "embedding") == 0);
        for (int j = 0; j < i; j++)
            g_assert_cmpstr(lg_registry_get(j)->name, !=, s->name);
    }
    g_assert_cmpint(families[0], ==, 6 + 6 + 6 + MARGIN_SPECS); /* Loss.cu >=1.13, 1.10-1.12, ClassNLLCriterion;
                                                                  * MultiMarginLoss.cu */
    g_assert_cmpint(families[1], ==, 5 + 4);     /* NLLLoss2d.cu (+ int64 index_t backward), SpatialClassNLLCriterion */
    g_assert_cmpint(families[2], ==, 1 + 1 + 2 + NAMED_INDEX_SPECS + 4 + 11 + UNPOOL_SPECS + RENORM_SPECS);
    /* vectorized gather, indexSelect small, large (u32, u64); the named ones; closures: gather,
     * scatter, scatter_fill x2, x[idx], index_put_, index_fill x2, index_copy_, take x3, put x3 */
    g_assert_cmpint(families[3], ==, RANGE_SPECS);
    g_assert_cmpint(assert_specs, ==, ASSERT_SPECS);
    g_assert_cmpint(probs_specs, ==, PROBS_SPECS);
    g_assert_cmpint(bernoulli_specs, ==, BERNOULLI_SPECS);
    g_assert_null(lg_registry_get(n));
    g_assert_null(lg_registry_get(-1));
}

typedef struct pick {
    const char *mangled;
    const char *spec; /* expected group; NULL: no layout fits */
} pick_t;

static const pick_t picks[] = {
    {ANON "38nll_loss_forward_no_reduce_cuda_kernelIflEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPKT0_PS4_PKS4_ll",
     "nll_loss_forward_no_reduce_cuda_kernel"},
    {ANON "38nll_loss_forward_no_reduce_cuda_kernelIflEEvlNS_27GenericPackedTensorAccessorIT_Lm2ENS_16DefaultPtrTraitsElEEPT0_PS4_S9_ii",
     "nll_loss_forward_no_reduce_cuda_kernel:1.10-1.12"},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_1dIdhEEvPT_S4_PKS3_PKT0_S6_bll", "nll_loss_forward_reduce_cuda_kernel_1d"},
    {"_ZN2at6native41_GLOBAL__N__439a64bd_9_libnll_cu_ee528b0e38nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S6_bllll",
     "nll_loss_forward_reduce_cuda_kernel_2d"},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_2dIN3c108BFloat16EfhEEvPT_S6_PKS5_PKT1_S8_bllll",
     "nll_loss_forward_reduce_cuda_kernel_2d"},
    {ANON "38nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_S4_PT0_S4_biiil", "nll_loss_forward_reduce_cuda_kernel_2d:1.10-1.12"},
    {ANON "39nll_loss_backward_no_reduce_cuda_kernelIflEEviPKT0_NS_27GenericPackedTensorAccessorIKT_Lm1ENS_16DefaultPtrTraitsElEENS6_IS7_Lm2ES9_lEEPS8_ll",
     "nll_loss_backward_no_reduce_cuda_kernel"},
    {ANON "39nll_loss_backward_reduce_cuda_kernel_1dIflEEvPT_PKS3_S6_PKT0_S6_bll", "nll_loss_backward_reduce_cuda_kernel_1d"},
    {ANON "39nll_loss_backward_reduce_cuda_kernel_2dIfhEEvPT_PKS3_PKT0_S6_S6_biill", "nll_loss_backward_reduce_cuda_kernel_2d"},
    {ANON "35nll_loss2d_forward_no_reduce_kernelIfEEvlNS_27GenericPackedTensorAccessorIT_Lm4ENS_16DefaultPtrTraitsElEENS3_IlLm3ES5_lEENS3_IS4_Lm3ES5_lEEPKS4_l",
     "nll_loss2d_forward_no_reduce_kernel"},
    {ANON "25nll_loss2d_forward_kernelIffiEEvPT_S4_PKS3_PKlS6_iiil", "nll_loss2d_forward_kernel"},
    {ANON "36nll_loss2d_backward_no_reduce_kernelIN3c104HalfEEEvlNS_27GenericPackedTensorAccessorIlLm3ENS_16DefaultPtrTraitsElEENS5_IT_Lm3ES6_lEENS5_IS8_Lm4ES6_lEEPKS8_l",
     "nll_loss2d_backward_no_reduce_kernel"},
    {ANON "26nll_loss2d_backward_kernelIfEEvPT_PKS3_PKlS6_S6_biiil", "nll_loss2d_backward_kernel"},
    {"__nv_static_25__a72d9355_4_k_cu__Z4instv__ZN2at6native36_GLOBAL__N__a72d9355_4_k_cu__Z4instv25nll_loss2d_forward_kernelIffiEEvPT_S4_PKS3_PKlS6_iiil",
     "nll_loss2d_forward_kernel"},
    {"_Z42cunn_ClassNLLCriterion_updateOutput_kernelIffEvPT_S1_S1_PlS1_iiiil", "cunn_ClassNLLCriterion_updateOutput_kernel"},
    {"_Z47ClassNLLCriterion_updateOutput_no_reduce_kernelIfEvi15THCDeviceTensorIT_Li2EiN2at16DefaultPtrTraitsEES0_IlLi1EiS3_ES0_IS1_Li1EiS3_EPS1_ii",
     "ClassNLLCriterion_updateOutput_no_reduce_kernel"},
    {"_Z49cunn_SpatialClassNLLCriterion_updateOutput_kernelIffEvPT_S1_S1_PlS1_iiiiil",
     "cunn_SpatialClassNLLCriterion_updateOutput_kernel"},
    {"_Z54SpatialClassNLLCriterion_updateOutput_no_reduce_kernelIfEvl15THCDeviceTensorIT_Li4EiN2at16DefaultPtrTraitsEES0_IlLi3EiS3_ES0_IS1_Li3EiS3_EPS1_l",
     "SpatialClassNLLCriterion_updateOutput_no_reduce_kernel"},
    /* the name matches, the layout fits no version (an extra trailing int64): never decoded */
    {ANON "38nll_loss_forward_reduce_cuda_kernel_2dIflEEvPT_S4_PKS3_PKT0_S6_blllll", NULL},
    /* the unverified __restrict__ variant: forward 1d with 7 parameters */
    {ANON "38nll_loss_forward_reduce_cuda_kernel_1dIflEEvPT_PKS3_S6_PKT0_bii", NULL},
};

static void test_version_selection(void)
{
    lg_registry_init_with(NULL, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(picks); i++) {
        char why[1024];
        g_test_message("%s", picks[i].mangled);
        const lg_spec_t *s = lg_registry_find(picks[i].mangled, NULL, -1, why, sizeof why);
        if (picks[i].spec) {
            g_assert_nonnull(s);
            g_assert_cmpstr(s->name, ==, picks[i].spec);
            g_assert_cmpstr(why, ==, "");
        } else {
            g_assert_null(s);
            g_assert_nonnull(lg_registry_match(picks[i].mangled)); /* the name is one of ours */
            g_assert_true(lg_registry_maybe_watched(picks[i].mangled));
            g_assert_nonnull(strstr(why, "expects parameter sizes"));
            g_assert_nonnull(strstr(why, "mangled signature"));
        }
    }
    /* not a watched kernel at all: NULL and an empty reason */
    char why[256] = "x";
    g_assert_null(lg_registry_find("_Z6vecaddPfS_S_i", NULL, -1, why, sizeof why));
    g_assert_cmpstr(why, ==, "");
    g_assert_null(lg_registry_match("_Z6vecaddPfS_S_i"));
    g_assert_false(lg_registry_maybe_watched("_Z6vecaddPfS_S_i"));
    g_assert_false(lg_registry_maybe_watched(NULL));
}

/* Sizes reported by the runtime (cudaFuncGetParamInfo) take precedence over the signature. */
static void test_runtime_sizes(void)
{
    lg_registry_init_with(NULL, NULL);
    const char *m = picks[3].mangled; /* forward 2d, >=1.13 signature */
    size_t v113[] = {8, 8, 8, 8, 8, 1, 8, 8, 8, 8};
    size_t v110[] = {8, 8, 8, 8, 8, 1, 4, 4, 4, 8};
    size_t bad[] = {8, 8, 8, 8, 8, 1, 8, 8, 8};
    char why[1024];
    const lg_spec_t *s = lg_registry_find(m, v113, 10, why, sizeof why);
    g_assert_nonnull(s);
    g_assert_cmpstr(s->name, ==, "nll_loss_forward_reduce_cuda_kernel_2d");
    s = lg_registry_find(m, v110, 10, why, sizeof why);
    g_assert_nonnull(s);
    g_assert_cmpstr(s->name, ==, "nll_loss_forward_reduce_cuda_kernel_2d:1.10-1.12");
    g_assert_cmpint(s->n_classes.width, ==, 4);
    g_assert_true(s->truncate_to_int32);
    s = lg_registry_find(m, bad, 9, why, sizeof why);
    g_assert_null(s);
    g_assert_nonnull(strstr(why, "the kernel has 8,8,8,8,8,1,8,8,8 (runtime)"));
    g_assert_nonnull(strstr(why, "1.10-1.12")); /* every tried layout is listed */

    /* a name whose signature cannot be sized and no runtime sizes: refused, with a reason */
    s = lg_registry_find("nll_loss_forward_reduce_cuda_kernel_2d_38nll_loss_forward_reduce_cuda_kernel_2dI", NULL, -1,
                         why, sizeof why);
    g_assert_null(s);
    g_assert_nonnull(strstr(why, "parameter sizes are unknown"));
    g_assert_false(lg_registry_layout_ok(lg_registry_get(0), "x", NULL, -1, why, sizeof why));
}

/* ---- malformed files -------------------------------------------------------------------- */

#define GOOD_BODY \
    "match=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n" \
    "dtype=int64\ncount=param\ncount_field=2,0,4\nn_classes=3,0,8\nignore_index=none\n"

typedef struct bad_case {
    const char *what;
    const char *text;
    size_t len;         /* 0: strlen */
    const char *expect; /* substring of the error: file:line and field */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"empty", "", 0, "t.conf:1: file: empty"},
    {"only comments", "# nothing\n\n", 0, "t.conf:1: file: no kernel spec"},
    {"binary", "[k]\nmatch=a\0\x01\x02", 15, "t.conf:2: file: binary data"},
    {"invalid utf-8", "[k]\nfamily=\xff\xfe\n", 0, "t.conf:2: file: invalid UTF-8"},
    {"truncated group header", "[k]\n" GOOD_BODY "[other", 0, "t.conf:12: group: unterminated group header"},
    {"truncated file (missing keys)", "[k]\nmatch=7mykernI\nfamily=cus", 0,
     "t.conf:1: [k] direction: required key is missing"},
    {"garbage line", "[k]\n" GOOD_BODY "hello world\n", 0, "t.conf:12: [k]: line is neither"},
    {"key before group", "match=x\n[k]\n", 0, "t.conf:1: file: key before the first [group]"},
    {"unknown key", "[k]\n" GOOD_BODY "colour=blue\n", 0, "t.conf:12: [k] colour: unknown key"},
    {"duplicate key", "[k]\n" GOOD_BODY "family=again\n", 0,
     "t.conf:12: [k] family: key given twice (first at line 3)"},
    {"duplicate group", "[k]\n" GOOD_BODY "[k]\n" GOOD_BODY, 0,
     "t.conf:12: [k]: duplicate kernel spec (first defined at line 1)"},
    {"conflicting kernels", "[k]\n" GOOD_BODY "[k2]\n" GOOD_BODY, 0, "t.conf:13: [k2] match: conflicts with [k]"},
    {"unknown target_kind", "[k]\n" GOOD_BODY "target_kind=tokens\n", 0,
     "t.conf:12: [k] target_kind: \"tokens\": must be labels, ids, range, assert or probs"},
    {"assert with a fixed dtype",
     "[k]\nmatch=7mykernI\nfamily=a\ndirection=forward\nparams=8,256\ntarget=0\ndtype=int64\n"
     "count=one\ntarget_kind=assert\n",
     0, "[k] dtype: target_kind=assert takes dtype=from_template"},
    {"assert with a count",
     "[k]\nmatch=7mykernI\nfamily=a\ndirection=forward\nparams=8,256\ntarget=0\ndtype=from_template\n"
     "count=param\ncount_field=1,0,4\ntarget_kind=assert\n",
     0, "[k] count: target_kind=assert reads one element"},
    {"assert with n_classes",
     "[k]\nmatch=7mykernI\nfamily=a\ndirection=forward\nparams=8,256\ntarget=0\ndtype=from_template\n"
     "count=one\nn_classes=1,0,4\ntarget_kind=assert\n",
     0, "target_kind=assert has neither n_classes nor ignore_index"},
    {"allow_negative on labels", "[k]\n" GOOD_BODY "allow_negative=2,0,4\n", 0,
     "t.conf:12: [k] allow_negative: only with target_kind=ids"},
    {"allow_negative past its parameter", "[k]\n" GOOD_BODY "target_kind=ids\nallow_negative=2,2,4\n", 0,
     "[k] allow_negative: offset 2 + width 4 is beyond parameter 2"},
    {"from_template:0",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\ndtype=from_template:0\n"
     "count=param\ncount_field=2,0,4\nn_classes=3,0,8\nignore_index=none\n",
     0, "[k] dtype: \"from_template:0\": from_template:N needs N in 1..16"},
    {"from_template:x",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\ndtype=from_templatex\n"
     "count=param\ncount_field=2,0,4\nn_classes=3,0,8\nignore_index=none\n",
     0, "needs N in 1..16"},
    {"input of 4 bytes", "[k]\n" GOOD_BODY "input=2,0,4\n", 0, "[k] input: the input is an 8-byte device pointer"},
    {"weight of 4 bytes", "[k]\n" GOOD_BODY "weight=2,0,4\n", 0, "[k] weight: the weight is an 8-byte device pointer"},
    {"missing match", "[k]\nfamily=custom\n", 0, "t.conf:1: [k] match: required key is missing"},
    {"empty value", "[k]\nmatch=\n", 0, "t.conf:2: [k] match: empty value"},
    {"bad direction", "[k]\nmatch=x\nfamily=f\ndirection=sideways\n", 0, "t.conf:4: [k] direction: \"sideways\""},
    {"bad params", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,x,8\n", 0, "t.conf:5: [k] params:"},
    {"zero param size", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,0\n", 0,
     "t.conf:5: [k] params: parameter 1 has size 0"},
    {"target index out of range", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,8\ntarget=2\n", 0,
     "t.conf:6: [k] target: parameter index 2 out of range"},
    {"target offset beyond param", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,4\ntarget=1\n", 0,
     "t.conf:6: [k] target: offset 0 + 8-byte pointer is beyond parameter 1 (4 bytes)"},
    {"field index out of range",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n"
     "dtype=int64\ncount=param\ncount_field=9,0,4\n",
     0, "t.conf:9: [k] count_field: parameter index 9 out of range"},
    {"field offset beyond param",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n"
     "dtype=int64\ncount=param\ncount_field=2,2,4\n",
     0, "t.conf:9: [k] count_field: offset 2 + width 4 is beyond parameter 2 (4 bytes)"},
    {"bad width",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n"
     "dtype=int64\ncount=param\ncount_field=3,0,2\n",
     0, "t.conf:9: [k] count_field: width 2: must be 1, 4 or 8"},
    {"bad dtype", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8\ntarget=0\ndtype=float\n", 0,
     "t.conf:7: [k] dtype: \"float\""},
    {"bad count", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8\ntarget=0\ndtype=int64\ncount=many\n", 0,
     "t.conf:8: [k] count: \"many\""},
    {"count=accessor without accessor",
     "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8\ntarget=0\ndtype=int64\ncount=accessor\n", 0,
     "t.conf:8: [k] count: count=accessor needs target_accessor"},
    {"unused count_field",
     "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8\ntarget=0\ndtype=int64\ncount=one\ncount_field=0,0,8\n", 0,
     "t.conf:9: [k] count_field: not used with count=one"},
    {"accessor beyond param",
     "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=24\ntarget=0\ntarget_accessor=2,8,24,8\n", 0,
     "t.conf:7: [k] target_accessor: sizes/strides beyond parameter 0"},
    {"accessor ndim", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=24\ntarget=0\ntarget_accessor=4,8,16,8\n", 0,
     "t.conf:7: [k] target_accessor: ndim 4"},
    {"missing ignore_index",
     "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,8\ntarget=0\ndtype=int64\ncount=one\nn_classes=1,0,8\n", 0,
     "t.conf:1: [k] ignore_index: required key is missing"},
    {"bad bool", "[k]\n" GOOD_BODY "truncate_to_int32=maybe\n", 0,
     "t.conf:12: [k] truncate_to_int32: must be true or false"},
    {"bad family", "[k]\nmatch=x\nfamily=Bad Family\n", 0, "t.conf:3: [k] family:"},
    {"match with blank", "[k]\nmatch=a b\n", 0, "t.conf:2: [k] match:"},
    {"negative number", "[k]\nmatch=x\nfamily=f\ndirection=forward\nparams=8,-8\n", 0, "t.conf:5: [k] params:"},
#define CLOSURE_BODY(calc) \
    "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\ntarget_kind=ids\nparams=4,664\ntarget=1,608\n" \
    "dtype=int64\ncount=param\ncount_field=0,0,4\nn_classes=1,616,8\nignore_index=none\ntarget_calc=" calc "\n"
    {"target_calc beyond its parameter", CLOSURE_BODY("1,64,25,3,2,4"), 0,
     "[k] target_calc: offset 64 + 604 bytes of OffsetCalculator is beyond parameter 1 (664 bytes)"},
    {"target_calc index width", CLOSURE_BODY("1,0,25,3,2,2"), 0, "[k] target_calc: index width 2"},
    {"target_calc arg >= nargs", CLOSURE_BODY("1,0,25,3,3,4"), 0, "[k] target_calc: nargs 3 / arg 3"},
    {"target_calc short", CLOSURE_BODY("1,0,25"), 0,
     "[k] target_calc: expected param,offset,max_dims,nargs,arg,index_width"},
    {"target_calc misaligned", CLOSURE_BODY("1,2,25,3,2,4"), 0,
     "[k] target_calc: offset 2: an OffsetCalculator is 4-byte aligned"},
    {"targets without room", CLOSURE_BODY("1,0,25,3,2,4") "targets=1,624,8,25\n", 0,
     "[k] targets: 25 target pointers from offset 608 are beyond parameter 1"},
    {"layout_check without target_calc", "[k]\n" GOOD_BODY "layout_check=offset_calc\n", 0,
     "[k] layout_check: offset_calc needs target_calc"},
    {"layout_check unknown", CLOSURE_BODY("1,0,25,3,2,4") "layout_check=trust_me\n", 0,
     "[k] layout_check: \"trust_me\": must be offset_calc"},
    {"from_functor without I",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n"
     "dtype=from_functor:5myfun:3\ncount=param\ncount_field=2,0,4\nn_classes=3,0,8\nignore_index=none\n",
     0, "[k] dtype: from_functor:MARK:N[:default]"},
    {"from_functor bad default",
     "[k]\nmatch=7mykernI\nfamily=custom\ndirection=forward\nparams=8,8,4,8\ntarget=0\n"
     "dtype=from_functor:5myfunI:3:uint8\ncount=param\ncount_field=2,0,4\nn_classes=3,0,8\nignore_index=none\n",
     0, "[k] dtype: from_functor: the default must be int64 or int32"},
};

static void test_malformed(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        const bad_case_t *b = &bad_cases[i];
        lg_spec_t out[8];
        char err[512] = "";
        g_test_message("case: %s", b->what);
        size_t len = b->len ? b->len : strlen(b->text);
        int n = lg_spec_parse(b->text, len, "t.conf", out, 8, err, sizeof err);
        g_test_message("  -> %s", err);
        g_assert_cmpint(n, ==, -1);
        g_assert_nonnull(strstr(err, b->expect));
    }
}

/* An index kernel of one's own: ids of the second template argument, a wrap flag, a padding. */
static void test_good_ids_spec(void)
{
    lg_spec_t out[2];
    char err[512];
    const char *text = "[emb]\nmatch=5myembI\nfamily=embedding\ndirection=forward\ntarget_kind=ids\nparams=8,8,4,8,1,8\n"
                       "target=1\ndtype=from_template:2\ncount=param\ncount_field=2,0,4\nn_classes=3,0,8\n"
                       "ignore_index=5,0,8\nallow_negative=4,0,1\ninput=0,0,8\nweight=0,0,8\nsize_average=4,0,1\n";
    int n = lg_spec_parse(text, strlen(text), "e.conf", out, 2, err, sizeof err);
    g_test_message("%s", err);
    g_assert_cmpint(n, ==, 1);
    g_assert_true(out[0].ids);
    g_assert_true(out[0].dtype_from_template);
    g_assert_cmpint(out[0].dtype_template_arg, ==, 2);
    g_assert_cmpint(out[0].allow_negative.param, ==, 4);
    g_assert_cmpint(out[0].allow_negative.width, ==, 1);
    g_assert_cmpint(out[0].input.param, ==, 0);
    g_assert_cmpint(out[0].weight.param, ==, 0);
    g_assert_cmpint(out[0].size_average.param, ==, 4);
    lg_dtype_t dt;
    char why[256];
    g_assert_cmpint(lg_decode_dtype(&out[0], "_Z5myembIfiEvv", &dt, why, sizeof why), ==, 0);
    g_assert_cmpint(dt, ==, LG_DTYPE_INT32);
    g_assert_cmpint(lg_decode_dtype(&out[0], "_Z5myembIflEvv", &dt, why, sizeof why), ==, 0);
    g_assert_cmpint(dt, ==, LG_DTYPE_INT64);
    g_assert_cmpint(lg_decode_dtype(&out[0], "_Z5myembIffEvv", &dt, why, sizeof why), ==, -1);
}

static void test_good_user_spec(void)
{
    lg_spec_t out[4];
    char err[512];
    const char *text = "# my extension\n[k]\n" GOOD_BODY "truncate_to_int32=true\nversions=any\n"
                       "\n[k2]\nmatch=7mykernI;_Z\nfamily=custom\ndirection=backward\nparams=8,72\ntarget=1\n"
                       "target_accessor=3,8,32,8\ndtype=from_template\ncount=accessor\nn_classes=1,16,8\nignore_index=0,0,4,1\n"
                       "\n[k3]\nmatch=gridk\nfamily=custom\ndirection=forward\nparams=8,4,4\ntarget=0\ndtype=uint8\n"
                       "count=grid_map\nmap_nelem=1,0,4,0\nblocks_per_sample=2,0,4\nn_classes=2,0,1\nignore_index=none\n";
    int n = lg_spec_parse(text, strlen(text), "u.conf", out, 4, err, sizeof err);
    g_test_message("%s", err);
    g_assert_cmpint(n, ==, 3);
    g_assert_false(out[0].ids);
    g_assert_cmpint(out[0].allow_negative.param, ==, -1);
    g_assert_cmpint(out[0].input.param, ==, -1);
    g_assert_cmpstr(out[0].name, ==, "k");
    g_assert_cmpstr(out[0].source, ==, "u.conf:2");
    g_assert_cmpstr(out[0].versions, ==, "any");
    g_assert_true(out[0].truncate_to_int32);
    g_assert_cmpint(out[0].count_kind, ==, LG_COUNT_PARAM);
    g_assert_cmpint(out[0].count.param, ==, 2);
    g_assert_cmpint(out[0].count.width, ==, 4);
    g_assert_cmpint(out[0].ignore_index.param, ==, -1);
    g_assert_cmpint(out[1].direction, ==, LG_DIR_BACKWARD);
    g_assert_cmpint(out[1].target_ndim, ==, 3);
    g_assert_cmpint(out[1].target_strides_offset, ==, 32);
    g_assert_true(out[1].dtype_from_template);
    g_assert_cmpint(out[1].ignore_index.width, ==, 4);
    g_assert_cmpint(out[2].count_kind, ==, LG_COUNT_GRID_MAP);
    g_assert_false(out[2].map_nelem.is_signed);
    g_assert_cmpint(out[2].dtype, ==, LG_DTYPE_UINT8);
    /* capacity is respected */
    n = lg_spec_parse(text, strlen(text), "u.conf", out, 2, err, sizeof err);
    g_assert_cmpint(n, ==, -1);
    g_assert_nonnull(strstr(err, "too many kernel specs"));
}

static char *write_tmp(const char *dir, const char *name, const char *text, size_t len)
{
    char *path = g_build_filename(dir, name, NULL);
    g_assert_true(g_file_set_contents(path, text, (gssize)len, NULL));
    return path;
}

static void test_user_files(void)
{
    char *dir = g_dir_make_tmp("lg-registry-XXXXXX", NULL);
    g_assert_nonnull(dir);
    const char *good = "[mine]\n" GOOD_BODY;
    char *p_good = write_tmp(dir, "good.conf", good, strlen(good));
    char *p_bad = write_tmp(dir, "bad.conf", "[x]\nmatch=7mykernI\nwidth=3\n", 27);
    char *p_bin = write_tmp(dir, "bin.conf", "\x7f" "ELF\0\0\0", 7);
    const char *dup = "[nll_loss_forward_reduce_cuda_kernel_2d]\n" GOOD_BODY;
    char *p_dup = write_tmp(dir, "dup.conf", dup, strlen(dup));
    const char *clash = "[other]\nmatch=38nll_loss_forward_reduce_cuda_kernel_2dI\nfamily=nll_loss\ndirection=forward\n"
                        "params=8,8,8,8,8,1,8,8,8,8\ntarget=3\ndtype=int64\ncount=one\nn_classes=8,0,8\nignore_index=none\n";
    char *p_clash = write_tmp(dir, "clash.conf", clash, strlen(clash));
    char *p_missing = g_build_filename(dir, "missing.conf", NULL);

    char *list = g_strjoin(":", p_bad, p_good, p_bin, "", p_dup, p_clash, p_missing, NULL);
    reset_warnings();
    int n = lg_registry_init_with(list, collect);
    g_test_message("%s", warnings->str);
    g_assert_cmpint(n, ==, BUILTIN_SPECS + 1);
    g_assert_cmpint(n_warnings, ==, 5);
    char *e_bad = g_strdup_printf("%s:3: [x] width: unknown key", p_bad);
    char *e_bin = g_strdup_printf("%s:1: file: binary data", p_bin);
    char *e_dup = g_strdup_printf("%s:1: [nll_loss_forward_reduce_cuda_kernel_2d]: kernel spec name already defined by builtin:", p_dup);
    char *e_clash = g_strdup_printf("%s:1: [other] match: conflicts with [nll_loss_forward_reduce_cuda_kernel_2d]", p_clash);
    char *e_missing = g_strdup_printf("%s:0: file: cannot read", p_missing);
    g_assert_nonnull(strstr(warnings->str, e_bad));
    g_assert_nonnull(strstr(warnings->str, e_bin));
    g_assert_nonnull(strstr(warnings->str, e_dup));
    g_assert_nonnull(strstr(warnings->str, e_clash));
    g_assert_nonnull(strstr(warnings->str, e_missing));
    g_assert_nonnull(strstr(warnings->str, "file skipped, the built-in table stays"));
    const lg_spec_t *s = lg_registry_match("_Z7mykernIiEvPlS0_il");
    g_assert_nonnull(s);
    g_assert_cmpstr(s->name, ==, "mine");
    /* built-in entries come first: a user spec never shadows one */
    g_assert_true(g_str_has_prefix(lg_registry_get(0)->source, "builtin:"));
    g_assert_true(g_str_has_prefix(lg_registry_get(BUILTIN_SPECS)->source, p_good));

    /* the library's entry (warnings to lg_report_warning, absent in this test binary) also
     * skips the bad files and keeps the rest */
    g_assert_cmpint(lg_registry_init(list), ==, BUILTIN_SPECS + 1);

    /* init again without user files: back to the built-in table */
    g_assert_cmpint(lg_registry_init_with("", collect), ==, BUILTIN_SPECS);
    g_assert_null(lg_registry_match("_Z7mykernIiEvPlS0_il"));

    g_free(e_bad); g_free(e_bin); g_free(e_dup); g_free(e_clash); g_free(e_missing);
    g_free(list);
    for (char **p = (char *[]){p_good, p_bad, p_bin, p_dup, p_clash, NULL}; *p; p++) {
        g_unlink(*p);
        g_free(*p);
    }
    g_free(p_missing);
    g_rmdir(dir);
    g_free(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/registry/builtin", test_builtin);
    g_test_add_func("/registry/version-selection", test_version_selection);
    g_test_add_func("/registry/runtime-sizes", test_runtime_sizes);
    g_test_add_func("/registry/malformed", test_malformed);
    g_test_add_func("/registry/good-user-spec", test_good_user_spec);
    g_test_add_func("/registry/good-ids-spec", test_good_ids_spec);
    g_test_add_func("/registry/user-files", test_user_files);
    return g_test_run();
}
