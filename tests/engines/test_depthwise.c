/*
 * test_depthwise.c — the engine cpu.depthwise against cpu.ref (forced by name) on the edges
 * of its blocking: output widths around its tiles of 8 (1, 7, 8, 9, 15, 16, 17, ...), channel
 * counts around its blocks of 16 (1, 15, 16, 17, 33), 3 and 5 taps at strides 1 and 2 (the
 * specialized tiles) and other kernels, channel multipliers > 1, dilation, asymmetric padding
 * including padding wider than the kernel, 1-D/2-D/3-D, both layouts, dense, padded, flipped
 * (negative strides) and broadcast views, with and without bias, all 16 dtypes and the
 * widened y dtypes, 1, 2 and 3 threads (identical bits). Integers bit-exact; floats within
 * 1e-5 (1e-12 for f64 compute) of sum|x*w| plus one ulp of a reduced y; infinities and NaNs
 * where cpu.ref puts them (a padded tap adds 0 * w). Every byte of y's buffer outside its
 * elements must keep its canary, and the planner must pick cpu.depthwise for these problems.
 */
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
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* (x, y) dtype pairs: all 16 dtypes, then widened outputs. */
/* clang-format off */
static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_U8, XCONV_DTYPE_U8},         {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_U16, XCONV_DTYPE_U16},       {XCONV_DTYPE_I16, XCONV_DTYPE_I16},
    {XCONV_DTYPE_U32, XCONV_DTYPE_U32},       {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U64, XCONV_DTYPE_U64},       {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E4M3}, {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F8E5M2},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},       {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},       {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},       {XCONV_DTYPE_C128, XCONV_DTYPE_C128},
    {XCONV_DTYPE_U8, XCONV_DTYPE_I32},        {XCONV_DTYPE_U8, XCONV_DTYPE_U64},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I16},        {XCONV_DTYPE_I8, XCONV_DTYPE_I64},
    {XCONV_DTYPE_U16, XCONV_DTYPE_U32},       {XCONV_DTYPE_I32, XCONV_DTYPE_I64},
    {XCONV_DTYPE_U32, XCONV_DTYPE_U64},       {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F32},       {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F64},    {XCONV_DTYPE_F32, XCONV_DTYPE_F64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C128},       {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U16},
};
/* clang-format on */
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))

enum { V_DENSE, V_PADDED, V_FLIPPED, V_BROADCAST, V_COUNT };
static const char *const VIEW_NAMES[V_COUNT] = {"dense", "padded", "flipped", "broadcast"};

/*
 * A view of `shape` in a fresh buffer filled with canary 0xA5. padded: rows padded, the
 * innermost step 2, an offset; flipped: padded with the dims of `flip` (a bit mask) walked
 * backwards; broadcast (inputs only): padded with dim 0 at stride 0.
 */
static xconv_tensor make_view(xconv_dtype dt, int rank, const int64_t *shape, int view,
                              unsigned flip, bool output)
{
    if (view == V_DENSE) return tu_alloc(dt, rank, shape, 0xA5);
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.strided = true;
    int64_t step = 2, lo = 5, hi = 0;
    for (int d = rank - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        const bool neg = view == V_FLIPPED && ((flip >> d) & 1u);
        const bool zero = view == V_BROADCAST && !output && d == 0;
        t.strides[d] = zero ? 0 : neg ? -step : step;
        const int64_t reach = (shape[d] > 0 ? shape[d] - 1 : 0) * step;
        if (!zero) {
            if (neg)
                lo += reach;
            else
                hi += reach;
        }
        step = step * (shape[d] > 0 ? shape[d] : 1) + 3;
    }
    t.offset = lo;
    t.buffer_bytes = (size_t)(lo + hi + 4) * xconv_dtype_size(dt);
    t.data = malloc(t.buffer_bytes);
    memset(t.data, 0xA5, t.buffer_bytes);
    return t;
}

/* Every element slot of the buffer gets a random value of dt (gaps too: harmless). */
static void fill_all(xconv_tensor *t, tu_rng *r)
{
    const int64_t es = (int64_t)xconv_dtype_size(t->dtype);
    const int64_t slots =
        (int64_t)(t->buffer_bytes ? t->buffer_bytes : (size_t)(tu_numel(t->rank, t->shape) * es)) /
        es;
    for (int64_t i = 0; i < slots; i++) tu_store(t->dtype, t->data, i, tu_gen_wide(r, t->dtype));
}

static size_t view_bytes(const xconv_tensor *t)
{
    return t->buffer_bytes ? t->buffer_bytes
                           : (size_t)tu_numel(t->rank, t->shape) * xconv_dtype_size(t->dtype);
}

/* One ulp of a reduced-float y at |v| (0 for the others). */
static double ulp_of(xconv_dtype dt, double v)
{
    if (tu_info(dt)->kind != TU_REDUCED) return 0.0;
    tu_fmt f = tu_fmt_of(dt);
    int e;
    frexp(fabs(v), &e);
    e -= 1;
    if (e < 1 - f.bias) e = 1 - f.bias;
    return ldexp(1.0, e - f.mbits);
}

/* Relative tolerance (of sum|x*w|) of a float y: f64 compute for f64/c128 outputs. */
static double tol_of(xconv_dtype ydt)
{
    return ydt == XCONV_DTYPE_F64 || ydt == XCONV_DTYPE_C128 ? 1e-12 : 1e-5;
}

