/*
 * depthwise_avx512.h — what the files of cpu.depthwise's AVX-512 fast path share (private to
 * depthwise_avx512*.c): a work item's row state, the operand pair of the tiles, the target
 * strings and the entry points, one per (feature set, x kind). depthwise_avx512.c dispatches;
 * depthwise_avx512_float.c, _int.c, _wide.c and _bf16.c instantiate depthwise_avx512.tmpl.h
 * for their x kinds (one translation unit held all 16 entry points and took about 5 minutes to compile).
 */
#ifndef XCONV_CPU_ENGINES_DEPTHWISE_AVX512_H
#define XCONV_CPU_ENGINES_DEPTHWISE_AVX512_H

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
    int64_t     cpb;         /* channels per block (XCONV_DW_KBLOCK) */
    int64_t     sh;          /* block b holds channels [b cpb - sh, (b + 1) cpb - sh) */
    int64_t     ncb;         /* channel blocks */
    bool        tail;        /* the last block is partial */
    __mmask32   mask;        /* its lanes: 32- or 64-bit as the x kind's, 16-bit for
                              * XCONV_DW_X_BF16X2 (dw_full_mask for full blocks) */
    __mmask32   hmask;       /* the first block's lanes (channels from 0: a shift leaves
                              * out its first sh) */
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

/* The load mask of a full channel block of x kind xk: 32 16-bit lanes for
 * XCONV_DW_X_BF16X2, else 16 lanes (the 64-bit kinds read its low 8). */
static inline __mmask32 dw_full_mask(int xk)
{
    return xk == XCONV_DW_X_BF16X2 ? (__mmask32)0xffffffffu : (__mmask32)0xffffu;
}

static inline void dw_row_init(dw_row *r, const xconv_dw_fast *f)
{
    const xconv_canon *p = f->p;
    memset(r, 0, sizeof *r);
    r->p = p;
    r->w = f->w;
    r->bias = f->bias;
    r->kk = xconv__prod3(p->k_size);
    r->cpb = XCONV_DW_KBLOCK(f->xk, p->ct);
    r->sh = f->sh;
    r->ncb = (p->cout + r->sh + r->cpb - 1) / r->cpb;
    r->tail = (p->cout + r->sh) % r->cpb != 0;
    /* lanes per channel: 2 for c128 (64-bit lanes), else 1 */
    const unsigned lpc = f->xk == XCONV_DW_X_C128 ? 2u : 1u;
    const unsigned lanes = (unsigned)((p->cout + r->sh) % r->cpb) * lpc;
    r->mask = r->tail ? (__mmask32)((1u << lanes) - 1u) : dw_full_mask(f->xk);
    r->hmask = dw_full_mask(f->xk) & (__mmask32) ~((1u << (unsigned)r->sh * lpc) - 1u);
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

/* The lanes of block cb, and whether it is partial (masked loads and stores). */
static inline __mmask32 dw_bmask(const dw_row *r, int xk, int64_t cb)
{
    __mmask32 m = dw_full_mask(xk);
    if (cb == 0) m &= r->hmask;
    if (cb == r->ncb - 1) m &= r->mask;
    return m;
}

static inline bool dw_bpart(const dw_row *r, int64_t cb)
{
    return (cb == 0 && r->sh != 0) || (cb == r->ncb - 1 && r->tail);
}

/* Block cb's first channel (negative for a shifted first block: its lanes before channel 0
 * are masked). */
static inline int64_t dw_bchan(const dw_row *r, int64_t cb) { return cb * r->cpb - r->sh; }

static inline void dw_row_at(dw_row *r, int64_t item)
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

#define DW_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma"
#define DW_TARGET_VNNI   "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx512vnni"
#define DW_TARGET_BF16   "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx512bf16"

/* One entry point per (feature set, x kind): the kind is a constant in each loop nest. */
#define DW_ENTRY(sfx, tgt, kind, xk)                                                        \
    __attribute__((target(tgt))) void xconv__dw_run_##kind##_##sfx(const xconv_dw_fast *f,  \
                                                                   int64_t b, int64_t e)    \
    {                                                                                       \
        dw_items_##sfx(f, xk, b, e);                                                        \
    }
#define DW_PROTO(sfx, tgt, kind) \
    __attribute__((target(tgt))) void xconv__dw_run_##kind##_##sfx(const xconv_dw_fast *f, int64_t b, int64_t e);
DW_PROTO(avx512, DW_TARGET_AVX512, f32)
DW_PROTO(avx512, DW_TARGET_AVX512, bf16)
DW_PROTO(avx512, DW_TARGET_AVX512, bf16x2)
DW_PROTO(avx512, DW_TARGET_AVX512, f16)
DW_PROTO(avx512, DW_TARGET_AVX512, e4m3)
DW_PROTO(avx512, DW_TARGET_AVX512, e5m2)
DW_PROTO(avx512, DW_TARGET_AVX512, i8)
DW_PROTO(avx512, DW_TARGET_AVX512, u8)
DW_PROTO(avx512, DW_TARGET_AVX512, i16)
DW_PROTO(avx512, DW_TARGET_AVX512, u16)
DW_PROTO(avx512, DW_TARGET_AVX512, b32)
DW_PROTO(avx512, DW_TARGET_AVX512, f64)
DW_PROTO(avx512, DW_TARGET_AVX512, c64)
DW_PROTO(avx512, DW_TARGET_AVX512, c128)
DW_PROTO(avx512, DW_TARGET_AVX512, b64)
DW_PROTO(bf16hw, DW_TARGET_BF16, bf16x2)
DW_PROTO(vnni, DW_TARGET_VNNI, i8)
DW_PROTO(vnni, DW_TARGET_VNNI, u8)
#undef DW_PROTO

#endif /* __GNUC__ && __x86_64__ */

#endif /* XCONV_CPU_ENGINES_DEPTHWISE_AVX512_H */
