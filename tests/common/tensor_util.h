/*
 * tensor_util.h — header-only helpers shared by the C tests: a deterministic RNG, the tests'
 * own dtype table, an independent codec for the reduced float formats (f16, bf16, f8e4m3,
 * f8e5m2), element load/store through any tensor view, logical <-> layout index maps and
 * canary-filled buffers.
 *
 * Nothing here calls the library's conversion or convolution code: these helpers are the
 * oracle side, so a test can check the library against them. Every function is static
 * inline so that a test including this header but using only part of it builds warning-free.
 */
#ifndef XCONV_TEST_TENSOR_UTIL_H
#define XCONV_TEST_TENSOR_UTIL_H

#include "xconv.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* Deterministic random numbers (splitmix64): the same seed gives the same test everywhere   */
/* ---------------------------------------------------------------------------------------- */

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (inclusive); the tiny modulo bias does not matter for tests. */
static inline int64_t tu_int(tu_rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1u;
    return (int64_t)((uint64_t)lo + (span ? tu_next(r) % span : tu_next(r)));
}

/* Uniform in [0, 1). */
static inline double tu_unit(tu_rng *r) { return (double)(tu_next(r) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------------------------------- */
/* The tests' own dtype table (written from DESIGN.md §2, not from the library's)            */
/* ---------------------------------------------------------------------------------------- */

typedef enum tu_kind { TU_INT, TU_REDUCED, TU_F32, TU_F64, TU_C64, TU_C128 } tu_kind;

typedef struct tu_dtype_info {
    xconv_dtype dtype;
    const char *name;
    size_t      size;
    tu_kind     kind;
    int         bits;       /* integers: value bits */
    bool        is_signed;  /* integers */
} tu_dtype_info;

static inline const tu_dtype_info *tu_info(xconv_dtype dt)
{
    static const tu_dtype_info table[] = {
        {XCONV_DTYPE_INVALID, "invalid", 0, TU_INT, 0, false},
        {XCONV_DTYPE_U8, "u8", 1, TU_INT, 8, false},
        {XCONV_DTYPE_I8, "i8", 1, TU_INT, 8, true},
        {XCONV_DTYPE_U16, "u16", 2, TU_INT, 16, false},
        {XCONV_DTYPE_I16, "i16", 2, TU_INT, 16, true},
        {XCONV_DTYPE_U32, "u32", 4, TU_INT, 32, false},
        {XCONV_DTYPE_I32, "i32", 4, TU_INT, 32, true},
        {XCONV_DTYPE_U64, "u64", 8, TU_INT, 64, false},
        {XCONV_DTYPE_I64, "i64", 8, TU_INT, 64, true},
        {XCONV_DTYPE_F8E4M3, "f8e4m3", 1, TU_REDUCED, 8, true},
        {XCONV_DTYPE_F8E5M2, "f8e5m2", 1, TU_REDUCED, 8, true},
        {XCONV_DTYPE_F16, "f16", 2, TU_REDUCED, 16, true},
        {XCONV_DTYPE_BF16, "bf16", 2, TU_REDUCED, 16, true},
        {XCONV_DTYPE_F32, "f32", 4, TU_F32, 32, true},
        {XCONV_DTYPE_F64, "f64", 8, TU_F64, 64, true},
        {XCONV_DTYPE_C64, "c64", 8, TU_C64, 64, true},
        {XCONV_DTYPE_C128, "c128", 16, TU_C128, 128, true},
    };
    if ((int)dt <= 0 || (int)dt >= (int)(sizeof table / sizeof table[0])) return &table[0];
    return &table[dt];
}

static inline bool tu_is_int(xconv_dtype dt) { return dt != XCONV_DTYPE_INVALID && tu_info(dt)->kind == TU_INT; }
static inline bool tu_is_complex(xconv_dtype dt)
{
    return tu_info(dt)->kind == TU_C64 || tu_info(dt)->kind == TU_C128;
}

/* The 8 integer dtypes and the 8 floating ones, for loops. */
static const xconv_dtype tu_int_dtypes[8] = {
    XCONV_DTYPE_U8,  XCONV_DTYPE_I8,  XCONV_DTYPE_U16, XCONV_DTYPE_I16,
    XCONV_DTYPE_U32, XCONV_DTYPE_I32, XCONV_DTYPE_U64, XCONV_DTYPE_I64};
static const xconv_dtype tu_float_dtypes[8] = {
    XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F16, XCONV_DTYPE_BF16,
    XCONV_DTYPE_F32,    XCONV_DTYPE_F64,    XCONV_DTYPE_C64, XCONV_DTYPE_C128};

/* Bits of y kept by integer results: 2^bits - 1 (all ones for 64). */
static inline uint64_t tu_mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1u; }

/* Two's complement reinterpretation without implementation-defined conversions. */
static inline int64_t tu_as_signed(uint64_t u)
{
    int64_t s;
    memcpy(&s, &u, sizeof s);
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* Reduced float formats: decode by the definition, round by searching the encodings         */
/* ---------------------------------------------------------------------------------------- */

/* has_inf: IEEE-style (all-ones exponent is inf/NaN). Otherwise OCP "FN": no infinities, only
 * the all-ones pattern (S.1111.111) is NaN, and overflow saturates to the largest finite. */
typedef struct tu_fmt {
    int  ebits, mbits, bias;
    bool has_inf;
} tu_fmt;

static inline tu_fmt tu_fmt_of(xconv_dtype dt)
{
    switch (dt) {
    case XCONV_DTYPE_F16: return (tu_fmt){5, 10, 15, true};
    case XCONV_DTYPE_BF16: return (tu_fmt){8, 7, 127, true};
    case XCONV_DTYPE_F8E5M2: return (tu_fmt){5, 2, 15, true};
    case XCONV_DTYPE_F8E4M3: return (tu_fmt){4, 3, 7, false};
    default: return (tu_fmt){0, 0, 0, false};
    }
}

static inline uint32_t tu_mf_sign_bit(const tu_fmt *f) { return 1u << (f->ebits + f->mbits); }

/* The largest positive finite encoding. */
static inline uint32_t tu_mf_max_code(const tu_fmt *f)
{
    uint32_t e_all = (1u << f->ebits) - 1u, m_all = (1u << f->mbits) - 1u;
    return f->has_inf ? (e_all << f->mbits) - 1u : (e_all << f->mbits) | (m_all - 1u);
}

static inline double tu_mf_decode(const tu_fmt *f, uint32_t bits)
{
    uint32_t e_all = (1u << f->ebits) - 1u, m_all = (1u << f->mbits) - 1u;
    uint32_t e = (bits >> f->mbits) & e_all, m = bits & m_all;
    double v;
    if (f->has_inf && e == e_all)
        v = m ? NAN : INFINITY;
    else if (!f->has_inf && e == e_all && m == m_all)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return (bits & tu_mf_sign_bit(f)) ? -v : v;
}

static inline bool tu_mf_is_nan(const tu_fmt *f, uint32_t bits) { return isnan(tu_mf_decode(f, bits)); }

/* Round-to-nearest-even of any double, found by binary search over the (monotone) positive
 * encodings rather than by bit manipulation, so it shares no logic with the library. */
static inline uint32_t tu_mf_round(const tu_fmt *f, double v)
{
    uint32_t sign = signbit(v) ? tu_mf_sign_bit(f) : 0u;
    uint32_t e_all = (1u << f->ebits) - 1u;
    if (isnan(v)) return f->has_inf ? (e_all << f->mbits) | (1u << (f->mbits - 1)) : sign | 0x7Fu;
    double   a = fabs(v);
    uint32_t top = tu_mf_max_code(f);
    double   maxv = tu_mf_decode(f, top);
    if (a > maxv) {
        if (!f->has_inf) return sign | top;
        /* The next binade's first value, were it finite: ties between it and max go to it
         * (its mantissa is even), which is infinity. */
        double next = ldexp(1.0, (int)e_all - f->bias);
        return sign | (a >= (maxv + next) / 2 ? e_all << f->mbits : top);
    }
    uint32_t lo = 0, hi = top;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1u) / 2u;
        if (tu_mf_decode(f, mid) <= a)
            lo = mid;
        else
            hi = mid - 1u;
    }
    if (lo == top || tu_mf_decode(f, lo) == a) return sign | lo;
    double dl = a - tu_mf_decode(f, lo), dh = tu_mf_decode(f, lo + 1u) - a;
    uint32_t c = dl < dh ? lo : dh < dl ? lo + 1u : ((lo & 1u) ? lo + 1u : lo);
    return sign | c;
}

