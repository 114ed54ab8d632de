/*
 * amx.h — what the engine "cpu.amx" (amx.c) shares with its packing (amx_pack.c) and its
 * tile kernel (amx_tiles.c).
 *
 * The GEMM: A is x, one row per output position and 64 bytes of reduction per tile step
 * (32 bf16 or 64 bytes), read with a fixed row stride; B is the weights packed per step as
 * two 16-column tiles of VNNI rows (pairs of bf16 or quads of bytes per column: 1 KiB each);
 * C is 32 positions x 32 output channels in four f32 / int32 tiles.
 *
 * Rows of A at a fixed stride: x (or a zero-padded copy) is laid out as planes of positions,
 * one plane per stride phase of each dim, so that for every tap the positions of a run of
 * outputs are consecutive positions of one plane. Outputs are numbered over the plane's grid
 * (virtual rows v = (u0 * q1 + u1) * q2 + u2); rows whose u falls outside the output are
 * computed and dropped, a few percent for padded layers.
 *
 * Row mode, for convs with few channels (a network's first layer, 3 of them): padding each
 * position's channels to a tile step would multiply the work (3 -> 32). Instead the copy
 * keeps x's rows whole (zero-padded, q2 * s2 pixels of cin values per row) and A's row for
 * output u2 starts at pixel u2 * s2: its reduction is the K2 * cin values of one kernel row,
 * read straight across pixels (rows of A overlap in memory; lda = s2 * cin values). The
 * values past K2 * cin up to the tile step meet zero weights: exact for integers, and for
 * floats while x is finite (0 * Inf would be NaN), which the copy checks.
 */
#ifndef XCONV_CPU_ENGINES_AMX_H
#define XCONV_CPU_ENGINES_AMX_H

#include "core/internal.h"

typedef enum amx_kind { AMX_BF16, AMX_S8, AMX_U8 } amx_kind;

/* Whether this CPU has AMX-TILE, -BF16 and -INT8 (and AVX-512) and the OS lets this process
 * use the tiles (asked once, arch_prctl). */
bool xconv__amx_available(void);

/* The tile configuration a thread has loaded: live rows of the two A halves (0: none). */
typedef struct amx_thread {
    int m0, m1;
} amx_thread;

/*
 * One block: C = init + sum_{t < ntaps} sum_{s < ksteps} A_t,s x B_t,s, 32 x 32, where
 *   a[t] + s * 64 is row 0 of A's step s for tap t, row i at + i * lda;
 *   b[t] + s * 2048 the two packed B tiles of that step;
 *   init: 16 rows of 128 bytes (each the 32 initial values; NULL: zeros);
 *   c: 32 rows of 128 bytes, rows >= m0 + m1 not written.
 * m0 (1..16) and m1 (0..16, > 0 only when m0 == 16) are the rows of the two halves that A is
 * read for: no byte of A past row m0 + m1 - 1 is read. Sums are exact products added in a
 * fixed order (bf16: f32 with denormals flushed; integers wrap modulo 2^32).
 * between(between_arg), when set, runs after the products are issued and before C is
 * stored: vector work there (the previous block's stores) overlaps the tile unit's.
 */
typedef struct amx_block_args {
    int64_t            ntaps, ksteps;
    const char *const *a;
    const char *const *b;
    size_t             lda;
    const int64_t     *row_off;  /* vec only (and required): row i at + row_off[i], not i * lda */
    /* vec only: with rows set, tap t's row i of A is rows[t * 32 + i] (a and row_off unread):
     * x read in place, rows in the padding pointing at a row of zeros */
    const char *const *rows;
    const void        *init;
    void              *c;
    /* vec only: with y set, rows go straight to y (row i at y + y_off[i] bytes, the first
     * cnt values, as bf16 (y_bf16) or f32) instead of c, and c is not written */
    char              *y;
    const int64_t     *y_off;
    int                cnt;
    bool               y_bf16;
    int                m0, m1;
    /* vec only: pairs of each tap's last step (4, 8, 12; 0 or 16: the whole step): those
     * past them meet zero weights and are left out */
    int                last_pairs;
    /* B's tiles loaded to stay in L1, where the weights the blocks cycle through fit there
     * (a 1x1 conv over 64 channels: 8 KiB); else they stream from L2 past L1, which keeps
     * A's rows (read again by the next taps) */
    bool               b_keep;
    void             (*between)(void *);
    void              *between_arg;
} amx_block_args;

void xconv__amx_block(amx_thread *th, amx_kind kind, const amx_block_args *k);

/* Releases the tiles (at the end of a thread's share of a run). */
void xconv__amx_release(amx_thread *th);

/* The same block for AMX_BF16 on AVX512-BF16 vector dot products (amx_vec.c), on CPUs
 * without the tiles: the engine cpu.avx512bf16. Available where the CPU has AVX-512 F, BW,
 * VL and BF16 (which the stores and copies around the blocks need too). */
