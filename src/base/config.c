/* config.c: parses and validates the LABELGUARD_* environment variables (DESIGN.md §3).
 *
 * Called once by the constructor in lg.c, before anything else, on the loading thread; the
 * result lives in the global lg_config_values and is read-only afterwards. labelguard_config_check()
 * (the Python API's check of one value before the library loads, any thread) judges one
 * variable through the same parser, so its verdict and message are the constructor's.
 * Tested by tests/unit/test_config.c through lg_config_parse with a table in place of getenv,
 * and lg_config_check against it.
 *
 * A set-but-empty variable is a bad value, not the default: a job must never run with a
 * configuration other than the one its owner wrote. Values are echoed back escaped, so an
 * overlong or non-UTF-8 value gives a readable message rather than terminal garbage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "base/base.h"

lg_config_t lg_config_values = {
    .action = LG_ACTION_RAISE,
    .mode = LG_MODE_SYNC,
    .hooks = LG_HOOKS_AUTO,
    .log_dir = "labelguard-logs",
    .kernels = "",
    .backtrace_native = true,
    .backtrace_python = true,
    .samples = 16,
    .quiet = false,
    .debug_kernels = false,
    .logprob_check = true,
    .compiled = true,
};

static const char *const action_names[] = {"raise", "hold", "mask", "log", "abort"};
static const char *const mode_names[] = {"sync", "async"};
static const char *const hooks_names[] = {"auto", "interpose", "cupti"};

const char *lg_config_action_name(lg_action_t a) { return (unsigned)a < 5 ? action_names[a] : "?"; }
const char *lg_config_mode_name(lg_mode_t m) { return (unsigned)m < 2 ? mode_names[m] : "?"; }
const char *lg_config_hooks_name(lg_hooks_t h) { return (unsigned)h < 3 ? hooks_names[h] : "?"; }

/* Printable rendering of an untrusted value: at most 60 input bytes, non-printables as \xNN. */
static void escape_value(const char *v, char *out, size_t out_len)
{
    size_t o = 0;
    size_t i = 0;
    for (; v[i] && i < 60 && o + 5 < out_len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, out_len - o, "\\x%02x", c);
    }
    if (v[i] && o + 4 < out_len)
        o += (size_t)snprintf(out + o, out_len - o, "...");
    out[o < out_len ? o : out_len - 1] = '\0';
}

static int bad_value(char *err, size_t err_len, const char *var, const char *value, const char *allowed)
{
    char shown[300];
    escape_value(value, shown, sizeof shown);
    snprintf(err, err_len,
             "labelguard: %s=\"%s\" is not valid; allowed: %s. ---> HINT: fix or unset %s "
             "(labelguard refuses to run a job with a configuration it cannot honour)",
             var, shown, allowed, var);
    return -1;
}

