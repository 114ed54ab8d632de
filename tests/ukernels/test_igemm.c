/*
 * test_igemm.c — every indirect-GEMM microkernel variant (src/cpu/ukernels/igemm.h) this CPU
 * runs, for every compute type, against a plain triple loop written here: every m <= mr,
 * n in {1, nr-1, nr} (and the rest for small nr), run length len in {1, 2, 7, 33}, ntaps in
 * {0, 1, 3}, with and without init. Integers are compared bit for bit (wrapping), floats
 * within a few ulps of the sum of |products|; columns past n and rows past m must stay
 * untouched (canaries). Besides that oracle, an invariant: the first m rows must have the
 * bits of the same call over all mr rows (short tiles run bodies of fewer rows, and a
 * position's sum must not depend on the tile it falls in). The VNNI byte kernels also run
 * through kernel_y, which stores the sums' low 1, 2 or 4 bytes into y rows and leaves c (its
 * accumulate input) as it was, and kernel_gemm, which runs any number of rows at even steps;
 * every other variant's kernel_gemm runs such rows into y of the compute type, against the
 * same triple loop.
 */
#include "cpu/ukernels/igemm.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* One compute-type value as up to two doubles (re, im) or a u64. */
static void put_val(xconv_ctype ct, void *p, uint64_t u, double re, double im)
{
    switch (ct) {
    case XCONV_CT_U32: *(uint32_t *)p = (uint32_t)u; break;
    case XCONV_CT_U64: *(uint64_t *)p = u; break;
    case XCONV_CT_F32: *(float *)p = (float)re; break;
    case XCONV_CT_F64: *(double *)p = re; break;
    case XCONV_CT_C64: ((float *)p)[0] = (float)re, ((float *)p)[1] = (float)im; break;
    case XCONV_CT_C128: ((double *)p)[0] = re, ((double *)p)[1] = im; break;
    default: break;
    }
}

static void get_val(xconv_ctype ct, const void *p, uint64_t *u, double *re, double *im)
{
    *u = 0, *re = 0, *im = 0;
    switch (ct) {
    case XCONV_CT_U32: *u = *(const uint32_t *)p; break;
    case XCONV_CT_U64: *u = *(const uint64_t *)p; break;
    case XCONV_CT_F32: *re = *(const float *)p; break;
    case XCONV_CT_F64: *re = *(const double *)p; break;
    case XCONV_CT_C64: *re = ((const float *)p)[0], *im = ((const float *)p)[1]; break;
    case XCONV_CT_C128: *re = ((const double *)p)[0], *im = ((const double *)p)[1]; break;
    default: break;
    }
}

/* Value j of a packed row of nr (B's rows and init): as is, or for complex as split planes
 * (nr real parts, then nr imaginary parts). */
static void put_packed(xconv_ctype ct, bool cplx, char *row, int j, int nr, uint64_t u, double re, double im)
{
    const size_t cs = xconv__ctype_size(ct), half = cs / 2;
    if (!cplx) {
        put_val(ct, row + (size_t)j * cs, u, re, 0);
        return;
    }
    char tmp[16];
    put_val(ct, tmp, 0, re, im);
    memcpy(row + (size_t)j * half, tmp, half);
    memcpy(row + ((size_t)nr + (size_t)j) * half, tmp + half, half);
}

/* Whether the kernel's value at cell misses the oracle's sum (su for integers, wrapped to
 * the type; sre, sim for floats within 4 eps of the sum of |terms| mag, plus one). */
static bool value_bad(xconv_ctype ct, const void *cell, uint64_t su, double sre, double sim, double mag)
{
    uint64_t gu;
    double gre, gim;
    get_val(ct, cell, &gu, &gre, &gim);
    if (ct == XCONV_CT_U32 || ct == XCONV_CT_U64) {
        const uint64_t mask = ct == XCONV_CT_U32 ? 0xffffffffull : ~0ull;
        return (gu & mask) != (su & mask);
    }
    const double eps = (ct == XCONV_CT_F32 || ct == XCONV_CT_C64) ? 0x1p-23 : 0x1p-52;
    const double tol = 4.0 * eps * (mag + 1.0);
    return fabs(gre - sre) > tol || fabs(gim - sim) > tol;
}

