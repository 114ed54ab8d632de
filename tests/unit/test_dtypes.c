/*
 * test_dtypes.c — the dtype table, the reduced float conversions and the integer and
 * reduced-float numerics of convolutions (DESIGN.md §2).
 *
 * Oracles: bit patterns written out by hand from the IEEE / OCP definitions; tensor_util.h's
 * decoder (the format definition) and its rounding (a search over all encodings for the
 * nearest, ties to the even encoding); exact integer sums in unsigned __int128 arithmetic;
 * exact f64 sums of small integers.
 */
#include "common/ref_conv.h"
#include "core/internal.h"
#include "harness.h"

#include <float.h>

__extension__ typedef unsigned __int128 u128;

static float f32_of_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t bits_of_f32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* The library's conversions, by dtype, so that one loop serves the four formats. */
static float lib_to_f32(xconv_dtype dt, uint32_t v)
{
    switch (dt) {
    case XCONV_DTYPE_F16: return xconv_f16_to_f32((uint16_t)v);
    case XCONV_DTYPE_BF16: return xconv_bf16_to_f32((uint16_t)v);
    case XCONV_DTYPE_F8E4M3: return xconv_f8e4m3_to_f32((uint8_t)v);
    default: return xconv_f8e5m2_to_f32((uint8_t)v);
    }
}

static uint32_t lib_from_f32(xconv_dtype dt, float f)
{
    switch (dt) {
    case XCONV_DTYPE_F16: return xconv_f32_to_f16(f);
    case XCONV_DTYPE_BF16: return xconv_f32_to_bf16(f);
    case XCONV_DTYPE_F8E4M3: return xconv_f32_to_f8e4m3(f);
    default: return xconv_f32_to_f8e5m2(f);
    }
}

static const xconv_dtype REDUCED[4] = {XCONV_DTYPE_F16, XCONV_DTYPE_BF16, XCONV_DTYPE_F8E4M3,
                                       XCONV_DTYPE_F8E5M2};

/* ---------------------------------------------------------------------------------------- */
/* The dtype table                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* DESIGN.md §2 / xconv.h: same dtype; a wider integer (signed if the input is signed);
 * f8/f16/bf16 -> f32/f64; f32 -> f64; c64 -> c128. */
static bool expected_widen(xconv_dtype in, xconv_dtype out)
{
    const tu_dtype_info *a = tu_info(in), *b = tu_info(out);
    if (in == XCONV_DTYPE_INVALID || out == XCONV_DTYPE_INVALID) return false;
    if (in == out) return true;
    if (a->kind == TU_INT)
        return b->kind == TU_INT && b->bits > a->bits && (!a->is_signed || b->is_signed);
    if (a->kind == TU_REDUCED) return b->kind == TU_F32 || b->kind == TU_F64;
    if (a->kind == TU_F32) return b->kind == TU_F64;
    if (a->kind == TU_C64) return b->kind == TU_C128;
    return false;
}

static void test_table(void)
{
    for (int d = 1; d < XCONV_DTYPE_COUNT; d++) {
        const tu_dtype_info *in = tu_info((xconv_dtype)d);
        XT_CHECK(strcmp(xconv_dtype_name((xconv_dtype)d), in->name) == 0, "name of %d: %s", d,
                 xconv_dtype_name((xconv_dtype)d));
        XT_CHECK(xconv_dtype_from_name(in->name) == (xconv_dtype)d, "from_name(%s)", in->name);
        XT_CHECK(xconv_dtype_size((xconv_dtype)d) == in->size, "size of %s: %zu", in->name,
                 xconv_dtype_size((xconv_dtype)d));
        for (int e = 0; e <= XCONV_DTYPE_COUNT; e++)
            XT_CHECK(xconv_dtype_can_widen((xconv_dtype)d, (xconv_dtype)e) ==
                         expected_widen((xconv_dtype)d, (xconv_dtype)(e < XCONV_DTYPE_COUNT ? e : 0)),
                     "can_widen(%s, %d) = %d", in->name, e,
                     (int)xconv_dtype_can_widen((xconv_dtype)d, (xconv_dtype)e));
    }
    XT_CHECK(strcmp(xconv_dtype_name(XCONV_DTYPE_INVALID), "invalid") == 0, "name of INVALID");
    XT_CHECK(strcmp(xconv_dtype_name((xconv_dtype)XCONV_DTYPE_COUNT), "invalid") == 0, "name of COUNT");
    XT_CHECK(strcmp(xconv_dtype_name((xconv_dtype)-3), "invalid") == 0, "name of -3");
    XT_CHECK(xconv_dtype_size(XCONV_DTYPE_INVALID) == 0, "size of INVALID");
    XT_CHECK(xconv_dtype_size((xconv_dtype)1000) == 0, "size of 1000");
    XT_CHECK(xconv_dtype_from_name("f128") == XCONV_DTYPE_INVALID, "from_name(f128)");
    XT_CHECK(xconv_dtype_from_name("") == XCONV_DTYPE_INVALID, "from_name(\"\")");
    XT_CHECK(xconv_dtype_from_name("f3") == XCONV_DTYPE_INVALID, "from_name(f3)");
    XT_CHECK(xconv_dtype_from_name("f8") == XCONV_DTYPE_INVALID, "from_name(f8)");
    XT_CHECK(xconv_dtype_from_name("u8 ") == XCONV_DTYPE_INVALID, "from_name(\"u8 \")");
    XT_CHECK(!xconv_dtype_can_widen(XCONV_DTYPE_INVALID, XCONV_DTYPE_INVALID), "INVALID widen");
}

