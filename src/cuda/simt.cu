/*
 * simt.cu — "cuda.igemm_simt": implicit GEMM on the CUDA cores, for the problems no tensor-core
 * engine runs exactly: f32 without allow_tf32, f64, c64, c128, and integers wider than 8 bits
 * or summed into 64 bits (every compute type of DESIGN.md §2), in every layout, view and group
 * count; conv directly and conv_transpose by stride phases (phases.cuh).
 *
 * Per group g a conv is the GEMM y[m, o] = sum_kk A[m, kk] B[kk, o] over the output positions
 * m (images outermost), the group's output channels o and the reduction kk = tap * cin_g + c
 * (taps outer, channels inner):
 *   A[m, kk] = x[n, g*cin_g + c, j*s + k*t - lo] (0 outside x),  B[kk, o] = w[g, o, c, k].
 * A first kernel writes B into the workspace in the compute type, as rows [g][kk][o] padded
 * with zeros to whole tiles, and a table of the reduction: for each kk the x offset of its
 * (c, k) and the tap's displacement k*t per dim. The GEMM gathers A through that table (each
 * thread keeps its rows' x offsets and coordinates), converting to the compute type as it
 * reads, and takes B by cp.async.
 *
 * A block of 256 threads (16 x 16) computes BM x BN outputs, each thread TM x TN of them in
 * two halves per dim (so that neighbouring threads' shared-memory reads do not conflict), BK
 * reduction steps a stage, two stages. Each output is one sum in a fixed order (kk ascending,
 * then the bias) whatever the grid: deterministic, no atomics. Integer sums wrap in the
 * compute type, exact modulo 2^bits (DESIGN.md §2).
 */
#include "cuda/phases.cuh"

#include <cmath>
#include <string.h>
#include <type_traits>

using namespace xconv_cuda;

