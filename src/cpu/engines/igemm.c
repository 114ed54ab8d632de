/*
 * igemm.c — the engine "cpu.igemm": convolution and transposed convolution as an indirect
 * GEMM (XNNPACK's indirection, BLIS's register blocking), without a column matrix.
 *
 *   conv:           Y[pos, co] = bias[co] + sum_{run t, l} X_t[pos][l] * W_t[l][co]
 *   conv_transpose: the same over the taps that hit whole input positions, which are the
 *                   same for every output position of one stride phase (j mod s).
 *
 * A reduction run is one tap's input channels, x[n, q, g*cin_g .. +cin_g), or, when the
 * kernel's innermost dim is dense (dilation 1, one group, no padding in that dim), the
 * K2*Cin values of a whole kernel row; without padding, runs grow to whole kernel planes
 * and to the whole kernel while x holds those taps back to back (a kernel that covers x's
 * inner dims). A patch embedding (kernel == x's extent, a vision transformer's patch
 * projection) is then a plain GEMM, one run of Cin*K values per position, summed in one
 * kernel call per tile while its packed weights fit in L2. The microkernel
 * (src/cpu/ukernels/igemm.h) reads runs through pointers, so channels-last x of the compute
 * type's own dtype is used in place, and so is channels-first x whose positions are single
 * runs in (c, k) order (the weights are then packed in that order); any other x (other
 * dtypes, channels-first, strided channels, or a padded conv whose runs are short) is first
 * converted, chunk of images by chunk, into a zero-padded channels-last compute-type buffer
 * (for a channels-first patch embedding, a buffer in x's own (c, k) order). Weights are
 * packed per execute, or once at plan creation for constant weights (prepack): wp [G, panel,
 * K, cin_g, nr] (complex rows as split planes); bias per execute, likewise. y of the compute
 * type's dtype with dense channels is written in place; anything else goes through a
 * per-thread tile and xconv__store_row.
 * A conv whose padding is not materialized leaves out of each tile's calls the runs that lie
 * in the padding for all of its positions (the top and bottom output rows' kernel rows) when
 * the terms left out are exact zeros that change no sum: finite weights (flagged while they
 * are packed) and no bias of -0. Where that pays, the tiles take their positions box by box
 * (igemm_boxes.c: the interior, then the edges and corners), so that a tile's positions
 * share their taps in the padding.
 *
 * Shapes: positions tile by mr (within one stride phase of one output row for the transpose),
 * output channels by nr within a group. Work units (a block of tiles of one group and panel)
 * are split statically across threads, and a thread that runs out takes the last units of
 * another; each output element is summed by one unit in a fixed order.
 * Packing (weights, the converted x, VNNI's corrections) lives in igemm_pack.c.
 * Assumes: a validated canonical problem on the CPU.
 */
#include "cpu/engines/igemm.h"
#include "cpu/isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define IG_MAX_RUNS      4096              /* pointer arrays per thread stay small */
#define IG_CHUNK_BYTES   ((size_t)8 << 20) /* the converted-x buffer per chunk of images */
#define IG_SHORT_RUN     16                /* below this, padded runs are worth a copy */
#define IG_VNNI_RUN_COST 16.0              /* a VNNI run's own cost, in bytes of its reduction */
#define IG_PAD_SCAN      (1 << 16)         /* outputs near the ends padding_share looks at */
#define IG_KC_MIN        (64 << 10)        /* bounds on a reduction block's packed weights */
#define IG_KC_MAX        (1 << 20)
#define IG_KC_DEFAULT    (512 << 10)       /* where the L2 size is not known */
#define IG_GROUP_TILES   8                 /* tiles that share each reduction block */
#define IG_PTR_BUDGET    16384             /* pointers per thread for a group of tiles */
#define IG_MAX_THREADS   256               /* more threads run static ranges of units */

/* Per-thread bookkeeping of a group of tiles, laid out at the start of its slot. */
typedef struct ig_tile {
    int64_t runs;
    int     m;
    bool    mixed, done;
    bool    own_init;    /* vnni: its init (tinit) corrects for its own taps, not all */
    int64_t yel[8];      /* y element offset per live position, at output channel 0 */
} ig_tile;

/* The table of conv's runs (defined with the tiles below). */
typedef struct ig_run_entry ig_run_entry;

/* Per-thread scratch: a and b for each tile of a group, a1/b1 for one position's own taps or
 * an offset block, c per tile, the tiles' bookkeeping and conv's runs; the compute-type tiles
 * follow. */
static size_t ptr_bytes(const ig_geom *q);

int64_t xconv__igemm_budget_floor = (int64_t)16 << 20;

double xconv__igemm_budget(const xconv_canon *p)
{
    const double xb = (double)p->n * (double)p->cin * (double)xconv__prod3(p->x_size) *
                      (double)xconv_dtype_size(p->x_dtype);
    const double yb = (double)p->n * (double)p->cout * (double)xconv__prod3(p->y_size) *
                      (double)xconv_dtype_size(p->y_dtype);
    const double wb = (double)p->groups * (double)p->cout_g * (double)p->cin_g *
                      (double)xconv__prod3(p->k_size) * (double)xconv_dtype_size(p->x_dtype);
    const double tenth = 0.1 * (xb + yb + wb), floor = (double)xconv__igemm_budget_floor;
    return tenth > floor ? tenth : floor;
}

/* The step of n * s[0] + j0 * s[1] + j1 * s[2] + j2 * s[3] from one position to the next
 * (size[] = {N, Y0, Y1, Y2}) when it is the same for every pair of neighbours: each dim of
 * more than one index steps by the sizes and steps of those inside it. 0 when it is not,
 * or when there is only one position. */
static int64_t even_step(const int64_t size[4], const int64_t s[4])
{
    int64_t step = 0, inner = 0;
    for (int i = 3; i >= 0; i--) {
        if (size[i] == 1) continue;
        if (!inner)
            step = s[i], inner = size[i];
        else if (s[i] != step * inner)
            return 0;
        else
            inner *= size[i];
    }
    return step;
}

/* The workspace of q (lazy or not) with room for `slots` threads' scratch. */
static void ig_layout(ig_geom *q, const xconv_canon *p, size_t img_bytes, size_t slots)
{
    q->bp = p->prepacked || q->lazy ? 0 : q->blob;
    q->zero = q->bp + xconv__align64(q->row_bytes * (size_t)(p->groups * q->panels));
    q->xbuf = q->zero + xconv__align64(q->a_es * (size_t)q->len);
    /* (VNNI runs may read up to 3 bytes past the last one: a run's zero-weight tail) */
    q->slots = q->xbuf + (q->copy ? xconv__align64(img_bytes * (size_t)q->chunk_n + (q->vnni ? 4 : 0)) : 0);
    /* per thread: the C tiles, then (VNNI transpose, or conv leaving out taps) an init row per
     * tile and one spare, then (lazy) one panel of packed weights */
    q->slot_bytes = ptr_bytes(q) + xconv__align64((size_t)(q->group * q->g->mr) * q->row_bytes) +
                    (q->vnni && (p->op == XCONV_OP_CONV_TRANSPOSE || q->skip)
                         ? xconv__align64((size_t)(q->group + 1) * q->row_bytes)
                         : 0);
    q->ablk_off = q->slot_bytes; /* plain_x: a block of shifted x rows */
    if (q->plain_x) q->slot_bytes += xconv__align64((size_t)(q->group * q->g->mr * q->cin_r));
    q->panel_off = q->slot_bytes;
    if (q->lazy) q->slot_bytes += q->panel_bytes;
    q->total = q->slots + q->slot_bytes * slots;
}