bool xconv__amx_vec_available(void);
void xconv__amx_vec_block(const amx_block_args *k);
/* xconv__amx_vec_block for a whole block of one tap: 32 rows of A lda apart, ksteps whole
 * steps, init NULL or the bias tile, and all 32 values of each row into y as bf16, rows ystep
 * bytes apart */
void xconv__amx_vec_lean(const char *a, size_t lda, const char *b, int64_t ksteps, const void *init,
                         char *y, int64_t ystep);

/* The rows xconv__amx_vec_block computes for the next group of a block with `left` rows to
 * go: 12 while at least 4 would be left after them, 13-15 in two near-halves, and the rest
 * exactly: no row is computed only to be dropped (a 7-output line of rn50_3x3_512 is one
 * group of 7, not of 8). */
static inline int xconv__amx_vec_group(int64_t left)
{
    return left >= 16 ? 12 : left > 12 ? (int)(left - left / 2) : (int)left;
}

#define AMX_MAX_SUBS 64   /* stride phases of conv_transpose */
#define AMX_MAX_TAPS 4096

/* The outputs of one stride phase of conv_transpose (conv: all outputs, one sub): output
 * index r[i] + step[i] * u for u < m[i] in each dim. */
typedef struct amx_sub {
    int64_t r[3], step[3], m[3];
    int64_t vcount;   /* virtual rows up to the last output's, + 1 */
    int64_t count;    /* outputs */
    int64_t blocks;   /* blocks of 32 rows per image: of virtual rows, or (vec) of outputs */
    int64_t tap0, ntaps;
} amx_sub;

/* A tap of a sub: its packed weights (kernel index kk) and where its A rows start, in
 * positions from the image's first (plane and offset within it); k: its kernel index per
 * dim (row mode: k[2] = 0). */
typedef struct amx_tap {
    int64_t kk, pos;
    int32_t k[3];
} amx_tap;

/* cpu.avx512bf16's blocks for conv with padding: the outputs in raster order split into runs
 * of whole lines (u0, u1) whose taps read x for the same kernel indices k[d] in [klo[d],
 * khi[d]] of dims 0 and 1 (all others read the zero padding), a run of lines split again by
 * columns (dim 2: the first, the middle, the last) where that leaves out more taps than its
 * smaller groups cost, and each run into blocks of up to 32 outputs (a column run's in raster
 * order within its box), so that a block leaves out the taps that read padding for all of
 * its rows: rn50_3x3_512's 7 x 7 outputs, lines 0 and 6 a third of their taps, lines 1-5 in
 * columns 0, 1-5 and 6; a 3-D conv's first and last planes. */
#define AMX_MAX_RUNS 64
typedef struct amx_run {
    int64_t i0, rows;  /* its first output (raster index in the image) and outputs */
    int64_t c0, cw;    /* its columns of each line (dim 2): [c0, c0 + cw), cw = m[2]: whole lines */
    int64_t b0;        /* its first block */
    int64_t klo[3], khi[3];
} amx_run;

/* The runs cpu.avx512bf16 puts p's blocks in (0: none, blocks 32 outputs apart; -1: it does
 * not take p), and whether it reads x through tables of rows (amx_geom.gather): for the
 * tests. */
int xconv__amx_vec_runs(const xconv_canon *p, bool *gather);

typedef struct amx_geom {
    bool        ok;
    const char *why_not;
    bool        vec;        /* the blocks run on xconv__amx_vec_block (cpu.avx512bf16) */
    amx_kind    kind;
    int         es;         /* bytes per A or B value: 2 or 1 */
    int         kstep;      /* reduction values per tile step: 32 or 64 */
    bool        direct;     /* A reads x in place (no copy) */
    bool        gather;     /* vec: A reads x in place through each block's table of rows
                             * per tap (amx_block_args.rows; no copy) */
    bool        row;        /* conv with few channels: the innermost kernel dim joins the
                             * reduction (below) */
    int64_t     red;        /* reduction values per channel: 4 for split f16 (amx.c), else 1 */
    int64_t     cp;         /* channels per group as laid out for A (red values each, then
                             * zeros): a multiple of kstep */
    int64_t     ksteps;     /* steps per tap */
    int         last_pairs; /* vec: pairs of each tap's last step that hold reduction
                             * values (4, 8, 12 or 16: amx_block_args.last_pairs) */
    int64_t     panels;     /* 32-channel panels per group */
    int64_t     wide;       /* panels whose weights a thread keeps in L2 together */
    bool        b_keep;     /* and they fit in L1 too (amx_block_args) */
    /* the copy of x: per image, ph[0]*ph[1]*ph[2] planes of q[0] x q[1] x q[2] positions of
     * groups * cp values; plane (p0, p1, p2) index u holds x[u * ph + p - lo] per dim */
    int64_t     ph[3], q[3], lo[3];
    int64_t     wtaps;      /* taps of the packed weights: the kernel's, or its K0 x K1 rows */
    int64_t     plane, image;  /* positions per plane and per image */
    size_t      row_bytes;     /* bytes from one position to the next (A's lda) */
    int64_t     nsub, ntaps;
    amx_sub     sub[AMX_MAX_SUBS];
    int64_t     blocks;        /* per image, over all subs */
    int         nruns;         /* vec conv: blocks in runs (amx_run); 0: 32 outputs apart */
    amx_run     run[AMX_MAX_RUNS];
    double      row_waste;     /* vec conv: rows x taps its blocks compute over the
                                * outputs' (cost); 0: from the blocks' virtual rows */
    int64_t     chunk_n;       /* images per chunk of the copy */
    size_t      tap_bytes;     /* packed weights of one (group, panel, tap) */
    int         store;         /* amx_store: how y is written */
    /* the blob (workspace start, or the plan's prepacked memory): a header of two ints (the
     * smallest exponent among the weights' nonzero bf16 values, and the largest: 255 for an
     * Inf or NaN), then the packed weights [G, panel, tap, step, 2 tiles] */
    size_t      blob;
    /* workspace offsets */
    size_t      bias, taps, xbuf, slots, slot_bytes, total;
    int64_t     span;          /* positions past its own that one A row reads */
    int64_t     segs;          /* pieces of the copy per line (amx.c) */
    size_t      fallback;      /* cpu.igemm's workspace, for inputs AMX would flush */
} amx_geom;

