/*
 * dtypes.c — the dtype table expanded from dtypes.def: names, sizes, families, widening
 * rules, compute types, and the scalar conversions of the reduced float formats.
 */
#include "core/internal.h"

#include <math.h>
#include <string.h>

typedef struct dtype_info {
    const char  *name;
    size_t       size;
    xconv_family family;
    int          bits;
    bool         is_signed;
} dtype_info;

static const dtype_info dtype_table[XCONV_DTYPE_COUNT] = {
    [XCONV_DTYPE_INVALID] = {"invalid", 0, XCONV_FAMILY_INT, 0, false},
#define XCONV_DTYPE(E, name, ctype, bytes, fam, bits, sgn) \
    [XCONV_DTYPE_##E] = {#name, bytes, XCONV_FAMILY_##fam, bits, sgn},
#include "core/dtypes.def"
#undef XCONV_DTYPE
};

bool xconv__dtype_valid(xconv_dtype d) { return d > XCONV_DTYPE_INVALID && d < XCONV_DTYPE_COUNT; }

const char *xconv_dtype_name(xconv_dtype d) { return xconv__dtype_valid(d) ? dtype_table[d].name : "invalid"; }

size_t xconv_dtype_size(xconv_dtype d) { return xconv__dtype_valid(d) ? dtype_table[d].size : 0; }

xconv_family xconv__dtype_family(xconv_dtype d) { return dtype_table[xconv__dtype_valid(d) ? d : 0].family; }

int xconv__dtype_bits(xconv_dtype d) { return xconv__dtype_valid(d) ? dtype_table[d].bits : 0; }

size_t xconv__dtype_align(xconv_dtype d)
{
    const size_t size = xconv_dtype_size(d);
    return xconv__dtype_family(d) == XCONV_FAMILY_COMPLEX ? size / 2 : size;
}

bool xconv__dtype_signed(xconv_dtype d) { return xconv__dtype_valid(d) && dtype_table[d].is_signed; }

xconv_dtype xconv_dtype_from_name(const char *name)
{
    if (!name) return XCONV_DTYPE_INVALID;
    for (int d = 1; d < XCONV_DTYPE_COUNT; d++)
        if (strcmp(name, dtype_table[d].name) == 0) return (xconv_dtype)d;
    return XCONV_DTYPE_INVALID;
}

static bool is_reduced_float(xconv_dtype d)
{
    return d == XCONV_DTYPE_F8E4M3 || d == XCONV_DTYPE_F8E5M2 || d == XCONV_DTYPE_F16 ||
           d == XCONV_DTYPE_BF16;
}

bool xconv_dtype_can_widen(xconv_dtype in, xconv_dtype out)
{
    if (!xconv__dtype_valid(in) || !xconv__dtype_valid(out)) return false;
    if (in == out) return true;
    switch (xconv__dtype_family(in)) {
    case XCONV_FAMILY_INT:
        /* A wider integer; a signed input keeps a signed result so values read back right. */
        return xconv__dtype_family(out) == XCONV_FAMILY_INT &&
               xconv__dtype_bits(out) > xconv__dtype_bits(in) &&
               (!xconv__dtype_signed(in) || xconv__dtype_signed(out));
    case XCONV_FAMILY_FLOAT:
        if (is_reduced_float(in)) return out == XCONV_DTYPE_F32 || out == XCONV_DTYPE_F64;
        return in == XCONV_DTYPE_F32 && out == XCONV_DTYPE_F64;
    case XCONV_FAMILY_COMPLEX:
        return in == XCONV_DTYPE_C64 && out == XCONV_DTYPE_C128;
    }
    return false;
}

xconv_ctype xconv__compute_type(xconv_dtype xw, xconv_dtype y)
{
    switch (xconv__dtype_family(xw)) {
    case XCONV_FAMILY_INT: return xconv__dtype_bits(y) > 32 ? XCONV_CT_U64 : XCONV_CT_U32;
    case XCONV_FAMILY_FLOAT: return y == XCONV_DTYPE_F64 ? XCONV_CT_F64 : XCONV_CT_F32;
    case XCONV_FAMILY_COMPLEX: return y == XCONV_DTYPE_C128 ? XCONV_CT_C128 : XCONV_CT_C64;
    }
    return XCONV_CT_F32;
}

size_t xconv__ctype_size(xconv_ctype ct)
{
    static const size_t sizes[XCONV_CT_COUNT] = {4, 8, 4, 8, 8, 16};
    return ct < XCONV_CT_COUNT ? sizes[ct] : 0;
}

const char *xconv__ctype_name(xconv_ctype ct)
{
    static const char *names[XCONV_CT_COUNT] = {"u32", "u64", "f32", "f64", "c64", "c128"};
    return ct < XCONV_CT_COUNT ? names[ct] : "invalid";
}

/* ---------------------------------------------------------------------------------------- */
/* Small binary floats (f16, f8e4m3, f8e5m2): one encoder and decoder for all three.         */
/* ---------------------------------------------------------------------------------------- */

typedef struct minifloat {
    int      mbits;      /* explicit mantissa bits */
    int      bias;
    int      total_bits;
    bool     has_inf;    /* IEEE-like (f16, e5m2); false: e4m3 "FN", saturating */
    uint32_t max_finite; /* magnitude code of the largest finite value */
    uint32_t nan_code;   /* magnitude code of the canonical NaN */
} minifloat;

static const minifloat MF_F16 = {10, 15, 16, true, 0x7bff, 0x7e00};
static const minifloat MF_E5M2 = {2, 15, 8, true, 0x7b, 0x7e};
static const minifloat MF_E4M3 = {3, 7, 8, false, 0x7e, 0x7f};

/* Rounds f to the nearest representable value, ties to even, and returns its code. */
static uint32_t mini_encode(const minifloat *mf, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t sign = (bits >> 31) << (mf->total_bits - 1);
    uint32_t abs_bits = bits & 0x7fffffffu;
    uint32_t overflow = mf->has_inf ? mf->max_finite + 1 : mf->max_finite;
    if (abs_bits > 0x7f800000u) return sign | mf->nan_code;
    if (abs_bits == 0x7f800000u) return sign | overflow;
    int exp_field = (int)(abs_bits >> 23);
    if (exp_field == 0) return sign; /* f32 subnormals are far below every target's range */
    int e = exp_field - 127;
    int emin = 1 - mf->bias;
    int emax = (int)(mf->max_finite >> mf->mbits) - mf->bias;
    if (e > emax + 1) return sign | overflow;
    uint32_t m = (abs_bits & 0x7fffffu) | 0x800000u;  /* value = m * 2^(e - 23) */
    int q = (e < emin ? emin : e) - mf->mbits;         /* exponent of the target's ulp */
    int shift = 23 + q - e;
    uint32_t r;
    if (shift >= 26) {
        r = 0;                                          /* below half the smallest subnormal */
    } else {
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        r = m >> shift;
        if (rem > half || (rem == half && (r & 1u))) r++;
    }
    /* Subnormals encode as r itself (r == 2^mbits is the smallest normal); normals carry the
     * implicit bit, which the exponent field absorbs, also when rounding crossed a binade. */
    uint32_t code = e < emin ? r : ((uint32_t)(e + mf->bias) << mf->mbits) + r - (1u << mf->mbits);
    if (code > mf->max_finite) code = overflow;
    return sign | code;
}

static float mini_decode(const minifloat *mf, uint32_t v)
{
    uint32_t mag_mask = (1u << (mf->total_bits - 1)) - 1;
    uint32_t mag = v & mag_mask;
    float sign = (v >> (mf->total_bits - 1)) ? -1.0f : 1.0f;
    uint32_t mant = mag & ((1u << mf->mbits) - 1);
    int exp_field = (int)(mag >> mf->mbits);
    if (mf->has_inf && mag > mf->max_finite) return mant == 0 ? sign * INFINITY : NAN;
    if (!mf->has_inf && mag > mf->max_finite) return NAN;
    if (exp_field == 0) return sign * ldexpf((float)mant, 1 - mf->bias - mf->mbits);
    return sign * ldexpf((float)(mant | (1u << mf->mbits)), exp_field - mf->bias - mf->mbits);
}

float    xconv_f16_to_f32(uint16_t h) { return mini_decode(&MF_F16, h); }
uint16_t xconv_f32_to_f16(float f) { return (uint16_t)mini_encode(&MF_F16, f); }
float    xconv_f8e4m3_to_f32(uint8_t v) { return mini_decode(&MF_E4M3, v); }
uint8_t  xconv_f32_to_f8e4m3(float f) { return (uint8_t)mini_encode(&MF_E4M3, f); }
float    xconv_f8e5m2_to_f32(uint8_t v) { return mini_decode(&MF_E5M2, v); }
uint8_t  xconv_f32_to_f8e5m2(float f) { return (uint8_t)mini_encode(&MF_E5M2, f); }

/* bf16 is the upper half of an f32, so rounding is one carry-propagating add. */
float xconv_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t xconv_f32_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}
