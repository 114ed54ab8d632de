/*
 * winograd.tmpl.h — cpu.winograd's transforms for one vector width: the input transform of
 * a tile (B^T d B) over its channels and the output transform (A^T M A, plus the bias) over
 * a panel's output channels, for F(2x2, 3x3) and for F(2, 3). GCC/clang vector extensions
 * of WT_VB bytes, so that one body serves AVX-512, AVX2 and the baseline.
 *
 *   #define WT_VB     64                             vector bytes
 *   #define WT_NAME   avx512                         name suffix
 *   #define WT_TARGET XCONV_TARGET_AVX512            target attribute (may be empty)
 *   #include "winograd.tmpl.h"
 *
 * Every output is the same operations in the same order whatever the vector width, so the
 * bits do not depend on the ISA (no contraction: this file is compiled without
 * -ffp-contract=fast).
 */
#define WT_CAT2(a, b) a##_##b
#define WT_CAT(a, b)  WT_CAT2(a, b)
#define WT_FN(f)      WT_CAT(f, WT_NAME)

typedef float WT_FN(wvec) __attribute__((vector_size(WT_VB)));

/* F(2, 3) along one dim, on vectors (or scalars) of channels: 4 inputs d -> 4 transformed
 * values o (B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]), and 4 products m -> 2 outputs y
 * (A^T = [1 1 1 0; 0 1 -1 -1]). Two dims apply them along columns, then along rows. */
#define WT_BT(d0, d1, d2, d3, o0, o1, o2, o3) \
    (o0 = (d0) - (d2), o1 = (d1) + (d2), o2 = (d2) - (d1), o3 = (d1) - (d3))
#define WT_AT(m0, m1, m2, m3, y0, y1) (y0 = (m0) + (m1) + (m2), y1 = (m1) - (m2) - (m3))

/* n <= VL floats at p as a vector (lanes past n zero), and back. */
#define WT_LOAD(v, p, n) \
    ((n) == VL ? (void)memcpy(&(v), (p), sizeof(v)) : (void)((v) = (vec){0}, memcpy(&(v), (p), (size_t)(n) * 4)))
#define WT_STORE(p, v, n) memcpy((p), &(v), (n) == VL ? sizeof(v) : (size_t)(n) * 4)

/* V of one tile and one direct tap: rows[k] -> the cin values of the tile's input k (or a
 * zero row); V[e] goes to dst + e * estride, one value per channel. Written as a column
 * pass into registers and a row pass that stores as it goes: with whole arrays of inputs,
 * temporaries and outputs alive at once the compiler spilled them to the stack. One chunk
 * of n <= VL channels at c; the last, partial one takes the same steps on zero lanes. */
static inline __attribute__((always_inline)) WT_TARGET void
WT_FN(wt_in_chunk)(int two_d, const float *const *rows, int64_t c, int n, float *dst, int64_t estride)
{
    typedef WT_FN(wvec) vec;
    enum { VL = (int)(sizeof(vec) / sizeof(float)) };
    vec d0, d1, d2, d3, o[4];
    if (two_d) {
        vec t[16];
        for (int j = 0; j < 4; j++) {
            WT_LOAD(d0, rows[0 + j] + c, n), WT_LOAD(d1, rows[4 + j] + c, n);
            WT_LOAD(d2, rows[8 + j] + c, n), WT_LOAD(d3, rows[12 + j] + c, n);
            WT_BT(d0, d1, d2, d3, t[0 + j], t[4 + j], t[8 + j], t[12 + j]);
        }
        for (int i = 0; i < 4; i++) {
            const vec *r = t + 4 * i;
            WT_BT(r[0], r[1], r[2], r[3], o[0], o[1], o[2], o[3]);
            for (int k = 0; k < 4; k++) WT_STORE(dst + (4 * i + k) * estride + c, o[k], n);
        }
    } else {
        WT_LOAD(d0, rows[0] + c, n), WT_LOAD(d1, rows[1] + c, n);
        WT_LOAD(d2, rows[2] + c, n), WT_LOAD(d3, rows[3] + c, n);
        WT_BT(d0, d1, d2, d3, o[0], o[1], o[2], o[3]);
        for (int k = 0; k < 4; k++) WT_STORE(dst + k * estride + c, o[k], n);
    }
}

