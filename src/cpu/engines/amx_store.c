/*
 * amx_store.c — cpu.amx's (and cpu.avx512bf16's) AVX-512 pieces around the blocks: the dense
 * stores of a block's C rows into y, the copy of x's channel spans, and the exponent scan of
 * bf16 values (amx.h). Only called where xconv__amx_vec_available() holds (AVX-512 F, BW, VL
 * and BF16), which xconv__amx_available() implies.
 */
#include "cpu/engines/amx.h"
#include "cpu/isa.h"

#include <string.h>

#if XCONV_X86
#include <immintrin.h>

#define AMX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* One C row (128 bytes) into y's cnt values at d. bf16 rounds to nearest even
 * (vcvtne2ps2bf16); it flushes denormal sums to zero, which cpu.amx only runs where such
 * sums stay within the accuracy bound (amx.c). */
static inline __attribute__((always_inline)) AMX_AVX512 void store_row(amx_store kind, const char *src, char *d,
                                                                  __mmask16 m0, __mmask16 m1, __mmask32 m32)
{
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

#define AMX_STORE_MASKS(cnt)                                                                  \
    const __mmask16 m0 = (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1);                   \
    const __mmask16 m1 = (__mmask16)(cnt >= 32 ? 0xffff : cnt > 16 ? (1u << (cnt - 16)) - 1 : 0); \
    const __mmask32 m32 = (__mmask32)(cnt >= 32 ? 0xffffffffu : (1u << cnt) - 1)

AMX_AVX512 void xconv__amx_store_rows(amx_store kind, const char *c, char *base, const int64_t *off,
                                      const uint8_t *row, int count, int cnt)
{
    AMX_STORE_MASKS(cnt);
    for (int j = 0; j < count; j++) store_row(kind, c + (size_t)row[j] * 128, base + off[j], m0, m1, m32);
}

AMX_AVX512 void xconv__amx_store_strided(amx_store kind, const char *c, char *dst, int64_t step, int count,
                                         int cnt)
{
    AMX_STORE_MASKS(cnt);
    for (int j = 0; j < count; j++) store_row(kind, c + (size_t)j * 128, dst + j * step, m0, m1, m32);
}

/* Over the magnitudes m = v & 0x7fff, whose top bits are the exponent field (m >> 7): the
 * largest m gives emax, and the smallest nonzero one emin, found as min(m - 1) + 1 (a zero
 * wraps to 0xffff, above every nonzero magnitude). Four vector operations per 32 values,
 * two chains each: the scan runs on the core beside the tile unit, at about L2's rate. */
AMX_AVX512 void xconv__amx_bf16_scan(const uint16_t *v, int64_t n, int *emin, int *emax)
{
    const __m512i mag = _mm512_set1_epi16(0x7fff), one = _mm512_set1_epi16(1);
    __m512i lo0 = _mm512_set1_epi16(-1), lo1 = lo0, hi0 = _mm512_setzero_si512(), hi1 = hi0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i x0 = _mm512_and_si512(_mm512_loadu_si512(v + i), mag);
        const __m512i x1 = _mm512_and_si512(_mm512_loadu_si512(v + i + 32), mag);
        lo0 = _mm512_min_epu16(lo0, _mm512_sub_epi16(x0, one));
        lo1 = _mm512_min_epu16(lo1, _mm512_sub_epi16(x1, one));
        hi0 = _mm512_max_epu16(hi0, x0);
        hi1 = _mm512_max_epu16(hi1, x1);
    }
    for (; i < n; i += 32) { /* lanes past n load as zeros, which change neither */
        const __mmask32 live = n - i >= 32 ? 0xffffffffu : (__mmask32)((1ull << (n - i)) - 1);
        const __m512i x = _mm512_and_si512(_mm512_maskz_loadu_epi16(live, v + i), mag);
        lo0 = _mm512_min_epu16(lo0, _mm512_sub_epi16(x, one));
        hi0 = _mm512_max_epu16(hi0, x);
    }
    const __m512i lo = _mm512_min_epu16(lo0, lo1), hi = _mm512_max_epu16(hi0, hi1);
    const __m512i lo32 = _mm512_min_epu32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(lo)),
                                          _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(lo, 1)));
    const __m512i hi32 = _mm512_max_epu32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi)),
                                          _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi, 1)));
    const unsigned m = _mm512_reduce_min_epu32(lo32);
    const int l = m == 0xffff ? 255 : (int)((m + 1) >> 7), h = (int)(_mm512_reduce_max_epu32(hi32) >> 7);
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

/* f16 values as (hi, hi, lo, lo) bf16 reduction values (amx_pack.c's split mode): f16 ->
 * f32 is exact and never denormal (f16's smallest value is 2^-24), so vcvtne2ps2bf16's
 * flushing does not arise; hi rounds to nearest even, lo = v - hi is exact in f32 and has at
 * most three significant bits, so its conversion is exact too. Non-finite values: hi keeps
 * the Inf or NaN (cpu.amx then takes the f32 path), lo is whatever the arithmetic gives. */
AMX_AVX512 void xconv__amx_split_f16(const uint16_t *src, uint16_t *dst, int64_t n)
{
    /* out[4k .. 4k+3] = hi[k], hi[k], lo[k], lo[k]; words 0-15 of `both` are hi, 16-31 lo */
    uint16_t ia[32], ib[32];
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 4; j++) {
            ia[4 * k + j] = (uint16_t)(j < 2 ? k : 16 + k);
            ib[4 * k + j] = (uint16_t)(j < 2 ? 8 + k : 24 + k);
        }
    const __m512i idx_a = _mm512_loadu_si512(ia), idx_lo = _mm512_loadu_si512(ib);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        const __m256bh hb = _mm512_cvtneps_pbh(v);
        const __m512 h = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)hb), 16));
        const __m256bh lb = _mm512_cvtneps_pbh(_mm512_sub_ps(v, h));
        /* 32 words: hi[0..15] then lo[0..15]; out[4k..4k+3] = hi[k], hi[k], lo[k], lo[k] */
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)hb), (__m256i)lb, 1);
        _mm512_storeu_si512(dst + 4 * i, _mm512_permutexvar_epi16(idx_a, both));
        _mm512_storeu_si512(dst + 4 * i + 32, _mm512_permutexvar_epi16(idx_lo, both));
    }
    for (; i < n; i++) { /* the tail through the same steps, one value at a time */
        uint16_t in[16] = {0}, out[64];
        in[0] = src[i];
        xconv__amx_split_f16(in, out, 16);
        memcpy(dst + 4 * i, out, 8);
    }
}

#else

void xconv__amx_split_f16(const uint16_t *src, uint16_t *dst, int64_t n)
{
    (void)src, (void)dst, (void)n;
}

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

void xconv__amx_store_strided(amx_store kind, const char *c, char *dst, int64_t step, int count, int cnt)
{
    (void)kind, (void)c, (void)dst, (void)step, (void)count, (void)cnt;
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
