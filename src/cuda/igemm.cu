/*
 * igemm.cu — "cuda.igemm_tc": implicit-GEMM convolution on the tensor cores (mma.sync) for
 * conv with bf16 / f16 inputs (f32 accumulate), fp8 e4m3 / e5m2 inputs
 * (widened to f16 in registers, which is exact, then f16 MMA with f32 accumulate: the f32
 * rule of DESIGN.md §2; Hopper's native fp8 MMA accumulates with fewer bits and is not used)
 * and i8 / u8 inputs (s32 accumulate, which is exact modulo 2^32: the wrapping u32
 * arithmetic of DESIGN.md §2 when y has at most 32 bits).
 *
 * The kernel runs any canonical problem that xconv__cuda_igemm_fits accepts; cuda.patch_tc
 * and cuda.deconv_tc launch it on rewritten problems (kernel dims folded into channels,
 * conv_transpose stride phases).
 *
 * GEMM view per group: M = N * prod(Y) output positions, N = cout_g, K = prod(K) * cin_g,
 *   A[m, (tap, c)] = x[n(m), Y(m)*s + tap*t - lo, c]   (0 outside x: padding)
 *   B[(tap, c), o] = w[g, o, c, tap]
 * Channels-last puts c innermost in both x and w, so every 16-byte piece of an A or B row is
 * 8 (16) consecutive channels of one tap: cp.async moves them to shared memory directly, and
 * ldmatrix feeds mma.sync. Any other layout (channels-first, channel counts that are not
 * 16-byte multiples, strided or unaligned views) takes the gathering loader: the threads load
 * each piece's elements one by one and store it to shared memory, K ordered (tap, block of
 * 8 or 16 channels) with each tap's last block zero-padded. No column buffer either way.
 *
 * Block tile 128 x 128 x 128 bytes of K (64 bf16 / 128 int8), 3-stage cp.async pipeline,
 * 8 warps each computing 64 x 32. The epilogue adds the bias, rounds once to y's dtype
 * through the shared device conversions into a shared-memory tile, and writes the tile out
 * row by row (16-byte vectors when y is channels-last and aligned, elements otherwise).
 */
#include "cuda/common.cuh"

#include <stdint.h>
#include <type_traits>

using namespace xconv_cuda;

