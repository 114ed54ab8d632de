/*
 * amx.c — the engine "cpu.amx": conv and conv_transpose on Intel AMX tiles for bf16 (and f8,
 * which is exactly bf16 after conversion) with f32 sums, and i8 / u8 with int32 sums that
 * wrap (y of at most 32 bits: the sums modulo 2^32 are all such a y keeps); f16 split into
 * bf16 halves (below).
 *
 *   conv:           one sub-problem; tap k reads plane (k*t mod s) at offset k*t div s, so
 *                   every tap is a stride-1 walk over its plane (amx.h);
 *   conv_transpose: one sub-problem per stride phase of the output (j mod s): its outputs
 *                   j = r + s*u read x at u + (r + lo - k*t)/s for the taps k of that phase,
 *                   again a stride-1 walk, over x padded by what the taps reach outside it.
 * f16 runs as bf16 too, split: each value is hi + lo, two exact bf16 values, and the
 * reduction carries (xh, xh, xl, xl) against (wh, wl, wh, wl), four exact products per term
 * (split mode: four times the tile work, still about twice the f32 kernels' rate).
 * x goes through a zero-padded copy (channels padded to a whole tile step per group), or is
 * read in place when it already has that form: stride-1 conv without padding over dense
 * channels-last x of bf16 / i8 / u8 whose channels per group fill whole steps.
 * cpu.avx512bf16, whose block rows may lie anywhere, also reads padded and strided bf16 x in
 * place where its channels fill 4 steps or more (gather: each block's table of rows per tap,
 * the padding's rows a row of zeros), and puts a conv's blocks in runs of output lines that
 * read x for the same kernel rows, each block leaving out the taps that read only padding
 * (amx_run: rn50_3x3_512's 7x7 outputs, the first and last planes of a 3-D conv).
 *
 * Work units are (group, panel of 32 output channels, block of 32 virtual rows), ordered
 * by group, then by a range of panels whose weights fit in half of L2, then by block,
 * then by panel: a block's A rows stay in L1 while the range's panels use them, and each
 * thread's static range of units keeps few panels' weights hot. One unit per output, so
 * results are the same bits for any thread count. y is written from each block's C (the bias
 * is the tiles' initial value) by AVX-512 stores for dense bf16 / f32 / 32-bit / 8-bit y,
 * else through xconv__store_rows, while the next block's products run.
 *
 * AMX treats bf16 denormals as zero and flushes f32 results below 2^-126. Before it runs, the
 * engine checks the smallest nonzero exponents of x and w: when products could fall below
 * 2^-90 (far from any trained network's values) the problem runs on cpu.igemm's f32 kernels
 * instead, so that results always meet DESIGN.md §2's accuracy bound. The same fallback
 * takes conv_transpose with an Inf or NaN weight: its zeros around x would turn it to NaN
 * where cpu.ref, which has no such terms, does not (conv's padding terms are cpu.ref's too).
 * Assumes: a validated canonical problem on the CPU.
 */
#include "cpu/engines/amx.h"
#include "cpu/engines/igemm.h"
#include "cpu/isa.h"

#include <stdatomic.h>
#include <string.h>

#define AMX_XBUF_BYTES ((size_t)8 << 20) /* the copy of x per chunk of images */
#define AMX_SEGMENT    64              /* positions per piece of the copy of x */
#define AMX_L2_WEIGHTS_MIN ((size_t)128 << 10) /* bounds on the packed weights a thread keeps */
#define AMX_L2_WEIGHTS_MAX ((size_t)1 << 20)   /* in L2 (a range of panels) */
#define AMX_SAFE_EMIN  (254 - 90)        /* emin(x) + emin(w) below this: f32 fallback */
#define AMX_L1_WEIGHTS ((size_t)16 << 10)  /* a panel group's weights kept in L1 (b_keep) */
#define AMX_LEAN_TAKE  4                  /* units lean_range takes at once */

extern const xconv_engine xconv__engine_cpu_igemm;

/* Packed weights a thread keeps in L2, a range of panels that its blocks run over in turn:
 * half of L2 (1 MiB on the Intel AMX VM's 2 MiB). On the Zen 4 VM (1 MiB) the whole L2 held
 * rn50_3x3_512's 3 panels of 295 KB beside the blocks' rows of x and spilled: with half of
 * it, 1 panel at a time, bf16 485 -> 511 GFLOP/s on 2 threads (A/B medians of 5). */
static size_t amx_l2_weights(void)
{
    const size_t half = xconv__l2_bytes() / 2;
    return !half                      ? AMX_L2_WEIGHTS_MAX / 2
           : half < AMX_L2_WEIGHTS_MIN ? AMX_L2_WEIGHTS_MIN
           : half > AMX_L2_WEIGHTS_MAX ? AMX_L2_WEIGHTS_MAX
                                       : half;
}

/* The tile kind for p's dtypes, or -1. */
static int amx_kind_of(const xconv_canon *p)
{
    switch (p->x_dtype) {
    case XCONV_DTYPE_BF16:
    case XCONV_DTYPE_F16:
    case XCONV_DTYPE_F8E4M3:
    case XCONV_DTYPE_F8E5M2: return p->ct == XCONV_CT_F32 ? AMX_BF16 : -1;
    case XCONV_DTYPE_I8: return p->ct == XCONV_CT_U32 ? AMX_S8 : -1;
    case XCONV_DTYPE_U8: return p->ct == XCONV_CT_U32 ? AMX_U8 : -1;
    default: return -1;
    }
}

/* Whether x's values can be A's as they are, at some row: conv over bf16 / i8 / u8 x whose
 * dense channels fill whole steps per group, positions at one positive step over each
 * image. */
static bool x_in_place(const xconv_canon *p, const amx_geom *q)
{
    const xconv_dtype dt = p->x_dtype;
    if (p->op != XCONV_OP_CONV ||
        (dt != XCONV_DTYPE_BF16 && dt != XCONV_DTYPE_I8 && dt != XCONV_DTYPE_U8) || p->x_sc != 1 ||
        p->cin_g % q->kstep)
        return false;
    const int64_t ps = p->x_ss[2];
    return ps >= p->cin && (p->x_size[1] == 1 || p->x_ss[1] == p->x_size[2] * ps) &&
           (p->x_size[0] == 1 || p->x_ss[0] == p->x_size[1] * p->x_size[2] * ps);
}

/* Whether x can be A as it is, rows at one step: x_in_place at stride 1 without padding. */
static bool direct_x(const xconv_canon *p, const amx_geom *q)
{
    for (int d = 0; d < 3; d++)
        if (p->stride[d] != 1 || p->pad_lo[d] || p->pad_hi[d]) return false;
    return x_in_place(p, q);
}

/* conv_transpose along one dim: for phase r (outputs r, r + s, ...), its taps' x offsets
 * c_k = (r + lo - k*t) / s where that divides and some output reads inside x. Fills taps
 * (kernel index) and offs, returns their count. */
static int64_t tr_taps(const xconv_canon *p, int d, int64_t r, int64_t *taps, int64_t *offs)
{
    const int64_t s = p->stride[d], t = p->dil[d], m = (p->y_size[d] - r + s - 1) / s;
    int64_t count = 0;
    for (int64_t k = 0; k < p->k_size[d]; k++) {
        const int64_t num = r + p->pad_lo[d] - k * t;
        if (((num % s) + s) % s) continue;
        const int64_t c = num / s;
        if (c >= p->x_size[d] || c + m - 1 < 0) continue;
        taps[count] = k, offs[count] = c, count++;
    }
    return count;
}

/* What cpu.avx512bf16's block of `rows` outputs costs, in rows of a 12-row group: its groups,
 * each at least 3 rows' worth (a group of 1 or 2 rows has 2 or 4 chains of sums, too few to
 * hide the dot products' latency). */
static int64_t vec_block_rows(int64_t rows)
{
    int64_t done = 0;
    while (rows > 0) {
        const int g = xconv__amx_vec_group(rows);
        done += g < 3 ? 3 : g, rows -= g;
    }
    return done;
}

/* Rows computed for `rows` outputs in blocks of 32. */
static int64_t vec_run_rows(int64_t rows) { return rows / 32 * 32 + vec_block_rows(rows % 32); }

/* Runs of outputs u along dim d (m of them) with the same tap range: their starts, counts
 * and ranges into the arrays, the number of runs returned (AMX_MAX_RUNS + 1: too many). */
