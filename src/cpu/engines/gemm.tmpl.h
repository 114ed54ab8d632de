/*
 * gemm.tmpl.h — the per-compute-type bodies of gemm.c, instantiated once per compute type:
 *
 *   #define XCONV_T     f32       name suffix
 *   #define XCONV_RT    float     the real component type
 *   #define XCONV_NCOMP 1         1 real, 2 complex (split re/im planes in packed panels)
 *   #include "gemm.tmpl.h"        defines kernel_{generic,avx2,avx512}_f32, ct_add_f32
 *
 * The kernel is written with GCC/clang vector extensions over 64-byte vectors: plain C that
 * the compiler maps onto zmm, ymm pairs or xmm quads, so one body serves every ISA and the
 * ISA wrappers only choose the register block (mr rows x nv vectors) and the target.
 * Integer compute types are unsigned, so every product and sum wraps as DESIGN.md §2 asks.
 * The template #undefs its parameters at the end.
 */

#define XG_CAT2(a, b) a##_##b
#define XG_CAT(a, b)  XG_CAT2(a, b)
#define XG_NAME(f)    XG_CAT(f, XCONV_T)

typedef XCONV_RT XG_NAME(vec) __attribute__((vector_size(64)));

/* The register-blocked body: mr and nv are constants in every caller, so after inlining
 * the r and v loops unroll fully and acc lives in vector registers. */
static inline __attribute__((always_inline)) void
XG_NAME(kernel_body)(const int mr, const int nv, int64_t k, const XCONV_RT *restrict a,
                     const XCONV_RT *restrict b, XCONV_RT *restrict c, int64_t rs_c,
                     int64_t cs_c, int m, int n, int accumulate)
{
    typedef XG_NAME(vec) vec;
    enum { VL = (int)(sizeof(vec) / sizeof(XCONV_RT)) };
    const int nr = nv * VL;
    if (n > nr) n = nr; /* never true; tells the compiler out[] below is written up to n */
#if XCONV_NCOMP == 1
    vec acc[XG_MAX_MR][XG_MAX_NV];
    XG_UNROLL for (int r = 0; r < mr; r++)
        XG_UNROLL for (int v = 0; v < nv; v++) acc[r][v] = (vec){0};
    for (int64_t kk = 0; kk < k; kk++) {
        const XCONV_RT *ak = a + kk * mr, *bk = b + kk * nr;
        vec bv[XG_MAX_NV];
        XG_UNROLL for (int v = 0; v < nv; v++) memcpy(&bv[v], bk + v * VL, sizeof(vec));
        XG_UNROLL for (int r = 0; r < mr; r++) {
            const XCONV_RT av = ak[r];
            XG_UNROLL for (int v = 0; v < nv; v++) acc[r][v] += av * bv[v];
        }
    }
    XG_UNROLL for (int r = 0; r < mr; r++) {
        if (r >= m) continue;
        XCONV_RT out[XG_MAX_NV * VL];
        XG_UNROLL for (int v = 0; v < nv; v++) {
            vec t = acc[r][v];
            memcpy(out + v * VL, &t, sizeof t);
        }
        XCONV_RT *cr = c + r * rs_c;
        if (accumulate)
            for (int j = 0; j < n; j++) cr[j * cs_c] += out[j];
        else
            for (int j = 0; j < n; j++) cr[j * cs_c] = out[j];
    }
#else
    /* (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br), on split planes. */
    vec re[XG_MAX_MR][XG_MAX_NV], im[XG_MAX_MR][XG_MAX_NV];
    XG_UNROLL for (int r = 0; r < mr; r++)
        XG_UNROLL for (int v = 0; v < nv; v++) re[r][v] = im[r][v] = (vec){0};
    for (int64_t kk = 0; kk < k; kk++) {
        const XCONV_RT *ak = a + kk * 2 * mr, *bk = b + kk * 2 * nr;
        vec br[XG_MAX_NV], bi[XG_MAX_NV];
        XG_UNROLL for (int v = 0; v < nv; v++) {
            memcpy(&br[v], bk + v * VL, sizeof(vec));
            memcpy(&bi[v], bk + nr + v * VL, sizeof(vec));
        }
        XG_UNROLL for (int r = 0; r < mr; r++) {
            const XCONV_RT ar = ak[r], ai = ak[mr + r];
            XG_UNROLL for (int v = 0; v < nv; v++) {
                re[r][v] += ar * br[v] - ai * bi[v];
                im[r][v] += ar * bi[v] + ai * br[v];
            }
        }
    }
    XG_UNROLL for (int r = 0; r < mr; r++) {
        if (r >= m) continue;
        XCONV_RT out_re[XG_MAX_NV * VL], out_im[XG_MAX_NV * VL];
        XG_UNROLL for (int v = 0; v < nv; v++) {
            vec tr = re[r][v], ti = im[r][v];
            memcpy(out_re + v * VL, &tr, sizeof tr);
            memcpy(out_im + v * VL, &ti, sizeof ti);
        }
        XCONV_RT *cr = c + 2 * r * rs_c;
        for (int j = 0; j < n; j++) {
            XCONV_RT *e = cr + 2 * j * cs_c;
            e[0] = accumulate ? e[0] + out_re[j] : out_re[j];
            e[1] = accumulate ? e[1] + out_im[j] : out_im[j];
        }
    }
#endif
}

