/*
 * winograd.c — the engine "cpu.winograd": f32 conv whose innermost kernel dims have 3 taps,
 * stride 1 and no dilation, by Winograd's minimal filtering F(2, 3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2015): F(2x2, 3x3) on the two innermost
 * spatial dims (16 products for a tile of 2x2 outputs instead of 36), or F(2, 3) on the
 * innermost alone (4 for 6). The other kernel dims (a 3-D kernel's depth, a 1-D conv's
 * unit dims) are summed directly, as part of each product's reduction:
 *
 *   V[e][tile][r]  = (B^T d B)[e]   d: the 4x4 (4) inputs of the tile, r = (direct tap, cin)
 *   U[e][r][co]    = (G g G^T)[e]   g: the 3x3 (3) weights of (co, r), G = [1 0 0; .5 .5 .5;
 *                                   .5 -.5 .5; 0 0 1], computed in f64 and rounded once
 *   M[e][tile][co] = sum_r V[e][tile][r] * U[e][r][co]    (cpu.igemm's f32 microkernel)
 *   Y[tile][co]    = bias[co] + (A^T M A)
 *
 * Reduced precision, so opt-in: an output's rounding error is bounded by eps times the
 * transformed values, which mix the whole 4x4 window and the whole 3x3 kernel, not by
 * eps * sum|x*w| as DESIGN.md §2 asks of direct sums (a zero weight facing a large x still
 * adds that x's rounding). The engine runs only when the caller allows reduced-precision
 * f32 math (allow_tf32), as cuda.f32_bf16x3 does. Infinities and NaN keep the direct sums'
 * IEEE results: a tile whose outputs are not all finite is summed again directly.
 * Why F(2, 3) and not F(4, 3) (36 products per 4x4 outputs, 1.8x fewer): in F(2, 3) each
 * output's products hold only the inputs of its own window (B^T's first three rows read d0..d2
 * and its last three d1..d3; A^T's rows read exactly those), so an output whose window is
 * all zero padding is exact and the rounding scales with its own window. F(4, 3)'s outputs
 * mix in inputs outside their windows that cancel only in exact arithmetic: tried, it put
 * 1e-8 where cpu.ref's padding-only outputs are 0, outside test_winograd's tolerance.
 *
 * Work units are (block of tiles, panel of nr output channels), block-major: a thread keeps
 * its block's V across the panels it runs, computes the block's 16 GEMMs per panel into M
 * (its slot), and writes each tile's outputs. Each output is computed by one unit in a fixed
 * order, so results are bit-identical for any thread count and schedule.
 * U is packed per execute into the workspace, or once at plan creation for constant
 * weights ([panel][e][r][nr], zero past cout); a plan whose U would break the workspace
 * budget without constant weights is not supported (cpu.igemm runs it).
 * Assumes: a validated canonical conv on the CPU, f32 x and compute type, groups == 1.
 */
#include "cpu/engines/winograd.h"
#include "cpu/engines/igemm.h"
#include "cpu/isa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if XCONV_X86
#define WT_VB     64
#define WT_NAME   avx512
#define WT_TARGET XCONV_TARGET_AVX512
#include "cpu/engines/winograd.tmpl.h"
#define WT_VB     32
#define WT_NAME   avx2
#define WT_TARGET XCONV_TARGET_AVX2
#include "cpu/engines/winograd.tmpl.h"
#endif
#define WT_VB     16
#define WT_NAME   generic
#define WT_TARGET
#include "cpu/engines/winograd.tmpl.h"

#define WG_V_BYTES   (512 << 10) /* V of one block of tiles (stays in L2 with its M) */
#define WG_MAX_TILES 48          /* tiles per block */
#define WG_MAX_R     16384       /* reduction per product */
#define WG_MAX_THR   256         /* more threads run static ranges of units */

size_t xconv__winograd_copy_bytes = (size_t)8 << 20;

typedef void (*wg_in_fn)(int two_d, const float *const *rows, int64_t cin, float *dst,
                         int64_t estride);
typedef bool (*wg_out_fn)(int two_d, const float *m, int64_t estride, const float *bias, int nr,
                          int cnt, float *const *out);