static int dim_runs(const xconv_canon *p, int d, int64_t m, int64_t *start, int64_t *len, int64_t *lo, int64_t *hi)
{
    int n = 0;
    for (int64_t u = 0; u < m; u++) {
        int64_t a, b;
        xconv__tap_span(p, d, u, &a, &b);
        if (n && lo[n - 1] == a && hi[n - 1] == b) {
            len[n - 1]++;
            continue;
        }
        if (n == AMX_MAX_RUNS) return AMX_MAX_RUNS + 1;
        start[n] = u, len[n] = 1, lo[n] = a, hi[n] = b, n++;
    }
    return n;
}

/* Taps a run of kernel index ranges [lo[d], hi[d]] leaves in (0 where one is empty). */
static int64_t run_taps(const amx_run *rn)
{
    int64_t taps = 1;
    for (int d = 0; d < 3; d++) taps *= rn->khi[d] >= rn->klo[d] ? rn->khi[d] - rn->klo[d] + 1 : 0;
    return taps;
}

/* cpu.avx512bf16's conv blocks in runs (amx_run), where the taps they leave out outweigh the
 * partial blocks the runs add by 3% or more; sets q->row_waste either way. Runs of lines
 * by both outer dims where there are at most AMX_MAX_RUNS of them, else by dim 0 alone; a
 * run of lines is split by columns where that costs 1.5% less (rn50_3x3_256's lines 1-12:
 * columns 0 and 13 leave out 3 taps each; its lines 0 and 13 stay whole, as their corners
 * alone would be groups of one row; at 3% rather than 1.5%, rn50_3x3_128's lines 1-26, 2.4%
 * less, stayed whole and ran 1.6% slower). Not in row mode, whose rows hold dim 2's taps. */
static void vec_runs(const xconv_canon *p, amx_geom *q)
{
    q->nruns = 0;
    q->row_waste = 0;
    if (!q->vec || p->op != XCONV_OP_CONV || q->nsub != 1) return;
    amx_sub *sb = &q->sub[0];
    const int64_t taps_all = sb->ntaps, k2 = q->row ? 1 : p->k_size[2], m2 = sb->m[2];
    const double plain = (double)vec_run_rows(sb->count) * (double)taps_all;
    q->row_waste = plain / ((double)sb->count * (double)taps_all);
    if (q->direct || sb->m[0] > 1 << 16 || sb->m[1] > 1 << 16) return;
    int64_t s0[AMX_MAX_RUNS], n0[AMX_MAX_RUNS], lo0[AMX_MAX_RUNS], hi0[AMX_MAX_RUNS];
    int64_t s1[AMX_MAX_RUNS], n1[AMX_MAX_RUNS], lo1[AMX_MAX_RUNS], hi1[AMX_MAX_RUNS];
    int64_t s2[AMX_MAX_RUNS], n2[AMX_MAX_RUNS], lo2[AMX_MAX_RUNS], hi2[AMX_MAX_RUNS];
    const int r0 = dim_runs(p, 0, sb->m[0], s0, n0, lo0, hi0);
    int r1 = dim_runs(p, 1, sb->m[1], s1, n1, lo1, hi1);
    int r2 = q->row || k2 == 1 || m2 > 1 << 16 ? 1 : dim_runs(p, 2, m2, s2, n2, lo2, hi2);
    if (r2 > AMX_MAX_RUNS) r2 = 1; /* too many: whole lines only */
    if (r0 > AMX_MAX_RUNS) return;
    if (r1 > AMX_MAX_RUNS || (r1 > 1 && sb->m[0] * r1 > AMX_MAX_RUNS)) {
        r1 = 1, s1[0] = 0, n1[0] = sb->m[1], lo1[0] = 0, hi1[0] = p->k_size[1] - 1;  /* dim 0 alone */
    }
    /* lines in raster order: with one run along dim 1, a dim-0 run is one run of lines; else
     * each line of dim 0 takes dim 1's runs in turn */
    amx_run lines[AMX_MAX_RUNS];
    int nl = 0;
    for (int a = 0; a < r0; a++) {
        const int64_t reps = r1 == 1 ? 1 : n0[a];
        for (int64_t i = 0; i < reps; i++)
            for (int b = 0; b < r1; b++) {
                if (nl == AMX_MAX_RUNS) return;
                amx_run *rn = &lines[nl++];
                const int64_t u0 = s0[a] + i;
                rn->i0 = (u0 * sb->m[1] + s1[b]) * m2;
                rn->rows = (r1 == 1 ? n0[a] : 1) * n1[b] * m2;
                rn->c0 = 0, rn->cw = m2;
                rn->klo[0] = lo0[a], rn->khi[0] = hi0[a], rn->klo[1] = lo1[b], rn->khi[1] = hi1[b];
                rn->klo[2] = 0, rn->khi[2] = k2 - 1;
            }
    }
    /* each run of lines whole, or in runs of columns where those cost 1.5% less and fit */
    amx_run run[AMX_MAX_RUNS];
    int n = 0;
    for (int i = 0; i < nl; i++) {
        const amx_run *ln = &lines[i];
        const int64_t count = ln->rows / m2;
        double whole = (double)vec_run_rows(ln->rows) * (double)run_taps(ln), split = 0;
        amx_run cols[AMX_MAX_RUNS];
        for (int c = 0; r2 > 1 && c < r2; c++) {
            cols[c] = *ln;
            cols[c].i0 = ln->i0 + s2[c], cols[c].rows = count * n2[c];
            cols[c].c0 = s2[c], cols[c].cw = n2[c];
            cols[c].klo[2] = lo2[c], cols[c].khi[2] = hi2[c];
            split += (double)vec_run_rows(cols[c].rows) * (double)run_taps(&cols[c]);
        }
        /* (room for r2 runs and one for each run of lines after this one) */
        const bool by_cols = r2 > 1 && split < 0.985 * whole && n + r2 <= AMX_MAX_RUNS - (nl - 1 - i);
        if (by_cols)
            for (int c = 0; c < r2; c++) run[n++] = cols[c];
        else
            run[n++] = *ln;
    }
    double work = 0;
    int64_t blocks = 0;
    for (int i = 0; i < n; i++) {
        amx_run *rn = &run[i];
        work += (double)vec_run_rows(rn->rows) * (double)run_taps(rn);
        rn->b0 = blocks;
        blocks += (rn->rows + 31) / 32;
    }
    if (work > 0.97 * plain) return;
    memcpy(q->run, run, (size_t)n * sizeof *run);
    q->nruns = n;
    q->blocks += blocks - sb->blocks;
    sb->blocks = blocks;
    q->row_waste = work / ((double)sb->count * (double)taps_all);
}