/* ---------------------------------------------------------------------------------------- */
/* Known bit patterns                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct known {
    xconv_dtype dt;
    float       f;      /* the f32 input */
    uint32_t    bits;   /* the encoding it must round to; NAN_BITS: any NaN */
    bool        exact;  /* the encoding decodes back to f exactly */
    const char *what;
} known;

#define NAN_BITS 0xFFFFFFFFu

static const known KNOWN[] = {
    /* f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
    {XCONV_DTYPE_F16, 1.0f, 0x3C00, true, "1.0"},
    {XCONV_DTYPE_F16, -2.0f, 0xC000, true, "-2.0"},
    {XCONV_DTYPE_F16, 0.5f, 0x3800, true, "0.5"},
    {XCONV_DTYPE_F16, 0.0f, 0x0000, true, "+0"},
    {XCONV_DTYPE_F16, -0.0f, 0x8000, true, "-0"},
    {XCONV_DTYPE_F16, 65504.0f, 0x7BFF, true, "max normal"},
    {XCONV_DTYPE_F16, 0x1p-14f, 0x0400, true, "min normal"},
    {XCONV_DTYPE_F16, 0x1p-24f, 0x0001, true, "min subnormal"},
    {XCONV_DTYPE_F16, -0x1p-24f, 0x8001, true, "-min subnormal"},
    {XCONV_DTYPE_F16, 0x3FFp-24f, 0x03FF, true, "max subnormal"},
    {XCONV_DTYPE_F16, INFINITY, 0x7C00, true, "+inf"},
    {XCONV_DTYPE_F16, -INFINITY, 0xFC00, true, "-inf"},
    {XCONV_DTYPE_F16, 1.0f + 0x1p-11f, 0x3C00, false, "tie 1 + half ulp -> even 1"},
    {XCONV_DTYPE_F16, 1.0f + 0x3p-11f, 0x3C02, false, "tie 1 + 3 half ulps -> even 0x3C02"},
    {XCONV_DTYPE_F16, 1.0f + 0x1p-11f + 0x1p-23f, 0x3C01, false, "just above a tie rounds up"},
    {XCONV_DTYPE_F16, -(2049.0f), 0xE800, false, "tie -2049 -> -2048"},
    {XCONV_DTYPE_F16, 2051.0f, 0x6802, false, "tie 2051 -> 2052"},
    {XCONV_DTYPE_F16, 0x1p-25f, 0x0000, false, "tie half min subnormal -> 0"},
    {XCONV_DTYPE_F16, -0x1p-25f, 0x8000, false, "tie -half min subnormal -> -0"},
    {XCONV_DTYPE_F16, 0x3p-26f, 0x0001, false, "0.75 min subnormal -> min subnormal"},
    {XCONV_DTYPE_F16, 0x3p-25f, 0x0002, false, "tie 1.5 min subnormal -> 2"},
    {XCONV_DTYPE_F16, 0x1p-30f, 0x0000, false, "underflow -> 0"},
    {XCONV_DTYPE_F16, 65519.0f, 0x7BFF, false, "below the overflow tie -> max"},
    {XCONV_DTYPE_F16, 65520.0f, 0x7C00, false, "overflow tie -> inf"},
    {XCONV_DTYPE_F16, -65520.0f, 0xFC00, false, "overflow tie -> -inf"},
    {XCONV_DTYPE_F16, FLT_MAX, 0x7C00, false, "f32 max -> inf"},
    {XCONV_DTYPE_F16, NAN, NAN_BITS, false, "NaN"},
    /* bf16: the top half of f32, rounded to nearest even. */
    {XCONV_DTYPE_BF16, 1.0f, 0x3F80, true, "1.0"},
    {XCONV_DTYPE_BF16, -2.0f, 0xC000, true, "-2.0"},
    {XCONV_DTYPE_BF16, -0.0f, 0x8000, true, "-0"},
    {XCONV_DTYPE_BF16, 0x1.FEp127f, 0x7F7F, true, "max normal"},
    {XCONV_DTYPE_BF16, 0x1p-126f, 0x0080, true, "min normal"},
    {XCONV_DTYPE_BF16, 0x1p-133f, 0x0001, true, "min subnormal"},
    {XCONV_DTYPE_BF16, INFINITY, 0x7F80, true, "+inf"},
    {XCONV_DTYPE_BF16, -INFINITY, 0xFF80, true, "-inf"},
    {XCONV_DTYPE_BF16, 1.0f + 0x1p-8f, 0x3F80, false, "tie -> even 1"},
    {XCONV_DTYPE_BF16, 1.0f + 0x3p-8f, 0x3F82, false, "tie -> even 0x3F82"},
    {XCONV_DTYPE_BF16, 257.0f, 0x4380, false, "tie 257 -> 256"},
    {XCONV_DTYPE_BF16, 259.0f, 0x4382, false, "tie 259 -> 260"},
    {XCONV_DTYPE_BF16, 0x1.FFp127f, 0x7F80, false, "overflow tie -> inf"},
    {XCONV_DTYPE_BF16, 0x1.FEFFFEp127f, 0x7F7F, false, "below the overflow tie -> max"},
    {XCONV_DTYPE_BF16, FLT_MAX, 0x7F80, false, "f32 max -> inf"},
    {XCONV_DTYPE_BF16, NAN, NAN_BITS, false, "NaN"},
    /* f8e4m3 (OCP FN): bias 7, no infinities, S.1111.111 is NaN, max 448, saturating. */
    {XCONV_DTYPE_F8E4M3, 1.0f, 0x38, true, "1.0"},
    {XCONV_DTYPE_F8E4M3, -2.0f, 0xC0, true, "-2.0"},
    {XCONV_DTYPE_F8E4M3, -0.0f, 0x80, true, "-0"},
    {XCONV_DTYPE_F8E4M3, 448.0f, 0x7E, true, "max normal"},
    {XCONV_DTYPE_F8E4M3, -448.0f, 0xFE, true, "-max normal"},
    {XCONV_DTYPE_F8E4M3, 256.0f, 0x78, true, "256 (exponent 1111 is finite)"},
    {XCONV_DTYPE_F8E4M3, 0x1p-6f, 0x08, true, "min normal"},
    {XCONV_DTYPE_F8E4M3, 0x1p-9f, 0x01, true, "min subnormal"},
    {XCONV_DTYPE_F8E4M3, 1.0625f, 0x38, false, "tie -> even 1"},
    {XCONV_DTYPE_F8E4M3, 1.1875f, 0x3A, false, "tie -> even 1.25"},
    {XCONV_DTYPE_F8E4M3, 0x1p-10f, 0x00, false, "tie half min subnormal -> 0"},
    {XCONV_DTYPE_F8E4M3, 464.0f, 0x7E, false, "above max saturates"},
    {XCONV_DTYPE_F8E4M3, 1000.0f, 0x7E, false, "overflow saturates"},
    {XCONV_DTYPE_F8E4M3, -1.0e6f, 0xFE, false, "negative overflow saturates"},
    {XCONV_DTYPE_F8E4M3, INFINITY, 0x7E, false, "+inf saturates to 448"},
    {XCONV_DTYPE_F8E4M3, -INFINITY, 0xFE, false, "-inf saturates to -448"},
    {XCONV_DTYPE_F8E4M3, NAN, NAN_BITS, false, "NaN"},
    /* f8e5m2: bias 15, IEEE-style infinities. */
    {XCONV_DTYPE_F8E5M2, 1.0f, 0x3C, true, "1.0"},
    {XCONV_DTYPE_F8E5M2, -2.0f, 0xC0, true, "-2.0"},
    {XCONV_DTYPE_F8E5M2, 57344.0f, 0x7B, true, "max normal"},
    {XCONV_DTYPE_F8E5M2, 0x1p-14f, 0x04, true, "min normal"},
    {XCONV_DTYPE_F8E5M2, 0x1p-16f, 0x01, true, "min subnormal"},
    {XCONV_DTYPE_F8E5M2, INFINITY, 0x7C, true, "+inf"},
    {XCONV_DTYPE_F8E5M2, -INFINITY, 0xFC, true, "-inf"},
    {XCONV_DTYPE_F8E5M2, 1.125f, 0x3C, false, "tie -> even 1"},
    {XCONV_DTYPE_F8E5M2, 1.375f, 0x3E, false, "tie -> even 1.5"},
    {XCONV_DTYPE_F8E5M2, 61439.0f, 0x7B, false, "below the overflow tie -> max"},
    {XCONV_DTYPE_F8E5M2, 61440.0f, 0x7C, false, "overflow tie -> inf"},
    {XCONV_DTYPE_F8E5M2, -1.0e6f, 0xFC, false, "overflow -> -inf"},
    {XCONV_DTYPE_F8E5M2, NAN, NAN_BITS, false, "NaN"},
};

