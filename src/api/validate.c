/*
 * validate.c — every user check of DESIGN.md §3, in its order, in one place. Nothing is
 * written to y before all of these pass; engines never report user errors.
 *
 * Messages follow "<name> <value> <rule> <other value>", lower case, names as the user
 * spells them; `parameter` names the thing to fix. tests/errors mirrors this file row for
 * row.
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const DIM_NAMES[XCONV_MAX_SPATIAL] = {"[0]", "[1]", "[2]"};

/* Overflow-checked int64 arithmetic: false when the true result does not fit. */
static bool mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static bool add_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* Product of n non-negative sizes, or -1 on overflow. */
static int64_t checked_product(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (!mul_ok(p, v[i], &p)) return -1;
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* Params                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static xconv_status check_params(const xconv_params *p, xconv_error *err)
{
    XCONV_CHECK(err, p != NULL, INVALID_ARGUMENT, "params", "params is null");
    XCONV_CHECK(err, p->op == XCONV_OP_CONV || p->op == XCONV_OP_CONV_TRANSPOSE,
                INVALID_ARGUMENT, "op", "op %d is not conv (0) or conv_transpose (1)", (int)p->op);
    XCONV_CHECK(err, p->spatial_rank >= 1 && p->spatial_rank <= XCONV_MAX_SPATIAL,
                INVALID_ARGUMENT, "spatial_rank", "spatial rank %d is not 1, 2 or 3",
                p->spatial_rank);
    XCONV_CHECK(err,
                p->layout == XCONV_LAYOUT_CHANNELS_FIRST || p->layout == XCONV_LAYOUT_CHANNELS_LAST,
                INVALID_ARGUMENT, "layout",
                "layout %d is not channels_first (0) or channels_last (1)", (int)p->layout);
    char name[32];
    for (int i = 0; i < p->spatial_rank; i++) {
        snprintf(name, sizeof name, "stride%s", DIM_NAMES[i]);
        XCONV_CHECK(err, p->stride[i] >= 1, INVALID_ARGUMENT, name,
                    "stride %" PRId64 " is less than 1", p->stride[i]);
        snprintf(name, sizeof name, "dilation%s", DIM_NAMES[i]);
        XCONV_CHECK(err, p->dilation[i] >= 1, INVALID_ARGUMENT, name,
                    "dilation %" PRId64 " is less than 1", p->dilation[i]);
        snprintf(name, sizeof name, "pad_lo%s", DIM_NAMES[i]);
        XCONV_CHECK(err, p->pad_lo[i] >= 0, INVALID_ARGUMENT, name,
                    "padding %" PRId64 " is negative", p->pad_lo[i]);
        snprintf(name, sizeof name, "pad_hi%s", DIM_NAMES[i]);
        XCONV_CHECK(err, p->pad_hi[i] >= 0, INVALID_ARGUMENT, name,
                    "padding %" PRId64 " is negative", p->pad_hi[i]);
        snprintf(name, sizeof name, "output_padding%s", DIM_NAMES[i]);
        XCONV_CHECK(err, p->output_padding[i] >= 0, INVALID_ARGUMENT, name,
                    "output padding %" PRId64 " is negative", p->output_padding[i]);
        if (p->op == XCONV_OP_CONV) {
            XCONV_CHECK(err, p->output_padding[i] == 0, INVALID_ARGUMENT, name,
                        "output padding %" PRId64 " is not 0 for conv (only conv_transpose "
                        "takes output padding)", p->output_padding[i]);
        } else {
            int64_t limit = p->stride[i] > p->dilation[i] ? p->stride[i] : p->dilation[i];
            XCONV_CHECK(err, p->output_padding[i] < limit, INVALID_ARGUMENT, name,
                        "output padding %" PRId64 " is not less than max(stride %" PRId64
                        ", dilation %" PRId64 ")", p->output_padding[i], p->stride[i],
                        p->dilation[i]);
        }
    }
    XCONV_CHECK(err, p->groups >= 1, INVALID_ARGUMENT, "groups",
                "groups %" PRId64 " is less than 1", p->groups);
    return XCONV_STATUS_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Shapes                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* The problem's sizes read off the shapes in the params' layout. */
typedef struct dims {
    int64_t n, cin, cout, cin_g, cout_g;
    int64_t x_size[XCONV_MAX_SPATIAL], k_size[XCONV_MAX_SPATIAL], y_size[XCONV_MAX_SPATIAL];
} dims;

static xconv_status check_shapes(const xconv_params *p, const int64_t *xs, const int64_t *ws,
                                 dims *dm, xconv_error *err)
{
    const int d = p->spatial_rank, rank = d + 2;
    const bool cl = p->layout == XCONV_LAYOUT_CHANNELS_LAST;
    const bool tr = p->op == XCONV_OP_CONV_TRANSPOSE;
    char name[32];
    for (int i = 0; i < rank; i++) {
        snprintf(name, sizeof name, "x.shape[%d]", i);
        XCONV_CHECK(err, xs[i] >= 0, INVALID_ARGUMENT, name,
                    "x.shape[%d] %" PRId64 " is negative", i, xs[i]);
        snprintf(name, sizeof name, "w.shape[%d]", i);
        XCONV_CHECK(err, ws[i] >= 0, INVALID_ARGUMENT, name,
                    "w.shape[%d] %" PRId64 " is negative", i, ws[i]);
    }
    const int x_c = cl ? rank - 1 : 1, x_sp = cl ? 1 : 2;   /* channel dim, first spatial dim */
    const int w_sp = cl ? 1 : 2, w_ci = cl ? rank - 1 : 1;  /* kernel dims, weight's second channel dim */
    dm->n = xs[0];
    dm->cin = xs[x_c];
    for (int i = 0; i < d; i++) {
        dm->x_size[i] = xs[x_sp + i];
        dm->k_size[i] = ws[w_sp + i];
    }
    snprintf(name, sizeof name, "x.shape[%d]", x_c);
    XCONV_CHECK(err, dm->cin >= 1, INVALID_ARGUMENT, name,
                "input channels %" PRId64 " is less than 1", dm->cin);
    for (int i = 0; i < d; i++) {
        snprintf(name, sizeof name, "x.shape[%d]", x_sp + i);
        XCONV_CHECK(err, dm->x_size[i] >= 1, INVALID_ARGUMENT, name,
                    "input size %" PRId64 " in spatial dim %d is less than 1", dm->x_size[i], i);
        snprintf(name, sizeof name, "w.shape[%d]", w_sp + i);
        XCONV_CHECK(err, dm->k_size[i] >= 1, INVALID_ARGUMENT, name,
                    "kernel size %" PRId64 " in spatial dim %d is less than 1", dm->k_size[i], i);
    }
    const int64_t g = p->groups;
    XCONV_CHECK(err, dm->cin % g == 0, INVALID_ARGUMENT, "groups",
                "groups %" PRId64 " does not divide input channels %" PRId64, g, dm->cin);
    dm->cin_g = dm->cin / g;
    if (!tr || cl) {
        /* conv (both layouts) and channels-last conv_transpose: w [Cout, ..., Cin/g]. */
        dm->cout = ws[0];
        XCONV_CHECK(err, dm->cout >= 1, INVALID_ARGUMENT, "w.shape[0]",
                    "output channels %" PRId64 " is less than 1", dm->cout);
        XCONV_CHECK(err, dm->cout % g == 0, INVALID_ARGUMENT, "groups",
                    "groups %" PRId64 " does not divide output channels %" PRId64, g, dm->cout);
        snprintf(name, sizeof name, "w.shape[%d]", w_ci);
        XCONV_CHECK(err, ws[w_ci] == dm->cin_g, INVALID_ARGUMENT, name,
                    "w.shape[%d] %" PRId64 " does not equal input channels / groups = %" PRId64,
                    w_ci, ws[w_ci], dm->cin_g);
        dm->cout_g = dm->cout / g;
    } else {
        /* channels-first conv_transpose: w [Cin, Cout/g, K..]. */
        XCONV_CHECK(err, ws[0] == dm->cin, INVALID_ARGUMENT, "w.shape[0]",
                    "w.shape[0] %" PRId64 " does not equal input channels %" PRId64, ws[0],
                    dm->cin);
        XCONV_CHECK(err, ws[1] >= 1, INVALID_ARGUMENT, "w.shape[1]",
                    "w.shape[1] %" PRId64 " (output channels / groups) is less than 1", ws[1]);
        dm->cout_g = ws[1];
        XCONV_CHECK(err, mul_ok(ws[1], g, &dm->cout), INVALID_ARGUMENT, "w.shape[1]",
                    "output channels w.shape[1] %" PRId64 " * groups %" PRId64
                    " overflows 64 bits", ws[1], g);
    }
    for (int i = 0; i < d; i++) {
        const int64_t s = p->stride[i], t = p->dilation[i], lo = p->pad_lo[i], hi = p->pad_hi[i];
        int64_t span, padded, y;
        snprintf(name, sizeof name, "w.shape[%d]", w_sp + i);
        /* span = t*(K-1) + 1: the extent the dilated kernel covers */
        XCONV_CHECK(err, mul_ok(t, dm->k_size[i] - 1, &span) && add_ok(span, 1, &span),
                    INVALID_ARGUMENT, name,
                    "dilated kernel extent dilation %" PRId64 " * (kernel %" PRId64
                    " - 1) + 1 overflows 64 bits", t, dm->k_size[i]);
        snprintf(name, sizeof name, "%s%s", lo > hi ? "pad_lo" : "pad_hi", DIM_NAMES[i]);
        XCONV_CHECK(err, add_ok(dm->x_size[i], lo, &padded) && add_ok(padded, hi, &padded),
                    INVALID_ARGUMENT, name,
                    "padded input size %" PRId64 " + %" PRId64 " + %" PRId64
                    " overflows 64 bits", dm->x_size[i], lo, hi);
        if (!tr) {
            snprintf(name, sizeof name, "x.shape[%d]", x_sp + i);
            XCONV_CHECK(err, padded >= span, INVALID_ARGUMENT, name,
                        "input too small for kernel: padded input size %" PRId64
                        " in spatial dim %d is less than the dilated kernel extent %" PRId64,
                        padded, i, span);
            y = (padded - span) / s + 1;
        } else {
            /* Y = (X-1)*s - lo - hi + span + op: computed in steps so no step overflows. */
            int64_t base;
            bool ok = mul_ok(dm->x_size[i] - 1, s, &base) && add_ok(base, span, &base) &&
                      add_ok(base, p->output_padding[i], &base);
            snprintf(name, sizeof name, "stride%s", DIM_NAMES[i]);
            XCONV_CHECK(err, ok, INVALID_ARGUMENT, name,
                        "output size (input %" PRId64 " - 1) * stride %" PRId64
                        " + kernel extent in spatial dim %d overflows 64 bits",
                        dm->x_size[i], s, i);
            y = base - lo - hi;
            snprintf(name, sizeof name, "pad_lo%s", DIM_NAMES[i]);
            XCONV_CHECK(err, y >= 1, INVALID_ARGUMENT, name,
                        "padding too large: output size %" PRId64 " in spatial dim %d is less "
                        "than 1 (padding %" PRId64 ":%" PRId64 ")", y, i, lo, hi);
        }
        dm->y_size[i] = y;
    }
    return XCONV_STATUS_OK;
}

static void output_shape_of(const xconv_params *p, const dims *dm, int64_t *ys)
{
    const int d = p->spatial_rank;
    const bool cl = p->layout == XCONV_LAYOUT_CHANNELS_LAST;
    ys[0] = dm->n;
    ys[cl ? d + 1 : 1] = dm->cout;
    for (int i = 0; i < d; i++) ys[(cl ? 1 : 2) + i] = dm->y_size[i];
}

xconv_status xconv__validate_shapes(const xconv_params *params, const int64_t *x_shape,
                                    const int64_t *w_shape, int64_t *y_shape, xconv_error *err)
{
    XCONV_TRY(check_params(params, err));
    XCONV_CHECK(err, x_shape != NULL, INVALID_ARGUMENT, "x_shape", "x_shape is null");
    XCONV_CHECK(err, w_shape != NULL, INVALID_ARGUMENT, "w_shape", "w_shape is null");
    XCONV_CHECK(err, y_shape != NULL, INVALID_ARGUMENT, "y_shape", "y_shape is null");
    dims dm;
    XCONV_TRY(check_shapes(params, x_shape, w_shape, &dm, err));
    int64_t ys[XCONV_MAX_RANK];
    output_shape_of(params, &dm, ys);
    memcpy(y_shape, ys, sizeof(int64_t) * (size_t)(params->spatial_rank + 2));
    return XCONV_STATUS_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Tensors: descriptors, extents, aliasing                                                  */
/* ---------------------------------------------------------------------------------------- */

static int64_t tensor_elems(const xconv_tensor *t)
{
    return checked_product(t->shape, t->rank);
}

/* The element-index hull [lo, hi] a view touches; assumes shapes >= 1 and strides checked. */
static void element_hull(const xconv_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t st[XCONV_MAX_RANK], a;
    xconv__view_strides(t, st, &a);
    int64_t b = a;
    for (int i = 0; i < t->rank; i++) {
        int64_t reach = (t->shape[i] - 1) * st[i];
        if (reach < 0) a += reach;
        else b += reach;
    }
    *lo = a;
    *hi = b;
}

bool xconv__tensor_span(const xconv_tensor *t, int64_t *lo_bytes, int64_t *hi_bytes)
{
    if (tensor_elems(t) <= 0) return false;
    int64_t lo, hi;
    element_hull(t, &lo, &hi);
    int64_t es = (int64_t)xconv_dtype_size(t->dtype);
    *lo_bytes = lo * es;
    *hi_bytes = (hi + 1) * es;
    return true;
}

xconv_status xconv__check_tensor(const xconv_tensor *t, const char *what, int rank,
                                 xconv_error *err)
{
    char name[32];
    snprintf(name, sizeof name, "%s", what);
    XCONV_CHECK(err, t != NULL, INVALID_ARGUMENT, name, "%s is null", what);
    snprintf(name, sizeof name, "%s.dtype", what);
    XCONV_CHECK(err, xconv__dtype_valid(t->dtype), INVALID_ARGUMENT, name,
                "%s.dtype %d is not a valid dtype", what, (int)t->dtype);
    snprintf(name, sizeof name, "%s.rank", what);
    XCONV_CHECK(err, t->rank == rank, INVALID_ARGUMENT, name,
                "%s.rank %d does not equal %d", what, t->rank, rank);
    for (int i = 0; i < rank; i++) {
        snprintf(name, sizeof name, "%s.shape[%d]", what, i);
        XCONV_CHECK(err, t->shape[i] >= 0, INVALID_ARGUMENT, name,
                    "%s.shape[%d] %" PRId64 " is negative", what, i, t->shape[i]);
    }
    snprintf(name, sizeof name, "%s.device", what);
    XCONV_CHECK(err, t->device == XCONV_DEVICE_CPU || t->device == XCONV_DEVICE_CUDA,
                INVALID_ARGUMENT, name, "%s.device %d is not cpu (0) or cuda (1)", what,
                (int)t->device);
    return XCONV_STATUS_OK;
}

xconv_status xconv__check_memory(const xconv_tensor *t, const char *what, bool is_output,
                                 xconv_error *err)
{
    char name[32];
    const int64_t es = (int64_t)xconv_dtype_size(t->dtype);
    int64_t elems = tensor_elems(t), bytes;
    snprintf(name, sizeof name, "%s.shape", what);
    XCONV_CHECK(err, elems >= 0 && mul_ok(elems, es, &bytes), INVALID_ARGUMENT, name,
                "%s size overflows 64 bits", what);
    if (elems == 0) return XCONV_STATUS_OK; /* touches nothing: data may be NULL */
    snprintf(name, sizeof name, "%s.data", what);
    XCONV_CHECK(err, t->data != NULL, INVALID_ARGUMENT, name,
                "%s.data is null but %s has %" PRId64 " elements", what, what, elems);
    XCONV_CHECK(err, (uintptr_t)t->data % xconv__dtype_align(t->dtype) == 0, INVALID_ARGUMENT,
                name, "%s.data %p is not aligned to %zu bytes, the alignment of %s", what,
                t->data, xconv__dtype_align(t->dtype), xconv_dtype_name(t->dtype));
    int64_t lo = 0, hi = elems - 1;
    if (t->strided) {
        for (int i = 0; i < t->rank; i++) {
            snprintf(name, sizeof name, "%s.strides[%d]", what, i);
            int64_t reach;
            XCONV_CHECK(err, mul_ok(t->shape[i] - 1, t->strides[i], &reach), INVALID_ARGUMENT, name,
                        "%s.strides[%d] %" PRId64 " times size %" PRId64 " overflows 64 bits",
                        what, i, t->strides[i], t->shape[i]);
            if (is_output && t->shape[i] > 1)
                XCONV_CHECK(err, t->strides[i] != 0, INVALID_ARGUMENT, name,
                            "%s.strides[%d] is 0 but an output cannot broadcast", what, i);
        }
        /* The hull is a sum of rank terms each below 2^63 in magnitude, but their sum may
         * still overflow: add with checks. */
        lo = hi = t->offset;
        for (int i = 0; i < t->rank; i++) {
            int64_t reach = (t->shape[i] - 1) * t->strides[i];
            snprintf(name, sizeof name, "%s.strides", what);
            XCONV_CHECK(err, reach < 0 ? add_ok(lo, reach, &lo) : add_ok(hi, reach, &hi),
                        INVALID_ARGUMENT, name, "%s element offsets overflow 64 bits", what);
        }
        snprintf(name, sizeof name, "%s.offset", what);
        XCONV_CHECK(err, lo >= 0, INVALID_ARGUMENT, name,
                    "%s reaches element %" PRId64 " before the buffer start (offset %" PRId64
                    ")", what, lo, t->offset);
        snprintf(name, sizeof name, "%s.buffer_bytes", what);
        XCONV_CHECK(err, t->buffer_bytes > 0, INVALID_ARGUMENT, name,
                    "%s.buffer_bytes is 0 but a strided view must give its buffer size", what);
    }
    int64_t end_bytes;
    snprintf(name, sizeof name, "%s.buffer_bytes", what);
    XCONV_CHECK(err, add_ok(hi, 1, &end_bytes) && mul_ok(end_bytes, es, &end_bytes),
                INVALID_ARGUMENT, name, "%s extent overflows 64 bits", what);
    if (t->buffer_bytes != 0 || t->strided) {
        XCONV_CHECK(err, (uint64_t)end_bytes <= (uint64_t)t->buffer_bytes, INVALID_ARGUMENT, name,
                    "%s needs %" PRId64 " bytes but buffer_bytes is %zu", what, end_bytes,
                    t->buffer_bytes);
    }
    XCONV_CHECK(err, (uintptr_t)t->data <= UINTPTR_MAX - (uint64_t)end_bytes, INVALID_ARGUMENT,
                name, "%s buffer wraps around the address space", what);
    if (is_output && t->strided) {
        /* Distinct output elements must be distinct memory, or threads would race: with the
         * dims sorted by |stride|, each stride must clear the extent of all smaller ones. */
        int64_t order[XCONV_MAX_RANK], n = 0;
        for (int i = 0; i < t->rank; i++)
            if (t->shape[i] > 1) order[n++] = i;
        for (int64_t a = 1; a < n; a++)
            for (int64_t b = a; b > 0 && llabs(t->strides[order[b]]) < llabs(t->strides[order[b - 1]]); b--) {
                int64_t tmp = order[b]; order[b] = order[b - 1]; order[b - 1] = tmp;
            }
        int64_t covered = 0; /* elements spanned by the dims so far, minus one */
        for (int64_t a = 0; a < n; a++) {
            int64_t i = order[a], s = llabs(t->strides[i]);
            snprintf(name, sizeof name, "%s.strides[%d]", what, (int)i);
            XCONV_CHECK(err, s > covered, INVALID_ARGUMENT, name,
                        "%s.strides[%d] %" PRId64 " makes output elements overlap", what, (int)i,
                        t->strides[i]);
            covered += (t->shape[i] - 1) * s;
        }
    }
    return XCONV_STATUS_OK;
}

bool xconv__tensors_overlap(const xconv_tensor *a, const xconv_tensor *b)
{
    int64_t alo, ahi, blo, bhi;
    if (!a || !b || !a->data || !b->data) return false;
    if (!xconv__tensor_span(a, &alo, &ahi) || !xconv__tensor_span(b, &blo, &bhi)) return false;
    uintptr_t a0 = (uintptr_t)a->data + (uintptr_t)alo, a1 = (uintptr_t)a->data + (uintptr_t)ahi;
    uintptr_t b0 = (uintptr_t)b->data + (uintptr_t)blo, b1 = (uintptr_t)b->data + (uintptr_t)bhi;
    return a0 < b1 && b0 < a1;
}

/* ---------------------------------------------------------------------------------------- */
/* The whole problem                                                                        */
/* ---------------------------------------------------------------------------------------- */

xconv_status xconv__validate_problem(const xconv_params *p, const xconv_tensor *x,
                                     const xconv_tensor *w, const xconv_tensor *bias,
                                     const xconv_tensor *y, xconv_canon *canon, xconv_error *err)
{
    XCONV_TRY(check_params(p, err));
    const int rank = p->spatial_rank + 2;
    XCONV_TRY(xconv__check_tensor(x, "x", rank, err));
    XCONV_TRY(xconv__check_tensor(w, "w", rank, err));
    if (bias) XCONV_TRY(xconv__check_tensor(bias, "bias", 1, err));
    XCONV_TRY(xconv__check_tensor(y, "y", rank, err));

    dims dm;
    XCONV_TRY(check_shapes(p, x->shape, w->shape, &dm, err));
    int64_t ys[XCONV_MAX_RANK];
    output_shape_of(p, &dm, ys);
    char name[32];
    for (int i = 0; i < rank; i++) {
        snprintf(name, sizeof name, "y.shape[%d]", i);
        XCONV_CHECK(err, y->shape[i] == ys[i], INVALID_ARGUMENT, name,
                    "y.shape[%d] %" PRId64 " does not equal the computed output size %" PRId64,
                    i, y->shape[i], ys[i]);
    }
    if (bias)
        XCONV_CHECK(err, bias->shape[0] == dm.cout, INVALID_ARGUMENT, "bias.shape[0]",
                    "bias.shape[0] %" PRId64 " does not equal output channels %" PRId64,
                    bias->shape[0], dm.cout);

    /* dtype rules (DESIGN.md §2) */
    XCONV_CHECK(err, w->dtype == x->dtype, INVALID_ARGUMENT, "w.dtype",
                "w.dtype %s does not equal x.dtype %s", xconv_dtype_name(w->dtype),
                xconv_dtype_name(x->dtype));
    XCONV_CHECK(err, xconv_dtype_can_widen(x->dtype, y->dtype), INVALID_ARGUMENT, "y.dtype",
                "y.dtype %s is not x.dtype %s or a wider type of its family",
                xconv_dtype_name(y->dtype), xconv_dtype_name(x->dtype));
    if (bias)
        XCONV_CHECK(err, bias->dtype == x->dtype || bias->dtype == y->dtype, INVALID_ARGUMENT,
                    "bias.dtype", "bias.dtype %s is neither x.dtype %s nor y.dtype %s",
                    xconv_dtype_name(bias->dtype), xconv_dtype_name(x->dtype),
                    xconv_dtype_name(y->dtype));

    /* sizes: every tensor's element count and the work must fit 64 bits */
    XCONV_TRY(xconv__check_memory(x, "x", false, err));
    XCONV_TRY(xconv__check_memory(w, "w", false, err));
    if (bias) XCONV_TRY(xconv__check_memory(bias, "bias", false, err));
    XCONV_TRY(xconv__check_memory(y, "y", true, err));
    {
        int64_t work = 1;
        const int64_t *sp = p->op == XCONV_OP_CONV ? dm.y_size : dm.x_size;
        bool ok = mul_ok(dm.n, p->op == XCONV_OP_CONV ? dm.cout : dm.cin, &work) &&
                  mul_ok(work, p->op == XCONV_OP_CONV ? dm.cin_g : dm.cout_g, &work);
        for (int i = 0; ok && i < p->spatial_rank; i++)
            ok = mul_ok(work, dm.k_size[i], &work) && mul_ok(work, sp[i], &work);
        XCONV_CHECK(err, ok, INVALID_ARGUMENT, "x.shape",
                    "the number of multiply-adds overflows 64 bits");
    }

    /* aliasing: y must not overlap what it is computed from */
    XCONV_CHECK(err, !xconv__tensors_overlap(y, x), INVALID_ARGUMENT, "y.data", "y overlaps x");
    XCONV_CHECK(err, !xconv__tensors_overlap(y, w), INVALID_ARGUMENT, "y.data", "y overlaps w");
    XCONV_CHECK(err, !xconv__tensors_overlap(y, bias), INVALID_ARGUMENT, "y.data", "y overlaps bias");

    /* devices: one device for all tensors, and a backend for it */
    const xconv_tensor *all[4] = {x, w, bias, y};
    const char *names[4] = {"w.device", "w.device", "bias.device", "y.device"};
    for (int i = 1; i < 4; i++) {
        if (!all[i]) continue;
        XCONV_CHECK(err, all[i]->device == x->device && all[i]->device_index == x->device_index,
                    INVALID_ARGUMENT, names[i], "%s %s:%d differs from x.device %s:%d", names[i],
                    all[i]->device == XCONV_DEVICE_CUDA ? "cuda" : "cpu", all[i]->device_index,
                    x->device == XCONV_DEVICE_CUDA ? "cuda" : "cpu", x->device_index);
    }
#ifdef XCONV_HAVE_CUDA
    if (x->device == XCONV_DEVICE_CUDA) XCONV_TRY(xconv__cuda_check_device(x->device_index, err));
#else
    XCONV_CHECK(err, x->device == XCONV_DEVICE_CPU, UNSUPPORTED, "x.device",
                "x.device is cuda but this build of xconv has no cuda backend");
#endif

    xconv__normalize(p, x, w, bias, y, canon);
    return XCONV_STATUS_OK;
}