/* The subs, and their taps into `taps` when it is not NULL (same enumeration either way). */
static void amx_subs(const xconv_canon *p, amx_geom *q, amx_tap *taps)
{
    const int64_t K1 = p->k_size[1], K2 = p->k_size[2];
    int64_t count = 0;
    q->nsub = 0;
    q->blocks = 0;
    if (p->op == XCONV_OP_CONV) {
        amx_sub *sb = &q->sub[q->nsub++];
        for (int d = 0; d < 3; d++) sb->r[d] = 0, sb->step[d] = 1, sb->m[d] = p->y_size[d];
        sb->tap0 = 0;
        /* row mode: a tap per kernel row, its K2 taps inside the reduction */
        const int64_t K2t = q->row ? 1 : K2;
        for (int64_t k0 = 0; k0 < p->k_size[0]; k0++)
            for (int64_t k1 = 0; k1 < K1; k1++)
                for (int64_t k2 = 0; k2 < K2t; k2++, count++) {
                    if (!taps) continue;
                    const int64_t k[3] = {k0, k1, k2};
                    int64_t plane = 0, off = 0;
                    for (int d = 0; d < 3; d++) {
                        const int64_t kt = k[d] * p->dil[d];
                        plane = plane * q->ph[d] + kt % q->ph[d];
                        off = off * q->q[d] + kt / q->ph[d];
                    }
                    taps[count].kk = (k0 * K1 + k1) * K2t + k2;
                    taps[count].pos = plane * q->plane + off;
                    taps[count].k[0] = (int32_t)k0, taps[count].k[1] = (int32_t)k1, taps[count].k[2] = (int32_t)k2;
                }
        sb->ntaps = count;
    } else {
        int64_t rc[3];
        for (int d = 0; d < 3; d++)
            rc[d] = p->stride[d] < p->y_size[d] ? p->stride[d] : p->y_size[d];
        int64_t kt[3][64], ko[3][64];
        for (int64_t r0 = 0; r0 < rc[0]; r0++)
            for (int64_t r1 = 0; r1 < rc[1]; r1++)
                for (int64_t r2 = 0; r2 < rc[2]; r2++) {
                    amx_sub *sb = &q->sub[q->nsub++];
                    const int64_t r[3] = {r0, r1, r2};
                    int64_t nk[3];
                    for (int d = 0; d < 3; d++) {
                        sb->r[d] = r[d], sb->step[d] = p->stride[d];
                        sb->m[d] = (p->y_size[d] - r[d] + p->stride[d] - 1) / p->stride[d];
                        nk[d] = tr_taps(p, d, r[d], kt[d], ko[d]);
                    }
                    sb->tap0 = count;
                    for (int64_t a = 0; a < nk[0]; a++)
                        for (int64_t b = 0; b < nk[1]; b++)
                            for (int64_t c = 0; c < nk[2]; c++, count++) {
                                if (!taps) continue;
                                taps[count].kk = (kt[0][a] * K1 + kt[1][b]) * K2 + kt[2][c];
                                taps[count].k[0] = (int32_t)kt[0][a], taps[count].k[1] = (int32_t)kt[1][b];
                                taps[count].k[2] = (int32_t)kt[2][c];
                                taps[count].pos = ((ko[0][a] + q->lo[0]) * q->q[1] +
                                                   ko[1][b] + q->lo[1]) * q->q[2] +
                                                  ko[2][c] + q->lo[2];
                            }
                    sb->ntaps = count - sb->tap0;
                }
    }
    for (int64_t i = 0; i < q->nsub; i++) {
        amx_sub *sb = &q->sub[i];
        sb->vcount = ((sb->m[0] - 1) * q->q[1] + sb->m[1] - 1) * q->q[2] + sb->m[2];
        sb->count = sb->m[0] * sb->m[1] * sb->m[2];
        sb->blocks = ((q->vec ? sb->count : sb->vcount) + 31) / 32;
        q->blocks += sb->blocks;
    }
    q->ntaps = count;
    vec_runs(p, q);
}

/* conv_transpose's padding of x per dim: lo[d] zero rows before it so that no tap's offset
 * is negative, and the plane long enough for every phase's last output. */
static void tr_extent(const xconv_canon *p, amx_geom *q)
{
    for (int d = 0; d < 3; d++) {
        const int64_t s = p->stride[d], rc = s < p->y_size[d] ? s : p->y_size[d];
        int64_t lo = 0, hi = p->x_size[d];
        int64_t kt[64], ko[64];
        for (int64_t r = 0; r < rc; r++) {
            const int64_t m = (p->y_size[d] - r + s - 1) / s, nk = tr_taps(p, d, r, kt, ko);
            for (int64_t i = 0; i < nk; i++) {
                if (-ko[i] > lo) lo = -ko[i];
                if (ko[i] + m > hi) hi = ko[i] + m;
            }
        }
        q->ph[d] = 1, q->lo[d] = lo, q->q[d] = lo + hi;
    }
}

/* The most taps of one sub: a slot's room for their pointers. */
static int64_t most_taps(const amx_geom *q)
{
    int64_t most = 0;
    for (int64_t i = 0; i < q->nsub; i++) most = q->sub[i].ntaps > most ? q->sub[i].ntaps : most;
    return most;
}

/* gather: a tap's reach from an output's first position, per dim (k * t) and in bytes. */
typedef struct amx_reach {
    int64_t k[3], off;
} amx_reach;

/* Values of a reduction of n the blocks compute: up to whole steps, or (vec) to 4 pairs
 * (its last step may be 4, 8 or 12 pairs: amx_block_args.last_pairs). */
static int64_t vec_done(const amx_geom *q, int64_t n)
{
    return q->vec ? (n + 7) / 8 * 8 : (n + q->kstep - 1) / q->kstep * q->kstep;
}

/* vec: the geometry of cpu.avx512bf16 (the same blocks on AVX512-BF16 vectors), else of
 * cpu.amx; the why_not texts name the engine. */
