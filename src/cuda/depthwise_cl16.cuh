/*
 * depthwise_cl16.cuh — cuda.depthwise's channels-last kernels over 16-byte vectors of
 * channels (depthwise.cu, its one includer; hence the anonymous namespace): the element
 * traits of bf16 / f16 / f32, fp8 and the 8-, 16- and 32-bit integers, one vector's multiply-adds and rounded
 * store, dw_vec (a few output positions per thread, weights staged per block) and dw_slide
 * (runs of outputs along the innermost dim, each input column loaded once).
 */
#ifndef XCONV_CUDA_DEPTHWISE_CL16_CUH
#define XCONV_CUDA_DEPTHWISE_CL16_CUH

#include "cuda/common.cuh"

#include <type_traits>

#include <stdint.h>

namespace {

using namespace xconv_cuda;

constexpr int VEC_THREADS = 256; /* dw_vec's block */

/* ---------------------------------------------------------------------------------------- */
/* channels-last, 16-byte vectors of bf16 / f16 / f32                                       */
/* ---------------------------------------------------------------------------------------- */

constexpr int VEC_POS = 4;             /* output positions per thread */
constexpr int VEC_WBYTES = 32 * 1024;  /* staged weights per block */

/* A 16-byte vector of V elements of D held as 4 words (indices constant after unrolling, so
 * the words stay in registers): element i in the compute type A (f32, or u32 for the byte
 * integers), and the W output words of V sums rounded (or wrapped) into YB-byte elements. */
template <xconv_dtype D> struct vec_traits;
/* bf16 and f16: 8 halves in the 4 words. */
template <xconv_dtype D> struct half_traits {
    using A = float;
    static constexpr int V = 8;
    static __device__ __forceinline__ float get(const uint32_t (&q)[4], int i)
    {
        const uint16_t h = (uint16_t)(q[i >> 1] >> (16 * (i & 1)));
        return D == XCONV_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const float *a, uint32_t (&o)[W])
    {
        static_assert(YB == 2 && W == 4, "16-bit y of the same dtype");
        float lo[W], hi[W];
#pragma unroll
        for (int i = 0; i < W; i++) lo[i] = a[2 * i], hi[i] = a[2 * i + 1];
        round_pairs<D, W>(lo, hi, o); /* one NaN check for the vector */
    }
};
template <> struct vec_traits<XCONV_DTYPE_BF16> : half_traits<XCONV_DTYPE_BF16> {};
template <> struct vec_traits<XCONV_DTYPE_F16> : half_traits<XCONV_DTYPE_F16> {};
template <> struct vec_traits<XCONV_DTYPE_F32> {
    using A = float;
    static constexpr int V = 4;
    static __device__ __forceinline__ float get(const uint32_t (&q)[4], int i)
    {
        return __uint_as_float(q[i]);
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const float *a, uint32_t (&o)[W])
    {
#pragma unroll
        for (int i = 0; i < W; i++) o[i] = __float_as_uint(a[i]);
    }
};

/* i8 / u8: elements widened as load_int does (sign- or zero-extended), wrapping u32 sums
 * stored as 4-byte integers or truncated to bytes. */
template <xconv_dtype D> struct byte_traits {
    using A = uint32_t;
    static constexpr int V = 16;
    static __device__ __forceinline__ uint32_t get(const uint32_t (&q)[4], int i)
    {
        /* one prmt (plain shifts and casts compiled to two instructions): byte k of the
         * word, then copies of its sign bit (selector nibble 8 | k) or zero bytes (nibble 4,
         * the zero operand) above it. Inline PTX: __byte_perm documents only 3-bit nibbles. */
        const uint32_t k = i & 3, sel = D == XCONV_DTYPE_I8 ? k | (8 | k) * 0x1110u : k | 0x4440u;
        uint32_t r;
        asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(q[i >> 2]), "r"(sel));
        return r;
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const uint32_t *a, uint32_t (&o)[W])
    {
#pragma unroll
        for (int i = 0; i < W; i++)
            o[i] = YB == 4 ? a[i]
                           : __byte_perm(__byte_perm(a[4 * i], a[4 * i + 1], 0x0040),
                                         __byte_perm(a[4 * i + 2], a[4 * i + 3], 0x0040), 0x5410);
    }
};
template <> struct vec_traits<XCONV_DTYPE_I8> : byte_traits<XCONV_DTYPE_I8> {};
template <> struct vec_traits<XCONV_DTYPE_U8> : byte_traits<XCONV_DTYPE_U8> {};

/* i16 / u16 (8 per vector) and i32 / u32 (4): widened as load_int does, wrapping u32 sums
 * stored as 4-byte integers or, for 16-bit x, truncated to 16 bits. */
template <xconv_dtype D> struct int_traits {
    using A = uint32_t;
    static constexpr bool WIDE = D == XCONV_DTYPE_I32 || D == XCONV_DTYPE_U32;
    static constexpr int V = WIDE ? 4 : 8;
    static __device__ __forceinline__ uint32_t get(const uint32_t (&q)[4], int i)
    {
        if constexpr (WIDE) return q[i];
        const uint32_t h = q[i >> 1] >> (16 * (i & 1)) & 0xffffu;
        return D == XCONV_DTYPE_I16 ? (uint32_t)(int32_t)(int16_t)h : h;
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const uint32_t *a, uint32_t (&o)[W])
    {
        static_assert(YB == 4 || (YB == 2 && !WIDE), "y of 4 bytes, or 16-bit x's own width");
#pragma unroll
        for (int i = 0; i < W; i++) o[i] = YB == 4 ? a[i] : __byte_perm(a[2 * i], a[2 * i + 1], 0x5410);
    }
};
template <> struct vec_traits<XCONV_DTYPE_I16> : int_traits<XCONV_DTYPE_I16> {};
template <> struct vec_traits<XCONV_DTYPE_U16> : int_traits<XCONV_DTYPE_U16> {};
template <> struct vec_traits<XCONV_DTYPE_I32> : int_traits<XCONV_DTYPE_I32> {};
template <> struct vec_traits<XCONV_DTYPE_U32> : int_traits<XCONV_DTYPE_U32> {};

