/*
 * test_errors.c — the bad-input table (STYLE.md §7): one row per check of DESIGN.md §3, in
 * src/api/validate.c's order, then the plan, im2col and col2im entry points.
 *
 * A row is {base problem, mutation, status, parameter, message substring}. Each row runs
 * through xconv_conv and xconv_plan_create (and, where the failure is in the params or
 * shapes, xconv_output_shape; where it is in the problem, xconv_engine_supports) and must
 * return the status, name the parameter exactly (a row may list acceptable alternatives as
 * "a|b", and "prefix*" accepts any name with that prefix), describe the problem with the
 * substring (or one of "a|b"), fill err->operation, leave *plan
 * alone, and leave every buffer byte for byte as it was: y holds a canary, x, w and bias
 * are compared with copies.
 */
#include "common/tensor_util.h"
#include "harness.h"

#define ARENA 4096 /* bytes behind each tensor: more than any base problem needs */

enum base { CONV2D, CONVT2D, CONV2D_CL };

typedef struct state {
    xconv_params       p;
    xconv_tensor       x, w, bias, y;
    const xconv_params *pp;
    const xconv_tensor *px, *pw, *pb, *py;
    xconv_plan_options opt;
    unsigned char     *buf[4];  /* the arenas of x, w, bias, y */
} state;

static void contiguous(xconv_tensor *t, xconv_dtype dt, int rank, const int64_t *shape, void *data)
{
    *t = xconv_tensor_contiguous(dt, rank, shape, data);
}

/*
 * The valid problems rows start from (all f32, bias f32):
 *   CONV2D:    x [2, 4, 5, 5], w [6, 2, 3, 3], groups 2, pad 1 -> y [2, 6, 5, 5]
 *   CONVT2D:   x [1, 4, 3, 3], w [4, 1, 3, 3], groups 2, stride 2, pad 1, output padding 1
 *              -> y [1, 2, 6, 6]   ((3-1)*2 - 2 + 2 + 1 + 1 = 6)
 *   CONV2D_CL: CONV2D channels-last: x [2, 5, 5, 4], w [6, 3, 3, 2] -> y [2, 5, 5, 6]
 */
static void init_state(state *s, enum base b)
{
    memset(&s->p, 0, sizeof s->p);
    s->p.op = b == CONVT2D ? XCONV_OP_CONV_TRANSPOSE : XCONV_OP_CONV;
    s->p.spatial_rank = 2;
    s->p.layout = b == CONV2D_CL ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
    for (int i = 0; i < 2; i++) {
        s->p.stride[i] = b == CONVT2D ? 2 : 1;
        s->p.dilation[i] = 1;
        s->p.pad_lo[i] = s->p.pad_hi[i] = 1;
        s->p.output_padding[i] = b == CONVT2D ? 1 : 0;
    }
    s->p.groups = 2;
    const int64_t xs[3][4] = {{2, 4, 5, 5}, {1, 4, 3, 3}, {2, 5, 5, 4}};
    const int64_t ws[3][4] = {{6, 2, 3, 3}, {4, 1, 3, 3}, {6, 3, 3, 2}};
    const int64_t ys[3][4] = {{2, 6, 5, 5}, {1, 2, 6, 6}, {2, 5, 5, 6}};
    const int64_t bs[3] = {6, 2, 6};
    tu_rng rng = {(uint64_t)b + 1};
    for (int i = 0; i < 4; i++) {
        s->buf[i] = malloc(ARENA);
        for (int j = 0; j < ARENA; j++) s->buf[i][j] = i == 3 ? 0xA5 : (unsigned char)tu_next(&rng);
    }
    contiguous(&s->x, XCONV_DTYPE_F32, 4, xs[b], s->buf[0]);
    contiguous(&s->w, XCONV_DTYPE_F32, 4, ws[b], s->buf[1]);
    contiguous(&s->bias, XCONV_DTYPE_F32, 1, &bs[b], s->buf[2]);
    contiguous(&s->y, XCONV_DTYPE_F32, 4, ys[b], s->buf[3]);
    s->pp = &s->p;
    s->px = &s->x;
    s->pw = &s->w;
    s->pb = &s->bias;
    s->py = &s->y;
    memset(&s->opt, 0, sizeof s->opt);
}

static void free_state(state *s)
{
    for (int i = 0; i < 4; i++) free(s->buf[i]);
}

/* Gives t explicit row-major strides (a valid strided view of the same elements). */
static xconv_tensor *strided(xconv_tensor *t)
{
    int64_t step = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        t->strides[i] = step;
        step *= t->shape[i];
    }
    t->strided = true;
    t->offset = 0;
    t->buffer_bytes = (size_t)step * tu_info(t->dtype)->size;
    return t;
}

/* The exact byte size of a contiguous tensor. */
static size_t exact(const xconv_tensor *t)
{
    return (size_t)tu_numel(t->rank, t->shape) * tu_info(t->dtype)->size;
}

/* Makes every tensor CUDA-resident in name (the pointers stay host pointers: validation
 * must refuse before using them). Used by the no-CUDA-build row only. */
#ifndef XCONV_HAVE_CUDA
static void all_cuda(state *s)
{
    s->x.device = s->w.device = s->bias.device = s->y.device = XCONV_DEVICE_CUDA;
}
#endif

/* Sizes whose tensors each fit 64 bits but whose multiply-add count does not: a 1-D conv
 * with N = Cout = 2^20, X = 2^21, K = 2^20 (Y = 2^20 + 1): N*Cout*K*Y > 2^80. The data
 * pointers are the small arenas; nothing may read them. */
static void huge_work(state *s)
{
    const int64_t G = (int64_t)1 << 20;
    s->p.spatial_rank = 1;
    s->p.groups = 1;
    s->p.pad_lo[0] = s->p.pad_hi[0] = 0;
    s->x.rank = s->w.rank = s->y.rank = 3;
    int64_t xs[3] = {G, 1, 2 * G}, ws[3] = {G, 1, G}, ys[3] = {G, G, G + 1}, bs[1] = {G};
    memcpy(s->x.shape, xs, sizeof xs);
    memcpy(s->w.shape, ws, sizeof ws);
    memcpy(s->y.shape, ys, sizeof ys);
    s->bias.shape[0] = bs[0];
}

