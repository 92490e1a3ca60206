/* labelguard.h: the small public C API of liblabelguard.so.
 *
 * Most users never include this: preloading the library (LD_PRELOAD or `labelguard run`) is
 * enough. A program that links or dlopens the library can query it, `labelguard attach`
 * calls labelguard_arm() in a running process through gdb, and the Python package's
 * labelguard.enable() loads the library with ctypes (RTLD_GLOBAL) and calls
 * labelguard_enable(). The LABELGUARD_* variables are read when the library loads: set them
 * before.
 *
 * Text results (labelguard_last_violation, labelguard_config) follow snprintf: at most cap - 1
 * bytes and a NUL are written (nothing when buf is NULL or cap is 0), and the full length is
 * returned, so a return >= cap means "retry with a buffer of return + 1 bytes".
 * Every function may be called from any thread.
 */
#ifndef LABELGUARD_H
#define LABELGUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LABELGUARD_API __attribute__((visibility("default")))

/* Library version, e.g. "0.1.0". */
LABELGUARD_API const char *labelguard_version(void);

typedef struct labelguard_counters {
    uint64_t launches;          /* kernel launches seen */
    uint64_t watched;           /* launches of NLL/CrossEntropy kernels */
    uint64_t validated;         /* of those, labels actually checked */
    uint64_t violations;        /* launches with at least one bad label */
    uint64_t validate_ns_total; /* time spent validating, nanoseconds */
} labelguard_counters_t;

/* Fills *out; returns 0, or -1 when out is NULL. */
LABELGUARD_API int labelguard_counters(labelguard_counters_t *out);

/* Arms the guard in a process that did not preload the library (it was dlopen'd, e.g. by
 * `labelguard attach`, whose gdb calls this wherever it stopped the process): rewrites the
 * GOT slots as labelguard_enable() does and writes one line on stderr saying what was armed
 * or why not (none with LABELGUARD_QUIET=1); nothing else: no CUDA, CUPTI or log call, no
 * lock another thread of the process may hold (a busy arm.c lock is a refusal). The library
 * starts at the process's next CUDA launch, on that thread. A process that uses CUDA without a
 * shared libcudart (a static runtime) is refused: only CUPTI could see it. Returns the entries
 * armed, or -1. */
LABELGUARD_API int labelguard_arm(void);

/* Starts the library now, on the calling thread, as the process's first CUDA launch would: its
 * CUDA queries, the validator backend, CUPTI where LABELGUARD_HOOKS wants it, the `start`
 * event. labelguard_enable() and labelguard_arm() never start it (they make no CUDA call); a
 * tool that wants the start event at a known point (`labelguard doctor`'s probe) calls this.
 * It initialises CUDA: a process that forks CUDA-using children must not call it first.
 * Idempotent; returns 0. */
LABELGUARD_API int labelguard_start(void);

/* Arms the guard in this process, from inside it, without writing to stderr:
 *  - the launch, registration, error and synchronizing entry points of every object loaded
 *    now are redirected to the library (GOT slots), and so are their cuptiSubscribe calls (a
 *    profiler's subscription then reaches the library's hand-over, as under LD_PRELOAD);
 *  - no CUDA call is made (unless a static runtime is in use, below): the library starts at
 *    the process's first CUDA launch, on that thread, where it chooses its backend and, only
 *    where no shared libcudart exists or LABELGUARD_HOOKS=cupti, subscribes to CUPTI; so a
 *    process that enables before any CUDA work may still fork CUDA-using children;
 *  - every object loaded later (dlopen: `import torch` after this call, CUDA extensions,
 *    Triton's generated modules) is armed as it is loaded, so calling this before
 *    `import torch` is right, and so is calling it after CUDA started;
 *  - where the library is already preloaded (LD_PRELOAD, `labelguard run`) nothing is
 *    redirected twice: it succeeds and returns the entries already bound to the library.
 * Returns the number of entries armed (>= 0; 0 when no CUDA runtime is loaded yet), or -1
 * when it cannot arm, with one line in why (reason and what to do; why may be NULL):
 * a CUDA context already dead from a sticky error (e.g. cudaErrorAssert 710 after a
 * device-side assert: restart the process and enable labelguard first; asked only once libcuda
 * is loaded), a static CUDA runtime that CUPTI cannot watch (there, with a context made, the
 * library starts at once: CUPTI is its only layer), or GOT slots that cannot be rewritten.
 * Idempotent and thread-safe; after labelguard_disable() it turns checking on again. */
LABELGUARD_API int labelguard_enable(char *why, size_t cap);

/* Stops checking new launches: watched kernels are launched as they are, unchecked (checks
 * already made still deliver their verdicts). The redirections stay; labelguard_enable()
 * turns checking on again. Returns 0. */
LABELGUARD_API int labelguard_disable(void);

