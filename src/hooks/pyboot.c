/* pyboot.c: the torch.compile check's bootstrap in a Python interpreter that the library was
 * preloaded into by hand (`LD_PRELOAD=.../liblabelguard.so python train.py`), and what the
 * start event may claim about compiled losses.
 *
 * The check lives in Python: python/labelguard/_compiled.py makes Inductor's NLL decompositions
 * call labelguard::check_target (api_check.c). `labelguard run` installs it by putting
 * labelguard/_bootstrap/ first on the job's PYTHONPATH (its sitecustomize.py arms a finder that
 * waits for Inductor); labelguard.enable() installs it in its own interpreter. A bare preload has
 * neither, so the constructor does what `labelguard run` does, in the one process where it can
 * be done without touching the interpreter: a Python interpreter that has not started yet
 * (Py_BytesMain resolves in the process and Py_IsInitialized() is 0, so main() has not run).
 * Python reads PYTHONPATH when main() starts it, after every constructor; the entry goes in
 * once, and not where a parent or the user already put one.
 *
 * The program must see the environment it was given: the constructor keeps what PYTHONPATH was
 * in LABELGUARD_PYTHONPATH_WAS ("unset" or "set:<value>"), and the sitecustomize, which runs
 * before any user code, puts PYTHONPATH back from it, drops that variable and takes its
 * directory off sys.path. So os.environ, sys.path and every child's environment are exactly
 * what they would have been; a child that is a Python interpreter gets the bootstrap from the
 * preload again. Where the sitecustomize would not run, nothing is set at all: an interpreter
 * started with -E, -I or -S (read from its command line, lg_pyboot_argv_flags: the constructor
 * runs before Python parses it).
 *
 * Why not later, from a hook: by then the interpreter runs, and installing the finder means
 * running Python code inside someone's CUDA call, with the GIL and the import lock in unknown
 * hands. Before main() the process has one thread, nothing reads the environment concurrently,
 * and the work is a dladdr, a realpath, an access() and a setenv: no file opened, no CUDA.
 *
 * Where the directory is: next to the library, as the wheel lays it out
 * (labelguard/_native/liblabelguard.so -> labelguard/_bootstrap) or as a checkout does
 * (build/liblabelguard.so -> python/labelguard/_bootstrap); lg_pyboot_pythonpath is that rule.
 *
 * lg_pyboot_expected() tells the start event whether the bootstrap will run: the entry is on
 * PYTHONPATH and the interpreter honours it (not -E / -I, which ignore the environment, nor -S,
 * which skips sitecustomize; read from CPython's flag variables where they exist).
 *
 * Called by the constructor in lg.c (loader thread, before main) and by api_check.c at the start.
 * Tested by tests/unit/test_pyboot.c (the path rule, the command-line rule),
 * tests/e2e/test_untouched.sh (environment, sys.path and fds of Python runs and their children,
 * with and without the preload) and tests/torch-fake/test_compiled_bare.sh (real torch under a
 * bare LD_PRELOAD: the compiled loss is checked).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"

#define BOOT_TAIL "/labelguard/_bootstrap"
#define SAVED_VAR "LABELGUARD_PYTHONPATH_WAS" /* read back by _bootstrap/sitecustomize.py */

static int state = LG_PYBOOT_NOT_PYTHON;

static bool is_boot_entry(const char *entry, size_t len)
{
    size_t tail = strlen(BOOT_TAIL);
    return len >= tail && memcmp(entry + len - tail, BOOT_TAIL, tail) == 0;
}

static bool has_sitecustomize(const char *dir, void *ctx)
{
    (void)ctx;
    char path[PATH_MAX + 32];
    if (snprintf(path, sizeof path, "%s/sitecustomize.py", dir) >= (int)sizeof path)
        return false;
    return access(path, R_OK) == 0;
}

int lg_pyboot_pythonpath(const char *lib_path, const char *old, bool (*exists)(const char *dir, void *ctx), void *ctx,
                         char *out, size_t cap)
{
    if (old) {
        for (const char *p = old;;) {
            const char *end = strchr(p, ':');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (is_boot_entry(p, len))
                return 0; /* `labelguard run` or a parent put one there: it runs */
            if (!end)
                break;
            p = end + 1;
        }
    }
    const char *slash = lib_path ? strrchr(lib_path, '/') : NULL;
    if (!slash || slash == lib_path)
        return -1;
    char dir[PATH_MAX];
    size_t n = (size_t)(slash - lib_path);
    if (n >= sizeof dir)
        return -1;
    memcpy(dir, lib_path, n);
    dir[n] = '\0';
    char *up = strrchr(dir, '/'); /* the library's directory's parent: labelguard/ or the checkout */
    if (!up)
        return -1;
    *up = '\0';
    /* the wheel (labelguard/_native/), a checkout (build/), `make install` (PREFIX/lib/) */
    static const char *const layouts[] = {"/_bootstrap", "/python" BOOT_TAIL, "/share/labelguard/python" BOOT_TAIL};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s%s", dir, layouts[i]) >= (int)sizeof cand)
            continue;
        if (strchr(cand, ':') || !exists(cand, ctx))
            continue; /* a ':' cannot be a PYTHONPATH entry */
        int w = old && old[0] ? snprintf(out, cap, "%s:%s", cand, old) : snprintf(out, cap, "%s", cand);
        return w > 0 && (size_t)w < cap ? 1 : -1;
    }
    return -1;
}

