/* cause.c: turns one verdict (bad count, min, max, first offending values) into the likely
 * cause of the bad labels and a one-sentence fix, following the taxonomy of the seed article
 * (shared/seed-article.txt: 1-based labels, labels scaled like pixels, a head with too few
 * outputs) plus the two conventions behind most segmentation reports (255 = void, -1 =
 * unknown). DESIGN.md §4 names the causes; the names are part of the log schema.
 *
 * Ids of embedding and index kernels (target_kind=ids) have causes of their own: a vocabulary
 * larger than the embedding (special tokens added to a tokenizer without resizing the
 * embedding) and -1 used as padding. The ids of index_add_ and scatter (the GNN aggregation
 * out.index_add_(0, dst, msg)) are node ids: past the end, an edge points past the last node.
 *
 * The float targets (probabilities of BCE, torch.bernoulli, torch.multinomial) have theirs in
 * cause_range.c.
 *
 * Called by act.c, once per violation, on the reporting thread; pure functions, no state,
 * no lock.
 * Tested by tests/unit/test_cause.c on the article's cases.
 *
 * What the rules can see: min and max over the non-ignored labels (bad ones included), the
 * bad count, the number of labels checked, and the first N offending values. Not a histogram,
 * so each rule asks for a pattern that min/max/samples make unambiguous, and the order below
 * settles the overlaps (a {0,255} binary mask is both "multiples of 255" and "255 in a dense
 * target": with 2 classes the scaling explanation wins, and the text mentions the void one).
 */
#include <stdio.h>
#include <inttypes.h>
#include <string.h>

#include "report/report.h"

static const char *const names[] = {
    [LG_CAUSE_ONE_BASED] = "one_based",
    [LG_CAUSE_SCALED_255] = "scaled_255",
    [LG_CAUSE_VOID_255] = "void_255",
    [LG_CAUSE_NEGATIVE_UNKNOWN] = "negative_unknown",
    [LG_CAUSE_HEAD_TOO_SMALL] = "head_too_small",
    [LG_CAUSE_VOCAB_TOO_SMALL] = "vocab_too_small",
    [LG_CAUSE_NEGATIVE_ID] = "negative_id",
    [LG_CAUSE_NODE_ID_OUT_OF_RANGE] = "node_id_out_of_range",
    [LG_CAUSE_NO_SIGMOID] = "no_sigmoid",
    [LG_CAUSE_NAN_INPUT] = "nan_input",
    [LG_CAUSE_NUM_CLASSES_TOO_SMALL] = "num_classes_too_small",
    [LG_CAUSE_INDEX_OUT_OF_RANGE] = "index_out_of_range",
    [LG_CAUSE_FP16_OVERFLOW] = "fp16_overflow",
    [LG_CAUSE_ALL_MASKED] = "all_masked",
    [LG_CAUSE_NEGATIVE_PROBS] = "negative_probs",
    [LG_CAUSE_OTHER] = "other",
};