namespace {

constexpr int NT = 256, BK = 8;
/* Spatial coordinates, displacements and their sums stay in 32 bits below this. */
constexpr int64_t COORD_LIMIT = (int64_t)1 << 29;
/* A coordinate that makes every bounds check fail (padded rows and reduction steps). */
constexpr int INVALID = -(1 << 30);

/* Outputs per thread by compute type: 8 x 8 for 4-byte types; 8-byte ones (f64, u64, c64)
 * 8 x 4 and c128 4 x 4, so the sums of every type take 64 registers. */
template <class T> struct shape {
    static constexpr int TM = 8, TN = 8;
};
template <> struct shape<double> {
    static constexpr int TM = 8, TN = 4;
};
template <> struct shape<uint64_t> {
    static constexpr int TM = 8, TN = 4;
};
template <> struct shape<xconv_c64> {
    static constexpr int TM = 8, TN = 4;
};
template <> struct shape<xconv_c128> {
    static constexpr int TM = 4, TN = 4;
};
template <class T> constexpr int BM_OF = 16 * shape<T>::TM;
/* NARROW: half the columns, for 4-byte types with at most 64 output channels per group (a
 * 128-wide tile would be half zeros). */
template <class T, bool NARROW> constexpr int TN_OF = NARROW ? shape<T>::TN / 2 : shape<T>::TN;
template <class T, bool NARROW> constexpr int BN_OF = 16 * TN_OF<T, NARROW>;
template <class T> bool narrow_for(const xconv_canon *q)
{
    return sizeof(T) == 4 && q->cout_g <= 64;
}

/* One reduction step: the x offset of its channel and tap, the tap's displacement per dim. */
struct ktab {
    int64_t xd;
    int     d0, d1, d2, unused;
};

/* How the epilogue may store: Y_VEC_O, runs of TN/2 output channels as one vector (y's
 * channels contiguous); Y_VEC_M, runs of TM/2 positions (y's innermost dim contiguous, whole
 * runs per row); both only where y holds the compute type's 4-byte bits, aligned. */
enum { Y_SCALAR = 0, Y_VEC_O = 1, Y_VEC_M = 2 };

struct simt_args {
    xconv_canon  p;
    const char  *x, *bias;
    char        *y;
    const ktab  *tab;
    const void  *wp;        /* B: [groups][KT * BK][o_pad] in the compute type */
    int64_t      M;         /* output positions: n * prod(y_size) */
    int64_t      K;         /* reduction length: cin_g * prod(k_size) */
    int          KT;        /* its BK-step stages */
    int          o_pad;     /* cout_g rounded up to BN */
    int          n_tiles;   /* column tiles per group */
    int          y_mode;    /* Y_SCALAR, Y_VEC_O or Y_VEC_M */
    int          split;     /* reduction slices (blockIdx.z); above 1 the sums go to part */
    void        *part;      /* [split][groups][M][o_pad] partial sums in the compute type */
    bool         small_m;   /* M below 2^31: positions split in 32-bit arithmetic */
};

/* Output position m as (n, j0, j1, j2); 32-bit divisions where m and the sizes allow (a
 * 64-bit division is several times the instructions, and every tile splits its rows). */
struct position {
    int64_t n, j0, j1, j2;
};
__device__ __forceinline__ position split_m(const xconv_canon &p, int64_t m, bool small)
{
    position r;
    if (small) {
        uint32_t t = (uint32_t)m;
        const uint32_t Y2 = (uint32_t)p.y_size[2], Y1 = (uint32_t)p.y_size[1],
                       Y0 = (uint32_t)p.y_size[0];
        r.j2 = t % Y2, t /= Y2;
        r.j1 = t % Y1, t /= Y1;
        r.j0 = t % Y0, r.n = t / Y0;
    } else {
        int64_t t = m;
        r.j2 = t % p.y_size[2], t /= p.y_size[2];
        r.j1 = t % p.y_size[1], t /= p.y_size[1];
        r.j0 = t % p.y_size[0], r.n = t / p.y_size[0];
    }
    return r;
}

/* The multiply-add of each compute type; complex as four fused multiply-adds. */
template <class T> __device__ __forceinline__ void mac(T &acc, T a, T b) { ops<T>::mac(acc, a, b); }
template <> __device__ __forceinline__ void mac(xconv_c64 &acc, xconv_c64 a, xconv_c64 b)
{
    acc.re = fmaf(a.re, b.re, acc.re);
    acc.re = fmaf(-a.im, b.im, acc.re);
    acc.im = fmaf(a.re, b.im, acc.im);
    acc.im = fmaf(a.im, b.re, acc.im);
}
template <> __device__ __forceinline__ void mac(xconv_c128 &acc, xconv_c128 a, xconv_c128 b)
{
    acc.re = fma(a.re, b.re, acc.re);
    acc.re = fma(-a.im, b.im, acc.re);
    acc.im = fma(a.re, b.im, acc.im);
    acc.im = fma(a.im, b.re, acc.im);
}

template <class T> __device__ __forceinline__ T plus(T a, T b) { return a + b; }
template <> __device__ __forceinline__ xconv_c64 plus(xconv_c64 a, xconv_c64 b)
{
    return xconv_c64{a.re + b.re, a.im + b.im};
}
template <> __device__ __forceinline__ xconv_c128 plus(xconv_c128 a, xconv_c128 b)
{
    return xconv_c128{a.re + b.re, a.im + b.im};
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* B in the compute type, zero-padded, and the reduction table: one thread per element of B
 * (grid-stride); group 0's column 0 also writes the table. */
template <class T>
__global__ void __launch_bounds__(NT) pack_kernel(const simt_args a, const char *__restrict__ w,
                                                  T *__restrict__ wp, ktab *__restrict__ tab)
{
    const xconv_canon &p = a.p;
    const int64_t kpad = (int64_t)a.KT * BK, total = p.groups * kpad * a.o_pad;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = idx % a.o_pad, r = idx / a.o_pad;
        const int64_t kk = r % kpad, g = r / kpad;
        const bool live = kk < a.K;
        int64_t c = 0, k0 = 0, k1 = 0, k2 = 0;
        if (live) {
            c = kk % p.cin_g;
            int64_t tap = kk / p.cin_g;
            k2 = tap % p.k_size[2], tap /= p.k_size[2];
            k1 = tap % p.k_size[1], k0 = tap / p.k_size[1];
        }
        T v = ops<T>::zero();
        if (live && o < p.cout_g)
            v = ops<T>::load(p.x_dtype, w,
                             p.w_off + g * p.w_sg + o * p.w_so + c * p.w_si + k0 * p.w_sk[0] +
                                 k1 * p.w_sk[1] + k2 * p.w_sk[2]);
        wp[idx] = v;
        if (g == 0 && o == 0) {
            ktab t;
            t.unused = 0;
            if (live) {
                t.d0 = (int)(k0 * p.dil[0]), t.d1 = (int)(k1 * p.dil[1]);
                t.d2 = (int)(k2 * p.dil[2]);
                t.xd = c * p.x_sc + t.d0 * p.x_ss[0] + t.d1 * p.x_ss[1] + t.d2 * p.x_ss[2];
            } else {
                t.xd = 0, t.d0 = t.d1 = t.d2 = INVALID;
            }
            tab[kk] = t;
        }
    }
}

/* The GEMM. SAME: x stores the compute type's bits (read as is, no conversion). K_FAST:
 * neighbouring threads gather neighbouring reduction steps of a row (x's channels
 * contiguous), else neighbouring rows of one step (x's positions contiguous). */
template <class T, bool NARROW, bool SAME, bool K_FAST>
__global__ void __launch_bounds__(NT, 2) gemm_kernel(const simt_args a)
{
    constexpr int TM = shape<T>::TM, TN = TN_OF<T, NARROW>, BM = BM_OF<T>, BN = BN_OF<T, NARROW>;
    constexpr int APT = BM * BK / NT;     /* A elements a thread gathers per stage */
    /* A's rows padded by 4 elements: K_FAST's stores of 8 steps x 4 rows per warp then fall
     * in distinct banks */
    __shared__ __align__(16) T As[2][BK][BM + 4];
    __shared__ __align__(16) T Bs[2][BK][BN];
    /* K_FAST: the tile's rows (x offset, coordinates) in shared memory, where each thread reads
     * its APT rows at every stage (in registers they made the kernel spill); otherwise a
     * thread's one row in registers */
    __shared__ int64_t row_x[K_FAST ? BM : 1];
    __shared__ int4 row_b[K_FAST ? BM : 1];

    const xconv_canon &p = a.p;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int64_t g = blockIdx.y;
    /* this block's slice of the reduction's stages */
    const int kt_lo = (int)((int64_t)a.KT * blockIdx.z / a.split),
              kt_hi = (int)((int64_t)a.KT * (blockIdx.z + 1) / a.split);
    const int o0 = (int)(blockIdx.x % (unsigned)a.n_tiles) * BN;
    const int64_t m0 = (int64_t)(blockIdx.x / (unsigned)a.n_tiles) * BM;
    const int X0 = (int)p.x_size[0], X1 = (int)p.x_size[1], X2 = (int)p.x_size[2];

    /* row `row` of the tile: its x offset and the coordinates of its first tap */
    auto row_at = [&](int row, int64_t &xb, int4 &b) {
        const int64_t m = m0 + row;
        if (m < a.M) {
            const position q = split_m(p, m, a.small_m);
            b.x = (int)(q.j0 * p.stride[0] - p.pad_lo[0]);
            b.y = (int)(q.j1 * p.stride[1] - p.pad_lo[1]);
            b.z = (int)(q.j2 * p.stride[2] - p.pad_lo[2]);
            xb = p.x_off + q.n * p.x_sn + g * p.cin_g * p.x_sc + b.x * p.x_ss[0] +
                 b.y * p.x_ss[1] + b.z * p.x_ss[2];
        } else {
            b = make_int4(INVALID, 0, 0, 0), xb = 0;
        }
    };
    int64_t xb0 = 0;
    int4 rb0 = make_int4(0, 0, 0, 0);
    if constexpr (K_FAST) {
        if (tid < BM) row_at(tid, row_x[tid], row_b[tid]);
        __syncthreads();
    } else {
        row_at(tid % BM, xb0, rb0);
    }
    const int kl = K_FAST ? tid % BK : tid / BM; /* the first reduction step this thread gathers */

    T ra[APT];
    auto load_x = [&](int64_t off) -> T {
        if (SAME) return ((const T *)a.x)[off];
        return ops<T>::load(p.x_dtype, a.x, off);
    };
    /* bitwise &, not &&: one predicate, no branches around each load */
    auto inside = [&](const int4 &b, const ktab &e) {
        return ((unsigned)(b.x + e.d0) < (unsigned)X0) & ((unsigned)(b.y + e.d1) < (unsigned)X1) &
               ((unsigned)(b.z + e.d2) < (unsigned)X2);
    };
    auto gather = [&](int kt) {
        if constexpr (K_FAST) {
            const ktab e = a.tab[kt * BK + kl];
#pragma unroll
            for (int i = 0; i < APT; i++) {
                const int row = tid / BK + i * (NT / BK);
                ra[i] = inside(row_b[row], e) ? load_x(row_x[row] + e.xd) : ops<T>::zero();
            }
        } else {
#pragma unroll
            for (int i = 0; i < APT; i++) {
                const ktab e = a.tab[kt * BK + kl + i * (NT / BM)];
                ra[i] = inside(rb0, e) ? load_x(xb0 + e.xd) : ops<T>::zero();
            }
        }
    };
    auto put = [&](int s) {
#pragma unroll
        for (int i = 0; i < APT; i++) {
            if (K_FAST) As[s][kl][tid / BK + i * (NT / BK)] = ra[i];
            else As[s][kl + i * (NT / BM)][tid % BM] = ra[i];
        }
    };
    /* B's stage: CHUNKS 16-byte pieces, the same CHUNKS / NT of them for this thread at every
     * stage (their offsets computed once) */
    constexpr int ROW_CHUNKS = BN * (int)sizeof(T) / 16, CHUNKS = BK * ROW_CHUNKS;
    constexpr int CPT = CHUNKS >= NT ? CHUNKS / NT : 1; /* pieces per thread */
    static_assert(CHUNKS % NT == 0 || NT % CHUNKS == 0, "B stages split evenly over the threads");
    const bool b_live = CHUNKS >= NT || tid < CHUNKS;
    /* (32-bit offsets from the block's first B row: supports keeps a stage below 2^31 bytes) */
    const char *b_base =
        (const char *)a.wp + (g * a.KT * BK * (int64_t)a.o_pad + o0) * (int64_t)sizeof(T);
    int b_src[CPT], b_dst[CPT];
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        const int c = (tid + i * NT) % CHUNKS, row = c / ROW_CHUNKS, col = c % ROW_CHUNKS;
        b_src[i] = row * a.o_pad * (int)sizeof(T) + col * 16;
        b_dst[i] = row * BN * (int)sizeof(T) + col * 16;
    }
    const int64_t b_stage = (int64_t)BK * a.o_pad * (int64_t)sizeof(T);
    auto fetch_b = [&](int kt, int s) {
        if (!b_live) return;
        const char *src = b_base + kt * b_stage;
#pragma unroll
        for (int i = 0; i < CPT; i++) cp_async16((char *)&Bs[s][0][0] + b_dst[i], src + b_src[i]);
    };