/* How many threads' slots (at least 1, at most threads) fit the budget beside q's shared part. */
static int64_t runners_fit(const ig_geom *q, double budget, size_t threads)
{
    const double room = (budget - (double)q->slots) / (double)q->slot_bytes;
    return room < 1.0 ? 1 : room >= (double)threads ? (int64_t)threads : (int64_t)room;
}

/*
 * Bytes of packed weights per reduction block: half of this core's L2, so that a block stays
 * there while all tiles of a group run over it. Fewer, longer blocks spare the C tiles' round
 * trips between them: on Zen 4 (1 MiB L2), 512 KiB blocks ran the 3x3 layers of the cpu
 * suite 2-8% faster in f32 on 2 threads than the earlier fixed 64 KiB (rn50_3x3_128 212 ->
 * 226 GFLOP/s). The split does not change any sum's order, only where C is reloaded.
 */
static _Atomic long block_bytes; /* 0: the default (half of L2), else the tests' size */

static size_t kc_bytes(void)
{
    const long b = atomic_load_explicit(&block_bytes, memory_order_relaxed);
    if (b) return (size_t)b;
    const size_t half = xconv__l2_bytes() / 2;
    return !half ? IG_KC_DEFAULT : half < IG_KC_MIN ? IG_KC_MIN : half > IG_KC_MAX ? IG_KC_MAX : half;
}

void xconv__igemm_set_block_bytes(size_t bytes)
{
    atomic_store_explicit(&block_bytes, (long)bytes, memory_order_relaxed);
}

/* Taps of output u along dim d that read x. */
static int64_t taps_inside(const xconv_canon *p, int d, int64_t u)
{
    int64_t lo, hi;
    xconv__tap_span(p, d, u, &lo, &hi);
    return hi - lo + 1;
}

/* The fraction of conv's terms (output position x tap) that read padding. Per dim, only the
 * outputs before lo and from hi on can read padding (those between read x with every tap);
 * where they are more than IG_PAD_SCAN (huge padding), the answer is 1: mostly padding. */
static double padding_share(const xconv_canon *p)
{
    double inside = 1.0;
    for (int d = 0; d < 3; d++) {
        const int64_t Y = p->y_size[d], K = p->k_size[d], s = p->stride[d];
        /* every tap inside: pos >= 0 and pos + (K - 1) dil <= X - 1 */
        const int64_t a = (p->pad_lo[d] + s - 1) / s, last = p->x_size[d] - 1 - (K - 1) * p->dil[d] + p->pad_lo[d];
        const int64_t lo = a < Y ? a : Y, b = last < 0 ? 0 : last / s + 1, hi = b > Y ? Y : b < lo ? lo : b;
        if (lo + (Y - hi) > IG_PAD_SCAN) return 1.0;
        int64_t in = (hi - lo) * K;
        for (int64_t u = 0; u < lo; u++) in += taps_inside(p, d, u);
        for (int64_t u = hi; u < Y; u++) in += taps_inside(p, d, u);
        inside *= (double)in / ((double)Y * (double)K);
    }
    return 1.0 - inside;
}

