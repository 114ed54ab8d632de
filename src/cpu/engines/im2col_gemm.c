/*
 * im2col_gemm.c — the engine "cpu.im2col": convolution as GEMM in the compute type, for
 * every dtype, both ops, any stride, dilation, padding, output padding and groups.
 *
 * conv, per group g (columns run over (n, output position) flattened, in tiles):
 *   A[o, (i,k)]      = w[g, o, i, k]                                   [cout_g x cin_g*KK]
 *   B[(i,k), (n,p)]  = x[n, g*cin_g + i, p*s + k*t - lo]   (0 outside) [cin_g*KK x tile]
 *   y[n, g*cout_g + o, p] = store(A*B + bias)
 *
 * conv_transpose, per group g and image n (columns over x positions, in tiles):
 *   A[(o,k), i]      = w[g, o, i, k]                                   [cout_g*KK x cin_g]
 *   B[i, q]          = x[n, g*cin_g + i, q]                            [cin_g x tile]
 *   C = A*B, then col2im: acc[o, q*s + k*t - lo] += C[(o,k), q]   (inside y only)
 *   y[n, g*cout_g + o, :] = store(bias + acc)
 *
 * Storage dtypes become the compute type while packing (xconv__load_row) and return once in
 * the store (xconv__store_row), so one GEMM per compute type serves all 16 dtypes. The
 * workspace holds packed A and B tiles, the C tile and (transpose) the accumulator of the
 * output channels in flight; tiles are sized from the problem alone to stay near 16 MiB,
 * beyond it only by what one output channel needs.
 *
 * Determinism: every phase splits its output among threads (panels, blocks of C, rows of y)
 * and each sum runs in a fixed order (k blocks of the GEMM, then tiles in increasing order,
 * each in increasing k), so results are bit-identical for any thread count.
 *
 * Assumes: a validated canonical problem on the CPU (internal.h).
 */
#include "cpu/engines/gemm.h"

#include <string.h>

/* The workspace target. Mutable only so tests can shrink it (before planning) to drive
 * every tiling path with small problems. */
int64_t xconv__im2col_budget_bytes = (int64_t)16 << 20;
#define BUDGET_BYTES xconv__im2col_budget_bytes

static int64_t align64(int64_t v) { return (v + 63) & ~(int64_t)63; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* ---------------------------------------------------------------------------------------- */
/* Tiles and workspace                                                                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct tiles {
    const xconv_gemm_geom *g;
    int64_t kk;           /* prod(K) */
    int64_t kred;         /* GEMM reduction length: cin_g*KK (conv) or cin_g (transpose) */
    int64_t m_ch;         /* output channels per tile */
    int64_t cols;         /* GEMM columns per tile */
    int64_t a, b, c, acc; /* byte offsets in the workspace */
    int64_t total;
} tiles;

static tiles tiles_of(const xconv_canon *p)
{
    tiles t;
    t.g = xconv__gemm_geom(p->ct);
    const int64_t cs = (int64_t)t.g->elem_bytes, mr = t.g->mr, nr = t.g->nr;
    t.kk = xconv__prod3(p->k_size);
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    /* Rows of A and accumulator values per output channel. */
    const int64_t rows_per_ch = tr ? t.kk : 1;
    const int64_t acc_per_ch = tr ? xconv__prod3(p->y_size) : 0;
    const int64_t all_cols = tr ? xconv__prod3(p->x_size) : p->n * xconv__prod3(p->y_size);
    t.kred = tr ? p->cin_g : p->cin_g * t.kk;

    /* All output channels of a group if their A and accumulator fit half the budget. */
    const int64_t per_ch = (rows_per_ch * t.kred + acc_per_ch) * cs;
    t.m_ch = min64(p->cout_g, max64(1, BUDGET_BYTES / 2 / max64(per_ch, 1)));
    if (!tr && t.m_ch < p->cout_g) t.m_ch = min64(p->cout_g, max64(mr, t.m_ch / mr * mr));
    const int64_t a_bytes = round_up(t.m_ch * rows_per_ch, mr) * t.kred * cs;
    const int64_t acc_bytes = t.m_ch * acc_per_ch * cs;

    /* The rest for a B tile and its C tile, in whole panels of nr columns. */
    const int64_t left = BUDGET_BYTES - a_bytes - acc_bytes;
    const int64_t per_col = (t.kred + t.m_ch * rows_per_ch) * cs;
    t.cols = max64(nr, left / per_col / nr * nr);
    t.cols = min64(t.cols, round_up(max64(all_cols, 1), nr));

    t.a = 0;
    t.b = align64(a_bytes);
    t.c = t.b + align64(round_up(t.cols, nr) * t.kred * cs);
    t.acc = t.c + align64(t.m_ch * rows_per_ch * t.cols * cs);
    t.total = t.acc + align64(acc_bytes);
    return t;
}

