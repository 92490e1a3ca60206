/* internal.h: the library's internal API, one section per source file (the file name is the
 * function prefix: registry.c holds lg_registry_*). Everything here has hidden visibility;
 * only the interposed CUDA entry points and include/labelguard.h are exported
 * (tests/exports.txt lists them, tests/e2e/test_exports.sh checks `nm -D`).
 *
 * Threading: hooks run on whatever thread launches a kernel. Functions say when they lock.
 */
#ifndef LG_INTERNAL_H
#define LG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "../cuda/lg_scan.h"

#define LG_HIDDEN      __attribute__((visibility("hidden")))
#define LG_EXPORT      __attribute__((visibility("default")))
#define LG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LG_LIKELY(x)   __builtin_expect(!!(x), 1)
/* For the few small thread-locals the launch fast path touches: the initial-exec model is a
 * plain %fs-relative load instead of a __tls_get_addr call (bench: ~88 instructions per
 * launch). Large per-thread buffers stay out of TLS altogether. */
#define LG_TLS         __thread __attribute__((tls_model("initial-exec")))

#define LG_VERSION "0.1.0"

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
static inline uint64_t lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- config.c */

typedef enum { LG_ACTION_RAISE, LG_ACTION_HOLD, LG_ACTION_MASK, LG_ACTION_LOG, LG_ACTION_ABORT } lg_action_t;
typedef enum { LG_MODE_SYNC, LG_MODE_ASYNC } lg_mode_t;
typedef enum { LG_HOOKS_AUTO, LG_HOOKS_INTERPOSE, LG_HOOKS_CUPTI } lg_hooks_t;

typedef struct lg_config {
    lg_action_t action;
    lg_mode_t mode;
    lg_hooks_t hooks;
    char log_dir[4096];
    char kernels[4096]; /* ':'-separated spec files, "" when unset */
    bool backtrace_native;
    bool backtrace_python;
    int samples; /* 1..LG_MAX_SAMPLES */
    bool quiet;
    bool debug_kernels; /* LABELGUARD_DEBUG_KERNELS=1: a kernel_seen warning per watched kernel */
    bool logprob_check; /* LABELGUARD_LOGPROB_CHECK=0 turns off the raw-logits check of NLL inputs */
    bool compiled;      /* LABELGUARD_COMPILED=off: torch.compile'd losses are left unchecked (api_check.c) */
} lg_config_t;

/* Parses the LABELGUARD_* variables through `getenv_fn` (getenv in the library, a table in
 * tests). Returns 0, or -1 with a one-line message (variable, bad value, allowed values) in
 * err. Never exits: the caller decides. */
LG_HIDDEN int lg_config_parse(lg_config_t *cfg, const char *(*getenv_fn)(const char *), char *err, size_t err_len);
LG_HIDDEN lg_config_t lg_cfg_defaults(void);
/* Judges one LABELGUARD_* variable by lg_config_parse's rules (value NULL: unset, which is
 * good): 0 good, -1 bad (msg: the constructor's message), -2 not a variable of ours. */
LG_HIDDEN int lg_config_check(const char *name, const char *value, char *msg, size_t msg_len);
LG_HIDDEN const char *lg_config_action_name(lg_action_t a);
LG_HIDDEN const char *lg_config_mode_name(lg_mode_t m);
LG_HIDDEN const char *lg_config_hooks_name(lg_hooks_t h);

/* The process-wide configuration, filled once by the constructor (lg.c). */
extern LG_HIDDEN lg_config_t lg_cfg;

/* ---------------------------------------------------------------- runtime.c */

/* The runtime functions the core calls, resolved from the process's own libcudart (never by
 * name through our hooks). A NULL member: that function is not in this runtime. */
typedef struct lg_runtime {
    int (*memcpy_async)(void *dst, const void *src, size_t n, int kind, void *stream);
    int (*stream_synchronize)(void *stream);
    int (*malloc_device)(void **p, size_t n);
    int (*free_device)(void *p);
    int (*malloc_host)(void **p, size_t n);
    int (*free_host)(void *p);
    int (*pointer_attributes)(void *attr, const void *ptr);
    int (*stream_is_capturing)(void *stream, int *status);
    int (*get_device)(int *dev);
    int (*get_device_properties)(void *prop, int dev);
    int (*get_last_error)(void);
    int (*func_get_name)(const char **name, const void *func);
    int (*func_get_param_info)(const void *func, size_t index, size_t *offset, size_t *size);
    const char *(*get_error_string)(int code);
    int (*runtime_get_version)(int *v);
    int (*driver_get_version)(int *v);
    int (*exchange_capture_mode)(int *mode);
    int (*launch_host_func)(void *stream, void (*fn)(void *), void *user);
    /* cudaStreamGetCaptureInfo: called with the first three arguments only (the rest NULL),
     * which every version of it, 3 to 7 parameters, accepts. */
    int (*stream_get_capture_info)(void *stream, int *status, unsigned long long *id, void *graph, void *deps,
                                   void *edges, void *n_deps);
    /* cudaHostGetDevicePointer: where the device sees cudaMallocHost memory (mapped pinned). */
    int (*host_get_device_pointer)(void **dev, void *host, unsigned flags);
    /* A second exec of a graph with checks gets scratch of its own (validate_node.c): its
     * copies of the check's nodes are pointed at it. Parameter structs as CUDA's. */
    int (*graph_get_nodes)(void *graph, void **nodes, size_t *n);
    int (*graph_node_get_type)(void *node, int *type);
    int (*graph_host_node_get_params)(void *node, void *params);
    int (*graph_memcpy_node_get_params)(void *node, void *params);
    int (*graph_kernel_node_get_params)(void *node, void *params);
    int (*graph_exec_host_node_set_params)(void *exec, void *node, const void *params);
    int (*graph_exec_memcpy_node_set_params_1d)(void *exec, void *node, void *dst, const void *src, size_t n, int kind);
    int (*graph_exec_kernel_node_set_params)(void *exec, void *node, const void *params);
} lg_runtime_t;

/* The process's runtime table, resolved once (pthread_once). Never NULL; members may be. */
LG_HIDDEN const lg_runtime_t *lg_runtime_get(void);
/* One loaded libcudart (per soname): its path, directory and major version (0: unknown). */
typedef struct lg_cudart {
    char path[4096];
    char dir[4096];
    int major;
} lg_cudart_t;
/* Every libcudart the loader holds, one per major version, in load order; returns the count. */
LG_HIDDEN int lg_runtime_cudarts(lg_cudart_t *out, int cap);
/* A handle on the first of them (dlopen RTLD_NOLOAD), cached; NULL when none is loaded. */
LG_HIDDEN void *lg_runtime_cudart_handle(void);
/* `name` from the runtime: dlsym(RTLD_NEXT), else the loaded libcudart; never `self`. */
LG_HIDDEN void *lg_runtime_resolve(const char *name, const void *self);
/* `name` at version node `version` ("libcudart.so.12") of the runtime of that major: RTLD_NEXT,
 * else the loaded libcudart of that major; if that runtime is not loaded, lg_runtime_resolve. */
LG_HIDDEN void *lg_runtime_resolve_version(const char *name, int major, const char *version, const void *self);
/* The runtime table of the loaded libcudart of that major, at that version node; when none of
 * that major is loaded, lg_runtime_get(). */
LG_HIDDEN const struct lg_runtime *lg_runtime_for(int major, const char *version);
/* libcuda.so.1, opened RTLD_LOCAL once; NULL without a driver. */
LG_HIDDEN void *lg_runtime_libcuda(void);

/* The error a blocked launch reports: cudaErrorNotPermitted. Not 710: the context is fine,
 * and frameworks treat 710 as fatal; 800 is non-sticky and otherwise rare around launches. */
#define LG_RAISE_ERROR 800
/* The error the next cudaGetLastError/PeekAtLastError of this thread reports (0: none); the
 * hooks read it on every such call, so it is a plain thread-local. */