static void test_known(void)
{
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++) {
        const known *k = &KNOWN[i];
        tu_fmt       f = tu_fmt_of(k->dt);
        uint32_t     got = lib_from_f32(k->dt, k->f);
        const char  *name = tu_info(k->dt)->name;
        if (k->bits == NAN_BITS) {
            XT_CHECK(tu_mf_is_nan(&f, got), "%s %s: 0x%X is not NaN", name, k->what, got);
            /* A NaN whose payload sits only in bits a truncation would drop must stay NaN. */
            XT_CHECK(tu_mf_is_nan(&f, lib_from_f32(k->dt, f32_of_bits(0x7F800001u))),
                     "%s: low-payload NaN 0x7F800001 became 0x%X", name,
                     lib_from_f32(k->dt, f32_of_bits(0x7F800001u)));
            XT_CHECK(tu_mf_is_nan(&f, lib_from_f32(k->dt, f32_of_bits(0xFFC00000u))),
                     "%s: negative NaN", name);
            continue;
        }
        XT_CHECK(got == k->bits, "%s %s: %a -> 0x%X, expected 0x%X", name, k->what, (double)k->f,
                 got, k->bits);
        /* The tests' own codec must agree with the hand patterns too, or the exhaustive
         * checks below would prove nothing. */
        XT_CHECK(tu_mf_round(&f, k->f) == k->bits, "oracle %s %s: 0x%X", name, k->what,
                 tu_mf_round(&f, k->f));
        if (k->exact) {
            float back = lib_to_f32(k->dt, k->bits);
            XT_CHECK(bits_of_f32(back) == bits_of_f32(k->f), "%s %s: 0x%X decodes to %a", name,
                     k->what, k->bits, (double)back);
        }
    }
    /* Every NaN encoding decodes to NaN; e4m3's 0x7F and 0xFF are its only NaNs. */
    XT_CHECK(isnan(xconv_f8e4m3_to_f32(0x7F)) && isnan(xconv_f8e4m3_to_f32(0xFF)), "e4m3 NaN");
    XT_CHECK(xconv_f8e4m3_to_f32(0x7E) == 448.0f && xconv_f8e4m3_to_f32(0x78) == 256.0f,
             "e4m3 top exponent is finite");
    XT_CHECK(isnan(xconv_f16_to_f32(0x7E00)) && isnan(xconv_f16_to_f32(0xFC01)), "f16 NaN");
    XT_CHECK(isnan(xconv_bf16_to_f32(0x7FC0)) && isnan(xconv_bf16_to_f32(0xFF81)), "bf16 NaN");
    XT_CHECK(isnan(xconv_f8e5m2_to_f32(0x7D)) && isnan(xconv_f8e5m2_to_f32(0xFF)), "e5m2 NaN");
}

