/*
 * depthwise.c — the engine "cpu.depthwise": conv with groups == Cin (one input channel per
 * group, any channel multiplier Cout/Cin), a memory-bound stencil rather than a GEMM.
 *
 *   y[n, co, j] = bias[co] + sum_k x[n, co / mult, j*s + k*t - lo] * w[co, k]
 *
 * Two loop orders, chosen by where the channels are:
 *   channels contiguous in x and y (channels-last): per output pixel, vector over channels;
 *   otherwise: per (n, channel) plane, vector along the innermost spatial dim.
 * Weights and bias are packed once per execute into the compute type: wk [K, Cout], bp [Cout].
 * Assumes: a validated canonical conv on the CPU with cin_g == 1.
 */
#include "core/internal.h"

#include <string.h>

/* The stencils are plain loops the compiler vectorizes: build them for AVX-512 and AVX2 as
 * well as the baseline, picked at load time (ifunc), since the library's baseline is SSE2. */
#if defined(__x86_64__) && defined(__linux__) && (defined(__clang__) || defined(__GNUC__))
#define XCONV_DW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define XCONV_DW_CLONES
#endif

#define XCONV_TEMPLATE "cpu/engines/depthwise.tmpl.h"
#include "cpu/instantiate_ct.h"

static bool channels_inner(const xconv_canon *p) { return p->x_sc == 1 && p->y_sc == 1; }

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Scratch of one chunk, in compute-type elements: acc then tmp. */
static void scratch_elems(const xconv_canon *p, int64_t *acc, int64_t *tmp)
{
    if (channels_inner(p)) {
        *acc = p->y_size[2] * p->cout;
        *tmp = p->x_size[2] * p->cin;
    } else {
        *acc = p->y_size[2];
        *tmp = p->x_size[2] + p->pad_lo[2] + p->pad_hi[2];
    }
}

typedef struct dw_layout { size_t wk, bp, slots, slot_bytes, total; } dw_layout;

static dw_layout dw_layout_of(const xconv_canon *p)
{
    const size_t cs = xconv__ctype_size(p->ct);
    int64_t acc, tmp;
    scratch_elems(p, &acc, &tmp);
    dw_layout l;
    l.wk = 0;
    l.bp = align64(cs * (size_t)(xconv__prod3(p->k_size) * p->cout));
    l.slots = align64(l.bp + cs * (size_t)p->cout);
    l.slot_bytes = align64(cs * (size_t)acc) + align64(cs * (size_t)tmp);
    if (l.slot_bytes < align64(cs * (size_t)p->groups)) l.slot_bytes = align64(cs * (size_t)p->groups);
    l.total = l.slots + l.slot_bytes * (size_t)(p->threads > 0 ? p->threads : 1);
    return l;
}

static bool dw_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) return *why_not = "cpu.depthwise runs on cpu tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cpu.depthwise runs conv only", false;
    if (p->cin_g != 1) return *why_not = "cpu.depthwise needs groups == input channels", false;
    return true;
}

static size_t dw_workspace_bytes(const xconv_canon *p) { return dw_layout_of(p).total; }

/* Memory-bound: the cost is mostly the bytes it streams, far below a GEMM's for this shape. */
static double dw_cost(const xconv_canon *p) { return 0.25 * p->flops + 1e3; }

typedef struct dw_task {
    const xconv_exec *e;
    const dw_layout  *l;
    const void       *wk, *bp;
} dw_task;

static void dw_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const dw_task *t = arg;
    const xconv_canon *p = t->e->p;
    const size_t cs = xconv__ctype_size(p->ct);
    int64_t acc_n, tmp_n;
    scratch_elems(p, &acc_n, &tmp_n);
    char *acc = (char *)t->e->workspace + t->l->slots + t->l->slot_bytes * (size_t)slot;
    char *tmp = acc + align64(cs * (size_t)acc_n);
    const bool pix = channels_inner(p);
    switch (p->ct) {
#define DW_CASE(CT, name, type)                                                              \
    case CT:                                                                                 \
        if (pix) dw_pixels_##name(t->e, t->wk, t->bp, (type *)acc, (type *)tmp, begin, end); \
        else dw_planes_##name(t->e, t->wk, t->bp, (type *)acc, (type *)tmp, begin, end);     \
        break;
    DW_CASE(XCONV_CT_U32, u32, uint32_t)
    DW_CASE(XCONV_CT_U64, u64, uint64_t)
    DW_CASE(XCONV_CT_F32, f32, float)
    DW_CASE(XCONV_CT_F64, f64, double)
    DW_CASE(XCONV_CT_C64, c64, xconv_c64)
    DW_CASE(XCONV_CT_C128, c128, xconv_c128)
#undef DW_CASE
    default: break;
    }
}

static xconv_status dw_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const dw_layout l = dw_layout_of(p);
    char *ws = e->workspace;
    const size_t cs = xconv__ctype_size(p->ct);
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype);
    /* wk[k, co] = w[g = co / mult, o = co % mult, 0, k]: one strided row over the groups per
     * (k, o), gathered through the first thread's scratch when mult > 1 */
    char *row = ws + l.slots;
    int64_t kidx = 0;
    for (int64_t k0 = 0; k0 < p->k_size[0]; k0++)
        for (int64_t k1 = 0; k1 < p->k_size[1]; k1++)
            for (int64_t k2 = 0; k2 < p->k_size[2]; k2++, kidx++)
                for (int64_t o = 0; o < p->cout_g; o++) {
                    const int64_t el = p->w_off + o * p->w_so + k0 * p->w_sk[0] + k1 * p->w_sk[1] +
                                       k2 * p->w_sk[2];
                    char *dst = ws + l.wk + cs * (size_t)(kidx * p->cout);
                    if (p->cout_g == 1) {
                        xconv__load_row(p->ct, p->x_dtype, (const char *)e->w + el * xes, p->w_sg,
                                        dst, p->groups);
                        continue;
                    }
                    xconv__load_row(p->ct, p->x_dtype, (const char *)e->w + el * xes, p->w_sg, row,
                                    p->groups);
                    for (int64_t g = 0; g < p->groups; g++)
                        memcpy(dst + cs * (size_t)(g * p->cout_g + o), row + cs * (size_t)g, cs);
                }
    if (p->has_bias)
        xconv__load_row(p->ct, p->bias_dtype,
                        (const char *)e->bias + p->b_off * (int64_t)xconv_dtype_size(p->bias_dtype),
                        p->b_s, ws + l.bp, p->cout);
    dw_task t = {e, &l, ws + l.wk, p->has_bias ? ws + l.bp : NULL};
    const int64_t count = channels_inner(p) ? p->n * p->y_size[0] * p->y_size[1] : p->n * p->cout;
    xconv__parallel_for_slot(e->ctx, count, dw_range, &t);
    return XCONV_STATUS_OK;
}

const xconv_engine xconv__engine_cpu_depthwise = {
    .name = "cpu.depthwise",
    .device = XCONV_DEVICE_CPU,
    .supports = dw_supports,
    .workspace_bytes = dw_workspace_bytes,
    .cost = dw_cost,
    .run = dw_run,
};