static void amx_geom_of(const xconv_canon *p, amx_geom *q, bool vec)
{
    memset(q, 0, sizeof *q);
    q->vec = vec;
    if (p->device != XCONV_DEVICE_CPU) {
        q->why_not = "it runs on cpu tensors only";
        return;
    }
    if (vec ? !xconv__amx_vec_available() : !xconv__amx_available()) {
        q->why_not = vec ? "this CPU has no AVX512-BF16 (with AVX-512 F, BW and VL)"
                         : "this CPU or its OS offers no AMX tiles (AMX-TILE, -BF16, -INT8)";
        return;
    }
    const int kind = amx_kind_of(p);
    if (vec && kind != AMX_BF16) {
        q->why_not = "it runs bf16, f16 and f8 x with a float y of at most 32 bits";
        return;
    }
    if (kind < 0) {
        q->why_not = "it runs bf16, f16 and f8 x with a float y of at most 32 bits, and i8 or u8 x "
                     "with an integer y of at most 32 bits";
        return;
    }
    if (xconv__prod3(p->k_size) > AMX_MAX_TAPS) {
        q->why_not = "it takes kernels of at most 4096 taps";
        return;
    }
    if (p->threads > 256) {
        q->why_not = "it runs on at most 256 threads";
        return;
    }
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    int64_t subs = 1;
    for (int d = 0; d < 3; d++) {
        if (tr) subs *= p->stride[d] < p->y_size[d] ? p->stride[d] : p->y_size[d];
        if (tr && p->k_size[d] > 64) {
            q->why_not = "it takes conv_transpose kernels of at most 64 taps per dim";
            return;
        }
    }
    if (subs > AMX_MAX_SUBS) {
        q->why_not = "it takes conv_transpose strides of at most 64 phases";
        return;
    }
    q->kind = (amx_kind)kind;
    q->es = kind == AMX_BF16 ? 2 : 1;
    q->kstep = 64 / q->es;
    q->red = p->x_dtype == XCONV_DTYPE_F16 ? 4 : 1;
    q->cp = (q->red * p->cin_g + q->kstep - 1) / q->kstep * q->kstep;
    q->panels = (p->cout_g + 31) / 32;
    q->direct = direct_x(p, q);
    /* row mode where it pads less: K2 * cin against cin, each up to a whole step (vec: up
     * to 4 pairs) */
    const int64_t run = p->k_size[2] * p->cin_g * q->red, run_p = (run + q->kstep - 1) / q->kstep * q->kstep;
    q->row = !tr && !q->direct && p->groups == 1 && p->dil[2] == 1 && p->k_size[2] > 1 &&
             (double)vec_done(q, run) * (double)(p->cin_g * q->red) <
                 (double)run * (double)vec_done(q, p->cin_g * q->red);
    if (q->row) q->cp = run_p;
    /* cpu.avx512bf16 reads x in place where direct_x cannot (padding, strides) through
     * tables of each tap's rows, the padding's rows a row of zeros: no copy of x. Where a
     * tap's products are few (under 4 steps: 64 channels), building the tables and loading
     * the rows cost more than the copy (c3d 511 -> 468 GFLOP/s, rn50_3x3_64 446 -> 429) */
    q->gather = vec && !tr && !q->direct && !q->row && x_in_place(p, q) && p->cin_g / q->kstep >= 4;
    q->ksteps = q->cp / q->kstep;
    q->last_pairs = (int)(vec_done(q, q->row ? run : p->cin_g * q->red) - (q->ksteps - 1) * q->kstep) / 2;
    q->wtaps = q->row ? p->k_size[0] * p->k_size[1] : xconv__prod3(p->k_size);
    const size_t xes = xconv_dtype_size(p->x_dtype);
    if (tr) {
        tr_extent(p, q);
    } else if (q->direct || q->gather) {
        for (int d = 0; d < 3; d++) q->ph[d] = 1, q->lo[d] = 0, q->q[d] = p->x_size[d];
    } else {
        for (int d = 0; d < 3; d++) {
            const int64_t span = p->x_size[d] + p->pad_lo[d] + p->pad_hi[d];
            q->ph[d] = p->stride[d], q->lo[d] = p->pad_lo[d];
            q->q[d] = (span + p->stride[d] - 1) / p->stride[d];
        }
        if (q->row) q->ph[2] = 1; /* rows of q2 * s2 pixels; A rows start s2 pixels apart */
    }
    q->row_bytes = q->direct || q->gather ? (size_t)p->x_ss[2] * xes
                   : q->row  ? (size_t)(p->stride[2] * p->cin * q->red * q->es)
                             : (size_t)(p->groups * q->cp * q->es);
    /* the copy of one image must fit the budget (and its sizes 64 bits) before any
     * product of them is formed: padding and dilation may be huge */
    const double budget = xconv__igemm_budget(p);
    if (!q->direct && !q->gather) {
        double image_d = (double)q->row_bytes;
        for (int d = 0; d < 3; d++) image_d *= (double)q->q[d] * (double)q->ph[d];
        if (image_d > budget) {
            q->why_not = "its copy of one image of x would break the workspace budget";
            return;
        }
    }
    q->plane = xconv__prod3(q->q);
    q->image = q->plane * xconv__prod3(q->ph);
    amx_subs(p, q, NULL);
    q->tap_bytes = (size_t)q->ksteps * 2048;
    /* positions past its own that an A row reads (row mode: a step past its pixels) */
    q->span = q->row ? ((int64_t)q->cp * q->es + (int64_t)q->row_bytes - 1) / (int64_t)q->row_bytes - 1 : 0;
    {
        const double panel_bytes = (double)q->tap_bytes * (double)q->wtaps;
        const int64_t wide = (int64_t)((double)amx_l2_weights() / panel_bytes);
        q->wide = wide < 1 ? 1 : wide > q->panels ? q->panels : wide;
        q->b_keep = panel_bytes * (double)q->wide <= AMX_L1_WEIGHTS;
    }
    q->store = AMX_STORE_GENERIC;
    if (p->y_sc == 1) {
        const xconv_dtype y = p->y_dtype;
        if (kind == AMX_BF16)
            q->store = y == XCONV_DTYPE_BF16 ? AMX_STORE_BF16 : y == XCONV_DTYPE_F32 ? AMX_STORE_B32 : q->store;
        else
            q->store = y == XCONV_DTYPE_I32 || y == XCONV_DTYPE_U32 ? AMX_STORE_B32
                       : y == XCONV_DTYPE_I8 || y == XCONV_DTYPE_U8 ? AMX_STORE_B8
                                                                    : q->store;
    }

    /* the workspace: blob (unless prepacked), bias tiles, tap table, the copy of x, slots */
    const size_t blob =
        AMX_BLOB_HEADER + (size_t)(p->groups * q->panels) * (size_t)q->wtaps * q->tap_bytes;
    q->blob = blob;
    size_t off = p->prepacked ? 0 : xconv__align64(blob);
    q->bias = off;
    if (p->has_bias) off += xconv__align64((size_t)(p->groups * q->panels) * 2048);
    q->taps = off;
    off += xconv__align64((size_t)q->ntaps * sizeof(amx_tap));
    q->xbuf = off;
    if (q->gather) { /* the row of zeros the padding's rows point at */
        q->chunk_n = p->n > 0 ? p->n : 1;
        off += xconv__align64((size_t)(q->cp * q->es));
    } else if (!q->direct) {
        const double image_bytes = (double)q->image * (double)q->row_bytes;
        int64_t chunk = (int64_t)((double)AMX_XBUF_BYTES / image_bytes);
        q->chunk_n = chunk < 1 ? 1 : chunk > p->n ? (p->n > 0 ? p->n : 1) : chunk;
        /* row mode: the last row's A reads up to a step past its pixels */
        off += xconv__align64((size_t)((double)q->chunk_n * image_bytes) + (size_t)(q->kstep * q->es));
    } else {
        q->chunk_n = p->n > 0 ? p->n : 1;
    }
    const int64_t most = most_taps(q);
    q->segs = (q->q[2] + AMX_SEGMENT - 1) / AMX_SEGMENT;
    q->slots = off;
    /* a slot: two blocks' C, the block's taps and their A and B pointers, and (gather) the
     * block's rows per tap and each tap's reach into x */
    q->slot_bytes = 8192 + xconv__align64((size_t)most * 3 * sizeof(void *)) +
                    (q->gather ? xconv__align64((size_t)most * (32 * sizeof(void *) + sizeof(amx_reach))) : 0);
    off += q->slot_bytes * (size_t)(p->threads > 0 ? p->threads : 1);
    q->total = off;
    if ((double)q->total > budget) {
        q->why_not = "its copy of x and packed weights would break the workspace budget";
        return;
    }
    /* the f32 path for inputs whose products AMX would flush (bf16 only) */
    if (kind == AMX_BF16) {
        xconv_canon p2 = *p;
        p2.prepacked = false;
        const char *why = NULL;
        if (!xconv__engine_cpu_igemm.supports(&p2, &why)) {
            q->why_not = "it needs cpu.igemm for inputs in bf16's denormal range";
            return;
        }
        q->fallback = xconv__engine_cpu_igemm.workspace_bytes(&p2);
    }
    /* units are counted in 32 bits (xconv__take_unit) */
    if ((double)(p->groups * q->panels) * (double)q->chunk_n * (double)q->blocks >= 2147483648.0) {
        q->why_not = "it runs at most 2^31 blocks of outputs per chunk of images";
        return;
    }
    q->ok = true;
}

int xconv__amx_vec_runs(const xconv_canon *p, bool *gather)
{
    amx_geom q;
    amx_geom_of(p, &q, true);
    *gather = q.ok && q.gather;
    return q.ok ? q.nruns : -1;
}

static bool amx_supports_as(const xconv_canon *p, const char **why_not, bool vec)
{
    amx_geom q;
    amx_geom_of(p, &q, vec);
    if (!q.ok) *why_not = q.why_not;
    return q.ok;
}

static size_t amx_workspace_bytes_as(const xconv_canon *p, bool vec)
{
    amx_geom q;
    amx_geom_of(p, &q, vec);
    return q.total > q.fallback ? q.total : q.fallback;
}

/* Tile products at about 10x (bf16) and 5x (bytes, against VNNI) the vector kernels' rate,
 * AVX512-BF16 dot products at about twice the f32 kernels' (two products per lane), slowed
 * by padded channels, partial panels and the dropped rows of the plane grid; plus the copy
 * of x. */
static double amx_cost_as(const xconv_canon *p, bool vec)
{
    amx_geom q;
    amx_geom_of(p, &q, vec);
    if (!q.ok) return 1e300;
    const double real = (double)xconv__prod3(p->y_size), virt = (double)q.blocks * 32.0;
    const double red = (double)p->cin_g * (q.row ? (double)p->k_size[2] : 1.0);
    const double done = (double)(q.cp - q.kstep + 2 * q.last_pairs); /* per tap, split f16's 4 */
    const double waste = done / red * ((double)q.panels * 32.0 / (double)p->cout_g) *
                         (q.row_waste > 0 ? q.row_waste : virt > real ? virt / real : 1.0);
    const double rate = vec ? 0.055 : q.kind == AMX_BF16 ? 0.012 : 0.008;
    const double moved =
        q.direct || q.gather ? 0.0 : (double)p->n * (double)q.image * (double)q.row_bytes / (double)q.es;
    return p->flops * rate * waste + 2.0 * moved + 2e4;
}

/* ---------------------------------------------------------------------------------------- */
/* The blocks                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* The live rows of one block (rows of C whose virtual row is an output) and their y
 * offsets in bytes without the output channel's: one list serves every panel of the block.
 * vec: every row is an output (rows are numbered over the outputs), and a_off holds each
 * row's A offset in bytes (its virtual row's). */
typedef struct amx_rows {
    int     count;
    uint8_t row[32];
    int64_t off[32];
    int64_t a_off[32];
} amx_rows;