/* ---------------------------------------------------------------------------------------- */
/* Packing                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Loads count values of dtype dt (element stride `stride`) as compute type into a panel
 * slot of `width`, at column/row offset j. */
static void load_slot(const xconv_gemm_geom *g, xconv_dtype dt, const void *src, int64_t stride,
                      void *slot, int width, int64_t j, int64_t count)
{
    char *dst = (char *)slot + j * (int64_t)g->comp_bytes;
    stride = xconv__run_stride(stride, count);
    if (xconv__gemm_direct(g)) {
        xconv__load_row(g->ct, dt, src, stride, dst, count);
        return;
    }
    unsigned char tmp[32 * sizeof(xconv_c128)];
    const int64_t es = (int64_t)xconv_dtype_size(dt);
    for (int64_t done = 0; done < count; done += 32) {
        const int64_t n = min64(32, count - done);
        xconv__load_row(g->ct, dt, (const char *)src + done * stride * es, stride, tmp, n);
        xconv__gemm_put(g, width, tmp, dst + done * (int64_t)g->comp_bytes, n);
    }
}

static void zero_slot(const xconv_gemm_geom *g, void *slot, int width, int64_t j, int64_t count)
{
    if (count > 0) xconv__gemm_zero(g, width, (char *)slot + j * (int64_t)g->comp_bytes, count);
}

/* One run of columns along the innermost spatial dim: image n, position (y0, y1, y2..+len). */
typedef struct seg { int64_t n, y0, y1, y2, len; } seg;

/* The run that starts at flattened column p (over (n, positions of size[3])), at most
 * `left` long. */
static seg seg_at(const int64_t size[3], int64_t p, int64_t left)
{
    const int64_t l = xconv__prod3(size), pos = p % l;
    seg s = {p / l, pos / (size[1] * size[2]), pos / size[2] % size[1], pos % size[2], 0};
    s.len = min64(left, size[2] - s.y2);
    return s;
}

typedef struct pack_job {
    const xconv_canon *p;
    const tiles *t;
    const char *src;       /* x or w buffer start */
    int64_t g, m0, rows;   /* group, first output channel, rows of A (pack A) */
    int64_t c0, cols;      /* first flattened column, columns (pack B) */
    char *dst;
} pack_job;

/* A for conv: rows o, reduction (i, k); a panel's rows are one strided run of w. */
static void pack_a_conv(void *arg, int64_t begin, int64_t end)
{
    const pack_job *J = (const pack_job *)arg;
    const xconv_canon *p = J->p;
    const xconv_gemm_geom *g = J->t->g;
    const int64_t wes = (int64_t)xconv_dtype_size(p->x_dtype), *K = p->k_size;
    for (int64_t panel = begin; panel < end; panel++) {
        const int64_t r0 = panel * g->mr, cnt = min64(g->mr, J->rows - r0);
        for (int64_t kk = 0; kk < J->t->kred; kk++) {
            const int64_t i = kk / J->t->kk, k = kk % J->t->kk;
            const int64_t el = p->w_off + J->g * p->w_sg + (J->m0 + r0) * p->w_so + i * p->w_si +
                               k / (K[1] * K[2]) * p->w_sk[0] + k / K[2] % K[1] * p->w_sk[1] +
                               k % K[2] * p->w_sk[2];
            void *slot = xconv__gemm_a_slot(g, J->dst, J->t->kred, r0, kk);
            load_slot(g, p->x_dtype, J->src + el * wes, p->w_so, slot, g->mr, 0, cnt);
            zero_slot(g, slot, g->mr, cnt, g->mr - cnt);
        }
    }
}