static void run_case(const xconv_igemm_geom *g, int m, int n, int64_t len, int64_t ntaps, bool with_init,
                     bool accumulate)
{
    const xconv_ctype ct = g->ct;
    const size_t cs = xconv__ctype_size(ct);
    const bool is_int = ct == XCONV_CT_U32 || ct == XCONV_CT_U64;
    const bool cplx = g->ncomp == 2;
    const int mr = g->mr, nr = g->nr;
    /* A: ntaps*mr rows of len values; B: ntaps blocks of len rows x nr (split planes if complex) */
    const int64_t taps = ntaps > 0 ? ntaps : 1;
    char *abuf = malloc(cs * (size_t)(taps * mr * len));
    char *bbuf = malloc(cs * (size_t)(taps * len * nr));
    char *init = malloc(cs * (size_t)nr);
    const void **a = malloc(sizeof(void *) * (size_t)(taps * mr));
    const void **b = malloc(sizeof(void *) * (size_t)taps);
    /* logical values kept here as doubles / u64 for the oracle */
    double *are = calloc((size_t)(taps * mr * len), sizeof(double)), *aim = calloc((size_t)(taps * mr * len), sizeof(double));
    uint64_t *au = calloc((size_t)(taps * mr * len), sizeof(uint64_t));
    double *bre = calloc((size_t)(taps * len * nr), sizeof(double)), *bim = calloc((size_t)(taps * len * nr), sizeof(double));
    uint64_t *bu = calloc((size_t)(taps * len * nr), sizeof(uint64_t));
    double ire[64] = {0}, iim[64] = {0};
    uint64_t iu[64] = {0};
    for (int64_t i = 0; i < taps * mr * len; i++) {
        au[i] = rnd();
        are[i] = (double)(int)(rnd() % 17) - 8.0 + 0.25;
        aim[i] = (double)(int)(rnd() % 13) - 6.0;
        put_val(ct, abuf + (size_t)i * cs, au[i], are[i], aim[i]);
    }
    for (int64_t t = 0; t < taps; t++)
        for (int i = 0; i < mr; i++) a[t * mr + i] = abuf + (size_t)((t * mr + i) * len) * cs;
    for (int64_t t = 0; t < taps; t++) {
        b[t] = bbuf + (size_t)(t * len * nr) * cs;
        for (int64_t l = 0; l < len; l++)
            for (int j = 0; j < nr; j++) {
                const int64_t idx = (t * len + l) * nr + j;
                const bool live = j < n; /* packing zero-pads past n */
                bu[idx] = live ? rnd() : 0;
                bre[idx] = live ? (double)(int)(rnd() % 11) - 5.0 : 0.0;
                bim[idx] = live ? (double)(int)(rnd() % 7) - 3.0 : 0.0;
                put_packed(ct, cplx, bbuf + (size_t)((t * len + l) * nr) * cs, j, nr, bu[idx], bre[idx], bim[idx]);
            }
    }
    for (int j = 0; j < nr; j++) {
        iu[j] = with_init ? rnd() : 0;
        ire[j] = with_init ? (double)(int)(rnd() % 9) - 4.0 : 0.0;
        iim[j] = with_init ? (double)(int)(rnd() % 5) - 2.0 : 0.0;
        put_packed(ct, cplx, init, j, nr, iu[j], ire[j], iim[j]);
    }
    /* C: mr rows of nr + 4 values, all canary bytes */
    const int ldc = nr + 4;
    unsigned char *cbuf = malloc(cs * (size_t)(mr * ldc));
    memset(cbuf, 0xA5, cs * (size_t)(mr * ldc));
    void *c[8] = {0};
    for (int i = 0; i < mr; i++) c[i] = i < m ? cbuf + (size_t)(i * ldc) * cs : NULL;
    /* accumulate: the sums start from what C holds (random), and init is ignored */
    uint64_t pu[8][64] = {{0}};
    double pre[8][64] = {{0}}, pim[8][64] = {{0}};
    if (accumulate)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                pu[i][j] = rnd();
                pre[i][j] = (double)(int)(rnd() % 15) - 7.0;
                pim[i][j] = g->ncomp == 2 ? (double)(int)(rnd() % 9) - 4.0 : 0.0;
                put_val(ct, cbuf + (size_t)(i * ldc + j) * cs, pu[i][j], pre[i][j], pim[i][j]);
            }

    /* the same call over all mr rows (rows past m read what they point at): its first m
     * rows must have the same bits, whichever body of fewer rows ran the short tile */
    unsigned char *fbuf = malloc(cs * (size_t)(mr * ldc));
    memcpy(fbuf, cbuf, cs * (size_t)(mr * ldc));
    void *cf[8];
    for (int i = 0; i < mr; i++) cf[i] = fbuf + (size_t)(i * ldc) * cs;
    g->kernel(ntaps, len, a, b, with_init ? init : NULL, c, m, n, accumulate);
    g->kernel(ntaps, len, a, b, with_init ? init : NULL, cf, mr, n, accumulate);
    bool same = true;
    for (int i = 0; i < m; i++)
        same &= memcmp(cbuf + (size_t)(i * ldc) * cs, fbuf + (size_t)(i * ldc) * cs, cs * (size_t)n) == 0;
    XT_CHECK(same, "%s %s: m %d n %d len %lld ntaps %lld init %d acc %d: rows differ from a "
             "call over all %d rows", xconv__ctype_name(ct), g->isa, m, n, (long long)len,
             (long long)ntaps, with_init, accumulate, mr);
    free(fbuf);

    int bad = 0;
    for (int i = 0; i < mr && !bad; i++)
        for (int j = 0; j < ldc && !bad; j++) {
            const unsigned char *cell = cbuf + (size_t)(i * ldc + j) * cs;
            if (i >= m || j >= n) {
                for (size_t q = 0; q < cs; q++) bad |= cell[q] != 0xA5;
                if (bad) XT_CHECK(0, "%s %s: canary at row %d col %d overwritten (m %d n %d)",
                                  xconv__ctype_name(ct), g->isa, i, j, m, n);
                continue;
            }
            uint64_t su = accumulate ? pu[i][j] : iu[j];
            double sre = accumulate ? pre[i][j] : ire[j];
            double sim = accumulate ? pim[i][j] : cplx ? iim[j] : 0.0;
            double mag = fabs(sre) + fabs(sim);
            for (int64_t t = 0; t < ntaps; t++)
                for (int64_t l = 0; l < len; l++) {
                    const int64_t ai = (t * mr + i) * len + l, bi = (t * len + l) * nr + j;
                    su += au[ai] * bu[bi];
                    if (cplx) {
                        sre += are[ai] * bre[bi] - aim[ai] * bim[bi];
                        sim += are[ai] * bim[bi] + aim[ai] * bre[bi];
                        mag += fabs(are[ai] * bre[bi]) + fabs(aim[ai] * bim[bi]) +
                               fabs(are[ai] * bim[bi]) + fabs(aim[ai] * bre[bi]);
                    } else {
                        sre += are[ai] * bre[bi];
                        mag += fabs(are[ai] * bre[bi]);
                    }
                }
            bad = value_bad(ct, cell, su, sre, sim, mag);
            if (bad) {
                uint64_t gu;
                double gre, gim;
                get_val(ct, cell, &gu, &gre, &gim);
                XT_CHECK(0, "%s %s: m %d n %d len %lld ntaps %lld init %d acc %d: c[%d][%d] = %g %g, "
                         "expected %g %g", xconv__ctype_name(ct), g->isa, m, n, (long long)len,
                         (long long)ntaps, with_init, accumulate, i, j, is_int ? (double)gu : gre, gim, is_int ? (double)su : sre, sim);
            }
        }
    if (!bad) XT_CHECK(1, "ok");
    free(abuf), free(bbuf), free(init), free(a), free(b), free(are), free(aim), free(au);
    free(bre), free(bim), free(bu), free(cbuf);
}