/* An engine of the table that does not support the (valid) problem of s; the depthwise
 * engine's name if every engine does (then the row fails and says so). */
static const char *unsupporting_engine(const state *s)
{
    for (int e = 0; e < xconv_engine_count(); e++) {
        xconv_error err;
        if (xconv_engine_supports(xconv_engine_name(e), s->pp, s->px, s->pw, s->pb, s->py, &err) ==
            XCONV_STATUS_UNSUPPORTED)
            return xconv_engine_name(e);
    }
    return "cpu.depthwise";
}

/* Flags: which other entry points a row also goes through. */
#define F_SHAPE 1   /* the failure is in params/shapes: xconv_output_shape reports it too */
#define F_PROBLEM 2 /* the failure is in the problem: xconv_engine_supports reports it too */
#define F_BOTH (F_SHAPE | F_PROBLEM)

#define I64MAX INT64_MAX

/*
 * The table. X(name, base, mutation, status, parameter, substring, flags); mutations are
 * expressions on `s` (state *).
 */
#define ROWS(X)                                                                                       \
    /* params */                                                                                      \
    X(params_null, CONV2D, s->pp = NULL, INVALID_ARGUMENT, "params", "params is null", F_BOTH)        \
    X(op_bad, CONV2D, s->p.op = (xconv_op)7, INVALID_ARGUMENT, "op", "op 7", F_BOTH)                  \
    X(op_negative, CONV2D, s->p.op = (xconv_op)-1, INVALID_ARGUMENT, "op", "op -1", F_BOTH)           \
    X(rank_zero, CONV2D, s->p.spatial_rank = 0, INVALID_ARGUMENT, "spatial_rank", "spatial rank 0",   \
      F_BOTH)                                                                                         \
    X(rank_four, CONV2D, s->p.spatial_rank = 4, INVALID_ARGUMENT, "spatial_rank", "spatial rank 4",   \
      F_BOTH)                                                                                         \
    X(layout_bad, CONV2D, s->p.layout = (xconv_layout)2, INVALID_ARGUMENT, "layout", "layout 2",      \
      F_BOTH)                                                                                         \
    X(stride_zero, CONV2D, s->p.stride[0] = 0, INVALID_ARGUMENT, "stride[0]", "stride 0", F_BOTH)     \
    X(stride_negative, CONV2D, s->p.stride[1] = -3, INVALID_ARGUMENT, "stride[1]", "stride -3",       \
      F_BOTH)                                                                                         \
    X(dilation_zero, CONV2D, s->p.dilation[1] = 0, INVALID_ARGUMENT, "dilation[1]", "dilation 0",     \
      F_BOTH)                                                                                         \
    X(pad_lo_negative, CONV2D, s->p.pad_lo[1] = -1, INVALID_ARGUMENT, "pad_lo[1]", "padding -1",      \
      F_BOTH)                                                                                         \
    X(pad_hi_negative, CONV2D, s->p.pad_hi[0] = -2, INVALID_ARGUMENT, "pad_hi[0]", "padding -2",      \
      F_BOTH)                                                                                         \
    X(opad_negative, CONVT2D, s->p.output_padding[0] = -1, INVALID_ARGUMENT, "output_padding[0]",     \
      "output padding -1", F_BOTH)                                                                    \
    X(opad_on_conv, CONV2D, s->p.output_padding[1] = 1, INVALID_ARGUMENT, "output_padding[1]",        \
      "output padding 1", F_BOTH)                                                                     \
    X(opad_not_below_stride, CONVT2D, s->p.output_padding[1] = 2, INVALID_ARGUMENT,                   \
      "output_padding[1]", "output padding 2 is not less than max(stride 2, dilation 1)", F_BOTH)     \
    X(opad_not_below_dilation, CONVT2D, (s->p.stride[0] = 1, s->p.dilation[0] = 3,                    \
                                         s->p.output_padding[0] = 3),                                 \
      INVALID_ARGUMENT, "output_padding[0]", "max(stride 1, dilation 3)", F_BOTH)                     \
    X(groups_zero, CONV2D, s->p.groups = 0, INVALID_ARGUMENT, "groups", "groups 0", F_BOTH)           \
    X(groups_negative, CONV2D, s->p.groups = -2, INVALID_ARGUMENT, "groups", "groups -2", F_BOTH)     \
    /* tensor descriptors */                                                                          \
    X(x_null, CONV2D, s->px = NULL, INVALID_ARGUMENT, "x", "x is null", F_PROBLEM)                    \
    X(w_null, CONV2D, s->pw = NULL, INVALID_ARGUMENT, "w", "w is null", F_PROBLEM)                    \
    X(y_null, CONV2D, s->py = NULL, INVALID_ARGUMENT, "y", "y is null", F_PROBLEM)                    \
    X(x_dtype_invalid, CONV2D, s->x.dtype = XCONV_DTYPE_INVALID, INVALID_ARGUMENT, "x.dtype",         \
      "not a valid dtype", F_PROBLEM)                                                                 \
    X(x_dtype_out_of_range, CONV2D, s->x.dtype = (xconv_dtype)99, INVALID_ARGUMENT, "x.dtype",        \
      "x.dtype 99", F_PROBLEM)                                                                        \
    X(w_dtype_negative, CONV2D, s->w.dtype = (xconv_dtype)-1, INVALID_ARGUMENT, "w.dtype",            \
      "w.dtype -1", F_PROBLEM)                                                                        \
    X(bias_dtype_count, CONV2D, s->bias.dtype = XCONV_DTYPE_COUNT, INVALID_ARGUMENT, "bias.dtype",    \
      "not a valid dtype", F_PROBLEM)                                                                 \
    X(y_dtype_invalid, CONV2D, s->y.dtype = XCONV_DTYPE_INVALID, INVALID_ARGUMENT, "y.dtype",         \
      "not a valid dtype", F_PROBLEM)                                                                 \
    X(x_rank, CONV2D, s->x.rank = 3, INVALID_ARGUMENT, "x.rank", "x.rank 3 does not equal 4",         \
      F_PROBLEM)                                                                                      \
    X(w_rank, CONV2D, s->w.rank = 5, INVALID_ARGUMENT, "w.rank", "w.rank 5", F_PROBLEM)               \
    X(w_rank_huge, CONV2D, s->w.rank = 1000, INVALID_ARGUMENT, "w.rank", "w.rank 1000", F_PROBLEM)    \
    X(bias_rank, CONV2D, s->bias.rank = 2, INVALID_ARGUMENT, "bias.rank", "does not equal 1",         \
      F_PROBLEM)                                                                                      \
    X(y_rank, CONV2D, s->y.rank = -1, INVALID_ARGUMENT, "y.rank", "y.rank -1", F_PROBLEM)             \
    X(x_shape_negative, CONV2D, s->x.shape[2] = -1, INVALID_ARGUMENT, "x.shape[2]", "is negative",    \
      F_BOTH)                                                                                         \
    X(y_shape_negative, CONV2D, s->y.shape[0] = -1, INVALID_ARGUMENT, "y.shape[0]", "is negative",    \
      F_PROBLEM)                                                                                      \
    X(x_device_bad, CONV2D, s->x.device = (xconv_device)5, INVALID_ARGUMENT, "x.device",              \
      "x.device 5", F_PROBLEM)                                                                        \
    /* shapes */                                                                                      \
    X(cin_zero, CONV2D, s->x.shape[1] = 0, INVALID_ARGUMENT, "x.shape[1]", "input channels 0",        \
      F_BOTH)                                                                                         \
    X(cin_zero_cl, CONV2D_CL, s->x.shape[3] = 0, INVALID_ARGUMENT, "x.shape[3]", "input channels 0",  \
      F_BOTH)                                                                                         \
    X(x_spatial_zero, CONV2D, s->x.shape[3] = 0, INVALID_ARGUMENT, "x.shape[3]", "input size 0",      \
      F_BOTH)                                                                                         \
    X(kernel_zero, CONV2D, s->w.shape[2] = 0, INVALID_ARGUMENT, "w.shape[2]", "kernel size 0",        \
      F_BOTH)                                                                                         \
    X(kernel_zero_cl, CONV2D_CL, s->w.shape[2] = 0, INVALID_ARGUMENT, "w.shape[2]", "kernel size 0",  \
      F_BOTH)                                                                                         \
    X(groups_not_dividing_cin, CONV2D, s->p.groups = 3, INVALID_ARGUMENT, "groups",                   \
      "groups 3 does not divide input channels 4", F_BOTH)                                            \
    X(cout_zero, CONV2D, s->w.shape[0] = 0, INVALID_ARGUMENT, "w.shape[0]", "output channels 0",      \
      F_BOTH)                                                                                         \
    X(groups_not_dividing_cout, CONV2D, s->w.shape[0] = 5, INVALID_ARGUMENT, "groups",                \
      "groups 2 does not divide output channels 5", F_BOTH)                                           \
    X(w_cin_wrong, CONV2D, s->w.shape[1] = 4, INVALID_ARGUMENT, "w.shape[1]",                         \
      "w.shape[1] 4 does not equal input channels / groups = 2", F_BOTH)                              \
    X(w_cin_wrong_cl, CONV2D_CL, s->w.shape[3] = 1, INVALID_ARGUMENT, "w.shape[3]",                   \
      "w.shape[3] 1 does not equal input channels / groups = 2", F_BOTH)                              \
    X(t_w_cin_wrong, CONVT2D, s->w.shape[0] = 2, INVALID_ARGUMENT, "w.shape[0]",                      \
      "w.shape[0] 2 does not equal input channels 4", F_BOTH)                                         \
    X(t_w_cout_zero, CONVT2D, s->w.shape[1] = 0, INVALID_ARGUMENT, "w.shape[1]", "w.shape[1] 0",      \
      F_BOTH)                                                                                         \
    X(t_cout_overflow, CONVT2D, s->w.shape[1] = I64MAX / 2 + 1, INVALID_ARGUMENT, "w.shape[1]",       \
      "overflows 64 bits", F_BOTH)                                                                    \
    X(dilated_kernel_overflow, CONV2D, s->p.dilation[1] = I64MAX / 2 + 1, INVALID_ARGUMENT,           \
      "w.shape[3]", "overflows 64 bits", F_BOTH)                                                      \
    X(padded_input_overflow, CONV2D, s->p.pad_lo[0] = I64MAX - 2, INVALID_ARGUMENT,                   \
      "pad_lo[0]", "padded input size", F_BOTH)                                                                    \
    X(input_too_small, CONV2D, (s->p.pad_lo[1] = s->p.pad_hi[1] = 0, s->x.shape[3] = 2),              \
      INVALID_ARGUMENT, "x.shape[3]", "input too small for kernel", F_BOTH)                           \
    X(input_too_small_dilated, CONV2D, s->p.dilation[0] = 4, INVALID_ARGUMENT, "x.shape[2]",          \
      "input too small for kernel", F_BOTH)                                                           \
    X(t_output_overflow, CONVT2D, s->p.stride[0] = I64MAX / 2, INVALID_ARGUMENT,                      \
      "stride[0]", "overflows 64 bits", F_BOTH)                                                                    \
    X(t_padding_too_large, CONVT2D, s->p.pad_lo[1] = 20, INVALID_ARGUMENT, "pad_lo[1]",               \
      "padding too large", F_BOTH)                                                                    \
    X(t_padding_huge, CONVT2D, s->p.pad_lo[0] = s->p.pad_hi[0] = I64MAX, INVALID_ARGUMENT,            \
      "pad_lo[0]|pad_hi[0]|x.shape[2]", "padding too large|overflows 64 bits", F_BOTH)                                                       \
    X(y_shape_wrong, CONV2D, s->y.shape[3] = 4, INVALID_ARGUMENT, "y.shape[3]",                       \
      "y.shape[3] 4 does not equal the computed output size 5", F_PROBLEM)                            \
    X(y_channels_wrong, CONV2D_CL, s->y.shape[3] = 4, INVALID_ARGUMENT, "y.shape[3]",                 \
      "does not equal the computed output size 6", F_PROBLEM)                                         \
    X(t_y_shape_wrong, CONVT2D, s->y.shape[2] = 7, INVALID_ARGUMENT, "y.shape[2]",                    \
      "y.shape[2] 7 does not equal the computed output size 6", F_PROBLEM)                            \
    X(bias_shape_wrong, CONV2D, s->bias.shape[0] = 3, INVALID_ARGUMENT, "bias.shape[0]",              \
      "bias.shape[0] 3 does not equal output channels 6", F_PROBLEM)                                  \
    /* dtype rules */                                                                                 \
    X(w_dtype_differs, CONV2D, s->w.dtype = XCONV_DTYPE_F64, INVALID_ARGUMENT, "w.dtype",             \
      "w.dtype f64 does not equal x.dtype f32", F_PROBLEM)                                            \
    X(y_dtype_narrower, CONV2D, s->y.dtype = XCONV_DTYPE_F16, INVALID_ARGUMENT, "y.dtype",            \
      "y.dtype f16", F_PROBLEM)                                                                       \
    X(y_dtype_other_family, CONV2D, s->y.dtype = XCONV_DTYPE_I32, INVALID_ARGUMENT, "y.dtype",        \
      "y.dtype i32", F_PROBLEM)                                                                       \
    X(y_dtype_complex, CONV2D, s->y.dtype = XCONV_DTYPE_C64, INVALID_ARGUMENT, "y.dtype",             \
      "y.dtype c64", F_PROBLEM)                                                                       \
    X(y_dtype_signed_to_unsigned, CONV2D,                                                             \
      (s->x.dtype = s->w.dtype = XCONV_DTYPE_I8, s->y.dtype = XCONV_DTYPE_U32,                        \
       s->bias.dtype = XCONV_DTYPE_I8),                                                               \
      INVALID_ARGUMENT, "y.dtype", "y.dtype u32", F_PROBLEM)                                          \
    X(y_dtype_f16_to_bf16, CONV2D,                                                                    \
      (s->x.dtype = s->w.dtype = s->bias.dtype = XCONV_DTYPE_F16, s->y.dtype = XCONV_DTYPE_BF16),     \
      INVALID_ARGUMENT, "y.dtype", "y.dtype bf16", F_PROBLEM)                                         \
    X(bias_dtype_other, CONV2D, s->bias.dtype = XCONV_DTYPE_F64, INVALID_ARGUMENT, "bias.dtype",      \
      "bias.dtype f64", F_PROBLEM)                                                                    \
    /* sizes, data, extents */                                                                        \
    X(x_size_overflow, CONV2D, s->x.shape[0] = s->y.shape[0] = I64MAX / 64, INVALID_ARGUMENT,         \
      "x.shape", "x size overflows 64 bits", F_PROBLEM)                                               \
    X(x_data_null, CONV2D, s->x.data = NULL, INVALID_ARGUMENT, "x.data", "x.data is null", F_PROBLEM) \
    X(w_data_null, CONV2D, s->w.data = NULL, INVALID_ARGUMENT, "w.data", "w.data is null", F_PROBLEM) \
    X(bias_data_null, CONV2D, s->bias.data = NULL, INVALID_ARGUMENT, "bias.data",                     \
      "bias.data is null", F_PROBLEM)                                                                 \
    X(y_data_null, CONV2D, s->y.data = NULL, INVALID_ARGUMENT, "y.data", "y.data is null", F_PROBLEM) \
    X(x_stride_overflow, CONV2D, strided(&s->x)->strides[0] = I64MAX, INVALID_ARGUMENT,               \
      "x.strides", "x element offsets overflow 64 bits", F_PROBLEM)                                                 \
    X(x_offsets_overflow, CONV2D,                                                                     \
      (strided(&s->x)->strides[0] = I64MAX / 2, s->x.strides[1] = I64MAX / 4), INVALID_ARGUMENT,      \
      "x.strides", "overflow 64 bits", F_PROBLEM)                                                     \
    X(x_before_buffer, CONV2D, strided(&s->x)->strides[3] = -1, INVALID_ARGUMENT, "x.offset",         \
      "before the buffer start", F_PROBLEM)                                                           \
    X(x_strided_no_size, CONV2D, strided(&s->x)->buffer_bytes = 0, INVALID_ARGUMENT,                  \
      "x.buffer_bytes", "buffer_bytes is 0", F_PROBLEM)                                               \
    X(x_buffer_short, CONV2D, s->x.buffer_bytes = exact(&s->x) - 1, INVALID_ARGUMENT,                 \
      "x.buffer_bytes", "x needs 800 bytes but buffer_bytes is 799", F_PROBLEM)                       \
    X(w_buffer_short, CONV2D, s->w.buffer_bytes = exact(&s->w) - 1, INVALID_ARGUMENT,                 \
      "w.buffer_bytes", "w needs 432 bytes but buffer_bytes is 431", F_PROBLEM)                       \
    X(bias_buffer_short, CONV2D, s->bias.buffer_bytes = exact(&s->bias) - 1, INVALID_ARGUMENT,        \
      "bias.buffer_bytes", "bias needs 24 bytes but buffer_bytes is 23", F_PROBLEM)                   \
    X(y_buffer_short, CONV2D, s->y.buffer_bytes = exact(&s->y) - 1, INVALID_ARGUMENT,                 \
      "y.buffer_bytes", "y needs 1200 bytes but buffer_bytes is 1199", F_PROBLEM)                     \
    X(y_view_past_end, CONV2D, strided(&s->y)->offset = 1, INVALID_ARGUMENT, "y.buffer_bytes",        \
      "y needs 1204 bytes but buffer_bytes is 1200", F_PROBLEM)                                       \
    X(x_extent_overflow, CONV2D, strided(&s->x)->offset = I64MAX / 2, INVALID_ARGUMENT,               \
      "x.buffer_bytes", "extent overflows 64 bits", F_PROBLEM)                                        \
    X(x_address_wraps, CONV2D, (s->x.data = (void *)(UINTPTR_MAX - 127), s->x.buffer_bytes = 0),      \
      INVALID_ARGUMENT, "x.buffer_bytes", "wraps around the address space", F_PROBLEM)                \
    X(x_misaligned, CONV2D, s->x.data = (char *)s->x.data + 2, INVALID_ARGUMENT, "x.data",            \
      "is not aligned to 4 bytes", F_PROBLEM)                                                         \
    X(y_zero_stride, CONV2D, strided(&s->y)->strides[1] = 0, INVALID_ARGUMENT, "y.strides[1]",        \
      "an output cannot broadcast", F_PROBLEM)                                                        \
    X(y_elements_overlap, CONV2D, strided(&s->y)->strides[2] = 1, INVALID_ARGUMENT, "y.strides*",     \
      "makes output elements overlap", F_PROBLEM)                                                     \
    X(work_overflow, CONV2D, huge_work(s), INVALID_ARGUMENT, "x.shape",                               \
      "multiply-adds overflows 64 bits", F_PROBLEM)                                                   \
    /* aliasing */                                                                                    \
    X(y_is_x, CONV2D, s->y.data = s->x.data, INVALID_ARGUMENT, "y.data", "y overlaps x", F_PROBLEM)   \
    X(y_inside_x, CONV2D, s->y.data = s->buf[0] + 4, INVALID_ARGUMENT, "y.data", "y overlaps x",      \
      F_PROBLEM)                                                                                      \
    X(y_overlaps_w, CONV2D, s->y.data = s->buf[1] + 400, INVALID_ARGUMENT, "y.data", "y overlaps w",  \
      F_PROBLEM)                                                                                      \
    X(y_overlaps_bias, CONV2D, s->y.data = s->buf[2], INVALID_ARGUMENT, "y.data", "y overlaps bias",  \
      F_PROBLEM)                                                                                      \
    /* devices */                                                                                     \
    X(w_on_other_device, CONV2D, s->w.device = XCONV_DEVICE_CUDA, INVALID_ARGUMENT, "w.device",       \
      "differs from x.device", F_PROBLEM)                                                             \
    X(y_on_other_index, CONV2D, s->y.device_index = 1, INVALID_ARGUMENT, "y.device",                  \
      "differs from x.device", F_PROBLEM)                                                             \
    CUDA_ROW(X)                                                                                       \
    /* engines and plans */                                                                           \
    X(engine_unknown, CONV2D, s->opt.engine = "cpu.no_such_engine", UNSUPPORTED, "engine",            \
      "cpu.no_such_engine", 0)                                                                        \
    X(engine_unsupported, CONV2D, s->opt.engine = unsupporting_engine(s), UNSUPPORTED, "engine",      \
      "does not support", 0)