static int pick(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

static int parse_enum(const char *(*getenv_fn)(const char *), const char *var, const char *const *names, int n,
                      const char *allowed, int *out, char *err, size_t err_len)
{
    const char *v = getenv_fn(var);
    if (!v)
        return 0;
    int i = pick(v, names, n);
    if (i < 0)
        return bad_value(err, err_len, var, v, allowed);
    *out = i;
    return 0;
}

static int parse_path(const char *(*getenv_fn)(const char *), const char *var, char *dst, size_t dst_len,
                      const char *allowed, char *err, size_t err_len)
{
    const char *v = getenv_fn(var);
    if (!v)
        return 0;
    if (!*v || strlen(v) >= dst_len)
        return bad_value(err, err_len, var, v, allowed);
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20)
            return bad_value(err, err_len, var, v, allowed);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

int lg_config_parse(lg_config_t *cfg, const char *(*getenv_fn)(const char *), char *err, size_t err_len)
{
    lg_config_t c = lg_cfg_defaults();
    int e;

    e = (int)c.action;
    if (parse_enum(getenv_fn, "LABELGUARD_ACTION", action_names, 5, "raise, hold, mask, log, abort", &e, err, err_len))
        return -1;
    c.action = (lg_action_t)e;
    e = (int)c.mode;
    if (parse_enum(getenv_fn, "LABELGUARD_MODE", mode_names, 2, "sync, async", &e, err, err_len))
        return -1;
    c.mode = (lg_mode_t)e;
    e = (int)c.hooks;
    if (parse_enum(getenv_fn, "LABELGUARD_HOOKS", hooks_names, 3, "auto, interpose, cupti", &e, err, err_len))
        return -1;
    c.hooks = (lg_hooks_t)e;

    if (parse_path(getenv_fn, "LABELGUARD_LOG", c.log_dir, sizeof c.log_dir,
                   "a directory path (non-empty, shorter than 4096 bytes)", err, err_len))
        return -1;
    if (parse_path(getenv_fn, "LABELGUARD_KERNELS", c.kernels, sizeof c.kernels,
                   "':'-separated spec files (non-empty, shorter than 4096 bytes)", err, err_len))
        return -1;

    const char *bt = getenv_fn("LABELGUARD_BACKTRACE");
    if (bt) {
        static const char *const bt_names[] = {"native,python", "python,native", "native", "python", "none"};
        int i = pick(bt, bt_names, 5);
        if (i < 0)
            return bad_value(err, err_len, "LABELGUARD_BACKTRACE", bt, "native,python, native, python, none");
        c.backtrace_native = i <= 2;
        c.backtrace_python = i <= 1 || i == 3;
    }

    const char *s = getenv_fn("LABELGUARD_SAMPLES");
    if (s) {
        char *end = NULL;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (!*s || *end || errno || n < 1 || n > LG_MAX_SAMPLES || s[0] == ' ' || s[0] == '+')
            return bad_value(err, err_len, "LABELGUARD_SAMPLES", s, "an integer from 1 to 256");
        c.samples = (int)n;
    }

    static const char *const bool_names[] = {"0", "1"};
    e = c.quiet;
    if (parse_enum(getenv_fn, "LABELGUARD_QUIET", bool_names, 2, "0, 1", &e, err, err_len))
        return -1;
    c.quiet = e;
    e = c.debug_kernels;
    if (parse_enum(getenv_fn, "LABELGUARD_DEBUG_KERNELS", bool_names, 2, "0, 1", &e, err, err_len))
        return -1;
    c.debug_kernels = e;
    e = c.logprob_check;
    if (parse_enum(getenv_fn, "LABELGUARD_LOGPROB_CHECK", bool_names, 2, "0, 1", &e, err, err_len))
        return -1;
    c.logprob_check = e;
    static const char *const onoff_names[] = {"off", "on"};
    e = c.compiled;
    if (parse_enum(getenv_fn, "LABELGUARD_COMPILED", onoff_names, 2, "on, off", &e, err, err_len))
        return -1;
    c.compiled = e;
    static const char *const sites_names[] = {"checked", "all"};
    e = c.launch_sites_all;
    if (parse_enum(getenv_fn, "LABELGUARD_LAUNCH_SITES", sites_names, 2, "checked, all", &e, err, err_len))
        return -1;
    c.launch_sites_all = e;

    *cfg = c;
    return 0;
}

lg_config_t lg_cfg_defaults(void)
{
    lg_config_t c;
    memset(&c, 0, sizeof c);
    c.action = LG_ACTION_RAISE;
    c.mode = LG_MODE_SYNC;
    c.hooks = LG_HOOKS_AUTO;
    snprintf(c.log_dir, sizeof c.log_dir, "labelguard-logs");
    c.backtrace_native = true;
    c.backtrace_python = true;
    c.samples = 16;
    c.logprob_check = true;
    c.compiled = true;
    return c;
}

/* The one variable lg_config_check judges, as a getenv of its own: per thread, so that checks
 * on several threads do not see each other's value. */
static __thread const char *check_name, *check_value;
static const char *check_getenv(const char *name) { return strcmp(name, check_name) == 0 ? check_value : NULL; }

static const char *const known_names[] = {
    "LABELGUARD_ACTION",        "LABELGUARD_MODE",          "LABELGUARD_HOOKS",   "LABELGUARD_LOG",
    "LABELGUARD_KERNELS",       "LABELGUARD_BACKTRACE",     "LABELGUARD_SAMPLES", "LABELGUARD_QUIET",
    "LABELGUARD_DEBUG_KERNELS", "LABELGUARD_LOGPROB_CHECK", "LABELGUARD_COMPILED", "LABELGUARD_LAUNCH_SITES",
};

int lg_config_check(const char *name, const char *value, char *msg, size_t msg_len)
{
    if (msg && msg_len)
        msg[0] = '\0';
    if (!name || pick(name, known_names, (int)(sizeof known_names / sizeof *known_names)) < 0)
        return -2;
    /* Whatever else is set in the environment plays no part: only this variable is seen. */
    check_name = name;
    check_value = value;
    char err[1024];
    lg_config_t c;
    int rc = lg_config_parse(&c, check_getenv, err, sizeof err);
    check_name = check_value = NULL;
    if (rc == 0)
        return 0;
    if (msg && msg_len)
        snprintf(msg, msg_len, "%s", err);
    return -1;
}
