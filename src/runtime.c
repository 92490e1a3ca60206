/* runtime.c: the CUDA bindings, in one place: which libcudart objects the process holds (one
 * per soname: a CUDA 12 and a CUDA 13 runtime can live side by side, e.g. torch's wheel and a
 * custom extension), the libcuda handle, the runtime functions the core calls (lg_runtime_t),
 * the per-thread pending error that a blocked launch leaves for cudaGetLastError (with our
 * text for it, valid until the thread's next launch), the save and restore of the
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
 * Tested through every hook test (tests/e2e, tests/fakecuda; test_delivery.sh for the error's
 * thread, text and the application's own error) and tests/unit/test_act.c, which checks the
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

#include "internal.h"

LG_TLS int lg_in_library;
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

int lg_runtime_cudarts(lg_cudart_t *out, int cap)
{
    cudart_walk_t w = {.out = out, .cap = cap, .n = 0};
    if (cap > 0)
        dl_iterate_phdr(walk_cudart, &w);
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
        h = dlopen(found[i].path, RTLD_LAZY | RTLD_NOLOAD);
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

/* libcuda is opened RTLD_LOCAL, never linked: the library must load on a machine without a
 * driver. The handle is kept for the process (dlclose would unload a driver still in use). */
void *lg_runtime_libcuda(void)
{
    static void *handle;
    void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h)
        __atomic_store_n(&handle, h, __ATOMIC_RELEASE);
    return h;
}

/* ------------------------------------------------------------------ the runtime table */

static lg_runtime_t runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

#define RT_RESOLVE(field, name) runtime.field = (__typeof__(runtime.field))lg_runtime_resolve(name, NULL)

static void resolve_runtime(void)
{
    RT_RESOLVE(memcpy_async, "cudaMemcpyAsync");
    RT_RESOLVE(stream_synchronize, "cudaStreamSynchronize");
    RT_RESOLVE(malloc_device, "cudaMalloc");
    RT_RESOLVE(free_device, "cudaFree");
    RT_RESOLVE(malloc_host, "cudaMallocHost");
    RT_RESOLVE(free_host, "cudaFreeHost");
    RT_RESOLVE(pointer_attributes, "cudaPointerGetAttributes");
    RT_RESOLVE(stream_is_capturing, "cudaStreamIsCapturing");
    RT_RESOLVE(get_device, "cudaGetDevice");
    RT_RESOLVE(get_device_properties, "cudaGetDeviceProperties");
    RT_RESOLVE(get_last_error, "cudaGetLastError");
    RT_RESOLVE(func_get_name, "cudaFuncGetName");
    RT_RESOLVE(func_get_param_info, "cudaFuncGetParamInfo");
    RT_RESOLVE(get_error_string, "cudaGetErrorString");
    RT_RESOLVE(runtime_get_version, "cudaRuntimeGetVersion");
    RT_RESOLVE(driver_get_version, "cudaDriverGetVersion");
    RT_RESOLVE(exchange_capture_mode, "cudaThreadExchangeStreamCaptureMode");
    RT_RESOLVE(launch_host_func, "cudaLaunchHostFunc");
    RT_RESOLVE(stream_get_capture_info, "cudaStreamGetCaptureInfo");
}

const lg_runtime_t *lg_runtime_get(void)
{
    pthread_once(&runtime_once, resolve_runtime);
    return &runtime;
}

/* ------------------------------------------------------------------ the pending error */

/* Our text is per thread: PyTorch reads cudaGetLastError and then cudaGetErrorString on the
 * thread that made the failing call. It means LG_RAISE_ERROR only while message_live is set
 * (until the thread's next launch), so an unrelated cudaErrorNotPermitted later gets CUDA's
 * own text. Large, touched only on the report path: not initial-exec TLS. */
static __thread char thread_message[1024];

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
    snprintf(thread_message, sizeof thread_message, "%s", message);
    lg_runtime_message_live = 1;
}

const char *lg_runtime_error_message(int code)
{
    if (code != LG_RAISE_ERROR || !lg_runtime_message_live || !thread_message[0])
        return NULL;
    return thread_message;
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
        lg_runtime_pending = 0;
        lg_runtime_pending_sync = 0;
    }
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

void lg_runtime_atfork_child(void)
{
    lg_runtime_pending = 0;
    lg_runtime_pending_sync = 0;
    lg_runtime_app_error = 0;
}

_Static_assert(LG_RAISE_ERROR == (int)cudaErrorNotPermitted, "LG_RAISE_ERROR is cudaErrorNotPermitted");