/* NaN only with NaN and infinities only with themselves (IEEE makes both independent of
 * the summation order); finite values within `bound`. */
static bool close_to(double a, double e, double bound)
{
    if (isnan(a) || isnan(e)) return isnan(a) && isnan(e);
    if (isinf(a) || isinf(e)) return a == e;
    return fabs(a - e) <= bound;
}

/* Compares y (engine) with yr (cpu.ref): elements exactly (integers) or within tolerance;
 * every byte that is not an element must still hold the canary. Returns mismatches. */
static int64_t compare_outputs(const tu_problem *p, const xconv_tensor *y, const xconv_tensor *yr,
                               const double *mag, const char *label)
{
    const size_t bytes = view_bytes(y), es = xconv_dtype_size(y->dtype);
    unsigned char *mask = calloc(1, bytes);
    int64_t bad = 0, idx[XCONV_MAX_RANK], j[3];
    const bool is_int = tu_is_int(y->dtype);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->cout; c++)
            for (j[0] = 0; j[0] < p->y[0]; j[0]++)
                for (j[1] = 0; j[1] < p->y[1]; j[1]++)
                    for (j[2] = 0; j[2] < p->y[2]; j[2]++) {
                        tu_act_index(p->layout, p->d, n, c, j, idx);
                        const int64_t off = tu_offset(y, idx);
                        memset(mask + off * (int64_t)es, 1, es);
                        tu_val a = tu_load(y->dtype, y->data, off),
                               e = tu_load(y->dtype, yr->data, off);
                        bool ok;
                        if (is_int) {
                            ok = tu_same(y->dtype, a, e);
                        } else {
                            double m = mag[tu_ylin(p, n, c, j)] * tol_of(y->dtype);
                            if (!isfinite(m)) m = INFINITY; /* an Inf or NaN input reached it */
                            const double bre = m + ulp_of(y->dtype, fmax(fabs(a.re), fabs(e.re)));
                            const double bim = m + ulp_of(y->dtype, fmax(fabs(a.im), fabs(e.im)));
                            ok = close_to(a.re, e.re, bre) && close_to(a.im, e.im, bim);
                        }
                        if (!ok && bad++ < 3)
                            fprintf(stderr,
                                    "  %s: y[n%" PRId64 " c%" PRId64 " %" PRId64 ",%" PRId64
                                    ",%" PRId64 "] = %.17g%+.17gi (%" PRIx64
                                    "), cpu.ref %.17g%+.17gi (%" PRIx64 ")\n",
                                    label, n, c, j[0], j[1], j[2], a.re, a.im, a.u, e.re, e.im,
                                    e.u);
                    }
    const unsigned char *yb = (const unsigned char *)y->data;
    int64_t touched = 0;
    for (size_t i = 0; i < bytes; i++) touched += !mask[i] && yb[i] != 0xA5;
    if (touched)
        fprintf(stderr, "  %s: %" PRId64 " bytes outside y's elements written\n", label, touched);
    free(mask);
    return bad + touched;
}

/* The spatial dims of an activation in layout L, as a bit mask. */
static unsigned spatial_mask(xconv_layout L, int d)
{
    unsigned m = 0;
    for (int i = 0; i < d; i++) m |= 1u << (L == XCONV_LAYOUT_CHANNELS_FIRST ? 2 + i : 1 + i);
    return m;
}

static int compared;

static void run_case(const dw_case *c, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt, int view,
                     bool bias, bool bias_in_y, bool nonfinite, tu_rng *r)
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
    snprintf(label, sizeof label, "%s: %s, %s views%s%s", c->name, desc, VIEW_NAMES[view],
             bias ? "" : ", no bias", nonfinite ? ", infinities and NaNs" : "");

    xconv_error err;
    const char *used = NULL;
    xconv_status st = tu_conv(CTX[1], &p, &x, &w, bias ? &b : NULL, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s %s", label, xconv_status_name(st), err.description);
    double *mag = NULL;
    if (!tu_is_int(ydt)) {
        tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&p));
        mag = malloc(sizeof(double) * (size_t)tu_ycount(&p));
        tu_ref_conv(&p, &x, &w, bias ? &b : NULL, exact, mag);
        free(exact);
    }
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
    compared++;
    int64_t bad = compare_outputs(&p, &y[1], &yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    const size_t nb = view_bytes(&yr);
    XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
             "%s: 1, 2 and 3 threads give different bits", label);
    for (int t = 1; t <= 3; t++) free(y[t].data);
    free(mag);
    free(x.data), free(w.data), free(b.data), free(yr.data);
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
                         (combo / V_COUNT) % 2 == 1, false, &r);
            }
    /* The fast path's dtypes (f32, bf16, f16 -> f32) with infinities and NaNs, every view */
    static const int nonfinite_pairs[] = {12, 11, 10, 23, 24};
    for (int ci = 0; ci < NCASES; ci++)
        for (int q = 0; q < 5; q++)
            for (int v = 0; v < V_COUNT; v++, combo++)
                run_case(&CASES[ci], XCONV_LAYOUT_CHANNELS_LAST, PAIRS[nonfinite_pairs[q]][0],
                         PAIRS[nonfinite_pairs[q]][1], v, combo % 2 == 0, false, true, &r);
    printf("depthwise comparisons against cpu.ref: %d\n", compared);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_depthwise");
}
