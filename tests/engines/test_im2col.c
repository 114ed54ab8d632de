/*
 * test_im2col.c — the cpu.im2col engine (and every other engine in the table) and the public
 * im2col/col2im, each against an oracle that does not share its code:
 *
 *   1. Engines: every engine in the table (but cpu.ref) against cpu.ref, forced by name, on
 *      named problems x both layouts x all 16 dtypes and widened y dtypes x dense, padded,
 *      flipped (negative strides) and broadcast views x 1, 2, 3 threads (identical bits).
 *      Integers bit-exact; floats within tol(y) * sum|x*w| (+ one ulp of a reduced y).
 *      Again with a tiny workspace budget so every tiling path of cpu.im2col runs, and with
 *      infinities and NaNs, which must land where cpu.ref puts them.
 *   2. im2col/col2im: hand-derived 1-D cases, the adjoint identity <im2col(x), c> ==
 *      <x, col2im(c)> exactly in integers, col2im against a fold written here,
 *      conv(x, w) == W * im2col(x) by a naive loop here, and the argument checks.
 *
 * The GEMM under cpu.im2col has its own test, test_gemm.c.
 */
#include "common/engine_check.h"
#include "common/ref_conv.h"
#include "cpu/engines/gemm.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

/* ---------------------------------------------------------------------------------------- */
/* 1. Engines against cpu.ref                                                                */
/* ---------------------------------------------------------------------------------------- */

typedef struct eng_case {
    const char *name;
    xconv_op op;
    int d;
    int64_t n, cin, cout, groups;
    int64_t x[3], k[3], s[3], t[3], lo[3], hi[3], opad[3];
    bool bias;
} eng_case;

#define CV XCONV_OP_CONV
#define CT XCONV_OP_CONV_TRANSPOSE

/* clang-format off */
static const eng_case CASES[] = {
    {"conv1d plain", CV, 1, 2, 3, 4, 1, {9}, {3}, {1}, {1}, {0}, {0}, {0}, false},
    {"conv1d stride 2 dilation 2 asymmetric padding",
     CV, 1, 2, 3, 5, 1, {13}, {3}, {2}, {2}, {2}, {1}, {0}, true},
    {"conv1d groups 3", CV, 1, 1, 6, 9, 3, {11}, {4}, {3}, {1}, {1}, {2}, {0}, false},
    {"conv1d depthwise", CV, 1, 2, 5, 5, 5, {10}, {3}, {1}, {1}, {1}, {1}, {0}, true},
    {"conv1d padding hides a tap from every output",
     CV, 1, 2, 2, 3, 1, {1}, {3}, {1}, {1}, {2}, {0}, {0}, true},
    {"conv2d padding hides taps, stride 2",
     CV, 2, 1, 2, 2, 1, {2, 1}, {3, 3}, {2, 1}, {1, 1}, {2, 2}, {0, 1}, {0}, false},
    {"conv1d kernel wider than input with padding",
     CV, 1, 1, 2, 3, 1, {3}, {5}, {1}, {1}, {2}, {2}, {0}, true},
    {"conv2d plain with bias",
     CV, 2, 2, 3, 5, 1, {7, 6}, {3, 2}, {1, 1}, {1, 1}, {1, 0}, {0, 1}, {0}, true},
    {"conv2d strided dilated",
     CV, 2, 1, 2, 4, 1, {11, 9}, {3, 3}, {2, 3}, {2, 1}, {1, 0}, {2, 0}, {0}, false},
    {"conv2d 1x1 groups 2 stride 2",
     CV, 2, 2, 4, 6, 2, {5, 6}, {1, 1}, {2, 1}, {1, 1}, {0, 0}, {0, 0}, {0}, true},
    {"conv2d patch (kernel == stride)",
     CV, 2, 1, 3, 4, 1, {8, 8}, {4, 4}, {4, 4}, {1, 1}, {0, 0}, {0, 0}, {0}, true},
    {"conv2d big reduction",
     CV, 2, 1, 16, 24, 1, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, true},
    {"conv2d reduction past one block of packed weights",
     CV, 2, 1, 300, 5, 1, {3, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, true},
    {"conv3d mixed",
     CV, 3, 1, 2, 3, 1,
     {5, 4, 6}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, {0}, true},
    {"conv3d depthwise multiplier 2",
     CV, 3, 1, 4, 8, 4,
     {4, 3, 5}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}, {0}, false},
    {"conv_transpose1d plain", CT, 1, 2, 3, 4, 1, {5}, {3}, {1}, {1}, {0}, {0}, {0}, false},
    {"conv_transpose1d stride 3 dilation 2 output padding 2",
     CT, 1, 1, 2, 3, 1, {6}, {3}, {3}, {2}, {1}, {2}, {2}, true},
    {"conv_transpose1d groups 2", CT, 1, 2, 6, 4, 2, {7}, {4}, {2}, {1}, {1}, {1}, {1}, true},
    {"conv_transpose2d mixed",
     CT, 2, 2, 3, 4, 1, {4, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 1}, {0, 1}, {1, 0}, true},
    {"conv_transpose2d depthwise",
     CT, 2, 1, 4, 4, 4, {5, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},
    {"conv_transpose2d big reduction",
     CT, 2, 1, 16, 8, 1, {6, 6}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, true},
    {"conv_transpose2d reduction past one block of packed weights",
     CT, 2, 1, 300, 5, 1, {3, 3}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, true},
    {"conv_transpose3d mixed",
     CT, 3, 1, 2, 3, 1,
     {3, 4, 3}, {2, 2, 3}, {2, 1, 2}, {1, 2, 1}, {0, 1, 1}, {1, 0, 1}, {1, 0, 1}, true},
    {"conv_transpose3d groups 3",
     CT, 3, 2, 3, 6, 3,
     {2, 3, 3}, {2, 1, 2}, {1, 1, 2}, {1, 1, 1}, {0, 0, 1}, {0, 0, 0}, {0, 0, 1}, false},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const xconv_dtype PAIRS[][2] = {ENGINE_CHECK_PAIRS};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))