int lg_pyboot_argv_flags(int argc, char *const *argv)
{
    int flags = 0;
    for (int i = 1; i < argc && argv[i]; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0' || strcmp(a, "--") == 0)
            break; /* the script, stdin ("-") or the end of the options */
        if (a[1] == '-') {
            if (strcmp(a, "--check-hash-based-pycs") == 0)
                i++; /* its value is the next word */
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            if (*c == 'E')
                flags |= LG_PYBOOT_IGNORE_ENV;
            else if (*c == 'I')
                flags |= LG_PYBOOT_IGNORE_ENV | LG_PYBOOT_NO_SITE_CUSTOM;
            else if (*c == 'S')
                flags |= LG_PYBOOT_NO_SITE_CUSTOM;
            else if (*c == 'c' || *c == 'm')
                return flags; /* what follows is the command's or the module's */
            else if (*c == 'W' || *c == 'X') {
                if (c[1] == '\0')
                    i++; /* the value is the next word; else it is the rest of this one */
                break;
            }
        }
    }
    return flags;
}

/* True when argv[0] names a CPython executable (python, python3, python3.14t, a shebang's
 * interpreter): only then are the options Python's. An embedding program's are its own. */
static bool argv0_is_python(int argc, char *const *argv)
{
    if (argc < 1 || !argv || !argv[0])
        return false;
    const char *base = strrchr(argv[0], '/');
    return strncmp(base ? base + 1 : argv[0], "python", 6) == 0;
}

void lg_pyboot_constructor(int argc, char *const *argv)
{
    int (*bytes_main)(int, char **) = (int (*)(int, char **))dlsym(RTLD_DEFAULT, "Py_BytesMain");
    int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!bytes_main || !initialized)
        return; /* not a Python interpreter (a shell, a C++ trainer, the compiler) */
    if (initialized()) {
        state = LG_PYBOOT_LATE; /* loaded into a running interpreter: enable() installs the check */
        return;
    }
    if (argv0_is_python(argc, argv) && lg_pyboot_argv_flags(argc, argv) != 0) {
        state = LG_PYBOOT_NO_SITE; /* nothing would take the entry back out of the environment */
        return;
    }
    Dl_info info;
    char lib[PATH_MAX];
    if (!dladdr((void *)lg_pyboot_argv_flags, &info) || !info.dli_fname || !realpath(info.dli_fname, lib)) {
        state = LG_PYBOOT_NO_DIR;
        return;
    }
    const char *old = getenv("PYTHONPATH");
    size_t cap = (old ? strlen(old) : 0) + PATH_MAX + 8;
    char *value = malloc(cap), *was = malloc(cap);
    int rc = value && was ? lg_pyboot_pythonpath(lib, old, has_sitecustomize, NULL, value, cap) : -1;
    if (rc == 1) {
        /* the old value first: a sitecustomize that finds the new one always finds this too */
        if (old)
            snprintf(was, cap, "set:%s", old);
        else
            snprintf(was, cap, "unset");
        if (setenv(SAVED_VAR, was, 1) != 0)
            rc = -1;
        else if (setenv("PYTHONPATH", value, 1) != 0) {
            unsetenv(SAVED_VAR);
            rc = -1;
        }
    }
    state = rc >= 0 ? LG_PYBOOT_ON_PATH : LG_PYBOOT_NO_DIR;
    free(value);
    free(was);
}

/* CPython's flag variable, or 0 where this version has none (then the environment counts). */
static int py_flag(const char *name)
{
    int *flag = (int *)dlsym(RTLD_DEFAULT, name);
    return flag ? *flag : 0;
}

int lg_pyboot_state(void) { return state; }

bool lg_pyboot_expected(void)
{
    return state == LG_PYBOOT_ON_PATH && !py_flag("Py_IgnoreEnvironmentFlag") && !py_flag("Py_IsolatedFlag") &&
           !py_flag("Py_NoSiteFlag");
}
