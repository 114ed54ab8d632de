/*
 * igemm.h — what cpu.igemm's engine (igemm.c) shares with its packing (igemm_pack.c): the
 * geometry of a problem (kernel, blocking, workspace layout) and the task that one execute
 * hands to its threads.
 */
#ifndef XCONV_CPU_ENGINES_IGEMM_H
#define XCONV_CPU_ENGINES_IGEMM_H

#include "cpu/ukernels/igemm.h"

#include <stdatomic.h>

typedef struct ig_geom {
    const xconv_igemm_geom *g;
    bool    copy;        /* x goes through the converted buffer (channels-last unless cf) */
    bool    pad_copy;    /* ... which holds conv's padding as zeros (no bounds checks) */
    bool    merge;       /* a run is a whole kernel row (K2 taps) */
    int     merged;      /* innermost kernel dims a run covers: 0 (one tap), 1 (merge), 2, 3 */
    bool    cf;          /* one run per position in x's channels-first order (c, k): weights
                          * packed in that order; a converted x keeps it ([image, c, X]) */
    bool    y_direct;    /* the kernel writes y in place */
    bool    y_fused;     /* dense integer y narrower than the sums: the last call of each
                          * tile's reduction stores it (kernel_y), other calls use C tiles */
    int     y_bytes;     /* y_fused: bytes per y value */
    bool    plain_x;     /* VNNI 1x1 conv as plain GEMMs reading x in place (no copy): each
                          * block of rows shifted into the slot at ablk_off */
    int64_t len;         /* values per run (vnni: a multiple of 4, the tail past the
                          * run's taps on zero weights) */
    int64_t runs;        /* runs per position for conv */
    int64_t panels;      /* output-channel panels per group */
    int64_t chunk_n;     /* images per chunk */
    int64_t xp[3];       /* spatial dims of the converted buffer (padded for conv) */
    int64_t max_runs;    /* pointer-array rows per tile */
    int64_t group;       /* tiles processed together per reduction block */
    int64_t kc;          /* reduction values per block (whole runs, or part of one) */
    int64_t rb;          /* conv and transpose runs per block, when a run fits one (len <= kc) */
    size_t  row_bytes;   /* one row of C, init or bias: nr compute-type values */
    bool    vnni;        /* 8-bit x through the AVX512-VNNI byte kernels */
    bool    x_unsigned;  /* vnni: x' is the unsigned operand (i8 x) */
    int64_t cin_r;       /* reduction channels per tap as packed (vnni: a multiple of 4
                          * unless runs are whole kernel rows) */
    size_t  b_row;       /* bytes of packed weights per reduction index */
    size_t  a_es;        /* bytes of one A value (x as read by the kernel) */
    /* the weights blob (workspace start, or the plan's prepacked memory): packed weights
     * and VNNI's per-channel weight sums */
    size_t  wp, psum, blob;
    /* skip: conv may leave out of a tile's call the taps that lie in the padding for all of
     * its positions (conv with unmaterialized padding, not cf or lazy; VNNI's tiles then
     * correct their init for the taps of their own runs only), when the
     * weights are finite (so that every term left out is an exact zero) and no bias value
     * is -0 (so that no sum is -0: adding a zero to any other value leaves it unchanged).
     * nonfinite: the blob's flag word, set by the packing when a packed weight is Inf or NaN. */
    bool    skip;
    size_t  nonfinite;
    /* lazy: the whole blob would break the workspace budget, so each thread packs the
     * panel it works on into its own slot (at panel_off) when it gets there */
    bool    lazy;
    size_t  panel_bytes, panel_off;
    /* threads that run units (0: all); fewer when all threads' scratch (slots, and lazy
     * panels) would break the budget: each runner then takes a static range of units in a
     * slot of its own */
    int64_t runners;
    /* workspace offsets */
    size_t  bp, zero, xbuf, slots, slot_bytes, total, ablk_off;
} ig_geom;

/* The workspace a CPU plan may use (cpu.igemm's and cpu.amx's): max(the floor, 16 MiB
 * unless a test lowers it, 10% of the bytes of x, w and y). */
double xconv__igemm_budget(const xconv_canon *p);

/* Tests only: the packed weights' bytes per reduction block (0: half of L2, the default),
 * so that small problems still run their reductions over several blocks. Set it before
 * any plan is made: plans made under another size keep their workspace sizes. */
void xconv__igemm_set_block_bytes(size_t bytes);

static inline size_t xconv__align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Conv along spatial dim d: the kernel indices [*lo, *hi] with which output u reads inside x
 * (the others read padding); none: [0, -1]. (No -pos + dil - 1: dil may be huge.) */
static inline void xconv__tap_span(const xconv_canon *p, int d, int64_t u, int64_t *lo, int64_t *hi)
{
    const int64_t pos = u * p->stride[d] - p->pad_lo[d], dil = p->dil[d], X = p->x_size[d];
    int64_t kmin = pos >= 0 ? 0 : -pos / dil + (-pos % dil != 0);
    int64_t kmax = pos >= X ? -1 : (X - 1 - pos) / dil;
    if (kmax > p->k_size[d] - 1) kmax = p->k_size[d] - 1;
    if (kmin > kmax) kmin = 0, kmax = -1;
    *lo = kmin, *hi = kmax;
}