static int engines_compared;

static void run_engine_case(const eng_case *c, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt,
                            int view, bool bias_in_y, bool nonfinite, const char *tag,
                            tu_rng *r)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    CASE_GEOMETRY(&p, c);
    p.layout = L, p.has_bias = c->bias, p.xdt = xdt, p.ydt = ydt;
    tu_problem_finish(&p);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p, xs, ws, bs, ys);
    const int rank = c->d + 2;
    const unsigned sp = spatial_mask(L, c->d);
    xconv_tensor x = make_view(xdt, rank, xs, view, sp | 2u, false);
    xconv_tensor w = make_view(xdt, rank, ws, view, 1u | (1u << (rank - 1)), false);
    xconv_tensor b = make_view(bias_in_y ? ydt : xdt, 1, bs, view, 1u, false);
    xconv_tensor yr = make_view(ydt, rank, ys, view, sp, true);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);
    if (nonfinite) { /* about one x and one w value in 8 becomes +Inf, -Inf or NaN */
        static const double specials[3] = {INFINITY, -INFINITY, NAN};
        xconv_tensor *tv[2] = {&x, &w};
        for (int q = 0; q < 2; q++) {
            const int64_t slots = (int64_t)(view_bytes(tv[q]) / xconv_dtype_size(xdt));
            for (int64_t i = 0; i < slots; i++)
                if (tu_int(r, 0, 7) == 0)
                    tu_store(xdt, tv[q]->data, i, (tu_val){0, specials[tu_int(r, 0, 2)], 0.0});
        }
    }

    char desc[200], label[320];
    tu_describe(&p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s views%s", c->name, desc, VIEW_NAMES[view], tag);

    xconv_error err;
    const char *used;
    xconv_status st = tu_conv(CTX[1], &p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s %s", label, xconv_status_name(st),
             err.description);
    double *mag = ref_mags(&p, &x, &w, &b);
    for (int e = 0; st == XCONV_STATUS_OK && e < xconv_engine_count(); e++) {
        const char *name = xconv_engine_name(e);
        if (strcmp(name, "cpu.ref") == 0) continue;
        xconv_tensor y[4];
        for (int t = 1; t <= 3; t++) {
            y[t] = yr;
            y[t].data = malloc(view_bytes(&yr));
            memset(y[t].data, 0xA5, view_bytes(&yr));
            xconv_status se = tu_conv(CTX[t], &p, &x, &w, &b, &y[t], name, &used, &err);
            if (se == XCONV_STATUS_UNSUPPORTED && t == 1 && strcmp(name, "cpu.im2col") != 0) {
                free(y[1].data);
                goto next_engine;
            }
            XT_CHECK(se == XCONV_STATUS_OK && used && strcmp(used, name) == 0,
                     "%s [%s, %d threads]: %s %s", label, name, t, xconv_status_name(se),
                     err.description);
        }
        engines_compared++;
        {
            char full[400];
            snprintf(full, sizeof full, "%s [%s]", label, name);
            int64_t bad = compare_outputs(&p, &y[1], &yr, mag, full);
            XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", full, bad);
            const size_t nb = view_bytes(&yr);
            XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
                     "%s: 1, 2 and 3 threads give different bits", full);
        }
        for (int t = 1; t <= 3; t++) free(y[t].data);
    next_engine:;
    }
    free(mag);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

