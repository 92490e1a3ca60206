/* base.h: the base layer (src/base/), which every other layer's header includes: common
 * macros, configuration, the CUDA bindings (runtime.c), counters, native and Python stacks,
 * demangling, the hold wait. Everything declared in the layer headers has hidden visibility;
 * only the interposed CUDA entry points and include/labelguard.h are exported
 * (tests/exports.txt lists them, tests/e2e/test_exports.sh checks `nm -D`). Each section is
 * one file's (the file name is the function prefix). Threading: hooks run on whatever thread
 * launches a kernel; functions say when they lock. See src/README.md for the layers. */
#ifndef LG_BASE_H
#define LG_BASE_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "lg_scan.h" /* cuda/: the scan and target geometry shared with the validator kernels */

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
    bool launch_sites_all; /* LABELGUARD_LAUNCH_SITES=all: every launch records its Python frames (recent.c) */
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
extern LG_HIDDEN lg_config_t lg_config_values;
/* ---------------------------------------------------------------- runtime.c */

/* The runtime functions the core calls, resolved from the process's own libcudart (never by
 * name through our hooks). A NULL member: that function is not in this runtime. */
typedef struct lg_runtime {
    int (*memcpy_async)(void *dst, const void *src, size_t n, int kind, void *stream);
#define LG_MEMCPY_DEFAULT 4 /* cudaMemcpyDefault: the direction from the addresses (unified addressing) */
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
/* The loader lock: every loader walk (dl_iterate_phdr) and NOLOAD dlopen of the library's is made
 * under it, and a fork's prepare takes it, so a fork child never inherits glibc's loader write
 * lock held by one of our walks. Innermost: call nothing of ours while holding it. */
LG_HIDDEN void lg_runtime_loader_lock(void);
LG_HIDDEN void lg_runtime_loader_unlock(void);
LG_HIDDEN void lg_runtime_atfork_prepare(void);
LG_HIDDEN void lg_runtime_atfork_parent(void);
LG_HIDDEN void lg_runtime_atfork_child(void);
/* Thread-local re-entry guard, set around our own CUDA calls, logging and unwinding: a hook
 * that finds it set passes straight through. */
extern LG_HIDDEN LG_TLS int lg_runtime_in_library;
/* ---------------------------------------------------------------- forkpoint.c */
/* The critical sections a fork waits for, as lg_forkpoint names them. */
enum {
    LG_FORKPOINT_LOADER_WALK = 1, /* runtime.c: a dl_iterate_phdr of ours */
    LG_FORKPOINT_VERSION,         /* runtime.c: one CUDA major's runtime looked up */
    LG_FORKPOINT_STACK,           /* stack.c: libunwind walking this thread */
    LG_FORKPOINT_REGISTRY,        /* registry.c: the kernel table being built */
    LG_FORKPOINT_NAMES,           /* names.c: the kernel-name table being changed */
};
/* Called inside each such section with its lock held; a no-op unless a test set a callback. */
LG_HIDDEN void lg_forkpoint(int section);
LG_HIDDEN void lg_forkpoint_set(void (*fn)(int section));
/* ---------------------------------------------------------------- counters.c */

typedef struct lg_counters {
    uint64_t launches, watched, validated, violations, validate_ns_total;
    uint64_t unchecked;      /* watched launches that ran without a check */
    uint64_t host_fallbacks; /* checks the host backend did because the GPU backend could not */
    uint64_t suppressed_duplicates; /* a backward's violation of a bad batch already reported (pairs.c) */
} lg_counters_t;
/* Per-thread launch counter slot; the first launch of a thread assigns it. It also holds the
 * thread's last launches (recent.c): a device-side assert in a kernel that nothing checked is
 * reported with them. */
#define LG_RECENT 16 /* a power of two */
struct lg_recent_entry {
    uint64_t func, stream;
    uint64_t grid_xy, block_xy; /* x | y << 32 */
    uint32_t grid_z, block_z; /* both 0: a CUDA graph replay (func is its exec; no kernel launch has them 0) */
    uint64_t seq;
    uint64_t pad[2]; /* 64 bytes: an entry is one shift away, and one cache line */
};
typedef struct lg_counter_slot {
    _Atomic uint64_t launches;
    _Atomic int tid;    /* the first thread given the slot */
    _Atomic int shared; /* more than 64 launching threads: a second thread writes here too */
    char pad[64 - sizeof(uint64_t) - 2 * sizeof(int)];
    /* Entry n % LG_RECENT: the function, the stream, grid and block, and the count after it
     * (n + 1) stored last, so that a reader can tell a complete entry (recent.c). Written with
     * relaxed stores by the slot's thread, after its `launches` count; read on the report path
     * only. */
    struct lg_recent_entry recent[LG_RECENT];
} __attribute__((aligned(64))) lg_counter_slot_t;
extern LG_HIDDEN LG_TLS lg_counter_slot_t *lg_counters_my_slot;
LG_HIDDEN lg_counter_slot_t *lg_counters_assign_slot(void);
/* Every slot given out so far (*n of them), for recent.c's reader. */
LG_HIDDEN lg_counter_slot_t *lg_counters_slots(int *n);
/* One launch counted on the calling thread's slot; *n gets its number (the count before it).
 * Only this thread (mostly) writes its slot: a relaxed load+store is enough for a counter read
 * once at exit, and avoids a locked instruction per launch. Threads sharing a slot (more than
 * 64 launching threads) may lose an increment: the summary says "launches", not an invoice. */
static inline lg_counter_slot_t *lg_counters_count_launch_at(uint64_t *n)
{
    lg_counter_slot_t *s = lg_counters_my_slot;
    if (LG_UNLIKELY(!s))
        s = lg_counters_assign_slot();
    *n = __atomic_load_n((uint64_t *)&s->launches, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)&s->launches, *n + 1, __ATOMIC_RELAXED);
    return s;
}
/* The same, when the launch's number (the count before it) is not needed. */
static inline void lg_counters_count_launch(void)
{
    uint64_t n;
    (void)lg_counters_count_launch_at(&n);
}
/* One more watched launch, validated launch, or watched launch that ran unchecked. */
LG_HIDDEN void lg_counters_count_watched(void);
LG_HIDDEN void lg_counters_count_validated(void);
LG_HIDDEN void lg_counters_count_unchecked(void);
/* A graph replay kept among the recent launches: not a kernel launch of the summary's. */
LG_HIDDEN void lg_counters_count_graph(void);
/* A check made outside a launch (api_check.c, torch.compile's check op) in the summary's
 * watched count, and in validated too when its labels were read. */