static ig_geom ig_geom_of(const xconv_canon *p)
{
    ig_geom q;
    memset(&q, 0, sizeof q);
    q.g = xconv__igemm_geom(p->ct);
    const xconv_igemm_geom *narrow = xconv__igemm_geom_narrow(p->ct);
    if (q.g && narrow && p->cout_g <= narrow->nr) q.g = narrow;
    const size_t cs = xconv__ctype_size(p->ct);
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    /* 8-bit x with a y of at most 32 bits (u32 compute type): VNNI byte kernels. The x'
     * shift's correction is per tap, so conv_transpose (whose tiles sum a subset of the taps)
     * corrects each tile's init by its own taps. */
    if (p->ct == XCONV_CT_U32 && p->groups == 1 &&
        (p->x_dtype == XCONV_DTYPE_I8 || p->x_dtype == XCONV_DTYPE_U8)) {
        const bool xu = p->x_dtype == XCONV_DTYPE_I8;
        const xconv_igemm_geom *v = xconv__igemm_geom_vnni(xu), *vn = xconv__igemm_geom_vnni_narrow(xu);
        if (v && vn && p->cout_g <= vn->nr) v = vn;
        if (v) q.g = v, q.vnni = true, q.x_unsigned = xu;
    }
    const bool padded = p->pad_lo[0] || p->pad_hi[0] || p->pad_lo[1] || p->pad_hi[1] ||
                        p->pad_lo[2] || p->pad_hi[2];
    const bool direct_x = xconv__same_bits(p->ct, p->x_dtype) && p->x_sc == 1;
    /* Padding is materialized only while it stays a modest part of the buffer. */
    double pad_elems = 1.0, x_elems = (double)xconv__prod3(p->x_size);
    for (int i = 0; i < 3; i++)
        pad_elems *= (double)p->x_size[i] + (double)p->pad_lo[i] + (double)p->pad_hi[i];
    const bool pad_ok = !tr && pad_elems <= 2.0 * x_elems + 65536.0;
    q.copy = q.vnni || !direct_x || (!tr && padded && p->cin_g < IG_SHORT_RUN && pad_ok);
    /* VNNI's copy (x shifted to x') leaves the padding out, so that tiles can leave out the
     * taps in the padding (skip), where those outweigh what the padded copy's longer runs
     * (whole kernel rows) spare: i8 rn50_3x3_512 (18% padding, 512 channels) 729 -> 833
     * GOP/s and rn50_3x3_256 (9%) 788 -> 850, but rn50_3x3_128 (5%) 809 -> 776, and c3d
     * (13%, 64 channels) 837 -> 728 on 2 threads: runs of cin_g bytes cost about
     * IG_VNNI_RUN_COST bytes more each. */
    const bool vnni_skip = q.vnni && padded && p->op == XCONV_OP_CONV && p->cin_g >= IG_SHORT_RUN &&
                           padding_share(p) * (double)p->cin_g > IG_VNNI_RUN_COST;
    q.pad_copy = q.copy && pad_ok && !vnni_skip;
    const bool row_dense = q.copy ? true : p->x_ss[2] == p->cin;
    q.merge = !tr && p->dil[2] == 1 && p->groups == 1 && row_dense &&
              (q.pad_copy || (p->pad_lo[2] == 0 && p->pad_hi[2] == 0));
    /* VNNI sums groups of four bytes: each tap's channels are padded to a multiple of 4,
     * except in runs of whole kernel rows, which pad only their end (rn50_conv1's rows of
     * 7 RGB pixels: 24 bytes rather than 28). */
    q.cin_r = q.vnni && !(q.merge && p->k_size[2] > 1) ? (p->cin_g + 3) / 4 * 4 : p->cin_g;
    /* Kernel rows merge further, into whole kernel planes and then the whole kernel, while
     * the source (x, or the converted buffer: dense, cin_r channels) holds the taps of the
     * next dim out right after the ones merged so far: one run per position when the kernel
     * covers the input (a patch embedding). No padding: the buffer is then x's extent. */
    q.merged = q.merge ? 1 : 0;
    if (q.merge && !padded) {
        const int64_t ch = q.vnni ? q.cin_r : p->cin;
        const int64_t ss[2] = {q.copy ? p->x_size[1] * p->x_size[2] * ch : p->x_ss[0],
                               q.copy ? p->x_size[2] * ch : p->x_ss[1]};
        int64_t span = p->k_size[2] * q.cin_r; /* values of one run so far */
        for (int i = 1; i >= 0 && q.merged == 2 - i; i--) {
            if (p->k_size[i] > 1 && (p->dil[i] != 1 || ss[i] != span)) break;
            span *= p->k_size[i];
            q.merged++;
        }
    }
    /* Channels-first runs: when each position's reduction is one dense run of x in (c, k0,
     * k1, k2) order (x's channel stride is the kernel's size and its kernel dims are dense),
     * the weights are packed in that order and x is read in place; other dtypes whose kernel
     * covers x are converted row by row into a buffer of x's own order instead of a
     * channels-last one (a gather of cin values per pixel). */
    q.cf = false;
    if (!tr && !q.vnni && p->groups == 1 && !padded && p->x_sc != 1) {
        const int64_t kk = xconv__prod3(p->k_size);
        bool in_place = xconv__same_bits(p->ct, p->x_dtype) && (p->cin == 1 || p->x_sc == kk);
        bool covers = true;
        int64_t span = 1;
        for (int i = 2; i >= 0; i--) {
            if (p->k_size[i] > 1 && (p->dil[i] != 1 || p->x_ss[i] != span)) in_place = false;
            covers &= p->k_size[i] == p->x_size[i];
            span *= p->k_size[i];
        }
        if (in_place || (q.copy && covers)) {
            q.cf = true, q.copy = in_place ? false : q.copy, q.pad_copy = q.copy;
            q.merge = false, q.merged = 3;
        }
    }
    q.len = q.cin_r;
    q.runs = 1;
    for (int i = 0; i < 3; i++) {
        if (i >= 3 - q.merged)
            q.len *= p->k_size[i];
        else
            q.runs *= p->k_size[i];
    }
    if (q.vnni) q.len = (q.len + 3) / 4 * 4;
    q.max_runs = xconv__prod3(p->k_size);
    q.y_direct = xconv__same_bits(p->ct, p->y_dtype) && p->y_sc == 1;
    if (!q.g) return q;
    q.y_bytes = (int)xconv_dtype_size(p->y_dtype);
    q.y_fused = q.vnni && !q.y_direct && p->y_sc == 1 && q.g->kernel_y &&
                xconv__dtype_family(p->y_dtype) == XCONV_FAMILY_INT &&
                (q.y_bytes == 1 || q.y_bytes == 2 || q.y_bytes == 4);
    q.panels = (p->cout_g + q.g->nr - 1) / q.g->nr;
    q.row_bytes = (size_t)q.g->nr * cs;
    q.b_row = q.vnni ? (size_t)q.g->nr : q.row_bytes;
    q.a_es = q.vnni ? 1 : cs;
    q.group = IG_PTR_BUDGET / (q.max_runs * (q.g->mr + 1));
    q.group = q.group < 1 ? 1 : q.group > IG_GROUP_TILES ? IG_GROUP_TILES : q.group;
    q.kc = (int64_t)(kc_bytes() / q.b_row);
    if (q.kc < 8) q.kc = 8;
    q.kc -= q.kc % 4;
    /* Whole runs per block, as even as the blocks allow: 3x3 with 256 channels takes 5 + 4
     * runs rather than 8 + 1 (each block after the first reloads the C tiles). */
    q.rb = q.len <= q.kc ? q.kc / q.len : 1;
    if (q.len <= q.kc && q.runs > q.rb) {
        const int64_t blocks = (q.runs + q.rb - 1) / q.rb;
        q.rb = (q.runs + blocks - 1) / blocks;
    }
    /* VNNI 1x1 convs without padding whose x rows (dense channels) and y rows step evenly
     * over all positions read x in place: each block of rows is shifted into the thread's
     * slot just before its kernel_gemm calls, instead of a conversion pass over all of x. */
    if (q.vnni && q.g->kernel_gemm && !tr && !padded && xconv__prod3(p->k_size) == 1 &&
        p->x_sc == 1 && (q.y_fused || q.y_direct) && q.cin_r <= q.kc) {
        const int64_t size[4] = {p->n, p->y_size[0], p->y_size[1], p->y_size[2]};
        const int64_t sx[4] = {p->x_sn, p->stride[0] * p->x_ss[0], p->stride[1] * p->x_ss[1],
                               p->stride[2] * p->x_ss[2]};
        const int64_t sy[4] = {p->y_sn, p->y_ss[0], p->y_ss[1], p->y_ss[2]};
        q.plain_x = even_step(size, sx) && even_step(size, sy);
    }
    if (q.plain_x) q.copy = q.pad_copy = false;
    for (int i = 0; i < 3; i++)
        q.xp[i] = p->x_size[i] + (q.pad_copy ? p->pad_lo[i] + p->pad_hi[i] : 0);
    const size_t img_bytes = (size_t)xconv__prod3(q.xp) * (size_t)(q.vnni ? q.cin_r : p->cin) * q.a_es;
    q.chunk_n = p->n;
    if (q.copy) {
        int64_t fit = (int64_t)(IG_CHUNK_BYTES / (img_bytes ? img_bytes : 1));
        q.chunk_n = fit < 1 ? 1 : fit < p->n ? fit : p->n;
    }
    q.wp = 0;
    q.psum = xconv__align64(q.b_row * (size_t)(p->groups * q.panels * q.runs * q.len));
    q.blob = q.psum + (q.vnni ? xconv__align64(sizeof(uint32_t) * (size_t)(q.panels * xconv__prod3(p->k_size) * q.g->nr)) : 0);
    /* Taps in the padding for all of a tile's positions are left out of its calls (the top
     * and bottom output rows of a padded 3x3 conv: a fifth of rn50_3x3_512's work at 7x7) */
    q.skip = !tr && !q.cf && !q.plain_x && padded && !q.pad_copy;
    q.nonfinite = q.blob;
    if (q.skip) q.blob += 64;
    const size_t threads = (size_t)(p->threads > 0 ? p->threads : 1);
    q.panel_bytes = xconv__align64(q.b_row * (size_t)(q.runs * q.len));
    const double budget = xconv__igemm_budget(p);
    ig_layout(&q, p, img_bytes, threads);
    /* VNNI's weights are bytes and its corrections need every panel: never lazy. Otherwise,
     * when all the packed weights break the budget, each thread packs the panel it works on
     * (lazy), unless that takes more than all of them. And when the threads' scratch breaks
     * it still (many threads, large panels), only as many threads run as have room. */
    if (!p->prepacked && !q.vnni && (double)q.total > budget) {
        ig_geom lz = q;
        lz.lazy = true;
        ig_layout(&lz, p, img_bytes, threads);
        if (q.panel_bytes * threads < q.blob || (double)lz.total <= budget) {
            q = lz;
        } else { /* all threads' panels take more than the blob: fewer runners, lazily */
            const int64_t fit = runners_fit(&lz, budget, threads);
            ig_layout(&lz, p, img_bytes, (size_t)fit);
            lz.runners = fit < (int64_t)threads ? fit : 0;
            if (lz.total < q.total) q = lz;
        }
    }
    if ((double)q.total > budget && threads > 1 && !q.runners) {
        const int64_t fit = runners_fit(&q, budget, threads);
        if (fit < (int64_t)threads) ig_layout(&q, p, img_bytes, (size_t)fit), q.runners = fit;
    }
    if (q.lazy) q.skip = false; /* panels packed apart: no flag over all the weights */
    return q;
}

static bool ig_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) return *why_not = "cpu.igemm runs on cpu tensors only", false;
    if (!xconv__igemm_geom(p->ct)) return *why_not = "no microkernel for this compute type", false;
    if (xconv__prod3(p->k_size) > IG_MAX_RUNS)
        return *why_not = "cpu.igemm takes kernels of at most 4096 taps", false;
    return true;
}

static size_t ig_workspace_bytes(const xconv_canon *p) { return ig_geom_of(p).total; }

/* Multiply-adds at the kernel's rate, slowed by short runs and narrow panels, plus the
 * conversion traffic of a copied x. */