static void test_engines(void)
{
    bool has_im2col = false;
    for (int e = 0; e < xconv_engine_count(); e++)
        has_im2col = has_im2col || strcmp(xconv_engine_name(e), "cpu.im2col") == 0;
    XT_CHECK(has_im2col, "cpu.im2col is not in the engine table");

    tu_rng r = {2024};
    int combo = 0;
    for (int ci = 0; ci < NCASES; ci++)
        for (int li = 0; li < 2; li++)
            for (int pi = 0; pi < NPAIRS; pi++, combo++) {
                const xconv_layout L =
                    li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
                run_engine_case(&CASES[ci], L, PAIRS[pi][0], PAIRS[pi][1], combo % V_COUNT,
                                (combo / V_COUNT) % 2 == 1, false, "", &r);
            }

    /* A workspace budget of a few KiB: one channel and one panel of columns per tile, so
     * the m tiles, column tiles across images and transpose accumulation over tiles run. */
    static const int small_pairs[] = {5, 12, 15, 16, 23};
    const int64_t saved = xconv__im2col_budget_bytes;
    xconv__im2col_budget_bytes = 4096;
    for (int ci = 0; ci < NCASES; ci++)
        for (int li = 0; li < 2; li++)
            for (int q = 0; q < 5; q++, combo++) {
                const int pi = small_pairs[q];
                const xconv_layout L =
                    li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
                run_engine_case(&CASES[ci], L, PAIRS[pi][0], PAIRS[pi][1], combo % V_COUNT,
                                combo % 2 == 1, false, ", tiny workspace budget", &r);
            }
    xconv__im2col_budget_bytes = saved;

    /* Infinities and NaNs propagate as IEEE arithmetic has them: padded conv taps add 0*w,
     * conv_transpose adds no such terms (DESIGN.md §2, cpu.ref). */
    static const int nonfinite_pairs[] = {12, 13, 11, 14, 23};
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 5; q++, combo++) {
            const xconv_layout L = q % 2 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
            run_engine_case(&CASES[ci], L, PAIRS[nonfinite_pairs[q]][0],
                            PAIRS[nonfinite_pairs[q]][1], combo % V_COUNT, combo % 2 == 1, true,
                            ", infinities and NaNs", &r);
        }
}

/* ---------------------------------------------------------------------------------------- */
/* 2. im2col and col2im                                                                      */
/* ---------------------------------------------------------------------------------------- */

static xconv_params unfold_params(int d, xconv_layout L, const int64_t *s, const int64_t *t,
                                  const int64_t *lo, const int64_t *hi)
{
    xconv_params q = xconv_params_init(XCONV_OP_CONV, d, L);
    for (int i = 0; i < d; i++)
        q.stride[i] = s[i], q.dilation[i] = t[i], q.pad_lo[i] = lo[i], q.pad_hi[i] = hi[i];
    return q;
}

