/* fuzz_spec.c: libFuzzer target for the spec parser (src/kernels/spec.c lg_spec_parse). Any
 * byte string must give either specs or one error message, never a crash or an out-of-bounds
 * access; and every spec the parser accepts must decode an args[] array of exactly the
 * declared parameter sizes without reading past any parameter (ASan guards each block), so
 * the parser's range checks are what keep lg_decode in bounds.
 * Built and run by tests/fuzz/run.sh (seeds: tests/fuzz/corpus/fuzz_spec/).
 * LG_FUZZ_SOURCES: src/kernels/registry.c src/kernels/spec.c src/kernels/spec_value.c src/kernels/spec_closure.c src/kernels/spec_text.c src/base/demangle.c src/base/demangle_parse.c src/base/demangle_lex.c src/base/demangle_sizes.c src/kernels/decode.c src/kernels/decode_dtype.c src/kernels/decode_rewrite.c src/kernels/asserts.c src/base/config.c src/base/forkpoint.c
 */
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static lg_spec_t specs[8];
    char err[512];
    int n = lg_spec_parse((const char *)data, size, "fuzz.conf", specs, 8, err, sizeof err);
    if (n < 0) {
        if (!err[0] || !memchr(err, 0, sizeof err))
            abort(); /* a rejected file always says why */
        return 0;
    }
    for (int i = 0; i < n; i++) {
        const lg_spec_t *s = &specs[i];
        void *args[LG_MAX_PARAMS] = {0};
        for (int p = 0; p < s->n_params; p++) {
            args[p] = malloc((size_t)s->param_sizes[p]);
            /* fill from the input so decoded values vary */
            for (int b = 0; b < s->param_sizes[p]; b++)
                ((unsigned char *)args[p])[b] = size ? data[(size_t)(p * 31 + b) % size] : 0;
        }
        unsigned grid[3] = {size ? data[0] : 1u, 1, 1};
        lg_target_t t;
        char why[256];
        lg_dtype_t dtype;
        if (lg_decode_dtype(s, "_Z1kIflEvv", &dtype, why, sizeof why) == 0)
            lg_decode(s, dtype, args, grid, &t, why, sizeof why);
        static lg_args_copy_t copy;
        lg_decode_rewrite(s, args, 0x1234, s->ignore_index.param >= 0, -100, &copy);
        for (int p = 0; p < s->n_params; p++)
            free(args[p]);
    }
    return 0;
}
