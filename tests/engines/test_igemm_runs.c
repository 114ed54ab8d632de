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
#include "common/ref_conv.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

typedef struct run_case {
    const char *name;
    xconv_op op;
    int d;
    int64_t n, cin, cout, groups;
    int64_t x[3], k[3], s[3], t[3], lo[3], hi[3], opad[3];
} run_case;

#define CV XCONV_OP_CONV

/* clang-format off */
static const run_case CASES[] = {
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

enum { RV_DENSE, RV_IMAGES, RV_ROWS, RV_STRIDED, RV_COUNT };
static const char *const RV_NAMES[RV_COUNT] = {"dense", "dense, uneven images",
                                                "dense-innermost rows", "strided"};

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
    if (view == RV_IMAGES) return view_images(dt, rank, shape);
    /* dense innermost dim, outer dims padded, those in `flip` walked backwards */
    if (view == RV_ROWS)
        return make_view_inner(dt, rank, shape, V_FLIPPED, flip & ~(1u << (rank - 1)), output, 1);
    return make_view(dt, rank, shape, view == RV_DENSE ? V_DENSE : V_FLIPPED, flip, output);
}

static int problems;

static void run_one(const run_case *c, xconv_layout L, int pair, int view, bool bias, tu_rng *r)
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
    xconv_tensor b = view_of(view == RV_STRIDED ? RV_STRIDED : RV_DENSE, p.ydt, 1, bs, 1u, false);
    xconv_tensor yr = view_of(view, p.ydt, rank, ys, sp | 1u, true);
    fill_all(&x, r), fill_all(&w, r), fill_all(&b, r);

    char desc[200], label[320];
    tu_describe(&p, desc, sizeof desc);
    snprintf(label, sizeof label, "%s: %s, %s views%s", c->name, desc, RV_NAMES[view],
             bias ? ", bias" : "");
    xconv_error err;
    const char *used;
    xconv_status st = tu_conv(CTX[1], &p, &x, &w, &b, &yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    double *mag = NULL;
    if (!tu_is_int(p.ydt)) {
        tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&p));
        mag = malloc(sizeof(double) * (size_t)tu_ycount(&p));
        tu_ref_conv(&p, &x, &w, &b, exact, mag);
        free(exact);
    }
    xconv_tensor y[4];
    for (int t = 1; t <= 3; t++) {
        y[t] = yr;
        y[t].data = malloc(view_bytes(&yr));
        memset(y[t].data, 0xA5, view_bytes(&yr));
        st = tu_conv(CTX[t], &p, &x, &w, &b, &y[t], "cpu.igemm", &used, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.igemm, %d threads]: %s", label, t,
                 err.description);
    }
    const int64_t bad = compare_outputs(&p, &y[1], &yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    const size_t nb = view_bytes(&yr);
    XT_CHECK(memcmp(y[1].data, y[2].data, nb) == 0 && memcmp(y[1].data, y[3].data, nb) == 0,
             "%s: 1, 2 and 3 threads give different bits", label);
    problems++;
    for (int t = 1; t <= 3; t++) free(y[t].data);
    free(mag);
    free(x.data), free(w.data), free(b.data), free(yr.data);
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    tu_rng r = {0x5eed0f1a7c4b2d93ull};
    int combo = 0;
    for (int ci = 0; ci < NCASES; ci++)
        for (int pi = 0; pi < NPAIRS; pi++)
            for (int li = 0; li < 2; li++)
                for (int v = 0; v < RV_COUNT; v++, combo++)
                    run_one(&CASES[ci], li ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST,
                            pi, v, combo % 3 != 1, &r);
    XT_CHECK(problems == NCASES * NPAIRS * 2 * RV_COUNT, "%d problems ran", problems);
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_igemm_runs");
}
