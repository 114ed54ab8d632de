/*
 * amx_store.c — cpu.amx's AVX-512 pieces around the tiles: the dense stores of a block's C
 * rows into y, and the exponent scan of bf16 values (amx.h). Only called where
 * xconv__amx_available() holds, which implies AVX-512F, BW and VL.
 */
#include "cpu/engines/amx.h"
#include "cpu/isa.h"

#if XCONV_X86
#include <immintrin.h>

#define AMX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* f32 bits to bf16 bits: round to nearest even; NaN stays NaN (quiet). */
static inline AMX_AVX512 __m256i to_bf16(__m512 v)
{
    const __m512i b = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

AMX_AVX512 void xconv__amx_store_rows(amx_store kind, const char *c, void *const *dst, int rows,
                                      int cnt)
{
    const __mmask16 m0 = (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1);
    const __mmask16 m1 = (__mmask16)(cnt >= 32 ? 0xffff : cnt > 16 ? (1u << (cnt - 16)) - 1 : 0);
    for (int i = 0; i < rows; i++, c += 128) {
        char *d = dst[i];
        if (kind == AMX_STORE_BF16) {
            _mm256_mask_storeu_epi16(d, m0, to_bf16(_mm512_loadu_ps(c)));
            if (m1) _mm256_mask_storeu_epi16(d + 32, m1, to_bf16(_mm512_loadu_ps(c + 64)));
        } else if (kind == AMX_STORE_B32) {
            _mm512_mask_storeu_epi32(d, m0, _mm512_loadu_si512(c));
            if (m1) _mm512_mask_storeu_epi32(d + 64, m1, _mm512_loadu_si512(c + 64));
        } else {
            _mm_mask_storeu_epi8(d, m0, _mm512_cvtepi32_epi8(_mm512_loadu_si512(c)));
            if (m1) _mm_mask_storeu_epi8(d + 16, m1, _mm512_cvtepi32_epi8(_mm512_loadu_si512(c + 64)));
        }
    }
}

AMX_AVX512 int xconv__amx_bf16_emin(const uint16_t *v, int64_t n, int emin)
{
    /* the exponent field (bits 7..14) of nonzero values, 255 for zeros */
    __m512i lo = _mm512_set1_epi16(255);
    const __m512i mag = _mm512_set1_epi16(0x7fff), big = _mm512_set1_epi16(255);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i x = _mm512_and_si512(_mm512_loadu_si512(v + i), mag);
        const __mmask32 zero = _mm512_cmpeq_epi16_mask(x, _mm512_setzero_si512());
        const __m512i e = _mm512_mask_mov_epi16(_mm512_srli_epi16(x, 7), zero, big);
        lo = _mm512_min_epu16(lo, e);
    }
    if (i < n) {
        const __mmask32 live = (__mmask32)((1ull << (n - i)) - 1);
        const __m512i x = _mm512_and_si512(_mm512_maskz_loadu_epi16(live, v + i), mag);
        const __mmask32 zero = _mm512_cmpeq_epi16_mask(x, _mm512_setzero_si512());
        lo = _mm512_min_epu16(lo, _mm512_mask_mov_epi16(_mm512_srli_epi16(x, 7), zero, big));
    }
    uint16_t lanes[32];
    _mm512_storeu_si512(lanes, lo);
    for (int k = 0; k < 32; k++) emin = lanes[k] < emin ? lanes[k] : emin;
    return emin;
}

#else

void xconv__amx_store_rows(amx_store kind, const char *c, void *const *dst, int rows, int cnt)
{
    (void)kind, (void)c, (void)dst, (void)rows, (void)cnt;
}

int xconv__amx_bf16_emin(const uint16_t *v, int64_t n, int emin)
{
    for (int64_t i = 0; i < n; i++) {
        const int e = (v[i] & 0x7fff) ? (v[i] >> 7) & 0xff : 255;
        emin = e < emin ? e : emin;
    }
    return emin;
}

#endif
