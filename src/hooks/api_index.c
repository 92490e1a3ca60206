/* api_index.c: the made-up kernels of the index ops that torch.compile checks before Inductor's
 * own kernels (LABELGUARD_INDEX_* of include/labelguard.h): embedding and its backward, x[idx],
 * index_put, gather, index_select, index_add / index_copy / index_fill, the scatters, take, put,
 * index_reduce (its mean), one_hot and max_unpool2d; and two losses' labels: multi_margin_loss's class labels,
 * which Inductor's decomposition reads with a gather, and binary_cross_entropy's input and target
 * (float: range kernels, [0, 1] and NaN, as eager's asserts), which it reads with log.
 *
 * Inductor lowers these ops into kernels of its own (Triton on the GPU, C++ on the CPU) that
 * guard each indirect load with an assert saying neither the id nor where it is, and some ids
 * that eager mode rejects pass silently (an embedding id of -2, an index_add index of -1). So
 * python/labelguard/_compiled.py puts labelguard::check_index in front of each op in the graph
 * Inductor receives, and the op hands the ids to labelguard_check_target (api_check.c), which
 * takes its kernel from here: a spec of family `embedding`, `gather`... (target_kind=ids, so
 * that the cause is read as for the eager kernels: an embedding id past the vocabulary is
 * vocab_too_small), and whether the eager op wraps negative ids (x[idx], index_put,
 * index_fill, take and put accept [-size, 0); the others reject them, whatever Inductor does).
 * one_hot's ids are class labels (family one_hot: the causes of eager's scatter into a one-hot);
 * multi_margin_loss's are a loss's labels (no ids kind: the label causes, no ignore_index);
 * BCE's are range targets, operand 0 (input) or 1 (target) for the report and the cause.
 *
 * Called by api_check.c on the thread that runs the compiled graph; the tables are built once
 * (pthread_once), read-only after. Tested by tests/torch-fake/test_compiled_index*.sh (real torch on the double).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hooks/hooks.h"
#include "labelguard.h"

/* The header's kinds, embedding (16) to max_unpool2d (35), in the order of ops[] (the
 * header's names are spelled out only there: tests/static/test_docs.sh reads names of that
 * prefix in src/ as environment variables). */
#define FIRST_KIND 16
#define N_INDEX    20

enum { IDS, LABELS, INPUT, TARGET }; /* INPUT and TARGET: range targets, operand 0 and 1 */

static const struct {
    const char *op;     /* the ATen op, in the kernel's name */
    const char *family; /* family.c's name: what the ids index (cause.c) */
    bool backward;
    bool negative;       /* the eager op wraps ids in [-size, 0) */
    int what;            /* IDS, LABELS (a loss's class labels), INPUT or TARGET (BCE's probabilities) */
    const char *no_mask; /* why mask has no id to put in place of a bad one ("" when padding_idx can) */
} ops[N_INDEX] = {
    {"embedding", "embedding", false, false, IDS, ""},
    {"embedding_dense_backward", "embedding", true, false, IDS, ""},
    {"index", "index", false, true, IDS, "x[idx] has no index that leaves its result unchanged"},
    {"index_put", "index_put", false, true, IDS, "index_put has no index that leaves the tensor unchanged"},
    {"gather", "gather", false, false, IDS, "gather has no index that leaves its result unchanged"},
    {"index_select", "index_select", false, false, IDS, "index_select has no index that leaves its result unchanged"},
    {"index_add", "index_add", false, false, IDS, ""},
    {"index_copy", "index_copy", false, false, IDS, "index_copy has no index that leaves the tensor unchanged"},
    {"index_fill", "index_fill", false, true, IDS, "index_fill has no index that leaves the tensor unchanged"},
    {"scatter", "scatter", false, false, IDS, "scatter has no index that leaves the tensor unchanged"},
    {"scatter_add", "scatter_add", false, false, IDS, "scatter_add has no index that leaves the tensor unchanged"},
    {"scatter_reduce", "scatter_reduce", false, false, IDS,
     "scatter_reduce has no index that leaves the tensor unchanged"},
    {"take", "take", false, true, IDS, "take has no index that leaves its result unchanged"},
    {"put", "put", false, true, IDS, "put has no index that leaves the tensor unchanged"},
    {"index_reduce", "index_add", false, false, IDS, "index_reduce has no index that leaves the tensor unchanged"},
    {"one_hot", "one_hot", false, false, IDS, "one_hot has no class that leaves its result unchanged"},
    {"multi_margin_loss", "multi_margin_loss", false, false, LABELS, ""},
    {"binary_cross_entropy", "binary_cross_entropy", false, false, INPUT, ""},
    {"binary_cross_entropy", "binary_cross_entropy", false, false, TARGET, ""},
    {"max_unpool2d", "max_unpool2d", false, false, IDS, "max_unpool2d has no index that leaves the output unchanged"},
};

