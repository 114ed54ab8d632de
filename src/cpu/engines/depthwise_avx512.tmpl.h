/*
 * depthwise_avx512.tmpl.h — the channels-last depthwise stencils for one AVX-512 feature set;
 * included by depthwise_avx512_float.c, _int.c and _wide.c with
 *   DW_SFX     the name suffix (avx512, vnni)
 *   DW_TARGET  the target attribute string
 *   DW_VNNI    1: integer taps by vpdpwssd; 0: vpmaddwd + vpaddd
 *   DW_HW_BF16 1 (optional, with avx512bf16 in DW_TARGET): XCONV_DW_X_BF16X2's bf16 y by
 *              vcvtne2ps2bf16
 * and #undef'd at the end. Every function here is inlined into the entry points at the end,
 * one per x kind, so the x kind, kernel width and stride are constants in each loop nest.
 *
 * Sums: acc = bias, then every tap in (k0, k1, k2) order, each as one fused multiply-add
 * (f32, f64), two (complex: acc += x * (wr, wr), then acc += (xi, xr) * (-wi, wi), so
 * re = (acc + xr*wr) - xi*wi and im = (acc + xi*wr) + xr*wi, each rounded once per step) or
 * one exact wrapping add of the product (u32, u64). The interior tiles and the border
 * pixels do the same operations in the same order, so a value does not depend on which of
 * the two computed it, nor on how items are split across threads.
 */
#define DW_CAT2(a, b) a##_##b
#define DW_CAT(a, b) DW_CAT2(a, b)
#define DW_NAME(name) DW_CAT(name, DW_SFX)
#ifndef DW_HW_BF16
#define DW_HW_BF16 0
#endif
#ifndef DW_PW
#define DW_PW 4
#endif
/* Forced inline where the compiler optimizes (the stencils' vectors stay in registers); an
 * unoptimized build keeps them as calls: clang -O0 with ASan gave the fully inlined entry
 * points frames of 9.5 MB, past the 8 MB stack (fuzz_validate's crash on a u8 VNNI conv). */
#ifdef __OPTIMIZE__
#define DW_AI static inline __attribute__((always_inline, target(DW_TARGET)))
#else
#define DW_AI static inline __attribute__((target(DW_TARGET)))
#endif

/* 16 f8 codes as f32, exactly (mini_decode's values; a NaN code decodes to the one quiet
 * NaN, 0x7fc00000, as NAN does there). e5m2 is the high byte of an f16. e4m3 shifted into an
 * f16's exponent and mantissa fields reads 2^-8 of its value, subnormals included (both
 * formats' subnormals are their exponent field 0), so the f16 value times 256 is exact. */
DW_AI __m512 DW_NAME(dw_f8_decode)(bool e4m3, __m128i b)
{
    const __m256i h = _mm256_cvtepu8_epi16(b);
    const __m256i mag = _mm256_and_si256(h, _mm256_set1_epi16(0x7f));
    __m512 v;
    __mmask16 nan;
    if (e4m3) {
        const __m256i f16 = _mm256_or_si256(_mm256_slli_epi16(mag, 7),
                                            _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x80)), 8));
        v = _mm512_mul_ps(_mm512_cvtph_ps(f16), _mm512_set1_ps(256.0f));
        nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f));
    } else {
        v = _mm512_cvtph_ps(_mm256_slli_epi16(h, 8));
        nan = _mm256_cmpgt_epi16_mask(mag, _mm256_set1_epi16(0x7c));
    }
    return _mm512_mask_mov_ps(v, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
}

/* f32 bits to f8 codes, rounded once to nearest even as mini_encode does (src/core/dtypes.c):
 * NaN -> sign | nan_code, +-Inf and values past the largest finite -> sign | overflow (Inf for
 * e5m2, the largest finite for e4m3, which saturates), f32 subnormals -> signed zero. */
