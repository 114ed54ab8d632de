/*
 * depthwise.c — the engine "cpu.depthwise": conv with groups == Cin (one input channel per
 * group, any channel multiplier Cout/Cin), a memory-bound stencil rather than a GEMM.
 *
 *   y[n, co, j] = bias[co] + sum_k x[n, co / mult, j*s + k*t - lo] * w[co, k]
 *
 * Three paths, chosen per plan:
 *   fast:   channels-last on AVX-512 with multiplier 1 and the dtypes of depthwise.h:
 *           register-blocked tiles reading x and writing y in their storage dtypes
 *           (depthwise_avx512*.c); weights packed [channel block][K][one or two zmm];
 *   pixels: channels nearer than dim 2 otherwise: vector over channels (depthwise.tmpl.h);
 *   planes: channels-first: per (n, channel) plane, vector along dim 2.
 * The portable paths pack weights wk [K, Cout] and bias bp [Cout] in the compute type, or,
 * when that would make the workspace too large, read w per use. Work items are output rows
 * (segments of them along dim 2, and channel chunks for the pixels path), split statically
 * over threads; every output is summed by one item in a fixed order.
 * Assumes: a validated canonical conv on the CPU with cin_g == 1.
 */
#include "cpu/engines/depthwise.h"

#include <stdlib.h>
#include <string.h>

/* The portable stencils are plain loops the compiler vectorizes: build them for AVX-512 and
 * AVX2 as well as the baseline, picked at load time (ifunc), since the library's baseline is
 * SSE2. */
#if defined(__x86_64__) && defined(__linux__) && (defined(__clang__) || defined(__GNUC__))
#define XCONV_DW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define XCONV_DW_CLONES
#endif

#define DW_ACC_BYTES    (16 << 10)   /* portable paths: accumulators of one item */
#define DW_TMP_BYTES    (64 << 10)   /* converted x of one item */
#define DW_MAX_CC       256          /* channels per item of the pixels path */
#define DW_MAX_SEG      1024         /* outputs along dim 2 per item of the planes path */
#define DW_WS_FLOOR     ((double)(16 << 20))

typedef enum dw_path { DW_FAST, DW_PIXELS, DW_PLANES } dw_path;

/* Everything a plan's execution needs, derived from the problem alone. */
typedef struct dw_geom {
    dw_path path;
    xconv_dw_xkind xk;
    xconv_dw_ykind yk;
    bool    packed;                       /* weights packed (else read per use) */
    bool    window;                       /* pixels: x converted per kernel row */
    int64_t seg, nseg, cc, nch, count;    /* items: count = rows * nseg * nch (or planes) */
    size_t  wk, bp, slots, acc_bytes, tmp_bytes, slot_bytes, total;
} dw_geom;

typedef struct dw_ctx {
    const xconv_exec *e;
    const dw_geom    *g;
    const void       *wk, *bp;            /* packed weights (NULL: read per use), bias or NULL */
} dw_ctx;

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Reads w[k, c .. c + cnt) (k the flat tap index) into dst in the compute type. */
static void load_w(const dw_ctx *d, int64_t k, int64_t c, void *dst, int64_t cnt)
{
    const xconv_canon *p = d->e->p;
    const int64_t k0 = k / (p->k_size[1] * p->k_size[2]), k1 = k / p->k_size[2] % p->k_size[1],
                  k2 = k % p->k_size[2];
    const int64_t kel = p->w_off + k0 * p->w_sk[0] + k1 * p->w_sk[1] + k2 * p->w_sk[2];
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype);
    const size_t cs = xconv__ctype_size(p->ct);
    if (p->cout_g == 1) {
        xconv__load_row(p->ct, p->x_dtype, (const char *)d->e->w + (kel + c * p->w_sg) * xes, p->w_sg,
                        dst, cnt);
        return;
    }
    for (int64_t i = 0; i < cnt; i++) {
        const int64_t co = c + i, el = kel + co / p->cout_g * p->w_sg + co % p->cout_g * p->w_so;
        xconv__load_row(p->ct, p->x_dtype, (const char *)d->e->w + el * xes, 1, (char *)dst + cs * (size_t)i, 1);
    }
}

#define XCONV_TEMPLATE "cpu/engines/depthwise.tmpl.h"
#include "cpu/instantiate_ct.h"

