/*
 * unfold.c — the public xconv_im2col and xconv_col2im: validate (every check before any
 * write, messages "<name> <value> <rule> <other value>" as in validate.c), fold the layout
 * into the canonical 3-D geometry of xconv_unfold, and run src/cpu/engines/im2col_kernels.c.
 *
 *   im2col: x [N, C, X..] -> cols [N, C*prod(K), prod(Y)]   (channels-last: x [N, X.., C] ->
 *           cols [N, prod(Y), prod(K)*C]); Y is the conv output size.
 *   col2im: the adjoint, cols -> y of x's shape; y's spatial sizes give X.
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Overflow-checked int64 arithmetic: false when the true result does not fit. */
static bool mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static bool add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

typedef enum which { IM2COL, COL2IM } which;

static const char *op_name(which w) { return w == IM2COL ? "im2col" : "col2im"; }

/* Params: the conv geometry checks of validate.c plus "groups 1, no output padding". */
static xconv_status check_params(which wh, const xconv_params *p, const int64_t *kernel,
                                 xconv_error *err)
{
    char name[32];
    for (int i = 0; i < p->spatial_rank; i++) {
        snprintf(name, sizeof name, "stride[%d]", i);
        XCONV_CHECK(err, p->stride[i] >= 1, INVALID_ARGUMENT, name,
                    "stride %" PRId64 " is less than 1", p->stride[i]);
        snprintf(name, sizeof name, "dilation[%d]", i);
        XCONV_CHECK(err, p->dilation[i] >= 1, INVALID_ARGUMENT, name,
                    "dilation %" PRId64 " is less than 1", p->dilation[i]);
        snprintf(name, sizeof name, "pad_lo[%d]", i);
        XCONV_CHECK(err, p->pad_lo[i] >= 0, INVALID_ARGUMENT, name,
                    "padding %" PRId64 " is negative", p->pad_lo[i]);
        snprintf(name, sizeof name, "pad_hi[%d]", i);
        XCONV_CHECK(err, p->pad_hi[i] >= 0, INVALID_ARGUMENT, name,
                    "padding %" PRId64 " is negative", p->pad_hi[i]);
        snprintf(name, sizeof name, "output_padding[%d]", i);
        XCONV_CHECK(err, p->output_padding[i] == 0, INVALID_ARGUMENT, name,
                    "output padding %" PRId64 " is not 0 (%s takes no output padding)",
                    p->output_padding[i], op_name(wh));
    }
    XCONV_CHECK(err, p->groups == 1, INVALID_ARGUMENT, "groups",
                "groups %" PRId64 " is not 1 (%s has no groups)", p->groups, op_name(wh));
    XCONV_CHECK(err, kernel != NULL, INVALID_ARGUMENT, "kernel", "kernel is null");
    for (int i = 0; i < p->spatial_rank; i++) {
        snprintf(name, sizeof name, "kernel[%d]", i);
        XCONV_CHECK(err, kernel[i] >= 1, INVALID_ARGUMENT, name,
                    "kernel size %" PRId64 " in spatial dim %d is less than 1", kernel[i], i);
    }
    return XCONV_STATUS_OK;
}

/*
 * Everything both calls share: `img` is x (im2col) or y (col2im), `cols` the other side.
 * Checks in DESIGN.md §3 order and fills *u.
 */