/* Without a CUDA backend, CUDA tensors are refused as UNSUPPORTED (DESIGN.md §3: "the device
 * of each tensor"); with one, host pointers in CUDA tensors are the caller's problem. */
#ifdef XCONV_HAVE_CUDA
#define CUDA_ROW(X)
#else
#define CUDA_ROW(X)                                                                                   \
    X(cuda_not_built, CONV2D, all_cuda(s), UNSUPPORTED, "x.device", "no cuda backend", F_PROBLEM)
#endif

typedef struct row {
    const char  *name;
    enum base    base;
    void        (*mutate)(state *s);
    xconv_status status;
    const char  *parameter;
    const char  *substring;
    int          flags;
} row;

#define DEFINE_MUTATION(name, base, mutation, status, param, sub, flags)                              \
    static void mut_##name(state *s) { (void)(mutation); }
ROWS(DEFINE_MUTATION)

#define TABLE_ROW(name, base, mutation, status, param, sub, flags)                                    \
    {#name, base, mut_##name, XCONV_STATUS_##status, param, sub, flags},
static const row ROW_TABLE[] = {ROWS(TABLE_ROW)};

/* Whether `text` matches one of the '|'-separated alternatives of `pattern`: for parameters
 * an exact name, or a prefix when the alternative ends in '*'; for descriptions a substring. */
static bool matches_any(const char *text, const char *pattern, bool substring)
{
    char alts[128];
    snprintf(alts, sizeof alts, "%s", pattern);
    for (char *save = NULL, *a = strtok_r(alts, "|", &save); a; a = strtok_r(NULL, "|", &save)) {
        size_t n = strlen(a);
        if (substring ? strstr(text, a) != NULL
                      : (n && a[n - 1] == '*') ? strncmp(text, a, n - 1) == 0 : strcmp(text, a) == 0)
            return true;
    }
    return false;
}

/* Whether the record names the expected failure; prints what differs. */
static bool record_matches(const char *row_name, const char *call, xconv_status got,
                           const xconv_error *err, xconv_status status, const char *parameter,
                           const char *substring)
{
    bool ok = got == status && err->status == status && matches_any(err->parameter, parameter, false) &&
              matches_any(err->description, substring, true) && err->operation[0] != '\0';
    if (!ok)
        fprintf(stderr,
                "  %s via %s: status %s (record %s), parameter \"%s\", operation \"%s\", "
                "description \"%s\"; expected %s, \"%s\", \"...%s...\"\n",
                row_name, call, xconv_status_name(got), xconv_status_name(err->status),
                err->parameter, err->operation, err->description, xconv_status_name(status),
                parameter, substring);
    return ok;
}

/* Fills a record with garbage (NUL-terminated strings, so a record the library forgot to
 * fill fails the checks instead of overrunning them). */
static void poison(xconv_error *err)
{
    memset(err, 0x5A, sizeof *err);
    err->operation[sizeof err->operation - 1] = '\0';
    err->parameter[sizeof err->parameter - 1] = '\0';
    err->description[sizeof err->description - 1] = '\0';
}

/* Every buffer must be as init_state left it: y's arena all canary, the inputs unchanged. */
static bool buffers_intact(const state *s, const state *pristine)
{
    bool ok = tu_all_bytes(s->buf[3], ARENA, 0xA5);
    for (int i = 0; i < 3; i++) ok = ok && memcmp(s->buf[i], pristine->buf[i], ARENA) == 0;
    return ok;
}

static void run_row(const row *r)
{
    for (int call = 0; call < 4; call++) {
        if ((call == 2 && !(r->flags & F_SHAPE)) || (call == 3 && !(r->flags & F_PROBLEM))) continue;
        state s, pristine;
        init_state(&s, r->base);
        init_state(&pristine, r->base);
        r->mutate(&s);
        xconv_error  err;
        xconv_status st;
        const char  *name;
        poison(&err);
        if (call == 0) {
            name = "xconv_conv";
            const char *used = "untouched";
            st = xconv_conv(NULL, s.pp, s.px, s.pw, s.pb, s.py, &s.opt, &used, &err);
            XT_CHECK(st == XCONV_STATUS_OK || strcmp(used, "untouched") == 0,
                     "%s: engine_out written on error", r->name);
        } else if (call == 1) {
            name = "xconv_plan_create";
            xconv_plan *sentinel = (xconv_plan *)&s, *plan = sentinel;
            st = xconv_plan_create(NULL, s.pp, s.px, s.pw, s.pb, s.py, &s.opt, &plan, &err);
            XT_CHECK(plan == sentinel || st == XCONV_STATUS_OK, "%s: *plan written on error", r->name);
            if (st == XCONV_STATUS_OK) xconv_plan_destroy(plan);
        } else if (call == 2) {
            name = "xconv_output_shape";
            int64_t ys[XCONV_MAX_RANK] = {-7, -7, -7, -7, -7};
            st = xconv_output_shape(s.pp, s.x.shape, s.w.shape, ys, &err);
            bool untouched = true;
            for (int i = 0; i < XCONV_MAX_RANK; i++) untouched = untouched && ys[i] == -7;
            XT_CHECK(untouched || st == XCONV_STATUS_OK, "%s: y_shape written on error", r->name);
        } else {
            name = "xconv_engine_supports";
            st = xconv_engine_supports("cpu.ref", s.pp, s.px, s.pw, s.pb, s.py, &err);
        }
        XT_CHECK(record_matches(r->name, name, st, &err, r->status, r->parameter, r->substring),
                 "row %s via %s", r->name, name);
        XT_CHECK(buffers_intact(&s, &pristine), "row %s via %s: a buffer was written", r->name, name);
        free_state(&s);
        free_state(&pristine);
    }
}

/* Every base problem is valid as it stands: otherwise the rows would prove nothing. */
static void check_bases(void)
{
    for (int b = 0; b < 3; b++) {
        state s;
        init_state(&s, (enum base)b);
        xconv_error  err;
        xconv_status st = xconv_conv(NULL, s.pp, s.px, s.pw, s.pb, s.py, NULL, NULL, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "base %d is invalid: %s", b, err.description);
        XT_CHECK(st != XCONV_STATUS_OK || (err.status == XCONV_STATUS_OK && err.operation[0]),
                 "base %d: the record of a success", b);
        free_state(&s);
    }
    /* A NULL error record is allowed on failure too. */
    state s;
    init_state(&s, CONV2D);
    s.p.groups = 0;
    XT_CHECK(xconv_conv(NULL, &s.p, &s.x, &s.w, &s.bias, &s.y, NULL, NULL, NULL) ==
                 XCONV_STATUS_INVALID_ARGUMENT, "err = NULL");
    free_state(&s);
}


/* ---------------------------------------------------------------------------------------- */
/* Plans: create's own pointer, execute's pointers and workspace, output_shape's pointers    */
/* ---------------------------------------------------------------------------------------- */

static void expect_row(const char *name, const char *call, xconv_status st, const xconv_error *err,
                       xconv_status status, const char *parameter, const char *substring)
{
    XT_CHECK(record_matches(name, call, st, err, status, parameter, substring), "row %s via %s",
             name, call);
}

static void test_plan_rows(void)
{
    state       s, pristine;
    xconv_error err;
    init_state(&s, CONV2D);
    init_state(&pristine, CONV2D);

    xconv_status st = xconv_plan_create(NULL, s.pp, s.px, s.pw, s.pb, s.py, NULL, NULL, &err);
    expect_row("plan_pointer_null", "xconv_plan_create", st, &err, XCONV_STATUS_INVALID_ARGUMENT,
               "plan", "null");

    int64_t ys[XCONV_MAX_RANK];
    st = xconv_output_shape(&s.p, NULL, s.w.shape, ys, &err);
    expect_row("x_shape_null", "xconv_output_shape", st, &err, XCONV_STATUS_INVALID_ARGUMENT,
               "x_shape", "null");
    st = xconv_output_shape(&s.p, s.x.shape, NULL, ys, &err);
    expect_row("w_shape_null", "xconv_output_shape", st, &err, XCONV_STATUS_INVALID_ARGUMENT,
               "w_shape", "null");
    st = xconv_output_shape(&s.p, s.x.shape, s.w.shape, NULL, &err);
    expect_row("y_shape_null", "xconv_output_shape", st, &err, XCONV_STATUS_INVALID_ARGUMENT,
               "y_shape", "null");

    xconv_plan *with_bias = NULL, *without_bias = NULL;
    st = xconv_plan_create(NULL, s.pp, s.px, s.pw, s.pb, s.py, NULL, &with_bias, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "plan with bias: %s", err.description);
    st = xconv_plan_create(NULL, s.pp, s.px, s.pw, NULL, s.py, NULL, &without_bias, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "plan without bias: %s", err.description);
    if (with_bias && without_bias) {
        void *x = s.buf[0], *w = s.buf[1], *b = s.buf[2], *y = s.buf[3];
        struct {
            const char        *name;
            const xconv_plan  *plan;
            const void        *x, *w, *b;
            void              *y;
            const char        *parameter, *substring;
        } rows[] = {
            {"execute_plan_null", NULL, x, w, b, y, "plan", "null"},
            {"execute_x_null", with_bias, NULL, w, b, y, "x", "null"},
            {"execute_w_null", with_bias, x, NULL, b, y, "w", "null"},
            {"execute_y_null", with_bias, x, w, b, NULL, "y", "null"},
            {"execute_bias_missing", with_bias, x, w, NULL, y, "bias", "null"},
            {"execute_bias_unexpected", without_bias, x, w, b, y, "bias", "without"},
            {"execute_y_is_x", with_bias, x, w, b, x, "y", "y overlaps x"},
            {"execute_y_overlaps_w", with_bias, x, w, b, s.buf[1] + 8, "y", "y overlaps w"},
            {"execute_y_overlaps_bias", with_bias, x, w, b, s.buf[2] + 4, "y", "y overlaps bias"},
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            st = xconv_plan_execute(rows[i].plan, rows[i].x, rows[i].w, rows[i].b, rows[i].y, NULL,
                                    0, &err);
            expect_row(rows[i].name, "xconv_plan_execute", st, &err,
                       XCONV_STATUS_INVALID_ARGUMENT, rows[i].parameter, rows[i].substring);
            XT_CHECK(buffers_intact(&s, &pristine), "row %s: a buffer was written", rows[i].name);
        }
        XT_CHECK(xconv_plan_execute(NULL, x, w, b, y, NULL, 0, NULL) == XCONV_STATUS_INVALID_ARGUMENT,
                 "execute with err = NULL");
    }
    xconv_plan_destroy(with_bias);
    xconv_plan_destroy(without_bias);

    /* A workspace one byte short, for every engine that wants one on the base problems. */
    int sized = 0;
    for (int b = 0; b < 3; b++)
        for (int e = 0; e < xconv_engine_count(); e++) {
            state t, tp;
            init_state(&t, (enum base)b);
            init_state(&tp, (enum base)b);
            xconv_plan_options o = {.engine = xconv_engine_name(e)};
            xconv_plan        *plan = NULL;
            if (xconv_plan_create(NULL, t.pp, t.px, t.pw, t.pb, t.py, &o, &plan, &err) == XCONV_STATUS_OK) {
                size_t need = xconv_plan_workspace_size(plan);
                if (need > 0) {
                    unsigned char *ws = malloc(need);
                    st = xconv_plan_execute(plan, t.buf[0], t.buf[1], t.buf[2], t.buf[3], ws,
                                            need - 1, &err);
                    expect_row("workspace_short", o.engine, st, &err,
                               XCONV_STATUS_WORKSPACE_TOO_SMALL, "workspace_bytes", "workspace_bytes");
                    XT_CHECK(buffers_intact(&t, &tp), "workspace_short [%s]: a buffer was written", o.engine);
                    free(ws);
                    sized++;
                }
                xconv_plan_destroy(plan);
            }
            free_state(&t);
            free_state(&tp);
        }
    if (!sized) printf("test_errors: note: no engine needs a workspace on the base problems\n");
    free_state(&s);
    free_state(&pristine);
}

/* ---------------------------------------------------------------------------------------- */
/* im2col and col2im                                                                        */
/* ---------------------------------------------------------------------------------------- */

enum which { IM2COL, COL2IM };

/* Base: 2-D, channels-first, image [2, 3, 4, 4] f32, kernel 3x3, pad 1 -> Y 4x4,
 * cols [2, 27, 16]. im2col reads the image and writes cols; col2im the other way round. */
typedef struct ustate {
    xconv_params        p;
    int64_t             kernel[3];
    xconv_tensor        img, cols;
    const xconv_params *pp;
    const int64_t      *pk;
    const xconv_tensor *pimg, *pcols;
    unsigned char      *buf[2]; /* img, cols */
} ustate;

static void init_ustate(ustate *u, enum which wh)
{
    memset(&u->p, 0, sizeof u->p);
    u->p.spatial_rank = 2;
    u->p.layout = XCONV_LAYOUT_CHANNELS_FIRST;
    u->p.groups = 1;
    for (int i = 0; i < 2; i++) {
        u->p.stride[i] = u->p.dilation[i] = 1;
        u->p.pad_lo[i] = u->p.pad_hi[i] = 1;
        u->kernel[i] = 3;
    }
    u->kernel[2] = 1;
    const int64_t is[4] = {2, 3, 4, 4}, cs[3] = {2, 27, 16};
    tu_rng rng = {77};
    for (int i = 0; i < 2; i++) {
        u->buf[i] = malloc(ARENA);
        bool out = (i == 1) == (wh == IM2COL);
        for (int j = 0; j < ARENA; j++) u->buf[i][j] = out ? 0xA5 : (unsigned char)tu_next(&rng);
    }
    u->img = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, is, u->buf[0]);
    u->cols = xconv_tensor_contiguous(XCONV_DTYPE_F32, 3, cs, u->buf[1]);
    u->pp = &u->p;
    u->pk = u->kernel;
    u->pimg = &u->img;
    u->pcols = &u->cols;
}

