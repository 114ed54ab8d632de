/*
 * gemm.h — compute-type GEMM and the helpers the cpu.im2col engine and the public
 * im2col/col2im kernels share.
 *
 *   C[m x n] = (accumulate ? C : 0) + A[m x k] * B[k x n]     in one compute type
 *
 * Packed layout (the contract between packers and kernels): A is cut into panels of mr rows,
 * B into panels of nr columns, both zero-padded to whole panels. Within a panel the values
 * for one reduction index kk are adjacent:
 *   A panel p, index kk:  mr values of rows p*mr .. p*mr+mr-1
 *   B panel p, index kk:  nr values of columns p*nr .. p*nr+nr-1
 * Complex values are split into planes: the mr (or nr) real parts, then the imaginary parts,
 * so that the kernels run real vector arithmetic. Because every index kk is self-contained,
 * a cache block over k is a pointer offset into the same packed panels.
 *
 * Determinism: each C element is summed by one thread, over k blocks in increasing order,
 * each block in increasing kk: results do not depend on the number of threads.
 */
#ifndef XCONV_CPU_GEMM_H
#define XCONV_CPU_GEMM_H

#include "core/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C[m x n] (m <= mr, n <= nr) = (accumulate ? C : 0) + Apanel * Bpanel over k indices.
 * a, b point at the packed panels at the first index; c is in compute-type elements with
 * row/column strides in elements. The kernel never touches C outside m x n. */
typedef void (*xconv_gemm_kernel)(int64_t k, const void *a, const void *b, void *c,
                                  int64_t rs_c, int64_t cs_c, int m, int n, int accumulate);

typedef struct xconv_gemm_geom {
    xconv_ctype ct;
    const char *isa;        /* "avx512", "avx2" or "generic": the kernel variant in use */
    int         mr, nr;     /* panel widths */
    int         ncomp;      /* 1 for real compute types, 2 for complex (split planes) */
    size_t      elem_bytes; /* bytes of one compute-type value */
    size_t      comp_bytes; /* bytes of one real component */
    int64_t     kc, mc, nc; /* cache blocking: k, rows and columns per block */
    xconv_gemm_kernel kernel;
} xconv_gemm_geom;

/* The geometry and kernel for ct on this CPU (chosen once; never NULL for a valid ct). */
const xconv_gemm_geom *xconv__gemm_geom(xconv_ctype ct);

/* The geometry of one kernel variant ("generic", "avx2", "avx512"), or NULL when this CPU
 * cannot run it: lets tests check every variant against the others. */
const xconv_gemm_geom *xconv__gemm_geom_isa(xconv_ctype ct, const char *isa);

/* Bytes of a packed A (m x k) and a packed B (k x n). */
size_t xconv__gemm_packed_a_bytes(const xconv_gemm_geom *g, int64_t m, int64_t k);
size_t xconv__gemm_packed_b_bytes(const xconv_gemm_geom *g, int64_t k, int64_t n);

/* Where row i (column j) of reduction index kk lives in a packed A (B) of reduction length
 * k; the values of rows i .. (next multiple of mr) - 1 follow it. */
void *xconv__gemm_a_slot(const xconv_gemm_geom *g, void *ap, int64_t k, int64_t i, int64_t kk);
void *xconv__gemm_b_slot(const xconv_gemm_geom *g, void *bp, int64_t k, int64_t kk, int64_t j);

/* Writes `count` compute-type values (contiguous, interleaved if complex) to a slot of a
 * panel of `width` (mr for A, nr for B), splitting complex values into planes. */
void xconv__gemm_put(const xconv_gemm_geom *g, int width, const void *src, void *slot,
                     int64_t count);

/* Zeroes `count` values at a slot of a panel of `width`. */
void xconv__gemm_zero(const xconv_gemm_geom *g, int width, void *slot, int64_t count);

/* Whether values loaded with xconv__load_row can be written into a slot directly (real
 * compute types) rather than through xconv__gemm_put. */
static inline bool xconv__gemm_direct(const xconv_gemm_geom *g) { return g->ncomp == 1; }

/* C = (accumulate ? C : 0) + A * B from packed panels, threaded over blocks of C through
 * ctx (NULL: the calling thread only). rs_c, cs_c in compute-type elements. */