/* The workspace a plan may use: max(16 MiB, 10% of the bytes of x, w and y). */
static double ws_cap(const xconv_canon *p)
{
    const double xb = (double)p->n * (double)p->cin * (double)xconv__prod3(p->x_size) *
                      (double)xconv_dtype_size(p->x_dtype);
    const double wb = (double)p->cout * (double)xconv__prod3(p->k_size) * (double)xconv_dtype_size(p->x_dtype);
    const double yb = (double)p->n * (double)p->cout * (double)xconv__prod3(p->y_size) *
                      (double)xconv_dtype_size(p->y_dtype);
    const double tenth = 0.1 * (xb + wb + yb);
    return tenth > DW_WS_FLOOR ? tenth : DW_WS_FLOOR;
}

static dw_geom dw_geom_of(const xconv_canon *p)
{
    dw_geom g;
    memset(&g, 0, sizeof g);
    const size_t cs = xconv__ctype_size(p->ct);
    const int64_t rows = p->n * p->y_size[0] * p->y_size[1], Y2 = p->y_size[2];
    const int64_t kk = xconv__prod3(p->k_size);
    const double cap = ws_cap(p);
    const int threads = p->threads > 0 ? p->threads : 1;

    const bool fast = xconv__dw_fast_kinds(p, &g.xk, &g.yk);
    const int64_t cpb = fast ? XCONV_DW_KBLOCK(g.xk, p->ct) : XCONV_DW_BLOCK(p->ct);
    const int64_t ncb = (p->cout + cpb - 1) / cpb, bvb = XCONV_DW_VBYTES * (fast ? XCONV_DW_XVECS(g.xk) : 1);
    const size_t wvb = XCONV_DW_VBYTES * (size_t)(fast ? XCONV_DW_WVECS(g.xk) : 1); /* per tap */
    /* shifted blocks (depthwise.h) take one block more than ncb at most */
    const double fast_w = (double)wvb * (double)(ncb + 1) * (double)kk + (double)bvb * (double)(ncb + 1);
    if (fast && fast_w + 256.0 <= cap) {
        const int64_t rp = xconv__dw_fast_rows(p);
        const int64_t frows = p->n * p->y_size[0] * ((p->y_size[1] + rp - 1) / rp);
        g.path = DW_FAST;
        g.packed = true;
        /* split rows along dim 2 only when there are too few rows to share out evenly
         * (segments of at least 7 outputs: 14-wide rows split in two) */
        g.nseg = 1;
        if (frows > 0 && frows < 8 * threads) {
            const int64_t want = (8 * threads + frows - 1) / frows, most = Y2 / 7;
            g.nseg = want < most ? want : most < 1 ? 1 : most;
        }
        g.seg = (Y2 + g.nseg - 1) / g.nseg;
        g.nseg = (Y2 + g.seg - 1) / g.seg;
        g.nch = 1;
        g.count = frows * g.nseg;
        g.wk = 0;
        /* prepacked (constant weights): the plan holds them, the workspace only the bias */
        g.bp = p->prepacked ? 0 : align64(wvb * (size_t)((ncb + 1) * kk));
        g.total = align64(g.bp + (size_t)bvb * (size_t)(ncb + 1));
        return g;
    }

    const bool planes = llabs(p->x_ss[2]) <= llabs(p->x_sc) || p->cout == 1;
    if (planes) {
        g.path = DW_PLANES;
        g.seg = Y2 < DW_MAX_SEG ? Y2 : DW_MAX_SEG;
        g.nseg = (Y2 + g.seg - 1) / g.seg;
        g.nch = 1;
        g.acc_bytes = align64(cs * (size_t)g.seg);
        g.tmp_bytes = align64(cs * (size_t)g.seg);
        g.count = p->n * p->cout * p->y_size[0] * p->y_size[1] * g.nseg;
    } else {
        g.path = DW_PIXELS;
        g.cc = p->cout < DW_MAX_CC ? p->cout : DW_MAX_CC;
        g.nch = (p->cout + g.cc - 1) / g.cc;
        const int64_t in_n = g.cc / p->cout_g + 1 < p->cin ? g.cc / p->cout_g + 1 : p->cin;
        g.seg = (int64_t)(DW_ACC_BYTES / (cs * (size_t)g.cc));
        g.seg = g.seg < 1 ? 1 : g.seg > Y2 ? Y2 : g.seg;
        g.nseg = (Y2 + g.seg - 1) / g.seg;
        const double span = (double)(g.seg - 1) * (double)p->stride[2] +
                            (double)(p->k_size[2] - 1) * (double)p->dil[2] + 1.0;
        g.window = span * (double)in_n * (double)cs <= (double)DW_TMP_BYTES;
        g.acc_bytes = align64(cs * (size_t)(g.seg * g.cc));
        g.tmp_bytes = align64(cs * (size_t)in_n * (size_t)(g.window ? (int64_t)span : g.seg)) +
                      align64(cs * (size_t)g.cc); /* tmp, then one row of weights */
        g.count = rows * g.nseg * g.nch;
    }
    g.slot_bytes = g.acc_bytes + g.tmp_bytes;
    const double packed = (double)cs * (double)(kk + 1) * (double)p->cout;
    g.packed = packed + (double)g.slot_bytes * threads + 256.0 <= cap;
    g.wk = 0;
    g.bp = g.packed ? align64(cs * (size_t)(kk * p->cout)) : 0;
    g.slots = align64(g.bp + cs * (size_t)p->cout);
    g.total = g.slots + g.slot_bytes * (size_t)threads;
    return g;
}