/* A box of conv's output positions: every image of the chunk, and j_i in [lo[i], hi[i]) per
 * spatial dim, walked in raster order; its positions are numbers pos0 .. pos0 + count - 1 of
 * the chunk's sequence of positions (the boxes in order). */
typedef struct ig_box {
    int64_t lo[3], hi[3];
    int64_t pos0, count;
} ig_box;

#define IG_MAX_BOXES 64

typedef struct ig_task {
    const xconv_exec *e;
    const ig_geom    *q;
    char             *blob;       /* packed weights: the workspace or the plan's prepack */
    int64_t           item0;      /* the packing item stored at blob + wp (lazy: a panel's first) */
    int64_t           n0, nb;     /* the chunk of images */
    int64_t           tiles;      /* tiles per (group, panel) */
    int64_t           tiles_per_phase;
    int64_t           tiles_phases;   /* stride phases with outputs: min(s2, Y2) */
    /* Work units: a block of about q->group consecutive tiles (the same blocks for any thread
     * count) over one (group, panel); blocks outer when tile_major, else panels outer. */
    int64_t           blocks, units;
    bool              tile_major;
    /* per thread (XCONV_UNITS_STRIDE words each): the units [lo, hi) it has yet to run, lo in the low 32 bits, hi in the high;
     * NULL: static ranges of units */
    _Atomic uint64_t *left;
    int               nthreads;
    /* where the A side reads x: the converted buffer or x itself, in elements of es bytes */
    const char       *src;
    int64_t           src_es, src_off, src_sn, src_ss[3];
    /* conv tiles as one plain GEMM (kernel_gemm) when x rows and y rows step evenly over
     * the chunk's positions: the steps, in src elements and y elements; 0: tile by tile */
    int64_t           plain_a, plain_y;
    bool              skip_taps;  /* q->skip, and these weights and bias allow it */
    /* conv's positions (igemm_boxes.c): one box, the whole output in raster order, or the
     * boxes of positions that read the same taps (a padded 3x3 conv: interior, edges and
     * corners). Tiles take mr positions of the sequence each; the first inner_tiles tiles
     * cover box 0 alone (the interior) and stop at its end, the others run on across the
     * remaining boxes. */
    int               nbox;
    ig_box            box[IG_MAX_BOXES];
    int64_t           inner_tiles;
} ig_task;

/* Lays out the chunk's conv positions as t->box (t->nbox, t->inner_tiles) and returns the
 * number of tiles: boxes of equal taps where t->skip_taps holds and they save enough of the
 * work, else one box. */
int64_t xconv__igemm_conv_boxes(ig_task *t);

/* cpu.igemm's engine row: cpu.winograd scales its cost. */
extern const xconv_engine xconv__engine_cpu_igemm;

/* Writes `count` compute-type values (interleaved if complex) as one packed row of nr. */
void xconv__igemm_put_row(const ig_geom *q, const void *src, char *row, int64_t count, size_t cs);

/* Packs the weights' items [begin, end) (item = (g, panel, k): one block of cin_g rows of nr
 * compute-type values) at t->blob + wp, item t->item0 first: xconv__parallel_for_slot's
 * signature, arg an ig_task. */
void xconv__igemm_pack_weights_range(void *arg, int64_t begin, int64_t end, int slot);

/* Converts rows [begin, end) of the chunk of images t->n0.. into the converted channels-last
 * buffer (item = (image, q0, q1)). */
void xconv__igemm_convert_x_range(void *arg, int64_t begin, int64_t end, int slot);

/* VNNI's x' of `rows` rows of 8-bit x with dense channels, row i at src + i * src_step
 * bytes: dst row i (cin_r bytes) = x ^ 0x80, its channels past cin 0x80 (x = 0). */
void xconv__igemm_shift_rows(unsigned char *dst, int64_t cin_r, const void *src,
                             ptrdiff_t src_step, int64_t rows, int64_t cin);

/* Every panel of the weights into t->blob, split over the context's threads; where q->skip,
 * the blob's nonfinite word then says whether a packed weight is Inf or NaN. */
void xconv__igemm_pack_all_weights(xconv_context *ctx, ig_task *t);

/* Whether a float lane of compute type ct (32 bits for f32 and c64, 64 for f64 and c128;
 * none for the others) among the `bytes` bytes at v has the bits v32 / v64 under the mask
 * m32 / m64: IG_NONFINITE (an all-ones exponent: Inf or NaN), IG_NEG_ZERO (-0). */
typedef struct ig_lane_test {
    uint32_t m32, v32;
    uint64_t m64, v64;
} ig_lane_test;
#define IG_NONFINITE ((ig_lane_test){0x7f800000u, 0x7f800000u, 0x7ff0000000000000u, 0x7ff0000000000000u})
#define IG_NEG_ZERO  ((ig_lane_test){0xffffffffu, 0x80000000u, ~(uint64_t)0, 0x8000000000000000u})
bool xconv__igemm_any_lane(xconv_ctype ct, const void *v, size_t bytes, ig_lane_test test);

/* VNNI: each panel's init row (bias and the x' shift's correction) in the workspace at bp. */
void xconv__igemm_vnni_init(const xconv_exec *e, const ig_geom *q, const char *blob);

#endif