/* A for conv_transpose: rows (o, k), reduction i; runs of rows follow k2. */
static void pack_a_transpose(void *arg, int64_t begin, int64_t end)
{
    const pack_job *J = (const pack_job *)arg;
    const xconv_canon *p = J->p;
    const xconv_gemm_geom *g = J->t->g;
    const int64_t wes = (int64_t)xconv_dtype_size(p->x_dtype), *K = p->k_size, kk_n = J->t->kk;
    for (int64_t panel = begin; panel < end; panel++) {
        const int64_t r0 = panel * g->mr, cnt = min64(g->mr, J->rows - r0);
        for (int64_t i = 0; i < J->t->kred; i++) {
            void *slot = xconv__gemm_a_slot(g, J->dst, J->t->kred, r0, i);
            for (int64_t r = r0; r < r0 + cnt;) {
                const int64_t o = r / kk_n, k = r % kk_n, k2 = k % K[2];
                const int64_t len = min64(r0 + cnt - r, K[2] - k2);
                const int64_t el = p->w_off + J->g * p->w_sg + (J->m0 + o) * p->w_so +
                                   i * p->w_si + k / (K[1] * K[2]) * p->w_sk[0] +
                                   k / K[2] % K[1] * p->w_sk[1] + k2 * p->w_sk[2];
                load_slot(g, p->x_dtype, J->src + el * wes, p->w_sk[2], slot, g->mr, r - r0, len);
                r += len;
            }
            zero_slot(g, slot, g->mr, cnt, g->mr - cnt);
        }
    }
}

/*
 * B: rows (i, k) over cin_g channels of group g, columns c0 .. c0+cols-1 flattened over
 * (n, positions of `pos`). Column q reads x at q*s + k*t - lo (conv); the transpose packs x
 * itself, which is the same with a 1-wide kernel, unit stride and no padding.
 */
typedef struct b_geom {
    int64_t pos[3], k[3], s[3], t[3], lo[3];
} b_geom;

static b_geom b_geom_of(const xconv_canon *p)
{
    b_geom b;
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    for (int d = 0; d < 3; d++) {
        b.pos[d] = tr ? p->x_size[d] : p->y_size[d];
        b.k[d] = tr ? 1 : p->k_size[d];
        b.s[d] = tr ? 1 : p->stride[d];
        b.t[d] = tr ? 1 : p->dil[d];
        b.lo[d] = tr ? 0 : p->pad_lo[d];
    }
    return b;
}