/* ---------------------------------------------------------------------------------------- */
/* Exhaustive and random conversions                                                        */
/* ---------------------------------------------------------------------------------------- */

static void test_exhaustive(void)
{
    for (int r = 0; r < 4; r++) {
        xconv_dtype dt = REDUCED[r];
        tu_fmt      f = tu_fmt_of(dt);
        uint32_t    count = 1u << (tu_info(dt)->size * 8);
        int64_t     bad_decode = 0, bad_trip = 0, bad_mid = 0;
        for (uint32_t b = 0; b < count; b++) {
            double want = tu_mf_decode(&f, b);
            float  got = lib_to_f32(dt, b);
            /* Decoding is exact (f32 holds every value of these formats), sign of zero too. */
            bool ok = isnan(want) ? isnan(got)
                                  : (double)got == want && !signbit(got) == !signbit(want);
            if (!ok && bad_decode++ < 3)
                fprintf(stderr, "  %s 0x%X decodes to %a, expected %a\n", tu_info(dt)->name, b,
                        (double)got, want);
            if (isnan(want)) continue;
            uint32_t back = lib_from_f32(dt, got);
            if (back != b && bad_trip++ < 3)
                fprintf(stderr, "  %s 0x%X -> %a -> 0x%X\n", tu_info(dt)->name, b, (double)got,
                        back);
            /* The midpoint to the next encoding of the same sign is a tie: it must go to the
             * even one, and one f32 ulp either side must go to the nearer one. */
            uint32_t mag = b & ~tu_mf_sign_bit(&f);
            if (mag >= tu_mf_max_code(&f)) continue;
            double next = tu_mf_decode(&f, b + 1u);
            float  mid = (float)((want + next) / 2);
            if ((double)mid != (want + next) / 2) continue; /* not representable in f32 */
            uint32_t even = (b & 1u) ? b + 1u : b;
            float    below = nextafterf(mid, (float)want), above = nextafterf(mid, (float)next);
            uint32_t gm = lib_from_f32(dt, mid), gb = lib_from_f32(dt, below),
                     ga = lib_from_f32(dt, above);
            if ((gm != even || gb != b || ga != b + 1u) && bad_mid++ < 3)
                fprintf(stderr, "  %s between 0x%X and 0x%X: mid -> 0x%X, below -> 0x%X, above -> 0x%X\n",
                        tu_info(dt)->name, b, b + 1u, gm, gb, ga);
        }
        XT_CHECK(bad_decode == 0, "%s: %" PRId64 " encodings decode wrongly", tu_info(dt)->name, bad_decode);
        XT_CHECK(bad_trip == 0, "%s: %" PRId64 " encodings do not round-trip", tu_info(dt)->name, bad_trip);
        XT_CHECK(bad_mid == 0, "%s: %" PRId64 " ties or near-ties round wrongly", tu_info(dt)->name, bad_mid);
    }
}

/* Random f32 (random bit patterns, and values concentrated on each format's range) must round
 * to the nearest encoding, ties to even, as found by searching every encoding. */