static WT_TARGET void WT_FN(wt_in)(int two_d, const float *const *rows, int64_t cin, float *dst,
                                  int64_t estride)
{
    enum { VL = (int)(sizeof(WT_FN(wvec)) / sizeof(float)) };
    int64_t c = 0;
    for (; c + VL <= cin; c += VL) WT_FN(wt_in_chunk)(two_d, rows, c, VL, dst, estride);
    if (c < cin) WT_FN(wt_in_chunk)(two_d, rows, c, (int)(cin - c), dst, estride);
}

/* One chunk of wt_out: n <= VL output channels at c; returns the lanes' not-finite mask. */
typedef int32_t WT_FN(wivec) __attribute__((vector_size(WT_VB)));
static inline __attribute__((always_inline)) WT_TARGET WT_FN(wivec)
WT_FN(wt_out_chunk)(int two_d, const float *m, int64_t estride, const float *bias, int c, int n,
                    float *const *out)
{
    typedef WT_FN(wvec) vec;
    typedef WT_FN(wivec) ivec;
    enum { VL = (int)(sizeof(vec) / sizeof(float)) };
    ivec bad = (ivec){0};
    vec b, y[4], m4[4];
    memcpy(&b, bias + c, sizeof b);
    if (two_d) {
        vec s[8]; /* A^T M: 2 rows of 4 */
        for (int j = 0; j < 4; j++) {
            for (int i = 0; i < 4; i++) memcpy(&m4[i], m + (4 * i + j) * estride + c, sizeof(vec));
            WT_AT(m4[0], m4[1], m4[2], m4[3], s[j], s[4 + j]);
        }
        for (int i = 0; i < 2; i++) WT_AT(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3], y[2 * i], y[2 * i + 1]);
    } else {
        for (int i = 0; i < 4; i++) memcpy(&m4[i], m + i * estride + c, sizeof(vec));
        WT_AT(m4[0], m4[1], m4[2], m4[3], y[0], y[1]);
    }
    for (int k = 0; k < (two_d ? 4 : 2); k++) {
        y[k] = b + y[k];
        WT_STORE(out[k] + c, y[k], n);
        bad |= (ivec)((y[k] - y[k]) != (y[k] - y[k])); /* NaN for Inf and NaN alone */
    }
    return bad;
}

/* m: the tile's 16 (or 4) products M[e] at m + e * estride, nr channels each (a multiple of
 * the vector length); out[k]: the first cnt <= nr values of the 2x2 (or 2) outputs Y = A^T
 * M A + bias, row-major. Returns whether any of them is not finite (lanes past cnt: zero
 * weights, finite; not stored). */
static WT_TARGET bool WT_FN(wt_out)(int two_d, const float *m, int64_t estride,
                                   const float *bias, int nr, int cnt, float *const *out)
{
    enum { VL = (int)(sizeof(WT_FN(wvec)) / sizeof(float)) };
    WT_FN(wivec) bad = {0};
    (void)nr;
    int c = 0;
    for (; c + VL <= cnt; c += VL) bad |= WT_FN(wt_out_chunk)(two_d, m, estride, bias, c, VL, out);
    if (c < cnt) bad |= WT_FN(wt_out_chunk)(two_d, m, estride, bias, c, cnt - c, out);
    int any = 0;
    for (int l = 0; l < VL; l++) any |= bad[l];
    return any != 0;
}

#undef WT_BT
#undef WT_AT
#undef WT_LOAD
#undef WT_STORE
#undef WT_FN
#undef WT_CAT
#undef WT_CAT2
#undef WT_VB
#undef WT_NAME
#undef WT_TARGET