static double ig_cost(const xconv_canon *p)
{
    const ig_geom q = ig_geom_of(p);
    if (!q.g) return 1e300;
    double rate = q.vnni ? 0.04 : strcmp(q.g->isa, "avx512") == 0 ? 0.12 : strcmp(q.g->isa, "avx2") == 0 ? 0.3 : 0.8;
    double fill = (double)p->cout_g / (double)(q.panels * q.g->nr);
    double per_run = 1.0 + 8.0 / (double)q.len;
    double moved = q.copy ? (double)p->n * (double)p->cin * (double)xconv__prod3(q.xp) : 0.0;
    return p->flops * rate * per_run / fill + 4.0 * moved + 1e4;
}

/* ---------------------------------------------------------------------------------------- */
/* The GEMM over tiles                                                                      */
/* ---------------------------------------------------------------------------------------- */

/* The address of x[n, q, channel c] for a position inside x (chunk-relative image nl). */
static const char *x_at(const ig_task *t, int64_t nl, const int64_t qpos[3], int64_t c)
{
    const int64_t el = t->src_off + nl * t->src_sn + qpos[0] * t->src_ss[0] + qpos[1] * t->src_ss[1] +
                       qpos[2] * t->src_ss[2] + c;
    return t->src + el * t->src_es;
}

/* Points the A side at the chunk of images starting at t->n0. */
static void set_source(ig_task *t)
{
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    if (q->copy) {
        const int64_t ch = q->vnni ? q->cin_r : p->cin;
        t->src = (const char *)t->e->workspace + q->xbuf;
        t->src_es = (int64_t)q->a_es;
        t->src_off = 0;
        t->src_ss[2] = q->cf ? 1 : ch;
        t->src_ss[1] = q->xp[2] * t->src_ss[2];
        t->src_ss[0] = q->xp[1] * t->src_ss[1];
        t->src_sn = q->xp[0] * t->src_ss[0] * (q->cf ? ch : 1);
    } else {
        t->src = (const char *)t->e->x;
        t->src_es = (int64_t)xconv_dtype_size(p->x_dtype);
        t->src_off = p->x_off + t->n0 * p->x_sn;
        t->src_sn = p->x_sn;
        memcpy(t->src_ss, p->x_ss, sizeof t->src_ss);
    }
}

/* Where the next tile starts: a thread walks tiles in order, so stepping a cursor spares
 * the divisions and most multiplications (tens of cycles each: as much as a 1x1 tile's
 * arithmetic). Offsets are in elements; xb is formed in wrapping unsigned arithmetic since
 * positions whose taps reach into the padding may lie far outside x. */
typedef struct ig_cursor {
    int      b;          /* the box (t->box) that holds it */
    int64_t  first;      /* the position (of the chunk's sequence) (n, j0, j1, j2) describe;
                          * -1: none */
    int64_t  n, j0, j1, j2;
    uint64_t xb;         /* x (chunk-relative source) element of tap 0, channel 0 */
    int64_t  yb;         /* y element of output channel 0 */
    uint64_t dx;         /* xb's step along j2 */
} ig_cursor;

/* Per-thread table of conv's runs, the same for every tile: x offset, kernel coordinates
 * (for the bounds checks) and the run's weights within a panel. */
struct ig_run_entry {
    uint64_t off;
    int64_t  d0, d1, d2;
    size_t   w;
};

static size_t ptr_bytes(const ig_geom *q)
{
    const size_t mr = (size_t)q->g->mr, runs = (size_t)q->max_runs, gt = (size_t)q->group;
    return xconv__align64(sizeof(void *) * (gt * runs * (mr + 1) + runs * (mr + 1) + 2 * gt * mr) +
                   sizeof(ig_tile) * gt + sizeof(ig_run_entry) * runs +
                   (q->skip ? sizeof(int32_t) * gt * runs : 0));
}

static void cursor_bases(const ig_task *t, ig_cursor *c)
{
    const xconv_canon *p = t->e->p;
    const bool pc = t->q->pad_copy;
    const int64_t q0 = c->j0 * p->stride[0] - (pc ? 0 : p->pad_lo[0]),
                  q1 = c->j1 * p->stride[1] - (pc ? 0 : p->pad_lo[1]),
                  q2 = c->j2 * p->stride[2] - (pc ? 0 : p->pad_lo[2]);
    c->xb = (uint64_t)t->src_off + (uint64_t)c->n * (uint64_t)t->src_sn +
            (uint64_t)q0 * (uint64_t)t->src_ss[0] + (uint64_t)q1 * (uint64_t)t->src_ss[1] +
            (uint64_t)q2 * (uint64_t)t->src_ss[2];
    c->yb = p->y_off + (t->n0 + c->n) * p->y_sn + c->j0 * p->y_ss[0] + c->j1 * p->y_ss[1] +
            c->j2 * p->y_ss[2];
}

static void cursor_seek(const ig_task *t, ig_cursor *c, int64_t first)
{
    const xconv_canon *p = t->e->p;
    int b = t->nbox - 1;
    while (b > 0 && first < t->box[b].pos0) b--;
    const ig_box *bx = &t->box[b];
    const int64_t w0 = bx->hi[0] - bx->lo[0], w1 = bx->hi[1] - bx->lo[1], w2 = bx->hi[2] - bx->lo[2];
    const int64_t i = first - bx->pos0;
    c->b = b;
    c->first = first;
    c->n = i / (w0 * w1 * w2);
    c->j0 = bx->lo[0] + i / (w1 * w2) % w0;
    c->j1 = bx->lo[1] + i / w2 % w1;
    c->j2 = bx->lo[2] + i % w2;
    c->dx = (uint64_t)p->stride[2] * (uint64_t)t->src_ss[2];
    cursor_bases(t, c);
}

/* The next position of the sequence: the next one of the box in raster order, or the first
 * of the next box. */
static inline void cursor_step(const ig_task *t, ig_cursor *c)
{
    const xconv_canon *p = t->e->p;
    const ig_box *bx = &t->box[c->b];
    c->first++;
    if (++c->j2 < bx->hi[2]) {
        c->xb += c->dx;
        c->yb += p->y_ss[2];
        return;
    }
    if (c->first == bx->pos0 + bx->count) {
        if (c->b + 1 < t->nbox) cursor_seek(t, c, c->first);
        return;
    }
    c->j2 = bx->lo[2];
    if (++c->j1 == bx->hi[1] && (c->j1 = bx->lo[1], ++c->j0 == bx->hi[0])) c->j0 = bx->lo[0], c->n++;
    cursor_bases(t, c);
}

/* Fills the table of runs; returns whether taps may fall in the padding (x not padded in
 * the buffer: an unpadded conv's taps all lie inside x). */
static bool conv_runs(const ig_task *t, ig_run_entry *rt)
{
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const int64_t k0n = q->merged >= 3 ? 1 : p->k_size[0], k1n = q->merged >= 2 ? 1 : p->k_size[1],
                  k2n = q->merged >= 1 ? 1 : p->k_size[2];
    int64_t r = 0;
    for (int64_t k0 = 0; k0 < k0n; k0++)
        for (int64_t k1 = 0; k1 < k1n; k1++)
            for (int64_t k2 = 0; k2 < k2n; k2++, r++) {
                rt[r].d0 = k0 * p->dil[0], rt[r].d1 = k1 * p->dil[1], rt[r].d2 = k2 * p->dil[2];
                rt[r].off = (uint64_t)rt[r].d0 * (uint64_t)t->src_ss[0] +
                            (uint64_t)rt[r].d1 * (uint64_t)t->src_ss[1] +
                            (uint64_t)rt[r].d2 * (uint64_t)t->src_ss[2];
                rt[r].w = q->b_row * (size_t)(r * q->len);
            }
    bool padded = false;
    for (int i = 0; i < 3; i++) padded |= p->pad_lo[i] || p->pad_hi[i];
    return padded && !q->pad_copy;
}

