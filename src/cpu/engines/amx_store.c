/*
 * amx_store.c — cpu.amx's AVX-512 pieces around the tiles: the dense stores of a block's C
 * rows into y, the copy of x's channel spans, and the exponent scan of bf16 values (amx.h). Only called where
 * xconv__amx_available() holds, which implies AVX-512F, BW and VL.
 */
#include "cpu/engines/amx.h"
#include "cpu/isa.h"

#include <string.h>

#if XCONV_X86
#include <immintrin.h>

#define AMX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* bf16 rounds to nearest even (vcvtne2ps2bf16); it flushes denormal sums to zero, which
 * cpu.amx only runs where such sums stay within the accuracy bound (amx.c). */
AMX_AVX512 void xconv__amx_store_rows(amx_store kind, const char *c, char *base, const int64_t *off,
                                      const uint8_t *row, int count, int cnt)
{
    const __mmask16 m0 = (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1);
    const __mmask16 m1 = (__mmask16)(cnt >= 32 ? 0xffff : cnt > 16 ? (1u << (cnt - 16)) - 1 : 0);
    const __mmask32 m32 = (__mmask32)(cnt >= 32 ? 0xffffffffu : (1u << cnt) - 1);
    for (int j = 0; j < count; j++) {
        const char *src = c + (size_t)row[j] * 128;
        char *d = base + off[j];
        if (kind == AMX_STORE_BF16) {
            const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 64), _mm512_loadu_ps(src));
            _mm512_mask_storeu_epi16(d, m32, (__m512i)h);
        } else if (kind == AMX_STORE_B32) {
            _mm512_mask_storeu_epi32(d, m0, _mm512_loadu_si512(src));
            if (m1) _mm512_mask_storeu_epi32(d + 64, m1, _mm512_loadu_si512(src + 64));
        } else {
            _mm_mask_storeu_epi8(d, m0, _mm512_cvtepi32_epi8(_mm512_loadu_si512(src)));
            if (m1) _mm_mask_storeu_epi8(d + 16, m1, _mm512_cvtepi32_epi8(_mm512_loadu_si512(src + 64)));
        }
    }
}

AMX_AVX512 void xconv__amx_bf16_scan(const uint16_t *v, int64_t n, int *emin, int *emax)
{
    /* the exponent field (bits 7..14): its minimum over nonzero values (zeros count as
     * 255), its maximum over all */
    __m512i lo = _mm512_set1_epi16(255), hi = _mm512_setzero_si512();
    const __m512i mag = _mm512_set1_epi16(0x7fff), big = _mm512_set1_epi16(255);
    for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 live = n - i >= 32 ? 0xffffffffu : (__mmask32)((1ull << (n - i)) - 1);
        const __m512i x = _mm512_and_si512(_mm512_maskz_loadu_epi16(live, v + i), mag);
        const __mmask32 zero = _mm512_cmpeq_epi16_mask(x, _mm512_setzero_si512());
        const __m512i e = _mm512_srli_epi16(x, 7);
        lo = _mm512_min_epu16(lo, _mm512_mask_mov_epi16(e, zero, big));
        hi = _mm512_max_epu16(hi, e);
    }
    const __m512i lo32 = _mm512_min_epu32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(lo)),
                                          _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(lo, 1)));
    const __m512i hi32 = _mm512_max_epu32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi)),
                                          _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi, 1)));
    const int l = (int)_mm512_reduce_min_epu32(lo32), h = (int)_mm512_reduce_max_epu32(hi32);
    if (l < *emin) *emin = l;
    if (h > *emax) *emax = h;
}

AMX_AVX512 void xconv__amx_copy_spans(char *dst, size_t dst_step, const char *src,
                                      ptrdiff_t src_step, int64_t count, size_t bytes)
{
    if (dst_step == bytes && src_step == (ptrdiff_t)bytes) {
        memcpy(dst, src, (size_t)count * bytes);
        return;
    }
    const size_t whole = bytes / 64 * 64;
    const __mmask64 tail = bytes % 64 ? (__mmask64)((1ull << (bytes % 64)) - 1) : 0;
    for (int64_t i = 0; i < count; i++, dst += dst_step, src += src_step) {
        for (size_t b = 0; b < whole; b += 64) _mm512_storeu_si512(dst + b, _mm512_loadu_si512(src + b));
        if (tail) _mm512_mask_storeu_epi8(dst + whole, tail, _mm512_maskz_loadu_epi8(tail, src + whole));
    }
}

#else

void xconv__amx_copy_spans(char *dst, size_t dst_step, const char *src, ptrdiff_t src_step,
                           int64_t count, size_t bytes)
{
    for (int64_t i = 0; i < count; i++) memcpy(dst + i * (ptrdiff_t)dst_step, src + i * src_step, bytes);
}

void xconv__amx_store_rows(amx_store kind, const char *c, char *base, const int64_t *off,
                           const uint8_t *row, int count, int cnt)
{
    (void)kind, (void)c, (void)base, (void)off, (void)row, (void)count, (void)cnt;
}

void xconv__amx_bf16_scan(const uint16_t *v, int64_t n, int *emin, int *emax)
{
    for (int64_t i = 0; i < n; i++) {
        const int e = (v[i] >> 7) & 0xff;
        if ((v[i] & 0x7fff) && e < *emin) *emin = e;
        if (e > *emax) *emax = e;
    }
}

#endif