typedef struct wg_geom {
    const xconv_igemm_geom *g; /* the f32 microkernel */
    wg_in_fn  in;
    wg_out_fn out;
    bool    two_d;             /* F(2x2, 3x3) on dims 1, 2; else F(2, 3) on dim 2 */
    int     E;                 /* products per tile: 16 or 4 */
    int     nr;
    int64_t nd;                /* direct taps: k0, times k1 when dim 1 is direct */
    int64_t R;                 /* reduction per product: nd * cin */
    int64_t ty, tx;            /* tiles per output plane along dims 1 and 2 */
    int64_t tiles, tb, panels;
    int64_t v_es, m_es;        /* floats from one product's V (M) of a block to the next's */
    bool    copy;              /* x's channels are not dense: chunks of images are copied
                                * channels-last first (the tiles' windows overlap: a gather
                                * per tile reads each value four times, scalar) */
    bool    gather;            /* ... or, an image being too large for the copy, each input
                                * row is gathered per tile */
    int64_t chunk_n;           /* copy: images per chunk */
    bool    y_direct;          /* f32 y with dense channels: written by memcpy */
    size_t  u_bytes;           /* packed U */
    /* workspace: [U unless prepacked] [bias rows] [zero row] [copy of x] [slots] */
    size_t  bias_off, zero_off, xbuf_off, slots_off, slot_bytes, total;
    /* within a slot */
    size_t  s_v, s_m, s_stage, s_out;
} wg_geom;

static void pick_transforms(wg_geom *q)
{
#if XCONV_X86
    if (strcmp(q->g->isa, "avx512") == 0) {
        q->in = wt_in_avx512, q->out = wt_out_avx512;
        return;
    }
    if (strcmp(q->g->isa, "avx2") == 0) {
        q->in = wt_in_avx2, q->out = wt_out_avx2;
        return;
    }
#endif
    q->in = wt_in_generic, q->out = wt_out_generic;
}

/* Whether the problem's shape fits F(2, 3) (two_d: on dims 1 and 2), else why not. */
static bool shape_ok(const xconv_canon *p, bool *two_d, const char **why_not)
{
    if (p->op != XCONV_OP_CONV) return *why_not = "cpu.winograd runs conv only", false;
    if (p->ct != XCONV_CT_F32 || p->x_dtype != XCONV_DTYPE_F32)
        return *why_not = "cpu.winograd runs f32 x with f32 sums only", false;
    if (p->groups != 1) return *why_not = "cpu.winograd runs groups == 1 only", false;
    if (p->k_size[2] != 3 || p->stride[2] != 1 || p->dil[2] != 1)
        return *why_not = "cpu.winograd needs 3 taps, stride 1 and dilation 1 along the innermost dim",
               false;
    *two_d = p->k_size[1] == 3 && p->stride[1] == 1 && p->dil[1] == 1;
    return true;
}

