/* test_gpu_driver.c: the GPU backend's answers to a driver that says no, with the driver table
 * (lg_validate_module_drv, validate_gpu.h) filled with fakes, no CUDA at all. Two refusals a real GPU gives that
 * the runtime test double cannot show:
 *   - an old driver refuses the fatbin (CUDA_ERROR_NO_BINARY_FOR_GPU, UNSUPPORTED_PTX_VERSION,
 *     INVALID_IMAGE): the PTX image alone is loaded instead, and the image the start event
 *     names says so, with the loaded function's binary and PTX versions;
 *   - cuMemAlloc refuses scratch memory (a full GPU): the check goes to the host backend
 *     (use_host, counted in host_fallbacks), and allocation is retried with a backoff
 *     (attempts 1, 2, 4, 8, ... of the launches that need it), not at every launch;
 *   - cuMemAlloc refuses the sanitized copy's memory: the copy goes to mapped pinned host
 *     memory (cuMemHostAlloc DEVICEMAP) and the GPU backend keeps the check;
 *   - labels on another device than the current context's: the host backend takes the check;
 *   - checks on more streams than the scratch table holds: the rest go to the host backend;
 *   - two threads on one stream: each gets a sanitized copy of its own;
 *   - 10,000 capture / instantiate twice / replay / destroy cycles: the captured scratch is
 *     handed back and reused, with no new allocation and no check sent to the host backend;
 *     not before its last replay has run, and never when its graph went without an exec;
 *   - a capture into an existing graph (cudaStreamBeginCaptureToGraph, no graph handed back):
 *     its scratch stays the graph's until the graph and its execs are gone, a body's for good;
 *   - a captured validator whose graph is instantiated twice: the second exec's validator node,
 *     and the loss launch reading its sanitized copy, are pointed at scratch of their own
 *     (cuGraphExecKernelNodeSetParams on a fake graph that records each exec's node values),
 *     its replays are read from its own ring and named exec 2; a refused rewrite puts the exec
 *     back as it was;
 *   - a BCE launch through launch.c (lg_launch_decide): captured, each checked operand becomes a
 *     range-kernel node that makes no copy, and a replay's bad probabilities are reported after it
 *     ran (the replay emulated with lg_scan_host); in async mode the launch is not held, and its
 *     verdict comes at the next poll, said late;
 *   - no CUDA context in the process yet when the backend is first asked (the start came at a
 *     hook before the application's first context): undecided, then GPU once a primary
 *     context is active or one is current, host only when the module does not load.
 * Run: build/tests/unit/test_gpu_driver (or LG_TESTS=test_gpu_driver bash tests/run.sh).
 */
#include "../../cuda/lg_validate.h"
#include "hooks/hooks.h"
#include "labelguard.h"
#include "checks/validate_gpu.h"

#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char lg_validator_fatbin[];
extern const char lg_validator_ptx[];

static CUresult refuse_fatbin_with; /* what cuModuleLoadData answers for the fatbin */
static int loads_fatbin, loads_ptx;
static bool alloc_fails;
static int label_device; /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL of the labels; the context is on 0 */
static int allocs, kernel_launches;