/* Whether v is exactly representable in dtype dt (integers: always true here; the caller
 * handles ranges by wrapping). */
static inline bool tu_exact_in(xconv_dtype dt, double v)
{
    switch (tu_info(dt)->kind) {
    case TU_REDUCED: {
        tu_fmt f = tu_fmt_of(dt);
        return tu_mf_decode(&f, tu_mf_round(&f, v)) == v;
    }
    case TU_F32:
    case TU_C64: return (double)(float)v == v;
    default: return true;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Elements                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* One element in a dtype-neutral form: integers as their bits sign- or zero-extended to 64
 * (u) with re = their value; floats as re (and im for complex). */
typedef struct tu_val {
    uint64_t u;
    double   re, im;
} tu_val;

static inline tu_val tu_int_val(int64_t v) { return (tu_val){(uint64_t)v, (double)v, 0.0}; }

static inline uint64_t tu_read_bits(const unsigned char *p, size_t size)
{
    switch (size) {
    case 1: { uint8_t v; memcpy(&v, p, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static inline void tu_write_bits(unsigned char *p, size_t size, uint64_t bits)
{
    switch (size) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(p, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    default: memcpy(p, &bits, 8); break;
    }
}

/* Loads element `index` (in elements from `base`). */
static inline tu_val tu_load(xconv_dtype dt, const void *base, int64_t index)
{
    const tu_dtype_info *in = tu_info(dt);
    const unsigned char *p = (const unsigned char *)base + index * (int64_t)in->size;
    tu_val v = {0, 0.0, 0.0};
    switch (in->kind) {
    case TU_INT: {
        uint64_t b = tu_read_bits(p, in->size);
        if (in->is_signed && in->bits < 64 && ((b >> (in->bits - 1)) & 1u)) b |= ~tu_mask(in->bits);
        v.u = b;
        v.re = in->is_signed ? (double)tu_as_signed(b) : (double)b;
        break;
    }
    case TU_REDUCED: {
        tu_fmt f = tu_fmt_of(dt);
        v.re = tu_mf_decode(&f, (uint32_t)tu_read_bits(p, in->size));
        break;
    }
    case TU_F32: { float x; memcpy(&x, p, 4); v.re = x; break; }
    case TU_F64: memcpy(&v.re, p, 8); break;
    case TU_C64: { float x[2]; memcpy(x, p, 8); v.re = x[0]; v.im = x[1]; break; }
    case TU_C128: { double x[2]; memcpy(x, p, 16); v.re = x[0]; v.im = x[1]; break; }
    }
    return v;
}

/* Stores v at element `index`: integers keep the low bits of u, floats round re (and im)
 * to nearest even. */
static inline void tu_store(xconv_dtype dt, void *base, int64_t index, tu_val v)
{
    const tu_dtype_info *in = tu_info(dt);
    unsigned char *p = (unsigned char *)base + index * (int64_t)in->size;
    switch (in->kind) {
    case TU_INT: tu_write_bits(p, in->size, v.u); break;
    case TU_REDUCED: {
        tu_fmt f = tu_fmt_of(dt);
        tu_write_bits(p, in->size, tu_mf_round(&f, v.re));
        break;
    }
    case TU_F32: { float x = (float)v.re; memcpy(p, &x, 4); break; }
    case TU_F64: memcpy(p, &v.re, 8); break;
    case TU_C64: { float x[2] = {(float)v.re, (float)v.im}; memcpy(p, x, 8); break; }
    case TU_C128: { double x[2] = {v.re, v.im}; memcpy(p, x, 16); break; }
    }
}

/* Whether an actual element equals the expected one exactly: integers in their low `bits`,
 * floats by value (any NaN equals any NaN). +0 equals -0 here: DESIGN.md does not fix the
 * sign of an exactly-zero sum, which depends on whether an engine starts from 0 or from the
 * first product; the conversion tests check signed zeros bit for bit themselves. */
static inline bool tu_same(xconv_dtype dt, tu_val actual, tu_val expected)
{
    const tu_dtype_info *in = tu_info(dt);
    if (in->kind == TU_INT) return ((actual.u ^ expected.u) & tu_mask(in->bits)) == 0;
    bool re_ok = (isnan(actual.re) && isnan(expected.re)) || actual.re == expected.re;
    bool im_ok = (isnan(actual.im) && isnan(expected.im)) || actual.im == expected.im;
    return re_ok && im_ok;
}

/* Whether integer v lies in the range of integer dtype dt. */
static inline bool tu_fits_int(xconv_dtype dt, int64_t v)
{
    const tu_dtype_info *in = tu_info(dt);
    if (in->bits >= 64) return in->is_signed || v >= 0;
    int64_t lim = (int64_t)1 << (in->bits - (in->is_signed ? 1 : 0));
    return in->is_signed ? v >= -lim && v < lim : v >= 0 && v < lim;
}

/* The value the library must produce when the exact result `exact` is rounded once to dt
 * (integers: wrap; floats: nearest even). */
static inline tu_val tu_round_to(xconv_dtype dt, tu_val exact)
{
    unsigned char buf[16];
    tu_store(dt, buf, 0, exact);
    return tu_load(dt, buf, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Tensor views                                                                             */
/* ---------------------------------------------------------------------------------------- */

/* Element offset (from the buffer start) of multi-index idx. */
static inline int64_t tu_offset(const xconv_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    if (t->strided) {
        off = t->offset;
        for (int d = 0; d < t->rank; d++) off += idx[d] * t->strides[d];
    } else {
        for (int d = 0; d < t->rank; d++) off = off * t->shape[d] + idx[d];
    }
    return off;
}

static inline int64_t tu_numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

/* Steps idx through shape in row-major order; false after the last index. */
static inline bool tu_next_index(int rank, const int64_t *shape, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* A contiguous tensor in a fresh buffer filled with `fill` bytes (the canary). Free with
 * free(t.data). Zero-element tensors still get a small buffer so canaries can be checked. */
static inline xconv_tensor tu_alloc(xconv_dtype dt, int rank, const int64_t *shape, int fill)
{
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int d = 0; d < rank; d++) t.shape[d] = shape[d];
    size_t bytes = (size_t)tu_numel(rank, shape) * tu_info(dt)->size;
    t.data = malloc(bytes ? bytes : 64);
    memset(t.data, fill, bytes ? bytes : 64);
    t.buffer_bytes = bytes;
    return t;
}

/* True when all `bytes` bytes at p equal `fill`. */
static inline bool tu_all_bytes(const void *p, size_t bytes, int fill)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < bytes; i++)
        if (c[i] != (unsigned char)fill) return false;
    return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Logical problems and the layout maps of xconv.h                                          */
/* ---------------------------------------------------------------------------------------- */

/* A problem in logical terms (sizes of spatial dims beyond d are 1 and unused). */
typedef struct tu_problem {
    xconv_op     op;
    int          d;
    xconv_layout layout;
    int64_t      n, cin, cout, groups;
    int64_t      x[3], k[3], y[3];
    int64_t      stride[3], dil[3], lo[3], hi[3], opad[3];
    bool         has_bias;
    xconv_dtype  xdt, ydt;
    bool         allow_tf32; /* the plan option (reduced-precision f32 engines may run) */
} tu_problem;

/* DESIGN.md §1's output size, written out again here. */
static inline int64_t tu_out_size(xconv_op op, int64_t x, int64_t k, int64_t s, int64_t t,
                                  int64_t lo, int64_t hi, int64_t opad)
{
    if (op == XCONV_OP_CONV) {
        int64_t span = x + lo + hi - t * (k - 1) - 1;
        return span < 0 ? 0 : span / s + 1;
    }
    return (x - 1) * s - lo - hi + t * (k - 1) + opad + 1;
}

/* Fills y[] from the rest and sets unit values beyond d. */
static inline void tu_problem_finish(tu_problem *p)
{
    for (int i = 0; i < 3; i++) {
        if (i >= p->d) {
            p->x[i] = p->k[i] = p->stride[i] = p->dil[i] = 1;
            p->lo[i] = p->hi[i] = p->opad[i] = 0;
        }
        p->y[i] = tu_out_size(p->op, p->x[i], p->k[i], p->stride[i], p->dil[i], p->lo[i],
                              p->hi[i], p->opad[i]);
    }
}

static inline xconv_params tu_params(const tu_problem *p)
{
    xconv_params q;
    memset(&q, 0, sizeof q);
    q.op = p->op;
    q.spatial_rank = p->d;
    q.layout = p->layout;
    for (int i = 0; i < p->d; i++) {
        q.stride[i] = p->stride[i];
        q.dilation[i] = p->dil[i];
        q.pad_lo[i] = p->lo[i];
        q.pad_hi[i] = p->hi[i];
        q.output_padding[i] = p->opad[i];
    }
    q.groups = p->groups;
    return q;
}

/* Shape of an activation (x or y) with n, c channels and spatial sizes sp in layout L. */
static inline void tu_act_shape(xconv_layout L, int d, int64_t n, int64_t c, const int64_t *sp,
                                int64_t *shape)
{
    shape[0] = n;
    for (int i = 0; i < d; i++) shape[L == XCONV_LAYOUT_CHANNELS_FIRST ? 2 + i : 1 + i] = sp[i];
    shape[L == XCONV_LAYOUT_CHANNELS_FIRST ? 1 : 1 + d] = c;
}

/* The multi-index of activation element (n, c, s) in layout L: the same map as the shape. */
static inline void tu_act_index(xconv_layout L, int d, int64_t n, int64_t c, const int64_t *s,
                                int64_t *idx)
{
    tu_act_shape(L, d, n, c, s, idx);
}

/*
 * Weights are addressed logically by (G, o, i, k): group G, o the y channel within the group,
 * i the x channel within the group, k the kernel position. Per xconv.h / DESIGN.md §1:
 *   conv, channels-first:           w[G*cout_g + o, i, k]      ([Cout, Cin/g, K])
 *   conv_transpose, channels-first: w[G*cin_g + i, o, k]       ([Cin, Cout/g, K])
 *   both ops, channels-last (MLX):  w[G*cout_g + o, k, i]      ([Cout, K, Cin/g])
 */
static inline void tu_w_shape(xconv_op op, xconv_layout L, int d, int64_t cin, int64_t cout,
                              int64_t groups, const int64_t *k, int64_t *shape)
{
    if (L == XCONV_LAYOUT_CHANNELS_LAST) {
        shape[0] = cout;
        for (int i = 0; i < d; i++) shape[1 + i] = k[i];
        shape[1 + d] = cin / groups;
        return;
    }
    shape[0] = op == XCONV_OP_CONV ? cout : cin;
    shape[1] = op == XCONV_OP_CONV ? cin / groups : cout / groups;
    for (int i = 0; i < d; i++) shape[2 + i] = k[i];
}

static inline void tu_w_index(xconv_op op, xconv_layout L, int d, int64_t cin_g, int64_t cout_g,
                              int64_t G, int64_t o, int64_t i, const int64_t *k, int64_t *idx)
{
    if (L == XCONV_LAYOUT_CHANNELS_LAST) {
        idx[0] = G * cout_g + o;
        for (int j = 0; j < d; j++) idx[1 + j] = k[j];
        idx[1 + d] = i;
        return;
    }
    idx[0] = op == XCONV_OP_CONV ? G * cout_g + o : G * cin_g + i;
    idx[1] = op == XCONV_OP_CONV ? i : o;
    for (int j = 0; j < d; j++) idx[2 + j] = k[j];
}

/* Shapes of the four tensors of a problem in its layout. */
static inline void tu_shapes(const tu_problem *p, int64_t *xs, int64_t *ws, int64_t *bs,
                             int64_t *ys)
{
    tu_act_shape(p->layout, p->d, p->n, p->cin, p->x, xs);
    tu_w_shape(p->op, p->layout, p->d, p->cin, p->cout, p->groups, p->k, ws);
    bs[0] = p->cout;
    tu_act_shape(p->layout, p->d, p->n, p->cout, p->y, ys);
}

/* Runs the problem through xconv_conv with engine `engine` forced (NULL: the planner's
 * choice). *used receives the engine that ran (or NULL). */
static inline xconv_status tu_conv(xconv_context *ctx, const tu_problem *p, const xconv_tensor *x,
                                   const xconv_tensor *w, const xconv_tensor *bias,
                                   const xconv_tensor *y, const char *engine, const char **used,
                                   xconv_error *err)
{
    xconv_params       q = tu_params(p);
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = engine;
    o.allow_tf32 = p->allow_tf32;
    *used = NULL;
    return xconv_conv(ctx, &q, x, w, p->has_bias ? bias : NULL, y, &o, used, err);
}

/* "conv2d n1 cin2 cout4 x5x5 k3x3 s1x1 d1x1 p1:0x.. op0x.. g2 i8->i32 nchw" for messages. */
static inline void tu_describe(const tu_problem *p, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s%dd n%" PRId64 " cin%" PRId64 " cout%" PRId64 " g%" PRId64,
                     p->op == XCONV_OP_CONV ? "conv" : "conv_transpose", p->d, p->n, p->cin,
                     p->cout, p->groups);
    for (int i = 0; i < p->d && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n,
                      " [x%" PRId64 " k%" PRId64 " s%" PRId64 " d%" PRId64 " p%" PRId64
                      ":%" PRId64 " op%" PRId64 "]",
                      p->x[i], p->k[i], p->stride[i], p->dil[i], p->lo[i], p->hi[i], p->opad[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " %s->%s %s%s", tu_info(p->xdt)->name,
                 tu_info(p->ydt)->name,
                 p->layout == XCONV_LAYOUT_CHANNELS_FIRST ? "channels_first" : "channels_last",
                 p->has_bias ? " bias" : "");
}

#endif
