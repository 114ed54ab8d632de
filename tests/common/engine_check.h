/*
 * engine_check.h — what the engine tests share to compare an engine's y with cpu.ref's:
 * views of a fresh canary-filled buffer (dense, padded, flipped, broadcast), random fills of
 * every slot, and the comparison itself (integers exact, floats within tol(y) * sum|x*w|
 * plus one ulp of a reduced y, NaN and infinities where cpu.ref has them, and no byte outside
 * y's elements written); and, for table-driven tests, a named case (table_case) checked at
 * 1, 2 and 3 threads in one call (check_engine_threads).
 */
#ifndef XCONV_TEST_ENGINE_CHECK_H
#define XCONV_TEST_ENGINE_CHECK_H

#include "common/ref_conv.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

/* (x, y) dtype pairs the engine tests run: all 16 dtypes, then widened outputs. */
/* clang-format off */
#define ENGINE_CHECK_PAIRS                                                                        \
    {XCONV_DTYPE_U8, XCONV_DTYPE_U8},         {XCONV_DTYPE_I8, XCONV_DTYPE_I8},               \
    {XCONV_DTYPE_U16, XCONV_DTYPE_U16},       {XCONV_DTYPE_I16, XCONV_DTYPE_I16},             \
    {XCONV_DTYPE_U32, XCONV_DTYPE_U32},       {XCONV_DTYPE_I32, XCONV_DTYPE_I32},             \
    {XCONV_DTYPE_U64, XCONV_DTYPE_U64},       {XCONV_DTYPE_I64, XCONV_DTYPE_I64},             \
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E4M3}, {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F8E5M2},       \
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},       {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},           \
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},       {XCONV_DTYPE_F64, XCONV_DTYPE_F64},             \
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},       {XCONV_DTYPE_C128, XCONV_DTYPE_C128},           \
    {XCONV_DTYPE_U8, XCONV_DTYPE_I32},        {XCONV_DTYPE_U8, XCONV_DTYPE_U64},              \
    {XCONV_DTYPE_I8, XCONV_DTYPE_I16},        {XCONV_DTYPE_I8, XCONV_DTYPE_I64},              \
    {XCONV_DTYPE_U16, XCONV_DTYPE_U32},       {XCONV_DTYPE_I32, XCONV_DTYPE_I64},             \
    {XCONV_DTYPE_U32, XCONV_DTYPE_U64},       {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},            \
    {XCONV_DTYPE_F16, XCONV_DTYPE_F32},       {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32},          \
    {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F64},    {XCONV_DTYPE_F32, XCONV_DTYPE_F64},             \
    {XCONV_DTYPE_C64, XCONV_DTYPE_C128}
/* clang-format on */

enum { V_DENSE, V_PADDED, V_FLIPPED, V_BROADCAST, V_COUNT };
static const char *const VIEW_NAMES[V_COUNT] = {"dense", "padded", "flipped", "broadcast"};

/*
 * A strided view of `shape` in a fresh buffer filled with canary 0xA5: the innermost dim at
 * step `inner` (1: dense), every outer dim padded by 3 elements, an offset; flipped: the dims
 * of `flip` (a bit mask) walked backwards; broadcast (inputs only): dim 0 at stride 0.
 */
