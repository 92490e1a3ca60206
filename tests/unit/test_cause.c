/* test_cause.c: unit tests of src/report/cause.c on the seed article's cases. Each case builds a real
 * label buffer, scans it with the validator's own host scan (cuda/lg_scan.h), and checks the
 * classification and the fix sentence.
 * Run: make build/tests/unit/test_cause && build/tests/unit/test_cause
 */
#include <glib.h>
#include <string.h>

#include "hooks/hooks.h"

typedef struct {
    lg_target_t t;
    lg_verdict_t v;
    int64_t labels[4096];
} case_t;

static case_t *make_case(const int64_t *labels, int n, int64_t n_classes, int64_t ignore_index, int rows)
{
    case_t *c = g_new0(case_t, 1);
    memcpy(c->labels, labels, sizeof(int64_t) * (size_t)n);
    c->t.dtype = LG_DTYPE_INT64;
    if (rows > 1) {
        c->t.ndim = 2;
        c->t.sizes[0] = rows;
        c->t.sizes[1] = n / rows;
        c->t.strides[0] = n / rows;
        c->t.strides[1] = 1;
    } else {
        c->t.ndim = 1;
        c->t.sizes[0] = n;
        c->t.strides[0] = 1;
    }
    c->t.count = n;
    c->t.n_classes = n_classes;
    c->t.ignore_index = ignore_index;
    c->t.has_ignore_index = 1;
    lg_scan_host(&c->t, c->labels, 16, &c->v);
    return c;
}

static void expect(case_t *c, bool dense, lg_cause_t want, const char *want_text)
{
    g_assert_cmpint(c->v.bad_count, >, 0);
    lg_cause_t got = lg_cause_classify(&c->t, &c->v, dense);
    g_assert_cmpstr(lg_cause_name(got), ==, lg_cause_name(want));
    char text[256];
    lg_cause_explain(got, &c->t, &c->v, text, sizeof(text));
    g_test_message("%s: %s", lg_cause_name(got), text);
    if (want_text && !strstr(text, want_text)) {
        g_test_message("expected '%s' in '%s'", want_text, text);
        g_assert_not_reached();
    }
    g_free(c);
}

/* Article 4.1: labels 1..N for N classes, fixed by labels - 1. */
static void test_one_based(void)
{
    int64_t l[64];
    for (int i = 0; i < 64; i++)
        l[i] = 1 + (i * 7) % 10;
    expect(make_case(l, 64, 10, -100, 1), false, LG_CAUSE_ONE_BASED, "labels span 1..10 with 10 classes; they look 1-based: subtract 1");
    g_assert_cmpstr(lg_cause_fix(LG_CAUSE_ONE_BASED), ==, "subtract 1");
}

/* Article 2.1: `labels = labels * 255` on a binary mask: {0, 255} with 2 classes. */
static void test_scaled_255_binary_mask(void)
{
    int64_t l[64];
    for (int i = 0; i < 64; i++)
        l[i] = ((i / 8 + i % 8) % 3 == 0) ? 255 : 0;
    expect(make_case(l, 64, 2, -100, 8), true, LG_CAUSE_SCALED_255, "divide the labels by 255");
}

/* Classes 0..3 scaled by 255 (0, 255, 510, 765) in a 1-D target. */
static void test_scaled_255_multiclass(void)
{
    int64_t l[40];
    for (int i = 0; i < 40; i++)
        l[i] = 255 * (i % 4);
    expect(make_case(l, 40, 4, -100, 1), false, LG_CAUSE_SCALED_255, "multiples of 255 (max 765)");
}

/* Segmentation (VOC-style): classes 0..20 with 255 on object borders, ignore_index left at -100. */
static void test_void_255(void)
{
    int64_t l[256];
    for (int i = 0; i < 256; i++)
        l[i] = (i % 16 == 0 || i % 16 == 15) ? 255 : (i / 16) % 21;
    expect(make_case(l, 256, 21, -100, 16), true, LG_CAUSE_VOID_255, "set ignore_index=255");
}

/* 255 borders in a binary segmentation whose foreground is 1: min/max/samples cannot tell it
 * from a scaled {0,255} mask (the verdict has no histogram), so scaling is reported and the
 * sentence names the void alternative. A 3-class target with 255 is void. */