DW_AI __m128i DW_NAME(dw_f8_encode)(bool e4m3, __m512i bits)
{
    const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    const int max_finite = e4m3 ? 0x7e : 0x7b, overflow = e4m3 ? 0x7e : 0x7c, nan_code = e4m3 ? 0x7f : 0x7e;
    const int emin = 1 - bias, emax = (max_finite >> mbits) - bias;
    const __m512i abs = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(bits, 31), 7);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    const __m512i expf = _mm512_srli_epi32(abs, 23);
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(expf, _mm512_setzero_si512());
    const __m512i e = _mm512_sub_epi32(expf, _mm512_set1_epi32(127));
    /* Inf (e = 128) is past emax + 1 too */
    const __mmask16 big = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(emax + 1));
    const __m512i m = _mm512_or_si512(_mm512_and_si512(abs, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x800000));
    const __m512i q = _mm512_sub_epi32(_mm512_max_epi32(e, _mm512_set1_epi32(emin)), _mm512_set1_epi32(mbits));
    const __m512i shift = _mm512_sub_epi32(_mm512_add_epi32(q, _mm512_set1_epi32(23)), e); /* >= 23 - mbits */
    const __mmask16 gone = _mm512_cmpge_epi32_mask(shift, _mm512_set1_epi32(26)); /* below half the least */
    const __m512i one = _mm512_set1_epi32(1);
    __m512i r = _mm512_srlv_epi32(m, shift);
    const __m512i rem = _mm512_and_si512(m, _mm512_sub_epi32(_mm512_sllv_epi32(one, shift), one));
    const __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one));
    const __mmask16 up = _mm512_cmpgt_epu32_mask(rem, half) |
                         (_mm512_cmpeq_epi32_mask(rem, half) & _mm512_test_epi32_mask(r, one));
    r = _mm512_mask_add_epi32(r, up, r, one);
    r = _mm512_mask_mov_epi32(r, gone, _mm512_setzero_si512());
    /* normals carry the implicit bit, which the exponent field absorbs */
    const __m512i normal = _mm512_sub_epi32(
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(bias)), mbits), r),
        _mm512_set1_epi32(1 << mbits));
    __m512i code = _mm512_mask_mov_epi32(normal, _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(emin)), r);
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(code, _mm512_set1_epi32(max_finite)),
                                 _mm512_set1_epi32(overflow));
    code = _mm512_mask_mov_epi32(code, zero, _mm512_setzero_si512());
    code = _mm512_mask_mov_epi32(code, big, _mm512_set1_epi32(overflow));
    code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(nan_code));
    return _mm512_cvtepi32_epi8(_mm512_or_si512(code, sign));
}

/* Lanes of x at p (bytes) as compute-type bits; masked lanes read nothing. */
DW_AI __m512i DW_NAME(dw_ld1)(int xk, const char *p, __mmask16 m, bool masked)
{
    switch (xk) {
    case XCONV_DW_X_F64:
    case XCONV_DW_X_C64:
    case XCONV_DW_X_C128:
    case XCONV_DW_X_B64:
        return masked ? _mm512_maskz_loadu_epi64((__mmask8)m, p) : _mm512_loadu_si512(p);
    case XCONV_DW_X_F32:
        return masked ? _mm512_maskz_loadu_epi32(m, p) : _mm512_loadu_si512(p);
    case XCONV_DW_X_BF16:
    case XCONV_DW_X_BF16X2: /* (dw_ld reads this kind itself) */ {
        const __m256i h = masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256((const __m256i *)p);
        return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    }
    case XCONV_DW_X_F16: {
        const __m256i h = masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256((const __m256i *)p);
        return _mm512_castps_si512(_mm512_cvtph_ps(h));
    }
    case XCONV_DW_X_E4M3:
    case XCONV_DW_X_E5M2: {
        const __m128i b = masked ? _mm_maskz_loadu_epi8(m, p) : _mm_loadu_si128((const __m128i *)p);
        return _mm512_castps_si512(DW_NAME(dw_f8_decode)(xk == XCONV_DW_X_E4M3, b));
    }
    case XCONV_DW_X_I8: {
        const __m128i b = masked ? _mm_maskz_loadu_epi8(m, p) : _mm_loadu_si128((const __m128i *)p);
        return _mm512_cvtepi8_epi32(b);
    }
    case XCONV_DW_X_I16:
    case XCONV_DW_X_U16: {
        const __m256i h = masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256((const __m256i *)p);
        return xk == XCONV_DW_X_I16 ? _mm512_cvtepi16_epi32(h) : _mm512_cvtepu16_epi32(h);
    }
    case XCONV_DW_X_B32:
        return masked ? _mm512_maskz_loadu_epi32(m, p) : _mm512_loadu_si512(p);
    default: {
        const __m128i b = masked ? _mm_maskz_loadu_epi8(m, p) : _mm_loadu_si128((const __m128i *)p);
        return _mm512_cvtepu8_epi32(b);
    }
    }
}

/* An x operand as dw_mac takes it: v, and for complex s, v with re and im swapped (once
 * per load, shared by every tap that reads it). */
DW_AI dw_v2 DW_NAME(dw_xop)(int xk, __m512i v)
{
    dw_v2 o = {v, v};
    if (xk == XCONV_DW_X_C64) o.s = _mm512_castps_si512(_mm512_permute_ps(_mm512_castsi512_ps(v), 0xb1));
    if (xk == XCONV_DW_X_C128) o.s = _mm512_castpd_si512(_mm512_permute_pd(_mm512_castsi512_pd(v), 0x55));
    return o;
}

/* For XCONV_DW_X_BF16X2, v holds the even channels of the 32 at p and s the odd ones, as
 * f32: the bf16 bits of channel 2i are the low half of 32-bit lane i, those of 2i + 1 its
 * high half. m has a bit per channel for that kind, per lane for the others. */
