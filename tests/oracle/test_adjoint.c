/*
 * test_adjoint.c — conv_transpose is the adjoint of conv (DESIGN.md §1):
 *
 *     <conv(x, w), v> == <x, conv_transpose(v, w)>
 *
 * with the same weight tensor, stride, dilation, padding and groups, and output padding
 * op_i = (X_i + lo_i + hi_i - t_i*(K_i - 1) - 1) - (Y_i - 1)*s_i (the remainder conv's floor
 * dropped), so that the transpose's output has x's shape. The inner products are bilinear
 * (no conjugation for complex): the transpose formula multiplies by w, not conj(w).
 *
 * Channels-first, conv's w [Cout, Cin/g, K] is the transpose's [in, out/g, K] as is.
 * Channels-last, both ops take [out, K, in/g], so the transpose's weight is conv's regrouped:
 * w_T[G*Cin/g + b, k, a] = w[G*Cout/g + a, k, b]; when groups == 1 or Cin/g == 1 that is a
 * strided view of the same buffer (and is passed as one), otherwise a copy.
 *
 * Integers: exact, computed in wrapping u64 and compared modulo 2^bits(y) (y = x's dtype or
 * wider). Floats: |lhs - rhs| <= c * K_red * eps * sum |x||w||v|. Every pair of (conv engine,
 * transpose engine) that supports the problem must satisfy the identity.
 */
#include "common/ref_conv.h"
#include "harness.h"

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_U8, XCONV_DTYPE_U8},     {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_U16, XCONV_DTYPE_U16},   {XCONV_DTYPE_I16, XCONV_DTYPE_I16},
    {XCONV_DTYPE_U32, XCONV_DTYPE_U32},   {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U64, XCONV_DTYPE_U64},   {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U32},    {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
    {XCONV_DTYPE_I16, XCONV_DTYPE_I64},   {XCONV_DTYPE_U32, XCONV_DTYPE_U64},
    {XCONV_DTYPE_U8, XCONV_DTYPE_I16},    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F64, XCONV_DTYPE_F64},   {XCONV_DTYPE_C64, XCONV_DTYPE_C64},
    {XCONV_DTYPE_C128, XCONV_DTYPE_C128}, {XCONV_DTYPE_F16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},  {XCONV_DTYPE_F32, XCONV_DTYPE_F64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C128},
};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))
#define MAX_ENGINES 32

/* A conv problem with random geometry; Y >= 1 by construction. */
static tu_problem random_conv(tu_rng *r, int index)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = XCONV_OP_CONV;
    p.d = 1 + index % 3;
    p.layout = (xconv_layout)((index % 6) / 3);
    p.n = tu_int(r, 1, 2);
    int64_t gsel = tu_int(r, 0, 3);
    p.groups = gsel < 2 ? 1 : tu_int(r, 2, 3);
    p.cin = p.groups * tu_int(r, 1, 3);
    p.cout = p.groups * tu_int(r, 1, 3);
    if (gsel == 3) p.cin = p.cout = p.groups; /* depthwise */
    for (int i = 0; i < p.d; i++) {
        p.k[i] = tu_int(r, 1, 3);
        p.stride[i] = tu_int(r, 1, 3);
        p.dil[i] = tu_int(r, 1, 3);
        p.lo[i] = tu_int(r, 0, 2);
        p.hi[i] = tu_int(r, 0, 2);
        int64_t need = p.dil[i] * (p.k[i] - 1) + 1 - p.lo[i] - p.hi[i];
        p.x[i] = tu_int(r, need > 1 ? need : 1, (need > 1 ? need : 1) + (p.d == 3 ? 3 : 6));
    }
    p.xdt = PAIRS[(index / 6) % NPAIRS][0];
    p.ydt = PAIRS[(index / 6) % NPAIRS][1];
    tu_problem_finish(&p);
    return p;
}

/* The transpose problem that maps conv's y shape back onto its x shape. */
static tu_problem transpose_of(const tu_problem *c)
{
    tu_problem t = *c;
    t.op = XCONV_OP_CONV_TRANSPOSE;
    t.cin = c->cout;
    t.cout = c->cin;
    for (int i = 0; i < 3; i++) {
        t.x[i] = c->y[i];
        t.opad[i] = i < c->d ? (c->x[i] + c->lo[i] + c->hi[i] - c->dil[i] * (c->k[i] - 1) - 1) -
                                   (c->y[i] - 1) * c->stride[i]
                             : 0;
    }
    tu_problem_finish(&t);
    return t;
}

/* The transpose's weight: the same tensor channels-first; channels-last a view of it when the
 * regrouping is expressible with strides, else a copy. `owned` says whether to free data. */
