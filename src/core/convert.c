/*
 * convert.c — moving values between storage dtypes and compute types, a row at a time.
 * Every engine converts at its edges through these, so the arithmetic kernels exist per
 * compute type only (DESIGN.md §4).
 *
 * Integers widen by C's conversion to uint64_t, which is exactly "sign- or zero-extend
 * then wrap", and narrow by truncation; both are defined behaviour for every value.
 * Reduced floats go through f32, where they are exact, and round once on the way out.
 */
#include "core/internal.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define XCONV_F16C 1
#else
#define XCONV_F16C 0
#endif

/* Reads one integer element as its value modulo 2^64. */
static inline uint64_t int_at(xconv_dtype d, const char *p)
{
    switch (d) {
#define XCONV_DTYPE(E, name, ctype, bytes, fam, bits, sgn)                              \
    case XCONV_DTYPE_##E:                                                              \
        if (XCONV_FAMILY_##fam == XCONV_FAMILY_INT) {                                  \
            ctype v;                                                                   \
            memcpy(&v, p, sizeof v);                                                   \
            return (uint64_t)v;                                                        \
        }                                                                              \
        return 0;
#include "core/dtypes.def"
#undef XCONV_DTYPE
    default: return 0;
    }
}

/* Writes the low bits(d) bits of v. */
static inline void int_put(xconv_dtype d, char *p, uint64_t v)
{
    switch (d) {
    case XCONV_DTYPE_U8: case XCONV_DTYPE_I8: { uint8_t t = (uint8_t)v; memcpy(p, &t, 1); break; }
    case XCONV_DTYPE_U16: case XCONV_DTYPE_I16: { uint16_t t = (uint16_t)v; memcpy(p, &t, 2); break; }
    case XCONV_DTYPE_U32: case XCONV_DTYPE_I32: { uint32_t t = (uint32_t)v; memcpy(p, &t, 4); break; }
    case XCONV_DTYPE_U64: case XCONV_DTYPE_I64: memcpy(p, &v, 8); break;
    default: break;
    }
}

/* Reads one real float element; exact for every real dtype. */
static inline double real_at(xconv_dtype d, const char *p)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: return xconv_f8e4m3_to_f32((uint8_t)*p);
    case XCONV_DTYPE_F8E5M2: return xconv_f8e5m2_to_f32((uint8_t)*p);
    case XCONV_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); return xconv_f16_to_f32(h); }
    case XCONV_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return xconv_bf16_to_f32(h); }
    case XCONV_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case XCONV_DTYPE_F64: { double f; memcpy(&f, p, 8); return f; }
    default: return 0;
    }
}

/* Writes a float computed in f32 (every dtype but f64) or f64 (f64 only), rounding once. */
static inline void real_put_f32(xconv_dtype d, char *p, float v)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: *(uint8_t *)p = xconv_f32_to_f8e4m3(v); break;
    case XCONV_DTYPE_F8E5M2: *(uint8_t *)p = xconv_f32_to_f8e5m2(v); break;
    case XCONV_DTYPE_F16: { uint16_t h = xconv_f32_to_f16(v); memcpy(p, &h, 2); break; }
    case XCONV_DTYPE_BF16: { uint16_t h = xconv_f32_to_bf16(v); memcpy(p, &h, 2); break; }
    case XCONV_DTYPE_F32: memcpy(p, &v, 4); break;
    case XCONV_DTYPE_F64: { double t = v; memcpy(p, &t, 8); break; }
    default: break;
    }
}

/* Whether a storage dtype holds exactly the compute type's bits, so a dense row is a copy. */
bool xconv__same_bits(xconv_ctype ct, xconv_dtype d)
{
    switch (ct) {
    case XCONV_CT_U32: return d == XCONV_DTYPE_U32 || d == XCONV_DTYPE_I32;
    case XCONV_CT_U64: return d == XCONV_DTYPE_U64 || d == XCONV_DTYPE_I64;
    case XCONV_CT_F32: return d == XCONV_DTYPE_F32;
    case XCONV_CT_F64: return d == XCONV_DTYPE_F64;
    case XCONV_CT_C64: return d == XCONV_DTYPE_C64;
    case XCONV_CT_C128: return d == XCONV_DTYPE_C128;
    default: return false;
    }
}