static void test_void_255_small_heads(void)
{
    int64_t l[64];
    for (int i = 0; i < 64; i++)
        l[i] = i % 8 == 0 ? 255 : (i % 3 == 0);
    expect(make_case(l, 64, 2, -100, 8), true, LG_CAUSE_SCALED_255, "if 255 marks void pixels instead, set ignore_index=255");
    for (int i = 0; i < 64; i++)
        l[i] = i % 8 == 0 ? 255 : (i % 3);
    expect(make_case(l, 64, 3, -100, 8), true, LG_CAUSE_VOID_255, "ignore_index -100");
    /* Same values in a 1-D target: not a segmentation, so not void. */
    expect(make_case(l, 64, 3, -100, 1), false, LG_CAUSE_OTHER, NULL);
}

/* -1 used as "unknown" while ignore_index is PyTorch's default -100. */
static void test_negative_unknown(void)
{
    int64_t l[32];
    for (int i = 0; i < 32; i++)
        l[i] = i % 5 == 0 ? -1 : i % 5;
    expect(make_case(l, 32, 5, -100, 1), false, LG_CAUSE_NEGATIVE_UNKNOWN, "set ignore_index=-1");
    /* With ignore_index = -1 the same labels are fine: nothing to classify. */
    case_t *c = make_case(l, 32, 5, -1, 1);
    g_assert_cmpint(c->v.bad_count, ==, 0);
    g_free(c);
}

/* Article 4.1, "adjust the model's output": labels dense 0..11, head built for 10 classes. */
static void test_head_too_small(void)
{
    int64_t l[48];
    for (int i = 0; i < 48; i++)
        l[i] = i % 12;
    expect(make_case(l, 48, 10, -100, 1), false, LG_CAUSE_HEAD_TOO_SMALL, "at least 12 outputs");
    /* Labels 1..12 with 10 classes: subtracting 1 would not be enough, so not one_based. */
    for (int i = 0; i < 48; i++)
        l[i] = 1 + i % 12;
    expect(make_case(l, 48, 10, -100, 1), false, LG_CAUSE_HEAD_TOO_SMALL, "labels span 1..12");
}

/* Random junk: huge values, negatives other than -1, values far past n_classes. */
static void test_other(void)
{
    int64_t junk[8] = { 3, 987654321, -37, 5, 0, 1, 2, 4 };
    expect(make_case(junk, 8, 10, -100, 1), false, LG_CAUSE_OTHER, "match no known pattern");
    int64_t far[8] = { 0, 1, 2, 500, 3, 4, 5, 6 };
    expect(make_case(far, 8, 10, -100, 1), false, LG_CAUSE_OTHER, "max 500");
    int64_t negs[8] = { 0, -2, 1, -1, 2, 3, 4, 5 };
    expect(make_case(negs, 8, 10, -100, 1), false, LG_CAUSE_OTHER, NULL);
    /* A lone 255 in a 1-D classification target with 10 classes: no pattern is certain. */
    int64_t lone[8] = { 0, 1, 2, 255, 3, 4, 5, 6 };
    expect(make_case(lone, 8, 10, -100, 1), false, LG_CAUSE_OTHER, NULL);
}

/* Degenerate inputs never crash and fall back to other. */
static void test_degenerate(void)
{
    lg_target_t t = { 0 };
    lg_verdict_t v = { 0 };
    g_assert_cmpint(lg_cause_classify(&t, &v, false), ==, LG_CAUSE_OTHER);
    t.n_classes = -3;
    v.bad_count = 1;
    v.checked = 1;
    g_assert_cmpint(lg_cause_classify(&t, &v, true), ==, LG_CAUSE_OTHER);
    char text[8];
    lg_cause_explain(LG_CAUSE_OTHER, &t, &v, text, sizeof(text));
    g_assert_cmpuint(strlen(text), ==, 7);
    g_assert_cmpstr(lg_cause_name((lg_cause_t)99), ==, "other");
}

/* Node ids of index_add_ / scatter (a GNN's out.index_add_(0, dst, msg)): past the node count,
 * node_id_out_of_range with the node count and the fix; the same ids of an embedding stay
 * vocab_too_small, and negatives stay negative_id in every family. */
