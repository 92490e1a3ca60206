/* report.h: the report layer (src/report/): the events, their words for people, the likely
 * cause, the JSONL file and stderr. Declares what the checks and the core call; includes
 * kernels.h. See src/README.md for the layers. */
#ifndef LG_REPORT_H
#define LG_REPORT_H
#include "kernels/kernels.h"

/* ---------------------------------------------------------------- json.c */

/* A JSON writer into a fixed buffer; never allocates. Strings are escaped so that any input
 * bytes (quotes, control characters, invalid UTF-8) give valid JSON. On overflow `overflow` is
 * set and the text stays valid up to the last complete value. */
#define LG_JSON_MAX_DEPTH 32
typedef struct lg_json {
    char *buf;
    size_t cap, len; /* len excludes the NUL, which is always written */
    bool overflow;
    int depth;   /* open containers that were written */
    int skipped; /* containers opened after overflow (not written) */
    bool need_comma[LG_JSON_MAX_DEPTH + 1];
    char closer[LG_JSON_MAX_DEPTH + 1]; /* '}' or ']' per open container */
} lg_json_t;
LG_HIDDEN void lg_json_init(lg_json_t *j, char *buf, size_t cap);
LG_HIDDEN void lg_json_begin_object(lg_json_t *j, const char *key);
LG_HIDDEN void lg_json_end_object(lg_json_t *j);
LG_HIDDEN void lg_json_begin_array(lg_json_t *j, const char *key);
LG_HIDDEN void lg_json_end_array(lg_json_t *j);
LG_HIDDEN void lg_json_string(lg_json_t *j, const char *key, const char *value); /* NULL -> null */
LG_HIDDEN void lg_json_int(lg_json_t *j, const char *key, int64_t value);
LG_HIDDEN void lg_json_uint(lg_json_t *j, const char *key, uint64_t value);
LG_HIDDEN void lg_json_bool(lg_json_t *j, const char *key, bool value);
LG_HIDDEN void lg_json_null(lg_json_t *j, const char *key);
/* A float value: the fewest digits that read back as it (as a float when single), NaN and
 * infinities as the strings "nan", "inf", "-inf" (JSON has no NaN). format: the same text. */
LG_HIDDEN void lg_json_float(lg_json_t *j, const char *key, double value, bool single);
LG_HIDDEN size_t lg_json_format_float(char *out, size_t len, double x, bool single);
/* A string of `n` bytes (may hold NULs, which are escaped); for fuzzing and raw buffers. */
LG_HIDDEN void lg_json_string_n(lg_json_t *j, const char *key, const char *value, size_t n);
/* Closes every open container; returns j->len. The text in buf is then a complete value. */
LG_HIDDEN size_t lg_json_finish(lg_json_t *j);
/* ---------------------------------------------------------------- cause.c */

typedef enum {
    LG_CAUSE_ONE_BASED,
    LG_CAUSE_SCALED_255,
    LG_CAUSE_VOID_255,
    LG_CAUSE_NEGATIVE_UNKNOWN,
    LG_CAUSE_HEAD_TOO_SMALL,
    LG_CAUSE_VOCAB_TOO_SMALL,       /* ids: dense up to K >= the row count */
    LG_CAUSE_NEGATIVE_ID,           /* ids: -1 (or other negatives) used as padding */
    LG_CAUSE_NODE_ID_OUT_OF_RANGE,  /* ids of index_add_/scatter: edge ids past the node count */
    LG_CAUSE_NO_SIGMOID,            /* BCE probabilities outside [0, 1]: logits given to BCELoss */
    LG_CAUSE_NAN_INPUT,             /* BCE probabilities that are NaN: the training diverged */
    LG_CAUSE_NUM_CLASSES_TOO_SMALL, /* ids of a class dimension (F.one_hot): a label >= num_classes */
    LG_CAUSE_INDEX_OUT_OF_RANGE,    /* ids of a plain dimension (index_select(1), gather, x[idx]) */
    LG_CAUSE_FP16_OVERFLOW,         /* multinomial weights NaN or infinite: half-precision logits overflowed */
    LG_CAUSE_ALL_MASKED,            /* a multinomial row of zeros: top-k/top-p or a mask removed every token */
    LG_CAUSE_NEGATIVE_PROBS,        /* negative multinomial weights: logits given where probabilities go */
    LG_CAUSE_OTHER
} lg_cause_t;