/* Hand-derived 1-D cases (derivations in the comments), both layouts, i32. */
static void test_unfold_hand(void)
{
    /* C=1, x = [1 2 3 4 5], K=3, stride 2, padding 1:1 -> Y = (5+2-3)/2 + 1 = 3; position y
     * reads x[2y-1 .. 2y+1]: [0 1 2], [2 3 4], [4 5 0]. Each x[i] is read (2y + k - 1 = i) by
     * 1, 2, 1, 2, 1 taps, so col2im(im2col(x)) = x * [1 2 1 2 1] = [1 4 3 8 5].
     * C=2 (second channel 10x), K=2, dilation 2, padding 0:1 -> Y = 4; position y reads
     * x[y], x[y+2]: channel 0 (1,3) (2,4) (3,5) (4,0); counts of x[i] (i = y + 2k): 1 1 2 2 1. */
    static const struct {
        const char *name;
        int64_t c, k, s, t, lo, hi, y;
        int32_t cf[16], cl[16], fold[10];
    } H[] = {
        {"1-D k3 s2 p1:1",
         1,
         3,
         2,
         1,
         1,
         1,
         3,
         {0, 2, 4, 1, 3, 5, 2, 4, 0},
         {0, 1, 2, 2, 3, 4, 4, 5, 0},
         {1, 4, 3, 8, 5}},
        {"1-D c2 k2 d2 p0:1",
         2,
         2,
         1,
         2,
         0,
         1,
         4,
         {1, 2, 3, 4, 3, 4, 5, 0, 10, 20, 30, 40, 30, 40, 50, 0},
         {1, 10, 3, 30, 2, 20, 4, 40, 3, 30, 5, 50, 4, 40, 0, 0},
         {1, 2, 6, 8, 5, 10, 20, 60, 80, 50}},
    };
    for (int h = 0; h < 2; h++)
        for (int li = 0; li < 2; li++) {
            const xconv_layout L = li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
            const int64_t C = H[h].c, KC = H[h].k * C, Y = H[h].y;
            int32_t xv[10], xl[10], cols[16], back[10];
            for (int64_t c = 0; c < C; c++)
                for (int i = 0; i < 5; i++) {
                    xv[c * 5 + i] = (int32_t)((i + 1) * (c ? 10 : 1));
                    xl[i * C + c] = xv[c * 5 + i];
                }
            const int64_t xs_cf[3] = {1, C, 5}, xs_cl[3] = {1, 5, C};
            const int64_t cs_cf[3] = {1, KC, Y}, cs_cl[3] = {1, Y, KC};
            xconv_tensor x =
                xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, li ? xs_cl : xs_cf, li ? xl : xv);
            xconv_tensor ct = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, li ? cs_cl : cs_cf, cols);
            xconv_tensor y = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, li ? xs_cl : xs_cf, back);
            xconv_params q = unfold_params(1, L, &H[h].s, &H[h].t, &H[h].lo, &H[h].hi);
            xconv_error err;
            xconv_status st = xconv_im2col(NULL, &q, &H[h].k, &x, &ct, &err);
            XT_CHECK(st == XCONV_STATUS_OK, "im2col %s %s: %s %s", H[h].name, li ? "cl" : "cf",
                     xconv_status_name(st), err.description);
            XT_CHECK(memcmp(cols, li ? H[h].cl : H[h].cf, sizeof(int32_t) * (size_t)(KC * Y)) == 0,
                     "im2col %s %s: wrong columns", H[h].name,
                     li ? "channels_last" : "channels_first");
            for (int t = 1; t <= 3; t++) {
                memset(back, 0x5A, sizeof back);
                st = xconv_col2im(CTX[t], &q, &H[h].k, &ct, &y, &err);
                int32_t want[10];
                for (int64_t c = 0; c < C; c++)
                    for (int i = 0; i < 5; i++)
                        want[li ? i * C + c : c * 5 + i] = H[h].fold[c * 5 + i];
                XT_CHECK(st == XCONV_STATUS_OK &&
                             memcmp(back, want, sizeof(int32_t) * (size_t)(5 * C)) == 0,
                         "col2im %s %s %d threads: %s %s", H[h].name, li ? "cl" : "cf", t,
                         xconv_status_name(st), err.description);
            }
        }
}

/* Random unfold geometry: rank d, N, C, X, K, stride, dilation, padding with Y >= 1. */
typedef struct unfold_geo {
    int d;
    xconv_layout L;
    int64_t n, c, x[3], k[3], s[3], t[3], lo[3], hi[3], y[3], kk, l;
} unfold_geo;

static unfold_geo random_geo(tu_rng *r, int d, xconv_layout L)
{
    unfold_geo g;
    memset(&g, 0, sizeof g);
    g.d = d, g.L = L, g.n = tu_int(r, 1, 2), g.c = tu_int(r, 1, 3), g.kk = 1, g.l = 1;
    for (int i = 0; i < d; i++) {
        g.k[i] = tu_int(r, 1, 3), g.s[i] = tu_int(r, 1, 3), g.t[i] = tu_int(r, 1, 2);
        g.lo[i] = tu_int(r, 0, 2), g.hi[i] = tu_int(r, 0, 2);
        const int64_t span = g.t[i] * (g.k[i] - 1) + 1;
        g.x[i] = tu_int(r, 1, d == 3 ? 5 : 9);
        if (g.x[i] + g.lo[i] + g.hi[i] < span) g.x[i] = span;
        if (tu_int(r, 0, 3) == 0) /* the padding hides tap 0 from every position */
            g.x[i] = 1, g.k[i] = 3, g.s[i] = 1, g.t[i] = 1, g.lo[i] = 2, g.hi[i] = 0;
        g.y[i] = (g.x[i] + g.lo[i] + g.hi[i] - (g.t[i] * (g.k[i] - 1) + 1)) / g.s[i] + 1;
        g.kk *= g.k[i], g.l *= g.y[i];
    }
    return g;
}

static void geo_shapes(const unfold_geo *g, int64_t *img, int64_t *cols)
{
    tu_act_shape(g->L, g->d, g->n, g->c, g->x, img);
    const bool cl = g->L == XCONV_LAYOUT_CHANNELS_LAST;
    cols[0] = g->n, cols[1] = cl ? g->l : g->c * g->kk, cols[2] = cl ? g->c * g->kk : g->l;
}

/* Sum over the elements of a (view) of a[i] * b[i] modulo 2^64, a and b the same shape. */
static uint64_t dot_views(const xconv_tensor *a, const xconv_tensor *b)
{
    int64_t idx[XCONV_MAX_RANK] = {0};
    uint64_t s = 0;
    if (tu_numel(a->rank, a->shape) == 0) return 0;
    do {
        s += tu_load(a->dtype, a->data, tu_offset(a, idx)).u *
             tu_load(b->dtype, b->data, tu_offset(b, idx)).u;
    } while (tu_next_index(a->rank, a->shape, idx));
    return s;
}