/* vec's block: outputs i0 .. i0 + rows - 1 of the sub, in (u0, u1, u2) order. */
static void output_rows(const amx_task *t, const amx_sub *sb, int64_t n, int64_t i0, int rows,
                        const amx_run *rn, amx_rows *br)
{
    const xconv_canon *p = t->e->p;
    const amx_geom *q = t->q;
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const int64_t d2 = sb->step[2] * p->y_ss[2] * yes, rb = (int64_t)q->row_bytes;
    int64_t u2 = i0 % sb->m[2], u1 = i0 / sb->m[2] % sb->m[1], u0 = i0 / sb->m[2] / sb->m[1];
    /* the run's columns of each line (no run: whole lines) */
    const int64_t c_lo = rn ? rn->c0 : 0, c_hi = rn ? rn->c0 + rn->cw : sb->m[2];
    int64_t el = 0, ao = 0; /* stepped along a line of outputs, recomputed where one starts */
    for (int i = 0; i < rows; i++) {
        if (i == 0 || u2 == c_lo) {
            el = (p->y_off + n * p->y_sn + (sb->r[0] + sb->step[0] * u0) * p->y_ss[0] +
                  (sb->r[1] + sb->step[1] * u1) * p->y_ss[1] + (sb->r[2] + sb->step[2] * u2) * p->y_ss[2]) *
                 yes;
            ao = ((u0 * q->q[1] + u1) * q->q[2] + u2) * rb;
        }
        br->row[i] = (uint8_t)i;
        br->off[i] = el;
        br->a_off[i] = ao;
        el += d2, ao += rb;
        if (++u2 == c_hi) {
            u2 = c_lo;
            if (++u1 == sb->m[1]) u1 = 0, u0++;
        }
    }
    br->count = rows;
}

/* A block's live rows (those of outputs) and their y offsets, a line of the plane at a time:
 * within a line the offsets are one arithmetic run (per row, the branches and offset
 * arithmetic were half of a 1x1 layer's bookkeeping). */
static void block_rows(const amx_task *t, const amx_sub *sb, int64_t n, int64_t v0, int rows,
                       amx_rows *br)
{
    const xconv_canon *p = t->e->p;
    const amx_geom *q = t->q;
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const int64_t d2 = sb->step[2] * p->y_ss[2] * yes;
    int64_t u2 = v0 % q->q[2], u1 = v0 / q->q[2] % q->q[1], u0 = v0 / q->q[2] / q->q[1];
    int count = 0; /* kept out of *br: a store and reload per row stalls */
    for (int i = 0; i < rows;) {
        const int run = rows - i < q->q[2] - u2 ? rows - i : (int)(q->q[2] - u2); /* on this line */
        if (u0 < sb->m[0] && u1 < sb->m[1] && u2 < sb->m[2]) {
            const int live = run < sb->m[2] - u2 ? run : (int)(sb->m[2] - u2);
            const int64_t el = (p->y_off + n * p->y_sn + (sb->r[0] + sb->step[0] * u0) * p->y_ss[0] +
                                (sb->r[1] + sb->step[1] * u1) * p->y_ss[1] + (sb->r[2] + sb->step[2] * u2) * p->y_ss[2]) *
                               yes;
            for (int j = 0; j < live; j++) {
                br->row[count + j] = (uint8_t)(i + j);
                br->off[count + j] = el + j * d2;
            }
            count += live;
        }
        i += run, u2 = 0; /* the next line, if any rows are left */
        if (++u1 == q->q[1]) u1 = 0, u0++;
    }
    br->count = count;
}

/* Writes a block's live rows of C into y for the panel's output channels. */
static void store_block(const amx_task *t, const amx_rows *br, int64_t g, int64_t panel, const char *c)
{
    const xconv_canon *p = t->e->p;
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const int cnt = p->cout_g - panel * 32 < 32 ? (int)(p->cout_g - panel * 32) : 32;
    char *base = (char *)t->e->y + (g * p->cout_g + panel * 32) * p->y_sc * yes;
    if (t->q->store != AMX_STORE_GENERIC) {
        xconv__amx_store_rows((amx_store)t->q->store, c, base, br->off, br->row, br->count, cnt);
        return;
    }
    void *dst[32];
    for (int j0 = 0, j = 1; j <= br->count; j++) {
        if (j < br->count && br->row[j] == br->row[j - 1] + 1) continue;
        for (int i = j0; i < j; i++) dst[i - j0] = base + br->off[i];
        xconv__store_rows(p->ct, p->y_dtype, c + (size_t)br->row[j0] * 128, 128, dst, p->y_sc, cnt, j - j0);
        j0 = j;
    }
}

/* A unit's place: group, panel (and the first of its range), image, sub and block. */
typedef struct amx_unit {
    int64_t        g, panel, c0, gp, nl, v0, rows;
    const amx_sub *sb;
    const amx_run *run;  /* its block's run (NULL: blocks 32 outputs apart) */
} amx_unit;

/* Panels in the L2 group starting at panel c0 (q->wide, or fewer at the end). */
static int64_t group_width(const amx_geom *q, int64_t c0) { return q->panels - c0 < q->wide ? q->panels - c0 : q->wide; }

static void unit_at(const amx_task *t, int64_t unit, amx_unit *u)
{
    const amx_geom *q = t->q;
    const int64_t chunk_blocks = t->nb * q->blocks;
    u->g = unit / (q->panels * chunk_blocks);
    const int64_t r = unit % (q->panels * chunk_blocks);
    u->c0 = r / (q->wide * chunk_blocks) * q->wide;
    const int64_t r2 = r % (q->wide * chunk_blocks);
    const int64_t width = group_width(q, u->c0);
    const int64_t blk = r2 / width;
    u->panel = u->c0 + r2 % width, u->gp = u->g * q->panels + u->panel;
    u->nl = blk / q->blocks;
    int64_t b = blk % q->blocks, si = 0;
    while (b >= q->sub[si].blocks) b -= q->sub[si].blocks, si++;
    u->sb = &q->sub[si];
    u->run = NULL;
    if (q->nruns) { /* the last run starting at or before block b */
        int lo = 0, hi = q->nruns - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (q->run[mid].b0 <= b) lo = mid;
            else hi = mid - 1;
        }
        const amx_run *rn = u->run = &q->run[lo];
        const int64_t j = (b - rn->b0) * 32; /* the block's first output in the run's box */
        u->v0 = rn->i0 + j / rn->cw * u->sb->m[2] + j % rn->cw;
        u->rows = rn->rows - j < 32 ? rn->rows - j : 32;
        return;
    }
    const int64_t total = q->vec ? u->sb->count : u->sb->vcount;
    u->v0 = b * 32, u->rows = total - u->v0 < 32 ? total - u->v0 : 32;
}

/* What waits for the tile unit's next products: a block's C for its stores, and rows of x
 * read in place for the exponent scan. */
typedef struct amx_pending {
    const amx_task *t;
    const amx_rows *rows;   /* NULL: nothing waits */
    int64_t         g, panel;
    const char     *c;
    const char     *scan;   /* NULL: nothing to scan */
    int64_t         scan_rows;
    int             emin, emax;
} amx_pending;

/* Runs while the tile unit works on the next block. */
static void flush_pending(void *arg)
{
    amx_pending *pd = arg;
    if (pd->rows) store_block(pd->t, pd->rows, pd->g, pd->panel, pd->c);
    pd->rows = NULL;
    if (pd->scan) {
        const amx_geom *q = pd->t->q;
        const int64_t cin = pd->t->e->p->cin_g;
        const uint16_t *v = (const uint16_t *)(const void *)pd->scan;
        if (q->row_bytes == (size_t)cin * 2) /* dense: one span */
            xconv__amx_bf16_scan(v, pd->scan_rows * cin, &pd->emin, &pd->emax);
        else
            for (int64_t i = 0; i < pd->scan_rows; i++, v += q->row_bytes / 2)
                xconv__amx_bf16_scan(v, cin, &pd->emin, &pd->emax);
    }
    pd->scan = NULL;
}

/* Whether tap tp reads x for some output of run rn. */
static bool tap_in_run(const amx_tap *tp, const amx_run *rn)
{
    for (int d = 0; d < 3; d++)
        if (tp->k[d] < rn->klo[d] || tp->k[d] > rn->khi[d]) return false;
    return true;
}

/* gather: unit u's block of outputs as rows of x per tap: tab[i * 32 + r] the row that tap
 * tl[i] (i < ntaps) reads for the block's output r, or the row of zeros where that lies in
 * the padding; *lo and *hi the lowest and the highest row of x read (NULL: none). */
