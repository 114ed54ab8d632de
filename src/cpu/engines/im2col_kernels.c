/*
 * im2col_kernels.c — im2col (unfold) and col2im (fold) over the canonical 3-D geometry of
 * xconv_unfold, for every dtype and both layouts.
 *
 *   im2col:  cols[n, (c, k), p] = img[n, c, p*s + k*t - lo]      (0 where that is outside)
 *   col2im:  img[n, c, x]       = sum over (k, p) with p*s + k*t - lo = x of cols[n, (c, k), p]
 *
 * Shapes: img [N, C, X0, X1, X2]; channels-first cols [N, C*KK, L] (row c*KK + k), channels-
 * last cols [N, L, KK*C] (column k*C + c); L = prod(Y) positions, row-major; any strides.
 *
 * im2col copies elements bytewise (cols has img's dtype). col2im converts cols to the
 * compute type, sums there (integers wrap) and rounds or truncates once into img's dtype.
 * Threads split the output: im2col by cols rows, col2im by image rows (n, c, x0, x1), so no
 * two threads write one element and each sum runs in a fixed order (increasing k): results
 * are bit-identical for any thread count.
 *
 * Assumes: u was filled by a validated call (sizes >= 1, products fit 64 bits, buffers
 * large enough, img and cols disjoint) with the strides of size-1 dims set to 0, so every
 * stride times an index or a distance stays inside a buffer.
 */
#include "cpu/engines/gemm.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* Element runs                                                                             */
/* ---------------------------------------------------------------------------------------- */

/* esz is a constant in every expansion below, so each memcpy is one move. */
static inline __attribute__((always_inline)) void copy_run_n(size_t esz, char *dst, int64_t ds,
                                                             const char *src, int64_t ss,
                                                             int64_t n)
{
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, esz);
}

/* Copies n elements of esz bytes; ds and ss are byte strides. */
static void copy_run(size_t esz, char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    switch (esz) {
    case 1: copy_run_n(1, dst, ds, src, ss, n); break;
    case 2: copy_run_n(2, dst, ds, src, ss, n); break;
    case 4: copy_run_n(4, dst, ds, src, ss, n); break;
    case 8: copy_run_n(8, dst, ds, src, ss, n); break;
    default: copy_run_n(16, dst, ds, src, ss, n); break;
    }
}

/* Zeroes elements [from, to) of a run starting at dst with byte stride ds. */
static void zero_run(size_t esz, char *dst, int64_t ds, int64_t from, int64_t to)
{
    if (from >= to) return;
    if (ds == (int64_t)esz) {
        memset(dst + from * ds, 0, (size_t)(to - from) * esz);
        return;
    }
    for (int64_t i = from; i < to; i++) memset(dst + i * ds, 0, esz);
}

/* ---------------------------------------------------------------------------------------- */
/* im2col                                                                                   */
/* ---------------------------------------------------------------------------------------- */

typedef struct im2col_job {
    const xconv_unfold *u;
    const char *img;
    char *cols;
    size_t esz;
    int64_t kk, l;  /* prod(K), prod(Y) */
} im2col_job;

/* Channels-first: one cols row (n, c, k) per index, all positions. */
static void im2col_cf(void *arg, int64_t begin, int64_t end)
{
    const im2col_job *J = (const im2col_job *)arg;
    const xconv_unfold *u = J->u;
    const int64_t esz = (int64_t)J->esz, rows = u->c * J->kk;
    const int64_t *X = u->x_size, *K = u->k_size, *Y = u->y_size;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / rows, row = r % rows, c = row / J->kk, k = row % J->kk;
        const int64_t k0 = k / (K[1] * K[2]), k1 = k / K[2] % K[1], k2 = k % K[2];
        char *dst_row = J->cols + (u->cols_off + n * u->cols_s[0] + row * u->cols_s[1]) * esz;
        const int64_t ds = u->cols_s[2] * esz;
        const char *img_c = J->img + (u->img_off + n * u->img_sn + c * u->img_sc) * esz;
        const int64_t off2 = k2 * u->dil[2] - u->pad_lo[2];
        int64_t a2, b2;
        xconv__valid_range(off2, u->stride[2], X[2], Y[2], &a2, &b2);
        for (int64_t y0 = 0; y0 < Y[0]; y0++) {
            const int64_t x0 = y0 * u->stride[0] + k0 * u->dil[0] - u->pad_lo[0];
            for (int64_t y1 = 0; y1 < Y[1]; y1++) {
                const int64_t x1 = y1 * u->stride[1] + k1 * u->dil[1] - u->pad_lo[1];
                char *dst = dst_row + (y0 * Y[1] + y1) * Y[2] * ds;
                if (x0 < 0 || x0 >= X[0] || x1 < 0 || x1 >= X[1]) {
                    zero_run(J->esz, dst, ds, 0, Y[2]);
                    continue;
                }
                zero_run(J->esz, dst, ds, 0, a2);
                if (b2 > a2) {
                    const char *src = img_c + (x0 * u->img_ss[0] + x1 * u->img_ss[1] +
                                               (a2 * u->stride[2] + off2) * u->img_ss[2]) * esz;
                    /* two or more elements: their distance lies inside the image */
                    const int64_t ss = b2 - a2 > 1 ? u->stride[2] * u->img_ss[2] * esz : 0;
                    copy_run(J->esz, dst + a2 * ds, ds, src, ss, b2 - a2);
                }
                zero_run(J->esz, dst, ds, b2, Y[2]);
            }
        }
    }
}

