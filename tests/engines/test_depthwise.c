/*
 * test_depthwise.c — the engine cpu.depthwise against cpu.ref (forced by name) on the edges
 * of its blocking: output widths around its tiles of 8 (1, 7, 8, 9, 15, 16, 17, ...), channel
 * counts around its blocks of 16 (1, 15, 16, 17, 33), 3 and 5 taps at strides 1 and 2 (the
 * specialized tiles) and other kernels, channel multipliers > 1, dilation, asymmetric padding
 * including padding wider than the kernel, 1-D/2-D/3-D, both layouts, dense, padded, flipped
 * (negative strides) and broadcast views, with and without bias, all 16 dtypes and the
 * widened y dtypes, 1, 2 and 3 threads and constant weights (identical bits). Integers
 * bit-exact; floats within 1e-5 (1e-12 for f64 compute) of sum|x*w| plus one ulp of a
 * reduced y; infinities and NaNs where cpu.ref puts them (a padded tap adds 0 * w). Every
 * byte of y's buffer outside its elements must keep its canary, and the planner must pick
 * cpu.depthwise for these problems.
 * The 64-bit compute types on the fast path (f64, u64, i64, c64, c128: blocks of 8 channels,
 * 4 for c128) run every case, view and layout, with infinities and NaNs (floats) and with
 * integer extremes (wrapping); f64 and c128 also within 4 (K + 1) 2^-53 sum|x*w| of cpu.ref
 * (K taps, bias one more): both sum in the same order, the engine rounding once per fused
 * multiply-add (twice per complex tap), cpu.ref after each multiply and each add.
 */
#include "common/engine_check.h"
#include "common/ref_conv.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

typedef struct dw_case {
    const char *name;
    int d;
    int64_t n, cin, mult;
    int64_t x[3], k[3], s[3], t[3], lo[3], hi[3];
} dw_case;

