/*
 * cmd_demo.c — `xconv demo`: a small realistic pipeline on built-in deterministic data.
 *
 * A 1-D audio decoder (a conv1d stem, two conv_transpose1d upsampling stages of stride 8 and
 * 4, a depthwise conv1d) feeding a vision-style tail (a grouped conv2d in the channels-last
 * MLX layout and a conv3d patch embedding with kernel == stride), run in several dtype
 * configurations. Between stages the activations are rescaled to the next input dtype's
 * range (as a quantized or low-precision network would), then reinterpreted with the next
 * stage's shape.
 *
 * Every stage runs twice: with the engine the planner picks (timed) and with the reference
 * engine "cpu.ref" forced. Floats must agree within a per-dtype tolerance of
 * max|y - y_ref| / max|y_ref|; integers must be bit-identical. Any disagreement makes the
 * command exit 1.
 */
#include "args.h"
#include "convert.h"
#include "core/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct demo_stage {
    const char  *name;
    xconv_op     op;
    int          rank;
    xconv_layout layout;
    int64_t      x[XCONV_MAX_RANK], w[XCONV_MAX_RANK];
    int64_t      stride[3], pad[3];
    int64_t      groups;
    bool         bias;
} demo_stage;

/* Each x has as many elements as the previous y (checked at run time). */
static const demo_stage stages[] = {
    {"stem", XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_FIRST,
     {1, 16, 64}, {64, 16, 7}, {1}, {3}, 1, true},
    {"upsample x8", XCONV_OP_CONV_TRANSPOSE, 1, XCONV_LAYOUT_CHANNELS_FIRST,
     {1, 64, 64}, {64, 32, 16}, {8}, {4}, 1, false},
    {"upsample x4", XCONV_OP_CONV_TRANSPOSE, 1, XCONV_LAYOUT_CHANNELS_FIRST,
     {1, 32, 512}, {32, 16, 8}, {4}, {2}, 1, true},
    {"depthwise", XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_FIRST,
     {1, 16, 2048}, {16, 1, 7}, {1}, {3}, 16, false},
    {"block2d g4 nxc", XCONV_OP_CONV, 2, XCONV_LAYOUT_CHANNELS_LAST,
     {1, 32, 64, 16}, {32, 3, 3, 4}, {1, 1}, {1, 1}, 4, true},
    {"patch3d", XCONV_OP_CONV, 3, XCONV_LAYOUT_CHANNELS_FIRST,
     {1, 4, 16, 32, 32}, {48, 4, 4, 8, 8}, {4, 8, 8}, {0, 0, 0}, 1, false},
};
enum { DEMO_STAGES = (int)(sizeof stages / sizeof stages[0]) };

typedef struct demo_config {
    xconv_dtype in, out;
    double      x_range;  /* activations are rescaled to [-x_range, x_range] */
    double      w_range;  /* integer weights lie in [-w_range, w_range] */
    double      tol;      /* relative tolerance; 0 = bit-exact */
} demo_config;

/* f16/bf16 results are rounded once by each engine; summation order may move that rounding
 * by one ulp of the largest value (2^-11, 2^-8 relative), so the bounds sit above that. */
static const demo_config configs[] = {
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32, 1.0, 0, 1e-5},
    {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16, 1.0, 0, 1.6e-2},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16, 1.0, 0, 2e-3},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32, 1.0, 0, 1e-5},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32, 127, 127, 0},
    {XCONV_DTYPE_I64, XCONV_DTYPE_I64, 1000, 1000, 0},
    {XCONV_DTYPE_F64, XCONV_DTYPE_F64, 1.0, 0, 1e-12},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64, 1.0, 0, 1e-5},
};
enum { DEMO_CONFIGS = (int)(sizeof configs / sizeof configs[0]) };

/* splitmix64: a fixed generator, so the demo's data is the same on every machine. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53 * 2 - 1; }

static bool is_int(xconv_dtype dt) { return xconv__dtype_family(dt) == XCONV_FAMILY_INT; }

static bool is_unsigned(xconv_dtype dt) { return is_int(dt) && !xconv__dtype_signed(dt); }

/* Stores value (re, im) as element i: integers are rounded, unsigned ones folded to >= 0. */
static void put(xconv_dtype dt, void *buf, int64_t i, double re, double im)
{
    tool_scalar v = {0};
    if (is_int(dt)) {
        v.kind = TOOL_INT;
        v.i = (int64_t)llround(is_unsigned(dt) ? fabs(re) : re);
    } else {
        v.kind = TOOL_COMPLEX;
        v.re = re;
        v.im = xconv__dtype_family(dt) == XCONV_FAMILY_COMPLEX ? im : 0;
    }
    char why[200];
    xconv_tool_set(dt, buf, i, &v, why, sizeof why); /* in range by construction */
}