namespace {

constexpr int BM = 128, BN = 128, BKB = 128 /* bytes of K per stage row */, STAGES = 3;
constexpr int THREADS = 256;
constexpr int TILE_BYTES = BM * BKB;                 /* A and B tiles are the same size */
constexpr int SMEM_BYTES = STAGES * 2 * TILE_BYTES;  /* 96 KiB */
constexpr int CHUNKS = BKB / 16;                     /* 16-byte chunks per tile row */
constexpr int ROWS_PER_PASS = THREADS / CHUNKS;      /* rows one pass of the block loads */
constexpr int PASSES = BM / ROWS_PER_PASS;

enum class kind { bf16, f16, s8, u8, e4m3, e5m2 };

template <kind K> struct traits;
template <> struct traits<kind::bf16> { using acc = float; static constexpr int esize = 2; };
template <> struct traits<kind::f16> { using acc = float; static constexpr int esize = 2; };
template <> struct traits<kind::s8> { using acc = int32_t; static constexpr int esize = 1; };
template <> struct traits<kind::u8> { using acc = int32_t; static constexpr int esize = 1; };
template <> struct traits<kind::e4m3> { using acc = float; static constexpr int esize = 1; };
template <> struct traits<kind::e5m2> { using acc = float; static constexpr int esize = 1; };

/* One m16n8 tile's worth of K (32 bytes) on the tensor cores: d += a * b. */
template <kind K>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1);
template <kind K>
__device__ __forceinline__ void mma(int32_t (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1);

template <>
__device__ __forceinline__ void mma<kind::bf16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<kind::f16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* No .satfinite: the s32 sums wrap, which is the exact result modulo 2^32. */
template <>
__device__ __forceinline__ void mma<kind::s8>(int32_t (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<kind::u8>(int32_t (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two fp8 codes as an f16x2 (common.cuh's fp8x2_to_f16x2) for the kernel's kind. */
template <kind K> __device__ __forceinline__ uint32_t fp8_pair(uint32_t u, bool high)
{
    return xconv_cuda::fp8x2_to_f16x2<K != kind::e5m2>(u, high);
}

/* fp8 MMA: a 32-byte K step of the byte layout (the s8 fragments) runs as two f16
 * m16n8k16 MMAs. Thread t holds K bytes 4t..4t+3 (and +16 in the second register); the low
 * and high byte pairs become the f16 fragment's k 2t,2t+1 and 2t+8,2t+9 in both A and B:
 * the same permutation of K on both sides, so the sum is the same. */

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* One element (ES bytes) of a gathered row, as the low bits of a word. */
template <int ES> __device__ __forceinline__ uint32_t gather_elem(const char *base, int64_t i)
{
    if constexpr (ES == 2) return __ldg((const unsigned short *)base + i);
    else return __ldg((const unsigned char *)base + i);
}

/* A tile row holds 8 chunks of 16 bytes; XOR-swizzling the chunk with the row's low bits puts
 * the 8 rows an ldmatrix phase reads on 8 distinct bank groups. */
__device__ __forceinline__ int swz(int row, int chunk)
{
    return row * BKB + ((chunk ^ (row & 7)) << 4);
}

/* One warp's 64 x 32 accumulators plus bias (bv: per tile column) into the shared-memory y
 * tile (rows from `tile`, columns from col0), rounded once to YD (a compile-time dtype: no
 * per-element switch). */
template <xconv_dtype YD, class acc_t, class bias_t>
__device__ __forceinline__ void tile_store(const acc_t (&acc)[4][4][4], const bias_t *bv,
                                           bool has_bias, unsigned char *tile, int pitch, int col0)
{
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            unsigned char *dst = tile + (mt * 16 + 8 * h) * pitch;
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int cidx = col0 + nt * 8 + e;
                    if constexpr (std::is_same<acc_t, float>::value) {
                        float f = acc[mt][nt][h * 2 + e];
                        if (has_bias) f += bv[cidx];
                        store_f32(YD, dst, cidx, f);
                    } else {
                        uint32_t u = (uint32_t)acc[mt][nt][h * 2 + e];
                        if (has_bias) u += bv[cidx];
                        store_int(YD, dst, cidx, u);
                    }
                }
        }
}

/* MINB 2: two blocks per SM at 128 registers; MINB 1 (one block, 168 registers) was slower.
 * GATHER: A and B pieces are gathered element by element (any strides, channels-first, odd
 * channel counts, unaligned rows) and stored to shared memory by the threads; K is then
 * (tap, block of EPC channels), a tap's last block zero-padded. Otherwise cp.async moves
 * 16-byte runs of channels-last rows. */
template <kind K, int MINB, bool GATHER>
__global__ void __launch_bounds__(THREADS, MINB)
igemm_kernel(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
             const char *__restrict__ bias, char *__restrict__ y, int y_es, bool y_vec)
{
    using acc_t = typename traits<K>::acc;
    constexpr int ES = traits<K>::esize;
    constexpr int EPC = 16 / ES;                     /* elements per 16-byte chunk */
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp >> 2, warp_n = warp & 3; /* 2 x 4 warps: 64 x 32 each */
    const int64_t g = blockIdx.z;
    const int64_t Y0 = p.y_size[0], Y1 = p.y_size[1], Y2 = p.y_size[2];
    const int64_t M = p.n * Y0 * Y1 * Y2;
    const int64_t m0 = (int64_t)blockIdx.x * BM;
    const int64_t o0 = (int64_t)blockIdx.y * BN;
    const int kvol = (int)(p.k_size[0] * p.k_size[1] * p.k_size[2]);
    const int cchunks = (int)((p.cin_g * ES + BKB - 1) / BKB);
    const int cpt = (int)((p.cin_g + EPC - 1) / EPC); /* GATHER: chunks per tap */
    const int KT = GATHER ? (kvol * cpt + CHUNKS - 1) / CHUNKS : kvol * cchunks;

    /* This thread's A and B rows (row = tid/CHUNKS + ROWS_PER_PASS*i) and its chunk. */
    const int chunk = tid % CHUNKS;
    int64_t a_base[PASSES], b_base[PASSES];
    int a_q[PASSES][3];
    bool a_ok[PASSES], b_ok[PASSES];
#pragma unroll
    for (int i = 0; i < PASSES; i++) {
        const int row = tid / CHUNKS + ROWS_PER_PASS * i;
        const int64_t m = m0 + row;
        a_ok[i] = m < M;
        int64_t r = a_ok[i] ? m : 0;
        const int64_t j2 = r % Y2; r /= Y2;
        const int64_t j1 = r % Y1; r /= Y1;
        const int64_t j0 = r % Y0;
        const int64_t n = r / Y0;
        a_q[i][0] = (int)(j0 * p.stride[0] - p.pad_lo[0]);
        a_q[i][1] = (int)(j1 * p.stride[1] - p.pad_lo[1]);
        a_q[i][2] = (int)(j2 * p.stride[2] - p.pad_lo[2]);
        /* x element of tap 0, channel 0 (may lie in the padding: only read when in bounds) */
        a_base[i] = p.x_off + n * p.x_sn + g * p.cin_g * p.x_sc + a_q[i][0] * p.x_ss[0] +
                    a_q[i][1] * p.x_ss[1] + a_q[i][2] * p.x_ss[2];
        const int64_t o = o0 + row;
        b_ok[i] = o < p.cout_g;
        b_base[i] = p.w_off + g * p.w_sg + (b_ok[i] ? o : 0) * p.w_so;
    }
    const int X0 = (int)p.x_size[0], X1 = (int)p.x_size[1], X2 = (int)p.x_size[2];
    const int K1 = (int)p.k_size[1], K2 = (int)p.k_size[2];
    const int D0 = (int)p.dil[0], D1 = (int)p.dil[1], D2 = (int)p.dil[2];

    auto load_stage = [&](int stage, int kt) {
        if constexpr (GATHER) {
            const int gc = kt * CHUNKS + chunk; /* this thread's chunk of all K */
            const int tap = gc / cpt;
            const int c0 = (gc - tap * cpt) * EPC;
            const int nc = tap < kvol ? (p.cin_g - c0 < EPC ? (int)p.cin_g - c0 : EPC) : 0;
            const int t = tap < kvol ? tap : 0;
            const int k2 = t % K2, k1 = (t / K2) % K1, k0 = t / (K2 * K1);
            unsigned char *sa = smem + stage * 2 * TILE_BYTES;
            unsigned char *sb = sa + TILE_BYTES;
            const int64_t x_tap = (int64_t)k0 * D0 * p.x_ss[0] + (int64_t)k1 * D1 * p.x_ss[1] +
                                  (int64_t)k2 * D2 * p.x_ss[2] + (int64_t)c0 * p.x_sc;
            const int64_t w_tap =
                k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2] + (int64_t)c0 * p.w_si;
#pragma unroll
            for (int i = 0; i < PASSES; i++) {
                const int row = tid / CHUNKS + ROWS_PER_PASS * i;
                const int q0 = a_q[i][0] + k0 * D0, q1 = a_q[i][1] + k1 * D1,
                          q2 = a_q[i][2] + k2 * D2;
                const bool ok = a_ok[i] && (unsigned)q0 < (unsigned)X0 &&
                                (unsigned)q1 < (unsigned)X1 && (unsigned)q2 < (unsigned)X2;
                uint32_t va[4] = {0, 0, 0, 0}, vb[4] = {0, 0, 0, 0};
                const int64_t xa = a_base[i] + x_tap, wa = b_base[i] + w_tap;
#pragma unroll
                for (int e = 0; e < EPC; e++) {
                    if (e >= nc) break;
                    if (ok)
                        va[e * ES / 4] |= gather_elem<ES>(x, xa + e * p.x_sc)
                                          << (8 * ((e * ES) & 3));
                    if (b_ok[i])
                        vb[e * ES / 4] |= gather_elem<ES>(w, wa + e * p.w_si)
                                          << (8 * ((e * ES) & 3));
                }
                *(uint4 *)(sa + swz(row, chunk)) = make_uint4(va[0], va[1], va[2], va[3]);
                *(uint4 *)(sb + swz(row, chunk)) = make_uint4(vb[0], vb[1], vb[2], vb[3]);
            }
            return;
        }
        const int tap = kt / cchunks;
        const int c = (kt - tap * cchunks) * (BKB / ES) + chunk * EPC; /* first channel */
        const int k2 = tap % K2;
        const int k1 = (tap / K2) % K1;
        const int k0 = tap / (K2 * K1);
        const bool c_ok = c < p.cin_g;
        unsigned char *sa = smem + stage * 2 * TILE_BYTES;
        unsigned char *sb = sa + TILE_BYTES;
        const int64_t x_tap = (int64_t)k0 * D0 * p.x_ss[0] + (int64_t)k1 * D1 * p.x_ss[1] +
                              (int64_t)k2 * D2 * p.x_ss[2] + c;
        const int64_t w_tap = k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2] + c;
#pragma unroll
        for (int i = 0; i < PASSES; i++) {
            const int row = tid / CHUNKS + ROWS_PER_PASS * i;
            const int q0 = a_q[i][0] + k0 * D0, q1 = a_q[i][1] + k1 * D1, q2 = a_q[i][2] + k2 * D2;
            const bool ok = a_ok[i] && c_ok && (unsigned)q0 < (unsigned)X0 &&
                            (unsigned)q1 < (unsigned)X1 && (unsigned)q2 < (unsigned)X2;
            const char *src = ok ? x + (a_base[i] + x_tap) * ES : x;
            cp_async16(smem_addr(sa + swz(row, chunk)), src, ok);
            const bool okb = b_ok[i] && c_ok;
            const char *srcb = okb ? w + (b_base[i] + w_tap) * ES : w;
            cp_async16(smem_addr(sb + swz(row, chunk)), srcb, okb);
        }
    };

    acc_t acc[4][4][4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) acc[a][b][c] = 0;

    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            const int nk = kt + STAGES - 1;
            if (nk < KT) load_stage(nk % STAGES, nk);
            cp_async_commit();
        }
        const unsigned char *sa = smem + (kt % STAGES) * 2 * TILE_BYTES;
        const unsigned char *sb = sa + TILE_BYTES;
#pragma unroll
        for (int ks = 0; ks < BKB / 32; ks++) { /* 32-byte steps of K */
            uint32_t af[4][4], bfr[2][4];
#pragma unroll
            for (int mt = 0; mt < 4; mt++) {
                const int row = warp_m * 64 + mt * 16 + (lane & 15);
                ldmatrix_x4(af[mt], smem_addr(sa + swz(row, ks * 2 + (lane >> 4))));
            }
#pragma unroll
            for (int np = 0; np < 2; np++) {
                const int row = warp_n * 32 + np * 16 + (lane & 7) + ((lane >> 4) << 3);
                ldmatrix_x4(bfr[np], smem_addr(sb + swz(row, ks * 2 + ((lane >> 3) & 1))));
            }
            if constexpr (K == kind::e4m3 || K == kind::e5m2) {
                /* widen each fragment once: B here, A per row tile (see mma_fp8) */
                uint32_t bh[4][2][2];
#pragma unroll
                for (int nt = 0; nt < 4; nt++)
#pragma unroll
                    for (int hf = 0; hf < 2; hf++) {
                        const uint32_t b = bfr[nt >> 1][(nt & 1) * 2 + hf];
                        bh[nt][hf][0] = fp8_pair<K>(b, false);
                        bh[nt][hf][1] = fp8_pair<K>(b, true);
                    }
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int hf = 0; hf < 2; hf++) {
                        const uint32_t x0 = af[mt][2 * hf], x1 = af[mt][2 * hf + 1];
                        const uint32_t ah[4] = {
                            fp8_pair<K>(x0, false), fp8_pair<K>(x1, false),
                            fp8_pair<K>(x0, true), fp8_pair<K>(x1, true)};
#pragma unroll
                        for (int nt = 0; nt < 4; nt++)
                            mma<kind::f16>(acc[mt][nt], ah, bh[nt][hf][0], bh[nt][hf][1]);
                    }
            } else {
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int nt = 0; nt < 4; nt++)
                        mma<K>(acc[mt][nt], af[mt], bfr[nt >> 1][(nt & 1) * 2],
                               bfr[nt >> 1][(nt & 1) * 2 + 1]);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's shared memory becomes the output tile */

    /* Epilogue 1: bias and one rounding to y's dtype, into a [BM][BN] tile of y elements
     * (rows padded by 16 bytes against bank conflicts). The bias of this thread's 8 columns
     * is read once, and y's dtype is switched on once, outside the unrolled tile: a switch
     * per element made the kernel too large for the instruction cache (ncu: 57% of stalls
     * waiting for instructions on a 1x1 layer). */
    const int pitch = BN * y_es + 16;
    using bias_t =
        typename std::conditional<std::is_same<acc_t, float>::value, float, uint32_t>::type;
    bias_t *bv = (bias_t *)(smem + BM * pitch + BM * sizeof(int64_t));
    xconv_cuda_stage_bias<bias_t, BN>(p, bias, bv, tid, o0, g);
    __syncthreads();
    unsigned char *tile = smem + (warp_m * 64 + (lane >> 2)) * pitch;
    const int col0 = warp_n * 32 + (lane & 3) * 2;
    if constexpr (std::is_same<acc_t, float>::value) {
        switch (p.y_dtype) {
        case XCONV_DTYPE_BF16:
            tile_store<XCONV_DTYPE_BF16>(acc, bv, bias != nullptr, tile, pitch, col0);
            break;
        case XCONV_DTYPE_F16:
            tile_store<XCONV_DTYPE_F16>(acc, bv, bias != nullptr, tile, pitch, col0);
            break;
        case XCONV_DTYPE_F8E4M3:
            tile_store<XCONV_DTYPE_F8E4M3>(acc, bv, bias != nullptr, tile, pitch, col0);
            break;
        case XCONV_DTYPE_F8E5M2:
            tile_store<XCONV_DTYPE_F8E5M2>(acc, bv, bias != nullptr, tile, pitch, col0);
            break;
        default: tile_store<XCONV_DTYPE_F32>(acc, bv, bias != nullptr, tile, pitch, col0); break;
        }
    } else {
        switch (y_es) { /* integers: the low bits of the u32 sum in y's width */
        case 1: tile_store<XCONV_DTYPE_U8>(acc, bv, bias != nullptr, tile, pitch, col0); break;
        case 2: tile_store<XCONV_DTYPE_U16>(acc, bv, bias != nullptr, tile, pitch, col0); break;
        default: tile_store<XCONV_DTYPE_U32>(acc, bv, bias != nullptr, tile, pitch, col0); break;
        }
    }
    __syncthreads();

    /* Epilogue 2: the tile to y, consecutive threads on consecutive output channels */
    xconv_cuda_tile_to_y<BM, BN, THREADS>(p, smem, pitch, y, y_es, y_vec, tid, m0, M, g, o0,
                                          [] { __syncthreads(); });
}

bool aligned16(int64_t elems, int es) { return (elems * es) % 16 == 0; }

template <kind K>
void launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream, bool gather)
{
    const int64_t M = p->n * xconv__prod3(p->y_size);
    const dim3 grid((unsigned)((M + BM - 1) / BM), (unsigned)((p->cout_g + BN - 1) / BN),
                    (unsigned)p->groups);
    const int yes = (int)xconv_dtype_size(p->y_dtype);
    const bool vec = xconv__cuda_y_vec(p, e);
    /* Two blocks per SM measured 1.2-1.8x faster than one (GPU.md); fp8's widened
     * fragments need more registers than two blocks leave (it spilled 120 bytes). */
    constexpr bool fp8 = K == kind::e4m3 || K == kind::e5m2;
    auto kern = gather ? igemm_kernel<K, fp8 ? 1 : 2, true> : igemm_kernel<K, fp8 ? 1 : 2, false>;
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    kern<<<grid, THREADS, SMEM_BYTES, stream>>>(*p, (const char *)e->x, (const char *)e->w,
                                                (const char *)e->bias, (char *)e->y, yes, vec);
}