/* clang-format off */
static const dw_case CASES[] = {
    {"2d 3x3 s1 width 1",          2, 1, 16, 1, {3, 1},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 7 c15",      2, 1, 15, 1, {4, 7},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 8 c16",      2, 2, 16, 1, {3, 8},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 9 c17",      2, 1, 17, 1, {5, 9},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 15 c1",      2, 1, 1, 1,  {3, 15}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 16 c33",     2, 1, 33, 1, {2, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 17 no pad",  2, 1, 32, 1, {4, 19}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
    {"2d 3x3 s1 width 24 c48",     2, 1, 48, 1, {3, 24}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s2 width 9",          2, 1, 17, 1, {5, 18}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s2 width 17 odd x",   2, 1, 16, 1, {4, 33}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s2 width 8 no pad",   2, 1, 20, 1, {5, 17}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
    {"2d 5x5 s1 width 13",         2, 1, 19, 1, {6, 13}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}},
    {"2d 5x5 s1 width 20 c16",     2, 1, 16, 1, {5, 20}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}},
    {"2d 5x5 s2 (pixel path)",     2, 1, 18, 1, {7, 15}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}},
    {"2d 3x3 dilation 2",          2, 1, 17, 1, {7, 21}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}},
    {"2d 3x3 asymmetric padding",  2, 1, 16, 1, {5, 12}, {3, 3}, {1, 1}, {1, 1}, {2, 0}, {0, 2}},
    {"2d padding wider than kernel", 2, 1, 17, 1, {3, 10}, {3, 3}, {1, 2}, {1, 1}, {4, 5}, {3, 4}},
    {"2d 3x2 kernel",              2, 1, 16, 1, {4, 11}, {3, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 0}},
    {"2d multiplier 2",            2, 1, 8, 2,  {4, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d multiplier 3 stride 2",   2, 2, 5, 3,  {5, 9},  {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {"1d 3 taps width 40",         1, 2, 17, 1, {40},    {3},    {1},    {1},    {1},    {1}},
    {"1d 5 taps stride 2",         1, 1, 16, 1, {37},    {5},    {2},    {1},    {2},    {2}},
    {"1d 1 tap",                   1, 1, 17, 1, {9},     {1},    {1},    {1},    {0},    {0}},
    {"1d kernel wider than x",     1, 1, 16, 1, {2},     {5},    {1},    {1},    {3},    {2}},
    {"3d 3x3x3",                   3, 1, 17, 1, {3, 4, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
    {"3d multiplier 2 mixed",      3, 1, 4, 2,  {4, 3, 9},  {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}},
    /* channels around the 64-bit kinds' blocks of 8 (4 for c128) */
    {"2d 3x3 s1 width 9 c7",       2, 1, 7, 1,  {4, 9},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 13 c8",      2, 1, 8, 1,  {3, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s2 width 8 c9",       2, 1, 9, 1,  {5, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {"2d 3x3 s1 width 6 c4",       2, 1, 4, 1,  {3, 6},  {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"1d 3 taps width 23 c3",      1, 1, 3, 1,  {23},    {3},    {1},    {1},    {1},    {1}},
    {"1d 5 taps width 17 c5",      1, 1, 5, 1,  {17},    {5},    {1},    {1},    {2},    {2}},
    {"1d 3 taps s2 width 9 c6",    1, 1, 6, 1,  {18},    {3},    {2},    {1},    {1},    {1}},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* the engine tests' pairs, and the byte inputs' widenings the VNNI tiles store */
static const xconv_dtype PAIRS[][2] = {
    ENGINE_CHECK_PAIRS, {XCONV_DTYPE_I8, XCONV_DTYPE_I32}, {XCONV_DTYPE_U8, XCONV_DTYPE_U16}};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))


static int compared;

enum { FILL_RANDOM, FILL_NONFINITE, FILL_EXTREMES };

/* Integer values at the edges of wrapping (mod 2^64 products and sums, and their 32-bit
 * halves: a 32-bit multiply, or a lost high half, gets these wrong). */
static const uint64_t EXTREMES[] = {0,
                                    1,
                                    2,
                                    UINT64_MAX,
                                    UINT64_MAX - 1,
                                    (uint64_t)INT64_MAX,
                                    (uint64_t)INT64_MAX + 1,
                                    0xffffffffu,
                                    0x100000000u,
                                    0x100000001u,
                                    0xffffffff00000000u,
                                    0x8000000080000000u,
                                    0x7fffffff7fffffffu};
#define NEXTREMES ((int)(sizeof EXTREMES / sizeof EXTREMES[0]))

/* Max |a - e| <= 4 (taps + 1) 2^-53 mag over y's elements for f64 and c128 y (see the
 * header); non-finite mags (Inf or NaN inputs) are left to compare_outputs. */
static int64_t compare_f64_tight(const tu_problem *p, const xconv_tensor *y, const xconv_tensor *yr,
                                 const double *mag, const char *label)
{
    const double taps = (double)(p->k[0] * (p->d > 1 ? p->k[1] : 1) * (p->d > 2 ? p->k[2] : 1));
    const double rel = 4.0 * (taps + 1.0) * ldexp(1.0, -53);
    int64_t bad = 0, idx[XCONV_MAX_RANK], j[3];
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->cout; c++)
            for (j[0] = 0; j[0] < p->y[0]; j[0]++)
                for (j[1] = 0; j[1] < p->y[1]; j[1]++)
                    for (j[2] = 0; j[2] < p->y[2]; j[2]++) {
                        const double m = mag[tu_ylin(p, n, c, j)];
                        if (!isfinite(m)) continue;
                        tu_act_index(p->layout, p->d, n, c, j, idx);
                        const int64_t off = tu_offset(y, idx);
                        const tu_val a = tu_load(y->dtype, y->data, off), e = tu_load(y->dtype, yr->data, off);
                        const double err = fmax(fabs(a.re - e.re), fabs(a.im - e.im));
                        if (!isfinite(a.re + a.im) || !isfinite(e.re + e.im)) continue; /* a padding tap's Inf * 0 */
                        if (!(err <= rel * m) && bad++ < 3)
                            fprintf(stderr, "  %s: y[n%" PRId64 " c%" PRId64 " %" PRId64 ",%" PRId64 ",%" PRId64
                                    "] differs from cpu.ref by %.3g, more than %.3g (sum|x*w| %.3g)\n",
                                    label, n, c, j[0], j[1], j[2], err, rel * m, m);
                    }
    return bad;
}

/*
 * The fast path's f8 codecs against the library's scalar ones (src/core/dtypes.c), every
 * code and every pair of codes: a 1-D depthwise conv, channels-last, 16 channels, 2 taps of
 * weight 1 at stride 2, no bias, so y[m, c] = x[2m, c] + x[2m + 1, c], summed exactly in f32
 * and rounded once into f8 (a rounding the engine comparison, one ulp of y wide, would let
 * pass wrong); then y f32 = x with one tap (the decoder, NaN codes included, bit for bit).
 */
static void check_f8_codecs(xconv_dtype dt)
{
    float (*dec)(uint8_t) = dt == XCONV_DTYPE_F8E4M3 ? xconv_f8e4m3_to_f32 : xconv_f8e5m2_to_f32;
    uint8_t (*enc)(float) = dt == XCONV_DTYPE_F8E4M3 ? xconv_f32_to_f8e4m3 : xconv_f32_to_f8e5m2;
    const char *name = xconv_dtype_name(dt);
    enum { C = 16, M = 256 * 256 / C };
    uint8_t *x = malloc(2 * M * C), *y8 = malloc(M * C), w2[C * 2], w1[C];
    float *y32 = malloc(sizeof(float) * 2 * M * C);
    for (int i = 0; i < 256 * 256; i++) { /* output i = m * C + c sums codes i / 256, i % 256 */
        const int m = i / C, c = i % C;
        x[(2 * m) * C + c] = (uint8_t)(i / 256), x[(2 * m + 1) * C + c] = (uint8_t)(i % 256);
    }
    const uint8_t one = enc(1.0f);
    memset(w2, one, sizeof w2), memset(w1, one, sizeof w1);
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = "cpu.depthwise";
    xconv_error err;
    const char *used = NULL;

    xconv_params q = xconv_params_init(XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_LAST);
    q.groups = C, q.stride[0] = 2;
    const int64_t xs[3] = {1, 2 * M, C}, w2s[3] = {C, 2, 1}, ys[3] = {1, M, C};
    xconv_tensor xt = xconv_tensor_contiguous(dt, 3, xs, x), wt = xconv_tensor_contiguous(dt, 3, w2s, w2);
    xconv_tensor yt = xconv_tensor_contiguous(dt, 3, ys, y8);
    xconv_status st = xconv_conv(CTX[1], &q, &xt, &wt, NULL, &yt, &o, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s pair sums: %s", name, err.description);
    int bad = 0;
    for (int i = 0; st == XCONV_STATUS_OK && i < 256 * 256; i++) {
        /* the sum starts at +0, as the engines' and cpu.ref's do: -0 + -0 comes out +0 */
        const uint8_t want = enc(0.0f + dec((uint8_t)(i / 256)) + dec((uint8_t)(i % 256)));
        if (y8[i] != want && bad++ < 3)
            fprintf(stderr, "  %s: 0x%02x + 0x%02x gave 0x%02x, want 0x%02x\n", name, i / 256,
                    i % 256, y8[i], want);
    }
    XT_CHECK(bad == 0, "%s: %d of 65536 pair sums rounded otherwise than the library's encoder",
             name, bad);

    q = xconv_params_init(XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_LAST);
    q.groups = C;
    const int64_t w1s[3] = {C, 1, 1}, y1s[3] = {1, 2 * M, C};
    wt = xconv_tensor_contiguous(dt, 3, w1s, w1);
    yt = xconv_tensor_contiguous(XCONV_DTYPE_F32, 3, y1s, y32);
    st = xconv_conv(CTX[1], &q, &xt, &wt, NULL, &yt, &o, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s decode: %s", name, err.description);
    bad = 0;
    for (int i = 0; st == XCONV_STATUS_OK && i < 2 * M * C; i++) {
        const float want = 0.0f + dec(x[i]); /* the sum starts at +0: -0 comes out +0 */
        if (memcmp(&y32[i], &want, sizeof want) != 0) bad++;
    }
    XT_CHECK(bad == 0, "%s: %d decoded values differ from the library's decoder", name, bad);
    free(x), free(y8), free(y32);
}

static void run_case(const dw_case *c, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt, int view,
                     bool bias, bool bias_in_y, int fill, tu_rng *r)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = XCONV_OP_CONV, p.d = c->d, p.layout = L, p.n = c->n, p.cin = c->cin;
    p.cout = c->cin * c->mult, p.groups = c->cin, p.has_bias = bias, p.xdt = xdt, p.ydt = ydt;
    for (int i = 0; i < c->d; i++) {
        p.x[i] = c->x[i], p.k[i] = c->k[i], p.stride[i] = c->s[i], p.dil[i] = c->t[i];
        p.lo[i] = c->lo[i], p.hi[i] = c->hi[i];
    }
    tu_problem_finish(&p);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p, xs, ws, bs, ys);
    const int rank = c->d + 2;
    const unsigned sp = spatial_mask(L, c->d);
    xconv_tensor x = make_view(xdt, rank, xs, view, sp | 2u, false);
    xconv_tensor w = make_view(xdt, rank, ws, view, 1u | (1u << (rank - 1)), false);
    xconv_tensor b = make_view(bias_in_y ? ydt : xdt, 1, bs, view, 1u, false);
    xconv_tensor yr = make_view(ydt, rank, ys, view == V_BROADCAST ? V_PADDED : view, sp, true);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);
    const bool nonfinite = fill == FILL_NONFINITE;
    if (nonfinite) { /* about one x and one w value in 8 becomes +Inf, -Inf or NaN */
        static const double specials[3] = {INFINITY, -INFINITY, NAN};
        xconv_tensor *tv[2] = {&x, &w};
        for (int q = 0; q < 2; q++) {
            const int64_t slots = (int64_t)(view_bytes(tv[q]) / xconv_dtype_size(xdt));
            for (int64_t i = 0; i < slots; i++)
                if (tu_int(r, 0, 7) == 0) {
                    tu_val v = {0, specials[tu_int(r, 0, 2)], 0.0};
                    if (tu_is_complex(xdt)) { /* the special in re, im or both */
                        const int part = (int)tu_int(r, 0, 2);
                        if (part > 0) v.im = v.re;
                        if (part == 1) v.re = 2.0 * tu_unit(r) - 1.0;
                    }
                    tu_store(xdt, tv[q]->data, i, v);
                }
        }
    }
    if (fill == FILL_EXTREMES) { /* about one x, w and bias value in 2 becomes an extreme */
        xconv_tensor *tv[3] = {&x, &w, &b};
        for (int q = 0; q < 3; q++) {
            const int64_t slots = (int64_t)(view_bytes(tv[q]) / xconv_dtype_size(tv[q]->dtype));
            for (int64_t i = 0; i < slots; i++)
                if (tu_int(r, 0, 1) == 0) {
                    const uint64_t u = EXTREMES[tu_int(r, 0, NEXTREMES - 1)];
                    tu_store(tv[q]->dtype, tv[q]->data, i, (tu_val){u, (double)u, 0.0});
                }
        }
    }
    char desc[200], label[320];
    tu_describe(&p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s views%s%s", c->name, desc, VIEW_NAMES[view],
             bias ? "" : ", no bias",
             nonfinite ? ", infinities and NaNs" : fill == FILL_EXTREMES ? ", integer extremes" : "");

    xconv_error err;
    const char *used = NULL;
    xconv_status st = tu_conv(CTX[1], &p, &x, &w, bias ? &b : NULL, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s %s", label, xconv_status_name(st), err.description);
    double *mag = ref_mags(&p, &x, &w, bias ? &b : NULL);
    xconv_tensor y[4];
    for (int t = 1; t <= 3; t++) {
        y[t] = yr;
        y[t].data = malloc(view_bytes(&yr));
        memset(y[t].data, 0xA5, view_bytes(&yr));
        /* t == 1 lets the planner choose: it must choose cpu.depthwise */
        const xconv_status se = tu_conv(CTX[t], &p, &x, &w, bias ? &b : NULL, &y[t],
                                        t == 1 ? NULL : "cpu.depthwise", &used, &err);
        XT_CHECK(se == XCONV_STATUS_OK && used && strcmp(used, "cpu.depthwise") == 0,
                 "%s [%d threads]: %s %s (engine %s)", label, t, xconv_status_name(se), err.description,
                 used ? used : "none");
    }
    {
        /* constant weights (packed once at plan creation, w not read at execute): same bits */
        y[0] = yr;
        y[0].data = malloc(view_bytes(&yr));
        memset(y[0].data, 0xA5, view_bytes(&yr));
        const xconv_params q = tu_params(&p);
        const xconv_plan_options o = {.engine = "cpu.depthwise", .constant_weights = true};
        xconv_plan *pl = NULL;
        xconv_status sc = xconv_plan_create(CTX[2], &q, &x, &w, bias ? &b : NULL, &y[0], &o, &pl, &err);
        if (sc == XCONV_STATUS_OK)
            sc = xconv_plan_execute(pl, x.data, NULL, bias ? b.data : NULL, y[0].data, NULL, 0, &err);
        XT_CHECK(sc == XCONV_STATUS_OK, "%s [constant weights]: %s %s", label, xconv_status_name(sc),
                 err.description);
        XT_CHECK(memcmp(y[0].data, y[1].data, view_bytes(&yr)) == 0,
                 "%s: constant weights give different bits", label);
        xconv_plan_destroy(pl);
        free(y[0].data);
    }
    compared++;
    int64_t bad = compare_outputs(&p, &y[1], &yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    if (ydt == XCONV_DTYPE_F64 || ydt == XCONV_DTYPE_C128) {
        const int64_t far = compare_f64_tight(&p, &y[1], &yr, mag, label);
        XT_CHECK(far == 0, "%s: %" PRId64 " elements further from cpu.ref than 4 (K + 1) 2^-53 sum|x*w|",
                 label, far);
    }
    const size_t nb = view_bytes(&yr);
    XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
             "%s: 1, 2 and 3 threads give different bits", label);
    for (int t = 1; t <= 3; t++) free(y[t].data);
    free(mag);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

/*
 * bf16 x in 3x3 row-pair tiles with more than 16 channels runs by blocks of 32 (even and odd
 * channels apart, depthwise.h); 16 channels or fewer run by blocks of 16. Second algorithm:
 * the same conv cut into slices of 16 channels (views into x, w, bias and y) must give the
 * same bits channel for channel, NaNs as NaNs (which NaN a fused multiply-add passes on is
 * not fixed). Channel counts around 32 and with a half block (144: MobileNet's), widths
 * around the tiles of 3, strides 1 and 2, odd and even heights, padded or not, infinities
 * and NaNs in one run in two, sums that are f32 subnormals in one in four (vcvtne2ps2bf16
 * flushes those; the blocks of 32 must not).
 */
static void check_bf16_blocks(tu_rng *r)
{
    static const int64_t chans[] = {17, 31, 32, 33, 48, 63, 64, 65, 144};
    static const int64_t widths[] = {1, 2, 3, 4, 5, 6, 7, 10, 13, 29};
    int runs = 0;
    for (int ci = 0; ci < 9; ci++)
        for (int wi = 0; wi < 10; wi++)
            for (int s = 1; s <= 2; s++)
                for (int yb = 0; yb < 2; yb++, runs++) {
                    const int64_t C = chans[ci];
                    tu_problem p;
                    memset(&p, 0, sizeof p);
                    p.op = XCONV_OP_CONV, p.d = 2, p.layout = XCONV_LAYOUT_CHANNELS_LAST, p.n = 1 + runs % 2;
                    p.cin = p.cout = p.groups = C, p.has_bias = runs % 3 != 0;
                    p.xdt = XCONV_DTYPE_BF16, p.ydt = yb ? XCONV_DTYPE_F32 : XCONV_DTYPE_BF16;
                    const bool pad = runs % 4 != 3;
                    p.x[0] = 3 + runs % 4, p.x[1] = (widths[wi] - 1) * s + (pad ? 1 : 3);
                    for (int i = 0; i < 2; i++)
                        p.k[i] = 3, p.stride[i] = s, p.dil[i] = 1, p.lo[i] = p.hi[i] = pad ? 1 : 0;
                    tu_problem_finish(&p);
                    int64_t xs[4], ws[4], bs[1], ys[4];
                    tu_shapes(&p, xs, ws, bs, ys);
                    /* dense channels, padded pixels and rows (step 1 inside, + 3 outside) */
                    xconv_tensor x = make_view_inner(p.xdt, 4, xs, V_PADDED, 0, false, 1);
                    xconv_tensor w = make_view_inner(p.xdt, 4, ws, V_PADDED, 0, false, 1);
                    xconv_tensor b = make_view_inner(p.xdt, 1, bs, V_PADDED, 0, false, 1);
                    xconv_tensor y = make_view_inner(p.ydt, 4, ys, V_PADDED, 0, true, 1);
                    xconv_tensor yc = y;
                    yc.data = malloc(y.buffer_bytes);
                    memset(yc.data, 0xA5, y.buffer_bytes);
                    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);
                    if (runs % 4 == 2) { /* products and sums near 2^-128: f32 subnormals */
                        xconv_tensor *tv[3] = {&x, &w, &b};
                        for (int q = 0; q < 3; q++)
                            for (int64_t i = 0; i < (int64_t)(tv[q]->buffer_bytes / 2); i++)
                                tu_store(p.xdt, tv[q]->data, i,
                                         (tu_val){0, (2.0 * tu_unit(r) - 1.0) * (q < 2 ? 0x1p-64 : 0x1p-127), 0.0});
                    }
                    if (runs % 2) {
                        static const double specials[3] = {INFINITY, -INFINITY, NAN};
                        xconv_tensor *tv[2] = {&x, &w};
                        for (int q = 0; q < 2; q++)
                            for (int64_t i = 0; i < (int64_t)(tv[q]->buffer_bytes / 2); i++)
                                if (tu_int(r, 0, 15) == 0)
                                    tu_store(p.xdt, tv[q]->data, i, (tu_val){0, specials[tu_int(r, 0, 2)], 0.0});
                    }
                    char desc[200];
                    tu_describe(&p, desc, sizeof desc);
                    xconv_error err;
                    const char *used = NULL;
                    xconv_status st = tu_conv(CTX[2], &p, &x, &w, &b, &y, NULL, &used, &err);
                    XT_CHECK(st == XCONV_STATUS_OK && used && strcmp(used, "cpu.depthwise") == 0,
                             "bf16 blocks %s: %s %s (engine %s)", desc, xconv_status_name(st), err.description,
                             used ? used : "none");
                    for (int64_t c0 = 0; c0 < C; c0 += 16) {
                        tu_problem q = p;
                        q.cin = q.cout = q.groups = C - c0 < 16 ? C - c0 : 16;
                        xconv_tensor xv = x, wv = w, bv = b, yv = yc;
                        xv.shape[3] = yv.shape[3] = wv.shape[0] = bv.shape[0] = q.cout;
                        xv.offset += c0 * x.strides[3], yv.offset += c0 * y.strides[3];
                        wv.offset += c0 * w.strides[0], bv.offset += c0 * b.strides[0];
                        st = tu_conv(CTX[2], &q, &xv, &wv, &bv, &yv, "cpu.depthwise", &used, &err);
                        XT_CHECK(st == XCONV_STATUS_OK, "bf16 blocks %s, channels %" PRId64 "+: %s %s", desc, c0,
                                 xconv_status_name(st), err.description);
                    }
                    /* every element slot, the gaps (canaries) included */
                    const int64_t es = (int64_t)xconv_dtype_size(p.ydt), slots = (int64_t)y.buffer_bytes / es;
                    int64_t bad = 0;
                    for (int64_t i = 0; i < slots; i++) {
                        if (memcmp((char *)y.data + i * es, (char *)yc.data + i * es, (size_t)es) == 0) continue;
                        const tu_val a = tu_load(p.ydt, y.data, i), e = tu_load(p.ydt, yc.data, i);
                        bad += !(isnan(a.re) && isnan(e.re));
                    }
                    XT_CHECK(bad == 0, "bf16 blocks %s: %" PRId64 " of %" PRId64 " slots differ from slices of 16",
                             desc, bad, slots);
                    free(x.data), free(w.data), free(b.data), free(y.data), free(yc.data);
                }
    printf("bf16 blocks of 32 against slices of 16: %d convs\n", runs);
}

/*
 * Buffers at every 16-byte phase of a line, and at a phase of one element: the fast path
 * shifts its channel blocks to start on lines (depthwise.h) where a pixel takes at least 6
 * blocks, so each phase runs other blocks, masks and packed weights (the first and last
 * block partial or not). Per dtype, channel counts of 6 and 8 blocks and 6 blocks plus 3
 * channels, with the row-pair tiles (3x3, strides 1 and 2), the 5x5 tiles and the pixel path
 * (dilation 2). Oracles: cpu.ref on the same data (compare_outputs, as run_case); every
 * phase must give the bits of phase 0, through xconv_conv and through one plan with constant
 * weights created at phase 0 (its weights packed for every phase); and the bytes around y
 * (64 before, 64 after) keep their canary.
 */
static void check_phases(tu_rng *r)
{
    static const xconv_dtype pairs[][2] = {
        {XCONV_DTYPE_F32, XCONV_DTYPE_F32},   {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},
        {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},  {XCONV_DTYPE_F16, XCONV_DTYPE_F16},
        {XCONV_DTYPE_F64, XCONV_DTYPE_F64},   {XCONV_DTYPE_C64, XCONV_DTYPE_C64},
        {XCONV_DTYPE_C128, XCONV_DTYPE_C128}, {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
        {XCONV_DTYPE_U16, XCONV_DTYPE_U32},   {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
        {XCONV_DTYPE_I64, XCONV_DTYPE_I64},   {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32}};
    static const struct {
        int64_t x0, x1, k, s, t;
    } shapes[] = {{5, 13, 3, 2, 1}, {4, 11, 3, 1, 1}, {6, 12, 5, 1, 1}, {7, 11, 3, 1, 2}};
    static const int64_t offsets[][2] = {{0, 0}, {16, 16}, {32, 32}, {48, 48}, {16, 48}, {48, 0}, {-1, -1}};
    int runs = 0;
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int cc = 0; cc < 3; cc++) {
                const xconv_dtype xdt = pairs[pi][0], ydt = pairs[pi][1];
                const int64_t xes = (int64_t)xconv_dtype_size(xdt), yes = (int64_t)xconv_dtype_size(ydt);
                /* channels a block: one zmm of the compute type; bf16 row pairs go by 32 */
                const int64_t cs = xdt == XCONV_DTYPE_C128 ? 16 : xes == 8 || ydt == XCONV_DTYPE_I64 ? 8 : 4;
                const int64_t L = (xdt == XCONV_DTYPE_BF16 && shapes[si].t == 1 && shapes[si].k == 3 ? 2 : 1) * 64 / cs;
                tu_problem p;
                memset(&p, 0, sizeof p);
                p.op = XCONV_OP_CONV, p.d = 2, p.layout = XCONV_LAYOUT_CHANNELS_LAST, p.n = 2;
                p.cin = p.cout = p.groups = cc == 0 ? 6 * L : cc == 1 ? 8 * L : 6 * L + 3;
                p.has_bias = cc != 1, p.xdt = xdt, p.ydt = ydt;
                p.x[0] = shapes[si].x0, p.x[1] = shapes[si].x1;
                for (int i = 0; i < 2; i++) {
                    p.k[i] = shapes[si].k, p.stride[i] = shapes[si].s, p.dil[i] = shapes[si].t;
                    p.lo[i] = p.hi[i] = shapes[si].t * (shapes[si].k / 2);
                }
                tu_problem_finish(&p);
                int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
                tu_shapes(&p, xs, ws, bs, ys);
                xconv_tensor x = tu_alloc(xdt, 4, xs, 0), w = tu_alloc(xdt, 4, ws, 0);
                xconv_tensor b = tu_alloc(xdt, 1, bs, 0), yr = tu_alloc(ydt, 4, ys, 0xA5);
                fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);
                char desc[200], label[320];
                tu_describe(&p, desc, sizeof desc);
                xconv_error err;
                const char *used = NULL;
                xconv_status st = tu_conv(CTX[1], &p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
                XT_CHECK(st == XCONV_STATUS_OK, "phases %s [cpu.ref]: %s", desc, err.description);
                double *mag = ref_mags(&p, &x, &w, &b);
                const size_t xb = view_bytes(&x), yb = view_bytes(&yr);
                unsigned char *xm = NULL, *ym = NULL, *first = malloc(yb);
                XT_CHECK(posix_memalign((void **)&xm, 64, xb + 128) == 0 &&
                             posix_memalign((void **)&ym, 64, yb + 192) == 0 && first,
                         "phases: out of memory");
                xconv_plan *plan = NULL;
                for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
                    /* -1: one element past the line (a phase no shift serves) */
                    const int64_t ox = offsets[oi][0] < 0 ? xes : offsets[oi][0];
                    const int64_t oy = offsets[oi][1] < 0 ? yes : offsets[oi][1];
                    xconv_tensor xv = x, yv = yr;
                    xv.data = xm + 64 + ox, yv.data = ym + 64 + oy;
                    memcpy(xv.data, x.data, xb);
                    snprintf(label, sizeof label, "phases %s, x at %" PRId64 " and y at %" PRId64 " bytes past a line", desc,
                             ox, oy);
                    for (int via = 0; via < 2; via++) {
                        memset(ym, 0xA5, yb + 192);
                        if (via == 0) {
                            st = tu_conv(CTX[2], &p, &xv, &w, &b, &yv, "cpu.depthwise", &used, &err);
                        } else {
                            if (!plan) {
                                const xconv_params q = tu_params(&p);
                                const xconv_plan_options o = {.engine = "cpu.depthwise", .constant_weights = true};
                                st = xconv_plan_create(CTX[2], &q, &xv, &w, p.has_bias ? &b : NULL, &yv, &o, &plan, &err);
                            }
                            if (st == XCONV_STATUS_OK)
                                st = xconv_plan_execute(plan, xv.data, NULL, p.has_bias ? b.data : NULL, yv.data, NULL,
                                                        0, &err);
                        }
                        XT_CHECK(st == XCONV_STATUS_OK, "%s [%s]: %s %s", label, via ? "constant weights" : "conv",
                                 xconv_status_name(st), err.description);
                        XT_CHECK(tu_all_bytes(ym, (size_t)(64 + oy), 0xA5) &&
                                     tu_all_bytes(ym + 64 + oy + yb, (size_t)(128 - oy), 0xA5),
                                 "%s [%s]: bytes around y written", label, via ? "constant weights" : "conv");
                        if (oi == 0 && via == 0) {
                            memcpy(first, yv.data, yb);
                            const int64_t bad = compare_outputs(&p, &yv, &yr, mag, label);
                            XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
                        } else {
                            XT_CHECK(memcmp(first, yv.data, yb) == 0, "%s [%s]: bits differ from phase 0", label,
                                     via ? "constant weights" : "conv");
                        }
                        runs++;
                    }
                }
                xconv_plan_destroy(plan);
                free(xm), free(ym), free(first), free(mag);
                free(x.data), free(w.data), free(b.data), free(yr.data);
            }
    printf("phases: %d runs\n", runs);
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_error err;
        XT_CHECK(xconv_context_create(&o, &CTX[t], &err) == XCONV_STATUS_OK, "context: %s", err.description);
    }
    tu_rng r = {77};
    int combo = 0;
    for (int ci = 0; ci < NCASES; ci++)
        for (int li = 0; li < 2; li++)
            for (int pi = 0; pi < NPAIRS; pi++, combo++) {
                const xconv_layout L = li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
                run_case(&CASES[ci], L, PAIRS[pi][0], PAIRS[pi][1], combo % V_COUNT, combo % 3 != 0,
                         (combo / V_COUNT) % 2 == 1, FILL_RANDOM, &r);
            }
    /* The fast path's float dtypes (f32, bf16, f16 -> f32, f8e4m3, f8e5m2) with infinities
     * and NaNs, every view */
    static const int nonfinite_pairs[] = {12, 11, 10, 23, 24, 8, 9};
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 7; q++)
            for (int v = 0; v < V_COUNT; v++, combo++)
                run_case(&CASES[ci], XCONV_LAYOUT_CHANNELS_LAST, PAIRS[nonfinite_pairs[q]][0],
                         PAIRS[nonfinite_pairs[q]][1], v, combo % 2 == 0, false, FILL_NONFINITE, &r);
    /* The fast path's 16- and 32-bit integers (u16, i16, u32, i32, u16 -> u32), every view:
     * the loop above gives each pair one view per case, which left some without the dense
     * channels-last views the fast path takes */
    static const int wide_int_pairs[] = {2, 3, 4, 5, 20};
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 5; q++)
            for (int v = 0; v < V_COUNT; v++, combo++)
                run_case(&CASES[ci], XCONV_LAYOUT_CHANNELS_LAST, PAIRS[wide_int_pairs[q]][0],
                         PAIRS[wide_int_pairs[q]][1], v, combo % 2 == 0, false, FILL_RANDOM, &r);
    /* The fast path's 64-bit compute types (u64, i64, f64, c64, c128), every view of every
     * case in both layouts (channels-first runs the portable planes path: the same checks
     * against the same oracle), random fills; then channels-last with infinities and NaNs
     * (floats) or integer extremes (u64, i64) */
    static const int qword_pairs[] = {6, 7, 13, 14, 15};
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 5; q++)
            for (int li = 0; li < 2; li++)
                for (int v = 0; v < V_COUNT; v++, combo++)
                    run_case(&CASES[ci], li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST,
                             PAIRS[qword_pairs[q]][0], PAIRS[qword_pairs[q]][1], v, combo % 2 == 0,
                             false, FILL_RANDOM, &r);
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 5; q++)
            for (int v = 0; v < V_COUNT; v++, combo++) {
                const xconv_dtype xdt = PAIRS[qword_pairs[q]][0];
                run_case(&CASES[ci], XCONV_LAYOUT_CHANNELS_LAST, xdt, PAIRS[qword_pairs[q]][1], v,
                         combo % 2 == 0, false, tu_is_int(xdt) ? FILL_EXTREMES : FILL_NONFINITE, &r);
            }
    check_f8_codecs(XCONV_DTYPE_F8E4M3);
    check_f8_codecs(XCONV_DTYPE_F8E5M2);
    check_bf16_blocks(&r);
    check_phases(&r);
    /* again with bf16 y rounded without vcvtne2ps2bf16 (what CPUs without AVX512-BF16 run) */
    setenv("XCONV_DW_BF16HW", "0", 1);
    check_bf16_blocks(&r);
    unsetenv("XCONV_DW_BF16HW");
    printf("depthwise comparisons against cpu.ref: %d\n", compared);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_depthwise");
}
