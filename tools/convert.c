/*
 * convert.c — checked element conversions for the CLI (see convert.h).
 */
#include "convert.h"
#include "npy.h"

#include "core/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Raw little- or big-endian bytes as an unsigned integer. */
static uint64_t read_bits(const uint8_t *p, int size, bool big_endian)
{
    uint64_t v = 0;
    for (int k = 0; k < size; k++) v |= (uint64_t)p[big_endian ? size - 1 - k : k] << (8 * k);
    return v;
}

/* Two's complement reinterpretation of the low `bits` bits, without implementation-defined
 * unsigned-to-signed conversion. */
static int64_t sign_extend(uint64_t v, int bits)
{
    if (bits < 64 && (v >> (bits - 1) & 1)) v |= ~(uint64_t)0 << bits;
    return (v >> 63) ? -(int64_t)(~v) - 1 : (int64_t)v;
}

static double float_from_bits(uint64_t bits, int size)
{
    if (size == 2) return xconv_f16_to_f32((uint16_t)bits);
    if (size == 4) {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* Element at storage index i of a parsed npy array. */
static tool_scalar npy_get(const npy_array *a, int64_t i)
{
    tool_scalar v = {0};
    const uint8_t *p = a->data + (size_t)i * (size_t)a->itemsize;
    switch (a->kind) {
    case 'u':
        v.kind = TOOL_UINT;
        v.u = read_bits(p, a->itemsize, a->big_endian);
        break;
    case 'i':
        v.kind = TOOL_INT;
        v.i = sign_extend(read_bits(p, a->itemsize, a->big_endian), 8 * a->itemsize);
        break;
    case 'f':
        v.kind = TOOL_FLOAT;
        v.re = float_from_bits(read_bits(p, a->itemsize, a->big_endian), a->itemsize);
        break;
    default: {
        int half = a->itemsize / 2;
        v.kind = TOOL_COMPLEX;
        v.re = float_from_bits(read_bits(p, half, a->big_endian), half);
        v.im = float_from_bits(read_bits(p + half, half, a->big_endian), half);
        break;
    }
    }
    return v;
}

/* Native-endian integer storage of `size` bytes. */
static uint64_t load_uint(const void *p, size_t size)
{
    switch (size) {
    case 1: { uint8_t v; memcpy(&v, p, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void store_uint(void *p, size_t size, uint64_t v)
{
    switch (size) {
    case 1: { uint8_t t = (uint8_t)v; memcpy(p, &t, 1); break; }
    case 2: { uint16_t t = (uint16_t)v; memcpy(p, &t, 2); break; }
    case 4: { uint32_t t = (uint32_t)v; memcpy(p, &t, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

tool_scalar xconv_tool_get(xconv_dtype dt, const void *buf, int64_t i)
{
    size_t size = xconv_dtype_size(dt);
    const uint8_t *p = (const uint8_t *)buf + (size_t)i * size;
    tool_scalar v = {0};
    switch (xconv__dtype_family(dt)) {
    case XCONV_FAMILY_INT: {
        uint64_t bits = load_uint(p, size);
        if (xconv__dtype_signed(dt)) {
            v.kind = TOOL_INT;
            v.i = sign_extend(bits, (int)size * 8);
        } else {
            v.kind = TOOL_UINT;
            v.u = bits;
        }
        return v;
    }
    case XCONV_FAMILY_FLOAT:
        v.kind = TOOL_FLOAT;
        switch (dt) {
        case XCONV_DTYPE_F8E4M3: v.re = xconv_f8e4m3_to_f32((uint8_t)load_uint(p, 1)); break;
        case XCONV_DTYPE_F8E5M2: v.re = xconv_f8e5m2_to_f32((uint8_t)load_uint(p, 1)); break;
        case XCONV_DTYPE_F16: v.re = xconv_f16_to_f32((uint16_t)load_uint(p, 2)); break;
        case XCONV_DTYPE_BF16: v.re = xconv_bf16_to_f32((uint16_t)load_uint(p, 2)); break;
        case XCONV_DTYPE_F32: { float f; memcpy(&f, p, 4); v.re = f; break; }
        default: memcpy(&v.re, p, 8); break;
        }
        return v;
    case XCONV_FAMILY_COMPLEX:
    default:
        v.kind = TOOL_COMPLEX;
        if (dt == XCONV_DTYPE_C64) {
            float f[2];
            memcpy(f, p, sizeof f);
            v.re = f[0];
            v.im = f[1];
        } else {
            double d[2];
            memcpy(d, p, sizeof d);
            v.re = d[0];
            v.im = d[1];
        }
        return v;
    }
}

double xconv_tool_abs(const tool_scalar *v)
{
    switch (v->kind) {
    case TOOL_UINT: return (double)v->u;
    case TOOL_INT: return fabs((double)v->i);
    case TOOL_FLOAT: return fabs(v->re);
    default: return hypot(v->re, v->im);
    }
}

static void format_value(const tool_scalar *v, char *buf, size_t size)
{
    switch (v->kind) {
    case TOOL_UINT: snprintf(buf, size, "%" PRIu64, v->u); break;
    case TOOL_INT: snprintf(buf, size, "%" PRId64, v->i); break;
    case TOOL_FLOAT: snprintf(buf, size, "%.17g", v->re); break;
    default: snprintf(buf, size, "(%.17g%+.17gj)", v->re, v->im); break;
    }
}

/* An integer value as sign and magnitude; false if v is not an exact integer. */
static bool integer_value(const tool_scalar *v, bool *neg, uint64_t *mag, bool *too_big)
{
    *too_big = false;
    switch (v->kind) {
    case TOOL_UINT:
        *neg = false;
        *mag = v->u;
        return true;
    case TOOL_INT:
        *neg = v->i < 0;
        *mag = *neg ? 0 - (uint64_t)v->i : (uint64_t)v->i;
        return true;
    default:
        if (v->kind == TOOL_COMPLEX && v->im != 0) return false;
        if (!isfinite(v->re) || v->re != floor(v->re)) return false;
        *neg = v->re < 0;
        double a = fabs(v->re);
        if (a >= 18446744073709551616.0) {
            *too_big = true;
            return true;
        }
        *mag = (uint64_t)a;
        return true;
    }
}

static int set_int(xconv_dtype dt, void *p, const tool_scalar *v, char *errbuf, size_t errlen)
{
    char text[96];
    bool neg, too_big;
    uint64_t mag = 0;
    if (!integer_value(v, &neg, &mag, &too_big)) {
        format_value(v, text, sizeof text);
        return xconv_tool_fail(errbuf, errlen, "value %s is not an integer and cannot convert to %s", text,
                    xconv_dtype_name(dt));
    }
    int bits = xconv__dtype_bits(dt);
    uint64_t max_pos = xconv__dtype_signed(dt) ? ((uint64_t)1 << (bits - 1)) - 1
                       : bits == 64           ? UINT64_MAX
                                              : ((uint64_t)1 << bits) - 1;
    uint64_t max_neg = xconv__dtype_signed(dt) ? (uint64_t)1 << (bits - 1) : 0;
    if (too_big || (neg ? mag > max_neg : mag > max_pos)) {
        format_value(v, text, sizeof text);
        return xconv_tool_fail(errbuf, errlen, "value %s does not fit %s", text, xconv_dtype_name(dt));
    }
    store_uint(p, xconv_dtype_size(dt), neg ? 0 - mag : mag);
    return 0;
}

int xconv_tool_set(xconv_dtype dt, void *buf, int64_t i, const tool_scalar *v, char *errbuf,
                   size_t errlen)
{
    size_t size = xconv_dtype_size(dt);
    uint8_t *p = (uint8_t *)buf + (size_t)i * size;
    xconv_family family = xconv__dtype_family(dt);
    if (family == XCONV_FAMILY_INT) return set_int(dt, p, v, errbuf, errlen);

    double re, im = 0;
    float fre, fim = 0; /* rounded once from the source, not through double */
    switch (v->kind) {
    case TOOL_UINT: re = (double)v->u; fre = (float)v->u; break;
    case TOOL_INT: re = (double)v->i; fre = (float)v->i; break;
    case TOOL_FLOAT: re = v->re; fre = (float)v->re; break;
    default:
        re = v->re;
        im = v->im;
        fre = (float)v->re;
        fim = (float)v->im;
        break;
    }
    if (family == XCONV_FAMILY_COMPLEX) {
        if (dt == XCONV_DTYPE_C64) {
            float f[2] = {fre, fim};
            memcpy(p, f, sizeof f);
        } else {
            double d[2] = {re, im};
            memcpy(p, d, sizeof d);
        }
        return 0;
    }
    if (im != 0) {
        char text[96];
        format_value(v, text, sizeof text);
        return xconv_tool_fail(errbuf, errlen, "complex value %s has a nonzero imaginary part and cannot "
                    "convert to %s", text, xconv_dtype_name(dt));
    }
    switch (dt) {
    case XCONV_DTYPE_F8E4M3: store_uint(p, 1, xconv_f32_to_f8e4m3(fre)); break;
    case XCONV_DTYPE_F8E5M2: store_uint(p, 1, xconv_f32_to_f8e5m2(fre)); break;
    case XCONV_DTYPE_F16: store_uint(p, 2, xconv_f32_to_f16(fre)); break;
    case XCONV_DTYPE_BF16: store_uint(p, 2, xconv_f32_to_bf16(fre)); break;
    case XCONV_DTYPE_F32: memcpy(p, &fre, 4); break;
    default: memcpy(p, &re, 8); break;
    }
    return 0;
}

/* "[i0, i1, ...]" for a C-order multi-index. */
static void format_index(const int64_t *idx, int ndim, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < ndim && n < size; k++) {
        int w = snprintf(buf + n, size - n, "%s%" PRId64, k ? ", " : "[", idx[k]);
        if (w < 0) return;
        n += (size_t)w;
    }
    if (n < size) snprintf(buf + n, size - n, "%s", ndim ? "]" : "[]");
}

int xconv_tool_convert(const npy_array *a, xconv_dtype dt, void **out, char *errbuf,
                       size_t errlen)
{
    *out = NULL;
    if (a->kind == 'b')
        return xconv_tool_fail(errbuf, errlen, "bool arrays are not supported (save as an integer dtype)");
    size_t size = xconv_dtype_size(dt);
    if (size == 0) return xconv_tool_fail(errbuf, errlen, "invalid target dtype");
    if ((uint64_t)a->count > SIZE_MAX / size) return -2;
    uint8_t *buf = malloc(a->count ? (size_t)a->count * size : 1);
    if (!buf) return -2;
    if (a->count == 0) { /* nothing to convert; a zero dim may sit beside a huge one */
        *out = buf;
        return 0;
    }

    /* Walk the destination in C order with an odometer; the source index follows it in
     * the file's own order, so Fortran-order files are transposed here. */
    int64_t idx[XCONV_NPY_MAX_DIMS] = {0};
    int64_t src_stride[XCONV_NPY_MAX_DIMS];
    int64_t s = 1;
    for (int k = 0; k < a->ndim; k++) {
        int kk = a->fortran_order ? k : a->ndim - 1 - k;
        src_stride[kk] = s;
        s *= a->shape[kk];
    }
    int64_t src = 0;
    for (int64_t j = 0; j < a->count; j++) {
        tool_scalar v = npy_get(a, src);
        char why[200];
        if (xconv_tool_set(dt, buf, j, &v, why, sizeof why)) {
            char where[160];
            format_index(idx, a->ndim, where, sizeof where);
            free(buf);
            return xconv_tool_fail(errbuf, errlen, "element %s: %s", where, why);
        }
        for (int k = a->ndim - 1; k >= 0; k--) {
            src += src_stride[k];
            if (++idx[k] < a->shape[k]) break;
            src -= src_stride[k] * a->shape[k];
            idx[k] = 0;
        }
    }
    *out = buf;
    return 0;
}

int xconv_tool_save(const char *path, xconv_dtype dt, int rank, const int64_t *shape,
                    const void *buf, char *errbuf, size_t errlen)
{
    int64_t count = 1;
    for (int k = 0; k < rank; k++) count *= shape[k];
    const char *descr = xconv_npy_descr(dt);
    if (descr)
        return xconv_npy_save(path, descr, rank, shape, buf, (size_t)count * xconv_dtype_size(dt),
                              errbuf, errlen);

    /* bf16 and f8 widen exactly to f32. */
    float *wide = malloc(count ? (size_t)count * sizeof(float) : 1);
    if (!wide) {
        xconv_tool_fail(errbuf, errlen, "out of memory");
        return 1;
    }
    for (int64_t i = 0; i < count; i++) wide[i] = (float)xconv_tool_get(dt, buf, i).re;
    int rc = xconv_npy_save(path, "<f4", rank, shape, wide, (size_t)count * sizeof(float),
                            errbuf, errlen);
    free(wide);
    return rc;
}
