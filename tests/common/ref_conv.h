/*
 * ref_conv.h — the tests' own direct convolution, written from DESIGN.md §1 and nothing else:
 * a loop per output element over every (input channel, kernel position) of its group, reading
 * x, w and bias through their views (any layout, strides, offsets) with tensor_util.h.
 *
 *   conv:           y[n, G*cout_g + o, j] = bias + sum_{i,k} x[n, G*cin_g + i, j*s + k*t - lo] * w(G, o, i, k)
 *   conv_transpose: y[n, G*cout_g + o, j] = bias + sum_{i,k : j + lo = q*s + k*t} x[n, G*cin_g + i, q] * w(G, o, i, k)
 *
 * Integers accumulate exactly modulo 2^64 (so modulo 2^bits(y) too); floats accumulate in
 * double (exact for the small-integer data most tests use), complex in double pairs. Each
 * output also gets mag = sum |x*w| + |bias|, the scale of DESIGN.md §2's accuracy bound.
 */
#ifndef XCONV_TEST_REF_CONV_H
#define XCONV_TEST_REF_CONV_H

#include "common/tensor_util.h"

/* The logical channels-first index of y element (n, c, j0, j1, j2), row-major over
 * [N, Cout, Y0, Y1, Y2] with unit dims beyond d. */
static inline int64_t tu_ylin(const tu_problem *p, int64_t n, int64_t c, const int64_t *j)
{
    return (((n * p->cout + c) * p->y[0] + j[0]) * p->y[1] + j[1]) * p->y[2] + j[2];
}

static inline int64_t tu_ycount(const tu_problem *p)
{
    return p->n * p->cout * p->y[0] * p->y[1] * p->y[2];
}

/* Multiplies and adds into acc in the family of the dtype (ints modulo 2^64). */
static inline void tu_mac(bool is_int, tu_val *acc, tu_val a, tu_val b, double *mag)
{
    if (is_int) {
        acc->u += a.u * b.u;
        *mag += fabs(a.re * b.re);
        return;
    }
    acc->re += a.re * b.re - a.im * b.im;
    acc->im += a.re * b.im + a.im * b.re;
    *mag += hypot(a.re, a.im) * hypot(b.re, b.im);
}

/* The x position read by kernel tap k for output j in one dim, or -1 when it contributes
 * nothing (padding, or for conv_transpose not a multiple of the stride). */
static inline int64_t tu_src_pos(const tu_problem *p, int dim, int64_t j, int64_t k)
{
    if (p->op == XCONV_OP_CONV) {
        int64_t q = j * p->stride[dim] + k * p->dil[dim] - p->lo[dim];
        return q >= 0 && q < p->x[dim] ? q : -1;
    }
    int64_t num = j + p->lo[dim] - k * p->dil[dim];
    if (num < 0 || num % p->stride[dim] != 0) return -1;
    int64_t q = num / p->stride[dim];
    return q < p->x[dim] ? q : -1;
}

/*
 * Expected y of problem p (tensors in p->layout) into out[tu_ycount(p)] in logical order,
 * and mag (may be NULL). bias may be NULL when !p->has_bias. Results are exact sums, not
 * yet rounded to y's dtype: use tu_round_to for that.
 */
static inline void tu_ref_conv(const tu_problem *p, const xconv_tensor *x, const xconv_tensor *w,
                               const xconv_tensor *bias, tu_val *out, double *mag)
{
    bool    is_int = tu_is_int(p->xdt);
    int64_t cin_g = p->cin / p->groups, cout_g = p->cout / p->groups;
    int64_t idx[XCONV_MAX_RANK], j[3], k[3], q[3];
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t G = 0; G < p->groups; G++)
            for (int64_t o = 0; o < cout_g; o++)
                for (j[0] = 0; j[0] < p->y[0]; j[0]++)
                    for (j[1] = 0; j[1] < p->y[1]; j[1]++)
                        for (j[2] = 0; j[2] < p->y[2]; j[2]++) {
                            int64_t c = G * cout_g + o;
                            tu_val  acc = {0, 0.0, 0.0};
                            double  m = 0.0;
                            if (p->has_bias) {
                                tu_val b = tu_load(bias->dtype, bias->data, tu_offset(bias, &c));
                                acc = b;
                                m = is_int ? fabs(b.re) : hypot(b.re, b.im);
                            }
                            for (int64_t i = 0; i < cin_g; i++)
                                for (k[0] = 0; k[0] < p->k[0]; k[0]++)
                                    for (k[1] = 0; k[1] < p->k[1]; k[1]++)
                                        for (k[2] = 0; k[2] < p->k[2]; k[2]++) {
                                            bool inside = true;
                                            for (int dd = 0; dd < 3; dd++) {
                                                q[dd] = tu_src_pos(p, dd, j[dd], k[dd]);
                                                inside = inside && q[dd] >= 0;
                                            }
                                            if (!inside) continue;
                                            tu_act_index(p->layout, p->d, n, G * cin_g + i, q, idx);
                                            tu_val xv = tu_load(x->dtype, x->data, tu_offset(x, idx));
                                            tu_w_index(p->op, p->layout, p->d, cin_g, cout_g, G, o,
                                                       i, k, idx);
                                            tu_val wv = tu_load(w->dtype, w->data, tu_offset(w, idx));
                                            tu_mac(is_int, &acc, xv, wv, &m);
                                        }
                            int64_t lin = tu_ylin(p, n, c, j);
                            out[lin] = acc;
                            if (mag) mag[lin] = m;
                        }
}