/* The 8- and 16-byte elements, x and y of one dtype (or i64 / u64 either way): f64, i64 / u64
 * (u64 sums), c64, c128; V = 2 or 1 per vector, their words as they lie in memory. */
template <xconv_dtype D> struct wide_traits {
    using A = typename std::conditional<
        D == XCONV_DTYPE_F64, double,
        typename std::conditional<D == XCONV_DTYPE_C64, xconv_c64,
                                  typename std::conditional<D == XCONV_DTYPE_C128, xconv_c128,
                                                            uint64_t>::type>::type>::type;
    static constexpr int V = D == XCONV_DTYPE_C128 ? 1 : 2;
    static __device__ __forceinline__ A get(const uint32_t (&q)[4], int i)
    {
        const uint32_t lo = q[2 * i], hi = q[2 * i + 1];
        if constexpr (D == XCONV_DTYPE_F64) return __hiloint2double((int)hi, (int)lo);
        else if constexpr (D == XCONV_DTYPE_C64) return A{__uint_as_float(lo), __uint_as_float(hi)};
        else if constexpr (D == XCONV_DTYPE_C128)
            return A{__hiloint2double((int)q[1], (int)q[0]), __hiloint2double((int)q[3], (int)q[2])};
        else return (uint64_t)lo | (uint64_t)hi << 32;
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const A *a, uint32_t (&o)[W])
    {
        static_assert(YB * V == 16 && W == 4, "y of x's width");
#pragma unroll
        for (int i = 0; i < V; i++) {
            if constexpr (D == XCONV_DTYPE_F64) {
                o[2 * i] = (uint32_t)__double2loint(a[i]), o[2 * i + 1] = (uint32_t)__double2hiint(a[i]);
            } else if constexpr (D == XCONV_DTYPE_C64) {
                o[2 * i] = __float_as_uint(a[i].re), o[2 * i + 1] = __float_as_uint(a[i].im);
            } else if constexpr (D == XCONV_DTYPE_C128) {
                o[0] = (uint32_t)__double2loint(a[i].re), o[1] = (uint32_t)__double2hiint(a[i].re);
                o[2] = (uint32_t)__double2loint(a[i].im), o[3] = (uint32_t)__double2hiint(a[i].im);
            } else {
                o[2 * i] = (uint32_t)a[i], o[2 * i + 1] = (uint32_t)(a[i] >> 32);
            }
        }
    }
};
template <> struct vec_traits<XCONV_DTYPE_F64> : wide_traits<XCONV_DTYPE_F64> {};
template <> struct vec_traits<XCONV_DTYPE_I64> : wide_traits<XCONV_DTYPE_I64> {};
template <> struct vec_traits<XCONV_DTYPE_U64> : wide_traits<XCONV_DTYPE_U64> {};
template <> struct vec_traits<XCONV_DTYPE_C64> : wide_traits<XCONV_DTYPE_C64> {};
template <> struct vec_traits<XCONV_DTYPE_C128> : wide_traits<XCONV_DTYPE_C128> {};

/* The dtype whose storage is compute type A's own bits. */
template <class A> struct bits_dtype;
template <> struct bits_dtype<float> { static constexpr xconv_dtype d = XCONV_DTYPE_F32; };
template <> struct bits_dtype<uint32_t> { static constexpr xconv_dtype d = XCONV_DTYPE_U32; };
template <> struct bits_dtype<double> { static constexpr xconv_dtype d = XCONV_DTYPE_F64; };
template <> struct bits_dtype<uint64_t> { static constexpr xconv_dtype d = XCONV_DTYPE_U64; };
template <> struct bits_dtype<xconv_c64> { static constexpr xconv_dtype d = XCONV_DTYPE_C64; };
template <> struct bits_dtype<xconv_c128> { static constexpr xconv_dtype d = XCONV_DTYPE_C128; };

/* The 16 / sizeof(A) compute-type values of a 16-byte quad of dw_slide's staged weights: the
 * vector of the dtype that stores A's bits, read by its own traits. */
