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
 * block of a channel count that is not a multiple of that uses masked loads/stores.
 * Tiles of 7 replace tiles of 8 where that avoids overlapping tiles (widths 14, 28, ...).
 * Assumes: a validated canonical conv on the CPU with cin_g == 1, cout_g == 1, x_sc == y_sc
 * == 1, the dtypes of depthwise.h, and weights packed as it says.
 */
#include "cpu/engines/depthwise.h"

#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#if defined(__clang__)
#define DW_UNROLL _Pragma("unroll")
#else
#define DW_UNROLL _Pragma("GCC unroll 32")
#endif

/* The state of one output row (segment), shared by the tile and pixel code. */
typedef struct dw_row {
    const xconv_canon *p;
    const void *w, *bias;
    int64_t     kk;          /* taps: K0*K1*K2 */
    int64_t     cpb;         /* channels per block (XCONV_DW_BLOCK) */
    int64_t     ncb;         /* channel blocks */
    bool        tail;        /* the last block is partial */
    __mmask16   mask;        /* its lanes, 32- or 64-bit as the x kind's (all for full blocks) */
    int64_t     xes, yes;    /* element bytes */
    int64_t     xps, yps;    /* bytes between pixels along dim 2 */
    int64_t     seg, nseg;
    int64_t     rp;          /* output rows along dim 1 per item (xconv__dw_fast_rows) */
    int64_t     y1p;         /* items' rows along dim 1: ceil(Y1 / rp) */
    const char *x;
    char       *y;
    /* per item */
    int64_t     j0, j1, ja, jb;
    const char *xrow;        /* x[n, 0, 0, 0, 0] */
    char       *yrow;        /* y[n, 0, j0, j1, 0] */
} dw_row;

static void dw_row_init(dw_row *r, const xconv_dw_fast *f)
{
    const xconv_canon *p = f->p;
    memset(r, 0, sizeof *r);
    r->p = p;
    r->w = f->w;
    r->bias = f->bias;
    r->kk = xconv__prod3(p->k_size);
    r->cpb = XCONV_DW_BLOCK(p->ct);
    r->ncb = (p->cout + r->cpb - 1) / r->cpb;
    r->tail = p->cout % r->cpb != 0;
    /* lanes per channel: 2 for c128 (64-bit lanes), else 1 */
    const unsigned lanes = (unsigned)(p->cout % r->cpb) * (f->xk == XCONV_DW_X_C128 ? 2u : 1u);
    r->mask = r->tail ? (__mmask16)((1u << lanes) - 1u) : (__mmask16)0xffff;
    r->xes = (int64_t)xconv_dtype_size(p->x_dtype);
    r->yes = (int64_t)xconv_dtype_size(p->y_dtype);
    r->xps = p->x_ss[2] * r->xes;
    r->yps = p->y_ss[2] * r->yes;
    r->seg = f->seg;
    r->nseg = f->nseg;
    r->rp = xconv__dw_fast_rows(p);
    r->y1p = (p->y_size[1] + r->rp - 1) / r->rp;
    r->x = f->x;
    r->y = f->y;
}

static void dw_row_at(dw_row *r, int64_t item)
{
    const xconv_canon *p = r->p;
    const int64_t row = item / r->nseg, s = item % r->nseg;
    const int64_t n = row / (p->y_size[0] * r->y1p);
    r->j0 = row / r->y1p % p->y_size[0];
    r->j1 = row % r->y1p * r->rp;
    r->ja = s * r->seg;
    r->jb = r->ja + r->seg < p->y_size[2] ? r->ja + r->seg : p->y_size[2];
    r->xrow = r->x + (p->x_off + n * p->x_sn) * r->xes;
    r->yrow = r->y + (p->y_off + n * p->y_sn + r->j0 * p->y_ss[0] + r->j1 * p->y_ss[1]) * r->yes;
}

/* An operand of the tiles' multiply-adds: v, and for complex kinds a second vector s (x
 * with re and im swapped; the (-wi, wi) weights); s == v for the others. */
typedef struct dw_v2 {
    __m512i v, s;
} dw_v2;

#define DW_SFX avx512
#define DW_TARGET "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma"
#define DW_VNNI 0
#include "cpu/engines/depthwise_avx512.tmpl.h"

#define DW_SFX vnni
#define DW_TARGET "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx512vnni"
#define DW_VNNI 1
#include "cpu/engines/depthwise_avx512.tmpl.h"

/* One entry point per (feature set, x kind): the kind is a constant in each loop nest. */
#define DW_ENTRY(sfx, tgt, kind, xk)                                                        \
    static __attribute__((target(tgt))) void dw_run_##kind##_##sfx(const xconv_dw_fast *f,   \
                                                                       int64_t b, int64_t e)    \
    {                                                                                          \
        dw_items_##sfx(f, xk, b, e);                                                           \
    }
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", f32, XCONV_DW_X_F32)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", bf16, XCONV_DW_X_BF16)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", f16, XCONV_DW_X_F16)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", e4m3, XCONV_DW_X_E4M3)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", e5m2, XCONV_DW_X_E5M2)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", i8, XCONV_DW_X_I8)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", u8, XCONV_DW_X_U8)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", i16, XCONV_DW_X_I16)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", u16, XCONV_DW_X_U16)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", b32, XCONV_DW_X_B32)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", f64, XCONV_DW_X_F64)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", c64, XCONV_DW_X_C64)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", c128, XCONV_DW_X_C128)
DW_ENTRY(avx512, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma", b64, XCONV_DW_X_B64)
DW_ENTRY(vnni, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx512vnni", i8, XCONV_DW_X_I8)
DW_ENTRY(vnni, "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx512vnni", u8, XCONV_DW_X_U8)
#undef DW_ENTRY

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

void xconv__dw_fast_range(const xconv_dw_fast *f, int64_t begin, int64_t end)
{
    const bool vnni = dw_isa() == 2;
    switch (f->xk) {
    case XCONV_DW_X_F32: dw_run_f32_avx512(f, begin, end); break;
    case XCONV_DW_X_BF16: dw_run_bf16_avx512(f, begin, end); break;
    case XCONV_DW_X_F16: dw_run_f16_avx512(f, begin, end); break;
    case XCONV_DW_X_E4M3: dw_run_e4m3_avx512(f, begin, end); break;
    case XCONV_DW_X_E5M2: dw_run_e5m2_avx512(f, begin, end); break;
    case XCONV_DW_X_I8: vnni ? dw_run_i8_vnni(f, begin, end) : dw_run_i8_avx512(f, begin, end); break;
    case XCONV_DW_X_U8: vnni ? dw_run_u8_vnni(f, begin, end) : dw_run_u8_avx512(f, begin, end); break;
    case XCONV_DW_X_I16: dw_run_i16_avx512(f, begin, end); break;
    case XCONV_DW_X_U16: dw_run_u16_avx512(f, begin, end); break;
    case XCONV_DW_X_B32: dw_run_b32_avx512(f, begin, end); break;
    case XCONV_DW_X_F64: dw_run_f64_avx512(f, begin, end); break;
    case XCONV_DW_X_C64: dw_run_c64_avx512(f, begin, end); break;
    case XCONV_DW_X_C128: dw_run_c128_avx512(f, begin, end); break;
    case XCONV_DW_X_B64: dw_run_b64_avx512(f, begin, end); break;
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
    case XCONV_DTYPE_BF16: *xk = XCONV_DW_X_BF16; break;
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
