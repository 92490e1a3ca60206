/* kernels.h: the kernels layer (src/kernels/): knowledge of PyTorch's kernels: the spec
 * format and the built-in table, the name cache, argument decoding, families, _assert_async,
 * coverage of a wheel. Includes base.h. See src/README.md for the layers. */
#ifndef LG_KERNELS_H
#define LG_KERNELS_H
#include "base/base.h"

/* ---------------------------------------------------------------- registry.c */

typedef enum { LG_DIR_FORWARD, LG_DIR_BACKWARD } lg_direction_t;

/* How to read one value out of a launch's argument array: parameter index, byte offset inside
 * that parameter (for a struct passed by value), width in bytes (1, 4 or 8), signedness. */
typedef struct lg_field {
    int param; /* -1: absent */
    int offset;
    int width;
    bool is_signed;
} lg_field_t;

/* What a spec says about n_classes / count: a parameter, or derived. */
typedef enum {
    LG_COUNT_PARAM,    /* count = field `count` */
    LG_COUNT_ONE,      /* exactly one label (1d kernels) */
    LG_COUNT_ACCESSOR, /* product of the target accessor's sizes */
    LG_COUNT_GRID_MAP, /* (gridDim.x / blocks_per_sample) * map_nelem (nll_loss2d reduce) */
} lg_count_kind_t;

#define LG_MAX_PARAMS 32
/* Operands of a range kernel that are checked (BCE: input, target). */
#define LG_MAX_OPERANDS 2

typedef struct lg_spec {
    char name[128];    /* section name in the spec file, e.g. nll_loss_forward_reduce_cuda_kernel_2d */
    char versions[32]; /* optional text, e.g. "1.13+" or "<=1.9 (THCUNN)", for messages */
    char match[256];   /* substrings of the mangled name, ';'-separated; all must occur */
    char family[32];   /* nll_loss, nll_loss2d, ... */
    lg_direction_t direction;
    int n_params;                   /* expected parameter count */
    int param_sizes[LG_MAX_PARAMS]; /* expected size of each parameter, bytes */

    lg_field_t target;       /* the pointer (data_ of an accessor when target_ndim > 0) */
    int target_ndim;         /* 0: plain pointer; 1..3: accessor with sizes/strides */
    int target_sizes_offset; /* byte offset of sizes_[0] inside the accessor param */
    int target_strides_offset;
    int target_index_width;    /* 8 (PackedTensorAccessor64) or 4 (THCDeviceTensor) */
    lg_dtype_t dtype;          /* fixed dtype, unless dtype_from_template */
    bool dtype_from_template;  /* a template argument of the mangled name: l / h / i */
    int dtype_template_arg;    /* which one, 1-based; 0: the last */
    bool ids;                  /* target_kind=ids: embedding/index ids, n_classes is the row count */
    bool range;                /* target_kind=range: float values checked against [0, 1] (BCE) */
    bool probs;                /* target_kind=probs (range too): torch.multinomial's rows of weights,
                                * count_field rows of n_classes each (lg_scan.h's LG_SCAN_RULE_PROBS) */
    bool assert_flag;          /* target_kind=assert: torch._assert_async's one-element condition (asserts.c) */
    lg_field_t allow_negative; /* ids: nonzero when the kernel wraps negative ids; param -1: never */
    lg_field_t weight;         /* class-weight pointer (mask safety); param -1: none */
    lg_field_t size_average;   /* reduction is mean; param -1: not a parameter */
    lg_field_t input;          /* log-probability input (raw-logits check); param -1: not checked */

    lg_count_kind_t count_kind;
    lg_field_t count;
    lg_field_t map_nelem, blocks_per_sample; /* LG_COUNT_GRID_MAP */

    lg_field_t n_classes;
    lg_field_t n_classes_times; /* width 0: none; else the bound is n_classes times this field */
    lg_field_t ignore_index;    /* param -1: the kernel has no ignore_index */
    bool truncate_to_int32;
    char no_mask[192]; /* ids: why mask must not run this kernel on a copy ("" when it may) */
    char source[256]; /* "builtin" or file:line, for messages */

    /* Closure-taking TensorIterator kernels (target_calc=): the target is read through an
     * OffsetCalculator<calc_nargs, index_t> captured at calc.param + calc.offset; its
     * strides_[d][calc_arg] are the target's byte strides. calc.width 0: none (so that a
     * zeroed spec has none; likewise targets). */
    lg_field_t calc;       /* offset of the calculator; width = sizeof(index_t), 4 or 8 */
    int calc_max_dims;     /* MAX_DIMS of the build (25) */
    int calc_nargs, calc_arg;
    bool allow_negative_always; /* allow_negative=always: the kernel wraps every negative id */
    /* dtype=from_functor:MARK:N[:int64]: the N-th template argument of the functor whose
     * mangled name (with its I) is MARK, e.g. _cuda_scatter_gather_internal_kernel<bool,
     * scalar_t, index_t>; the default when the functor has fewer (older releases). */
    char dtype_functor[64];
    int dtype_functor_arg;
    bool dtype_functor_has_default;
    lg_dtype_t dtype_functor_default;
    /* targets=: a kernel reading several index tensors (gpu_index_kernel): their number is the
     * field targets; target k's pointer and bound sit k * 8 bytes after target 0's. */
    lg_field_t targets;
    int targets_max;
    /* targets=N (range kernels): a constant N operands checked in turn, 0 the input and 1 the
     * target of BCE; pointer k at 8 * k after target's, through a calculator its operand
     * calc_arg + k. 0: one operand. */
    int operands;
    bool unsized_ok; /* layout_check=offset_calc: without runtime sizes, the per-launch
                      * OffsetCalculator check stands in for the parameter-size check */
} lg_spec_t;

