/*
 * ref.tmpl.h — the reference kernels for one compute type; included by ref.c with
 *   XCONV_T   the compute type's name (u32, u64, f32, f64, c64, c128)
 *   XCONV_CT  its C type
 *   XCONV_MAC(acc, a, b)  acc += a * b in that type (wrapping for integers)
 * and #undefs them at its end.
 *
 * Inputs are already packed into the compute type, dense channels-first:
 *   xp [N, Cin, X0, X1, X2], wp [G, cout_g, cin_g, K0, K1, K2], bp [Cout] (or NULL),
 *   yp [N, Cout, Y0, Y1, Y2] (output, the compute type).
 * The task range is over n * Cout output planes; each output element is summed by one task
 * in a fixed order, so results do not depend on the thread count.
 */
#define XCONV_CAT2(a, b) a##_##b
#define XCONV_CAT(a, b) XCONV_CAT2(a, b)
#define XCONV_NAME(name) XCONV_CAT(name, XCONV_T)

static void XCONV_NAME(ref_planes)(const xconv_canon *p, const XCONV_CT *xp, const XCONV_CT *wp,
                                   const XCONV_CT *bp, XCONV_CT *yp, int64_t begin, int64_t end)
{
    const int64_t X0 = p->x_size[0], X1 = p->x_size[1], X2 = p->x_size[2];
    const int64_t K0 = p->k_size[0], K1 = p->k_size[1], K2 = p->k_size[2];
    const int64_t Y0 = p->y_size[0], Y1 = p->y_size[1], Y2 = p->y_size[2];
    const int64_t x_plane = X0 * X1 * X2, k_vol = K0 * K1 * K2, y_plane = Y0 * Y1 * Y2;
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    for (int64_t plane = begin; plane < end; plane++) {
        const int64_t n = plane / p->cout, co = plane % p->cout;
        const int64_t g = co / p->cout_g, o = co % p->cout_g;
        const XCONV_CT *xg = xp + (n * p->cin + g * p->cin_g) * x_plane;
        const XCONV_CT *wo = wp + (g * p->cout_g + o) * p->cin_g * k_vol;
        XCONV_CT *yo = yp + plane * y_plane;
        for (int64_t j0 = 0; j0 < Y0; j0++)
        for (int64_t j1 = 0; j1 < Y1; j1++)
        for (int64_t j2 = 0; j2 < Y2; j2++) {
            XCONV_CT acc;
            if (bp) acc = bp[co];
            else memset(&acc, 0, sizeof acc);
            for (int64_t i = 0; i < p->cin_g; i++)
            for (int64_t k0 = 0; k0 < K0; k0++)
            for (int64_t k1 = 0; k1 < K1; k1++)
            for (int64_t k2 = 0; k2 < K2; k2++) {
                int64_t q0, q1, q2; /* the x position this tap reads */
                if (!tr) {
                    q0 = j0 * p->stride[0] + k0 * p->dil[0] - p->pad_lo[0];
                    q1 = j1 * p->stride[1] + k1 * p->dil[1] - p->pad_lo[1];
                    q2 = j2 * p->stride[2] + k2 * p->dil[2] - p->pad_lo[2];
                } else {
                    /* j + lo = q*s + k*t: the tap contributes only where q is whole */
                    int64_t r0 = j0 + p->pad_lo[0] - k0 * p->dil[0];
                    int64_t r1 = j1 + p->pad_lo[1] - k1 * p->dil[1];
                    int64_t r2 = j2 + p->pad_lo[2] - k2 * p->dil[2];
                    if (r0 < 0 || r1 < 0 || r2 < 0) continue;
                    if (r0 % p->stride[0] || r1 % p->stride[1] || r2 % p->stride[2]) continue;
                    q0 = r0 / p->stride[0], q1 = r1 / p->stride[1], q2 = r2 / p->stride[2];
                }
                XCONV_CT a;
                if (q0 < 0 || q0 >= X0 || q1 < 0 || q1 >= X1 || q2 < 0 || q2 >= X2) {
                    if (tr) continue;
                    /* conv reads padding as 0, and 0 * w joins the sum as IEEE has it
                     * (Inf * 0 is NaN, as in PyTorch); conv_transpose has no such terms */
                    memset(&a, 0, sizeof a);
                } else {
                    a = xg[i * x_plane + (q0 * X1 + q1) * X2 + q2];
                }
                XCONV_CT b = wo[i * k_vol + (k0 * K1 + k1) * K2 + k2];
                XCONV_MAC(acc, a, b);
            }
            yo[(j0 * Y1 + j1) * Y2 + j2] = acc;
        }
    }
}

#undef XCONV_NAME
#undef XCONV_CAT
#undef XCONV_CAT2
#undef XCONV_T
#undef XCONV_CT
#undef XCONV_MAC
