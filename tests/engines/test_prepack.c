/*
 * test_prepack.c — plans created with constant_weights (xconv_plan_options), against cpu.ref
 * run the ordinary way:
 *
 *   - cpu.igemm packs the weights once at creation: xconv_plan_weights_bytes > 0, a workspace
 *     smaller than the same plan's without the option (with the floor at 0, below: or both
 *     within the budget, which may hold the plain plan to fewer threads), and every execute (w argument NULL,
 *     then a pointer to other values, which must not be read) equals cpu.ref bit for bit
 *     (integers: random bits, wrapping; floats and complex: small integers, exact sums);
 *   - random problems of both ops, ranks 1-3, both layouts, groups, padding, dilation,
 *     bias, channel counts around the kernels' panel widths (VNNI's groups of four), every
 *     compute type, 1-3 threads; a fifth of them 1x1 with stride 1 and no padding (the
 *     plain-GEMM tiles);
 *   - an engine that reads w in place (cpu.ref) keeps the pointer given at creation;
 *   - execute twice on new x (the packed weights are reused, not consumed);
 *   - the plain plans too, and again with cpu.igemm's workspace floor at 0, which makes
 *     plans whose packed weights exceed 10% of x + w + y pack them panel by panel, per
 *     thread, inside gemm (the lazy path), on as many threads as the budget has room for
 *     (runners in slots of their own);
 *   - the same for cpu.amx (where the CPU and OS offer AMX) and cpu.avx512bf16 (where the CPU
 *     has AVX512-BF16) over the dtypes they serve; their workspace may stay the same size, as
 *     it also holds cpu.igemm's for the f32 fallback.
 */
#include "common/ref_conv.h"
#include "cpu/engines/amx.h"
#include "cpu/ukernels/igemm.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32},   {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U32},    {XCONV_DTYPE_I8, XCONV_DTYPE_I8},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U8},     {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},   {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_C64, XCONV_DTYPE_C64},   {XCONV_DTYPE_C128, XCONV_DTYPE_C128},
    {XCONV_DTYPE_I64, XCONV_DTYPE_I64},   {XCONV_DTYPE_U16, XCONV_DTYPE_U64},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32}, {XCONV_DTYPE_I32, XCONV_DTYPE_I32},
};
#define NPAIRS (int)(sizeof PAIRS / sizeof PAIRS[0])

static tu_problem random_problem(tu_rng *r, int trial, const xconv_dtype (*pairs)[2], int npairs)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = trial % 4 == 3 ? XCONV_OP_CONV_TRANSPOSE : XCONV_OP_CONV;
    p.d = 1 + (int)tu_int(r, 0, 2);
    p.layout = tu_int(r, 0, 2) ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
    p.groups = tu_int(r, 0, 3) == 0 ? tu_int(r, 2, 3) : 1;
    /* channels around the 4-value VNNI groups and the 16/32/64-wide panels */
    static const int64_t CH[] = {1, 3, 4, 5, 15, 16, 17, 31, 33, 63, 64, 65, 70};
    p.cin = p.groups * CH[tu_int(r, 0, 12)];
    p.cout = p.groups * CH[tu_int(r, 0, 12)];
    p.n = tu_int(r, 1, 2);
    for (int i = 0; i < p.d; i++) {
        p.x[i] = tu_int(r, 1, p.d == 3 ? 5 : 9);
        p.k[i] = tu_int(r, 1, 3);
        p.stride[i] = tu_int(r, 1, 2);
        p.dil[i] = tu_int(r, 1, 2);
        p.lo[i] = tu_int(r, 0, 2);
        p.hi[i] = tu_int(r, 0, 2);
        if (p.op == XCONV_OP_CONV_TRANSPOSE && p.stride[i] > 1) p.opad[i] = tu_int(r, 0, 1);
    }
    if (trial % 5 == 4) { /* 1x1, stride 1, no padding: cpu.igemm's plain-GEMM tiles */
        p.op = XCONV_OP_CONV;
        for (int i = 0; i < p.d; i++) {
            p.k[i] = p.stride[i] = p.dil[i] = 1;
            p.lo[i] = p.hi[i] = p.opad[i] = 0;
            p.x[i] = tu_int(r, 1, p.d == 3 ? 6 : 12);
        }
    }
    p.has_bias = tu_int(r, 0, 1);
    const int pair = (int)tu_int(r, 0, npairs - 1);
    p.xdt = pairs[pair][0];
    p.ydt = pairs[pair][1];
    tu_problem_finish(&p);
    return p;
}

static bool valid_shape(const tu_problem *p)
{
    for (int i = 0; i < p->d; i++)
        if (p->y[i] < 1) return false;
    return true;
}