static void gather_rows(const amx_task *t, const amx_unit *u, const amx_tap *const *tl, int64_t ntaps,
                        const char **tab, amx_reach *reach, const char **lo, const char **hi)
{
    const xconv_canon *p = t->e->p;
    const amx_geom *q = t->q;
    const amx_sub *sb = u->sb;
    const int64_t es = q->es;
    const char *zero = t->ws + q->xbuf;
    const char *img = (const char *)t->e->x + (p->x_off + (t->n0 + u->nl) * p->x_sn + u->g * p->cin_g) * es;
    for (int64_t i = 0; i < ntaps; i++) {
        amx_reach *a = &reach[i];
        a->off = 0;
        for (int d = 0; d < 3; d++) a->k[d] = tl[i]->k[d] * p->dil[d], a->off += a->k[d] * p->x_ss[d] * es;
    }
    const int64_t m1 = sb->m[1], m2 = sb->m[2];
    const int64_t c_lo = u->run ? u->run->c0 : 0, c_hi = u->run ? u->run->c0 + u->run->cw : m2;
    int64_t u2 = u->v0 % m2, u1 = u->v0 / m2 % m1, u0 = u->v0 / m2 / m1;
    const char *mn = NULL, *mx = NULL;
    for (int r = 0; r < u->rows; r++) {
        const int64_t p0 = u0 * p->stride[0] - p->pad_lo[0], p1 = u1 * p->stride[1] - p->pad_lo[1],
                      p2 = u2 * p->stride[2] - p->pad_lo[2];
        const int64_t base = (p0 * p->x_ss[0] + p1 * p->x_ss[1] + p2 * p->x_ss[2]) * es;
        for (int64_t i = 0; i < ntaps; i++) {
            const amx_reach *a = &reach[i];
            const bool in = (uint64_t)(p0 + a->k[0]) < (uint64_t)p->x_size[0] &&
                            (uint64_t)(p1 + a->k[1]) < (uint64_t)p->x_size[1] &&
                            (uint64_t)(p2 + a->k[2]) < (uint64_t)p->x_size[2];
            const char *row = in ? img + (base + a->off) : zero;
            tab[i * 32 + r] = row;
            if (in) mn = !mn || row < mn ? row : mn, mx = !mx || row > mx ? row : mx;
        }
        if (++u2 == c_hi) {
            u2 = c_lo;
            if (++u1 == m1) u1 = 0, u0++;
        }
    }
    *lo = mn, *hi = mx;
}

/* The units of thread `slot` (xconv__take_unit: its own range, then the last units of the
 * others). Each block's C goes to one of two staging buffers in turn, and is written to y
 * while the next block's products run on the tile unit (cpu.avx512bf16 with a dense bf16 or
 * f32 y: its blocks write y themselves). */
static void compute_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const amx_task *t = arg;
    const amx_geom *q = t->q;
    const xconv_canon *p = t->e->p;
    char *sl = t->ws + q->slots + (size_t)slot * q->slot_bytes;
    /* the block's taps (those its run leaves in), their A rows and the unit's B panels */
    const int64_t most = most_taps(q);
    const char **a = (const char **)(void *)(sl + 8192), **bt = a + most;
    const amx_tap **tl = (const amx_tap **)(void *)(bt + most);
    int64_t ntaps = 0;
    amx_thread th = {0, 0};
    amx_pending pd = {.t = t, .rows = NULL, .scan = NULL, .emin = 255, .emax = 0};
    amx_rows lists[2];
    int list = 0;
    amx_unit u = {0}; /* this unit's place, updated in place */
    const amx_sub *last_sb = NULL; /* the previous unit's block (none yet) and group */
    int64_t last_nl = -1, last_v0 = -1, last_g = -1, last_unit = -2;
    (void)begin, (void)end;
    /* gather: the block's rows per tap and each tap's reach (after the pointers above; in the
     * slot only then), and the rows of x it reads */
    const char **tab = NULL;
    amx_reach *reach = NULL;
    if (q->gather) {
        tab = (const char **)(void *)(sl + 8192 + xconv__align64((size_t)most * 3 * sizeof(void *)));
        reach = (amx_reach *)(void *)(tab + most * 32);
    }
    const char *x_lo = NULL, *x_hi = NULL;
    /* vec's blocks write dense bf16 / f32 y themselves (every row of theirs is an output) */
    const bool direct_y = q->vec && (q->store == AMX_STORE_BF16 || q->store == AMX_STORE_B32);
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    /* run: the units this thread has taken so far; a few at a time (AMX_LEAN_TAKE), as
     * lean_range */
    for (int64_t run = 0, unit = 0, taken = 0;; run++, unit++, taken--) {
        if (!taken && !xconv__take_units(t->left, t->nthreads, slot, AMX_LEAN_TAKE, &unit, &taken)) break;
        /* the next unit of a run is mostly the next panel of the same block: spare unit_at's
         * divisions (a few percent of a 1x1 layer with 64 channels) */
        if (unit == last_unit + 1 && u.panel + 1 < u.c0 + group_width(q, u.c0))
            u.panel++, u.gp++;
        else
            unit_at(t, unit, &u);
        last_unit = unit;
        const bool new_block = u.sb != last_sb || u.nl != last_nl || u.v0 != last_v0;
        const bool new_group = u.g != last_g;
        last_sb = u.sb, last_nl = u.nl, last_v0 = u.v0, last_g = u.g;
        const char *image =
            q->direct || q->gather ? (const char *)t->e->x + (p->x_off + (t->n0 + u.nl) * p->x_sn + u.g * p->cin_g) *
                                                    (int64_t)q->es
                      : t->ws + q->xbuf + (size_t)u.nl * (size_t)q->image * q->row_bytes +
                            (size_t)(u.g * q->cp * q->es);
        /* the next panels of the same block reuse its list of live rows; a new block's list
         * goes to the other buffer, as the previous one's may still wait in pd */
        if (new_block) {
            list ^= 1;
            if (q->vec)
                output_rows(t, u.sb, t->n0 + u.nl, u.v0, (int)u.rows, u.run, &lists[list]);
            else
                block_rows(t, u.sb, t->n0 + u.nl, u.v0, (int)u.rows, &lists[list]);
        }
        const amx_rows *br = &lists[list];
        /* a new block's (or group's) taps and A rows, which its next panels reuse; a run's
         * block leaves out the taps that read padding for all of its rows: x * 0 terms,
         * exact zeros for finite weights (t->skip) */
        if (new_block || new_group) {
            const amx_run *rn = t->skip ? u.run : NULL;
            ntaps = 0;
            for (int64_t i = 0; i < u.sb->ntaps; i++) {
                const amx_tap *tp = &t->taps[u.sb->tap0 + i];
                if (rn && !tap_in_run(tp, rn)) continue;
                tl[ntaps] = tp;
                a[ntaps++] = q->gather ? NULL : image + (size_t)(tp->pos + (q->vec ? 0 : u.v0)) * q->row_bytes;
            }
            if (q->gather) gather_rows(t, &u, tl, ntaps, tab, reach, &x_lo, &x_hi);
        }
        /* x read in place: the rows this block reads, once per block (its range's first
         * panel), for the exponent check, while its products run; vec's block reads the
         * virtual rows from its first output's to its last's (gather: its rows' span) */
        if (t->scan && u.panel == u.c0) {
            if (q->gather) {
                pd.scan = x_lo;
                pd.scan_rows = x_lo ? (x_hi - x_lo) / (int64_t)q->row_bytes + 1 : 0;
            } else {
                const int64_t vfirst = q->vec ? br->a_off[0] / (int64_t)q->row_bytes : u.v0;
                const int64_t vlast = q->vec ? br->a_off[br->count - 1] / (int64_t)q->row_bytes : u.v0 + u.rows - 1;
                pd.scan = image + (size_t)(vfirst + t->pos_lo) * q->row_bytes;
                pd.scan_rows = vlast - vfirst + 1 + t->pos_hi - t->pos_lo;
            }
        }
        const char *wpanel = t->blob + AMX_BLOB_HEADER + (size_t)(u.gp * q->wtaps) * q->tap_bytes;
        for (int64_t i = 0; i < ntaps; i++) bt[i] = wpanel + (size_t)tl[i]->kk * q->tap_bytes;
        char *c = sl + (size_t)(run & 1) * 4096;
        const amx_block_args k = {
            .ntaps = ntaps,
            .ksteps = q->ksteps,
            .a = a,
            .b = bt,
            .lda = q->row_bytes,
            .row_off = q->vec ? br->a_off : NULL,
            .rows = q->gather ? tab : NULL,
            .init = p->has_bias ? t->ws + q->bias + (size_t)u.gp * 2048 : NULL,
            .c = c,
            .m0 = u.rows < 16 ? (int)u.rows : 16,
            .m1 = u.rows > 16 ? (int)u.rows - 16 : 0,
            .last_pairs = q->last_pairs,
            .b_keep = q->b_keep,
            .between = flush_pending,
            .between_arg = &pd,
            .y = direct_y ? (char *)t->e->y + (u.g * p->cout_g + u.panel * 32) * p->y_sc * yes : NULL,
            .y_off = br->off,
            .cnt = p->cout_g - u.panel * 32 < 32 ? (int)(p->cout_g - u.panel * 32) : 32,
            .y_bf16 = q->store == AMX_STORE_BF16,
        };
        if (q->vec)
            xconv__amx_vec_block(&k);
        else
            xconv__amx_block(&th, q->kind, &k);
        if (!direct_y) pd.rows = br, pd.g = u.g, pd.panel = u.panel, pd.c = c;
    }
    flush_pending(&pd);
    xconv__amx_release(&th);
    if (pd.emin < t->emin[slot]) t->emin[slot] = pd.emin;
}

