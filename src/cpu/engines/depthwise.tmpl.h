/*
 * depthwise.tmpl.h — the portable depthwise stencils for one compute type; included by
 * depthwise.c with XCONV_T (name), XCONV_CT (C type) and XCONV_MAC(acc, a, b), #undef'd at
 * the end. They serve every dtype, layout, multiplier and CPU; depthwise_avx512.c takes the
 * common channels-last cases on AVX-512.
 *
 * Per output element: acc = bias, then every tap in (k0, k1, k2) order, taps in the padding
 * as 0 * w (NaN for an infinite w, as IEEE has it). Work is cut into items of at most
 * g->seg outputs along dim 2 (and g->cc channels), so the scratch stays small whatever the
 * problem; the order of terms does not depend on the cut.
 */
#define XCONV_CAT2(a, b) a##_##b
#define XCONV_CAT(a, b) XCONV_CAT2(a, b)
#define XCONV_NAME(name) XCONV_CAT(name, XCONV_T)

/* w[k, c0 .. c0 + cnt) in the compute type: the packed row, or gathered into wt. */
static const XCONV_CT *XCONV_NAME(dw_wrow)(const dw_ctx *d, int64_t k, int64_t c0, int64_t cnt,
                                          XCONV_CT *wt)
{
    const xconv_canon *p = d->e->p;
    if (d->wk) return (const XCONV_CT *)d->wk + k * p->cout + c0;
    for (int64_t c = c0; c < c0 + cnt; c++) load_w(d, k, c, wt + (c - c0), 1);
    return wt;
}

/*
 * Channels nearer than dim 2 (channels-last or strided channels): item = (n, j0, j1, segment,
 * channel chunk). acc [seg][cc]; x is read in place when it holds the compute type with
 * dense channels, else converted, once per kernel row into a window of the pixels the
 * segment reads (tmp [pixels][cin chunk]) or, when that window would be large (a wide
 * dilation), once per tap.
 */
