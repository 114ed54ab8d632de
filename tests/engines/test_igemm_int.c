/*
 * test_igemm_int.c — cpu.igemm's 8-bit integer paths (the AVX512-VNNI kernels, i8 and u8 x)
 * against cpu.ref, forced by name, bit for bit:
 *
 *   - every y dtype the byte kernels serve, narrower than their int32 sums (i8, u8, i16, u16:
 *     the last call of a reduction stores y directly, kernel_y) and as wide (i32, u32: y
 *     in place), both signednesses of x;
 *   - named problems whose sizes sit around the register block: output channels around the
 *     16-lane vectors and the 64-wide panel (1, 15, 17, 63, 64, 65, 130), position counts
 *     of every residue modulo the 6-row tile and over several blocks of tiles (1x1 convs
 *     run as plain GEMMs, x read in place), reductions in one call, over several blocks of
 *     packed weights (accumulating calls) and sliced within one run; conv and conv_transpose
 *     (tiles whose outputs hit no tap, tiles that mix taps); padded convs whose tiles leave
 *     out the taps in the padding (x' copied without it; each tile's init corrects for its
 *     own taps only), down to none;
 *   - both conventions (channels-first: y channels strided, the int32 tile path;
 *     channels-last: dense channels, the direct store), dense views, views with dense
 *     channels but padded and reversed outer dims, and fully strided views;
 *   - 1, 2 and 3 threads, which must give the same bits; no byte of y's buffer outside its
 *     elements may change.
 * The machine may lack VNNI: the same problems then run the u32 kernels and still must match.
 */
#include "common/engine_check.h"
#include "cpu/engines/igemm.h"
#include "cpu/ukernels/igemm.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

#define CV XCONV_OP_CONV
#define CT XCONV_OP_CONV_TRANSPOSE

/* clang-format off */
static const table_case CASES[] = {
    {"conv1d 1x1, 13 positions, a full panel", CV, 1, 1, 8, 64, 1, {13}, {1}, {1}, {1}, {0}, {0}, {0}},
    {"conv1d 1x1, 7 positions, 17 channels", CV, 1, 2, 5, 17, 1, {7}, {1}, {1}, {1}, {0}, {0}, {0}},
    {"conv1d 1x1, 11 positions, 1 channel", CV, 1, 1, 4, 1, 1, {11}, {1}, {1}, {1}, {0}, {0}, {0}},
    {"conv2d 1x1, 35 positions, a panel and one channel",
     CV, 2, 1, 16, 65, 1, {5, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d 1x1, 2 images of 99 positions: several blocks of tiles, 3 panels",
     CV, 2, 2, 12, 130, 1, {9, 11}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv1d 1x1 stride 2, 40 positions", CV, 1, 1, 20, 24, 1, {80}, {1}, {2}, {1}, {0}, {0}, {0}},
    {"conv2d 3x3 padded, 63 channels",
     CV, 2, 1, 3, 63, 1, {6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 7x7 stride 2 padded, 3 channels: runs of whole kernel rows, 21 bytes padded to 24",
     CV, 2, 2, 3, 65, 1, {17, 15}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, {0}},
    {"conv2d 1x3 unpadded, 5 channels: runs of 15 bytes, the last one at the buffer's end",
     CV, 2, 2, 5, 17, 1, {4, 6}, {1, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv3d 2x2x5 padded, 7 channels: runs of 35 bytes",
     CV, 3, 1, 7, 20, 1, {3, 4, 9}, {2, 2, 5}, {1, 1, 2}, {1, 1, 1}, {1, 0, 2}, {0, 1, 2}, {0}},
    {"conv2d 3x3 over 300 channels: runs over several blocks of weights",
     CV, 2, 1, 300, 33, 1, {4, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv1d k5 over 300 channels: one run longer than a block",
     CV, 1, 1, 300, 16, 1, {9}, {5}, {1}, {1}, {2}, {2}, {0}},
    {"conv2d 3x3 pad 1 over 7x7, 96 channels: padding left out, tiles with 4, 6 and 9 taps",
     CV, 2, 2, 96, 40, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 pad 3 over 2x3, 64 channels: padding left out, tiles with no tap in x (y = bias)",
     CV, 2, 1, 64, 20, 1, {2, 3}, {3, 3}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, {0}},
    {"conv2d 3x3 pad 2:0 over 3x8, 64 channels: padding left out by runs of whole kernel rows",
     CV, 2, 2, 64, 24, 1, {3, 8}, {3, 3}, {1, 1}, {1, 1}, {2, 0}, {2, 0}, {0}},
    {"conv2d 1x1 over 1100 channels: a run sliced",
     CV, 2, 1, 1100, 20, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d stride 2 dilation 2 asymmetric padding, 130 channels",
     CV, 2, 2, 4, 130, 1, {9, 8}, {3, 2}, {2, 2}, {2, 1}, {1, 0}, {2, 1}, {0}},
    {"conv3d mixed, 15 channels",
     CV, 3, 1, 5, 15, 1, {5, 4, 6}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, {0}},
    {"conv2d groups 2 (the u32 kernels)",
     CV, 2, 1, 8, 12, 2, {5, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv_transpose1d stride 3: outputs no tap reaches",
     CT, 1, 2, 6, 17, 1, {7}, {2}, {3}, {1}, {0}, {0}, {2}},
    {"conv_transpose2d k4 s2 p1, a full panel",
     CT, 2, 1, 20, 64, 1, {5, 4}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}},
    {"conv_transpose2d mixed, 65 channels",
     CT, 2, 1, 7, 65, 1, {4, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 1}, {0, 1}, {1, 0}},
    {"conv_transpose1d k8 over 300 channels: taps over several blocks",
     CT, 1, 1, 300, 24, 1, {30}, {8}, {1}, {1}, {0}, {0}, {0}},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_I8, XCONV_DTYPE_I8},  {XCONV_DTYPE_I8, XCONV_DTYPE_I16},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32}, {XCONV_DTYPE_U8, XCONV_DTYPE_U8},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U16}, {XCONV_DTYPE_U8, XCONV_DTYPE_I16},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U32}, {XCONV_DTYPE_U8, XCONV_DTYPE_I32},
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
    if (!xconv__igemm_geom_vnni(true))
        printf("test_igemm_int: no AVX512-VNNI here: the u32 kernels run these problems\n");
    tu_rng r = {0x1f2e3d4c5b6a7988ull};
    check_engine_table(CTX, "cpu.igemm", CASES, NCASES, PAIRS, NPAIRS, table_view, TV_NAMES,
                       TV_COUNT, 0, false, &r);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_igemm_int");
}