static CUresult f_load(CUmodule *m, const void *image)
{
    *m = (CUmodule)0x1000;
    if (image == (const void *)lg_validator_fatbin) {
        loads_fatbin++;
        return refuse_fatbin_with;
    }
    if (image == (const void *)lg_validator_ptx) {
        loads_ptx++;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_IMAGE;
}
/* Each validator kernel a handle of its own: 0x2000 + 16 * its place in this list. */
static const char *const kernel_names[] = {
    LG_KERNEL_I64_VEC, LG_KERNEL_I64_GEN, LG_KERNEL_U8_VEC,  LG_KERNEL_U8_GEN,  LG_KERNEL_I32_VEC, LG_KERNEL_I32_GEN,
    LG_KERNEL_F32_VEC, LG_KERNEL_F32_GEN, LG_KERNEL_F16_VEC, LG_KERNEL_F16_GEN, LG_KERNEL_F64_VEC, LG_KERNEL_F64_GEN,
};
static CUfunction kernel_handle(const char *name)
{
    for (size_t k = 0; k < sizeof kernel_names / sizeof *kernel_names; k++)
        if (!strcmp(name, kernel_names[k]))
            return (CUfunction)(uintptr_t)(0x2000 + 16 * k);
    return NULL;
}
static CUresult f_get_function(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    *f = kernel_handle(name);
    return *f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
static CUresult f_func_attr(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_BINARY_VERSION ? 90 : a == CU_FUNC_ATTRIBUTE_PTX_VERSION ? 65 : 0;
    return CUDA_SUCCESS;
}
static CUresult f_error_string(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "refused";
    return CUDA_SUCCESS;
}
static bool no_context;  /* the process has made no CUDA context yet */
static int primary_active; /* cuDevicePrimaryCtxGetState's answer */
static CUresult f_ctx_current(CUcontext *c)
{
    *c = no_context ? NULL : (CUcontext)0x3000;
    return CUDA_SUCCESS;
}
static CUresult f_init(unsigned flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
static CUresult f_device_count(int *n)
{
    *n = 1;
    return CUDA_SUCCESS;
}
static CUresult f_primary_state(CUdevice d, unsigned *flags, int *active)
{
    (void)d;
    *flags = 0;
    *active = primary_active;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_device(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult f_dev_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a, (void)d;
    *v = 4;
    return CUDA_SUCCESS;
}
static CUresult f_stream_create(CUstream *s, unsigned flags)
{
    (void)flags;
    *s = (CUstream)0x4000;
    return CUDA_SUCCESS;
}
static CUresult f_exchange(CUstreamCaptureMode *m)
{
    (void)m;
    return CUDA_SUCCESS;
}
static CUstream capturing; /* the stream a capture runs on, else NULL */
static CUresult f_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    *st = capturing && s == capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
static CUresult f_pointer_attr(void *out, CUpointer_attribute a, CUdeviceptr p)
{
    (void)p;
    if (a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *(unsigned *)out = CU_MEMORYTYPE_DEVICE;
    else if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)out = 0;
    else if (a == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *(size_t *)out = 0; /* unknown: the range check is skipped */
    else if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *(int *)out = label_device;
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
static CUresult f_mem_alloc(CUdeviceptr *p, size_t n)
{
    allocs++;
    if (alloc_fails)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)calloc(1, n); /* leaked, as the backend's scratch is */
    return CUDA_SUCCESS;
}
static void *last_host_alloc; /* what cuMemHostAlloc handed out last */
static unsigned last_host_flags;
static CUresult f_host_alloc(void **p, size_t n, unsigned flags)
{
    *p = last_host_alloc = calloc(1, n);
    last_host_flags = flags;
    return CUDA_SUCCESS;
}
static CUresult f_host_dev_ptr(CUdeviceptr *d, void *p, unsigned flags)
{
    (void)flags;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult f_htod(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    (void)st;
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
static CUresult f_sync(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}
/* A captured graph as the driver keeps it: a chain of kernel nodes (the capture's order), each
 * with its argument values; every exec keeps its own copy of each node's values. */
enum { MAX_NODES = 8, MAX_EXECS = 3, ARG_BYTES = 256 };
typedef struct {
    CUfunction func;
    int n_args, size[4];
    unsigned char val[4][ARG_BYTES];
    void *argv[4];
} fnode_t;
static fnode_t nodes[MAX_NODES];
static int n_nodes;
static fnode_t exec_nodes[MAX_EXECS][MAX_NODES]; /* exec k's values: a copy of the graph's at instantiate */
static int set_calls, set_fail_at;               /* cuGraphExecKernelNodeSetParams refuses call set_fail_at */
#define GRAPH ((CUgraph)0xa000)
#define LOSS_FN ((CUfunction)0x9000)

static fnode_t *add_node(CUfunction f, int n_args, const int *size, void *const *vals)
{
    fnode_t *n = &nodes[n_nodes++];
    n->func = f;
    n->n_args = n_args;
    for (int i = 0; i < n_args; i++) {
        n->size[i] = size[i];
        memcpy(n->val[i], vals[i], (size_t)size[i]);
        n->argv[i] = n->val[i];
    }
    return n;
}
static void instantiate(int exec)
{
    memcpy(exec_nodes[exec], nodes, sizeof nodes);
    for (int k = 0; k < n_nodes; k++)
        for (int i = 0; i < nodes[k].n_args; i++)
            exec_nodes[exec][k].argv[i] = exec_nodes[exec][k].val[i];
}
static int node_index(CUgraphNode n) { return (int)((uintptr_t)n - 1); }
static CUresult f_get_nodes(CUgraph g, CUgraphNode *out, size_t *num)
{
    if (g != GRAPH)
        return CUDA_ERROR_INVALID_VALUE;
    if (out)
        for (int k = 0; k < n_nodes && (size_t)k < *num; k++)
            out[k] = (CUgraphNode)(uintptr_t)(k + 1);
    *num = out && *num < (size_t)n_nodes ? *num : (size_t)n_nodes;
    return CUDA_SUCCESS;
}
static CUresult f_node_type(CUgraphNode n, CUgraphNodeType *t)
{
    (void)n;
    *t = CU_GRAPH_NODE_TYPE_KERNEL;
    return CUDA_SUCCESS;
}
static CUresult f_dependents(CUgraphNode n, CUgraphNode *out, size_t *num)
{
    int k = node_index(n) + 1; /* a chain: the next node depends on this one */
    size_t have = k < n_nodes ? 1 : 0;
    if (out && *num >= 1 && have)
        out[0] = (CUgraphNode)(uintptr_t)(k + 1);
    *num = have;
    return CUDA_SUCCESS;
}
static CUresult f_kernel_params(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    fnode_t *f = &nodes[node_index(n)];
    p->func = f->func;
    p->kernelParams = f->argv;
    return CUDA_SUCCESS;
}
static CUresult f_exec_set(CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    if (++set_calls == set_fail_at)
        return CUDA_ERROR_INVALID_VALUE;
    fnode_t *f = &exec_nodes[(uintptr_t)x][node_index(n)];
    if (p->func != f->func) /* the function of an exec's node cannot change */
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < f->n_args; i++)
        memcpy(f->val[i], p->kernelParams[i], (size_t)f->size[i]);
    return CUDA_SUCCESS;
}
static CUresult f_param_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
    if (f != LOSS_FN || i >= 2)
        return CUDA_ERROR_INVALID_VALUE;
    *off = 8 * i;
    *size = 8;
    return CUDA_SUCCESS;
}

static CUfunction last_launched;
static bool launch_publishes; /* a launch outside capture publishes lg_scan_host's verdict, as the kernel would */
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned sm, CUstream s, void **p, void **e)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sm, (void)e;
    kernel_launches++;
    last_launched = f;
    if (launch_publishes && !(capturing && s == capturing)) {
        const lg_scan_params_t *sp = p[0];
        lg_scan_state_t *st = (lg_scan_state_t *)(uintptr_t)sp->state;
        lg_scan_ring_t *ring = (lg_scan_ring_t *)(uintptr_t)sp->ring;
        uint64_t seq = ++st->runs;
        lg_scan_host(&sp->t, (const void *)(uintptr_t)sp->t.data, sp->samples, &ring->entries[seq % LG_RING_SLOTS].verdict);
        ring->entries[seq % LG_RING_SLOTS].seq = seq;
        ring->latest = seq;
    }
    if (capturing && s == capturing) {
        int size = (int)sizeof(lg_scan_params_t);
        add_node(f, 1, &size, p);
    }
    return CUDA_SUCCESS;
}

static void fake_driver(void)
{
    memset(&lg_validate_module_drv, 0, sizeof lg_validate_module_drv);
    lg_validate_module_drv.get_error_string = f_error_string;
    lg_validate_module_drv.ctx_get_current = f_ctx_current;
    lg_validate_module_drv.init = f_init;
    lg_validate_module_drv.device_get_count = f_device_count;
    lg_validate_module_drv.primary_ctx_get_state = f_primary_state;
    lg_validate_module_drv.ctx_get_device = f_ctx_device;
    lg_validate_module_drv.device_get_attribute = f_dev_attr;
    lg_validate_module_drv.module_load_data = f_load;
    lg_validate_module_drv.module_get_function = f_get_function;
    lg_validate_module_drv.func_get_attribute = f_func_attr;
    lg_validate_module_drv.stream_create = f_stream_create;
    lg_validate_module_drv.exchange_capture_mode = f_exchange;
    lg_validate_module_drv.stream_is_capturing = f_is_capturing;
    lg_validate_module_drv.pointer_get_attribute = f_pointer_attr;
    lg_validate_module_drv.mem_alloc = f_mem_alloc;
    lg_validate_module_drv.mem_host_alloc = f_host_alloc;
    lg_validate_module_drv.mem_host_get_device_pointer = f_host_dev_ptr;
    lg_validate_module_drv.memcpy_htod_async = f_htod;
    lg_validate_module_drv.stream_synchronize = f_sync;
    lg_validate_module_drv.launch_kernel = f_launch;
    lg_validate_module_drv.graph_get_nodes = f_get_nodes;
    lg_validate_module_drv.graph_node_get_type = f_node_type;
    lg_validate_module_drv.graph_node_get_dependent_nodes = f_dependents;
    lg_validate_module_drv.graph_kernel_node_get_params = f_kernel_params;
    lg_validate_module_drv.graph_exec_kernel_node_set_params = f_exec_set;
    lg_validate_module_drv.func_get_param_info = f_param_info;
}

/* The fake driver, granting everything, with no module loaded yet: each test starts here. */
static void fresh_driver(void)
{
    fake_driver();
    lg_validate_module_forget();
    refuse_fatbin_with = CUDA_SUCCESS;
    alloc_fails = false;
    label_device = 0;
}

/* The backend is decided once a context exists: a start before the application's first context
 * (its first hook came first) leaves it undecided (-1), not host; a primary context made on
 * another thread, or one current here, decides it (GPU). */
static void test_backend_undecided_until_context(void)
{
    fresh_driver();
    no_context = true;
    primary_active = 0;
    g_assert_cmpint(lg_validate_module_decide(), ==, -1);
    primary_active = 1;
    g_assert_cmpint(lg_validate_module_decide(), ==, 1);
    primary_active = 0;
    no_context = false;
    g_assert_cmpint(lg_validate_module_decide(), ==, 1);
    g_assert_cmpint(lg_validate_module_count(), ==, 1); /* the current context's module */
    refuse_fatbin_with = CUDA_ERROR_OUT_OF_MEMORY;      /* neither image loads in a new context */
    lg_validate_module_forget();
    g_assert_cmpint(lg_validate_module_decide(), ==, 0);
    refuse_fatbin_with = CUDA_SUCCESS;
}

/* A context the old driver cannot run the fatbin in: the PTX alone loads. */
static void test_ptx_fallback(void)
{
    static const CUresult refusals[] = {CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                                        CUDA_ERROR_INVALID_IMAGE};
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
        fake_driver();
        lg_validate_module_forget();
        refuse_fatbin_with = refusals[i];
        loads_fatbin = loads_ptx = 0;
        char why[256] = "";
        lg_module_t *m = lg_validate_module_for((CUcontext)(uintptr_t)(0x5000 + i), why, sizeof why);
        g_assert_nonnull(m);
        g_assert_cmpint(loads_fatbin, ==, 1);
        g_assert_cmpint(loads_ptx, ==, 1);
    }
    /* The image of the first context to load one: the start event's "validator". */
    g_assert_cmpstr(lg_validate_module_image(), ==, "ptx: sm_90 code, PTX ISA 6.5");
    g_assert_true(strncmp(lg_validator_ptx, "//", 2) == 0 || strstr(lg_validator_ptx, ".version") != NULL);
}

/* A driver failure that is not about the image is not retried with the PTX. */
static void test_no_ptx_for_other_errors(void)
{
    fake_driver();
    lg_validate_module_forget();
    refuse_fatbin_with = CUDA_ERROR_OUT_OF_MEMORY;
    loads_fatbin = loads_ptx = 0;
    char why[256] = "";
    g_assert_null(lg_validate_module_for((CUcontext)0x6000, why, sizeof why));
    g_assert_cmpint(loads_ptx, ==, 0);
    g_assert_nonnull(strstr(why, "out of memory"));
}

/* 64 int64 labels in host memory the fake driver calls device memory, 10 classes. */
static lg_target_t labels64(void)
{
    static int64_t labels[64];
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.data = (uint64_t)(uintptr_t)labels;
    t.dtype = LG_DTYPE_INT64;
    t.count = 64;
    t.ndim = 1;
    t.sizes[0] = 64;
    t.strides[0] = 1;
    t.n_classes = 10;
    return t;
}

static int check(bool *use_host)
{
    lg_target_t t = labels64();
    lg_gpu_run_t run;
    char why[512] = "";
    *use_host = false;
    return lg_validate_gpu_launch(NULL, &t, (void *)0x7000, 64, 4, false, 0, false, &run, use_host, why, sizeof why);
}

/* A check with a sanitized copy on `stream` for 64 int64 labels; *run gets the launch. */
static int check_copy(void *stream, lg_gpu_run_t *run, bool *use_host)
{
    lg_target_t t = labels64();
    char why[512] = "";
    *use_host = false;
    return lg_validate_gpu_launch(NULL, &t, stream, 64, 4, true, -100, false, run, use_host, why, sizeof why);
}

/* The device refuses the sanitized copy's memory (a full GPU under mask): the copy goes to
 * mapped pinned host memory and the GPU backend still takes the check, instead of the host
 * backend (whose own cudaMalloc would be refused too) and mask falling back to raise. */
static void test_copy_in_pinned_memory(void)
{
    fresh_driver();
    bool use_host;
    lg_gpu_run_t run;
    int rc = -1;
    /* The stream's scratch, while memory is granted (the backoff of an earlier test may
     * still hold a few launches back). */
    for (int i = 0; i < 16 && rc != 0; i++)
        rc = check(&use_host);
    g_assert_cmpint(rc, ==, 0);
    alloc_fails = true;
    last_host_alloc = NULL;
    kernel_launches = 0;
    uint64_t before = lg_validate_gpu_host_fallbacks();
    memset(&run, 0, sizeof run);
    rc = check_copy((void *)0x7000, &run, &use_host);
    g_assert_cmpint(rc, ==, 0);
    g_assert_false(use_host);
    g_assert_cmpint(kernel_launches, ==, 1);
    g_assert_nonnull(last_host_alloc);
    g_assert_true(last_host_flags & CU_MEMHOSTALLOC_DEVICEMAP);
    g_assert_cmphex(run.copy, ==, (uint64_t)(uintptr_t)last_host_alloc);
    g_assert_cmpuint(lg_validate_gpu_host_fallbacks() - before, ==, 0);
    /* The next masked launch of the stream reuses it. */
    last_host_alloc = NULL;
    rc = check_copy((void *)0x7000, &run, &use_host);
    g_assert_cmpint(rc, ==, 0);
    g_assert_null(last_host_alloc);
    alloc_fails = false;
}

/* Labels on device 1 while the current context is device 0's: the validator must not read
 * them in this context; the host backend (the runtime's copy) takes the check. */
static void test_labels_on_other_device(void)
{
    fresh_driver();
    bool use_host;
    label_device = 1;
    kernel_launches = 0;
    for (int i = 0; i < 4; i++) {
        g_assert_cmpint(check(&use_host), ==, -1);
        g_assert_true(use_host);
    }
    g_assert_cmpint(kernel_launches, ==, 0);
    label_device = 0;
    int rc = -1;
    for (int i = 0; i < 16 && rc != 0; i++)
        rc = check(&use_host);
    g_assert_cmpint(rc, ==, 0);
    g_assert_cmpint(kernel_launches, ==, 1);
}

/* Another thread's masked launch on the same stream (0x7000 and the legacy default stream). */
typedef struct {
    void *stream;
    lg_gpu_run_t run[2];
    int rc[2];
} other_t;
static void *other_thread(void *arg)
{
    other_t *o = arg;
    bool use_host;
    for (int i = 0; i < 2; i++) {
        o->rc[i] = -1;
        for (int k = 0; k < 16 && o->rc[i] != 0; k++) /* the backoff of an earlier test */
            o->rc[i] = check_copy(o->stream, &o->run[i], &use_host);
    }
    return NULL;
}

/* Threads share a stream (PyTorch's default stream): each thread's sanitized copy is its own,
 * so another thread's validator, enqueued between this thread's and its loss launch, cannot
 * rewrite the copy that loss reads. One thread's launches reuse its copy. */
static void test_copy_per_thread(void)
{
    fresh_driver();
    void *streams[2] = {(void *)0x7000, NULL};
    for (int k = 0; k < 2; k++) {
        bool use_host;
        lg_gpu_run_t mine[2];
        for (int i = 0; i < 2; i++) {
            int rc = -1;
            for (int j = 0; j < 16 && rc != 0; j++)
                rc = check_copy(streams[k], &mine[i], &use_host);
            g_assert_cmpint(rc, ==, 0);
        }
        g_assert_cmphex(mine[0].copy, ==, mine[1].copy);
        other_t o = {.stream = streams[k]};
        pthread_t th;
        g_assert_cmpint(pthread_create(&th, NULL, other_thread, &o), ==, 0);
        pthread_join(th, NULL);
        g_assert_cmpint(o.rc[0], ==, 0);
        g_assert_cmpint(o.rc[1], ==, 0);
        g_assert_cmphex(o.run[0].copy, ==, o.run[1].copy);
        g_assert_cmphex(o.run[0].copy, !=, mine[0].copy);
        g_assert_cmphex(o.run[0].copy, !=, 0);
    }
}

/* Scratch is never freed, so a process checking on ever new streams must not take GPU memory
 * for each: past the bound (256 streams) the host backend takes the check, with the reason;
 * streams that have scratch keep it. */
static void test_stream_scratch_bounded(void)
{
    fresh_driver();
    int on_gpu = 0, on_host = 0;
    for (int i = 0; i < 400; i++) {
        lg_target_t t = labels64();
        lg_gpu_run_t run;
        char why[512] = "";
        bool use_host = false;
        int rc = lg_validate_gpu_launch(NULL, &t, (void *)(uintptr_t)(0x100000 + 16 * i), 64, 4, false, 0, false, &run,
                                        &use_host, why, sizeof why);
        if (rc == 0) {
            on_gpu++;
        } else {
            g_assert_true(use_host);
            g_assert_nonnull(strstr(why, "already have validator scratch"));
            on_host++;
        }
    }
    g_assert_cmpint(on_gpu, <=, 256);
    g_assert_cmpint(on_host, >=, 400 - 256);
    bool use_host;
    g_assert_cmpint(check(&use_host), ==, 0); /* stream 0x7000 had scratch before: it keeps it */
}

static void test_scratch_refused(void)
{
    fake_driver();
    lg_validate_module_forget();
    refuse_fatbin_with = CUDA_SUCCESS;
    alloc_fails = true;
    allocs = kernel_launches = 0;
    uint64_t before = lg_validate_gpu_host_fallbacks();
    bool use_host;
    int tried_at[16], n_tried = 0;
    for (int i = 1; i <= 9; i++) {
        int a0 = allocs;
        g_assert_cmpint(check(&use_host), ==, -1);
        g_assert_true(use_host); /* the host backend takes the check */
        if (allocs > a0)
            tried_at[n_tried++] = i;
    }
    /* Launch 1 tries, then after 1, 2, 4 more launches: 1, 2, 4, 8. */
    g_assert_cmpint(n_tried, ==, 4);
    g_assert_cmpint(tried_at[0], ==, 1);
    g_assert_cmpint(tried_at[1], ==, 2);
    g_assert_cmpint(tried_at[2], ==, 4);
    g_assert_cmpint(tried_at[3], ==, 8);
    g_assert_cmpuint(lg_validate_gpu_host_fallbacks() - before, ==, 9);
    g_assert_cmpint(kernel_launches, ==, 0);
    /* The reason is handed over once, for launch.c's scratch_fallback warning. */
    const char *note = lg_validate_gpu_take_fallback_note();
    g_assert_nonnull(note);
    g_assert_nonnull(strstr(note, "out of memory"));
    g_assert_null(lg_validate_gpu_take_fallback_note());
    /* Memory again: the next try that the backoff allows succeeds and the GPU scans again. */
    alloc_fails = false;
    int rc = -1;
    for (int i = 0; i < 16 && rc != 0; i++)
        rc = check(&use_host);
    g_assert_cmpint(rc, ==, 0);
    g_assert_cmpint(kernel_launches, ==, 1);
}

static lg_scan_params_t node_params(const fnode_t *n)
{
    lg_scan_params_t p;
    memcpy(&p, n->val[0], sizeof p);
    return p;
}

/* A validator captured into GRAPH on stream `cs` (want_copy: with its sanitized copy), and,
 * when `loss`, the loss launch after it reading that copy (parameter 0) and a second argument
 * 42. *run gets the capture. */
static void capture(CUstream cs, bool loss, lg_gpu_run_t *run)
{
    lg_target_t t = labels64();
    n_nodes = 0;
    capturing = cs;
    char why[512] = "";
    bool use_host = false;
    int rc = -1;
    for (int i = 0; i < 16 && rc != 0; i++) /* the backoff of an earlier test may hold a few back */
        rc = lg_validate_gpu_launch(NULL, &t, cs, 64, 4, true, -100, true, run, &use_host, why, sizeof why);
    g_assert_cmpint(rc, ==, 0);
    g_assert_true(run->captured);
    g_assert_cmpint(n_nodes, ==, 1);
    if (loss) {
        uint64_t target = run->copy, other = 42;
        int size[2] = {8, 8};
        void *vals[2] = {&target, &other};
        add_node(LOSS_FN, 2, size, vals);
    }
    capturing = NULL;
}

/* The loss kernel's facts: two 8-byte parameters, the target the first. */
static void loss_kernel(lg_spec_t *spec, lg_kernel_info_t *info)
{
    memset(spec, 0, sizeof *spec);
    spec->n_params = 2;
    spec->param_sizes[0] = spec->param_sizes[1] = 8;
    spec->target.param = 0;
    spec->target.offset = 0;
    memset(info, 0, sizeof *info);
    info->spec = spec;
}

/* Two execs of one graph holding a validator node: the second's node gets scratch of its own
 * (accumulators, candidates, verdict ring, sanitized copy) and the loss launch reads the new
 * copy; the graph and the first exec are untouched. Through graphs.c, exec 2's replay is read
 * from the new ring and named exec 2, exec 1's from the graph's. */
static void test_second_exec_own_scratch(void)
{
    fresh_driver();
    lg_gpu_run_t run;
    capture((CUstream)0xb000, true, &run);
    instantiate(1);
    instantiate(2);
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    info.func = (const void *)0x9100; /* the loss kernel's host stub: not the driver's CUfunction */

    lg_target_t t = {0};
    char why[512] = "";
    const unsigned long long id = 77;
    g_assert_cmpint(lg_graphs_add_check(id, &info, (void *)0xb000, &t, run.ring, run.copy, NULL, why, sizeof why), ==,
                    0);
    lg_graphs_end_capture(id, GRAPH);
    set_calls = 0;
    set_fail_at = 0;
    lg_graphs_instantiated((void *)1, GRAPH);
    g_assert_cmpint(set_calls, ==, 0); /* the first exec replays the graph's own scratch */
    lg_graphs_instantiated((void *)2, GRAPH);
    g_assert_cmpint(set_calls, ==, 2);

    lg_scan_params_t g0 = node_params(&nodes[0]), x1 = node_params(&exec_nodes[1][0]),
                     x2 = node_params(&exec_nodes[2][0]);
    g_assert_true(memcmp(&g0, &x1, sizeof g0) == 0);
    g_assert_cmphex(g0.ring, ==, (uint64_t)(uintptr_t)run.ring);
    g_assert_cmphex(x2.ring, !=, g0.ring);
    g_assert_cmphex(x2.state, !=, g0.state);
    g_assert_cmphex(x2.cand, !=, g0.cand);
    g_assert_cmphex(x2.cand_count, !=, g0.cand_count);
    g_assert_cmphex(x2.copy, !=, g0.copy);
    g_assert_cmphex(x2.copy, !=, 0);
    g_assert_true(memcmp(&x2.t, &g0.t, sizeof g0.t) == 0);
    g_assert_cmpint(x2.samples, ==, g0.samples);
    g_assert_cmpint(x2.replacement, ==, -100);
    /* The new accumulators start at their identities, as the validator expects. */
    const lg_scan_state_t *st = (const lg_scan_state_t *)(uintptr_t)x2.state;
    g_assert_cmpint(st->min, ==, INT64_MAX);
    g_assert_cmpint(st->max, ==, INT64_MIN);
    /* The loss launches: exec 1's reads the graph's copy, exec 2's its own; the rest unchanged. */
    uint64_t l1, l2, o2;
    memcpy(&l1, exec_nodes[1][1].val[0], 8);
    memcpy(&l2, exec_nodes[2][1].val[0], 8);
    memcpy(&o2, exec_nodes[2][1].val[1], 8);
    g_assert_cmphex(l1, ==, run.copy);
    g_assert_cmphex(l2, ==, x2.copy);
    g_assert_cmpuint(o2, ==, 42);

    /* A replay of each: exec 2's verdict is read from its own ring (published there by its
     * validator), exec 1's from the graph's. */
    lg_scan_ring_t *own = (lg_scan_ring_t *)(uintptr_t)x2.ring, *shared = (lg_scan_ring_t *)(uintptr_t)g0.ring;
    lg_async_report_t r;
    while (lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL))
        ;
    lg_graphs_launched((void *)2, (void *)0xb000);
    own->entries[1].verdict.bad_count = 3;
    own->entries[1].verdict.checked = 64;
    own->entries[1].seq = 1;
    own->latest = 1;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
    g_assert_cmpint(r.verdict.bad_count, ==, 3);
    g_assert_cmpuint(r.graph_id, ==, id);
    g_assert_cmpuint(r.replay, ==, 1);
    g_assert_cmpuint(r.exec, ==, 2);
    lg_graphs_launched((void *)1, (void *)0xb000);
    g_assert_false(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL)); /* the graph's ring: nothing yet */
    shared->entries[1].verdict.checked = 64;
    shared->entries[1].seq = 1;
    shared->latest = 1;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
    g_assert_cmpint(r.verdict.bad_count, ==, 0);
    g_assert_cmpuint(r.exec, ==, 1);
    lg_graphs_exec_destroyed((void *)1);
    lg_graphs_exec_destroyed((void *)2);
    lg_graphs_destroyed(GRAPH);
}