    T acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = ops<T>::zero();

    if (kt_lo < kt_hi) {
        gather(kt_lo);
        fetch_b(kt_lo, 0);
        cp_async_commit();
        put(0);
        cp_async_wait_all();
        __syncthreads();
        for (int kt = kt_lo; kt < kt_hi; kt++) {
            const int s = (kt - kt_lo) & 1;
            const bool more = kt + 1 < kt_hi;
            if (more) { /* the next stage's loads in flight under this stage's products */
                gather(kt + 1);
                fetch_b(kt + 1, s ^ 1);
                cp_async_commit();
            }
#pragma unroll
            for (int k = 0; k < BK; k++) {
                T av[TM], bv[TN];
#pragma unroll
                for (int i = 0; i < TM / 2; i++) {
                    av[i] = As[s][k][ty * (TM / 2) + i];
                    av[TM / 2 + i] = As[s][k][BM / 2 + ty * (TM / 2) + i];
                }
#pragma unroll
                for (int j = 0; j < TN / 2; j++) {
                    bv[j] = Bs[s][k][tx * (TN / 2) + j];
                    bv[TN / 2 + j] = Bs[s][k][BN / 2 + tx * (TN / 2) + j];
                }
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) mac(acc[i][j], av[i], bv[j]);
            }
            if (more) {
                put(s ^ 1);
                cp_async_wait_all();
            }
            __syncthreads();
        }
    }

    /* the tile row and column of this thread's sum (i, j): two halves per dim, as loaded */
    auto row_of = [&](int i) {
        return i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + i - TM / 2;
    };
    auto col_of = [&](int j) {
        return j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + j - TN / 2;
    };
    if (a.split > 1) { /* a slice's sums, as they are, for reduce_kernel */
        T *part = (T *)a.part + ((int64_t)blockIdx.z * p.groups + g) * a.M * a.o_pad;
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int row = row_of(i);
            if (m0 + row >= a.M) continue;
#pragma unroll
            for (int j = 0; j < TN; j++) part[(m0 + row) * a.o_pad + o0 + col_of(j)] = acc[i][j];
        }
        return;
    }

    /* the bias of this thread's columns, then y: vectors where a.y_mode allows */
    T bv[TN];