/* The last violation event of this process: its JSON object text exactly as written to the
 * JSONL log (same fields, no newline), NUL-terminated. Returns its full length (snprintf-like),
 * 0 when there has been none. */
LABELGUARD_API int labelguard_last_violation(char *buf, size_t cap);

/* Judges one LABELGUARD_* variable by the rules the library applies when it loads (value
 * NULL: unset, which is good): 0 good; -1 bad, with the message the library would stop the
 * process with (naming the allowed values) in msg; -2 when name is not a LABELGUARD_*
 * variable the library reads. */
LABELGUARD_API int labelguard_config_check(const char *name, const char *value, char *msg, size_t cap);

/* The resolved configuration of this process as a JSON object, the `config` of the start
 * event: {"action":..., "mode":..., "hooks":..., "log":..., "kernels":..., "backtrace":...,
 * "samples":..., "quiet":..., "logprob_check":..., "compiled":"on"|"off"}. snprintf-like return; -1 out of memory. */
LABELGUARD_API int labelguard_config(char *buf, size_t cap);
/* The loss-kernel coverage of a PyTorch build (what `labelguard audit` and doctor show), by
 * this library's own registry: the built-in specs plus LABELGUARD_KERNELS. table_path is a
 * kernel table (tests/wheels/<version>+cu<NNN>.tsv, labelguard/data/wheels/ in the wheel);
 * known_gaps_path (may be NULL; a missing file means none) lists the kernels no spec can
 * cover, "match<TAB>reason". Writes one line per loss kernel to out_fd,
 *     covered<TAB>KERNEL<TAB>[SPEC]<TAB>SYMBOL
 *     known gap<TAB>KERNEL<TAB>REASON<TAB>SYMBOL
 *     NOT covered<TAB>KERNEL<TAB>WHY (the first differing parameter)<TAB>SYMBOL
 * (none when quiet is nonzero), then "torch BUILD: N loss kernels, M covered[, G known
 * gaps][, U NOT covered]". Returns 0 when every loss kernel is covered or a known gap, 1 when
 * some is not, 2 on an unreadable or malformed input (one "labelguard: ..." line on stderr).
 * Report path only: starts no CUDA, hooks nothing, and builds the registry only if the guard
 * has not (then a problem with a LABELGUARD_KERNELS file is a warning on stderr). Thread-safe. */
LABELGUARD_API int labelguard_coverage(const char *table_path, const char *known_gaps_path, int quiet, int out_fd);

/* ---- torch.compile: the check op (python/labelguard/_compiled.py)
 *
 * Inductor fuses log_softmax and NLL into a Triton kernel that the launch hooks cannot decode.
 * Under labelguard the compiled graph calls the custom op labelguard::check_target on each
 * loss's target before that kernel; the op hands the target's buffer to
 * labelguard_check_target, which runs the check a watched ATen NLL launch gets (validate, then
 * LABELGUARD_ACTION, then the report) and writes the labels the fused kernel is to read. */

#define LABELGUARD_DTYPE_INT64 0
#define LABELGUARD_DTYPE_UINT8 1
#define LABELGUARD_DTYPE_INT32 2
/* Probabilities (binary_cross_entropy's kinds only) */
#define LABELGUARD_DTYPE_FLOAT32 3
#define LABELGUARD_DTYPE_FLOAT64 4
#define LABELGUARD_DTYPE_FLOAT16 5
#define LABELGUARD_DTYPE_BFLOAT16 6

/* Which loss the target belongs to: the report's family and direction. */
#define LABELGUARD_LOSS_NLL_FORWARD   0
#define LABELGUARD_LOSS_NLL_BACKWARD  1
#define LABELGUARD_LOSS_NLL2D_FORWARD 2
#define LABELGUARD_LOSS_NLL2D_BACKWARD 3
/* Index ops that Inductor lowers into its own kernels (labelguard::check_index): `loss` names
 * the op, n_classes is the size of the dimension the ids index (the vocabulary of an
 * embedding), ignore_index the embedding's padding_idx (-1: none; other ops have none). An id
 * is good in [0, n_classes), or in [-n_classes, n_classes) where the eager op wraps negative
 * ids (x[idx], index_put, index_fill, take, put). */
#define LABELGUARD_INDEX_EMBEDDING 16
#define LABELGUARD_INDEX_EMBEDDING_BACKWARD 17
#define LABELGUARD_INDEX_INDEX 18
#define LABELGUARD_INDEX_INDEX_PUT 19
#define LABELGUARD_INDEX_GATHER 20
#define LABELGUARD_INDEX_INDEX_SELECT 21
#define LABELGUARD_INDEX_INDEX_ADD 22
#define LABELGUARD_INDEX_INDEX_COPY 23
#define LABELGUARD_INDEX_INDEX_FILL 24
#define LABELGUARD_INDEX_SCATTER 25
#define LABELGUARD_INDEX_SCATTER_ADD 26
#define LABELGUARD_INDEX_SCATTER_REDUCE 27
#define LABELGUARD_INDEX_TAKE 28
#define LABELGUARD_INDEX_PUT 29          /* wraps negative ids, as take */
#define LABELGUARD_INDEX_INDEX_REDUCE 30 /* its mean, which Inductor decomposes (the others run ATen's) */
#define LABELGUARD_INDEX_ONE_HOT 31      /* n_classes: num_classes */
/* A loss whose target is class labels without an ignore_index, checked like the index ops:
 * good in [0, n_classes), n_classes the input's last dimension (ignore_index unused). */
