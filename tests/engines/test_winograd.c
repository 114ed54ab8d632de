/*
 * test_winograd.c — cpu.winograd (F(2x2, 3x3) and F(2, 3) over cpu.igemm's f32 kernel)
 * against independent oracles:
 *
 *   - cpu.ref, over named problems around the engine's tiling: odd output sizes (tiles half
 *     outside y), asymmetric and zero padding, channels around the 64-column panel and the
 *     16-lane vectors (1, 15, 17, 63, 65, 130), batches, 1-D convs (F(2, 3)), 2-D kernels
 *     whose outer dim is summed directly (strided and dilated, so F(2, 3) along dim 2
 *     alone), 3-D kernels (depth summed directly, strided, dilated and padded), and
 *     reductions long enough to split the tiles into several blocks; both conventions, the
 *     dense, dense-innermost-rows and fully strided views, 1, 2 and 3 threads
 *     (the same bits), no byte outside y written; within DESIGN.md §2's test tolerance on
 *     uniform values; x with strided channels both copied channels-last per chunk of images
 *     (chunks of one and two images) and gathered per tile;
 *   - exactness: on small-integer values every step of F(2, 3) is exact in f32 (G's halves
 *     included), so the engine must give cpu.ref's bits;
 *   - Inf and NaN in x or w: the outputs they reach must be cpu.ref's (the engine sums such
 *     tiles directly, in cpu.ref's order); finite values whose transforms overflow: no
 *     output may be Inf or NaN where cpu.ref's is finite;
 *   - the plan: never chosen, and forcing it refused with a message naming allow_tf32,
 *     unless the plan allows reduced-precision f32 math; chosen with it for a ResNet 3x3
 *     layer; constant weights (transformed once at plan creation, execute without w), and
 *     weights whose transform would break the workspace budget without them.
 */
#include "common/engine_check.h"
#include "cpu/engines/winograd.h"

#include <math.h>

static xconv_context *CTX[4]; /* CTX[t]: t threads */

#define CV XCONV_OP_CONV