bool igemm_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.igemm_tc runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cuda.igemm_tc runs conv only", false;
    return xconv__cuda_igemm_fits(p, why_not);
}

size_t igemm_workspace_bytes(const xconv_canon *) { return 0; }

double igemm_cost(const xconv_canon *p) { return xconv__cuda_igemm_cost(p, 1.0); }

xconv_status igemm_run(const xconv_exec *e, xconv_error *err)
{
    return xconv__cuda_run(e, "cuda.igemm_tc", err,
                           [&](cudaStream_t st) { xconv__cuda_igemm_launch(e->p, e, st); });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_igemm = {
    "cuda.igemm_tc",       XCONV_DEVICE_CUDA, igemm_supports,
    igemm_workspace_bytes, igemm_cost,        igemm_run,
    nullptr /* no prepack */, nullptr, nullptr,
};

/* Whether the kernel runs p (a canonical conv, maybe rewritten by another engine) through
 * its gathering loader: dtypes, accumulation, 32-bit coordinates, grid. */
bool xconv__cuda_igemm_fits(const xconv_canon *p, const char **why_not)
{
    const xconv_dtype d = p->x_dtype;
    const bool half = d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F16;
    const bool fp8 = d == XCONV_DTYPE_F8E4M3 || d == XCONV_DTYPE_F8E5M2;
    const bool byte = d == XCONV_DTYPE_I8 || d == XCONV_DTYPE_U8;
    if (!half && !fp8 && !byte)
        return *why_not =
                   "the tensor-core engines take bf16, f16, f8e4m3, f8e5m2, i8 and u8 inputs",
               false;
    if (!byte && p->ct != XCONV_CT_F32)
        return *why_not =
                   "the tensor-core engines accumulate floats in f32 (y f64 computes in f64)",
               false;
    if (byte && p->ct != XCONV_CT_U32)
        return *why_not =
                   "the tensor-core engines accumulate integers modulo 2^32 (y wider than 32 bits)",
               false;
    for (int i = 0; i < 3; i++) {
        /* input coordinates are kept in 32 bits (dilation may be negative: deconv phases) */
        const int64_t dil = p->dil[i] < 0 ? -p->dil[i] : p->dil[i];
        const int64_t pad = p->pad_lo[i] < 0 ? -p->pad_lo[i] : p->pad_lo[i];
        if (p->x_size[i] > (1 << 30) || p->y_size[i] * p->stride[i] > (1 << 30) ||
            p->k_size[i] * dil > (1 << 30) || pad > (1 << 30))
            return *why_not = "the tensor-core engines keep spatial coordinates in 32 bits", false;
    }
    const int epc = half ? 8 : 16;
    if (p->cin_g > (1 << 30) ||
        xconv__prod3(p->k_size) * ((p->cin_g + epc - 1) / epc) > INT32_MAX / 2)
        return *why_not = "the tensor-core engines: reduction too long", false;
    if (p->groups > 65535 || (p->cout_g + BN - 1) / BN > 65535)
        return *why_not =
                   "the tensor-core engines: too many groups or output channels for the grid",
               false;
    if ((p->n * xconv__prod3(p->y_size) + BM - 1) / BM > INT32_MAX)
        return *why_not = "the tensor-core engines: too many output positions for the grid", false;
    if (xconv__cuda_device_cc(p->device_index) < 80)
        return *why_not = "the tensor-core engines need a gpu of compute capability 8.0 or newer",
               false;
    return true;
}

/* Whether p (which fits) also takes the cp.async loader: channels contiguous in x and w,
 * 16-byte runs and rows (pointers are checked at launch). */
bool xconv__cuda_igemm_fast(const xconv_canon *p)
{
    const char *why;
    return xconv__cuda_igemm_fast_why(p, &why);
}

/* The planner's cost: the cp.async loader ~100x faster than cuda.generic; the gathering one
 * measured 8-40 TFLOP/s on the H200 against 180-470 for the 16-byte loader (GPU.md), so
 * about 20x slower again (element loads: the real values), plus the tensor-core work on the
 * zero channels of each tap's last block. */
double xconv__cuda_igemm_cost(const xconv_canon *p, double scale)
{
    if (xconv__cuda_igemm_fast(p)) return scale * 0.02 * p->flops + 2e4;
    const int64_t epc = p->x_dtype == XCONV_DTYPE_BF16 || p->x_dtype == XCONV_DTYPE_F16 ? 8 : 16;
    const double pad =
        (double)((p->cin_g + epc - 1) / epc * epc) / (double)(p->cin_g > 0 ? p->cin_g : 1);
    return scale * (0.4 + 0.02 * pad) * p->flops + 2e4;
}

bool xconv__cuda_igemm_fast_why(const xconv_canon *p, const char **why_not)
{
    if (!xconv__cuda_igemm_fits(p, why_not)) return false;
    const int es = p->x_dtype == XCONV_DTYPE_BF16 || p->x_dtype == XCONV_DTYPE_F16 ? 2 : 1;
    if (p->x_sc != 1 || p->w_si != 1) return *why_not = "channels not contiguous in x and w", false;
    if ((p->cin_g * es) % 16) return *why_not = "cin/groups not a multiple of 16 bytes", false;
    const int64_t xs[] = {p->x_off, p->x_sn, p->x_ss[0], p->x_ss[1], p->x_ss[2], p->cin_g,
                          p->w_off, p->w_sg, p->w_so, p->w_sk[0], p->w_sk[1], p->w_sk[2]};
    for (int64_t v : xs)
        if (!aligned16(v, es)) return *why_not = "x or w rows not 16-byte aligned", false;
    if (p->k_size[0] * p->k_size[1] * p->k_size[2] * ((p->cin_g * es + BKB - 1) / BKB) > INT32_MAX)
        return *why_not = "reduction too long", false;
    return true;
}

/* x and w must start on 16 bytes; the pointers are only known at execute. */
bool xconv__cuda_igemm_ptrs_ok(const xconv_exec *e, const xconv_canon *p)
{
    (void)p;
    return ((uintptr_t)e->x | (uintptr_t)e->w) % 16 == 0;
}

/* Launches the kernel for p (fits) on the stream; the caller entered the device scope and
 * reads the launch status. */
void xconv__cuda_igemm_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream)
{
    const bool g = !(xconv__cuda_igemm_fast(p) && xconv__cuda_igemm_ptrs_ok(e, p));
    switch (p->x_dtype) {
    case XCONV_DTYPE_BF16: launch<kind::bf16>(p, e, stream, g); break;
    case XCONV_DTYPE_F16: launch<kind::f16>(p, e, stream, g); break;
    case XCONV_DTYPE_I8: launch<kind::s8>(p, e, stream, g); break;
    case XCONV_DTYPE_U8: launch<kind::u8>(p, e, stream, g); break;
    case XCONV_DTYPE_F8E4M3: launch<kind::e4m3>(p, e, stream, g); break;
    case XCONV_DTYPE_F8E5M2: launch<kind::e5m2>(p, e, stream, g); break;
    default: break;
    }
}
