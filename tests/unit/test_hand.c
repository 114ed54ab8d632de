/*
 * test_hand.c — convolutions small enough to work out on paper. Every expected value below
 * was derived by hand from DESIGN.md §1 (the working is in the comments), not by running any
 * code. Each case is written once, in the layout it is easiest to reason in, and then run:
 *   - in both layouts (the data is re-laid by tensor_util.h's index maps of xconv.h),
 *   - in every dtype that holds its values exactly (integers always: a convolution is a
 *     polynomial, so wrapped inputs give the true result modulo 2^bits; complex runs use
 *     x*(1+i), w*i, bias*(i-1), so y must be y*(i-1), which catches conjugation and re/im
 *     swaps), and in widened y dtypes,
 *   - through the planner's choice and through every engine forced by name,
 *   - and once more with N = 0, which must succeed and write nothing.
 */
#include "common/ref_conv.h"
#include "harness.h"

#define V(...) ((const int64_t[]){__VA_ARGS__})
/* Each array travels with its length so that main can check it against the shapes. */
#define COUNT(...) (int64_t)(sizeof(V(__VA_ARGS__)) / sizeof(int64_t))
#define XV(...) .xv = V(__VA_ARGS__), .nx = COUNT(__VA_ARGS__)
#define WV(...) .wv = V(__VA_ARGS__), .nw = COUNT(__VA_ARGS__)
#define BV(...) .bv = V(__VA_ARGS__), .nb = COUNT(__VA_ARGS__)
#define YV(...) .yv = V(__VA_ARGS__), .ny = COUNT(__VA_ARGS__)

typedef struct hand_case {
    const char  *name;
    xconv_op     op;
    int          d;
    xconv_layout written;  /* layout of the arrays below */
    int64_t      n, cin, cout, groups;
    int64_t      x[3], k[3], y[3];
    int64_t      stride[3], dil[3], lo[3], hi[3], opad[3]; /* stride/dilation 0 means 1 */
    const int64_t *xv, *wv, *bv, *yv;  /* row-major in `written`; bv NULL: no bias */
    int64_t        nx, nw, nb, ny;     /* their lengths */
} hand_case;

#define CONV XCONV_OP_CONV
#define CONVT XCONV_OP_CONV_TRANSPOSE
#define CF XCONV_LAYOUT_CHANNELS_FIRST
#define CL XCONV_LAYOUT_CHANNELS_LAST