#pragma unroll
    for (int j = 0; j < TN; j++) {
        const int64_t o = o0 + col_of(j);
        bv[j] = a.bias && o < p.cout_g
                    ? ops<T>::load(p.bias_dtype, a.bias, p.b_off + (g * p.cout_g + o) * p.b_s)
                    : ops<T>::zero();
    }
    /* the sum, then the bias (none added without one: +0 would turn a -0 sum into +0) */
    auto fin = [&](T s, T b) { return a.bias ? plus(s, b) : s; };
    /* Each half of this thread's rows is a run of TM/2 consecutive positions: split its first
     * once, then step (j2, j1, j0, n) along it. */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t mh = m0 + h * (BM / 2) + ty * (TM / 2);
        if (mh >= a.M) continue;
        position q = split_m(p, mh, a.small_m);
        if constexpr (sizeof(T) == 4 && TM / 2 == 4) {
            if (a.y_mode == Y_VEC_M) { /* the run lies in one row of y and is all live */
                const int64_t yr = p.y_off + q.n * p.y_sn + q.j0 * p.y_ss[0] + q.j1 * p.y_ss[1] +
                                   q.j2 * p.y_ss[2] + g * p.cout_g * p.y_sc;
#pragma unroll
                for (int j = 0; j < TN; j++) {
                    const int64_t o = o0 + col_of(j);
                    if (o >= p.cout_g) continue;
                    T v[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) v[i] = fin(acc[h * 4 + i][j], bv[j]);
                    uint4 vec;
                    memcpy(&vec, v, sizeof vec);
                    *(uint4 *)((T *)a.y + yr + o * p.y_sc) = vec;
                }
                continue;
            }
        }