extern LG_HIDDEN LG_TLS int lg_runtime_pending;
/* Set when lg_runtime_pending comes from a verdict read after its launch (async, graph
 * replay): the next synchronizing call of this thread returns it, as CUDA returns an
 * asynchronous error there. */
extern LG_HIDDEN LG_TLS int lg_runtime_pending_sync;
/* Set while our text for LG_RAISE_ERROR is this thread's: from the blocked launch (or the
 * verdict that raised) until the thread's next launch. */
extern LG_HIDDEN LG_TLS int lg_runtime_message_live;
/* Sets this thread's pending error and our text for it (message != NULL; the text is then what
 * cudaGetErrorString(LG_RAISE_ERROR) gives on this thread until its next launch). `at_sync`:
 * see lg_runtime_pending_sync. */
LG_HIDDEN void lg_runtime_set_pending_error(int code, const char *message, bool at_sync);
/* Our text for `code` on this thread, or NULL when it is not ours. */
LG_HIDDEN const char *lg_runtime_error_message(int code);
/* The thread's next launch: our text stops being the meaning of LG_RAISE_ERROR. */
static inline void lg_runtime_forget_message(void) { lg_runtime_message_live = 0; }
/* Around our own runtime calls: the application's pending error is taken before and handed
 * back after (lg_runtime_app_error, returned by the thread's next error query before any error
 * of ours), so that ours never reaches it and its own is never lost. Nests. */
extern LG_HIDDEN LG_TLS int lg_runtime_app_error;
/* What cudaGetLastError returns, given what the real one returned (e), and consumes it: the
 * application's saved error, else ours (unless e is an error of its own). Peek: the same,
 * consuming nothing. */
LG_HIDDEN int lg_runtime_take_error(int e);
LG_HIDDEN int lg_runtime_peek_error(int e);
/* An error labelguard returns from a call (a synchronization, a blocking copy, a graph replay)
 * is also the thread's last error, as CUDA's own are: what that call returns, given what the
 * real one returned (e). Our pending async error, if any, is returned (when e is 0) and stays
 * pending for cudaGetLastError, but is no longer due at a synchronizing call. While ours stays
 * pending, the thread's launches keep our text (lg_runtime_message_live). */
LG_HIDDEN int lg_runtime_deliver_async(int e);
LG_HIDDEN int lg_runtime_save_error(const lg_runtime_t *rt);
LG_HIDDEN void lg_runtime_restore_error(const lg_runtime_t *rt, int saved);
/* Capture state of `stream` (cudaStreamCaptureStatus: 0 none, 1 active, 2 invalidated; -1
 * when the runtime refused to say, e.g. cudaErrorStreamCaptureImplicit for the legacy stream
 * while a blocking stream captures) and, when capturing, its capture id. Leaves no error. */
LG_HIDDEN int lg_runtime_capture_status(const lg_runtime_t *rt, void *stream, unsigned long long *id);
/* When lg_runtime_capture_status returns -1, *id holds the CUDA error of the refusal. */
/* This thread's capture mode becomes relaxed (returns the old one to hand back), so that our
 * allocations and copies never invalidate a capture the application runs. -1: no such call. */
LG_HIDDEN int lg_runtime_relax_capture(const lg_runtime_t *rt);
LG_HIDDEN void lg_runtime_restore_capture(const lg_runtime_t *rt, int old);
LG_HIDDEN void lg_runtime_atfork_prepare(void);
LG_HIDDEN void lg_runtime_atfork_parent(void);
LG_HIDDEN void lg_runtime_atfork_child(void);
/* Thread-local re-entry guard, set around our own CUDA calls, logging and unwinding: a hook
 * that finds it set passes straight through. */
extern LG_HIDDEN LG_TLS int lg_in_library;

/* ---------------------------------------------------------------- counters.c */

typedef struct lg_counters {
    uint64_t launches, watched, validated, violations, validate_ns_total;
    uint64_t unchecked;      /* watched launches that ran without a check */
    uint64_t host_fallbacks; /* checks the host backend did because the GPU backend could not */
} lg_counters_t;
/* Per-thread launch counter slot; the first launch of a thread assigns it. */
typedef struct lg_counter_slot {
    _Atomic uint64_t launches;
    char pad[64 - sizeof(uint64_t)];
} __attribute__((aligned(64))) lg_counter_slot_t;
extern LG_HIDDEN LG_TLS lg_counter_slot_t *lg_counters_my_slot;
LG_HIDDEN lg_counter_slot_t *lg_counters_assign_slot(void);
/* Only this thread (mostly) writes its slot: a relaxed load+store is enough for a counter read
 * once at exit, and avoids a locked instruction per launch. Threads sharing a slot (more than
 * 64 launching threads) may lose an increment: the summary says "launches", not an invoice. */
