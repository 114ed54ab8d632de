/*
 * npy.c — the .npy reader and writer (see npy.h).
 *
 * File layout: "\x93NUMPY", major, minor, header length (u16 little-endian for 1.0, u32 for
 * 2.0 and 3.0), then the header: a Python dict literal with exactly the keys 'descr',
 * 'fortran_order' and 'shape', padded with spaces and ended by '\n'; then the raw data.
 *
 * The header is parsed by a small recursive-descent reader over a bounded cursor: every
 * byte access goes through cur_peek(), which returns 0 past the end, so no path can read
 * outside the header however malformed it is.
 */
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int xconv_tool_fail(char *errbuf, size_t errlen, const char *fmt, ...)
{
    if (errbuf && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Header cursor                                                                            */
/* ---------------------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *p;
    size_t         len;
    size_t         pos;
} cursor;

static int cur_peek(const cursor *c) { return c->pos < c->len ? c->p[c->pos] : 0; }

static void cur_skip_space(cursor *c)
{
    for (;;) {
        int ch = cur_peek(c);
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') return;
        c->pos++;
    }
}

/* Consumes `ch` (after optional spaces) if it is next. */
static bool cur_accept(cursor *c, int ch)
{
    cur_skip_space(c);
    if (c->pos < c->len && cur_peek(c) == ch) {
        c->pos++;
        return true;
    }
    return false;
}

/* A quoted string without escapes into buf; the header's keys and descr never need them. */
static int cur_string(cursor *c, char *buf, size_t size, char *errbuf, size_t errlen)
{
    cur_skip_space(c);
    int quote = cur_peek(c);
    if (c->pos >= c->len || (quote != '\'' && quote != '"'))
        return xconv_tool_fail(errbuf, errlen, "header: expected a quoted string at byte %zu", c->pos);
    c->pos++;
    size_t n = 0;
    for (;;) {
        if (c->pos >= c->len)
            return xconv_tool_fail(errbuf, errlen, "header: unterminated string");
        int ch = cur_peek(c);
        c->pos++;
        if (ch == quote) break;
        if (ch == '\\' || ch < 0x20 || ch > 0x7e)
            return xconv_tool_fail(errbuf, errlen, "header: unsupported character 0x%02x in a string", ch);
        if (n + 1 >= size) return xconv_tool_fail(errbuf, errlen, "header: string too long");
        buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    return 0;
}

/* A bare word (True, False). */
static void cur_word(cursor *c, char *buf, size_t size)
{
    cur_skip_space(c);
    size_t n = 0;
    for (;;) {
        int ch = cur_peek(c);
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        if (c->pos >= c->len || !alpha) break;
        if (n + 1 < size) buf[n++] = (char)ch;
        c->pos++;
    }
    buf[n] = '\0';
}

/* A non-negative decimal integer that fits int64, optionally followed by Python 2's 'L'. */
static int cur_int(cursor *c, int64_t *out, char *errbuf, size_t errlen)
{
    cur_skip_space(c);
    int ch = cur_peek(c);
    if (c->pos >= c->len || ch < '0' || ch > '9')
        return xconv_tool_fail(errbuf, errlen, "header: expected a non-negative integer in 'shape' at byte %zu",
                    c->pos);
    uint64_t v = 0;
    while (c->pos < c->len && (ch = cur_peek(c)) >= '0' && ch <= '9') {
        if (v > ((uint64_t)INT64_MAX - (uint64_t)(ch - '0')) / 10)
            return xconv_tool_fail(errbuf, errlen, "header: a dimension in 'shape' exceeds 2^63-1");
        v = v * 10 + (uint64_t)(ch - '0');
        c->pos++;
    }
    if (c->pos < c->len && (cur_peek(c) == 'L' || cur_peek(c) == 'l')) c->pos++;
    *out = (int64_t)v;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Header values                                                                            */
/* ---------------------------------------------------------------------------------------- */

static int parse_descr(const char *s, npy_array *a, char *errbuf, size_t errlen)
{
    const char *d = s;
    char order = '=';
    if (*d == '<' || *d == '>' || *d == '|' || *d == '=') order = *d++;
    char kind = *d++;
    if (kind != 'b' && kind != 'u' && kind != 'i' && kind != 'f' && kind != 'c')
        return xconv_tool_fail(errbuf, errlen, "unsupported dtype '%s' (numeric dtypes only)", s);
    int size = 0;
    if (*d < '1' || *d > '9') return xconv_tool_fail(errbuf, errlen, "malformed dtype '%s'", s);
    while (*d >= '0' && *d <= '9' && size < 1000) size = size * 10 + (*d++ - '0');
    if (*d != '\0') return xconv_tool_fail(errbuf, errlen, "malformed dtype '%s'", s);

    bool ok = false;
    switch (kind) {
    case 'b': ok = size == 1; break;
    case 'u':
    case 'i': ok = size == 1 || size == 2 || size == 4 || size == 8; break;
    case 'f': ok = size == 2 || size == 4 || size == 8; break;
    case 'c': ok = size == 8 || size == 16; break;
    }
    if (!ok) return xconv_tool_fail(errbuf, errlen, "unsupported dtype '%s'", s);
    /* '=' is the writer's native order; every host xconv runs on is little-endian. */
    a->kind = kind;
    a->itemsize = size;
    a->big_endian = order == '>' && size > 1;
    return 0;
}

static int parse_shape(cursor *c, npy_array *a, char *errbuf, size_t errlen)
{
    if (!cur_accept(c, '(')) return xconv_tool_fail(errbuf, errlen, "header: 'shape' is not a tuple");
    a->ndim = 0;
    if (cur_accept(c, ')')) return 0;
    for (;;) {
        if (a->ndim == XCONV_NPY_MAX_DIMS)
            return xconv_tool_fail(errbuf, errlen, "header: 'shape' has more than %d dimensions",
                        XCONV_NPY_MAX_DIMS);
        if (cur_int(c, &a->shape[a->ndim], errbuf, errlen)) return -1;
        a->ndim++;
        bool comma = cur_accept(c, ',');
        if (cur_accept(c, ')')) {
            /* Python spells a 1-tuple "(n,)"; "(n)" is just n, which NumPy rejects too. */
            if (a->ndim == 1 && !comma)
                return xconv_tool_fail(errbuf, errlen, "header: 'shape' is not a tuple");
            return 0;
        }
        if (!comma) return xconv_tool_fail(errbuf, errlen, "header: expected ',' or ')' in 'shape'");
    }
}

static int parse_header(cursor *c, npy_array *a, char *errbuf, size_t errlen)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (!cur_accept(c, '{')) return xconv_tool_fail(errbuf, errlen, "header: not a dict literal");
    for (;;) {
        if (cur_accept(c, '}')) break;
        char key[32];
        if (cur_string(c, key, sizeof key, errbuf, errlen)) return -1;
        if (!cur_accept(c, ':')) return xconv_tool_fail(errbuf, errlen, "header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0) {
            if (have_descr) return xconv_tool_fail(errbuf, errlen, "header: duplicate key 'descr'");
            char descr[32];
            if (cur_string(c, descr, sizeof descr, errbuf, errlen)) {
                /* A list here is a structured dtype, which is valid NumPy but not numeric. */
                return xconv_tool_fail(errbuf, errlen, "header: 'descr' must be a simple numeric dtype string");
            }
            if (parse_descr(descr, a, errbuf, errlen)) return -1;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_order) return xconv_tool_fail(errbuf, errlen, "header: duplicate key 'fortran_order'");
            char word[8];
            cur_word(c, word, sizeof word);
            if (strcmp(word, "True") == 0)
                a->fortran_order = true;
            else if (strcmp(word, "False") == 0)
                a->fortran_order = false;
            else
                return xconv_tool_fail(errbuf, errlen, "header: 'fortran_order' must be True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape) return xconv_tool_fail(errbuf, errlen, "header: duplicate key 'shape'");
            if (parse_shape(c, a, errbuf, errlen)) return -1;
            have_shape = true;
        } else {
            return xconv_tool_fail(errbuf, errlen, "header: unexpected key '%s'", key);
        }
        if (cur_accept(c, '}')) break;
        if (!cur_accept(c, ',')) return xconv_tool_fail(errbuf, errlen, "header: expected ',' or '}'");
    }
    if (!have_descr) return xconv_tool_fail(errbuf, errlen, "header: missing key 'descr'");
    if (!have_order) return xconv_tool_fail(errbuf, errlen, "header: missing key 'fortran_order'");
    if (!have_shape) return xconv_tool_fail(errbuf, errlen, "header: missing key 'shape'");
    cur_skip_space(c);
    if (c->pos != c->len)
        return xconv_tool_fail(errbuf, errlen, "header: unexpected bytes after the dict at byte %zu", c->pos);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Parse and load                                                                           */
/* ---------------------------------------------------------------------------------------- */

int xconv_npy_parse(const uint8_t *bytes, size_t len, npy_array *out, char *errbuf,
                    size_t errlen)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(bytes, magic, sizeof magic) != 0)
        return xconv_tool_fail(errbuf, errlen, "not a .npy file (bad magic)");
    out->version_major = bytes[6];
    out->version_minor = bytes[7];
    size_t header_len, start;
    if (bytes[6] == 1 && bytes[7] == 0) {
        header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
        start = 10;
    } else if ((bytes[6] == 2 || bytes[6] == 3) && bytes[7] == 0) {
        if (len < 12) return xconv_tool_fail(errbuf, errlen, "truncated .npy preamble");
        header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 |
                     (size_t)bytes[11] << 24;
        start = 12;
    } else {
        return xconv_tool_fail(errbuf, errlen, "unsupported .npy format version %d.%d", bytes[6], bytes[7]);
    }
    if (header_len > len - start)
        return xconv_tool_fail(errbuf, errlen, "truncated header: %zu bytes declared, %zu present",
                    header_len, len - start);

    cursor c = {bytes + start, header_len, 0};
    if (parse_header(&c, out, errbuf, errlen)) return -1;

    int64_t count = 1;
    for (int i = 0; i < out->ndim; i++) {
        if (out->shape[i] != 0 && count > INT64_MAX / out->shape[i])
            return xconv_tool_fail(errbuf, errlen, "shape product overflows 64 bits");
        count *= out->shape[i];
    }
    size_t avail = len - start - header_len;
    if ((uint64_t)count > SIZE_MAX / (size_t)out->itemsize)
        return xconv_tool_fail(errbuf, errlen, "array of %" PRId64 " elements is too large", count);
    size_t need = (size_t)count * (size_t)out->itemsize;
    if (avail < need)
        return xconv_tool_fail(errbuf, errlen, "truncated data: %zu bytes needed, %zu present", need, avail);
    if (avail > need)
        return xconv_tool_fail(errbuf, errlen, "%zu unexpected bytes after the data", avail - need);
    out->count = count;
    out->data = bytes + start + header_len;
    out->data_bytes = need;
    return 0;
}

xconv_dtype xconv_npy_dtype(const npy_array *a)
{
    switch (a->kind) {
    case 'u':
        return a->itemsize == 1   ? XCONV_DTYPE_U8
               : a->itemsize == 2 ? XCONV_DTYPE_U16
               : a->itemsize == 4 ? XCONV_DTYPE_U32
                                  : XCONV_DTYPE_U64;
    case 'i':
        return a->itemsize == 1   ? XCONV_DTYPE_I8
               : a->itemsize == 2 ? XCONV_DTYPE_I16
               : a->itemsize == 4 ? XCONV_DTYPE_I32
                                  : XCONV_DTYPE_I64;
    case 'f':
        return a->itemsize == 2 ? XCONV_DTYPE_F16
               : a->itemsize == 4 ? XCONV_DTYPE_F32
                                  : XCONV_DTYPE_F64;
    case 'c': return a->itemsize == 8 ? XCONV_DTYPE_C64 : XCONV_DTYPE_C128;
    default: return XCONV_DTYPE_INVALID;
    }
}

int xconv_npy_load(const char *path, uint8_t **bytes_out, npy_array *out, char *errbuf,
                   size_t errlen)
{
    *bytes_out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return xconv_tool_fail(errbuf, errlen, "%s", strerror(errno)), 1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nbuf) {
                free(buf);
                fclose(f);
                return xconv_tool_fail(errbuf, errlen, "out of memory reading the file"), 1;
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int read_error = ferror(f);
    int saved = errno;
    fclose(f);
    if (read_error) {
        free(buf);
        return xconv_tool_fail(errbuf, errlen, "%s", strerror(saved)), 1;
    }
    if (xconv_npy_parse(buf, len, out, errbuf, errlen)) {
        free(buf);
        return 2;
    }
    *bytes_out = buf;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Write                                                                                    */
/* ---------------------------------------------------------------------------------------- */

const char *xconv_npy_descr(xconv_dtype dtype)
{
    switch (dtype) {
    case XCONV_DTYPE_U8: return "|u1";
    case XCONV_DTYPE_I8: return "|i1";
    case XCONV_DTYPE_U16: return "<u2";
    case XCONV_DTYPE_I16: return "<i2";
    case XCONV_DTYPE_U32: return "<u4";
    case XCONV_DTYPE_I32: return "<i4";
    case XCONV_DTYPE_U64: return "<u8";
    case XCONV_DTYPE_I64: return "<i8";
    case XCONV_DTYPE_F16: return "<f2";
    case XCONV_DTYPE_F32: return "<f4";
    case XCONV_DTYPE_F64: return "<f8";
    case XCONV_DTYPE_C64: return "<c8";
    case XCONV_DTYPE_C128: return "<c16";
    default: return NULL;
    }
}

/* The header dict padded so that the data starts at a multiple of 64 bytes, as NumPy does. */
static int format_header(char *buf, size_t size, size_t preamble, const char *descr, int ndim,
                         const int64_t *shape, size_t *out_len)
{
    size_t n = 0;
    int w = snprintf(buf, size, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    if (w < 0 || (size_t)w >= size) return -1;
    n = (size_t)w;
    for (int i = 0; i < ndim; i++) {
        w = snprintf(buf + n, size - n, "%s%" PRId64, i ? ", " : "", shape[i]);
        if (w < 0 || (size_t)w >= size - n) return -1;
        n += (size_t)w;
    }
    w = snprintf(buf + n, size - n, "%s), }", ndim == 1 ? "," : "");
    if (w < 0 || (size_t)w >= size - n) return -1;
    n += (size_t)w;
    size_t total = (preamble + n + 1 + 63) / 64 * 64;
    if (total - preamble >= size) return -1;
    while (preamble + n + 1 < total) buf[n++] = ' ';
    buf[n++] = '\n';
    *out_len = n;
    return 0;
}

int xconv_npy_save(const char *path, const char *descr, int ndim, const int64_t *shape,
                   const void *data, size_t data_bytes, char *errbuf, size_t errlen)
{
    if (ndim < 0 || ndim > XCONV_NPY_MAX_DIMS)
        return xconv_tool_fail(errbuf, errlen, "cannot write an array of rank %d", ndim), 1;
    char header[4096];
    size_t header_len;
    /* 32 dims of 20 digits fit easily; version 1.0 suffices (header < 64 KiB). */
    if (format_header(header, sizeof header, 10, descr, ndim, shape, &header_len))
        return xconv_tool_fail(errbuf, errlen, "header too long"), 1;
    uint8_t preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(header_len & 0xff),
                            (uint8_t)(header_len >> 8)};

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return xconv_tool_fail(errbuf, errlen, "out of memory"), 1;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return xconv_tool_fail(errbuf, errlen, "cannot create a temporary file: %s", strerror(e)), 1;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return xconv_tool_fail(errbuf, errlen, "%s", strerror(e)), 1;
    }
    bool ok = fwrite(preamble, 1, sizeof preamble, f) == sizeof preamble &&
              fwrite(header, 1, header_len, f) == header_len &&
              (data_bytes == 0 || fwrite(data, 1, data_bytes, f) == data_bytes);
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    /* mkstemp creates 0600; give the result the permissions a plain fopen would. */
    if (ok) {
        mode_t mask = umask(0);
        umask(mask);
        if (chmod(tmp, 0666 & ~mask) != 0) {
            ok = false;
            e = errno;
        }
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return xconv_tool_fail(errbuf, errlen, "%s", strerror(e)), 1;
    }
    free(tmp);
    return 0;
}