/* The registry is built once (lazily, by lg_registry_ensure) from the built-in table
 * (specs/pytorch.conf, embedded) and LABELGUARD_KERNELS (':'-separated files). Returns the
 * number of specs loaded. Never prints: each problem (a malformed or conflicting user file,
 * which is then skipped while the built-in table stays) goes to `warn` ("spec_file",
 * "file:line: [group] field: message; ..."; the start hands report.c's warning in);
 * lg_registry_init drops them (tests). Either replaces any previous table (tests call
 * it repeatedly; not concurrently with lookups). */
typedef void (*lg_registry_warn_fn)(const char *what, const char *detail);
LG_HIDDEN int lg_registry_init(const char *user_files);
LG_HIDDEN int lg_registry_init_with(const char *user_files, lg_registry_warn_fn warn);
/* The registry (built-in table and LABELGUARD_KERNELS as the constructor read it into lg_config_values),
 * built once per process: by the start, or first by a coverage report (labelguard_coverage) in
 * a process that has not started, whose problems with a user file then go to `warn`. Takes
 * build_lock, which lg.c's fork handlers take around a fork (prepare, parent), so a fork never
 * copies a half-built table; the child gets a fresh lock. Never starts CUDA. */
LG_HIDDEN void lg_registry_ensure(lg_registry_warn_fn warn);
LG_HIDDEN void lg_registry_atfork_prepare(void);
LG_HIDDEN void lg_registry_atfork_parent(void);
LG_HIDDEN void lg_registry_atfork_child(void);
/* True when some spec's match occurs in `mangled` (layout not checked): the cheap test before
 * asking the runtime for parameter sizes. */
LG_HIDDEN bool lg_registry_maybe_watched(const char *mangled);
/* The spec for a kernel: the first whose match occurs in `mangled` AND whose parameter
 * count/sizes fit the kernel (actual_sizes from cudaFuncGetParamInfo when n_actual >= 0,
 * else read from the mangled signature). Several specs may share a name (one per PyTorch
 * layout). NULL when none fits: then why is "" if no spec's name matched (not watched), or
 * the layouts that were tried (the caller warns `unknown_layout` once and lets it run).
 * Lock-free after init; call once per kernel handle and cache. */