#define UROWS(X)                                                                                      \
    X(u_params_null, IM2COL, u->pp = NULL, INVALID_ARGUMENT, "params", "params is null")              \
    X(u_rank_zero, IM2COL, u->p.spatial_rank = 0, INVALID_ARGUMENT, "spatial_rank", "spatial rank 0") \
    X(u_layout_bad, COL2IM, u->p.layout = (xconv_layout)3, INVALID_ARGUMENT, "layout", "layout 3")    \
    X(u_stride_zero, IM2COL, u->p.stride[1] = 0, INVALID_ARGUMENT, "stride[1]", "stride 0")           \
    X(u_dilation_zero, COL2IM, u->p.dilation[0] = 0, INVALID_ARGUMENT, "dilation[0]", "dilation 0")   \
    X(u_pad_lo_negative, IM2COL, u->p.pad_lo[0] = -1, INVALID_ARGUMENT, "pad_lo[0]", "padding -1")    \
    X(u_pad_hi_negative, COL2IM, u->p.pad_hi[1] = -5, INVALID_ARGUMENT, "pad_hi[1]", "padding -5")    \
    X(u_output_padding, IM2COL, u->p.output_padding[0] = 1, INVALID_ARGUMENT, "output_padding[0]",    \
      "output padding 1")                                                                             \
    X(u_groups, COL2IM, u->p.groups = 2, INVALID_ARGUMENT, "groups", "groups 2")                      \
    X(u_kernel_null, IM2COL, u->pk = NULL, INVALID_ARGUMENT, "kernel", "kernel is null")              \
    X(u_kernel_zero, COL2IM, u->kernel[1] = 0, INVALID_ARGUMENT, "kernel[1]", "kernel size 0")        \
    X(u_x_null, IM2COL, u->pimg = NULL, INVALID_ARGUMENT, "x", "x is null")                           \
    X(u_cols_null, IM2COL, u->pcols = NULL, INVALID_ARGUMENT, "cols", "cols is null")                 \
    X(u_cols_in_null, COL2IM, u->pcols = NULL, INVALID_ARGUMENT, "cols", "cols is null")              \
    X(u_y_null, COL2IM, u->pimg = NULL, INVALID_ARGUMENT, "y", "y is null")                           \
    X(u_x_dtype, IM2COL, u->img.dtype = (xconv_dtype)40, INVALID_ARGUMENT, "x.dtype", "x.dtype 40")   \
    X(u_x_rank, IM2COL, u->img.rank = 3, INVALID_ARGUMENT, "x.rank", "x.rank 3")                      \
    X(u_cols_rank, COL2IM, u->cols.rank = 4, INVALID_ARGUMENT, "cols.rank", "cols.rank 4")            \
    X(u_x_shape_negative, IM2COL, u->img.shape[2] = -1, INVALID_ARGUMENT, "x.shape[2]", "negative")   \
    X(u_x_device, IM2COL, u->img.device = (xconv_device)9, INVALID_ARGUMENT, "x.device", "x.device 9") \
    X(u_channels_zero, IM2COL, u->img.shape[1] = 0, INVALID_ARGUMENT, "x.shape[1]", "channels 0")     \
    X(u_size_zero, COL2IM, u->img.shape[3] = 0, INVALID_ARGUMENT, "y.shape[3]", "input size 0")       \
    X(u_kernel_overflow, IM2COL, u->p.dilation[0] = I64MAX, INVALID_ARGUMENT, "kernel[0]",            \
      "overflows 64 bits")                                                                            \
    X(u_padded_overflow, IM2COL, u->p.pad_hi[0] = I64MAX, INVALID_ARGUMENT, "pad_hi[0]|x.shape[2]",   \
      "overflows 64 bits")                                                                            \
    X(u_too_small, IM2COL, u->p.dilation[1] = 3, INVALID_ARGUMENT, "x.shape[3]",                      \
      "input too small for kernel")                                                                   \
    X(u_cols_shape, IM2COL, u->cols.shape[1] = 26, INVALID_ARGUMENT, "cols.shape[1]",                 \
      "does not equal the computed 27")                                                               \
    X(u_cols_shape_col2im, COL2IM, u->cols.shape[2] = 17, INVALID_ARGUMENT, "cols.shape[2]",          \
      "does not equal the computed 16")                                                               \
    X(u_cols_dtype, IM2COL, u->cols.dtype = XCONV_DTYPE_F64, INVALID_ARGUMENT, "cols.dtype",          \
      "cols.dtype f64")                                                                               \
    X(u_y_dtype_narrow, COL2IM, u->img.dtype = XCONV_DTYPE_F16, INVALID_ARGUMENT, "y.dtype",          \
      "y.dtype f16")                                                                                  \
    X(u_x_data_null, IM2COL, u->img.data = NULL, INVALID_ARGUMENT, "x.data", "x.data is null")        \
    X(u_cols_short, IM2COL, u->cols.buffer_bytes = exact(&u->cols) - 1, INVALID_ARGUMENT,             \
      "cols.buffer_bytes", "buffer_bytes is 3455")                                                    \
    X(u_cols_in_short, COL2IM, u->cols.buffer_bytes = exact(&u->cols) - 1, INVALID_ARGUMENT,          \
      "cols.buffer_bytes", "buffer_bytes is 3455")                                                    \
    X(u_cols_zero_stride, IM2COL, strided(&u->cols)->strides[1] = 0, INVALID_ARGUMENT,                \
      "cols.strides[1]", "an output cannot broadcast")                                                \
    X(u_y_zero_stride, COL2IM, strided(&u->img)->strides[2] = 0, INVALID_ARGUMENT, "y.strides[2]",    \
      "an output cannot broadcast")                                                                   \
    X(u_cols_overlaps_x, IM2COL, u->cols.data = u->buf[0] + 16, INVALID_ARGUMENT, "cols.data",        \
      "cols overlaps x")                                                                              \
    X(u_y_overlaps_cols, COL2IM, u->img.data = u->buf[1] + 4, INVALID_ARGUMENT, "y.data",             \
      "y overlaps cols")                                                                              \
    X(u_device_mismatch, IM2COL, u->cols.device = XCONV_DEVICE_CUDA, INVALID_ARGUMENT, "cols.device", \
      "differs")                                                                                      \
    X(u_cuda, IM2COL, u->cols.device = u->img.device = XCONV_DEVICE_CUDA, UNSUPPORTED, "x.device",    \
      "cpu tensors only")

