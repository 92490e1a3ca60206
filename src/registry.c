/* registry.c: the table of kernels labelguard watches, and how to find the entry for a launch.
 *
 * Specs are data: one GKeyFile group per kernel layout, in the format of specs/pytorch.conf
 * (documented there). The built-in table is that file, embedded into the library by the
 * Makefile (symbols lg_builtin_specs .. lg_builtin_specs_end); LABELGUARD_KERNELS adds user
 * files in the same format. A malformed user file is skipped as a whole with a message that
 * names file, line, group and field; the built-in table always stays.
 *
 * One kernel name may have several specs (PyTorch ≥1.13, 1.10–1.12 and THCUNN layouts):
 * lg_registry_find picks the spec whose parameter count and sizes fit the kernel, as reported
 * by the runtime or read from the mangled signature, and never returns a spec it could not
 * check.
 *
 * Callers: lg.c builds the table once (lg_registry_init, under its pthread_once); launch.c
 * calls lg_registry_maybe_watched, then lg_registry_find, once per kernel handle and caches the answer, so nothing here is on
 * the fast path. After init the table is read-only, so lookups need no lock.
 *
 * Tested by tests/unit/test_registry.c (parser errors, every built-in spec, version
 * selection) and tests/fuzz/fuzz_spec.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "internal.h"

#define REGISTRY_MAX 256
#define SPEC_FILE_MAX (1 << 20) /* bytes; a spec file is a few KiB */

extern const char lg_builtin_specs[] LG_HIDDEN;
extern const char lg_builtin_specs_end[] LG_HIDDEN;

static lg_spec_t table[REGISTRY_MAX];
static int table_n;

/* ---- where each group and key sits in the text, for messages ---------------------------- */

typedef struct key_pos {
    char group[128];
    char key[64];
    int line;
} key_pos_t;

typedef struct text_map {
    key_pos_t *keys;  /* one entry per key, plus one per group with key "" */
    int n, cap;
} text_map_t;

static void map_add(text_map_t *m, const char *group, const char *key, size_t key_len, int line)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->keys = g_renew(key_pos_t, m->keys, m->cap);
    }
    key_pos_t *k = &m->keys[m->n++];
    g_strlcpy(k->group, group, sizeof k->group);
    if (key_len >= sizeof k->key)
        key_len = sizeof k->key - 1;
    memcpy(k->key, key, key_len);
    k->key[key_len] = 0;
    k->line = line;
}

static int map_line(const text_map_t *m, const char *group, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i].group, group) == 0 && strcmp(m->keys[i].key, key) == 0)
            return m->keys[i].line;
    for (int i = 0; i < m->n; i++) /* a missing key: point at its group header */
        if (strcmp(m->keys[i].group, group) == 0 && m->keys[i].key[0] == 0)
            return m->keys[i].line;
    return 0;
}