static const hand_case CASES[] = {
    /* y[o] = x[o]*1 + x[o+1]*2 + x[o+2]*3: 1+4+9 = 14, 2+6+12 = 20, 3+8+15 = 26. */
    {.name = "conv1d basic", .op = CONV, .d = 1, .written = CF, .n = 1, .cin = 1, .cout = 1,
     .groups = 1, .x = {5}, .k = {3}, .y = {3},
     XV(1, 2, 3, 4, 5), WV(1, 2, 3), YV(14, 20, 26)},

    /* Y = floor((5 + 2 + 1 - 2*1 - 1) / 2) + 1 = 3; y[o] = 10 + 2*x[2o-2] + 3*x[2o]:
     * o=0: 10 + 0 + 3*1 = 13; o=1: 10 + 2*1 + 3*3 = 21; o=2: 10 + 2*3 + 3*5 = 31. */
    {.name = "conv1d stride dilation asymmetric padding bias", .op = CONV, .d = 1, .written = CF,
     .n = 1, .cin = 1, .cout = 1, .groups = 1, .x = {5}, .k = {2}, .y = {3}, .stride = {2},
     .dil = {2}, .lo = {2}, .hi = {1},
     XV(1, 2, 3, 4, 5), WV(2, 3), BV(10), YV(13, 21, 31)},

    /* Y = floor((3 + 2 + 0 - 2*2 - 1) / 1) + 1 = 1, and the low padding (2) covers more
     * positions than there are outputs: tap 0 reads x[-2] = 0, tap 1 x[0], tap 2 x[2]:
     * 5*1 + 6*3 = 23. */
    {.name = "conv1d padding wider than the output", .op = CONV, .d = 1, .written = CF, .n = 1,
     .cin = 1, .cout = 1, .groups = 1, .x = {3}, .k = {3}, .y = {1}, .dil = {2}, .lo = {2},
     XV(1, 2, 3), WV(4, 5, 6), YV(23)},

    /* Dilation and padding 2^62 (valid: the padded size 2^62 + 2 and the kernel extent
     * 2^62 + 1 fit 64 bits; Y = 2). Tap 0 lands at j - 2^62, in the padding; tap 1 at j:
     * y[j] = 1*x0[j] + 2*x1[j] = 1 + 6 = 7, 2 + 8 = 10. The 10s on tap 0 must never count. */
    {.name = "conv1d dilation and padding 2^62", .op = CONV, .d = 1, .written = CF, .n = 1,
     .cin = 2, .cout = 1, .groups = 1, .x = {2}, .k = {2}, .y = {2}, .dil = {INT64_C(1) << 62},
     .lo = {INT64_C(1) << 62}, XV(1, 2, 3, 4), WV(10, 1, 10, 2), YV(7, 10)},

    /* groups 2: y0 reads x channels 0,1 with w[0]; y1 reads channels 2,3 with w[1].
     * y0[0] = (1*1 + 2*-1) + (0*2 + 1*0) = -1, y0[1] = (2 - 3) + (1*2 + -1*0) = 1; +5 -> 4, 6.
     * y1[0] = (2*0 + 0*1) + (1*3 + 1*-2) = 1, y1[1] = (0 + 1) + (3 - 2) = 2; -5 -> -4, -3. */
    {.name = "conv1d groups 2 bias", .op = CONV, .d = 1, .written = CF, .n = 1, .cin = 4,
     .cout = 2, .groups = 2, .x = {3}, .k = {2}, .y = {2},
     XV(1, 2, 3, 0, 1, -1, 2, 0, 1, 1, 1, 1), WV(1, -1, 2, 0, 0, 1, 3, -2),
     BV(5, -5), YV(4, 6, -4, -3)},

    /* depthwise, pad 1:1, Y = 4. c0 (w 1,1,1) sums windows: n0 [3,6,9,7], n1 [0,1,1,1];
     * c1 (w 1,0,-1) is x[o-1] - x[o+1]: n0 [0,1,-1,0], n1 [-1,0,0,-1]; c2 (w 0,2,0) is 2x. */
    {.name = "conv1d depthwise batch 2 padding", .op = CONV, .d = 1, .written = CF, .n = 2,
     .cin = 3, .cout = 3, .groups = 3, .x = {4}, .k = {3}, .y = {4}, .lo = {1}, .hi = {1},
     XV(1, 2, 3, 4, 1, 0, 0, 1, 2, 2, 2, 2, 0, 0, 1, 0, -1, 1, -1, 1, 1, 2, 3, 4),
     WV(1, 1, 1, 1, 0, -1, 0, 2, 0),
     YV(3, 6, 9, 7, 0, 1, -1, 0, 4, 4, 4, 4, 0, 1, 1, 1, -1, 0, 0, -1, 2, 4, 6, 8)},

    /* c0 with the main diagonal: x[a][b] + x[a+1][b+1] = 6, 8, 12, 14; c1 with the
     * anti-diagonal: x[a][b+1] + x[a+1][b] = 0, 2, 2, 0; plus bias 1: 7, 11, 15, 15. */
    {.name = "conv2d two input channels bias", .op = CONV, .d = 2, .written = CF, .n = 1,
     .cin = 2, .cout = 1, .groups = 1, .x = {3, 3}, .k = {2, 2}, .y = {2, 2},
     XV(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 1, 0, 1, 0, 1, 0, 1), WV(1, 0, 0, 1, 0, 1, 1, 0),
     BV(1), YV(7, 11, 15, 15)},

    /* Y0 = floor((4+1+0-1-1)/2)+1 = 2, Y1 = floor((3+0+2-2-1)/1)+1 = 3. y[a][b] reads rows
     * 2a-1, 2a (k0 = 0, 1) and columns b, b+2 (k1 = 0, 1); x = 1..12 row-major 4x3.
     * co0 (w 1 2 / 3 4): (0,0) = 3*1 + 4*3 = 15, (0,1) = 3*2 = 6, (0,2) = 3*3 = 9,
     *   (1,0) = 1*4 + 2*6 + 3*7 + 4*9 = 73, (1,1) = 5 + 3*8 = 29, (1,2) = 6 + 3*9 = 33.
     * co1 (w 0 -1 / 1 0): (0,b) = x[0][b] = 1, 2, 3; (1,0) = -6 + 7 = 1, (1,1) = 8, (1,2) = 9. */
    {.name = "conv2d stride dilation asymmetric padding", .op = CONV, .d = 2, .written = CF,
     .n = 1, .cin = 1, .cout = 2, .groups = 1, .x = {4, 3}, .k = {2, 2}, .y = {2, 3},
     .stride = {2, 1}, .dil = {1, 2}, .lo = {1, 0}, .hi = {0, 2},
     XV(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), WV(1, 2, 3, 4, 0, -1, 1, 0),
     YV(15, 6, 9, 73, 29, 33, 1, 2, 3, 1, 8, 9)},

    /* depthwise 3x3, stride 2, pad 1, Y = 2x2. c0's kernel has 1 top-left and 2 bottom-right:
     * y = x[2a-1][2b-1] + 2*x[2a+1][2b+1] = 10, 0, 0, 5, +100. c1's all-ones kernel counts
     * the in-range window positions (4 everywhere), -100 -> -96. */
    {.name = "conv2d depthwise stride padding bias", .op = CONV, .d = 2, .written = CF, .n = 1,
     .cin = 2, .cout = 2, .groups = 2, .x = {3, 3}, .k = {3, 3}, .y = {2, 2}, .stride = {2, 2},
     .lo = {1, 1}, .hi = {1, 1},
     XV(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1),
     WV(1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1), BV(100, -100),
     YV(110, 100, 100, 105, -96, -96, -96, -96)},

    /* x = 1..12 as 2x2x3, w = 1..8 as 2x2x2, Y = 1x1x2. b=0: 1*1 + 2*2 + 4*3 + 5*4 = 37 and
     * 7*5 + 8*6 + 10*7 + 11*8 = 241, total 278; b=1 adds sum(w) = 36: 314. */
    {.name = "conv3d basic", .op = CONV, .d = 3, .written = CF, .n = 1, .cin = 1, .cout = 1,
     .groups = 1, .x = {2, 2, 3}, .k = {2, 2, 2}, .y = {1, 1, 2},
     XV(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), WV(1, 2, 3, 4, 5, 6, 7, 8),
     YV(278, 314)},

    /* groups 2 (one x channel, two y channels each), Y = 1x2x2: d0 reads 0 and 2 (dilation
     * 2), d1 = a1 - 1 (so a1 = 0 is all padding: bias only), d2 = 2*a2 + k2 - 1.
     * co0 (k 1,0 / 0,1): a2=0: x0[2][0] = 9, a2=1: x0[0][1] + x0[2][2] = 2 + 11 = 13; +1.
     * co1 (all ones): 1 + 9 = 10, 2 + 3 + 10 + 11 = 26; +2.
     * co2 (1,2 / 3,4) on x1: 2*x1[0][0] = 4, (x1[0][1] + 2*x1[0][2]) + (3*x1[2][1] + 4*x1[2][2])
     *   = 2 + 9 = 11; +3.  co3 (0,0 / -1,0): 0, -x1[2][1] = -3; +4. */
    {.name = "conv3d groups 2 stride dilation asymmetric padding bias", .op = CONV, .d = 3,
     .written = CF, .n = 1, .cin = 2, .cout = 4, .groups = 2, .x = {3, 1, 4}, .k = {2, 1, 2},
     .y = {1, 2, 2}, .stride = {1, 1, 2}, .dil = {2, 1, 1}, .lo = {0, 1, 1}, .hi = {0, 0, 0},
     XV(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 0, 1, 0, 9, 9, 9, 9, 0, 3, 0, 1),
     WV(1, 0, 0, 1, 1, 1, 1, 1, 1, 2, 3, 4, 0, 0, -1, 0), BV(1, 2, 3, 4),
     YV(1, 1, 10, 14, 2, 2, 12, 28, 3, 3, 7, 14, 4, 4, 4, 1)},

    /* Y = (2-1)*2 + 2 + 1 = 5; y[j] = sum over j = 2i + k: 1*1, 1*10, 1*100 + 2*1, 2*10, 2*100. */
    {.name = "conv_transpose1d stride", .op = CONVT, .d = 1, .written = CF, .n = 1, .cin = 1,
     .cout = 1, .groups = 1, .x = {2}, .k = {3}, .y = {5}, .stride = {2},
     XV(1, 2), WV(1, 10, 100), YV(1, 10, 102, 20, 200)},

    /* Y = 2*2 - 1 - 2 + 2 + 1 + 1 = 5; j + 1 = 2i + 2k, so only odd j get terms:
     * j=1: x0*w1 + x1*w0 = 7 + 10 = 17, j=3: x1*w1 + x2*w0 = 14 + 15 = 29 ((i2,k1) lands on
     * j = 5, cut by pad_hi); bias -1 everywhere: -1, 16, -1, 28, -1. */
    {.name = "conv_transpose1d stride dilation asymmetric padding output padding bias",
     .op = CONVT, .d = 1, .written = CF, .n = 1, .cin = 1, .cout = 1, .groups = 1, .x = {3},
     .k = {2}, .y = {5}, .stride = {2}, .dil = {2}, .lo = {1}, .hi = {2}, .opad = {1},
     XV(1, 2, 3), WV(5, 7), BV(-1), YV(-1, 16, -1, 28, -1)},

    /* Y = 1 - 2 + 2 + 1 = 2; j + 2 = i + k: j=0 from (0,2), (1,1): 1*6 + 2*5 = 16;
     * j=1 from (1,2): 2*6 = 12. Padding 2 drops the first two positions of the full output. */
    {.name = "conv_transpose1d padding wider than the input", .op = CONVT, .d = 1, .written = CF,
     .n = 1, .cin = 1, .cout = 1, .groups = 1, .x = {2}, .k = {3}, .y = {2}, .lo = {2},
     XV(1, 2), WV(4, 5, 6), YV(16, 12)},

    /* Y = 1 - 2^62 + 2^62 + 1 = 2; j + 2^62 = i + k*2^62 holds for k = 1, i = j only:
     * y[j] = 1*x0[j] + 2*x1[j] = 7, 10 (w [Cin 2, 1, K 2] = (10, 1), (10, 2)). */
    {.name = "conv_transpose1d dilation and padding 2^62", .op = CONVT, .d = 1, .written = CF,
     .n = 1, .cin = 2, .cout = 1, .groups = 1, .x = {2}, .k = {2}, .y = {2},
     .dil = {INT64_C(1) << 62}, .lo = {INT64_C(1) << 62}, XV(1, 2, 3, 4), WV(10, 1, 10, 2),
     YV(7, 10)},

    /* groups 2, w [Cin 2, Cout/g 2, K 2]; y[2G+o][j] = sum_{i+k=j} x[G][i] w[G][o][k].
     * G0 x=(1,2): w(1,1) -> 1,3,2; w(2,0) -> 2,4,0. G1 x=(3,-1): w(0,1) -> 0,3,-1;
     * w(-1,1) -> -3, 3+1 = 4, -1. */
    {.name = "conv_transpose1d groups 2", .op = CONVT, .d = 1, .written = CF, .n = 1, .cin = 2,
     .cout = 4, .groups = 2, .x = {2}, .k = {2}, .y = {3},
     XV(1, 2, 3, -1), WV(1, 1, 2, 0, 0, 1, -1, 1),
     YV(1, 3, 2, 2, 4, 0, 0, 3, -1, -3, 4, -1)},

    /* depthwise, pad 1:1, Y = 3; j + 1 = i + k. c0 (x 1,2,3; w 1,2,3): 2+2 = 4,
     * 3+4+3 = 10, 6+6 = 12; +1. c1 (x 1,0,-1; w 0,0,1): x[j-1] = 0, 1, 0; +2. */
    {.name = "conv_transpose1d depthwise padding bias", .op = CONVT, .d = 1, .written = CF,
     .n = 1, .cin = 2, .cout = 2, .groups = 2, .x = {3}, .k = {3}, .y = {3}, .lo = {1}, .hi = {1},
     XV(1, 2, 3, 1, 0, -1), WV(1, 2, 3, 0, 0, 1), BV(1, 2),
     YV(5, 11, 13, 2, 3, 2)},

    /* stride 2 = kernel: each x[i][j] stamps x*w into the 2x2 block at (2i, 2j). */
    {.name = "conv_transpose2d stride equals kernel", .op = CONVT, .d = 2, .written = CF,
     .n = 1, .cin = 1, .cout = 1, .groups = 1, .x = {2, 2}, .k = {2, 2}, .y = {4, 4},
     .stride = {2, 2}, XV(1, 2, 3, 4), WV(1, -1, 2, 0),
     YV(1, -1, 2, -2, 2, 0, 4, 0, 3, -3, 4, -4, 6, 0, 8, 0)},

    /* Y0 = 1 - 1 + 2 + 1 + 1 = 4, Y1 = 2 - 1 + 0 + 1 + 1 = 3. dim1: j1 = 2*i1 (K1 = 1), so
     * column 1 is bias only. dim0: j0 + 1 = i0 + 2*k0: j0=0 (1,0), 1 (0,1), 2 (1,1), 3 none.
     * With w c0 = (1,2), c1 = (-1,1): j0=0: 3 - 30 = -27, 4 - 40 = -36; j0=1: 2 + 10 = 12,
     * 4 + 20 = 24; j0=2: 6 + 30 = 36, 8 + 40 = 48; all +5. */
    {.name = "conv_transpose2d stride dilation asymmetric padding output padding bias",
     .op = CONVT, .d = 2, .written = CF, .n = 1, .cin = 2, .cout = 1, .groups = 1, .x = {2, 2},
     .k = {2, 1}, .y = {4, 3}, .stride = {1, 2}, .dil = {2, 1}, .lo = {1, 0}, .hi = {0, 1},
     .opad = {1, 1}, XV(1, 2, 3, 4, 10, 20, 30, 40), WV(1, 2, -1, 1), BV(5),
     YV(-22, 5, -31, 17, 5, 29, 41, 5, 53, 5, 5, 5)},

    /* groups 2, two x channels per group, w [4, 1, 1, 2]; rows of 1x2 -> 1x3.
     * G0: (1,2)*(1,0) -> 1,2,0 plus (0,1)*(1,1) -> 0,1,1 = 1,3,1.
     * G1: (1,1)*(0,2) -> 0,2,2 plus (2,-1)*(1,-1) -> 2,-3,1 = 2,-1,3. */
    {.name = "conv_transpose2d groups 2", .op = CONVT, .d = 2, .written = CF, .n = 1, .cin = 4,
     .cout = 2, .groups = 2, .x = {1, 2}, .k = {1, 2}, .y = {1, 3},
     XV(1, 2, 0, 1, 1, 1, 2, -1), WV(1, 0, 1, 1, 0, 2, 1, -1),
     YV(1, 3, 1, 2, -1, 3)},

    /* Y = 2x2x3; j0 = k0, j1 = i1, j2 = i2 + k2 with x = (1 2 / 3 4).
     * o0: k0=0 (1,1): 1,3,2 / 3,7,4; k0=1 (2,0): 2,4,0 / 6,8,0.
     * o1 (+1): k0=0 (0,1): x shifted right: 0,1,2 / 0,3,4; k0=1 (1,0): 1,2,0 / 3,4,0. */
    {.name = "conv_transpose3d two output channels bias", .op = CONVT, .d = 3, .written = CF,
     .n = 1, .cin = 1, .cout = 2, .groups = 1, .x = {1, 2, 2}, .k = {2, 1, 2}, .y = {2, 2, 3},
     XV(1, 2, 3, 4), WV(1, 1, 2, 0, 0, 1, 1, 0), BV(0, 1),
     YV(1, 3, 2, 3, 7, 4, 2, 4, 0, 6, 8, 0, 1, 2, 3, 1, 4, 5, 2, 3, 1, 4, 5, 1)},

    /* depthwise, Y0 = 2 - 1 - 2 + 3 + 2 + 1 = 5; j + 1 = 2i + 3k: (1,0) -> 1, (0,1) -> 2,
     * (1,1) -> 4, (0,0) -> -1 cut. c0 (x 1,2; w 10,100): 0, 20, 100, 0, 200.
     * c1 (x 3,5; w -1,2): 0, -5, 6, 0, 10. */
    {.name = "conv_transpose3d depthwise stride dilation asymmetric padding output padding",
     .op = CONVT, .d = 3, .written = CF, .n = 1, .cin = 2, .cout = 2, .groups = 2,
     .x = {2, 1, 1}, .k = {2, 1, 1}, .y = {5, 1, 1}, .stride = {2, 1, 1}, .dil = {3, 1, 1},
     .lo = {1, 0, 0}, .hi = {2, 0, 0}, .opad = {2, 0, 0},
     XV(1, 2, 3, 5), WV(10, 100, -1, 2),
     YV(0, 20, 100, 0, 200, 0, -5, 6, 0, 10)},

    /* MLX's own convention, written channels-last: x [1, X 2, Cin 2], w [Cout 2, K 2, Cin 2].
     * MLX computes conv_transpose as the flipped kernel over x dilated by the stride and
     * padded by K-1 = 1: y[j][b] = sum_{i+k=j} sum_a x[i][a] * w[b][k][a].
     * j0: (1,2).(1,2) = 5, (1,2).(5,6) = 17; j1: (1,2).(3,4) + (3,4).(1,2) = 22,
     * (1,2).(7,8) + (3,4).(5,6) = 62; j2: (3,4).(3,4) = 25, (3,4).(7,8) = 53. */
    {.name = "mlx conv_transpose1d channels", .op = CONVT, .d = 1, .written = CL, .n = 1,
     .cin = 2, .cout = 2, .groups = 1, .x = {2}, .k = {2}, .y = {3},
     XV(1, 2, 3, 4), WV(1, 2, 3, 4, 5, 6, 7, 8), YV(5, 17, 22, 62, 25, 53)},

    /* MLX conv1d, x [1, 3, 2], w [1, K 2, Cin 2]: y[o] = x[o].(1,0) + x[o+1].(2,-1):
     * 1 + (6 - 4) = 3, 3 + (10 - 6) = 7. */
    {.name = "mlx conv1d channels", .op = CONV, .d = 1, .written = CL, .n = 1, .cin = 2,
     .cout = 1, .groups = 1, .x = {3}, .k = {2}, .y = {2},
     XV(1, 2, 3, 4, 5, 6), WV(1, 0, 2, -1), YV(3, 7)},

    /* MLX layout, groups 2: w [Cout 4, K 2, Cin/g 1]; y channel 2G+b reads x channel G with
     * w[2G+b]. x c0 = (1,3): w(1,0) -> 1,3,0; w(0,1) -> 0,1,3. x c1 = (2,4): w(1,1) ->
     * 2,6,4; w(2,-1) -> 4, 8-2 = 6, -4. Written y [1, 3, 4]. */
    {.name = "mlx conv_transpose1d groups 2", .op = CONVT, .d = 1, .written = CL, .n = 1,
     .cin = 2, .cout = 4, .groups = 2, .x = {2}, .k = {2}, .y = {3},
     XV(1, 2, 3, 4), WV(1, 0, 0, 1, 1, 1, 2, -1),
     YV(1, 0, 2, 4, 3, 1, 6, 6, 0, 3, 4, -4)},
};