static const char *const fixes[] = {
    [LG_CAUSE_ONE_BASED] = "subtract 1",
    [LG_CAUSE_SCALED_255] = "divide the labels by 255",
    [LG_CAUSE_VOID_255] = "set ignore_index=255",
    [LG_CAUSE_NEGATIVE_UNKNOWN] = "set ignore_index=-1",
    [LG_CAUSE_HEAD_TOO_SMALL] = "give the last layer more outputs",
    [LG_CAUSE_VOCAB_TOO_SMALL] = "resize the embedding to the tokenizer (resize_token_embeddings)",
    [LG_CAUSE_NEGATIVE_ID] = "use padding_idx or mask the -1 ids",
    [LG_CAUSE_NODE_ID_OUT_OF_RANGE] = "size the output by the graph's node count, or relabel the edge ids",
    [LG_CAUSE_NO_SIGMOID] = "use BCEWithLogitsLoss on the logits (or apply torch.sigmoid first)",
    [LG_CAUSE_NAN_INPUT] = "the training diverged: lower the learning rate, check for fp16 overflow (use "
                           "torch.autocast / GradScaler), find the first NaN with torch.autograd.detect_anomaly()",
    [LG_CAUSE_NUM_CLASSES_TOO_SMALL] = "give num_classes the number of classes the labels use (labels must be < "
                                       "num_classes)",
    [LG_CAUSE_INDEX_OUT_OF_RANGE] = "build the indices from the size of the dimension they index",
    [LG_CAUSE_FP16_OVERFLOW] = "compute the softmax in float32 (logits.float().softmax(-1)) or use bf16",
    [LG_CAUSE_ALL_MASKED] = "keep at least one token per row after top-k/top-p or masking (top-k >= 1; top-p: "
                            "always keep the top token)",
    [LG_CAUSE_NEGATIVE_PROBS] = "pass softmax(logits) to torch.multinomial, or use Categorical(logits=...)",
    [LG_CAUSE_OTHER] = "check the label mapping and num_classes",
};

const char *lg_cause_name(lg_cause_t c) { return (unsigned)c <= LG_CAUSE_OTHER ? names[c] : "other"; }

lg_cause_t lg_cause_by_name(const char *name)
{
    for (unsigned c = 0; name && c < LG_CAUSE_OTHER; c++)
        if (strcmp(names[c], name) == 0)
            return (lg_cause_t)c;
    return LG_CAUSE_OTHER;
}

const char *lg_cause_fix(lg_cause_t c) { return (unsigned)c <= LG_CAUSE_OTHER ? fixes[c] : fixes[LG_CAUSE_OTHER]; }

/* True when every sampled offending value satisfies pred. */
static bool all_samples(const lg_verdict_t *v, bool (*pred)(int64_t value, int64_t n_classes), int64_t n_classes)
{
    if (v->n_samples <= 0)
        return false;
    for (int i = 0; i < v->n_samples; i++)
        if (!pred(v->samples[i].value, n_classes))
            return false;
    return true;
}

static bool is_255(int64_t x, int64_t n)
{
    (void)n;
    return x == 255;
}
static bool is_scaled(int64_t x, int64_t n) { return x > 0 && x % 255 == 0 && x / 255 < n; }

/* How far past n_classes a max may go and still look like "the same label space, one head
 * too small" rather than garbage: up to twice the classes, and at least 16 more for tiny
 * heads (a binary head fed 0..9). */
static bool near_head(int64_t max, int64_t n_classes)
{
    int64_t slack = n_classes > 16 ? n_classes : 16;
    return max < n_classes + slack;
}

lg_cause_t lg_cause_classify(const lg_target_t *t, const lg_verdict_t *v, bool dense_target)
{
    int64_t n = t->n_classes;
    if (n <= 0 || v->bad_count <= 0 || v->checked <= 0)
        return LG_CAUSE_OTHER;

    /* Every bad label is -1 (min is -1 and nothing reaches n_classes). */
    if (v->min == -1 && v->max < n)
        return LG_CAUSE_NEGATIVE_UNKNOWN;

    if (v->min >= 0) {
        bool all255 = v->max == 255 && all_samples(v, is_255, n);
        /* Scaled like pixels: each bad value is k*255 with k a valid class, and the labels that
         * were fine are the k = 0 ones, so none of them can be > 0. */
        bool scaled = v->max % 255 == 0 && v->max / 255 < n && all_samples(v, is_scaled, n) &&
                      (v->checked == v->bad_count || v->min == 0);
        /* A lone 255 among 0..n-1 labels is more often a marker (void, or -1 stored as uint8)
         * than scaling; ask for evidence only scaling explains: 2*255 and up, a binary task,
         * or every label scaled. */
        scaled = scaled && (v->max > 255 || n == 2 || v->checked == v->bad_count);
        if (dense_target && all255 && n != 2)
            return LG_CAUSE_VOID_255;
        if (scaled)
            return LG_CAUSE_SCALED_255;
        if (dense_target && all255)
            return LG_CAUSE_VOID_255;
        /* No 0 anywhere and the top label is exactly n_classes: the 1..N convention. */
        if (v->min >= 1 && v->max == n)
            return LG_CAUSE_ONE_BASED;
        if (v->max >= n && near_head(v->max, n))
            return LG_CAUSE_HEAD_TOO_SMALL;
    }
    return LG_CAUSE_OTHER;
}