/* What a kernel's ids index: the cause and the bound's unit follow from it, not from the
 * kernel alone (one scatter kernel serves F.one_hot and message passing, one gather kernel
 * nn.Embedding and take_along_dim). */
typedef enum {
    LG_INDEXED_VOCAB,   /* an embedding's rows (F.embedding / nn.Embedding on the stack, EmbeddingBag),
                         * or ids that nothing tells apart from them (no Python stack) */
    LG_INDEXED_CLASSES, /* a class dimension: each id sets one element of its own row of `bound`
                         * contiguous elements (F.one_hot, a one-hot made with scatter_) */
    LG_INDEXED_NODES,   /* node rows (index_add_, scatter in message passing) */
    LG_INDEXED_DIM,     /* some tensor's dimension (index_select(1, ...), gather, take_along_dim, x[idx]) */
} lg_indexed_t;

/* What act.c reads off a violation's launch and call site for lg_cause_indexed. */
typedef struct lg_ids_facts {
    bool python;         /* a Python stack was read: its functions can tell an embedding */
    bool embedding_call; /* torch/nn/functional.py's embedding() is on it (F.embedding, nn.Embedding) */
    bool one_per_row;    /* lg_cause_one_per_row on the written operand of a scalar scatter */
} lg_ids_facts_t;
LG_HIDDEN lg_indexed_t lg_cause_indexed(const char *family, const lg_ids_facts_t *f);
/* A scatter of one scalar (scatter_(dim, idx, value), F.one_hot's zeros(..., C).scatter_(-1, labels
 * .unsqueeze(-1), 1)) writes a one-hot when its output operand, as the iterator walks it, never
 * repeats a row (no stride-0 dimension: one id per row) and its rows are `bound` contiguous
 * elements (the smallest byte stride is bound times an element size). sizes and byte strides
 * as lg_decode_calc_operand returns them. */
LG_HIDDEN bool lg_cause_one_per_row(const int64_t *sizes, const int64_t *strides, int dims, int64_t bound);
LG_HIDDEN lg_cause_t lg_cause_classify_indexed(lg_indexed_t what, const lg_target_t *t, const lg_verdict_t *v);
/* The sentence for ids that index `what`. */
LG_HIDDEN void lg_cause_explain_indexed(lg_cause_t c, lg_indexed_t what, const lg_target_t *t, const lg_verdict_t *v,
                                        char *out, size_t out_len);
/* The JSONL's target.indexes: "vocabulary", "classes", "nodes" or "dimension". */
LG_HIDDEN const char *lg_cause_indexed_name(lg_indexed_t what);
/* The bound's unit in the stderr block: "rows", "classes", "rows (nodes)" or "elements in the
 * indexed dimension". */
LG_HIDDEN const char *lg_cause_indexed_unit(lg_indexed_t what);
/* Ids of an embedding or index kernel (target_kind=ids) get their own causes. */
LG_HIDDEN lg_cause_t lg_cause_classify_ids(const lg_target_t *t, const lg_verdict_t *v);
/* The same for a kernel family: index_add and scatter ids past the end are node ids. */
LG_HIDDEN lg_cause_t lg_cause_classify_family_ids(const char *family, const lg_target_t *t, const lg_verdict_t *v);
LG_HIDDEN lg_cause_t lg_cause_classify(const lg_target_t *t, const lg_verdict_t *v, bool dense_target);
LG_HIDDEN const char *lg_cause_name(lg_cause_t c);
/* The fix alone, a few words ("subtract 1"), for the one-line raise message. */
LG_HIDDEN const char *lg_cause_fix(lg_cause_t c);
/* The cause of a name (lg_cause_name's inverse); LG_CAUSE_OTHER for an unknown one. */
LG_HIDDEN lg_cause_t lg_cause_by_name(const char *name);
/* One sentence: what the values look like and the fix. Writes into out. */
LG_HIDDEN void lg_cause_explain(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len);
/* The sentence for ids (target_kind=ids): the two id causes, or "other" in words about ids. */
LG_HIDDEN void lg_cause_explain_ids(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out,
                                    size_t out_len);