/* (x dtype, y dtype) pairs every case is tried in: each dtype with itself, plus widenings. */
static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_U8, XCONV_DTYPE_U8},         {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_U16, XCONV_DTYPE_U16},       {XCONV_DTYPE_I16, XCONV_DTYPE_I16},
    {XCONV_DTYPE_U32, XCONV_DTYPE_U32},       {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U64, XCONV_DTYPE_U64},       {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E4M3}, {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F8E5M2},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},       {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},       {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},       {XCONV_DTYPE_C128, XCONV_DTYPE_C128},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32},        {XCONV_DTYPE_U8, XCONV_DTYPE_I64},
    {XCONV_DTYPE_I16, XCONV_DTYPE_I64},       {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F32},       {XCONV_DTYPE_BF16, XCONV_DTYPE_F64},
    {XCONV_DTYPE_F32, XCONV_DTYPE_F64},       {XCONV_DTYPE_C64, XCONV_DTYPE_C128},
};

/* Which tensor a value belongs to decides its complex factor (see the file comment). */
enum role { ROLE_X, ROLE_W, ROLE_BIAS, ROLE_Y };

static tu_val hand_val(xconv_dtype dt, int64_t v, enum role role)
{
    tu_val t = tu_int_val(v);
    if (!tu_is_complex(dt)) return t;
    double r = (double)v;
    switch (role) {
    case ROLE_X: return (tu_val){0, r, r};      /* v (1 + i) */
    case ROLE_W: return (tu_val){0, 0.0, r};    /* v i */
    default: return (tu_val){0, 0.0 - r, r};    /* v (i - 1); 0 - r keeps zeros positive */
    }
}

