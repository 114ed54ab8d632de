/*
 * igemm.tmpl.h — the indirect-GEMM kernel body of igemm.h for one compute type, written
 * with GCC/clang vector extensions over XI_VB-byte vectors (64, or 32 for AVX2: gcc lowers
 * 64-byte vectors on AVX2 through the stack) so that one body serves every ISA: the wrappers
 * in igemm.c pick the vector width, the register block (mr rows x nv vectors) and the target.
 * a holds `as` pointers per tap (the variant's full mr); a body of fewer rows (mr < as) runs
 * tiles of at most mr live rows, each row's sum the same operations in the same order.
 *
 *   #define XCONV_T     f32      name suffix
 *   #define XCONV_RT    float    the real component type
 *   #define XCONV_NCOMP 1        1 real, 2 complex
 *   #define XI_VB       64       vector bytes (the includer's; kept)
 *   #include "igemm.tmpl.h"      defines igemm_body_f32_64 (always inlined)
 */
#define XI_CAT2(a, b) a##_##b
#define XI_CAT(a, b)  XI_CAT2(a, b)
#define XI_NAME(f)    XI_CAT(XI_CAT(f, XCONV_T), XI_VB)

typedef XCONV_RT XI_NAME(ivec) __attribute__((vector_size(XI_VB)));

static inline __attribute__((always_inline)) void
XI_NAME(igemm_body)(const int mr, const int nv, const int as, int64_t ntaps, int64_t len, const void *const *a,
                    const void *const *b, const void *init, void *const *c, int m, int n,
                    int accumulate)
{
    typedef XI_NAME(ivec) vec;
    enum { VL = (int)(sizeof(vec) / sizeof(XCONV_RT)) };
    const int nr = nv * VL;
    if (n > nr) n = nr; /* never true; tells the compiler the stores below stay in bounds */
    if (n < 0) n = 0;
#if XCONV_NCOMP == 1
    vec acc[XI_MAX_MR][XI_MAX_NV];
    XI_UNROLL for (int v = 0; v < nv; v++) {
        vec iv = (vec){0};
        if (init && !accumulate) memcpy(&iv, (const XCONV_RT *)init + v * VL, sizeof iv);
        XI_UNROLL for (int r = 0; r < mr; r++) acc[r][v] = iv;
    }
    if (accumulate) {
        XI_UNROLL for (int r = 0; r < mr; r++) {
            if (r >= m) continue;
            const XCONV_RT *cr = (const XCONV_RT *)c[r];
            if (n == nr) { /* whole rows load as vectors: a staged copy stalls store forwarding */
                XI_UNROLL for (int v = 0; v < nv; v++) memcpy(&acc[r][v], cr + v * VL, sizeof(vec));
                continue;
            }
            XCONV_RT row[XI_MAX_NV * VL] = {0};
            memcpy(row, cr, sizeof(XCONV_RT) * (size_t)n);
            XI_UNROLL for (int v = 0; v < nv; v++) memcpy(&acc[r][v], row + v * VL, sizeof(vec));
        }
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const XCONV_RT *ap[XI_MAX_MR];
        XI_UNROLL for (int r = 0; r < mr; r++) ap[r] = (const XCONV_RT *)a[t * as + r];
        const XCONV_RT *bp = (const XCONV_RT *)b[t];
        for (int64_t l = 0; l < len; l++, bp += nr) {
            vec bv[XI_MAX_NV];
            XI_UNROLL for (int v = 0; v < nv; v++) memcpy(&bv[v], bp + v * VL, sizeof(vec));
            XI_UNROLL for (int r = 0; r < mr; r++) {
                const XCONV_RT av = ap[r][l];
                XI_UNROLL for (int v = 0; v < nv; v++) acc[r][v] += av * bv[v];
            }
        }
    }
    XI_UNROLL for (int r = 0; r < mr; r++) {
        if (r >= m) continue;
        XCONV_RT *cr = (XCONV_RT *)c[r];
        if (n == nr) {
            XI_UNROLL for (int v = 0; v < nv; v++) memcpy(cr + v * VL, &acc[r][v], sizeof(vec));
        } else {
            XCONV_RT out[XI_MAX_NV * VL];
            XI_UNROLL for (int v = 0; v < nv; v++) memcpy(out + v * VL, &acc[r][v], sizeof(vec));
            memcpy(cr, out, sizeof(XCONV_RT) * (size_t)n);
        }
    }
#else
    /* (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br); b rows are split planes */
    vec re[XI_MAX_MR][XI_MAX_NV], im[XI_MAX_MR][XI_MAX_NV];
    XI_UNROLL for (int v = 0; v < nv; v++) {
        vec ir = (vec){0}, ii = (vec){0};
        if (init && !accumulate) {
            memcpy(&ir, (const XCONV_RT *)init + v * VL, sizeof ir);
            memcpy(&ii, (const XCONV_RT *)init + nr + v * VL, sizeof ii);
        }
        XI_UNROLL for (int r = 0; r < mr; r++) re[r][v] = ir, im[r][v] = ii;
    }
    if (accumulate) {
        XI_UNROLL for (int r = 0; r < mr; r++) {
            if (r >= m) continue;
            XCONV_RT row_re[XI_MAX_NV * VL] = {0}, row_im[XI_MAX_NV * VL] = {0};
            const XCONV_RT *cr = (const XCONV_RT *)c[r];
            for (int j = 0; j < n; j++) row_re[j] = cr[2 * j], row_im[j] = cr[2 * j + 1];
            XI_UNROLL for (int v = 0; v < nv; v++) {
                memcpy(&re[r][v], row_re + v * VL, sizeof(vec));
                memcpy(&im[r][v], row_im + v * VL, sizeof(vec));
            }
        }
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const XCONV_RT *ap[XI_MAX_MR];
        XI_UNROLL for (int r = 0; r < mr; r++) ap[r] = (const XCONV_RT *)a[t * as + r];
        const XCONV_RT *bp = (const XCONV_RT *)b[t];
        for (int64_t l = 0; l < len; l++, bp += 2 * nr) {
            vec br[XI_MAX_NV], bi[XI_MAX_NV];
            XI_UNROLL for (int v = 0; v < nv; v++) {
                memcpy(&br[v], bp + v * VL, sizeof(vec));
                memcpy(&bi[v], bp + nr + v * VL, sizeof(vec));
            }
            XI_UNROLL for (int r = 0; r < mr; r++) {
                const XCONV_RT ar = ap[r][2 * l], ai = ap[r][2 * l + 1];
                XI_UNROLL for (int v = 0; v < nv; v++) {
                    re[r][v] += ar * br[v] - ai * bi[v];
                    im[r][v] += ar * bi[v] + ai * br[v];
                }
            }
        }
    }
    XI_UNROLL for (int r = 0; r < mr; r++) {
        if (r >= m) continue;
        XCONV_RT out_re[XI_MAX_NV * VL], out_im[XI_MAX_NV * VL];
        XI_UNROLL for (int v = 0; v < nv; v++) {
            memcpy(out_re + v * VL, &re[r][v], sizeof(vec));
            memcpy(out_im + v * VL, &im[r][v], sizeof(vec));
        }
        XCONV_RT *cr = (XCONV_RT *)c[r];
        for (int j = 0; j < n; j++) cr[2 * j] = out_re[j], cr[2 * j + 1] = out_im[j];
    }
#endif
}

#undef XI_NAME
#undef XI_CAT
#undef XI_CAT2
#undef XCONV_T
#undef XCONV_RT
#undef XCONV_NCOMP