static void fill_random(xconv_dtype dt, void *buf, int64_t count, double range, uint64_t seed)
{
    for (int64_t i = 0; i < count; i++) {
        double re = range * rng_uniform(&seed);
        double im = range * rng_uniform(&seed);
        put(dt, buf, i, re, im);
    }
}

static double scalar_re(const tool_scalar *v)
{
    return v->kind == TOOL_UINT ? (double)v->u : v->kind == TOOL_INT ? (double)v->i : v->re;
}

/* y (of dtype ydt) rescaled so that its largest magnitude becomes `range`, into x. */
static void requantize(xconv_dtype ydt, const void *y, xconv_dtype xdt, void *x, int64_t count,
                       double range)
{
    double max = 0;
    for (int64_t i = 0; i < count; i++) {
        tool_scalar v = xconv_tool_get(ydt, y, i);
        max = fmax(max, xconv_tool_abs(&v));
    }
    double scale = max > 0 ? range / max : 1;
    for (int64_t i = 0; i < count; i++) {
        tool_scalar v = xconv_tool_get(ydt, y, i);
        put(xdt, x, i, scalar_re(&v) * scale, v.im * scale);
    }
}

static int64_t prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

/* The agreement of y with y_ref: relative max error for floats, bit equality for integers.
 * Returns true when it is within tol; *metric gets the error (integers: mismatch count). */
static bool agree(xconv_dtype dt, const void *y, const void *y_ref, int64_t count, double tol,
                  double *metric)
{
    if (is_int(dt)) {
        int64_t bad = 0;
        size_t size = xconv_dtype_size(dt);
        for (int64_t i = 0; i < count; i++)
            bad += memcmp((const char *)y + i * (int64_t)size,
                          (const char *)y_ref + i * (int64_t)size, size) != 0;
        *metric = (double)bad;
        return bad == 0;
    }
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < count; i++) {
        tool_scalar a = xconv_tool_get(dt, y, i), b = xconv_tool_get(dt, y_ref, i);
        double e = hypot(a.re - b.re, a.im - b.im);
        if (e != e) {
            max_err = e;
            break;
        }
        max_err = fmax(max_err, e);
        max_ref = fmax(max_ref, xconv_tool_abs(&b));
    }
    *metric = max_ref > 0 ? max_err / max_ref : max_err;
    return *metric <= tol;
}

typedef struct demo_buffers {
    void *x, *w, *bias, *y, *y_ref, *ws;
    size_t ws_bytes;
} demo_buffers;

