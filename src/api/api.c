/*
 * api.c — the public entry points around plans: create (validate, normalize, choose,
 * size), execute, destroy, and the one-shot and helper calls built on them.
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct xconv_plan {
    xconv_canon         canon;
    size_t              align[4];            /* x, w, bias, y: the alignment data must have */
    const xconv_engine *engine;
    xconv_context      *ctx;
    size_t              engine_ws_bytes;
    char                description[256];
    char                kind[40];            /* "conv_transpose, 2-D" for operation names */
    bool                has_span[4];         /* x, w, bias, y: touched byte ranges, for aliasing */
    int64_t             span_lo[4], span_hi[4];
    bool                constant_weights;    /* execute reads w through w_data, not its argument */
    const void         *w_data;
    void               *packed;              /* the engine's prepacked weights, or NULL */
    size_t              packed_bytes;
};

/* Room to align a caller's workspace up to 64 bytes. */
#define WS_ALIGN 64

static void problem_kind(const xconv_params *p, char *buf, size_t size)
{
    if (p && (p->op == XCONV_OP_CONV || p->op == XCONV_OP_CONV_TRANSPOSE) &&
        p->spatial_rank >= 1 && p->spatial_rank <= 3)
        snprintf(buf, size, "%s, %d-D", p->op == XCONV_OP_CONV ? "conv" : "conv_transpose",
                 p->spatial_rank);
    else
        buf[0] = '\0';
}

static void begin_call(xconv_error *err, const char *call, const char *kind)
{
    if (kind && kind[0]) xconv__begin(err, "%s(%s)", call, kind);
    else xconv__begin(err, "%s", call);
}

/* Renames the operation of a filled record, keeping what failed. */
static void begin_rename(xconv_error *err, const char *call, const char *kind)
{
    if (kind && kind[0]) snprintf(err->operation, sizeof err->operation, "%s(%s)", call, kind);
    else snprintf(err->operation, sizeof err->operation, "%s", call);
}

xconv_params xconv_params_init(xconv_op op, int spatial_rank, xconv_layout layout)
{
    xconv_params p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.spatial_rank = spatial_rank;
    p.layout = layout;
    for (int i = 0; i < XCONV_MAX_SPATIAL; i++) p.stride[i] = p.dilation[i] = 1;
    p.groups = 1;
    return p;
}

xconv_tensor xconv_tensor_contiguous(xconv_dtype dtype, int rank, const int64_t *shape, void *data)
{
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.rank = rank;
    if (rank < 0 || rank > XCONV_MAX_RANK || !shape) {
        t.rank = rank < 0 || rank > XCONV_MAX_RANK ? XCONV_MAX_RANK + 1 : rank;
        return t;
    }
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    t.data = data;
    return t;
}

xconv_status xconv_output_shape(const xconv_params *params, const int64_t *x_shape,
                                const int64_t *w_shape, int64_t *y_shape, xconv_error *err)
{
    char kind[40];
    problem_kind(params, kind, sizeof kind);
    begin_call(err, "xconv_output_shape", kind);
    return xconv__validate_shapes(params, x_shape, w_shape, y_shape, err);
}

static void record_span(xconv_plan *plan, int i, const xconv_tensor *t)
{
    plan->has_span[i] = t && xconv__tensor_span(t, &plan->span_lo[i], &plan->span_hi[i]);
}

