/*
 * depthwise.h — what depthwise.c shares with its AVX-512 stencils (depthwise_avx512*.c).
 *
 * The fast path is channels-last only (x and y channels contiguous, one input channel per
 * output channel) and reads x and writes y in their storage dtypes, converting in registers:
 *   compute f32: x f32, bf16, f16, f8e4m3 or f8e5m2; y f32, bf16, f16, f8e4m3 or f8e5m2
 *                (decoded and rounded as src/core/dtypes.c does: NaNs decode to the one
 *                quiet NaN, f8 stores round once from f32, e4m3 saturating)
 *   compute u32: x i8 or u8 (each value widened to a 32-bit lane whose low 16 bits multiply a
 *                16-bit weight: vpdpwssd, or vpmaddwd + vpaddd; exact mod 2^32), or x i16,
 *                u16, i32 or u32 (widened to 32-bit lanes, vpmulld + vpaddd: the low 32 bits
 *                of each product, exact mod 2^32); y of 8, 16 or 32 bits (truncated).
 *   compute f64, u64, c64, c128: x and y of that width (f64; i64 or u64; c64; c128), 64-bit
 *                lanes: f64 by fused multiply-adds, u64 by vpmullq + vpaddq (exact mod 2^64),
 *                complex interleaved (re, im) by two fused multiply-adds per tap,
 *                acc += x * (wr, wr) then acc += (xi, xr) * (-wi, wi). A NaN is stored as
 *                the one positive quiet NaN: which NaN operand a fused multiply-add passes on
 *                depends on the instruction form the compiler picks, which differs between
 *                the tiles and the border pixels, so NaN bits would depend on the split.
 * A channel block is one zmm of the compute type: 16 channels of 32 bits, 8 of f64, u64 or
 * c64, 4 of c128 (XCONV_DW_BLOCK). Weights are packed [channel block][K0*K1*K2][vectors]
 * in the compute type, one 64-byte vector per tap (u32 for 8-bit x: the low 16 bits of the
 * weight, high half zero; for the wider integers the whole u32), two for complex
 * ((wr, wr) pairs, then (-wi, wi) pairs); bias [channel block][64 bytes]; lanes past Cout
 * are zero.
 * Blocks start where a tensor's lines do: block b holds channels [b L - sh, (b + 1) L - sh)
 * (L channels a block, lanes outside [0, Cout) masked), where the shift sh, chosen per run from
 * y's address (or x's, when y's strides would move the phase from pixel to pixel), puts the
 * blocks' vectors on 64-byte boundaries: malloc's large blocks start 16 bytes past a page,
 * where every 64-byte vector of an unshifted block would straddle two lines (f32 mbv2_dw_144s2,
 * one thread: 32 GFLOP/s with x and y 16 bytes past a line, 51 on line boundaries). Each
 * 16-byte phase's shift has its own packed weights (a plan with constant weights packs every
 * phase its runs can take; otherwise a run packs its own), so any phase runs the same
 * operations per channel in the same order: the bits do not depend on it.
 * bf16 x in 3x3 row-pair tiles with more than 16 channels goes by blocks of 32 (the kind
 * XCONV_DW_X_BF16X2): one 64-byte load holds 32 channels, whose even channels are each
 * 32-bit lane shifted left by 16 and whose odd channels are each lane with its low half
 * cleared, so a block is two f32 vectors (even, odd) for one load and two integer ops, where
 * blocks of 16 take a load, a widening and a shift per 16. Its weights are packed two
 * vectors per tap (the even channels', then the odd channels') and its bias two vectors
 * per block, in the same order; the sums are the same per channel as the blocks of 16's.
 */
#ifndef XCONV_CPU_DEPTHWISE_H
#define XCONV_CPU_DEPTHWISE_H

#include "core/internal.h"

#define XCONV_DW_VBYTES 64 /* bytes of one zmm: a channel block in the compute type */

/* Channels per block for compute type ct: 16 (f32, u32), 8 (f64, u64, c64) or 4 (c128). */
#define XCONV_DW_BLOCK(ct) ((int64_t)(XCONV_DW_VBYTES / xconv__ctype_size(ct)))