static inline xconv_tensor make_view_inner(xconv_dtype dt, int rank, const int64_t *shape,
                                           int view, unsigned flip, bool output, int64_t inner)
{
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.strided = true;
    int64_t step = inner, lo = 1 + 2 * inner, hi = 0;
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

/*
 * A view of `shape` in a fresh buffer filled with canary 0xA5. padded: rows padded, the
 * innermost step 2, an offset; flipped: padded with the dims of `flip` (a bit mask) walked
 * backwards; broadcast (inputs only): padded with dim 0 at stride 0.
 */
static inline xconv_tensor make_view(xconv_dtype dt, int rank, const int64_t *shape, int view,
                                     unsigned flip, bool output)
{
    if (view == V_DENSE) return tu_alloc(dt, rank, shape, 0xA5);
    return make_view_inner(dt, rank, shape, view, flip, output, 2);
}

/* p's geometry from a table case c, any struct with the fields op, d, n, cin, cout, groups
 * and, per spatial dim, x, k, s (stride), t (dilation), lo, hi, opad (the engine tests'
 * tables differ in their other fields). */
#define CASE_GEOMETRY(p, c)                                                                   \
    do {                                                                                      \
        (p)->op = (c)->op, (p)->d = (c)->d, (p)->n = (c)->n, (p)->cin = (c)->cin;             \
        (p)->cout = (c)->cout, (p)->groups = (c)->groups;                                     \
        for (int i_ = 0; i_ < (c)->d; i_++) {                                                 \
            (p)->x[i_] = (c)->x[i_], (p)->k[i_] = (c)->k[i_], (p)->stride[i_] = (c)->s[i_];   \
            (p)->dil[i_] = (c)->t[i_], (p)->lo[i_] = (c)->lo[i_], (p)->hi[i_] = (c)->hi[i_];  \
            (p)->opad[i_] = (c)->opad[i_];                                                    \
        }                                                                                     \
    } while (0)

/* Every element slot of the buffer gets a random value of dt (gaps too: harmless). */
static inline void fill_all(xconv_tensor *t, tu_rng *r)
{
    const int64_t es = (int64_t)xconv_dtype_size(t->dtype);
    const int64_t slots =
        (int64_t)(t->buffer_bytes ? t->buffer_bytes : (size_t)(tu_numel(t->rank, t->shape) * es)) /
        es;
    for (int64_t i = 0; i < slots; i++)
        tu_store(t->dtype, t->data, i, tu_gen_wide(r, t->dtype));
}

static inline size_t view_bytes(const xconv_tensor *t)
{
    return t->buffer_bytes ? t->buffer_bytes
                           : (size_t)tu_numel(t->rank, t->shape) * xconv_dtype_size(t->dtype);
}

/* One ulp of a reduced-float y at |v| (0 for the others). */
static inline double ulp_of(xconv_dtype dt, double v)
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
static inline double tol_of(xconv_dtype ydt)
{
    return ydt == XCONV_DTYPE_F64 || ydt == XCONV_DTYPE_C128 ? 1e-12 : 1e-5;
}

/* NaN only with NaN and infinities only with themselves (IEEE makes both independent of
 * the summation order); finite values within `bound`. */
static inline bool close_to(double a, double e, double bound)
{
    if (isnan(a) || isnan(e)) return isnan(a) && isnan(e);
    if (isinf(a) || isinf(e)) return a == e;
    return fabs(a - e) <= bound;
}

/* sum |x * w| per element of y, the float tolerances' scale (tu_ref_conv), or NULL for integer
 * y, which compares exactly. free() it. */
static inline double *ref_mags(const tu_problem *p, const xconv_tensor *x, const xconv_tensor *w,
                               const xconv_tensor *b)
{
    if (tu_is_int(p->ydt)) return NULL;
    tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(p));
    double *mag = malloc(sizeof(double) * (size_t)tu_ycount(p));
    tu_ref_conv(p, x, w, b, exact, mag);
    free(exact);
    return mag;
}

/* Compares y (engine) with yr (cpu.ref): elements exactly (integers) or within tolerance;
 * every byte that is not an element must still hold the canary. Returns mismatches. */
static inline int64_t compare_outputs(const tu_problem *p, const xconv_tensor *y,
                                      const xconv_tensor *yr, const double *mag, const char *label)
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
    for (size_t i = 0; i < bytes; i++)
        touched += !mask[i] && yb[i] != 0xA5;
    if (touched)
        fprintf(stderr, "  %s: %" PRId64 " bytes outside y's elements written\n", label, touched);
    free(mask);
    return bad + touched;
}