/* The VNNI byte kernels: A bytes through pointers, B in groups of four reduction indices
 * (channel j's four bytes at j*4), int32 results that wrap; one variant reads A as unsigned
 * and B as signed bytes, the other the reverse. Oracle: the same sums in int64, wrapped.
 * y_bytes 0: kernel, into c; 1, 2, 4: kernel_y, the sums' low bytes into rows of y. */
static void run_vnni_case(const xconv_igemm_geom *g, bool a_unsigned, int m, int n, int64_t len,
                          int64_t ntaps, bool with_init, bool accumulate, int y_bytes)
{
    const int mr = g->mr, nr = g->nr;
    const int64_t taps = ntaps > 0 ? ntaps : 1;
    unsigned char *abuf = malloc((size_t)(taps * mr * len)), *bbuf = malloc((size_t)(taps * len * nr));
    const void **a = malloc(sizeof(void *) * (size_t)(taps * mr)), **b = malloc(sizeof(void *) * (size_t)taps);
    int32_t init[64], cbuf[8][68];
    for (int64_t i = 0; i < taps * mr * len; i++) abuf[i] = (unsigned char)rnd();
    for (int64_t i = 0; i < taps * len * nr; i++) bbuf[i] = (unsigned char)rnd();
    for (int64_t t = 0; t < taps; t++) {
        for (int i = 0; i < mr; i++) a[t * mr + i] = abuf + (t * mr + i) * len;
        b[t] = bbuf + t * len * nr;
    }
    for (int j = 0; j < nr; j++) init[j] = (int32_t)rnd();
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 68; j++) cbuf[i][j] = accumulate && i < m && j < n ? (int32_t)rnd() : 0x5a5a5a5a;
    int32_t before[8][68];
    memcpy(before, cbuf, sizeof before);
    /* y: rows of 68 values of y_bytes, canary bytes; rows past m are NULL */
    unsigned char ybuf[8][68 * 4];
    memset(ybuf, 0xA5, sizeof ybuf);
    void *c[8] = {0}, *y[8] = {0};
    for (int i = 0; i < mr; i++) c[i] = i < m ? cbuf[i] : NULL, y[i] = i < m ? ybuf[i] : NULL;
    if (y_bytes)
        g->kernel_y(ntaps, len, a, b, with_init ? init : NULL, c, m, n, accumulate, y, y_bytes);
    else
        g->kernel(ntaps, len, a, b, with_init ? init : NULL, c, m, n, accumulate);
    int bad = 0;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < 68; j++) {
            if (y_bytes) /* c is input only */
                bad |= cbuf[i][j] != before[i][j];
            for (int q = 0; y_bytes && (i >= m || j >= n) && q < y_bytes; q++)
                bad |= ybuf[i][j * y_bytes + q] != 0xA5;
            if (i >= m || j >= n) {
                bad |= cbuf[i][j] != before[i][j];
                continue;
            }
            uint32_t sum = accumulate ? (uint32_t)before[i][j] : with_init ? (uint32_t)init[j] : 0u;
            for (int64_t t = 0; t < ntaps; t++)
                for (int64_t l = 0; l < len; l++) {
                    const unsigned char av = abuf[(t * mr + i) * len + l];
                    const unsigned char bv = bbuf[t * len * nr + (l / 4) * nr * 4 + j * 4 + l % 4];
                    const int64_t prod = a_unsigned ? (int64_t)av * (int8_t)bv : (int64_t)(int8_t)av * bv;
                    sum += (uint32_t)prod;
                }
            if (!y_bytes) {
                bad |= (uint32_t)cbuf[i][j] != sum;
                continue;
            }
            for (int q = 0; q < y_bytes; q++) /* little-endian low bytes of the sum */
                bad |= ybuf[i][j * y_bytes + q] != (unsigned char)(sum >> (8 * q));
        }
    XT_CHECK(!bad, "vnni %s: m %d n %d len %lld ntaps %lld init %d acc %d y_bytes %d",
             a_unsigned ? "i8" : "u8", m, n, (long long)len, (long long)ntaps, with_init,
             accumulate, y_bytes);
    free(abuf), free(bbuf), free(a), free(b);
}

