/*
 * igemm.h — the indirect-GEMM microkernel contract (BLIS's, with XNNPACK's indirection):
 *
 *   C[i][j] = init[j] + sum_{t < ntaps} sum_{l < len} A_t[i][l] * B_t[l][j]
 *             for i < m <= mr (positions), j < n <= nr (output channels)
 *
 *   a     ntaps * mr pointers: a[t*mr + i] -> len compute-type values of position i for
 *         reduction run t (interleaved re, im for complex). Every pointer is valid: rows past
 *         m and taps in the padding point at a zero buffer of at least len values.
 *   b     ntaps pointers: b[t] -> len packed rows of nr values each, zero-padded past n;
 *         complex rows are split planes: nr real parts, then nr imaginary parts.
 *   init  nr values laid out like one row of b (the bias), or NULL for zeros; ignored when
 *         accumulate is set, where each row's sum starts from what c holds (its first n
 *         values): a reduction split into blocks continues where the last block stopped.
 *   c     mr row pointers, compute type, interleaved for complex; rows >= m are not
 *         touched (may be NULL); only columns j < n are written.
 * No allocation, threads or errors. Integer compute types wrap (unsigned arithmetic).
 * Sums run in a fixed order (t, then l), so results do not depend on how work is split.
 */
#ifndef XCONV_CPU_IGEMM_H
#define XCONV_CPU_IGEMM_H

#include "core/internal.h"

typedef void (*xconv_igemm_ukr)(int64_t ntaps, int64_t len, const void *const *a,
                                const void *const *b, const void *init, void *const *c, int m,
                                int n, int accumulate);

/* The same sums, written narrowed: y[i] gets the low y_bytes bytes (1, 2 or 4: the sum
 * modulo 2^(8 y_bytes), DESIGN.md §2) of each of its first n sums, dense; c is read when
 * accumulate is set and never written. y rows >= m are not touched (may be NULL). Lets the
 * last call of a reduction store an integer y narrower than the compute type directly. */
typedef void (*xconv_igemm_ukr_y)(int64_t ntaps, int64_t len, const void *const *a,
                                  const void *const *b, const void *init, void *const *c, int m,
                                  int n, int accumulate, void *const *y, int y_bytes);

/* A plain GEMM of mt rows (any count: tiles of mr run inside), the whole reduction in one
 * call: row i of A at a + i * lda bytes, one packed panel b (b[0] of kernel), init as for
 * kernel (NULL: zeros), and row i's first n sums into row i of y at y + i * ldy bytes
 * (dense): the VNNI kernels store the sums' low y_bytes bytes (1, 2 or 4); the others store
 * the compute-type sums themselves (y of the compute type; y_bytes is not read). For conv
 * tiles whose x rows and y rows both step evenly from position to position (1x1 and merged
 * 1-D kernels): no pointer arrays, and one call per block of tiles instead of one per tile. */
typedef void (*xconv_igemm_ukr_gemm)(int64_t mt, int64_t len, const void *a, ptrdiff_t lda,
                                     const void *b, const void *init, void *y, ptrdiff_t ldy,
                                     int n, int y_bytes);

/* kernel_gemm's loop, shared by every variant: tiles of mr (<= 8) rows over the even row
 * steps, one call of the tile kernel each, y rows as its output rows; a partial last tile
 * reads its last live row again for the rows past mt (never stored). With ky, the tile
 * kernel is a kernel_y storing y_bytes per sum (c unused); else k writes the sums as c. */
static inline void xconv__igemm_gemm_tiles(int mr, xconv_igemm_ukr k, xconv_igemm_ukr_y ky,
                                           int64_t mt, int64_t len, const void *a, ptrdiff_t lda,
                                           const void *b, const void *init, void *y,
                                           ptrdiff_t ldy, int n, int y_bytes)
{
    const void *bp[1] = {b};
    for (int64_t i0 = 0; i0 < mt; i0 += mr) {
        const int m = mt - i0 < mr ? (int)(mt - i0) : mr;
        const void *ap[8];
        void *yp[8];
        for (int r = 0; r < mr; r++) {
            ap[r] = (const char *)a + (i0 + (r < m ? r : m - 1)) * lda;
            yp[r] = r < m ? (char *)y + (i0 + r) * ldy : NULL;
        }
        if (ky)
            ky(1, len, ap, bp, init, NULL, m, n, 0, yp, y_bytes);
        else
            k(1, len, ap, bp, init, yp, m, n, 0);
    }
}

typedef struct xconv_igemm_geom {
    xconv_ctype       ct;
    const char       *isa;     /* "avx512", "avx2" or "generic" */
    int               mr, nr;
    int               ncomp;   /* 1 real, 2 complex */
    xconv_igemm_ukr   kernel;
    xconv_igemm_ukr_y kernel_y; /* NULL where the variant has none */
    xconv_igemm_ukr_gemm kernel_gemm; /* every variant has one */
} xconv_igemm_geom;

/* The fastest kernel for ct that this CPU runs (chosen once). */
const xconv_igemm_geom *xconv__igemm_geom(xconv_ctype ct);

/* A block of half xconv__igemm_geom(ct)'s columns, where that is the AVX-512 one of a real
 * type (6 rows x 2 zmm), for groups of few output channels; else NULL. */
const xconv_igemm_geom *xconv__igemm_geom_narrow(xconv_ctype ct);

/* The kernel variant `isa` for ct, or NULL when this CPU cannot run it (for tests). */
const xconv_igemm_geom *xconv__igemm_geom_isa(xconv_ctype ct, const char *isa);

/* The AVX512-VNNI byte kernels (igemm_vnni.c, their own byte-grouped contract): the i8
 * variant (x' unsigned operand) or the u8 one; NULL when the CPU lacks VNNI. */
const xconv_igemm_geom *xconv__igemm_geom_vnni(bool x_unsigned_operand);

/* The same kernels on a block of 8 rows x 32 channels, for convs of few output channels. */
const xconv_igemm_geom *xconv__igemm_geom_vnni_narrow(bool x_unsigned_operand);

/* dst[i] = src[i] ^ 0x80 for i < n (VNNI's x' of 8-bit x), 64 bytes at a time; only called
 * where xconv__igemm_geom_vnni is not NULL (AVX512-BW runs). */
void xconv__igemm_vnni_shift(void *dst, const void *src, int64_t n);

/* cpu.igemm's workspace floor in bytes (16 MiB): a plan's workspace stays under
 * max(floor, 10% of x + w + y), packing weights panel by panel when all of them would not
 * fit. Tests lower it to reach that path with small problems. */
extern int64_t xconv__igemm_budget_floor;

#endif