static inline void lg_counters_count_launch(void)
{
    lg_counter_slot_t *s = lg_counters_my_slot;
    if (LG_UNLIKELY(!s))
        s = lg_counters_assign_slot();
    __atomic_store_n((uint64_t *)&s->launches, __atomic_load_n((uint64_t *)&s->launches, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
}
/* One more watched launch, validated launch, or watched launch that ran unchecked. */
LG_HIDDEN void lg_counters_count_watched(void);
LG_HIDDEN void lg_counters_count_validated(void);
LG_HIDDEN void lg_counters_count_unchecked(void);
/* A check made outside a launch (api_check.c, torch.compile's check op) in the summary's
 * watched count, and in validated too when its labels were read. */
LG_HIDDEN void lg_counters_count_check(bool validated_too);
/* The counts kept here; violations, validate_ns_total and host_fallbacks are left 0 (the
 * checks' own: lg_act_counters adds them). */
LG_HIDDEN void lg_counters_read(lg_counters_t *out);

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
    bool assert_flag;          /* target_kind=assert: torch._assert_async's one-element condition (asserts.c) */
    lg_field_t allow_negative; /* ids: nonzero when the kernel wraps negative ids; param -1: never */
    lg_field_t weight;         /* class-weight pointer (mask safety); param -1: none */
    lg_field_t size_average;   /* reduction is mean; param -1: not a parameter */
    lg_field_t input;          /* log-probability input (raw-logits check); param -1: not checked */

    lg_count_kind_t count_kind;
    lg_field_t count;
    lg_field_t map_nelem, blocks_per_sample; /* LG_COUNT_GRID_MAP */

    lg_field_t n_classes;
    lg_field_t ignore_index; /* param -1: the kernel has no ignore_index */
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
/* The registry (built-in table and LABELGUARD_KERNELS as the constructor read it into lg_cfg),
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

/* ---------------------------------------------------------------- demangle.c */
/* (demangle_parse.c, demangle_lex.c and demangle_sizes.c, the parser behind these, share
 * src/demangle.h: nothing outside the demangler sees a parser.) */

/* Short name (the kernel's unqualified identifier, e.g. nll_loss_forward_reduce_cuda_kernel_2d)
 * of an Itanium-mangled name, including nvcc's __nv_static_ prefixed form. Writes into out;
 * returns false when the name is not mangled (then out is a copy, truncated). Never allocates. */
LG_HIDDEN bool lg_demangle_short(const char *mangled, char *out, size_t out_len);
/* Last template argument's builtin type code: 'l' (long), 'h' (unsigned char), 'i' ...; 0 when
 * unknown. */
LG_HIDDEN char lg_demangle_last_template_arg(const char *mangled);
/* The same for the pos-th (1-based) template argument of the function; 0 when unknown. */
LG_HIDDEN char lg_demangle_template_arg(const char *mangled, int pos);
/* Parameter byte sizes from the mangled function signature (LP64). Returns the count, or -1
 * when the signature cannot be sized (then the caller relies on cudaFuncGetParamInfo). */
LG_HIDDEN int lg_demangle_param_sizes(const char *mangled, size_t *sizes, int cap);
/* Full demangled text via libstdc++'s __cxa_demangle when already loadable (dlopen NOLOAD
 * first); falls back to the short name. Allocates with malloc; caller frees. Report path only. */
LG_HIDDEN char *lg_demangle_full(const char *mangled);

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

/* ---------------------------------------------------------------- validate.c */

struct lg_scan_ring; /* cuda/lg_validate.h: a verdict ring, GPU- or host-written */

typedef enum { LG_BACKEND_HOST, LG_BACKEND_GPU } lg_backend_t;

/* Picks the backend: GPU when libcuda.so.1 opens, the embedded validator module loads and a
 * context is current (or a primary context is active); else HOST. `rt` may be NULL (static
 * cudart, CUPTI only): then only the GPU backend can validate. Call again after fork. */
LG_HIDDEN void lg_validate_init(const lg_runtime_t *rt);
LG_HIDDEN lg_backend_t lg_validate_backend(void);
/* Copies n bytes at device address ptr into out on `stream` and waits (relaxed capture mode;
 * the stream must not be capturing): 0, or -1 with why. */
LG_HIDDEN int lg_validate_read_bytes(const lg_runtime_t *rt, uint64_t ptr, size_t n, void *stream, void *out, char *why,
                                     size_t why_len);
/* From the atfork child handler: forgets the parent's modules, scratch and pending checks and
 * re-creates the lock (a parent thread may have held it). */
LG_HIDDEN void lg_validate_after_fork_child(void);
/* All functions below take the launch's stream as the application passed it to the runtime,
 * except that a NULL stream of a _ptsz entry point must be passed as (void *)2
 * (cudaStreamPerThread): the same handle means the same stream to the driver and runtime.
 * Targets may be strided (ndim 1..3, non-negative strides); copies keep the target's element
 * offsets, so the launch's accessor strides stay valid with the copy's address. */
/* Scans the target on `stream` and waits for the verdict. Returns 0, or -1 with a reason
 * (not device memory, copy failed...) in why: the caller warns and lets the launch run. */
/* The runtime this thread's next checks use (NULL: the one lg_validate_init was given); returns
 * the previous one. launch.c sets it for the duration of one launch's decision. */
LG_HIDDEN const struct lg_runtime *lg_validate_use_runtime(const struct lg_runtime *r);
LG_HIDDEN int lg_validate_sync(const lg_target_t *t, void *stream, int samples, lg_verdict_t *v, char *why,
                               size_t why_len);
/* Writes a copy of the labels in which every bad label is `replacement` (converted to the
 * target's dtype), into scratch memory owned by the validator (per stream, reused, never
 * freed). Returns the device address of logical element 0 of the copy, or 0 on failure. No
 * stream sync on the GPU backend: the copy is ready for work enqueued after it on `stream`. */
LG_HIDDEN uint64_t lg_validate_masked_copy(const lg_target_t *t, void *stream, int64_t replacement, char *why,
                                           size_t why_len);

/* Nanoseconds spent inside lg_validate_* so far (for the summary's validate_ns_total). */
LG_HIDDEN uint64_t lg_validate_ns_total(void);
/* Checks the host backend took over from an active GPU backend (scratch memory refused). */
LG_HIDDEN uint64_t lg_validate_gpu_host_fallbacks(void);
/* Why checks went to the host backend: returned once (then NULL), for the caller to report. */
LG_HIDDEN const char *lg_validate_gpu_take_fallback_note(void);
/* Once, when the GPU backend was chosen after a caller (the start event) had been answered
 * host for want of a context: the note for the log; NULL otherwise. */
LG_HIDDEN const char *lg_validate_gpu_take_backend_note(void);
/* Which validator image the driver loaded ("fatbin: sm_90 code, PTX ISA 6.5", "ptx: ..."),
 * NULL while none has loaded. */
LG_HIDDEN const char *lg_validate_module_image(void);
/* A launch being captured into a CUDA graph, as the check sees it. */
typedef struct lg_capture {
    unsigned long long id; /* the capture's id (cudaStreamGetCaptureInfo); 0 when unknown */
    bool sanitize;         /* the launch will read the sanitized copy (not in log mode) */
} lg_capture_t;
/* Async mode: enqueue validate+sanitize on `stream` with no stream synchronisation;
 * *sanitized gets the address of the sanitized copy the loss kernel must use (bad labels
 * replaced by `replacement`). `cookie` is returned with the verdict (verdicts.c). Returns 0 or
 * -1 with why. GPU backend: one launch writes the copy and publishes the verdict in mapped
 * pinned memory. Host backend: the scan runs before this returns, and when no label is bad
 * *sanitized is t->data itself. capture != NULL: the stream is capturing; the check becomes
 * part of the graph (validator kernel, or validate_node.c's host node) and is handed to
 * graphs.c, which queues one verdict per replay. */
struct lg_kernel_info;
LG_HIDDEN int lg_validate_async(const lg_target_t *t, void *stream, int64_t replacement, int samples,
                                struct lg_kernel_info *cookie, const lg_capture_t *capture, uint64_t *sanitized,
                                char *why, size_t why_len);
/* A second (or later) exec of a graph holding the check whose ring is `ring` (captured for
 * kernel `info`, whose launch reads its target at `reads`: the sanitized copy, or 0 when it
 * reads its own labels): the exec's copies of the check's nodes get scratch of their own, *own
 * their ring, by whichever backend captured the check. 0, or -1 with why and the exec as it
 * was instantiated (the replays then share the graph's scratch). */
LG_HIDDEN int lg_validate_rebind(void *exec, void *graph, const struct lg_scan_ring *ring,
                                 const struct lg_kernel_info *info, uint64_t reads, const struct lg_scan_ring **own,
                                 char *why, size_t why_len);
/* No graph or exec holds the captured check whose ring is `ring` (or an exec's own scratch
 * with that ring) any more, and `runs` of its runs were queued: its scratch goes back to the
 * backend that made it, which hands it to a later captured check once the ring has published
 * `runs` (the last replay has run). The ring keeps counting: that check's replays publish from
 * lg_verdicts_ring_latest + 1. Any thread; never called twice for one capture of a ring. */
LG_HIDDEN void lg_validate_retire(const struct lg_scan_ring *ring, uint64_t runs);
/* Where a captured check goes: the core's table of graphs (graphs.c plugs in its add_check),
 * called with the capture's id, the check's kernel, stream, target, ring and where the launch
 * reads its target (the sanitized copy, or 0). 0, or -1 with why. */
typedef int (*lg_validate_capture_sink_t)(unsigned long long capture_id, struct lg_kernel_info *info, void *stream,
                                          const lg_target_t *t, const struct lg_scan_ring *ring, uint64_t reads,
                                          char *why, size_t why_len);
LG_HIDDEN void lg_validate_set_capture_sink(lg_validate_capture_sink_t sink);

/* ---------------------------------------------------------------- validate_loss.c */

/* Rebinding a loss launch's node: where spec says the launch holds its target, read (*at) from
 * the launch's argument array, or set to `to` in out[] (spec->n_params slots; the parameter
 * holding it rewritten in `value`, LG_RETARGET_MAX bytes). 0, or -1 when spec cannot say;
 * lg_validate_loss_param: the parameter's index, or -1 when spec cannot say. */
#define LG_RETARGET_MAX 512
/* The most nodes a graph may have for its checks to be rebound (both backends search them all;
 * PyTorch's captured steps hold hundreds). */
#define LG_REBIND_MAX_NODES 4096
LG_HIDDEN int lg_validate_loss_param(const struct lg_spec *spec);
/* Is a graph kernel node's function `func` kernel `info` (its pointer, or a stub or handle of
 * the same mangled name)? */
LG_HIDDEN bool lg_validate_loss_is_kernel(const struct lg_kernel_info *info, const void *func);
LG_HIDDEN int lg_validate_loss_target(const struct lg_spec *spec, void *const *args, uint64_t *at);
LG_HIDDEN int lg_validate_loss_retarget(const struct lg_spec *spec, void *const *in, void **out, unsigned char *value,
                                        uint64_t to);

/* ---------------------------------------------------------------- validate_defer.c */

/* Hands the host backend's verdict v of an eager async check to a host function enqueued on
 * `stream`, which publishes it as run *seq of *ring when the stream gets there. 0, or -1 when it
 * cannot (the verdict is then final at once). */
LG_HIDDEN int lg_validate_defer(const lg_runtime_t *rt, void *stream, const lg_verdict_t *v,
                                const struct lg_scan_ring **ring, uint64_t *seq);
LG_HIDDEN void lg_validate_defer_after_fork(void);

/* ---------------------------------------------------------------- validate_host.c */

/* The host backend. `span`: elements spanned by the target (lg_scan_span), already checked.
 * scan: the verdict, 0 or -1 with why. sanitize: the verdict and a device copy of the labels
 * with each bad one replaced (*copy_out: logical element 0), or t->data when nothing was bad
 * and !always_copy. */
LG_HIDDEN int lg_validate_host_scan(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                    int samples, lg_verdict_t *v, char *why, size_t why_len);
/* scan copies a contiguous target in chunks of at most this many bytes (staging reused across
 * calls); a strided one, and sanitize's copy, in one piece. */
#define LG_VALIDATE_HOST_STAGE_BYTES ((size_t)1 << 20)
LG_HIDDEN int lg_validate_host_sanitize(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                        int64_t replacement, int samples, bool always_copy, lg_verdict_t *v,
                                        uint64_t *copy_out, char *why, size_t why_len);
LG_HIDDEN void lg_validate_host_after_fork(void);
/* Is ptr memory the device can read: 0 with the cudaMemcpyKind to copy it to the host with
 * (kind), or -1 with why. */
LG_HIDDEN int lg_validate_host_pointer(const lg_runtime_t *rt, const void *ptr, int *kind, char *why, size_t why_len);
/* In a host copy laid out like t (element offsets from logical element 0), each bad label
 * becomes `replacement`. */
LG_HIDDEN void lg_validate_host_replace(const lg_target_t *t, void *buf, int64_t replacement);

/* ---------------------------------------------------------------- family.c */

/* What a spec's family says of its labels or ids. */
enum {
    LG_FAMILY_DENSE = 1,         /* per-pixel class labels (nll_loss2d) */
    LG_FAMILY_WRITES_AT_IDS = 2, /* the kernel writes at its ids (scatter, index_put_, index_add_, ...) */
    LG_FAMILY_NODE_IDS = 4,      /* ids are graph node ids (scatter, index_add_: message passing), unless
                                  * the launch shows a one-hot (cause.c) */
    LG_FAMILY_TENSOR_INDEX = 8,  /* ids index a tensor's dimension, not an embedding's vocabulary */
    LG_FAMILY_VOCAB = 16,        /* ids index an embedding's rows whatever the call site (EmbeddingBag) */
};
/* The LG_FAMILY_* flags of a family name (0 for NULL or a family with none). */
LG_HIDDEN unsigned lg_family_flags(const char *family);

/* ---------------------------------------------------------------- validate_node.c */

/* The host backend inside a CUDA graph capture on `stream`: captures a copy of the labels to
 * pinned host memory, a host node that scans it (and, when sanitize, replaces the bad labels
 * and a copy back into a device buffer, *copy_out), so that every replay checks the labels the
 * replay reads. Replay k publishes its verdict as run k of *ring. 0, or -1 with why. */
LG_HIDDEN int lg_validate_node_capture(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                       bool sanitize, int64_t replacement, int samples, uint64_t *copy_out,
                                       const struct lg_scan_ring **ring, char *why, size_t why_len);
/* A second (or later) exec of a graph holding the check whose ring is `ring`: its copies of the
 * check's nodes (the label copy, the host node, the sanitized copy and the loss launch reading
 * it: the node of kernel `info` that holds the copy where info's spec puts its target) are
 * pointed at fresh scratch with a ring of its own, *own, so that its replays neither overwrite
 * another exec's labels nor publish into its verdicts. 0; 1 when `ring` is not a host-node
 * check's; or -1 with why and the exec as it was (nodes not found as captured, a runtime
 * without the calls). */
LG_HIDDEN int lg_validate_node_rebind(const lg_runtime_t *rt, void *exec, void *graph, const struct lg_scan_ring *ring,
                                      const struct lg_kernel_info *info, const struct lg_scan_ring **own, char *why,
                                      size_t why_len);
/* lg_validate_retire for a host-node check: 0, or 1 when `ring` is not one. */
LG_HIDDEN int lg_validate_node_retire(const struct lg_scan_ring *ring, uint64_t runs);

/* ---------------------------------------------------------------- validate_gpu.c */

typedef struct lg_scratch lg_scratch_t; /* per (context, stream) memory of the GPU backend */
/* One enqueued run of the validator. */
typedef struct lg_gpu_run {
    const lg_scratch_t *s;
    uint64_t seq;  /* the run's sequence number in s's ring (captured: replay k publishes k) */
    const struct lg_scan_ring *ring; /* s's ring, host view */
    uint64_t copy; /* sanitized copy, address of logical element 0 */
    bool captured;
} lg_gpu_run_t;
/* Loads the driver and decides whether the GPU backend is active: a current context that
 * loads the module, or a primary context active on some device. Returns that. */
LG_HIDDEN bool lg_validate_gpu_init(void);
LG_HIDDEN bool lg_validate_gpu_active(void);
/* Enqueues one scan on `stream`. Returns 0; or -1 with why, and *use_host set when the host
 * backend should take this call instead (no current context, module not loadable). */
LG_HIDDEN int lg_validate_gpu_launch(const lg_runtime_t *rt, const lg_target_t *t, void *stream, int64_t span,
                                     int samples, bool want_copy, int64_t replacement, bool allow_capture,
                                     lg_gpu_run_t *out, bool *use_host, char *why, size_t why_len);
/* Waits for `stream` (relaxed capture mode). 0, or -1 with why. */
LG_HIDDEN int lg_validate_gpu_wait(void *stream, char *why, size_t why_len);
/* Run `seq` of s's ring: 1 read into v, 0 not yet written, -1 already overwritten. */
LG_HIDDEN int lg_validate_gpu_ring_read(const lg_scratch_t *s, uint64_t seq, lg_verdict_t *v);
LG_HIDDEN void lg_validate_gpu_after_fork(void);

/* ---------------------------------------------------------------- validate_gpu_graph.c */

/* The GPU backend's lg_validate_rebind: the exec's copy of the validator node (and, when the
 * loss launch reads the sanitized copy at `reads`, of that launch) pointed at fresh captured
 * scratch, *own its ring. 0; 1 when `ring` is not a captured validator's; -1 with why and the
 * exec as it was. */
LG_HIDDEN int lg_validate_gpu_graph_rebind(void *exec, void *graph, const struct lg_scan_ring *ring,
                                           const struct lg_spec *spec, uint64_t reads,
                                           const struct lg_scan_ring **own, char *why, size_t why_len);
/* lg_validate_retire for captured validator scratch: 0, or 1 when `ring` is not one. */
LG_HIDDEN int lg_validate_gpu_graph_retire(const struct lg_scan_ring *ring, uint64_t runs);

/* ---------------------------------------------------------------- verdicts.c */

struct lg_scan_ring;
/* One check whose verdict is read after its launch. */
typedef struct lg_pending {
    struct lg_kernel_info *cookie;
    void *stream;
    lg_target_t target;
    const struct lg_scan_ring *ring; /* where run `seq` publishes (GPU validator, graph host
                                        node, validate_defer.c); NULL: `verdict` is final */
    uint64_t seq;
    uint64_t graph_id; /* a graph replay: the graph's id (its capture's); 0 otherwise */
    uint64_t replay;   /* a graph replay: which replay of that launch, from 1 */
    uint64_t exec;     /* a graph replay: which exec of the graph replayed it, from 1 */
    uint64_t owner;    /* the thread that added it (lg_verdicts_add sets it); 0: exited */
    bool as_is;        /* the launch read its own labels, not a sanitized copy */
    const volatile unsigned long long *latest; /* &ring->latest (lg_verdicts_add sets it) */
    lg_verdict_t verdict;
} lg_pending_t;
/* What a collected check says. */
typedef struct lg_async_report {
    struct lg_kernel_info *info; /* the cookie */
    void *stream;
    lg_target_t target;
    lg_verdict_t verdict;
    uint64_t graph_id, replay, exec;
    bool as_is; /* the launch read its own labels (lg_pending_t.as_is) */
} lg_async_report_t;
/* Queues p (malloc'd; the queue frees it), owned by the calling thread. 0, or -1 when out of
 * memory. */
LG_HIDDEN int lg_verdicts_add(lg_pending_t *p);
/* Which checks a collection may take besides the calling thread's own: none (a launch or an
 * error query), the orphans of one stream (its synchronization), or every orphan. */
typedef enum { LG_COLLECT_MINE, LG_COLLECT_SYNC_STREAM, LG_COLLECT_SYNC_ALL } lg_collect_t;
/* At exit (lg.c's atexit handler): every thread's checks, live threads' too. */
#define LG_COLLECT_EXIT ((lg_collect_t)(LG_COLLECT_SYNC_ALL + 1))
/* True and r filled for each finished check (clean ones included), oldest first; false when
 * none is ready. Thread-safe. */
LG_HIDDEN bool lg_verdicts_collect(lg_async_report_t *r, lg_collect_t scope, void *stream);
/* Run `seq` of a verdict ring (GPU: mapped pinned memory; graph host nodes: host memory):
 * 1 read into v, 0 not yet written, -1 already overwritten. Lock-free, any thread. */
LG_HIDDEN int lg_verdicts_ring_read(const struct lg_scan_ring *ring, uint64_t seq, lg_verdict_t *v);
/* The newest run a ring has published (0: none). Lock-free, any thread. */
LG_HIDDEN uint64_t lg_verdicts_ring_latest(const struct lg_scan_ring *ring);
/* Publishes run `seq` of a host-memory ring (its only writer, in seq order): the seqlock that
 * lg_verdicts_ring_read reads. Calls no CUDA function (a host function may call it). */
LG_HIDDEN void lg_verdicts_ring_write(struct lg_scan_ring *ring, uint64_t seq, const lg_verdict_t *v);
LG_HIDDEN void lg_verdicts_after_fork(void);
/* At exit, before CUDA's teardown: waits up to timeout_ns for the runs of every outstanding
 * check to be published (the process leaves without waiting for its GPU work). */
LG_HIDDEN void lg_verdicts_wait_published(uint64_t timeout_ns);
/* After the exit collection: no ring is read again (CUDA's teardown may unmap them), and no
 * hook of any thread looks for verdicts any more. */
LG_HIDDEN void lg_verdicts_close(void);
/* Is any thread's check outstanding? (Takes the queue's lock.) */
LG_HIDDEN bool lg_verdicts_outstanding(void);
extern LG_HIDDEN _Atomic int lg_verdicts_closed;
/* The calling thread's checks not collected yet, and the orphans of exited threads. */
extern LG_HIDDEN LG_TLS int lg_verdicts_mine;
extern LG_HIDDEN _Atomic int lg_verdicts_orphans;
static inline bool lg_verdicts_pending(void) { return lg_verdicts_mine != 0; }
/* The oldest of this thread's checks when it waits for its ring (NULL: it is final, or none is
 * outstanding). Set by verdicts.c under its lock, read here without one: only this thread frees
 * its own checks (the exit collection leaves a live thread's allocated). One pointer, not the
 * ring and seq: the library's static TLS block stays within 128 bytes. */
extern LG_HIDDEN LG_TLS const lg_pending_t *lg_verdicts_wait;
/* Is a verdict of this thread worth collecting now? With none outstanding: one thread-local
 * read. With the oldest not yet published: two more and one load of its ring, no lock, no
 * runtime call. Verdicts are read in launch order, so a newer one waits for the oldest (a
 * synchronizing call reads every one that is there). */
static inline bool lg_verdicts_due(void)
{
    if (LG_LIKELY(lg_verdicts_mine == 0))
        return false;
    if (__atomic_load_n((int *)&lg_verdicts_closed, __ATOMIC_RELAXED))
        return false;
    const lg_pending_t *p = lg_verdicts_wait;
    return !p || __atomic_load_n(p->latest, __ATOMIC_ACQUIRE) >= p->seq;
}
static inline bool lg_verdicts_orphaned(void)
{
    return __atomic_load_n((int *)&lg_verdicts_orphans, __ATOMIC_RELAXED) != 0;
}

/* ---------------------------------------------------------------- graphs.c */

/* A loss launch captured into capture `capture_id` whose check publishes run k of `ring` at
 * the graph's k-th execution. 0, or -1 with why. */
LG_HIDDEN int lg_graphs_add_check(unsigned long long capture_id, struct lg_kernel_info *info, void *stream,
                                  const lg_target_t *t, const struct lg_scan_ring *ring, uint64_t reads, char *why,
                                  size_t why_len);
/* The hooks of cudaStreamEndCapture (the capture's id, asked before the real call, or 0 for
 * a capture without checks, and the graph it made: it replaces whatever that handle mapped),
 * cudaGraphDestroy (before the real call, so a capture on another thread that gets the freed
 * handle is not unmapped), cudaGraphInstantiate*, cudaGraphExecDestroy and cudaGraphLaunch
 * (after it succeeded: queues one verdict per check for the calling thread; true when the exec
 * was instantiated before the library armed, so its launches are not checked). */
LG_HIDDEN void lg_graphs_end_capture(unsigned long long capture_id, const void *graph);
LG_HIDDEN void lg_graphs_destroyed(const void *graph);
LG_HIDDEN void lg_graphs_instantiated(const void *exec, const void *graph);
LG_HIDDEN void lg_graphs_exec_destroyed(const void *exec);
LG_HIDDEN bool lg_graphs_launched(const void *exec, void *stream); /* true: an exec made before arming */
/* labelguard_arm: execs made before now are unknown, and their replays say so once. */
LG_HIDDEN void lg_graphs_armed_late(void);
LG_HIDDEN void lg_graphs_after_fork(void);
/* Checks in captures not ended yet; execs with checks (plus one after a late arming). The
 * hooks test these first (one relaxed load each). */
extern LG_HIDDEN _Atomic int lg_graphs_open;
extern LG_HIDDEN _Atomic int lg_graphs_watched;
/* Graphs with checks not destroyed yet: the destroy and end-capture hooks test it first. */
extern LG_HIDDEN _Atomic int lg_graphs_graphs;
static inline bool lg_graphs_mapped(void) { return __atomic_load_n((int *)&lg_graphs_graphs, __ATOMIC_RELAXED) != 0; }
static inline bool lg_graphs_capturing(void) { return __atomic_load_n((int *)&lg_graphs_open, __ATOMIC_RELAXED) != 0; }
static inline bool lg_graphs_watching(void) { return __atomic_load_n((int *)&lg_graphs_watched, __ATOMIC_RELAXED) != 0; }

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

/* ---------------------------------------------------------------- captures.c */

/* The captures begun by cudaStreamBeginCapture while the hooks were in place (their graphs take
 * host nodes), by capture id (0 is ignored): recorded by the begin hook after the real call,
 * dropped by the end hook; seen: validate_node.c's test before it captures a host node. */
LG_HIDDEN void lg_captures_begun(unsigned long long id);
LG_HIDDEN void lg_captures_ended(unsigned long long id);
LG_HIDDEN bool lg_captures_seen(unsigned long long id);
/* Recorded captures not ended: the end hook asks the capture id only while some are. */
extern LG_HIDDEN int lg_captures_n_open;
static inline bool lg_captures_open(void) { return __atomic_load_n(&lg_captures_n_open, __ATOMIC_RELAXED) != 0; }

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
    LG_CAUSE_VOCAB_TOO_SMALL, /* ids: dense up to K >= the row count */
    LG_CAUSE_NEGATIVE_ID,     /* ids: -1 (or other negatives) used as padding */
    LG_CAUSE_NODE_ID_OUT_OF_RANGE, /* ids of index_add_/scatter: edge ids past the node count */
    LG_CAUSE_NO_SIGMOID,           /* BCE probabilities outside [0, 1]: logits given to BCELoss */
    LG_CAUSE_NAN_INPUT,            /* BCE probabilities that are NaN: the training diverged */
    LG_CAUSE_NUM_CLASSES_TOO_SMALL, /* ids of a class dimension (F.one_hot): a label >= num_classes */
    LG_CAUSE_INDEX_OUT_OF_RANGE,    /* ids of a plain dimension (index_select(1), gather, x[idx]) */
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
/* One sentence: what the values look like and the fix. Writes into out. */
LG_HIDDEN void lg_cause_explain(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out, size_t out_len);
/* The sentence for ids (target_kind=ids): the two id causes, or "other" in words about ids. */
LG_HIDDEN void lg_cause_explain_ids(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out,
                                    size_t out_len);

/* Range targets (BCE's probabilities, target_kind=range): no_sigmoid when a bad value is a
 * number outside [0, 1], nan_input when every sampled bad value is NaN; other for BCE's
 * target operand; and the sentence. */
LG_HIDDEN lg_cause_t lg_cause_classify_range(const lg_target_t *t, const lg_verdict_t *v);
/* The fix for a bad BCE target (operand 1 of a range kernel, cause other). */
LG_HIDDEN const char *lg_cause_range_target_fix(void);
LG_HIDDEN void lg_cause_explain_range(lg_cause_t c, const lg_target_t *t, const lg_verdict_t *v, char *out,
                                      size_t out_len);

/* ---------------------------------------------------------------- stack.c */

#define LG_MAX_FRAMES 48
typedef struct lg_native_stack {
    int n;
    void *ips[LG_MAX_FRAMES];
} lg_native_stack_t;
/* Raw return addresses of the calling thread; cheap, no symbolization. */
LG_HIDDEN void lg_stack_capture(lg_native_stack_t *s);
/* From lg.c's fork handlers: no capture is in progress while the child is made. */
LG_HIDDEN void lg_stack_atfork_prepare(void);
LG_HIDDEN void lg_stack_atfork_parent(void);
LG_HIDDEN void lg_stack_atfork_child(void);
/* "module+0xoff (function+0xoff)" per frame, our own frames removed. Writes up to max
 * strings of line_len bytes into lines; returns the count. Report path only. */
LG_HIDDEN int lg_stack_symbolize(const lg_native_stack_t *s, char (*lines)[256], int max);
/* The function containing ip from the ELF file's .symtab (module loaded at base); false when
 * the file has none. Report path only (maps the file). */
LG_HIDDEN bool lg_stack_symbol_from_file(const char *path, const void *base, const void *ip, char *name, size_t len,
                                         uintptr_t *off);

/* ---------------------------------------------------------------- pystack.c */

#define LG_MAX_PY_FRAMES 32
typedef struct lg_py_frame {
    char file[192];
    char function[96];
    int line;
} lg_py_frame_t;
typedef struct lg_py_stack {
    int n;                                  /* 0: not a Python process or no frames */
    bool from_main_thread;                  /* the launching thread had no Python frames */
    lg_py_frame_t frames[LG_MAX_PY_FRAMES]; /* innermost last */
} lg_py_stack_t;
/* Reads the calling thread's Python frames without the GIL and without allocating, like
 * faulthandler; CPython symbols resolved at run time. Safe to call in non-Python processes. */
LG_HIDDEN void lg_pystack_capture(lg_py_stack_t *s);
/* Fork child: its own pipe, a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_pystack_after_fork(void);

/* ---------------------------------------------------------------- pystack_offsets.c */

/* Byte offsets inside CPython's structures that pystack.c's walk reads: from its per-version
 * table (3.8 to 3.13) or from the interpreter's _Py_DebugOffsets (3.14 and newer). -1: absent. */
enum { LG_PY_FRAME_OBJECTS, LG_PY_INTERP_FRAMES };
typedef struct lg_py_layout {
    int minor;
    int kind; /* LG_PY_FRAME_OBJECTS (<= 3.10) or LG_PY_INTERP_FRAMES (>= 3.11) */
    /* PyThreadState */
    int ts_frame;   /* <= 3.10: PyFrameObject *frame */
    int ts_cframe;  /* 3.11, 3.12: _PyCFrame *cframe */
    int cf_current; /* _PyCFrame.current_frame */
    int ts_current; /* >= 3.13: _PyInterpreterFrame *current_frame */
    /* PyFrameObject (<= 3.10) or _PyInterpreterFrame (>= 3.11) */
    int f_back, f_code, f_lasti; /* f_code: f_executable from 3.13; f_lasti: prev_instr / instr_ptr >= 3.11 */
    int f_owner;                 /* >= 3.11 */
    int lasti_scale;             /* bytes per f_lasti unit (3.10 counts code units) */
    /* PyCodeObject */
    int co_filename, co_name, co_firstlineno, co_code_adaptive, co_firsttraceable;
    /* PyUnicode: where a compact str's characters start */
    int ascii_size, compact_size;
    /* PyCodeObject: the line table PyCode_Addr2Line reads (co_lnotab <= 3.9, co_linetable) */
    int co_lines;
    int ts_next;          /* PyThreadState.next */
    int interp_main_ts;   /* PyInterpreterState.threads.main (>= 3.14) */
    int ob_type;          /* PyObject.ob_type */
    int uni_length, uni_state;  /* PyASCIIObject.length, .state */
    int bytes_size, bytes_data; /* PyBytesObject: ob_size, ob_sval */
    int owner_incomplete;       /* frames whose owner is >= this are shims (_PyFrame_IsIncomplete) */
    unsigned ref_tag_bits;      /* low bits of f_executable to clear: a _PyStackRef's tags (>= 3.14) */
} lg_py_layout_t;
/* Bytes of _PyRuntime (its debug_offsets) that lg_pystack_offsets_decode may read. */
#define LG_PY_DEBUG_OFFSETS_LEN 1024
/* Fills *out from raw, a copy of the first len bytes of _PyRuntime in an interpreter of version
 * 3.<minor>. Returns NULL, or why the layout is refused (static text): no debug offsets (before
 * 3.13), wrong cookie or version, a free-threaded build, a structure too small for the walk.
 * *out is written only on success. */
LG_HIDDEN const char *lg_pystack_offsets_decode(const void *raw, size_t len, int minor, lg_py_layout_t *out);

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
    lg_native_stack_t native;
    lg_py_stack_t python;
} lg_violation_t;

/* Each writes one JSONL line (one write() on an O_APPEND descriptor opened on first use) and,
 * unless quiet, text on stderr. Thread-safe. */
LG_HIDDEN void lg_report_warning(const char *what, const char *detail);
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

/* ---------------------------------------------------------------- launch.c */

typedef enum {
    LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL, /* __cudaLaunchKernel (nvcc 13 <<<>>>) */
    LG_ENTRY_CUDA_LAUNCH_KERNEL_INTERNAL_PTSZ,
    LG_ENTRY_CUDA_LAUNCH_KERNEL,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_PTSZ,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC,
    LG_ENTRY_CUDA_LAUNCH_KERNEL_EXC_PTSZ,
    LG_ENTRY_CUPTI_RUNTIME,
    LG_ENTRY_CUPTI_DRIVER,
} lg_entry_t;

/* One launch, as the hook layers see it. */
typedef struct lg_launch {
    lg_entry_t entry;
    const void *func;    /* host stub, cudaKernel_t or CUfunction */
    const char *mangled; /* NULL: resolve from func */
    void **args;
    unsigned grid[3], block[3];
    size_t shared_mem;
    void *stream;
    bool can_block; /* false for CUPTI: the launch cannot be skipped */
} lg_launch_t;

/* What the hook must do with the launch. */
typedef enum {
    LG_VERDICT_RUN,      /* call the real function with the original args */
    LG_VERDICT_RUN_WITH, /* call it with `args_copy.args` (mask) */
    LG_VERDICT_SKIP,     /* do not launch; return `error` */
} lg_decision_kind_t;
typedef struct lg_decision {
    lg_decision_kind_t kind;
    int error; /* cudaError_t to return on SKIP */
    lg_args_copy_t args_copy;
} lg_decision_t;

/* The one entry from every hook, after the hook started the library: classify, decode,
 * validate, act. `rt` is the runtime the hook resolved. */
LG_HIDDEN void lg_launch_decide(const lg_runtime_t *rt, const lg_launch_t *l, lg_decision_t *d);
/* Set by labelguard_disable (cleared by labelguard_enable): watched launches are not checked.
 * Read on the watched path only; the unwatched fast path never looks at it. */
extern LG_HIDDEN _Atomic int lg_launch_disabled;
/* Collects the calling thread's async verdicts that are ready (and, at a synchronizing call,
 * the orphans `scope` names) and acts on the bad ones. */
LG_HIDDEN void lg_launch_poll(const lg_runtime_t *rt, lg_collect_t scope, void *stream);

/* ---------------------------------------------------------------- logprobs.c */

/* The raw-logits check of a watched NLL forward (sync mode, spec key `input`): one
 * nll_input_not_log_probs warning per kernel and call site when its input holds values above
 * 0. Never blocks. */
LG_HIDDEN void lg_logprobs_check(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info,
                                 const lg_target_t *t);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_logprobs_after_fork(void);

/* ---------------------------------------------------------------- classify.c */

/* First launch of a handle: name, spec and layout check, dtype, short name, published in the
 * kernel's entry (created when info is NULL). Returns the entry, NULL when the table is full. */
struct lg_launch;
LG_HIDDEN lg_kernel_info_t *lg_classify(const lg_runtime_t *rt, const struct lg_launch *l, lg_kernel_info_t *info);

/* ---------------------------------------------------------------- act.c */

typedef enum {
    LG_OUTCOME_BLOCKED,
    LG_OUTCOME_HELD,
    LG_OUTCOME_MASKED,
    LG_OUTCOME_LAUNCHED,
    LG_OUTCOME_ABORTED
} lg_outcome_t;
/* When the verdict is known: before a launch that can be skipped (interposed), before one that
 * cannot (seen only by CUPTI), after the launch ran on the sanitized copy (async), or after a
 * captured launch that read its own labels ran (its check only reports: log mode, and ids with
 * no value that may stand in for a bad one, launch.c's async_id). */
typedef enum { LG_ACT_BEFORE, LG_ACT_BEFORE_UNSKIPPABLE, LG_ACT_AFTER, LG_ACT_AFTER_AS_IS } lg_act_when_t;
typedef enum { LG_MASK_UNTRIED, LG_MASK_DONE, LG_MASK_FAILED } lg_mask_state_t;
/* What an action does, decided by lg_act_policy. */
typedef struct lg_act_plan {
    lg_outcome_t outcome;
    bool try_mask;    /* make the masked copy, then ask again with the result */
    bool skip;        /* the launch is not made; it returns LG_RAISE_ERROR */
    bool raise;       /* LG_RAISE_ERROR becomes this thread's pending error */
    bool hold;        /* the thread waits for SIGUSR1 after the report */
    bool abort;       /* summary, then abort() */
    bool flush;       /* the event is fsync'ed before going on */
    const char *note; /* why the outcome is not the action's plain one; may hold one %s (why) */
} lg_act_plan_t;
/* The policy table: pure, the same for sync and async. */
LG_HIDDEN lg_act_plan_t lg_act_policy(lg_action_t action, lg_act_when_t when, lg_mask_state_t mask);
/* One launch with bad labels, as act sees it. */
typedef struct lg_act_input {
    lg_act_when_t when;
    const lg_kernel_info_t *info;
    void *stream;
    void **args; /* the launch's own; NULL after it ran */
    const lg_target_t *target;
    const lg_verdict_t *verdict;
    uint64_t graph_id, replay, exec; /* a graph replay's (graphs.c); 0 otherwise */
    bool copy_made; /* mask: the caller made the masked copy itself (api_check.c, host labels) */
} lg_act_input_t;
/* Reports the violation and carries out LABELGUARD_ACTION; d (NULL for LG_ACT_AFTER) gets
 * what the hook must do. May not return (abort) or return after a hold. */
LG_HIDDEN void lg_act(const lg_runtime_t *rt, const lg_act_input_t *in, lg_decision_t *d);
/* The value a masked copy puts in place of a bad label, and whether the launch's ignore_index
 * must be rewritten to it (uint8 targets cannot hold -100). false: no value works. */
LG_HIDDEN bool lg_act_mask_value(const lg_target_t *t, int64_t *value, bool *rewrite);
/* For ids (target_kind=ids): the kernel's padding_idx (its ignore_index field) when it names a
 * valid row; false otherwise: then mask falls back to raise. */
LG_HIDDEN bool lg_act_mask_id(const lg_target_t *t, int64_t *value);
/* d becomes RUN_WITH the launch's arguments pointing at `copy`. 0, or -1 (copy 0, or the
 * rewrite does not fit). */
LG_HIDDEN int lg_act_run_on_copy(const lg_spec_t *spec, void **args, uint64_t copy, bool rewrite, int64_t value,
                                 lg_decision_t *d);
LG_HIDDEN const char *lg_act_outcome_name(lg_outcome_t o);
LG_HIDDEN uint64_t lg_act_violations(void);
/* The summary's figures: counters.c's counts, the violations, and the checks' own figures
 * (GPU-backend fallbacks, time spent validating). Any thread. */
LG_HIDDEN void lg_act_counters(lg_counters_t *out);
/* Fork child: a fresh lock for the static violation record (lg.c's atfork handler). */
LG_HIDDEN void lg_act_after_fork(void);

/* ---------------------------------------------------------------- pyboot.c */

enum {
    LG_PYBOOT_NOT_PYTHON, /* no CPython in the process */
    LG_PYBOOT_LATE,       /* loaded into a running interpreter (enable(), attach) */
    LG_PYBOOT_ON_PATH,    /* preloaded: labelguard/_bootstrap is first on PYTHONPATH */
    LG_PYBOOT_NO_DIR,     /* preloaded, but no bootstrap directory next to the library */
};
/* From the constructor: in a Python interpreter that has not started, labelguard/_bootstrap
 * first on PYTHONPATH, as `labelguard run` does. */
LG_HIDDEN void lg_pyboot_constructor(void);
/* PYTHONPATH with the bootstrap directory found next to the library at lib_path (a real path)
 * first: 1 with it in out, 0 when old already has a labelguard/_bootstrap entry, -1 when no
 * directory qualifies (exists(dir, ctx) false for both layouts) or out is too small. */
LG_HIDDEN int lg_pyboot_pythonpath(const char *lib_path, const char *old, bool (*exists)(const char *dir, void *ctx),
                                   void *ctx, char *out, size_t cap);
/* LG_PYBOOT_*, as the constructor found the process. */
LG_HIDDEN int lg_pyboot_state(void);
/* The bootstrap will arm the check in this interpreter: on PYTHONPATH, and neither -E, -I nor -S. */
LG_HIDDEN bool lg_pyboot_expected(void);

/* ---------------------------------------------------------------- api_check.c */

/* The start event's `compiled` line: how torch.compile'd losses are checked (or that they are
 * not, LABELGUARD_COMPILED=off). */
LG_HIDDEN const char *lg_api_check_way(void);

/* ---------------------------------------------------------------- opaque.c */

/* The state for a kernel no spec matched: LG_KSTATE_GATHER for PyTorch's TensorIterator gather,
 * else LG_KSTATE_UNWATCHED; a compiled (Triton) loss gets its one unchecked_loss_kernel warning
 * here. Once per kernel handle (classify.c). */
LG_HIDDEN int lg_opaque_classify(const char *mangled);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_opaque_after_fork(void);
/* After a masked NLL forward with class weights and a mean: this thread's next gather within a
 * few launches is blocked (label smoothing gathers weight[target] with the original labels). */
struct lg_violation;
LG_HIDDEN void lg_opaque_arm(const struct lg_violation *v);
/* The loss's backward came: no smoothing gather follows any more. */
LG_HIDDEN void lg_opaque_disarm(void);
/* A launch of the gather kernel: blocked (d: SKIP, the pending error says why) when armed. */
LG_HIDDEN void lg_opaque_gather(const lg_runtime_t *rt, const lg_launch_t *l, const lg_kernel_info_t *info,
                                lg_decision_t *d);

/* ---------------------------------------------------------------- hold.c */

/* Blocks the calling thread until SIGUSR1, after telling stderr how to inspect and release it. */
LG_HIDDEN void lg_hold_thread(const char *kernel, const lg_verdict_t *verdict);
LG_HIDDEN void lg_hold_atfork_child(void);

/* ---------------------------------------------------------------- preload.c */

/* The interposed entry points (for late arming by GOT patching, arm.c): name, our function,
 * and where the real one is stored once resolved. */
typedef struct lg_hook {
    const char *name;
    void *replacement;
    void **real;
} lg_hook_t;
LG_HIDDEN const lg_hook_t *lg_preload_hooks(int *count);
/* Set while the interposition layer handles a launch, so that CUPTI skips it. */
extern LG_HIDDEN LG_TLS int lg_preload_in_launch;

/* ---------------------------------------------------------------- cupti_slot.c */

/* Whether the start subscribes to CUPTI, and why (for the start event). */
LG_HIDDEN bool lg_cupti_slot_wanted(bool interposable, char *why, size_t why_len);
/* The cuptiSubscribe and cuptiSubscribe_v2 entries of late arming's hook set (names only, and
 * where the bound function is kept; arm.c fills in our exported definitions): a profiler's call
 * then reaches the hand-over wrappers as under LD_PRELOAD. Returns the count (2). */
LG_HIDDEN int lg_cupti_slot_hooks(lg_hook_t *out, int cap);
/* Subscribes cb (a CUpti_CallbackFunc) into *out (a CUpti_SubscriberHandle) through the libcupti
 * handle `cupti` (v2 with our name where it exists and no v1 client was seen, falling back to
 * the single slot and to v1); returns the last CUptiResult (lg_cupti_slot_how: each attempt).
 * stop: called before the slot is given up for a profiler (it turns cb into an immediate
 * return), so this file never calls back into cupti.c. */
LG_HIDDEN int lg_cupti_slot_take(void *cupti, void *cb, void (*stop)(void), void **out);
/* The subscribe attempts of the last lg_cupti_slot_take and their answers ("" if CUPTI was
 * not tried), for the start event. */
LG_HIDDEN const char *lg_cupti_slot_how(void);
/* The holder CUPTI named when the slot was taken ("" if it named none). */
LG_HIDDEN const char *lg_cupti_slot_holder(void);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_cupti_slot_after_fork(void);

/* ---------------------------------------------------------------- cupti.c */

LG_HIDDEN void lg_cupti_start(void);
LG_HIDDEN bool lg_cupti_active(void);
/* After the start event: the cupti_unavailable warning, if CUPTI could not be used. */
LG_HIDDEN void lg_cupti_report_status(void);
/* From lg.c's fork handler: this process is a fork child; CUPTI is never called in it (a child
 * forked while a parent thread was inside cuptiSubscribe re-runs the start and spins forever). */
LG_HIDDEN void lg_cupti_after_fork_child(void);

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

/* ---------------------------------------------------------------- arm.c */

/* From lg.c's start, after the start event: what arming left for the start (a warning about
 * slots it could not write; graphs instantiated before arming, under attach). */
LG_HIDDEN void lg_arm_after_start(void);

/* ---------------------------------------------------------------- arm_dlopen.c */

/* The `dlopen` entry of late arming's hook set: our wrapper, and where the function the
 * patched slots pointed at is kept. */
LG_HIDDEN void lg_arm_dlopen_hook(lg_hook_t *out);

/* ---------------------------------------------------------------- arm_got.c */

/* In every object loaded now except the one holding this code and libcudart, rewrites the GOT
 * slots (JUMP_SLOT, GLOB_DAT) of the names in hooks[] to point at their replacement, first
 * storing the bound function in *real if still NULL. A slot already pointing into the object
 * holding this code (a preloaded library's per-version hook) is counted and left as it is.
 * Returns the slots pointing at a replacement or into this object afterwards and their object
 * count in n_objects; -1 when nothing could be armed. Takes no lock, remembers nothing. */
LG_HIDDEN int lg_arm_got_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects);
/* The lock enable and every walk hold (labelguard_arm only tries it: a debugger's call never
 * waits). */
