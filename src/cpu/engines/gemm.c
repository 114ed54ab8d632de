/*
 * gemm.c — cache-blocked GEMM in every compute type (u32, u64 wrapping; f32; f64; c64;
 * c128) over packed panels (layout in gemm.h).
 *
 *   C[m x n] = (accumulate ? C : 0) + A[m x k] * B[k x n]
 *
 * Blocking (GotoBLAS order inside each block of C): for each k block of kc, for each B
 * panel of nr columns (kc x nr values, sized to stay in L1), for each A panel of mr rows
 * (the mc x kc block is sized for L2): one register-blocked kernel call. Threads split the
 * mc x nc blocks of C; the k order of every C element is fixed by kc alone, so results are
 * bit-identical for any thread count.
 *
 * Assumes: m, n, k >= 0; packed panels as gemm.h describes; C does not overlap A or B.
 */
#include "cpu/engines/gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Register blocks per ISA (rows x 64-byte vectors of columns). avx512: 16 accumulators of
 * 32 zmm; avx2: 12 of 16 ymm (a 64-byte vector is two); generic: what SSE2/NEON can hold. */
#define XG_MAX_MR          8
#define XG_MAX_NV          2
#define XG_GENERIC_MR_REAL 4
#define XG_GENERIC_MR_CPLX 2
#define XG_AVX2_MR_REAL    6
#define XG_AVX2_MR_CPLX    3
#define XG_AVX512_MR       8

#include "cpu/isa.h"
#define XG_X86           XCONV_X86
#define XG_TARGET_AVX2   XCONV_TARGET_AVX2
#define XG_TARGET_AVX512 XCONV_TARGET_AVX512
#define XG_UNROLL        XCONV_UNROLL

#define XCONV_TEMPLATE "cpu/engines/gemm.tmpl.h"
#include "cpu/instantiate_rt.h"

/* ---------------------------------------------------------------------------------------- */
/* Geometry                                                                                 */
/* ---------------------------------------------------------------------------------------- */

enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512, ISA_COUNT };

static const char *const ISA_NAMES[ISA_COUNT] = {"generic", "avx2", "avx512"};

typedef void (*ct_add_fn)(void *dst, int64_t ds, const void *src, int64_t ss, int64_t n);

/* Per compute type, in xconv_ctype order. */
static const struct {
    size_t            comp_bytes;
    int               ncomp;
    xconv_dtype       dtype;
    ct_add_fn         add;
    xconv_gemm_kernel kernels[ISA_COUNT];
} CT_TABLE[XCONV_CT_COUNT] = {
#if XG_X86
#define XG_KERNELS(t) {kernel_generic_##t, kernel_avx2_##t, kernel_avx512_##t}
#else
#define XG_KERNELS(t) {kernel_generic_##t, NULL, NULL}
#endif
    [XCONV_CT_U32]  = {4, 1, XCONV_DTYPE_U32, ct_add_u32, XG_KERNELS(u32)},
    [XCONV_CT_U64]  = {8, 1, XCONV_DTYPE_U64, ct_add_u64, XG_KERNELS(u64)},
    [XCONV_CT_F32]  = {4, 1, XCONV_DTYPE_F32, ct_add_f32, XG_KERNELS(f32)},
    [XCONV_CT_F64]  = {8, 1, XCONV_DTYPE_F64, ct_add_f64, XG_KERNELS(f64)},
    [XCONV_CT_C64]  = {4, 2, XCONV_DTYPE_C64, ct_add_c64, XG_KERNELS(c64)},
    [XCONV_CT_C128] = {8, 2, XCONV_DTYPE_C128, ct_add_c128, XG_KERNELS(c128)},
#undef XG_KERNELS
};

static xconv_gemm_geom GEOMS[ISA_COUNT][XCONV_CT_COUNT];
static int best_isa = ISA_GENERIC;
static pthread_once_t geoms_once = PTHREAD_ONCE_INIT;