/* Whether dtype dt holds the values exactly. Integers of the same width as y may wrap (the
 * result is still right modulo 2^bits); `no_wrap` is for x and w under a wider y, where a
 * wrapped input would change the result. */
static bool all_exact(xconv_dtype dt, const int64_t *v, int64_t count, bool no_wrap)
{
    for (int64_t i = 0; i < count; i++) {
        if (tu_is_int(dt) ? no_wrap && !tu_fits_int(dt, v[i]) : !tu_exact_in(dt, (double)v[i]))
            return false;
    }
    return true;
}

/* The problem of case c in layout L with the given dtypes and batch. */
static tu_problem problem_of(const hand_case *c, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt,
                             int64_t n)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = c->op;
    p.d = c->d;
    p.layout = L;
    p.n = n;
    p.cin = c->cin;
    p.cout = c->cout;
    p.groups = c->groups;
    p.has_bias = c->bv != NULL;
    p.xdt = xdt;
    p.ydt = ydt;
    for (int i = 0; i < c->d; i++) {
        p.x[i] = c->x[i];
        p.k[i] = c->k[i];
        p.stride[i] = c->stride[i] ? c->stride[i] : 1;
        p.dil[i] = c->dil[i] ? c->dil[i] : 1;
        p.lo[i] = c->lo[i];
        p.hi[i] = c->hi[i];
        p.opad[i] = c->opad[i];
    }
    tu_problem_finish(&p);
    return p;
}

