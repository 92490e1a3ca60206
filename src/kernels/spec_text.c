/* spec_text.c: spec text as lines, before GKeyFile reads it (spec.c): where each group and
 * key sits, so that every message names its line, and the checks GKeyFile does not make or
 * makes without a line number (NUL bytes, invalid UTF-8, stray lines, unterminated group
 * headers, keys before the first group, duplicate groups and keys). Also the one formatter of
 * spec messages (lg_spec_text_error), shared by spec.c, spec_value.c and registry.c.
 *
 * Pure: no globals. Called by spec.c and spec_value.c while the table is built (lazy start,
 * one thread).
 * Tested by tests/unit/test_registry.c (parser errors) and tests/fuzz/fuzz_spec.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "kernels/kernels.h"

static void map_add(lg_spec_text_t *m, const char *group, const char *key, size_t key_len, int line)
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

int lg_spec_text_line(const lg_spec_text_t *m, const char *group, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i].group, group) == 0 && strcmp(m->keys[i].key, key) == 0)
            return m->keys[i].line;
    for (int i = 0; i < m->n; i++) /* a missing key: point at its group header */
        if (strcmp(m->keys[i].group, group) == 0 && m->keys[i].key[0] == 0)
            return m->keys[i].line;
    return 0;
}

void lg_spec_text_error(char *err, size_t err_len, const char *fmt, ...)
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
int lg_spec_text_check(const char *text, size_t len, const char *origin, lg_spec_text_t *m, char *err, size_t err_len)
{
    const char *nul = memchr(text, 0, len);
    int line = 1;
    if (nul) {
        for (const char *q = text; q < nul; q++)
            line += *q == '\n';
        lg_spec_text_error(err, err_len, "%s:%d: file: binary data (NUL byte); a spec file is text", origin, line);
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
            lg_spec_text_error(err, err_len, "%s:%d: file: invalid UTF-8", origin, line);
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
                lg_spec_text_error(err, err_len, "%s:%d: group: unterminated group header \"%.*s\"", origin, line,
                                   (int)(n - s > 60 ? 60 : n - s), l + s);
                return -1;
            }
            size_t gl = e - s - 2;
            if (gl == 0 || gl >= sizeof group || memchr(l + s + 1, '[', gl) || memchr(l + s + 1, ']', gl)) {
                lg_spec_text_error(err, err_len, "%s:%d: group: bad group name (1..%zu characters, no brackets)",
                                   origin, line, sizeof group - 1);
                return -1;
            }
            memcpy(group, l + s + 1, gl);
            group[gl] = 0;
            int prev = lg_spec_text_line(m, group, "");
            if (prev) {
                lg_spec_text_error(err, err_len, "%s:%d: [%s]: duplicate kernel spec (first defined at line %d)",
                                   origin, line, group, prev);
                return -1;
            }
            map_add(m, group, "", 0, line);
            in_group = true;
            continue;
        }
        const char *eq = memchr(l + s, '=', n - s);
        if (!eq) {
            lg_spec_text_error(err, err_len,
                               "%s:%d: %s%s%s: line is neither \"key=value\", \"[group]\" nor a # comment: \"%.*s\"",
                               origin, line, in_group ? "[" : "", in_group ? group : "file", in_group ? "]" : "",
                               (int)(n - s > 60 ? 60 : n - s), l + s);
            return -1;
        }
        if (!in_group) {
            lg_spec_text_error(err, err_len, "%s:%d: file: key before the first [group]", origin, line);
            return -1;
        }
        size_t kl = (size_t)(eq - (l + s));
        while (kl && (l[s + kl - 1] == ' ' || l[s + kl - 1] == '\t'))
            kl--;
        if (kl == 0) {
            lg_spec_text_error(err, err_len, "%s:%d: [%s]: empty key name", origin, line, group);
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
            lg_spec_text_error(err, err_len, "%s:%d: [%s] %s: key given twice (first at line %d)", origin, line, group,
                               key, prev);
            return -1;
        }
        map_add(m, group, l + s, kl, line);
    }
    return 0;
}

void lg_spec_text_free(lg_spec_text_t *m)
{
    g_free(m->keys);
    m->keys = NULL;
    m->n = m->cap = 0;
}