/* kernel_gemm: mt rows of A at a row step (with a gap past len), one panel, y rows at a row
 * step (a gap past n values: canaries), every y width; oracle as above. */
static void run_vnni_gemm_case(const xconv_igemm_geom *g, bool a_unsigned, int64_t mt, int n,
                               int64_t len, bool with_init, int y_bytes)
{
    const int nr = g->nr;
    const ptrdiff_t lda = (ptrdiff_t)len + 5, ldy = (ptrdiff_t)(nr + 3) * y_bytes;
    unsigned char *abuf = malloc((size_t)(mt * lda)), *bbuf = malloc((size_t)(len * nr));
    unsigned char *ybuf = malloc((size_t)(mt * ldy));
    int32_t init[64];
    for (int64_t i = 0; i < mt * lda; i++) abuf[i] = (unsigned char)rnd();
    for (int64_t i = 0; i < len * nr; i++) bbuf[i] = (unsigned char)rnd();
    for (int j = 0; j < nr; j++) init[j] = (int32_t)rnd();
    memset(ybuf, 0xA5, (size_t)(mt * ldy));
    g->kernel_gemm(mt, len, abuf, lda, bbuf, with_init ? init : NULL, ybuf, ldy, n, y_bytes);
    int bad = 0;
    for (int64_t i = 0; i < mt; i++)
        for (int j = 0; j < nr + 3; j++) {
            const unsigned char *cell = ybuf + i * ldy + j * y_bytes;
            if (j >= n) {
                for (int q = 0; q < y_bytes; q++) bad |= cell[q] != 0xA5;
                continue;
            }
            uint32_t sum = with_init ? (uint32_t)init[j] : 0u;
            for (int64_t l = 0; l < len; l++) {
                const unsigned char av = abuf[i * lda + l];
                const unsigned char bv = bbuf[(l / 4) * nr * 4 + j * 4 + l % 4];
                sum += (uint32_t)(a_unsigned ? (int64_t)av * (int8_t)bv : (int64_t)(int8_t)av * bv);
            }
            for (int q = 0; q < y_bytes; q++) bad |= cell[q] != (unsigned char)(sum >> (8 * q));
        }
    XT_CHECK(!bad, "vnni gemm %s: mt %lld n %d len %lld init %d y_bytes %d",
             a_unsigned ? "i8" : "u8", (long long)mt, n, (long long)len, with_init, y_bytes);
    free(abuf), free(bbuf), free(ybuf);
}

