/* asserts.c: torch._assert_async's condition, read before its kernel runs.
 *
 * Some ops check their arguments on the device: index_put_(accumulate=True) computes
 * `index.max() < size` and `index.min() >= -size` into a one-element tensor and hands it to
 * torch._assert_async, whose kernel (_assert_async_cuda_kernel<scalar_t>(const scalar_t *input,
 * Msg msg), aten/src/ATen/native/cuda/TensorCompare.cu) asserts `input[0] != 0` and so kills the
 * CUDA context. A spec with target_kind=assert (specs/pytorch.conf) watches that kernel; launch.c
 * hands its launches here, which copy the one element to the host on the launch's stream and
 * wait, and act.c blocks the launch when it is zero. Nothing but that element is read: the
 * violation holds it alone (index 0, value 0), never the op's ids.
 *
 * The element's type is the kernel's: the template argument of its mangled name (b, h, a, s, i,
 * l, f, d, c10::Half, c10::BFloat16) or the complex overloads' parameter type. Zero is what
 * the kernel's `!= 0` says: every bit clear but a float part's sign bit (-0.0 == 0); NaN is not
 * zero. The op that asserted is named from the native stack: the outermost at::_ops::<op>
 * frame that is not _assert_async itself (index_put_), else torch._assert_async.
 *
 * launch.c reads a launch's condition (validate.c copies the element on the launching thread)
 * and asks here what it means: the element's type (also decode_dtype.c), the verdict (zero or not),
 * and which op asserted (act.c: the report path). No CUDA call here.
 * Tested by tests/unit/test_asserts.c (element types, zero, op names) and end to end by
 * tests/e2e/test_assert_async.sh (build/progs/assert_async on the runtime double, which runs
 * the kernel as the device does); real torch's index_put_(accumulate=True) by
 * tests/torch/gpu_path.py on a GPU.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"

#define KERNEL "25_assert_async_cuda_kernel"

static const struct {
    const char *code; /* the template argument, as mangled */
    lg_assert_elem_t elem;
} by_code[] = {
    {"b", {1, 0, 1, "bool"}},         {"h", {1, 0, 1, "uint8"}},          {"a", {1, 0, 1, "int8"}},
    {"s", {2, 0, 1, "int16"}},        {"i", {4, 0, 1, "int32"}},          {"l", {8, 0, 1, "int64"}},
    {"x", {8, 0, 1, "int64"}},        {"f", {4, 32, 1, "float32"}},       {"d", {8, 64, 1, "float64"}},
    {"N3c104HalfE", {2, 16, 1, "float16"}}, {"N3c108BFloat16E", {2, 16, 1, "bfloat16"}},
};

int lg_asserts_element(const char *mangled, lg_assert_elem_t *out)
{
    const char *k = mangled ? strstr(mangled, KERNEL) : NULL;
    if (!k)
        return -1;
    k += strlen(KERNEL);
    if (*k == 'I') {
        k++;
        for (size_t i = 0; i < sizeof by_code / sizeof *by_code; i++) {
            size_t n = strlen(by_code[i].code);
            /* the argument list holds this one argument: "I<code>EE" */
            if (strncmp(k, by_code[i].code, n) == 0 && k[n] == 'E') {
                *out = by_code[i].elem;
                return 0;
            }
        }
        return -1;
    }
    /* the non-template overloads: (const c10::complex<float> *, Msg) and <double> */
    if (strncmp(k, "EPKN3c107complexIfEE", 20) == 0) {
        *out = (lg_assert_elem_t){8, 32, 2, "complex64"};
        return 0;
    }
    if (strncmp(k, "EPKN3c107complexIdEE", 20) == 0) {
        *out = (lg_assert_elem_t){16, 64, 2, "complex128"};
        return 0;
    }
    return -1;
}

bool lg_asserts_is_zero(const lg_assert_elem_t *e, const unsigned char *bytes)
{
    int part = e->bytes / e->parts;
    for (int p = 0; p < e->parts; p++) {
        const unsigned char *b = bytes + p * part;
        for (int i = 0; i < part; i++) {
            unsigned char c = b[i];
            if (e->float_bits && i == part - 1)
                c &= 0x7f; /* little-endian: the sign bit is the top bit of the last byte */
            if (c)
                return false;
        }
    }
    return true;
}

