/*
 * depthwise.cu — "cuda.depthwise": conv with one input channel per group (groups == cin, any
 * channel multiplier), every dtype, any strides. Depthwise work is a few MACs per byte, so
 * the kernels aim at the copy bandwidth: each input element is read from device memory
 * about once and each output written once, in coalesced accesses.
 *
 *   - channels-last (x's channel stride the smallest): threads along channels. With bf16,
 *     f16, f32 or fp8 in and out (f32 sums), 8-, 16- or 32-bit integers in and the same dtype
 *     or a 4-byte integer out (u32 sums), or f64 / i64 / u64 / c64 / c128 in and out (dw_slide
 *     only: 72-80% of the copy rate on an H100, where one thread per output ran 6-48%),
 *     multiplier 1 and 16-byte aligned rows, each thread owns 16
 *     bytes of channels (fp8: dw_slide only; it took mbv2_dw_144s2 e4m3 from dw_cl's 0.26 TFLOP/s,
 *     2.7% of the copy rate, to 2.38, 21.9%, on an H100; with y rounded by the hardware's
 *     conversion instead of mini_encode's branches, and the ring (below), 45.9%; i8 / u8 sum
 *     four taps per dp4a, 45 -> 51.7%). Where dim 2's window is 3 or 5 wide at stride 1 or 2 (dilation 1) and
 *     offsets fit 32 bits, dw_slide: the one-vector-per-tap kernel below it measured
 *     ~35% of the copy rate, latency and instruction bound (64-bit index math per tap, a
 *     weight stage and barrier per short-lived block, a 25% tail wave), so each thread
 *     takes a run of outputs along dim 2 and loads each input column of a window row once
 *     for the run (the columns neighbouring outputs share), all of a row's loads in flight
 *     together, with 32-bit offsets, multiply-shift index splits, and a grid of one wave
 *     of blocks looping over the work so the weights are staged once per block; bytes
 *     took the scalar dw_cl before it (6% of the copy rate). For bytes and fp8 with y of
 *     x's width, whose sums leave 3 blocks per SM, the piped dw_slide copies each thread's
 *     next two rows by cp.async into a ring in shared memory while it sums the current one. Else (and with
 *     XCONV_DW_OLD=1, which leaves dw_slide out) the floats take dw_vec: one vector load
 *     per tap, a few output positions per thread, the block's weights staged as f32
 *     [tap][channel] in shared memory; 3x3 and 5x5 compiled with every tap's load issued
 *     before the first sum. Other channels-last problems: one thread per output element
 *     (dw_cl).
 *   - channels-first, bf16 / f16 / f32 with square 3x3 or 5x5 windows at stride 1 or 2 and
 *     no dilation: dw_cf_plane (depthwise_cf.cuh): a block stages the input rows of a band
 *     of output rows of one plane in shared memory, each thread sums runs of 4 outputs
 *     along a row from there. Other 3x3 / 5x5 windows: outputs spread over threads
 *     (4 per thread for 3x3), all their taps' loads issued together, neighbouring threads on
 *     neighbouring outputs of a plane (dw_cf_direct; L1 serves the rows that taps share).
 *   - other channels-first: one block per (image, channel, tile of output rows): the input
 *     rows the tile needs are staged in shared memory in the compute type, zero-filled
 *     outside x (padding), each read by coalesced row loads, then every output of the tile
 *     sums its taps from there (dw_tile). A 3-D kernel restages per tap of its outer dim.
 *
 * Sums run bias first, then taps in (k0, k1, k2) order: deterministic, no atomics; conv's
 * padding reads as 0 and its products join float sums as cpu.ref's do (0 * Inf is NaN, as in
 * PyTorch), integer ones add nothing either way; storage
 * conversions are the library's (common.cuh), rounding once when y is stored (the 16-byte
 * f16 stores through cvt.rn, which rounds as the library does, NaN codes rewritten).
 */