static void seterr(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t err_len, const char *fmt, ...)
{
    if (!err || !err_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Checks what GKeyFile does not report with a line number (or accepts silently): NUL bytes,
 * invalid UTF-8, lines that are neither group, key=value nor comment, unterminated group
 * headers, keys before the first group, duplicate groups and duplicate keys. Fills the map
 * of group/key lines. Returns 0 or -1 with err set. */
static int prescan(const char *text, size_t len, const char *origin, text_map_t *m, char *err, size_t err_len)
{
    const char *nul = memchr(text, 0, len);
    int line = 1;
    if (nul) {
        for (const char *q = text; q < nul; q++)
            line += *q == '\n';
        seterr(err, err_len, "%s:%d: file: binary data (NUL byte); a spec file is text", origin, line);
        return -1;
    }
    char group[128] = "";
    bool in_group = false;
    size_t i = 0;
    line = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        line++;
        const char *l = text + i;
        size_t n = j - i;
        i = j + 1;
        if (n && l[n - 1] == '\r')
            n--;
        if (!g_utf8_validate(l, (gssize)n, NULL)) {
            seterr(err, err_len, "%s:%d: file: invalid UTF-8", origin, line);
            return -1;
        }
        size_t s = 0;
        while (s < n && (l[s] == ' ' || l[s] == '\t'))
            s++;
        if (s == n || l[s] == '#')
            continue;
        if (l[s] == '[') {
            size_t e = n;
            while (e > s && (l[e - 1] == ' ' || l[e - 1] == '\t'))
                e--;
            if (e - s < 2 || l[e - 1] != ']') {
                seterr(err, err_len, "%s:%d: group: unterminated group header \"%.*s\"", origin, line,
                       (int)(n - s > 60 ? 60 : n - s), l + s);
                return -1;
            }
            size_t gl = e - s - 2;
            if (gl == 0 || gl >= sizeof group || memchr(l + s + 1, '[', gl) || memchr(l + s + 1, ']', gl)) {
                seterr(err, err_len, "%s:%d: group: bad group name (1..%zu characters, no brackets)", origin,
                       line, sizeof group - 1);
                return -1;
            }
            memcpy(group, l + s + 1, gl);
            group[gl] = 0;
            int prev = map_line(m, group, "");
            if (prev) {
                seterr(err, err_len, "%s:%d: [%s]: duplicate kernel spec (first defined at line %d)", origin, line,
                       group, prev);
                return -1;
            }
            map_add(m, group, "", 0, line);
            in_group = true;
            continue;
        }
        const char *eq = memchr(l + s, '=', n - s);
        if (!eq) {
            seterr(err, err_len, "%s:%d: %s%s%s: line is neither \"key=value\", \"[group]\" nor a # comment: \"%.*s\"",
                   origin, line, in_group ? "[" : "", in_group ? group : "file", in_group ? "]" : "",
                   (int)(n - s > 60 ? 60 : n - s), l + s);
            return -1;
        }
        if (!in_group) {
            seterr(err, err_len, "%s:%d: file: key before the first [group]", origin, line);
            return -1;
        }
        size_t kl = (size_t)(eq - (l + s));
        while (kl && (l[s + kl - 1] == ' ' || l[s + kl - 1] == '\t'))
            kl--;
        if (kl == 0) {
            seterr(err, err_len, "%s:%d: [%s]: empty key name", origin, line, group);
            return -1;
        }
        char key[64];
        size_t kc = kl < sizeof key - 1 ? kl : sizeof key - 1;
        memcpy(key, l + s, kc);
        key[kc] = 0;
        int prev = 0;
        for (int k = 0; k < m->n; k++)
            if (strcmp(m->keys[k].group, group) == 0 && m->keys[k].key[0] && strcmp(m->keys[k].key, key) == 0)
                prev = m->keys[k].line;
        if (prev) {
            seterr(err, err_len, "%s:%d: [%s] %s: key given twice (first at line %d)", origin, line, group, key, prev);
            return -1;
        }
        map_add(m, group, l + s, kl, line);
    }
    return 0;
}

/* ---- semantic parsing of one group ---------------------------------------------------- */

typedef struct ctx {
    GKeyFile *kf;
    const char *origin;
    const char *group;
    const text_map_t *map;
    char *err;
    size_t err_len;
} ctx_t;

static int bad(const ctx_t *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(const ctx_t *c, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    seterr(c->err, c->err_len, "%s:%d: [%s] %s: %s", c->origin, map_line(c->map, c->group, key), c->group, key, msg);
    return -1;
}

static const char *const known_keys[] = {
    "versions", "match", "family", "direction", "params", "target", "target_accessor", "dtype", "count",
    "count_field", "map_nelem", "blocks_per_sample", "n_classes", "ignore_index", "truncate_to_int32", NULL,
};

/* Returns a trimmed copy of the value (g_free), or NULL with err set when missing/required. */
static char *get(const ctx_t *c, const char *key, bool required, int *rc)
{
    GError *e = NULL;
    char *v = g_key_file_get_string(c->kf, c->group, key, &e);
    if (!v) {
        bool missing = e && e->domain == G_KEY_FILE_ERROR && e->code == G_KEY_FILE_ERROR_KEY_NOT_FOUND;
        if (missing && !required) {
            g_clear_error(&e);
            return NULL;
        }
        if (missing)
            bad(c, key, "required key is missing");
        else
            bad(c, key, "%s", e ? e->message : "unreadable value");
        g_clear_error(&e);
        *rc = -1;
        return NULL;
    }
    g_strstrip(v);
    if (!*v) {
        bad(c, key, "empty value");
        g_free(v);
        *rc = -1;
        return NULL;
    }
    return v;
}

/* Parses "a,b,c" into at most max integers in [-1, 1<<20]; returns the count or -1. */
static int int_list(const ctx_t *c, const char *key, const char *v, int *out, int max)
{
    int n = 0;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > (1 << 20))
            return bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        if (n == max)
            return bad(c, key, "\"%s\": more than %d values", v, max);
        out[n++] = (int)x;
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0)
            return n;
        if (*p != ',')
            return bad(c, key, "\"%s\": expected comma-separated non-negative integers", v);
        p++;
    }
}

