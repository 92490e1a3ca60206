/* runtime.c: the CUDA bindings, in one place: which libcudart objects the process holds (one
 * per soname: a CUDA 12 and a CUDA 13 runtime can live side by side, e.g. torch's wheel and a
 * custom extension), the libcuda handle, the runtime functions the core calls (lg_runtime_t),
 * the per-thread pending error that a blocked launch leaves for cudaGetLastError (with our
 * text for it, valid while that error is pending and until the thread's next launch after it
 * was read), the save and restore of the
 * application's own error around our calls, and the capture queries and capture-mode switch
 * our calls need to stay within CUDA's capture rules.
 *
 * Who calls it: the hook layer (preload.c resolves its real functions here and reads the
 * pending error on every cudaGetLastError; cupti.c and arm.c ask where libcudart lives) and
 * the core (the runtime table is handed to it; act.c sets the pending error). Any thread,
 * possibly inside another library's constructor before ours: everything here works from
 * static initialisation, and nothing is linked: libcudart and libcuda are found at run time.
 *
 * Finding libcudart: dlsym(RTLD_NEXT) first (a runtime linked by the executable), then the
 * objects the loader already holds whose file name starts with "libcudart." or "libcudart-"
 * (the hashed copies of pip wheels), opened with RTLD_NOLOAD, because PyTorch's runtime arrives
 * through dlopen and RTLD_NEXT does not see it. Never dlopen'd without NOLOAD: a process that
 * has no runtime must not get one from us.
 *
 * Mixed runtimes: a hook bound at one version node (preload.c: cudaLaunchKernel@libcudart.so.12
 * for a caller linked against CUDA 12) resolves its real function at that node
 * (lg_runtime_resolve_version), and the core gets that runtime's table (lg_runtime_for), so
 * that each launch, its registration and its label checks go to the caller's own runtime.
 *
 * Tested through every hook test (tests/e2e, tests/fakecuda; test_delivery.sh for the error's
 * thread, text and the application's own error), tests/e2e/test_mixed_runtimes.sh (a CUDA 13
 * program and a CUDA 12 library in one process) and tests/unit/test_act.c, which checks the
 * pending-error state directly.
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/base.h"

LG_TLS int lg_runtime_in_library;
LG_TLS int lg_runtime_pending;
LG_TLS int lg_runtime_pending_sync;
LG_TLS int lg_runtime_message_live;
LG_TLS int lg_runtime_app_error;

/* ------------------------------------------------------------------ finding libcudart */

typedef struct {
    lg_cudart_t *out;
    int cap, n;
} cudart_walk_t;

/* libcudart.so.13, libcudart.so, and old wheels' libcudart-d0da41ae.so.11.0; not libcudadevrt. */
static bool is_cudart(const char *base)
{
    return strncmp(base, "libcudart", 9) == 0 && (base[9] == '.' || base[9] == '-');
}

static int major_of(const char *path)
{
    const char *so = strstr(path, ".so.");
    int major = so ? atoi(so + 4) : 0;
    if (major == 0) {
        /* An unversioned libcudart.so: the major is in the name its symlink points to. */
        char real[PATH_MAX];
        if (realpath(path, real) && (so = strstr(real, ".so.")))
            major = atoi(so + 4);
    }
    return major;
}

static int walk_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    lg_forkpoint(LG_FORKPOINT_LOADER_WALK); /* inside the loader's own lock */
    (void)size;
    cudart_walk_t *w = data;
    const char *name = info->dlpi_name;
    if (!name || !*name || w->n >= w->cap)
        return w->n >= w->cap;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (!is_cudart(base))
        return 0;
    lg_cudart_t *c = &w->out[w->n];
    snprintf(c->path, sizeof c->path, "%s", name);
    size_t dir_len = (size_t)(base - name);
    if (dir_len == 0)
        snprintf(c->dir, sizeof c->dir, ".");
    else
        snprintf(c->dir, sizeof c->dir, "%.*s", (int)(dir_len - 1), name);
    c->major = major_of(name);
    /* One entry per soname: a second mapping of the same major adds nothing. */
    for (int i = 0; i < w->n; i++)
        if (w->out[i].major == c->major && c->major != 0)
            return 0;
    w->n++;
    return 0;
}

/* Innermost: held around one loader walk or NOLOAD dlopen and nothing else of ours, so it nests
 * inside every other lock and a fork (which takes it last) never waits on a walk's caller. */
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

void lg_runtime_loader_lock(void) { pthread_mutex_lock(&loader_lock); }
void lg_runtime_loader_unlock(void) { pthread_mutex_unlock(&loader_lock); }

