/*
 * amx_vec.c — the block kernel of amx.h for bf16 on AVX512-BF16 dot products instead of
 * tiles, for CPUs with AVX512-BF16 but no AMX (AMD Zen 4 and later, Intel Cooper Lake): the
 * engine "cpu.avx512bf16", which is cpu.amx's layout, packing and copies around this kernel.
 *
 * The packed B tiles are already vdpbf16ps's operand: row p of a 16-column tile holds each
 * column's pair (2p, 2p + 1) of reduction values, so one 64-byte load is one B vector, and A's
 * pair p of a row is one broadcast 32-bit value. C's 32 rows run in groups of 12 (24 sums in
 * registers, 2 B vectors, 1 broadcast), the last ones of exactly the rows left (1-12,
 * xconv__amx_vec_group; before, 8 or 4 with rows computed and dropped: rn50_3x3_512 bf16
 * 438 -> 458 GFLOP/s on 2 threads), so every row of a group is an output. Rows may
 * lie anywhere in A (row_off, or per tap: rows): cpu.avx512bf16 numbers its rows over the
 * outputs, not over the plane grid as the tiles must, so no row is computed and dropped, and
 * reads padded x in place through tables of rows; for a dense bf16 or f32 y the sums go from
 * the registers straight to y (no staged C tile and second pass). A tap's last step may run
 * 4, 8 or 12 of its 16 pairs where the reduction ends there (the rest would meet zero
 * weights): a first layer's 7 pixels x 3 channels compute 24 values, not 32.
 *
 * Whole blocks of one tap into bf16 y (lean_range's 1x1 blocks of 32 x 32) take
 * xconv__amx_vec_lean, the same steps in straight-line code with its arguments in registers:
 * 7% faster than the general block on one thread (rn50_1x1_256 bf16 blocks alone, 212 -> 227
 * GFLOP/s). Which part of the general block costs that was not found: its bias rows, masked
 * stores, row tables, step loop, function size and per-row stores were each changed alone
 * without a gain (BENCHMARKS.md, twenty-seventh session).
 *
 * vdpbf16ps, like AMX, treats bf16 denormals as zero and flushes denormal sums (amx.c checks
 * the exponents and sends such inputs to the f32 kernels); each lane adds its two exact
 * products in a fixed order, so results do not depend on the blocking or the threads.
 */
#include "cpu/engines/amx.h"
#include "cpu/isa.h"

#include <string.h>

#if XCONV_X86
#include <immintrin.h>

#define VEC_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

static bool vec_probe(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
        return false;
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (a < 7) return false;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    return (a >> 5) & 1; /* AVX512_BF16 */
}

bool xconv__amx_vec_available(void)
{
    static _Atomic int state;
    return xconv__probe_once(&state, vec_probe);
}

/* Pairs [0, P) of step s into the sums of R rows (P a constant: 16, or 4, 8 or 12 for a
 * tap's last step). */
