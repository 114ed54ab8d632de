/*
 * depthwise_avx512.c — the channels-last fast path of cpu.depthwise on AVX-512 (see
 * depthwise.h for what it covers).
 *
 *   y[n, j, c] = bias[c] + sum_k x[n, j*s + k*t - lo, c] * w[c, k]   (c = a block of one zmm)
 *
 * 3x3 windows (dilation 1, the same stride 1 or 2 along dims 1 and 2: MobileNet's) go by
 * pairs of output rows: a work item is (n, j0, j1 and j1 + 1), or a segment of it along dim
 * 2, done in tiles of 2 rows x 6 pixels x 16 channels (12 accumulators and the 9 weights in
 * registers; each input vector of the (S + 3) rows the pair reads is loaded and converted
 * once and multiplied into every output of both rows that reads it, so a row shared by the
 * pair is read once, not twice). Other shapes: a work item is one output row, or a segment
 * of it; outputs whose taps along dim 2 all lie inside x are done in tiles of 8 pixels x 16
 * channels (8 accumulators in registers, each input pixel loaded and converted once per
 * kernel row and used by every output of the tile that reads it), specialized for 3 taps at
 * stride 1 or 2 and 5 taps at stride 1; the border pixels (and other shapes) one pixel at a
 * time with bounds checks. Channel blocks run inside each tile, so the pixels a tile reads
 * stay in L1 and are read in address order.
 * A block is 16 channels of 32 bits, 8 of 64 bits (f64, u64, c64) or 4 of c128; the last
 * block of a channel count that is not a multiple of that uses masked loads/stores. bf16 x
 * in the row-pair tiles with more than 16 channels goes by blocks of 32 (XCONV_DW_X_BF16X2,
 * depthwise.h) in tiles of 2 rows x 3 pixels: one load and two integer ops widen 32
 * channels, where blocks of 16 took a load, a widening and a shift per 16 (one thread:
 * mbv2_dw_144s2 35-46 -> 50-55 GFLOP/s, mbv2_dw_384 53-63 -> 64-73; tiles of 4 spilled and
 * ran slower, tiles of 2 about the same).
 * Tiles of 7 replace tiles of 8 where that avoids overlapping tiles (widths 14, 28, ...).
 * This file picks the entry point (depthwise_avx512.h) per x kind and feature set; the
 * stencils (depthwise_avx512.tmpl.h) are instantiated in depthwise_avx512_float.c, _int.c and
 * _wide.c, which compile in parallel.
 * Assumes: a validated canonical conv on the CPU with cin_g == 1, cout_g == 1, x_sc == y_sc
 * == 1, the dtypes of depthwise.h, and weights packed as it says.
 */
#include "cpu/engines/depthwise_avx512.h"

#include <stdlib.h>

#include "cpu/engines/amx.h" /* xconv__amx_vec_available: the AVX512-BF16 probe */

#if defined(__GNUC__) && defined(__x86_64__)

static int dw_isa(void)
{
    static int isa = -1; /* 0 none, 1 avx512, 2 avx512 + vnni; a benign race: same value */
    if (isa < 0) {
        __builtin_cpu_init();
        /* F16C is not asked for: clang 14 cannot name it here, and every CPU with AVX-512F
         * has it (AVX-512F itself converts halves on zmm) */
        const bool base = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("fma");
        isa = !base ? 0 : __builtin_cpu_supports("avx512vnni") ? 2 : 1;
    }
    return isa;
}

/* XCONV_DW_X_BF16X2's bf16 y by vcvtne2ps2bf16: where the CPU has AVX512-BF16, unless
 * XCONV_DW_BF16HW=0 (read per call, so that a test can run both paths on one machine). */
static bool dw_hw_bf16(void)
{
    const char *e = getenv("XCONV_DW_BF16HW");
    return xconv__amx_vec_available() && !(e && e[0] == '0');
}

void xconv__dw_fast_range(const xconv_dw_fast *f, int64_t begin, int64_t end)
{
    const bool vnni = dw_isa() == 2;
    switch (f->xk) {
    case XCONV_DW_X_F32: xconv__dw_run_f32_avx512(f, begin, end); break;
    case XCONV_DW_X_BF16: xconv__dw_run_bf16_avx512(f, begin, end); break;
    case XCONV_DW_X_BF16X2:
        dw_hw_bf16() ? xconv__dw_run_bf16x2_bf16hw(f, begin, end)
                                   : xconv__dw_run_bf16x2_avx512(f, begin, end);
        break;
    case XCONV_DW_X_F16: xconv__dw_run_f16_avx512(f, begin, end); break;
    case XCONV_DW_X_E4M3: xconv__dw_run_e4m3_avx512(f, begin, end); break;
    case XCONV_DW_X_E5M2: xconv__dw_run_e5m2_avx512(f, begin, end); break;
    case XCONV_DW_X_I8: vnni ? xconv__dw_run_i8_vnni(f, begin, end) : xconv__dw_run_i8_avx512(f, begin, end); break;
    case XCONV_DW_X_U8: vnni ? xconv__dw_run_u8_vnni(f, begin, end) : xconv__dw_run_u8_avx512(f, begin, end); break;
    case XCONV_DW_X_I16: xconv__dw_run_i16_avx512(f, begin, end); break;
    case XCONV_DW_X_U16: xconv__dw_run_u16_avx512(f, begin, end); break;
    case XCONV_DW_X_B32: xconv__dw_run_b32_avx512(f, begin, end); break;
    case XCONV_DW_X_F64: xconv__dw_run_f64_avx512(f, begin, end); break;
    case XCONV_DW_X_C64: xconv__dw_run_c64_avx512(f, begin, end); break;
    case XCONV_DW_X_C128: xconv__dw_run_c128_avx512(f, begin, end); break;
    case XCONV_DW_X_B64: xconv__dw_run_b64_avx512(f, begin, end); break;
    default: break;
    }
}