/* dlopen(path, RTLD_LAZY | RTLD_NOLOAD) under the loader lock: no constructor runs (the object is
 * loaded already), so nothing is called under it. */
static void *noload(const char *path)
{
    pthread_mutex_lock(&loader_lock);
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    pthread_mutex_unlock(&loader_lock);
    return h;
}

int lg_runtime_cudarts(lg_cudart_t *out, int cap)
{
    cudart_walk_t w = {.out = out, .cap = cap, .n = 0};
    if (cap > 0) {
        pthread_mutex_lock(&loader_lock);
        dl_iterate_phdr(walk_cudart, &w);
        pthread_mutex_unlock(&loader_lock);
    }
    return w.n;
}

void *lg_runtime_cudart_handle(void)
{
    static void *handle;
    void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    lg_cudart_t found[4];
    int n = lg_runtime_cudarts(found, 4);
    for (int i = 0; i < n && !h; i++)
        h = noload(found[i].path);
    if (h)
        __atomic_store_n(&handle, h, __ATOMIC_RELEASE);
    return h;
}

void *lg_runtime_resolve(const char *name, const void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f || f == self) {
        void *h = lg_runtime_cudart_handle();
        f = h ? dlsym(h, name) : NULL;
    }
    return f == self ? NULL : f;
}

/* A handle on the loaded libcudart of one major version (RTLD_NOLOAD), NULL if none. Not cached:
 * called once per hook and version, and once per version's runtime table. */
static void *cudart_of_major(int major)
{
    lg_cudart_t found[4];
    int n = lg_runtime_cudarts(found, 4);
    for (int i = 0; i < n; i++)
        if (found[i].major == major)
            return noload(found[i].path);
    return NULL;
}

void *lg_runtime_resolve_version(const char *name, int major, const char *version, const void *self)
{
    void *f = dlvsym(RTLD_NEXT, name, version);
    if (!f || f == self) {
        /* A runtime that arrived by dlopen (RTLD_LOCAL) is not in RTLD_NEXT's scope. */
        void *h = cudart_of_major(major);
        f = h ? dlvsym(h, name, version) : NULL;
        if (!f && h)
            f = dlsym(h, name);
        if (h)
            dlclose(h); /* only drops the reference NOLOAD took */
    }
    if (!f || f == self)
        f = lg_runtime_resolve(name, self); /* no runtime of that version: the caller's is another */
    return f == self ? NULL : f;
}

/* libcuda is opened RTLD_LOCAL, never linked: the library must load on a machine without a
 * driver. The handle is kept for the process (dlclose would unload a driver still in use). */
void *lg_runtime_libcuda(void)
{
    static void *handle;
    void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    pthread_mutex_lock(&loader_lock);
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    pthread_mutex_unlock(&loader_lock);
    /* Not under the loader lock: loading the driver runs its constructors, which may register
     * fork handlers (glibc before 2.36 holds its atfork lock while a fork runs ours). */
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h)
        __atomic_store_n(&handle, h, __ATOMIC_RELEASE);
    return h;
}

/* ------------------------------------------------------------------ the runtime table */

static lg_runtime_t runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

/* The runtime functions the core calls, by field and name: one list for the process-wide table
 * and the per-version ones. */
#define RT_FIELDS(X)                                                  \
    X(memcpy_async, "cudaMemcpyAsync")                                \
    X(stream_synchronize, "cudaStreamSynchronize")                    \
    X(malloc_device, "cudaMalloc")                                    \
    X(free_device, "cudaFree")                                        \
    X(malloc_host, "cudaMallocHost")                                  \
    X(free_host, "cudaFreeHost")                                      \
    X(pointer_attributes, "cudaPointerGetAttributes")                 \
    X(stream_is_capturing, "cudaStreamIsCapturing")                   \
    X(get_device, "cudaGetDevice")                                    \
    X(get_device_properties, "cudaGetDeviceProperties")               \
    X(get_last_error, "cudaGetLastError")                             \
    X(func_get_name, "cudaFuncGetName")                               \
    X(func_get_param_info, "cudaFuncGetParamInfo")                    \
    X(get_error_string, "cudaGetErrorString")                         \
    X(runtime_get_version, "cudaRuntimeGetVersion")                   \
    X(driver_get_version, "cudaDriverGetVersion")                     \
    X(exchange_capture_mode, "cudaThreadExchangeStreamCaptureMode")   \
    X(launch_host_func, "cudaLaunchHostFunc")                         \
    X(host_get_device_pointer, "cudaHostGetDevicePointer")            \
    X(stream_get_capture_info, "cudaStreamGetCaptureInfo")          \
    X(graph_get_nodes, "cudaGraphGetNodes")                           \
    X(graph_node_get_type, "cudaGraphNodeGetType")                    \
    X(graph_host_node_get_params, "cudaGraphHostNodeGetParams")       \
    X(graph_memcpy_node_get_params, "cudaGraphMemcpyNodeGetParams")   \
    X(graph_kernel_node_get_params, "cudaGraphKernelNodeGetParams")   \
    X(graph_exec_host_node_set_params, "cudaGraphExecHostNodeSetParams") \
    X(graph_exec_memcpy_node_set_params_1d, "cudaGraphExecMemcpyNodeSetParams1D") \
    X(graph_exec_kernel_node_set_params, "cudaGraphExecKernelNodeSetParams")

