/*
 * test_gemm.c — the compute-type GEMM under cpu.im2col (src/cpu/engines/gemm.h) against a
 * naive triple loop: every compute type and every kernel variant this CPU runs, odd sizes
 * around the register block, k beyond one cache block, strided and transposed C, with and
 * without accumulation. Data are small integers (floats) or full-range bits (integers), so
 * every expected value is exact and compared bit for bit. Real data on 1, 2 and 3 threads
 * must give identical bits.
 */
#include "common/tensor_util.h"
#include "cpu/engines/gemm.h"
#include "harness.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

typedef struct ctv {
    uint64_t u;
    double re, im;
} ctv;

static bool ct_is_int(xconv_ctype ct)
{
    return ct == XCONV_CT_U32 || ct == XCONV_CT_U64;
}

static ctv ct_get(xconv_ctype ct, const void *base, int64_t i)
{
    ctv v = {0, 0, 0};
    const char *p = (const char *)base + i * (int64_t)xconv__ctype_size(ct);
    switch (ct) {
    case XCONV_CT_U32: {
        uint32_t t;
        memcpy(&t, p, 4);
        v.u = t;
        break;
    }
    case XCONV_CT_U64: memcpy(&v.u, p, 8); break;
    case XCONV_CT_F32: {
        float t;
        memcpy(&t, p, 4);
        v.re = t;
        break;
    }
    case XCONV_CT_F64: memcpy(&v.re, p, 8); break;
    case XCONV_CT_C64: {
        float t[2];
        memcpy(t, p, 8);
        v.re = t[0], v.im = t[1];
        break;
    }
    default: {
        double t[2];
        memcpy(t, p, 16);
        v.re = t[0], v.im = t[1];
        break;
    }
    }
    return v;
}

static void ct_set(xconv_ctype ct, void *base, int64_t i, ctv v)
{
    char *p = (char *)base + i * (int64_t)xconv__ctype_size(ct);
    switch (ct) {
    case XCONV_CT_U32: {
        uint32_t t = (uint32_t)v.u;
        memcpy(p, &t, 4);
        break;
    }
    case XCONV_CT_U64: memcpy(p, &v.u, 8); break;
    case XCONV_CT_F32: {
        float t = (float)v.re;
        memcpy(p, &t, 4);
        break;
    }
    case XCONV_CT_F64: memcpy(p, &v.re, 8); break;
    case XCONV_CT_C64: {
        float t[2] = {(float)v.re, (float)v.im};
        memcpy(p, t, 8);
        break;
    }
    default: {
        double t[2] = {v.re, v.im};
        memcpy(p, t, 16);
        break;
    }
    }
}

/* Integers: full-range bits; floats: small integers (exact sums) or, when !exact, reals. */
static ctv ct_gen(xconv_ctype ct, tu_rng *r, bool exact)
{
    ctv v = {tu_next(r), 0, 0};
    if (exact) {
        v.re = (double)tu_int(r, -4, 4);
        v.im = (double)tu_int(r, -4, 4);
    } else {
        v.re = 2 * tu_unit(r) - 1;
        v.im = 2 * tu_unit(r) - 1;
    }
    if (ct == XCONV_CT_F32 || ct == XCONV_CT_F64) v.im = 0;
    return v;
}

/* Packs a strided ct matrix through the public packing calls of gemm.h. */
static void *pack_matrix(const xconv_gemm_geom *g, const void *src, int64_t rs, int64_t cs,
                         int64_t rows, int64_t k, bool is_a)
{
    size_t bytes =
        is_a ? xconv__gemm_packed_a_bytes(g, rows, k) : xconv__gemm_packed_b_bytes(g, k, rows);
    void *dst = calloc(1, bytes + 64);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            const char *e = (const char *)src + (i * rs + kk * cs) * (int64_t)g->elem_bytes;
            void *slot =
                is_a ? xconv__gemm_a_slot(g, dst, k, i, kk) : xconv__gemm_b_slot(g, dst, k, kk, i);
            xconv__gemm_put(g, is_a ? g->mr : g->nr, e, slot, 1);
        }
    return dst;
}

/* One product C (m x n) += A (m x k) * B (k x n) checked against the triple loop.
 * c_mode 0: C row-major with padded rows; 1: C column-major. g NULL: the general entry. */