template <class A> __device__ __forceinline__ void unpack16(const uint4 &t, A *out)
{
    using T = vec_traits<bits_dtype<A>::d>;
    static_assert(T::V * sizeof(A) == 16, "A is the dtype's own storage");
    const uint32_t q[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
    for (int j = 0; j < T::V; j++) out[j] = T::get(q, j);
}

/* e4m3 / e5m2: 16 codes in the 4 words, f32 sums, y of the same dtype. Codes are widened in
 * pairs through an f16x2 (common.cuh's fp8x2_to_f16x2: exact; a NaN code's NaN becomes the
 * canonical one in its first multiply-add, as every float sum here runs through one), sums
 * rounded as mini_encode rounds (round_pairs_f8: the hardware's conversion, a value it would
 * round otherwise redone by mini_encode). */
template <xconv_dtype D> struct f8_traits {
    using A = float;
    static constexpr int V = 16;
    /* elements 2j and 2j + 1 (vec_mac takes them in pairs) */
    static __device__ __forceinline__ float2 pair(const uint32_t (&q)[4], int j)
    {
        const uint32_t h = fp8x2_to_f16x2<D == XCONV_DTYPE_F8E4M3>(q[j >> 1], j & 1);
        return make_float2(f16_to_f32((uint16_t)h), f16_to_f32((uint16_t)(h >> 16)));
    }
    template <int YB, int W> static __device__ __forceinline__ void words(const float *a, uint32_t (&o)[W])
    {
        static_assert(YB == 1 && W == 4, "fp8 y of the same dtype");
        float lo[8], hi[8];
#pragma unroll
        for (int q = 0; q < 8; q++) lo[q] = a[2 * q], hi[q] = a[2 * q + 1];
        uint16_t h[8];
        round_pairs_f8<D == XCONV_DTYPE_F8E4M3, 8>(lo, hi, h); /* the hardware's, checked */
#pragma unroll
        for (int i = 0; i < W; i++) o[i] = (uint32_t)h[2 * i] | (uint32_t)h[2 * i + 1] << 16;
    }
};
template <> struct vec_traits<XCONV_DTYPE_F8E4M3> : f8_traits<XCONV_DTYPE_F8E4M3> {};
template <> struct vec_traits<XCONV_DTYPE_F8E5M2> : f8_traits<XCONV_DTYPE_F8E5M2> {};

/* acc[v] += element v of the 16-byte vector xv times wf[v] (an array or a pointer). */
template <xconv_dtype D, class W>
__device__ __forceinline__ void vec_mac(typename vec_traits<D>::A *acc, const uint4 &xv,
                                        const W &wf)
{
    const uint32_t q[4] = {xv.x, xv.y, xv.z, xv.w};
    if constexpr (D == XCONV_DTYPE_F8E4M3 || D == XCONV_DTYPE_F8E5M2) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float2 f = vec_traits<D>::pair(q, j);
            acc[2 * j] += f.x * wf[2 * j];
            acc[2 * j + 1] += f.y * wf[2 * j + 1];
        }
    } else {
#pragma unroll
        for (int v = 0; v < vec_traits<D>::V; v++) ops<typename vec_traits<D>::A>::mac(acc[v], vec_traits<D>::get(q, v), wf[v]);
    }
}

/* V sums rounded once (or wrapped) into YB-byte elements at dst: V * YB / 16 vectors. */
template <xconv_dtype D, int YB>
__device__ __forceinline__ void vec_store(char *dst, const typename vec_traits<D>::A *acc)
{
    constexpr int W = vec_traits<D>::V * YB / 4;
    uint32_t o[W];
    vec_traits<D>::template words<YB, W>(acc, o);
#pragma unroll
    for (int j = 0; j < W / 4; j++)
        ((uint4 *)dst)[j] = make_uint4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
}

/* grid.x: position blocks, grid.y: channel chunks of `cc` channels. KS > 0: the kernel is
 * 1 x KS x KS, and every tap's load is issued before the first sum (latency, not bandwidth,
 * bounds a loop that waits for each load). */
