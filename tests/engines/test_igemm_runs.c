/*
 * test_igemm_runs.c — cpu.igemm's long reduction runs against cpu.ref, forced by name:
 * convs whose kernel covers the input's inner dims (patch embeddings, as in a vision
 * transformer's conv3d patch projection) run one run per kernel plane or per position, read
 * in place from x in either order (channels-last (k, c); channels-first (c, k), with the
 * weights packed in that order) or from a converted buffer of x's own order:
 *
 *   - named problems: kernels that cover all of x (one run per position, y of spatial size
 *     1) in 1-D, 2-D and 3-D, kernels that cover only the inner dims (runs of whole kernel
 *     planes, several positions per image), with position counts around the 6-row tile,
 *     output channels around the 64-wide panel (1, 17, 63, 64, 65, 130) and reductions in
 *     one call and over several blocks of weights; and near misses that must take the
 *     other paths (dilation, padding, groups, a stride shorter than the kernel);
 *   - f32, f64, bf16 (y bf16 and f32), f16, i8 (y i8 and i32), u8 -> u32, i32, u64 and c64;
 *   - both conventions; dense views, dense views whose images sit at uneven distances
 *     (x read in place, positions not evenly spaced), views with dense innermost dims but
 *     padded and reversed outer dims, and fully strided views (the runs then break up or x
 *     is converted: every path must still match);
 *   - with and without bias; 1, 2 and 3 threads, which must give the same bits; no byte of
 *     y's buffer outside its elements may change.
 * Integers are exact; floats within engine_check.h's tolerance of sum|x*w|.
 */
#include "common/engine_check.h"
#include "cpu/engines/igemm.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

#define CV XCONV_OP_CONV

/* clang-format off */
static const table_case CASES[] = {
    {"conv3d patch, 7 images, 3 channels, 65 outputs: one run of 72",
     CV, 3, 7, 3, 65, 1, {2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {1, 1, 1}, {0}, {0}, {0}},
    {"conv3d patch, 13 images, 3 channels, 130 outputs",
     CV, 3, 13, 3, 130, 1, {2, 2, 3}, {2, 2, 3}, {2, 2, 3}, {1, 1, 1}, {0}, {0}, {0}},
    {"conv3d patch, 6 images, 3 channels, 17 outputs: a run of 1176 (the qwenvl patch)",
     CV, 3, 6, 3, 17, 1, {2, 14, 14}, {2, 14, 14}, {2, 14, 14}, {1, 1, 1}, {0}, {0}, {0}},
    {"conv3d patch, 5 images, 5 channels: a run of 2880, over several blocks of weights",
     CV, 3, 5, 5, 63, 1, {4, 12, 12}, {4, 12, 12}, {4, 12, 12}, {1, 1, 1}, {0}, {0}, {0}},
    {"conv2d patch, 1 image, 1 output", CV, 2, 1, 4, 1, 1, {3, 5}, {3, 5}, {1, 1}, {1, 1}, {0}, {0}, {0}},
    {"conv2d patch, 12 images, 1 channel, 64 outputs",
     CV, 2, 12, 1, 64, 1, {5, 3}, {5, 3}, {5, 3}, {1, 1}, {0}, {0}, {0}},
    {"conv1d patch, 19 images, 2 channels", CV, 1, 19, 2, 33, 1, {9}, {9}, {1}, {1}, {0}, {0}, {0}},
    {"conv2d kernel over whole rows, 4 positions per image: runs of kernel planes",
     CV, 2, 3, 3, 65, 1, {6, 5}, {3, 5}, {1, 1}, {1, 1}, {0}, {0}, {0}},
    {"conv3d kernel over whole planes, stride 2",
     CV, 3, 2, 2, 20, 1, {5, 3, 4}, {2, 3, 4}, {2, 1, 1}, {1, 1, 1}, {0}, {0}, {0}},
    {"conv2d patches of 2x3 over 4x6: runs of kernel rows",
     CV, 2, 2, 3, 17, 1, {4, 6}, {2, 3}, {2, 3}, {1, 1}, {0}, {0}, {0}},
    {"conv1d dilation 2 over all of x: no merged runs",
     CV, 1, 4, 3, 9, 1, {5}, {3}, {1}, {2}, {0}, {0}, {0}},
    {"conv2d patch padded by 1: no merged runs",
     CV, 2, 3, 2, 10, 1, {3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d patch, groups 2: per group runs",
     CV, 2, 4, 4, 6, 2, {3, 3}, {3, 3}, {1, 1}, {1, 1}, {0}, {0}, {0}},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},   {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16}, {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},   {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32},    {XCONV_DTYPE_U8, XCONV_DTYPE_U32},
    {XCONV_DTYPE_I32, XCONV_DTYPE_I32},   {XCONV_DTYPE_U64, XCONV_DTYPE_U64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},
};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))

/* engine_check.h's views and one more: dense, with images at uneven distances */
enum { RV_IMAGES = TV_COUNT, RV_COUNT };
static const char *const RV_NAMES[RV_COUNT] = {"dense", "dense-innermost rows", "strided",
                                                "dense, uneven images"};

/* A dense view of `shape` except that dim 0 steps 5 elements more than dense (images at
 * uneven distances from the data's start: offset 7), canary-filled. */
static xconv_tensor view_images(xconv_dtype dt, int rank, const int64_t *shape)
{
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt, t.rank = rank, t.strided = true;
    int64_t step = 1;
    for (int d = rank - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        t.strides[d] = step;
        step *= shape[d];
        if (d == 1) step += 5;
    }
    t.offset = 7;
    t.buffer_bytes = (size_t)(7 + shape[0] * t.strides[0] + 3) * xconv_dtype_size(dt);
    t.data = malloc(t.buffer_bytes);
    memset(t.data, 0xA5, t.buffer_bytes);
    return t;
}

static xconv_tensor view_of(int view, xconv_dtype dt, int rank, const int64_t *shape,
                            unsigned flip, bool output)
{
    return view == RV_IMAGES ? view_images(dt, rank, shape)
                             : table_view(view, dt, rank, shape, flip, output);
}

int main(void)
{
    /* the cases are sized for reductions over several blocks of 64 KiB of weights */
    xconv__igemm_set_block_bytes(64 << 10);
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    tu_rng r = {0x5eed0f1a7c4b2d93ull};
    check_engine_table(CTX, "cpu.igemm", CASES, NCASES, PAIRS, NPAIRS, view_of, RV_NAMES,
                       RV_COUNT, 1, false, &r);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_igemm_runs");
}