/*
 * Dense rows of the common conversions as plain typed loops, which the compiler vectorizes
 * (the per-element switches below do not): integers widened into u32/u64 or truncated back,
 * bf16 <-> f32. Each computes exactly what the general path computes. Returns false when
 * (ct, d) has no dense loop.
 */
/* f16 <-> f32 in integer and float steps that vectorize, equal to xconv_f16_to_f32 and
 * xconv_f32_to_f16 for every input (NaN in: the same canonical NaN out). */
static inline float f16_decode(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, m = h & 0x3ffu;
    const uint32_t normal = (em << 13) + (112u << 23);        /* rebias the exponent */
    const float sub = (float)m * 0x1p-24f;                    /* exact, no subnormal f32 */
    uint32_t subbits;
    memcpy(&subbits, &sub, 4);
    uint32_t b = em < 0x400u ? subbits : em < 0x7c00u ? normal : em == 0x7c00u ? 0x7f800000u : 0;
    b = em > 0x7c00u ? 0x7fc00000u : b | sign;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* e4m3 (bias 7, no infinities, S.1111.111 is NaN) to f32, as xconv_f8e4m3_to_f32 does. */
static inline float e4m3_decode(uint8_t v)
{
    const uint32_t sign = (uint32_t)(v & 0x80u) << 24, em = v & 0x7fu, m = v & 7u;
    const float sub = (float)m * 0x1p-9f;
    uint32_t subbits;
    memcpy(&subbits, &sub, 4);
    uint32_t b = em < 8u ? subbits : (em << 20) + (120u << 23);
    b = em == 0x7fu ? 0x7fc00000u : b | sign;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static inline uint16_t f16_encode(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    const uint32_t sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
    /* normal f16 range: drop 13 mantissa bits to nearest even; a carry moves the exponent */
    const uint32_t r = a - (112u << 23);
    const uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    /* below 2^-14: |f| + 0.5 rounds at 2^-24 steps, to nearest even, in the FPU */
    float t = (f < 0 ? -f : f) + 0.5f;
    uint32_t tb;
    memcpy(&tb, &t, 4);
    const uint32_t sub = tb - 0x3f000000u;
    const uint32_t mag = a >= 0x477ff000u ? 0x7c00u : a >= 0x38800000u ? normal : sub;
    return (uint16_t)(a > 0x7f800000u ? 0x7e00u | sign : mag | sign);
}

#if XCONV_F16C
/* F16C converts 8 halves per instruction; IEEE conversions, so they equal f16_decode and
 * f16_encode for every number, and NaN lanes are set to the library's NaNs after. */
static bool have_f16c(void)
{
    static int known = -1; /* a benign race: every thread computes the same value */
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX);
    }
    return known;
}

__attribute__((target("avx,f16c"))) static void f16_rows_f16c(const uint16_t *s, float *o,
                                                                  int64_t n)
{
    const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));
        const __m256 is_nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
        _mm256_storeu_ps(o + i, _mm256_or_ps(_mm256_andnot_ps(is_nan, f), _mm256_and_ps(is_nan, nan)));
    }
    for (; i < n; i++) o[i] = f16_decode(s[i]);
}

__attribute__((target("avx,f16c"))) static void f32_rows_f16c(const float *s, uint16_t *o,
                                                                  int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(s + i);
        _mm_storeu_si128((__m128i *)(o + i),
                         _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        int nans = _mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        for (int j = 0; nans; j++, nans >>= 1)
            if (nans & 1) o[i + j] = f16_encode(s[i + j]);
    }
    for (; i < n; i++) o[i] = f16_encode(s[i]);
}
#endif