DW_AI dw_v2 DW_NAME(dw_ld)(int xk, const char *p, __mmask32 m, bool masked)
{
    if (xk == XCONV_DW_X_BF16X2) {
        const __m512i raw = masked ? _mm512_maskz_loadu_epi16(m, p) : _mm512_loadu_si512(p);
        const dw_v2 o = {_mm512_slli_epi32(raw, 16), _mm512_and_si512(raw, _mm512_set1_epi32((int)0xffff0000u))};
        return o;
    }
    return DW_NAME(dw_xop)(xk, DW_NAME(dw_ld1)(xk, p, (__mmask16)m, masked));
}

/* Operand o as dw_mac takes it for the vector h of a channel block: o itself for kinds of
 * one vector per block; for XCONV_DW_X_BF16X2 its even (h = 0) or odd (h = 1) channels. */
DW_AI dw_v2 DW_NAME(dw_half)(int xk, dw_v2 o, int h)
{
    if (XCONV_DW_XVECS(xk) == 1) return o;
    const dw_v2 q = {h ? o.s : o.v, h ? o.s : o.v};
    return q;
}

/* x = 0, as a tap in the padding reads it */
DW_AI dw_v2 DW_NAME(dw_x0)(int xk) { return DW_NAME(dw_xop)(xk, _mm512_setzero_si512()); }

/* The packed weights of tap k of a block whose taps start at wb (XCONV_DW_WVECS vectors
 * each): v, and for complex s, the (-wi, wi) vector. */
DW_AI dw_v2 DW_NAME(dw_wld)(int xk, const __m512i *wb, int64_t k)
{
    const int nv = XCONV_DW_WVECS(xk);
    const __m512i v = _mm512_load_si512(wb + k * nv);
    const dw_v2 o = {v, nv == 2 ? _mm512_load_si512(wb + k * nv + 1) : v};
    return o;
}

/* acc + x * w in the compute type of xk. */
DW_AI __m512i DW_NAME(dw_mac)(int xk, __m512i acc, dw_v2 xo, dw_v2 wo)
{
    const __m512i x = xo.v, w = wo.v;
    if (XCONV_DW_X_F32SUM(xk))
        return _mm512_castps_si512(
            _mm512_fmadd_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(w), _mm512_castsi512_ps(acc)));
    if (xk == XCONV_DW_X_F64)
        return _mm512_castpd_si512(
            _mm512_fmadd_pd(_mm512_castsi512_pd(x), _mm512_castsi512_pd(w), _mm512_castsi512_pd(acc)));
    if (xk == XCONV_DW_X_C64) {
        const __m512 a = _mm512_fmadd_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(w), _mm512_castsi512_ps(acc));
        return _mm512_castps_si512(_mm512_fmadd_ps(_mm512_castsi512_ps(xo.s), _mm512_castsi512_ps(wo.s), a));
    }
    if (xk == XCONV_DW_X_C128) {
        const __m512d a = _mm512_fmadd_pd(_mm512_castsi512_pd(x), _mm512_castsi512_pd(w), _mm512_castsi512_pd(acc));
        return _mm512_castpd_si512(_mm512_fmadd_pd(_mm512_castsi512_pd(xo.s), _mm512_castsi512_pd(wo.s), a));
    }
    if (xk == XCONV_DW_X_B64) return _mm512_add_epi64(acc, _mm512_mullo_epi64(x, w));
    if (!XCONV_DW_X_BYTES(xk)) return _mm512_add_epi32(acc, _mm512_mullo_epi32(x, w));
#if DW_VNNI
    return _mm512_dpwssd_epi32(acc, x, w);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, w));
#endif
}

/* f32 lanes rounded to bf16 in their high halves as src/core/dtypes.c rounds: by the
 * carry-propagating add to nearest even, NaN -> the quiet NaN of its high half. */
DW_AI __m512i DW_NAME(dw_bf16_hi)(__m512i acc)
{
    const __mmask16 nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(acc), _mm512_castsi512_ps(acc), _CMP_UNORD_Q);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(acc, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(acc, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(acc, _mm512_set1_epi32(0x400000)));
}

/* Stores the lanes of acc (or the masked ones) at p as y's dtype. Rounding as in
 * src/core/dtypes.c: bf16 by the carry-propagating add, NaN -> quiet NaN of its high half;
 * f16 by the hardware's round-to-nearest-even, NaN -> sign | 0x7e00. */