#define LABELGUARD_LOSS_MULTI_MARGIN 32
/* binary_cross_entropy's input and its target, each a float tensor (LABELGUARD_DTYPE_FLOAT*):
 * good in [0, 1], NaN bad (n_classes and ignore_index unused), as eager's kernel asserts. */
#define LABELGUARD_LOSS_BCE_INPUT 33
#define LABELGUARD_LOSS_BCE_TARGET 34
/* max_unpool2d's indices: n_classes is the output plane's size (output height x width) */
#define LABELGUARD_INDEX_MAX_UNPOOL2D 35

typedef struct labelguard_target_check {
    const void *target;   /* the labels, contiguous: device memory, or host memory when on_host */
    void *out;            /* count elements of the same dtype, contiguous: the checked labels */
    int64_t count;        /* elements */
    int64_t sizes[3];     /* the target's shape (ndim 0: flat), for reports (target[0][3][7]) */
    int ndim;
    int dtype;            /* LABELGUARD_DTYPE_* */
    int64_t n_classes;    /* a label is good in [0, n_classes) or equal to ignore_index */
    int64_t ignore_index;
    void *stream;         /* cudaStream_t the loss runs on (NULL: the legacy default stream) */
    int on_host;          /* 1: a CPU tensor, checked on the host without CUDA */
    int loss;             /* LABELGUARD_LOSS_* or LABELGUARD_INDEX_* */
    const char *site;     /* the model's line that called the op ("file:line in fn: code", from the
                           * FX node's stack_trace), shown in the report; NULL or "": none */
} labelguard_target_check_t;

/* Checks c->target and writes into c->out what the loss is to read. Returns
 *   0  out holds the labels as they are: all good, or bad ones with LABELGUARD_ACTION=log (the
 *      violation is reported; the loss then fails as it would have), or the verdict is
 *      delivered later (LABELGUARD_MODE=async, a CUDA graph replay: out holds the sanitized
 *      copy, and the error arrives at the next CUDA check, as for an ATen launch);
 *   1  mask: out holds the labels with each bad one replaced by ignore_index (reported);
 *  -1  raise or hold (after the thread is released): msg holds the error text of a blocked
 *      launch; out is untouched and the caller raises it (no CUDA error is left pending);
 *  -2  not checked: msg says why (also warned once in the log); out holds the labels as they are.
 * abort does not return. Enqueues on c->stream only (sync mode waits for the verdict, as for a
 * watched launch); inside a CUDA graph capture the check is captured and runs at every replay.
 * msg: snprintf-like, may be NULL. Any thread. */
LABELGUARD_API int labelguard_check_target(const labelguard_target_check_t *c, char *msg, size_t cap);

/* The torch.compile guard's question, asked when it installs and each time a compiled graph is
 * traced with a loss (traced: the ATen op's name, NULL when only asking): 1 when compiled losses
 * are checked (LABELGUARD_COMPILED=on, the default), 0 when not; with off, the first traced loss
 * gets the one unchecked_loss_kernel warning. */
LABELGUARD_API int labelguard_compiled(const char *traced);

/* A kernel that torch.compile generated (Inductor's Triton kernels, a user's Triton kernel in a
 * compiled graph) whose own device assert labelguard does not check before it runs: recorded so
 * that the device_assert report, should one of these asserts fire, lists it with where it is.
 * python/labelguard/_generated.py calls this for each tl.device_assert it reads in the output
 * code Inductor loads. kernel: its name (triton_poi_fused_embedding_0); file and line: the
 * generated file in Inductor's cache and the assert's line in it; message: the assert's text
 * as the device prints it ("index out of bounds: 0 <= tmp3 < 32000"); source_nodes and aten_ops:
 * what Inductor's comment above the kernel says it was made from (may be NULL or ""). Strings
 * are copied (cut to the report's field sizes). Returns 1 when recorded, 0 when already
 * recorded (same kernel, file and line), -1 on a NULL or empty kernel, file or message. The
 * newest 64 are kept. Starts nothing, makes no CUDA call; any thread. */
LABELGUARD_API int labelguard_generated_kernel(const char *kernel, const char *file, int line, const char *message,
                                               const char *source_nodes, const char *aten_ops);

#ifdef __cplusplus
}
#endif

#endif
