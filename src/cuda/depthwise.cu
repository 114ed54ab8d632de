/*
 * depthwise.cu — "cuda.depthwise": conv with one input channel per group (groups == cin, any
 * channel multiplier), every dtype, any strides. Depthwise work is a few MACs per byte, so
 * the kernels aim at the copy bandwidth: each input element is read from device memory
 * about once and each output written once, in coalesced accesses.
 *
 *   - channels-last (x's channel stride the smallest): threads along channels. With bf16,
 *     f16 or f32 in and out, or i8 / u8 in and the same dtype or a 4-byte integer out
 *     (u32 sums), multiplier 1 and 16-byte aligned rows, each thread owns 16 bytes of
 *     channels. Where dim 2's window is 3 or 5 wide at stride 1 or 2 (dilation 1) and
 *     offsets fit 32 bits, dw_slide: the one-vector-per-tap kernel below it measured
 *     ~35% of the copy rate, latency and instruction bound (64-bit index math per tap, a
 *     weight stage and barrier per short-lived block, a 25% tail wave), so each thread
 *     takes a run of outputs along dim 2 and loads each input column of a window row once
 *     for the run (the columns neighbouring outputs share), all of a row's loads in flight
 *     together, with 32-bit offsets, multiply-shift index splits, and a grid of one wave
 *     of blocks looping over the work so the weights are staged once per block; bytes
 *     took the scalar dw_cl before it (6% of the copy rate). Else (and with
 *     XCONV_DW_OLD=1, which leaves dw_slide out) the floats take dw_vec: one vector load
 *     per tap, a few output positions per thread, the block's weights staged as f32
 *     [tap][channel] in shared memory; 3x3 and 5x5 compiled with every tap's load issued
 *     before the first sum. Other channels-last problems: one thread per output element
 *     (dw_cl).
 *   - channels-first, bf16 / f16 / f32 with 3x3 or 5x5 kernels: outputs spread over threads
 *     (4 per thread for 3x3), all their taps' loads issued together, neighbouring threads on
 *     neighbouring outputs of a plane (dw_cf_direct; L1 serves the rows that taps share).
 *   - other channels-first: one block per (image, channel, tile of output rows): the input
 *     rows the tile needs are staged in shared memory in the compute type, zero-filled
 *     outside x (padding), each read by coalesced row loads, then every output of the tile
 *     sums its taps from there (dw_tile). A 3-D kernel restages per tap of its outer dim.
 *
 * Sums run bias first, then taps in (k0, k1, k2) order: deterministic, no atomics; storage
 * conversions are the library's (common.cuh), rounding once when y is stored (the 16-byte
 * f16 stores through cvt.rn, which rounds as the library does, NaN codes rewritten).
 */
#include "cuda/common.cuh"

#include <stdlib.h>

using namespace xconv_cuda;