/* The four tensors of one run, filled from the case's written arrays via the index maps. */
typedef struct run_tensors {
    xconv_tensor x, w, bias, y;
    tu_val      *expect;
} run_tensors;

static void build(const hand_case *c, const tu_problem *p, run_tensors *t)
{
    int64_t xs[5], ws[5], bs[1], ys[5], idx[5], widx[5], s[3], k[3];
    tu_shapes(p, xs, ws, bs, ys);
    int rank = p->d + 2;
    t->x = tu_alloc(p->xdt, rank, xs, 0);
    t->w = tu_alloc(p->xdt, rank, ws, 0);
    t->bias = tu_alloc(p->ydt, 1, bs, 0);
    t->y = tu_alloc(p->ydt, rank, ys, 0xA5);
    t->expect = calloc((size_t)tu_ycount(p) + 1, sizeof(tu_val));

    /* Written shapes, to read the case's row-major arrays. */
    tu_problem w = *p;
    w.layout = c->written;
    w.n = c->n;
    int64_t wxs[5], wws[5], wbs[1], wys[5];
    tu_shapes(&w, wxs, wws, wbs, wys);
    xconv_tensor cx = {.rank = rank}, cw = {.rank = rank}, cy = {.rank = rank};
    memcpy(cx.shape, wxs, sizeof wxs);
    memcpy(cw.shape, wws, sizeof wws);
    memcpy(cy.shape, wys, sizeof wys);

    int64_t cin_g = p->cin / p->groups, cout_g = p->cout / p->groups;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t ch = 0; ch < p->cin; ch++)
            for (s[0] = 0; s[0] < p->x[0]; s[0]++)
                for (s[1] = 0; s[1] < p->x[1]; s[1]++)
                    for (s[2] = 0; s[2] < p->x[2]; s[2]++) {
                        tu_act_index(c->written, p->d, n, ch, s, widx);
                        tu_act_index(p->layout, p->d, n, ch, s, idx);
                        tu_store(p->xdt, t->x.data, tu_offset(&t->x, idx),
                                 hand_val(p->xdt, c->xv[tu_offset(&cx, widx)], ROLE_X));
                    }
    for (int64_t G = 0; G < p->groups; G++)
        for (int64_t o = 0; o < cout_g; o++)
            for (int64_t i = 0; i < cin_g; i++)
                for (k[0] = 0; k[0] < p->k[0]; k[0]++)
                    for (k[1] = 0; k[1] < p->k[1]; k[1]++)
                        for (k[2] = 0; k[2] < p->k[2]; k[2]++) {
                            tu_w_index(p->op, c->written, p->d, cin_g, cout_g, G, o, i, k, widx);
                            tu_w_index(p->op, p->layout, p->d, cin_g, cout_g, G, o, i, k, idx);
                            tu_store(p->xdt, t->w.data, tu_offset(&t->w, idx),
                                     hand_val(p->xdt, c->wv[tu_offset(&cw, widx)], ROLE_W));
                        }
    for (int64_t co = 0; c->bv && co < p->cout; co++)
        tu_store(p->ydt, t->bias.data, co, hand_val(p->ydt, c->bv[co], ROLE_BIAS));
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t co = 0; co < p->cout; co++)
            for (s[0] = 0; s[0] < p->y[0]; s[0]++)
                for (s[1] = 0; s[1] < p->y[1]; s[1]++)
                    for (s[2] = 0; s[2] < p->y[2]; s[2]++) {
                        tu_act_index(c->written, p->d, n, co, s, widx);
                        t->expect[tu_ylin(p, n, co, s)] =
                            hand_val(p->ydt, c->yv[tu_offset(&cy, widx)], ROLE_Y);
                    }
}

