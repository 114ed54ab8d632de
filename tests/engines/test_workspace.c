/*
 * test_workspace.c — issue 3's memory rule: on every entry of the cpu benchmark suite
 * (shapes copied from shared/bench/suite.json), in all 16 dtypes, with and without
 * constant_weights, on 1, 2 and 48 threads (per-thread scratch: cpu.igemm's lazily packed
 * panels, cpu.winograd's blocks), and for f32 also with allow_tf32 (cpu.winograd), the
 * workspace of the planner's plan stays under max(16 MiB, 10% of the bytes of x, w and y).
 */
#include "xconv.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>
/* A suite entry (channels-last shapes; symmetric padding). */
typedef struct suite_entry {
    const char *name;
    int transpose, d;
    long n, cin, cout;
    long x[3], k[3], s[3], p[3];
    long groups;
} suite_entry;

static const suite_entry SUITE[] = {
    {"rn50_conv1", 0, 2, 1, 3, 64, {224, 224}, {7, 7}, {2, 2}, {3, 3}, 1},
    {"rn50_1x1_64", 0, 2, 1, 64, 64, {56, 56}, {1, 1}, {1, 1}, {0, 0}, 1},
    {"rn50_3x3_64", 0, 2, 1, 64, 64, {56, 56}, {3, 3}, {1, 1}, {1, 1}, 1},
    {"rn50_1x1_256", 0, 2, 1, 64, 256, {56, 56}, {1, 1}, {1, 1}, {0, 0}, 1},
    {"rn50_3x3_128", 0, 2, 1, 128, 128, {28, 28}, {3, 3}, {1, 1}, {1, 1}, 1},
    {"rn50_3x3_256", 0, 2, 1, 256, 256, {14, 14}, {3, 3}, {1, 1}, {1, 1}, 1},
    {"rn50_3x3_512", 0, 2, 1, 512, 512, {7, 7}, {3, 3}, {1, 1}, {1, 1}, 1},
    {"rn50_1x1_1024", 0, 2, 1, 1024, 256, {14, 14}, {1, 1}, {1, 1}, {0, 0}, 1},
    {"rn50_3x3_s2", 0, 2, 1, 128, 128, {56, 56}, {3, 3}, {2, 2}, {1, 1}, 1},
    {"mbv2_dw_32", 0, 2, 1, 32, 32, {112, 112}, {3, 3}, {1, 1}, {1, 1}, 32},
    {"mbv2_dw_144s2", 0, 2, 1, 144, 144, {56, 56}, {3, 3}, {2, 2}, {1, 1}, 144},
    {"mbv2_dw_384", 0, 2, 1, 384, 384, {14, 14}, {3, 3}, {1, 1}, {1, 1}, 384},
    {"whisper_c1", 0, 1, 1, 80, 384, {3000}, {3}, {1}, {1}, 1},
    {"whisper_c2", 0, 1, 1, 384, 384, {3000}, {3}, {2}, {1}, 1},
    {"encodec_up", 1, 1, 1, 512, 256, {150}, {16}, {8}, {4}, 1},
    {"hifigan_up", 1, 1, 1, 256, 128, {1200}, {8}, {4}, {2}, 1},
    {"unet_up2d", 1, 2, 1, 256, 128, {32, 32}, {4, 4}, {2, 2}, {1, 1}, 1},
    {"qwenvl_patch", 0, 3, 1024, 3, 1152, {2, 14, 14}, {2, 14, 14}, {2, 14, 14}, {0, 0, 0}, 1},
    {"c3d_3x3x3", 0, 3, 1, 64, 64, {8, 28, 28}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, 1},
};
/* Plans the entry in dtype dt on ctx and checks the planner's workspace. */
static void check_entry(xconv_context *ctx, int threads, const suite_entry *s, xconv_dtype dt,
                        bool constant, bool tf32)
{
    const int d = s->d;
    xconv_params p = xconv_params_init(s->transpose ? XCONV_OP_CONV_TRANSPOSE : XCONV_OP_CONV, d,
                                       XCONV_LAYOUT_CHANNELS_LAST);
    for (int i = 0; i < d; i++) {
        p.stride[i] = s->s[i];
        p.pad_lo[i] = p.pad_hi[i] = s->p[i];
    }
    p.groups = s->groups;
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], ys[XCONV_MAX_RANK];
    xs[0] = s->n, ws[0] = s->cout;
    for (int i = 0; i < d; i++)
        xs[1 + i] = s->x[i], ws[1 + i] = s->k[i];
    xs[d + 1] = s->cin, ws[d + 1] = s->cin / s->groups;
    xconv_error err;
    xconv_status st = xconv_output_shape(&p, xs, ws, ys, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s: %s", s->name, err.description);
    const size_t es = xconv_dtype_size(dt);
    double nx = 1, nw = 1, ny = 1;
    for (int i = 0; i < d + 2; i++)
        nx *= (double)xs[i], nw *= (double)ws[i], ny *= (double)ys[i];
    /* x and y are never touched (no execute); w is read by the constant-weights packing */
    void *xb = malloc((size_t)nx * es), *wb = calloc((size_t)nw, es), *yb = malloc((size_t)ny * es);
    xconv_tensor x = xconv_tensor_contiguous(dt, d + 2, xs, xb);
    xconv_tensor w = xconv_tensor_contiguous(dt, d + 2, ws, wb);
    xconv_tensor y = xconv_tensor_contiguous(dt, d + 2, ys, yb);
    xconv_plan_options po = {.constant_weights = constant, .allow_tf32 = tf32};
    xconv_plan *plan = NULL;
    st = xconv_plan_create(ctx, &p, &x, &w, NULL, &y, &po, &plan, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s %s: %s", s->name, xconv_dtype_name(dt), err.description);
    if (plan) {
        double limit = 0.1 * (nx + nw + ny) * (double)es;
        if (limit < 16.0 * 1048576) limit = 16.0 * 1048576;
        const size_t bytes = xconv_plan_workspace_size(plan);
        XT_CHECK((double)bytes <= limit,
                 "%s %s constant_weights %d allow_tf32 %d threads %d (%s): workspace %.1f MiB "
                 "over the %.1f MiB limit",
                 s->name, xconv_dtype_name(dt), constant, tf32, threads, xconv_plan_engine(plan),
                 (double)bytes / 1048576.0, limit / 1048576.0);
    }
    xconv_plan_destroy(plan);
    free(xb), free(wb), free(yb);
}

int main(void)
{
    const int thread_counts[3] = {1, 2, 48};
    for (int ti = 0; ti < 3; ti++) {
        const int threads = thread_counts[ti];
        xconv_context *ctx = NULL;
        xconv_context_options o = {.threads = threads};
        xconv_context_create(&o, &ctx, NULL);
        for (size_t e = 0; e < sizeof SUITE / sizeof SUITE[0]; e++)
            for (int dt = XCONV_DTYPE_U8; dt <= XCONV_DTYPE_C128; dt++)
                for (int constant = 0; constant < 2; constant++)
                    for (int tf32 = 0; tf32 < (dt == XCONV_DTYPE_F32 ? 2 : 1); tf32++)
                        check_entry(ctx, threads, &SUITE[e], (xconv_dtype)dt, constant, tf32);
        xconv_context_destroy(ctx);
    }
    return xt_finish("test_workspace");
}