/* Log mode (the loss launch reads its own labels: reads 0): only the validator node is
 * rewritten. A refused rewrite of the loss launch puts the exec's validator back as it was
 * instantiated, and says why. */
static void test_second_exec_rebind_paths(void)
{
    fresh_driver();
    lg_gpu_run_t run;
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    const struct lg_scan_ring *own = NULL;
    char why[512] = "";

    capture((CUstream)0xb100, false, &run);
    instantiate(2);
    set_calls = set_fail_at = 0;
    g_assert_cmpint(lg_validate_rebind((void *)2, GRAPH, run.ring, &info, 0, &own, why, sizeof why), ==, 0);
    g_assert_cmpint(set_calls, ==, 1);
    g_assert_true(own != NULL && own != run.ring);

    capture((CUstream)0xb200, true, &run);
    instantiate(2);
    set_calls = 0;
    set_fail_at = 2; /* the loss launch's rewrite is refused */
    own = NULL;
    g_assert_cmpint(lg_validate_rebind((void *)2, GRAPH, run.ring, &info, run.copy, &own, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "scratch of its own failed"));
    g_assert_null(own);
    g_assert_true(memcmp(exec_nodes[2][0].val[0], nodes[0].val[0], sizeof(lg_scan_params_t)) == 0);
    set_fail_at = 0;

    /* No loss launch reads the copy where it says: not rewritten, said so. */
    capture((CUstream)0xb300, false, &run);
    instantiate(2);
    g_assert_cmpint(lg_validate_rebind((void *)2, GRAPH, run.ring, &info, run.copy, &own, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "loss launch reading the check's sanitized copy was not found"));
    /* A ring neither backend captured. */
    static lg_scan_ring_t stranger;
    g_assert_cmpint(lg_validate_rebind((void *)2, GRAPH, &stranger, &info, 0, &own, why, sizeof why), ==, -1);
    g_assert_nonnull(strstr(why, "neither backend"));
}

