/*
 * ref.c — the reference engine "cpu.ref": the formulas of DESIGN.md §1 evaluated directly,
 * for every valid CPU problem. It is the fallback the planner always has and the oracle
 * the other engines are tested against, so it favours plainness over speed.
 *
 *   x [N, Cin, X] -> xp (compute type, dense), w -> wp [G, cout_g, cin_g, K], bias -> bp,
 *   direct sum per output element into yp [N, Cout, Y] (compute type), stored to y.
 * Assumes: a validated canonical problem on the CPU.
 */
#include "core/internal.h"

#include <string.h>

#define XCONV_TEMPLATE "cpu/engines/ref.tmpl.h"
#include "cpu/instantiate_ct.h"

/* Workspace layout, each part 64-byte aligned: xp, wp, bp, yp. */
typedef struct ref_layout { size_t xp, wp, bp, yp, total; } ref_layout;

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static ref_layout ref_layout_of(const xconv_canon *p)
{
    const size_t cs = xconv__ctype_size(p->ct);
    ref_layout l;
    l.xp = 0;
    l.wp = align64(l.xp + cs * (size_t)(p->n * p->cin * xconv__prod3(p->x_size)));
    l.bp = align64(l.wp + cs * (size_t)(p->cout * p->cin_g * xconv__prod3(p->k_size)));
    l.yp = align64(l.bp + cs * (size_t)(p->has_bias ? p->cout : 0));
    l.total = align64(l.yp + cs * (size_t)(p->n * p->cout * xconv__prod3(p->y_size)));
    return l;
}

static bool ref_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) {
        *why_not = "cpu.ref runs on cpu tensors only";
        return false;
    }
    return true;
}

static size_t ref_workspace_bytes(const xconv_canon *p) { return ref_layout_of(p).total; }

static double ref_cost(const xconv_canon *p) { return 8.0 * p->flops + 1e4; }

/* Packs x (or any activation-shaped view) into dense [N, C, S0, S1, S2] compute type. */
static void pack_activation(const xconv_canon *p, const void *base, int64_t off, int64_t sn,
                            int64_t sc, const int64_t ss[3], int64_t nn, int64_t cc,
                            const int64_t size[3], char *dst)
{
    const size_t es = xconv_dtype_size(p->x_dtype), cs = xconv__ctype_size(p->ct);
    for (int64_t n = 0; n < nn; n++)
        for (int64_t c = 0; c < cc; c++)
            for (int64_t a = 0; a < size[0]; a++)
                for (int64_t b = 0; b < size[1]; b++) {
                    int64_t e = off + n * sn + c * sc + a * ss[0] + b * ss[1];
                    xconv__load_row(p->ct, p->x_dtype, (const char *)base + e * (int64_t)es, ss[2],
                                    dst, size[2]);
                    dst += cs * (size_t)size[2];
                }
}

typedef struct ref_task {
    const xconv_canon *p;
    const void *xp, *wp, *bp;
    void *yp;
} ref_task;

static void ref_range(void *arg, int64_t begin, int64_t end)
{
    const ref_task *t = arg;
    switch (t->p->ct) {
    case XCONV_CT_U32: ref_planes_u32(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    case XCONV_CT_U64: ref_planes_u64(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    case XCONV_CT_F32: ref_planes_f32(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    case XCONV_CT_F64: ref_planes_f64(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    case XCONV_CT_C64: ref_planes_c64(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    case XCONV_CT_C128: ref_planes_c128(t->p, t->xp, t->wp, t->bp, t->yp, begin, end); break;
    default: break;
    }
}

static xconv_status ref_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const ref_layout l = ref_layout_of(p);
    char *ws = e->workspace;
    const size_t cs = xconv__ctype_size(p->ct);
    const size_t xes = xconv_dtype_size(p->x_dtype);

    pack_activation(p, e->x, p->x_off, p->x_sn, p->x_sc, p->x_ss, p->n, p->cin, p->x_size,
                    ws + l.xp);
    char *wdst = ws + l.wp;
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t o = 0; o < p->cout_g; o++)
            for (int64_t i = 0; i < p->cin_g; i++)
                for (int64_t a = 0; a < p->k_size[0]; a++)
                    for (int64_t b = 0; b < p->k_size[1]; b++) {
                        int64_t el = p->w_off + g * p->w_sg + o * p->w_so + i * p->w_si +
                                     a * p->w_sk[0] + b * p->w_sk[1];
                        xconv__load_row(p->ct, p->x_dtype, (const char *)e->w + el * (int64_t)xes,
                                        p->w_sk[2], wdst, p->k_size[2]);
                        wdst += cs * (size_t)p->k_size[2];
                    }
    if (p->has_bias)
        xconv__load_row(p->ct, p->bias_dtype,
                        (const char *)e->bias + p->b_off * (int64_t)xconv_dtype_size(p->bias_dtype),
                        p->b_s, ws + l.bp, p->cout);

    ref_task t = {p, ws + l.xp, ws + l.wp, p->has_bias ? ws + l.bp : NULL, ws + l.yp};
    xconv__parallel_for(e->ctx, p->n * p->cout, ref_range, &t);

    const size_t yes = xconv_dtype_size(p->y_dtype);
    const char *src = ws + l.yp;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->cout; c++)
            for (int64_t a = 0; a < p->y_size[0]; a++)
                for (int64_t b = 0; b < p->y_size[1]; b++) {
                    int64_t el = p->y_off + n * p->y_sn + c * p->y_sc + a * p->y_ss[0] + b * p->y_ss[1];
                    xconv__store_row(p->ct, p->y_dtype, src, (char *)e->y + el * (int64_t)yes,
                                     p->y_ss[2], p->y_size[2]);
                    src += cs * (size_t)p->y_size[2];
                }
    return XCONV_STATUS_OK;
}

const xconv_engine xconv__engine_cpu_ref = {
    .name = "cpu.ref",
    .device = XCONV_DEVICE_CPU,
    .supports = ref_supports,
    .workspace_bytes = ref_workspace_bytes,
    .cost = ref_cost,
    .run = ref_run,
};