XCONV_TARGET_CLONES
static bool load_dense(xconv_ctype ct, xconv_dtype d, const void *src, void *dst, int64_t n)
{
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_F16) {
        const uint16_t *s = src;
        float *o = dst;
#if XCONV_F16C
        if (have_f16c()) return f16_rows_f16c(s, o, n), true;
#endif
        for (int64_t i = 0; i < n; i++) o[i] = f16_decode(s[i]);
        return true;
    }
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_F8E5M2) { /* the upper byte of an f16 */
        const uint8_t *s = src;
        float *o = dst;
        for (int64_t i = 0; i < n; i++) o[i] = f16_decode((uint16_t)(s[i] << 8));
        return true;
    }
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_F8E4M3) {
        const uint8_t *s = src;
        float *o = dst;
        for (int64_t i = 0; i < n; i++) o[i] = e4m3_decode(s[i]);
        return true;
    }
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_BF16) {
        const uint16_t *s = src;
        float *o = dst;
        for (int64_t i = 0; i < n; i++) {
            const uint32_t b = (uint32_t)s[i] << 16;
            memcpy(&o[i], &b, 4);
        }
        return true;
    }
    if (ct != XCONV_CT_U32 && ct != XCONV_CT_U64) return false;
    switch (d) {
#define XCONV_DTYPE(E, name, ctype, bytes, fam, bits, sgn)                              \
    case XCONV_DTYPE_##E:                                                              \
        if (XCONV_FAMILY_##fam != XCONV_FAMILY_INT) return false;                      \
        if (ct == XCONV_CT_U32) {                                                      \
            const ctype *s = src;                                                      \
            uint32_t *o = dst;                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = (uint32_t)s[i];                     \
        } else {                                                                       \
            const ctype *s = src;                                                      \
            uint64_t *o = dst;                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = (uint64_t)s[i];                     \
        }                                                                              \
        return true;
#include "core/dtypes.def"
#undef XCONV_DTYPE
    default: return false;
    }
}

#if defined(__GNUC__)
#define XCONV_INLINE static inline __attribute__((always_inline))
#else
#define XCONV_INLINE static inline
#endif

/* f32 bits to an 8-bit float (m mantissa bits, bias b; e4m3 saturates and has one NaN code,
 * e5m2 has infinities), rounding to nearest even: the same codes as xconv_f32_to_f8e4m3 /
 * xconv_f32_to_f8e5m2 (dtypes.c's mini_encode; test_dtypes compares them around every
 * rounding point, and all 2^32 f32 values matched when this was written), but
 * without branches, so that rows of them vectorize. Both candidates are formed, as a
 * subnormal of the target (fixed quantum 2^(1 - b - m)) and as a normal (m bits kept), and
 * the exponent picks one. */
XCONV_INLINE uint8_t f8_encode(uint32_t bits, int m, int b, uint32_t max_finite, uint32_t overflow,
                               uint32_t nan_code)
{
    const uint32_t sign = (bits >> 24) & 0x80u, abs_bits = bits & 0x7fffffffu;
    const int exp_field = (int)(abs_bits >> 23), e = exp_field - 127, emin = 1 - b;
    const uint32_t man = (abs_bits & 0x7fffffu) | 0x800000u; /* value = man * 2^(e - 23) */
    int sh_s = 23 + (emin - m) - e;                           /* >= 24 - m where used */
    sh_s = sh_s > 31 ? 31 : sh_s < 1 ? 1 : sh_s;
    const int sh_n = 23 - m;
    const uint32_t rs = man >> sh_s, rem_s = man & ((1u << sh_s) - 1u), half_s = 1u << (sh_s - 1);
    const uint32_t rn = man >> sh_n, rem_n = man & ((1u << sh_n) - 1u), half_n = 1u << (sh_n - 1);
    /* ties to even, as bit operations (no short-circuit branches, which stop vectorizing) */
    const uint32_t code_s = rs + ((uint32_t)(rem_s > half_s) | ((uint32_t)(rem_s == half_s) & rs & 1u));
    const uint32_t code_n = ((uint32_t)(e + b) << m) + rn +
                            ((uint32_t)(rem_n > half_n) | ((uint32_t)(rem_n == half_n) & rn & 1u)) - (1u << m);
    uint32_t code = e < emin ? code_s : code_n;
    code = e > 2 * b ? overflow : code;   /* far above the range: no shift overflow in code_n */
    code = code > max_finite ? overflow : code;
    code = exp_field == 0 ? 0u : code;    /* f32 subnormals are far below every f8 value */
    code = abs_bits == 0x7f800000u ? overflow : code;
    code = abs_bits > 0x7f800000u ? nan_code : code;
    return (uint8_t)(sign | code);
}