/* Channels-last: one cols row (n, position) per index, all (k, c). */
static void im2col_cl(void *arg, int64_t begin, int64_t end)
{
    const im2col_job *J = (const im2col_job *)arg;
    const xconv_unfold *u = J->u;
    const int64_t esz = (int64_t)J->esz, C = u->c;
    const int64_t *X = u->x_size, *K = u->k_size, *Y = u->y_size;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / J->l, p = r % J->l;
        const int64_t y[3] = {p / (Y[1] * Y[2]), p / Y[2] % Y[1], p % Y[2]};
        char *dst_row = J->cols + (u->cols_off + n * u->cols_s[0] + p * u->cols_s[1]) * esz;
        const int64_t ds = u->cols_s[2] * esz;
        const char *img_n = J->img + (u->img_off + n * u->img_sn) * esz;
        for (int64_t k = 0; k < J->kk; k++) {
            const int64_t kd[3] = {k / (K[1] * K[2]), k / K[2] % K[1], k % K[2]};
            char *dst = dst_row + k * C * ds;
            int64_t at = 0;
            bool inside = true;
            for (int d = 0; d < 3; d++) {
                const int64_t x = y[d] * u->stride[d] + kd[d] * u->dil[d] - u->pad_lo[d];
                inside = inside && x >= 0 && x < X[d];
                at += x * u->img_ss[d];
            }
            if (inside)
                copy_run(J->esz, dst, ds, img_n + at * esz, u->img_sc * esz, C);
            else
                zero_run(J->esz, dst, ds, 0, C);
        }
    }
}