namespace {

constexpr int THREADS = 256;
constexpr int OUT_PER_THREAD = 4;                 /* dw_tile: outputs per thread */
constexpr int TILE_OUT = THREADS * OUT_PER_THREAD;
constexpr int SMEM_LIMIT = 48 * 1024;

/* ---------------------------------------------------------------------------------------- */
/* channels-first: row tiles in shared memory                                               */
/* ---------------------------------------------------------------------------------------- */

struct tile_geom {
    int th, tw;       /* output rows and columns (dims 1, 2) per tile */
    int ih, iw;       /* input rows and columns staged */
    int tiles1, tiles2;
    size_t smem;
};

bool plan_tile(const xconv_canon *p, size_t esize, tile_geom *t)
{
    const int64_t kvol = xconv__prod3(p->k_size);
    int64_t tw = p->y_size[2] < 256 ? p->y_size[2] : 256;
    int64_t th = TILE_OUT / tw < p->y_size[1] ? TILE_OUT / tw : p->y_size[1];
    for (;;) {
        const int64_t ih = (th - 1) * p->stride[1] + (p->k_size[1] - 1) * p->dil[1] + 1;
        const int64_t iw = (tw - 1) * p->stride[2] + (p->k_size[2] - 1) * p->dil[2] + 1;
        const double bytes = ((double)ih * (double)iw + (double)kvol) * (double)esize;
        if (bytes <= SMEM_LIMIT) {
            t->th = (int)th, t->tw = (int)tw, t->ih = (int)ih, t->iw = (int)iw;
            t->tiles1 = (int)((p->y_size[1] + th - 1) / th);
            t->tiles2 = (int)((p->y_size[2] + tw - 1) / tw);
            t->smem = (size_t)bytes;
            return true;
        }
        if (th > 1) th = (th + 1) / 2;
        else if (tw > 1) tw = (tw + 1) / 2;
        else return false;
    }
}

template <class T>
__global__ void __launch_bounds__(THREADS)
dw_tile(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
        const char *__restrict__ bias, char *__restrict__ y, const tile_geom tg)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *tile = (T *)smem_raw;
    T *wk = tile + tg.ih * tg.iw;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t tiles_pp = p.y_size[0] * tg.tiles1 * tg.tiles2;
    const int64_t plane = blockIdx.x / tiles_pp;
    int64_t t = blockIdx.x % tiles_pp;
    const int t2 = (int)(t % tg.tiles2); t /= tg.tiles2;
    const int t1 = (int)(t % tg.tiles1);
    const int64_t j0 = t / tg.tiles1;
    const int64_t n = plane / p.cout, co = plane % p.cout;
    const int64_t g = co / p.cout_g, o = co % p.cout_g; /* cin_g == 1: x channel g */
    const int K0 = (int)p.k_size[0], K1 = (int)p.k_size[1], K2 = (int)p.k_size[2];
    const int kvol = K0 * K1 * K2;
    for (int i = tid; i < kvol; i += THREADS) {
        const int k2 = i % K2, k1 = (i / K2) % K1, k0 = i / (K1 * K2);
        wk[i] = ops<T>::load(p.x_dtype, w, p.w_off + g * p.w_sg + o * p.w_so + k0 * p.w_sk[0] +
                                                k1 * p.w_sk[1] + k2 * p.w_sk[2]);
    }
    const int oy0 = t1 * tg.th, ox0 = t2 * tg.tw;
    const int s1 = (int)p.stride[1], s2 = (int)p.stride[2], d1 = (int)p.dil[1], d2 = (int)p.dil[2];
    /* this thread's outputs: tile offset of tap (0, 0), or -1 when outside the tile / y */
    int at[OUT_PER_THREAD];
    T acc[OUT_PER_THREAD];
    const T b0 = bias ? ops<T>::load(p.bias_dtype, bias, p.b_off + co * p.b_s) : ops<T>::zero();
#pragma unroll
    for (int u = 0; u < OUT_PER_THREAD; u++) {
        const int oi = tid + THREADS * u, i = oi / tg.tw, j = oi % tg.tw;
        const bool ok = i < tg.th && oy0 + i < p.y_size[1] && ox0 + j < p.y_size[2];
        at[u] = ok ? i * s1 * tg.iw + j * s2 : -1;
        acc[u] = b0;
    }
    const int64_t q1_0 = (int64_t)oy0 * s1 - p.pad_lo[1], q2_0 = (int64_t)ox0 * s2 - p.pad_lo[2];
    const int64_t xb = p.x_off + n * p.x_sn + g * p.x_sc;
    for (int k0 = 0; k0 < K0; k0++) {
        const int64_t q0 = j0 * p.stride[0] + (int64_t)k0 * p.dil[0] - p.pad_lo[0];
        if (q0 < 0 || q0 >= p.x_size[0]) continue; /* the same for the whole block */
        __syncthreads();                           /* the previous stage is consumed */
        const int64_t xr = xb + q0 * p.x_ss[0];
        /* rows by warps, columns by lanes; loads batched ahead of the stores */
        for (int r = warp; r < tg.ih; r += 4 * (THREADS / 32)) {
            T v[4][2];
#pragma unroll
            for (int rr = 0; rr < 4; rr++) {
                const int row = r + rr * (THREADS / 32);
                const int64_t q1 = q1_0 + row;
                const bool rok = row < tg.ih && q1 >= 0 && q1 < p.x_size[1];
#pragma unroll
                for (int cc = 0; cc < 2; cc++) {
                    const int col = lane + 32 * cc;
                    const int64_t q2 = q2_0 + col;
                    v[rr][cc] =
                        rok && col < tg.iw && q2 >= 0 && q2 < p.x_size[2]
                            ? ops<T>::load(p.x_dtype, x, xr + q1 * p.x_ss[1] + q2 * p.x_ss[2])
                            : ops<T>::zero();
                }
            }
#pragma unroll
            for (int rr = 0; rr < 4; rr++) {
                const int row = r + rr * (THREADS / 32);
#pragma unroll
                for (int cc = 0; cc < 2; cc++)
                    if (row < tg.ih && lane + 32 * cc < tg.iw)
                        tile[row * tg.iw + lane + 32 * cc] = v[rr][cc];
            }
            /* columns past 64 (wide tiles) */
            for (int col = lane + 64; col < tg.iw; col += 32)
#pragma unroll
                for (int rr = 0; rr < 4; rr++) {
                    const int row = r + rr * (THREADS / 32);
                    const int64_t q1 = q1_0 + row, q2 = q2_0 + col;
                    if (row < tg.ih)
                        tile[row * tg.iw + col] =
                            q1 >= 0 && q1 < p.x_size[1] && q2 >= 0 && q2 < p.x_size[2]
                                ? ops<T>::load(p.x_dtype, x, xr + q1 * p.x_ss[1] + q2 * p.x_ss[2])
                                : ops<T>::zero();
                }
        }
        __syncthreads();
        const T *wt = wk + k0 * K1 * K2;
#pragma unroll
        for (int u = 0; u < OUT_PER_THREAD; u++) {
            if (at[u] < 0) continue;
            for (int k1 = 0; k1 < K1; k1++)
                for (int k2 = 0; k2 < K2; k2++)
                    ops<T>::mac(acc[u], tile[at[u] + k1 * d1 * tg.iw + k2 * d2], wt[k1 * K2 + k2]);
        }
    }
    const int64_t yb = p.y_off + n * p.y_sn + co * p.y_sc + j0 * p.y_ss[0];
#pragma unroll
    for (int u = 0; u < OUT_PER_THREAD; u++) {
        if (at[u] < 0) continue;
        const int oi = tid + THREADS * u, i = oi / tg.tw, j = oi % tg.tw;
        ops<T>::store(p.y_dtype, y, yb + (oy0 + i) * p.y_ss[1] + (ox0 + j) * p.y_ss[2], acc[u]);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* channels-last: one thread per output element, channels fastest                           */
/* ---------------------------------------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(THREADS)
dw_cl(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
      const char *__restrict__ bias, char *__restrict__ y, int64_t total)
{
    for (int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * THREADS) {
        int64_t r = idx;
        const int64_t co = r % p.cout; r /= p.cout;
        const int64_t j2 = r % p.y_size[2]; r /= p.y_size[2];
        const int64_t j1 = r % p.y_size[1]; r /= p.y_size[1];
        const int64_t j0 = r % p.y_size[0], n = r / p.y_size[0];
        const int64_t g = co / p.cout_g, o = co % p.cout_g;
        T acc = bias ? ops<T>::load(p.bias_dtype, bias, p.b_off + co * p.b_s) : ops<T>::zero();
        const int64_t xb = p.x_off + n * p.x_sn + g * p.x_sc;
        const int64_t wb = p.w_off + g * p.w_sg + o * p.w_so;
        for (int64_t k0 = 0; k0 < p.k_size[0]; k0++) {
            const int64_t q0 = j0 * p.stride[0] + k0 * p.dil[0] - p.pad_lo[0];
            if (q0 < 0 || q0 >= p.x_size[0]) continue;
            for (int64_t k1 = 0; k1 < p.k_size[1]; k1++) {
                const int64_t q1 = j1 * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
                if (q1 < 0 || q1 >= p.x_size[1]) continue;
                for (int64_t k2 = 0; k2 < p.k_size[2]; k2++) {
                    const int64_t q2 = j2 * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                    if (q2 < 0 || q2 >= p.x_size[2]) continue;
                    ops<T>::mac(
                        acc,
                        ops<T>::load(p.x_dtype, x,
                                     xb + q0 * p.x_ss[0] + q1 * p.x_ss[1] + q2 * p.x_ss[2]),
                        ops<T>::load(p.x_dtype, w,
                                     wb + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]));
                }
            }
        }
        ops<T>::store(p.y_dtype, y, p.y_off + n * p.y_sn + co * p.y_sc + j0 * p.y_ss[0] +
                                        j1 * p.y_ss[1] + j2 * p.y_ss[2], acc);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* channels-last, 16-byte vectors of bf16 / f16 / f32                                       */
/* ---------------------------------------------------------------------------------------- */

constexpr int VEC_POS = 4;             /* output positions per thread */
constexpr int VEC_WBYTES = 32 * 1024;  /* staged weights per block */

/* f16 rounding through the hardware, two at a time: cvt.rn rounds every non-NaN value as
 * the library does (nearest even, overflow to inf, subnormals kept); only a NaN's code
 * differs, and is rewritten to the library's sign | 0x7e00. mini_encode, its branchy software
 * form, made f16 stores ~30% slower than bf16's. */
__device__ __forceinline__ uint32_t f16x2_rne(float lo, float hi)
{
    uint32_t h;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(hi), "f"(lo));
    if (lo != lo) h = (h & 0xffff0000u) | (__float_as_uint(lo) >> 16 & 0x8000u) | 0x7e00u;
    if (hi != hi) h = (h & 0xffffu) | (__float_as_uint(hi) & 0x80000000u) | 0x7e000000u;
    return h;
}

/* A 16-byte vector of V elements of D held as 4 words (indices constant after unrolling, so
 * the words stay in registers): element i in the compute type A (f32, or u32 for the byte
 * integers), and output word i of V sums rounded (or wrapped) into YB-byte elements. */
template <xconv_dtype D> struct vec_traits;
template <> struct vec_traits<XCONV_DTYPE_BF16> {
    using A = float;
    using A4 = float4;
    static constexpr int V = 8;
    static __device__ __forceinline__ float get(const uint32_t (&q)[4], int i)
    {
        return bf16_to_f32((uint16_t)(q[i >> 1] >> (16 * (i & 1))));
    }
    template <int YB> static __device__ __forceinline__ uint32_t word(const float *a, int i)
    {
        return f32_to_bf16(a[2 * i]) | (uint32_t)f32_to_bf16(a[2 * i + 1]) << 16;
    }
};
template <> struct vec_traits<XCONV_DTYPE_F16> {
    using A = float;
    using A4 = float4;
    static constexpr int V = 8;
    static __device__ __forceinline__ float get(const uint32_t (&q)[4], int i)
    {
        return f16_to_f32((uint16_t)(q[i >> 1] >> (16 * (i & 1))));
    }
    template <int YB> static __device__ __forceinline__ uint32_t word(const float *a, int i)
    {
        return f16x2_rne(a[2 * i], a[2 * i + 1]);
    }
};
template <> struct vec_traits<XCONV_DTYPE_F32> {
    using A = float;
    using A4 = float4;
    static constexpr int V = 4;
    static __device__ __forceinline__ float get(const uint32_t (&q)[4], int i)
    {
        return __uint_as_float(q[i]);
    }
    template <int YB> static __device__ __forceinline__ uint32_t word(const float *a, int i)
    {
        return __float_as_uint(a[i]);
    }
};

/* i8 / u8: elements widened as load_int does (sign- or zero-extended), wrapping u32 sums
 * stored as 4-byte integers or truncated to bytes. */
template <xconv_dtype D> struct byte_traits {
    using A = uint32_t;
    using A4 = uint4;
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
    template <int YB> static __device__ __forceinline__ uint32_t word(const uint32_t *a, int i)
    {
        if constexpr (YB == 4) return a[i];
        return __byte_perm(__byte_perm(a[4 * i], a[4 * i + 1], 0x0040),
                           __byte_perm(a[4 * i + 2], a[4 * i + 3], 0x0040), 0x5410);
    }
};
template <> struct vec_traits<XCONV_DTYPE_I8> : byte_traits<XCONV_DTYPE_I8> {};
template <> struct vec_traits<XCONV_DTYPE_U8> : byte_traits<XCONV_DTYPE_U8> {};

/* acc[v] += element v of the 16-byte vector xv times wf[v] (an array or a pointer). */
template <xconv_dtype D, class W>
__device__ __forceinline__ void vec_mac(typename vec_traits<D>::A *acc, const uint4 &xv,
                                        const W &wf)
{
    const uint32_t q[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
    for (int v = 0; v < vec_traits<D>::V; v++) acc[v] += vec_traits<D>::get(q, v) * wf[v];
}

/* V sums rounded once (or wrapped) into YB-byte elements at dst: V * YB / 16 vectors. */
template <xconv_dtype D, int YB>
__device__ __forceinline__ void vec_store(char *dst, const typename vec_traits<D>::A *acc)
{
    constexpr int W = vec_traits<D>::V * YB / 4;
    uint32_t o[W];
#pragma unroll
    for (int i = 0; i < W; i++) o[i] = vec_traits<D>::template word<YB>(acc, i);
#pragma unroll
    for (int j = 0; j < W / 4; j++)
        ((uint4 *)dst)[j] = make_uint4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
}

/* grid.x: position blocks, grid.y: channel chunks of `cc` channels. KS > 0: the kernel is
 * 1 x KS x KS, and every tap's load is issued before the first sum (latency, not bandwidth,
 * bounds a loop that waits for each load). */
template <xconv_dtype D, int KS>
__global__ void __launch_bounds__(THREADS)
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
    for (int i = threadIdx.x; i < kvol * cw; i += THREADS) {
        const int k = i / cw, c = i % cw;
        const int k2 = k % K2, k1 = (k / K2) % K1, k0 = k / (K1 * K2);
        wk[k * cc + c] = load_f32(p.x_dtype, w, p.w_off + (c_base + c) * p.w_sg + k0 * p.w_sk[0] +
                                                 k1 * p.w_sk[1] + k2 * p.w_sk[2]);
    }
    __syncthreads();
    const int groups = cw / V;          /* vectors per position in this chunk */
    const int per_pass = THREADS / groups;
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
            bool okv[PP][KS * KS];
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
                        okv[pp][k] = ok1 && q2 >= 0 && q2 < p.x_size[2];
                        xv[pp][k] = okv[pp][k] ? __ldg((const uint4 *)(xr + q2 * p.x_ss[2] * ES))
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
                    if (okv[pp][k]) vec_mac<D>(acc[pp], xv[pp][k], wf); /* padding adds nothing */
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
                        if (!ok1 || q2 < 0 || q2 >= p.x_size[2]) continue;
                        const uint4 qv = __ldg((
                            const uint4 *)(xb + (q0 * p.x_ss[0] + q1 * p.x_ss[1] + q2 * p.x_ss[2]) *
                                                    ES));
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

/* dw_slide's outputs per thread along dim 2 for V elements per vector: 4, or 2 where 4 would
 * need more than 10 input columns per row (the registers of 3 blocks per SM); for bytes
 * (V = 16, twice the sums per output) 4 at 3-wide windows only. */
constexpr int slide_run(int kw, int sw, int v)
{
    return (v == 16 ? kw == 3 : 3 * sw + kw <= 10) ? 4 : 2;
}

/* Its blocks per SM for __launch_bounds__: 5 (96 registers), 4 for 5 x 5 at stride 1, whose
 * 16-bit kernels would spill at 96; for bytes 3 (168) at 3-wide windows, else 4 (128). */
constexpr int slide_blocks(int kw, int sw, int v)
{
    return v == 16 ? (kw == 3 ? 3 : 4) : kw == 5 && sw == 1 ? 4 : 5;
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

/* One row of taps (k2 = 0..KW-1) for RUN outputs: the row's COLS input vectors loaded
 * together, then summed in k2 order. EDGE: only columns [c_lo, c_hi) lie inside x. */
template <xconv_dtype D, int KW, int SW, bool EDGE>
__device__ __forceinline__ void
slide_row(typename vec_traits<D>::A (&acc)[slide_run(KW, SW, vec_traits<D>::V)][vec_traits<D>::V],
          const char *__restrict__ x, uint32_t row, uint32_t xs2, int c_lo, int c_hi,
          const typename vec_traits<D>::A4 *wr, int cv)
{
    constexpr int V = vec_traits<D>::V, ES = 16 / V, H = V / 4;
    constexpr int RUN = slide_run(KW, SW, V), COLS = (RUN - 1) * SW + KW;
    uint4 xv[COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++)
        xv[c] = !EDGE || (c >= c_lo && c < c_hi)
                    ? __ldg((const uint4 *)(x + (size_t)(row + c * xs2) * ES))
                    : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k2 = 0; k2 < KW; k2++) {
        typename vec_traits<D>::A wf[V];
#pragma unroll
        for (int h = 0; h < H; h++) {
            const typename vec_traits<D>::A4 t = wr[(k2 * H + h) * cv];
            wf[4 * h] = t.x, wf[4 * h + 1] = t.y, wf[4 * h + 2] = t.z, wf[4 * h + 3] = t.w;
        }
#pragma unroll
        for (int r = 0; r < RUN; r++) {
            const int c = r * SW + k2;
            if (!EDGE || (c >= c_lo && c < c_hi)) vec_mac<D>(acc[r], xv[c], wf);
        }
    }
}

/* Each thread owns one 16-byte vector of channels and, item after item (grid-stride), a run
 * of RUN outputs along dim 2: a row of the run's window is COLS = (RUN - 1) * SW + KW
 * vectors instead of RUN * KW (9 for 12 taps at stride 2 and RUN 4, 6 at stride 1), all in
 * flight together. Dims 0 and 1 are runtime loops over rows, so any kernel size, stride and
 * dilation there. The weights (and bias, as a last row) are staged once per block in the
 * compute type (f32, or u32 for bytes) as [row][V / 4][cv] 16-byte quads, neighbouring lanes
 * on neighbouring quads; a thread keeps its
 * vector for the whole grid-stride loop (the thread count used is a multiple of the chunk's
 * vectors). Offsets are 32-bit (slide_ok); a column left of x wraps around 2^32 in row but
 * is never loaded. grid: a full wave of blocks per chunk, grid.y the channel chunks. */
template <xconv_dtype D, int YB, int KW, int SW>
__global__ void __launch_bounds__(SLIDE_THREADS, slide_blocks(KW, SW, vec_traits<D>::V))
dw_slide(const xconv_canon p, const slide_geom sg, const char *__restrict__ x,
         const char *__restrict__ w, const char *__restrict__ bias, char *__restrict__ y)
{
    using A = typename vec_traits<D>::A;
    using A4 = typename vec_traits<D>::A4;
    constexpr int V = vec_traits<D>::V, H = V / 4;
    constexpr int RUN = slide_run(KW, SW, V), COLS = (RUN - 1) * SW + KW;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    A4 *wk = (A4 *)smem_raw;
    const int K0 = (int)p.k_size[0], K1 = (int)p.k_size[1], taps = K0 * K1 * KW;
    const int v_base = blockIdx.y * sg.cv;
    const int cw = sg.vecs - v_base < sg.cv ? sg.vecs - v_base : sg.cv;
    /* thread i stages channel element i of the chunk, every tap and then the bias */
    for (int i = threadIdx.x; i < cw * V; i += SLIDE_THREADS) {
        const int64_t wc = p.w_off + ((int64_t)v_base * V + i) * p.w_sg;
        A *dst = (A *)&wk[i % V / 4 * sg.cv + i / V] + i % 4;
        const int tap_words = H * sg.cv * 4;
        for (int k0 = 0; k0 < K0; k0++)
            for (int k1 = 0; k1 < K1; k1++)
#pragma unroll
                for (int k2 = 0; k2 < KW; k2++)
                    dst[((k0 * K1 + k1) * KW + k2) * tap_words] =
                        ops<A>::load(D, w, wc + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
        dst[taps * tap_words] =
            bias ? ops<A>::load(p.bias_dtype, bias, p.b_off + ((int64_t)v_base * V + i) * p.b_s)
                 : ops<A>::zero();
    }
    __syncthreads();
    const uint32_t used = gridDim.x * SLIDE_THREADS / cw * cw;
    const uint32_t f = blockIdx.x * SLIDE_THREADS + threadIdx.x;
    if (f >= used) return;
    const int cg = (int)(f % cw);
    const A4 *wt = wk + cg;
    const int X0 = (int)p.x_size[0], X1 = (int)p.x_size[1], X2 = (int)p.x_size[2];
    const int Y2 = (int)p.y_size[2];
    const uint32_t xs2 = (uint32_t)p.x_ss[2], ch0 = (uint32_t)(v_base + cg) * V;
    for (uint32_t it = f / cw; it < sg.items; it += used / cw) {
        const uint32_t r1 = sg.runs(it), r0 = sg.y1(r1), n = sg.y0(r0);
        const int ow0 = (int)(it - r1 * sg.runs.d) * RUN;
        const int j1 = (int)(r1 - r0 * sg.y1.d), j0 = (int)(r0 - n * sg.y0.d);
        const int iw0 = ow0 * SW - (int)p.pad_lo[2];
        const int c_lo = iw0 < 0 ? -iw0 : 0, c_hi = X2 - iw0 < COLS ? X2 - iw0 : COLS;
        const uint32_t xn =
            (uint32_t)p.x_off + n * (uint32_t)p.x_sn + ch0 + (uint32_t)iw0 * xs2;
        A acc[RUN][V];
#pragma unroll
        for (int h = 0; h < H; h++) {
            const A4 b = wt[(taps * H + h) * sg.cv];
#pragma unroll
            for (int r = 0; r < RUN; r++)
                acc[r][4 * h] = b.x, acc[r][4 * h + 1] = b.y, acc[r][4 * h + 2] = b.z,
                           acc[r][4 * h + 3] = b.w;
        }
        for (int k0 = 0; k0 < K0; k0++) {
            const int i0 = j0 * (int)p.stride[0] + k0 * (int)p.dil[0] - (int)p.pad_lo[0];
            if (i0 < 0 || i0 >= X0) continue; /* padding rows add nothing */
            for (int k1 = 0; k1 < K1; k1++) {
                const int i1 = j1 * (int)p.stride[1] + k1 * (int)p.dil[1] - (int)p.pad_lo[1];
                if (i1 < 0 || i1 >= X1) continue;
                const uint32_t row = xn + i0 * (uint32_t)p.x_ss[0] + i1 * (uint32_t)p.x_ss[1];
                const A4 *wr = wt + (k0 * K1 + k1) * KW * H * sg.cv;
                if (c_lo == 0 && c_hi == COLS)
                    slide_row<D, KW, SW, false>(acc, x, row, xs2, 0, COLS, wr, sg.cv);
                else
                    slide_row<D, KW, SW, true>(acc, x, row, xs2, c_lo, c_hi, wr, sg.cv);
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

/* ---------------------------------------------------------------------------------------- */
/* channels-first, bf16 / f16 / f32, 1 x KS x KS kernels: direct, all taps' loads in flight  */
/* ---------------------------------------------------------------------------------------- */

/* One output per thread, neighbouring threads on neighbouring outputs of one (image,
 * channel) plane: each tap's loads are coalesced rows, and the rows that neighbouring taps
 * and outputs share come from L1. grid: planes * bpp blocks. */
template <xconv_dtype D, int KS>
__global__ void __launch_bounds__(THREADS)
dw_cf_direct(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
             const char *__restrict__ bias, char *__restrict__ y, uint32_t total)
{
    /* OPT outputs per thread (THREADS apart), every load issued before the first sum: one
     * output per thread measured 0.5 TB/s, bound by each thread's one round trip. */
    constexpr int OPT = KS == 3 ? 4 : 1;
    /* every index below 2^32 (cf_direct_ok): 32-bit divisions, far cheaper than 64-bit */
    const uint32_t Y1 = (uint32_t)p.y_size[1], Y2 = (uint32_t)p.y_size[2];
    const uint32_t P = (uint32_t)p.y_size[0] * Y1 * Y2;
    const uint32_t cout = (uint32_t)p.cout, cout_g = (uint32_t)p.cout_g;
    float xv[OPT][KS * KS];
    bool okv[OPT][KS * KS];
    uint32_t plane[OPT], j0[OPT], j1[OPT], j2[OPT];
    bool live[OPT];
#pragma unroll
    for (int u = 0; u < OPT; u++) {
        const uint32_t idx = (blockIdx.x * OPT + u) * THREADS + threadIdx.x;
        live[u] = idx < total;
        const uint32_t id = live[u] ? idx : 0u;
        plane[u] = id / P;
        const uint32_t pos = id - plane[u] * P;
        j2[u] = pos % Y2, j1[u] = (pos / Y2) % Y1, j0[u] = pos / (Y2 * Y1);
        const int64_t n = plane[u] / cout, co = plane[u] % cout, g = (uint32_t)co / cout_g;
        const int64_t q0 = (int64_t)j0[u] * p.stride[0] - p.pad_lo[0];
        const bool ok0 = live[u] && q0 >= 0 && q0 < p.x_size[0];
        const int64_t xb = p.x_off + n * p.x_sn + g * p.x_sc + q0 * p.x_ss[0];
#pragma unroll
        for (int k1 = 0; k1 < KS; k1++) {
            const int64_t q1 = (int64_t)j1[u] * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
            const bool ok1 = ok0 && q1 >= 0 && q1 < p.x_size[1];
#pragma unroll
            for (int k2 = 0; k2 < KS; k2++) {
                const int64_t q2 = (int64_t)j2[u] * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                const int k = k1 * KS + k2;
                okv[u][k] = ok1 && q2 >= 0 && q2 < p.x_size[2];
                xv[u][k] = okv[u][k] ? load_f32(D, x, xb + q1 * p.x_ss[1] + q2 * p.x_ss[2]) : 0.0f;
            }
        }
    }
#pragma unroll
    for (int u = 0; u < OPT; u++) {
        if (!live[u]) continue;
        const int64_t n = plane[u] / cout, co = plane[u] % cout;
        const int64_t g = (uint32_t)co / cout_g, o = (uint32_t)co % cout_g;
        float acc = bias ? load_f32(p.bias_dtype, bias, p.b_off + co * p.b_s) : 0.0f;
        const int64_t wb = p.w_off + g * p.w_sg + o * p.w_so;
#pragma unroll
        for (int k1 = 0; k1 < KS; k1++)
#pragma unroll
            for (int k2 = 0; k2 < KS; k2++)
                if (okv[u][k1 * KS + k2])
                    acc +=
                        xv[u][k1 * KS + k2] * load_f32(D, w, wb + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
        store_f32(p.y_dtype, y,
                  p.y_off + n * p.y_sn + co * p.y_sc + j0[u] * p.y_ss[0] + j1[u] * p.y_ss[1] +
                      j2[u] * p.y_ss[2],
                  acc);
    }
}

/* The kernel size dw_vec / dw_cf_direct are compiled for (1 x KS x KS), or 0. */
int fixed_ks(const xconv_canon *p)
{
    if (p->k_size[0] != 1 || p->k_size[1] != p->k_size[2]) return 0;
    return p->k_size[1] == 3 || p->k_size[1] == 5 ? (int)p->k_size[1] : 0;
}

/* dw_cf_direct: a float dtype with f32 sums, a fixed kernel size, 32-bit plane positions. */
bool cf_direct_ok(const xconv_canon *p)
{
    const xconv_dtype d = p->x_dtype;
    if (d != XCONV_DTYPE_BF16 && d != XCONV_DTYPE_F16 && d != XCONV_DTYPE_F32) return false;
    if (p->ct != XCONV_CT_F32 || !fixed_ks(p)) return false;
    return (double)p->n * (double)p->cout * (double)xconv__prod3(p->y_size) <
           4294965248.0; /* 2^32 - 2048: the last block's indices too */
}

/* ---------------------------------------------------------------------------------------- */
/* Engine                                                                                   */
/* ---------------------------------------------------------------------------------------- */

int64_t absv(int64_t v) { return v < 0 ? -v : v; }

/* Threads along channels when x's channel stride is the smallest one that moves. */
bool channels_fastest(const xconv_canon *p)
{
    if (p->cin == 1) return false;
    for (int d = 2; d >= 0; d--)
        if (p->x_size[d] > 1) return absv(p->x_sc) <= absv(p->x_ss[d]);
    return true;
}

/* dw_vec's channels per block: as many vectors as the weight stage holds, at most one
 * vector per thread. */
int64_t vec_chunk(const xconv_canon *p, int V)
{
    int64_t cc = VEC_WBYTES / (xconv__prod3(p->k_size) * 4) / V * V;
    if (cc > (int64_t)THREADS * V) cc = (int64_t)THREADS * V;
    return cc > p->cin ? p->cin : cc;
}

bool is_float16x(xconv_dtype d)
{
    return d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F16 || d == XCONV_DTYPE_F32;
}

/* The 16-byte channels-last path: multiplier 1, channels contiguous, aligned rows, and
 * bf16 / f16 / f32 in and out with f32 sums or i8 / u8 in with u32 sums out to the same
 * dtype or a 4-byte integer (YB: y's element bytes). */
bool cl16_ok(const xconv_canon *p)
{
    const xconv_dtype d = p->x_dtype;
    const bool byte = d == XCONV_DTYPE_I8 || d == XCONV_DTYPE_U8;
    if (is_float16x(d) ? p->y_dtype != d || p->ct != XCONV_CT_F32
                       : !byte || p->ct != XCONV_CT_U32 ||
                             (p->y_dtype != d && xconv_dtype_size(p->y_dtype) != 4))
        return false;
    if (p->cout_g != 1 || p->x_sc != 1 || p->y_sc != 1) return false;
    const int64_t V = 16 / (int64_t)xconv_dtype_size(d);
    const int64_t VY = 16 / (int64_t)xconv_dtype_size(p->y_dtype);
    const int64_t must[] = {p->cin, p->x_off, p->x_sn, p->x_ss[0], p->x_ss[1], p->x_ss[2]};
    const int64_t must_y[] = {p->y_off, p->y_sn, p->y_ss[0], p->y_ss[1], p->y_ss[2]};
    for (int64_t v : must)
        if (v % V) return false;
    for (int64_t v : must_y)
        if (v % VY) return false;
    return true;
}

/* dw_vec: the 16-byte path's float dtypes with their weights within its stage. */
bool vec_ok(const xconv_canon *p)
{
    if (!is_float16x(p->x_dtype) || !cl16_ok(p)) return false;
    const int V = p->x_dtype == XCONV_DTYPE_F32 ? 4 : 8;
    const int64_t kvol = xconv__prod3(p->k_size);
    /* grid.x = positions / (4 or more) stays below 2^31 */
    if (kvol * V * 4 > VEC_WBYTES) return false;
    const int64_t cc = vec_chunk(p, V);
    return (p->cin + cc - 1) / cc <= 65535 && p->n * xconv__prod3(p->y_size) < ((int64_t)1 << 32);
}

/* dw_slide's vectors per channel chunk: equal chunks, each at most a block's threads and
 * its weights and bias (4-byte sums) within the stage. */
int64_t slide_chunk(const xconv_canon *p, int V)
{
    const int64_t vecs = p->cin / V;
    int64_t most = SLIDE_WBYTES / ((xconv__prod3(p->k_size) + 1) * V * 4);
    if (most > SLIDE_THREADS) most = SLIDE_THREADS;
    const int64_t chunks = (vecs + most - 1) / most;
    return (vecs + chunks - 1) / chunks;
}

/* dw_slide: the 16-byte path with a compiled dim-2 window (3 or 5 wide, stride 1 or 2,
 * dilation 1), its weights within the stage, and 32-bit offsets and coordinates: x and y
 * below 2^31 elements with non-negative strides, each dim's window coordinates below 2^30,
 * fewer than 2^31 items. */
bool slide_ok(const xconv_canon *p)
{
    if (!cl16_ok(p) || (p->k_size[2] != 3 && p->k_size[2] != 5)) return false;
    if (p->dil[2] != 1 || p->stride[2] < 1 || p->stride[2] > 2) return false;
    const int V = 16 / (int)xconv_dtype_size(p->x_dtype);
    if ((xconv__prod3(p->k_size) + 1) * V * 4 > SLIDE_WBYTES) return false;
    if (p->x_sn < 0 || p->y_sn < 0) return false;
    int64_t x_end = p->x_off + (p->n - 1) * p->x_sn + p->cin;
    int64_t y_end = p->y_off + (p->n - 1) * p->y_sn + p->cout;
    for (int d = 0; d < 3; d++) {
        if (p->x_ss[d] < 0 || p->y_ss[d] < 0 || p->pad_lo[d] < 0) return false;
        x_end += (p->x_size[d] - 1) * p->x_ss[d];
        y_end += (p->y_size[d] - 1) * p->y_ss[d];
        if ((p->y_size[d] - 1) * p->stride[d] + (p->k_size[d] - 1) * p->dil[d] + p->pad_lo[d] +
                p->x_size[d] >= ((int64_t)1 << 30))
            return false;
    }
    const int run = slide_run((int)p->k_size[2], (int)p->stride[2], V);
    const int64_t items = p->n * p->y_size[0] * p->y_size[1] * ((p->y_size[2] + run - 1) / run);
    const int64_t cv = slide_chunk(p, V);
    return x_end <= INT32_MAX && y_end <= INT32_MAX && items <= INT32_MAX &&
           (p->cin / V + cv - 1) / cv <= 65535;
}

size_t ctype_bytes(xconv_ctype ct) { return xconv__ctype_size(ct); }

bool dw_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.depthwise runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cuda.depthwise runs conv only", false;
    if (p->cin_g != 1)
        return *why_not = "cuda.depthwise needs one input channel per group (groups == cin)", false;
    if (channels_fastest(p) || cf_direct_ok(p)) return true;
    tile_geom tg;
    if (!plan_tile(p, ctype_bytes(p->ct), &tg))
        return *why_not = "cuda.depthwise: the kernel window does not fit its shared-memory tile",
               false;
    if ((double)p->n * (double)p->cout * (double)p->y_size[0] * tg.tiles1 * tg.tiles2 >
        (double)INT32_MAX)
        return *why_not = "cuda.depthwise: too many tiles for its grid", false;
    for (int d = 0; d < 3; d++)
        if (p->stride[d] > (1 << 20) || p->dil[d] > (1 << 20) || p->k_size[d] > (1 << 20))
            return *why_not = "cuda.depthwise keeps tile coordinates in 32 bits", false;
    return true;
}

size_t dw_workspace_bytes(const xconv_canon *) { return 0; }

/* Far below cuda.generic (which runs the same sums one element at a time). */
double dw_cost(const xconv_canon *p) { return 0.3 * p->flops + 1e4; }

template <class T> void launch_generic(const xconv_canon *p, const xconv_exec *e, cudaStream_t st)
{
    const char *x = (const char *)e->x, *w = (const char *)e->w, *b = (const char *)e->bias;
    char *y = (char *)e->y;
    if (channels_fastest(p)) {
        const int64_t total = p->n * p->cout * xconv__prod3(p->y_size);
        const int64_t want = (total + THREADS - 1) / THREADS;
        const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * 64;
        dw_cl<T><<<(unsigned)(want < cap ? want : cap), THREADS, 0, st>>>(*p, x, w, b, y, total);
        return;
    }
    tile_geom tg;
    plan_tile(p, sizeof(T), &tg);
    const int64_t blocks = p->n * p->cout * p->y_size[0] * tg.tiles1 * tg.tiles2;
    dw_tile<T><<<(unsigned)blocks, THREADS, tg.smem, st>>>(*p, x, w, b, y, tg);
}

template <xconv_dtype D>
void launch_cf_direct(const xconv_canon *p, const xconv_exec *e, cudaStream_t st)
{
    const int64_t total = p->n * p->cout * xconv__prod3(p->y_size);
    const int64_t per_block = (int64_t)THREADS * (fixed_ks(p) == 3 ? 4 : 1); /* OPT */
    const unsigned blocks = (unsigned)((total + per_block - 1) / per_block);
    auto kern = fixed_ks(p) == 3 ? dw_cf_direct<D, 3> : dw_cf_direct<D, 5>;
    kern<<<blocks, THREADS, 0, st>>>(*p, (const char *)e->x, (const char *)e->w,
                                     (const char *)e->bias, (char *)e->y, (uint32_t)total);
}

template <xconv_dtype D> void launch_vec(const xconv_canon *p, const xconv_exec *e, cudaStream_t st)
{
    constexpr int V = vec_traits<D>::V;
    const int64_t kvol = xconv__prod3(p->k_size), cc = vec_chunk(p, V);
    const int64_t groups = cc / V, per_pass = THREADS / groups;
    const int64_t positions = p->n * xconv__prod3(p->y_size);
    const int64_t per_block = per_pass * VEC_POS;
    const dim3 grid((unsigned)((positions + per_block - 1) / per_block),
                    (unsigned)((p->cin + cc - 1) / cc));
    const int ks = fixed_ks(p);
    auto kern = ks == 3 ? dw_vec<D, 3> : ks == 5 ? dw_vec<D, 5> : dw_vec<D, 0>;
    kern<<<grid, THREADS, (size_t)(kvol * cc * 4), st>>>(*p, (const char *)e->x, (const char *)e->w,
                                                         (const char *)e->bias, (char *)e->y,
                                                         (int)cc, positions);
}

template <xconv_dtype D, int YB>
void launch_slide(const xconv_canon *p, const xconv_exec *e, cudaStream_t st)
{
    using kern_t = void (*)(const xconv_canon, const slide_geom, const char *, const char *,
                            const char *, char *);
    static constexpr kern_t KERNS[2][2] = {{dw_slide<D, YB, 3, 1>, dw_slide<D, YB, 3, 2>},
                                           {dw_slide<D, YB, 5, 1>, dw_slide<D, YB, 5, 2>}};
    constexpr int V = vec_traits<D>::V;
    const kern_t kern = KERNS[p->k_size[2] == 5][p->stride[2] == 2];
    const int run = slide_run((int)p->k_size[2], (int)p->stride[2], V);
    const int64_t runs = (p->y_size[2] + run - 1) / run, cv = slide_chunk(p, V);
    const int64_t chunks = (p->cin / V + cv - 1) / cv;
    slide_geom sg;
    sg.runs = make_udiv((uint32_t)runs);
    sg.y1 = make_udiv((uint32_t)p->y_size[1]);
    sg.y0 = make_udiv((uint32_t)p->y_size[0]);
    sg.items = (uint32_t)(p->n * p->y_size[0] * p->y_size[1] * runs);
    sg.cv = (int)cv, sg.vecs = (int)(p->cin / V);
    const size_t smem = (size_t)((xconv__prod3(p->k_size) + 1) * cv * V * 4);
    /* one wave: the blocks that fit the SMs at once, shared by the chunks */
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, SLIDE_THREADS, smem) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        per_sm = 1;
    }
    const int64_t wave =
        (int64_t)xconv__cuda_device_sms(p->device_index) * (per_sm > 0 ? per_sm : 1);
    const int64_t want = ((int64_t)sg.items * cv + SLIDE_THREADS - 1) / SLIDE_THREADS;
    const int64_t cap = wave / chunks > 1 ? wave / chunks : 1;
    const dim3 grid((unsigned)(want < cap ? want : cap), (unsigned)chunks);
    kern<<<grid, SLIDE_THREADS, smem, st>>>(*p, sg, (const char *)e->x, (const char *)e->w,
                                            (const char *)e->bias, (char *)e->y);
}

/* dw_slide where it fits, else dw_vec, dw_cf_direct, or the generic kernels; XCONV_DW_OLD=1
 * (read per run, for comparisons) leaves dw_slide out. */
xconv_status dw_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const char *old = getenv("XCONV_DW_OLD");
    const bool aligned = ((uintptr_t)e->x | (uintptr_t)e->y) % 16 == 0;
    const bool slide = aligned && !(old && old[0] == '1') && slide_ok(p);
    const bool vec = aligned && vec_ok(p);
    const bool y4 = xconv_dtype_size(p->y_dtype) == 4; /* i8 / u8 into i32 / u32 */
    return xconv__cuda_run(e, "cuda.depthwise", err, [&](cudaStream_t st) {
        if (slide) {
            switch (p->x_dtype) {
            case XCONV_DTYPE_BF16: launch_slide<XCONV_DTYPE_BF16, 2>(p, e, st); break;
            case XCONV_DTYPE_F16: launch_slide<XCONV_DTYPE_F16, 2>(p, e, st); break;
            case XCONV_DTYPE_F32: launch_slide<XCONV_DTYPE_F32, 4>(p, e, st); break;
            case XCONV_DTYPE_I8:
                if (y4) launch_slide<XCONV_DTYPE_I8, 4>(p, e, st);
                else launch_slide<XCONV_DTYPE_I8, 1>(p, e, st);
                break;
            default:
                if (y4) launch_slide<XCONV_DTYPE_U8, 4>(p, e, st);
                else launch_slide<XCONV_DTYPE_U8, 1>(p, e, st);
                break;
            }
        } else if (vec) {
            switch (p->x_dtype) {
            case XCONV_DTYPE_BF16: launch_vec<XCONV_DTYPE_BF16>(p, e, st); break;
            case XCONV_DTYPE_F16: launch_vec<XCONV_DTYPE_F16>(p, e, st); break;
            default: launch_vec<XCONV_DTYPE_F32>(p, e, st); break;
            }
        } else if (!channels_fastest(p) && cf_direct_ok(p)) {
            switch (p->x_dtype) {
            case XCONV_DTYPE_BF16: launch_cf_direct<XCONV_DTYPE_BF16>(p, e, st); break;
            case XCONV_DTYPE_F16: launch_cf_direct<XCONV_DTYPE_F16>(p, e, st); break;
            default: launch_cf_direct<XCONV_DTYPE_F32>(p, e, st); break;
            }
        } else {
            switch (p->ct) {
            case XCONV_CT_U32: launch_generic<uint32_t>(p, e, st); break;
            case XCONV_CT_U64: launch_generic<uint64_t>(p, e, st); break;
            case XCONV_CT_F32: launch_generic<float>(p, e, st); break;
            case XCONV_CT_F64: launch_generic<double>(p, e, st); break;
            case XCONV_CT_C64: launch_generic<xconv_c64>(p, e, st); break;
            case XCONV_CT_C128: launch_generic<xconv_c128>(p, e, st); break;
            default: break;
            }
        }
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_depthwise = {
    "cuda.depthwise", XCONV_DEVICE_CUDA, dw_supports, dw_workspace_bytes, dw_cost, dw_run,
    nullptr /* no prepack */, nullptr,
};