static wg_geom wg_geom_of(const xconv_canon *p)
{
    wg_geom q;
    memset(&q, 0, sizeof q);
    const char *why;
    if (!shape_ok(p, &q.two_d, &why)) return q;
    q.g = xconv__igemm_geom(XCONV_CT_F32);
    if (!q.g) return q;
    pick_transforms(&q);
    q.E = q.two_d ? 16 : 4;
    q.nr = q.g->nr;
    q.nd = p->k_size[0] * (q.two_d ? 1 : p->k_size[1]);
    q.R = q.nd * p->cin;
    q.ty = q.two_d ? (p->y_size[1] + 1) / 2 : p->y_size[1];
    q.tx = (p->y_size[2] + 1) / 2;
    q.tiles = p->n * p->y_size[0] * q.ty * q.tx;
    const int mr = q.g->mr;
    /* all tiles in one block when their V fits (each block reads all of U once) */
    int64_t tb = (int64_t)WG_V_BYTES / ((int64_t)q.E * q.R * 4);
    if (tb > WG_MAX_TILES) tb = WG_MAX_TILES;
    if (tb < q.tiles) tb = tb / mr * mr;
    if (tb < mr) tb = mr;
    if (tb > q.tiles) tb = q.tiles;
    q.tb = tb;
    q.panels = (p->cout + q.nr - 1) / q.nr;
    const size_t image = (size_t)xconv__prod3(p->x_size) * (size_t)p->cin * 4;
    q.copy = p->x_sc != 1 && image <= xconv__winograd_copy_bytes;
    q.gather = p->x_sc != 1 && !q.copy;
    q.chunk_n = p->n > 0 ? p->n : 1; /* x read in place: one chunk */
    if (q.copy) {
        const int64_t fit = (int64_t)(xconv__winograd_copy_bytes / image);
        q.chunk_n = fit < 1 ? 1 : fit > p->n ? (p->n > 0 ? p->n : 1) : fit;
    }
    q.y_direct = p->y_dtype == XCONV_DTYPE_F32 && p->y_sc == 1;
    q.u_bytes = xconv__align64((size_t)q.panels * (size_t)q.E * (size_t)q.R * (size_t)q.nr * 4);

    /* one cache line more than the block's rows: V's 16 rows that a tile's transform writes
     * (and M's that its output transform reads) would otherwise often lie a multiple of 4
     * KiB apart, in one L1 set (12 KiB apart for 48 tiles of 64 values: wt_out at a third
     * of the kernel's time on whisper_c1) */
    q.v_es = tb * q.R + 16;
    q.m_es = tb * q.nr + 16;
    q.s_v = 0;
    q.s_m = q.s_v + xconv__align64((size_t)q.E * (size_t)q.v_es * 4);
    q.s_stage = q.s_m + xconv__align64((size_t)q.E * (size_t)q.m_es * 4);
    q.s_out = q.s_stage + (q.gather ? xconv__align64((size_t)q.E * (size_t)p->cin * 4) : 0);
    q.slot_bytes = q.s_out + xconv__align64(4 * (size_t)q.nr * 4);
    const size_t u = p->prepacked ? 0 : q.u_bytes;
    q.bias_off = u;
    q.zero_off = q.bias_off + xconv__align64((size_t)q.panels * (size_t)q.nr * 4);
    q.xbuf_off = q.zero_off + xconv__align64((size_t)p->cin * 4);
    q.slots_off = q.xbuf_off + (q.copy ? xconv__align64((size_t)q.chunk_n * image) : 0);
    const int threads = p->threads > 0 ? p->threads : 1;
    q.total = q.slots_off + q.slot_bytes * (size_t)threads;
    return q;
}

static bool wg_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) return *why_not = "cpu.winograd runs on cpu tensors only", false;
    bool two_d;
    if (!shape_ok(p, &two_d, why_not)) return false;
    if (!p->allow_reduced)
        return *why_not = "cpu.winograd rounds beyond DESIGN.md's bound for direct sums: it runs only "
                          "when the plan allows reduced-precision f32 math (allow_tf32)",
               false;
    const wg_geom q = wg_geom_of(p);
    if (!q.g) return *why_not = "no f32 microkernel", false;
    if (q.R > WG_MAX_R) return *why_not = "cpu.winograd takes reductions of at most 16384 values", false;
    /* U is counted unless it will be packed at plan creation (then total leaves it out) */
    const double budget = xconv__igemm_budget(p);
    const double u = !p->prepacked && p->constant_weights ? (double)q.u_bytes : 0.0;
    if ((double)q.total - u > budget)
        return *why_not = p->constant_weights || p->prepacked
                              ? "cpu.winograd's per-thread blocks would break the workspace budget"
                              : "cpu.winograd's transformed weights would break the workspace budget "
                                "(plan with constant_weights)",
               false;
    return true;
}

static size_t wg_workspace_bytes(const xconv_canon *p) { return wg_geom_of(p).total; }

/* cpu.igemm's cost of the same problem per multiply-add (its rate, panel fill and run
 * length) applied to the products F(2, 3) leaves, slowed like cpu.igemm's by short
 * reductions, plus the transforms (about two multiply-adds a value) and, without constant
 * weights, the packing. */
static double wg_cost(const xconv_canon *p)
{
    const wg_geom q = wg_geom_of(p);
    if (!q.g) return 1e300;
    const double per_mac = xconv__engine_cpu_igemm.cost(p) / (0.5 * p->flops);
    const double macs = (double)q.tiles * q.E * (double)q.R * (double)p->cout * (1.0 + 8.0 / (double)q.R);
    const double moved = (double)q.tiles * q.E * ((double)q.R + (double)p->cout);
    const double pack = p->constant_weights ? 0.0 : (double)q.u_bytes; /* 4 per value */
    return per_mac * (macs + 2.0 * moved + pack) + 1e4;
}