LG_HIDDEN void lg_counters_count_check(bool validated_too);
/* The counts kept here; violations, validate_ns_total and host_fallbacks are left 0 (the
 * checks' own: lg_act_counters adds them). */
LG_HIDDEN void lg_counters_read(lg_counters_t *out);
/* ---------------------------------------------------------------- demangle.c */
/* (demangle_parse.c, demangle_lex.c and demangle_sizes.c, the parser behind these, share
 * src/base/demangle_lex.h: nothing outside the demangler sees a parser.) */

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
    bool gone; /* a recorded frame whose code object is no longer the one recorded: file "?" */
} lg_py_frame_t;
typedef struct lg_py_stack {
    int n;                                  /* 0: not a Python process or no frames */
    bool from_main_thread;                  /* the launching thread had no Python frames */
    lg_py_frame_t frames[LG_MAX_PY_FRAMES]; /* innermost last */
} lg_py_stack_t;
/* Reads the calling thread's Python frames without the GIL and without allocating, like
 * faulthandler; CPython symbols resolved at run time. Safe to call in non-Python processes. */
LG_HIDDEN void lg_pystack_capture(lg_py_stack_t *s);
/* What the stack reader found in this process (resolved on first call): whether it is a
 * CPython process, its version, whether the build is free-threaded, whether stacks are read,
 * and when not, why (static text). For the start event and `labelguard doctor`. */
typedef struct lg_py_info {
    bool python;
    char version[32];
    bool free_threaded;
    bool stacks;
    const char *why; /* NULL when stacks are read */
} lg_py_info_t;
LG_HIDDEN void lg_pystack_info(lg_py_info_t *out);
/* pystack_peek.c: copies n bytes at addr into out; false when any of it is unmapped. */
LG_HIDDEN bool lg_pystack_peek(const void *addr, void *out, size_t n);
/* Fork child: its own pipe, a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_pystack_peek_after_fork(void);
/* One frame as the walk finds it, before it is turned into text: the code object, what it
 * said it was (checked again before the lines are read), and the instruction's byte offset. */
typedef struct lg_py_raw_frame {
    const void *code, *filename, *name;
    int firstlineno;
    int addr; /* < 0: unknown */
} lg_py_raw_frame_t;
typedef struct lg_py_site {
    int n;
    bool from_main_thread;
    lg_py_raw_frame_t frames[LG_MAX_PY_FRAMES]; /* innermost first */
} lg_py_site_t;
/* The calling thread's frames, recorded at a launch whose verdict comes later: plain loads of
 * its own frame chain (it sits in a C call, so the chain holds still), no symbolization; the
 * main thread's through the fault-safe reads when the caller runs no Python. */