#pragma unroll
        for (int i = 0; i < TM / 2; i++) {
            if (mh + i >= a.M) break;
            const int r = h * (TM / 2) + i;
            const int64_t yr = p.y_off + q.n * p.y_sn + q.j0 * p.y_ss[0] + q.j1 * p.y_ss[1] +
                               q.j2 * p.y_ss[2] + g * p.cout_g * p.y_sc;
            bool done = false;
            if constexpr (sizeof(T) == 4 && (TN / 2 == 2 || TN / 2 == 4)) {
                using V = typename std::conditional<TN / 2 == 4, uint4, uint2>::type;
                if (a.y_mode == Y_VEC_O) {
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int64_t c0 = o0 + c * (BN / 2) + tx * (TN / 2);
                        T v[TN / 2];
#pragma unroll
                        for (int j = 0; j < TN / 2; j++)
                            v[j] = fin(acc[r][c * (TN / 2) + j], bv[c * (TN / 2) + j]);
                        T *dst = (T *)a.y + yr + c0;
                        if (c0 + TN / 2 <= p.cout_g) {
                            V vec;
                            memcpy(&vec, v, sizeof vec);
                            *(V *)dst = vec;
                        } else {
#pragma unroll
                            for (int j = 0; j < TN / 2; j++)
                                if (c0 + j < p.cout_g) dst[j] = v[j];
                        }
                    }
                    done = true;
                }
            }
            if (!done) {
#pragma unroll
                for (int j = 0; j < TN; j++) {
                    const int64_t o = o0 + col_of(j);
                    if (o < p.cout_g)
                        ops<T>::store(p.y_dtype, a.y, yr + o * p.y_sc, fin(acc[r][j], bv[j]));
                }
            }
            if (++q.j2 == p.y_size[2]) {
                q.j2 = 0;
                if (++q.j1 == p.y_size[1]) {
                    q.j1 = 0;
                    if (++q.j0 == p.y_size[0]) q.j0 = 0, ++q.n;
                }
            }
        }
    }
}

/* y from a split reduction: each output the slices' partial sums in slice order, then the bias
 * (one thread per output, grid-stride; a fixed order, so the same bits at every run). */
template <class T> __global__ void __launch_bounds__(NT) reduce_kernel(const simt_args a)
{
    const xconv_canon &p = a.p;
    const int64_t total = p.groups * a.M * p.cout_g, slice = p.groups * a.M * a.o_pad;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = idx % p.cout_g, r = idx / p.cout_g, m = r % a.M, g = r / a.M;
        const T *part = (const T *)a.part + (g * a.M + m) * a.o_pad + o;
        T v = part[0];
        for (int z = 1; z < a.split; z++) v = plus(v, part[z * slice]);
        if (a.bias)
            v = plus(v, ops<T>::load(p.bias_dtype, a.bias, p.b_off + (g * p.cout_g + o) * p.b_s));
        const position q = split_m(p, m, a.small_m);
        ops<T>::store(p.y_dtype, a.y, p.y_off + q.n * p.y_sn + q.j0 * p.y_ss[0] + q.j1 * p.y_ss[1] +
                                          q.j2 * p.y_ss[2] + (g * p.cout_g + o) * p.y_sc, v);
    }
}