DW_AI void DW_NAME(dw_st)(int yk, char *p, __m512i acc, __mmask16 m, bool masked)
{
    switch (yk) {
    case XCONV_DW_Y_F64:
    case XCONV_DW_Y_C64:
    case XCONV_DW_Y_B64:
        if (yk == XCONV_DW_Y_F64) { /* NaNs as the one quiet NaN (depthwise.h) */
            const __m512d v = _mm512_castsi512_pd(acc);
            acc = _mm512_mask_mov_epi64(acc, _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q),
                                        _mm512_set1_epi64(0x7ff8000000000000));
        }
        if (yk == XCONV_DW_Y_C64) {
            const __m512 v = _mm512_castsi512_ps(acc);
            acc = _mm512_mask_mov_epi32(acc, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc00000));
        }
        if (masked) _mm512_mask_storeu_epi64(p, (__mmask8)m, acc);
        else _mm512_storeu_si512(p, acc);
        return;
    case XCONV_DW_Y_F32:
    case XCONV_DW_Y_B32:
        if (masked) _mm512_mask_storeu_epi32(p, m, acc);
        else _mm512_storeu_si512(p, acc);
        return;
    case XCONV_DW_Y_BF16: {
        const __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(DW_NAME(dw_bf16_hi)(acc), 16));
        if (masked) _mm256_mask_storeu_epi16(p, m, h);
        else _mm256_storeu_si256((__m256i *)p, h);
        return;
    }
    case XCONV_DW_Y_F16: {
        const __m512 v = _mm512_castsi512_ps(acc);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        __m512i r = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i qnan = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(acc, 16), _mm512_set1_epi32(0x8000)),
                                             _mm512_set1_epi32(0x7e00));
        r = _mm512_mask_mov_epi32(r, nan, qnan);
        const __m256i h = _mm512_cvtepi32_epi16(r);
        if (masked) _mm256_mask_storeu_epi16(p, m, h);
        else _mm256_storeu_si256((__m256i *)p, h);
        return;
    }
    case XCONV_DW_Y_E4M3:
    case XCONV_DW_Y_E5M2: {
        const __m128i b = DW_NAME(dw_f8_encode)(yk == XCONV_DW_Y_E4M3, acc);
        if (masked) _mm_mask_storeu_epi8(p, m, b);
        else _mm_storeu_si128((__m128i *)p, b);
        return;
    }
    case XCONV_DW_Y_B16: {
        const __m256i h = _mm512_cvtepi32_epi16(acc);
        if (masked) _mm256_mask_storeu_epi16(p, m, h);
        else _mm256_storeu_si256((__m256i *)p, h);
        return;
    }
    default: {
        const __m128i b = _mm512_cvtepi32_epi8(acc);
        if (masked) _mm_mask_storeu_epi8(p, m, b);
        else _mm_storeu_si128((__m128i *)p, b);
        return;
    }
    }
}

/* Stores a XCONV_DW_X_BF16X2 block's sums (ev: even channels, od: odd ones) at p as y's
 * dtype, channels in order, masked by m (a bit per channel); yes: y's element bytes. bf16 y
 * goes out in one 64-byte store: rounded by vcvtne2ps2bf16 (DW_HW_BF16), else with each odd
 * channel's bits put in the high half of its even neighbour's lane; other dtypes interleave
 * the two into channels 0-15 and 16-31 for dw_st. */
DW_AI void DW_NAME(dw_st2)(int yk, char *p, __m512i ev, __m512i od, __mmask32 m, int64_t yes)
{
#if DW_HW_BF16 /* (a preprocessor test: clang rejects the intrinsic outside avx512bf16 code) */
    if (yk == XCONV_DW_Y_BF16) {
        /* vcvtne2ps2bf16 rounds as dw_bf16_hi does (NaN included) except that it flushes
         * f32 subnormals to zero: vectors with a subnormal sum take dw_bf16_hi. Its output
         * is the even channels then the odd ones; vpermw puts them in order. */
        const __mmask16 sub = _mm512_fpclass_ps_mask(_mm512_castsi512_ps(ev), 0x20) |
                              _mm512_fpclass_ps_mask(_mm512_castsi512_ps(od), 0x20);
        if (__builtin_expect(sub == 0, 1)) {
            const __m512i c = (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(od), _mm512_castsi512_ps(ev));
            const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
            _mm512_mask_storeu_epi16(p, m, _mm512_permutexvar_epi16(idx, c));
            return;
        }
    }
#endif
    if (yk == XCONV_DW_Y_BF16) {
        const __m512i lo = _mm512_srli_epi32(DW_NAME(dw_bf16_hi)(ev), 16);
        _mm512_mask_storeu_epi16(p, m, _mm512_mask_mov_epi16(lo, 0xaaaaaaaau, DW_NAME(dw_bf16_hi)(od)));
        return;
    }
    /* lane j of the first half: channel j, the even channels' lane j / 2 or the odd ones' */
    const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
    DW_NAME(dw_st)(yk, p, _mm512_permutex2var_epi32(ev, first, od), (__mmask16)m, true);
    DW_NAME(dw_st)(yk, p + 16 * yes, _mm512_permutex2var_epi32(ev, second, od), (__mmask16)(m >> 16), true);
}

/*
 * WT outputs [ow0, ow0 + WT) of one channel block whose taps all lie inside the row along
 * dim 2 (KW taps, stride S, dilation 1). Each input pixel is loaded and converted once per
 * kernel row and multiplied into every output that reads it; outputs take it in kw order.
 */