XCONV_INLINE bool store_dense_body(xconv_ctype ct, xconv_dtype d, const void *src, void *dst, int64_t n)
{
    if (ct == XCONV_CT_F32 && (d == XCONV_DTYPE_F8E4M3 || d == XCONV_DTYPE_F8E5M2)) {
        const char *s = src;
        uint8_t *o = dst;
        uint32_t b;
        if (d == XCONV_DTYPE_F8E4M3)
            for (int64_t i = 0; i < n; i++) memcpy(&b, s + 4 * i, 4), o[i] = f8_encode(b, 3, 7, 0x7eu, 0x7eu, 0x7fu);
        else
            for (int64_t i = 0; i < n; i++) memcpy(&b, s + 4 * i, 4), o[i] = f8_encode(b, 2, 15, 0x7bu, 0x7cu, 0x7eu);
        return true;
    }
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_F16) {
        const float *s = src;
        uint16_t *o = dst;
#if XCONV_F16C
        if (have_f16c()) return f32_rows_f16c(s, o, n), true;
#endif
        for (int64_t i = 0; i < n; i++) o[i] = f16_encode(s[i]);
        return true;
    }
    if (ct == XCONV_CT_F32 && d == XCONV_DTYPE_BF16) {
        const float *s = src; /* xconv_f32_to_bf16, branch-free */
        uint16_t *o = dst;
        for (int64_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &s[i], 4);
            const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
            o[i] = (uint16_t)((b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40u : rounded);
        }
        return true;
    }
    if ((ct != XCONV_CT_U32 && ct != XCONV_CT_U64) || xconv__dtype_family(d) != XCONV_FAMILY_INT) return false;
    /* truncation to the storage width, through the unsigned type of that width */
#define STORE_TRUNC(T)                                                                   \
    do {                                                                                 \
        T *o = dst;                                                                      \
        if (ct == XCONV_CT_U32)                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = (T)((const uint32_t *)src)[i];         \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) o[i] = (T)((const uint64_t *)src)[i];         \
    } while (0)
    switch (xconv_dtype_size(d)) {
    case 1: STORE_TRUNC(uint8_t); return true;
    case 2: STORE_TRUNC(uint16_t); return true;
    case 4: STORE_TRUNC(uint32_t); return true;
    case 8: STORE_TRUNC(uint64_t); return true;
    default: return false;
    }
#undef STORE_TRUNC
}

XCONV_TARGET_CLONES
static bool store_dense(xconv_ctype ct, xconv_dtype d, const void *src, void *dst, int64_t n)
{
    return store_dense_body(ct, d, src, dst, n);
}

XCONV_TARGET_CLONES
static bool store_dense_rows(xconv_ctype ct, xconv_dtype d, const void *src, size_t pitch,
                             void *const *dst, int64_t n, int rows)
{
    for (int r = 0; r < rows; r++)
        if (!store_dense_body(ct, d, (const char *)src + pitch * (size_t)r, dst[r], n)) return false;
    return true;
}

void xconv__load_row(xconv_ctype ct, xconv_dtype d, const void *src, int64_t src_stride,
                     void *dst, int64_t n)
{
    if (n > 0 && src_stride == 1 && load_dense(ct, d, src, dst, n)) return;
    if (n > 0 && xconv__same_bits(ct, d)) {
        const size_t cs = xconv__ctype_size(ct);
        if (src_stride == 1) {
            memcpy(dst, src, (size_t)n * cs);
            return;
        }
        /* a strided gather of the compute type's own bits: a fixed-size copy per element,
         * with the size known to the compiler in each branch */
        const char *s = (const char *)src;
        char *o = (char *)dst;
        const int64_t step = n > 1 ? src_stride * (int64_t)cs : 0;
        switch (cs) {
        case 4: for (int64_t i = 0; i < n; i++) memcpy(o + 4 * i, s + i * step, 4); return;
        case 8: for (int64_t i = 0; i < n; i++) memcpy(o + 8 * i, s + i * step, 8); return;
        case 16: for (int64_t i = 0; i < n; i++) memcpy(o + 16 * i, s + i * step, 16); return;
        default: break;
        }
    }
    const char *s = (const char *)src;
    const int64_t step = n > 1 ? src_stride * (int64_t)xconv_dtype_size(d) : 0;
    switch (ct) {
    case XCONV_CT_U32: {
        uint32_t *o = (uint32_t *)dst;
        for (int64_t i = 0; i < n; i++) o[i] = (uint32_t)int_at(d, s + i * step);
        break;
    }
    case XCONV_CT_U64: {
        uint64_t *o = (uint64_t *)dst;
        for (int64_t i = 0; i < n; i++) o[i] = int_at(d, s + i * step);
        break;
    }
    case XCONV_CT_F32: {
        float *o = (float *)dst;
        for (int64_t i = 0; i < n; i++) o[i] = (float)real_at(d, s + i * step);
        break;
    }
    case XCONV_CT_F64: {
        double *o = (double *)dst;
        for (int64_t i = 0; i < n; i++) o[i] = real_at(d, s + i * step);
        break;
    }
    case XCONV_CT_C64: {
        xconv_c64 *o = (xconv_c64 *)dst;
        for (int64_t i = 0; i < n; i++) {
            float v[2];
            if (d == XCONV_DTYPE_C64) {
                memcpy(v, s + i * step, sizeof v);
            } else { /* c128 never computes in c64; kept total for safety */
                double w[2];
                memcpy(w, s + i * step, sizeof w);
                v[0] = (float)w[0], v[1] = (float)w[1];
            }
            o[i].re = v[0], o[i].im = v[1];
        }
        break;
    }
    case XCONV_CT_C128: {
        xconv_c128 *o = (xconv_c128 *)dst;
        for (int64_t i = 0; i < n; i++) {
            double w[2];
            if (d == XCONV_DTYPE_C128) {
                memcpy(w, s + i * step, sizeof w);
            } else {
                float v[2];
                memcpy(v, s + i * step, sizeof v);
                w[0] = v[0], w[1] = v[1];
            }
            o[i].re = w[0], o[i].im = w[1];
        }
        break;
    }
    default: break;
    }
}