/* <im2col(x), c> == <x, col2im(c)>, exact modulo 2^bits(y) in integers. */
static void test_adjoint(void)
{
    static const xconv_dtype pairs[][2] = {{XCONV_DTYPE_U32, XCONV_DTYPE_U32},
                                           {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
                                           {XCONV_DTYPE_U32, XCONV_DTYPE_U64},
                                           {XCONV_DTYPE_I8, XCONV_DTYPE_I64}};
    tu_rng r = {99};
    for (int trial = 0; trial < 96; trial++) {
        const xconv_dtype cdt = pairs[trial % 4][0], ydt = pairs[trial % 4][1];
        const int d = 1 + trial / 4 % 3;
        const xconv_layout L =
            trial / 12 % 2 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
        const int view = trial / 24 % V_COUNT, threads = 1 + trial % 3;
        unfold_geo g = random_geo(&r, d, L);
        int64_t is[XCONV_MAX_RANK], cs[3];
        geo_shapes(&g, is, cs);
        xconv_tensor x = make_view(cdt, d + 2, is, view, spatial_mask(L, d), false);
        xconv_tensor cx = make_view(cdt, 3, cs, view == V_BROADCAST ? V_PADDED : view, 6u, true);
        xconv_tensor c = make_view(cdt, 3, cs, view, 4u, false);
        xconv_tensor y = make_view(ydt, d + 2, is, view == V_BROADCAST ? V_FLIPPED : view,
                                   spatial_mask(L, d), true);
        fill_all(&x, &r), fill_all(&c, &r);
        xconv_params q = unfold_params(d, L, g.s, g.t, g.lo, g.hi);
        xconv_error e1, e2;
        xconv_status s1 = xconv_im2col(CTX[threads], &q, g.k, &x, &cx, &e1);
        xconv_status s2 = xconv_col2im(CTX[threads], &q, g.k, &c, &y, &e2);
        char label[160];
        snprintf(label, sizeof label, "adjoint trial %d: %dd %s %s->%s %s views", trial, d,
                 L ? "channels_last" : "channels_first", tu_info(cdt)->name, tu_info(ydt)->name,
                 VIEW_NAMES[view]);
        XT_CHECK(s1 == XCONV_STATUS_OK && s2 == XCONV_STATUS_OK, "%s: %s %s / %s %s", label,
                 xconv_status_name(s1), e1.description, xconv_status_name(s2), e2.description);
        if (s1 == XCONV_STATUS_OK && s2 == XCONV_STATUS_OK) {
            const uint64_t mask = tu_mask(tu_info(ydt)->bits);
            const uint64_t lhs = dot_views(&cx, &c) & mask, rhs = dot_views(&x, &y) & mask;
            XT_CHECK(lhs == rhs, "%s: <im2col(x), c> %" PRIu64 " != <x, col2im(c)> %" PRIu64, label,
                     lhs, rhs);
        }
        free(x.data), free(cx.data), free(c.data), free(y.data);
    }
}

/* col2im against a fold written here: every cols entry (n, (c, k), p) added at image
 * position p*s + k*t - lo when that is inside, exact for integers and within 1e-5 of the sum
 * of magnitudes (plus one ulp of a reduced y) for floats; 1, 2 and 3 threads agree bit for
 * bit. */
static void test_col2im_fold(void)
{
    static const xconv_dtype pairs[][2] = {
        {XCONV_DTYPE_F32, XCONV_DTYPE_F32}, {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
        {XCONV_DTYPE_C64, XCONV_DTYPE_C64}, {XCONV_DTYPE_F16, XCONV_DTYPE_F16},
        {XCONV_DTYPE_U8, XCONV_DTYPE_U32},  {XCONV_DTYPE_I16, XCONV_DTYPE_I16}};
    tu_rng r = {4242};
    for (int trial = 0; trial < 36; trial++) {
        const xconv_dtype cdt = pairs[trial % 6][0], ydt = pairs[trial % 6][1];
        const int d = 1 + trial / 6 % 3;
        const xconv_layout L =
            trial / 18 % 2 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
        unfold_geo g = random_geo(&r, d, L);
        int64_t is[XCONV_MAX_RANK], cs[3];
        geo_shapes(&g, is, cs);
        xconv_tensor c = make_view(cdt, 3, cs, trial % V_COUNT, 2u, false);
        fill_all(&c, &r);
        const int64_t ni = tu_numel(d + 2, is);
        tu_val *want = calloc((size_t)ni, sizeof(tu_val));
        double *mag = calloc((size_t)ni, sizeof(double));
        int64_t idx[3] = {0, 0, 0}, img[XCONV_MAX_RANK], sp[3];
        do {
            const bool cl = L == XCONV_LAYOUT_CHANNELS_LAST;
            const int64_t p = cl ? idx[1] : idx[2], row = cl ? idx[2] : idx[1];
            const int64_t ch = cl ? row % g.c : row / g.kk, k = cl ? row / g.c : row % g.kk;
            int64_t kr = k, pr = p;
            bool inside = true;
            for (int i = d - 1; i >= 0; i--) {
                const int64_t ki = kr % g.k[i], pi = pr % g.y[i];
                kr /= g.k[i], pr /= g.y[i];
                sp[i] = pi * g.s[i] + ki * g.t[i] - g.lo[i];
                inside = inside && sp[i] >= 0 && sp[i] < g.x[i];
            }
            if (!inside) continue;
            tu_act_index(L, d, idx[0], ch, sp, img);
            int64_t lin = 0;
            for (int i = 0; i < d + 2; i++) lin = lin * is[i] + img[i];
            tu_val v = tu_load(cdt, c.data, tu_offset(&c, idx));
            want[lin].u += v.u, want[lin].re += v.re, want[lin].im += v.im;
            mag[lin] += hypot(v.re, v.im);
        } while (tu_next_index(3, cs, idx));
        xconv_params q = unfold_params(d, L, g.s, g.t, g.lo, g.hi);
        void *first = NULL;
        for (int t = 1; t <= 3; t++) {
            xconv_tensor y = tu_alloc(ydt, d + 2, is, 0xA5);
            xconv_error err;
            xconv_status st = xconv_col2im(CTX[t], &q, g.k, &c, &y, &err);
            int64_t bad = 0;
            for (int64_t i = 0; st == XCONV_STATUS_OK && i < ni; i++) {
                tu_val a = tu_load(ydt, y.data, i);
                if (tu_is_int(ydt)) {
                    bad += !tu_same(ydt, a, tu_round_to(ydt, want[i]));
                } else {
                    const double b = 1e-5 * mag[i] + ulp_of(ydt, fabs(want[i].re)) +
                                     ulp_of(ydt, fabs(want[i].im));
                    bad += !(fabs(a.re - want[i].re) <= b && fabs(a.im - want[i].im) <= b);
                }
            }
            XT_CHECK(st == XCONV_STATUS_OK && bad == 0,
                     "col2im fold trial %d (%dd %s %s->%s, %d threads): %s, %" PRId64 " wrong",
                     trial, d, L ? "cl" : "cf", tu_info(cdt)->name, tu_info(ydt)->name, t,
                     err.description, bad);
            if (t == 1) {
                first = y.data;
            } else {
                XT_CHECK(memcmp(first, y.data, y.buffer_bytes) == 0,
                         "col2im fold trial %d: %d threads differ from 1", trial, t);
                free(y.data);
            }
        }
        free(first), free(want), free(mag), free(c.data);
    }
}

/* conv(x, w) == W * im2col(x): the columns from the library, the product by a naive loop
 * here, the convolution by the planner and by every engine forced by name. */
static void test_conv_is_gemm(void)
{
    static const xconv_dtype dts[] = {XCONV_DTYPE_I32, XCONV_DTYPE_F64, XCONV_DTYPE_U8};
    tu_rng r = {5150};
    for (int trial = 0; trial < 36; trial++) {
        const xconv_dtype dt = dts[trial % 3];
        const int d = 1 + trial / 3 % 3;
        const xconv_layout L =
            trial / 9 % 2 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
        unfold_geo g = random_geo(&r, d, L);
        const int64_t cout = tu_int(&r, 1, 4);
        int64_t is[XCONV_MAX_RANK], cs[3], ws[XCONV_MAX_RANK], ys[XCONV_MAX_RANK];
        geo_shapes(&g, is, cs);
        tu_w_shape(XCONV_OP_CONV, L, d, g.c, cout, 1, g.k, ws);
        tu_act_shape(L, d, g.n, cout, g.y, ys);
        xconv_tensor x = tu_alloc(dt, d + 2, is, 0), cols = tu_alloc(dt, 3, cs, 0);
        xconv_tensor w = tu_alloc(dt, d + 2, ws, 0), y = tu_alloc(dt, d + 2, ys, 0xA5);
        tu_fill(&x, &r, dt == XCONV_DTYPE_F64 ? tu_gen_small : tu_gen_wide);
        tu_fill(&w, &r, dt == XCONV_DTYPE_F64 ? tu_gen_small : tu_gen_wide);
        xconv_params q = unfold_params(d, L, g.s, g.t, g.lo, g.hi);
        xconv_error err;
        xconv_status st = xconv_im2col(NULL, &q, g.k, &x, &cols, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "conv==gemm trial %d: im2col %s", trial, err.description);
        /* W is w flattened row-major: [Cout, C*KK] (channels-first, row c*KK + k) or
         * [Cout, KK*C] (channels-last, column k*C + c) — exactly the cols orderings. */
        const int64_t red = g.c * g.kk, ny = tu_numel(d + 2, ys);
        tu_val *want = calloc((size_t)ny, sizeof(tu_val));
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t o = 0; o < cout; o++)
                for (int64_t p = 0; p < g.l; p++) {
                    tu_val acc = {0, 0, 0};
                    for (int64_t rr = 0; rr < red; rr++) {
                        tu_val a = tu_load(dt, w.data, o * red + rr);
                        tu_val b = tu_load(dt, cols.data,
                                           L ? (n * g.l + p) * red + rr : (n * red + rr) * g.l + p);
                        acc.u += a.u * b.u;
                        acc.re += a.re * b.re;
                    }
                    want[L ? (n * g.l + p) * cout + o : (n * cout + o) * g.l + p] = acc;
                }
        xconv_params cq = q;
        for (int e = -1; e < xconv_engine_count(); e++) {
            const char *forced = e < 0 ? NULL : xconv_engine_name(e), *used = NULL;
            xconv_plan_options o = {.engine = forced};
            memset(y.data, 0xA5, y.buffer_bytes);
            st = xconv_conv(CTX[1 + trial % 3], &cq, &x, &w, NULL, &y, &o, &used, &err);
            if (st == XCONV_STATUS_UNSUPPORTED && forced && strcmp(forced, "cpu.im2col") != 0 &&
                strcmp(forced, "cpu.ref") != 0)
                continue;
            int64_t bad = 0;
            for (int64_t i = 0; st == XCONV_STATUS_OK && i < ny; i++)
                bad += !tu_same(dt, tu_load(dt, y.data, i), tu_round_to(dt, want[i]));
            XT_CHECK(st == XCONV_STATUS_OK && bad == 0,
                     "conv==gemm trial %d (%dd %s %s, engine %s): %s, %" PRId64 " of %" PRId64
                     " wrong",
                     trial, d, L ? "cl" : "cf", tu_info(dt)->name, used ? used : "(planner)",
                     err.description, bad, ny);
        }
        free(want), free(x.data), free(cols.data), free(w.data), free(y.data);
    }
}

/* A few argument checks of im2col/col2im: status, parameter, and the output untouched. */
static void test_unfold_errors(void)
{
    int32_t xb[2 * 3 * 5], cb[64], yb[64];
    const int64_t xs[3] = {2, 3, 5}, cs[3] = {2, 9, 3}, k3 = 3;
    xconv_tensor x0 = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, xs, xb);
    xconv_tensor c0 = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, cs, cb);
    xconv_params q0 = xconv_params_init(XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_FIRST);
    for (int row = 0; row < 13; row++) {
        xconv_params q = q0;
        xconv_tensor x = x0, c = c0;
        int64_t k = k3;
        const char *param = "", *what = "";
        xconv_status want = XCONV_STATUS_INVALID_ARGUMENT;
        switch (row) {
        case 0: q.groups = 2, param = "groups", what = "groups 2"; break;
        case 1:
            q.output_padding[0] = 1, param = "output_padding[0]", what = "output padding";
            break;
        case 2: k = 0, param = "kernel[0]", what = "kernel"; break;
        case 3: k = 7, param = "x.shape[2]", what = "input too small for kernel"; break;
        case 4: c.shape[1] = 8, param = "cols.shape[1]", what = "cols.shape[1] 8"; break;
        case 5:
            c.dtype = XCONV_DTYPE_I64, c.data = yb, c.shape[0] = 1, c.shape[1] = 9,
            param = "cols.shape[0]", what = "cols.shape[0]";
            break;
        case 6: c.dtype = XCONV_DTYPE_U32, param = "cols.dtype", what = "cols.dtype u32"; break;
        case 7: c.data = xb, param = "cols.data", what = "overlaps"; break;
        case 8:
            x.device = XCONV_DEVICE_CUDA, c.device = XCONV_DEVICE_CUDA,
            want = XCONV_STATUS_UNSUPPORTED, param = "x.device", what = "cpu";
            break;
        case 9: x.data = NULL, param = "x.data", what = "null"; break;
        case 10: q.spatial_rank = 4, param = "spatial_rank", what = "spatial rank 4"; break;
        case 11:
            c.strided = true, c.strides[0] = 27, c.strides[1] = 3, c.strides[2] = 1,
            c.buffer_bytes = 4 * 50, param = "cols.buffer_bytes", what = "buffer_bytes";
            break;
        default: q.stride[0] = 0, param = "stride[0]", what = "stride 0"; break;
        }
        memset(cb, 0x5A, sizeof cb);
        memset(yb, 0x5A, sizeof yb);
        xconv_error err;
        xconv_status st = xconv_im2col(NULL, &q, &k, &x, &c, &err);
        XT_CHECK(st == want && strcmp(err.parameter, param) == 0 && strstr(err.description, what) &&
                     tu_all_bytes(cb, sizeof cb, 0x5A) && tu_all_bytes(yb, sizeof yb, 0x5A),
                 "im2col error row %d: got %s [%s] \"%s\", want %s [%s] \"...%s...\"", row,
                 xconv_status_name(st), err.parameter, err.description, xconv_status_name(want),
                 param, what);
    }
    /* col2im: y narrower than cols is not a widening. */
    xconv_tensor c = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, cs, cb);
    xconv_tensor y = xconv_tensor_contiguous(XCONV_DTYPE_I16, 3, xs, yb);
    memset(yb, 0x5A, sizeof yb);
    xconv_error err;
    xconv_status st = xconv_col2im(NULL, &q0, &k3, &c, &y, &err);
    XT_CHECK(st == XCONV_STATUS_INVALID_ARGUMENT && strcmp(err.parameter, "y.dtype") == 0 &&
                 tu_all_bytes(yb, sizeof yb, 0x5A) && strstr(err.operation, "xconv_col2im(1-D)"),
             "col2im i32 -> i16: got %s [%s] %s (%s)", xconv_status_name(st), err.parameter,
             err.description, err.operation);
    /* N = 0 is valid and writes nothing. */
    const int64_t x0s[3] = {0, 3, 5}, c0s[3] = {0, 9, 3};
    xconv_tensor xe = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, x0s, NULL);
    xconv_tensor ce = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, c0s, NULL);
    st = xconv_im2col(NULL, &q0, &k3, &xe, &ce, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "im2col N=0: %s %s", xconv_status_name(st), err.description);
    st = xconv_col2im(NULL, &q0, &k3, &ce, &xe, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "col2im N=0: %s %s", xconv_status_name(st), err.description);
}

