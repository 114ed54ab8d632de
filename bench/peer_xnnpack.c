/*
 * peer_xnnpack.c — XNNPACK (Debian libxnnpack-dev, the 2022 snapshot) as a benchmark peer:
 * the NHWC 2-D convolution and deconvolution operators, without bias, one configuration:
 *
 *   xnnpack.nhwc   x [N, H, W, Cin], weights [Cout, KH, KW, Cin/g], y [N, OH, OW, Cout]
 *
 * 1-D problems run as 2-D with H = 1; XNNPACK has no 3-D convolution. Dtypes: f32, f16 (if
 * this CPU has the kernels XNNPACK wants for it), and i8 / u8 through the quantized qs8 /
 * qu8 operators. The quantized ones do the same multiply-adds but requantize the sums to 8
 * bits (scale 1/1024, zero points 0), and the f16 kernels accumulate in f16, so those are
 * timed but not compared with xconv.
 * Threads: a pthreadpool of the bench's thread count.
 */
#include "bench.h"

#ifdef XCONV_HAVE_XNNPACK

#include <math.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xnnpack.h>

const char *const bench_xnnpack_names[] = {"xnnpack.nhwc", NULL};

static bool initialized;
static pthreadpool_t pool;
static int pool_threads;

typedef struct xnn_state {
    xnn_operator_t op;
    void          *x, *w, *y;
    xconv_dtype    y_dtype;
    int64_t        n, cout, ys; /* y [n, ys, cout] */
} xnn_state;

static void peer_destroy(void *state)
{
    xnn_state *s = state;
    if (!s) return;
    if (s->op) xnn_delete_operator(s->op);
    free(s->x);
    free(s->w);
    free(s->y);
    free(s);
}

static int peer_run(void *state)
{
    xnn_state *s = state;
    return xnn_run_operator(s->op, pool) == xnn_status_success ? 0 : -1;
}

static int peer_output(void *state, double *y)
{
    xnn_state *s = state;
    /* [N, Y, Cout] -> [N, Cout, Y] */
    for (int64_t b = 0; b < s->n; b++)
        for (int64_t c = 0; c < s->cout; c++)
            for (int64_t i = 0; i < s->ys; i++)
                y[(b * s->cout + c) * s->ys + i] =
                    bench_get(s->y_dtype, s->y, (b * s->ys + i) * s->cout + c);
    return 0;
}

static const char *status_name(enum xnn_status st)
{
    switch (st) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
    default: return "error";
    }
}

/* The 2-D view: (H, W) sizes and parameters, with H = 1 for a 1-D problem. */
typedef struct view2d {
    uint32_t ih, iw, kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, ah, aw, oh, ow;
} view2d;

static view2d make_view(const bench_problem *p)
{
    view2d v = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1};
    int w = p->rank - 1, h = p->rank - 2; /* the innermost dims */
    v.iw = (uint32_t)p->in[w];
    v.kw = (uint32_t)p->k[w];
    v.sw = (uint32_t)p->stride[w];
    v.dw = (uint32_t)p->dil[w];
    v.pl = (uint32_t)p->pad_lo[w];
    v.pr = (uint32_t)p->pad_hi[w];
    v.aw = (uint32_t)p->out_pad[w];
    v.ow = (uint32_t)p->out[w];
    if (h >= 0) {
        v.ih = (uint32_t)p->in[h];
        v.kh = (uint32_t)p->k[h];
        v.sh = (uint32_t)p->stride[h];
        v.dh = (uint32_t)p->dil[h];
        v.pt = (uint32_t)p->pad_lo[h];
        v.pb = (uint32_t)p->pad_hi[h];
        v.ah = (uint32_t)p->out_pad[h];
        v.oh = (uint32_t)p->out[h];
    }
    return v;
}