xconv_status xconv_plan_create(xconv_context *ctx, const xconv_params *params,
                               const xconv_tensor *x, const xconv_tensor *w,
                               const xconv_tensor *bias, const xconv_tensor *y,
                               const xconv_plan_options *options, xconv_plan **plan,
                               xconv_error *err)
{
    char kind[40];
    problem_kind(params, kind, sizeof kind);
    begin_call(err, "xconv_plan_create", kind);
    XCONV_CHECK(err, plan != NULL, INVALID_ARGUMENT, "plan", "plan (the output pointer) is null");
    xconv_canon canon;
    XCONV_TRY(xconv__validate_problem(params, x, w, bias, y, &canon, err));
    canon.threads = xconv_context_threads(ctx ? ctx : xconv__default_context());
    canon.allow_reduced = options && options->allow_tf32;
    canon.fp8_fast = options && options->allow_fp8_fast_accum;
    canon.constant_weights = options && options->constant_weights;
    const xconv_engine *engine;
    XCONV_TRY(xconv__select_engine(&canon, options ? options->engine : NULL, &engine, err));

    const bool constant = canon.constant_weights;
    const size_t packed_bytes = constant && engine->prepack ? engine->prepack_bytes(&canon) : 0;
    canon.prepacked = packed_bytes > 0;

    void *packed = packed_bytes ? aligned_alloc(64, (packed_bytes + 63) & ~(size_t)63) : NULL;
    XCONV_CHECK(err, packed != NULL || !packed_bytes, OUT_OF_MEMORY, "options.constant_weights",
                "cannot allocate %zu bytes of packed weights", packed_bytes);
    xconv_plan *p = calloc(1, sizeof *p);
    if (!p) free(packed);
    XCONV_CHECK(err, p != NULL, OUT_OF_MEMORY, NULL, "cannot allocate a plan");
    p->packed = packed;
    p->packed_bytes = packed_bytes;
    p->constant_weights = constant;
    p->w_data = w->data;
    p->canon = canon;
    p->engine = engine;
    p->ctx = ctx ? ctx : xconv__default_context();
    p->engine_ws_bytes = engine->workspace_bytes(&canon);
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    xconv__describe(&canon, p->description, sizeof p->description);
    p->align[0] = xconv__dtype_align(x->dtype);
    p->align[1] = xconv__dtype_align(w->dtype);
    p->align[2] = bias ? xconv__dtype_align(bias->dtype) : 1;
    p->align[3] = xconv__dtype_align(y->dtype);
    record_span(p, 0, x);
    record_span(p, 1, w);
    record_span(p, 2, bias);
    record_span(p, 3, y);
    if (p->packed) engine->prepack(&p->canon, p->ctx, w->data, p->packed);
    *plan = p;
    return XCONV_STATUS_OK;
}

size_t xconv_plan_workspace_size(const xconv_plan *plan)
{
    if (!plan || plan->engine_ws_bytes == 0) return 0;
    return plan->engine_ws_bytes + WS_ALIGN;
}

const char *xconv_plan_engine(const xconv_plan *plan) { return plan ? plan->engine->name : "none"; }

const char *xconv_plan_describe(const xconv_plan *plan) { return plan ? plan->description : ""; }

size_t xconv_plan_weights_bytes(const xconv_plan *plan) { return plan ? plan->packed_bytes : 0; }

void xconv_plan_destroy(xconv_plan *plan)
{
    if (plan && plan->packed && plan->engine->release)
        plan->engine->release(&plan->canon, plan->packed);
    if (plan) free(plan->packed);
    free(plan);
}

static bool spans_overlap(const xconv_plan *plan, int a, const void *pa, int b, const void *pb)
{
    if (!plan->has_span[a] || !plan->has_span[b] || !pa || !pb) return false;
    uintptr_t a0 = (uintptr_t)pa + (uintptr_t)plan->span_lo[a];
    uintptr_t a1 = (uintptr_t)pa + (uintptr_t)plan->span_hi[a];
    uintptr_t b0 = (uintptr_t)pb + (uintptr_t)plan->span_lo[b];
    uintptr_t b1 = (uintptr_t)pb + (uintptr_t)plan->span_hi[b];
    return a0 < b1 && b0 < a1;
}