static inline __attribute__((always_inline)) VEC_TARGET void
vec_step(__m512 acc[12][2], const char *const *ar, const char *b, int64_t s, const int R, const int P)
{
    XCONV_UNROLL for (int pr = 0; pr < P; pr++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_ps(b + pr * 64);
        const __m512bh b1 = (__m512bh)_mm512_loadu_ps(b + 1024 + pr * 64);
        XCONV_UNROLL for (int r = 0; r < R; r++) {
            int32_t pair;
            memcpy(&pair, ar[r] + s * 64 + pr * 4, 4);
            const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
}

/* Rows r0 .. r0 + R - 1 of the block (R a constant, 1-12). */
static inline __attribute__((always_inline)) VEC_TARGET void
vec_rows(const amx_block_args *k, const int R, int r0)
{
    __m512 acc[12][2];
    XCONV_UNROLL for (int r = 0; r < R; r++) {
        if (k->init) {
            const float *ir = (const float *)((const char *)k->init + (size_t)((r0 + r) % 16) * 128);
            acc[r][0] = _mm512_loadu_ps(ir);
            acc[r][1] = _mm512_loadu_ps(ir + 16);
        } else {
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        }
    }
    const int lp = k->last_pairs ? k->last_pairs : 16;
    const int64_t full = k->ksteps - (lp < 16); /* steps of 16 pairs per tap */
    int64_t off[12]; /* row r0 + r's offset from a tap's A */
    XCONV_UNROLL for (int r = 0; r < R; r++) off[r] = k->row_off[r0 + r];
    for (int64_t t = 0; t < k->ntaps; t++) {
        const char *ar[12]; /* the rows of A for this tap */
        XCONV_UNROLL for (int r = 0; r < R; r++)
            ar[r] = k->rows ? k->rows[t * 32 + r0 + r] : k->a[t] + off[r];
        const char *b = k->b[t];
        int64_t s = 0;
        for (; s < full; s++, b += 2048) vec_step(acc, ar, b, s, R, 16);
        switch (lp) { /* the tap's last step, short */
        case 4: vec_step(acc, ar, b, s, R, 4); break;
        case 8: vec_step(acc, ar, b, s, R, 8); break;
        case 12: vec_step(acc, ar, b, s, R, 12); break;
        default: break;
        }
    }
    if (k->y) { /* straight to y: no staging of C and no second pass over it */
        const int cnt = k->cnt;
        const __mmask16 m0 = (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1);
        const __mmask16 m1 = (__mmask16)(cnt >= 32 ? 0xffff : cnt > 16 ? (1u << (cnt - 16)) - 1 : 0);
        const __mmask32 m32 = (__mmask32)(cnt >= 32 ? 0xffffffffu : (1u << cnt) - 1);
        XCONV_UNROLL for (int r = 0; r < R; r++) {
            char *yr = k->y + k->y_off[r0 + r];
            if (k->y_bf16) { /* round to nearest even, as amx_store.c */
                _mm512_mask_storeu_epi16(yr, m32, (__m512i)_mm512_cvtne2ps_pbh(acc[r][1], acc[r][0]));
            } else {
                _mm512_mask_storeu_ps(yr, m0, acc[r][0]);
                _mm512_mask_storeu_ps(yr + 64, m1, acc[r][1]);
            }
        }
        return;
    }
    XCONV_UNROLL for (int r = 0; r < R; r++) {
        float *cr = (float *)((char *)k->c + (size_t)(r0 + r) * 128);
        _mm512_storeu_ps(cr, acc[r][0]);
        _mm512_storeu_ps(cr + 16, acc[r][1]);
    }
}

/* Rows [0, R) of a whole block of lean_range's (xconv__amx_vec_lean): A's rows lda apart, B's
 * steps 2048 bytes apart, every step of 16 pairs, 32 bf16 values per row into y. */
static inline __attribute__((always_inline)) VEC_TARGET void
lean_rows(const char *a, size_t lda, const char *b, int64_t ksteps, const float *init, char *y,
          int64_t ystep, const int R)
{
    __m512 acc[12][2];
    const __m512 i0 = init ? _mm512_loadu_ps(init) : _mm512_setzero_ps();
    const __m512 i1 = init ? _mm512_loadu_ps(init + 16) : _mm512_setzero_ps();
    XCONV_UNROLL for (int r = 0; r < R; r++) acc[r][0] = i0, acc[r][1] = i1;
    const char *ar[12];
    XCONV_UNROLL for (int r = 0; r < R; r++) ar[r] = a + (size_t)r * lda;
    for (int64_t s = 0; s < ksteps; s++, b += 2048) vec_step(acc, ar, b, s, R, 16);
    XCONV_UNROLL for (int r = 0; r < R; r++)
        _mm512_storeu_si512(y + r * ystep, (__m512i)_mm512_cvtne2ps_pbh(acc[r][1], acc[r][0]));
}

VEC_TARGET void xconv__amx_vec_lean(const char *a, size_t lda, const char *b, int64_t ksteps,
                                    const void *init, char *y, int64_t ystep)
{
    lean_rows(a, lda, b, ksteps, init, y, ystep, 12);
    lean_rows(a + 12 * lda, lda, b, ksteps, init, y + 12 * ystep, ystep, 12);
    lean_rows(a + 24 * lda, lda, b, ksteps, init, y + 24 * ystep, ystep, 8);
}

/* The groups inlined into one function rather than called out of line per group: faster
 * where a group has few steps (A/B on the Zen 4 VM: rn50_1x1_64 bf16 +4% on one thread, +9%
 * on two; rn50_1x1_256 +1-2%), presumably as one group's stores overlap the next group's
 * products; vzeroupper alone is not it (a -mno-vzeroupper build gained nothing). */
VEC_TARGET void xconv__amx_vec_block(const amx_block_args *k)
{
    if (k->between) k->between(k->between_arg);
    const int rows = k->m0 + k->m1;
    for (int r0 = 0; r0 < rows;) {
        const int group = xconv__amx_vec_group(rows - r0); /* at most the rows left */
        switch (group) { /* R a constant in each */
#define VEC_GROUP(R) \
    case R: vec_rows(k, R, r0); break;
            VEC_GROUP(1) VEC_GROUP(2) VEC_GROUP(3) VEC_GROUP(4) VEC_GROUP(5) VEC_GROUP(6)
            VEC_GROUP(7) VEC_GROUP(8) VEC_GROUP(9) VEC_GROUP(10) VEC_GROUP(11) VEC_GROUP(12)
#undef VEC_GROUP
        default: break;
        }
        r0 += group;
    }
}

#else /* not x86 */

bool xconv__amx_vec_available(void) { return false; }
void xconv__amx_vec_block(const amx_block_args *k) { (void)k; }
void xconv__amx_vec_lean(const char *a, size_t lda, const char *b, int64_t ksteps, const void *init,
                         char *y, int64_t ystep)
{
    (void)a, (void)lda, (void)b, (void)ksteps, (void)init, (void)y, (void)ystep;
}

#endif