lg_cause_t lg_cause_classify_ids(const lg_target_t *t, const lg_verdict_t *v)
{
    int64_t n = t->n_classes;
    if (n <= 0 || v->bad_count <= 0 || v->checked <= 0)
        return LG_CAUSE_OTHER;
    /* Only negatives are bad: padding written as -1 (or another negative) where the op takes
     * no negative ids. */
    if (v->min < 0 && v->max < n)
        return LG_CAUSE_NEGATIVE_ID;
    /* Only ids past the end, and not far past it: the same id space with a few more tokens
     * than the embedding has rows. */
    if (v->min >= 0 && v->max >= n && near_head(v->max, n))
        return LG_CAUSE_VOCAB_TOO_SMALL;
    return LG_CAUSE_OTHER;
}

lg_cause_t lg_cause_classify_family_ids(const char *family, const lg_target_t *t, const lg_verdict_t *v)
{
    return lg_cause_classify_indexed(lg_cause_indexed(family, NULL), t, v);
}

/* The kernel family says what its ids index where it can (x[idx], take and put index a dimension;
 * index_add_ node rows; EmbeddingBag a vocabulary; torch.compile's one_hot classes). One scatter kernel serves F.one_hot (a class
 * dimension) and message passing (node rows): the written operand tells them apart. One gather
 * and one index_select kernel serve nn.Embedding, index_select along any dimension, gather and
 * take_along_dim: only the call site tells an embedding, so with a Python stack and no
 * embedding() on it the ids index a plain dimension. Without a stack (a C++ program, backtraces
 * off) they keep the embedding's reading, the common case of these kernels. */
lg_indexed_t lg_cause_indexed(const char *family, const lg_ids_facts_t *f)
{
    unsigned flags = lg_family_flags(family);
    if (flags & LG_FAMILY_CLASSES)
        return LG_INDEXED_CLASSES;
    if (flags & LG_FAMILY_NODE_IDS)
        return f && f->one_per_row ? LG_INDEXED_CLASSES : LG_INDEXED_NODES;
    if (flags & LG_FAMILY_TENSOR_INDEX)
        return LG_INDEXED_DIM;
    if ((flags & LG_FAMILY_VOCAB) || (f && f->embedding_call))
        return LG_INDEXED_VOCAB;
    return f && f->python ? LG_INDEXED_DIM : LG_INDEXED_VOCAB;
}

bool lg_cause_one_per_row(const int64_t *sizes, const int64_t *strides, int dims, int64_t bound)
{
    if (dims < 0 || bound <= 0)
        return false;
    int64_t smallest = 0;
    for (int d = 0; d < dims; d++) {
        if (sizes[d] <= 1)
            continue;
        if (strides[d] <= 0)
            return false; /* several ids land in one row: a multi-hot or an aggregation */
        if (!smallest || strides[d] < smallest)
            smallest = strides[d];
    }
    if (!smallest)
        return true; /* a single id */
    for (int64_t elem = 1; elem <= 16; elem *= 2)
        if (smallest == bound * elem)
            return true;
    return false;
}