LG_HIDDEN const lg_spec_t *lg_registry_find(const char *mangled, const size_t *actual_sizes, int n_actual, char *why,
                                            size_t why_len);
/* The first spec whose match occurs in `mangled`, layout unchecked; NULL if none. */
LG_HIDDEN const lg_spec_t *lg_registry_match(const char *mangled);
/* Checks the spec against the kernel's real parameter list: sizes from the runtime
 * (cudaFuncGetParamInfo, n_actual >= 0) or from the mangled signature. Returns true if it
 * matches; else false with a reason in why. */
LG_HIDDEN bool lg_registry_layout_ok(const lg_spec_t *spec, const char *mangled, const size_t *actual_sizes,
                                     int n_actual, char *why, size_t why_len);
LG_HIDDEN int lg_registry_count(void);
LG_HIDDEN const lg_spec_t *lg_registry_get(int i);
/* ---------------------------------------------------------------- spec.c */

/* Parses spec text (the GKeyFile format of specs/pytorch.conf). Fills out (capacity cap);
 * returns the count or -1 with "file:line: [group] field: message" in err. Pure: no globals. */
LG_HIDDEN int lg_spec_parse(const char *text, size_t len, const char *origin, lg_spec_t *out, int cap, char *err,
                            size_t err_len);
/* The spec of list[0..n) that a launch could not tell from s (same match, same layout). */
LG_HIDDEN const lg_spec_t *lg_spec_conflict(const lg_spec_t *s, const lg_spec_t *list, int n);
/* ---------------------------------------------------------------- spec_text.c */

/* printf into err (NULL or 0 length: nothing). */
LG_HIDDEN void lg_spec_text_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where each group and key of a spec text sits. */
typedef struct key_pos {
    char group[128];
    char key[64];
    int line;
} key_pos_t;

typedef struct lg_spec_text {
    key_pos_t *keys; /* one entry per key, plus one per group with key "" */
    int n, cap;
} lg_spec_text_t;

/* Checks the text line by line and fills m; 0, or -1 with "file:line: ..." in err. */
LG_HIDDEN int lg_spec_text_check(const char *text, size_t len, const char *origin, lg_spec_text_t *m, char *err,
                                 size_t err_len);
/* The line of key in group (key "": the group header; a missing key: its group's); 0 unknown. */
LG_HIDDEN int lg_spec_text_line(const lg_spec_text_t *m, const char *group, const char *key);
LG_HIDDEN void lg_spec_text_free(lg_spec_text_t *m);
/* ---------------------------------------------------------------- spec_value.c */

/* One group of a spec text being parsed: its GKeyFile, and where messages point. */
typedef struct lg_spec_value_ctx {
    struct _GKeyFile *kf; /* GKeyFile */
    const char *origin;
    const char *group;
    const lg_spec_text_t *map;
    char *err;
    size_t err_len;
} lg_spec_value_ctx_t;