/* The ISA wrappers: each fixes the register block of its row in gemm.c's geometry table. */
static void XG_NAME(kernel_generic)(int64_t k, const void *a, const void *b, void *c,
                                    int64_t rs_c, int64_t cs_c, int m, int n, int accumulate)
{
    XG_NAME(kernel_body)(XCONV_NCOMP == 1 ? XG_GENERIC_MR_REAL : XG_GENERIC_MR_CPLX, 1, k,
                         (const XCONV_RT *)a, (const XCONV_RT *)b, (XCONV_RT *)c, rs_c, cs_c,
                         m, n, accumulate);
}

#if XG_X86
XG_TARGET_AVX2 static void XG_NAME(kernel_avx2)(int64_t k, const void *a, const void *b,
                                                void *c, int64_t rs_c, int64_t cs_c, int m,
                                                int n, int accumulate)
{
    XG_NAME(kernel_body)(XCONV_NCOMP == 1 ? XG_AVX2_MR_REAL : XG_AVX2_MR_CPLX, 1, k,
                         (const XCONV_RT *)a, (const XCONV_RT *)b, (XCONV_RT *)c, rs_c, cs_c,
                         m, n, accumulate);
}

XG_TARGET_AVX512 static void XG_NAME(kernel_avx512)(int64_t k, const void *a, const void *b,
                                                    void *c, int64_t rs_c, int64_t cs_c, int m,
                                                    int n, int accumulate)
{
    XG_NAME(kernel_body)(XG_AVX512_MR, XCONV_NCOMP == 1 ? 2 : 1, k, (const XCONV_RT *)a,
                         (const XCONV_RT *)b, (XCONV_RT *)c, rs_c, cs_c, m, n, accumulate);
}
#endif

/* dst[i*ds] += src[i*ss]: complex values add component-wise, so the body is real. */
static void XG_NAME(ct_add)(void *dst, int64_t ds, const void *src, int64_t ss, int64_t n)
{
    XCONV_RT *restrict d = (XCONV_RT *)dst;
    const XCONV_RT *restrict s = (const XCONV_RT *)src;
    if (ds == 1 && ss == 1) {
        for (int64_t i = 0; i < n * XCONV_NCOMP; i++) d[i] += s[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        for (int q = 0; q < XCONV_NCOMP; q++)
            d[(i * ds) * XCONV_NCOMP + q] += s[(i * ss) * XCONV_NCOMP + q];
}

#undef XG_NAME
#undef XG_CAT
#undef XG_CAT2
#undef XCONV_T
#undef XCONV_RT
#undef XCONV_NCOMP