LG_HIDDEN void lg_arm_got_lock(void);
LG_HIDDEN bool lg_arm_got_trylock(void);
LG_HIDDEN void lg_arm_got_unlock(void);
/* Under the lock: patches every loaded object with hooks[] (the first n_counted counted in the
 * result, as lg_arm_got_patch counts), remembers them, and keeps hooks[] (static storage) for
 * the walks later dlopens ask for. */
LG_HIDDEN int lg_arm_got_walk_all(const lg_hook_t *hooks, int n_hooks, int n_counted, int *n_objects);
/* From now on each dlopen that loads something walks the new objects. */
LG_HIDDEN void lg_arm_got_armed(void);
/* Without the lock: serves the walks dlopens asked for while it was taken (trylock; returns
 * the slots armed). */
LG_HIDDEN int lg_arm_got_requests(void);
/* From the dlopen wrapper (arm_dlopen.c), after a dlopen that loaded something: once armed,
 * patches the objects no walk has patched yet. Returns the slots armed in them (0 when not
 * armed, or when another thread holds the lock: that thread walks again for it before it lets
 * go). Never waits for the lock. */
LG_HIDDEN int lg_arm_got_loaded(void);
/* The arm_incomplete warning, once per new count of GOT slots a walk could not write. Not
 * from a debugger's call (it writes the log). */