static void release(run_tensors *t)
{
    free(t->x.data);
    free(t->w.data);
    free(t->bias.data);
    free(t->y.data);
    free(t->expect);
}

/* Runs one (case, layout, dtype pair) through the planner and every engine. */
static void run_case(const hand_case *c, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt)
{
    char label[256];
    tu_problem p = problem_of(c, L, xdt, ydt, c->n);
    run_tensors t;
    build(c, &p, &t);

    /* The output shape is part of the hand derivation. */
    xconv_params q = tu_params(&p);
    int64_t y_shape[XCONV_MAX_RANK] = {0};
    xconv_error err;
    xconv_status st = xconv_output_shape(&q, t.x.shape, t.w.shape, y_shape, &err);
    XT_CHECK(st == XCONV_STATUS_OK && memcmp(y_shape, t.y.shape, sizeof(int64_t) * (size_t)(p.d + 2)) == 0,
             "%s: xconv_output_shape: %s %s", c->name, xconv_status_name(st), err.description);

    int ref_ran = 0;
    for (int e = -1; e < xconv_engine_count(); e++) {
        const char *forced = e < 0 ? NULL : xconv_engine_name(e);
        const char *used = NULL;
        memset(t.y.data, 0xA5, t.y.buffer_bytes);
        st = tu_conv(NULL, &p, &t.x, &t.w, &t.bias, &t.y, forced, &used, &err);
        snprintf(label, sizeof label, "%s [%s, %s->%s, %s]", c->name,
                 L == CF ? "channels_first" : "channels_last", tu_info(xdt)->name,
                 tu_info(ydt)->name, forced ? forced : "planner");
        if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref") != 0) continue;
        XT_CHECK(st == XCONV_STATUS_OK, "%s: status %s: %s", label, xconv_status_name(st),
                 err.description);
        if (st != XCONV_STATUS_OK) continue;
        XT_CHECK(used && (!forced || strcmp(used, forced) == 0), "%s: engine_out %s", label,
                 used ? used : "(null)");
        if (used && strcmp(used, "cpu.ref") == 0) ref_ran++;
        int64_t bad = tu_compare_y(&p, &t.y, t.expect, NULL, true, 0.0, label);
        XT_CHECK(bad == 0, "%s: %" PRId64 " wrong elements", label, bad);
    }
    XT_CHECK(ref_ran >= 1, "%s: cpu.ref never ran", c->name);
    release(&t);

    /* N = 0: valid, and nothing is written (y's buffer is a 64-byte canary). */
    p = problem_of(c, L, xdt, ydt, 0);
    build(c, &p, &t);
    for (int e = -1; e < xconv_engine_count(); e++) {
        const char *forced = e < 0 ? NULL : xconv_engine_name(e);
        const char *used = NULL;
        st = tu_conv(NULL, &p, &t.x, &t.w, &t.bias, &t.y, forced, &used, &err);
        if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref") != 0) continue;
        XT_CHECK(st == XCONV_STATUS_OK, "%s N=0 [%s]: status %s: %s", c->name,
                 forced ? forced : "planner", xconv_status_name(st), err.description);
        XT_CHECK(tu_all_bytes(t.y.data, 64, 0xA5), "%s N=0 [%s]: y was written", c->name,
                 forced ? forced : "planner");
    }
    release(&t);
}