/* ---------------------------------------------------------------------------------------- */
/* Weights                                                                                  */
/* ---------------------------------------------------------------------------------------- */

typedef struct wg_pack {
    const xconv_canon *p;
    const wg_geom     *q;
    const float       *w;
    float             *u;
} wg_pack;

/* U of items [begin, end) (item = (panel, r)): G g G^T for each output channel of the panel. */
static void pack_range(void *arg, int64_t begin, int64_t end)
{
    const wg_pack *k = arg;
    const xconv_canon *p = k->p;
    const wg_geom *q = k->q;
    for (int64_t it = begin; it < end; it++) {
        const int64_t panel = it / q->R, r = it % q->R, dt = r / p->cin, ci = r % p->cin;
        const int64_t t0 = q->two_d ? dt : dt / p->k_size[1], t1 = q->two_d ? 0 : dt % p->k_size[1];
        for (int j = 0; j < q->nr; j++) {
            const int64_t co = panel * q->nr + j;
            double u[16] = {0};
            if (co < p->cout) {
                const int64_t base = p->w_off + co * p->w_so + ci * p->w_si + t0 * p->w_sk[0];
                double g[3][3];
                for (int a = 0; a < (q->two_d ? 3 : 1); a++)
                    for (int b = 0; b < 3; b++)
                        g[a][b] = k->w[base + (q->two_d ? a : t1) * p->w_sk[1] + b * p->w_sk[2]];
                if (q->two_d) {
                    double t[4][3]; /* G g */
                    for (int b = 0; b < 3; b++) {
                        t[0][b] = g[0][b];
                        t[1][b] = 0.5 * (g[0][b] + g[1][b] + g[2][b]);
                        t[2][b] = 0.5 * (g[0][b] - g[1][b] + g[2][b]);
                        t[3][b] = g[2][b];
                    }
                    for (int a = 0; a < 4; a++) { /* (G g) G^T */
                        u[4 * a + 0] = t[a][0];
                        u[4 * a + 1] = 0.5 * (t[a][0] + t[a][1] + t[a][2]);
                        u[4 * a + 2] = 0.5 * (t[a][0] - t[a][1] + t[a][2]);
                        u[4 * a + 3] = t[a][2];
                    }
                } else {
                    u[0] = g[0][0];
                    u[1] = 0.5 * (g[0][0] + g[0][1] + g[0][2]);
                    u[2] = 0.5 * (g[0][0] - g[0][1] + g[0][2]);
                    u[3] = g[0][2];
                }
            }
            for (int e = 0; e < q->E; e++)
                k->u[(((size_t)panel * (size_t)q->E + (size_t)e) * (size_t)q->R + (size_t)r) * (size_t)q->nr +
                     (size_t)j] = (float)u[e];
        }
    }
}

static void pack_weights(const xconv_canon *p, const wg_geom *q, xconv_context *ctx, const void *w,
                         void *u)
{
    wg_pack k = {.p = p, .q = q, .w = w, .u = u};
    xconv__parallel_for(ctx, q->panels * q->R, pack_range, &k);
}

/* ---------------------------------------------------------------------------------------- */
/* Tiles                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct wg_task {
    const xconv_exec *e;
    const wg_geom    *q;
    const float      *u, *bias, *zero;
    _Atomic uint64_t *left;
    int               nthreads;
    int64_t           units;
    /* the images n0 .. n0 + nb - 1 (tiles t_lo .. t_hi - 1) and where their x is read: x
     * itself, or the channels-last copy (element offsets, f32) */
    int64_t           n0, nb, t_lo, t_hi;
    const float      *src;
    int64_t           src_off, src_sn, src_sc, src_ss[3];
} wg_task;

/* A tile's place: image, output index along dim 0, first outputs along dims 1 and 2. */
typedef struct wg_at {
    int64_t n, j0, j1, j2;
} wg_at;

