/*
 * igemm.c — the indirect-GEMM microkernels of igemm.h, one body per compute type
 * (igemm.tmpl.h) and thin per-ISA wrappers that fix the register block and the target.
 *
 *   avx512   real: 6 rows x 4 zmm (24 accumulators), complex: 3 x 2 (re and im: 24)
 *   avx2     real: 6 rows x 2 ymm (12 accumulators; 32-byte vectors: over 64-byte ones gcc
 *            kept the sums on the stack, 1.1 GFLOP/s on an AVX2-only EPYC), complex: 2 x 1
 *            64-byte vectors
 *   generic  real: 2 x 1, complex: 1 x 1 (whatever vector unit the baseline target has)
 * The ISA is picked once from cpuid; every variant gives the same sums in the same order
 * except that FMA contraction may differ between targets (floats only).
 */
#include "cpu/ukernels/igemm.h"

#include <string.h>

#define XI_MAX_MR 6
#define XI_MAX_NV 4

#include "cpu/isa.h"
#define XI_UNROLL        XCONV_UNROLL
#define XI_X86           XCONV_X86
#define XI_TARGET_avx512 XCONV_TARGET_AVX512
#define XI_TARGET_avx2   XCONV_TARGET_AVX2
#define XI_TARGET_generic

#define XI_VB 64
#define XCONV_TEMPLATE "cpu/ukernels/igemm.tmpl.h"
#include "cpu/instantiate_rt.h"
#undef XI_VB
#define XI_VB 32
#define XCONV_TEMPLATE "cpu/ukernels/igemm.tmpl.h"
#include "cpu/instantiate_rt.h"
#undef XI_VB

/* One wrapper: fixes (mr, nv) as constants so the body's loops unroll into registers (kept
 * out of line: kernel_gemm's loop over tiles would otherwise inline it, and GCC then loses
 * the accumulators' registers, as the VNNI kernels found). A
 * tile of m <= 4 < mr live rows (the last tile of a 7x7 output, a transposed conv's phase
 * ends) runs a body of m rows instead: the rows past m cost nothing, and each live row's
 * sum is the same operations in the same order, so the bits do not change.
 * Its kernel_gemm (xconv__igemm_gemm_tiles) writes each tile's rows of y in place: no
 * pointer arrays built per tile by the engine. */
#define XI_ROWS(t, vb, mr, nv, k)                                                            \
    if ((k) < (mr) && m == (k)) {                                                            \
        igemm_body_##t##_##vb(k, nv, mr, ntaps, len, a, b, init, c, m, n, accumulate);       \
        return;                                                                              \
    }
#define XI_WRAPPER(t, isa, mr, nv, vb)                                                       \
    static __attribute__((noinline)) XI_TARGET_##isa void igemm_##isa##_##t(                 \
        int64_t ntaps, int64_t len,                                                          \
                                                  const void *const *a, const void *const *b, \
                                                  const void *init, void *const *c, int m,   \
                                                  int n, int accumulate)                     \
    {                                                                                        \
        XI_ROWS(t, vb, mr, nv, 1) XI_ROWS(t, vb, mr, nv, 2) XI_ROWS(t, vb, mr, nv, 3)        \
        XI_ROWS(t, vb, mr, nv, 4)                                                            \
        igemm_body_##t##_##vb(mr, nv, mr, ntaps, len, a, b, init, c, m, n, accumulate);      \
    }                                                                                        \
    static void igemm_##isa##_##t##_gemm(int64_t mt, int64_t len, const void *a, ptrdiff_t lda, \
                                         const void *b, const void *init, void *y,          \
                                         ptrdiff_t ldy, int n, int y_bytes)                  \
    {                                                                                        \
        xconv__igemm_gemm_tiles(mr, igemm_##isa##_##t, NULL, mt, len, a, lda, b, init, y,    \
                                ldy, n, y_bytes);                                            \
    }

/* The register block of each ISA, written once for the wrappers and the geometry table:
 * (mr rows, nv vectors, vector bytes), for the real types and for complex ones. */
#define XI_BLOCK_generic_real 2, 1, 64
#define XI_BLOCK_generic_cplx 1, 1, 64
#define XI_BLOCK_avx2_real    6, 2, 32
#define XI_BLOCK_avx2_cplx    2, 1, 64
#define XI_BLOCK_avx512_real  6, 4, 64
#define XI_BLOCK_avx512_cplx  3, 2, 64

/* The compute types: X(CT, name, component type, components, block kind). */
#define XI_TYPES(X)                                    \
    X(XCONV_CT_U32, u32, uint32_t, 1, real)            \
    X(XCONV_CT_U64, u64, uint64_t, 1, real)            \
    X(XCONV_CT_F32, f32, float, 1, real)               \
    X(XCONV_CT_F64, f64, double, 1, real)              \
    X(XCONV_CT_C64, c64, float, 2, cplx)               \
    X(XCONV_CT_C128, c128, double, 2, cplx)