static void test_random_rounding(void)
{
    tu_rng rng = {42};
    for (int r = 0; r < 4; r++) {
        xconv_dtype dt = REDUCED[r];
        tu_fmt      f = tu_fmt_of(dt);
        int64_t     bad = 0;
        int         emax = (1 << f.ebits) - 1 - f.bias;
        for (int i = 0; i < 200000; i++) {
            uint32_t b = (uint32_t)tu_next(&rng);
            if (i & 1) {
                /* An exponent from below the subnormals to above the overflow threshold. */
                int e = (int)tu_int(&rng, 1 - f.bias - f.mbits - 3, emax + 2);
                b = (b & 0x807FFFFFu) | ((uint32_t)(e + 127) << 23);
            }
            float    x = f32_of_bits(b);
            uint32_t want = tu_mf_round(&f, x), got = lib_from_f32(dt, x);
            bool     ok = isnan(x) ? tu_mf_is_nan(&f, got) : got == want;
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s: %a (0x%08X) -> 0x%X, nearest is 0x%X\n", tu_info(dt)->name,
                        (double)x, b, got, want);
        }
        XT_CHECK(bad == 0, "%s: %" PRId64 " of 200000 random f32 round wrongly", tu_info(dt)->name, bad);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Integer wrap-around against exact 128-bit sums                                           */
/* ---------------------------------------------------------------------------------------- */

/* Integer values that make sums overflow: the extremes of the dtype and random bits. */
static int64_t extreme_value(tu_rng *r, xconv_dtype dt)
{
    const tu_dtype_info *in = tu_info(dt);
    uint64_t max_u = tu_mask(in->bits - (in->is_signed ? 1 : 0));
    int64_t  maxv = tu_as_signed(max_u), minv = in->is_signed ? -maxv - 1 : 0;
    switch (tu_int(r, 0, 5)) {
    case 0: return minv;
    case 1: return maxv;
    case 2: return in->is_signed ? -1 : maxv - 1;
    case 3: return minv + 1;
    default: {
        uint64_t b = tu_next(r) & tu_mask(in->bits);
        if (in->is_signed && in->bits < 64 && ((b >> (in->bits - 1)) & 1u)) b |= ~tu_mask(in->bits);
        return tu_as_signed(b);
    }
    }
}

/* The value of element i of an integer tensor as a 128-bit two's complement number. */
static u128 wide(const xconv_tensor *t, int64_t off)
{
    tu_val v = tu_load(t->dtype, t->data, off);
    const tu_dtype_info *in = tu_info(t->dtype);
    return in->is_signed ? (u128)(__int128)tu_as_signed(v.u) : (u128)v.u;
}

/* conv1d / conv_transpose1d, channels-first, groups 1: the exact sum of every term in 128
 * bits (wrapping at 2^128 never matters: only the low 64 bits are compared). */
static u128 exact_1d(const tu_problem *p, const xconv_tensor *x, const xconv_tensor *w,
                     const xconv_tensor *bias, int64_t n, int64_t co, int64_t j)
{
    u128 acc = p->has_bias ? wide(bias, co) : 0;
    for (int64_t ci = 0; ci < p->cin; ci++)
        for (int64_t k = 0; k < p->k[0]; k++) {
            int64_t q;
            if (p->op == XCONV_OP_CONV) {
                q = j * p->stride[0] + k * p->dil[0] - p->lo[0];
            } else {
                int64_t num = j + p->lo[0] - k * p->dil[0];
                if (num < 0 || num % p->stride[0]) continue;
                q = num / p->stride[0];
            }
            if (q < 0 || q >= p->x[0]) continue;
            int64_t woff = p->op == XCONV_OP_CONV ? (co * p->cin + ci) * p->k[0] + k
                                                  : (ci * p->cout + co) * p->k[0] + k;
            acc += wide(x, (n * p->cin + ci) * p->x[0] + q) * wide(w, woff);
        }
    return acc;
}

static void test_int_wrap(void)
{
    static const xconv_dtype PAIRS[][2] = {
        {XCONV_DTYPE_U8, XCONV_DTYPE_U8},   {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
        {XCONV_DTYPE_U16, XCONV_DTYPE_U16}, {XCONV_DTYPE_I16, XCONV_DTYPE_I16},
        {XCONV_DTYPE_U32, XCONV_DTYPE_U32}, {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
        {XCONV_DTYPE_U64, XCONV_DTYPE_U64}, {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
        {XCONV_DTYPE_U8, XCONV_DTYPE_U32},  {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
        {XCONV_DTYPE_I16, XCONV_DTYPE_I64}, {XCONV_DTYPE_U16, XCONV_DTYPE_U32},
        {XCONV_DTYPE_U16, XCONV_DTYPE_I64}, {XCONV_DTYPE_U32, XCONV_DTYPE_U64},
        {XCONV_DTYPE_I32, XCONV_DTYPE_I64}, {XCONV_DTYPE_U8, XCONV_DTYPE_I16},
    };
    tu_rng rng = {7};
    for (size_t pi = 0; pi < sizeof PAIRS / sizeof PAIRS[0]; pi++)
        for (int op = 0; op < 2; op++)
            for (int rep = 0; rep < 3; rep++) {
                tu_problem p;
                memset(&p, 0, sizeof p);
                p.op = (xconv_op)op;
                p.d = 1;
                p.layout = XCONV_LAYOUT_CHANNELS_FIRST;
                p.n = 2;
                p.cin = tu_int(&rng, 1, 5);
                p.cout = tu_int(&rng, 1, 3);
                p.groups = 1;
                p.x[0] = tu_int(&rng, 4, 9);
                p.k[0] = tu_int(&rng, 1, 4);
                p.stride[0] = tu_int(&rng, 1, 2);
                p.dil[0] = 1;
                p.lo[0] = tu_int(&rng, 0, 1);
                p.hi[0] = tu_int(&rng, 0, 1);
                p.opad[0] = 0;
                p.has_bias = rep != 0;
                p.xdt = PAIRS[pi][0];
                p.ydt = PAIRS[pi][1];
                tu_problem_finish(&p);
                int64_t xs[5], ws[5], bs[1], ys[5];
                tu_shapes(&p, xs, ws, bs, ys);
                xconv_tensor x = tu_alloc(p.xdt, 3, xs, 0), w = tu_alloc(p.xdt, 3, ws, 0);
                xconv_tensor b = tu_alloc(rep == 2 ? p.xdt : p.ydt, 1, bs, 0);
                xconv_tensor y = tu_alloc(p.ydt, 3, ys, 0xA5);
                xconv_tensor *all[3] = {&x, &w, &b};
                for (int t = 0; t < 3; t++)
                    for (int64_t e = 0; e < tu_numel(all[t]->rank, all[t]->shape); e++)
                        tu_store(all[t]->dtype, all[t]->data, e,
                                 tu_int_val(extreme_value(&rng, all[t]->dtype)));
                char desc[256];
                tu_describe(&p, desc, sizeof desc);
                for (int e = -1; e < xconv_engine_count(); e++) {
                    const char  *forced = e < 0 ? NULL : xconv_engine_name(e), *used;
                    xconv_error  err;
                    memset(y.data, 0xA5, y.buffer_bytes);
                    xconv_status st = tu_conv(NULL, &p, &x, &w, &b, &y, forced, &used, &err);
                    if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref")) continue;
                    XT_CHECK(st == XCONV_STATUS_OK, "%s [%s]: %s", desc, forced ? forced : "planner",
                             err.description);
                    if (st != XCONV_STATUS_OK) continue;
                    int64_t bad = 0;
                    uint64_t mask = tu_mask(tu_info(p.ydt)->bits);
                    for (int64_t n = 0; n < p.n; n++)
                        for (int64_t co = 0; co < p.cout; co++)
                            for (int64_t j = 0; j < p.y[0]; j++) {
                                uint64_t want = (uint64_t)exact_1d(&p, &x, &w, &b, n, co, j) & mask;
                                uint64_t got = tu_load(p.ydt, y.data, (n * p.cout + co) * p.y[0] + j).u & mask;
                                if (want != got && bad++ < 3)
                                    fprintf(stderr, "  %s: y[%" PRId64 ",%" PRId64 ",%" PRId64
                                            "] = 0x%" PRIx64 ", exact sum mod 2^bits is 0x%" PRIx64 "\n",
                                            desc, n, co, j, got, want);
                            }
                    XT_CHECK(bad == 0, "%s [%s]: %" PRId64 " wrong", desc, used, bad);
                }
                free(x.data);
                free(w.data);
                free(b.data);
                free(y.data);
            }
}

/* ---------------------------------------------------------------------------------------- */
/* Reduced floats: compute in f32, round once                                               */
/* ---------------------------------------------------------------------------------------- */

/* A 1-D, single channel conv of explicit values, checked against the exact sum rounded once. */
static void check_sequence(xconv_dtype dt, const double *xv, const double *wv, int64_t K,
                           double expect, const char *what)
{
    int64_t xs[3] = {1, 1, K}, ws[3] = {1, 1, K}, ys[3] = {1, 1, 1};
    xconv_tensor x = tu_alloc(dt, 3, xs, 0), w = tu_alloc(dt, 3, ws, 0), y = tu_alloc(dt, 3, ys, 0);
    for (int64_t i = 0; i < K; i++) {
        tu_store(dt, x.data, i, (tu_val){0, xv[i], 0});
        tu_store(dt, w.data, i, (tu_val){0, wv[i], 0});
        XT_CHECK(tu_load(dt, x.data, i).re == xv[i] && tu_load(dt, w.data, i).re == wv[i],
                 "%s: input not exact", what);
    }
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = XCONV_OP_CONV;
    p.d = 1;
    p.n = p.cin = p.cout = p.groups = 1;
    p.x[0] = p.k[0] = K;
    p.stride[0] = p.dil[0] = 1;
    p.xdt = p.ydt = dt;
    tu_problem_finish(&p);
    for (int e = -1; e < xconv_engine_count(); e++) {
        const char *forced = e < 0 ? NULL : xconv_engine_name(e), *used;
        xconv_error err;
        xconv_status st = tu_conv(NULL, &p, &x, &w, NULL, &y, forced, &used, &err);
        if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref")) continue;
        XT_CHECK(st == XCONV_STATUS_OK, "%s %s: %s", tu_info(dt)->name, what, err.description);
        double got = tu_load(dt, y.data, 0).re;
        XT_CHECK(got == expect || (isnan(got) && isnan(expect)), "%s %s [%s]: %.17g, expected %.17g",
                 tu_info(dt)->name, what, used ? used : "?", got, expect);
    }
    free(x.data);
    free(w.data);
    free(y.data);
}

static void test_round_once(void)
{
    /* Accumulating in the storage type would lose the small terms: 2048 + 1 rounds back to
     * 2048 in f16, twice, giving 2048; the exact 2050 is representable. */
    check_sequence(XCONV_DTYPE_F16, (double[]){2048, 1, 1}, (double[]){1, 1, 1}, 3, 2050, "2048+1+1");
    check_sequence(XCONV_DTYPE_F16, (double[]){2048, 1}, (double[]){1, 1}, 2, 2048, "2049 tie");
    check_sequence(XCONV_DTYPE_F16, (double[]){2048, 3}, (double[]){1, 1}, 2, 2052, "2051 tie");
    check_sequence(XCONV_DTYPE_F16, (double[]){256, 1}, (double[]){256, 0}, 2, INFINITY, "overflow");
    check_sequence(XCONV_DTYPE_F16, (double[]){256, -256}, (double[]){256, 1}, 2, 65280, "cancel");
    check_sequence(XCONV_DTYPE_BF16, (double[]){256, 1, 1}, (double[]){1, 1, 1}, 3, 258, "256+1+1");
    check_sequence(XCONV_DTYPE_BF16, (double[]){256, 3}, (double[]){1, 1}, 2, 260, "259 tie");
    check_sequence(XCONV_DTYPE_BF16, (double[]){0x1p100, 1}, (double[]){0x1p100, 1}, 2, INFINITY,
                   "f32 overflow");
    check_sequence(XCONV_DTYPE_F8E4M3, (double[]){16, 1, 1}, (double[]){1, 1, 1}, 3, 18, "16+1+1");
    check_sequence(XCONV_DTYPE_F8E4M3, (double[]){16, 16}, (double[]){16, 16}, 2, 448, "512 saturates");
    check_sequence(XCONV_DTYPE_F8E4M3, (double[]){-16, 16}, (double[]){16, -16}, 2, -448,
                   "-512 saturates");
    check_sequence(XCONV_DTYPE_F8E4M3, (double[]){8, 1}, (double[]){2, 1}, 2, 16, "17 tie");
    check_sequence(XCONV_DTYPE_F8E5M2, (double[]){8, 1, 1}, (double[]){1, 1, 1}, 3, 10, "8+1+1");
    check_sequence(XCONV_DTYPE_F8E5M2, (double[]){256}, (double[]){256}, 1, INFINITY, "overflow");
    check_sequence(XCONV_DTYPE_F8E5M2, (double[]){8, 1}, (double[]){1, 1}, 2, 8, "9 tie");
    check_sequence(XCONV_DTYPE_F8E5M2, (double[]){8, 3}, (double[]){1, 1}, 2, 12, "11 tie");

    /* Random problems of small integers: every f32 partial sum is exact, so the result must
     * be the exact f64 sum rounded once to y. */
    tu_rng rng = {99};
    for (int r = 0; r < 4; r++)
        for (int rep = 0; rep < 6; rep++) {
            tu_problem p;
            memset(&p, 0, sizeof p);
            p.op = (xconv_op)(rep & 1);
            p.d = 2;
            p.layout = (xconv_layout)((rep >> 1) & 1);
            p.n = 1;
            p.groups = rep == 5 ? 2 : 1;
            p.cin = 2 * tu_int(&rng, 1, 3);
            p.cout = 2 * tu_int(&rng, 1, 2);
            for (int i = 0; i < 2; i++) {
                p.x[i] = tu_int(&rng, 3, 6);
                p.k[i] = tu_int(&rng, 1, 3);
                p.stride[i] = p.dil[i] = 1;
                p.lo[i] = p.hi[i] = tu_int(&rng, 0, 1);
            }
            p.has_bias = rep >= 2;
            p.xdt = p.ydt = REDUCED[r];
            tu_problem_finish(&p);
            int64_t xs[5], ws[5], bs[1], ys[5];
            tu_shapes(&p, xs, ws, bs, ys);
            xconv_tensor x = tu_alloc(p.xdt, 4, xs, 0), w = tu_alloc(p.xdt, 4, ws, 0);
            xconv_tensor b = tu_alloc(p.ydt, 1, bs, 0), y = tu_alloc(p.ydt, 4, ys, 0xA5);
            tu_fill(&x, &rng, tu_gen_small);
            tu_fill(&w, &rng, tu_gen_small);
            tu_fill(&b, &rng, tu_gen_small);
            tu_val *expect = calloc((size_t)tu_ycount(&p), sizeof(tu_val));
            tu_ref_conv(&p, &x, &w, &b, expect, NULL);
            char desc[256];
            tu_describe(&p, desc, sizeof desc);
            for (int e = -1; e < xconv_engine_count(); e++) {
                const char *forced = e < 0 ? NULL : xconv_engine_name(e), *used;
                xconv_error err;
                memset(y.data, 0xA5, y.buffer_bytes);
                xconv_status st = tu_conv(NULL, &p, &x, &w, &b, &y, forced, &used, &err);
                if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref")) continue;
                XT_CHECK(st == XCONV_STATUS_OK, "%s: %s", desc, err.description);
                if (st != XCONV_STATUS_OK) continue;
                int64_t bad = tu_compare_y(&p, &y, expect, NULL, true, 0.0, desc);
                XT_CHECK(bad == 0, "%s [%s]: %" PRId64 " not the exact sum rounded once", desc, used, bad);
            }
            free(expect);
            free(x.data);
            free(w.data);
            free(b.data);
            free(y.data);
        }
}

/*
 * The row converters' dense loops (stride 1, vectorized) against the element-wise
 * definitions: integers widen by sign/zero extension and narrow by truncation; bf16 is the
 * upper half of an f32 and rounds through the public scalar xconv_f32_to_bf16. Random bits,
 * NaNs with payloads, infinities and subnormals included; every length up to 70.
 */
static void test_dense_rows(void)
{
    tu_rng r = {0x1234567887654321ull};
    unsigned char src[70 * 8], dst[70 * 8], want[70 * 8];
    for (int trial = 0; trial < 3000; trial++) {
        const int64_t n = 1 + trial % 70;
        for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)tu_next(&r);
        const int kind = trial % 5;
        if (kind == 4) { /* f32 -> bf16: specials among random bits */
            static const uint32_t SPECIAL[] = {0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u,
                                               0xffbfffffu, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                                               0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0};
            for (int64_t i = 0; i < n; i++)
                if (tu_next(&r) % 3 == 0) memcpy(src + 4 * i, &SPECIAL[tu_next(&r) % 12], 4);
            xconv__store_row(XCONV_CT_F32, XCONV_DTYPE_BF16, src, dst, 1, n);
            bool ok = true;
            for (int64_t i = 0; i < n; i++) {
                float f;
                memcpy(&f, src + 4 * i, 4);
                const uint16_t w = xconv_f32_to_bf16(f);
                ok &= memcmp(dst + 2 * i, &w, 2) == 0;
            }
            XT_CHECK(ok, "store_row f32 -> bf16, n %d", (int)n);
            xconv__load_row(XCONV_CT_F32, XCONV_DTYPE_BF16, src, 1, dst, n);
            ok = true;
            for (int64_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, src + 2 * i, 2);
                const uint32_t b = (uint32_t)h << 16;
                ok &= memcmp(dst + 4 * i, &b, 4) == 0;
            }
            XT_CHECK(ok, "load_row bf16 -> f32, n %d", (int)n);
            continue;
        }
        static const xconv_dtype INTS[] = {XCONV_DTYPE_U8,  XCONV_DTYPE_I8,  XCONV_DTYPE_U16,
                                           XCONV_DTYPE_I16, XCONV_DTYPE_U32, XCONV_DTYPE_I32,
                                           XCONV_DTYPE_U64, XCONV_DTYPE_I64};
        const xconv_dtype dt = INTS[trial / 5 % 8];
        const bool wide = kind & 1; /* u64 compute type, else u32 */
        const xconv_ctype ct = wide ? XCONV_CT_U64 : XCONV_CT_U32;
        const size_t es = xconv_dtype_size(dt), cs = wide ? 8 : 4;
        if (!wide && es == 8) continue;
        if (kind & 2) { /* load: widen */
            xconv__load_row(ct, dt, src, 1, dst, n);
            for (int64_t i = 0; i < n; i++) {
                const uint64_t v = tu_load(dt, src, i).u; /* the value mod 2^64 */
                memcpy(want + cs * (size_t)i, wide ? (const void *)&v : (const void *)&(uint32_t){(uint32_t)v}, cs);
            }
            XT_CHECK(memcmp(dst, want, cs * (size_t)n) == 0, "load_row %s -> u%d, n %d",
                     tu_info(dt)->name, (int)cs * 8, (int)n);
        } else { /* store: truncate */
            xconv__store_row(ct, dt, src, dst, 1, n);
            for (int64_t i = 0; i < n; i++) memcpy(want + es * (size_t)i, src + cs * (size_t)i, es);
            XT_CHECK(memcmp(dst, want, es * (size_t)n) == 0, "store_row u%d -> %s, n %d",
                     (int)cs * 8, tu_info(dt)->name, (int)n);
        }
    }
}

/* The dense f16 loops against the scalar converters: every f16 encoding decoded, and f32
 * values from every f16 neighbourhood (ties, overflow edge, subnormals, NaNs) encoded. */
static void test_dense_f16(void)
{
    static uint16_t h[65536];
    static float f[65536];
    static unsigned char out[65536 * 4];
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    xconv__load_row(XCONV_CT_F32, XCONV_DTYPE_F16, h, 1, out, 65536);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const float want = xconv_f16_to_f32((uint16_t)i);
        bad += memcmp(out + 4 * i, &want, 4) != 0;
    }
    XT_CHECK(bad == 0, "load_row f16 -> f32: %d of 65536 encodings differ from xconv_f16_to_f32", bad);
    /* one at a time: rows shorter than a vector take the element-wise loop */
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t hi = (uint16_t)i;
        float got, back = xconv_f16_to_f32(hi);
        xconv__load_row(XCONV_CT_F32, XCONV_DTYPE_F16, &hi, 1, &got, 1);
        uint16_t enc;
        const float near = f32_of_bits(bits_of_f32(back) + 0x1000u); /* the tie above */
        xconv__store_row(XCONV_CT_F32, XCONV_DTYPE_F16, &near, &enc, 1, 1);
        bad += memcmp(&got, &back, 4) != 0 || enc != xconv_f32_to_f16(near);
    }
    XT_CHECK(bad == 0, "f16 rows of one element: %d of 65536 differ from the scalar converters", bad);
    uint8_t b8[256];
    for (int i = 0; i < 256; i++) b8[i] = (uint8_t)i;
    for (int fmt = 0; fmt < 2; fmt++) {
        const xconv_dtype dt = fmt ? XCONV_DTYPE_F8E5M2 : XCONV_DTYPE_F8E4M3;
        xconv__load_row(XCONV_CT_F32, dt, b8, 1, out, 256);
        bad = 0;
        for (int i = 0; i < 256; i++) {
            const float want = fmt ? xconv_f8e5m2_to_f32((uint8_t)i) : xconv_f8e4m3_to_f32((uint8_t)i);
            bad += memcmp(out + 4 * i, &want, 4) != 0;
        }
        XT_CHECK(bad == 0, "load_row %s -> f32: %d of 256 encodings differ from the scalar decoder",
                 fmt ? "f8e5m2" : "f8e4m3", bad);
    }
    tu_rng r = {0xfeedfacecafebeefull};
    for (int round = 0; round < 16; round++) {
        for (uint32_t i = 0; i < 65536; i++) {
            /* an f32 near f16 encoding i (exact, +-1 ulp of f16/2 = ties, or random bits) */
            uint32_t b = bits_of_f32(xconv_f16_to_f32((uint16_t)i));
            switch (round % 4) {
            case 0: break;
            case 1: b += 0x1000u; break; /* the midpoint above (ties to even) */
            case 2: b += (uint32_t)(tu_next(&r) & 0x1fffu); break;
            default: b = (uint32_t)tu_next(&r); break;
            }
            f[i] = f32_of_bits(b);
        }
        xconv__store_row(XCONV_CT_F32, XCONV_DTYPE_F16, f, out, 1, 65536);
        bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            const uint16_t want = xconv_f32_to_f16(f[i]);
            bad += memcmp(out + 2 * i, &want, 2) != 0;
        }
        XT_CHECK(bad == 0, "store_row f32 -> f16 round %d: %d of 65536 differ from xconv_f32_to_f16",
                 round, bad);
    }
}