lg_cause_t lg_cause_classify_indexed(lg_indexed_t what, const lg_target_t *t, const lg_verdict_t *v)
{
    int64_t n = t->n_classes;
    if (n <= 0 || v->bad_count <= 0 || v->checked <= 0)
        return LG_CAUSE_OTHER;
    lg_cause_t c;
    switch (what) {
    case LG_INDEXED_CLASSES:
        /* Class labels: the label rules, without the ones that end in an ignore_index, which
         * one_hot does not have. */
        c = lg_cause_classify(t, v, false);
        if (c == LG_CAUSE_HEAD_TOO_SMALL)
            return LG_CAUSE_NUM_CLASSES_TOO_SMALL;
        return c == LG_CAUSE_NEGATIVE_UNKNOWN || c == LG_CAUSE_VOID_255 ? LG_CAUSE_OTHER : c;
    case LG_INDEXED_NODES:
        if (v->min >= 0 && v->max >= n)
            return LG_CAUSE_NODE_ID_OUT_OF_RANGE;
        c = lg_cause_classify_ids(t, v);
        return c == LG_CAUSE_VOCAB_TOO_SMALL ? LG_CAUSE_OTHER : c;
    case LG_INDEXED_DIM:
        /* -1 as padding is as likely here as in an embedding; the rest is an index past the size. */
        c = lg_cause_classify_ids(t, v);
        return c == LG_CAUSE_NEGATIVE_ID ? c : LG_CAUSE_INDEX_OUT_OF_RANGE;
    default:
        return lg_cause_classify_ids(t, v);
    }
}

const char *lg_cause_indexed_name(lg_indexed_t what)
{
    switch (what) {
    case LG_INDEXED_CLASSES: return "classes";
    case LG_INDEXED_NODES: return "nodes";
    case LG_INDEXED_DIM: return "dimension";
    default: return "vocabulary";
    }
}

const char *lg_cause_indexed_unit(lg_indexed_t what)
{
    switch (what) {
    case LG_INDEXED_CLASSES: return "classes";
    case LG_INDEXED_NODES: return "rows (nodes)";
    case LG_INDEXED_DIM: return "elements in the indexed dimension";
    default: return "rows";
    }
}

void lg_cause_explain_indexed(lg_cause_t c, lg_indexed_t what, const lg_target_t *t, const lg_verdict_t *v,
                              char *out, size_t out_len)
{
    int64_t n = t->n_classes;
    if (c == LG_CAUSE_NUM_CLASSES_TOO_SMALL) {
        snprintf(out, out_len,
                 "labels span %" PRId64 "..%" PRId64 " but the class dimension has %" PRId64 " entries "
                 "(F.one_hot's num_classes): give num_classes >= %" PRId64 ", or fix the labels that reach it",
                 v->min, v->max, n, v->max + 1);
    } else if (c == LG_CAUSE_INDEX_OUT_OF_RANGE) {
        snprintf(out, out_len,
                 "ids span %" PRId64 "..%" PRId64 " but the dimension they index has size %" PRId64
                 " (valid: %" PRId64 "..%" PRId64 "): an index out of range for that dimension, not a vocabulary: "
                 "build the indices from x.size(dim) of the tensor indexed",
                 v->min, v->max, n, t->allow_negative ? -n : (int64_t)0, n - 1);
    } else if (what == LG_INDEXED_CLASSES && c == LG_CAUSE_OTHER) {
        snprintf(out, out_len,
                 "labels outside [0, %" PRId64 ") (min %" PRId64 ", max %" PRId64 ") for a class dimension of %" PRId64
                 " (F.one_hot's num_classes), which takes no negative label and no ignore_index: drop or remap "
                 "those labels first, and check num_classes",
                 n, v->min, v->max, n);
    } else if (what == LG_INDEXED_CLASSES) {
        lg_cause_explain(c, t, v, out, out_len);
    } else {
        lg_cause_explain_ids(c, t, v, out, out_len);
    }
}