static wg_at tile_at(const xconv_canon *p, const wg_geom *q, int64_t t)
{
    wg_at a;
    const int64_t tx = t % q->tx;
    t /= q->tx;
    const int64_t ty = t % q->ty;
    t /= q->ty;
    a.j0 = t % p->y_size[0];
    a.n = t / p->y_size[0];
    a.j1 = q->two_d ? 2 * ty : ty;
    a.j2 = 2 * tx;
    return a;
}

/* Row pointers of the tile's inputs for direct tap dt (padding: the zero row; x with
 * strided channels: gathered into stage). */
static void input_rows(const wg_task *t, wg_at at, int64_t dt, const float **rows, float *stage)
{
    const xconv_canon *p = t->e->p;
    const wg_geom *q = t->q;
    const int64_t t0 = q->two_d ? dt : dt / p->k_size[1], t1 = q->two_d ? 0 : dt % p->k_size[1];
    const int64_t q0 = at.j0 * p->stride[0] + t0 * p->dil[0] - p->pad_lo[0];
    const int64_t q1 = q->two_d ? at.j1 - p->pad_lo[1] : at.j1 * p->stride[1] + t1 * p->dil[1] - p->pad_lo[1];
    const int64_t q2 = at.j2 - p->pad_lo[2];
    const int na = q->two_d ? 4 : 1;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < 4; b++) {
            const int k = 4 * a + b;
            const int64_t i1 = q1 + a, i2 = q2 + b;
            if (q0 < 0 || q0 >= p->x_size[0] || i1 < 0 || i1 >= p->x_size[1] || i2 < 0 ||
                i2 >= p->x_size[2]) {
                rows[k] = t->zero;
                continue;
            }
            const float *src = t->src + t->src_off + (at.n - t->n0) * t->src_sn + q0 * t->src_ss[0] +
                               i1 * t->src_ss[1] + i2 * t->src_ss[2];
            if (!q->gather) {
                rows[k] = src;
                continue;
            }
            float *dst = stage + (size_t)k * (size_t)p->cin;
            for (int64_t c = 0; c < p->cin; c++) dst[c] = src[c * t->src_sc];
            rows[k] = dst;
        }
}

/* The direct sums of output (at + (a, b)) for channels co0 .. co0 + cnt into out, as
 * cpu.ref orders them (the bias, then input channels, then taps; padding read as 0, whose
 * 0 * w is NaN for an infinite w): a tile with Inf or NaN gets IEEE's results. */
static void direct_sums(const wg_task *t, wg_at at, int a, int b, int64_t co0, int cnt, float *out)
{
    const xconv_canon *p = t->e->p;
    const float *w = t->e->w;
    const int64_t j[3] = {at.j0, at.j1 + a, at.j2 + b};
    const float *xn = t->src + t->src_off + (at.n - t->n0) * t->src_sn;
    for (int c = 0; c < cnt; c++) {
        const int64_t co = co0 + c;
        float s = t->bias[co];
        for (int64_t ci = 0; ci < p->cin; ci++)
            for (int64_t k0 = 0; k0 < p->k_size[0]; k0++)
                for (int64_t k1 = 0; k1 < p->k_size[1]; k1++)
                    for (int64_t k2 = 0; k2 < p->k_size[2]; k2++) {
                        const int64_t i0 = j[0] * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
                        const int64_t i1 = j[1] * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                        const int64_t i2 = j[2] * p->stride[2] + k2 * p->dil[2] - p->pad_lo[2];
                        const bool in = i0 >= 0 && i0 < p->x_size[0] && i1 >= 0 && i1 < p->x_size[1] &&
                                        i2 >= 0 && i2 < p->x_size[2];
                        const float xv = in ? xn[ci * t->src_sc + i0 * t->src_ss[0] + i1 * t->src_ss[1] +
                                                 i2 * t->src_ss[2]]
                                            : 0.0f;
                        s += xv * w[p->w_off + co * p->w_so + ci * p->w_si + k0 * p->w_sk[0] +
                                    k1 * p->w_sk[1] + k2 * p->w_sk[2]];
                    }
        out[c] = s;
    }
}

/* The channels-last copy of rows [begin, end) (row = (image in the chunk, q0, q1)): channel
 * by channel, so that x is read along its rows. */