/* Whether every block is a run of consecutive positions of one image with consecutive
 * outputs: one tap (a 1x1 conv, or a patch projection seen as one) over x read in place,
 * every virtual row an output, y's positions at one stride, and dense y stores (vec: a dense
 * bf16 or f32 y, which its blocks write themselves). lean_range then runs the blocks without
 * row lists or deferred stores. */
static bool lean_blocks(const xconv_canon *p, const amx_geom *q)
{
    if (!q->direct || q->nsub != 1 || q->ntaps != 1 || q->store == AMX_STORE_GENERIC) return false;
    if (q->vec && q->store != AMX_STORE_BF16 && q->store != AMX_STORE_B32) return false;
    const amx_sub *sb = &q->sub[0];
    for (int d = 0; d < 3; d++)
        if (q->q[d] != sb->m[d] || sb->step[d] != 1 || sb->r[d] != 0) return false;
    return (sb->m[1] == 1 || p->y_ss[1] == sb->m[2] * p->y_ss[2]) &&
           (sb->m[0] == 1 || p->y_ss[0] == sb->m[1] * p->y_ss[1]);
}

/* compute_range for lean_blocks' problems. The tile unit runs ahead of the core only as far
 * as the reorder window reaches (about a hundred cycles of other work per block on the AMX
 * VM): work between blocks beyond that adds to the products' time rather than hiding under
 * it. So a unit here costs its pointers, the products, and the stores of its C straight
 * after them: rn50_1x1_64 bf16 on 1 thread spent 240 cycles a unit on row lists and unit
 * places and 370 on deferred stores and scan, against about 750 of tile work. */
static void lean_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const amx_task *t = arg;
    const amx_geom *q = t->q;
    const xconv_canon *p = t->e->p;
    char *c = t->ws + q->slots + (size_t)slot * q->slot_bytes;
    amx_thread th = {0, 0};
    int emin = 255, emax = 0;
    (void)begin, (void)end;
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype), es = q->es;
    const int64_t ystep = p->y_ss[2] * yes, cin = p->cin_g;
    const amx_tap *tap = &t->taps[q->sub[0].tap0];
    const bool dense_rows = q->row_bytes == (size_t)(cin * es);
    /* vec: the block's rows of x and of y at even steps (its kernel takes row tables) */
    int64_t a_off[32], y_off[32];
    for (int i = 0; i < 32; i++) a_off[i] = i * (int64_t)q->row_bytes, y_off[i] = i * ystep;
    amx_unit u = {0};
    int64_t last_unit = -2; /* no unit before the first */
    for (int64_t unit = 0, taken = 0;; unit++, taken--) {
        /* a few units at a time (AMX_LEAN_TAKE): the locked operation that takes them waits
         * for the previous block's stores to reach the cache */
        if (!taken && !xconv__take_units(t->left, t->nthreads, slot, AMX_LEAN_TAKE, &unit, &taken)) break;
        if (unit == last_unit + 1 && u.panel + 1 < u.c0 + group_width(q, u.c0))
            u.panel++, u.gp++;
        else
            unit_at(t, unit, &u);
        last_unit = unit;
        const int64_t n = t->n0 + u.nl;
        const char *a = (const char *)t->e->x + (p->x_off + n * p->x_sn + u.g * cin) * es +
                        (tap->pos + u.v0) * (int64_t)q->row_bytes;
        const char *b = t->blob + AMX_BLOB_HEADER + (size_t)(u.gp * q->wtaps + tap->kk) * q->tap_bytes;
        if (t->scan && u.panel == u.c0) { /* the block's rows of x, once, for the exponent check */
            if (dense_rows)
                xconv__amx_bf16_scan((const uint16_t *)(const void *)a, u.rows * cin, &emin, &emax);
            else
                for (int64_t i = 0; i < u.rows; i++)
                    xconv__amx_bf16_scan((const uint16_t *)(const void *)(a + i * (int64_t)q->row_bytes), cin,
                                         &emin, &emax);
        }
        const int cnt = p->cout_g - u.panel * 32 < 32 ? (int)(p->cout_g - u.panel * 32) : 32;
        char *dst = (char *)t->e->y +
                    (p->y_off + n * p->y_sn + u.v0 * p->y_ss[2] + (u.g * p->cout_g + u.panel * 32) * p->y_sc) * yes;
        const amx_block_args k = {
            .ntaps = 1,
            .ksteps = q->ksteps,
            .a = &a,
            .b = &b,
            .lda = q->row_bytes,
            .row_off = a_off,
            .init = p->has_bias ? t->ws + q->bias + (size_t)u.gp * 2048 : NULL,
            .c = c,
            .m0 = u.rows < 16 ? (int)u.rows : 16,
            .m1 = u.rows > 16 ? (int)u.rows - 16 : 0,
            .b_keep = q->b_keep,
            .y = q->vec ? dst : NULL,
            .y_off = y_off,
            .cnt = cnt,
            .y_bf16 = q->store == AMX_STORE_BF16,
        };
        if (q->vec) {
            /* a whole block of bf16 y: the straight-line kernel (rn50_1x1_256 bf16 on 2
             * threads 403 -> 426 GFLOP/s, rn50_1x1_64 387 -> 412) */
            if (u.rows == 32 && cnt == 32 && k.y_bf16)
                xconv__amx_vec_lean(a, q->row_bytes, b, q->ksteps, k.init, dst, ystep);
            else
                xconv__amx_vec_block(&k);
            continue;
        }
        xconv__amx_block(&th, q->kind, &k);
        xconv__amx_store_strided((amx_store)q->store, c, dst, ystep, (int)u.rows, cnt);
    }
    xconv__amx_release(&th);
    if (emin < t->emin[slot]) t->emin[slot] = emin;
}

/* ---------------------------------------------------------------------------------------- */
/* Execution                                                                                */
/* ---------------------------------------------------------------------------------------- */

/* Pieces [begin, end) of the copy of x: piece = (line, segment). */
static void copy_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const amx_task *t = arg;
    const amx_geom *q = t->q;
    for (int64_t i = begin; i < end; i++) {
        const int64_t line = i / q->segs, ua = i % q->segs * AMX_SEGMENT;
        xconv__amx_copy_segment(t, line, ua, ua + AMX_SEGMENT < q->q[2] ? ua + AMX_SEGMENT : q->q[2], slot);
    }
}

/* f8 x: its 256 values in bf16, for the packing and the copy. */
static void f8_values(amx_task *t)
{
    const xconv_dtype dt = t->e->p->x_dtype;
    if (dt == XCONV_DTYPE_F8E4M3 || dt == XCONV_DTYPE_F8E5M2) xconv__amx_f8_table(dt, t->f8);
}

/* The threads' scan results: the smallest of emin, the largest of emax. */
static int fold_emin(const int *emin, int count)
{
    int m = 255;
    for (int i = 0; i < count; i++) m = emin[i] < m ? emin[i] : m;
    return m;
}

static int fold_emax(const int *emax, int count)
{
    int m = 0;
    for (int i = 0; i < count; i++) m = emax[i] > m ? emax[i] : m;
    return m;
}

/* The bias as each panel's initial C rows: 16 copies of its 32 values. Returns whether a
 * float bias value is an f32 denormal; *neg_zero: whether one is -0. */
