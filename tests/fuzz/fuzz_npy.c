/*
 * fuzz_npy.c — libFuzzer target for the .npy parser of the CLI (tools/npy.c) and the checked
 * conversion that follows it in `xconv run` (tools/convert.c).
 *
 * The input is copied into a buffer of exactly its size so that ASan flags any read past
 * the end. On a successful parse the array must be self-consistent (data inside the input,
 * data_bytes = count * itemsize) and every element must be readable and convertible to a
 * few target dtypes without crashing.
 */
#include "../../tools/convert.c"
#include "../../tools/npy.c"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    npy_array a;
    char err[256];
    if (xconv_npy_parse(copy, size, &a, err, sizeof err) == 0) {
        if (a.data < copy || a.data_bytes > size || (size_t)(a.data - copy) > size - a.data_bytes ||
            a.data_bytes != (size_t)a.count * (size_t)a.itemsize)
            abort();
        static const xconv_dtype targets[] = {XCONV_DTYPE_I8, XCONV_DTYPE_U64, XCONV_DTYPE_BF16,
                                              XCONV_DTYPE_F32, XCONV_DTYPE_C128};
        /* Bounded work per input keeps the fuzzer fast on large declared shapes. */
        if (a.count <= 4096) {
            for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
                void *out = NULL;
                int rc = xconv_tool_convert(&a, targets[t], &out, err, sizeof err);
                if (rc == 0) free(out);
                if (rc == 0 && !out) abort();
            }
        }
    } else if (err[0] == '\0') {
        abort(); /* every rejection must say why */
    }
    free(copy);
    return 0;
}