/* a[r * mr + i] = base[i] + run r's offset, with mr a constant in each case, so that the
 * loop over rows becomes vector adds: rn50_conv1's 7 runs x 6 rows per tile (runs of 21
 * values) as scalar code cost 3% of the conv (f32, one thread, 84.6% -> 87.1% of the FMA
 * peak). */
static inline void fill_runs(const void **a, const char *const *base, const ig_run_entry *rt,
                             int64_t runs, int64_t es, int mr)
{
#define IG_FILL(M)                                                                    \
    for (int64_t r = 0; r < runs; r++) {                                              \
        const int64_t off = (int64_t)rt[r].off * es;                                  \
        for (int i = 0; i < (M); i++) a[r * (M) + i] = base[i] + off;                 \
    }
    switch (mr) {
    case 4: IG_FILL(4) break;
    case 6: IG_FILL(6) break;
    case 8: IG_FILL(8) break;
    default: IG_FILL(mr)
    }
#undef IG_FILL
}

/* Fills the A pointers of one conv tile (every run, mr rows) and its live rows' y element
 * offsets at output channel 0; returns the number of runs. Rows past the last position and
 * taps in the padding read the zero buffer. With sel (t->skip_taps, check set), a run that
 * lies in the padding for every live row is left out: the runs kept are packed to the
 * front, in order, and sel[r] names the r-th kept run. */
static int64_t conv_tile(const ig_task *t, int64_t g, int64_t tile, const ig_run_entry *rt,
                         bool check, int32_t *sel, const void **a, int *m, int64_t *yel,
                         ig_cursor *cur)
{
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const int mr = q->g->mr;
    /* the interior's tiles stop at its end; the others run on across the boxes after it */
    const ig_box *last = &t->box[t->nbox - 1];
    const bool inner = tile < t->inner_tiles;
    const int64_t first = inner ? tile * mr : t->box[0].count * (t->inner_tiles > 0) + (tile - t->inner_tiles) * mr;
    const int64_t total = inner ? t->box[0].count : last->pos0 + last->count;
    const char *zero = (const char *)t->e->workspace + q->zero;
    if (cur->first != first) cursor_seek(t, cur, first);
    uint64_t xb[8];
    int64_t q0[8], q1[8], q2[8];
    int live = 0;
    for (int i = 0; i < mr && cur->first < total; i++, live++) {
        xb[i] = cur->xb + (uint64_t)(g * p->cin_g);
        yel[i] = cur->yb;
        if (check) {
            q0[i] = cur->j0 * p->stride[0] - p->pad_lo[0];
            q1[i] = cur->j1 * p->stride[1] - p->pad_lo[1];
            q2[i] = cur->j2 * p->stride[2] - p->pad_lo[2];
        }
        cursor_step(t, cur);
    }
    *m = live;
    const char *src = t->src;
    const int64_t es = t->src_es;
    /* A full tile whose rows read every tap inside x (the interior's tiles of a conv with
     * its padding left out of x: the runs go in kernel order, so the last reaches furthest
     * along every dim) takes the plain pointers without a check per run and row: f32 3x3
     * layers of 64-512 channels and c3d, one thread, 2-5% (A/B runs of one binary) */
    bool inside = live == mr;
    if (check && inside) {
        const ig_run_entry *far = &rt[q->runs - 1];
        for (int i = 0; i < mr; i++)
            inside &= q0[i] >= 0 && q0[i] + far->d0 < p->x_size[0] && q1[i] >= 0 &&
                      q1[i] + far->d1 < p->x_size[1] && q2[i] >= 0 && q2[i] + far->d2 < p->x_size[2];
    }
    if (inside) {
        /* every tap inside x: row i's first tap (an address in x) plus each run's offset */
        const char *base[8];
        for (int i = 0; i < mr; i++) base[i] = src + (int64_t)xb[i] * es;
        fill_runs(a, base, rt, q->runs, es, mr);
        if (sel)
            for (int64_t r = 0; r < q->runs; r++) sel[r] = (int32_t)r;
        return q->runs;
    }
    int64_t kept = 0;
    for (int64_t r = 0; r < q->runs; r++) {
        bool any = false;
        for (int i = 0; i < mr; i++) {
            bool in = i < live;
            if (in && check)
                in = (uint64_t)(q0[i] + rt[r].d0) < (uint64_t)p->x_size[0] &&
                     (uint64_t)(q1[i] + rt[r].d1) < (uint64_t)p->x_size[1] &&
                     (uint64_t)(q2[i] + rt[r].d2) < (uint64_t)p->x_size[2];
            a[kept * mr + i] = in ? src + (int64_t)(xb[i] + rt[r].off) * es : zero;
            any |= in;
        }
        if (!sel)
            kept++;
        else if (any)
            sel[kept++] = (int32_t)r;
    }
    return kept;
}

/* Fills the pointer arrays of one transpose tile (one stride phase of one output row). */
static int64_t transpose_tile(const ig_task *t, int64_t g, int64_t tile, const char *wpanel,
                              const void **a, const void **b, int64_t pos[][4], int *m,
                              bool *mixed)
{
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const int mr = q->g->mr;
    const int64_t s2 = p->stride[2];
    const int64_t mt = tile % t->tiles_per_phase, r2 = tile / t->tiles_per_phase % t->tiles_phases,
                  row = tile / (t->tiles_per_phase * t->tiles_phases);
    const int64_t nl = row / (p->y_size[0] * p->y_size[1]), j0 = row / p->y_size[1] % p->y_size[0],
                  j1 = row % p->y_size[1];
    const int64_t in_phase = r2 < p->y_size[2] ? (p->y_size[2] - r2 + s2 - 1) / s2 : 0;
    const char *zero = (const char *)t->e->workspace + q->zero;
    *m = 0;
    for (int i = 0; i < mr; i++) {
        const int64_t idx = mt * mr + i;
        const bool live = idx < in_phase;
        *m += live;
        pos[i][0] = live ? nl : -1;
        pos[i][1] = j0;
        pos[i][2] = j1;
        pos[i][3] = live ? r2 + idx * s2 : 0;
    }
    *mixed = false;
    if (*m == 0) return 0;
    int64_t r = 0;
    for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
        const int64_t e0 = j0 + p->pad_lo[0] - k0 * p->dil[0];
        if (e0 < 0 || e0 % p->stride[0] || e0 / p->stride[0] >= p->x_size[0]) continue;
        for (int64_t k1 = 0; k1 < p->k_size[1]; k1++) {
            const int64_t e1 = j1 + p->pad_lo[1] - k1 * p->dil[1];
            if (e1 < 0 || e1 % p->stride[1] || e1 / p->stride[1] >= p->x_size[1]) continue;
            for (int64_t k2 = 0; k2 < p->k_size[2]; k2++) {
                /* the phase fixes (j2 + lo2 - k2*t2) mod s2 for every position of the tile */
                const int64_t e2r = r2 + p->pad_lo[2] - k2 * p->dil[2];
                if (((e2r % s2) + s2) % s2 != 0) continue;
                const int64_t k = (k0 * p->k_size[1] + k1) * p->k_size[2] + k2;
                b[r] = wpanel + q->b_row * (size_t)(k * q->cin_r);
                for (int i = 0; i < mr; i++) {
                    const int64_t e2 = pos[i][3] + p->pad_lo[2] - k2 * p->dil[2];
                    const int64_t qp[3] = {e0 / p->stride[0], e1 / p->stride[1], e2 >= 0 ? e2 / s2 : -1};
                    const bool in = pos[i][0] >= 0 && e2 >= 0 && qp[2] < p->x_size[2];
                    a[r * mr + i] = in ? x_at(t, nl, qp, g * p->cin_g) : zero;
                    *mixed |= pos[i][0] >= 0 && !in;
                }
                r++;
            }
        }
    }
    return r;
}