static bool dw_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CPU) return *why_not = "cpu.depthwise runs on cpu tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cpu.depthwise runs conv only", false;
    if (p->cin_g != 1) return *why_not = "cpu.depthwise needs groups == input channels", false;
    return true;
}

static size_t dw_workspace_bytes(const xconv_canon *p) { return dw_geom_of(p).total; }

/* Memory-bound: the cost is mostly the bytes it streams, far below a GEMM's for this shape. */
static double dw_cost(const xconv_canon *p)
{
    const dw_geom g = dw_geom_of(p);
    return (g.path == DW_FAST ? 0.03 : 0.25) * p->flops + 1e3;
}

static void dw_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const dw_ctx *d = arg;
    const xconv_canon *p = d->e->p;
    char *scratch = (char *)d->e->workspace + d->g->slots + d->g->slot_bytes * (size_t)slot;
    const bool pix = d->g->path == DW_PIXELS;
    switch (p->ct) {
#define DW_CASE(CT, name)                                                                        \
    case CT:                                                                                     \
        if (pix) dw_pixels_##name(d, scratch, begin, end);                                       \
        else dw_planes_##name(d, scratch, begin, end);                                           \
        break;
    DW_CASE(XCONV_CT_U32, u32)
    DW_CASE(XCONV_CT_U64, u64)
    DW_CASE(XCONV_CT_F32, f32)
    DW_CASE(XCONV_CT_F64, f64)
    DW_CASE(XCONV_CT_C64, c64)
    DW_CASE(XCONV_CT_C128, c128)
#undef DW_CASE
    default: break;
    }
}

static void dw_fast_range(void *arg, int64_t begin, int64_t end, int slot)
{
    (void)slot;
    xconv__dw_fast_range(arg, begin, end);
}

/* Fewest blocks a pixel's channels take for the shift to pay: a shift adds a block (f32, one
 * thread, x and y 16 bytes past a line, medians of 9-15 alternating runs: 32 channels 79.1
 * -> 62.7 GFLOP/s, 64 channels 78.6 -> 73.5, 96 at stride 2 42.7 -> 47.6, 144 at stride 2
 * 31.0 -> 40.2, 384 71.6 -> 82.1). */
#define DW_SHIFT_MIN_BLOCKS 6

/* What the fast path's blocks align to (depthwise.h): the tensor, y or else x, whose pixels
 * all start at one offset within `period` bytes (a block's bytes, at most a line; 0: neither,
 * the blocks stay unshifted), and its element bytes. Periods under 32 bytes are left alone: a
 * block of 16 bytes or fewer at a 16-byte boundary never straddles two lines. */
typedef struct dw_phase {
    int64_t es, period;
    bool    on_y;
} dw_phase;

/* Do the pixels of a tensor (strides in elements of es bytes) keep one offset mod period? */
static bool dw_steady(int64_t period, int64_t es, int64_t n, int64_t sn, const int64_t *size, const int64_t *ss)
{
    if (n > 1 && llabs(sn) * es % period != 0) return false;
    for (int i = 0; i < 3; i++)
        if (size[i] > 1 && llabs(ss[i]) * es % period != 0) return false;
    return true;
}

static dw_phase dw_phase_of(const xconv_canon *p, xconv_dw_xkind xk)
{
    const int64_t L = XCONV_DW_KBLOCK(xk, p->ct);
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype), xes = (int64_t)xconv_dtype_size(p->x_dtype);
    const int64_t yper = L * yes < 64 ? L * yes : 64, xper = L * xes < 64 ? L * xes : 64;
    if (p->cout < DW_SHIFT_MIN_BLOCKS * L) return (dw_phase){1, 0, false};
    if (yper >= 32 && dw_steady(yper, yes, p->n, p->y_sn, p->y_size, p->y_ss)) return (dw_phase){yes, yper, true};
    if (xper >= 32 && dw_steady(xper, xes, p->n, p->x_sn, p->x_size, p->x_ss)) return (dw_phase){xes, xper, false};
    return (dw_phase){1, 0, false};
}