static int64_t round_down(int64_t v, int64_t m) { return v / m * m; }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void init_geoms(void)
{
#if XG_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best_isa = ISA_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        best_isa = ISA_AVX512;
#endif
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        for (int ct = 0; ct < XCONV_CT_COUNT; ct++) {
            xconv_gemm_geom *g = &GEOMS[isa][ct];
            const bool cplx = CT_TABLE[ct].ncomp == 2;
            const int vl = (int)(64 / CT_TABLE[ct].comp_bytes);
            g->ct = (xconv_ctype)ct;
            g->isa = ISA_NAMES[isa];
            g->ncomp = CT_TABLE[ct].ncomp;
            g->comp_bytes = CT_TABLE[ct].comp_bytes;
            g->elem_bytes = g->comp_bytes * (size_t)g->ncomp;
            g->kernel = CT_TABLE[ct].kernels[isa];
            switch (isa) {
            case ISA_AVX512: g->mr = XG_AVX512_MR, g->nr = (cplx ? 1 : 2) * vl; break;
            case ISA_AVX2: g->mr = cplx ? XG_AVX2_MR_CPLX : XG_AVX2_MR_REAL, g->nr = vl; break;
            default: g->mr = cplx ? XG_GENERIC_MR_CPLX : XG_GENERIC_MR_REAL, g->nr = vl; break;
            }
            /* A B panel of kc indices ~32 KiB (L1), an A block ~512 KiB (L2), a B block
             * ~4 MiB (L3). */
            const int64_t per_k = g->nr * (int64_t)g->elem_bytes;
            g->kc = clamp64(32768 / per_k, 64, 512);
            g->mc = clamp64(round_down(524288 / (g->kc * (int64_t)g->elem_bytes), g->mr), g->mr,
                            4096);
            g->nc = clamp64(round_down(4194304 / (g->kc * (int64_t)g->elem_bytes), g->nr), g->nr,
                            1 << 16);
        }
    }
}

const xconv_gemm_geom *xconv__gemm_geom(xconv_ctype ct)
{
    pthread_once(&geoms_once, init_geoms);
    if ((int)ct < 0 || ct >= XCONV_CT_COUNT) return NULL;
    return &GEOMS[best_isa][ct];
}

