/*
 * depthwise.tmpl.h — the depthwise stencils for one compute type; included by depthwise.c
 * with XCONV_T (name), XCONV_CT (C type) and XCONV_MAC(acc, a, b), #undef'd at the end.
 *
 * wk [K0*K1*K2, Cout] and bp [Cout] are packed in the compute type; acc and tmp are the
 * calling chunk's scratch.
 */
#define XCONV_CAT2(a, b) a##_##b
#define XCONV_CAT(a, b) XCONV_CAT2(a, b)
#define XCONV_NAME(name) XCONV_CAT(name, XCONV_T)

/*
 * Channels contiguous in x and y: one output row (n, j0, j1) at a time. acc holds the row,
 * [Y2, Cout]; tmp holds one input row [X2, Cin] converted to the compute type when x is of
 * another dtype (else x is read in place). Each tap adds a long run of channel vectors.
 * Taps in the padding add 0 * w (NaN for an infinite w, as IEEE has it).
 */
XCONV_DW_CLONES static void XCONV_NAME(dw_pixels)(const xconv_exec *e, const XCONV_CT *wk,
                                                  const XCONV_CT *bp, XCONV_CT *acc,
                                                  XCONV_CT *tmp, int64_t begin, int64_t end)
{
    const xconv_canon *p = e->p;
    const int64_t C = p->cout, cin = p->cin, mult = p->cout_g, Y2 = p->y_size[2], X2 = p->x_size[2];
    const int64_t s2 = p->stride[2], t2 = p->dil[2], lo2 = p->pad_lo[2];
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const bool direct = xconv__same_bits(p->ct, p->x_dtype);
    for (int64_t row = begin; row < end; row++) {
        const int64_t n = row / (p->y_size[0] * p->y_size[1]);
        const int64_t j0 = row / p->y_size[1] % p->y_size[0], j1 = row % p->y_size[1];
        for (int64_t j2 = 0; j2 < Y2; j2++) {
            if (bp) memcpy(acc + j2 * C, bp, sizeof(XCONV_CT) * (size_t)C);
            else memset(acc + j2 * C, 0, sizeof(XCONV_CT) * (size_t)C);
        }
        for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
            const int64_t q0 = j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
            const bool in0 = q0 >= 0 && q0 < p->x_size[0];
            for (int64_t k1 = 0; k1 < p->k_size[1]; k1++) {
                const int64_t q1 = j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                const bool in_row = in0 && q1 >= 0 && q1 < p->x_size[1];
                const XCONV_CT *xr = NULL;
                int64_t rs = cin;
                if (in_row) {
                    const int64_t el = p->x_off + n * p->x_sn + q0 * p->x_ss[0] + q1 * p->x_ss[1];
                    if (direct && (p->x_ss[2] == cin || X2 == 1)) {
                        xr = (const XCONV_CT *)((const char *)e->x + el * xes);
                    } else {
                        for (int64_t q2 = 0; q2 < X2; q2++)
                            xconv__load_row(p->ct, p->x_dtype,
                                            (const char *)e->x + (el + q2 * p->x_ss[2]) * xes,
                                            p->x_sc, tmp + q2 * cin, cin);
                        xr = tmp;
                    }
                }
                for (int64_t k2 = 0; k2 < p->k_size[2]; k2++) {
                    const XCONV_CT *w = wk + ((k0 * p->k_size[1] + k1) * p->k_size[2] + k2) * C;
                    /* outputs whose tap lands inside x: q2 = j2*s2 + k2*t2 - lo2 in [0, X2) */
                    const int64_t base = k2 * t2 - lo2;
                    int64_t ja = in_row ? (base >= 0 ? 0 : (-base + s2 - 1) / s2) : Y2;
                    int64_t jb = in_row ? (X2 - base > 0 ? (X2 - base + s2 - 1) / s2 : 0) : Y2;
                    if (ja > Y2) ja = Y2;
                    if (jb > Y2) jb = Y2;
                    if (jb < ja) jb = ja;
                    for (int64_t j2 = 0; j2 < Y2; j2++) {
                        XCONV_CT *ac = acc + j2 * C;
                        if (j2 >= ja && j2 < jb) {
                            const XCONV_CT *src = xr + (j2 * s2 + base) * rs;
                            if (mult == 1)
                                for (int64_t c = 0; c < C; c++) XCONV_MAC(ac[c], src[c], w[c]);
                            else
                                for (int64_t c = 0; c < C; c++) XCONV_MAC(ac[c], src[c / mult], w[c]);
                        } else {
                            XCONV_CT zero;
                            memset(&zero, 0, sizeof zero);
                            for (int64_t c = 0; c < C; c++) XCONV_MAC(ac[c], zero, w[c]);
                        }
                    }
                }
            }
        }
        for (int64_t j2 = 0; j2 < Y2; j2++) {
            const int64_t el = p->y_off + n * p->y_sn + j0 * p->y_ss[0] + j1 * p->y_ss[1] + j2 * p->y_ss[2];
            xconv__store_row(p->ct, p->y_dtype, acc + j2 * C, (char *)e->y + el * yes, p->y_sc, C);
        }
    }
}