/* The spatial dims of an activation in layout L, as a bit mask. */
static inline unsigned spatial_mask(xconv_layout L, int d)
{
    unsigned m = 0;
    for (int i = 0; i < d; i++)
        m |= 1u << (L == XCONV_LAYOUT_CHANNELS_FIRST ? 2 + i : 1 + i);
    return m;
}

/* A named problem of an engine test's table (CASE_GEOMETRY reads it). */
typedef struct table_case {
    const char *name;
    xconv_op op;
    int d;
    int64_t n, cin, cout, groups;
    int64_t x[3], k[3], s[3], t[3], lo[3], hi[3], opad[3];
} table_case;

/* A table case as dense tensors of one layout: x, w, bias and two y buffers (the engine's and
 * cpu.ref's), canary-filled. */
typedef struct dense_problem {
    tu_problem   p;
    xconv_tensor x, w, b, y, yr;
} dense_problem;

static inline dense_problem dense_of_case(const table_case *c, xconv_layout L, xconv_dtype xdt,
                                          xconv_dtype ydt, bool bias)
{
    dense_problem d;
    memset(&d, 0, sizeof d);
    CASE_GEOMETRY(&d.p, c);
    d.p.layout = L, d.p.xdt = xdt, d.p.ydt = ydt, d.p.has_bias = bias;
    tu_problem_finish(&d.p);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&d.p, xs, ws, bs, ys);
    const int rank = d.p.d + 2;
    d.x = make_view(xdt, rank, xs, V_DENSE, 0, false);
    d.w = make_view(xdt, rank, ws, V_DENSE, 0, false);
    d.b = make_view(ydt, 1, bs, V_DENSE, 0, false);
    d.y = make_view(ydt, rank, ys, V_DENSE, 0, true);
    d.yr = make_view(ydt, rank, ys, V_DENSE, 0, true);
    return d;
}

static inline void dense_free(dense_problem *d)
{
    free(d->x.data), free(d->w.data), free(d->b.data), free(d->y.data), free(d->yr.data);
}

/* The views of check_engine_threads' problems: dense; the innermost dim dense (channels-last
 * activations keep dense channels) with the outer dims padded and those in `flip` walked
 * backwards; every dim padded, those in `flip` backwards. A test may add views after these
 * (its own view function); the bias is strided in TV_STRIDED, else dense. */
enum { TV_DENSE, TV_ROWS, TV_STRIDED, TV_COUNT };
static const char *const TV_NAMES[TV_COUNT] = {"dense", "dense-innermost rows", "strided"};

static inline xconv_tensor table_view(int view, xconv_dtype dt, int rank, const int64_t *shape,
                                      unsigned flip, bool output)
{
    if (view == TV_ROWS)
        return make_view_inner(dt, rank, shape, V_FLIPPED, flip & ~(1u << (rank - 1)), output, 1);
    return make_view(dt, rank, shape, view == TV_DENSE ? V_DENSE : V_FLIPPED, flip, output);
}

typedef xconv_tensor (*table_view_fn)(int view, xconv_dtype dt, int rank, const int64_t *shape,
                                      unsigned flip, bool output);

/* One problem p (geometry, layout, dtypes and bias set) in views `view` of view_of, random
 * values: cpu.ref's y, then `engine` on ctx[1], ctx[2], ctx[3] (1, 2 and 3 threads) into
 * fresh canary-filled copies of y's buffer. The engine's y must match cpu.ref's (integers
 * exactly, floats within tolerance of sum|x*w|, no byte outside y's elements written), and
 * the three runs must give the same bits. */