/* Range targets (BCE's probabilities, target_kind=range): no_sigmoid when a bad value is a
 * number outside [0, 1], nan_input when every sampled bad value is NaN; other for BCE's
 * target operand; and the sentence. torch.multinomial's weights (rule LG_SCAN_RULE_PROBS):
 * fp16_overflow (a NaN or an infinity), else negative_probs, else all_masked (a row of zeros). */
LG_HIDDEN lg_cause_t lg_cause_classify_range(const lg_target_t *t, const lg_verdict_t *v);
/* The fix for a bad BCE target (operand 1 of a range kernel, cause other). */
LG_HIDDEN const char *lg_cause_range_target_fix(void);
/* A range target of `family` (bernoulli: torch.bernoulli's p) in its own words; any other
 * family as lg_cause_explain_range. And the fix alone, for the one-line raise message. */
LG_HIDDEN void lg_cause_explain_family_range(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v,
                                             const char *family, char *out, size_t out_len);
LG_HIDDEN const char *lg_cause_range_fix(lg_cause_t c, const char *family);
LG_HIDDEN void lg_cause_explain_range(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out,
                                      size_t out_len);
/* ---------------------------------------------------------------- report.c */

/* Everything known about one violation, filled by act.c, consumed by report.c and text.c. */
typedef struct lg_violation {
    const char *mangled;
    const lg_spec_t *spec;
    char short_name[128];
    uint64_t launch_seq;
    void *stream;
    uint64_t graph_id, replay; /* a CUDA graph replay: the graph's id and which replay (from 1) */
    uint64_t exec;             /* and which exec of the graph (from 1) */
    int device;
    lg_target_t target;
    lg_verdict_t verdict;
    lg_action_t action;
    const char *outcome; /* blocked, held, masked, launched, aborted */
    char note[256];      /* e.g. "raise fell back to mask: only CUPTI saw the launch" */
    lg_cause_t cause;    /* computed once, by act.c */
    lg_indexed_t indexed; /* ids: what they index (act.c), for the bound's unit */
    char cause_text[256];
    char op[64]; /* a torch._assert_async condition: the op that asserted (asserts.c), else "" */
    const char *model_line;   /* a torch.compile'd op: the model's line that called it (FX node), or NULL */
    lg_native_stack_t native; /* the launch's: read at it, or recorded there (a late verdict's site) */
    lg_py_stack_t python;
    /* A verdict read after its launch (async, graph replay): where it was read, and how. */
    bool late;
    const char *found; /* "at the next sync", ...; static text */
    lg_native_stack_t read_native;
    lg_py_stack_t read_python;
} lg_violation_t;

/* Each writes one JSONL line (one write() on an O_APPEND descriptor opened on first use) and,
 * unless quiet, text on stderr. Thread-safe. */
LG_HIDDEN void lg_report_warning(const char *what, const char *detail);
/* A warning about one kernel: its event also has `kernel` (the short name). */
LG_HIDDEN void lg_report_warning_kernel(const char *what, const char *kernel, const char *detail);
/* Like lg_report_warning but only the first time `what` is seen in this process. */
LG_HIDDEN void lg_report_warning_once(const char *what, const char *detail);
/* A warning event in the log only, once per `what`: nothing on stderr. */
LG_HIDDEN void lg_report_note_once(const char *what, const char *detail);
LG_HIDDEN void lg_report_start(void);
/* What the start event says about the environment; lg.c sets it before lg_report_start.
 * Strings are copied (NULL: unknown -> JSON null). Versions as CUDA reports them
 * (cudaRuntimeGetVersion / cudaDriverGetVersion: 13000 -> "13.0"; 0: unknown). */
