/*
 * convert.h — checked element conversions between .npy arrays and xconv dtypes, for the CLI.
 *
 * Values travel through one scalar type, so a conversion is a load into it and a store
 * out of it, never a function per (source, target) pair. Stores are exact or fail:
 * an integer that does not fit the target, a non-integral or non-finite float going to an
 * integer, or a complex value with a nonzero imaginary part going to a real dtype are
 * errors. Floats round to nearest even (f64 -> f32 by the C cast, narrower formats through
 * f32 with xconv_f32_to_*).
 */
#ifndef XCONV_TOOLS_CONVERT_H
#define XCONV_TOOLS_CONVERT_H

#include "npy.h"
#include "xconv.h"

#include <stddef.h>
#include <stdint.h>

typedef enum tool_kind { TOOL_UINT, TOOL_INT, TOOL_FLOAT, TOOL_COMPLEX } tool_kind;

/* One value: `u` for TOOL_UINT, `i` for TOOL_INT, `re` (and `im`) for floats. */
typedef struct tool_scalar {
    tool_kind kind;
    uint64_t  u;
    int64_t   i;
    double    re, im;
} tool_scalar;

/* Element i (counted in elements from buf) of a buffer of xconv dtype dt. */
tool_scalar xconv_tool_get(xconv_dtype dt, const void *buf, int64_t i);

/* Stores v as element i of a buffer of dtype dt; 0, or -1 with a message such as
 * "value 300 does not fit i8". */
int xconv_tool_set(xconv_dtype dt, void *buf, int64_t i, const tool_scalar *v, char *errbuf,
                   size_t errlen);

/* The value as |re| (or the modulus of a complex value), for error metrics. */
double xconv_tool_abs(const tool_scalar *v);

/*
 * Converts a parsed array (any byte order, C or Fortran order) into a new malloc'ed
 * C-order buffer of dtype dt (*out; at least one byte even for empty arrays). Returns 0,
 * -1 for a bad value or dtype (errbuf names the element, e.g. "element [0, 2]: value 300
 * does not fit i8"), or -2 when out of memory.
 */
int xconv_tool_convert(const npy_array *a, xconv_dtype dt, void **out, char *errbuf,
                       size_t errlen);

/*
 * Saves a C-order buffer of dtype dt as .npy; bf16, f8e4m3 and f8e5m2 are widened to f32
 * ("<f4") since NumPy has no such dtypes. Returns 0, or 1 with the reason in errbuf.
 */
int xconv_tool_save(const char *path, xconv_dtype dt, int rank, const int64_t *shape,
                    const void *buf, char *errbuf, size_t errlen);

#endif /* XCONV_TOOLS_CONVERT_H */