static void copy_range(void *arg, int64_t begin, int64_t end)
{
    const wg_task *t = arg;
    const xconv_canon *p = t->e->p;
    const float *x = t->e->x;
    float *buf = (float *)((char *)t->e->workspace + t->q->xbuf_off);
    const int64_t X0 = p->x_size[0], X1 = p->x_size[1], X2 = p->x_size[2], C = p->cin;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q1 = r % X1, q0 = r / X1 % X0, nl = r / (X1 * X0);
        const float *src = x + p->x_off + (t->n0 + nl) * p->x_sn + q0 * p->x_ss[0] + q1 * p->x_ss[1];
        float *dst = buf + (size_t)r * (size_t)(X2 * C);
        for (int64_t c = 0; c < C; c++)
            for (int64_t q2 = 0; q2 < X2; q2++) dst[q2 * C + c] = src[c * p->x_sc + q2 * p->x_ss[2]];
    }
}

static void unit_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const wg_task *t = arg;
    const xconv_exec *e = t->e;
    const xconv_canon *p = e->p;
    const wg_geom *q = t->q;
    const int nr = q->nr;
    char *s = (char *)e->workspace + q->slots_off + q->slot_bytes * (size_t)slot;
    float *V = (float *)(s + q->s_v), *M = (float *)(s + q->s_m);
    float *stage = (float *)(s + q->s_stage), *out = (float *)(s + q->s_out);
    const size_t yes = xconv_dtype_size(p->y_dtype);
    const int nout = q->two_d ? 4 : 2;
    int64_t have = -1; /* the block whose V the slot holds */

    for (int64_t unit = begin;;) {
        int64_t u = unit++;
        if (t->left ? !xconv__take_unit(t->left, t->nthreads, slot, &u) : u >= end) break;
        const int64_t blk = u / q->panels, panel = u % q->panels;
        const int64_t t0 = t->t_lo + blk * q->tb, cnt_t = t->t_hi - t0 < q->tb ? t->t_hi - t0 : q->tb;
        if (blk != have) {
            for (int64_t ti = 0; ti < cnt_t; ti++) {
                const wg_at at = tile_at(p, q, t0 + ti);
                for (int64_t dt = 0; dt < q->nd; dt++) {
                    const float *rows[16];
                    input_rows(t, at, dt, rows, stage);
                    q->in(q->two_d, rows, p->cin, V + (size_t)ti * (size_t)q->R + (size_t)(dt * p->cin),
                          q->v_es);
                }
            }
            have = blk;
        }
        const float *ub = t->u + (size_t)panel * (size_t)q->E * (size_t)q->R * (size_t)nr;
        for (int ev = 0; ev < q->E; ev++)
            q->g->kernel_gemm(cnt_t, q->R, V + (size_t)(ev * q->v_es), (ptrdiff_t)(q->R * (int64_t)sizeof(float)),
                              ub + (size_t)ev * (size_t)q->R * (size_t)nr, NULL, M + (size_t)(ev * q->m_es),
                              (ptrdiff_t)(nr * (int64_t)sizeof(float)), nr, (int)sizeof(float));
        const int64_t co0 = panel * nr;
        const int cnt = p->cout - co0 < nr ? (int)(p->cout - co0) : nr;
        for (int64_t ti = 0; ti < cnt_t; ti++) {
            const wg_at at = tile_at(p, q, t0 + ti);
            /* each output of the tile: its place in y when y is f32 with dense channels, else
             * a row of out (stored after); outputs past y's end go to out and stay there */
            float *rows[4];
            void *dst[4];
            bool live[4];
            int nlive = 0;
            for (int k = 0; k < nout; k++) {
                const int a = q->two_d ? k / 2 : 0, b = q->two_d ? k % 2 : k;
                float *o = out + (size_t)k * (size_t)nr;
                live[k] = at.j1 + a < p->y_size[1] && at.j2 + b < p->y_size[2];
                rows[k] = o;
                if (!live[k]) continue;
                const int64_t el = p->y_off + at.n * p->y_sn + at.j0 * p->y_ss[0] +
                                   (at.j1 + a) * p->y_ss[1] + (at.j2 + b) * p->y_ss[2] + co0 * p->y_sc;
                dst[k] = (char *)e->y + el * (int64_t)yes;
                if (q->y_direct) rows[k] = dst[k];
                nlive++;
            }
            const bool bad = q->out(q->two_d, M + (size_t)ti * (size_t)nr, q->m_es, t->bias + co0, nr, cnt, rows);
            if (bad)
                for (int k = 0; k < nout; k++)
                    if (live[k]) direct_sums(t, at, q->two_d ? k / 2 : 0, q->two_d ? k % 2 : k, co0, cnt, rows[k]);
            if (q->y_direct) continue;
            int r = 0;
            for (int k = 0; k < nout; k++)
                if (live[k]) {
                    if (r != k) memcpy(out + (size_t)r * (size_t)nr, rows[k], (size_t)cnt * 4);
                    dst[r++] = dst[k];
                }
            xconv__store_rows(p->ct, p->y_dtype, out, (size_t)nr * 4, dst, p->y_sc, cnt, nlive);
        }
    }
}

