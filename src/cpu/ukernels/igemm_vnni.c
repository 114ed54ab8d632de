/*
 * igemm_vnni.c — 8-bit integer indirect-GEMM kernels on AVX512-VNNI (vpdpbusd: four u8 x s8
 * products summed into each s32 lane), for i8 and u8 convolutions whose y has at most 32
 * bits. s32 lanes wrap, which is exactly DESIGN.md §2's "sum modulo 2^32".
 *
 * vpdpbusd multiplies an unsigned by a signed byte, so x is stored shifted: x' = x ^ 0x80,
 * i.e. x + 128 for i8 (an unsigned byte) and x - 128 for u8 (a signed byte); padding is
 * 0x80 (x = 0). The shift is undone by the caller's init: -128 * sum(w) for i8 (x' is the
 * unsigned operand, w the signed one), +128 * sum(w) for u8 (w is the unsigned operand).
 *
 * Contract: that of igemm.h with ct u32 (s32 bits), except that values are bytes grouped by
 * four along the reduction: len is a multiple of 4; a[t*mr + i] points at len bytes of x';
 * b[t] at len/4 groups of nr*4 bytes (output channel j's four bytes at j*4); init and c are
 * nr int32 per row. kernel_y (igemm.h) writes the last call's sums into y rows of 1, 2 or
 * 4 bytes per value instead (y_bytes), so that a narrow y never goes through an int32 tile;
 * kernel_gemm runs whole blocks of rows that step evenly through x and y.
 */
#include "cpu/ukernels/igemm.h"

#include "cpu/isa.h"

#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* The wide block, 6 rows x 4 zmm of 16 lanes (nr = 64), and the narrow one for convs of at
 * most 32 output channels, 8 rows x 2 zmm (the wide one would sum zeros in half its lanes:
 * a 3->32-channel stem ran at 0.54x oneDNN). */
#define VNNI_MR 6
#define VNNI_NV 4
#define VNNI_NARROW_MR 8
#define VNNI_NARROW_NV 2
#define VNNI_MAX_MR 8

static const int32_t vnni_zeros[VNNI_NV * 16];

/* kernel_y is called from kernel_gemm too, and must stay one function: a copy specialized
 * for that call (no accumulate: every row starts from the same init) loses the accumulators'
 * registers in GCC. */
#if defined(__clang__)
#define VNNI_OPAQUE __attribute__((noinline))
#else
#define VNNI_OPAQUE __attribute__((noipa))
#endif

/* x_unsigned: x' is the unsigned operand (i8 x); else w is (u8 x). y: NULL to write the
 * int32 sums to c, else rows of y_bytes-wide values that get each sum's low bytes (vpmovdb /
 * vpmovdw truncate, which is the wrap modulo 2^8 / 2^16). Inlined into the wrappers so the
 * operand order is a constant. Every loop over rows and vectors is unrolled (rows past m
 * skipped), so that the accumulators stay in registers: GCC otherwise keeps the array in
 * memory outside the inner loop (24 stores and loads per call). */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni"))) void
vnni_body(const int mr, const int nv, bool x_unsigned, int64_t ntaps, int64_t len,
          const void *const *a, const void *const *b, const void *init, void *const *c, int m,
          int n, int accumulate, void *const *y, int y_bytes)
{
    __m512i acc[VNNI_MAX_MR][VNNI_NV];
    __mmask16 mask[VNNI_NV];
    XCONV_UNROLL for (int v = 0; v < nv; v++) {
        const int live = n - v * 16;
        mask[v] = live >= 16  ? (__mmask16)0xffff
                  : live <= 0 ? (__mmask16)0
                              : (__mmask16)((1u << live) - 1);
    }
    /* Every start value is a load through a selected pointer, without branches: GCC keeps
     * the accumulators in registers only when no branch merges them. */
    const int32_t *start[VNNI_MAX_MR];
    XCONV_UNROLL for (int r = 0; r < mr; r++)
        start[r] = accumulate ? (r < m ? (const int32_t *)c[r] : vnni_zeros)
                              : init ? (const int32_t *)init : vnni_zeros;
    XCONV_UNROLL for (int r = 0; r < mr; r++)
        XCONV_UNROLL for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_maskz_loadu_epi32(mask[v], start[r] + v * 16);
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned char *ap[VNNI_MAX_MR];
        XCONV_UNROLL for (int r = 0; r < mr; r++)
            ap[r] = (const unsigned char *)a[t * mr + r];
        const unsigned char *bp = (const unsigned char *)b[t];
        for (int64_t l = 0; l < len; l += 4, bp += nv * 64) {
            __m512i bv[VNNI_NV];
            XCONV_UNROLL for (int v = 0; v < nv; v++) bv[v] = _mm512_loadu_si512(bp + v * 64);
            XCONV_UNROLL for (int r = 0; r < mr; r++) {
                int32_t quad;
                memcpy(&quad, ap[r] + l, 4);
                const __m512i av = _mm512_set1_epi32(quad);
                XCONV_UNROLL for (int v = 0; v < nv; v++)
                    acc[r][v] = x_unsigned ? _mm512_dpbusd_epi32(acc[r][v], av, bv[v])
                                           : _mm512_dpbusd_epi32(acc[r][v], bv[v], av);
            }
        }
    }
    if (!y) {
        XCONV_UNROLL for (int r = 0; r < mr; r++)
            if (r < m)
                XCONV_UNROLL for (int v = 0; v < nv; v++)
                    _mm512_mask_storeu_epi32((int32_t *)c[r] + v * 16, mask[v], acc[r][v]);
    } else if (y_bytes == 1) {
        XCONV_UNROLL for (int r = 0; r < mr; r++)
            if (r < m)
                XCONV_UNROLL for (int v = 0; v < nv; v++)
                    _mm512_mask_cvtepi32_storeu_epi8((char *)y[r] + v * 16, mask[v], acc[r][v]);
    } else if (y_bytes == 2) {
        XCONV_UNROLL for (int r = 0; r < mr; r++)
            if (r < m)
                XCONV_UNROLL for (int v = 0; v < nv; v++)
                    _mm512_mask_cvtepi32_storeu_epi16((char *)y[r] + v * 32, mask[v], acc[r][v]);
    } else {
        XCONV_UNROLL for (int r = 0; r < mr; r++)
            if (r < m)
                XCONV_UNROLL for (int v = 0; v < nv; v++)
                    _mm512_mask_storeu_epi32((char *)y[r] + v * 64, mask[v], acc[r][v]);
    }
}