#define AMX_BLOB_HEADER 64

/* Per execute. */
typedef struct amx_task {
    const xconv_exec *e;
    const amx_geom   *q;
    const char       *blob;
    char             *ws;
    const amx_tap    *taps;
    int64_t           n0, nb;       /* the chunk of images */
    int              *emin, *emax;  /* per slot: x's smallest exponent of a nonzero bf16 value
                                     * and largest exponent (xconv__amx_bf16_scan) */
    bool              scan;         /* x read in place is scanned by the blocks */
    uint16_t          f8[256];      /* f8 x: each byte's value in bf16 (exact) */
    bool              skip;         /* runs' blocks leave out their padding taps (finite w) */
    int64_t           pos_lo, pos_hi; /* the taps' smallest and largest A row offsets */
    void             *left;         /* the threads' ranges of units (xconv__take_unit) */
    int               nthreads;
} amx_task;

/* Packs the weights' items [begin, end) (item = (g, panel, tap)) into blob + AMX_BLOB_HEADER,
 * and the smallest exponent among their nonzero bf16 values and the largest into
 * emin[slot] and emax[slot]:
 * xconv__parallel_for_slot's signature, arg an amx_task whose blob is writable. */
void xconv__amx_pack_range(void *arg, int64_t begin, int64_t end, int slot);

/* f8 dtype dt's 256 values in bf16 bits (every f8 value is one exactly), for take_values. */
void xconv__amx_f8_table(xconv_dtype dt, uint16_t table[256]);

/* Every weight into t->blob, and its header word. */
void xconv__amx_pack_all(xconv_context *ctx, amx_task *t);

/* Positions [ua, ub) of one line of the copy of the chunk's images (line = (image, plane,
 * u0, u1), q[2] positions; row mode: their pixels, and the row's last pixels with the last
 * positions); bf16 x's smallest and largest exponents into t->emin[slot] and emax[slot]. */
void xconv__amx_copy_segment(const amx_task *t, int64_t line, int64_t ua, int64_t ub, int slot);


/* y written from a block's C rows (128 bytes apart) by AVX-512 (amx_store.c): f32 sums as
 * bf16 (round to nearest even, NaN kept quiet) or f32; int32 sums as 8 or 32 bits. */
typedef enum amx_store { AMX_STORE_GENERIC, AMX_STORE_BF16, AMX_STORE_B32, AMX_STORE_B8 } amx_store;

/* count rows of cnt (<= 32) values, dense: C row row[j] (at c + row[j] * 128) to
 * base + off[j] bytes. */
void xconv__amx_store_rows(amx_store kind, const char *c, char *base, const int64_t *off,
                           const uint8_t *row, int count, int cnt);

/* The same for C rows 0 .. count - 1 into dst + j * step bytes. */
void xconv__amx_store_strided(amx_store kind, const char *c, char *dst, int64_t step, int count, int cnt);

/* count spans of `bytes` bytes: span i from src + i * src_step to dst + i * dst_step. */
void xconv__amx_copy_spans(char *dst, size_t dst_step, const char *src, ptrdiff_t src_step,
                           int64_t count, size_t bytes);

/* n f16 values as 4n bf16 reduction values (hi, hi, lo, lo): x's side of split mode. */
void xconv__amx_split_f16(const uint16_t *src, uint16_t *dst, int64_t n);

/* Folds into *emin the smallest biased exponent among the nonzero bf16 values v[0..n), and
 * into *emax the largest (255: an Inf or NaN). */
void xconv__amx_bf16_scan(const uint16_t *v, int64_t n, int *emin, int *emax);

#endif