/* A field "param,offset,width[,signed]" that must fit inside the parameter's size. */
static int field(const ctx_t *c, const lg_spec_t *s, const char *key, lg_field_t *f, bool allow_none, int *rc)
{
    char *v = get(c, key, true, rc);
    if (!v)
        return -1;
    f->param = -1;
    f->offset = 0;
    f->width = 0;
    f->is_signed = true;
    if (allow_none && strcmp(v, "none") == 0) {
        g_free(v);
        return 0;
    }
    int x[4];
    int n = int_list(c, key, v, x, 4);
    if (n < 0) {
        g_free(v);
        return *rc = -1;
    }
    if (n < 3) {
        bad(c, key, "\"%s\": expected param,offset,width[,signed]%s", v, allow_none ? " or none" : "");
        g_free(v);
        return *rc = -1;
    }
    g_free(v);
    if (x[0] >= s->n_params)
        return *rc = bad(c, key, "parameter index %d out of range (the kernel has %d parameters, 0-based)", x[0], s->n_params);
    if (x[2] != 1 && x[2] != 4 && x[2] != 8)
        return *rc = bad(c, key, "width %d: must be 1, 4 or 8 bytes", x[2]);
    if (x[1] + x[2] > s->param_sizes[x[0]])
        return *rc = bad(c, key, "offset %d + width %d is beyond parameter %d (%d bytes)", x[1], x[2], x[0],
                         s->param_sizes[x[0]]);
    if (n == 4 && x[3] > 1)
        return *rc = bad(c, key, "signed flag must be 0 or 1");
    f->param = x[0];
    f->offset = x[1];
    f->width = x[2];
    f->is_signed = n < 4 || x[3] == 1;
    return 0;
}