/* The sizes of one conv's GEMM for compute type T. */
struct geom {
    int64_t M, K, KT, o_pad, n_tiles, m_tiles, split;
    double  tab_bytes, w_bytes, part_bytes; /* doubles: checked against overflow before use */
};

/* Reduction slices for a grid of `tiles` blocks, by a model of the run time in units of one
 * tile's whole reduction: waves of 2 blocks per SM (ceil(tiles * S / (2 SMs)) / S; a lone
 * block leaves its SM's issue slots half used) plus writing and reading the partial sums,
 * about S * 50 / K (a 4-byte sum moved at ~3 TB/s against 2 K flops at ~38 TFLOP/s). The
 * model matches what was measured: rn50_3x3_512 in f32 (100 tiles, K 4608) 21.4 -> 29.3
 * TFLOP/s in 5 slices, in f64 (200 tiles) 12.9 -> 15.5 in 3; rn50_1x1_1024 in f32 (196
 * tiles, K 1024) 27.4 -> 25.1 in 3 (the model: 1.15 against 1). At most 8 slices of at least
 * 8 stages, the partial sums within 64 MiB, and a split only for a 3% gain. */
int64_t split_for(int64_t tiles, int64_t KT, int64_t K, double slice_bytes, int sms)
{
    const double W = 2.0 * sms;
    int64_t best = 1;
    double best_t = std::ceil((double)tiles / W);
    for (int64_t s = 2; s <= 8 && KT / s >= 8 && s * slice_bytes <= 64.0 * 1024 * 1024; s++) {
        const double t =
            std::ceil((double)(tiles * s) / W) / (double)s + (double)s * 50.0 / (double)K;
        if (t < 0.97 * best_t) best = s, best_t = t;
    }
    return best;
}

template <class T> geom geom_of(const xconv_canon *q)
{
    const int BN = narrow_for<T>(q) ? BN_OF<T, true> : BN_OF<T, false>;
    geom G;
    G.M = q->n * xconv__prod3(q->y_size);
    G.K = q->cin_g * xconv__prod3(q->k_size);
    G.KT = (G.K + BK - 1) / BK;
    G.n_tiles = (q->cout_g + BN - 1) / BN;
    G.o_pad = G.n_tiles * BN;
    G.m_tiles = (G.M + BM_OF<T> - 1) / BM_OF<T>;
    G.tab_bytes = (double)G.KT * BK * (double)sizeof(ktab);
    G.w_bytes = (double)q->groups * (double)G.KT * BK * (double)G.o_pad * (double)sizeof(T);
    const double slice = (double)q->groups * (double)G.M * (double)G.o_pad * (double)sizeof(T);
    G.split = split_for(G.m_tiles * G.n_tiles * q->groups, G.KT, G.K, slice,
                        xconv__cuda_device_sms(q->device_index));
    G.part_bytes = G.split > 1 ? (double)G.split * slice : 0;
    return G;
}

/* f(T{}) for the compute type of p. */
template <class F> auto with_ct(xconv_ctype ct, F f)
{
    switch (ct) {
    case XCONV_CT_U32: return f(uint32_t{});
    case XCONV_CT_U64: return f(uint64_t{});
    case XCONV_CT_F64: return f(double{});
    case XCONV_CT_C64: return f(xconv_c64{});
    case XCONV_CT_C128: return f(xconv_c128{});
    default: return f(float{});
    }
}

/* Whether the GEMM takes the conv q (coordinates in 32 bits, grid limits, workspace sizes). */
bool conv_fits(const xconv_canon *q, const char **why_not)
{
    for (int d = 0; d < 3; d++) {
        const int64_t span = (q->k_size[d] > 0 ? q->k_size[d] - 1 : 0) * q->dil[d];
        if (q->x_size[d] >= COORD_LIMIT || q->pad_lo[d] >= COORD_LIMIT ||
            -q->pad_lo[d] >= COORD_LIMIT || span >= COORD_LIMIT || -span >= COORD_LIMIT ||
            (q->y_size[d] - 1) * q->stride[d] >= COORD_LIMIT)
            return *why_not = "cuda.igemm_simt: spatial sizes or offsets beyond 2^29", false;
    }
    if (q->groups > 65535) return *why_not = "cuda.igemm_simt: more than 65535 groups", false;
    return with_ct(q->ct, [&](auto t) {
        const geom G = geom_of<decltype(t)>(q);
        if (G.K > INT32_MAX / 2 || G.o_pad * BK * (int64_t)sizeof(decltype(t)) > INT32_MAX / 2)
            return *why_not = "cuda.igemm_simt: reduction or output channels too long", false;
        if ((double)G.m_tiles * (double)G.n_tiles > (double)INT32_MAX)
            return *why_not = "cuda.igemm_simt: too many tiles for one grid", false;
        if (G.tab_bytes + G.w_bytes > 0x1p40)
            return *why_not = "cuda.igemm_simt: packed weights beyond 1 TiB", false;
        return true;
    });
}