/* "file:line: [group] key: message" into the context's err; returns -1. */
LG_HIDDEN int lg_spec_value_bad(const lg_spec_value_ctx_t *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Returns a trimmed copy of the value (g_free), or NULL with err set when missing/required. */
LG_HIDDEN char *lg_spec_value_get(const lg_spec_value_ctx_t *c, const char *key, bool required, int *rc);
/* Parses "a,b,c" into at most max integers in [-1, 1<<20]; returns the count or -1. */
LG_HIDDEN int lg_spec_value_ints(const lg_spec_value_ctx_t *c, const char *key, const char *v, int *out, int max);
/* A field "param,offset,width[,signed]" that must fit inside the parameter's size. */
LG_HIDDEN int lg_spec_value_field(const lg_spec_value_ctx_t *c, const lg_spec_t *s, const char *key, lg_field_t *f,
                                  bool allow_none, int *rc);
/* The index in names[] (NULL-terminated) of the required key's value; -1 with err set. */
LG_HIDDEN int lg_spec_value_choice(const lg_spec_value_ctx_t *c, const char *key, const char *const *names,
                                   const char *allowed);
/* ---------------------------------------------------------------- spec_closure.c */

/* The closure keys of a group (target_calc, targets, layout_check) into s, after target, count
 * and n_classes were read. 0, or -1 with the context's err set. */
LG_HIDDEN int lg_spec_closure_parse(const lg_spec_value_ctx_t *c, lg_spec_t *s);
/* ---------------------------------------------------------------- decode.c */

/* More labels than this in one launch means we misread the arguments (2^40 int64 labels
 * would be 8 TiB). */
#define LG_DECODE_ABSURD_COUNT (INT64_C(1) << 40)

/* Reads the target description of one launch. Returns 0, or -1 with a reason (the caller
 * warns and lets the launch run): NULL args, NULL target with labels, negative or absurd
 * counts/sizes/strides, unknown label type. Reads only args[] slots the spec names, within
 * the sizes the spec declares, after the layout check passed. On 0, `why` may still hold a
 * note (e.g. n_classes <= 0: every label will be reported out of range). */
LG_HIDDEN int lg_decode(const lg_spec_t *spec, lg_dtype_t dtype, void **args, const unsigned grid[3], lg_target_t *out,
                        char *why, size_t why_len);
/* Kernels reading several index tensors (spec targets=): how many this launch has (1 for every
 * other spec; 0 or -1 with why when the count field is not plausible), and target k of them. */
LG_HIDDEN int lg_decode_targets(const lg_spec_t *spec, void **args, char *why, size_t why_len);
LG_HIDDEN int lg_decode_nth(const lg_spec_t *spec, lg_dtype_t dtype, void **args, const unsigned grid[3], int k,
                            lg_target_t *out, char *why, size_t why_len);
/* One optional field of a launch (weight, size_average, input...): 0 with *out, -1 when the
 * spec has none or its argument is missing. Bounded by the spec's sizes like lg_decode. */
LG_HIDDEN int lg_decode_field(const lg_spec_t *spec, void **args, const lg_field_t *f, int64_t *out);
/* Operand `operand` of a closure kernel's OffsetCalculator (spec target_calc) as stored: up to
 * cap dimensions, fastest first, sizes and byte strides. The dimension count, or -1 (no
 * calculator, no arguments, outside the declared parameters). */
LG_HIDDEN int lg_decode_calc_operand(const lg_spec_t *s, void **args, int operand, int64_t *sizes, int64_t *strides,
                                     int cap);
/* The integer of `width` bytes (1, 4 or 8) at base + offset, sign-extended when is_signed; read
 * with memcpy (args[] slots need not be aligned). The caller checked the bounds. */
LG_HIDDEN int64_t lg_decode_read_int(const void *base, int offset, int width, bool is_signed);
/* ---------------------------------------------------------------- decode_dtype.c */

/* The label dtype of a kernel: the spec's, or the last template argument of its mangled name
 * (l/x int64, h uint8, i int32). Returns 0, or -1 with a reason. Once per kernel (classify.c). */
LG_HIDDEN int lg_decode_dtype(const lg_spec_t *spec, const char *mangled, lg_dtype_t *dtype, char *why, size_t why_len);
/* ---------------------------------------------------------------- decode_rewrite.c */

typedef struct lg_args_copy {
    void *args[LG_MAX_PARAMS];
    /* The rewritten parameters' values, packed (8-byte aligned): a by-value closure of 1240
     * bytes fits as well as a few small parameters. */
    unsigned char storage[LG_MAX_PARAMS * 128] __attribute__((aligned(16)));
    int used;
} lg_args_copy_t;
/* Builds a copy of args[] in which the target pointer is `new_data` (and ignore_index is
 * `new_ignore` when rewrite_ignore). For an accessor target the copy's strides are made
 * contiguous (the masked copy is dense, row-major). `storage` holds the rewritten parameter
 * values and must outlive the launch; new_args has spec->n_params slots. Returns 0, or -1
 * when a rewritten parameter exceeds the storage or new_ignore does not fit its width. */
LG_HIDDEN int lg_decode_rewrite(const lg_spec_t *spec, void **args, uint64_t new_data, bool rewrite_ignore,
                                int64_t new_ignore, lg_args_copy_t *copy);
/* ---------------------------------------------------------------- family.c */

/* What a spec's family says of its labels or ids. */
enum {
    LG_FAMILY_DENSE = 1,         /* per-pixel class labels (nll_loss2d) */
    LG_FAMILY_WRITES_AT_IDS = 2, /* the kernel writes at its ids (scatter, index_put_, index_add_, ...) */
    LG_FAMILY_NODE_IDS = 4,      /* ids are graph node ids (scatter, index_add_: message passing), unless
                                  * the launch shows a one-hot (cause.c) */
    LG_FAMILY_TENSOR_INDEX = 8,  /* ids index a tensor's dimension, not an embedding's vocabulary */
    LG_FAMILY_VOCAB = 16,        /* ids index an embedding's rows whatever the call site (EmbeddingBag) */
    LG_FAMILY_CLASSES = 32,      /* ids are class labels, one per row (torch.compile's one_hot check) */
};
/* The LG_FAMILY_* flags of a family name (0 for NULL or a family with none). */
LG_HIDDEN unsigned lg_family_flags(const char *family);
/* ---------------------------------------------------------------- asserts.c */

/* The element of a torch._assert_async condition: its size, float parts (0: an integer or bool;
 * else each part's bits), parts (2: complex) and dtype name. */
typedef struct lg_assert_elem {
    int bytes;
    int float_bits;
    int parts;
    const char *name;
} lg_assert_elem_t;
/* The element type of an _assert_async_cuda_kernel from its mangled name: 0, or -1 when the
 * name is not one of its instances. */
LG_HIDDEN int lg_asserts_element(const char *mangled, lg_assert_elem_t *out);
/* Whether bytes (e->bytes of them) hold zero as the kernel's `!= 0` sees it (-0.0 is zero). */
LG_HIDDEN bool lg_asserts_is_zero(const lg_assert_elem_t *e, const unsigned char *bytes);
/* The check of one condition read from ptr (bytes: the element): *t (one element) and *v
 * (bad_count 1, sample {0, 0} when it is zero; nothing else claimed). */
LG_HIDDEN void lg_asserts_verdict(const lg_assert_elem_t *e, uint64_t ptr, const unsigned char *bytes, lg_target_t *t,
                                  lg_verdict_t *v);
/* The op whose assert it is, from symbolized native frames (innermost first): the outermost
 * at::_ops::<op> that is not _assert_async itself, else "torch._assert_async". */
LG_HIDDEN void lg_asserts_op(char (*native)[256], int n_native, char *out, size_t len);
/* The message an op passes to torch._assert_async's kernel (its Msg parameter, char[256] by
 * value) into out (LG_ASSERT_MSG bytes); "" when the launch has none. */
#define LG_ASSERT_MSG 256
LG_HIDDEN void lg_asserts_message(const lg_spec_t *spec, void **args, char *out, size_t len);
/* When msg (lg_asserts_message's) is one an op known to labelguard passes (torch.multinomial's
 * two): that op into op, the sentence into out, and the likely cause's name (report/cause.c's)
 * returned; else NULL, nothing written. */
LG_HIDDEN const char *lg_asserts_meaning(const char *msg, char *op, size_t op_len, char *out, size_t len);
/* ---------------------------------------------------------------- names.c */

/* handle/stub -> mangled name, recorded at registration; lock-free reads. A registered name
 * points into the registering image and is dropped when its fatbin is unregistered. */
LG_HIDDEN void lg_names_record_function(void **fatbin, const void *host_stub, const char *mangled);
LG_HIDDEN void lg_names_record_kernel(const void *handle, const void *host_stub);
LG_HIDDEN void lg_names_drop_module(void **fatbin);
LG_HIDDEN long lg_names_registered(void); /* registered names currently held */
LG_HIDDEN const char *lg_names_lookup(const void *func);
/* Per-handle cache slot for launch.c: the matched spec (or NULL) once classified. `state` is
 * written last (release) so a reader that sees WATCHED also sees `spec`. */
enum {
    LG_KSTATE_UNKNOWN = 0,
    LG_KSTATE_UNWATCHED = 1,
    LG_KSTATE_WATCHED = 2,
    LG_KSTATE_BAD_LAYOUT = 3,
    LG_KSTATE_GATHER = 4, /* PyTorch's TensorIterator gather: known by name only (opaque.c) */
};
/* What classify.c learns once per watched kernel. */
typedef struct lg_kernel_facts {
    lg_dtype_t dtype;     /* label type */
    char short_name[128]; /* demangled unqualified name, for events and messages */
} lg_kernel_facts_t;
typedef struct lg_kernel_info {
    const void *func;
    const char *mangled;    /* NULL until known; in the image (registered) or a copy */
    const lg_spec_t *spec;  /* NULL: not watched */
    lg_dtype_t dtype;       /* set with spec */
    const char *short_name; /* set with spec (malloc'd: only watched kernels have one) */
    _Atomic int state;
    unsigned char image_name;              /* LG_NAME_*: where mangled points */
    _Atomic unsigned char warned;          /* launch.c: LG_WARNED_* said for this kernel */
    struct lg_kernel_info *next_in_module; /* names.c: the entries of one registered image */
} lg_kernel_info_t;
/* image_name: a copy (or no name); the registered image's own string (the entry is on its
 * module's chain); a kernel handle named after such a host stub (on the same chain). */
enum { LG_NAME_NONE = 0, LG_NAME_REGISTERED = 1, LG_NAME_FROM_STUB = 2 };
/* Why a watched kernel's launch ran unchecked, each said once per kernel (the summary counts
 * every such launch). */
enum { LG_WARNED_DECODE = 1, LG_WARNED_VALIDATE = 2, LG_WARNED_CAPTURE = 4 };
enum { LG_WARNED_CAPTURE_QUERY = 8 }; /* the stream's capture state could not be asked */
/* The table lives in names.c; the lookup is inline because it is the whole cost of an
 * unwatched launch (preload.c's fast path). Open addressing on the pointer value; a slot's key is
 * published with release ordering after its entry is complete. The table grows by generations
 * (4096 slots in BSS, then mapped ones four times larger each). It holds the kernels launched
 * so far (registrations are kept apart, names.c): PyTorch's few hundred touch 64 KiB. A generation, once
 * published, never changes its slots pointer or mask; an outgrown one keeps its mapping but
 * not its memory, so a reader still probing it reads empty slots (NULL: the slow path, which
 * looks again in the current one). */
typedef struct lg_names_slot {
    _Atomic(const void *) key;
    _Atomic(lg_kernel_info_t *) info;
} lg_names_slot_t;
typedef struct lg_names_gen {
    lg_names_slot_t *slots;
    uint32_t mask;
} lg_names_gen_t;
extern LG_HIDDEN const lg_names_gen_t *lg_names_current;
static inline uint32_t lg_names_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}
/* Lock-free; NULL if absent. */
static inline lg_kernel_info_t *lg_names_info(const void *func)
{
    const lg_names_gen_t *g = __atomic_load_n(&lg_names_current, __ATOMIC_ACQUIRE);
    lg_names_slot_t *slots = g->slots;
    uint32_t mask = g->mask;
    uint32_t i = lg_names_hash(func) & mask;
    for (;;) {
        const void *k = __atomic_load_n((const void **)&slots[i].key, __ATOMIC_ACQUIRE);
        if (k == func)
            return __atomic_load_n((lg_kernel_info_t **)&slots[i].info, __ATOMIC_RELAXED);
        if (!k)
            return NULL;
        i = (i + 1) & mask;
    }
}
LG_HIDDEN lg_kernel_info_t *lg_names_info_insert(const void *func); /* locks; NULL if table full */
LG_HIDDEN void lg_names_set_name(lg_kernel_info_t *info, const char *mangled);
/* Sets spec, facts and state once (the first classification wins); later calls change
 * nothing. */