/*
 * Compares y (in p->layout, any view) with the expected exact results. exact: every element
 * must equal the exact result rounded once to y's dtype (integers always are compared this
 * way). Otherwise floats must lie within tol * mag of the exact result. Prints the first few
 * mismatches under `label`; returns the number of mismatching elements.
 */
static inline int64_t tu_compare_y(const tu_problem *p, const xconv_tensor *y, const tu_val *expect,
                                   const double *mag, bool exact, double tol, const char *label)
{
    int64_t bad = 0, idx[XCONV_MAX_RANK], j[3];
    bool    is_int = tu_is_int(y->dtype);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->cout; c++)
            for (j[0] = 0; j[0] < p->y[0]; j[0]++)
                for (j[1] = 0; j[1] < p->y[1]; j[1]++)
                    for (j[2] = 0; j[2] < p->y[2]; j[2]++) {
                        int64_t lin = tu_ylin(p, n, c, j);
                        tu_act_index(p->layout, p->d, n, c, j, idx);
                        tu_val a = tu_load(y->dtype, y->data, tu_offset(y, idx));
                        tu_val e = expect[lin];
                        bool   ok;
                        if (is_int || exact) {
                            ok = tu_same(y->dtype, a, tu_round_to(y->dtype, e));
                        } else {
                            double bound = tol * (mag ? mag[lin] : 0.0) + 1e-300;
                            ok = (isnan(a.re) && isnan(e.re)) ||
                                 (fabs(a.re - e.re) <= bound && fabs(a.im - e.im) <= bound);
                        }
                        if (!ok && bad++ < 3) {
                            tu_val r = tu_round_to(y->dtype, e);
                            fprintf(stderr,
                                    "  %s: y[n%" PRId64 " c%" PRId64 " %" PRId64 ",%" PRId64
                                    ",%" PRId64 "] = %.17g%+.17gi (bits %016" PRIx64
                                    "), expected %.17g%+.17gi (bits %016" PRIx64 ")\n",
                                    label, n, c, j[0], j[1], j[2], a.re, a.im, a.u, r.re, r.im,
                                    r.u);
                        }
                    }
    return bad;
}

/* Allocates the four tensors of p contiguously (y filled with canary byte 0xA5) and fills x,
 * w, bias from gen(rng, dtype) for every element. */
typedef tu_val (*tu_gen_fn)(tu_rng *r, xconv_dtype dt);

static inline void tu_fill(xconv_tensor *t, tu_rng *r, tu_gen_fn gen)
{
    int64_t idx[XCONV_MAX_RANK] = {0};
    if (tu_numel(t->rank, t->shape) == 0) return;
    do {
        tu_store(t->dtype, t->data, tu_offset(t, idx), gen(r, t->dtype));
    } while (tu_next_index(t->rank, t->shape, idx));
}

/* Small integers in [-4, 4] (complex: both parts): exact in every dtype, and their sums stay
 * exact in f32 for the sizes tests use, so float results can be compared bit for bit. */
static inline tu_val tu_gen_small(tu_rng *r, xconv_dtype dt)
{
    tu_val v = tu_int_val(tu_int(r, -4, 4));
    if (tu_is_complex(dt)) v.im = (double)tu_int(r, -4, 4);
    return v;
}

/* Full-range random bits for integers; uniform [-1, 1) reals for floats. */
static inline tu_val tu_gen_wide(tu_rng *r, xconv_dtype dt)
{
    if (tu_is_int(dt)) {
        uint64_t b = tu_next(r);
        return (tu_val){b, (double)b, 0.0};
    }
    tu_val v = {0, 2.0 * tu_unit(r) - 1.0, 0.0};
    if (tu_is_complex(dt)) v.im = 2.0 * tu_unit(r) - 1.0;
    return v;
}

#endif