static void test_node_id_out_of_range(void)
{
    int64_t edges[8] = { 0, 3, 7, 12, 5, 9, 12, 1 };
    case_t *c = make_case(edges, 8, 10, -1, 1);
    c->t.has_ignore_index = 0;
    lg_scan_host(&c->t, c->labels, 16, &c->v);
    g_assert_cmpint(c->v.bad_count, ==, 2);
    lg_cause_t got = lg_cause_classify_family_ids("index_add", &c->t, &c->v);
    g_assert_cmpstr(lg_cause_name(got), ==, "node_id_out_of_range");
    char text[512];
    lg_cause_explain_ids(got, &c->t, &c->v, text, sizeof text);
    g_test_message("%s", text);
    g_assert_nonnull(strstr(text, "node ids span 0..12 but the output has 10 rows"));
    g_assert_nonnull(strstr(text, "num_nodes >= 13"));
    g_assert_cmpstr(lg_cause_fix(got), ==, "size the output by the graph's node count, or relabel the edge ids");
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("scatter_add", &c->t, &c->v)), ==,
                    "node_id_out_of_range");
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("embedding_bag", &c->t, &c->v)), ==, "vocab_too_small");
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids(NULL, &c->t, &c->v)), ==, "vocab_too_small");
    /* Advanced indexing and take/put index a tensor's dimension, not a vocabulary. */
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("index", &c->t, &c->v)), ==, "index_out_of_range");
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("take", &c->t, &c->v)), ==, "index_out_of_range");
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("gather", &c->t, &c->v)), ==, "vocab_too_small");
    int64_t neg[4] = { 0, -1, 3, 4 };
    case_t *n = make_case(neg, 4, 10, -1, 1);
    n->t.has_ignore_index = 0;
    lg_scan_host(&n->t, n->labels, 16, &n->v);
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_family_ids("index_add", &n->t, &n->v)), ==, "negative_id");
    g_free(n);
    g_free(c);
}

/* BCE's probabilities (range targets): a number outside [0, 1] is logits without a sigmoid,
 * even next to NaNs; only NaNs: the training diverged. The values are float32 bits. */
static int64_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (int64_t)u;
}

/* torch.multinomial's weights (rule LG_SCAN_RULE_PROBS): a NaN or an inf is fp16_overflow (also
 * beside negatives), else a negative is negative_probs, else a row of zeros is all_masked; each
 * sentence names its row (the sample's index over the row length) and the fix; samples off, min
 * and max decide the same; the names round-trip through lg_cause_by_name. */