LG_HIDDEN void lg_names_publish(lg_kernel_info_t *info, const lg_spec_t *spec, const lg_kernel_facts_t *facts,
                                int state);
LG_HIDDEN void lg_names_atfork_prepare(void);
LG_HIDDEN void lg_names_atfork_parent(void);
LG_HIDDEN void lg_names_atfork_child(void);
/* ---------------------------------------------------------------- coverage.c */

/* One kernel row of a PyTorch build's table (tests/wheels/<build>.tsv). */
typedef struct lg_coverage_row {
    char *family, *symbol, *lib;
    size_t sizes[LG_MAX_PARAMS]; /* bytes, one per parameter */
    int n;                       /* parameter count; -1 when the row has more than LG_MAX_PARAMS */
    int line;                    /* 1-based, for messages */
} lg_coverage_row_t;

typedef struct lg_coverage_table {
    char *path, *name; /* file path, file name (the wheel's build: 2.11.0+cu130.tsv) */
    char *build;       /* "# build:" header, else the file name without .tsv */
    lg_coverage_row_t *rows;
    int n_rows;
} lg_coverage_table_t;

/* A known-gaps.tsv entry; an array of them ends with a zero entry (match NULL). */
typedef struct lg_coverage_gap {
    char *match;  /* ';'-separated substrings of the mangled name, all must occur */
    char *reason;
    int used;     /* rows it accounted for: the caller counts, to find stale entries */
} lg_coverage_gap_t;