/* out[j] += sign * the x' shift's correction of tap k of the panel (sign 1 or -1, wrapping). */
static void add_correction(const ig_task *t, int64_t panel, int64_t k, uint32_t sign, uint32_t *out)
{
    const ig_geom *q = t->q;
    const int nr = q->g->nr;
    const uint32_t *ps = (const uint32_t *)(t->blob + q->psum) + (panel * xconv__prod3(t->e->p->k_size) + k) * nr;
    const uint32_t scale = sign * (q->x_unsigned ? (uint32_t)0 - 128u : 128u);
    for (int j = 0; j < nr; j++) out[j] += scale * ps[j];
}

/* VNNI conv_transpose: init for a call summing runs b[0..runs) = the panel's bias row plus
 * the x' shift's correction over exactly those taps (b[r] locates tap k in the panel). */
static void tap_init(const ig_task *t, const char *wpanel, const void *base, int64_t panel,
                     const void *const *b, int64_t runs, int64_t bstep, uint32_t *out)
{
    const ig_geom *q = t->q;
    memcpy(out, base, sizeof(uint32_t) * (size_t)q->g->nr);
    for (int64_t r = 0; r < runs; r++)
        add_correction(t, panel, (int64_t)(((const char *)b[r * bstep] - wpanel) / (ptrdiff_t)(q->b_row * (size_t)q->cin_r)),
                       1u, out);
}

/* VNNI conv, a tile that leaves out runs (skip): init for a call summing only the runs
 * sel[0..kept) (ascending) = the panel's init, which corrects for every tap, less the x'
 * shift's correction of each tap of a run left out (tap k lies in run k / per_run: merged
 * kernel dims are the innermost). */
static void skip_init(const ig_task *t, const void *base, int64_t panel, const int32_t *sel, int64_t kept,
                      uint32_t *out)
{
    const int64_t kk = xconv__prod3(t->e->p->k_size), per_run = kk / t->q->runs;
    memcpy(out, base, sizeof(uint32_t) * (size_t)t->q->g->nr);
    for (int64_t k = 0, i = 0; k < kk; k++) {
        const int64_t r = k / per_run;
        while (i < kept && sel[i] < r) i++;
        if (i == kept || sel[i] != r) add_correction(t, panel, k, (uint32_t)0 - 1u, out);
    }
}

/* Whether this chunk's conv tiles run as a plain GEMM (t->plain_a, t->plain_y): tiles with
 * one run of one call each (1x1 kernels, merged 1-D ones, patch embeddings), no bounds
 * checks, and y written by the kernel (VNNI's fused narrow y, or y of the compute type in
 * place). Spares the per-tile pointer arrays: about a tenth of rn50_1x1_64's time in f32
 * (64 channels: a short reduction per tile). */
static void plain_steps(ig_task *t)
{
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    bool padded = false;
    for (int i = 0; i < 3; i++) padded |= p->pad_lo[i] || p->pad_hi[i];
    t->plain_a = t->plain_y = 0;
    if (!q->g->kernel_gemm || p->op != XCONV_OP_CONV || q->runs != 1 ||
        (padded && !q->pad_copy) || q->len > q->kc || !(q->y_fused || q->y_direct))
        return;
    const int64_t size[4] = {t->nb, p->y_size[0], p->y_size[1], p->y_size[2]};
    const int64_t sa[4] = {t->src_sn, p->stride[0] * t->src_ss[0], p->stride[1] * t->src_ss[1],
                           p->stride[2] * t->src_ss[2]};
    const int64_t sy[4] = {p->y_sn, p->y_ss[0], p->y_ss[1], p->y_ss[2]};
    t->plain_a = even_step(size, sa);
    t->plain_y = even_step(size, sy);
    if (!t->plain_a || !t->plain_y) t->plain_a = t->plain_y = 0;
}

/* One kernel call over c's rows; the last call of a tile's reduction stores a fused y into
 * the rows yr instead (the sums never make a round trip through an int32 tile). */
static inline void ig_call(const ig_geom *q, int64_t ntaps, int64_t len, const void *const *a,
                           const void *const *b, const void *init, void *const *c,
                           void *const *yr, int m, int n, int accumulate, bool last)
{
    if (last && q->y_fused)
        q->g->kernel_y(ntaps, len, a, b, init, c, m, n, accumulate, yr, q->y_bytes);
    else
        q->g->kernel(ntaps, len, a, b, init, c, m, n, accumulate);
}

/* The positions of a mixed transpose tile, grouped by the taps they hit: each group sums its
 * own taps in one call (no blocking). */
static void run_mixed(const ig_task *t, const ig_tile *tl, const void **a, const void **b,
                      const void **a1, const void **b1, const void *init, void **c, void **yr,
                      int cnt, const char *wpanel, int64_t panel, uint32_t *own_init)
{
    const ig_geom *q = t->q;
    const int mr = q->g->mr;
    const char *zero = (const char *)t->e->workspace + q->zero;
    /* Some taps miss x for some positions. conv_transpose has no term there (not even
     * 0 * w, which is NaN for an infinite w), so each position sums only its own taps. Only
     * tiles at the edges of x come here, and there most positions hit every tap: a call per
     * group rather than per position (a call costs a whole tile whatever its rows). */
    bool grouped[8] = {false};
    for (int i = 0; i < tl->m; i++) {
        if (grouped[i]) continue;
        int rows[8], nrows = 0;
        for (int j = i; j < tl->m; j++) {
            bool same = !grouped[j];
            for (int64_t r = 0; same && r < tl->runs; r++)
                same = (a[r * mr + j] == zero) == (a[r * mr + i] == zero);
            if (same) rows[nrows++] = j, grouped[j] = true;
        }
        int64_t own = 0;
        for (int64_t r = 0; r < tl->runs; r++) {
            if (a[r * mr + i] == zero) continue;
            for (int k = 0; k < mr; k++) a1[own * mr + k] = k < nrows ? a[r * mr + rows[k]] : zero;
            b1[own++] = b[r];
        }
        void *c1[8], *y1[8];
        for (int k = 0; k < nrows; k++) c1[k] = c[rows[k]], y1[k] = yr[rows[k]];
        if (q->vnni) tap_init(t, wpanel, init, panel, b1, own, 1, own_init);
        ig_call(q, own, q->len, a1, b1, q->vnni ? own_init : init, c1, y1, nrows, cnt, 0, true);
    }
}

/*
 * A work unit is a block of up to q->group consecutive tiles of one (group, panel); a thread
 * takes units with xconv__take_unit (or runs its static range) and walks each unit's reduction in
 * blocks whose packed weights stay in L2 (q->kc values: several whole runs, or a slice of one
 * long run), running every tile of the unit on a block before moving on. Each C element still
 * sums its terms in run order, then channel order, whatever the grouping: results do not
 * depend on the thread count.
 */