static void resolve_runtime(void)
{
#define RT_RESOLVE(field, name) *(void **)&runtime.field = lg_runtime_resolve(name, NULL);
    RT_FIELDS(RT_RESOLVE)
#undef RT_RESOLVE
}

const lg_runtime_t *lg_runtime_get(void)
{
    pthread_once(&runtime_once, resolve_runtime);
    return &runtime;
}

/* The table of one version's runtime, for a launch that came through that version's hook. */
static lg_runtime_t by_version[3];
static int by_version_state[3]; /* 0: not looked up, 1: ready, 2: that runtime is not loaded */
static pthread_mutex_t by_version_lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve_version(lg_runtime_t *t, void *h, const char *version)
{
#define RV(field, name)                                           \
    do {                                                          \
        void *f = dlvsym(h, name, version);                       \
        *(void **)&t->field = f ? f : dlsym(h, name);             \
    } while (0);
    RT_FIELDS(RV)
#undef RV
}

const lg_runtime_t *lg_runtime_for(int major, const char *version)
{
    int i = major == 13 ? 0 : major == 12 ? 1 : major == 11 ? 2 : -1;
    if (i < 0)
        return lg_runtime_get();
    int st = __atomic_load_n(&by_version_state[i], __ATOMIC_ACQUIRE);
    if (st == 0) {
        pthread_mutex_lock(&by_version_lock);
        st = by_version_state[i];
        if (st == 0) {
            lg_forkpoint(LG_FORKPOINT_VERSION);
            void *h = cudart_of_major(major);
            if (h) {
                resolve_version(&by_version[i], h, version);
                dlclose(h);
            }
            st = h ? 1 : 2; /* absent: the caller's runtime is the process-wide one */
            __atomic_store_n(&by_version_state[i], st, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&by_version_lock);
    }
    return st == 1 ? &by_version[i] : lg_runtime_get();
}

/* ------------------------------------------------------------------ the pending error */

/* Our text is per thread: PyTorch reads cudaGetLastError and then cudaGetErrorString on the
 * thread that made the failing call. It means LG_RAISE_ERROR only while message_live is set
 * (while our error is the thread's last error, and until the thread's next launch after it was
 * read, or a newer error of CUDA's replaced it), so an unrelated cudaErrorNotPermitted later gets CUDA's
 * own text. The text lives on the heap behind a pthread key, not in a __thread array: the
 * library's whole TLS block is static TLS (the fast path's initial-exec variables), and a
 * library dlopen'd into a running process (`labelguard attach`, labelguard.enable() after
 * `import torch`) gets only glibc's small static-TLS surplus, which other libraries share; a
 * kilobyte there can make that dlopen fail. Made on the report path only, freed at thread exit. */
#define MESSAGE_CAP 1024 /* bytes, including the NUL */
static pthread_key_t message_key;
static pthread_once_t message_once = PTHREAD_ONCE_INIT;
static bool message_key_ok;

static void make_message_key(void) { message_key_ok = pthread_key_create(&message_key, free) == 0; }

void lg_runtime_set_pending_error(int code, const char *message, bool at_sync)
{
    /* Several bad launches read at one hook point (a graph's forward and backward): the first
     * is the one to show, the others are in the log. */
    if (message && lg_runtime_pending == code && lg_runtime_message_live)
        return;
    lg_runtime_pending = code;
    lg_runtime_pending_sync = at_sync && code != 0;
    if (!message)
        return;
    pthread_once(&message_once, make_message_key);
    char *buf = message_key_ok ? pthread_getspecific(message_key) : NULL;
    if (!buf && message_key_ok && (buf = malloc(MESSAGE_CAP)) && pthread_setspecific(message_key, buf) != 0) {
        free(buf);
        buf = NULL;
    }
    if (!buf) /* no memory for the text: the error code still arrives, with CUDA's own text */
        return;
    snprintf(buf, MESSAGE_CAP, "%s", message);
    lg_runtime_message_live = 1;
}

const char *lg_runtime_error_message(int code)
{
    if (code != LG_RAISE_ERROR || !lg_runtime_message_live || !message_key_ok)
        return NULL;
    const char *buf = pthread_getspecific(message_key);
    return buf && buf[0] ? buf : NULL;
}

int lg_runtime_save_error(const lg_runtime_t *rt) { return rt && rt->get_last_error ? rt->get_last_error() : 0; }

void lg_runtime_restore_error(const lg_runtime_t *rt, int saved)
{
    if (rt && rt->get_last_error)
        rt->get_last_error(); /* whatever our own calls left */
    if (saved)
        lg_runtime_app_error = saved;
}

int lg_runtime_take_error(int e)
{
    if (lg_runtime_app_error) {
        /* The application's own comes first (it is older than ours, which stays pending); a
         * newer error of the runtime replaces it, as CUDA keeps only the last. */
        int app = lg_runtime_app_error;
        lg_runtime_app_error = 0;
        return e ? e : app;
    }
    /* cudaErrorNotReady is a status that PyTorch reads and discards ((void)cudaGetLastError()
     * after querying work in flight): our error waits for the next check instead of vanishing. */
    if (lg_runtime_pending && e != 600 /* cudaErrorNotReady */) {
        if (e == 0)
            e = lg_runtime_pending;
        else
            lg_runtime_forget_message(); /* a newer error of the runtime's replaces ours */
        lg_runtime_pending = 0;
        lg_runtime_pending_sync = 0;
    }
    return e;
}

int lg_runtime_deliver_async(int e)
{
    if (!lg_runtime_pending_sync)
        return e;
    lg_runtime_pending_sync = 0;
    if (e == 0)
        return lg_runtime_pending; /* and it stays the thread's last error */
    /* The call failed on its own: CUDA's error is the last one now, ours is superseded. */
    lg_runtime_pending = 0;
    lg_runtime_forget_message();
    return e;
}

int lg_runtime_peek_error(int e)
{
    if (e)
        return e;
    return lg_runtime_app_error ? lg_runtime_app_error : lg_runtime_pending;
}

int lg_runtime_capture_status(const lg_runtime_t *rt, void *stream, unsigned long long *id)
{
    *id = 0;
    if (!rt || !rt->stream_is_capturing)
        return 0;
    int saved = lg_runtime_save_error(rt);
    int status = 0;
    int rc = rt->stream_is_capturing(stream, &status);
    if (rc != 0) {
        status = -1;
        *id = (unsigned long long)rc; /* why it refused */
    } else if (status != 0 && rt->stream_get_capture_info) {
        int st2 = 0;
        unsigned long long cid = 0;
        if (rt->stream_get_capture_info(stream, &st2, &cid, NULL, NULL, NULL, NULL) == 0)
            *id = cid;
    }
    lg_runtime_restore_error(rt, saved);
    return status;
}

int lg_runtime_relax_capture(const lg_runtime_t *rt)
{
    int mode = 2; /* cudaStreamCaptureModeRelaxed */
    if (!rt || !rt->exchange_capture_mode || rt->exchange_capture_mode(&mode) != 0)
        return -1;
    return mode;
}

void lg_runtime_restore_capture(const lg_runtime_t *rt, int old)
{
    if (old >= 0 && rt && rt->exchange_capture_mode)
        rt->exchange_capture_mode(&old);
}

/* A loader walk (dl_iterate_phdr) holds the loader's write lock, which glibc (2.36 at least)
 * does not reset in a fork child: a fork in the middle of one leaves the child hanging at its
 * first dlopen or walk (seen under qemu-user, where a walk is slow). So a fork waits for a
 * version lookup under way, then for any walk or NOLOAD dlopen of ours (the loader lock, taken
 * last because it is innermost), as it does for a start and a stack capture. */
void lg_runtime_atfork_prepare(void)
{
    pthread_mutex_lock(&by_version_lock);
    pthread_mutex_lock(&loader_lock);
}

void lg_runtime_atfork_parent(void)
{
    pthread_mutex_unlock(&loader_lock);
    pthread_mutex_unlock(&by_version_lock);
}

void lg_runtime_atfork_child(void)
{
    pthread_mutex_init(&loader_lock, NULL);
    pthread_mutex_init(&by_version_lock, NULL);
    lg_runtime_pending = 0;
    lg_runtime_pending_sync = 0;
    lg_runtime_app_error = 0;
}

_Static_assert(LG_RAISE_ERROR == (int)cudaErrorNotPermitted, "LG_RAISE_ERROR is cudaErrorNotPermitted");