/* The shift of phase slot `slot` (16-byte steps within the period), in channels. */
static int64_t dw_shift(const dw_phase *ph, int slot)
{
    return ph->period ? 16 * slot % ph->period / ph->es : 0;
}

/* The phase slot of a run on buffers x and y: the aligned tensor's first element's offset
 * within the period in 16-byte steps, or 0 (unshifted) where that offset is not a whole 16
 * bytes. */
static int dw_slot(const xconv_canon *p, const dw_phase *ph, const void *x, const void *y)
{
    if (!ph->period) return 0;
    const uintptr_t a = ph->on_y ? (uintptr_t)y + (uintptr_t)(p->y_off * ph->es)
                                 : (uintptr_t)x + (uintptr_t)(p->x_off * ph->es);
    const uintptr_t off = a % (uintptr_t)ph->period;
    return off % 16 != 0 ? 0 : (int)(off / 16);
}

/* The phase slots a problem's runs can take: period / 16 (4 for a whole line), 1 unshifted. */
static int dw_slots(const dw_phase *ph) { return ph->period ? (int)(ph->period / 16) : 1; }

/* Bytes of one phase's packed weights: one block more than the channels need (a shift). */
static size_t dw_phase_bytes(const xconv_canon *p, xconv_dw_xkind xk)
{
    const int64_t cpb = XCONV_DW_KBLOCK(xk, p->ct), ncb = (p->cout + cpb - 1) / cpb + 1;
    return XCONV_DW_VBYTES * (size_t)(XCONV_DW_WVECS(xk) * ncb * xconv__prod3(p->k_size));
}

/* The 32 f32 values of a XCONV_DW_X_BF16X2 block in its order: even channels, then odd. */
static void split_even_odd(float *dst, const float *src)
{
    for (int c = 0; c < 16; c++) dst[c] = src[2 * c], dst[16 + c] = src[2 * c + 1];
}

/* Fast path packing for blocks shifted by sh channels (block b: channels b L - sh ..):
 * wf [block][K][vectors] and bf [block][vectors] in the compute type, zero outside
 * [0, Cout) (depthwise.h); 8-bit x's weights keep their low 16 bits only (the
 * vpmaddwd/vpdpwssd operand); complex weights (wr, wi) become the vectors of (wr, wr) and
 * (-wi, wi) pairs; XCONV_DW_X_BF16X2's 32 channels per block go even channels first. The
 * weights go to wf (the workspace, or the plan's memory at creation for constant weights). */
static void pack_fast(const xconv_exec *e, const dw_geom *g, unsigned char *wf, int64_t sh)
{
    const xconv_canon *p = e->p;
    const int64_t kk = xconv__prod3(p->k_size), L = XCONV_DW_KBLOCK(g->xk, p->ct);
    const int64_t ncb = (p->cout + sh + L - 1) / L, nv = XCONV_DW_WVECS(g->xk);
    const size_t cs = xconv__ctype_size(p->ct);
    const bool x2 = g->xk == XCONV_DW_X_BF16X2;
    const size_t V = XCONV_DW_VBYTES;
    union dw_vecs {
        uint32_t u32[XCONV_DW_VBYTES / 2];
        float    f32[XCONV_DW_VBYTES / 2];
        double   f64[XCONV_DW_VBYTES / 4];
    } row, out;
    const dw_ctx d = {e, g, NULL, NULL};
    for (int64_t cb = 0; wf && cb < ncb; cb++) {
        const int64_t c0 = cb * L - sh, lo = c0 > 0 ? c0 : 0, hi = c0 + L < p->cout ? c0 + L : p->cout;
        for (int64_t k = 0; k < kk; k++) {
            memset(&row, 0, sizeof row);
            load_w(&d, k, lo, (char *)&row + cs * (size_t)(lo - c0), hi - lo);
            if (XCONV_DW_X_BYTES(g->xk)) /* vpmaddwd's 16-bit operand */
                for (size_t c = 0; c < V / 4; c++) row.u32[c] &= 0xffffu;
            out = row;
            if (x2) split_even_odd(out.f32, row.f32);
            /* complex: (wr, wr) pairs in the first vector, (-wi, wi) in the second */
            for (size_t c = 0; g->xk == XCONV_DW_X_C64 && c < V / 4; c += 2) {
                out.f32[c + 1] = row.f32[c];
                out.f32[V / 4 + c] = -row.f32[c + 1], out.f32[V / 4 + c + 1] = row.f32[c + 1];
            }
            for (size_t c = 0; g->xk == XCONV_DW_X_C128 && c < V / 8; c += 2) {
                out.f64[c + 1] = row.f64[c];
                out.f64[V / 8 + c] = -row.f64[c + 1], out.f64[V / 8 + c + 1] = row.f64[c + 1];
            }
            memcpy(wf + V * (size_t)((cb * kk + k) * nv), &out, V * (size_t)nv);
        }
    }
    if (p->has_bias) {
        unsigned char *bf = (unsigned char *)e->workspace + g->bp;
        const size_t bb = V * (size_t)XCONV_DW_XVECS(g->xk) * (size_t)ncb;
        memset(bf, 0, bb);
        xconv__load_row(p->ct, p->bias_dtype,
                        (const char *)e->bias + p->b_off * (int64_t)xconv_dtype_size(p->bias_dtype), p->b_s,
                        bf + cs * (size_t)sh, p->cout);
        for (int64_t cb = 0; x2 && cb < ncb; cb++) {
            memcpy(&row, bf + 2 * V * (size_t)cb, 2 * V);
            split_even_odd(out.f32, row.f32);
            memcpy(bf + 2 * V * (size_t)cb, &out, 2 * V);
        }
    }
}