#include "cuda/common.cuh"
#include "cuda/depthwise_cf.cuh"
#include "cuda/depthwise_cl16.cuh"

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
        /* a padding row of dim 0 stages zeros: 0 * w joins the sums, as in cpu.ref */
        const bool in0 = q0 >= 0 && q0 < p.x_size[0];
        __syncthreads(); /* the previous stage is consumed */
        const int64_t xr = xb + q0 * p.x_ss[0];
        /* rows by warps, columns by lanes; loads batched ahead of the stores */
        for (int r = warp; r < tg.ih; r += 4 * (THREADS / 32)) {
            T v[4][2];
#pragma unroll
            for (int rr = 0; rr < 4; rr++) {
                const int row = r + rr * (THREADS / 32);
                const int64_t q1 = q1_0 + row;
                const bool rok = in0 && row < tg.ih && q1 >= 0 && q1 < p.x_size[1];
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
                            in0 && q1 >= 0 && q1 < p.x_size[1] && q2 >= 0 && q2 < p.x_size[2]
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
            const bool in0 = q0 >= 0 && q0 < p.x_size[0];
            for (int64_t k1 = 0; k1 < p.k_size[1]; k1++) {
                const int64_t q1 = j1 * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
                const bool in1 = in0 && q1 >= 0 && q1 < p.x_size[1];
                for (int64_t k2 = 0; k2 < p.k_size[2]; k2++) {
                    const int64_t q2 = j2 * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                    /* padding reads as 0 and 0 * w joins the sum, as in cpu.ref */
                    const bool in = in1 && q2 >= 0 && q2 < p.x_size[2];
                    ops<T>::mac(
                        acc,
                        in ? ops<T>::load(p.x_dtype, x,
                                          xb + q0 * p.x_ss[0] + q1 * p.x_ss[1] + q2 * p.x_ss[2])
                           : ops<T>::zero(),
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
                const bool ok = ok1 && q2 >= 0 && q2 < p.x_size[2];
                xv[u][k] = ok ? load_f32(D, x, xb + q1 * p.x_ss[1] + q2 * p.x_ss[2]) : 0.0f;
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
        /* padding (xv 0): 0 * w joins the sum, as in cpu.ref (Inf * 0 is NaN) */
#pragma unroll
        for (int k1 = 0; k1 < KS; k1++)
#pragma unroll
            for (int k2 = 0; k2 < KS; k2++)
                acc += xv[u][k1 * KS + k2] * load_f32(D, w, wb + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
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

/* dw_cf_plane's run length along dim 2 */
constexpr int CFP_RUN = 4;

/* dw_cf_plane (depthwise_cf.cuh) and its band geometry: channels-first, bf16 / f16 / f32
 * with f32 sums, a square 3x3 or 5x5 window at one stride 1 or 2 along dims 1 and 2,
 * dilation 1, dim 0 without a window (2-D problems, or 3-D ones with a 1-wide window and no
 * padding there); at least one output row's band fits the shared memory. */
bool cfp_plan(const xconv_canon *p, cfp_geom *gm)
{
    const xconv_dtype d = p->x_dtype;
    if (d != XCONV_DTYPE_BF16 && d != XCONV_DTYPE_F16 && d != XCONV_DTYPE_F32) return false;
    const int64_t ks = p->k_size[1], st = p->stride[1];
    if (p->ct != XCONV_CT_F32 || (ks != 3 && ks != 5) || p->k_size[2] != ks || (st != 1 && st != 2) ||
        p->stride[2] != st || p->dil[1] != 1 || p->dil[2] != 1)
        return false;
    if (p->k_size[0] != 1 || p->pad_lo[0] != 0 || p->pad_hi[0] != 0) return false;
    for (int dd = 1; dd < 3; dd++)
        if (p->x_size[dd] >= (1 << 24) || p->y_size[dd] >= (1 << 24) || p->pad_lo[dd] > 64)
            return false;
    const int64_t Y1 = p->y_size[1], Y2 = p->y_size[2];
    const int64_t iw = (((Y2 + CFP_RUN - 1) / CFP_RUN * CFP_RUN - 1) * st + ks + 3 + 3) / 4 * 4;
    int64_t th = CFP_OUTPUTS / Y2 < 1 ? 1 : CFP_OUTPUTS / Y2;
    if (th > Y1) th = Y1;
    while (th > 1 && ((th - 1) * st + ks) * iw * 4 > CFP_SMEM) th--;
    const int64_t ih = (th - 1) * st + ks;
    if (ih * iw * 4 > CFP_SMEM) return false;
    gm->th = (int)th, gm->ih = (int)ih, gm->iw = (int)iw, gm->bands = (int)((Y1 + th - 1) / th);
    return (double)p->n * (double)p->cout * (double)p->y_size[0] * gm->bands < (double)INT32_MAX;
}

template <xconv_dtype D>
void launch_cf_plane(const xconv_canon *p, const xconv_exec *e, cudaStream_t st)
{
    cfp_geom gm;
    cfp_plan(p, &gm);
    const unsigned blocks = (unsigned)(p->n * p->cout * p->y_size[0] * gm.bands);
    const size_t smem = (size_t)gm.ih * gm.iw * sizeof(float);
    auto kern = p->k_size[1] == 3 ? (p->stride[1] == 1 ? dw_cf_plane<D, 3, 1, CFP_RUN>
                                                       : dw_cf_plane<D, 3, 2, CFP_RUN>)
                                  : (p->stride[1] == 1 ? dw_cf_plane<D, 5, 1, CFP_RUN>
                                                       : dw_cf_plane<D, 5, 2, CFP_RUN>);
    kern<<<blocks, CFP_THREADS, smem, st>>>(*p, (const char *)e->x, (const char *)e->w,
                                            (const char *)e->bias, (char *)e->y, gm);
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

size_t ctype_bytes(xconv_ctype ct) { return xconv__ctype_size(ct); }

bool is_float16x(xconv_dtype d)
{
    return d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F16 || d == XCONV_DTYPE_F32;
}

bool is_f8(xconv_dtype d) { return d == XCONV_DTYPE_F8E4M3 || d == XCONV_DTYPE_F8E5M2; }

bool is_int32x(xconv_dtype d)
{
    return d == XCONV_DTYPE_I8 || d == XCONV_DTYPE_U8 || d == XCONV_DTYPE_I16 ||
           d == XCONV_DTYPE_U16 || d == XCONV_DTYPE_I32 || d == XCONV_DTYPE_U32;
}

/* The 16-byte channels-last path: multiplier 1, channels contiguous, aligned rows, and
 * bf16 / f16 / f32 / fp8 in and out with f32 sums, 8-, 16- or 32-bit integers in with u32
 * sums out to the same dtype or a 4-byte integer (YB: y's element bytes), f64 / c64 / c128 in
 * and out, or i64 / u64 in and out (u64 sums). */
bool cl16_ok(const xconv_canon *p)
{
    const xconv_dtype d = p->x_dtype, yd = p->y_dtype;
    const size_t ys = xconv_dtype_size(yd);
    bool kinds;
    if (is_float16x(d) || is_f8(d))
        kinds = yd == d && p->ct == XCONV_CT_F32;
    else if (d == XCONV_DTYPE_F64 || d == XCONV_DTYPE_C64 || d == XCONV_DTYPE_C128)
        kinds = yd == d; /* and the compute type is x's own */
    else if (is_int32x(d))
        kinds = p->ct == XCONV_CT_U32 && (yd == d || ys == 4);
    else
        kinds = (d == XCONV_DTYPE_I64 || d == XCONV_DTYPE_U64) && p->ct == XCONV_CT_U64 &&
                (yd == d || ys == 8);
    if (!kinds) return false;
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

/* dw_slide's staged rows of compute-type values per channel: its weight slots (a tap each, or
 * dp4a's packed words), then the bias. */
int64_t slide_stage_rows(const xconv_canon *p)
{
    return p->k_size[0] * p->k_size[1] * slide_slots((int)p->k_size[2], slide_dp4a(p->x_dtype)) + 1;
}

/* dw_slide's vectors per channel chunk: equal chunks, each at most a block's threads and
 * its weights and bias within the stage. */
int64_t slide_chunk(const xconv_canon *p, int V)
{
    const int64_t vecs = p->cin / V;
    int64_t most = SLIDE_WBYTES / (slide_stage_rows(p) * V * (int64_t)ctype_bytes(p->ct));
    if (most > SLIDE_THREADS) most = SLIDE_THREADS;
    const int64_t chunks = (vecs + most - 1) / most;
    return (vecs + chunks - 1) / chunks;
}

/* dw_slide: the 16-byte path with a compiled dim-2 window (3 or 5 wide, stride 1 or 2,
 * dilation 1), its weights within the stage, and 32-bit offsets and coordinates: x and y
 * below 2^31 elements with non-negative strides, each dim's window coordinates below 2^30,
 * fewer than 2^31 items (counted in the runs that narrow gives). */
bool slide_ok(const xconv_canon *p, bool narrow)
{
    if (!cl16_ok(p) || (p->k_size[2] != 3 && p->k_size[2] != 5)) return false;
    if (p->dil[2] != 1 || p->stride[2] < 1 || p->stride[2] > 2) return false;
    const int V = 16 / (int)xconv_dtype_size(p->x_dtype);
    if (slide_stage_rows(p) * V * (int64_t)ctype_bytes(p->ct) > SLIDE_WBYTES) return false;
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
    const int run = slide_run((int)p->k_size[2], (int)p->stride[2], V, narrow);
    const int64_t items = p->n * p->y_size[0] * p->y_size[1] * ((p->y_size[2] + run - 1) / run);
    const int64_t cv = slide_chunk(p, V);
    return x_end <= INT32_MAX && y_end <= INT32_MAX && items <= INT32_MAX &&
           (p->cin / V + cv - 1) / cv <= 65535;
}

bool dw_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.depthwise runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cuda.depthwise runs conv only", false;
    if (p->cin_g != 1)
        return *why_not = "cuda.depthwise needs one input channel per group (groups == cin)", false;
    cfp_geom gm;
    if (channels_fastest(p) || cf_direct_ok(p) || cfp_plan(p, &gm)) return true;
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
    const int64_t groups = cc / V, per_pass = VEC_THREADS / groups;
    const int64_t positions = p->n * xconv__prod3(p->y_size);
    const int64_t per_block = per_pass * VEC_POS;
    const dim3 grid((unsigned)((positions + per_block - 1) / per_block),
                    (unsigned)((p->cin + cc - 1) / cc));
    const int ks = fixed_ks(p);
    auto kern = ks == 3 ? dw_vec<D, 3> : ks == 5 ? dw_vec<D, 5> : dw_vec<D, 0>;
    kern<<<grid, VEC_THREADS, (size_t)(kvol * cc * 4), st>>>(
        *p, (const char *)e->x, (const char *)e->w, (const char *)e->bias, (char *)e->y, (int)cc,
        positions);
}

using slide_kern = void (*)(const xconv_canon, const slide_geom, const char *, const char *,
                            const char *, char *);

template <xconv_dtype D, int YB, bool PIPE, bool NARROW>
slide_kern slide_table(const xconv_canon *p)
{
    constexpr int V = vec_traits<D>::V;
    static constexpr slide_kern KERNS[2][2] = {
        {dw_slide<D, YB, 3, 1, slide_run(3, 1, V, NARROW), PIPE>,
         dw_slide<D, YB, 3, 2, slide_run(3, 2, V, NARROW), PIPE>},
        {dw_slide<D, YB, 5, 1, slide_run(5, 1, V, NARROW), PIPE>,
         dw_slide<D, YB, 5, 2, slide_run(5, 2, V, NARROW), PIPE>}};
    return KERNS[p->k_size[2] == 5][p->stride[2] == 2];
}

/* the narrow kernels are compiled for the 16-element kinds only */
template <xconv_dtype D, int YB, bool PIPE> slide_kern slide_pick(const xconv_canon *p, bool narrow)
{
    if constexpr (vec_traits<D>::V == 16)
        if (narrow) return slide_table<D, YB, PIPE, true>(p);
    return slide_table<D, YB, PIPE, false>(p);
}

template <xconv_dtype D, int YB>
void launch_slide(const xconv_canon *p, const xconv_exec *e, cudaStream_t st, bool narrow,
                  bool pipe)
{
    constexpr int V = vec_traits<D>::V;
    slide_kern kern = slide_pick<D, YB, false>(p, narrow);
    const int run = slide_run((int)p->k_size[2], (int)p->stride[2], V, narrow);
    const int64_t runs = (p->y_size[2] + run - 1) / run, cv = slide_chunk(p, V);
    const int64_t chunks = (p->cin / V + cv - 1) / cv;
    slide_geom sg;
    sg.runs = make_udiv((uint32_t)runs);
    sg.y1 = make_udiv((uint32_t)p->y_size[1]);
    sg.y0 = make_udiv((uint32_t)p->y_size[0]);
    sg.items = (uint32_t)(p->n * p->y_size[0] * p->y_size[1] * runs);
    sg.cv = (int)cv, sg.vecs = (int)(p->cin / V);
    size_t smem = (size_t)(slide_stage_rows(p) * cv * V) * sizeof(typename vec_traits<D>::A);
    /* The piped kernel for the kinds it serves with y of x's own width (H100, mbv2_dw_144s2:
     * e4m3 39.5 -> 45.9% of the copy rate, i8 50.6 -> 51.7%; i8 into i32 fell 57.4 -> 43.1%,
     * so 4-byte y keeps the plain kernel), where dw_run asks for it (pipe) and the device's
     * blocks can have the ring on top of the weights (up to 55 + 48 KB; not GPUs with 99 KB
     * a block). */
    if constexpr (slide_pipe_kind(V) && YB == 16 / V) {
        const slide_kern piped_kern = slide_pick<D, YB, true>(p, narrow);
        const size_t piped =
            smem + (size_t)slide_ring_bytes((int)p->k_size[2], (int)p->stride[2], run);
        int limit = 0;
        if (pipe &&
            cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                   p->device_index) == cudaSuccess &&
            piped <= (size_t)limit &&
            cudaFuncSetAttribute(piped_kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)piped) == cudaSuccess)
            kern = piped_kern, smem = piped;
        else
            (void)cudaGetLastError();
    }
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

/* dw_slide for x's dtype D: y of x's width, or (8- and 16-bit integers, u32 sums) of 4 bytes. */
template <xconv_dtype D>
void launch_slide_y(const xconv_canon *p, const xconv_exec *e, cudaStream_t st, bool y4,
                    bool narrow, bool pipe)
{
    constexpr int OWN = 16 / vec_traits<D>::V; /* x's element bytes */
    if constexpr (OWN < 4 && std::is_same<typename vec_traits<D>::A, uint32_t>::value) {
        if (y4) return launch_slide<D, 4>(p, e, st, narrow, pipe);
    }
    launch_slide<D, OWN>(p, e, st, narrow, pipe);
}

/* A knob read per run, for comparisons: 1 if set to '1', 0 if set to anything else, -1 unset. */
static int dw_knob(const char *name)
{
    const char *v = getenv(name);
    return v ? v[0] == '1' : -1;
}

/* dw_slide where it fits, else dw_vec, dw_cf_plane, dw_cf_direct, or the generic kernels.
 * dw_slide's runs for i8 / u8 (slide_run's narrow runs of 2, and no ring for byte y),
 * measured on an H100 (thirty-sixth session, % of the copy rate, base -> this, six depthwise
 * shapes of batch 64): into i32 narrow everywhere (144 channels 3x3 stride 2: 57.0 -> 62.5,
 * 32 channels stride 1: 63.9 -> 71.2, the other four within 1.5%); into bytes narrow without
 * the ring up to 256 channels (144: 52.0 -> 55.4, 32: 36.8 -> 50.2, 96 stride 2 and 384
 * stride 1 within 2%), but not at 576 channels stride 2 (59.2 -> 48.8, the ring's gain
 * there). fp8 keeps runs of 4 with the ring (every variant lost 1-15%). Knobs, read per run,
 * for comparisons: XCONV_DW_OLD=1 leaves dw_slide and dw_cf_plane out; XCONV_DW_RUN2=1 / =0
 * forces the narrow runs on / off, XCONV_DW_PIPE=1 / =0 the ring. */
xconv_status dw_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const char *old = getenv("XCONV_DW_OLD");
    const bool y4 = xconv_dtype_size(p->y_dtype) == 4; /* 8/16-bit integers into i32 / u32 */
    const bool bytes = p->x_dtype == XCONV_DTYPE_I8 || p->x_dtype == XCONV_DTYPE_U8;
    const int run2 = dw_knob("XCONV_DW_RUN2"), pipe_knob = dw_knob("XCONV_DW_PIPE");
    const bool narrow = run2 >= 0 ? run2 == 1 : bytes && (y4 || p->cin <= 256);
    const bool pipe = pipe_knob >= 0 ? pipe_knob == 1 : !(bytes && narrow);
    const bool aligned = ((uintptr_t)e->x | (uintptr_t)e->y) % 16 == 0;
    const bool slide = aligned && !(old && old[0] == '1') && slide_ok(p, narrow);
    const bool vec = aligned && vec_ok(p);
    cfp_geom gm;
    const bool plane = !(old && old[0] == '1') && !channels_fastest(p) && cfp_plan(p, &gm);
    return xconv__cuda_run(e, "cuda.depthwise", err, [&](cudaStream_t st) {
        if (slide) {
            switch (p->x_dtype) {
            /* every dtype has its traits (depthwise_cl16.cuh); slide_ok chose the kinds */
#define XCONV_DTYPE(E, ...) \
    case XCONV_DTYPE_##E: launch_slide_y<XCONV_DTYPE_##E>(p, e, st, y4, narrow, pipe); break;
#include "core/dtypes.def"
#undef XCONV_DTYPE
            default: break;
            }
        } else if (vec) {
            switch (p->x_dtype) {
            case XCONV_DTYPE_BF16: launch_vec<XCONV_DTYPE_BF16>(p, e, st); break;
            case XCONV_DTYPE_F16: launch_vec<XCONV_DTYPE_F16>(p, e, st); break;
            default: launch_vec<XCONV_DTYPE_F32>(p, e, st); break;
            }
        } else if (plane) {
            switch (p->x_dtype) {
            case XCONV_DTYPE_BF16: launch_cf_plane<XCONV_DTYPE_BF16>(p, e, st); break;
            case XCONV_DTYPE_F16: launch_cf_plane<XCONV_DTYPE_F16>(p, e, st); break;
            default: launch_cf_plane<XCONV_DTYPE_F32>(p, e, st); break;
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
    nullptr /* no prepack */, nullptr, nullptr,
};
