/*
 * test_igemm_skip.c — cpu.igemm's padded convs that leave out of a tile's kernel calls the
 * taps lying in the padding for every position of the tile (the top and bottom output rows
 * of a padded kernel), against cpu.ref, forced by name:
 *
 *   - named problems: 1-D, 2-D and 3-D padded kernels whose tiles of 6 positions lie wholly
 *     in one output row (or straddle two), a single output row (both padded kernel rows left
 *     out), padding wider than x (tiles with no tap left: y = bias), dilation, stride,
 *     asymmetric padding, groups, kernel rows merged into one run (padding in outer dims
 *     only), a reduction longer than one block of weights, output channels around the
 *     64-wide panel, position counts around the 6-row tile;
 *   - positions laid out as boxes of equal taps (the interior, edges and corners of a padded
 *     kernel, each tiled on its own): several images, two edge ranges a side, 3-D, rows
 *     reading only padding, dilation with stride, groups, and a kernel with too many ranges
 *     for boxes;
 *   - f32, f64, bf16 (y bf16 and f32), f16, i8 (y i8 and i32), u8 -> u32, i32, u64, c64 and
 *     c128 (the skip runs where x is read in place: channels-last x of the compute type;
 *     the other dtypes and layouts take the zero-padded buffer and must still match);
 *   - both layouts; dense views, dense-innermost views with padded and reversed outer dims,
 *     fully strided views; with and without bias; 1, 2 and 3 threads, which must give the
 *     same bits; no byte of y's buffer outside its elements may change;
 *   - the terms left out must be exact zeros: an Inf or NaN weight (0 * Inf is NaN in
 *     cpu.ref) and a bias of -0 (-0 + +0 is +0) turn the skip off, compared bit for bit
 *     (sums of zeros have the same bits in any order), per execute and with the weights
 *     packed once (constant_weights).
 * Integers are exact; floats within engine_check.h's tolerance of sum|x*w|.
 */
#include "common/engine_check.h"
#include "cpu/engines/igemm.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

#define CV XCONV_OP_CONV

/* clang-format off */
static const table_case CASES[] = {
    {"3x3 pad 1 over 7x7 (rn50_3x3_512's shape), 65 outputs",
     CV, 2, 2, 16, 65, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 pad 1 over 5x13: tiles in the top and bottom rows and straddling ones",
     CV, 2, 1, 17, 17, 1, {5, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 pad 1 over 1x9: one output row, both padded kernel rows left out",
     CV, 2, 3, 16, 64, 1, {1, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 pad 3 over 2x2: tiles with no tap in x",
     CV, 2, 2, 16, 5, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, {0}},
    {"3x3x3 pad 1 over 3x4x5",
     CV, 3, 1, 16, 20, 1, {3, 4, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0}},
    {"1-D k5 stride 2, padding 0:3",
     CV, 1, 2, 24, 33, 1, {20}, {5}, {2}, {1}, {0}, {3}, {0}},
    {"1-D k3 pad 4 over 3: whole tiles in the padding",
     CV, 1, 3, 16, 9, 1, {3}, {3}, {1}, {1}, {4}, {4}, {0}},
    {"3x3 dilation 2 pad 2 over 6x6",
     CV, 2, 1, 16, 12, 1, {6, 6}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, {0}},
    {"3x3 pad 1, groups 2 of 16 channels",
     CV, 2, 2, 32, 34, 2, {4, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 padded rows only: kernel rows merged into runs",
     CV, 2, 2, 16, 10, 1, {5, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 0}, {1, 0}, {0}},
    {"3x3 stride 2 pad 1 over 9x9, 64 outputs",
     CV, 2, 1, 16, 64, 1, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 pad 1, 300 channels: runs over several blocks of weights",
     CV, 2, 1, 300, 7, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"3x3 pad 1, 60 channels: 9 runs in even blocks (3 of 3 in f32, not 4 + 4 + 1)",
     CV, 2, 1, 60, 20, 1, {5, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"2x2 pad 1:0 over 6x6, 130 outputs",
     CV, 2, 1, 16, 130, 1, {6, 6}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0}},
    /* boxes of equal taps (interior, edges, corners), each tiled on its own */
    {"boxes: 3x3 pad 1 over 14x14, 3 images (edges of 12 and 36 positions)",
     CV, 2, 3, 16, 20, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"boxes: 7x7 stride 2 pad 3 over 15x15 (two edge ranges a side)",
     CV, 2, 2, 16, 9, 1, {15, 15}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, {0}},
    {"boxes: 3x3x3 pad 1 over 4x6x6, 2 images (27 boxes)",
     CV, 3, 2, 16, 70, 1, {4, 6, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0}},
    {"boxes: 5x3 pad 2:0 and 1:3 over 9x8 (asymmetric, rows reading only padding)",
     CV, 2, 1, 16, 33, 1, {9, 8}, {5, 3}, {1, 1}, {1, 1}, {2, 1}, {0, 3}, {0}},
    {"boxes: 3x3 dilation 3 pad 3 over 8x11, stride 1:2",
     CV, 2, 2, 16, 7, 1, {8, 11}, {3, 3}, {1, 2}, {3, 3}, {3, 3}, {3, 3}, {0}},
    {"boxes: 1-D k7 pad 3 over 10, 4 images",
     CV, 1, 4, 16, 65, 1, {10}, {7}, {1}, {1}, {3}, {3}, {0}},
    {"boxes: 3x3 pad 1 over 7x7, groups 2, 200 channels a group",
     CV, 2, 1, 400, 130, 2, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"boxes: 9 ranges a dim (k17 pad 8 over 12x12): too many, one box",
     CV, 2, 1, 16, 5, 1, {12, 12}, {17, 17}, {1, 1}, {1, 1}, {8, 8}, {8, 8}, {0}},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},   {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16}, {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},   {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32},    {XCONV_DTYPE_U8, XCONV_DTYPE_U32},
    {XCONV_DTYPE_I32, XCONV_DTYPE_I32},   {XCONV_DTYPE_U64, XCONV_DTYPE_U64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},   {XCONV_DTYPE_C128, XCONV_DTYPE_C128},
};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))

int main(void)
{
    /* the cases are sized for reductions over several blocks of 64 KiB of weights */
    xconv__igemm_set_block_bytes(64 << 10);
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    tu_rng r = {0x5eed5c1b7a3e9d41ull};
    check_engine_table(CTX, "cpu.igemm", CASES, NCASES, PAIRS, NPAIRS, table_view, TV_NAMES,
                       TV_COUNT, 1, false, &r);
    static const xconv_dtype FLOATS[] = {XCONV_DTYPE_F32, XCONV_DTYPE_F64, XCONV_DTYPE_C64,
                                         XCONV_DTYPE_C128};
    for (int ci = 0; ci < NCASES; ci++)
        for (int fi = 0; fi < 4; fi++)
            for (int kind = 0; kind < 3; kind++)
                check_padding_terms(CTX, "cpu.igemm", &CASES[ci], FLOATS[fi], kind, &r);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_igemm_skip");
}