/* One block (mr x nv zmm) for one operand order (i8 x: x' unsigned; u8 x: w unsigned): the
 * kernel, kernel_y and kernel_gemm (xconv__igemm_gemm_tiles over kernel_y, kept out of line:
 * inside a loop over tiles GCC loses the accumulators' registers). */
#define VNNI_WRAPPERS(name, mr, nv, xu)                                                         \
    static __attribute__((target("avx512f,avx512bw,avx512vnni"))) void name(                  \
        int64_t ntaps, int64_t len, const void *const *a, const void *const *b,               \
        const void *init, void *const *c, int m, int n, int accumulate)                       \
    {                                                                                           \
        vnni_body(mr, nv, xu, ntaps, len, a, b, init, c, m, n, accumulate, NULL, 4);           \
    }                                                                                           \
    static VNNI_OPAQUE __attribute__((target("avx512f,avx512bw,avx512vnni"))) void name##_y(  \
        int64_t ntaps, int64_t len, const void *const *a, const void *const *b,               \
        const void *init, void *const *c, int m, int n, int accumulate, void *const *y,       \
        int y_bytes)                                                                            \
    {                                                                                           \
        vnni_body(mr, nv, xu, ntaps, len, a, b, init, c, m, n, accumulate, y, y_bytes);        \
    }                                                                                           \
    static void name##_gemm(int64_t mt, int64_t len, const void *a, ptrdiff_t lda,             \
                            const void *b, const void *init, void *y, ptrdiff_t ldy, int n,     \
                            int y_bytes)                                                        \
    {                                                                                           \
        xconv__igemm_gemm_tiles(mr, NULL, name##_y, mt, len, a, lda, b, init, y, ldy, n,       \
                                y_bytes);                                                       \
    }

VNNI_WRAPPERS(vnni_i8, VNNI_MR, VNNI_NV, true)
VNNI_WRAPPERS(vnni_u8, VNNI_MR, VNNI_NV, false)
VNNI_WRAPPERS(vnni_narrow_i8, VNNI_NARROW_MR, VNNI_NARROW_NV, true)
VNNI_WRAPPERS(vnni_narrow_u8, VNNI_NARROW_MR, VNNI_NARROW_NV, false)

/* [narrow][u8 x] */
static const xconv_igemm_geom VNNI_GEOMS[2][2] = {
    {{XCONV_CT_U32, "avx512vnni", VNNI_MR, VNNI_NV * 16, 1, vnni_i8, vnni_i8_y, vnni_i8_gemm},
     {XCONV_CT_U32, "avx512vnni", VNNI_MR, VNNI_NV * 16, 1, vnni_u8, vnni_u8_y, vnni_u8_gemm}},
    {{XCONV_CT_U32, "avx512vnni", VNNI_NARROW_MR, VNNI_NARROW_NV * 16, 1, vnni_narrow_i8,
      vnni_narrow_i8_y, vnni_narrow_i8_gemm},
     {XCONV_CT_U32, "avx512vnni", VNNI_NARROW_MR, VNNI_NARROW_NV * 16, 1, vnni_narrow_u8,
      vnni_narrow_u8_y, vnni_narrow_u8_gemm}},
};

__attribute__((target("avx512f,avx512bw"))) void xconv__igemm_vnni_shift(void *dst,
                                                                          const void *src,
                                                                          int64_t n)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        _mm512_storeu_si512((char *)dst + i,
                            _mm512_xor_si512(_mm512_loadu_si512((const char *)src + i), flip));
    if (i < n) {
        const __mmask64 k = (__mmask64)-1 >> (64 - (n - i));
        const __m512i v = _mm512_maskz_loadu_epi8(k, (const char *)src + i);
        _mm512_mask_storeu_epi8((char *)dst + i, k, _mm512_xor_si512(v, flip));
    }
}

static bool vnni_runs(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
}

const xconv_igemm_geom *xconv__igemm_geom_vnni(bool x_unsigned_operand)
{
    return vnni_runs() ? &VNNI_GEOMS[0][x_unsigned_operand ? 0 : 1] : NULL;
}

const xconv_igemm_geom *xconv__igemm_geom_vnni_narrow(bool x_unsigned_operand)
{
    return vnni_runs() ? &VNNI_GEOMS[1][x_unsigned_operand ? 0 : 1] : NULL;
}
#else
const xconv_igemm_geom *xconv__igemm_geom_vnni(bool x_unsigned_operand)
{
    (void)x_unsigned_operand;
    return NULL;
}

const xconv_igemm_geom *xconv__igemm_geom_vnni_narrow(bool x_unsigned_operand)
{
    (void)x_unsigned_operand;
    return NULL;
}

void xconv__igemm_vnni_shift(void *dst, const void *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ((unsigned char *)dst)[i] = (unsigned char)(((const unsigned char *)src)[i] ^ 0x80u);
}
#endif
