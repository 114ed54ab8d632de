/*
 * igemm_boxes.c — the order in which cpu.igemm's conv tiles take output positions, so that
 * the taps a tile leaves out (those in the padding for all of its positions, igemm.c's skip)
 * are as many as the padding allows.
 *
 * In raster order a tile of mr positions mixes output rows, and a tap is left out only when
 * every position of the tile reads it in the padding: at 7x7 (rn50_3x3_512) that spares the
 * top and bottom rows' kernel rows of two tiles out of nine, while a fifth of the layer's
 * multiply-adds read padding. Here each spatial dim's outputs split into ranges that read the
 * same taps of that dim (a padded 3x3 kernel: the first index, the interior, the last), and
 * their products are boxes of positions that read the same taps. The interior box (every tap)
 * is tiled on its own; the edge boxes follow one another in a snake order over the ranges
 * (top-left, top, top-right, right, left, bottom-left, bottom, bottom-right in 2-D), so that a
 * tile that runs from one box into the next joins boxes that share most of their padding
 * taps, and corners of one position ride with an edge instead of taking a tile of their own
 * (a tile of one row costs about a third of a full one: its weights come from L2 for few
 * multiply-adds). The layout is used only where its cost, counted in rows times taps,
 * undercuts raster order's by IG_BOX_GAIN and the padding is at least IG_BOX_MIN_PAD of all
 * pairs: below that (rn50_3x3_64 at 56x56, 2.4%) the model's gain did not show up in time,
 * boxes were 7% slower there. Every tile keeps its own taps either way, so the sums are the
 * same.
 */
#include "cpu/engines/igemm.h"

#include <string.h>

#define IG_BOX_GAIN    0.98 /* boxes where their estimated cost is at most this of raster's */
#define IG_BOX_MIN_PAD 0.03 /* and at least this share of (position, tap) pairs is padding */
#define IG_RANGES      8    /* ranges of equal taps per dim, at most */
#define IG_SIM_BUDGET  4e6  /* tiles x taps x rows the estimate may look at (else raster) */

/* Each dim's ranges of equal taps: [lo, hi) outputs reading taps kmin..kmax of the dim
 * (kmin > kmax: none, the outputs read only padding). */
typedef struct tap_range {
    int64_t lo, hi, kmin, kmax;
} tap_range;

/* The ranges of spatial dim i, in order; returns their count, or 0 when there are more than
 * IG_RANGES. */
static int dim_ranges(const xconv_canon *p, int i, tap_range *r)
{
    int n = 0;
    for (int64_t j = 0; j < p->y_size[i]; j++) {
        int64_t kmin, kmax;
        xconv__tap_span(p, i, j, &kmin, &kmax);
        if (n && kmin == r[n - 1].kmin && kmax == r[n - 1].kmax) {
            r[n - 1].hi = j + 1;
            continue;
        }
        if (n == IG_RANGES) return 0;
        r[n++] = (tap_range){j, j + 1, kmin, kmax};
    }
    return n;
}

typedef struct layout {
    const xconv_canon *p;
    tap_range r[3][IG_RANGES];
    int       nr[3];
    int64_t   taps;
} layout;

/* The range of dim i that output j lies in. */
static int range_of(const layout *L, int i, int64_t j)
{
    int k = 0;
    while (j >= L->r[i][k].hi) k++;
    return k;
}