void lg_cause_explain(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len)
{
    int64_t n = t->n_classes;
    switch (c) {
    case LG_CAUSE_ONE_BASED:
        snprintf(out, out_len,
                 "labels span %" PRId64 "..%" PRId64 " with %" PRId64 " classes; they look 1-based: subtract 1", v->min,
                 v->max, n);
        break;
    case LG_CAUSE_SCALED_255:
        snprintf(out, out_len,
                 "bad labels are multiples of 255 (max %" PRId64 ") with %" PRId64 " classes, like a mask saved "
                 "as an image: divide the labels by 255 (if 255 marks void pixels instead, set ignore_index=255)",
                 v->max, n);
        break;
    case LG_CAUSE_VOID_255:
        if (t->has_ignore_index)
            snprintf(out, out_len,
                     "255 in a dense (segmentation) target with %" PRId64 " classes and ignore_index %" PRId64
                     ": 255 is the usual 'void' label: set ignore_index=255 in the loss",
                     n, t->ignore_index);
        else
            snprintf(out, out_len,
                     "255 in a dense (segmentation) target with %" PRId64 " classes: 255 is the usual 'void' "
                     "label: set ignore_index=255 in the loss",
                     n);
        break;
    case LG_CAUSE_NEGATIVE_UNKNOWN:
        snprintf(out, out_len,
                 "the bad labels are -1, a common 'unknown' marker, while ignore_index is %" PRId64
                 ": set ignore_index=-1 or drop those samples",
                 t->has_ignore_index ? t->ignore_index : (int64_t)-100);
        break;
    case LG_CAUSE_HEAD_TOO_SMALL:
        snprintf(out, out_len,
                 "labels span %" PRId64 "..%" PRId64 " but the model has %" PRId64 " outputs: give the last "
                 "layer at least %" PRId64 " outputs (check num_classes)",
                 v->min, v->max, n, v->max + 1);
        break;
    case LG_CAUSE_VOCAB_TOO_SMALL:
        snprintf(out, out_len,
                 "ids span %" PRId64 "..%" PRId64 " but the embedding has %" PRId64 " rows: the tokenizer has more "
                 "tokens than the embedding (special tokens added without resizing it?): give it at least %" PRId64
                 " rows (model.resize_token_embeddings(len(tokenizer)))",
                 v->min, v->max, n, v->max + 1);
        break;
    case LG_CAUSE_NODE_ID_OUT_OF_RANGE:
        snprintf(out, out_len,
                 "node ids span %" PRId64 "..%" PRId64 " but the output has %" PRId64 " rows (nodes): an edge "
                 "points past the last node: give it num_nodes >= %" PRId64 " rows; when batching graphs, offset "
                 "each graph's edge ids by the nodes before it",
                 v->min, v->max, n, v->max + 1);
        break;
    case LG_CAUSE_NEGATIVE_ID:
        snprintf(out, out_len,
                 "negative ids (min %" PRId64 ") where the op takes none: -1 used as padding? pass padding_idx to the "
                 "embedding and pad with it, or mask those positions",
                 v->min);
        break;
    default:
        snprintf(out, out_len,
                 "labels outside [0, %" PRId64 ") (min %" PRId64 ", max %" PRId64 ") match no known pattern: "
                 "check the dataset's label mapping and the model's num_classes",
                 n, v->min, v->max);
        break;
    }
}

void lg_cause_explain_ids(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len)
{
    if (c == LG_CAUSE_VOCAB_TOO_SMALL || c == LG_CAUSE_NEGATIVE_ID || c == LG_CAUSE_NODE_ID_OUT_OF_RANGE) {
        lg_cause_explain(c, t, v, out, out_len);
        return;
    }
    int64_t n = t->n_classes;
    snprintf(out, out_len,
             "ids outside [%" PRId64 ", %" PRId64 ") (min %" PRId64 ", max %" PRId64 ") match no known pattern: "
             "check how the ids are built against the size of the dimension they index (for an embedding, "
             "its num_embeddings)",
             t->allow_negative ? -n : (int64_t)0, n, v->min, v->max);
}