void xconv__gemm_packed(xconv_context *ctx, const xconv_gemm_geom *g, int64_t m, int64_t n,
                        int64_t k, const void *ap, const void *bp, void *c, int64_t rs_c,
                        int64_t cs_c, bool accumulate);

/* The whole GEMM from strided compute-type matrices: packs A and B into `workspace`
 * (xconv__gemm_workspace_bytes, any alignment) and runs xconv__gemm_packed. */
size_t xconv__gemm_workspace_bytes(xconv_ctype ct, int64_t m, int64_t n, int64_t k);
void   xconv__gemm(xconv_context *ctx, xconv_ctype ct, int64_t m, int64_t n, int64_t k,
                   const void *a, int64_t rs_a, int64_t cs_a, const void *b, int64_t rs_b,
                   int64_t cs_b, void *c, int64_t rs_c, int64_t cs_c, bool accumulate,
                   void *workspace);

/* ---------------------------------------------------------------------------------------- */
/* Compute-type vector helpers                                                              */
/* ---------------------------------------------------------------------------------------- */

/* dst[i*dst_stride] += src[i*src_stride] for i < n, in ct (integers wrap). */
void xconv__ct_add(xconv_ctype ct, void *dst, int64_t dst_stride, const void *src,
                   int64_t src_stride, int64_t n);

/* Sets n contiguous ct values to *value. */
void xconv__ct_fill(xconv_ctype ct, void *dst, const void *value, int64_t n);

/* The storage dtype whose values are exactly ct's (U32, U64, F32, F64, C64, C128). */
xconv_dtype xconv__ct_dtype(xconv_ctype ct);

/* The cpu.im2col engine's workspace target in bytes (16 MiB). Tests lower it, before
 * creating plans, to reach every tiling path with small problems; nothing else writes it. */
extern int64_t xconv__im2col_budget_bytes;

/* ---------------------------------------------------------------------------------------- */
/* Shared im2col geometry (src/cpu/engines/im2col_kernels.c)                                */
/* ---------------------------------------------------------------------------------------- */

/*
 * A column source for col2im: the value of column row (c, k) at flattened position p
 * (row-major over u->y_size) is at base + (c*s_c + k*s_k + (p - p_begin)*s_p) elements of
 * `dtype`; only positions in [p_begin, p_end) are present. When dtype is xconv__ct_dtype of
 * the compute type the values are added without conversion.
 */
typedef struct xconv_col_source {
    const void *base;
    xconv_dtype dtype;
    int64_t     s_c, s_k, s_p;
    int64_t     p_begin, p_end;
} xconv_col_source;

/*
 * Adds into acc (u->x_size[2] contiguous ct values: image row (c, x0, x1)) every present
 * column entry that im2col would have read from that row, in increasing k order. `tmp` holds
 * u->y_size[2] ct values (used only when the source needs conversion). Uses the geometry
 * fields of u (sizes, stride, dil, pad_lo) and u->ct.
 */
void xconv__col2im_row(const xconv_unfold *u, const xconv_col_source *src, int64_t c,
                       int64_t x0, int64_t x1, void *acc, void *tmp);

/* The stride to pass for a run of `count` elements: a dim of size 1 may carry any stride
 * (validation bounds only (size-1)*stride), so a one-element run must not scale it. */
static inline int64_t xconv__run_stride(int64_t stride, int64_t count)
{
    return count > 1 ? stride : 0;
}

/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
static inline int64_t xconv__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t xconv__ceil_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* The positions [*a, *b) of one dim that land inside the image: p in [0, y) with
 * p*s + off in [0, x); *a == *b when there are none. */
static inline void xconv__valid_range(int64_t off, int64_t s, int64_t x, int64_t y, int64_t *a,
                                      int64_t *b)
{
    const int64_t lo = xconv__ceil_div(-off, s), hi = xconv__floor_div(x - 1 - off, s) + 1;
    *a = lo < 0 ? 0 : lo > y ? y : lo; /* padding may hide a tap from every position */
    *b = hi > y ? y : hi;
    if (*b < *a) *b = *a;
}

#endif /* XCONV_CPU_GEMM_H */