LG_HIDDEN void lg_pystack_record(lg_py_site_t *s);
/* The recorded frames as text, innermost last, on the report path (any thread): a frame whose
 * code object is no longer the one recorded comes back gone, not guessed. */
LG_HIDDEN void lg_pystack_resolve(const lg_py_site_t *s, lg_py_stack_t *out);
/* ---------------------------------------------------------------- recent.c */

/* LABELGUARD_LAUNCH_SITES=all: each launch records its Python frames too (recent.c). */
extern LG_HIDDEN bool lg_recent_sites;
LG_HIDDEN void lg_recent_record_site(lg_counter_slot_t *s, uint64_t n);
/* A launch's grid and block as the entries keep them: x | y << 32, and z. */
typedef struct lg_recent_dims {
    uint64_t grid_xy, block_xy;
    uint32_t grid_z, block_z;
} lg_recent_dims_t;
static inline lg_recent_dims_t lg_recent_dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                              unsigned bz)
{
    return (lg_recent_dims_t){(uint64_t)gx | (uint64_t)gy << 32, (uint64_t)bx | (uint64_t)by << 32, gz, bz};
}
/* Launch n of slot s, which the runtime accepted (the newest entry of its thread). */
static inline void lg_recent_store(lg_counter_slot_t *s, uint64_t n, const void *func, const void *stream,
                                   lg_recent_dims_t d)
{
    struct lg_recent_entry *e = &s->recent[n & (LG_RECENT - 1)];
    __atomic_store_n(&e->func, (uint64_t)(uintptr_t)func, __ATOMIC_RELAXED);
    __atomic_store_n(&e->stream, (uint64_t)(uintptr_t)stream, __ATOMIC_RELAXED);
    __atomic_store_n(&e->grid_xy, d.grid_xy, __ATOMIC_RELAXED);
    __atomic_store_n(&e->block_xy, d.block_xy, __ATOMIC_RELAXED);
    __atomic_store_n(&e->grid_z, d.grid_z, __ATOMIC_RELAXED);
    __atomic_store_n(&e->block_z, d.block_z, __ATOMIC_RELAXED);
    if (LG_UNLIKELY(lg_recent_sites))
        lg_recent_record_site(s, n);
    __atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
}
/* The launch fast path, after the real call: counts the launch and keeps it when the runtime
 * accepted it, so that a launch refused on a dead context does not push the candidates out. */
static inline void lg_recent_count(bool accepted, const void *func, const void *stream, lg_recent_dims_t d)
{
    uint64_t n;
    lg_counter_slot_t *s = lg_counters_count_launch_at(&n);
    if (LG_LIKELY(accepted))
        lg_recent_store(s, n, func, stream, d);
}
/* A CUDA graph replay the runtime accepted (cudaGraphLaunch): kept like a launch, counted as
 * one in the slot and taken out of the summary's launches again (counters.c). */
LG_HIDDEN void lg_recent_graph(const void *exec, const void *stream);
/* The slow path, whose launch lg_counters_count_launch counted before the real call. */
static inline void lg_recent_note(const void *func, const void *stream, lg_recent_dims_t d)
{
    lg_counter_slot_t *s = lg_counters_my_slot;
    if (s)
        lg_recent_store(s, __atomic_load_n((uint64_t *)&s->launches, __ATOMIC_RELAXED) - 1, func, stream, d);
}
/* One launch as read back: the slot's thread and how recent it is (0: that thread's newest). */
typedef struct lg_recent_launch {
    const void *func, *stream;
    unsigned grid[3], block[3];
    int tid;
    bool shared_slot; /* the slot had more than one thread: tid is its first */
    bool graph;       /* a CUDA graph replay: func is its exec */
    int age;
    bool has_site;
    lg_py_site_t site; /* LABELGUARD_LAUNCH_SITES=all */
} lg_recent_launch_t;
/* The calling thread's last launches first (newest first, *n_mine of them), then every other
 * slot's newest `per_other`; at most `cap`. Complete entries only: one being rewritten is
 * skipped. */
LG_HIDDEN int lg_recent_read(lg_recent_launch_t *out, int cap, int per_other, int *n_mine);
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
    /* Free-threaded builds (debug offsets only): 3.14 and newer make PyASCIIObject.state's
     * `interned` an unsigned char, which moves kind, compact and ascii up by 6 bits; each
     * thread may run its own copy of a code object's bytecode, entry tlbc_index of the
     * code's co_tlbc array (0: the copy inside the code object). 0 where absent. */
    bool free_threaded;
    int uni_state_shift;
    int co_tlbc, f_tlbc_index;
} lg_py_layout_t;
/* Bytes of _PyRuntime (its debug_offsets) that lg_pystack_offsets_decode may read. */
#define LG_PY_DEBUG_OFFSETS_LEN 1024
/* Fills *out from raw, a copy of the first len bytes of _PyRuntime in an interpreter of version
 * 3.<minor>. Returns NULL, or why the layout is refused (static text): no debug offsets (before
 * 3.13), wrong cookie or version, a free-threaded build, a structure too small for the walk.
 * *out is written only on success. */