/* Creates and sets up the operator for s (whose buffers are filled). */
static enum xnn_status make_op(const bench_problem *p, xconv_dtype dt, const view2d *v,
                               xnn_state *s, const char **kind)
{
    uint32_t g = (uint32_t)p->groups;
    size_t icg = (size_t)(p->cin / p->groups), ocg = (size_t)(p->cout / p->groups);
    size_t ic = (size_t)p->cin, oc = (size_t)p->cout, n = (size_t)p->n;
    bool conv = p->op == XCONV_OP_CONV;
    enum xnn_status st;
    /* Requantization scale 1 * 1 / 1024: inside every XNNPACK version's accepted range. */
    const float in_scale = 1.0f, k_scale = 1.0f, out_scale = 1024.0f;
    switch (dt) {
    case XCONV_DTYPE_F32:
        *kind = "f32";
        st = conv ? xnn_create_convolution2d_nhwc_f32(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, s->w, NULL, -INFINITY, INFINITY, 0, &s->op)
                  : xnn_create_deconvolution2d_nhwc_f32(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, s->w, NULL, -INFINITY, INFINITY, 0, &s->op);
        if (st != xnn_status_success) return st;
        return conv ? xnn_setup_convolution2d_nhwc_f32(s->op, n, v->ih, v->iw, s->x, s->y, pool)
                    : xnn_setup_deconvolution2d_nhwc_f32(s->op, n, v->ih, v->iw, v->ah, v->aw,
                                                         s->x, s->y, pool);
    case XCONV_DTYPE_F16:
        *kind = "f16";
        st = conv ? xnn_create_convolution2d_nhwc_f16(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, s->w, NULL, -INFINITY, INFINITY, 0, &s->op)
                  : xnn_create_deconvolution2d_nhwc_f16(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, s->w, NULL, -INFINITY, INFINITY, 0, &s->op);
        if (st != xnn_status_success) return st;
        return conv ? xnn_setup_convolution2d_nhwc_f16(s->op, n, v->ih, v->iw, s->x, s->y, pool)
                    : xnn_setup_deconvolution2d_nhwc_f16(s->op, n, v->ih, v->iw, v->ah, v->aw,
                                                         s->x, s->y, pool);
    case XCONV_DTYPE_I8:
        *kind = "qs8 (requantized to i8)";
        st = conv ? xnn_create_convolution2d_nhwc_qs8(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, 0, in_scale, k_scale, s->w, NULL, 0, out_scale, -128,
                        127, 0, &s->op)
                  : xnn_create_deconvolution2d_nhwc_qs8(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, 0, in_scale, k_scale, s->w, NULL, 0, out_scale, -128,
                        127, 0, &s->op);
        if (st != xnn_status_success) return st;
        return conv ? xnn_setup_convolution2d_nhwc_qs8(s->op, n, v->ih, v->iw, s->x, s->y, pool)
                    : xnn_setup_deconvolution2d_nhwc_qs8(s->op, n, v->ih, v->iw, v->ah, v->aw,
                                                         s->x, s->y, pool);
    case XCONV_DTYPE_U8:
        *kind = "qu8 (requantized to u8)";
        st = conv ? xnn_create_convolution2d_nhwc_qu8(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, 0, in_scale, 0, k_scale, s->w, NULL, 0, out_scale, 0,
                        255, 0, &s->op)
                  : xnn_create_deconvolution2d_nhwc_qu8(
                        v->pt, v->pr, v->pb, v->pl, v->kh, v->kw, v->sh, v->sw, v->dh, v->dw, g,
                        icg, ocg, ic, oc, 0, in_scale, 0, k_scale, s->w, NULL, 0, out_scale, 0,
                        255, 0, &s->op);
        if (st != xnn_status_success) return st;
        return conv ? xnn_setup_convolution2d_nhwc_qu8(s->op, n, v->ih, v->iw, s->x, s->y, pool)
                    : xnn_setup_deconvolution2d_nhwc_qu8(s->op, n, v->ih, v->iw, v->ah, v->aw,
                                                         s->x, s->y, pool);
    default:
        return xnn_status_unsupported_parameter;
    }
}

