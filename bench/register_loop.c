/* register_loop.c: the registration benchmark of `make bench` (bench/torch_bench.py). Registers
 * the kernels listed in a file written by bench/kernel_names.c (torch's 24k, grouped in its
 * fatbins) through __cudaRegisterFatBinary and __cudaRegisterFunction of the runtime it is
 * linked with (the test double), as nvcc's code does at a library's load, so that the
 * instructions labelguard adds to those registrations can be counted under callgrind with and
 * without LD_PRELOAD: at N=0 and N=all, so that start-up and reading the file cancel out.
 *
 * usage: register_loop FILE [N] [unregister]   (default: every line)
 *   unregister: then unregister every fatbin in reverse order, as the images' atexit handlers do
 * output: "registered=N fatbins=F"; exit 0, 1 on a bad file, 2 on usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned x, y, z; } lg_bench_uint3;
void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, lg_bench_uint3 *tid, lg_bench_uint3 *bid, lg_bench_uint3 *bdim,
                            lg_bench_uint3 *gdim, int *wsize);

/* Host stubs are only addresses here: 16 bytes apart, as small functions in a text segment. */
#define MAX_KERNELS (1 << 20)
static char stubs[(size_t)MAX_KERNELS * 16];
static int fatbin_wrappers[1 << 16];

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: register_loop FILE [N] [unregister]\n");
        return 2;
    }
    long limit = argc > 2 ? strtol(argv[2], NULL, 10) : -1;
    int unregister = argc > 3 && !strcmp(argv[3], "unregister");
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)size + 1); /* names are kept by pointer: never freed */
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 1;
    }
    fclose(f);
    text[size] = 0;
    static void **handles[sizeof fatbin_wrappers / sizeof *fatbin_wrappers];
    long n = 0, fatbins = 0, last = -1;
    for (char *line = text, *next; *line && (limit < 0 || n < limit) && n < MAX_KERNELS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        else
            next = line + strlen(line);
        char *name;
        long fb = strtol(line, &name, 10);
        if (name == line || *name != ' ' || fb < 0) {
            fprintf(stderr, "%s: bad line %ld\n", argv[1], n + 1);
            return 1;
        }
        name++;
        if (fb != last) {
            if (fatbins == (long)(sizeof handles / sizeof *handles))
                break;
            handles[fatbins] = __cudaRegisterFatBinary(&fatbin_wrappers[fatbins]);
            fatbins++;
            last = fb;
        }
        __cudaRegisterFunction(handles[fatbins - 1], &stubs[(size_t)n * 16], name, name, -1, NULL, NULL, NULL,
                               NULL, NULL);
        n++;
    }
    for (long i = 0; i < fatbins; i++)
        __cudaRegisterFatBinaryEnd(handles[i]);
    if (unregister)
        for (long i = fatbins; i-- > 0;)
            __cudaUnregisterFatBinary(handles[i]);
    printf("registered=%ld fatbins=%ld\n", n, fatbins);
    return 0;
}