static int parse_group(const ctx_t *c, lg_spec_t *s)
{
    int rc = 0;
    memset(s, 0, sizeof *s);
    g_strlcpy(s->name, c->group, sizeof s->name);

    char **keys = g_key_file_get_keys(c->kf, c->group, NULL, NULL);
    for (char **k = keys; k && *k; k++) {
        bool ok = false;
        for (int i = 0; known_keys[i]; i++)
            ok |= strcmp(*k, known_keys[i]) == 0;
        if (!ok) {
            bad(c, *k, "unknown key (known: versions, match, family, direction, params, target, target_accessor, "
                       "dtype, count, count_field, map_nelem, blocks_per_sample, n_classes, ignore_index, "
                       "truncate_to_int32)");
            g_strfreev(keys);
            return -1;
        }
    }
    g_strfreev(keys);

    char *v;
    if ((v = get(c, "versions", false, &rc))) {
        g_strlcpy(s->versions, v, sizeof s->versions);
        g_free(v);
    }
    if (rc)
        return -1;

    if (!(v = get(c, "match", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->match) {
        g_free(v);
        return bad(c, "match", "longer than %zu characters", sizeof s->match - 1);
    }
    for (char *p = v; *p; p++) {
        if (*p == ' ' || *p == '\t' || (p[0] == ';' && (p[1] == ';' || p[1] == 0)) || v[0] == ';') {
            g_free(v);
            return bad(c, "match", "substrings of the mangled name, separated by ';', without blanks or empty parts");
        }
    }
    g_strlcpy(s->match, v, sizeof s->match);
    g_free(v);

    if (!(v = get(c, "family", true, &rc)))
        return -1;
    if (strlen(v) >= sizeof s->family || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(v)) {
        g_free(v);
        return bad(c, "family", "1..%zu characters of [a-z0-9_]", sizeof s->family - 1);
    }
    g_strlcpy(s->family, v, sizeof s->family);
    g_free(v);

    if (!(v = get(c, "direction", true, &rc)))
        return -1;
    if (strcmp(v, "forward") == 0)
        s->direction = LG_DIR_FORWARD;
    else if (strcmp(v, "backward") == 0)
        s->direction = LG_DIR_BACKWARD;
    else {
        bad(c, "direction", "\"%s\": must be forward or backward", v);
        g_free(v);
        return -1;
    }
    g_free(v);

    if (!(v = get(c, "params", true, &rc)))
        return -1;
    int n = int_list(c, "params", v, s->param_sizes, LG_MAX_PARAMS);
    g_free(v);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s->param_sizes[i] < 1 || s->param_sizes[i] > 4096)
            return bad(c, "params", "parameter %d has size %d: must be 1..4096 bytes", i, s->param_sizes[i]);
    s->n_params = n;

    /* target: param[,offset], an 8-byte device pointer */
    if (!(v = get(c, "target", true, &rc)))
        return -1;
    int t[2] = {0, 0};
    n = int_list(c, "target", v, t, 2);
    g_free(v);
    if (n < 0)
        return -1;
    if (t[0] >= s->n_params)
        return bad(c, "target", "parameter index %d out of range (the kernel has %d parameters, 0-based)", t[0], s->n_params);
    if (t[1] + 8 > s->param_sizes[t[0]])
        return bad(c, "target", "offset %d + 8-byte pointer is beyond parameter %d (%d bytes)", t[1], t[0], s->param_sizes[t[0]]);
    s->target = (lg_field_t){.param = t[0], .offset = t[1], .width = 8, .is_signed = false};

    if ((v = get(c, "target_accessor", false, &rc))) {
        int a[4];
        n = int_list(c, "target_accessor", v, a, 4);
        g_free(v);
        if (n < 0)
            return -1;
        if (n != 4)
            return bad(c, "target_accessor", "expected ndim,sizes_offset,strides_offset,index_width");
        if (a[0] < 1 || a[0] > LG_MAX_TARGET_DIMS)
            return bad(c, "target_accessor", "ndim %d: must be 1..%d", a[0], LG_MAX_TARGET_DIMS);
        if (a[3] != 4 && a[3] != 8)
            return bad(c, "target_accessor", "index width %d: must be 4 or 8 bytes", a[3]);
        int psize = s->param_sizes[s->target.param];
        if (a[1] + a[0] * a[3] > psize || a[2] + a[0] * a[3] > psize)
            return bad(c, "target_accessor", "sizes/strides beyond parameter %d (%d bytes)", s->target.param, psize);
        s->target_ndim = a[0];
        s->target_sizes_offset = a[1];
        s->target_strides_offset = a[2];
        s->target_index_width = a[3];
    }
    if (rc)
        return -1;

    if (!(v = get(c, "dtype", true, &rc)))
        return -1;
    if (strcmp(v, "int64") == 0)
        s->dtype = LG_DTYPE_INT64;
    else if (strcmp(v, "uint8") == 0)
        s->dtype = LG_DTYPE_UINT8;
    else if (strcmp(v, "int32") == 0)
        s->dtype = LG_DTYPE_INT32;
    else if (strcmp(v, "from_template") == 0)
        s->dtype_from_template = true;
    else {
        bad(c, "dtype", "\"%s\": must be int64, uint8, int32 or from_template", v);
        g_free(v);
        return -1;
    }
    g_free(v);

    if (!(v = get(c, "count", true, &rc)))
        return -1;
    const char *kinds[] = {"param", "one", "accessor", "grid_map"};
    int kind = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(v, kinds[i]) == 0)
            kind = i;
    if (kind < 0) {
        bad(c, "count", "\"%s\": must be param, one, accessor or grid_map", v);
        g_free(v);
        return -1;
    }
    g_free(v);
    s->count_kind = (lg_count_kind_t)kind;
    s->count.param = s->map_nelem.param = s->blocks_per_sample.param = -1;
    static const char *const by_kind[4][2] = {{"count_field", NULL}, {NULL, NULL}, {NULL, NULL},
                                              {"map_nelem", "blocks_per_sample"}};
    const char *const optional[] = {"count_field", "map_nelem", "blocks_per_sample"};
    for (int i = 0; i < 3; i++) {
        bool wanted = (by_kind[kind][0] && strcmp(by_kind[kind][0], optional[i]) == 0)
                      || (by_kind[kind][1] && strcmp(by_kind[kind][1], optional[i]) == 0);
        if (!wanted && g_key_file_has_key(c->kf, c->group, optional[i], NULL))
            return bad(c, optional[i], "not used with count=%s", kinds[kind]);
    }
    if (s->count_kind == LG_COUNT_PARAM && field(c, s, "count_field", &s->count, false, &rc))
        return -1;
    if (s->count_kind == LG_COUNT_GRID_MAP
        && (field(c, s, "map_nelem", &s->map_nelem, false, &rc)
            || field(c, s, "blocks_per_sample", &s->blocks_per_sample, false, &rc)))
        return -1;
    if (s->count_kind == LG_COUNT_ACCESSOR && s->target_ndim == 0)
        return bad(c, "count", "count=accessor needs target_accessor");

    if (field(c, s, "n_classes", &s->n_classes, false, &rc))
        return -1;
    if (field(c, s, "ignore_index", &s->ignore_index, true, &rc))
        return -1;

    if (g_key_file_has_key(c->kf, c->group, "truncate_to_int32", NULL)) {
        GError *e = NULL;
        s->truncate_to_int32 = g_key_file_get_boolean(c->kf, c->group, "truncate_to_int32", &e);
        if (e) {
            g_clear_error(&e);
            return bad(c, "truncate_to_int32", "must be true or false");
        }
    }
    snprintf(s->source, sizeof s->source, "%s:%d", c->origin, map_line(c->map, c->group, ""));
    return 0;
}

