/*
 * normalize.c — a validated problem becomes the canonical form of internal.h: 3 spatial
 * dims, channels-first index order with the layout folded into strides, and the weight
 * addressed by (group, y channel in group, x channel in group, k). Engines see only this.
 */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

void xconv__view_strides(const xconv_tensor *t, int64_t *st, int64_t *off)
{
    if (t->strided) {
        memcpy(st, t->strides, sizeof(int64_t) * (size_t)t->rank);
        *off = t->offset;
        return;
    }
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->shape[i] > 0 ? t->shape[i] : 1;
    }
    *off = 0;
}

/* Splits an activation view (x or y) into n, channel and 3 spatial strides. */
static void split_activation(const xconv_tensor *t, int d, bool cl, int64_t *off, int64_t *sn,
                             int64_t *sc, int64_t ss[3])
{
    int64_t st[XCONV_MAX_RANK];
    xconv__view_strides(t, st, off);
    *sn = st[0];
    *sc = st[cl ? d + 1 : 1];
    for (int j = 0; j < 3; j++) {
        int i = j - (3 - d); /* the user's spatial dim, or < 0 for an added unit dim */
        ss[j] = i < 0 ? 0 : st[(cl ? 1 : 2) + i];
    }
}

void xconv__normalize(const xconv_params *p, const xconv_tensor *x, const xconv_tensor *w,
                      const xconv_tensor *bias, const xconv_tensor *y, xconv_canon *c)
{
    const int d = p->spatial_rank;
    const bool cl = p->layout == XCONV_LAYOUT_CHANNELS_LAST;
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    memset(c, 0, sizeof *c);
    c->op = p->op;
    c->spatial_rank = d;
    c->layout = p->layout;
    c->device = x->device;
    c->device_index = x->device_index;
    c->x_dtype = x->dtype;
    c->y_dtype = y->dtype;
    c->has_bias = bias != NULL;
    c->bias_dtype = bias ? bias->dtype : XCONV_DTYPE_INVALID;
    c->ct = xconv__compute_type(x->dtype, y->dtype);
    c->threads = 1;

    c->n = x->shape[0];
    c->cin = x->shape[cl ? d + 1 : 1];
    c->cout = y->shape[cl ? d + 1 : 1];
    c->groups = p->groups;
    c->cin_g = c->cin / p->groups;
    c->cout_g = c->cout / p->groups;
    for (int j = 0; j < 3; j++) {
        int i = j - (3 - d);
        bool unit = i < 0;
        c->x_size[j] = unit ? 1 : x->shape[(cl ? 1 : 2) + i];
        c->y_size[j] = unit ? 1 : y->shape[(cl ? 1 : 2) + i];
        c->k_size[j] = unit ? 1 : w->shape[(cl ? 1 : 2) + i];
        c->stride[j] = unit ? 1 : p->stride[i];
        c->dil[j] = unit ? 1 : p->dilation[i];
        c->pad_lo[j] = unit ? 0 : p->pad_lo[i];
        c->pad_hi[j] = unit ? 0 : p->pad_hi[i];
        c->opad[j] = unit || !tr ? 0 : p->output_padding[i];
    }

    split_activation(x, d, cl, &c->x_off, &c->x_sn, &c->x_sc, c->x_ss);
    split_activation(y, d, cl, &c->y_off, &c->y_sn, &c->y_sc, c->y_ss);

    int64_t st[XCONV_MAX_RANK];
    xconv__view_strides(w, st, &c->w_off);
    for (int j = 0; j < 3; j++) {
        int i = j - (3 - d);
        c->w_sk[j] = i < 0 ? 0 : st[(cl ? 1 : 2) + i];
    }
    if (cl) {            /* [Cout, K.., Cin/g], both ops (MLX) */
        c->w_so = st[0];
        c->w_si = st[d + 1];
        c->w_sg = c->cout_g * st[0];
    } else if (!tr) {    /* [Cout, Cin/g, K..] */
        c->w_so = st[0];
        c->w_si = st[1];
        c->w_sg = c->cout_g * st[0];
    } else {             /* [Cin, Cout/g, K..] */
        c->w_si = st[0];
        c->w_so = st[1];
        c->w_sg = c->cin_g * st[0];
    }
    if (bias) {
        xconv__view_strides(bias, st, &c->b_off);
        c->b_s = st[0];
    }

    /* A dim of size 1 is never stepped along: its stride is 0 in the canonical form, so no
     * engine multiplies a caller's huge stride by an index or an element size. */
    if (c->n == 1) c->x_sn = c->y_sn = 0;
    if (c->cin == 1) c->x_sc = 0;
    if (c->cout == 1) c->y_sc = 0, c->b_s = 0;
    if (c->cout_g == 1) c->w_so = 0;
    if (c->cin_g == 1) c->w_si = 0;
    if (c->groups == 1) c->w_sg = 0;
    for (int j = 0; j < 3; j++) {
        /* A stride or dilation that never moves an index is 1: conv with one output, a
         * transpose with one input, a kernel of one tap. Huge values there stay harmless. */
        if (tr ? c->x_size[j] == 1 : c->y_size[j] == 1) c->stride[j] = 1;
        if (c->k_size[j] == 1) c->dil[j] = 1;
        if (c->x_size[j] == 1) c->x_ss[j] = 0;
        if (c->y_size[j] == 1) c->y_ss[j] = 0;
        if (c->k_size[j] == 1) c->w_sk[j] = 0;
    }

    const int64_t ysp = xconv__prod3(c->y_size);
    const double macs_per_image = tr ? (double)c->cin * (double)c->cout_g * xconv__prod3(c->x_size)
                                     : (double)c->cout * (double)c->cin_g * (double)ysp;
    c->flops = 2.0 * (double)c->n * macs_per_image * (double)xconv__prod3(c->k_size);
}