XCONV_DW_CLONES static void XCONV_NAME(dw_pixels)(const dw_ctx *d, char *scratch, int64_t begin,
                                                  int64_t end)
{
    const xconv_exec *e = d->e;
    const xconv_canon *p = e->p;
    const dw_geom *g = d->g;
    const int64_t mult = p->cout_g, X2 = p->x_size[2], K2 = p->k_size[2];
    const int64_t s2 = p->stride[2], t2 = p->dil[2], lo2 = p->pad_lo[2];
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const bool direct = xconv__same_bits(p->ct, p->x_dtype) && p->x_sc == 1;
    XCONV_CT *acc = (XCONV_CT *)scratch;
    XCONV_CT *tmp = (XCONV_CT *)(scratch + g->acc_bytes);
    XCONV_CT *wt = (XCONV_CT *)(scratch + g->acc_bytes + g->tmp_bytes);
    XCONV_CT zero;
    memset(&zero, 0, sizeof zero);
    for (int64_t item = begin; item < end; item++) {
        const int64_t ch = item % g->nch, sg = item / g->nch % g->nseg, row = item / (g->nch * g->nseg);
        const int64_t n = row / (p->y_size[0] * p->y_size[1]);
        const int64_t j0 = row / p->y_size[1] % p->y_size[0], j1 = row % p->y_size[1];
        const int64_t ja = sg * g->seg, jb = ja + g->seg < p->y_size[2] ? ja + g->seg : p->y_size[2];
        const int64_t c0 = ch * g->cc, c1 = c0 + g->cc < p->cout ? c0 + g->cc : p->cout, cn = c1 - c0;
        const int64_t i0 = c0 / mult, in_n = (c1 - 1) / mult - i0 + 1; /* input channels read */
        const int64_t jn = jb - ja;
        for (int64_t j = 0; j < jn; j++) {
            if (d->bp) memcpy(acc + j * cn, (const XCONV_CT *)d->bp + c0, sizeof(XCONV_CT) * (size_t)cn);
            else for (int64_t c = 0; c < cn; c++) acc[j * cn + c] = zero;
        }
        /* the window of x pixels the segment reads along dim 2, clipped to x */
        int64_t wlo = ja * s2 - lo2, whi = (jb - 1) * s2 + (K2 - 1) * t2 - lo2 + 1;
        if (wlo < 0) wlo = 0;
        if (whi > X2) whi = X2;
        int64_t kidx = 0;
        for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
            const int64_t q0 = j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
            const bool in0 = q0 >= 0 && q0 < p->x_size[0];
            for (int64_t k1 = 0; k1 < p->k_size[1]; k1++) {
                const int64_t q1 = j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                const bool in_row = in0 && q1 >= 0 && q1 < p->x_size[1];
                const int64_t el = in_row ? p->x_off + n * p->x_sn + q0 * p->x_ss[0] + q1 * p->x_ss[1] + i0 * p->x_sc : 0;
                if (in_row && !direct && g->window)
                    for (int64_t q2 = wlo; q2 < whi; q2++)
                        xconv__load_row(p->ct, p->x_dtype, (const char *)e->x + (el + q2 * p->x_ss[2]) * xes,
                                        p->x_sc, tmp + (q2 - wlo) * in_n, in_n);
                for (int64_t k2 = 0; k2 < K2; k2++, kidx++) {
                    const XCONV_CT *w = XCONV_NAME(dw_wrow)(d, kidx, c0, cn, wt);
                    /* outputs whose tap lands inside x: q2 = j2*s2 + k2*t2 - lo2 in [0, X2) */
                    const int64_t base = k2 * t2 - lo2;
                    int64_t va = base >= 0 ? 0 : (-base + s2 - 1) / s2;
                    int64_t vb = X2 - base > 0 ? (X2 - base + s2 - 1) / s2 : 0;
                    if (!in_row) va = vb = ja;
                    va = va < ja ? ja : va > jb ? jb : va;
                    vb = vb < va ? va : vb > jb ? jb : vb;
                    if (in_row && !direct && !g->window)
                        for (int64_t j2 = va; j2 < vb; j2++)
                            xconv__load_row(p->ct, p->x_dtype,
                                            (const char *)e->x + (el + (j2 * s2 + base) * p->x_ss[2]) * xes,
                                            p->x_sc, tmp + (j2 - va) * in_n, in_n);
                    for (int64_t j2 = ja; j2 < jb; j2++) {
                        XCONV_CT *ac = acc + (j2 - ja) * cn;
                        if (j2 < va || j2 >= vb) {
                            for (int64_t c = 0; c < cn; c++) XCONV_MAC(ac[c], zero, w[c]);
                            continue;
                        }
                        const int64_t q2 = j2 * s2 + base;
                        const XCONV_CT *src = direct ? (const XCONV_CT *)e->x + el + q2 * p->x_ss[2]
                                              : g->window ? tmp + (q2 - wlo) * in_n
                                                          : tmp + (j2 - va) * in_n;
                        if (mult == 1)
                            for (int64_t c = 0; c < cn; c++) XCONV_MAC(ac[c], src[c], w[c]);
                        else
                            for (int64_t c = 0; c < cn; c++) XCONV_MAC(ac[c], src[(c0 + c) / mult - i0], w[c]);
                    }
                }
            }
        }
        for (int64_t j2 = ja; j2 < jb; j2++) {
            const int64_t el = p->y_off + n * p->y_sn + c0 * p->y_sc + j0 * p->y_ss[0] + j1 * p->y_ss[1] +
                               j2 * p->y_ss[2];
            xconv__store_row(p->ct, p->y_dtype, acc + (j2 - ja) * cn, (char *)e->y + el * yes, p->y_sc, cn);
        }
    }
}

/*
 * Dim 2 nearer than the channels (channels-first): item = (n, output channel, j0, j1,
 * segment), vectorized along dim 2. acc [seg]; per tap, x is read in place (compute type)
 * or its seg values converted into tmp.
 */