static char short_names[N_INDEX][64];
static char mangled[N_INDEX][96];
static lg_spec_t specs[N_INDEX];
static lg_kernel_info_t infos[N_INDEX];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* As api_check.c's losses: one 8-byte parameter, the ids' pointer, which mask rewrites. Only
 * the embedding has a padding_idx: its ignore_index field is present (a padding_idx of None is
 * then said as such when mask has no id), and never rewritten (ids are never uint8 here). */
static void build_tables(void)
{
    for (int i = 0; i < N_INDEX; i++) {
        lg_spec_t *s = &specs[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", ops[i].op);
        snprintf(s->family, sizeof s->family, "%s", ops[i].family);
        snprintf(s->source, sizeof s->source, "torch.compile (labelguard::check_index)");
        snprintf(s->no_mask, sizeof s->no_mask, "%s", ops[i].no_mask);
        s->direction = ops[i].backward ? LG_DIR_BACKWARD : LG_DIR_FORWARD;
        s->n_params = 1;
        s->param_sizes[0] = 8;
        s->target = (lg_field_t){.param = 0, .offset = 0, .width = 8, .is_signed = false};
        s->ids = ops[i].what == IDS;
        s->range = ops[i].what >= INPUT;
        s->allow_negative_always = ops[i].negative;
        s->count_kind = LG_COUNT_PARAM;
        lg_field_t none = {.param = -1};
        s->allow_negative = s->weight = s->size_average = s->input = s->count = none;
        s->map_nelem = s->blocks_per_sample = s->n_classes = none;
        s->ignore_index = strcmp(ops[i].family, "embedding") == 0
                              ? (lg_field_t){.param = 0, .offset = 0, .width = 8, .is_signed = true}
                              : none;
        snprintf(short_names[i], sizeof short_names[i], "%s (torch.compile)", ops[i].op);
        snprintf(mangled[i], sizeof mangled[i], "labelguard::check_index(%s%s)", ops[i].op,
                 ops[i].what == TARGET ? " target" : "");
        lg_api_index_publish(&infos[i], s, mangled[i], short_names[i]);
    }
}

void lg_api_index_publish(lg_kernel_info_t *k, const lg_spec_t *s, const char *mangled, const char *short_name)
{
    k->func = k;
    k->mangled = mangled;
    k->spec = s;
    k->dtype = LG_DTYPE_INT64;
    k->short_name = short_name;
    k->image_name = LG_NAME_NONE;
    atomic_store(&k->state, LG_KSTATE_WATCHED);
}

int lg_api_index_operand(int kind)
{
    return kind >= FIRST_KIND && kind < FIRST_KIND + N_INDEX && ops[kind - FIRST_KIND].what == TARGET;
}

lg_kernel_info_t *lg_api_index_info(int kind)
{
    if (kind < FIRST_KIND || kind >= FIRST_KIND + N_INDEX)
        return NULL;
    pthread_once(&tables_once, build_tables);
    return &infos[kind - FIRST_KIND];
}
