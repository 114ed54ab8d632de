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
 *     (tiles whose outputs hit no tap, tiles that mix taps);
 *   - both conventions (channels-first: y channels strided, the int32 tile path;
 *     channels-last: dense channels, the direct store), dense views, views with dense
 *     channels but padded and reversed outer dims, and fully strided views;
 *   - 1, 2 and 3 threads, which must give the same bits; no byte of y's buffer outside its
 *     elements may change.
 * The machine may lack VNNI: the same problems then run the u32 kernels and still must match.
 */
#include "common/engine_check.h"
#include "common/ref_conv.h"
#include "cpu/ukernels/igemm.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

typedef struct int_case {
    const char *name;
    xconv_op op;
    int d;
    int64_t n, cin, cout, groups;
    int64_t x[3], k[3], s[3], t[3], lo[3], hi[3], opad[3];
} int_case;

#define CV XCONV_OP_CONV
#define CT XCONV_OP_CONV_TRANSPOSE

/* clang-format off */
static const int_case CASES[] = {
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
    {"conv2d 3x3 over 300 channels: runs over several blocks of weights",
     CV, 2, 1, 300, 33, 1, {4, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv1d k5 over 300 channels: one run longer than a block",
     CV, 1, 1, 300, 16, 1, {9}, {5}, {1}, {1}, {2}, {2}, {0}},
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

enum { IV_DENSE, IV_ROWS, IV_STRIDED, IV_COUNT };
static const char *const IV_NAMES[IV_COUNT] = {"dense", "dense-channel rows", "strided"};

static xconv_tensor view_of(int view, xconv_dtype dt, int rank, const int64_t *shape,
                            unsigned flip, bool output)
{
    /* dense innermost dim (channels-last activations keep dense channels), outer dims
     * padded, those in `flip` walked backwards (the innermost forwards) */
    if (view == IV_ROWS)
        return make_view_inner(dt, rank, shape, V_FLIPPED, flip & ~(1u << (rank - 1)), output, 1);
    return make_view(dt, rank, shape, view == IV_DENSE ? V_DENSE : V_FLIPPED, flip, output);
}

static int problems;

static void run_case(const int_case *c, xconv_layout L, int pair, int view, bool bias,
                     tu_rng *r)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    CASE_GEOMETRY(&p, c);
    p.layout = L, p.has_bias = bias, p.xdt = PAIRS[pair][0], p.ydt = PAIRS[pair][1];
    tu_problem_finish(&p);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p, xs, ws, bs, ys);
    const int rank = c->d + 2;
    const unsigned sp = spatial_mask(L, c->d);
    xconv_tensor x = view_of(view, p.xdt, rank, xs, sp, false);
    xconv_tensor w = view_of(view, p.xdt, rank, ws, 1u, false);
    xconv_tensor b = view_of(view == IV_ROWS ? IV_DENSE : view, p.ydt, 1, bs, 1u, false);
    xconv_tensor yr = view_of(view, p.ydt, rank, ys, sp | 1u, true);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);

    char desc[200], label[320];
    tu_describe(&p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s views", c->name, desc, IV_NAMES[view]);
    xconv_error err;
    const char *used;
    xconv_status st = tu_conv(CTX[1], &p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    xconv_tensor y[4];
    for (int t = 1; t <= 3; t++) {
        y[t] = yr;
        y[t].data = malloc(view_bytes(&yr));
        memset(y[t].data, 0xA5, view_bytes(&yr));
        st = tu_conv(CTX[t], &p, &x, &w, &b, &y[t], "cpu.igemm", &used, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.igemm, %d threads]: %s", label, t,
                 err.description);
    }
    const int64_t bad = compare_outputs(&p, &y[1], &yr, NULL, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    const size_t nb = view_bytes(&yr);
    XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
             "%s: 1, 2 and 3 threads give different bits", label);
    problems++;
    for (int t = 1; t <= 3; t++) free(y[t].data);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    if (!xconv__igemm_geom_vnni(true))
        printf("test_igemm_int: no AVX512-VNNI here: the u32 kernels run these problems\n");
    tu_rng r = {0x1f2e3d4c5b6a7988ull};
    int combo = 0;
    for (int ci = 0; ci < NCASES; ci++)
        for (int pi = 0; pi < NPAIRS; pi++)
            for (int li = 0; li < 2; li++)
                for (int v = 0; v < IV_COUNT; v++, combo++)
                    run_case(&CASES[ci],
                             li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST, pi, v,
                             combo % 3 != 0, &r);
    XT_CHECK(problems == NCASES * NPAIRS * 2 * IV_COUNT, "%d problems ran", problems);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_igemm_int");
}