static bool same_layout(const lg_spec_t *a, const lg_spec_t *b)
{
    if (a->n_params != b->n_params)
        return false;
    for (int i = 0; i < a->n_params; i++)
        if (a->param_sizes[i] != b->param_sizes[i])
            return false;
    return true;
}

/* Two specs conflict when one launch could match both: same match text and same layout. */
static const lg_spec_t *conflict(const lg_spec_t *s, const lg_spec_t *list, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].match, s->match) == 0 && same_layout(&list[i], s))
            return &list[i];
    return NULL;
}

int lg_registry_parse(const char *text, size_t len, const char *origin, lg_spec_t *out, int cap, char *err, size_t err_len)
{
    if (err && err_len)
        err[0] = 0;
    if (!origin)
        origin = "(spec)";
    if (!text || len == 0) {
        seterr(err, err_len, "%s:1: file: empty: no kernel spec", origin);
        return -1;
    }
    text_map_t map = {0};
    int result = -1;
    GKeyFile *kf = NULL;
    if (prescan(text, len, origin, &map, err, err_len))
        goto out;
    kf = g_key_file_new();
    GError *e = NULL;
    if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &e)) {
        seterr(err, err_len, "%s:0: file: %s", origin, e->message);
        g_clear_error(&e);
        goto out;
    }
    gsize ng = 0;
    char **groups = g_key_file_get_groups(kf, &ng);
    if (ng == 0) {
        seterr(err, err_len, "%s:1: file: no kernel spec (no [group])", origin);
        g_strfreev(groups);
        goto out;
    }
    int n = 0;
    for (gsize g = 0; g < ng; g++) {
        ctx_t c = {kf, origin, groups[g], &map, err, err_len};
        if (n >= cap) {
            bad(&c, "", "too many kernel specs (at most %d)", cap);
            n = -1;
            break;
        }
        if (parse_group(&c, &out[n])) {
            n = -1;
            break;
        }
        const lg_spec_t *o = conflict(&out[n], out, n);
        if (o) {
            bad(&c, "match", "conflicts with [%s]: same match and parameter layout, a launch could not tell them apart",
                o->name);
            n = -1;
            break;
        }
        n++;
    }
    g_strfreev(groups);
    result = n;
