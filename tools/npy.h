/*
 * npy.h — a strict reader and a writer for NumPy's .npy format (versions 1.0, 2.0, 3.0).
 *
 * Only simple numeric arrays are read: descr is one of b1, u1..u8, i1..i8, f2, f4, f8, c8,
 * c16 with a byte-order mark ('<', '>', '|' or '='); structured, string and object arrays
 * are rejected. The parser never reads outside the bytes it is given and reports every
 * malformation with a message; it is the target of tests/fuzz/fuzz_npy.c.
 */
#ifndef XCONV_TOOLS_NPY_H
#define XCONV_TOOLS_NPY_H

#include "xconv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NumPy's own limit before 2.0; every xconv tensor has at most 5. */
#define XCONV_NPY_MAX_DIMS 32

typedef struct npy_array {
    int            version_major;  /* 1, 2 or 3 */
    int            version_minor;
    char           kind;           /* 'b' bool, 'u' unsigned, 'i' signed, 'f' float, 'c' complex */
    int            itemsize;       /* bytes per element */
    bool           big_endian;     /* the data's byte order ('>'); single bytes are never */
    bool           fortran_order;  /* column-major data */
    int            ndim;
    int64_t        shape[XCONV_NPY_MAX_DIMS];
    int64_t        count;          /* the product of shape */
    const uint8_t *data;           /* points into the parsed bytes */
    size_t         data_bytes;     /* count * itemsize, exactly what follows the header */
} npy_array;

/*
 * Parses a whole .npy file held in bytes[0, len). On success returns 0 and fills *out (whose
 * data points into `bytes`). On a malformed or unsupported file returns -1, leaves a
 * one-line lower-case message in errbuf (which may be NULL when errlen is 0) and *out in an
 * unspecified state.
 */
int xconv_npy_parse(const uint8_t *bytes, size_t len, npy_array *out, char *errbuf,
                    size_t errlen);

/* The xconv dtype holding a parsed array's elements exactly, or XCONV_DTYPE_INVALID (bool). */
xconv_dtype xconv_npy_dtype(const npy_array *a);

/*
 * Reads and parses a file. On success returns 0; *bytes_out is the malloc'ed file content
 * the array points into (free it after use). Returns 1 on an I/O error (missing file,
 * read failure, out of memory) and 2 on a malformed file; errbuf gets the reason (without
 * the path). On error nothing needs freeing.
 */
int xconv_npy_load(const char *path, uint8_t **bytes_out, npy_array *out, char *errbuf,
                   size_t errlen);

/*
 * The descr NumPy uses for an xconv dtype stored as is ("<f4", "|i1", ...), or NULL for
 * dtypes NumPy lacks (bf16, f8e4m3, f8e5m2).
 */
const char *xconv_npy_descr(xconv_dtype dtype);

/*
 * Writes a C-order array with the given descr ("<f4") and shape as `path`, atomically: the
 * data goes to a temporary file in the same directory that is renamed over `path` only when
 * everything was written, so a failure leaves no partial file. Returns 0, or 1 with the
 * reason in errbuf.
 */
int xconv_npy_save(const char *path, const char *descr, int ndim, const int64_t *shape,
                   const void *data, size_t data_bytes, char *errbuf, size_t errlen);

/* Formats an error into errbuf (if any) and returns -1: the failure path the tools share. */
int xconv_tool_fail(char *errbuf, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* XCONV_TOOLS_NPY_H */