/* clang-format off */
static const table_case CASES[] = {
    {"conv2d 3x3 pad 1, 6x6, 5 -> 7 channels",
     CV, 2, 1, 5, 7, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 pad 1, 7x9 (half tiles at both edges), 16 -> 64",
     CV, 2, 1, 16, 64, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 pad 1, 2 images of 5x6, 17 -> 65 (two panels, channel tails)",
     CV, 2, 2, 17, 65, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 unpadded, 8x7, 15 -> 63",
     CV, 2, 1, 15, 63, 1, {8, 7}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d 3x3 asymmetric padding 0:2 and 2:1, 1 -> 1",
     CV, 2, 1, 1, 1, 1, {5, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 2}, {2, 1}, {0}},
    {"conv2d 3x3 padding 3 (outputs whose window is all padding), 3 -> 130",
     CV, 2, 1, 3, 130, 1, {4, 5}, {3, 3}, {1, 1}, {1, 1}, {3, 3}, {3, 2}, {0}},
    {"conv2d 3x3 pad 1, 10x10 over 600 channels: several blocks of tiles",
     CV, 2, 1, 600, 20, 1, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 pad 1, 3 images of 13x11, 130 -> 70",
     CV, 2, 3, 130, 70, 1, {13, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 2x3, stride 2 along dim 0 (summed directly), F(2, 3) along dim 1",
     CV, 2, 2, 9, 33, 1, {9, 10}, {2, 3}, {2, 1}, {1, 1}, {1, 1}, {0, 1}, {0}},
    {"conv2d 5x3, dilation 2 along dim 0, padding 3:0",
     CV, 2, 1, 6, 18, 1, {12, 7}, {5, 3}, {1, 1}, {2, 1}, {3, 1}, {0, 1}, {0}},
    {"conv1d k3 pad 1, 11 positions, 80 -> 20",
     CV, 1, 2, 80, 20, 1, {11}, {3}, {1}, {1}, {1}, {1}, {0}},
    {"conv1d k3 padding 0:2, 2 positions, 4 -> 5",
     CV, 1, 1, 4, 5, 1, {2}, {3}, {1}, {1}, {0}, {2}, {0}},
    {"conv3d 3x3x3 pad 1, 4x6x5, 8 -> 24",
     CV, 3, 1, 8, 24, 1, {4, 6, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0}},
    {"conv3d 2x3x3, stride 2 and dilation 2 along depth, padding 1:2",
     CV, 3, 2, 5, 7, 1, {7, 5, 6}, {2, 3, 3}, {2, 1, 1}, {2, 1, 1}, {1, 1, 0}, {2, 1, 2}, {0}},
};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static const xconv_dtype PAIRS[][2] = {{XCONV_DTYPE_F32, XCONV_DTYPE_F32}};

/* A dense f32 problem of case c, plans allowing reduced-precision f32 math. */
static dense_problem dense_of(const table_case *c, xconv_layout L, bool bias)
{
    dense_problem d = dense_of_case(c, L, XCONV_DTYPE_F32, XCONV_DTYPE_F32, bias);
    d.p.allow_tf32 = true;
    return d;
}

static void fill_small(xconv_tensor *t, tu_rng *r)
{
    const int64_t count = (int64_t)(view_bytes(t) / 4);
    for (int64_t i = 0; i < count; i++) tu_store(XCONV_DTYPE_F32, t->data, i, tu_gen_small(r, XCONV_DTYPE_F32));
}

/* cpu.ref into yr and cpu.winograd (2 threads) into y. */
static bool run_both(dense_problem *d, const char *label)
{
    xconv_error err;
    const char *used = NULL;
    xconv_status st = tu_conv(CTX[2], &d->p, &d->x, &d->w, &d->b, &d->yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    st = tu_conv(CTX[2], &d->p, &d->x, &d->w, &d->b, &d->y, "cpu.winograd", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.winograd]: %s", label, err.description);
    return st == XCONV_STATUS_OK;
}

/* Small integers: every V, U (quarters), product, sum and output is exact in f32. */
static void check_exact(void)
{
    for (int ci = 0; ci < NCASES; ci++)
        for (int li = 0; li < 2; li++) {
            const xconv_layout L = li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
            dense_problem d = dense_of(&CASES[ci], L, ci % 2 == 0);
            tu_rng r = {0xe4ac7 + (uint64_t)(2 * ci + li)};
            fill_small(&d.x, &r), fill_small(&d.w, &r), fill_small(&d.b, &r);
            char label[240];
            snprintf(label, sizeof label, "small integers, %s, %s", CASES[ci].name,
                     li ? "channels_last" : "channels_first");
            if (run_both(&d, label))
                XT_CHECK(memcmp(d.y.data, d.yr.data, view_bytes(&d.y)) == 0,
                         "%s: not cpu.ref's bits", label);
            dense_free(&d);
        }
}

/* Every output against cpu.ref's: Inf and NaN exactly where it has them (the engine sums
 * such tiles directly), finite ones within `scale` times the tolerance of sum|x*w|. */
static void compare_scaled(dense_problem *d, const char *label, double scale)
{
    tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&d->p));
    double *mag = malloc(sizeof(double) * (size_t)tu_ycount(&d->p));
    tu_ref_conv(&d->p, &d->x, &d->w, &d->b, exact, mag);
    for (int64_t i = 0; i < tu_ycount(&d->p); i++) mag[i] *= scale;
    const int64_t bad = compare_outputs(&d->p, &d->y, &d->yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    free(exact), free(mag);
}

/* Inf and NaN in x and in w: the outputs they reach must be cpu.ref's Inf and NaN (an
 * infinite weight meets the padding's zeros too), the others within the tolerance. */
static void check_nonfinite(void)
{
    for (int k = 0; k < 4; k++) {
        const table_case *c = &CASES[k % 2 ? 7 : 1];
        const xconv_layout L = k & 1 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
        dense_problem d = dense_of(c, L, true);
        tu_rng r = {0x1f1a7 + (uint64_t)k};
        fill_all(&d.x, &r), fill_all(&d.w, &r), fill_all(&d.b, &r);
        const int64_t nx = tu_numel(d.x.rank, d.x.shape);
        tu_store(XCONV_DTYPE_F32, d.x.data, nx / 3, (tu_val){0, INFINITY, 0.0});
        tu_store(XCONV_DTYPE_F32, d.x.data, 2 * nx / 3, (tu_val){0, NAN, 0.0});
        if (k >= 2) tu_store(XCONV_DTYPE_F32, d.w.data, 5, (tu_val){0, -INFINITY, 0.0});
        char label[240];
        snprintf(label, sizeof label, "%s, %s, %s", k >= 2 ? "Inf and NaN in x, -Inf in w" : "Inf and NaN in x",
                 c->name, k & 1 ? "channels_last" : "channels_first");
        if (run_both(&d, label)) compare_scaled(&d, label, 1.0);
        dense_free(&d);
    }
}

/* Finite values whose transform overflows while the direct sums do not: x = +2e38 and
 * -2e38 two rows apart in one column of channel 0 (a tile's d1 - d3 is 4e38, Inf in f32),
 * channel 0's weights all 0.5 (a direct sum meets them as 1e38 - 1e38). Those tiles must be
 * summed directly: no output may be Inf or NaN where cpu.ref's is finite, and every output
 * is within the tolerance (in F(2, 3) an output sees only its own window's inputs). */
static void check_overflow(void)
{
    for (int k = 0; k < 2; k++) {
        const bool cl = k == 1;
        dense_problem d = dense_of(&CASES[1], cl ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST, true);
        tu_rng r = {0x0f10 + (uint64_t)k};
        fill_all(&d.x, &r), fill_all(&d.w, &r), fill_all(&d.b, &r);
        const int64_t W = d.p.x[1], C = d.p.cin;
        for (int64_t co = 0; co < d.p.cout; co++)
            for (int64_t t = 0; t < 9; t++)
                tu_store(XCONV_DTYPE_F32, d.w.data, cl ? (co * 9 + t) * C : (co * C) * 9 + t, (tu_val){0, 0.5, 0.0});
        for (int64_t h = 2; h <= 4; h += 2) {
            const int64_t at = cl ? (h * W + 3) * C : h * W + 3; /* image 0, channel 0, column 3 */
            tu_store(XCONV_DTYPE_F32, d.x.data, at, (tu_val){0, h == 2 ? 2e38 : -2e38, 0.0});
        }
        char label[240];
        snprintf(label, sizeof label, "x of +-2e38, %s, %s", CASES[1].name, cl ? "channels_last" : "channels_first");
        if (run_both(&d, label)) {
            int64_t nonfinite = 0;
            const int64_t ny = tu_ycount(&d.p);
            for (int64_t i = 0; i < ny; i++) nonfinite += !isfinite(((const float *)d.yr.data)[i]);
            XT_CHECK(nonfinite == 0, "%s: cpu.ref's sums should stay finite (%" PRId64 " are not)", label, nonfinite);
            compare_scaled(&d, label, 1.0);
        }
        dense_free(&d);
    }
}

/* A ResNet-50 3x3 layer (56x56, 64 -> 64), conv2d f32 channels-last: the engine the planner
 * takes with and without allow_tf32, and forcing cpu.winograd without it. */
static void check_planner(void)
{
    const table_case c = {"rn50 3x3 64", CV, 2, 1, 64, 64, 1, {56, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}};
    dense_problem d = dense_of(&c, XCONV_LAYOUT_CHANNELS_LAST, true);
    tu_rng r = {0x91a2};
    fill_all(&d.x, &r), fill_all(&d.w, &r), fill_all(&d.b, &r);
    xconv_error err;
    const char *used = NULL;
    d.p.allow_tf32 = false;
    xconv_status st = tu_conv(CTX[2], &d.p, &d.x, &d.w, &d.b, &d.y, NULL, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK && used && strcmp(used, "cpu.winograd") != 0,
             "without allow_tf32 the planner took %s", used ? used : "(none)");
    st = tu_conv(CTX[2], &d.p, &d.x, &d.w, &d.b, &d.y, "cpu.winograd", &used, &err);
    XT_CHECK(st == XCONV_STATUS_UNSUPPORTED && strstr(err.description, "cpu.winograd") &&
                 strstr(err.description, "allow_tf32"),
             "forcing cpu.winograd without allow_tf32: status %d, \"%s\"", (int)st, err.description);
    d.p.allow_tf32 = true;
    st = tu_conv(CTX[2], &d.p, &d.x, &d.w, &d.b, &d.y, NULL, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK && used && strcmp(used, "cpu.winograd") == 0,
             "with allow_tf32 the planner took %s for a ResNet 3x3 layer", used ? used : "(none)");
    /* f64 is never reduced */
    tu_problem p64 = d.p;
    p64.xdt = p64.ydt = XCONV_DTYPE_F64;
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p64, xs, ws, bs, ys);
    xconv_tensor x = make_view(XCONV_DTYPE_F64, 4, xs, V_DENSE, 0, false), w = make_view(XCONV_DTYPE_F64, 4, ws, V_DENSE, 0, false),
                 b = make_view(XCONV_DTYPE_F64, 1, bs, V_DENSE, 0, false), y = make_view(XCONV_DTYPE_F64, 4, ys, V_DENSE, 0, true);
    fill_all(&x, &r), fill_all(&w, &r), fill_all(&b, &r);
    st = tu_conv(CTX[2], &p64, &x, &w, &b, &y, NULL, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK && used && strcmp(used, "cpu.winograd") != 0,
             "f64 with allow_tf32: the planner took %s", used ? used : "(none)");
    free(x.data), free(w.data), free(b.data), free(y.data);
    dense_free(&d);
}