DW_AI void DW_NAME(dw_tile)(const dw_row *r, int xk, int yk, bool masked, bool checked, int KW,
                            int S, int WT, int64_t ow0, int64_t cb)
{
    enum { MAXT = 8 };
    const xconv_canon *p = r->p;
    const __mmask16 m = (__mmask16)dw_bmask(r, xk, cb);
    const __m512i *wb = (const __m512i *)r->w + cb * r->kk * XCONV_DW_WVECS(xk);
    __m512i acc[MAXT];
    const __m512i init = r->bias ? _mm512_load_si512((const __m512i *)r->bias + cb) : _mm512_setzero_si512();
    DW_UNROLL for (int t = 0; t < WT; t++) acc[t] = init;
    const int64_t cofs = dw_bchan(r, cb) * r->xes;
    int64_t kr = 0;
    for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
        const int64_t q0 = r->j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
        const bool in0 = q0 >= 0 && q0 < p->x_size[0];
        for (int64_t k1 = 0; k1 < p->k_size[1]; k1++, kr++) {
            const int64_t q1 = r->j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
            dw_v2 wv[5];
            DW_UNROLL for (int kw = 0; kw < KW; kw++) wv[kw] = DW_NAME(dw_wld)(xk, wb, kr * KW + kw);
            if (!in0 || q1 < 0 || q1 >= p->x_size[1]) {
                /* a padding row: 0 * w still joins a float sum (NaN for an infinite w) */
                if (XCONV_DW_X_FLOAT(xk))
                    DW_UNROLL for (int t = 0; t < WT; t++)
                        DW_UNROLL for (int kw = 0; kw < KW; kw++)
                            acc[t] = DW_NAME(dw_mac)(xk, acc[t], DW_NAME(dw_x0)(xk), wv[kw]);
                continue;
            }
            const char *xr = r->xrow + (q0 * p->x_ss[0] + q1 * p->x_ss[1]) * r->xes + cofs;
            const int64_t i0 = ow0 * S - p->pad_lo[2]; /* the input column of i = 0 */
            DW_UNROLL for (int i = 0; i < (WT - 1) * S + KW; i++) {
                /* a checked tile (at a row's ends) reads columns outside x as zeros */
                dw_v2 xv = DW_NAME(dw_x0)(xk);
                if (!checked || (uint64_t)(i0 + i) < (uint64_t)p->x_size[2])
                    xv = DW_NAME(dw_ld)(xk, xr + (i0 + i) * r->xps, m, masked);
                DW_UNROLL for (int kw = 0; kw < KW; kw++) {
                    const int d = i - kw;
                    if (d >= 0 && d % S == 0 && d / S < WT)
                        acc[d / S] = DW_NAME(dw_mac)(xk, acc[d / S], xv, wv[kw]);
                }
            }
        }
    }
    char *yp = r->yrow + (ow0 * p->y_ss[2] + dw_bchan(r, cb)) * r->yes;
    DW_UNROLL for (int t = 0; t < WT; t++) DW_NAME(dw_st)(yk, yp + t * r->yps, acc[t], m, masked);
}

/* One output pixel of one channel block, any kernel, stride and dilation, taps in the
 * padding read as zeros. */
DW_AI void DW_NAME(dw_pixel)(const dw_row *r, int xk, int yk, bool masked, int64_t ow, int64_t cb)
{
    const xconv_canon *p = r->p;
    const __mmask16 m = (__mmask16)dw_bmask(r, xk, cb);
    const int64_t K2 = p->k_size[2];
    const __m512i *wb = (const __m512i *)r->w + cb * r->kk * XCONV_DW_WVECS(xk);
    __m512i acc = r->bias ? _mm512_load_si512((const __m512i *)r->bias + cb) : _mm512_setzero_si512();
    const int64_t cofs = dw_bchan(r, cb) * r->xes;
    int64_t kr = 0;
    for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
        const int64_t q0 = r->j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
        const bool in0 = q0 >= 0 && q0 < p->x_size[0];
        for (int64_t k1 = 0; k1 < p->k_size[1]; k1++, kr++) {
            const int64_t q1 = r->j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
            const bool in_row = in0 && q1 >= 0 && q1 < p->x_size[1];
            const char *xr = in_row ? r->xrow + (q0 * p->x_ss[0] + q1 * p->x_ss[1]) * r->xes + cofs : NULL;
            for (int64_t k2 = 0; k2 < K2; k2++) {
                const int64_t q2 = ow * p->stride[2] + k2 * p->dil[2] - p->pad_lo[2];
                if (in_row && q2 >= 0 && q2 < p->x_size[2])
                    acc = DW_NAME(dw_mac)(xk, acc, DW_NAME(dw_ld)(xk, xr + q2 * r->xps, m, masked),
                                          DW_NAME(dw_wld)(xk, wb, kr * K2 + k2));
                else if (XCONV_DW_X_FLOAT(xk))
                    acc = DW_NAME(dw_mac)(xk, acc, DW_NAME(dw_x0)(xk), DW_NAME(dw_wld)(xk, wb, kr * K2 + k2));
            }
        }
    }
    DW_NAME(dw_st)(yk, r->yrow + (ow * p->y_ss[2] + dw_bchan(r, cb)) * r->yes, acc, m, masked);
}