LG_HIDDEN void lg_arm_got_say_failed(void);
/* From lg.c's fork handler: the child starts with the lock free and no request pending. */
LG_HIDDEN void lg_arm_got_atfork_child(void);

/* ---------------------------------------------------------------- start.c */

/* From lg.c's constructor, once the configuration is parsed: the start routine (registry,
 * runtime, backend, CUPTI, start event) and the exit collection. Before it, no hook starts. */
LG_HIDDEN void lg_start_set(void (*start)(void), void (*at_exit)(void));
/* The lazy start, from the first hook that needs it (pthread_once, under the lock a fork
 * waits for). Cheap after the first call. False before lg.c's constructor handed its start
 * routine in (a hook reached from an earlier constructor): the caller passes the call through
 * unchecked. */
LG_HIDDEN bool lg_start_ensure(void);
/* True once the start has finished (the start event is out). */
LG_HIDDEN bool lg_start_done(void);
/* True on the thread running the start, while it runs (a fork from inside the start). */
LG_HIDDEN bool lg_start_running_here(void);
/* Registers the exit collection (lg.c's handler) once; from the first launch, so that it runs
 * before the teardown of a CUDA runtime that was started by then. */
LG_HIDDEN void lg_start_arm_exit(void);
/* lg.c's fork handlers: a fork waits for a start under way in another thread. */
LG_HIDDEN void lg_start_atfork_prepare(void);
LG_HIDDEN void lg_start_atfork_parent(void);
LG_HIDDEN void lg_start_atfork_child(void);

#endif