static xconv_status prepare(which wh, const xconv_params *p, const int64_t *kernel,
                            const xconv_tensor *img, const xconv_tensor *cols, xconv_unfold *u,
                            xconv_error *err)
{
    const char *img_name = wh == IM2COL ? "x" : "y";
    const char *in_name = wh == IM2COL ? "x" : "cols", *out_name = wh == IM2COL ? "cols" : "y";
    const xconv_tensor *in = wh == IM2COL ? img : cols, *out = wh == IM2COL ? cols : img;
    XCONV_CHECK(err, p != NULL, INVALID_ARGUMENT, "params", "params is null");
    XCONV_CHECK(err, p->spatial_rank >= 1 && p->spatial_rank <= XCONV_MAX_SPATIAL,
                INVALID_ARGUMENT, "spatial_rank", "spatial rank %d is not 1, 2 or 3",
                p->spatial_rank);
    xconv__begin(err, "xconv_%s(%d-D)", op_name(wh), p->spatial_rank);
    XCONV_CHECK(err,
                p->layout == XCONV_LAYOUT_CHANNELS_FIRST || p->layout == XCONV_LAYOUT_CHANNELS_LAST,
                INVALID_ARGUMENT, "layout",
                "layout %d is not channels_first (0) or channels_last (1)", (int)p->layout);
    XCONV_TRY(check_params(wh, p, kernel, err));

    const int d = p->spatial_rank;
    const bool cl = p->layout == XCONV_LAYOUT_CHANNELS_LAST;
    XCONV_TRY(xconv__check_tensor(in, in_name, wh == IM2COL ? d + 2 : 3, err));
    XCONV_TRY(xconv__check_tensor(out, out_name, wh == IM2COL ? 3 : d + 2, err));

    /* The image's sizes and the positions Y, as conv computes them. */
    char name[32];
    const int img_c = cl ? d + 1 : 1, img_sp = cl ? 1 : 2;
    const int64_t C = img->shape[img_c];
    snprintf(name, sizeof name, "%s.shape[%d]", img_name, img_c);
    XCONV_CHECK(err, C >= 1, INVALID_ARGUMENT, name, "channels %" PRId64 " is less than 1", C);
    int64_t X[3] = {1, 1, 1}, K[3] = {1, 1, 1}, Y[3] = {1, 1, 1};
    for (int i = 0; i < d; i++) {
        const int j = 3 - d + i;
        X[j] = img->shape[img_sp + i];
        K[j] = kernel[i];
        snprintf(name, sizeof name, "%s.shape[%d]", img_name, img_sp + i);
        XCONV_CHECK(err, X[j] >= 1, INVALID_ARGUMENT, name,
                    "input size %" PRId64 " in spatial dim %d is less than 1", X[j], i);
    }
    for (int i = 0; i < d; i++) {
        const int j = 3 - d + i;
        int64_t span, padded;
        snprintf(name, sizeof name, "kernel[%d]", i);
        XCONV_CHECK(err, mul_ok(p->dilation[i], K[j] - 1, &span) && add_ok(span, 1, &span),
                    INVALID_ARGUMENT, name,
                    "dilated kernel extent dilation %" PRId64 " * (kernel %" PRId64
                    " - 1) + 1 overflows 64 bits", p->dilation[i], K[j]);
        snprintf(name, sizeof name, "%s.shape[%d]", img_name, img_sp + i);
        XCONV_CHECK(err,
                    add_ok(X[j], p->pad_lo[i], &padded) && add_ok(padded, p->pad_hi[i], &padded),
                    INVALID_ARGUMENT, name,
                    "padded input size %" PRId64 " + %" PRId64 " + %" PRId64 " overflows 64 bits",
                    X[j], p->pad_lo[i], p->pad_hi[i]);
        XCONV_CHECK(err, padded >= span, INVALID_ARGUMENT, name,
                    "input too small for kernel: padded input size %" PRId64
                    " in spatial dim %d is less than the dilated kernel extent %" PRId64,
                    padded, i, span);
        Y[j] = (padded - span) / p->stride[i] + 1;
    }

    /* cols [N, C*KK, L] or [N, L, KK*C] */
    int64_t kk = 1, l = 1, ck;
    bool ok = true;
    for (int j = 0; j < 3; j++) ok = ok && mul_ok(kk, K[j], &kk) && mul_ok(l, Y[j], &l);
    ok = ok && mul_ok(kk, C, &ck);
    XCONV_CHECK(err, ok, INVALID_ARGUMENT, "cols.shape",
                "cols size C * prod(kernel) or prod(output size) overflows 64 bits");
    const int64_t want[3] = {img->shape[0], cl ? l : ck, cl ? ck : l};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "cols.shape[%d]", i);
        XCONV_CHECK(err, cols->shape[i] == want[i], INVALID_ARGUMENT, name,
                    "cols.shape[%d] %" PRId64 " does not equal the computed %" PRId64, i,
                    cols->shape[i], want[i]);
    }

    if (wh == IM2COL)
        XCONV_CHECK(err, cols->dtype == img->dtype, INVALID_ARGUMENT, "cols.dtype",
                    "cols.dtype %s does not equal x.dtype %s", xconv_dtype_name(cols->dtype),
                    xconv_dtype_name(img->dtype));
    else
        XCONV_CHECK(err, xconv_dtype_can_widen(cols->dtype, img->dtype), INVALID_ARGUMENT,
                    "y.dtype", "y.dtype %s is not cols.dtype %s or a wider type of its family",
                    xconv_dtype_name(img->dtype), xconv_dtype_name(cols->dtype));

    XCONV_TRY(xconv__check_memory(in, in_name, false, err));
    XCONV_TRY(xconv__check_memory(out, out_name, true, err));
    snprintf(name, sizeof name, "%s.data", out_name);
    XCONV_CHECK(err, !xconv__tensors_overlap(out, in), INVALID_ARGUMENT, name, "%s overlaps %s", out_name,
                in_name);

    snprintf(name, sizeof name, "%s.device", out_name);
    XCONV_CHECK(err, out->device == in->device && out->device_index == in->device_index,
                INVALID_ARGUMENT, name, "%s.device %s:%d differs from %s.device %s:%d", out_name,
                out->device == XCONV_DEVICE_CUDA ? "cuda" : "cpu", out->device_index, in_name,
                in->device == XCONV_DEVICE_CUDA ? "cuda" : "cpu", in->device_index);
    snprintf(name, sizeof name, "%s.device", in_name);
    XCONV_CHECK(err, in->device == XCONV_DEVICE_CPU, UNSUPPORTED, name,
                "%s.device is cuda but xconv_%s runs on cpu tensors only", in_name, op_name(wh));

    /* The canonical geometry: leading unit dims, the layout folded into strides. */
    memset(u, 0, sizeof *u);
    u->layout = p->layout;
    u->n = img->shape[0];
    u->c = C;
    for (int j = 0; j < 3; j++) {
        const int i = j - (3 - d);
        u->x_size[j] = X[j];
        u->k_size[j] = K[j];
        u->y_size[j] = Y[j];
        u->stride[j] = i < 0 ? 1 : p->stride[i];
        u->dil[j] = i < 0 ? 1 : p->dilation[i];
        u->pad_lo[j] = i < 0 ? 0 : p->pad_lo[i];
    }
    u->img_dtype = img->dtype;
    u->cols_dtype = cols->dtype;
    u->ct = xconv__compute_type(cols->dtype, img->dtype);
    /* A dim of size 1 may carry any stride; its index is always 0, so its stride becomes 0
     * and the kernels never scale a stride that no element spans. */
    int64_t st[XCONV_MAX_RANK];
    xconv__view_strides(img, st, &u->img_off);
    for (int i = 0; i < img->rank; i++)
        if (img->shape[i] == 1) st[i] = 0;
    u->img_sn = st[0];
    u->img_sc = st[img_c];
    for (int j = 0; j < 3; j++) {
        const int i = j - (3 - d);
        u->img_ss[j] = i < 0 ? 0 : st[img_sp + i];
    }
    xconv__view_strides(cols, u->cols_s, &u->cols_off);
    for (int i = 0; i < 3; i++)
        if (cols->shape[i] == 1) u->cols_s[i] = 0;
    return XCONV_STATUS_OK;
}

xconv_status xconv_im2col(xconv_context *ctx, const xconv_params *params, const int64_t *kernel,
                          const xconv_tensor *x, const xconv_tensor *cols, xconv_error *err)
{
    xconv__begin(err, "xconv_im2col");
    xconv_unfold u;
    XCONV_TRY(prepare(IM2COL, params, kernel, x, cols, &u, err));
    return xconv__im2col_run(ctx ? ctx : xconv__default_context(), &u, x->data, cols->data, err);
}

xconv_status xconv_col2im(xconv_context *ctx, const xconv_params *params, const int64_t *kernel,
                          const xconv_tensor *cols, const xconv_tensor *y, xconv_error *err)
{
    xconv__begin(err, "xconv_col2im");
    xconv_unfold u;
    XCONV_TRY(prepare(COL2IM, params, kernel, y, cols, &u, err));
    return xconv__col2im_run(ctx ? ctx : xconv__default_context(), &u, cols->data, y->data, err);
}