/* Constant weights: U transformed once at plan creation, each execute without w gives
 * cpu.ref's result (within tolerance) twice, for new x each time. And 512 -> 512 channels
 * over a 2x2 image, whose 16 MiB of U would break the workspace budget per execute: refused
 * without constant weights, run with them. */
static void check_constant(void)
{
    const table_case cases[2] = {
        {"constant", CV, 2, 2, 40, 70, 1, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
        {"512 -> 512 over 2x2", CV, 2, 1, 512, 512, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    };
    for (int ci = 0; ci < 2; ci++) {
        dense_problem d = dense_of(&cases[ci], XCONV_LAYOUT_CHANNELS_LAST, true);
        tu_rng r = {0xc0457 + (uint64_t)ci};
        fill_all(&d.w, &r), fill_all(&d.b, &r);
        xconv_params q = tu_params(&d.p);
        xconv_error err;
        xconv_plan *plan = NULL;
        xconv_plan_options o = {.engine = "cpu.winograd", .allow_tf32 = true};
        if (ci == 1) {
            xconv_status st = xconv_plan_create(CTX[2], &q, &d.x, &d.w, &d.b, &d.y, &o, &plan, &err);
            XT_CHECK(st == XCONV_STATUS_UNSUPPORTED && strstr(err.description, "workspace budget"),
                     "%s without constant weights: status %d, \"%s\"", cases[ci].name, (int)st, err.description);
            if (st == XCONV_STATUS_OK) xconv_plan_destroy(plan);
            plan = NULL;
        }
        o.constant_weights = true;
        xconv_status st = xconv_plan_create(CTX[2], &q, &d.x, &d.w, &d.b, &d.y, &o, &plan, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s: plan with constant weights: %s", cases[ci].name, err.description);
        if (st != XCONV_STATUS_OK) {
            dense_free(&d);
            continue;
        }
        XT_CHECK(xconv_plan_weights_bytes(plan) > 0, "%s: no packed weights", cases[ci].name);
        for (int rep = 0; rep < 2; rep++) {
            fill_all(&d.x, &r);
            st = xconv_plan_execute(plan, d.x.data, NULL, d.b.data, d.y.data, NULL, 0, &err);
            XT_CHECK(st == XCONV_STATUS_OK, "%s: execute: %s", cases[ci].name, err.description);
            const char *used;
            st = tu_conv(CTX[2], &d.p, &d.x, &d.w, &d.b, &d.yr, "cpu.ref", &used, &err);
            tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&d.p));
            double *mag = malloc(sizeof(double) * (size_t)tu_ycount(&d.p));
            tu_ref_conv(&d.p, &d.x, &d.w, &d.b, exact, mag);
            char label[120];
            snprintf(label, sizeof label, "%s, execute %d", cases[ci].name, rep + 1);
            const int64_t bad = compare_outputs(&d.p, &d.y, &d.yr, mag, label);
            XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
            free(exact), free(mag);
        }
        xconv_plan_destroy(plan);
        dense_free(&d);
    }
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    tu_rng r = {0x3a9f0d2c11e7b845ull};
    check_engine_table(CTX, "cpu.winograd", CASES, NCASES, PAIRS, 1, table_view, TV_NAMES, TV_COUNT, 0,
                       true, &r);
    /* x with strided channels gathered per tile (its images too large for the copy) */
    xconv__winograd_copy_bytes = 0;
    check_engine_table(CTX, "cpu.winograd", CASES, NCASES, PAIRS, 1, table_view, TV_NAMES, TV_COUNT, 1,
                       true, &r);
    check_exact();
    /* chunks of one image, and of two (3 images: a short last chunk) */
    for (int k = 1; k <= 2; k++) {
        xconv__winograd_copy_bytes = (size_t)k * 13 * 11 * 130 * 4;
        check_engine_table(CTX, "cpu.winograd", CASES + 7, 1, PAIRS, 1, table_view, TV_NAMES, TV_COUNT, k,
                           true, &r);
    }
    xconv__winograd_copy_bytes = (size_t)8 << 20;
    check_exact();
    check_nonfinite();
    check_overflow();
    check_planner();
    check_constant();
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_winograd");
}