static bool bias_tiles(const xconv_exec *e, const amx_geom *q, char *dst, bool *neg_zero)
{
    const xconv_canon *p = e->p;
    const int64_t bes = (int64_t)xconv_dtype_size(p->bias_dtype);
    bool tiny = false;
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t panel = 0; panel < q->panels; panel++) {
            char *tile = dst + (size_t)(g * q->panels + panel) * 2048;
            const int64_t o0 = g * p->cout_g + panel * 32;
            const int64_t cnt = p->cout_g - panel * 32 < 32 ? p->cout_g - panel * 32 : 32;
            memset(tile, 0, 128);
            xconv__load_row(p->ct, p->bias_dtype, (const char *)e->bias + (p->b_off + o0 * p->b_s) * bes,
                            p->b_s, tile, cnt);
            for (int r = 1; r < 16; r++) memcpy(tile + r * 128, tile, 128);
            for (int64_t i = 0; i < cnt && p->ct == XCONV_CT_F32; i++) {
                uint32_t b;
                memcpy(&b, tile + i * 4, 4);
                tiny |= (b & 0x7f800000u) == 0 && (b & 0x7fffffu) != 0;
                *neg_zero |= b == 0x80000000u;
            }
        }
    return tiny;
}

static xconv_status amx_run_as(const xconv_exec *e, xconv_error *err, bool vec)
{
    const xconv_canon *p = e->p;
    amx_geom q;
    amx_geom_of(p, &q, vec);
    char *ws = e->workspace;
    int emin[256], emax[256];
    for (int i = 0; i < 256; i++) emin[i] = 255, emax[i] = 0;
    amx_task t = {.e = e, .q = &q, .ws = ws, .emin = emin, .emax = emax,
                  .blob = p->prepacked ? (const char *)e->packed : ws};
    f8_values(&t);
    if (!p->prepacked) xconv__amx_pack_all(e->ctx, &t);
    int w_head[2];
    memcpy(w_head, t.blob, sizeof w_head);
    const int w_emin = w_head[0];
    /* conv_transpose reads zeros around x for the taps that miss it, terms cpu.ref does not
     * have: they are exact zeros only while the weights are finite */
    if (p->op == XCONV_OP_CONV_TRANSPOSE && q.kind == AMX_BF16 && w_head[1] == 255) goto fallback;
    /* f16 split into two bf16 halves: an Inf or NaN has no exact halves */
    if (q.red == 4 && w_head[1] == 255) goto fallback;
    const bool scan = q.kind == AMX_BF16 && p->x_dtype == XCONV_DTYPE_BF16;
    const int threads = xconv_context_threads(e->ctx);

    /* a bias in the denormal range would be flushed from the tiles' initial value */
    bool neg_zero = false;
    if (p->has_bias && bias_tiles(e, &q, ws + q.bias, &neg_zero) && q.kind == AMX_BF16) goto fallback;
    amx_tap *taps = (amx_tap *)(void *)(ws + q.taps);
    amx_subs(p, &q, taps);
    t.taps = taps;
    /* the taps a run's blocks leave out add x = 0 times w: exact zeros for finite weights,
     * which change no sum but one that starts at a bias of -0 (-0 + +0 is +0) */
    t.skip = q.nruns > 0 && w_head[1] != 255 && !neg_zero;
    t.scan = scan && (q.direct || q.gather);
    if (q.gather) memset(ws + q.xbuf, 0, (size_t)(q.cp * q.es));
    const bool lean = lean_blocks(p, &q);
    t.pos_lo = t.pos_hi = 0;
    for (int64_t i = 0; i < q.ntaps; i++) {
        if (i == 0) t.pos_lo = t.pos_hi = taps[0].pos;
        t.pos_lo = taps[i].pos < t.pos_lo ? taps[i].pos : t.pos_lo;
        t.pos_hi = taps[i].pos > t.pos_hi ? taps[i].pos : t.pos_hi;
    }
    for (int64_t n0 = 0; n0 < p->n; n0 += q.chunk_n) {
        t.n0 = n0;
        t.nb = p->n - n0 < q.chunk_n ? p->n - n0 : q.chunk_n;
        if (!q.direct && !q.gather) {
            /* the copy in pieces of up to AMX_SEGMENT positions of a line (a plane row of
             * q2 positions), so that 1-D problems, a line or two per image, split too */
            xconv__parallel_for_slot(e->ctx, t.nb * (q.image / q.q[2]) * q.segs, copy_range, &t);
            memset(ws + q.xbuf + (size_t)t.nb * (size_t)q.image * q.row_bytes, 0, (size_t)(q.kstep * q.es));
        }
        _Alignas(64) _Atomic uint64_t left[256 * XCONV_UNITS_STRIDE]; /* threads <= 256 (amx_geom_of) */
        t.left = left, t.nthreads = threads;
        xconv__units_init(left, threads, p->groups * q.panels * t.nb * q.blocks);
        xconv__parallel_for_slot(e->ctx, threads, lean ? lean_range : compute_range, &t);
        /* x was scanned as the blocks copied or read it. When it reached bf16's denormal
         * range, or (row mode) holds an Inf or NaN that would meet the zero weights past
         * the reduction, the whole problem goes the f32 way, which rewrites every y element */
        if (scan && fold_emin(emin, threads) + w_emin < AMX_SAFE_EMIN) goto fallback;
        if (((q.row && q.kind == AMX_BF16) || q.red == 4) && fold_emax(emax, threads) == 255)
            goto fallback;
    }
    (void)err;
    return XCONV_STATUS_OK;

fallback:;
    xconv_canon p2 = *p;
    p2.prepacked = false;
    xconv_exec e2 = *e;
    e2.p = &p2;
    e2.packed = NULL;
    return xconv__engine_cpu_igemm.run(&e2, err);
}

static size_t amx_prepack_bytes_as(const xconv_canon *p, bool vec)
{
    amx_geom q;
    amx_geom_of(p, &q, vec);
    return q.blob;
}

static void amx_prepack_as(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed, bool vec)
{
    amx_geom q;
    amx_geom_of(p, &q, vec);
    const xconv_exec e = {.p = p, .ctx = ctx, .w = w};
    amx_task t = {.e = &e, .q = &q, .blob = packed};
    f8_values(&t);
    xconv__amx_pack_all(ctx, &t);
}

/* The two engines over this code: cpu.amx (tiles) and cpu.avx512bf16 (vectors, bf16). */
/* Each entry point sees a patch projection as the 1x1 conv it is (xconv__patch_view): one
 * reduction of cin * taps values per image instead of row mode's padded kernel rows. */
#define AMX_ENGINE(sym, tag, engine_name, vec)                                                 \
    static bool tag##_supports(const xconv_canon *p, const char **why_not)                     \
    {                                                                                          \
        xconv_canon v;                                                                         \
        return amx_supports_as(xconv__patch_view(p, &v), why_not, vec);                        \
    }                                                                                          \
    static size_t tag##_workspace_bytes(const xconv_canon *p)                                  \
    {                                                                                          \
        xconv_canon v;                                                                         \
        return amx_workspace_bytes_as(xconv__patch_view(p, &v), vec);                          \
    }                                                                                          \
    static double tag##_cost(const xconv_canon *p)                                             \
    {                                                                                          \
        xconv_canon v;                                                                         \
        return amx_cost_as(xconv__patch_view(p, &v), vec);                                     \
    }                                                                                          \
    static xconv_status tag##_run(const xconv_exec *e, xconv_error *err)                       \
    {                                                                                          \
        xconv_canon v;                                                                         \
        xconv_exec ev = *e;                                                                    \
        ev.p = xconv__patch_view(e->p, &v);                                                    \
        return amx_run_as(&ev, err, vec);                                                      \
    }                                                                                          \
    static size_t tag##_prepack_bytes(const xconv_canon *p)                                    \
    {                                                                                          \
        xconv_canon v;                                                                         \
        return amx_prepack_bytes_as(xconv__patch_view(p, &v), vec);                            \
    }                                                                                          \
    static void tag##_prepack(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed) \
    {                                                                                          \
        xconv_canon v;                                                                         \
        amx_prepack_as(xconv__patch_view(p, &v), ctx, w, packed, vec);                         \
    }                                                                                          \
    const xconv_engine sym = {                                                                 \
        .name = engine_name,                                                                   \
        .device = XCONV_DEVICE_CPU,                                                            \
        .supports = tag##_supports,                                                            \
        .workspace_bytes = tag##_workspace_bytes,                                              \
        .cost = tag##_cost,                                                                    \
        .run = tag##_run,                                                                      \
        .prepack_bytes = tag##_prepack_bytes,                                                  \
        .prepack = tag##_prepack,                                                              \
    };

AMX_ENGINE(xconv__engine_cpu_amx, tiles, "cpu.amx", false)
AMX_ENGINE(xconv__engine_cpu_avx512bf16, vectors, "cpu.avx512bf16", true)