const xconv_gemm_geom *xconv__gemm_geom_isa(xconv_ctype ct, const char *isa)
{
    pthread_once(&geoms_once, init_geoms);
    if ((int)ct < 0 || ct >= XCONV_CT_COUNT || !isa) return NULL;
    for (int i = 0; i <= best_isa; i++)
        if (strcmp(isa, ISA_NAMES[i]) == 0) return &GEOMS[i][ct];
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Packed panels                                                                            */
/* ---------------------------------------------------------------------------------------- */

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

size_t xconv__gemm_packed_a_bytes(const xconv_gemm_geom *g, int64_t m, int64_t k)
{
    return (size_t)(round_up(m, g->mr) * k) * g->elem_bytes;
}

size_t xconv__gemm_packed_b_bytes(const xconv_gemm_geom *g, int64_t k, int64_t n)
{
    return (size_t)(round_up(n, g->nr) * k) * g->elem_bytes;
}

static void *slot(const xconv_gemm_geom *g, void *p, int width, int64_t k, int64_t i, int64_t kk)
{
    const int64_t comps = ((i / width) * k + kk) * width * g->ncomp + i % width;
    return (char *)p + comps * (int64_t)g->comp_bytes;
}

void *xconv__gemm_a_slot(const xconv_gemm_geom *g, void *ap, int64_t k, int64_t i, int64_t kk)
{
    return slot(g, ap, g->mr, k, i, kk);
}

void *xconv__gemm_b_slot(const xconv_gemm_geom *g, void *bp, int64_t k, int64_t kk, int64_t j)
{
    return slot(g, bp, g->nr, k, j, kk);
}

void xconv__gemm_put(const xconv_gemm_geom *g, int width, const void *src, void *dst,
                     int64_t count)
{
    if (g->ncomp == 1) {
        memcpy(dst, src, (size_t)count * g->elem_bytes);
        return;
    }
    const size_t cb = g->comp_bytes;
    const char *s = (const char *)src;
    char *re = (char *)dst, *im = re + (size_t)width * cb;
    for (int64_t j = 0; j < count; j++) {
        memcpy(re + (size_t)j * cb, s + (size_t)(2 * j) * cb, cb);
        memcpy(im + (size_t)j * cb, s + (size_t)(2 * j + 1) * cb, cb);
    }
}

void xconv__gemm_zero(const xconv_gemm_geom *g, int width, void *dst, int64_t count)
{
    const size_t bytes = (size_t)count * g->comp_bytes;
    memset(dst, 0, bytes);
    if (g->ncomp == 2) memset((char *)dst + (size_t)width * g->comp_bytes, 0, bytes);
}

/* ---------------------------------------------------------------------------------------- */
/* The blocked product                                                                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct gemm_job {
    const xconv_gemm_geom *g;
    int64_t m, n, k, mc, nc, nb;
    const char *ap, *bp;
    char *c;
    int64_t rs_c, cs_c;
    bool accumulate;
} gemm_job;

static void gemm_blocks(void *arg, int64_t begin, int64_t end)
{
    const gemm_job *J = (const gemm_job *)arg;
    const xconv_gemm_geom *g = J->g;
    const int64_t mr = g->mr, nr = g->nr, k = J->k, kc = g->kc;
    const int64_t cb = (int64_t)g->comp_bytes, eb = (int64_t)g->elem_bytes;
    for (int64_t item = begin; item < end; item++) {
        const int64_t i0 = item / J->nb * J->mc, j0 = item % J->nb * J->nc;
        const int64_t i1 = i0 + J->mc < J->m ? i0 + J->mc : J->m;
        const int64_t j1 = j0 + J->nc < J->n ? j0 + J->nc : J->n;
        for (int64_t pc = 0; pc < k; pc += kc) {
            const int64_t kcur = k - pc < kc ? k - pc : kc;
            const int acc = J->accumulate || pc > 0;
            for (int64_t j = j0; j < j1; j += nr) {
                const char *bpan = J->bp + ((j / nr) * k + pc) * nr * g->ncomp * cb;
                const int nn = (int)(j1 - j < nr ? j1 - j : nr);
                for (int64_t i = i0; i < i1; i += mr) {
                    const char *apan = J->ap + ((i / mr) * k + pc) * mr * g->ncomp * cb;
                    const int mm = (int)(i1 - i < mr ? i1 - i : mr);
                    g->kernel(kcur, apan, bpan, J->c + (i * J->rs_c + j * J->cs_c) * eb,
                              J->rs_c, J->cs_c, mm, nn, acc);
                }
            }
        }
    }
}

void xconv__gemm_packed(xconv_context *ctx, const xconv_gemm_geom *g, int64_t m, int64_t n,
                        int64_t k, const void *ap, const void *bp, void *c, int64_t rs_c,
                        int64_t cs_c, bool accumulate)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (accumulate) return;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                memset((char *)c + (i * rs_c + j * cs_c) * (int64_t)g->elem_bytes, 0,
                       g->elem_bytes);
        return;
    }
    /* Enough blocks of C for every thread to get about two; the split changes who computes
     * an element, never its summation order. */
    const int threads = ctx ? xconv_context_threads(ctx) : 1;
    const int64_t mb = (m + g->mc - 1) / g->mc;
    const int64_t nb_want = (2 * threads + mb - 1) / mb;
    int64_t nc = round_up((n + nb_want - 1) / nb_want, g->nr);
    nc = clamp64(nc, g->nr, g->nc);
    gemm_job J = {.g = g, .m = m, .n = n, .k = k, .mc = g->mc, .nc = nc,
                  .nb = (n + nc - 1) / nc, .ap = (const char *)ap, .bp = (const char *)bp,
                  .c = (char *)c, .rs_c = rs_c, .cs_c = cs_c, .accumulate = accumulate};
    const double macs = (double)m * (double)n * (double)k;
    if (!ctx || threads <= 1 || macs < 65536.0)
        gemm_blocks(&J, 0, mb * J.nb);
    else
        xconv__parallel_for(ctx, mb * J.nb, gemm_blocks, &J);
}