/* kernel_gemm of the compute-type variants: mt rows of A at a row step (a gap of canary
 * values past len), one panel (split planes if complex), init or zeros, and y rows of the
 * compute type at a row step (canaries past n and in the gap); oracle: the triple loop in
 * double / u64, as run_case. */
static void run_gemm_case(const xconv_igemm_geom *g, int64_t mt, int n, int64_t len, bool with_init)
{
    const xconv_ctype ct = g->ct;
    const size_t cs = xconv__ctype_size(ct);
    const bool cplx = g->ncomp == 2;
    const int nr = g->nr;
    const int64_t lda = len + 3, ldy = nr + 5; /* in values */
    char *abuf = malloc(cs * (size_t)(mt * lda)), *bbuf = malloc(cs * (size_t)(len * nr));
    char *init = malloc(cs * (size_t)nr), *ybuf = malloc(cs * (size_t)(mt * ldy));
    double *are = calloc((size_t)(mt * len), sizeof(double)), *aim = calloc((size_t)(mt * len), sizeof(double));
    double *bre = calloc((size_t)(len * nr), sizeof(double)), *bim = calloc((size_t)(len * nr), sizeof(double));
    uint64_t *au = calloc((size_t)(mt * len), sizeof(uint64_t)), *bu = calloc((size_t)(len * nr), sizeof(uint64_t));
    double ire[64] = {0}, iim[64] = {0};
    uint64_t iu[64] = {0};
    memset(abuf, 0x7f, cs * (size_t)(mt * lda)); /* the gaps: large values that must not be read */
    for (int64_t i = 0; i < mt; i++)
        for (int64_t l = 0; l < len; l++) {
            const int64_t k = i * len + l;
            au[k] = rnd();
            are[k] = (double)(int)(rnd() % 17) - 8.0 + 0.25;
            aim[k] = (double)(int)(rnd() % 13) - 6.0;
            put_val(ct, abuf + (size_t)(i * lda + l) * cs, au[k], are[k], aim[k]);
        }
    for (int64_t l = 0; l < len; l++)
        for (int j = 0; j < nr; j++) {
            const int64_t k = l * nr + j;
            const bool live = j < n;
            bu[k] = live ? rnd() : 0;
            bre[k] = live ? (double)(int)(rnd() % 11) - 5.0 : 0.0;
            bim[k] = live ? (double)(int)(rnd() % 7) - 3.0 : 0.0;
            put_packed(ct, cplx, bbuf + (size_t)(l * nr) * cs, j, nr, bu[k], bre[k], bim[k]);
        }
    for (int j = 0; j < nr; j++) {
        iu[j] = with_init ? rnd() : 0;
        ire[j] = with_init ? (double)(int)(rnd() % 9) - 4.0 : 0.0;
        iim[j] = with_init && cplx ? (double)(int)(rnd() % 5) - 2.0 : 0.0;
        put_packed(ct, cplx, init, j, nr, iu[j], ire[j], iim[j]);
    }
    memset(ybuf, 0xA5, cs * (size_t)(mt * ldy));
    g->kernel_gemm(mt, len, abuf, (ptrdiff_t)(lda * (int64_t)cs), bbuf, with_init ? init : NULL, ybuf,
                   (ptrdiff_t)(ldy * (int64_t)cs), n, (int)cs);
    int bad = 0;
    for (int64_t i = 0; i < mt && !bad; i++)
        for (int j = 0; j < ldy && !bad; j++) {
            const unsigned char *cell = (const unsigned char *)ybuf + (size_t)(i * ldy + j) * cs;
            if (j >= n) {
                for (size_t q = 0; q < cs; q++) bad |= cell[q] != 0xA5;
                continue;
            }
            uint64_t su = iu[j];
            double sre = ire[j], sim = iim[j], mag = fabs(sre) + fabs(sim);
            for (int64_t l = 0; l < len; l++) {
                const int64_t ai = i * len + l, bi = l * nr + j;
                su += au[ai] * bu[bi];
                if (cplx) {
                    sre += are[ai] * bre[bi] - aim[ai] * bim[bi];
                    sim += are[ai] * bim[bi] + aim[ai] * bre[bi];
                    mag += fabs(are[ai] * bre[bi]) + fabs(aim[ai] * bim[bi]) + fabs(are[ai] * bim[bi]) +
                           fabs(aim[ai] * bre[bi]);
                } else {
                    sre += are[ai] * bre[bi];
                    mag += fabs(are[ai] * bre[bi]);
                }
            }
            bad = value_bad(ct, cell, su, sre, sim, mag);
        }
    XT_CHECK(!bad, "%s %s gemm: mt %lld n %d len %lld init %d", xconv__ctype_name(ct), g->isa,
             (long long)mt, n, (long long)len, with_init);
    free(abuf), free(bbuf), free(init), free(ybuf), free(are), free(aim), free(bre), free(bim);
    free(au), free(bu);
}