LG_HIDDEN const char *lg_pystack_offsets_decode(const void *raw, size_t len, int minor, lg_py_layout_t *out);
/* The built-in table's layout for 3.<minor> (3.8 to 3.13, default builds) into *out; false
 * when it has none. */
LG_HIDDEN bool lg_pystack_offsets_table(int minor, lg_py_layout_t *out);
/* ---------------------------------------------------------------- site.c */

/* Where a launch whose verdict comes later was made (async checks, captured checks): recorded
 * on the launching thread, turned into stacks only when its verdict is bad. Shared by the
 * replays of a captured check (reference counted). */
typedef struct lg_site lg_site_t;
/* caller: the return address into the code that called the launch API (NULL: unknown).
 * NULL when neither backtrace is wanted or out of memory. */
LG_HIDDEN lg_site_t *lg_site_new(const void *caller);
/* The same, carrying a copy of `line` (a torch.compile'd op's model line; NULL or "": none, as
 * lg_site_new), made even when no backtrace is wanted; NULL when out of memory. */
LG_HIDDEN lg_site_t *lg_site_new_line(const void *caller, const char *line);
/* The site's model line, or NULL (NULL-safe). */
LG_HIDDEN const char *lg_site_line(const lg_site_t *s);
LG_HIDDEN lg_site_t *lg_site_hold(lg_site_t *s); /* NULL-safe; returns s */
LG_HIDDEN void lg_site_drop(lg_site_t *s);       /* NULL-safe */
/* The launch's stacks as the violation record holds them. */
LG_HIDDEN void lg_site_resolve(const lg_site_t *s, lg_native_stack_t *native, lg_py_stack_t *py);
/* ---------------------------------------------------------------- seen.c */

/* A bounded set of keys seen once, under its own lock (static in its caller: LG_SEEN_INIT). */
#define LG_SEEN_CAP 256
typedef struct lg_seen {
    pthread_mutex_t lock;
    int n;
    uint64_t keys[LG_SEEN_CAP];
} lg_seen_t;
#define LG_SEEN_INIT {PTHREAD_MUTEX_INITIALIZER, 0, {0}}
/* 1: `key` is new and now kept; 0: seen before; -1: new, but the set is full (not kept). */
LG_HIDDEN int lg_seen_add(lg_seen_t *s, uint64_t key);
/* From the caller's fork-child handler: another thread of the parent may have held the lock. */
LG_HIDDEN void lg_seen_after_fork(lg_seen_t *s);
/* FNV-1a: the offset basis, and one string folded into h. */
#define LG_SEEN_FNV_BASIS 0xcbf29ce484222325ull
static inline uint64_t lg_seen_hash(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ---------------------------------------------------------------- generated.c */

/* A kernel torch.compile generated that asserts on its own (labelguard_generated_kernel). */
#define LG_GENERATED_MAX 64
typedef struct lg_generated_kernel {
    char kernel[128];       /* triton_poi_fused_embedding_0 */
    char file[512];         /* the generated file in Inductor's cache */
    char message[256];      /* the assert's text, as the device prints it */
    char source_nodes[256]; /* "" when Inductor's comment gave none */
    char aten_ops[256];
    int line; /* the assert's line in file */
} lg_generated_kernel_t;
/* 1: kept (the oldest dropped past LG_GENERATED_MAX); 0: kept already; -1: an empty field. */
LG_HIDDEN int lg_generated_add(const char *kernel, const char *file, int line, const char *message,
                               const char *source_nodes, const char *aten_ops);
/* The newest up to max, newest first; *total (may be NULL): how many were ever added. */
LG_HIDDEN int lg_generated_read(lg_generated_kernel_t *out, int max, int *total);
LG_HIDDEN void lg_generated_after_fork(void);

/* ---------------------------------------------------------------- hold.c */

/* Blocks the calling thread until SIGUSR1, after telling stderr how to inspect and release it. */
LG_HIDDEN void lg_hold_thread(const char *kernel, const lg_verdict_t *verdict);
LG_HIDDEN void lg_hold_atfork_child(void);

#endif /* LG_BASE_H */