static xconv_status dw_run(const xconv_exec *e, xconv_error *err)
{
    (void)err;
    const xconv_canon *p = e->p;
    const dw_geom g = dw_geom_of(p);
    char *ws = e->workspace;
    if (p->n == 0) return XCONV_STATUS_OK;
    if (g.path == DW_FAST) {
        const dw_phase ph = dw_phase_of(p, g.xk);
        const int slot = dw_slot(p, &ph, e->x, e->y);
        const int64_t sh = dw_shift(&ph, slot);
        pack_fast(e, &g, p->prepacked ? NULL : (unsigned char *)(ws + g.wk), sh);
        const void *wf = p->prepacked ? (const char *)e->packed + dw_phase_bytes(p, g.xk) * (size_t)slot
                                      : ws + g.wk;
        xconv_dw_fast f = {p, e->x, e->y, wf, p->has_bias ? ws + g.bp : NULL,
                           g.xk, g.yk, g.seg, g.nseg, sh};
        xconv__parallel_for_slot(e->ctx, g.count, dw_fast_range, &f);
        return XCONV_STATUS_OK;
    }
    dw_ctx d = {e, &g, g.packed ? ws + g.wk : NULL, p->has_bias ? ws + g.bp : NULL};
    if (g.packed) {
        const size_t cs = xconv__ctype_size(p->ct);
        for (int64_t k = 0; k < xconv__prod3(p->k_size); k++)
            load_w(&d, k, 0, ws + g.wk + cs * (size_t)(k * p->cout), p->cout);
    }
    if (p->has_bias)
        xconv__load_row(p->ct, p->bias_dtype,
                        (const char *)e->bias + p->b_off * (int64_t)xconv_dtype_size(p->bias_dtype), p->b_s,
                        ws + g.bp, p->cout);
    xconv__parallel_for_slot(e->ctx, g.count, dw_range, &d);
    return XCONV_STATUS_OK;
}

/* Constant weights: the fast path's packed weights, once, at plan creation. */
static size_t dw_prepack_bytes(const xconv_canon *p)
{
    const dw_geom g = dw_geom_of(p);
    if (g.path != DW_FAST) return 0;
    const dw_phase ph = dw_phase_of(p, g.xk);
    return (size_t)dw_slots(&ph) * dw_phase_bytes(p, g.xk);
}

static void dw_prepack(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed)
{
    xconv_canon q = *p;
    q.has_bias = false; /* weights only: the bias is packed at every run */
    const xconv_exec e = {.p = &q, .ctx = ctx, .w = w};
    const dw_geom g = dw_geom_of(p);
    const dw_phase ph = dw_phase_of(p, g.xk);
    for (int slot = 0; slot < dw_slots(&ph); slot++)
        pack_fast(&e, &g, (unsigned char *)packed + dw_phase_bytes(p, g.xk) * (size_t)slot, dw_shift(&ph, slot));
}

const xconv_engine xconv__engine_cpu_depthwise = {
    .name = "cpu.depthwise",
    .device = XCONV_DEVICE_CPU,
    .supports = dw_supports,
    .workspace_bytes = dw_workspace_bytes,
    .cost = dw_cost,
    .run = dw_run,
    .prepack_bytes = dw_prepack_bytes,
    .prepack = dw_prepack,
};