/* Every channel block of one dw_tile at ow0: the full blocks [c0, c1) unmasked, a partial
 * first block (a shift) and last block masked. */
DW_AI void DW_NAME(dw_tile_blocks)(const dw_row *r, int xk, int yk, bool checked, int KW, int S, int WT,
                                   int64_t ow0, int64_t c0, int64_t c1)
{
    if (c0) DW_NAME(dw_tile)(r, xk, yk, true, checked, KW, S, WT, ow0, 0);
    for (int64_t cb = c0; cb < c1; cb++) DW_NAME(dw_tile)(r, xk, yk, false, checked, KW, S, WT, ow0, cb);
    if (c1 < r->ncb && c1 >= c0) DW_NAME(dw_tile)(r, xk, yk, true, checked, KW, S, WT, ow0, c1);
}

/* Outputs [a, b) of one row, every channel block, in tiles of 8 (or 7) for the specialized
 * kernel rows: tiles start at a, a + 8, ..., the last shifted left to end at b (recomputing a
 * few outputs to the same bits); tiles that reach outside [lo_in, hi_in), whose taps may fall
 * in the padding, check their columns. Fewer than 7 outputs go pixel by pixel. Channel blocks
 * run inside each tile: a tile's pixels are read in address order (prefetch-friendly). */
DW_AI void DW_NAME(dw_cover)(const dw_row *r, int xk, int yk, int KW, int S, int64_t a, int64_t b,
                             int64_t lo_in, int64_t hi_in)
{
    /* the full blocks [c0, c1) (dw_tile_blocks) */
    const int64_t c0 = r->sh != 0 ? 1 : 0, c1 = r->ncb - (r->tail ? 1 : 0);
    if (b - a < 7) {
        for (int64_t ow = a; ow < b; ow++)
            for (int64_t cb = 0; cb < r->ncb; cb++)
                DW_NAME(dw_pixel)(r, xk, yk, dw_bpart(r, cb), ow, cb);
        return;
    }
    /* tiles of 7 when as few of them cover [a, b) as of 8 (14, 28, ... outputs: no overlap) */
    const int64_t nt = (b - a + 7) / 8;
    const int wt = b - a <= 7 * nt ? 7 : 8;
    for (int64_t ow0 = a;; ow0 += wt) {
        if (ow0 + wt > b) ow0 = b - wt;
        const bool checked = ow0 < lo_in || ow0 + wt > hi_in;
        if (wt == 8) DW_NAME(dw_tile_blocks)(r, xk, yk, checked, KW, S, 8, ow0, c0, c1);
        else DW_NAME(dw_tile_blocks)(r, xk, yk, checked, KW, S, 7, ow0, c0, c1);
        if (ow0 + wt >= b) break;
    }
}

/*
 * Rows r < R (R = 1 or 2) of a row pair, outputs [ow0, ow0 + WT) along dim 2, one channel
 * block, for a 3x3 window at stride S along dims 1 and 2 (dilation 1): the pair reads input
 * rows u < (R - 1) * S + 3 (xr[u], NULL for a padding row), output row r taking row u as
 * its kernel row k1 = u - r * S. Each input vector is loaded and converted once and
 * multiplied into every output of both rows that reads it; the 9 weights stay in registers
 * (wv[k1 * 3 + kw]). Rows go in u order and columns in i order, so every output still takes
 * its taps in (k1, kw) order. A checked tile reads columns outside x as zeros. Loads and
 * stores are masked (all lanes for a full block), so one body serves full and partial blocks.
 * A block is XCONV_DW_XVECS(xk) vectors (init[h], accumulators acc[r][t][h]); yes: y's
 * element bytes.
 */