/* Taps read by at least one of the classes cls[0..n) (range indices per dim). */
static int64_t union_taps(const layout *L, const int (*cls)[3], int n)
{
    const xconv_canon *p = L->p;
    int64_t count = 0;
    if (n == 1) { /* most tiles: one class, its ranges' product (the walk below took 0.9% of
                   * f32 c3d's time per execute, before the threads start) */
        count = 1;
        for (int i = 0; i < 3; i++) {
            const tap_range *rg = &L->r[i][cls[0][i]];
            count *= rg->kmax >= rg->kmin ? rg->kmax - rg->kmin + 1 : 0;
        }
        return count;
    }
    for (int64_t k0 = 0; k0 < p->k_size[0]; k0++)
        for (int64_t k1 = 0; k1 < p->k_size[1]; k1++)
            for (int64_t k2 = 0; k2 < p->k_size[2]; k2++) {
                const int64_t k[3] = {k0, k1, k2};
                bool any = false;
                for (int c = 0; c < n && !any; c++) {
                    bool in = true;
                    for (int i = 0; i < 3; i++) {
                        const tap_range *rg = &L->r[i][cls[c][i]];
                        in &= k[i] >= rg->kmin && k[i] <= rg->kmax;
                    }
                    any = in;
                }
                count += any;
            }
    return count;
}

/* A tile of m rows in rows of kernel time: a full tile runs the whole register block, a
 * short one of at most 4 rows a body of its own rows (XI_ROWS in src/cpu/ukernels/igemm.c);
 * each call costs about a row more. */
static double tile_rows(int m, int mr) { return (double)((m < mr && m <= 4 ? m : mr) + 1); }

/* A sequence of the chunk's positions: the boxes in order, or raster order. */
typedef struct seq {
    const layout *L;
    const ig_box *box; /* NULL: raster order over the whole output */
    int           nbox;
} seq;

/* The class (range per dim) of position i of s. */
static void class_at(const seq *s, int64_t i, int cls[3])
{
    const xconv_canon *p = s->L->p;
    int64_t lo[3] = {0, 0, 0}, w[3] = {p->y_size[0], p->y_size[1], p->y_size[2]};
    if (s->box) {
        int b = s->nbox - 1;
        while (b > 0 && i < s->box[b].pos0) b--;
        i -= s->box[b].pos0;
        for (int d = 0; d < 3; d++) lo[d] = s->box[b].lo[d], w[d] = s->box[b].hi[d] - s->box[b].lo[d];
    }
    const int64_t j[3] = {lo[0] + i / (w[1] * w[2]) % w[0], lo[1] + i / w[2] % w[1], lo[2] + i % w[2]};
    for (int d = 0; d < 3; d++) cls[d] = range_of(s->L, d, j[d]);
}

/* The cost of tiling positions [first, end) of s by mr: each tile's rows times the taps its
 * positions read (their classes' union), as a fraction of all taps. */
static double seq_cost(const seq *s, int64_t first, int64_t end, int mr)
{
    double cost = 0.0;
    for (int64_t t0 = first; t0 < end; t0 += mr) {
        const int m = end - t0 < mr ? (int)(end - t0) : mr;
        int cls[8][3], n = 0;
        for (int i = 0; i < m; i++) {
            int c[3];
            class_at(s, t0 + i, c);
            bool seen = false;
            for (int k = 0; k < n && !seen; k++)
                seen = cls[k][0] == c[0] && cls[k][1] == c[1] && cls[k][2] == c[2];
            if (!seen) memcpy(cls[n++], c, sizeof c);
        }
        cost += tile_rows(m, mr) * (double)union_taps(s->L, (const int(*)[3])cls, n) / (double)s->L->taps;
    }
    return cost;
}

static int64_t one_box(ig_task *t, int64_t all, int mr)
{
    const xconv_canon *p = t->e->p;
    t->nbox = 1;
    t->box[0] = (ig_box){.lo = {0, 0, 0}, .hi = {p->y_size[0], p->y_size[1], p->y_size[2]}, .pos0 = 0, .count = all};
    t->inner_tiles = 0;
    return (all + mr - 1) / mr;
}