xconv_status xconv__im2col_run(xconv_context *ctx, const xconv_unfold *u, const void *img,
                               void *cols, xconv_error *err)
{
    (void)err;
    im2col_job J = {.u = u, .img = (const char *)img, .cols = (char *)cols,
                    .esz = xconv_dtype_size(u->img_dtype), .kk = xconv__prod3(u->k_size),
                    .l = xconv__prod3(u->y_size)};
    if (u->layout == XCONV_LAYOUT_CHANNELS_FIRST)
        xconv__parallel_for(ctx, u->n * u->c * J.kk, im2col_cf, &J);
    else
        xconv__parallel_for(ctx, u->n * J.l, im2col_cl, &J);
    return XCONV_STATUS_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* col2im                                                                                   */
/* ---------------------------------------------------------------------------------------- */

void xconv__col2im_row(const xconv_unfold *u, const xconv_col_source *src, int64_t c,
                       int64_t x0, int64_t x1, void *acc, void *tmp)
{
    const int64_t *X = u->x_size, *K = u->k_size, *Y = u->y_size;
    const int64_t es = (int64_t)xconv_dtype_size(src->dtype);
    const int64_t cts = (int64_t)xconv__ctype_size(u->ct);
    const bool direct = src->dtype == xconv__ct_dtype(u->ct);
    const char *base_c = (const char *)src->base + c * src->s_c * es;
    for (int64_t k0 = 0; k0 < K[0]; k0++) {
        const int64_t a0 = x0 + u->pad_lo[0] - k0 * u->dil[0];
        if (a0 < 0 || a0 % u->stride[0] != 0 || a0 / u->stride[0] >= Y[0]) continue;
        const int64_t y0 = a0 / u->stride[0];
        for (int64_t k1 = 0; k1 < K[1]; k1++) {
            const int64_t a1 = x1 + u->pad_lo[1] - k1 * u->dil[1];
            if (a1 < 0 || a1 % u->stride[1] != 0 || a1 / u->stride[1] >= Y[1]) continue;
            const int64_t row = (y0 * Y[1] + a1 / u->stride[1]) * Y[2]; /* position of y2 = 0 */
            if (row + Y[2] <= src->p_begin || row >= src->p_end) continue;
            for (int64_t k2 = 0; k2 < K[2]; k2++) {
                const int64_t off2 = k2 * u->dil[2] - u->pad_lo[2];
                int64_t a2, b2;
                xconv__valid_range(off2, u->stride[2], X[2], Y[2], &a2, &b2);
                if (a2 < src->p_begin - row) a2 = src->p_begin - row;
                if (b2 > src->p_end - row) b2 = src->p_end - row;
                if (a2 >= b2) continue;
                const int64_t k = (k0 * K[1] + k1) * K[2] + k2;
                const char *s = base_c + (k * src->s_k + (row + a2 - src->p_begin) * src->s_p) * es;
                char *d = (char *)acc + (a2 * u->stride[2] + off2) * cts;
                if (direct) {
                    xconv__ct_add(u->ct, d, u->stride[2], s, src->s_p, b2 - a2);
                } else {
                    xconv__load_row(u->ct, src->dtype, s, xconv__run_stride(src->s_p, b2 - a2),
                                    tmp, b2 - a2);
                    xconv__ct_add(u->ct, d, u->stride[2], tmp, 1, b2 - a2);
                }
            }
        }
    }
}

typedef struct col2im_job {
    const xconv_unfold *u;
    const char *cols;
    char *img;
    char *scratch;     /* per slot: X2 + Y2 compute-type values */
    int64_t slots, rows, kk;
} col2im_job;

/* Slot t owns image rows [rows*t/slots, rows*(t+1)/slots) and its scratch. */
static void col2im_slots(void *arg, int64_t begin, int64_t end)
{
    const col2im_job *J = (const col2im_job *)arg;
    const xconv_unfold *u = J->u;
    const int64_t cts = (int64_t)xconv__ctype_size(u->ct);
    const int64_t ces = (int64_t)xconv_dtype_size(u->cols_dtype);
    const int64_t ies = (int64_t)xconv_dtype_size(u->img_dtype);
    const int64_t X0 = u->x_size[0], X1 = u->x_size[1], X2 = u->x_size[2];
    const bool cf = u->layout == XCONV_LAYOUT_CHANNELS_FIRST;
    for (int64_t t = begin; t < end; t++) {
        char *acc = J->scratch + t * (X2 + u->y_size[2]) * cts, *tmp = acc + X2 * cts;
        const int64_t r_end = J->rows * (t + 1) / J->slots;
        for (int64_t r = J->rows * t / J->slots; r < r_end; r++) {
            const int64_t x1 = r % X1, x0 = r / X1 % X0, c = r / (X1 * X0) % u->c;
            const int64_t n = r / (X1 * X0 * u->c);
            xconv_col_source src = {
                .base = J->cols + (u->cols_off + n * u->cols_s[0]) * ces,
                .dtype = u->cols_dtype,
                .s_c = u->c == 1 ? 0 : cf ? J->kk * u->cols_s[1] : u->cols_s[2],
                .s_k = J->kk == 1 ? 0 : cf ? u->cols_s[1] : u->c * u->cols_s[2],
                .s_p = cf ? u->cols_s[2] : u->cols_s[1],
                .p_begin = 0,
                .p_end = xconv__prod3(u->y_size),
            };
            memset(acc, 0, (size_t)(X2 * cts));
            xconv__col2im_row(u, &src, c, x0, x1, acc, tmp);
            char *dst = J->img + (u->img_off + n * u->img_sn + c * u->img_sc + x0 * u->img_ss[0] +
                                  x1 * u->img_ss[1]) * ies;
            xconv__store_row(u->ct, u->img_dtype, acc, dst, u->img_ss[2], X2);
        }
    }
}

xconv_status xconv__col2im_run(xconv_context *ctx, const xconv_unfold *u, const void *cols,
                               void *img, xconv_error *err)
{
    const int64_t rows = u->n * u->c * u->x_size[0] * u->x_size[1];
    if (rows <= 0) return XCONV_STATUS_OK;
    int64_t slots = xconv_context_threads(ctx);
    if (slots > rows) slots = rows;
    const size_t per_slot = (size_t)(u->x_size[2] + u->y_size[2]) * xconv__ctype_size(u->ct);
    char *scratch = malloc(per_slot * (size_t)slots);
    XCONV_CHECK(err, scratch != NULL, OUT_OF_MEMORY, NULL,
                "cannot allocate %zu bytes of col2im scratch", per_slot * (size_t)slots);
    col2im_job J = {.u = u, .cols = (const char *)cols, .img = (char *)img, .scratch = scratch,
                    .slots = slots, .rows = rows, .kk = xconv__prod3(u->k_size)};
    xconv__parallel_for(ctx, slots, col2im_slots, &J);
    free(scratch);
    return XCONV_STATUS_OK;
}