out:
    if (kf)
        g_key_file_free(kf);
    g_free(map.keys);
    return result;
}

/* Reads a spec file into a g_malloc'd, NUL-terminated buffer. Only a regular file is read,
 * opened O_NONBLOCK and capped at SPEC_FILE_MAX: LABELGUARD_KERNELS runs at the job's first
 * launch, and /dev/zero, a FIFO with no writer or a terminal would otherwise hang the training
 * process or grow it without bound. Returns the length, or -1 with err set. */
static ssize_t read_spec_file(const char *path, char **out, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        seterr(err, err_len, "%s:0: file: cannot read: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        seterr(err, err_len, "%s:0: file: not a regular file (a spec file is a text file of [groups])", path);
        close(fd);
        return -1;
    }
    if (st.st_size > SPEC_FILE_MAX) {
        seterr(err, err_len, "%s:0: file: %lld bytes, larger than %d: not a spec file?", path, (long long)st.st_size,
               SPEC_FILE_MAX);
        close(fd);
        return -1;
    }
    /* One byte more than the cap, so that a file growing while it is read is still refused. */
    char *text = g_malloc((size_t)SPEC_FILE_MAX + 2);
    size_t len = 0;
    while (len <= SPEC_FILE_MAX) {
        ssize_t r = read(fd, text + len, (size_t)SPEC_FILE_MAX + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            seterr(err, err_len, "%s:0: file: cannot read: %s", path, strerror(errno));
            close(fd);
            g_free(text);
            return -1;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (len > SPEC_FILE_MAX) {
        seterr(err, err_len, "%s:0: file: larger than %d bytes: not a spec file?", path, SPEC_FILE_MAX);
        g_free(text);
        return -1;
    }
    text[len] = 0;
    *out = text;
    return (ssize_t)len;
}

/* Adds specs parsed from one file, unless one conflicts with the table. */
static int add_file(const char *path, char *err, size_t err_len)
{
    char *text = NULL;
    ssize_t got = read_spec_file(path, &text, err, err_len);
    if (got < 0)
        return -1;
    size_t len = (size_t)got;
    static lg_spec_t tmp[REGISTRY_MAX];
    int n = lg_registry_parse(text, len, path, tmp, REGISTRY_MAX - table_n, err, err_len);
    g_free(text);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < table_n; j++) {
            if (strcmp(table[j].name, tmp[i].name) == 0) {
                seterr(err, err_len, "%s: [%s]: kernel spec name already defined by %s; choose another name",
                       tmp[i].source, tmp[i].name, table[j].source);
                return -1;
            }
        }
        const lg_spec_t *o = conflict(&tmp[i], table, table_n);
        if (o) {
            seterr(err, err_len, "%s: [%s] match: conflicts with [%s] from %s (same match and parameter layout)",
                   tmp[i].source, tmp[i].name, o->name, o->source);
            return -1;
        }
    }
    memcpy(&table[table_n], tmp, (size_t)n * sizeof *tmp);
    table_n += n;
    return n;
}

/* report.c's, resolved in the library; weak so that a unit test linking registry.o alone does
 * not drag the reporting modules in (it uses lg_registry_init_with). */
#pragma weak lg_report_warning

int lg_registry_init(const char *user_files)
{
    return lg_registry_init_with(user_files, lg_report_warning ? lg_report_warning : NULL);
}