static void pack_b(void *arg, int64_t begin, int64_t end)
{
    const pack_job *J = (const pack_job *)arg;
    const xconv_canon *p = J->p;
    const xconv_gemm_geom *g = J->t->g;
    const b_geom bg = b_geom_of(p);
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), *X = p->x_size;
    const int64_t kk_n = xconv__prod3(bg.k), nr = g->nr;
    const int64_t x_base = p->x_off + J->g * p->cin_g * p->x_sc; /* x[0, g*cin_g, 0, 0, 0] */
    for (int64_t panel = begin; panel < end; panel++) {
        const int64_t j0 = panel * nr, cnt = min64(nr, J->cols - j0);
        seg segs[64]; /* a panel has at most nr <= 32 columns, so at most nr runs */
        int nseg = 0;
        for (int64_t j = 0; j < cnt; j += segs[nseg - 1].len)
            segs[nseg++] = seg_at(bg.pos, J->c0 + j0 + j, cnt - j);
        for (int64_t r = 0; r < J->t->kred; r++) {
            const int64_t i = r / kk_n, k = r % kk_n;
            const int64_t kd[3] = {k / (bg.k[1] * bg.k[2]), k / bg.k[2] % bg.k[1], k % bg.k[2]};
            void *slot = xconv__gemm_b_slot(g, J->dst, J->t->kred, r, j0);
            const int64_t off2 = kd[2] * bg.t[2] - bg.lo[2];
            int64_t a2, b2, j = 0;
            xconv__valid_range(off2, bg.s[2], X[2], bg.pos[2], &a2, &b2);
            for (int q = 0; q < nseg; j += segs[q].len, q++) {
                const seg *sg = &segs[q];
                const int64_t x0 = sg->y0 * bg.s[0] + kd[0] * bg.t[0] - bg.lo[0];
                const int64_t x1 = sg->y1 * bg.s[1] + kd[1] * bg.t[1] - bg.lo[1];
                if (x0 < 0 || x0 >= X[0] || x1 < 0 || x1 >= X[1]) {
                    zero_slot(g, slot, (int)nr, j, sg->len);
                    continue;
                }
                const int64_t a = min64(max64(a2, sg->y2), sg->y2 + sg->len);
                const int64_t b = max64(min64(b2, sg->y2 + sg->len), a);
                zero_slot(g, slot, (int)nr, j, a - sg->y2);
                if (b > a) {
                    const int64_t el = x_base + sg->n * p->x_sn + i * p->x_sc + x0 * p->x_ss[0] +
                                       x1 * p->x_ss[1] + (a * bg.s[2] + off2) * p->x_ss[2];
                    const int64_t step = b - a > 1 ? bg.s[2] * p->x_ss[2] : 0;
                    load_slot(g, p->x_dtype, J->src + el * xes, step, slot, (int)nr,
                              j + a - sg->y2, b - a);
                }
                zero_slot(g, slot, (int)nr, j + b - sg->y2, sg->y2 + sg->len - b);
            }
            zero_slot(g, slot, (int)nr, cnt, nr - cnt);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Epilogues                                                                                */
/* ---------------------------------------------------------------------------------------- */

/* The bias of output channel co as one compute-type value in *v (zero without bias). */
static void bias_value(const xconv_canon *p, const void *bias, int64_t co, void *v)
{
    memset(v, 0, sizeof(xconv_c128));
    if (!p->has_bias) return;
    const int64_t es = (int64_t)xconv_dtype_size(p->bias_dtype);
    xconv__load_row(p->ct, p->bias_dtype, (const char *)bias + (p->b_off + co * p->b_s) * es, 1,
                    v, 1);
}

enum { STORE_CHUNK = 1024 };

typedef struct conv_store_job {
    const xconv_canon *p;
    const void *bias;
    char *y;
    const char *c;         /* C tile: rows = channels m0.., row stride `cols` values */
    int64_t g, m0, c0, cols, chunks;
} conv_store_job;

/* Rows of the conv C tile in chunks of columns: + bias, then to y. */
static void conv_store(void *arg, int64_t begin, int64_t end)
{
    const conv_store_job *J = (const conv_store_job *)arg;
    const xconv_canon *p = J->p;
    const int64_t cs = (int64_t)xconv__ctype_size(p->ct);
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    for (int64_t item = begin; item < end; item++) {
        const int64_t o = item / J->chunks, j0 = item % J->chunks * STORE_CHUNK;
        const int64_t j1 = min64(J->cols, j0 + STORE_CHUNK), co = J->g * p->cout_g + J->m0 + o;
        char *row = (char *)J->c + o * J->cols * cs;
        if (p->has_bias) {
            xconv_c128 b;
            bias_value(p, J->bias, co, &b);
            xconv__ct_add(p->ct, row + j0 * cs, 1, &b, 0, j1 - j0);
        }
        for (int64_t j = j0; j < j1;) {
            const seg s = seg_at(p->y_size, J->c0 + j, j1 - j);
            const int64_t el = p->y_off + s.n * p->y_sn + co * p->y_sc + s.y0 * p->y_ss[0] +
                               s.y1 * p->y_ss[1] + s.y2 * p->y_ss[2];
            xconv__store_row(p->ct, p->y_dtype, row + j * cs, J->y + el * yes,
                             xconv__run_stride(p->y_ss[2], s.len), s.len);
            j += s.len;
        }
    }
}

typedef struct gather_job {
    const xconv_canon *p;
    const void *bias;
    char *y;
    char *acc;             /* [m_ch, Y] compute type */
    xconv_unfold u;        /* col2im geometry: image = y, positions = x */
    xconv_col_source src;  /* the C tile */
    int64_t g, m0, n;
    bool first, last;
} gather_job;

/* Transpose: rows (o, j0, j1) of the accumulator take the C tile's contributions; the
 * first tile starts them at the bias, the last stores them. */
static void transpose_gather(void *arg, int64_t begin, int64_t end)
{
    const gather_job *J = (const gather_job *)arg;
    const xconv_canon *p = J->p;
    const int64_t cs = (int64_t)xconv__ctype_size(p->ct);
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const int64_t *Y = p->y_size;
    for (int64_t r = begin; r < end; r++) {
        const int64_t o = r / (Y[0] * Y[1]), j0 = r / Y[1] % Y[0], j1 = r % Y[1];
        const int64_t co = J->g * p->cout_g + J->m0 + o;
        char *acc = J->acc + r * Y[2] * cs;
        if (J->first) {
            xconv_c128 b;
            bias_value(p, J->bias, co, &b);
            xconv__ct_fill(p->ct, acc, &b, Y[2]);
        }
        xconv__col2im_row(&J->u, &J->src, o, j0, j1, acc, NULL);
        if (J->last) {
            const int64_t el = p->y_off + J->n * p->y_sn + co * p->y_sc + j0 * p->y_ss[0] +
                               j1 * p->y_ss[1];
            xconv__store_row(p->ct, p->y_dtype, acc, J->y + el * yes,
                             xconv__run_stride(p->y_ss[2], Y[2]), Y[2]);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Run                                                                                      */
/* ---------------------------------------------------------------------------------------- */

static void run_conv(const xconv_exec *e, const tiles *t)
{
    const xconv_canon *p = e->p;
    const xconv_gemm_geom *g = t->g;
    char *ws = (char *)e->workspace;
    const int64_t all_cols = p->n * xconv__prod3(p->y_size);
    for (int64_t grp = 0; grp < p->groups; grp++) {
        for (int64_t m0 = 0; m0 < p->cout_g; m0 += t->m_ch) {
            const int64_t rows = min64(t->m_ch, p->cout_g - m0);
            pack_job pa = {.p = p, .t = t, .src = e->w, .g = grp, .m0 = m0, .rows = rows,
                           .dst = ws + t->a};
            xconv__parallel_for(e->ctx, (rows + g->mr - 1) / g->mr, pack_a_conv, &pa);
            for (int64_t c0 = 0; c0 < all_cols; c0 += t->cols) {
                const int64_t cols = min64(t->cols, all_cols - c0);
                pack_job pb = {.p = p, .t = t, .src = e->x, .g = grp, .c0 = c0, .cols = cols,
                               .dst = ws + t->b};
                xconv__parallel_for(e->ctx, (cols + g->nr - 1) / g->nr, pack_b, &pb);
                xconv__gemm_packed(e->ctx, g, rows, cols, t->kred, ws + t->a, ws + t->b,
                                   ws + t->c, cols, 1, false);
                conv_store_job sj = {.p = p, .bias = e->bias, .y = (char *)e->y, .c = ws + t->c,
                                     .g = grp, .m0 = m0, .c0 = c0, .cols = cols,
                                     .chunks = (cols + STORE_CHUNK - 1) / STORE_CHUNK};
                xconv__parallel_for(e->ctx, rows * sj.chunks, conv_store, &sj);
            }
        }
    }
}

static void run_transpose(const xconv_exec *e, const tiles *t)
{
    const xconv_canon *p = e->p;
    const xconv_gemm_geom *g = t->g;
    char *ws = (char *)e->workspace;
    const int64_t all_cols = xconv__prod3(p->x_size);
    gather_job gj = {.p = p, .bias = e->bias, .y = (char *)e->y, .acc = ws + t->acc};
    /* col2im geometry: the image is y, the positions are x's. */
    gj.u.ct = p->ct;
    for (int d = 0; d < 3; d++) {
        gj.u.x_size[d] = p->y_size[d];
        gj.u.y_size[d] = p->x_size[d];
        gj.u.k_size[d] = p->k_size[d];
        gj.u.stride[d] = p->stride[d];
        gj.u.dil[d] = p->dil[d];
        gj.u.pad_lo[d] = p->pad_lo[d];
    }
    for (int64_t grp = 0; grp < p->groups; grp++) {
        for (int64_t m0 = 0; m0 < p->cout_g; m0 += t->m_ch) {
            const int64_t chans = min64(t->m_ch, p->cout_g - m0), rows = chans * t->kk;
            pack_job pa = {.p = p, .t = t, .src = e->w, .g = grp, .m0 = m0, .rows = rows,
                           .dst = ws + t->a};
            xconv__parallel_for(e->ctx, (rows + g->mr - 1) / g->mr, pack_a_transpose, &pa);
            for (int64_t n = 0; n < p->n; n++) {
                for (int64_t c0 = 0; c0 < all_cols; c0 += t->cols) {
                    const int64_t cols = min64(t->cols, all_cols - c0);
                    pack_job pb = {.p = p, .t = t, .src = e->x, .g = grp,
                                   .c0 = n * all_cols + c0, .cols = cols, .dst = ws + t->b};
                    xconv__parallel_for(e->ctx, (cols + g->nr - 1) / g->nr, pack_b, &pb);
                    xconv__gemm_packed(e->ctx, g, rows, cols, t->kred, ws + t->a, ws + t->b,
                                       ws + t->c, cols, 1, false);
                    gj.src = (xconv_col_source){.base = ws + t->c, .dtype = xconv__ct_dtype(p->ct),
                                                .s_c = t->kk * cols, .s_k = cols, .s_p = 1,
                                                .p_begin = c0, .p_end = c0 + cols};
                    gj.g = grp, gj.m0 = m0, gj.n = n;
                    gj.first = c0 == 0;
                    gj.last = c0 + cols >= all_cols;
                    xconv__parallel_for(e->ctx, chans * p->y_size[0] * p->y_size[1],
                                        transpose_gather, &gj);
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* The engine                                                                               */
/* ---------------------------------------------------------------------------------------- */

static bool im2col_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) {
        *why_not = "cpu.im2col runs on cpu tensors only";
        return false;
    }
    return true;
}

static size_t im2col_workspace_bytes(const xconv_canon *p) { return (size_t)tiles_of(p).total; }

/* The GEMM's multiply-adds plus the packing and col2im traffic, which is what makes a
 * one-output-channel-per-group (depthwise) problem cheaper on the reference. */
static double im2col_cost(const xconv_canon *p)
{
    const double kk = (double)xconv__prod3(p->k_size), ng = (double)p->n * (double)p->groups;
    double moved;
    if (p->op == XCONV_OP_CONV)
        moved = ng * (double)p->cin_g * kk * (double)xconv__prod3(p->y_size);
    else
        moved = ng * ((double)p->cin_g + (double)p->cout_g * kk) * (double)xconv__prod3(p->x_size);
    return p->flops + 8.0 * moved + 2e4;
}

static xconv_status im2col_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const tiles t = tiles_of(p);
    XCONV_CHECK(err, e->workspace_bytes >= (size_t)t.total, WORKSPACE_TOO_SMALL, "workspace",
                "workspace %zu bytes is less than the %" PRId64 " cpu.im2col needs",
                e->workspace_bytes, t.total);
    if (p->n == 0) return XCONV_STATUS_OK;
    if (p->op == XCONV_OP_CONV)
        run_conv(e, &t);
    else
        run_transpose(e, &t);
    return XCONV_STATUS_OK;
}

const xconv_engine xconv__engine_cpu_im2col = {
    .name = "cpu.im2col",
    .device = XCONV_DEVICE_CPU,
    .supports = im2col_supports,
    .workspace_bytes = im2col_workspace_bytes,
    .cost = im2col_cost,
    .run = im2col_run,
};