bool simt_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.igemm_simt runs on cuda tensors only", false;
    if (p->op == XCONV_OP_CONV) return conv_fits(p, why_not);
    if (!phases_fit(p))
        return *why_not = "cuda.igemm_simt: too many stride phases, or dilation or padding "
                          "too large",
               false;
    return each_phase(p, [&](const xconv_canon &q) { return conv_fits(&q, why_not); });
}

/* The workspace of one conv: the table, then B. */
size_t conv_workspace(const xconv_canon *q)
{
    return with_ct(q->ct, [&](auto t) {
        const geom G = geom_of<decltype(t)>(q);
        return xconv__cuda_align256((size_t)G.tab_bytes) + xconv__cuda_align256((size_t)G.w_bytes) +
               xconv__cuda_align256((size_t)G.part_bytes);
    });
}

/* conv: its own; conv_transpose: the non-finite flag, then the largest phase's (the phases
 * run one after the other on the stream, so they share it). */
size_t simt_workspace_bytes(const xconv_canon *p)
{
    if (p->op == XCONV_OP_CONV) return conv_workspace(p);
    size_t most = 0;
    each_phase(p, [&](const xconv_canon &q) {
        const size_t b = conv_workspace(&q);
        most = b > most ? b : most;
        return true;
    });
    return 256 + most;
}

/* Below cuda.generic's 4 flops, above the tensor-core engines for the dtypes they take (8- and
 * 16-bit inputs), scaled by the tile padding (a conv with few output channels per group wastes
 * most of each tile, and stays on cuda.generic or cuda.depthwise). */
double simt_cost(const xconv_canon *p)
{
    const size_t es = xconv_dtype_size(p->x_dtype);
    const bool tc_dtype = es <= 2 && xconv__dtype_family(p->x_dtype) != XCONV_FAMILY_COMPLEX &&
                          !(es == 2 && xconv__dtype_family(p->x_dtype) == XCONV_FAMILY_INT);
    const double waste = with_ct(p->ct, [&](auto t) {
        const geom G = geom_of<decltype(t)>(p);
        return (double)G.o_pad / (double)(p->cout_g > 0 ? p->cout_g : 1) *
               (double)(G.KT * BK) / (double)(G.K > 0 ? G.K : 1);
    });
    return (tc_dtype ? 1.0 : 0.5) * waste * p->flops + 3e4;
}

/* The epilogue's store mode for q's y (see Y_VEC_O / Y_VEC_M). */
int y_mode_of(const xconv_canon *q, const xconv_exec *e, size_t ct_size)
{
    if (ct_size != 4 || xconv_dtype_size(q->y_dtype) != 4 || !xconv__same_bits(q->ct, q->y_dtype) ||
        (uintptr_t)e->y % 16)
        return Y_SCALAR;
    const int64_t off[] = {q->y_off, q->y_sn, q->y_ss[0], q->y_ss[1], q->y_ss[2], q->y_sc};
    bool aligned = true; /* every stride but the contiguous one a multiple of 4 elements */
    if (q->y_sc == 1) {
        for (int i = 0; i < 5; i++) aligned = aligned && off[i] % 4 == 0;
        return aligned && q->cout_g % 4 == 0 ? Y_VEC_O : Y_SCALAR;
    }
    if (q->y_ss[2] == 1 && q->y_size[2] % 4 == 0) {
        for (int i : {0, 1, 2, 3, 5}) aligned = aligned && off[i] % 4 == 0;
        return aligned ? Y_VEC_M : Y_SCALAR;
    }
    return Y_SCALAR;
}