typedef enum {
    LG_COVERAGE_COVERED,   /* exactly one spec fits, and lg_registry_find returns it */
    LG_COVERAGE_GAP,       /* no spec fits; a known gap names the kernel */
    LG_COVERAGE_UNCOVERED, /* no spec fits and no gap names it */
    LG_COVERAGE_AMBIGUOUS, /* several specs fit: a launch could not tell them apart */
    LG_COVERAGE_STALE_GAP, /* covered, yet listed as a gap */
} lg_coverage_verdict_t;

/* The families the spec table must cover (nll_loss, nll_loss2d, cross_entropy), and the
 * gather-style ones the index guard covers with target_kind=ids specs. */
LG_HIDDEN bool lg_coverage_is_loss(const char *family);
LG_HIDDEN bool lg_coverage_is_index(const char *family);
/* Reads a table (a regular file of at most 64 MiB). Returns false with err (g_free) set on a
 * malformed or unreadable file. Either way the caller frees t with lg_coverage_table_free. */
LG_HIDDEN bool lg_coverage_table_load(const char *path, lg_coverage_table_t *t, char **err);
LG_HIDDEN void lg_coverage_table_free(lg_coverage_table_t *t);
/* known-gaps.tsv: "match<TAB>reason" lines, # comments. Returns the count, 0 when the file
 * does not exist; -1 with err (g_free) on a malformed line. *out (lg_coverage_gaps_free) is
 * set in every case. */
LG_HIDDEN int lg_coverage_gaps_load(const char *path, lg_coverage_gap_t **out, char **err);
LG_HIDDEN void lg_coverage_gaps_free(lg_coverage_gap_t *g);
/* Judges one row against the registry (built by the caller). *spec / *gap are set for
 * COVERED / GAP; *msg (g_free) explains the other verdicts, naming the table, line, kernel and
 * the first differing parameter of the closest spec. gaps may be NULL. */
LG_HIDDEN lg_coverage_verdict_t lg_coverage_judge(const lg_coverage_table_t *t, const lg_coverage_row_t *r,
                                                  lg_coverage_gap_t *gaps, const lg_spec_t **spec,
                                                  lg_coverage_gap_t **gap, char **msg);
/* labelguard_coverage's report (include/labelguard.h) on the registry as it is (the caller
 * built it): lines to out_fd, "labelguard: ..." on stderr for status 2. */
LG_HIDDEN int lg_coverage_report(const char *table_path, const char *known_gaps_path, bool quiet, int out_fd);

#endif /* LG_KERNELS_H */