/* What cudagraph trees do for each new shape, 10,000 times: capture a checked loss launch,
 * instantiate the graph twice (the second exec gets scratch of its own), replay each exec once
 * (its validator publishes the run), read the verdicts, destroy the execs and the graph. The
 * scratch handed back at the destroys is taken by the next capture: no allocation after the
 * first cycles, every capture stays on the GPU (no host node past the table's bound), and each
 * replay's verdict is read as replay 1 of its exec. */
static void test_captured_scratch_reused(void)
{
    fresh_driver();
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    info.func = (const void *)0x9100;
    lg_async_report_t r;
    while (lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL))
        ;
    uint64_t fallbacks = lg_validate_gpu_host_fallbacks();
    int allocs_at_10 = 0;
    for (int k = 0; k < 10000; k++) {
        if (k == 10)
            allocs_at_10 = allocs;
        lg_gpu_run_t run;
        capture((CUstream)0xb400, true, &run); /* asserts the GPU backend took it */
        lg_target_t t = {0};
        char why[512] = "";
        const unsigned long long id = 1000 + (unsigned long long)k;
        g_assert_cmpint(lg_graphs_add_check(id, &info, (void *)0xb400, &t, run.ring, run.copy, NULL, why, sizeof why),
                        ==, 0);
        lg_graphs_end_capture(id, GRAPH);
        instantiate(1);
        instantiate(2);
        lg_graphs_instantiated((void *)1, GRAPH);
        lg_graphs_instantiated((void *)2, GRAPH);
        lg_graphs_destroyed(GRAPH);
        for (int x = 1; x <= 2; x++) {
            lg_graphs_launched((void *)(uintptr_t)x, (void *)0xb400);
            /* The exec's validator runs: its scratch counts the run and publishes it. */
            lg_scan_params_t p = node_params(&exec_nodes[x][0]);
            lg_scan_ring_t *ring = (lg_scan_ring_t *)(uintptr_t)p.ring;
            uint64_t seq = ring->latest + 1; /* the validator's run count is the ring's latest */
            ring->entries[seq % LG_RING_SLOTS].verdict.checked = 64;
            ring->entries[seq % LG_RING_SLOTS].verdict.bad_count = x;
            ring->entries[seq % LG_RING_SLOTS].seq = seq;
            ring->latest = seq;
            g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
            g_assert_cmpuint(r.graph_id, ==, id);
            g_assert_cmpuint(r.replay, ==, 1);
            g_assert_cmpuint(r.exec, ==, (uint64_t)x);
            g_assert_cmpint(r.verdict.bad_count, ==, x);
        }
        lg_graphs_exec_destroyed((void *)1);
        lg_graphs_exec_destroyed((void *)2);
    }
    g_assert_cmpint(allocs - allocs_at_10, ==, 0);
    g_assert_cmpuint(lg_validate_gpu_host_fallbacks() - fallbacks, ==, 0);
}