static void test_probs_causes(void)
{
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.dtype = LG_DTYPE_FLOAT16;
    t.count = 32;
    t.n_classes = 8;
    t.rule = LG_SCAN_RULE_PROBS;
    lg_verdict_t v;
    memset(&v, 0, sizeof v);
    v.bad_count = v.n_samples = 2;
    v.checked = 32;
    v.samples[0] = (lg_sample_t){10, 0xB800}; /* -0.5 in row 1 */
    v.samples[1] = (lg_sample_t){19, 0x7C00}; /* inf in row 2 */
    v.min = 0xB800;
    v.max = 0x7C00;
    char text[512];
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_FP16_OVERFLOW);
    lg_cause_explain_range(LG_CAUSE_FP16_OVERFLOW, &t, &v, text, sizeof text);
    g_test_message("%s", text);
    g_assert_nonnull(strstr(text, "row 2 of 4"));
    g_assert_nonnull(strstr(text, "half-precision"));
    g_assert_nonnull(strstr(text, "float32"));
    g_assert_cmpint(strlen(text), <, 256); /* lg_violation_t.cause_text */
    v.bad_count = v.n_samples = 1;
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NEGATIVE_PROBS);
    lg_cause_explain_range(LG_CAUSE_NEGATIVE_PROBS, &t, &v, text, sizeof text);
    g_assert_nonnull(strstr(text, "-0.5"));
    g_assert_nonnull(strstr(text, "row 1 of 4"));
    g_assert_nonnull(strstr(text, "softmax"));
    g_assert_cmpint(strlen(text), <, 256);
    v.samples[0] = (lg_sample_t){24, 0}; /* a row of zeros: its first element */
    v.min = 0;
    v.max = 0x3C00;
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_ALL_MASKED);
    lg_cause_explain_range(LG_CAUSE_ALL_MASKED, &t, &v, text, sizeof text);
    g_assert_nonnull(strstr(text, "row 3 of 4"));
    g_assert_nonnull(strstr(text, "top-k"));
    g_assert_cmpint(strlen(text), <, 256);
    /* samples off */
    v.n_samples = 0;
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_ALL_MASKED);
    v.min = 0xB800;
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NEGATIVE_PROBS);
    v.max = 0x7E00; /* NaN's bits: every value NaN */
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_FP16_OVERFLOW);
    /* other dtypes: the text says the logits overflowed upstream */
    t.dtype = LG_DTYPE_FLOAT32;
    v.n_samples = 1;
    v.samples[0] = (lg_sample_t){3, f32_bits(__builtin_nanf(""))};
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_FP16_OVERFLOW);
    lg_cause_explain_range(LG_CAUSE_FP16_OVERFLOW, &t, &v, text, sizeof text);
    g_assert_nonnull(strstr(text, "row 0 of 4"));
    g_assert_null(strstr(text, "half-precision"));
    const lg_cause_t c[] = {LG_CAUSE_FP16_OVERFLOW, LG_CAUSE_ALL_MASKED, LG_CAUSE_NEGATIVE_PROBS, LG_CAUSE_ONE_BASED};
    for (size_t i = 0; i < G_N_ELEMENTS(c); i++)
        g_assert_cmpint(lg_cause_by_name(lg_cause_name(c[i])), ==, c[i]);
    g_assert_cmpstr(lg_cause_name(LG_CAUSE_ALL_MASKED), ==, "all_masked");
    g_assert_cmpint(lg_cause_by_name("no_such_cause"), ==, LG_CAUSE_OTHER);
    g_assert_cmpint(lg_cause_by_name(NULL), ==, LG_CAUSE_OTHER);
}

static void test_bce_causes(void)
{
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.dtype = LG_DTYPE_FLOAT32;
    t.count = 8;
    lg_verdict_t v;
    memset(&v, 0, sizeof v);
    v.bad_count = v.n_samples = 3;
    v.checked = 8;
    v.samples[0].value = f32_bits(1.5f);
    v.samples[1].value = f32_bits(-0.1f);
    v.samples[2].value = f32_bits(__builtin_nanf(""));
    v.min = f32_bits(-0.1f);
    v.max = f32_bits(1.5f);
    char text[512];
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NO_SIGMOID);
    g_assert_cmpstr(lg_cause_name(LG_CAUSE_NO_SIGMOID), ==, "no_sigmoid");
    lg_cause_explain_range(LG_CAUSE_NO_SIGMOID, &t, &v, text, sizeof text);
    g_assert_nonnull(strstr(text, "[-0.1, 1.5]"));
    g_assert_nonnull(strstr(text, "BCEWithLogitsLoss"));
    g_assert_nonnull(strstr(lg_cause_fix(LG_CAUSE_NO_SIGMOID), "BCEWithLogitsLoss"));

    v.bad_count = v.n_samples = 1;
    v.samples[0].value = f32_bits(__builtin_nanf(""));
    v.min = v.max = f32_bits(0.25f);
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NAN_INPUT);
    g_assert_cmpstr(lg_cause_name(LG_CAUSE_NAN_INPUT), ==, "nan_input");
    lg_cause_explain_range(LG_CAUSE_NAN_INPUT, &t, &v, text, sizeof text);
    g_assert_nonnull(strstr(text, "NaN"));
    g_assert_nonnull(strstr(text, "learning rate"));
    g_assert_nonnull(strstr(text, "fp16"));
    g_assert_nonnull(strstr(text, "torch.autograd.detect_anomaly"));

    /* samples off: min and max tell a number outside [0, 1] from NaNs alone */
    v.n_samples = 0;
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NAN_INPUT);
    v.max = f32_bits(3.0f);
    g_assert_cmpint(lg_cause_classify_range(&t, &v), ==, LG_CAUSE_NO_SIGMOID);
    /* the names stay distinct from "other" and from each other */
    g_assert_cmpstr(lg_cause_name(LG_CAUSE_OTHER), ==, "other");
}