template <class T>
void launch_conv(const xconv_canon *q, const xconv_exec *e, char *ws, cudaStream_t st)
{
    const geom G = geom_of<T>(q);
    simt_args a;
    a.p = *q;
    a.x = (const char *)e->x, a.bias = (const char *)e->bias, a.y = (char *)e->y;
    ktab *tab = (ktab *)ws;
    T *wp = (T *)(ws + xconv__cuda_align256((size_t)G.tab_bytes));
    a.tab = tab, a.wp = wp;
    a.split = (int)G.split;
    a.part =
        ws + xconv__cuda_align256((size_t)G.tab_bytes) + xconv__cuda_align256((size_t)G.w_bytes);
    a.M = G.M, a.K = G.K, a.KT = (int)G.KT, a.o_pad = (int)G.o_pad, a.n_tiles = (int)G.n_tiles;
    if (G.K > 0) {
        const int64_t total = q->groups * G.KT * BK * G.o_pad;
        const int64_t cap = (int64_t)xconv__cuda_device_sms(q->device_index) * 16;
        const int64_t want = (total + NT - 1) / NT;
        pack_kernel<T><<<(unsigned)(want < cap ? want : cap), NT, 0, st>>>(a, (const char *)e->w,
                                                                          wp, tab);
    }
    a.small_m = G.M <= INT32_MAX;
    a.y_mode = y_mode_of(q, e, sizeof(T));
    const dim3 grid((unsigned)(G.m_tiles * G.n_tiles), (unsigned)q->groups, (unsigned)G.split);
    /* channels gathered along the reduction when they are x's smallest stride */
    const int64_t sc = q->x_sc < 0 ? -q->x_sc : q->x_sc;
    int64_t sp = 0;
    for (int d = 2; d >= 0 && sp == 0; d--)
        if (q->x_size[d] > 1) sp = q->x_ss[d] < 0 ? -q->x_ss[d] : q->x_ss[d];
    const bool k_fast = q->cin_g > 1 && (sp == 0 || sc < sp);
    const bool same = xconv__same_bits(q->ct, q->x_dtype);
    auto go = [&](auto narrow) {
        constexpr bool N = decltype(narrow)::value;
        if (same && k_fast) gemm_kernel<T, N, true, true><<<grid, NT, 0, st>>>(a);
        else if (same) gemm_kernel<T, N, true, false><<<grid, NT, 0, st>>>(a);
        else if (k_fast) gemm_kernel<T, N, false, true><<<grid, NT, 0, st>>>(a);
        else gemm_kernel<T, N, false, false><<<grid, NT, 0, st>>>(a);
    };
    if constexpr (sizeof(T) == 4) {
        if (narrow_for<T>(q)) go(std::true_type{});
        else go(std::false_type{});
    } else {
        go(std::false_type{});
    }
    if (G.split > 1) {
        const int64_t total = q->groups * G.M * q->cout_g;
        const int64_t cap = (int64_t)xconv__cuda_device_sms(q->device_index) * 16;
        const int64_t want = (total + NT - 1) / NT;
        reduce_kernel<T><<<(unsigned)(want < cap ? want : cap), NT, 0, st>>>(a);
    }
}

xconv_status simt_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    return xconv__cuda_run(e, "cuda.igemm_simt", err, [&](cudaStream_t st) {
        with_ct(p->ct, [&](auto t) {
            using T = decltype(t);
            char *ws = (char *)e->workspace;
            if (p->op == XCONV_OP_CONV) {
                launch_conv<T>(p, e, ws, st);
                return 0;
            }
            const int mode = xconv__cuda_wcheck_mode(e);
            if (mode == 1) { /* constant weights with an Inf or NaN: the gather formula */
                xconv__cuda_generic_launch(e, st, nullptr);
                return 0;
            }
            int *flag = mode == 2 ? (int *)ws : nullptr;
            if (flag) xconv__cuda_flag_nonfinite_w(e, flag, st);
            each_phase(p, [&](const xconv_canon &q) {
                launch_conv<T>(&q, e, ws + 256, st);
                return true;
            });
            /* an Inf or NaN weight: y again by the gather formula (the phases' taps outside x
             * add 0 * w, NaN for such a weight, where cpu.ref has no term) */
            if (flag) xconv__cuda_generic_launch(e, st, flag);
            return 0;
        });
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_igemm_simt = {
    "cuda.igemm_simt",    XCONV_DEVICE_CUDA, simt_supports,
    simt_workspace_bytes, simt_cost,         simt_run,
    xconv__cuda_wcheck_bytes, xconv__cuda_wcheck_prepack, /* constant weights: checked once */
    nullptr,
};