/* (the indirection expands a block into its three numbers before XI_WRAPPER sees them) */
#define XI_WRAP(t, isa, block)          XI_WRAP_(t, isa, block)
#define XI_WRAP_(t, isa, mr, nv, vb)    XI_WRAPPER(t, isa, mr, nv, vb)
#define XI_WRAPPERS_GENERIC(CT, t, rt, ncomp, kind) XI_WRAP(t, generic, XI_BLOCK_generic_##kind)
#define XI_WRAPPERS_X86(CT, t, rt, ncomp, kind)                                            \
    XI_WRAP(t, avx2, XI_BLOCK_avx2_##kind) XI_WRAP(t, avx512, XI_BLOCK_avx512_##kind)
XI_TYPES(XI_WRAPPERS_GENERIC)
#if XI_X86
XI_TYPES(XI_WRAPPERS_X86)
/* The narrow AVX-512 block (real types): 6 rows x 2 zmm, for groups of at most half the wide
 * block's channels, which would leave half of its accumulators on zeros (a 3->32-channel
 * stem ran at 0.44x oneDNN). */
#define XI_TARGET_avx512n          XCONV_TARGET_AVX512
#define XI_BLOCK_avx512n_real      6, 2, 64
#define XI_NARROW_WRAP_real(t)     XI_WRAP(t, avx512n, XI_BLOCK_avx512n_real)
#define XI_NARROW_WRAP_cplx(t)
#define XI_WRAPPERS_NARROW(CT, t, rt, ncomp, kind) XI_NARROW_WRAP_##kind(t)
XI_TYPES(XI_WRAPPERS_NARROW)
#endif

enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512, ISA_COUNT };
static const char *const ISA_NAMES[ISA_COUNT] = {"generic", "avx2", "avx512"};

/* nr = nv * (vector bytes / component bytes) */
#define XI_GEOM(CT, t, isa, rt, ncomp, block) XI_GEOM_(CT, t, isa, rt, ncomp, block)
#define XI_GEOM_(CT, t, isa, rt, ncomp, mr, nv, vb) \
    {CT, #isa, mr, (nv) * (int)((vb) / sizeof(rt)), ncomp, igemm_##isa##_##t, NULL, igemm_##isa##_##t##_gemm}
#if XI_X86
#define XI_ROW(CT, t, rt, ncomp, kind)                                                     \
    [CT] = {XI_GEOM(CT, t, generic, rt, ncomp, XI_BLOCK_generic_##kind),                   \
            XI_GEOM(CT, t, avx2, rt, ncomp, XI_BLOCK_avx2_##kind),                         \
            XI_GEOM(CT, t, avx512, rt, ncomp, XI_BLOCK_avx512_##kind)},
#else
#define XI_ROW(CT, t, rt, ncomp, kind) \
    [CT] = {XI_GEOM(CT, t, generic, rt, ncomp, XI_BLOCK_generic_##kind)},
#endif

static const xconv_igemm_geom GEOMS[XCONV_CT_COUNT][ISA_COUNT] = {XI_TYPES(XI_ROW)};
#undef XI_ROW

#if XI_X86
/* (named "avx512": the same ISA and rate as the wide block, to the engines) */
#define XI_NGEOM(CT, t, rt, ncomp, mr, nv, vb) \
    {CT, "avx512", mr, (nv) * (int)((vb) / sizeof(rt)), ncomp, igemm_avx512n_##t, NULL, igemm_avx512n_##t##_gemm}
#define XI_NGEOM_(CT, t, rt, ncomp, block) XI_NGEOM(CT, t, rt, ncomp, block)
#define XI_NROW_real(CT, t, rt, ncomp) [CT] = XI_NGEOM_(CT, t, rt, ncomp, XI_BLOCK_avx512n_real),
#define XI_NROW_cplx(CT, t, rt, ncomp)
#define XI_NROW(CT, t, rt, ncomp, kind) XI_NROW_##kind(CT, t, rt, ncomp)
static const xconv_igemm_geom NARROW[XCONV_CT_COUNT] = {XI_TYPES(XI_NROW)};
#undef XI_NROW
#endif

static bool isa_runs(int isa)
{
#if XI_X86
    if (isa == ISA_AVX512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    if (isa == ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == ISA_GENERIC;
}

const xconv_igemm_geom *xconv__igemm_geom_isa(xconv_ctype ct, const char *isa)
{
    if (ct >= XCONV_CT_COUNT || !isa) return NULL;
    for (int i = 0; i < ISA_COUNT; i++)
        if (strcmp(isa, ISA_NAMES[i]) == 0)
            return isa_runs(i) && GEOMS[ct][i].kernel ? &GEOMS[ct][i] : NULL;
    return NULL;
}

const xconv_igemm_geom *xconv__igemm_geom(xconv_ctype ct)
{
    if (ct >= XCONV_CT_COUNT) return NULL;
    for (int i = ISA_COUNT - 1; i >= 0; i--)
        if (isa_runs(i) && GEOMS[ct][i].kernel) return &GEOMS[ct][i];
    return NULL;
}

const xconv_igemm_geom *xconv__igemm_geom_narrow(xconv_ctype ct)
{
#if XI_X86
    const xconv_igemm_geom *best = xconv__igemm_geom(ct);
    if (best && best == &GEOMS[ct][ISA_AVX512] && NARROW[ct].kernel) return &NARROW[ct];
#else
    (void)ct;
#endif
    return NULL;
}