static void gemm_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const ig_task *t = arg;
    const xconv_exec *e = t->e;
    const xconv_canon *p = e->p;
    const ig_geom *q = t->q;
    const int mr = q->g->mr;
    const size_t yes = xconv_dtype_size(p->y_dtype);
    const int64_t gt = q->group, mx = q->max_runs;
    char *scratch = (char *)e->workspace + q->slots + q->slot_bytes * (size_t)slot;
    const void **a = (const void **)scratch;         /* [gt][mx * mr] */
    const void **b = a + gt * mx * mr;                /* [gt][mx] */
    const void **a1 = b + gt * mx;                    /* [mx * mr] */
    const void **b1 = a1 + mx * mr;                   /* [mx] */
    void **c = (void **)(b1 + mx);                    /* [gt][mr] */
    void **yr = c + gt * mr;                          /* [gt][mr]: y rows for y_fused */
    ig_tile *tiles = (ig_tile *)(yr + gt * mr);
    ig_run_entry *runs = (ig_run_entry *)(tiles + gt); /* [mx], conv */
    int32_t *sel = (int32_t *)(runs + mx);            /* [gt][mx], q->skip: each tile's runs */
    char *ctile = scratch + ptr_bytes(q);             /* [gt][mr] rows */
    uint32_t *tinit = (uint32_t *)(ctile + xconv__align64((size_t)(gt * mr) * q->row_bytes)); /* [gt + 1] */
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    int64_t pos[8][4];
    int64_t packed_gp = -1;
    ig_cursor cursor = {.first = -1};
    const bool check = !tr && conv_runs(t, runs);
    /* conv's tiles all sum the same runs, one b array serving them, unless each tile leaves
     * out its own runs in the padding */
    const bool skip = check && t->skip_taps;
    const int64_t bstep = tr || skip ? mx : 0;

    const int64_t gps = p->groups * q->panels;
    int64_t built_blk = -1, built_g = -1, shifted_blk = -1;
    for (int64_t unit = begin;;) {
        int64_t u = unit++;
        if (t->left ? !xconv__take_unit(t->left, t->nthreads, slot, &u) : u >= end) break;
        const int64_t blk = t->tile_major ? u / gps : u % t->blocks;
        const int64_t gp = t->tile_major ? u % gps : u / t->blocks;
        const int64_t tile0 = t->tiles * blk / t->blocks;
        const int64_t count = t->tiles * (blk + 1) / t->blocks - tile0;
        const int64_t panel = gp % q->panels, g = gp / q->panels;
        const char *wpanel = t->blob + q->wp +
                             q->b_row * (size_t)(gp * q->runs * q->len);
        if (q->lazy) {
            /* this thread's copy of panel gp, packed when the thread reaches it */
            char *own = scratch + q->panel_off;
            const int64_t kk = xconv__prod3(p->k_size);
            if (packed_gp != gp) {
                ig_task lt = *t;
                lt.blob = own;
                lt.item0 = gp * kk;
                xconv__igemm_pack_weights_range(&lt, gp * kk, (gp + 1) * kk, slot);
                packed_gp = gp;
            }
            wpanel = own;
        }
        const void *init = p->has_bias || q->vnni ? (const char *)e->workspace + q->bp + q->row_bytes * (size_t)gp
                                                  : NULL;
        const int64_t co = g * p->cout_g + panel * q->g->nr;
        const int cnt = (int)(p->cout_g - panel * q->g->nr < q->g->nr ? p->cout_g - panel * q->g->nr : q->g->nr);
        int64_t longest = 0;
        if (t->plain_a) { /* the unit's positions [first, end) in one call */
            const int64_t total = t->nb * xconv__prod3(p->y_size), first = tile0 * mr;
            const int64_t mt = (tile0 + count) * mr < total ? count * mr : total - first;
            const char *a0 = t->src + (t->src_off + first * t->plain_a + g * p->cin_g) * t->src_es;
            ptrdiff_t lda = (ptrdiff_t)(t->plain_a * t->src_es);
            if (q->plain_x) { /* x in place: this block's rows shifted once for its panels */
                unsigned char *ablk = (unsigned char *)scratch + q->ablk_off;
                if (shifted_blk != blk)
                    xconv__igemm_shift_rows(ablk, q->cin_r, a0, lda, mt, p->cin);
                shifted_blk = blk;
                a0 = (const char *)ablk, lda = (ptrdiff_t)q->cin_r;
            }
            char *y0 = (char *)e->y +
                       (p->y_off + t->n0 * p->y_sn + first * t->plain_y + co * p->y_sc) * (int64_t)yes;
            q->g->kernel_gemm(mt, q->len, a0, lda, wpanel, init, y0,
                              (ptrdiff_t)(t->plain_y * (int64_t)yes), cnt, q->y_bytes);
            continue;
        }

        if (!tr && !skip)
            for (int64_t r = 0; r < q->runs; r++) b[r] = wpanel + runs[r].w;
        /* conv tiles depend only on the block and the group: the next panel of the same block
         * (tile-major units) keeps their A pointers and rows */
        const bool reuse = !tr && blk == built_blk && g == built_g;
        built_blk = tr ? -1 : blk, built_g = g;
        for (int64_t ti = 0; ti < count; ti++) {
            ig_tile *tl = &tiles[ti];
            const void **at = a + ti * mx * mr, **bt = b + ti * bstep;
            void **ct = c + ti * mr, **yt = yr + ti * mr;
            tl->mixed = false;
            tl->own_init = false;
            if (tr) {
                tl->runs =
                    transpose_tile(t, g, tile0 + ti, wpanel, at, bt, pos, &tl->m, &tl->mixed);
                for (int i = 0; i < tl->m; i++)
                    tl->yel[i] = p->y_off + (t->n0 + pos[i][0]) * p->y_sn + pos[i][1] * p->y_ss[0] +
                                 pos[i][2] * p->y_ss[1] + pos[i][3] * p->y_ss[2];
            } else {
                int32_t *ts = skip ? sel + ti * mx : NULL;
                if (!reuse)
                    tl->runs = conv_tile(t, g, tile0 + ti, runs, check, ts, at, &tl->m, tl->yel, &cursor);
                if (ts) /* this panel's weights of the tile's own runs */
                    for (int64_t r = 0; r < tl->runs; r++) bt[r] = wpanel + runs[ts[r]].w;
                if (ts && q->vnni && tl->runs < q->runs) {
                    skip_init(t, init, panel, ts, tl->runs, tinit + ti * q->g->nr);
                    tl->own_init = true;
                }
            }
            tl->done = tl->m == 0;
            /* live positions come first in a tile, so rows i < m are exactly the live ones */
            for (int i = 0; i < mr; i++) {
                char *yi =
                    i < tl->m ? (char *)e->y + (tl->yel[i] + co * p->y_sc) * (int64_t)yes : NULL;
                ct[i] = i >= tl->m ? NULL
                        : q->y_direct ? yi
                                      : ctile + (size_t)(ti * mr + i) * q->row_bytes;
                yt[i] = yi;
            }
            if (tl->done) continue;
            if (tl->mixed || tl->runs == 0) {
                if (tl->mixed)
                    run_mixed(t, tl, at, bt, a1, b1, init, ct, yt, cnt, wpanel, panel,
                              tinit + gt * q->g->nr);
                else
                    ig_call(q, 0, q->len, at, bt, tl->own_init ? (const void *)(tinit + ti * q->g->nr) : init, ct, yt,
                            tl->m, cnt, 0, true);
                tl->done = true;
            } else if (q->vnni && tr) {
                tap_init(t, wpanel, init, panel, bt, tl->runs, 1, tinit + ti * q->g->nr);
                tl->own_init = true;
            }
            if (!tl->done && tl->runs > longest) longest = tl->runs;
        }

        if (q->len <= q->kc) {
            const int64_t rb = q->rb;
            for (int64_t r0 = 0; r0 < longest; r0 += rb)
                for (int64_t ti = 0; ti < count; ti++) {
                    const ig_tile *tl = &tiles[ti];
                    if (tl->done || r0 >= tl->runs) continue;
                    const int64_t nt = tl->runs - r0 < rb ? tl->runs - r0 : rb;
                    ig_call(q, nt, q->len, a + ti * mx * mr + r0 * mr, b + ti * bstep + r0,
                            tl->own_init ? (const void *)(tinit + ti * q->g->nr) : init,
                            c + ti * mr, yr + ti * mr, tl->m, cnt, r0 > 0, r0 + nt == tl->runs);
                }
        } else {
            for (int64_t r = 0; r < longest; r++)
                for (int64_t c0 = 0; c0 < q->len; c0 += q->kc) {
                    const int64_t kl = q->len - c0 < q->kc ? q->len - c0 : q->kc;
                    for (int64_t ti = 0; ti < count; ti++) {
                        const ig_tile *tl = &tiles[ti];
                        if (tl->done || r >= tl->runs) continue;
                        const void **at = a + ti * mx * mr + r * mr;
                        for (int i = 0; i < mr; i++) a1[i] = (const char *)at[i] + (size_t)c0 * q->a_es;
                        b1[0] = (const char *)b[ti * bstep + r] + (size_t)c0 * q->b_row;
                        ig_call(q, 1, kl, a1, b1,
                                tl->own_init ? (const void *)(tinit + ti * q->g->nr) : init,
                                c + ti * mr, yr + ti * mr, tl->m, cnt, r > 0 || c0 > 0,
                                r == tl->runs - 1 && c0 + kl == q->len);
                    }
                }
        }

        if (!q->y_direct && !q->y_fused)
            for (int64_t ti = 0; ti < count; ti++) {
                void *rows[8];
                for (int i = 0; i < tiles[ti].m; i++)
                    rows[i] = (char *)e->y + (tiles[ti].yel[i] + co * p->y_sc) * (int64_t)yes;
                xconv__store_rows(p->ct, p->y_dtype, ctile + (size_t)(ti * mr) * q->row_bytes, q->row_bytes,
                                  rows, p->y_sc, cnt, tiles[ti].m);
            }
    }
}