DW_AI void DW_NAME(dw_pt)(int xk, int yk, bool checked, int R, int S, int WT, const char *const *xr,
                          const dw_v2 *wv, const __m512i *init, int64_t i0, int64_t xw, int64_t xps,
                          char *const *yp, int64_t yps, int64_t yes, __mmask32 m)
{
    const int P = XCONV_DW_XVECS(xk);
    __m512i acc[2][6][2];
    /* opaque strides: otherwise the compiler hoists every i * xps and t * yps out of the
     * loops over tiles and blocks and spills them, one stack load per address */
    __asm__("" : "+r"(xps), "+r"(yps));
    DW_UNROLL for (int r = 0; r < R; r++)
        DW_UNROLL for (int t = 0; t < WT; t++)
            DW_UNROLL for (int h = 0; h < P; h++) acc[r][t][h] = init[h];
    DW_UNROLL for (int u = 0; u < (R - 1) * S + 3; u++) {
        if (!xr[u]) {
            /* a padding row: 0 * w still joins a float sum (NaN for an infinite w) */
            if (XCONV_DW_X_FLOAT(xk))
                DW_UNROLL for (int r = 0; r < R; r++) {
                    const int k1 = u - r * S;
                    if (k1 < 0 || k1 >= 3) continue;
                    DW_UNROLL for (int t = 0; t < WT; t++)
                        DW_UNROLL for (int kw = 0; kw < 3; kw++)
                            DW_UNROLL for (int h = 0; h < P; h++)
                                acc[r][t][h] = DW_NAME(dw_mac)(xk, acc[r][t][h], DW_NAME(dw_x0)(xk),
                                                               DW_NAME(dw_half)(xk, wv[k1 * 3 + kw], h));
                }
            continue;
        }
        const char *xp = xr[u] + i0 * xps;
        DW_UNROLL for (int i = 0; i < (WT - 1) * S + 3; i++) {
            dw_v2 xv = DW_NAME(dw_x0)(xk);
            if (!checked || (uint64_t)(i0 + i) < (uint64_t)xw) xv = DW_NAME(dw_ld)(xk, xp + i * xps, m, true);
            DW_UNROLL for (int r = 0; r < R; r++) {
                const int k1 = u - r * S;
                if (k1 < 0 || k1 >= 3) continue;
                DW_UNROLL for (int kw = 0; kw < 3; kw++) {
                    const int d = i - kw;
                    if (d >= 0 && d % S == 0 && d / S < WT)
                        DW_UNROLL for (int h = 0; h < P; h++)
                            acc[r][d / S][h] = DW_NAME(dw_mac)(xk, acc[r][d / S][h], DW_NAME(dw_half)(xk, xv, h),
                                                               DW_NAME(dw_half)(xk, wv[k1 * 3 + kw], h));
                }
            }
        }
    }
    DW_UNROLL for (int r = 0; r < R; r++)
        DW_UNROLL for (int t = 0; t < WT; t++) {
            if (P == 2) DW_NAME(dw_st2)(yk, yp[r] + t * yps, acc[r][t][0], acc[r][t][1], m, yes);
            else DW_NAME(dw_st)(yk, yp[r] + t * yps, acc[r][t][0], (__mmask16)m, true);
        }
}

/* Every channel block of one dw_pt tile at ow0 (cb inside the tile, so that the tile's
 * pixels are read in address order): per block, its weights into registers, then the tile. */
DW_AI void DW_NAME(dw_pt_blocks)(const dw_row *r, int xk, int yk, bool checked, int R, int S, int WT,
                                 const char *const *xrow, char *const *yrow, int64_t ow0)
{
    const xconv_canon *p = r->p;
    const int U = (R - 1) * S + 3;
    const int64_t i0 = ow0 * S - p->pad_lo[2];
    const int P = XCONV_DW_XVECS(xk);
    for (int64_t cb = 0; cb < r->ncb; cb++) {
        const __mmask32 m = dw_bmask(r, xk, cb);
        const __m512i *wb = (const __m512i *)r->w + cb * 9 * XCONV_DW_WVECS(xk);
        dw_v2 wv[9];
        DW_UNROLL for (int k = 0; k < 9; k++) wv[k] = DW_NAME(dw_wld)(xk, wb, k);
        __m512i init[2];
        DW_UNROLL for (int h = 0; h < P; h++)
            init[h] = r->bias ? _mm512_load_si512((const __m512i *)r->bias + cb * P + h) : _mm512_setzero_si512();
        const int64_t xo = dw_bchan(r, cb) * r->xes, yo = (ow0 * p->y_ss[2] + dw_bchan(r, cb)) * r->yes;
        const char *xr[5];
        char *yp[2];
        DW_UNROLL for (int u = 0; u < U; u++) xr[u] = xrow[u] ? xrow[u] + xo : NULL;
        DW_UNROLL for (int q = 0; q < R; q++) yp[q] = yrow[q] + yo;
        DW_NAME(dw_pt)(xk, yk, checked, R, S, WT, xr, wv, init, i0, p->x_size[2], r->xps, yp, r->yps, r->yes, m);
    }
}

/* Outputs [a, b) of the item's R rows: the border outputs (taps in the padding) one at a
 * time, the interior in tiles of 6, then at most one each of 4, 2 and 1. Tiles of 6 (12
 * accumulators and 9 weights) leave the compiler registers to spare: tiles of 8 spilled and
 * measured 5-10% slower on the MobileNet shapes, tiles of 4 and 5 about the same as 6.
 * Complex kinds hold 18 weight vectors, so some live in L1 (spilled) rather than registers;
 * their tiles of 4 (no spills) measured the same as 6 on the MobileNet shapes. */