/* Whether captured scratch was handed back (no graph or exec holds it any more). */
static bool retired(const lg_gpu_run_t *run)
{
    const struct lg_scratch *s = lg_validate_scratch_captured(run->ring);
    g_assert_nonnull(s);
    return s->retired;
}

/* Publishes the next run of a captured check's ring, clean, as its validator node would. */
static void publish_run(const lg_gpu_run_t *run)
{
    lg_scan_ring_t *ring = (lg_scan_ring_t *)run->ring;
    uint64_t seq = ring->latest + 1;
    ring->entries[seq % LG_RING_SLOTS].verdict.checked = 64;
    ring->entries[seq % LG_RING_SLOTS].verdict.bad_count = 0;
    ring->entries[seq % LG_RING_SLOTS].seq = seq;
    ring->latest = seq;
}

/* A capture into an existing graph (cudaStreamBeginCaptureToGraph: torch.cond / while_loop
 * bodies, or a graph of the caller's own) ends without a graph handed back. Its check's scratch
 * is not handed back then, as a failed capture's is, while the graph still replays its nodes:
 * it stays the graph's while the graph or an exec of it can replay it, and a second capture
 * into the same graph joins the graph's checks. A conditional body (never instantiated nor
 * destroyed itself) keeps its scratch for good, and so does a failed capture into a graph (its
 * nodes may be there). */