typedef enum xconv_dw_xkind {
    XCONV_DW_X_F32,
    XCONV_DW_X_BF16,
    XCONV_DW_X_BF16X2, /* bf16 by blocks of 32 channels, even and odd lanes apart (above) */
    XCONV_DW_X_F16,
    XCONV_DW_X_E4M3,
    XCONV_DW_X_E5M2, /* the last kind summed in f32 (XCONV_DW_X_F32SUM) */
    XCONV_DW_X_F64,
    XCONV_DW_X_C64,
    XCONV_DW_X_C128, /* the last float kind (XCONV_DW_X_FLOAT) */
    XCONV_DW_X_I8,
    XCONV_DW_X_U8,
    XCONV_DW_X_I16, /* the wider integers: vpmulld on whole 32-bit lanes */
    XCONV_DW_X_U16,
    XCONV_DW_X_B32, /* i32 and u32 */
    XCONV_DW_X_B64, /* i64 and u64: vpmullq on 64-bit lanes */
    XCONV_DW_X_NONE
} xconv_dw_xkind;

/* x kinds summed in f32 (fused multiply-adds) */
#define XCONV_DW_X_F32SUM(xk) ((xk) <= XCONV_DW_X_E5M2)
/* x kinds with IEEE sums (f32, f64, complex), where a tap in the padding adds 0 * w; the
 * others sum in u32 or u64 */
#define XCONV_DW_X_FLOAT(xk) ((xk) <= XCONV_DW_X_C128)
#define XCONV_DW_X_COMPLEX(xk) ((xk) == XCONV_DW_X_C64 || (xk) == XCONV_DW_X_C128)
/* packed weight vectors per tap */
#define XCONV_DW_WVECS(xk) (XCONV_DW_X_COMPLEX(xk) || (xk) == XCONV_DW_X_BF16X2 ? 2 : 1)
/* vectors per channel block of x, of the accumulators and of the packed bias: 2 for
 * XCONV_DW_X_BF16X2 (even and odd channels), else 1 */
#define XCONV_DW_XVECS(xk) ((xk) == XCONV_DW_X_BF16X2 ? 2 : 1)
/* channels per block of x kind xk and compute type ct */
#define XCONV_DW_KBLOCK(xk, ct) (XCONV_DW_XVECS(xk) * XCONV_DW_BLOCK(ct))
/* u32 kinds whose 16-bit weights multiply by vpmaddwd / vpdpwssd */
#define XCONV_DW_X_BYTES(xk) ((xk) == XCONV_DW_X_I8 || (xk) == XCONV_DW_X_U8)

typedef enum xconv_dw_ykind {
    XCONV_DW_Y_F32,
    XCONV_DW_Y_BF16,
    XCONV_DW_Y_F16,
    XCONV_DW_Y_E4M3,
    XCONV_DW_Y_E5M2,
    XCONV_DW_Y_B32,
    XCONV_DW_Y_B16,
    XCONV_DW_Y_B8,
    XCONV_DW_Y_B64, /* i64, u64: the compute type's bits */
    XCONV_DW_Y_F64, /* f64, c128: f64 lanes, NaNs stored as the one quiet NaN */
    XCONV_DW_Y_C64, /* c64: f32 lanes, NaNs stored as the one quiet NaN */
    XCONV_DW_Y_NONE
} xconv_dw_ykind;

/* One execute of the fast path. Work items are (n, j0, j1 / rows, segment of nseg along
 * Y2), rows = xconv__dw_fast_rows(p). */
typedef struct xconv_dw_fast {
    const xconv_canon *p;
    const char        *x;      /* buffer starts */
    char              *y;
    const void        *w;      /* packed weights, for shift sh */
    const void        *bias;   /* packed bias or NULL, for shift sh */
    xconv_dw_xkind     xk;
    xconv_dw_ykind     yk;
    int64_t            seg;    /* output columns per item */
    int64_t            nseg;   /* items per output row */
    int64_t            sh;     /* channel shift of the blocks, < their channel count */
} xconv_dw_fast;

/* The kinds the fast path would use for p, or false when it cannot run p on this CPU. */
bool xconv__dw_fast_kinds(const xconv_canon *p, xconv_dw_xkind *xk, xconv_dw_ykind *yk);

/* Output rows along dim 1 per work item of the fast path: 2 for 3x3 windows (dilation 1,
 * the same stride 1 or 2 along dims 1 and 2), whose tiles span a pair of rows, else 1. */
int64_t xconv__dw_fast_rows(const xconv_canon *p);

/* Runs items [begin, end). */
void xconv__dw_fast_range(const xconv_dw_fast *f, int64_t begin, int64_t end);

#endif /* XCONV_CPU_DEPTHWISE_H */