int64_t xconv__igemm_conv_boxes(ig_task *t)
{
    const xconv_canon *p = t->e->p;
    const int mr = t->q->g->mr;
    const int64_t all = t->nb * xconv__prod3(p->y_size);
    int64_t tiles = one_box(t, all, mr);
    if (!t->skip_taps || p->op != XCONV_OP_CONV) return tiles;
    layout L = {.p = p, .taps = xconv__prod3(p->k_size)};
    /* the ranges and both estimates look at every output index and tile: bounded work per
     * execute, and none where too little of the work is padding (IG_BOX_MIN_PAD) */
    if ((double)all * (double)L.taps * 2.0 > IG_SIM_BUDGET) return tiles;
    for (int i = 0; i < 3; i++)
        if (!(L.nr[i] = dim_ranges(p, i, L.r[i]))) return tiles;
    if (L.nr[0] * L.nr[1] * L.nr[2] > IG_MAX_BOXES || L.nr[0] * L.nr[1] * L.nr[2] == 1) return tiles;
    double padding = 0.0; /* (position, tap) pairs in the padding, as a fraction */
    for (int a = 0; a < L.nr[0]; a++)
        for (int b = 0; b < L.nr[1]; b++)
            for (int c = 0; c < L.nr[2]; c++) {
                const tap_range *r[3] = {&L.r[0][a], &L.r[1][b], &L.r[2][c]};
                double kept = 1.0, share = 1.0;
                for (int i = 0; i < 3; i++) {
                    kept *= (double)(r[i]->kmax - r[i]->kmin + 1) / (double)p->k_size[i];
                    share *= (double)(r[i]->hi - r[i]->lo) / (double)p->y_size[i];
                }
                padding += share * (1.0 - kept);
            }
    if (padding < IG_BOX_MIN_PAD) return tiles;

    /* the interior: the box whose ranges read every tap of their dims, when there is one */
    int inner[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < L.nr[i]; k++)
            if (L.r[i][k].kmin == 0 && L.r[i][k].kmax == p->k_size[i] - 1) inner[i] = k;
    const bool has_inner = inner[0] >= 0 && inner[1] >= 0 && inner[2] >= 0;
    ig_box box[IG_MAX_BOXES];
    int n = 0;
    int64_t pos = 0;
#define ADD_BOX(a, b, c)                                                                          \
    do {                                                                                          \
        const tap_range *r0 = &L.r[0][a], *r1 = &L.r[1][b], *r2 = &L.r[2][c];                     \
        const int64_t cnt = t->nb * (r0->hi - r0->lo) * (r1->hi - r1->lo) * (r2->hi - r2->lo);     \
        box[n++] = (ig_box){.lo = {r0->lo, r1->lo, r2->lo}, .hi = {r0->hi, r1->hi, r2->hi},         \
                            .pos0 = pos, .count = cnt};                                            \
        pos += cnt;                                                                               \
    } while (0)
    if (has_inner) ADD_BOX(inner[0], inner[1], inner[2]);
    /* the others in snake order: each dim's direction turns where the dim outside it steps */
    int64_t line = 0;
    for (int a = 0; a < L.nr[0]; a++)
        for (int bb = 0; bb < L.nr[1]; bb++, line++) {
            const int b = a % 2 ? L.nr[1] - 1 - bb : bb;
            for (int cc = 0; cc < L.nr[2]; cc++) {
                const int c = line % 2 ? L.nr[2] - 1 - cc : cc;
                if (has_inner && a == inner[0] && b == inner[1] && c == inner[2]) continue;
                ADD_BOX(a, b, c);
            }
        }
#undef ADD_BOX
    const int64_t inner_count = has_inner ? box[0].count : 0;
    const int64_t inner_tiles = (inner_count + mr - 1) / mr;
    const seq raster = {&L, NULL, 0}, boxes = {&L, box, n};
    const double cost = seq_cost(&boxes, 0, inner_count, mr) + seq_cost(&boxes, inner_count, all, mr);
    if (cost > IG_BOX_GAIN * seq_cost(&raster, 0, all, mr)) return tiles;
    memcpy(t->box, box, sizeof(ig_box) * (size_t)n);
    t->nbox = n;
    t->inner_tiles = inner_tiles;
    return inner_tiles + (all - inner_count + mr - 1) / mr;
}