static xconv_tensor transpose_weight(const tu_problem *c, const xconv_tensor *w, bool *owned)
{
    *owned = false;
    if (c->layout == XCONV_LAYOUT_CHANNELS_FIRST) return *w;
    int     rank = c->d + 2;
    int64_t cin_g = c->cin / c->groups, cout_g = c->cout / c->groups;
    int64_t st[XCONV_MAX_RANK], step = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = step;
        step *= w->shape[i];
    }
    xconv_tensor t = *w;
    t.shape[0] = c->cin;
    t.shape[rank - 1] = cout_g;
    if (c->groups == 1 || cin_g == 1) {
        /* [G*cin_g + b, k, a] sits at (G*cout_g + a)*st0 + k*st_k + b*st_last. */
        t.strided = true;
        t.offset = 0;
        t.strides[0] = c->groups == 1 ? st[rank - 1] : cout_g * st[0];
        for (int i = 1; i < rank - 1; i++) t.strides[i] = st[i];
        t.strides[rank - 1] = st[0];
        t.buffer_bytes = (size_t)step * tu_info(w->dtype)->size;
        return t;
    }
    xconv_tensor copy = tu_alloc(w->dtype, rank, t.shape, 0);
    int64_t      from[XCONV_MAX_RANK] = {0}, to[XCONV_MAX_RANK] = {0};
    do {
        int64_t G = from[0] / cout_g, a = from[0] % cout_g, b = from[rank - 1];
        memcpy(to, from, sizeof to);
        to[0] = G * cin_g + b;
        to[rank - 1] = a;
        tu_store(w->dtype, copy.data, tu_offset(&copy, to), tu_load(w->dtype, w->data, tu_offset(w, from)));
    } while (tu_next_index(rank, w->shape, from));
    *owned = true;
    return copy;
}

/* <a, b> over all elements of two same-shaped tensors (a in its dtype, b in its own). */
static tu_val inner(const xconv_tensor *a, const xconv_tensor *b)
{
    tu_val      acc = {0, 0.0, 0.0};
    long double re = 0.0L, im = 0.0L;
    int64_t     idx[XCONV_MAX_RANK] = {0};
    if (tu_numel(a->rank, a->shape) == 0) return acc;
    do {
        tu_val u = tu_load(a->dtype, a->data, tu_offset(a, idx));
        tu_val v = tu_load(b->dtype, b->data, tu_offset(b, idx));
        acc.u += u.u * v.u;
        re += (long double)u.re * v.re - (long double)u.im * v.im;
        im += (long double)u.re * v.im + (long double)u.im * v.re;
    } while (tu_next_index(a->rank, a->shape, idx));
    acc.re = (double)re;
    acc.im = (double)im;
    return acc;
}

/* sum over y of mag(conv at y) * |v[y]|: the scale of both sides' rounding errors. */
static double error_scale(const tu_problem *c, const xconv_tensor *x, const xconv_tensor *w,
                          const xconv_tensor *v)
{
    int64_t count = tu_ycount(c);
    tu_val *out = calloc((size_t)count + 1, sizeof(tu_val));
    double *mag = calloc((size_t)count + 1, sizeof(double));
    tu_ref_conv(c, x, w, NULL, out, mag);
    double  total = 0.0;
    int64_t idx[XCONV_MAX_RANK], j[3];
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t co = 0; co < c->cout; co++)
            for (j[0] = 0; j[0] < c->y[0]; j[0]++)
                for (j[1] = 0; j[1] < c->y[1]; j[1]++)
                    for (j[2] = 0; j[2] < c->y[2]; j[2]++) {
                        tu_act_index(c->layout, c->d, n, co, j, idx);
                        tu_val vv = tu_load(v->dtype, v->data, tu_offset(v, idx));
                        total += mag[tu_ylin(c, n, co, j)] * hypot(vv.re, vv.im);
                    }
    free(out);
    free(mag);
    return total;
}

static double unit_roundoff(xconv_dtype y)
{
    return (y == XCONV_DTYPE_F64 || y == XCONV_DTYPE_C128) ? 0x1p-53 : 0x1p-24;
}