static void print_shape(char *buf, size_t size, const int64_t *s, int rank)
{
    size_t n = 0;
    for (int i = 0; i < rank && n < size; i++) {
        int w = snprintf(buf + n, size - n, "%s%" PRId64, i ? "," : "[", s[i]);
        if (w < 0) return;
        n += (size_t)w;
    }
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* Runs one stage; returns an exit code (0 ok) and sets *ok to the agreement verdict. */
static int run_stage(xconv_context *ctx, const demo_config *c, int ci, int si, demo_buffers *b,
                     bool *ok)
{
    const demo_stage *s = &stages[si];
    int rank = s->rank + 2;
    xconv_params p = xconv_params_init(s->op, s->rank, s->layout);
    for (int i = 0; i < s->rank; i++) {
        p.stride[i] = s->stride[i];
        p.pad_lo[i] = p.pad_hi[i] = s->pad[i];
    }
    p.groups = s->groups;
    xconv_error err;
    int64_t ys[XCONV_MAX_RANK];
    if (xconv_output_shape(&p, s->x, s->w, ys, &err)) return xconv_cli_fail_lib(&err);

    int64_t cout = s->layout == XCONV_LAYOUT_CHANNELS_LAST ? ys[rank - 1] : ys[1];
    uint64_t seed = 0x5eed0000u + (uint64_t)ci * 64 + (uint64_t)si;
    double w_range = is_int(c->in) ? c->w_range : 1 / sqrt((double)prod(s->w + 1, rank - 1));
    fill_random(c->in, b->w, prod(s->w, rank), w_range, seed * 3 + 1);
    if (s->bias) fill_random(c->out, b->bias, cout, is_int(c->out) ? c->w_range : 0.1, seed * 3 + 2);

    xconv_tensor x = xconv_tensor_contiguous(c->in, rank, s->x, b->x);
    xconv_tensor w = xconv_tensor_contiguous(c->in, rank, s->w, b->w);
    xconv_tensor bias = xconv_tensor_contiguous(c->out, 1, &cout, b->bias);
    xconv_tensor y = xconv_tensor_contiguous(c->out, rank, ys, b->y);
    xconv_plan *plan = NULL, *ref = NULL;
    xconv_plan_options ref_opts = {.engine = "cpu.ref"};
    const xconv_tensor *bp = s->bias ? &bias : NULL;
    const void *bias_data = s->bias ? b->bias : NULL;
    if (xconv_plan_create(ctx, &p, &x, &w, bp, &y, NULL, &plan, &err) ||
        xconv_plan_create(ctx, &p, &x, &w, bp, &y, &ref_opts, &ref, &err)) {
        xconv_plan_destroy(plan);
        return xconv_cli_fail_lib(&err);
    }
    size_t ws = xconv_plan_workspace_size(plan);
    if (ws > b->ws_bytes) {
        free(b->ws);
        b->ws = malloc(ws);
        b->ws_bytes = b->ws ? ws : 0;
    }
    /* Fast runs are repeated (best of up to 3) so that page faults of the first do not
     * count; slow ones are timed once to keep the demo short. */
    double best = INFINITY;
    xconv_status st = XCONV_STATUS_OK;
    for (int rep = 0; rep < 3 && st == XCONV_STATUS_OK && best > 0.02; rep++) {
        double t0 = xconv_cli_now();
        st = xconv_plan_execute(plan, b->x, b->w, bias_data, b->y, b->ws, b->ws_bytes, &err);
        best = fmin(best, xconv_cli_now() - t0);
    }
    /* When the planner chose the reference itself, its result is the reference result. */
    bool is_ref = strcmp(xconv_plan_engine(plan), "cpu.ref") == 0;
    int64_t y_count = prod(ys, rank);
    if (st == XCONV_STATUS_OK && is_ref)
        memcpy(b->y_ref, b->y, (size_t)y_count * xconv_dtype_size(c->out));
    else if (st == XCONV_STATUS_OK)
        st = xconv_plan_execute(ref, b->x, b->w, bias_data, b->y_ref, NULL, 0, &err);
    if (st != XCONV_STATUS_OK) {
        xconv_plan_destroy(plan);
        xconv_plan_destroy(ref);
        return xconv_cli_fail_lib(&err);
    }

    double metric;
    *ok = agree(c->out, b->y, b->y_ref, y_count, c->tol, &metric);
    /* FLOPs of DESIGN.md §6: 2*N*prod(w)*prod(spatial), where prod(w) is Cout*Cin/g*prod(K)
     * in every layout, over y's positions for conv and x's for the transpose. */
    const int64_t *sp = s->op == XCONV_OP_CONV ? ys : s->x;
    int first = s->layout == XCONV_LAYOUT_CHANNELS_LAST ? 1 : 2;
    double flops = 2.0 * (double)s->x[0] * (double)prod(s->w, rank) * (double)prod(sp + first, s->rank);
    char xs[64], yss[64], verdict[64];
    print_shape(xs, sizeof xs, s->x, rank);
    print_shape(yss, sizeof yss, ys, rank);
    if (is_ref)
        snprintf(verdict, sizeof verdict, "(the reference itself)");
    else if (is_int(c->out))
        snprintf(verdict, sizeof verdict, *ok ? "exact" : "MISMATCH in %.0f values", metric);
    else
        snprintf(verdict, sizeof verdict, "rel err %.1e %s", metric, *ok ? "ok" : "FAILED");
    printf("  %-15s %s\n  %-15s %s -> %s  %s  %.3f ms  %.2f GFLOP/s  %s\n", s->name,
           xconv_plan_describe(plan), "", xs, yss, xconv_plan_engine(plan), best * 1e3,
           flops / best * 1e-9, verdict);

    /* The next stage's input: this output rescaled into the input dtype. */
    if (si + 1 < DEMO_STAGES) {
        if (prod(stages[si + 1].x, stages[si + 1].rank + 2) != y_count) {
            xconv_plan_destroy(plan);
            xconv_plan_destroy(ref);
            return xconv_cli_fail(XCONV_EXIT_FAILURE, "demo",
                                  "stage '%s' does not chain into the next", s->name);
        }
        requantize(c->out, b->y, c->in, b->x, y_count, c->x_range);
    }
    xconv_plan_destroy(plan);
    xconv_plan_destroy(ref);
    return XCONV_EXIT_OK;
}

int xconv_cmd_demo(int argc, char **argv)
{
    xconv_opt opts[] = {{"threads", true, NULL, false}, {"help", false, NULL, false}};
    int rc = xconv_args_parse(argc, argv, opts, 2, "demo");
    if (rc) return rc;
    if (opts[1].seen) {
        fputs("usage: xconv demo [--threads N]\n"
              "Runs a 1-D audio decoder (conv stem, conv_transpose upsampling x8 and x4,\n"
              "depthwise conv) and a vision tail (grouped conv2d channels-last, conv3d patch\n"
              "embedding) in f32, bf16, f16, f8e4m3->f32, i8->i32, i64, f64 and c64, and checks\n"
              "every stage against the reference engine cpu.ref.\n",
              stdout);
        return XCONV_EXIT_OK;
    }
    int64_t threads = 0;
    if (opts[0].value && (!xconv_args_int(opts[0].value, &threads) || threads < 0 ||
                          threads > 4096))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "demo",
                              "--threads '%s' must be an integer from 0 (all cores) to 4096",
                              opts[0].value);

    /* One set of buffers sized for the largest stage at 16 bytes per element. */
    int64_t max_elems = 0;
    for (int si = 0; si < DEMO_STAGES; si++) {
        int64_t ys[XCONV_MAX_RANK];
        const demo_stage *s = &stages[si];
        xconv_params p = xconv_params_init(s->op, s->rank, s->layout);
        for (int i = 0; i < s->rank; i++) {
            p.stride[i] = s->stride[i];
            p.pad_lo[i] = p.pad_hi[i] = s->pad[i];
        }
        p.groups = s->groups;
        xconv_error err;
        if (xconv_output_shape(&p, s->x, s->w, ys, &err)) return xconv_cli_fail_lib(&err);
        int r = s->rank + 2;
        max_elems = (int64_t)fmax((double)max_elems,
                                  fmax((double)prod(s->x, r), fmax((double)prod(s->w, r),
                                                                   (double)prod(ys, r))));
    }
    size_t bytes = (size_t)max_elems * 16;
    demo_buffers b = {malloc(bytes), malloc(bytes), malloc(bytes), malloc(bytes), malloc(bytes),
                      NULL, 0};
    xconv_context *ctx = NULL;
    xconv_context_options copts = {.threads = (int)threads};
    xconv_error err;
    rc = XCONV_EXIT_OK;
    if (!b.x || !b.w || !b.bias || !b.y || !b.y_ref)
        rc = xconv_cli_fail(XCONV_EXIT_FAILURE, "demo", "out of memory");
    else if (xconv_context_create(&copts, &ctx, &err))
        rc = xconv_cli_fail_lib(&err);

    int checked = 0, failed = 0;
    double t_start = xconv_cli_now();
    if (rc == XCONV_EXIT_OK)
        printf("xconv %s demo: %d threads; every stage is checked against cpu.ref\n",
               xconv_version(), xconv_context_threads(ctx));
    for (int ci = 0; ci < DEMO_CONFIGS && rc == XCONV_EXIT_OK; ci++) {
        const demo_config *c = &configs[ci];
        printf("\n%s -> %s\n", xconv_dtype_name(c->in), xconv_dtype_name(c->out));
        fill_random(c->in, b.x, prod(stages[0].x, stages[0].rank + 2), c->x_range,
                    0xa0d10u + (uint64_t)ci);
        for (int si = 0; si < DEMO_STAGES && rc == XCONV_EXIT_OK; si++) {
            bool ok = false;
            rc = run_stage(ctx, c, ci, si, &b, &ok);
            if (rc == XCONV_EXIT_OK) {
                checked++;
                failed += !ok;
            }
        }
    }
    if (rc == XCONV_EXIT_OK) {
        printf("\ndemo: %d stages checked, %d failed, %.2f s\n", checked, failed,
               xconv_cli_now() - t_start);
        if (failed)
            rc = xconv_cli_fail(XCONV_EXIT_FAILURE, "demo",
                                "%d of %d stages disagree with the reference engine", failed,
                                checked);
    }
    xconv_context_destroy(ctx);
    free(b.x);
    free(b.w);
    free(b.bias);
    free(b.y);
    free(b.y_ref);
    free(b.ws);
    return rc;
}