/* The dense f32 -> f8 rows (src/core/convert.c's branch-free encoder) against the scalar
 * xconv_f32_to_f8e4m3 / e5m2 (dtypes.c's mini_encode): every f32 whose upper 16 bits take
 * each of their 65536 values (sign, exponent, the top 7 mantissa bits: every rounding point
 * of both formats, normal and subnormal, lies there) with lower halves that make exact
 * ties, one past them, one below, all ones and random bits. */
static void test_dense_f8(void)
{
    static float f[65536];
    static uint8_t out[65536];
    static const uint32_t LOW[] = {0x0000u, 0x0001u, 0xffffu, 0x8000u, 0x7fffu};
    tu_rng r = {0x0f8e4a3e5a2ull};
    for (int fmt = 0; fmt < 2; fmt++) {
        const xconv_dtype dt = fmt ? XCONV_DTYPE_F8E5M2 : XCONV_DTYPE_F8E4M3;
        int bad = 0;
        for (int round = 0; round < 7; round++) {
            for (uint32_t hi = 0; hi < 65536; hi++) {
                const uint32_t lo = round < 5 ? LOW[round] : (uint32_t)(tu_next(&r) & 0xffffu);
                f[hi] = f32_of_bits(hi << 16 | lo);
            }
            xconv__store_row(XCONV_CT_F32, dt, f, out, 1, 65536);
            for (uint32_t hi = 0; hi < 65536; hi++) {
                const uint8_t want = fmt ? xconv_f32_to_f8e5m2(f[hi]) : xconv_f32_to_f8e4m3(f[hi]);
                bad += out[hi] != want;
            }
        }
        XT_CHECK(bad == 0, "store_row f32 -> %s: %d of 458752 differ from the scalar encoder",
                 fmt ? "f8e5m2" : "f8e4m3", bad);
    }
}

int main(void)
{
    test_table();
    test_known();
    test_exhaustive();
    test_random_rounding();
    test_int_wrap();
    test_round_once();
    test_dense_rows();
    test_dense_f16();
    test_dense_f8();
    return xt_finish("test_dtypes");
}