DW_AI void DW_NAME(dw_pair)(const dw_row *r, int xk, int yk, int R, int S, int64_t lo_in, int64_t hi_in)
{
    const xconv_canon *p = r->p;
    const char *xrow[5];
    const int64_t q0 = r->j0 * p->stride[0] - p->pad_lo[0];
    const bool in0 = q0 >= 0 && q0 < p->x_size[0];
    DW_UNROLL for (int u = 0; u < (R - 1) * S + 3; u++) {
        const int64_t q1 = r->j1 * S + u - p->pad_lo[1];
        xrow[u] = in0 && q1 >= 0 && q1 < p->x_size[1] ? r->xrow + (q0 * p->x_ss[0] + q1 * p->x_ss[1]) * r->xes : NULL;
    }
    char *yrow[2] = {r->yrow, r->yrow + p->y_ss[1] * r->yes};
    const int64_t a = r->ja, b = r->jb;
    const int64_t ia = a > lo_in ? a : lo_in, ib = b < hi_in ? b : hi_in;
    const int64_t lb = b < lo_in ? b : lo_in, rb = a > hi_in ? a : hi_in;
    for (int64_t ow = a; ow < lb; ow++) DW_NAME(dw_pt_blocks)(r, xk, yk, true, R, S, 1, xrow, yrow, ow);
    int64_t ow = ia;
    if (XCONV_DW_XVECS(xk) == 2) { /* twice the accumulators per output: tiles of 3 */
        for (; ow + 3 <= ib; ow += 3) DW_NAME(dw_pt_blocks)(r, xk, yk, false, R, S, 3, xrow, yrow, ow);
    } else {
        for (; ow + 6 <= ib; ow += 6) DW_NAME(dw_pt_blocks)(r, xk, yk, false, R, S, 6, xrow, yrow, ow);
        if (ib - ow >= 4) DW_NAME(dw_pt_blocks)(r, xk, yk, false, R, S, 4, xrow, yrow, ow), ow += 4;
    }
    if (ib - ow >= 2) DW_NAME(dw_pt_blocks)(r, xk, yk, false, R, S, 2, xrow, yrow, ow), ow += 2;
    if (ib - ow >= 1) DW_NAME(dw_pt_blocks)(r, xk, yk, false, R, S, 1, xrow, yrow, ow);
    for (ow = rb; ow < b; ow++) DW_NAME(dw_pt_blocks)(r, xk, yk, true, R, S, 1, xrow, yrow, ow);
}

/* Items [begin, end) for one x kind. */
DW_AI void DW_NAME(dw_items)(const xconv_dw_fast *f, int xk, int64_t begin, int64_t end)
{
    const xconv_canon *p = f->p;
    dw_row r;
    dw_row_init(&r, f);
    const int64_t K2 = p->k_size[2], S = p->stride[2], Y2 = p->y_size[2];
    /* outputs whose taps along dim 2 all lie inside x: [lo_in, hi_in) */
    const int64_t span = (K2 - 1) * p->dil[2];
    int64_t lo_in = (p->pad_lo[2] + S - 1) / S;
    const int64_t last = p->x_size[2] - 1 + p->pad_lo[2] - span; /* ow*S <= last */
    int64_t hi_in = last < 0 ? 0 : last / S + 1;
    if (hi_in > Y2) hi_in = Y2;
    if (lo_in > hi_in) lo_in = hi_in;
    const int shape = p->dil[2] != 1 ? 0 : K2 == 3 && S == 1 ? 1 : K2 == 3 && S == 2 ? 2 : K2 == 5 && S == 1 ? 3 : 0;
    const int yk = f->yk;
    for (int64_t item = begin; item < end; item++) {
        dw_row_at(&r, item);
        /* 3x3 windows by row pairs (dw_fast_rows; XCONV_DW_X_BF16X2 runs only these) */
        if (xk == XCONV_DW_X_BF16X2 || r.rp == 2) {
            const bool two = r.j1 + 1 < p->y_size[1];
            if (S == 1) {
                if (two) DW_NAME(dw_pair)(&r, xk, yk, 2, 1, lo_in, hi_in);
                else DW_NAME(dw_pair)(&r, xk, yk, 1, 1, lo_in, hi_in);
            } else {
                if (two) DW_NAME(dw_pair)(&r, xk, yk, 2, 2, lo_in, hi_in);
                else DW_NAME(dw_pair)(&r, xk, yk, 1, 2, lo_in, hi_in);
            }
            continue;
        }
        switch (shape) {
        case 1: DW_NAME(dw_cover)(&r, xk, yk, 3, 1, r.ja, r.jb, lo_in, hi_in); break;
        case 2: DW_NAME(dw_cover)(&r, xk, yk, 3, 2, r.ja, r.jb, lo_in, hi_in); break;
        case 3: DW_NAME(dw_cover)(&r, xk, yk, 5, 1, r.ja, r.jb, lo_in, hi_in); break;
        default:
            for (int64_t ow = r.ja; ow < r.jb; ow++)
                for (int64_t cb = 0; cb < r.ncb; cb++)
                    DW_NAME(dw_pixel)(&r, xk, yk, dw_bpart(&r, cb), ow, cb);
        }
    }
}

#undef DW_AI
#undef DW_NAME
#undef DW_CAT
#undef DW_CAT2
#undef DW_SFX
#undef DW_TARGET
#undef DW_VNNI
#undef DW_HW_BF16