static void test_captured_into_graph(void)
{
    fresh_driver();
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    lg_async_report_t r;
    while (lg_verdicts_collect(&r, LG_COLLECT_SYNC_ALL, NULL))
        ;
    lg_target_t t = {0};
    char why[512] = "";
    const CUgraph into = (CUgraph)0xa100, body = (CUgraph)0xa200, other = (CUgraph)0xa300;
    lg_gpu_run_t a, a2, b, c;
    capture((CUstream)0xb600, true, &a);
    g_assert_cmpint(lg_graphs_add_check(4001, &info, (void *)0xb600, &t, a.ring, a.copy, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_into(4001, into, true);
    g_assert_false(retired(&a));
    capture((CUstream)0xb600, true, &a2);
    g_assert_true(a2.ring != a.ring);
    g_assert_cmphex(a2.copy, !=, a.copy);
    g_assert_cmpint(lg_graphs_add_check(4002, &info, (void *)0xb600, &t, a2.ring, a2.copy, NULL, why, sizeof why), ==,
                    0);
    lg_graphs_end_into(4002, into, true);
    capture((CUstream)0xb600, true, &b);
    g_assert_cmpint(lg_graphs_add_check(4003, &info, (void *)0xb600, &t, b.ring, b.copy, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_into(4003, body, true);
    g_assert_true(b.ring != a.ring && b.ring != a2.ring);
    g_assert_false(lg_graphs_capturing());

    /* The graph's exec replays both checks, read under the graph's id; the graph itself goes. */
    lg_graphs_instantiated((void *)1, into);
    lg_graphs_destroyed(into);
    lg_graphs_launched((void *)1, (void *)0xb600);
    publish_run(&a);
    publish_run(&a2);
    for (int i = 0; i < 2; i++) {
        g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
        g_assert_cmpuint(r.graph_id, ==, 4001);
        g_assert_cmpuint(r.replay, ==, 1);
    }
    g_assert_false(retired(&a) || retired(&a2) || retired(&b));
    lg_graphs_exec_destroyed((void *)1);
    g_assert_true(retired(&a) && retired(&a2));
    g_assert_false(retired(&b));

    capture((CUstream)0xb600, true, &c);
    g_assert_cmpint(lg_graphs_add_check(4004, &info, (void *)0xb600, &t, c.ring, c.copy, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_into(4004, other, false);
    g_assert_false(retired(&c));
    g_assert_false(lg_graphs_capturing());
}

/* 64 float32 probabilities, two of them out of [0, 1] (a NaN at 5, 1.5 at 40). */
static lg_target_t probs32(void)
{
    static float probs[64];
    for (int i = 0; i < 64; i++)
        probs[i] = (float)i / 64.0f;
    probs[5] = __builtin_nanf("");
    probs[40] = 1.5f;
    lg_target_t t;
    memset(&t, 0, sizeof t);
    t.data = (uint64_t)(uintptr_t)probs;
    t.dtype = LG_DTYPE_FLOAT32;
    t.count = 64;
    t.ndim = 1;
    t.sizes[0] = 64;
    t.strides[0] = 1;
    return t;
}

/* A range target (BCE's probabilities) goes to the GPU backend's range kernel for its dtype,
 * never to the host backend (this test has no runtime: the host backend would fail), and its
 * verdict comes back through the stream's ring as a label verdict does. */
/* torch.multinomial's weights (rule LG_SCAN_RULE_PROBS) are judged by row: the GPU backend
 * launches nothing for them and hands the check to the host backend, with the reason. */
static void test_probs_to_host(void)
{
    fresh_driver();
    lg_target_t t = probs32();
    t.rule = LG_SCAN_RULE_PROBS;
    t.n_classes = 8;
    lg_gpu_run_t run;
    char why[512] = "";
    bool use_host = false;
    kernel_launches = 0;
    g_assert_cmpint(
        lg_validate_gpu_launch(NULL, &t, (void *)0x7000, 64, 4, false, 0, false, &run, &use_host, why, sizeof why), ==,
        -1);
    g_assert_true(use_host);
    g_assert_cmpint(kernel_launches, ==, 0);
    g_assert_nonnull(strstr(why, "by row"));
}

static void test_range_on_gpu(void)
{
    fresh_driver();
    lg_validate_gpu_after_fork(); /* a process of its own: the earlier tests filled the stream table */
    g_assert_true(lg_validate_gpu_init_loaded());
    lg_target_t t = probs32();
    const struct {
        lg_dtype_t d;
        const char *kernel;
    } k[] = {{LG_DTYPE_FLOAT32, LG_KERNEL_F32_VEC},
             {LG_DTYPE_FLOAT16, LG_KERNEL_F16_VEC},
             {LG_DTYPE_BFLOAT16, LG_KERNEL_F16_VEC},
             {LG_DTYPE_FLOAT64, LG_KERNEL_F64_VEC}};
    launch_publishes = true;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        lg_target_t ti = t;
        ti.dtype = k[i].d; /* the same bytes: only the kernel chosen is checked for the others */
        ti.count = ti.sizes[0] = (int64_t)(64 * 4 / lg_scan_elem_size(k[i].d));
        lg_verdict_t *v = g_new0(lg_verdict_t, 1);
        char why[512] = "";
        kernel_launches = 0;
        last_launched = NULL;
        uint64_t fallbacks = lg_validate_gpu_host_fallbacks();
        int rc = -1;
        for (int r = 0; r < 16 && rc != 0; r++) /* the backoff of an earlier test may hold a few back */
            rc = lg_validate_sync(&ti, (void *)0xc100, 16, v, why, sizeof why);
        g_test_message("dtype %d: %s", (int)k[i].d, why);
        g_assert_cmpint(rc, ==, 0);
        g_assert_cmpint(kernel_launches, >=, 1);
        g_assert_true(last_launched == kernel_handle(k[i].kernel));
        g_assert_cmpuint(lg_validate_gpu_host_fallbacks() - fallbacks, ==, 0);
        if (k[i].d == LG_DTYPE_FLOAT32) {
            g_assert_cmpint(v->bad_count, ==, 2);
            g_assert_cmpint(v->n_samples, ==, 2);
            g_assert_cmpint(v->samples[0].index, ==, 5);
            g_assert_cmpint(v->samples[1].index, ==, 40);
        }
        g_free(v);
    }
    launch_publishes = false;

    /* Inside a capture: a kernel node of the range kernel, not a host node. */
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    n_nodes = 0;
    capturing = (CUstream)0xc200;
    lg_capture_t cap = {.id = 4242, .sanitize = false};
    uint64_t sanitized = 0;
    char why[512] = "";
    int rc = -1;
    for (int r = 0; r < 16 && rc != 0; r++)
        rc = lg_validate_async(&t, (void *)0xc200, 0, 16, &info, &cap, NULL, &sanitized, why, sizeof why);
    g_test_message("capture: %s", why);
    g_assert_cmpint(rc, ==, 0);
    g_assert_cmpint(n_nodes, ==, 1);
    g_assert_true(nodes[0].func == kernel_handle(LG_KERNEL_F32_VEC));
    g_assert_cmphex(sanitized, ==, t.data);
    capturing = NULL;
    lg_graphs_end_capture(4242, GRAPH);
    lg_graphs_destroyed(GRAPH);
}

/* ---- a BCE launch through launch.c (lg_launch_decide), as the hooks drive it ------------------ */

/* F.binary_cross_entropy's float32 forward (tests/wheels/2.15.0+cu132): (int N, lambda,
 * array<char *, 3> data), data[1] the input, data[2] the target. */
static const char bce_f32[] = "_ZN2at6native29vectorized_elementwise_kernelILi2EZZZNS0_29binary_cross_entropy_out_"
                              "cudaERKNS_6TensorES4_RKSt8optionalIS2_ElRS2_ENKUlvE_clEvENKUlvE0_clEvEUlffE_St5arrayIPcLm3EELb0EEEviT0_T1_";
static char bce_stub;
static void *bce_fatbin[1];
static unsigned long long capture_id; /* cudaStreamGetCaptureInfo's id for `capturing` */
static int rt_capturing(void *s, int *st)
{
    *st = capturing && (CUstream)s == capturing ? 1 : 0;
    return 0;
}
static int rt_capture_info(void *s, int *st, unsigned long long *id, void *g, void *deps, void *n, void *x)
{
    (void)g, (void)deps, (void)n, (void)x;
    *st = capturing && (CUstream)s == capturing ? 1 : 0;
    *id = capture_id;
    return 0;
}
/* The runtime as far as launch.c asks it here: no copy, no host function, so a check the host
 * backend took would fail and be counted unchecked. */
static lg_runtime_t bce_rt = {.stream_is_capturing = rt_capturing, .stream_get_capture_info = rt_capture_info};

/* One BCE launch on `stream` of 64 good probabilities (input) and probs32()'s target, two of
 * them bad. */
static lg_decision_t bce_launch(CUstream stream)
{
    static float input[64];
    for (int i = 0; i < 64; i++)
        input[i] = 0.5f;
    lg_target_t t = probs32();
    static char loss[256];
    int n = 64;
    char lambda = 0;
    char *data[3] = {loss, (char *)input, (char *)(uintptr_t)t.data};
    void *args[] = {&n, &lambda, data};
    lg_launch_t l = {.entry = LG_ENTRY_CUDA_LAUNCH_KERNEL,
                     .func = &bce_stub,
                     .stream = stream,
                     .args = args,
                     .grid = {1, 1, 1},
                     .block = {128, 1, 1},
                     .can_block = true};
    lg_decision_t d;
    memset(&d, 0, sizeof d);
    lg_launch_decide(&bce_rt, &l, &d);
    return d;
}

/* What kernel node k of the fake graph would publish when replayed: the CPU scan of its params,
 * in its ring, as the validator kernel does. */
static void replay_node(int k)
{
    lg_scan_params_t sp = node_params(&nodes[k]);
    lg_scan_ring_t *ring = (lg_scan_ring_t *)(uintptr_t)sp.ring;
    lg_scan_state_t *st = (lg_scan_state_t *)(uintptr_t)sp.state;
    uint64_t seq = ++st->runs;
    lg_scan_host(&sp.t, (const void *)(uintptr_t)sp.t.data, sp.samples, &ring->entries[seq % LG_RING_SLOTS].verdict);
    ring->entries[seq % LG_RING_SLOTS].seq = seq;
    ring->latest = seq;
}

static void bce_setup(void)
{
    lg_registry_init_with(NULL, NULL);
    lg_validate_init(&bce_rt); /* the runtime launch.c passes; the backend is the fake driver's: */
    fresh_driver();
    lg_validate_gpu_after_fork();
    g_assert_true(lg_validate_gpu_init_loaded());
    lg_names_record_function(bce_fatbin, &bce_stub, bce_f32);
    lg_config_values.action = LG_ACTION_RAISE;
    lg_config_values.samples = 16;
    lg_config_values.logprob_check = false;
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = false;
}

/* A BCE launch captured on the GPU backend: each checked operand (input, target) becomes a
 * range-kernel node, report-only (no copy: the launch keeps its own operands), nothing goes to
 * the host backend (whose host node CUDA would run at every replay), and a replay's bad
 * probabilities are reported after it ran, raised as the next CUDA error. */
static void test_range_captured_launch(void)
{
    bce_setup();
    lg_counters_t c0, c1;
    lg_act_counters(&c0);
    n_nodes = 0;
    capture_id = 5151;
    capturing = (CUstream)0xc300;
    lg_decision_t d = bce_launch((CUstream)0xc300);
    capturing = NULL;
    lg_act_counters(&c1);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN); /* its own arguments: nothing rewritten */
    g_assert_cmpuint(c1.unchecked - c0.unchecked, ==, 0);
    g_assert_cmpuint(c1.validated - c0.validated, ==, 2);
    g_assert_cmpuint(c1.host_fallbacks - c0.host_fallbacks, ==, 0);
    g_assert_cmpint(n_nodes, ==, 2);
    for (int k = 0; k < 2; k++) {
        g_assert_true(nodes[k].func == kernel_handle(LG_KERNEL_F32_VEC));
        g_assert_cmphex(node_params(&nodes[k]).copy, ==, 0);
    }
    lg_graphs_end_capture(5151, GRAPH);
    lg_graphs_instantiated((void *)1, GRAPH);
    lg_graphs_launched((void *)1, (void *)0xc300);
    replay_node(0);
    replay_node(1);
    lg_launch_poll(&bce_rt, LG_COLLECT_MINE, NULL);
    lg_counters_t c2;
    lg_act_counters(&c2);
    g_assert_cmpuint(c2.violations - c1.violations, ==, 1); /* the target's two bad values, once */
    char ev[16384];
    g_assert_cmpint(labelguard_last_violation(ev, sizeof ev), >, 0);
    g_test_message("%s", ev);
    g_assert_nonnull(strstr(ev, "\"graph\":{\"id\":5151,\"replay\":1"));
    g_assert_nonnull(strstr(ev, "verdict late: the captured launch replayed on its probabilities"));
    g_assert_nonnull(strstr(ev, "\"outcome\":\"launched\""));
    g_assert_cmpint(lg_runtime_take_error(0), ==, LG_RAISE_ERROR);
    lg_graphs_exec_destroyed((void *)1);
    lg_graphs_destroyed(GRAPH);
}

/* Async mode: a BCE launch is not held for its check; the range kernel runs on its stream
 * before it, and its verdict comes at the next check, said late, raised as the next error. */
static void test_range_async_launch(void)
{
    bce_setup();
    lg_config_values.mode = LG_MODE_ASYNC;
    launch_publishes = true;
    kernel_launches = 0;
    lg_counters_t c0, c1;
    lg_act_counters(&c0);
    lg_decision_t d = bce_launch((CUstream)0xc400);
    lg_act_counters(&c1);
    g_assert_cmpint(d.kind, ==, LG_VERDICT_RUN);
    g_assert_cmpint(kernel_launches, ==, 2);
    g_assert_cmpuint(c1.violations - c0.violations, ==, 0); /* not yet read */
    g_assert_cmpuint(c1.validated - c0.validated, ==, 2);
    lg_launch_poll(&bce_rt, LG_COLLECT_MINE, NULL);
    lg_counters_t c2;
    lg_act_counters(&c2);
    g_assert_cmpuint(c2.violations - c1.violations, ==, 1);
    char ev[16384];
    g_assert_cmpint(labelguard_last_violation(ev, sizeof ev), >, 0);
    g_test_message("%s", ev);
    g_assert_nonnull(strstr(ev, "verdict late: the launch (async mode) ran on its probabilities"));
    g_assert_nonnull(strstr(ev, "\"outcome\":\"launched\""));
    g_assert_cmpint(lg_runtime_take_error(0), ==, LG_RAISE_ERROR);
    launch_publishes = false;
    lg_config_values.mode = LG_MODE_SYNC;
}

/* Scratch handed back is not taken while a replay queued on it has not run (an exec destroyed
 * while its replay is in flight: CUDA lets it finish), nor ever when its graph went without an
 * exec (the checks may live on as a child graph node or a clone's source). */
static void test_captured_scratch_waits(void)
{
    fresh_driver();
    lg_spec_t spec;
    lg_kernel_info_t info;
    loss_kernel(&spec, &info);
    lg_async_report_t r;
    lg_target_t t = {0};
    char why[512] = "";
    lg_gpu_run_t a, b, c, d;
    /* a: replayed once, exec and graph destroyed before the replay ran */
    capture((CUstream)0xb500, true, &a);
    g_assert_cmpint(lg_graphs_add_check(3001, &info, (void *)0xb500, &t, a.ring, a.copy, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(3001, GRAPH);
    lg_graphs_instantiated((void *)1, GRAPH);
    lg_graphs_destroyed(GRAPH);
    lg_graphs_launched((void *)1, (void *)0xb500);
    lg_graphs_exec_destroyed((void *)1);
    capture((CUstream)0xb500, true, &b);
    g_assert_true(b.ring != a.ring); /* a's replay has not run */
    /* a's replay runs: its scratch is free now, and its verdict is still read */
    lg_scan_ring_t *ra = (lg_scan_ring_t *)a.ring;
    uint64_t seq = ra->latest + 1;
    ra->entries[seq % LG_RING_SLOTS].verdict.checked = 64;
    ra->entries[seq % LG_RING_SLOTS].seq = seq;
    ra->latest = seq;
    g_assert_true(lg_verdicts_collect(&r, LG_COLLECT_MINE, NULL));
    g_assert_cmpuint(r.graph_id, ==, 3001);
    /* (earlier tests' scratch handed back may be taken first) */
    bool taken = false;
    for (int i = 0; i < 32 && !taken; i++) {
        capture((CUstream)0xb500, true, &c);
        taken = c.ring == a.ring;
    }
    g_assert_true(taken);
    /* b's graph goes without an exec: its scratch is kept */
    g_assert_cmpint(lg_graphs_add_check(3002, &info, (void *)0xb500, &t, b.ring, b.copy, NULL, why, sizeof why), ==, 0);
    lg_graphs_end_capture(3002, GRAPH);
    lg_graphs_destroyed(GRAPH);
    for (int i = 0; i < 32; i++) {
        capture((CUstream)0xb500, true, &d);
        g_assert_true(d.ring != b.ring);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    lg_config_values.quiet = true;
    snprintf(lg_config_values.log_dir, sizeof lg_config_values.log_dir, "%s", "/nonexistent/labelguard-unit");
    g_test_add_func("/gpu_driver/ptx_fallback", test_ptx_fallback);
    g_test_add_func("/gpu_driver/backend_undecided_until_context", test_backend_undecided_until_context);
    g_test_add_func("/gpu_driver/no_ptx_for_other_errors", test_no_ptx_for_other_errors);
    g_test_add_func("/gpu_driver/scratch_refused", test_scratch_refused);
    g_test_add_func("/gpu_driver/copy_in_pinned_memory", test_copy_in_pinned_memory);
    g_test_add_func("/gpu_driver/labels_on_other_device", test_labels_on_other_device);
    g_test_add_func("/gpu_driver/copy_per_thread", test_copy_per_thread);
    g_test_add_func("/gpu_driver/stream_scratch_bounded", test_stream_scratch_bounded);
    g_test_add_func("/gpu_driver/second_exec_own_scratch", test_second_exec_own_scratch);
    g_test_add_func("/gpu_driver/second_exec_rebind_paths", test_second_exec_rebind_paths);
    g_test_add_func("/gpu_driver/captured_scratch_reused", test_captured_scratch_reused);
    g_test_add_func("/gpu_driver/captured_scratch_waits", test_captured_scratch_waits);
    g_test_add_func("/gpu_driver/captured_into_graph", test_captured_into_graph);
    g_test_add_func("/gpu_driver/range_on_gpu", test_range_on_gpu);
    g_test_add_func("/gpu_driver/probs_to_host", test_probs_to_host);
    g_test_add_func("/gpu_driver/range_captured_launch", test_range_captured_launch);
    g_test_add_func("/gpu_driver/range_async_launch", test_range_async_launch);
    return g_test_run();
}