static xconv_status wg_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const wg_geom q = wg_geom_of(p);
    char *ws = e->workspace;
    float *u = p->prepacked ? (float *)e->packed : (float *)ws;
    if (!p->prepacked) pack_weights(p, &q, e->ctx, e->w, u);
    float *bias = (float *)(ws + q.bias_off);
    memset(bias, 0, (size_t)q.panels * (size_t)q.nr * 4);
    if (p->has_bias)
        xconv__load_row(p->ct, p->bias_dtype,
                        (const char *)e->bias + p->b_off * (int64_t)xconv_dtype_size(p->bias_dtype),
                        p->b_s, bias, p->cout);
    memset(ws + q.zero_off, 0, (size_t)p->cin * 4);

    wg_task t = {.e = e, .q = &q, .u = u, .bias = bias, .zero = (const float *)(ws + q.zero_off)};
    _Alignas(64) _Atomic uint64_t left[WG_MAX_THR * XCONV_UNITS_STRIDE];
    t.nthreads = xconv_context_threads(e->ctx);
    const int64_t per_image = q.tiles / p->n;
    for (int64_t n0 = 0; n0 < p->n; n0 += q.chunk_n) {
        t.n0 = n0;
        t.nb = p->n - n0 < q.chunk_n ? p->n - n0 : q.chunk_n;
        t.t_lo = n0 * per_image, t.t_hi = (n0 + t.nb) * per_image;
        if (q.copy) {
            xconv__parallel_for(e->ctx, t.nb * p->x_size[0] * p->x_size[1], copy_range, &t);
            t.src = (const float *)(ws + q.xbuf_off), t.src_off = 0, t.src_sc = 1;
            t.src_ss[2] = p->cin, t.src_ss[1] = p->x_size[2] * p->cin, t.src_ss[0] = p->x_size[1] * t.src_ss[1];
            t.src_sn = p->x_size[0] * t.src_ss[0];
        } else {
            t.src = e->x, t.src_off = p->x_off, t.src_sn = p->x_sn, t.src_sc = p->x_sc;
            for (int d = 0; d < 3; d++) t.src_ss[d] = p->x_ss[d];
        }
        t.units = (t.t_hi - t.t_lo + q.tb - 1) / q.tb * q.panels;
        t.left = t.units >= INT32_MAX || t.nthreads > WG_MAX_THR ? NULL : left;
        if (t.left) xconv__units_init(left, t.nthreads, t.units);
        xconv__parallel_for_slot(e->ctx, t.left ? t.nthreads : t.units, unit_range, &t);
    }
    (void)err;
    return XCONV_STATUS_OK;
}

static size_t wg_prepack_bytes(const xconv_canon *p) { return wg_geom_of(p).u_bytes; }

static void wg_prepack(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed)
{
    const wg_geom q = wg_geom_of(p);
    pack_weights(p, &q, ctx, w, packed);
}

const xconv_engine xconv__engine_cpu_winograd = {
    .name = "cpu.winograd",
    .device = XCONV_DEVICE_CPU,
    .supports = wg_supports,
    .workspace_bytes = wg_workspace_bytes,
    .cost = wg_cost,
    .run = wg_run,
    .prepack_bytes = wg_prepack_bytes,
    .prepack = wg_prepack,
};
