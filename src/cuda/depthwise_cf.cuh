/*
 * depthwise_cf.cuh — cuda.depthwise's channels-first kernel for square 3x3 / 5x5 windows at
 * one stride (1 or 2) along both spatial dims, bf16 / f16 / f32 (f32 sums): dw_cf_plane.
 * (depthwise.cu, its one includer, picks it.)
 *
 * dw_cf_direct (one output per thread, a 2-byte load per tap with 64-bit index math) ran
 * mbv2_dw_144s2 at 0.4 TB/s against cuDNN's 1.7 in this layout. Here a block owns a band of
 * output rows of one (image, channel) plane: the input rows the band reads are staged once
 * in shared memory as f32, zero where x ends (coalesced loads along rows, several in flight
 * per thread), then each thread sums a run of R outputs along a row from there, loading
 * each input column of the run's window rows once into registers, the plane's KS x KS
 * weights held in registers. Sums: bias, then taps in (k1, k2) order, padding read as zeros
 * whose products join the sum, as in cpu.ref.
 */
#ifndef XCONV_CUDA_DEPTHWISE_CF_CUH
#define XCONV_CUDA_DEPTHWISE_CF_CUH

#include "cuda/common.cuh"

#include <stdint.h>
#include <type_traits>

namespace {

using namespace xconv_cuda;

constexpr int CFP_THREADS = 256;
constexpr int CFP_SMEM = 46 * 1024; /* the staged rows, under the 48 KiB default */
constexpr int CFP_OUTPUTS = 2048;   /* outputs per block to aim for */

/* A block's band: th output rows, the staged input rows (ih) and columns (iw: what the
 * windows of whole runs of R outputs read, past the row's last output too, rounded up to a
 * multiple of 4 past 4-column reads, so that no run reads outside its row), bands per
 * plane. */
struct cfp_geom {
    int th, ih, iw, bands;
};

/* R = 4 outputs of dtype D (y's), contiguous and aligned, in one store: rounded as
 * store_f32 rounds them. */
template <xconv_dtype D, int R> struct cfp_store;
template <xconv_dtype D> struct cfp_store<D, 4> {
    using vec = typename std::conditional<D == XCONV_DTYPE_F32, float4, uint2>::type;
    static constexpr int64_t es = D == XCONV_DTYPE_F32 ? 4 : 2; /* bytes per element */
    static __device__ __forceinline__ void run(char *y, int64_t i, const float (&a)[4])
    {
        if constexpr (D == XCONV_DTYPE_F32) {
            *(float4 *)(y + i * 4) = make_float4(a[0], a[1], a[2], a[3]);
        } else {
            const float lo[2] = {a[0], a[2]}, hi[2] = {a[1], a[3]};
            uint32_t w[2];
            round_pairs<D, 2>(lo, hi, w);
            *(uint2 *)(y + i * 2) = make_uint2(w[0], w[1]);
        }
    }
};

/* One block: plane blockIdx.x / bands (image n, channel co, and the outer spatial index j0),
 * band blockIdx.x % bands. R outputs per run along dim 2. */
template <xconv_dtype D, int KS, int S, int R>
__global__ void __launch_bounds__(CFP_THREADS)
dw_cf_plane(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
            const char *__restrict__ bias, char *__restrict__ y, const cfp_geom gm)
{
    extern __shared__ __align__(16) float rows[]; /* [ih][iw] */
    const int tid = threadIdx.x;
    const uint32_t band = blockIdx.x % (uint32_t)gm.bands;
    const int64_t plane = blockIdx.x / (uint32_t)gm.bands;
    const int64_t j0 = plane % p.y_size[0], nc = plane / p.y_size[0];
    const int64_t n = nc / p.cout, co = nc % p.cout;
    const int64_t g = co / p.cout_g, o = co % p.cout_g; /* cin_g == 1: x channel g */
    const int X1 = (int)p.x_size[1], X2 = (int)p.x_size[2], Y1 = (int)p.y_size[1],
              Y2 = (int)p.y_size[2];
    const int P1 = (int)p.pad_lo[1], P2 = (int)p.pad_lo[2];
    const int oy0 = (int)band * gm.th, q1_0 = oy0 * S - P1;

    /* the window's weights, in registers (every thread reads the same few: L1 broadcasts) */
    float wk[KS * KS];
    const int64_t wb = p.w_off + g * p.w_sg + o * p.w_so;
#pragma unroll
    for (int k1 = 0; k1 < KS; k1++)
#pragma unroll
        for (int k2 = 0; k2 < KS; k2++)
            wk[k1 * KS + k2] = load_f32(D, w, wb + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
    const float b0 = bias ? load_f32(p.bias_dtype, bias, p.b_off + co * p.b_s) : 0.0f;

    /* stage: row r of the band's ih x iw rows is input row q1_0 + r, column c input column
     * c - P2 (an element-wise split with a division per element made the kernel instruction
     * bound, 0.6 TB/s). Rows of 16-byte aligned contiguous elements: EPV elements per load,
     * the columns no vector covers (padding, the row's tail) one by one; else element by
     * element, U loads in flight per lane. */
    const int64_t xb = p.x_off + n * p.x_sn + g * p.x_sc + j0 * p.stride[0] * p.x_ss[0];
    constexpr int ES = D == XCONV_DTYPE_F32 ? 4 : 2, EPV = 16 / ES;
    const bool vec = p.x_ss[2] == 1 && (p.x_ss[1] * ES) % 16 == 0 &&
                     (uintptr_t)(x + xb * ES) % 16 == 0;
    if (vec) {
        const int nvec = X2 / EPV, other = gm.iw - nvec * EPV;
        for (int t = tid; t < gm.ih * nvec; t += CFP_THREADS) {
            const int r = t / nvec, k = t - r * nvec, q1 = q1_0 + r;
            uint4 raw = make_uint4(0, 0, 0, 0);
            if ((unsigned)q1 < (unsigned)X1)
                raw = *(const uint4 *)(x + (xb + (int64_t)q1 * p.x_ss[1] + k * EPV) * ES);
            float *dst = rows + r * gm.iw + P2 + k * EPV;
            const uint32_t wv[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int e = 0; e < EPV; e++) {
                if constexpr (D == XCONV_DTYPE_F32) dst[e] = __uint_as_float(wv[e]);
                else {
                    const uint16_t h = (uint16_t)(wv[e >> 1] >> (16 * (e & 1)));
                    dst[e] = D == XCONV_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
                }
            }
        }
        for (int t = tid; t < gm.ih * other; t += CFP_THREADS) {
            const int r = t / other, c0 = t - r * other, q1 = q1_0 + r;
            const int c = c0 < P2 ? c0 : c0 + nvec * EPV, q2 = c - P2;
            const bool ok = (unsigned)q1 < (unsigned)X1 && (unsigned)q2 < (unsigned)X2;
            rows[r * gm.iw + c] = ok ? load_f32(D, x, xb + (int64_t)q1 * p.x_ss[1] + q2) : 0.0f;
        }
    } else {
        const int warp = tid >> 5, lane = tid & 31;
        constexpr int U = 4;
        for (int r = warp; r < gm.ih; r += CFP_THREADS / 32) {
            const int q1 = q1_0 + r;
            float *dst = rows + r * gm.iw;
            const bool rok = (unsigned)q1 < (unsigned)X1;
            const int64_t rb = xb + (int64_t)q1 * p.x_ss[1] - (int64_t)P2 * p.x_ss[2];
            for (int c0 = lane; c0 < gm.iw; c0 += 32 * U) {
                float v[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int c = c0 + 32 * u;
                    const bool ok = rok && c < gm.iw && (unsigned)(c - P2) < (unsigned)X2;
                    v[u] = ok ? load_f32(D, x, rb + (int64_t)c * p.x_ss[2]) : 0.0f;
                }
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (c0 + 32 * u < gm.iw) dst[c0 + 32 * u] = v[u];
            }
        }
    }
    __syncthreads();

    /* sum: run (i, j .. j + R) of the band, R outputs along dim 2 */
    constexpr int NV = (R - 1) * S + KS; /* input columns a run's window row reads */
    constexpr int NV4 = (NV + 3) / 4;
    static_assert(R % 4 == 0, "runs start 16-byte aligned in the staged rows");
    const int runs = (Y2 + R - 1) / R, items = gm.th * runs;
    const int64_t yb = p.y_off + n * p.y_sn + co * p.y_sc + j0 * p.y_ss[0];
    for (int it = tid; it < items; it += CFP_THREADS) {
        const int i = it / runs, j = (it - i * runs) * R;
        if (oy0 + i >= Y1) continue;
        float acc[R];
#pragma unroll
        for (int u = 0; u < R; u++) acc[u] = b0;
        /* the zeros staged for padding join the sums (0 * w: Inf * 0 is NaN, as in cpu.ref) */
#pragma unroll
        for (int k1 = 0; k1 < KS; k1++) {
            /* 16-byte aligned (iw and j * S are multiples of 4), the row padded past NV4 */
            const float4 *src = (const float4 *)(rows + (i * S + k1) * gm.iw + j * S);
            float v[NV4 * 4];
#pragma unroll
            for (int c = 0; c < NV4; c++) {
                const float4 t = src[c];
                v[4 * c] = t.x, v[4 * c + 1] = t.y, v[4 * c + 2] = t.z, v[4 * c + 3] = t.w;
            }
#pragma unroll
            for (int k2 = 0; k2 < KS; k2++)
#pragma unroll
                for (int u = 0; u < R; u++)
                    acc[u] += v[u * S + k2] * wk[k1 * KS + k2];
        }
        const int64_t yr = yb + (int64_t)(oy0 + i) * p.y_ss[1] + (int64_t)j * p.y_ss[2];
        if (p.y_dtype == D && p.y_ss[2] == 1 && j + R <= Y2 &&
            (uintptr_t)(y + yr * cfp_store<D, R>::es) % sizeof(typename cfp_store<D, R>::vec) == 0) {
            cfp_store<D, R>::run(y, yr, acc); /* the run in one store */
            continue;
        }
#pragma unroll
        for (int u = 0; u < R; u++)
            if (j + u < Y2) store_f32(p.y_dtype, y, yr + (int64_t)u * p.y_ss[2], acc[u]);
    }
}

} /* namespace */

#endif /* XCONV_CUDA_DEPTHWISE_CF_CUH */
