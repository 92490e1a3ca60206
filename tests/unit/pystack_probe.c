/* pystack_probe.c: a shared object that python3 loads through ctypes, to test src/base/pystack.c in
 * a real interpreter (tests/e2e/test_pystack.sh). ctypes releases the GIL around the call, as
 * PyTorch does around a kernel launch. Not a GTest binary (no test_ prefix); built by the
 * Makefile rule for $(BUILD)/tests/pystack_probe.so against liblg.a.
 *
 * Output format, one line each: "thread=<launching|main|none> n=<N>", then innermost-last
 * frames as "file|line|function".
 *
 * lg_probe_time_capture measures what a reported launch pays for its Python stack (the figure
 * in docs/testing.md's overhead rows): python3 -c 'import ctypes; l = ctypes.CDLL("build/tests/
 * pystack_probe.so"); l.lg_probe_time_capture.restype = ctypes.c_double;
 * print(l.lg_probe_time_capture(20000))'. lg_probe_record / lg_probe_resolve: the launch-site
 * record of an async launch, resolved later; lg_probe_time_record its cost.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hooks/hooks.h"

static int format(const lg_py_stack_t *s, char *out, int len)
{
    int n = snprintf(out, (size_t)len, "thread=%s n=%d\n", s->n == 0 ? "none" : s->from_main_thread ? "main" : "launching", s->n);
    for (int i = 0; i < s->n && n < len; i++)
        n += snprintf(out + n, (size_t)(len - n), "%s|%d|%s\n", s->frames[i].file, s->frames[i].line, s->frames[i].function);
    return n;
}

/* Captures the calling thread's Python stack. Threads call it at once (test_pystack.sh's
 * pool): the stack is the caller's own. */
LG_EXPORT int lg_probe_capture(char *out, int len)
{
    lg_py_stack_t s;
    lg_pystack_capture(&s);
    return format(&s, out, len);
}

/* Nanoseconds per lg_pystack_capture of the calling thread's stack, over iters calls after a
 * first one (which resolves the interpreter's symbols and layout once per process). */
LG_EXPORT double lg_probe_time_capture(int iters)
{
    static lg_py_stack_t s;
    lg_pystack_capture(&s);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < iters; i++)
        lg_pystack_capture(&s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return iters > 0 ? ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / iters : 0;
}

/* lg_pystack_record at a "launch", lg_pystack_resolve later (after the recording function
 * returned): the lines must be those of the launch. */
static lg_py_site_t site;
LG_EXPORT void lg_probe_record(void) { lg_pystack_record(&site); }
LG_EXPORT int lg_probe_resolve(char *out, int len)
{
    static lg_py_stack_t s;
    lg_pystack_resolve(&site, &s);
    for (int i = 0; i < s.n; i++)
        if (s.frames[i].gone)
            snprintf(s.frames[i].function, sizeof s.frames[i].function, "<gone>");
    return format(&s, out, len);
}

/* Nanoseconds per lg_pystack_record of the calling thread: what an async launch pays for its
 * Python site (make bench prints it). */
LG_EXPORT double lg_probe_time_record(int iters)
{
    lg_pystack_record(&site);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < iters; i++)
        lg_pystack_record(&site);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return iters > 0 ? ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / iters : 0;
}

/* Nanoseconds per launch site (lg_site_new + lg_site_drop: the allocation, the Python record
 * and the free), what each watched async launch adds for item "the launch's line". */
LG_EXPORT double lg_probe_time_site(int iters)
{
    lg_config_values.backtrace_native = lg_config_values.backtrace_python = true;
    lg_site_drop(lg_site_new((const void *)&lg_probe_time_site));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < iters; i++)
        lg_site_drop(lg_site_new((const void *)&lg_probe_time_site));
    clock_gettime(CLOCK_MONOTONIC, &b);
    return iters > 0 ? ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / iters : 0;
}

struct job { char *out; int len; int rc; };
static void *native_thread(void *arg)
{
    struct job *j = arg;
    static lg_py_stack_t s;
    lg_pystack_capture(&s);
    j->rc = format(&s, j->out, j->len);
    return NULL;
}

/* Captures from a thread that never ran Python (like autograd's engine threads) while the
 * calling Python thread waits in this call: the main thread's stack must come back. */
LG_EXPORT int lg_probe_capture_native_thread(char *out, int len)
{
    struct job j = { out, len, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, native_thread, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return j.rc;
}