template <xconv_dtype D, int KS>
__global__ void __launch_bounds__(VEC_THREADS)
dw_vec(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
       const char *__restrict__ bias, char *__restrict__ y, int cc, int64_t positions)
{
    using VT = vec_traits<D>;
    constexpr int V = VT::V;
    constexpr int ES = 16 / V;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *wk = (float *)smem_raw; /* [tap][cc] */
    const int kvol = (int)(p.k_size[0] * p.k_size[1] * p.k_size[2]);
    const int K1 = (int)p.k_size[1], K2 = (int)p.k_size[2];
    const int c_base = blockIdx.y * cc;
    const int cw = (int)(p.cin - c_base < cc ? p.cin - c_base : cc);
    for (int i = threadIdx.x; i < kvol * cw; i += VEC_THREADS) {
        const int k = i / cw, c = i % cw;
        const int k2 = k % K2, k1 = (k / K2) % K1, k0 = k / (K1 * K2);
        wk[k * cc + c] = load_f32(p.x_dtype, w, p.w_off + (c_base + c) * p.w_sg + k0 * p.w_sk[0] +
                                                 k1 * p.w_sk[1] + k2 * p.w_sk[2]);
    }
    __syncthreads();
    const int groups = cw / V;          /* vectors per position in this chunk */
    const int per_pass = VEC_THREADS / groups;
    const int lt = threadIdx.x;
    if (lt >= per_pass * groups) return;
    const int cg = lt % groups, pl = lt / groups;
    const int c0 = c_base + cg * V;
    float bv[V];
#pragma unroll
    for (int v = 0; v < V; v++)
        bv[v] = bias ? load_f32(p.bias_dtype, bias, p.b_off + (c0 + v) * p.b_s) : 0.0f;
    /* positions < 2^32 (vec_ok): 32-bit divisions, far cheaper than 64-bit ones */
    const uint32_t Y0 = (uint32_t)p.y_size[0], Y1 = (uint32_t)p.y_size[1],
                   Y2 = (uint32_t)p.y_size[2];
    /* positions whose loads are in flight together; 2 measured no faster for bf16 and 1.6x
     * slower for f32 (128 registers: 2 blocks per SM), so 1 */
    constexpr int PP = 1;
    for (int u0 = 0; u0 < VEC_POS; u0 += PP) {
        int64_t n[PP], j0[PP], j1[PP], j2[PP];
        bool live[PP];
#pragma unroll
        for (int pp = 0; pp < PP; pp++) {
            const int64_t pos = ((int64_t)blockIdx.x * VEC_POS + u0 + pp) * per_pass + pl;
            live[pp] = pos < positions;
            uint32_t r = live[pp] ? (uint32_t)pos : 0u;
            j2[pp] = r % Y2; r /= Y2;
            j1[pp] = r % Y1; r /= Y1;
            j0[pp] = r % Y0, n[pp] = r / Y0;
        }
        if (!live[0]) break;
        float acc[PP][V];
#pragma unroll
        for (int pp = 0; pp < PP; pp++)
#pragma unroll
            for (int v = 0; v < V; v++) acc[pp][v] = bv[v];
        if constexpr (KS > 0) {
            uint4 xv[PP][KS * KS];
#pragma unroll
            for (int pp = 0; pp < PP; pp++) {
                const int64_t q0 = j0[pp] * p.stride[0] - p.pad_lo[0];
                const bool ok0 = live[pp] && q0 >= 0 && q0 < p.x_size[0];
                const char *xb = x + (p.x_off + n[pp] * p.x_sn + c0) * ES;
#pragma unroll
                for (int k1 = 0; k1 < KS; k1++) {
                    const int64_t q1 = j1[pp] * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
                    const bool ok1 = ok0 && q1 >= 0 && q1 < p.x_size[1];
                    const char *xr = xb + (q0 * p.x_ss[0] + q1 * p.x_ss[1]) * ES;
#pragma unroll
                    for (int k2 = 0; k2 < KS; k2++) {
                        const int64_t q2 = j2[pp] * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                        const int k = k1 * KS + k2;
                        xv[pp][k] = ok1 && q2 >= 0 && q2 < p.x_size[2]
                                        ? __ldg((const uint4 *)(xr + q2 * p.x_ss[2] * ES))
                                        : make_uint4(0, 0, 0, 0);
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < KS * KS; k++) {
                const float4 *wt = (const float4 *)(wk + k * cc + cg * V);
                float wf[V];
#pragma unroll
                for (int i = 0; i < V / 4; i++) {
                    const float4 t = wt[i];
                    wf[4 * i] = t.x, wf[4 * i + 1] = t.y, wf[4 * i + 2] = t.z, wf[4 * i + 3] = t.w;
                }
#pragma unroll
                for (int pp = 0; pp < PP; pp++)
                    if (live[pp]) vec_mac<D>(acc[pp], xv[pp][k], wf); /* padding: 0 * w */
            }
        } else {
            const char *xb = x + (p.x_off + n[0] * p.x_sn + c0) * ES;
            int k = 0;
            for (int k0 = 0; k0 < p.k_size[0]; k0++) {
                const int64_t q0 = j0[0] * p.stride[0] + k0 * p.dil[0] - p.pad_lo[0];
                const bool ok0 = q0 >= 0 && q0 < p.x_size[0];
                for (int k1 = 0; k1 < K1; k1++) {
                    const int64_t q1 = j1[0] * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
                    const bool ok1 = ok0 && q1 >= 0 && q1 < p.x_size[1];
                    for (int k2 = 0; k2 < K2; k2++, k++) {
                        const int64_t q2 = j2[0] * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                        /* conv's padding reads as 0 and 0 * w joins the sum, as in cpu.ref */
                        const uint4 qv =
                            ok1 && q2 >= 0 && q2 < p.x_size[2]
                                ? __ldg((const uint4 *)(xb + (q0 * p.x_ss[0] + q1 * p.x_ss[1] +
                                                              q2 * p.x_ss[2]) *
                                                                 ES))
                                : make_uint4(0, 0, 0, 0);
                        vec_mac<D>(acc[0], qv, wk + k * cc + cg * V);
                    }
                }
            }
        }
#pragma unroll
        for (int pp = 0; pp < PP; pp++) {
            if (!live[pp]) continue;
            vec_store<D, ES>(y + (p.y_off + n[pp] * p.y_sn + j0[pp] * p.y_ss[0] +
                                  j1[pp] * p.y_ss[1] + j2[pp] * p.y_ss[2] + c0) * ES,
                             acc[pp]);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* channels-last, 16-byte vectors: runs of outputs along dim 2, 32-bit offsets              */
/* ---------------------------------------------------------------------------------------- */

constexpr int SLIDE_THREADS = 128;     /* finer occupancy steps than 256 at ~100 registers */
constexpr int SLIDE_WBYTES = 48 * 1024; /* staged weights and bias per block */
constexpr int SLIDE_STAGES = 3;         /* the piped kernel's rows in flight: 2 while one is summed */

/* dw_slide's outputs per thread along dim 2 for V elements per vector: 4, or 2 where 4 would
 * need more than 10 input columns per row (the registers of 3 blocks per SM); for bytes
 * (V = 16, twice the sums per output) 4 at 3-wide windows only; for 16-bit floats (V = 8)
 * with 3-wide windows at stride 2 2, at 6 blocks per SM (80 registers): with 4 at 5 blocks
 * (96) the kernel spilled and ran mbv2_dw_144s2 at 51.5% of the copy rate, 61-62% with this
 * (60.8% at 4 and 4 blocks, 116 registers; 54% at 2 and 8 blocks, which spilled again). At
 * stride 1 the same cost 5-10% (112x112 rows: 4 input columns per 2 outputs against 6 per 4). */
constexpr bool slide_pair(int kw, int sw, int v) { return v == 8 && kw == 3 && sw == 2; }
/* narrow (dw_run: i8 / u8 where it measured faster; XCONV_DW_RUN2 forces it): runs of 2 for
 * the 16-element kinds' 3-wide windows too, half the sums a thread for more blocks per SM
 * (slide_blocks). */
constexpr int slide_run(int kw, int sw, int v, bool narrow)
{
    if (narrow && v == 16 && kw == 3) return 2;
    return slide_pair(kw, sw, v) ? 2 : (v == 16 ? kw == 3 : 3 * sw + kw <= 10) ? 4 : 2;
}

/* i8 / u8 run their taps four at a time through dp4a (the same wrapping 32-bit sums as a
 * multiply-add per tap): a row's input columns transposed in groups of 4 into one word per
 * channel (byte b = column 4t + b), against staged words of the row's weights shifted by
 * o = r * SW - 4t, the offset of output r's window from group t: byte b holds w[b - o] where
 * that tap exists, else 0. A row stages one word per channel for each o in [1 - KW, 3]. */
constexpr bool slide_dp4a(xconv_dtype d) { return d == XCONV_DTYPE_I8 || d == XCONV_DTYPE_U8; }
constexpr int slide_slots(int kw, bool dp4a) { return dp4a ? kw + 3 : kw; }
/* does some output r of the run meet some group t at offset o? */
constexpr bool slide_o_used(int o, int run, int sw)
{
    for (int r = 0; r < run; r++)
        if ((r * sw - o) % 4 == 0 && r * sw - o >= 0) return true;
    return false;
}

/* The piped dw_slide (PIPE): each thread's next rows copied by cp.async into a ring of
 * SLIDE_STAGES rows in shared memory while it sums the current one, so that the loads in flight
 * do not wait in registers. For the 16-element kinds (bytes, fp8), whose sums fill the
 * registers (3 blocks per SM): there the plain kernel waits on each row's loads (launch_slide
 * takes it for y of x's width only). */
constexpr bool slide_pipe_kind(int v) { return v == 16; }
constexpr int slide_ring_bytes(int kw, int sw, int run)
{
    return SLIDE_STAGES * ((run - 1) * sw + kw) * SLIDE_THREADS * 16;
}

/* Its blocks per SM for __launch_bounds__: 5 (96 registers), 4 for 5 x 5 at stride 1, whose
 * 16-bit kernels would spill at 96; for the 16-element kinds 3 (168) at 3-wide windows (5 at
 * slide_run's narrow runs of 2), else 4 (128); 6 (80) for 16-bit floats at 3-wide windows,
 * stride 2. */
constexpr int slide_blocks(int kw, int sw, int v, int run)
{
    if (v == 16) return kw == 3 ? (run == 2 ? 5 : 3) : 4;
    return slide_pair(kw, sw, v) ? 6 : kw == 5 && sw == 1 ? 4 : 5;
}

/* v / d for v < 2^31 as a multiply-high, an add and a shift (Granlund-Montgomery): the item
 * split runs per item, where a division by a runtime value costs ~20 instructions. */
struct udiv {
    uint32_t d, m, s;
    __device__ __forceinline__ uint32_t operator()(uint32_t v) const
    {
        return (__umulhi(v, m) + v) >> s;
    }
};

udiv make_udiv(uint32_t d)
{
    uint32_t s = 0;
    while (s < 31 && (1u << s) < d) s++;
    return {d, (uint32_t)(((uint64_t)1 << 32) * (((uint64_t)1 << s) - d) / d + 1), s};
}

struct slide_geom {
    udiv runs, y1, y0; /* runs per output row (dim 2), output rows (dim 1), dim 0's outputs */
    uint32_t items;    /* n * y0 * y1 * runs */
    int cv, vecs;      /* vectors per channel chunk (grid.y), per position (cin / V) */
};

/* Where item `it` lies: image n, output row (j0, j1), first output ow0 of the run along dim 2,
 * the run's first input column's offset xn (channel ch0), and its columns [c_lo, c_hi) inside
 * x out of COLS. */
struct slide_pos {
    uint32_t n, xn;
    int j0, j1, ow0, c_lo, c_hi;
};

template <int RUN, int SW, int COLS>
__device__ __forceinline__ slide_pos slide_at(const xconv_canon &p, const slide_geom &sg,
                                              uint32_t it, uint32_t ch0)
{
    slide_pos q;
    const uint32_t r1 = sg.runs(it), r0 = sg.y1(r1);
    q.n = sg.y0(r0);
    q.ow0 = (int)(it - r1 * sg.runs.d) * RUN;
    q.j1 = (int)(r1 - r0 * sg.y1.d), q.j0 = (int)(r0 - q.n * sg.y0.d);
    const int iw0 = q.ow0 * SW - (int)p.pad_lo[2];
    q.c_lo = iw0 < 0 ? -iw0 : 0;
    q.c_hi = (int)p.x_size[2] - iw0 < COLS ? (int)p.x_size[2] - iw0 : COLS;
    q.xn = (uint32_t)p.x_off + q.n * (uint32_t)p.x_sn + ch0 + (uint32_t)iw0 * (uint32_t)p.x_ss[2];
    return q;
}

/* dw_slide's row for i8 / u8 (slide_dp4a): the COLS input vectors transposed into groups of 4
 * columns, one word per channel, each summed by dp4a against the staged words of offset o. */
template <xconv_dtype D, int KW, int SW, int RUN>
__device__ __forceinline__ void
dp4a_row(uint32_t (&acc)[RUN][16], const uint4 (&xv)[(RUN - 1) * SW + KW], const uint4 *wr, int cv)
{
    constexpr int V = 16, Q = 4, H = 4, COLS = (RUN - 1) * SW + KW;
    constexpr int NT = (COLS + 3) / 4;
    uint32_t xw[COLS][4]; /* column c's 4 words of 4 channels, as vec_mac takes them */
#pragma unroll
    for (int c = 0; c < COLS; c++) xw[c][0] = xv[c].x, xw[c][1] = xv[c].y, xw[c][2] = xv[c].z, xw[c][3] = xv[c].w;
    uint32_t tw[NT][V]; /* group t, channel v: bytes of columns 4t .. 4t + 3 */
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const int n = COLS - 4 * t < 4 ? COLS - 4 * t : 4; /* columns in the group */
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t a = xw[4 * t][q], b = n > 1 ? xw[4 * t + 1][q] : 0u;
            if (n == 1) { /* bytes above the first are never weighted */
#pragma unroll
                for (int k = 0; k < 4; k++) tw[t][4 * q + k] = a >> 8 * k;
            } else if (n == 2) {
#pragma unroll
                for (int k = 0; k < 4; k++) tw[t][4 * q + k] = __byte_perm(a, b, k | (4 + k) << 4);
            } else {
                const uint32_t c = xw[4 * t + 2][q], d = n > 3 ? xw[4 * t + 3][q] : 0u;
                const uint32_t ab0 = __byte_perm(a, b, 0x5140), ab1 = __byte_perm(a, b, 0x7362);
                const uint32_t cd0 = __byte_perm(c, d, 0x5140), cd1 = __byte_perm(c, d, 0x7362);
                tw[t][4 * q] = __byte_perm(ab0, cd0, 0x5410);
                tw[t][4 * q + 1] = __byte_perm(ab0, cd0, 0x7632);
                tw[t][4 * q + 2] = __byte_perm(ab1, cd1, 0x5410);
                tw[t][4 * q + 3] = __byte_perm(ab1, cd1, 0x7632);
            }
        }
    }
#pragma unroll
    for (int s = 0; s < slide_slots(KW, true); s++) {
        const int o = s - (KW - 1);
        if (!slide_o_used(o, RUN, SW)) continue;
        uint32_t wf[V];
#pragma unroll
        for (int h = 0; h < H; h++) unpack16<uint32_t>(wr[(s * H + h) * cv], wf + Q * h);
#pragma unroll
        for (int r = 0; r < RUN; r++)
#pragma unroll
            for (int t = 0; t < NT; t++)
                if (r * SW - 4 * t == o)
#pragma unroll
                    for (int v = 0; v < V; v++)
                        acc[r][v] = D == XCONV_DTYPE_I8
                                        ? (uint32_t)__dp4a((int)tw[t][v], (int)wf[v], (int)acc[r][v])
                                        : __dp4a(tw[t][v], wf[v], acc[r][v]);
    }
}

/* The sums of one row of taps (k2 = 0..KW-1) for RUN outputs from the row's COLS input
 * vectors xv, in k2 order. EDGE: only columns [c_lo, c_hi) lie inside x (the others are
 * zeros in xv). */
template <xconv_dtype D, int KW, int SW, int RUN, bool EDGE>
__device__ __forceinline__ void
slide_math(typename vec_traits<D>::A (&acc)[RUN][vec_traits<D>::V], const uint4 (&xv)[(RUN - 1) * SW + KW],
           int c_lo, int c_hi, const uint4 *wr, int cv)
{
    using A = typename vec_traits<D>::A;
    constexpr int V = vec_traits<D>::V, Q = (int)(16 / sizeof(A)), H = V / Q;
    constexpr bool FLOAT = !std::is_integral<A>::value;
    if constexpr (slide_dp4a(D)) {
        dp4a_row<D, KW, SW, RUN>(acc, xv, wr, cv); /* columns outside x are zeros: they add nothing */
    } else {
#pragma unroll
        for (int k2 = 0; k2 < KW; k2++) {
            A wf[V];
#pragma unroll
            for (int h = 0; h < H; h++) unpack16<A>(wr[(k2 * H + h) * cv], wf + Q * h);
#pragma unroll
            for (int r = 0; r < RUN; r++) {
                const int c = r * SW + k2;
                /* floats: a column outside x is a zero whose product joins the sum (Inf * 0 is
                 * NaN, as in cpu.ref); integer products of zero change nothing */
                if (!EDGE || FLOAT || (c >= c_lo && c < c_hi)) vec_mac<D>(acc[r], xv[c], wf);
            }
        }
    }
}

/* One row of taps for RUN outputs: the row's COLS input vectors loaded together, then
 * summed. EDGE: only columns [c_lo, c_hi) lie inside x. */
template <xconv_dtype D, int KW, int SW, int RUN, bool EDGE>
__device__ __forceinline__ void
slide_row(typename vec_traits<D>::A (&acc)[RUN][vec_traits<D>::V],
          const char *__restrict__ x, uint32_t row, uint32_t xs2, int c_lo, int c_hi,
          const uint4 *wr, int cv)
{
    constexpr int V = vec_traits<D>::V, ES = 16 / V;
    constexpr int COLS = (RUN - 1) * SW + KW;
    uint4 xv[COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++)
        xv[c] = !EDGE || (c >= c_lo && c < c_hi)
                    ? __ldg((const uint4 *)(x + (size_t)(row + c * xs2) * ES))
                    : make_uint4(0, 0, 0, 0);
    slide_math<D, KW, SW, RUN, EDGE>(acc, xv, c_lo, c_hi, wr, cv);
}

/* Each thread owns one 16-byte vector of channels and, item after item (grid-stride), a run
 * of RUN outputs along dim 2: a row of the run's window is COLS = (RUN - 1) * SW + KW
 * vectors instead of RUN * KW (9 for 12 taps at stride 2 and RUN 4, 6 at stride 1), all in
 * flight together. Dims 0 and 1 are runtime loops over rows, so any kernel size, stride and
 * dilation there. The weights (and bias, as a last row) are staged once per block in the
 * compute type A as [row][V / Q][cv] 16-byte quads of Q = 16 / sizeof(A) values, neighbouring
 * lanes on neighbouring quads; a thread keeps its
 * vector for the whole grid-stride loop (the thread count used is a multiple of the chunk's
 * vectors). Offsets are 32-bit (slide_ok); a column left of x wraps around 2^32 in row but
 * is never loaded. grid: a full wave of blocks per chunk, grid.y the channel chunks. */
template <xconv_dtype D, int YB, int KW, int SW, int RUN, bool PIPE>
__global__ void __launch_bounds__(SLIDE_THREADS, slide_blocks(KW, SW, vec_traits<D>::V, RUN))
dw_slide(const xconv_canon p, const slide_geom sg, const char *__restrict__ x,
         const char *__restrict__ w, const char *__restrict__ bias, char *__restrict__ y)
{
    using A = typename vec_traits<D>::A;
    constexpr int V = vec_traits<D>::V, ES = 16 / V, Q = (int)(16 / sizeof(A)), H = V / Q;
    constexpr int COLS = (RUN - 1) * SW + KW;
    static_assert(!PIPE || slide_pipe_kind(V), "the ring is sized for the 16-element kinds");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    uint4 *wk = (uint4 *)smem_raw;
    constexpr bool DP4A = slide_dp4a(D);
    constexpr int SL = slide_slots(KW, DP4A); /* staged slots per kernel row */
    const int K0 = (int)p.k_size[0], K1 = (int)p.k_size[1], slots = K0 * K1 * SL;
    const int v_base = blockIdx.y * sg.cv;
    const int cw = sg.vecs - v_base < sg.cv ? sg.vecs - v_base : sg.cv;
    /* thread i stages channel element i of the chunk, every tap and then the bias */
    for (int i = threadIdx.x; i < cw * V; i += SLIDE_THREADS) {
        const int64_t wc = p.w_off + ((int64_t)v_base * V + i) * p.w_sg;
        A *dst = (A *)&wk[i % V / Q * sg.cv + i / V] + i % Q;
        const int slot_words = H * sg.cv * Q; /* in A's */
        for (int k0 = 0; k0 < K0; k0++)
            for (int k1 = 0; k1 < K1; k1++) {
                A wk2[KW];
#pragma unroll
                for (int k2 = 0; k2 < KW; k2++)
                    wk2[k2] = ops<A>::load(D, w, wc + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
                A *drow = dst + (k0 * K1 + k1) * SL * slot_words;
                if constexpr (DP4A) {
#pragma unroll
                    for (int s = 0; s < SL; s++) {
                        uint32_t packed = 0;
#pragma unroll
                        for (int b = 0; b < 4; b++) {
                            const int k2 = b + KW - 1 - s; /* b - o */
                            if (k2 >= 0 && k2 < KW) packed |= (wk2[k2] & 0xffu) << 8 * b;
                        }
                        drow[s * slot_words] = packed;
                    }
                } else {
#pragma unroll
                    for (int k2 = 0; k2 < KW; k2++) drow[k2 * slot_words] = wk2[k2];
                }
            }
        dst[slots * slot_words] =
            bias ? ops<A>::load(p.bias_dtype, bias, p.b_off + ((int64_t)v_base * V + i) * p.b_s)
                 : ops<A>::zero();
    }
    __syncthreads();
    const uint32_t used = gridDim.x * SLIDE_THREADS / cw * cw;
    const uint32_t f = blockIdx.x * SLIDE_THREADS + threadIdx.x;
    if (f >= used) return;
    const int cg = (int)(f % cw);
    const uint4 *wt = wk + cg;
    const int X0 = (int)p.x_size[0], X1 = (int)p.x_size[1];
    const int Y2 = (int)p.y_size[2];
    const uint32_t xs2 = (uint32_t)p.x_ss[2], ch0 = (uint32_t)(v_base + cg) * V;
    const uint32_t step = used / cw;
    constexpr bool FLOAT = !std::is_integral<A>::value;
    /* is input row (i0, i1) of output row (j0, j1) at kernel row (k0, k1) inside x? */
    auto row_in = [&](const slide_pos &q, int k0, int k1, int &i0, int &i1) {
        i0 = q.j0 * (int)p.stride[0] + k0 * (int)p.dil[0] - (int)p.pad_lo[0];
        i1 = q.j1 * (int)p.stride[1] + k1 * (int)p.dil[1] - (int)p.pad_lo[1];
        return i0 >= 0 && i0 < X0 && i1 >= 0 && i1 < X1;
    };
    /* PIPE: the producer, SLIDE_STAGES - 1 rows ahead of the sums in the same (item, k0, k1)
     * order, one cp.async group per row (empty past the last item, and for integer rows
     * outside x, which add nothing); a column outside x is copied as zeros */
    constexpr int S = SLIDE_STAGES;
    uint4 *ring = wk + (slots + 1) * H * sg.cv + threadIdx.x; /* [S][COLS][SLIDE_THREADS] */
    uint32_t p_it = f / cw;
    int p_k0 = 0, p_k1 = 0, p_stage = 0, c_stage = 0;
    slide_pos pq{};
    auto issue = [&]() {
        if (p_it < sg.items) {
            int i0, i1;
            const bool in = row_in(pq, p_k0, p_k1, i0, i1);
            const uint32_t row = pq.xn + i0 * (uint32_t)p.x_ss[0] + i1 * (uint32_t)p.x_ss[1];
            if (in || FLOAT)
#pragma unroll
                for (int c = 0; c < COLS; c++) {
                    const bool ok = in && c >= pq.c_lo && c < pq.c_hi;
                    cp_async16(smem_addr(ring + (p_stage * COLS + c) * SLIDE_THREADS),
                               ok ? x + (size_t)(row + c * xs2) * ES : x, ok);
                }
            if (++p_k1 == K1) {
                p_k1 = 0;
                if (++p_k0 == K0) {
                    p_k0 = 0;
                    p_it += step;
                    if (p_it < sg.items) pq = slide_at<RUN, SW, COLS>(p, sg, p_it, ch0);
                }
            }
        }
        cp_async_commit();
        p_stage = p_stage + 1 == S ? 0 : p_stage + 1;
    };
    if constexpr (PIPE) {
        if (p_it < sg.items) pq = slide_at<RUN, SW, COLS>(p, sg, p_it, ch0);
        for (int s = 0; s < S - 1; s++) issue();
    }
    for (uint32_t it = f / cw; it < sg.items; it += step) {
        const slide_pos q = slide_at<RUN, SW, COLS>(p, sg, it, ch0);
        const uint32_t n = q.n;
        const int ow0 = q.ow0, j0 = q.j0, j1 = q.j1;
        A acc[RUN][V];
#pragma unroll
        for (int h = 0; h < H; h++) {
            A b[Q];
            unpack16<A>(wt[(slots * H + h) * sg.cv], b);
#pragma unroll
            for (int r = 0; r < RUN; r++)
#pragma unroll
                for (int j = 0; j < Q; j++) acc[r][Q * h + j] = b[j];
        }
        if constexpr (PIPE) {
            for (int k0 = 0; k0 < K0; k0++)
                for (int k1 = 0; k1 < K1; k1++) {
                    int i0, i1;
                    const bool in = row_in(q, k0, k1, i0, i1);
                    cp_async_wait<S - 2>(); /* this row's copies have landed */
                    issue(); /* into the slot summed last row */
                    const int stage = c_stage;
                    c_stage = c_stage + 1 == S ? 0 : c_stage + 1;
                    if (!in && !FLOAT) continue; /* integer padding rows add nothing */
                    uint4 xv[COLS];
#pragma unroll
                    for (int c = 0; c < COLS; c++) xv[c] = ring[(stage * COLS + c) * SLIDE_THREADS];
                    /* zeros stand for the columns outside x (a float padding row: all of them) */
                    slide_math<D, KW, SW, RUN, false>(acc, xv, 0, COLS, wt + (k0 * K1 + k1) * SL * H * sg.cv,
                                                 sg.cv);
                }
        } else {
            for (int k0 = 0; k0 < K0; k0++) {
                for (int k1 = 0; k1 < K1; k1++) {
                    int i0, i1;
                    const bool in = row_in(q, k0, k1, i0, i1);
                    if (!in && !FLOAT) continue; /* integer padding rows add nothing */
                    const uint32_t row = q.xn + i0 * (uint32_t)p.x_ss[0] + i1 * (uint32_t)p.x_ss[1];
                    const uint4 *wr = wt + (k0 * K1 + k1) * SL * H * sg.cv;
                    if (!in) /* a float padding row: zeros times the row's weights */
                        slide_row<D, KW, SW, RUN, true>(acc, x, row, xs2, 0, 0, wr, sg.cv);
                    else if (q.c_lo == 0 && q.c_hi == COLS)
                        slide_row<D, KW, SW, RUN, false>(acc, x, row, xs2, 0, COLS, wr, sg.cv);
                    else
                        slide_row<D, KW, SW, RUN, true>(acc, x, row, xs2, q.c_lo, q.c_hi, wr, sg.cv);
                }
            }
        }
        const uint32_t yb = (uint32_t)p.y_off + n * (uint32_t)p.y_sn + j0 * (uint32_t)p.y_ss[0] +
                            j1 * (uint32_t)p.y_ss[1] + ch0;
#pragma unroll
        for (int r = 0; r < RUN; r++)
            if (ow0 + r < Y2)
                vec_store<D, YB>(y + (size_t)(yb + (ow0 + r) * (uint32_t)p.y_ss[2]) * YB, acc[r]);
    }
}

} /* namespace */

#endif /* XCONV_CUDA_DEPTHWISE_CL16_CUH */