xconv_status xconv_plan_execute(const xconv_plan *plan, const void *x, const void *w,
                                const void *bias, void *y, void *workspace,
                                size_t workspace_bytes, xconv_error *err)
{
    begin_call(err, "xconv_plan_execute", plan ? plan->kind : NULL);
    XCONV_CHECK(err, plan != NULL, INVALID_ARGUMENT, "plan", "plan is null");
    const xconv_canon *c = &plan->canon;
    if (plan->constant_weights) w = plan->w_data;
    XCONV_CHECK(err, x != NULL || !plan->has_span[0], INVALID_ARGUMENT, "x", "x is null");
    XCONV_CHECK(err, w != NULL || !plan->has_span[1], INVALID_ARGUMENT, "w", "w is null");
    XCONV_CHECK(err, y != NULL || !plan->has_span[3], INVALID_ARGUMENT, "y", "y is null");
    XCONV_CHECK(err, (bias != NULL) == c->has_bias || (c->has_bias && !plan->has_span[2]),
                INVALID_ARGUMENT, "bias",
                c->has_bias ? "bias is null but the plan was created with a bias"
                            : "bias is given but the plan was created without one");
    const void *ptrs[4] = {x, w, bias, y};
    static const char *const names[4] = {"x", "w", "bias", "y"};
    for (int i = 0; i < 4; i++)
        XCONV_CHECK(err, (uintptr_t)ptrs[i] % plan->align[i] == 0, INVALID_ARGUMENT, names[i],
                    "%s %p is not aligned to %zu bytes", names[i], ptrs[i], plan->align[i]);
    XCONV_CHECK(err, !spans_overlap(plan, 3, y, 0, x), INVALID_ARGUMENT, "y", "y overlaps x");
    XCONV_CHECK(err, !spans_overlap(plan, 3, y, 1, w), INVALID_ARGUMENT, "y", "y overlaps w");
    XCONV_CHECK(err, !spans_overlap(plan, 3, y, 2, bias), INVALID_ARGUMENT, "y", "y overlaps bias");
    const size_t need = xconv_plan_workspace_size(plan);
    if (workspace)
        XCONV_CHECK(err, workspace_bytes >= need, WORKSPACE_TOO_SMALL, "workspace_bytes",
                    "workspace_bytes %zu is less than the %zu bytes the plan needs",
                    workspace_bytes, need);
    if (!plan->has_span[3]) return XCONV_STATUS_OK; /* N = 0: nothing to write */

    void *owned = NULL;
#ifdef XCONV_HAVE_CUDA
    const bool on_cuda = c->device == XCONV_DEVICE_CUDA;
#else
    const bool on_cuda = false;
#endif
    if (!workspace && need) {
#ifdef XCONV_HAVE_CUDA
        owned = on_cuda ? xconv__cuda_workspace_alloc(plan->ctx, need) : malloc(need);
#else
        owned = malloc(need);
#endif
        XCONV_CHECK(err, owned != NULL, OUT_OF_MEMORY, "workspace",
                    "cannot allocate %zu bytes of workspace", need);
        workspace = owned;
    }
    char *aligned = workspace;
    if (aligned) aligned += (WS_ALIGN - (uintptr_t)aligned % WS_ALIGN) % WS_ALIGN;
    xconv_exec e = {
        .p = c, .ctx = plan->ctx, .x = x, .w = w, .bias = c->has_bias ? bias : NULL, .y = y,
        .workspace = aligned, .workspace_bytes = plan->engine_ws_bytes, .packed = plan->packed,
    };
    xconv_status s = plan->engine->run(&e, err);
#ifdef XCONV_HAVE_CUDA
    if (on_cuda) xconv__cuda_workspace_free(plan->ctx, owned);
    else free(owned);
#else
    (void)on_cuda;
    free(owned);
#endif
    return s;
}

xconv_status xconv_conv(xconv_context *ctx, const xconv_params *params, const xconv_tensor *x,
                        const xconv_tensor *w, const xconv_tensor *bias, const xconv_tensor *y,
                        const xconv_plan_options *options, const char **engine_out,
                        xconv_error *err)
{
    xconv_plan *plan = NULL;
    char kind[40];
    problem_kind(params, kind, sizeof kind);
    xconv_status cs = xconv_plan_create(ctx, params, x, w, bias, y, options, &plan, err);
    if (cs != XCONV_STATUS_OK) {
        if (err) begin_rename(err, "xconv_conv", kind);
        return cs;
    }
    if (engine_out) *engine_out = plan->engine->name;
    xconv_status s = xconv_plan_execute(plan, x->data, w->data, bias ? bias->data : NULL, y->data,
                                        NULL, 0, err);
    if (s != XCONV_STATUS_OK && err) {
        /* Name the call the user made, keeping the description of what failed. */
        begin_rename(err, "xconv_conv", kind);
    } else if (s == XCONV_STATUS_OK) {
        begin_call(err, "xconv_conv", kind);
    }
    xconv_plan_destroy(plan);
    return s;
}

xconv_status xconv_engine_supports(const char *name, const xconv_params *params,
                                   const xconv_tensor *x, const xconv_tensor *w,
                                   const xconv_tensor *bias, const xconv_tensor *y,
                                   xconv_error *err)
{
    char kind[40];
    problem_kind(params, kind, sizeof kind);
    begin_call(err, "xconv_engine_supports", kind);
    xconv_canon canon;
    XCONV_TRY(xconv__validate_problem(params, x, w, bias, y, &canon, err));
    const xconv_engine *e;
    return xconv__select_engine(&canon, name && name[0] ? name : "(none)", &e, err);
}