/* What ids index decides their cause: the family where it can, the written operand of a scalar
 * scatter (one id per row of `bound` elements: a one-hot), the call site for the kernels that
 * serve nn.Embedding and plain index_select / gather alike. */
static void test_indexed(void)
{
    lg_ids_facts_t none = {0}, py = {.python = true}, emb = {.python = true, .embedding_call = true},
                   hot = {.one_per_row = true};
    /* F.one_hot: a scatter, but of one label per row into num_classes columns */
    g_assert_cmpint(lg_cause_indexed("scatter", &hot), ==, LG_INDEXED_CLASSES);
    g_assert_cmpint(lg_cause_indexed("scatter", &none), ==, LG_INDEXED_NODES);
    /* torch.compile's check of F.one_hot: classes, with no launch to read */
    g_assert_cmpint(lg_cause_indexed("one_hot", &none), ==, LG_INDEXED_CLASSES);
    g_assert_cmpint(lg_cause_indexed("scatter_add", &py), ==, LG_INDEXED_NODES);
    g_assert_cmpint(lg_cause_indexed("index_add", &py), ==, LG_INDEXED_NODES);
    /* index_select / gather: an embedding only when the call site is one */
    g_assert_cmpint(lg_cause_indexed("index_select", &emb), ==, LG_INDEXED_VOCAB);
    g_assert_cmpint(lg_cause_indexed("gather", &emb), ==, LG_INDEXED_VOCAB);
    g_assert_cmpint(lg_cause_indexed("index_select", &py), ==, LG_INDEXED_DIM);
    g_assert_cmpint(lg_cause_indexed("gather", &py), ==, LG_INDEXED_DIM);
    /* no call site to read (a C++ program, backtraces off): the embedding reading stays */
    g_assert_cmpint(lg_cause_indexed("index_select", &none), ==, LG_INDEXED_VOCAB);
    g_assert_cmpint(lg_cause_indexed("index_select", NULL), ==, LG_INDEXED_VOCAB);
    g_assert_cmpint(lg_cause_indexed("embedding_bag", &py), ==, LG_INDEXED_VOCAB);
    g_assert_cmpint(lg_cause_indexed("index", &emb), ==, LG_INDEXED_DIM);
    g_assert_cmpint(lg_cause_indexed("take", NULL), ==, LG_INDEXED_DIM);

    /* one_per_row, on calculators as the scatter kernel holds them (byte strides, fastest first) */
    int64_t b_sz[] = {8}, b_st[] = {4 * 8};           /* one_hot(int64 labels[8], 4): rows of 4 int64 */
    g_assert_true(lg_cause_one_per_row(b_sz, b_st, 1, 4));
    int64_t f_st[] = {4 * 4};                          /* zeros(8, 4).scatter_(1, y[:, None], 1.0) */
    g_assert_true(lg_cause_one_per_row(b_sz, f_st, 1, 4));
    int64_t bt_sz[] = {1, 6}, bt_st[] = {0, 10 * 8};  /* one_hot(labels[2, 3], 10), a size-1 dim */
    g_assert_true(lg_cause_one_per_row(bt_sz, bt_st, 2, 10));
    int64_t deg_sz[] = {12}, deg_st[] = {0};           /* zeros(N).scatter_(0, dst, 1.0): degrees */
    g_assert_false(lg_cause_one_per_row(deg_sz, deg_st, 1, 6));
    int64_t mh_sz[] = {3, 4}, mh_st[] = {0, 7 * 4};    /* zeros(4, 7).scatter_(1, idx[4, 3], 2.0): 3 per row */
    g_assert_false(lg_cause_one_per_row(mh_sz, mh_st, 2, 7));
    int64_t col_sz[] = {5}, col_st[] = {4};            /* zeros(6, 5).scatter_(0, idx[1, 5], 1.0): a column each */
    g_assert_false(lg_cause_one_per_row(col_sz, col_st, 1, 6));
    g_assert_true(lg_cause_one_per_row(NULL, NULL, 0, 4)); /* one id */
    g_assert_false(lg_cause_one_per_row(b_sz, b_st, -1, 4));

    /* the causes and their words */
    int64_t hot_labels[4] = {0, 1, 4, 2}; /* F.one_hot(labels, num_classes=4) with a 4 */
    case_t *c = make_case(hot_labels, 4, 4, -1, 1);
    c->t.has_ignore_index = 0;
    lg_scan_host(&c->t, c->labels, 16, &c->v);
    lg_cause_t got = lg_cause_classify_indexed(LG_INDEXED_CLASSES, &c->t, &c->v);
    g_assert_cmpstr(lg_cause_name(got), ==, "num_classes_too_small");
    char text[512];
    lg_cause_explain_indexed(got, LG_INDEXED_CLASSES, &c->t, &c->v, text, sizeof text);
    g_test_message("%s", text);
    g_assert_nonnull(strstr(text, "num_classes >= 5"));
    g_assert_null(strstr(text, "node"));
    g_assert_cmpstr(lg_cause_indexed_unit(LG_INDEXED_CLASSES), ==, "classes");
    /* the same ids as a plain dimension (x.index_select(1, cols), take_along_dim) */
    got = lg_cause_classify_indexed(LG_INDEXED_DIM, &c->t, &c->v);
    g_assert_cmpstr(lg_cause_name(got), ==, "index_out_of_range");
    lg_cause_explain_indexed(got, LG_INDEXED_DIM, &c->t, &c->v, text, sizeof text);
    g_test_message("%s", text);
    g_assert_nonnull(strstr(text, "the dimension they index has size 4"));
    g_assert_null(strstr(text, "resize_token_embeddings"));
    /* as an embedding's: the vocabulary reading, as before */
    got = lg_cause_classify_indexed(LG_INDEXED_VOCAB, &c->t, &c->v);
    g_assert_cmpstr(lg_cause_name(got), ==, "vocab_too_small");
    lg_cause_explain_indexed(got, LG_INDEXED_VOCAB, &c->t, &c->v, text, sizeof text);
    g_assert_nonnull(strstr(text, "resize_token_embeddings"));
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_indexed(LG_INDEXED_NODES, &c->t, &c->v)), ==,
                    "node_id_out_of_range");
    g_free(c);

    /* one_hot of 1-based labels, and of -1 (one_hot has no ignore_index to set) */
    int64_t one[4] = {1, 2, 4, 3};
    c = make_case(one, 4, 4, -1, 1);
    c->t.has_ignore_index = 0;
    lg_scan_host(&c->t, c->labels, 16, &c->v);
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_indexed(LG_INDEXED_CLASSES, &c->t, &c->v)), ==, "one_based");
    g_free(c);
    int64_t neg[4] = {0, -1, 3, 2};
    c = make_case(neg, 4, 4, -1, 1);
    c->t.has_ignore_index = 0;
    lg_scan_host(&c->t, c->labels, 16, &c->v);
    got = lg_cause_classify_indexed(LG_INDEXED_CLASSES, &c->t, &c->v);
    g_assert_cmpstr(lg_cause_name(got), ==, "other");
    lg_cause_explain_indexed(got, LG_INDEXED_CLASSES, &c->t, &c->v, text, sizeof text);
    g_assert_nonnull(strstr(text, "no negative label"));
    g_assert_null(strstr(text, "ignore_index=-1"));
    /* a plain dimension keeps negative_id for -1 padding */
    g_assert_cmpstr(lg_cause_name(lg_cause_classify_indexed(LG_INDEXED_DIM, &c->t, &c->v)), ==, "negative_id");
    g_free(c);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cause/one_based", test_one_based);
    g_test_add_func("/cause/scaled_255_binary_mask", test_scaled_255_binary_mask);
    g_test_add_func("/cause/scaled_255_multiclass", test_scaled_255_multiclass);
    g_test_add_func("/cause/void_255", test_void_255);
    g_test_add_func("/cause/void_255_small_heads", test_void_255_small_heads);
    g_test_add_func("/cause/negative_unknown", test_negative_unknown);
    g_test_add_func("/cause/head_too_small", test_head_too_small);
    g_test_add_func("/cause/other", test_other);
    g_test_add_func("/cause/degenerate", test_degenerate);
    g_test_add_func("/cause/node_id_out_of_range", test_node_id_out_of_range);
    g_test_add_func("/cause/bce", test_bce_causes);
    g_test_add_func("/cause/probs", test_probs_causes);
    g_test_add_func("/cause/indexed", test_indexed);
    return g_test_run();
}