int lg_registry_init_with(const char *user_files, lg_registry_warn_fn warn)
{
    char err[512];
    table_n = 0;
    int n = lg_registry_parse(lg_builtin_specs, (size_t)(lg_builtin_specs_end - lg_builtin_specs), "builtin", table,
                              REGISTRY_MAX, err, sizeof err);
    if (n < 0) {
        if (warn)
            warn("spec_file", err);
        n = 0;
    }
    table_n = n;
    if (!user_files || !*user_files)
        return table_n;
    char **files = g_strsplit(user_files, ":", -1);
    for (char **f = files; *f; f++) {
        if (!**f)
            continue;
        if (add_file(*f, err, sizeof err) < 0 && warn) {
            char msg[640];
            snprintf(msg, sizeof msg, "%s; file skipped, the built-in table stays", err);
            warn("spec_file", msg);
        }
    }
    g_strfreev(files);
    return table_n;
}

/* Every ';'-separated part of the spec's match occurs in the mangled name. */
static bool name_matches(const lg_spec_t *s, const char *mangled)
{
    const char *p = s->match;
    char part[sizeof s->match];
    while (*p) {
        size_t n = strcspn(p, ";");
        memcpy(part, p, n);
        part[n] = 0;
        if (!strstr(mangled, part))
            return false;
        p += n;
        if (*p == ';')
            p++;
    }
    return true;
}

bool lg_registry_maybe_watched(const char *mangled) { return lg_registry_match(mangled) != NULL; }

const lg_spec_t *lg_registry_match(const char *mangled)
{
    if (!mangled)
        return NULL;
    for (int i = 0; i < table_n; i++)
        if (name_matches(&table[i], mangled))
            return &table[i];
    return NULL;
}

static void format_sizes(char *out, size_t len, const size_t *s, int n)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < n && o + 1 < len; i++) {
        int w = snprintf(out + o, len - o, "%s%zu", i ? "," : "", s[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

bool lg_registry_layout_ok(const lg_spec_t *spec, const char *mangled, const size_t *actual_sizes, int n_actual,
                           char *why, size_t why_len)
{
    size_t from_name[LG_MAX_PARAMS];
    const char *where = "runtime";
    if (n_actual < 0 || !actual_sizes) {
        n_actual = mangled ? lg_demangle_param_sizes(mangled, from_name, LG_MAX_PARAMS) : -1;
        actual_sizes = from_name;
        where = "mangled signature";
        if (n_actual < 0) {
            seterr(why, why_len, "[%s]: the parameter sizes are unknown (no runtime information, signature not sizable)",
                   spec->name);
            return false;
        }
    }
    bool ok = n_actual == spec->n_params;
    for (int i = 0; ok && i < n_actual; i++)
        ok = actual_sizes[i] == (size_t)spec->param_sizes[i];
    if (!ok) {
        char have[160], want[160];
        size_t ws[LG_MAX_PARAMS];
        for (int i = 0; i < spec->n_params; i++)
            ws[i] = (size_t)spec->param_sizes[i];
        format_sizes(have, sizeof have, actual_sizes, n_actual);
        format_sizes(want, sizeof want, ws, spec->n_params);
        seterr(why, why_len, "[%s] expects parameter sizes %s, the kernel has %s (%s)", spec->name, want, have, where);
    }
    return ok;
}

const lg_spec_t *lg_registry_find(const char *mangled, const size_t *actual_sizes, int n_actual, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = 0;
    if (!mangled)
        return NULL;
    size_t used = 0;
    for (int i = 0; i < table_n; i++) {
        if (!name_matches(&table[i], mangled))
            continue;
        char one[384];
        if (lg_registry_layout_ok(&table[i], mangled, actual_sizes, n_actual, one, sizeof one)) {
            if (why && why_len)
                why[0] = 0;
            return &table[i];
        }
        /* collect every rejection: the warning shows all layouts that were tried */
        if (why && used + 3 < why_len) {
            int w = snprintf(why + used, why_len - used, "%s%s", used ? "; " : "", one);
            if (w > 0)
                used += (size_t)w < why_len - used ? (size_t)w : why_len - used - 1;
        }
    }
    return NULL;
}

int lg_registry_count(void) { return table_n; }

const lg_spec_t *lg_registry_get(int i) { return (i >= 0 && i < table_n) ? &table[i] : NULL; }