typedef struct lg_report_env {
    const char *hooks;   /* active layers, e.g. "interpose,cupti" */
    const char *hooks_reason; /* why these layers (CUPTI taken or left alone, and how) */
    const char *backend; /* "gpu" or "host" */
    const char *validator; /* lg_validate_module_image(), NULL: none loaded */
    int cuda_runtime;
    int driver;
    const char *device_name;
    int device_index;  /* -1: unknown */
    const char *torch; /* torch version; NULL when not known */
    const char *compiled; /* how torch.compile'd losses are checked (api_check.c's wording) */
} lg_report_env_t;
LG_HIDDEN void lg_report_set_environment(const lg_report_env_t *env);
LG_HIDDEN void lg_report_summary(const lg_counters_t *c);
/* Path of this process's log file ("" before the first event, "stderr" on fallback). */
LG_HIDDEN const char *lg_report_log_path(void);
/* After fork in the child: forget the parent's descriptor and path. */
LG_HIDDEN void lg_report_after_fork_child(void);
/* The resolved configuration (the start event's `config`) as a JSON object into buf,
 * NUL-terminated and cut to cap - 1 bytes; returns its full length; -1 when out of memory. */
LG_HIDDEN int lg_report_config_json(char *buf, size_t cap);
/* What every event shares, for report_violation.c. One event line, 256 samples, 48 native and
 * 32 Python frames fit. lg_report_lock serialises building and writing (lines never
 * interleave); under it, lg_report_line starts a line in the shared buffer with the common
 * header (v, event, time, host, pid, tid, ranks) and lg_report_emit closes and writes it
 * (fsync first when sync_to_disk; a line that overflowed is marked truncated). */
#define LG_REPORT_LINE_CAP (96 * 1024)
LG_HIDDEN void lg_report_lock(void);
LG_HIDDEN void lg_report_unlock(void);
LG_HIDDEN void lg_report_line(lg_json_t *j, const char *event);
LG_HIDDEN void lg_report_emit(lg_json_t *j, bool sync_to_disk);
/* snprintf's contract for the public API's text results: at most cap - 1 bytes of text and a
 * NUL into buf, the full length returned so that the caller can retry with a larger buffer. */
LG_HIDDEN int lg_report_copy_out(char *buf, size_t cap, const char *text, size_t len);
/* ---------------------------------------------------------------- report_assert.c */

/* One launch that may be the one whose device-side assert fired (core/asserted.c fills it). */
typedef struct lg_assert_candidate {
    char kernel[128];   /* the short name, or the mangled one cut, or "?" */
    const char *symbol; /* mangled; NULL: not known */
    unsigned grid[3], block[3];
    const void *stream;
    int tid;
    bool finder;      /* launched by the thread that found the error */
    bool shared_slot; /* tid is the first of several threads */
    int age;          /* 0: its thread's newest launch */
    bool checked;     /* a kernel labelguard checks before launch */
    bool graph;       /* a CUDA graph replay: every kernel of the graph is a candidate */
    lg_py_stack_t *python; /* its launch's frames (LABELGUARD_LAUNCH_SITES=all), else NULL */
    const lg_generated_kernel_t *generated; /* a torch.compile kernel of this name, else NULL */
} lg_assert_candidate_t;
typedef struct lg_assert_report {
    const char *api;        /* the call that returned cudaErrorAssert */
    bool launch_blocking;   /* CUDA_LAUNCH_BLOCKING=1: the finder's newest launch asserted */
    bool driver_launches_seen; /* CUPTI active: driver-API launches (Triton's) are among the candidates */
    lg_native_stack_t native; /* where it was found */
    lg_py_stack_t python;
    int n;
    const lg_assert_candidate_t *c;
    int n_generated;     /* torch.compile's kernels that assert on their own (generated.c), newest first */
    int generated_total; /* ever recorded: more than n_generated when the oldest were dropped */
    const lg_generated_kernel_t *generated;
} lg_assert_report_t;
/* The device_assert event and its stderr block. */
LG_HIDDEN void lg_report_device_assert(const lg_assert_report_t *r);
/* native_stack, python_stack and python_stack_thread of an event (report_violation.c). */
LG_HIDDEN void lg_report_stacks_json(lg_json_t *j, char (*native)[256], int n_native, const lg_py_stack_t *py);
/* ---------------------------------------------------------------- report_violation.c */