static void create_one(const bench_problem *p, const bench_data *d, bench_peer *peer)
{
    xconv_dtype dt = d->x_dtype;
    bool known = dt == XCONV_DTYPE_F32 || dt == XCONV_DTYPE_F16 || dt == XCONV_DTYPE_I8 ||
                 dt == XCONV_DTYPE_U8;
    bool same_y = d->y_dtype == dt;
    bool quantized = dt == XCONV_DTYPE_I8 || dt == XCONV_DTYPE_U8;
    if (!known || (!same_y && !quantized)) {
        snprintf(peer->unsupported, sizeof peer->unsupported, "XNNPACK has no %s -> %s conv",
                 xconv_dtype_name(dt), xconv_dtype_name(d->y_dtype));
        return;
    }
    if (p->rank == 3) {
        snprintf(peer->unsupported, sizeof peer->unsupported, "XNNPACK has no 3-D convolution");
        return;
    }
    view2d v = make_view(p);
    if (p->op == XCONV_OP_CONV_TRANSPOSE && (v.ah >= v.sh || v.aw >= v.sw)) {
        snprintf(peer->unsupported, sizeof peer->unsupported,
                 "XNNPACK needs output_padding < stride");
        return;
    }
    xnn_state *s = calloc(1, sizeof *s);
    size_t es = xconv_dtype_size(dt);
    int64_t xs = bench_spatial(p->in, p->rank);
    if (s) {
        s->n = p->n;
        s->cout = p->cout;
        s->ys = bench_spatial(p->out, p->rank);
        s->y_dtype = dt; /* the quantized operators write 8 bits too */
        /* XNNPACK may read XNN_EXTRA_BYTES past the end of x and w. */
        s->x = bench_alloc((size_t)bench_x_elems(p) * es + XNN_EXTRA_BYTES + 64);
        s->w = bench_alloc((size_t)bench_w_elems(p) * es + XNN_EXTRA_BYTES + 64);
        s->y = bench_alloc((size_t)bench_y_elems(p) * es + 64);
    }
    if (!s || !s->x || !s->w || !s->y) {
        peer_destroy(s);
        snprintf(peer->unsupported, sizeof peer->unsupported, "out of memory");
        return;
    }
    bench_to_channels_last(d->x, s->x, p->n, p->cin, xs, es);
    bench_weight_to_okc(p, d->w, s->w, es);
    const char *kind = "";
    enum xnn_status st = make_op(p, dt, &v, s, &kind);
    if (st != xnn_status_success) {
        peer_destroy(s);
        snprintf(peer->unsupported, sizeof peer->unsupported, "XNNPACK %s %s: %s", kind,
                 p->op_name, status_name(st));
        return;
    }
    snprintf(peer->impl, sizeof peer->impl, "%s %s", p->op == XCONV_OP_CONV ? "conv" : "deconv",
             kind);
    /* Only f32 has xconv's semantics: the quantized operators requantize, and the f16
     * kernels round the accumulator to f16 after every multiply-add. */
    bool same = dt == XCONV_DTYPE_F32;
    if (dt == XCONV_DTYPE_F16)
        snprintf(peer->impl, sizeof peer->impl, "%s f16 (accumulates in f16)",
                 p->op == XCONV_OP_CONV ? "conv" : "deconv");
    peer->comparable = same;
    peer->state = s;
    peer->run = peer_run;
    peer->output = same ? peer_output : NULL;
    peer->destroy = peer_destroy;
}

int bench_xnnpack_create(const bench_problem *p, const bench_data *d, int threads,
                         bench_peer *peers)
{
    bench_peer *peer = &peers[0];
    memset(peer, 0, sizeof *peer);
    snprintf(peer->name, sizeof peer->name, "%s", bench_xnnpack_names[0]);
    if (!initialized) {
        enum xnn_status st = xnn_initialize(NULL);
        if (st != xnn_status_success) {
            snprintf(peer->unsupported, sizeof peer->unsupported, "XNNPACK init: %s",
                     status_name(st));
            return 1;
        }
        initialized = true;
    }
    if (!pool || pool_threads != threads) {
        if (pool) pthreadpool_destroy(pool);
        pool = pthreadpool_create((size_t)threads);
        pool_threads = threads;
    }
    create_one(p, d, peer);
    return 1;
}

#else /* !XCONV_HAVE_XNNPACK */

const char *const bench_xnnpack_names[] = {NULL};

int bench_xnnpack_create(const bench_problem *p, const bench_data *d, int threads,
                         bench_peer *peers)
{
    (void)p;
    (void)d;
    (void)threads;
    (void)peers;
    return 0;
}

#endif