static inline void check_engine_threads(xconv_context *const ctx[4], const tu_problem *p,
                                        const char *engine, table_view_fn view_of, int view,
                                        const char *view_name, const char *case_name, tu_rng *r)
{
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(p, xs, ws, bs, ys);
    const int rank = p->d + 2;
    const unsigned sp = spatial_mask(p->layout, p->d);
    xconv_tensor x = view_of(view, p->xdt, rank, xs, sp, false);
    xconv_tensor w = view_of(view, p->xdt, rank, ws, 1u, false);
    xconv_tensor b = view_of(view == TV_STRIDED ? TV_STRIDED : TV_DENSE, p->ydt, 1, bs, 1u, false);
    xconv_tensor yr = view_of(view, p->ydt, rank, ys, sp | 1u, true);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);

    char desc[200], label[320];
    tu_describe(p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s views%s", case_name, desc, view_name,
             p->has_bias ? ", bias" : "");
    xconv_error err;
    const char *used;
    xconv_status st = tu_conv(ctx[1], p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    double *mag = ref_mags(p, &x, &w, &b);
    const size_t nb = view_bytes(&yr);
    xconv_tensor y[4];
    for (int t = 1; t <= 3; t++) {
        y[t] = yr;
        y[t].data = malloc(nb);
        memset(y[t].data, 0xA5, nb);
        st = tu_conv(ctx[t], p, &x, &w, &b, &y[t], engine, &used, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s [%s, %d threads]: %s", label, engine, t,
                 err.description);
    }
    const int64_t bad = compare_outputs(p, &y[1], &yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
             "%s: 1, 2 and 3 threads give different bits", label);
    for (int t = 1; t <= 3; t++) free(y[t].data);
    free(mag);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

/* Every (case, (x, y) dtype pair, layout, view) of a table through check_engine_threads, both
 * layouts, with a bias in two of every three problems (the problem count mod 3 != bias_off);
 * allow_tf32: the plans' option of that name (cpu.winograd runs only with it). */
static inline void check_engine_table(xconv_context *const ctx[4], const char *engine,
                                      const table_case *cases, int ncases,
                                      const xconv_dtype (*pairs)[2], int npairs,
                                      table_view_fn view_of, const char *const *view_names,
                                      int nviews, int bias_off, bool allow_tf32, tu_rng *r)
{
    int combo = 0;
    for (int ci = 0; ci < ncases; ci++)
        for (int pi = 0; pi < npairs; pi++)
            for (int li = 0; li < 2; li++)
                for (int v = 0; v < nviews; v++, combo++) {
                    tu_problem p;
                    memset(&p, 0, sizeof p);
                    CASE_GEOMETRY(&p, &cases[ci]);
                    p.layout = li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
                    p.has_bias = combo % 3 != bias_off, p.xdt = pairs[pi][0], p.ydt = pairs[pi][1];
                    p.allow_tf32 = allow_tf32;
                    tu_problem_finish(&p);
                    check_engine_threads(ctx, &p, engine, view_of, v, view_names[v],
                                         cases[ci].name, r);
                }
}

static inline void padding_setup(tu_problem *p, const table_case *c, xconv_layout L,
                                 xconv_dtype xdt, xconv_dtype ydt, bool bias)
{
    memset(p, 0, sizeof *p);
    CASE_GEOMETRY(p, c);
    p->layout = L, p->has_bias = bias, p->xdt = xdt, p->ydt = ydt;
    tu_problem_finish(p);
}

/*
 * Padding terms that are not exact zeros, for the engines that leave out taps reading only
 * padding (cpu.igemm, cpu.avx512bf16): `engine` on case c, channels-last dense, dtype dt.
 * Kind 0 puts an Inf weight on the first tap of the kernel (0 * Inf = NaN wherever that tap
 * is in the padding), kind 1 a NaN there, kind 2 x = -0 everywhere with positive weights
 * and a bias of -0 (cpu.ref: -0 at the positions whose taps are all in x, +0 where a
 * padding term +0 joins). Kinds 0 and 1 are compared within tolerance (NaN where cpu.ref
 * has NaN), kind 2 bit for bit; each per execute (1-3 threads) and with the weights packed
 * once.
 */
static inline void check_padding_terms(xconv_context *const ctx[4], const char *engine,
                                       const table_case *c, xconv_dtype dt, int kind, tu_rng *r)
{
    tu_problem p;
    padding_setup(&p, c, XCONV_LAYOUT_CHANNELS_LAST, dt, dt, kind == 2);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p, xs, ws, bs, ys);
    const int rank = c->d + 2;
    xconv_tensor x = tu_alloc(dt, rank, xs, 0xA5), w = tu_alloc(dt, rank, ws, 0xA5);
    xconv_tensor b = tu_alloc(dt, 1, bs, 0xA5), yr = tu_alloc(dt, rank, ys, 0xA5);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);
    const int64_t nw = tu_numel(rank, ws);
    if (kind == 2) {
        tu_val nz = {0, -0.0, tu_is_complex(dt) ? -0.0 : 0.0};
        for (int64_t i = 0; i < tu_numel(rank, xs); i++) tu_store(dt, x.data, i, nz);
        for (int64_t i = 0; i < nw; i++) {
            tu_val v = tu_load(dt, w.data, i);
            v.re = fabs(v.re) + 0.25, v.im = fabs(v.im) + 0.25;
            tu_store(dt, w.data, i, v);
        }
        for (int64_t i = 0; i < p.cout; i++) tu_store(dt, b.data, i, nz);
    } else {
        /* w [Cout, K..., Cin/g] channels-last: element (o, k = 0, c) of every o, c */
        const int64_t kk = tu_numel(c->d, c->k), cin_g = p.cin / p.groups;
        const double special = kind == 0 ? INFINITY : NAN;
        for (int64_t o = 0; o < p.cout; o += 3)
            for (int64_t ch = 0; ch < cin_g; ch += 5) {
                tu_val v = {0, special, 0.0};
                tu_store(dt, w.data, o * kk * cin_g + ch, v);
            }
    }
    char desc[200], label[320];
    tu_describe(&p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s", c->name, desc,
             kind == 0 ? "Inf weights" : kind == 1 ? "NaN weights" : "x -0, bias -0");
    xconv_error err;
    const char *used;
    xconv_status st = tu_conv(ctx[1], &p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    double *mag = malloc(sizeof(double) * (size_t)tu_ycount(&p));
    tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&p));
    tu_ref_conv(&p, &x, &w, &b, exact, mag);
    free(exact);
    const size_t nb = view_bytes(&yr);
    xconv_tensor y = yr;
    y.data = malloc(nb);
    for (int t = 1; t <= 4; t++) {
        memset(y.data, 0xA5, nb);
        if (t <= 3) {
            st = tu_conv(ctx[t], &p, &x, &w, &b, &y, engine, &used, &err);
        } else { /* weights packed once, at plan creation */
            xconv_params q = tu_params(&p);
            xconv_plan_options o = {.engine = engine, .constant_weights = true};
            xconv_plan *plan = NULL;
            st = xconv_plan_create(ctx[2], &q, &x, &w, p.has_bias ? &b : NULL, &y, &o, &plan, &err);
            if (st == XCONV_STATUS_OK)
                st = xconv_plan_execute(plan, x.data, NULL, p.has_bias ? b.data : NULL, y.data,
                                        NULL, 0, &err);
            xconv_plan_destroy(plan);
        }
        XT_CHECK(st == XCONV_STATUS_OK, "%s [%s, run %d]: %s", label, engine, t, err.description);
        if (kind == 2) {
            XT_CHECK(memcmp(y.data, yr.data, nb) == 0, "%s (run %d): bits differ from cpu.ref",
                     label, t);
        } else {
            const int64_t bad = compare_outputs(&p, &y, &yr, mag, label);
            XT_CHECK(bad == 0, "%s (run %d): %" PRId64 " elements differ from cpu.ref", label, t,
                     bad);
        }
    }
    free(mag), free(y.data);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

#endif