void xconv__store_row(xconv_ctype ct, xconv_dtype d, const void *src, void *dst,
                      int64_t dst_stride, int64_t n)
{
    if (n > 0 && dst_stride == 1 && !xconv__same_bits(ct, d) && store_dense(ct, d, src, dst, n))
        return;
    if (n > 0 && dst_stride == 1 && xconv__same_bits(ct, d)) {
        memcpy(dst, src, (size_t)n * xconv__ctype_size(ct));
        return;
    }
    char *o = (char *)dst;
    const int64_t step = n > 1 ? dst_stride * (int64_t)xconv_dtype_size(d) : 0;
    switch (ct) {
    case XCONV_CT_U32: {
        const uint32_t *s = (const uint32_t *)src;
        for (int64_t i = 0; i < n; i++) int_put(d, o + i * step, s[i]);
        break;
    }
    case XCONV_CT_U64: {
        const uint64_t *s = (const uint64_t *)src;
        for (int64_t i = 0; i < n; i++) int_put(d, o + i * step, s[i]);
        break;
    }
    case XCONV_CT_F32: {
        const float *s = (const float *)src;
        for (int64_t i = 0; i < n; i++) real_put_f32(d, o + i * step, s[i]);
        break;
    }
    case XCONV_CT_F64: {
        const double *s = (const double *)src;
        for (int64_t i = 0; i < n; i++) {
            if (d == XCONV_DTYPE_F64) memcpy(o + i * step, &s[i], 8);
            else real_put_f32(d, o + i * step, (float)s[i]);
        }
        break;
    }
    case XCONV_CT_C64: {
        const xconv_c64 *s = (const xconv_c64 *)src;
        for (int64_t i = 0; i < n; i++) {
            if (d == XCONV_DTYPE_C64) {
                float v[2] = {s[i].re, s[i].im};
                memcpy(o + i * step, v, sizeof v);
            } else {
                double v[2] = {s[i].re, s[i].im};
                memcpy(o + i * step, v, sizeof v);
            }
        }
        break;
    }
    case XCONV_CT_C128: {
        const xconv_c128 *s = (const xconv_c128 *)src;
        for (int64_t i = 0; i < n; i++) {
            if (d == XCONV_DTYPE_C128) {
                double v[2] = {s[i].re, s[i].im};
                memcpy(o + i * step, v, sizeof v);
            } else {
                float v[2] = {(float)s[i].re, (float)s[i].im};
                memcpy(o + i * step, v, sizeof v);
            }
        }
        break;
    }
    default: break;
    }
}

void xconv__store_rows(xconv_ctype ct, xconv_dtype d, const void *src, size_t src_pitch,
                       void *const *dst, int64_t dst_stride, int64_t n, int rows)
{
    if (rows > 0 && n > 0 && dst_stride == 1 && !xconv__same_bits(ct, d) &&
        store_dense_rows(ct, d, src, src_pitch, dst, n, rows))
        return; /* a row either converts densely or not, whatever its place */
    for (int r = 0; r < rows; r++)
        xconv__store_row(ct, d, (const char *)src + src_pitch * (size_t)r, dst[r], dst_stride, n);
}