/* A dim of size 1 may carry any stride (only (size-1)*stride must fit): 2^62 on every dim
 * of x, cols, w and y must not overflow any offset arithmetic (UBSan checks it). */
static void test_huge_unit_strides(void)
{
    const int64_t huge = (int64_t)1 << 62, one[3] = {1, 1, 1}, k1 = 1;
    int32_t xv = 7, wv = -3, cv = 0, yv = 0;
    xconv_tensor x = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, one, &xv);
    x.strided = true, x.buffer_bytes = 4;
    for (int i = 0; i < 3; i++) x.strides[i] = huge;
    xconv_tensor c = x, w = x, y = x;
    c.data = &cv, w.data = &wv, y.data = &yv;
    xconv_params q = xconv_params_init(XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_FIRST);
    xconv_error err;
    xconv_status st = xconv_im2col(CTX[2], &q, &k1, &x, &c, &err);
    XT_CHECK(st == XCONV_STATUS_OK && cv == 7, "im2col with 2^62 unit strides: %s %s, cols %d",
             xconv_status_name(st), err.description, (int)cv);
    st = xconv_col2im(CTX[2], &q, &k1, &c, &y, &err);
    XT_CHECK(st == XCONV_STATUS_OK && yv == 7, "col2im with 2^62 unit strides: %s %s, y %d",
             xconv_status_name(st), err.description, (int)yv);
    for (int e = 0; e < xconv_engine_count(); e++) {
        const char *name = xconv_engine_name(e), *used = NULL;
        for (int op = 0; op < 2; op++) {
            xconv_plan_options o = {.engine = name};
            q.op = (xconv_op)op;
            yv = 0;
            st = xconv_conv(CTX[2], &q, &x, &w, NULL, &y, &o, &used, &err);
            if (st == XCONV_STATUS_UNSUPPORTED && strcmp(name, "cpu.im2col") != 0) continue;
            XT_CHECK(st == XCONV_STATUS_OK && yv == -21,
                     "%s with 2^62 unit strides [%s]: %s %s, y %d", op ? "conv_transpose" : "conv",
                     name, xconv_status_name(st), err.description, (int)yv);
        }
    }
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_error err;
        if (xconv_context_create(&o, &CTX[t], &err) != XCONV_STATUS_OK) {
            fprintf(stderr, "context: %s\n", err.description);
            return 1;
        }
    }
    test_unfold_hand();
    test_adjoint();
    test_col2im_fold();
    test_conv_is_gemm();
    test_unfold_errors();
    test_engines();
    printf("engine comparisons against cpu.ref: %d\n", engines_compared);
    test_huge_unit_strides(); /* last: under UBSan an engine that overflows aborts here */
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_im2col");
}