static void gemm_case(xconv_ctype ct, const xconv_gemm_geom *g, int64_t m, int64_t n, int64_t k,
                      int c_mode, bool accumulate, tu_rng *r)
{
    const size_t es = xconv__ctype_size(ct);
    const int64_t rs_a = k + 1, rs_b = 1, cs_b = k + 2; /* A row-major padded, B column-major */
    const int64_t rs_c = c_mode ? 1 : n + 3, cs_c = c_mode ? m + 1 : 1;
    const int64_t a_n = m * rs_a, b_n = n * cs_b, c_n = c_mode ? n * cs_c : m * rs_c;
    void *a = calloc((size_t)a_n, es), *b = calloc((size_t)b_n, es), *c = calloc((size_t)c_n, es);
    ctv *expect = calloc((size_t)(m * n), sizeof(ctv));
    for (int64_t i = 0; i < a_n; i++) ct_set(ct, a, i, ct_gen(ct, r, true));
    for (int64_t i = 0; i < b_n; i++) ct_set(ct, b, i, ct_gen(ct, r, true));
    for (int64_t i = 0; i < c_n; i++) ct_set(ct, c, i, ct_gen(ct, r, true));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            ctv s = accumulate ? ct_get(ct, c, i * rs_c + j * cs_c) : (ctv){0, 0, 0};
            for (int64_t kk = 0; kk < k; kk++) {
                ctv x = ct_get(ct, a, i * rs_a + kk), y = ct_get(ct, b, kk * rs_b + j * cs_b);
                s.u += x.u * y.u;
                s.re += x.re * y.re - x.im * y.im;
                s.im += x.re * y.im + x.im * y.re;
            }
            expect[i * n + j] = s;
        }
    if (g) {
        void *ap = pack_matrix(g, a, rs_a, 1, m, k, true);
        void *bp = pack_matrix(g, b, cs_b, rs_b, n, k, false);
        xconv__gemm_packed(CTX[2], g, m, n, k, ap, bp, c, rs_c, cs_c, accumulate);
        free(ap);
        free(bp);
    } else {
        void *ws = malloc(xconv__gemm_workspace_bytes(ct, m, n, k) + 1);
        xconv__gemm(CTX[3], ct, m, n, k, a, rs_a, 1, b, rs_b, cs_b, c, rs_c, cs_c, accumulate, ws);
        free(ws);
    }
    int64_t bad = 0;
    const uint64_t mask = ct == XCONV_CT_U32 ? 0xFFFFFFFFull : ~0ull;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            ctv got = ct_get(ct, c, i * rs_c + j * cs_c), want = expect[i * n + j];
            bool ok = ct_is_int(ct) ? ((got.u ^ want.u) & mask) == 0
                                    : got.re == want.re && got.im == want.im;
            if (!ok && bad++ < 3)
                fprintf(stderr,
                        "  C[%" PRId64 ",%" PRId64 "] = %g%+gi (%" PRIu64 "), want %g%+gi (%" PRIu64
                        ")\n",
                        i, j, got.re, got.im, got.u, want.re, want.im, want.u);
        }
    XT_CHECK(bad == 0,
             "gemm %s %s m%" PRId64 " n%" PRId64 " k%" PRId64 " c_mode%d acc%d: %" PRId64 " wrong",
             xconv__ctype_name(ct), g ? g->isa : "xconv__gemm", m, n, k, c_mode, (int)accumulate,
             bad);
    free(a), free(b), free(c), free(expect);
}

/* Real data: the same product on 1, 2 and 3 threads must agree bit for bit. */
static void gemm_threads_case(xconv_ctype ct, int64_t m, int64_t n, int64_t k, tu_rng *r)
{
    const size_t es = xconv__ctype_size(ct);
    void *a = malloc((size_t)(m * k) * es), *b = malloc((size_t)(k * n) * es);
    for (int64_t i = 0; i < m * k; i++) ct_set(ct, a, i, ct_gen(ct, r, false));
    for (int64_t i = 0; i < k * n; i++) ct_set(ct, b, i, ct_gen(ct, r, false));
    void *ws = malloc(xconv__gemm_workspace_bytes(ct, m, n, k));
    void *c[4];
    for (int t = 1; t <= 3; t++) {
        c[t] = malloc((size_t)(m * n) * es);
        xconv__gemm(CTX[t], ct, m, n, k, a, k, 1, b, n, 1, c[t], n, 1, false, ws);
    }
    XT_CHECK(memcmp(c[1], c[2], (size_t)(m * n) * es) == 0 &&
                 memcmp(c[1], c[3], (size_t)(m * n) * es) == 0,
             "gemm %s m%" PRId64 " n%" PRId64 " k%" PRId64 ": threads 1/2/3 differ",
             xconv__ctype_name(ct), m, n, k);
    for (int t = 1; t <= 3; t++) free(c[t]);
    free(a), free(b), free(ws);
}

static void test_gemm(void)
{
    static const char *const isas[] = {"generic", "avx2", "avx512"};
    static const int64_t ms[] = {1, 5, 8, 13}, ns[] = {1, 7, 32, 45}, ks[] = {1, 3, 70, 600};
    tu_rng r = {11};
    for (int ct = 0; ct < XCONV_CT_COUNT; ct++) {
        for (int v = 0; v < 3; v++) {
            const xconv_gemm_geom *g = xconv__gemm_geom_isa((xconv_ctype)ct, isas[v]);
            if (!g) continue;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    gemm_case((xconv_ctype)ct, g, ms[i], ns[j], ks[(i + j) % 4], (i + j) % 2,
                              j % 2 == 1, &r);
            gemm_case((xconv_ctype)ct, g, 37, 70, 600, 1, true, &r);
        }
        gemm_case((xconv_ctype)ct, NULL, 9, 33, 17, 0, true, &r);
        gemm_case((xconv_ctype)ct, NULL, 70, 41, 300, 1, false, &r);
        gemm_threads_case((xconv_ctype)ct, 70, 150, 530, &r);
    }
}

int main(void)
{
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_error err;
        if (xconv_context_create(&o, &CTX[t], &err) != XCONV_STATUS_OK) {
            fprintf(stderr, "context: %s\n", err.description);
            return 1;
        }
    }
    test_gemm();
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_gemm");
}