/* ---------------------------------------------------------------------------------------- */
/* The general entry: pack strided compute-type matrices, then multiply                     */
/* ---------------------------------------------------------------------------------------- */

size_t xconv__gemm_workspace_bytes(xconv_ctype ct, int64_t m, int64_t n, int64_t k)
{
    const xconv_gemm_geom *g = xconv__gemm_geom(ct);
    return xconv__gemm_packed_a_bytes(g, m, k) + xconv__gemm_packed_b_bytes(g, k, n);
}

typedef struct pack_job {
    const xconv_gemm_geom *g;
    int width;            /* mr (A) or nr (B) */
    int64_t rows, k;      /* panel direction length, reduction length */
    const char *src;
    int64_t s_row, s_k;   /* element strides along the panel direction and along k */
    char *dst;
} pack_job;

/* Packs panels [begin, end): for each k index, `width` values along the panel direction. */
static void pack_panels(void *arg, int64_t begin, int64_t end)
{
    const pack_job *P = (const pack_job *)arg;
    const xconv_gemm_geom *g = P->g;
    const int64_t eb = (int64_t)g->elem_bytes;
    unsigned char tmp[XG_MAX_NV * 64 * 2];  /* width values of the widest compute type */
    for (int64_t p = begin; p < end; p++) {
        const int64_t r0 = p * P->width;
        const int64_t cnt = P->rows - r0 < P->width ? P->rows - r0 : P->width;
        for (int64_t kk = 0; kk < P->k; kk++) {
            void *dst = slot(g, P->dst, P->width, P->k, r0, kk);
            for (int64_t r = 0; r < cnt; r++)
                memcpy(tmp + r * eb, P->src + ((r0 + r) * P->s_row + kk * P->s_k) * eb,
                       (size_t)eb);
            xconv__gemm_put(g, P->width, tmp, dst, cnt);
            if (cnt < P->width)
                xconv__gemm_zero(g, P->width, (char *)dst + cnt * (int64_t)g->comp_bytes,
                                 P->width - cnt);
        }
    }
}

void xconv__gemm(xconv_context *ctx, xconv_ctype ct, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t rs_a, int64_t cs_a, const void *b, int64_t rs_b,
                 int64_t cs_b, void *c, int64_t rs_c, int64_t cs_c, bool accumulate,
                 void *workspace)
{
    const xconv_gemm_geom *g = xconv__gemm_geom(ct);
    char *ap = (char *)workspace, *bp = ap + xconv__gemm_packed_a_bytes(g, m, k);
    pack_job pa = {g, g->mr, m, k, (const char *)a, rs_a, cs_a, ap};
    pack_job pb = {g, g->nr, n, k, (const char *)b, cs_b, rs_b, bp};
    xconv__parallel_for(ctx, (m + g->mr - 1) / g->mr, pack_panels, &pa);
    xconv__parallel_for(ctx, (n + g->nr - 1) / g->nr, pack_panels, &pb);
    xconv__gemm_packed(ctx, g, m, n, k, ap, bp, c, rs_c, cs_c, accumulate);
}

/* ---------------------------------------------------------------------------------------- */
/* Compute-type helpers                                                                     */
/* ---------------------------------------------------------------------------------------- */

void xconv__ct_add(xconv_ctype ct, void *dst, int64_t dst_stride, const void *src,
                   int64_t src_stride, int64_t n)
{
    CT_TABLE[ct].add(dst, dst_stride, src, src_stride, n);
}

void xconv__ct_fill(xconv_ctype ct, void *dst, const void *value, int64_t n)
{
    const size_t eb = CT_TABLE[ct].comp_bytes * (size_t)CT_TABLE[ct].ncomp;
    for (int64_t i = 0; i < n; i++) memcpy((char *)dst + (size_t)i * eb, value, eb);
}

xconv_dtype xconv__ct_dtype(xconv_ctype ct) { return CT_TABLE[ct].dtype; }