#else

static int dw_isa(void) { return 0; }

void xconv__dw_fast_range(const xconv_dw_fast *f, int64_t begin, int64_t end)
{
    (void)f, (void)begin, (void)end;
}

#endif

int64_t xconv__dw_fast_rows(const xconv_canon *p)
{
    const int64_t s = p->stride[2];
    const bool pair = p->k_size[0] == 1 && p->k_size[1] == 3 && p->k_size[2] == 3 && p->dil[1] == 1 &&
                      p->dil[2] == 1 && p->stride[1] == s && (s == 1 || s == 2) && p->y_size[1] > 1;
    return pair ? 2 : 1;
}

bool xconv__dw_fast_kinds(const xconv_canon *p, xconv_dw_xkind *xk, xconv_dw_ykind *yk)
{
    *xk = XCONV_DW_X_NONE;
    *yk = XCONV_DW_Y_NONE;
    if (dw_isa() == 0 || p->cin_g != 1 || p->cout_g != 1 || p->x_sc != 1 || p->y_sc != 1) return false;
    if (p->ct == XCONV_CT_F64 || p->ct == XCONV_CT_U64 || p->ct == XCONV_CT_C64 || p->ct == XCONV_CT_C128) {
        /* x and y of the compute type's width (a narrower x, widened, takes the portable
         * paths) */
        if (xconv_dtype_size(p->x_dtype) != xconv__ctype_size(p->ct) ||
            xconv_dtype_size(p->y_dtype) != xconv__ctype_size(p->ct))
            return false;
        *xk = p->ct == XCONV_CT_F64 ? XCONV_DW_X_F64
              : p->ct == XCONV_CT_U64 ? XCONV_DW_X_B64
              : p->ct == XCONV_CT_C64 ? XCONV_DW_X_C64
                                      : XCONV_DW_X_C128;
        *yk = p->ct == XCONV_CT_U64 ? XCONV_DW_Y_B64 : p->ct == XCONV_CT_C64 ? XCONV_DW_Y_C64 : XCONV_DW_Y_F64;
        return true;
    }
    switch (p->x_dtype) {
    case XCONV_DTYPE_F32: *xk = XCONV_DW_X_F32; break;
    case XCONV_DTYPE_BF16:
        /* blocks of 32 where the row-pair tiles run (the only stencil of that kind) and
         * there are more than 16 channels */
        *xk = xconv__dw_fast_rows(p) == 2 && p->cout > 16 ? XCONV_DW_X_BF16X2 : XCONV_DW_X_BF16;
        break;
    case XCONV_DTYPE_F16: *xk = XCONV_DW_X_F16; break;
    case XCONV_DTYPE_F8E4M3: *xk = XCONV_DW_X_E4M3; break;
    case XCONV_DTYPE_F8E5M2: *xk = XCONV_DW_X_E5M2; break;
    case XCONV_DTYPE_I8: *xk = XCONV_DW_X_I8; break;
    case XCONV_DTYPE_U8: *xk = XCONV_DW_X_U8; break;
    case XCONV_DTYPE_I16: *xk = XCONV_DW_X_I16; break;
    case XCONV_DTYPE_U16: *xk = XCONV_DW_X_U16; break;
    case XCONV_DTYPE_I32:
    case XCONV_DTYPE_U32: *xk = XCONV_DW_X_B32; break;
    default: return false;
    }
    if (p->ct == XCONV_CT_F32) {
        switch (p->y_dtype) {
        case XCONV_DTYPE_F32: *yk = XCONV_DW_Y_F32; break;
        case XCONV_DTYPE_BF16: *yk = XCONV_DW_Y_BF16; break;
        case XCONV_DTYPE_F16: *yk = XCONV_DW_Y_F16; break;
        case XCONV_DTYPE_F8E4M3: *yk = XCONV_DW_Y_E4M3; break;
        case XCONV_DTYPE_F8E5M2: *yk = XCONV_DW_Y_E5M2; break;
        default: return false;
        }
    } else if (p->ct == XCONV_CT_U32) {
        const size_t ys = xconv_dtype_size(p->y_dtype);
        *yk = ys == 4 ? XCONV_DW_Y_B32 : ys == 2 ? XCONV_DW_Y_B16 : XCONV_DW_Y_B8;
    } else {
        return false;
    }
    return true;
}