/* Otherwise: one (n, output channel) plane at a time, vectorized along the innermost dim.
 * tmp holds one input row with its padding as zeros: tmp[lo2 + q2] = x[.., q2]. */
XCONV_DW_CLONES static void XCONV_NAME(dw_planes)(const xconv_exec *e, const XCONV_CT *wk, const XCONV_CT *bp,
                                  XCONV_CT *acc, XCONV_CT *tmp, int64_t begin, int64_t end)
{
    const xconv_canon *p = e->p;
    const int64_t C = p->cout, Y2 = p->y_size[2], X2 = p->x_size[2];
    const int64_t lo2 = p->pad_lo[2], s2 = p->stride[2], t2 = p->dil[2];
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), yes = (int64_t)xconv_dtype_size(p->y_dtype);
    memset(tmp, 0, sizeof(XCONV_CT) * (size_t)(X2 + lo2 + p->pad_hi[2]));
    for (int64_t plane = begin; plane < end; plane++) {
        const int64_t n = plane / C, co = plane % C, ci = co / p->cout_g;
        for (int64_t j0 = 0; j0 < p->y_size[0]; j0++)
        for (int64_t j1 = 0; j1 < p->y_size[1]; j1++) {
            for (int64_t j2 = 0; j2 < Y2; j2++) {
                if (bp) acc[j2] = bp[co];
                else memset(&acc[j2], 0, sizeof acc[j2]);
            }
            for (int64_t k0 = 0; k0 < p->k_size[0]; k0++) {
                const int64_t q0 = j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
                const bool in0 = q0 >= 0 && q0 < p->x_size[0];
                for (int64_t k1 = 0; k1 < p->k_size[1]; k1++) {
                    const int64_t q1 = j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                    if (in0 && q1 >= 0 && q1 < p->x_size[1]) {
                        const int64_t el = p->x_off + n * p->x_sn + ci * p->x_sc + q0 * p->x_ss[0] +
                                           q1 * p->x_ss[1];
                        xconv__load_row(p->ct, p->x_dtype, (const char *)e->x + el * xes,
                                        p->x_ss[2], tmp + lo2, X2);
                    } else {
                        /* a padding row reads as 0; 0 * w still joins the sum (Inf * 0) */
                        memset(tmp + lo2, 0, sizeof(XCONV_CT) * (size_t)X2);
                    }
                    for (int64_t k2 = 0; k2 < p->k_size[2]; k2++) {
                        const XCONV_CT w = wk[((k0 * p->k_size[1] + k1) * p->k_size[2] + k2) * C + co];
                        const XCONV_CT *src = tmp + k2 * t2;
                        if (s2 == 1) {
                            for (int64_t j2 = 0; j2 < Y2; j2++) XCONV_MAC(acc[j2], src[j2], w);
                        } else {
                            for (int64_t j2 = 0; j2 < Y2; j2++) XCONV_MAC(acc[j2], src[j2 * s2], w);
                        }
                    }
                }
            }
            const int64_t el = p->y_off + n * p->y_sn + co * p->y_sc + j0 * p->y_ss[0] + j1 * p->y_ss[1];
            xconv__store_row(p->ct, p->y_dtype, acc, (char *)e->y + el * yes, p->y_ss[2], Y2);
        }
    }
}

#undef XCONV_NAME
#undef XCONV_CAT
#undef XCONV_CAT2
#undef XCONV_T
#undef XCONV_CT
#undef XCONV_MAC