int main(void)
{
    int ncases = (int)(sizeof CASES / sizeof CASES[0]);
    bool seen_ref = false;
    for (int e = 0; e < xconv_engine_count(); e++)
        seen_ref = seen_ref || strcmp(xconv_engine_name(e), "cpu.ref") == 0;
    XT_CHECK(seen_ref, "cpu.ref is not in the engine table");

    int tried = 0;
    for (int ci = 0; ci < ncases; ci++) {
        const hand_case *c = &CASES[ci];
        int64_t nx = c->n * c->cin, nw = c->cin * (c->cout / c->groups), ny = c->n * c->cout;
        for (int i = 0; i < c->d; i++) {
            nx *= c->x[i];
            nw *= c->k[i];
            ny *= c->y[i];
        }
        /* A typo in a hand-written array must not go unnoticed. */
        XT_CHECK(c->nx == nx && c->nw == nw && c->ny == ny && (!c->bv || c->nb == c->cout),
                 "%s: array lengths %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
                 " do not match the shapes (%" PRId64 " %" PRId64 " %" PRId64 ")",
                 c->name, c->nx, c->nw, c->nb, c->ny, nx, nw, ny);
        if (c->nx != nx || c->nw != nw || c->ny != ny) continue;
        for (size_t pi = 0; pi < sizeof PAIRS / sizeof PAIRS[0]; pi++) {
            xconv_dtype xdt = PAIRS[pi][0], ydt = PAIRS[pi][1];
            /* Float dtypes only where every value is exact (f8 cannot hold most of them). */
            bool widened = xdt != ydt;
            if (!all_exact(xdt, c->xv, nx, widened) || !all_exact(xdt, c->wv, nw, widened) ||
                !all_exact(ydt, c->yv, ny, false) || (c->bv && !all_exact(ydt, c->bv, c->cout, false)))
                continue;
            for (int L = 0; L < 2; L++) run_case(c, (xconv_layout)L, xdt, ydt);
            tried++;
        }
    }
    /* Integers alone give 10 pairs per case. */
    XT_CHECK(tried >= 10 * ncases, "only %d (case, dtype) runs", tried);
    return xt_finish("test_hand");
}