/* The violation event: one JSONL line and, unless quiet, its block on stderr. Thread-safe.
 * `sync_to_disk`: fsync before returning (blocking actions). */
LG_HIDDEN void lg_report_violation(const lg_violation_t *v, bool sync_to_disk);
/* The log text for the raise path: one line naming kernel, label, index, n_classes, ignore. */
LG_HIDDEN void lg_report_violation_message(const lg_violation_t *v, char *out, size_t out_len);
/* The last violation event's JSON text exactly as logged (no newline) into buf, NUL-terminated
 * and cut to cap - 1 bytes; returns its full length (0: none yet). Any thread; takes a lock of
 * its own, never the log's. */
LG_HIDDEN int lg_report_violation_last(char *buf, size_t cap);
/* Fork child: a fresh lock for the last violation's copy (lg.c's atfork handler). */
LG_HIDDEN void lg_report_violation_after_fork(void);
/* ---------------------------------------------------------------- text.c */

/* Text from outside (kernel names, Python file names) for the terminal: control characters
 * and invalid UTF-8 become '?'. Returns out. */
LG_HIDDEN const char *lg_text_safe(const char *in, char *out, size_t len);
/* What an outcome ("blocked", "held", "aborted") means for the other ranks of a job of several
 * processes (WORLD_SIZE > 1), in buf; "" for one process or another outcome. Returns buf. */
LG_HIDDEN const char *lg_text_distributed(const char *outcome, char *buf, size_t len);
/* "target[17]", or "target[0][3][7]" for a dense target: what a user types into a debugger. */
LG_HIDDEN int lg_text_index(const lg_target_t *t, int64_t index, char *out, size_t len);
/* The frame a user reads as "the call site": the innermost one outside installed packages and
 * the standard library, else the innermost; -1 without frames. */
LG_HIDDEN int lg_text_user_frame(const lg_py_stack_t *py);
/* "forward"/"backward", NULL without a spec. */
LG_HIDDEN const char *lg_text_direction(const lg_violation_t *v);
/* The stderr block of one violation; returns its length (<= cap - 1). */
LG_HIDDEN size_t lg_text_violation(char *out, size_t cap, const lg_violation_t *v, char (*native)[256], int n_native,
                                   const char *log_path);
/* The one-line message of a blocked launch's CUDA error. */
LG_HIDDEN void lg_text_error_message(const lg_violation_t *v, const char *log_path, char *out, size_t out_len);
/* ---------------------------------------------------------------- log.c */

/* The sinks; report.c calls them under its lock. lg_log_emit writes one complete line to the
 * log file (opened on first use) or, on fallback, stderr; fsync when sync_to_disk. */
LG_HIDDEN void lg_log_emit(const char *line, size_t n, bool sync_to_disk);
LG_HIDDEN void lg_log_stderr(const char *p, size_t n);
/* Path of this process's log file ("" before the first event, "stderr" on fallback). */
LG_HIDDEN const char *lg_log_path(void);
/* The global (or local) rank from torchrun, SLURM or Open MPI; -1 when unset. */
LG_HIDDEN long lg_log_rank(bool local);
/* The job's process count (WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE), -1 when unset. */
LG_HIDDEN long lg_log_world_size(void);
/* gethostname, reduced to [A-Za-z0-9._-] (it becomes part of a file name). */
LG_HIDDEN void lg_log_hostname(char *out, size_t len);
LG_HIDDEN void lg_log_after_fork_child(void);

#endif /* LG_REPORT_H */
