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

/* d: 4x4 inputs (row-major) of one tile, one vector (or scalar) of channels each; v: its 16
 * transformed values V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. */
#define WT_IN2D(T, d, v)                                                                   \
    do {                                                                                   \
        T t_[16];                                                                          \
        for (int j_ = 0; j_ < 4; j_++) {                                                   \
            t_[0 + j_] = d[0 + j_] - d[8 + j_];                                            \
            t_[4 + j_] = d[4 + j_] + d[8 + j_];                                            \
            t_[8 + j_] = d[8 + j_] - d[4 + j_];                                            \
            t_[12 + j_] = d[4 + j_] - d[12 + j_];                                          \
        }                                                                                  \
        for (int i_ = 0; i_ < 4; i_++) {                                                   \
            const T *r_ = t_ + 4 * i_;                                                     \
            v[4 * i_ + 0] = r_[0] - r_[2];                                                 \
            v[4 * i_ + 1] = r_[1] + r_[2];                                                 \
            v[4 * i_ + 2] = r_[2] - r_[1];                                                 \
            v[4 * i_ + 3] = r_[1] - r_[3];                                                 \
        }                                                                                  \
    } while (0)

#define WT_IN1D(T, d, v)                                                                   \
    do {                                                                                   \
        v[0] = d[0] - d[2];                                                                \
        v[1] = d[1] + d[2];                                                                \
        v[2] = d[2] - d[1];                                                                \
        v[3] = d[1] - d[3];                                                                \
    } while (0)

/* V of one tile and one direct tap: rows[k] -> the cin values of the tile's input k (or a
 * zero row); V[e] goes to dst + e * estride, one value per channel. Written as a column
 * pass into registers and a row pass that stores as it goes: with whole arrays of inputs,
 * temporaries and outputs alive at once the compiler spilled them to the stack. */
static WT_TARGET void WT_FN(wt_in)(int two_d, const float *const *rows, int64_t cin, float *dst,
                                  int64_t estride)
{
    typedef WT_FN(wvec) vec;
    enum { VL = (int)(sizeof(vec) / sizeof(float)) };
    int64_t c = 0;
    if (two_d) {
        for (; c + VL <= cin; c += VL) {
            vec t[16];
            for (int j = 0; j < 4; j++) {
                vec d0, d1, d2, d3;
                memcpy(&d0, rows[0 + j] + c, sizeof(vec));
                memcpy(&d1, rows[4 + j] + c, sizeof(vec));
                memcpy(&d2, rows[8 + j] + c, sizeof(vec));
                memcpy(&d3, rows[12 + j] + c, sizeof(vec));
                t[0 + j] = d0 - d2, t[4 + j] = d1 + d2, t[8 + j] = d2 - d1, t[12 + j] = d1 - d3;
            }
            for (int i = 0; i < 4; i++) {
                const vec *r = t + 4 * i;
                const vec v0 = r[0] - r[2], v1 = r[1] + r[2], v2 = r[2] - r[1], v3 = r[1] - r[3];
                memcpy(dst + (4 * i + 0) * estride + c, &v0, sizeof(vec));
                memcpy(dst + (4 * i + 1) * estride + c, &v1, sizeof(vec));
                memcpy(dst + (4 * i + 2) * estride + c, &v2, sizeof(vec));
                memcpy(dst + (4 * i + 3) * estride + c, &v3, sizeof(vec));
            }
        }
    } else {
        for (; c + VL <= cin; c += VL) {
            vec d[4], v[4];
            for (int k = 0; k < 4; k++) memcpy(&d[k], rows[k] + c, sizeof(vec));
            WT_IN1D(vec, d, v);
            for (int k = 0; k < 4; k++) memcpy(dst + k * estride + c, &v[k], sizeof(vec));
        }
    }
    const int E = two_d ? 16 : 4;
    for (; c < cin; c++) {
        float d[16], v[16];
        for (int k = 0; k < E; k++) d[k] = rows[k][c];
        if (two_d)
            WT_IN2D(float, d, v);
        else
            WT_IN1D(float, d, v);
        for (int k = 0; k < E; k++) dst[k * estride + c] = v[k];
    }
}

/* m: the tile's 16 (or 4) products M[e] at m + e * estride, nr channels each (a multiple of
 * the vector length); out[k]: the first cnt <= nr values of the 2x2 (or 2) outputs Y = A^T
 * M A + bias, A^T = [1 1 1 0; 0 1 -1 -1], row-major. Returns whether any of them is not
 * finite. */
static WT_TARGET bool WT_FN(wt_out)(int two_d, const float *m, int64_t estride,
                                   const float *bias, int nr, int cnt, float *const *out)
{
    typedef WT_FN(wvec) vec;
    typedef int32_t ivec __attribute__((vector_size(WT_VB)));
    enum { VL = (int)(sizeof(vec) / sizeof(float)) };
    ivec bad = (ivec){0};
    (void)nr;
    for (int c = 0; c < cnt; c += VL) {
        vec b, y[4];
        memcpy(&b, bias + c, sizeof b);
        if (two_d) {
            vec s[8];
            for (int j = 0; j < 4; j++) {
                vec m0, m1, m2, m3;
                memcpy(&m0, m + (0 + j) * estride + c, sizeof(vec));
                memcpy(&m1, m + (4 + j) * estride + c, sizeof(vec));
                memcpy(&m2, m + (8 + j) * estride + c, sizeof(vec));
                memcpy(&m3, m + (12 + j) * estride + c, sizeof(vec));
                s[j] = m0 + m1 + m2;
                s[4 + j] = m1 - m2 - m3;
            }
            for (int i = 0; i < 2; i++) {
                const vec *r = s + 4 * i;
                y[2 * i + 0] = b + (r[0] + r[1] + r[2]);
                y[2 * i + 1] = b + (r[1] - r[2] - r[3]);
            }
        } else {
            vec m0, m1, m2, m3;
            memcpy(&m0, m + 0 * estride + c, sizeof(vec));
            memcpy(&m1, m + 1 * estride + c, sizeof(vec));
            memcpy(&m2, m + 2 * estride + c, sizeof(vec));
            memcpy(&m3, m + 3 * estride + c, sizeof(vec));
            y[0] = b + (m0 + m1 + m2);
            y[1] = b + (m1 - m2 - m3);
        }
        const int n = cnt - c < VL ? cnt - c : VL;
        if (n < VL) { /* lanes past cnt: zero weights, finite; not stored */
            for (int k = 0; k < (two_d ? 4 : 2); k++) memcpy(out[k] + c, &y[k], (size_t)n * sizeof(float));
        } else {
            for (int k = 0; k < (two_d ? 4 : 2); k++) memcpy(out[k] + c, &y[k], sizeof(vec));
        }
        for (int k = 0; k < (two_d ? 4 : 2); k++)
            bad |= (ivec)((y[k] - y[k]) != (y[k] - y[k])); /* NaN for Inf and NaN alone */
    }
    int any = 0;
    for (int l = 0; l < VL; l++) any |= bad[l];
    return any != 0;
}

#undef WT_IN2D
#undef WT_IN1D
#undef WT_FN
#undef WT_CAT
#undef WT_CAT2
#undef WT_VB
#undef WT_NAME
#undef WT_TARGET