/* Fewer runners than threads (q->runners): runner i takes units [units * i / runners,
 * units * (i + 1) / runners) in slot i (a thread's own index may exceed the slots sized). */
static void runner_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const ig_task *t = arg;
    const int64_t runners = t->q->runners;
    (void)slot;
    for (int64_t i = begin; i < end; i++)
        gemm_range(arg, t->units * i / runners, t->units * (i + 1) / runners, (int)i);
}

static xconv_status ig_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const ig_geom q = ig_geom_of(p);
    const size_t cs = xconv__ctype_size(p->ct);
    char *ws = e->workspace;
    ig_task t = {.e = e, .q = &q, .blob = p->prepacked ? (char *)e->packed : ws};

    if (!p->prepacked && !q.lazy) xconv__igemm_pack_all_weights(e->ctx, &t);
    t.skip_taps = q.skip && atomic_load_explicit((_Atomic uint32_t *)(t.blob + q.nonfinite),
                                                 memory_order_relaxed) == 0;
    if (q.vnni) {
        xconv__igemm_vnni_init(e, &q, t.blob);
    } else if (p->has_bias) {
        _Alignas(64) unsigned char tmp[64 * 16];
        for (int64_t g = 0; g < p->groups; g++)
            for (int64_t panel = 0; panel < q.panels; panel++) {
                const int64_t o0 = g * p->cout_g + panel * q.g->nr;
                const int64_t cnt = p->cout_g - panel * q.g->nr < q.g->nr ? p->cout_g - panel * q.g->nr : q.g->nr;
                xconv__load_row(p->ct, p->bias_dtype,
                                (const char *)e->bias + (p->b_off + o0 * p->b_s) * (int64_t)xconv_dtype_size(p->bias_dtype),
                                p->b_s, tmp, cnt);
                /* a sum that starts at a bias of -0 stays -0 over zero terms, which adding
                 * a left-out +0 would make +0 */
                if (t.skip_taps && xconv__igemm_any_lane(p->ct, tmp, (size_t)cnt * cs, IG_NEG_ZERO))
                    t.skip_taps = false;
                xconv__igemm_put_row(&q, tmp, ws + q.bp + q.row_bytes * (size_t)(g * q.panels + panel), cnt, cs);
            }
    }
    memset(ws + q.zero, q.vnni ? 0x80 : 0, q.a_es * (size_t)q.len); /* vnni: x' of x = 0 */

    for (int64_t n0 = 0; n0 < p->n; n0 += q.chunk_n) {
        t.n0 = n0;
        t.nb = p->n - n0 < q.chunk_n ? p->n - n0 : q.chunk_n;
        if (q.copy)
            xconv__parallel_for_slot(e->ctx, t.nb * q.xp[0] * q.xp[1], xconv__igemm_convert_x_range, &t);
        set_source(&t);
        plain_steps(&t);
        if (p->op == XCONV_OP_CONV) {
            t.tiles = xconv__igemm_conv_boxes(&t);
        } else {
            /* phases past Y2 are empty: a stride longer than the output adds no tiles */
            const int64_t phases = p->stride[2] < p->y_size[2] ? p->stride[2] : p->y_size[2];
            const int64_t per_phase = (p->y_size[2] + p->stride[2] - 1) / p->stride[2];
            t.tiles_per_phase = (per_phase + q.g->mr - 1) / q.g->mr;
            t.tiles_phases = phases;
            t.tiles = t.nb * p->y_size[0] * p->y_size[1] * phases * t.tiles_per_phase;
        }
        /* Panel-major units split the output channels between threads: each thread streams
         * x and keeps only its panels' weights hot. When the weights are the smaller operand,
         * tile-major units split the positions instead, so that each thread reads mostly its
         * own part of x and y. */
        const double w_bytes =
            (double)q.b_row * (double)(p->groups * q.panels * q.runs * q.len);
        const double x_bytes = (double)q.a_es * (double)(t.nb * xconv__prod3(p->x_size) * p->cin);
        t.tile_major = !q.lazy && w_bytes <= x_bytes;
        t.blocks = (t.tiles + q.group - 1) / q.group;
        t.units = t.blocks * p->groups * q.panels;
        /* Each thread starts on its static share of the units and then takes the last units
         * of the others; each output element is still summed by one unit in a fixed order.
         * Lazy packing keeps static ranges only, so that a thread's units share panels. */
        _Alignas(64) _Atomic uint64_t left[IG_MAX_THREADS * XCONV_UNITS_STRIDE];
        t.nthreads = xconv_context_threads(e->ctx);
        t.left = q.lazy || q.runners || t.units >= INT32_MAX || t.nthreads > IG_MAX_THREADS ? NULL : left;
        if (t.left) xconv__units_init(left, t.nthreads, t.units);
        if (q.runners > 0 && q.runners < t.nthreads)
            xconv__parallel_for_slot(e->ctx, q.runners, runner_range, &t);
        else
            xconv__parallel_for_slot(e->ctx, t.left ? t.nthreads : t.units, gemm_range, &t);
    }
    (void)err;
    return XCONV_STATUS_OK;
}

static size_t ig_prepack_bytes(const xconv_canon *p) { return ig_geom_of(p).blob; }

static void ig_prepack(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed)
{
    const ig_geom q = ig_geom_of(p);
    const xconv_exec e = {.p = p, .ctx = ctx, .w = w};
    ig_task t = {.e = &e, .q = &q, .blob = packed};
    xconv__igemm_pack_all_weights(ctx, &t);
}

const xconv_engine xconv__engine_cpu_igemm = {
    .name = "cpu.igemm",
    .device = XCONV_DEVICE_CPU,
    .supports = ig_supports,
    .workspace_bytes = ig_workspace_bytes,
    .cost = ig_cost,
    .run = ig_run,
    .prepack_bytes = ig_prepack_bytes,
    .prepack = ig_prepack,
};