static void run_problem(xconv_context *ctx, tu_rng *r, int index)
{
    tu_problem c = random_conv(r, index), t = transpose_of(&c);
    int        rank = c.d + 2;
    int64_t    xs[5], ws[5], bs[1], ys[5];
    tu_shapes(&c, xs, ws, bs, ys);
    xconv_tensor x = tu_alloc(c.xdt, rank, xs, 0), w = tu_alloc(c.xdt, rank, ws, 0);
    xconv_tensor v = tu_alloc(c.xdt, rank, ys, 0);
    xconv_tensor cy = tu_alloc(c.ydt, rank, ys, 0xA5), ux = tu_alloc(c.ydt, rank, xs, 0xA5);
    tu_fill(&x, r, tu_gen_wide);
    tu_fill(&w, r, tu_gen_wide);
    tu_fill(&v, r, tu_gen_wide);
    bool         owned;
    xconv_tensor wt = transpose_weight(&c, &w, &owned);
    char         desc[300], tdesc[300];
    tu_describe(&c, desc, sizeof desc);
    tu_describe(&t, tdesc, sizeof tdesc);

    /* One inner product per engine that runs each side. */
    tu_val      lhs[MAX_ENGINES + 1], rhs[MAX_ENGINES + 1];
    const char *lname[MAX_ENGINES + 1], *rname[MAX_ENGINES + 1];
    int         nl = 0, nr = 0;
    for (int e = -1; e < xconv_engine_count() && e < MAX_ENGINES; e++) {
        const char *forced = e < 0 ? NULL : xconv_engine_name(e), *used;
        bool        must = !forced || strcmp(forced, "cpu.ref") == 0;
        xconv_error err;
        xconv_status st = tu_conv(e & 1 ? ctx : NULL, &c, &x, &w, NULL, &cy, forced, &used, &err);
        if (st == XCONV_STATUS_OK) {
            lname[nl] = forced ? forced : "planner";
            lhs[nl++] = inner(&cy, &v);
        } else {
            XT_CHECK(!must && st == XCONV_STATUS_UNSUPPORTED, "%s [%s]: %s: %s", desc,
                     forced ? forced : "planner", xconv_status_name(st), err.description);
        }
        st = tu_conv(e & 1 ? NULL : ctx, &t, &v, &wt, NULL, &ux, forced, &used, &err);
        if (st == XCONV_STATUS_OK) {
            rname[nr] = forced ? forced : "planner";
            rhs[nr++] = inner(&x, &ux);
        } else {
            XT_CHECK(!must && st == XCONV_STATUS_UNSUPPORTED, "%s [%s]: %s: %s", tdesc,
                     forced ? forced : "planner", xconv_status_name(st), err.description);
        }
    }
    XT_CHECK(nl > 0 && nr > 0, "%s: nothing ran", desc);

    bool   is_int = tu_is_int(c.xdt);
    double tol = 0.0;
    if (!is_int) {
        int64_t kk = c.k[0] * c.k[1] * c.k[2];
        int64_t kred = (c.cin / c.groups > c.cout / c.groups ? c.cin / c.groups : c.cout / c.groups) * kk;
        double  cfac = tu_is_complex(c.xdt) ? 8.0 : 4.0;
        tol = cfac * (double)(kred + 2) * unit_roundoff(c.ydt) * error_scale(&c, &x, &w, &v);
    }
    uint64_t mask = tu_mask(tu_info(c.ydt)->bits);
    for (int a = 0; a < nl; a++)
        for (int b = 0; b < nr; b++) {
            bool ok;
            if (is_int)
                ok = ((lhs[a].u ^ rhs[b].u) & mask) == 0;
            else
                ok = fabs(lhs[a].re - rhs[b].re) <= tol && fabs(lhs[a].im - rhs[b].im) <= tol;
            XT_CHECK(ok,
                     "%s (transpose: %s) [conv %s, transpose %s]: <conv(x,w), v> = %.17g%+.17gi "
                     "(0x%" PRIx64 "), <x, conv_transpose(v,w)> = %.17g%+.17gi (0x%" PRIx64
                     "), tolerance %.3g",
                     desc, tdesc, lname[a], rname[b], lhs[a].re, lhs[a].im, lhs[a].u & mask,
                     rhs[b].re, rhs[b].im, rhs[b].u & mask, tol);
        }
    if (owned) free(wt.data);
    free(x.data);
    free(w.data);
    free(v.data);
    free(cy.data);
    free(ux.data);
}

int main(void)
{
    xconv_context        *ctx = NULL;
    xconv_context_options opt = {.threads = 2};
    xconv_error           err;
    XT_CHECK(xconv_context_create(&opt, &ctx, &err) == XCONV_STATUS_OK, "context: %s", err.description);
    tu_rng rng = {31337};
    /* 6 geometries (rank x layout) per dtype pair, 4 rounds: every pair meets every rank and
     * both layouts. */
    for (int i = 0; i < NPAIRS * 6 * 4; i++) run_problem(ctx, &rng, i);
    xconv_context_destroy(ctx);
    return xt_finish("test_adjoint");
}
