/* fuzz_demangle.c: libFuzzer target for the mangled-name code: short-name extractor, label
 * type, parameter-size parser (src/base/demangle.c) and the registry matcher with its layout check
 * (src/kernels/registry.c lg_registry_find over the built-in table). Input is any byte string made
 * NUL-terminated, as kernel names are. Checks: no crash, no read past the string (ASan), the
 * short name always NUL-terminated inside its buffer, sizes within LP64 reason.
 * Built and run by tests/fuzz/run.sh (seeds: tests/fuzz/corpus/fuzz_demangle/, real nvcc names).
 * LG_FUZZ_SOURCES: src/kernels/registry.c src/kernels/spec.c src/kernels/spec_value.c src/kernels/spec_closure.c src/kernels/spec_text.c src/base/demangle.c src/base/demangle_parse.c src/base/demangle_lex.c src/base/demangle_sizes.c src/base/config.c src/base/forkpoint.c
 */
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int ready;
    if (!ready) {
        lg_registry_init_with(NULL, NULL);
        ready = 1;
    }
    char *name = malloc(size + 1); /* exact size: ASan sees any read past the NUL */
    memcpy(name, data, size);
    name[size] = 0;

    char shortname[64];
    memset(shortname, 0x5a, sizeof shortname);
    lg_demangle_short(name, shortname, sizeof shortname);
    if (!memchr(shortname, 0, sizeof shortname))
        abort();
    lg_demangle_last_template_arg(name);
    size_t sizes[LG_MAX_PARAMS];
    int n = lg_demangle_param_sizes(name, sizes, LG_MAX_PARAMS);
    if (n > LG_MAX_PARAMS)
        abort();
    for (int i = 0; i < n; i++)
        if (sizes[i] == 0 || sizes[i] > (1u << 20))
            abort();
    char why[512];
    const lg_spec_t *s = lg_registry_find(name, NULL, -1, why, sizeof why);
    if (s && !lg_registry_layout_ok(s, name, NULL, -1, why, sizeof why))
        abort();
    free(name);
    return 0;
}