const xconv_canon *xconv__patch_view(const xconv_canon *p, xconv_canon *view)
{
    if (p->op != XCONV_OP_CONV || p->groups != 1) return p;
    int64_t taps = 1;
    for (int d = 0; d < 3; d++) {
        if (p->k_size[d] != p->x_size[d] || p->y_size[d] != 1 || p->pad_lo[d] || p->pad_hi[d])
            return p;
        taps *= p->k_size[d];
    }
    if (taps == 1) return p;
    /* the taps' strides (innermost first) against those of the flattened order */
    bool cl = p->x_sc == 1 && p->w_si == 1, cf = p->x_sc == taps && p->w_si == taps;
    int64_t step = cl ? p->cin : 1;
    for (int d = 2; d >= 0; d--) {
        if (p->k_size[d] == 1) continue;
        if (p->x_ss[d] != step || p->w_sk[d] != step) cl = cf = false;
        step *= p->k_size[d];
    }
    if ((!cl && !cf) || p->n < 1) return p;
    *view = *p;
    view->cin = view->cin_g = p->cin * taps;
    view->x_sc = view->w_si = 1;
    for (int d = 0; d < 3; d++) {
        view->x_size[d] = view->k_size[d] = view->y_size[d] = 1;
        view->stride[d] = view->dil[d] = 1;
        view->x_ss[d] = view->y_ss[d] = view->w_sk[d] = 0;
    }
    /* the images as the positions of one: engines block positions within an image */
    view->n = 1;
    view->x_size[2] = view->y_size[2] = p->n;
    view->x_ss[2] = p->x_sn, view->y_ss[2] = p->y_sn;
    view->x_sn = view->y_sn = 0;
    return view;
}

void xconv__describe(const xconv_canon *c, char *buf, size_t size)
{
    const int d = c->spatial_rank, first = 3 - d;
    char xs[64] = "", ks[64] = "", ss[64] = "", ps[96] = "", ds[64] = "", os[64] = "";
    for (int j = first; j < 3; j++) {
        const char *sep = j == first ? "" : "x";
        size_t n;
        n = strlen(xs); snprintf(xs + n, sizeof xs - n, "%s%" PRId64, sep, c->x_size[j]);
        n = strlen(ks); snprintf(ks + n, sizeof ks - n, "%s%" PRId64, sep, c->k_size[j]);
        n = strlen(ss); snprintf(ss + n, sizeof ss - n, "%s%" PRId64, sep, c->stride[j]);
        n = strlen(ps); snprintf(ps + n, sizeof ps - n, "%s%" PRId64 ":%" PRId64, j == first ? "" : ",",
                                 c->pad_lo[j], c->pad_hi[j]);
        n = strlen(ds); snprintf(ds + n, sizeof ds - n, "%s%" PRId64, sep, c->dil[j]);
        n = strlen(os); snprintf(os + n, sizeof os - n, "%s%" PRId64, sep, c->opad[j]);
    }
    bool tr = c->op == XCONV_OP_CONV_TRANSPOSE;
    char dt[32];
    if (c->y_dtype == c->x_dtype) snprintf(dt, sizeof dt, "%s", xconv_dtype_name(c->x_dtype));
    else snprintf(dt, sizeof dt, "%s->%s", xconv_dtype_name(c->x_dtype), xconv_dtype_name(c->y_dtype));
    snprintf(buf, size,
             "%s%dd n%" PRId64 " cin%" PRId64 " cout%" PRId64 " x%s k%s s%s p%s d%s%s%s g%" PRId64
             "%s %s %s",
             tr ? "conv_transpose" : "conv", d, c->n, c->cin, c->cout, xs, ks, ss, ps, ds,
             tr ? " op" : "", tr ? os : "", c->groups, c->has_bias ? " bias" : "", dt,
             c->layout == XCONV_LAYOUT_CHANNELS_LAST ? "nxc" : "ncx");
}