XCONV_DW_CLONES static void XCONV_NAME(dw_planes)(const dw_ctx *d, char *scratch, int64_t begin,
                                                  int64_t end)
{
    const xconv_exec *e = d->e;
    const xconv_canon *p = e->p;
    const dw_geom *g = d->g;
    const int64_t C = p->cout, X2 = p->x_size[2], K2 = p->k_size[2];
    const int64_t s2 = p->stride[2], t2 = p->dil[2], lo2 = p->pad_lo[2];
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const bool direct = xconv__same_bits(p->ct, p->x_dtype);
    XCONV_CT *acc = (XCONV_CT *)scratch;
    XCONV_CT *tmp = (XCONV_CT *)(scratch + g->acc_bytes);
    XCONV_CT zero;
    memset(&zero, 0, sizeof zero);
    for (int64_t item = begin; item < end; item++) {
        const int64_t sg = item % g->nseg, rest = item / g->nseg;
        const int64_t j1 = rest % p->y_size[1], j0 = rest / p->y_size[1] % p->y_size[0];
        const int64_t plane = rest / (p->y_size[0] * p->y_size[1]);
        const int64_t n = plane / C, co = plane % C, ci = co / p->cout_g;
        const int64_t ja = sg * g->seg, jb = ja + g->seg < p->y_size[2] ? ja + g->seg : p->y_size[2];
        const int64_t jn = jb - ja;
        XCONV_CT bias = zero;
        if (d->bp) bias = ((const XCONV_CT *)d->bp)[co];
        for (int64_t j = 0; j < jn; j++) acc[j] = bias;
        int64_t kidx = 0;
        for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
            const int64_t q0 = j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
            const bool in0 = q0 >= 0 && q0 < p->x_size[0];
            for (int64_t k1 = 0; k1 < p->k_size[1]; k1++) {
                const int64_t q1 = j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                const bool in_row = in0 && q1 >= 0 && q1 < p->x_size[1];
                const int64_t el = in_row ? p->x_off + n * p->x_sn + ci * p->x_sc + q0 * p->x_ss[0] + q1 * p->x_ss[1] : 0;
                for (int64_t k2 = 0; k2 < K2; k2++, kidx++) {
                    XCONV_CT w;
                    if (d->wk) w = ((const XCONV_CT *)d->wk)[kidx * C + co];
                    else load_w(d, kidx, co, &w, 1);
                    const int64_t base = k2 * t2 - lo2;
                    int64_t va = base >= 0 ? 0 : (-base + s2 - 1) / s2;
                    int64_t vb = X2 - base > 0 ? (X2 - base + s2 - 1) / s2 : 0;
                    if (!in_row) va = vb = ja;
                    va = va < ja ? ja : va > jb ? jb : va;
                    vb = vb < va ? va : vb > jb ? jb : vb;
                    /* a padding tap reads 0; 0 * w still joins the sum (Inf * 0) */
                    for (int64_t j2 = ja; j2 < va; j2++) XCONV_MAC(acc[j2 - ja], zero, w);
                    for (int64_t j2 = vb; j2 < jb; j2++) XCONV_MAC(acc[j2 - ja], zero, w);
                    if (va == vb) continue;
                    const int64_t first = el + (va * s2 + base) * p->x_ss[2];
                    XCONV_CT *ac = acc + (va - ja);
                    const int64_t vn = vb - va;
                    if (direct && p->x_ss[2] * s2 == 1) {
                        const XCONV_CT *src = (const XCONV_CT *)e->x + first;
                        for (int64_t j = 0; j < vn; j++) XCONV_MAC(ac[j], src[j], w);
                    } else if (direct) {
                        const XCONV_CT *src = (const XCONV_CT *)e->x + first;
                        const int64_t st = p->x_ss[2] * s2;
                        for (int64_t j = 0; j < vn; j++) XCONV_MAC(ac[j], src[j * st], w);
                    } else {
                        xconv__load_row(p->ct, p->x_dtype, (const char *)e->x + first * xes, p->x_ss[2] * s2, tmp, vn);
                        for (int64_t j = 0; j < vn; j++) XCONV_MAC(ac[j], tmp[j], w);
                    }
                }
            }
        }
        const int64_t el = p->y_off + n * p->y_sn + co * p->y_sc + j0 * p->y_ss[0] + j1 * p->y_ss[1] + ja * p->y_ss[2];
        xconv__store_row(p->ct, p->y_dtype, acc, (char *)e->y + el * yes, p->y_ss[2], jn);
    }
}

#undef XCONV_NAME
#undef XCONV_CAT
#undef XCONV_CAT2
#undef XCONV_T
#undef XCONV_CT
#undef XCONV_MAC