int main(void)
{
    /* i8 and u8 x, on the wide block and then the narrow one */
    for (int v = 0; v < 4; v++) {
        const xconv_igemm_geom *g = v < 2 ? xconv__igemm_geom_vnni(v % 2 == 0)
                                          : xconv__igemm_geom_vnni_narrow(v % 2 == 0);
        if (!g) continue;
        XT_CHECK(g->kernel_y != NULL, "the VNNI variant has a kernel_y");
        if (!g->kernel_y) continue;
        /* n around every 16-lane vector of the panel (64 wide, or 32) */
        const int ns_all[] = {1, 15, 16, 17, 31, 32, 33, 48, 63, 64};
        int ns[10], nn = 0;
        for (int a = 0; a < 10; a++)
            if (ns_all[a] <= g->nr) ns[nn++] = ns_all[a];
        const int64_t lens[] = {4, 8, 36}, tapss[] = {0, 1, 3};
        const int ybs[] = {0, 1, 2, 4};
        const bool xu = v % 2 == 0;
        for (int m = 1; m <= g->mr; m++)
            for (int a = 0; a < nn; a++)
                for (int l = 0; l < 3; l++)
                    for (int t = 0; t < 3; t++)
                        for (int init = 0; init < 2; init++)
                            for (int acc = 0; acc < 2; acc++)
                                for (int yb = 0; yb < 4; yb++)
                                    run_vnni_case(g, xu, m, ns[a], lens[l], tapss[t], init, acc,
                                                  ybs[yb]);
        /* kernel_gemm: row counts around the tiles of mr, and a whole group of tiles */
        XT_CHECK(g->kernel_gemm != NULL, "the VNNI variant has a kernel_gemm");
        if (!g->kernel_gemm) continue;
        const int64_t mts[] = {1, (int64_t)g->mr - 1, g->mr, (int64_t)g->mr + 1, 2 * (int64_t)g->mr + 1, 48};
        for (int mi = 0; mi < 6; mi++)
            for (int a = 0; a < nn; a++)
                for (int l = 0; l < 3; l++)
                    for (int init = 0; init < 2; init++)
                        for (int yb = 1; yb < 4; yb++)
                            run_vnni_gemm_case(g, xu, mts[mi], ns[a], lens[l], init, ybs[yb]);
    }

    const char *isas[] = {"generic", "avx2", "avx512"};
    int variants = 0;
    for (int ct = 0; ct < XCONV_CT_COUNT; ct++) {
        /* the three ISA variants, then the narrow block for groups of few channels */
        for (int v = 0; v < 4; v++) {
            const xconv_igemm_geom *g = v < 3 ? xconv__igemm_geom_isa((xconv_ctype)ct, isas[v])
                                              : xconv__igemm_geom_narrow((xconv_ctype)ct);
            if (!g) continue;
            variants++;
            const int64_t lens[] = {1, 2, 7, 33}, tapss[] = {0, 1, 3};
            int ns[8], nn = 0;
            ns[nn++] = 1;
            if (g->nr > 2) ns[nn++] = g->nr - 1;
            ns[nn++] = g->nr;
            if (g->nr > 4) ns[nn++] = g->nr / 2 + 1;
            for (int m = 1; m <= g->mr; m++)
                for (int a = 0; a < nn; a++)
                    for (int l = 0; l < 4; l++)
                        for (int t = 0; t < 3; t++)
                            for (int init = 0; init < 2; init++)
                                for (int acc = 0; acc < 2; acc++)
                                    run_case(g, m, ns[a], lens[l], tapss[t], init, acc);
            /* kernel_gemm: row counts around the tiles of mr (a partial last tile reads its
             * last row again), and a whole group of tiles */
            XT_CHECK(g->kernel_gemm != NULL, "%s %s has a kernel_gemm", xconv__ctype_name(g->ct), g->isa);
            if (!g->kernel_gemm) continue;
            const int64_t mts[] = {1, (int64_t)g->mr - 1, g->mr, (int64_t)g->mr + 1, 2 * (int64_t)g->mr + 1, 48};
            for (int mi = 0; mi < 6; mi++)
                for (int a = 0; a < nn; a++)
                    for (int l = 0; l < 4; l++)
                        for (int init = 0; init < 2; init++)
                            if (mts[mi] > 0) run_gemm_case(g, mts[mi], ns[a], lens[l], init);
        }
    }
    XT_CHECK(variants >= 6, "at least the generic variant of each compute type runs (%d)", variants);
    XT_CHECK(xconv__igemm_geom(XCONV_CT_F32) != NULL, "a best f32 kernel exists");
    return xt_finish("test_igemm");
}