static tu_val gen_of(tu_rng *r, xconv_dtype dt)
{
    return tu_is_int(dt) ? tu_gen_wide(r, dt) : tu_gen_small(r, dt);
}

/* AMX's dtypes (bf16 y: small integers sum exactly and round to themselves). */
static const xconv_dtype AMX_PAIRS[][2] = {
    {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},   {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32}, {XCONV_DTYPE_F16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I32},     {XCONV_DTYPE_U8, XCONV_DTYPE_U32},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I8},      {XCONV_DTYPE_U8, XCONV_DTYPE_U8},
};
#define AMX_FLOAT_PAIRS 4 /* the float ones, first: cpu.avx512bf16's */

static void test_random(uint64_t seed, const char *engine, const xconv_dtype (*pairs)[2], int npairs,
                        int min_packed)
{
    tu_rng r = {seed};
    int packed_plans = 0;
    const bool amx = strcmp(engine, "cpu.amx") == 0 || strcmp(engine, "cpu.avx512bf16") == 0;
    for (int trial = 0; trial < 400; trial++) {
        tu_problem p = random_problem(&r, trial, pairs, npairs);
        if (!valid_shape(&p)) continue;
        int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
        tu_shapes(&p, xs, ws, bs, ys);
        const xconv_dtype bdt = p.ydt;
        xconv_tensor x = tu_alloc(p.xdt, p.d + 2, xs, 0), w = tu_alloc(p.xdt, p.d + 2, ws, 0);
        xconv_tensor w2 = tu_alloc(p.xdt, p.d + 2, ws, 0), b = tu_alloc(bdt, 1, bs, 0);
        xconv_tensor y = tu_alloc(p.ydt, p.d + 2, ys, 0xA5), yr = tu_alloc(p.ydt, p.d + 2, ys, 0x5A);
        tu_fill(&x, &r, gen_of), tu_fill(&w, &r, gen_of), tu_fill(&w2, &r, gen_of);
        tu_fill(&b, &r, gen_of);
        char what[256];
        tu_describe(&p, what, sizeof what);
        xconv_params q = tu_params(&p);
        xconv_error err;
        const char *used;
        xconv_plan_options ref = {.engine = "cpu.ref"};
        xconv_status st = xconv_conv(NULL, &q, &x, &w, p.has_bias ? &b : NULL, &yr, &ref, &used, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s: cpu.ref: %s", what, err.description);

        xconv_context *ctx = CTX[1 + trial % 3];
        xconv_plan_options plain = {.engine = engine}, cw = plain;
        cw.constant_weights = true;
        xconv_plan *pp = NULL, *pc = NULL;
        st = xconv_plan_create(ctx, &q, &x, &w, p.has_bias ? &b : NULL, &y, &plain, &pp, &err);
        if (amx && st == XCONV_STATUS_UNSUPPORTED) goto next; /* e.g. kernels of > 64 taps */
        XT_CHECK(st == XCONV_STATUS_OK, "%s: plain plan [%s]: %s", what, engine, err.description);
        st = xconv_plan_create(ctx, &q, &x, &w, p.has_bias ? &b : NULL, &y, &cw, &pc, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "%s: constant plan: %s", what, err.description);
        if (!pp || !pc) goto next;
        {
            const size_t wb = xconv_plan_weights_bytes(pc);
            packed_plans += wb > 0;
            XT_CHECK(wb > 0 && xconv_plan_weights_bytes(pp) == 0, "%s: weights bytes %zu / %zu",
                     what, wb, xconv_plan_weights_bytes(pp));
            memset(y.data, 0xA5, y.buffer_bytes);
            st = xconv_plan_execute(pp, x.data, w.data, p.has_bias ? b.data : NULL, y.data, NULL, 0, &err);
            XT_CHECK(st == XCONV_STATUS_OK && memcmp(y.data, yr.data, y.buffer_bytes) == 0,
                     "%s: plain plan (threads %d): %s", what, 1 + trial % 3,
                     st ? err.description : "y differs from cpu.ref");
            /* with the floor at 0 the budget is 10% of x + w + y, and a plain plan held to it
             * may run on fewer threads than the constant one and so need less; with the
             * default floor the constant plan must always need less */
            double budget = 0.1 * ((double)tu_numel(x.rank, x.shape) * (double)xconv_dtype_size(x.dtype) +
                                   (double)tu_numel(w.rank, w.shape) * (double)xconv_dtype_size(w.dtype) +
                                   (double)tu_numel(y.rank, y.shape) * (double)xconv_dtype_size(y.dtype));
            const size_t wsc = xconv_plan_workspace_size(pc), wsp = xconv_plan_workspace_size(pp);
            const bool squeezed = xconv__igemm_budget_floor == 0 && (double)wsc <= budget && (double)wsp <= budget;
            XT_CHECK((amx ? wsc <= wsp : wsc < wsp) || squeezed,
                     "%s [%s]: workspace %zu with constant weights, %zu without (budget %.0f)", what,
                     engine, wsc, wsp, budget);
            /* w argument NULL, then other values that must not be read, then new x */
            for (int run = 0; run < 3; run++) {
                const void *warg = run == 0 ? NULL : w2.data;
                if (run == 2) {
                    tu_fill(&x, &r, gen_of);
                    st = xconv_conv(NULL, &q, &x, &w, p.has_bias ? &b : NULL, &yr, &ref, &used, &err);
                    XT_CHECK(st == XCONV_STATUS_OK, "%s: cpu.ref: %s", what, err.description);
                }
                memset(y.data, 0xA5, y.buffer_bytes);
                st = xconv_plan_execute(pc, x.data, warg, p.has_bias ? b.data : NULL, y.data, NULL, 0, &err);
                XT_CHECK(st == XCONV_STATUS_OK && memcmp(y.data, yr.data, y.buffer_bytes) == 0,
                         "%s: run %d (threads %d): %s", what, run, 1 + trial % 3,
                         st ? err.description : "y differs from cpu.ref");
            }
        }
    next:
        xconv_plan_destroy(pp), xconv_plan_destroy(pc);
        free(x.data), free(w.data), free(w2.data), free(b.data), free(y.data), free(yr.data);
    }
    XT_CHECK(packed_plans > min_packed, "%s: only %d plans packed their weights", engine, packed_plans);
}

/* An engine without prepacking reads w through the pointer given at creation. */
static void test_in_place_engine(void)
{
    const int64_t xs[3] = {1, 2, 4}, ws[3] = {1, 2, 2}, ys[3] = {1, 1, 3};
    int32_t xb[8] = {1, 2, 3, 4, 5, 6, 7, 8}, wb[4] = {1, -1, 2, 3}, other[4] = {9, 9, 9, 9};
    int32_t yb[3] = {0, 0, 0};
    xconv_tensor x = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, xs, xb);
    xconv_tensor w = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, ws, wb);
    xconv_tensor y = xconv_tensor_contiguous(XCONV_DTYPE_I32, 3, ys, yb);
    xconv_params q = xconv_params_init(XCONV_OP_CONV, 1, XCONV_LAYOUT_CHANNELS_FIRST);
    xconv_plan_options o = {.engine = "cpu.ref", .constant_weights = true};
    xconv_plan *plan = NULL;
    xconv_error err;
    xconv_status st = xconv_plan_create(NULL, &q, &x, &w, NULL, &y, &o, &plan, &err);
    XT_CHECK(st == XCONV_STATUS_OK && xconv_plan_weights_bytes(plan) == 0, "cpu.ref plan: %s",
             err.description);
    if (!plan) return;
    /* y[j] = x0[j] - x0[j+1] + 2 x1[j] + 3 x1[j+1], by hand */
    const int32_t want[3] = {1 - 2 + 10 + 18, 2 - 3 + 12 + 21, 3 - 4 + 14 + 24};
    st = xconv_plan_execute(plan, xb, other, NULL, yb, NULL, 0, &err);
    XT_CHECK(st == XCONV_STATUS_OK && memcmp(yb, want, sizeof want) == 0,
             "cpu.ref with constant weights: %d %d %d", yb[0], yb[1], yb[2]);
    xconv_plan_destroy(plan);
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    test_random(0x9e3779b97f4a7c15ull, "cpu.igemm", PAIRS, NPAIRS, 250);
    const int64_t floor = xconv__igemm_budget_floor;
    xconv__igemm_budget_floor = 0;
    test_random(0x2545f4914f6cdd1dull, "cpu.igemm", PAIRS, NPAIRS, 250);
    xconv__igemm_budget_floor = floor;
    if (xconv__amx_available())
        test_random(0x6a09e667f3bcc909ull, "cpu.amx", AMX_PAIRS,
                    (int)(sizeof AMX_PAIRS / sizeof AMX_PAIRS[0]), 250);
    else
        printf("test_prepack: no AMX here: cpu.amx's constant weights not checked\n");
    if (xconv__amx_vec_available())
        test_random(0x510e527fade682d1ull, "cpu.avx512bf16", AMX_PAIRS, AMX_FLOAT_PAIRS, 100);
    else
        printf("test_prepack: no AVX512-BF16 here: cpu.avx512bf16's constant weights not checked\n");
    test_in_place_engine();
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_prepack");
}