typedef struct urow {
    const char  *name;
    enum which   which;
    void        (*mutate)(ustate *u);
    xconv_status status;
    const char  *parameter, *substring;
} urow;

#define DEFINE_UMUTATION(name, which, mutation, status, param, sub)                                   \
    static void umut_##name(ustate *u) { (void)(mutation); }
UROWS(DEFINE_UMUTATION)

#define UTABLE_ROW(name, which, mutation, status, param, sub)                                         \
    {#name, which, umut_##name, XCONV_STATUS_##status, param, sub},
static const urow UROW_TABLE[] = {UROWS(UTABLE_ROW)};

static void test_unfold_rows(void)
{
    /* The bases are valid. */
    for (int wh = 0; wh < 2; wh++) {
        ustate      u;
        xconv_error err;
        init_ustate(&u, (enum which)wh);
        xconv_status st = wh == IM2COL ? xconv_im2col(NULL, u.pp, u.pk, u.pimg, u.pcols, &err)
                                       : xconv_col2im(NULL, u.pp, u.pk, u.pcols, u.pimg, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "unfold base %d: %s", wh, err.description);
        free(u.buf[0]);
        free(u.buf[1]);
    }
    for (size_t i = 0; i < sizeof UROW_TABLE / sizeof UROW_TABLE[0]; i++) {
        const urow *r = &UROW_TABLE[i];
        ustate      u, pristine;
        xconv_error err;
        init_ustate(&u, r->which);
        init_ustate(&pristine, r->which);
        r->mutate(&u);
        poison(&err);
        xconv_status st = r->which == IM2COL ? xconv_im2col(NULL, u.pp, u.pk, u.pimg, u.pcols, &err)
                                             : xconv_col2im(NULL, u.pp, u.pk, u.pcols, u.pimg, &err);
        expect_row(r->name, r->which == IM2COL ? "xconv_im2col" : "xconv_col2im", st, &err,
                   r->status, r->parameter, r->substring);
        XT_CHECK(memcmp(u.buf[0], pristine.buf[0], ARENA) == 0 &&
                     memcmp(u.buf[1], pristine.buf[1], ARENA) == 0,
                 "row %s: a buffer was written", r->name);
        for (int b = 0; b < 2; b++) {
            free(u.buf[b]);
            free(pristine.buf[b]);
        }
    }
}

int main(void)
{
    check_bases();
    for (size_t i = 0; i < sizeof ROW_TABLE / sizeof ROW_TABLE[0]; i++) run_row(&ROW_TABLE[i]);
    test_plan_rows();
    test_unfold_rows();
    return xt_finish("test_errors");
}