void lg_asserts_verdict(const lg_assert_elem_t *e, uint64_t ptr, const unsigned char *bytes, lg_target_t *t,
                        lg_verdict_t *v)
{
    memset(t, 0, sizeof *t);
    t->data = ptr;
    t->count = 1;
    t->ndim = 1;
    t->sizes[0] = 1;
    t->strides[0] = 1;
    t->dtype = LG_DTYPE_UINT8; /* placeholder: reports name the element by lg_asserts_element */
    lg_scan_clear(v);
    v->checked = 1;
    if (lg_asserts_is_zero(e, bytes)) {
        v->min = v->max = 0;
        v->bad_count = 1;
        v->n_samples = 1;
        v->samples[0].index = 0;
        v->samples[0].value = 0;
    }
}

/* The op in one symbolized frame ("... (at::_ops::index_put_::call(...)+0x1c)", or the mangled
 * _ZN2at4_ops10index_put_4callE... when nothing demangles): its name into out, else false. */
static bool frame_op(const char *line, char *out, size_t len)
{
    const char *p = strstr(line, "at::_ops::");
    size_t n = 0;
    if (p) {
        p += 10;
        while (p[n] && p[n] != ':' && p[n] != '(' && p[n] != ' ')
            n++;
    } else if ((p = strstr(line, "_ZN2at4_ops"))) {
        p += 11;
        while (*p >= '0' && *p <= '9')
            n = n * 10 + (size_t)(*p++ - '0');
        if (n == 0 || strnlen(p, n) < n)
            return false;
    }
    if (!p || n == 0 || n >= len)
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* The ops whose torch._assert_async message labelguard knows, by the message the op passes (the
 * kernel's Msg, read from the launch): which op, the likely cause (report/cause.c's names) and
 * what the check means. torch.multinomial (aten/src/ATen/native/Distributions.cpp) checks its
 * probabilities this way for one sample or without replacement; only the condition was read, so
 * the first message cannot tell NaN/inf from a negative value: the text names both. */
static const struct {
    const char *msg, *op, *cause, *text;
} meanings[] = {
    {"probability tensor contains either `inf`, `nan` or element < 0", "multinomial", "fp16_overflow",
     "torch.multinomial's probabilities hold NaN, inf or a value < 0 (only its check was read). NaN/inf: fp16 logits "
     "overflowed: compute the softmax in float32 or use bf16; < 0: logits passed where probabilities go"},
    {"invalid multinomial distribution (sum of probabilities <= 0)", "multinomial", "all_masked",
     "a row of torch.multinomial's probabilities sums to 0 (only its check was read): top-k/top-p or a mask removed "
     "every token; keep at least one token per row"},
};

const char *lg_asserts_meaning(const char *msg, char *op, size_t op_len, char *out, size_t len)
{
    if (!msg || !msg[0])
        return NULL;
    for (size_t i = 0; i < sizeof meanings / sizeof meanings[0]; i++) {
        if (strcmp(msg, meanings[i].msg) != 0)
            continue;
        snprintf(op, op_len, "%s", meanings[i].op);
        snprintf(out, len, "%s", meanings[i].text);
        return meanings[i].cause;
    }
    return NULL;
}

void lg_asserts_op(char (*native)[256], int n_native, char *out, size_t len)
{
    snprintf(out, len, "torch._assert_async");
    char name[128];
    for (int i = 0; i < n_native; i++) {
        if (!frame_op(native[i], name, sizeof name))
            continue;
        if (strncmp(name, "_assert_async", 13) == 0)
            continue;
        snprintf(out, len, "%s", name); /* outer frames come later: the last one is the user's op */
    }
}

void lg_asserts_message(const lg_spec_t *spec, void **args, char *out, size_t len)
{
    out[0] = '\0';
    if (!spec || !args || spec->n_params < 2 || spec->param_sizes[1] != LG_ASSERT_MSG || !args[1] || len == 0)
        return;
    size_t n = len < LG_ASSERT_MSG ? len : LG_ASSERT_MSG;
    memcpy(out, args[1], n - 1); /* NUL-terminated by the op; cut here in any case */
    out[n - 1] = '\0';
}
