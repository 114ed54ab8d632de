/*
 * wgmma_device.cuh — the device pieces of cuda.igemm_wgmma's kernels (igemm_wgmma.cu; cf_gemm.cu
 * takes its mbarrier, TMA, swizzle and descriptor pieces; each includer gets its own copy, hence
 * the anonymous namespace): the y tile's epilogue, cp.async and the 128-byte
 * swizzle, the mbarrier and TMA copy primitives, one stage's wgmma MMAs, and the description
 * of a TMA launch's problems (tma_set), which the host side fills.
 */
#ifndef XCONV_CUDA_WGMMA_DEVICE_CUH
#define XCONV_CUDA_WGMMA_DEVICE_CUH

#include "cuda/common.cuh"

#include <stdint.h>
#include <type_traits>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define XCONV_WGMMA_ARCH 1
#include "cuda/wgmma_ops.cuh"
#else
#define XCONV_WGMMA_ARCH 0
#endif

namespace {

using namespace xconv_cuda;

/* The input types, numbered as wgmma_ops.cuh's mma_op (4 and 5 are cf_gemm's N-major B). The
 * fp8 kinds run only under allow_fp8_fast_accum (xconv__cuda_wgmma_fits). */
enum class kind { bf16 = 0, f16 = 1, s8 = 2, u8 = 3, e4m3 = 6, e5m2 = 7 };
/* f32 accumulators (the float kinds) or s32 (the integer ones), and the input's bytes */
template <kind K> constexpr bool acc_float() { return K != kind::s8 && K != kind::u8; }
template <kind K> constexpr int in_bytes() { return K == kind::bf16 || K == kind::f16 ? 2 : 1; }

constexpr int BKB = 128 /* bytes of K per stage */, THREADS = 256;

#if XCONV_WGMMA_ARCH /* (the other passes would warn that these go unused) */
/* A tile row of 8 chunks of 16 bytes in the 128-byte swizzle (tile base 1024-aligned). */
__device__ __forceinline__ int swz(int row, int chunk) { return row * BKB + ((chunk ^ (row & 7)) << 4); }

/* Two neighbouring integer sums (columns i, i + 1, i even) of a y tile row, the low bits of
 * each in YD's width (wrapping), written at dst by one store of twice the width. */
template <xconv_dtype YD>
__device__ __forceinline__ void store_pair_int(unsigned char *dst, uint32_t lo, uint32_t hi)
{
    if constexpr (YD == XCONV_DTYPE_U8) *(uint16_t *)dst = (uint16_t)((lo & 0xffu) | hi << 8);
    else if constexpr (YD == XCONV_DTYPE_U16) *(uint32_t *)dst = (lo & 0xffffu) | hi << 16;
    else *(uint2 *)dst = make_uint2(lo, hi);
}

/* Where byte b of row r of a y tile lies: rows of pitch bytes, or (SWZ, for the TMA store of
 * y) boxes of BM rows x 128 bytes, each in the 128-byte swizzle: a 16-byte chunk c of row r
 * at chunk c ^ (r & 7). A pair of columns never straddles a chunk. */
template <bool SWZ, int BM>
__device__ __forceinline__ int tile_at_byte(int r, int b, int pitch)
{
    if constexpr (SWZ) return (b >> 7) * (BM * 128) + r * 128 + ((((b >> 4) & 7) ^ (r & 7)) << 4) + (b & 15);
    else return r * pitch + b;
}

/* One warpgroup's 64 x BN accumulators plus bias into the shared y tile, rounded once to YD.
 * Thread layout (wgmma's, = mma.sync's C fragments): d[4j + 2h + e] is row lane/4 + 8h of
 * the warp's 16, column 8j + 2(lane%4) + e; the two columns e = 0, 1 go by one store (with
 * the 16-byte row padding, or the swizzle, a warp's 4-byte stores hit 32 different banks).
 * fp8 and 16-bit floats are rounded 8 pairs at a time (4 on 160-wide tiles: round_pairs' and
 * round_pairs_f8's one check for special values per group). row0: the thread's first tile row. */
template <xconv_dtype YD, int BN, bool SWZ, int BM, class acc_t, class bias_t>
__device__ __forceinline__ void tile_store(const acc_t (&acc)[BN / 2], const bias_t *bv,
                                           bool has_bias, unsigned char *tile, int pitch, int row0,
                                           int col0)
{
    constexpr bool F8 = YD == XCONV_DTYPE_F8E4M3 || YD == XCONV_DTYPE_F8E5M2;
    constexpr int ES = (int)(YD == XCONV_DTYPE_U8 || F8 ? 1 : YD == XCONV_DTYPE_BF16 || YD == XCONV_DTYPE_F16 || YD == XCONV_DTYPE_U16 ? 2 : 4);
    if constexpr (std::is_same<acc_t, float>::value && (F8 || ES == 2)) {
        /* one word (two values) per pair */
        using word_t = typename std::conditional<F8, uint16_t, uint32_t>::type;
        constexpr int P = (BN / 8) % 8 == 0 ? 8 : 4;
        static_assert((BN / 8) % P == 0, "whole groups of pairs");
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = row0 + 8 * h;
#pragma unroll
            for (int j0 = 0; j0 < BN / 8; j0 += P) {
                float lo[P], hi[P];
                word_t w[P];
#pragma unroll
                for (int q = 0; q < P; q++) {
                    const int j = j0 + q, cidx = col0 + 8 * j;
                    lo[q] = acc[4 * j + 2 * h], hi[q] = acc[4 * j + 2 * h + 1];
                    if (has_bias) lo[q] += bv[cidx], hi[q] += bv[cidx + 1];
                }
                if constexpr (F8) round_pairs_f8<YD == XCONV_DTYPE_F8E4M3, P>(lo, hi, w);
                else round_pairs<YD, P>(lo, hi, w);
#pragma unroll
                for (int q = 0; q < P; q++)
                    *(word_t *)(tile + tile_at_byte<SWZ, BM>(r, (col0 + 8 * (j0 + q)) * ES, pitch)) = w[q];
            }
        }
    } else {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = row0 + 8 * h;
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                const int cidx = col0 + 8 * j;
                unsigned char *dst = tile + tile_at_byte<SWZ, BM>(r, cidx * ES, pitch);
                if constexpr (std::is_same<acc_t, float>::value) { /* f32 y */
                    float lo = acc[4 * j + 2 * h], hi = acc[4 * j + 2 * h + 1];
                    if (has_bias) lo += bv[cidx], hi += bv[cidx + 1];
                    *(float2 *)dst = make_float2(lo, hi);
                } else {
                    uint32_t lo = (uint32_t)acc[4 * j + 2 * h], hi = (uint32_t)acc[4 * j + 2 * h + 1];
                    if (has_bias) lo += bv[cidx], hi += bv[cidx + 1];
                    store_pair_int<YD>(dst, lo, hi);
                }
            }
        }
    }
}

/* What the epilogue of one tile needs from global memory or from divisions, fetched by a
 * thread before the tile's MMAs: the y offset of tile row tid (threads < BM) and the bias of
 * tile column tid (threads < BN). Fetched in the epilogue itself they ran between its
 * barriers; fetching them here measured no faster on the H200 (XCONV_WGMMA_EPI=late, sixth
 * session: the epilogue's cost was its instruction count), but it costs nothing either and
 * leaves wg_tile_fill one barrier. */
template <class bias_t> struct epi_pre {
    int64_t row_off;
    bias_t bias, bias2;
};
/* split (the per-warpgroup epilogue of TMA-stored tiles, wg_half_fill): no row offsets (the
 * boxes' coordinates are the tile's), and thread i of each warpgroup fetches the bias of
 * columns i and i + 128 for its warpgroup's own copy; swap (swap_fill): the bias of the
 * thread's two output channels, o0 the tile's first. */
template <int BM, int BN, class bias_t>
__device__ __forceinline__ epi_pre<bias_t> epi_fetch(const xconv_canon &p, const char *bias,
                                                     int tid, int64_t m0, int64_t M, int64_t o0,
                                                     int64_t g, bool split = false,
                                                     bool swap = false)
{
    epi_pre<bias_t> r{0, 0, 0};
    if (swap) { /* the thread's two output channels (accumulator rows) of a swapped tile */
        const int64_t o = o0 + (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2);
        if (bias && o < p.cout_g) r.bias = xconv_cuda_bias_at<bias_t>(p, bias, o, g);
        if (bias && o + 8 < p.cout_g) r.bias2 = xconv_cuda_bias_at<bias_t>(p, bias, o + 8, g);
        return r;
    }
    if (split) {
        const int i = tid & 127;
        if (bias && i < BN) r.bias = xconv_cuda_bias_at<bias_t>(p, bias, o0 + i, g);
        if (bias && i + 128 < BN) r.bias2 = xconv_cuda_bias_at<bias_t>(p, bias, o0 + i + 128, g);
        return r;
    }
    if (tid < BM) r.row_off = xconv_cuda_y_row_off(p, m0 + tid, M, g, o0);
    if (bias && tid < BN) r.bias = xconv_cuda_bias_at<bias_t>(p, bias, o0 + tid, g);
    return r;
}
template <kind K> using bias_of = typename std::conditional<acc_float<K>(), float, uint32_t>::type;

/* The bytes of a y tile before its row offsets: rows of pitch bytes, or (SWZ) BM rows of BN
 * y_es bytes in 128-byte boxes. */
template <bool SWZ, int BM, int BN> __device__ __forceinline__ int tile_bytes(int y_es)
{
    return SWZ ? BM * BN * y_es : BM * (BN * y_es + 16);
}

/* A thread's accumulators (thread t: 0..255, warpgroup t / 128 owns tile rows 64 MT (t / 128)
 * ..) plus the bias bv, rounded once to y's dtype into a [BM][BN] tile in shared memory (rows
 * of pitch BN y_es + 16, or SWZ: tile_at_byte's boxes). */
template <kind K, int MT, int BN, bool SWZ, class acc_t>
__device__ __forceinline__ void wg_tile_rows(const acc_t (&acc)[MT][BN / 2], unsigned char *smem,
                                             const xconv_canon &p, const bias_of<K> *bv,
                                             bool has_bias, int y_es, int tid)
{
    constexpr bool is_float = acc_float<K>();
    constexpr int BM = 128 * MT;
    const int lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
    const int pitch = BN * y_es + 16;
    const int col0 = (lane & 3) * 2;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int row0 = wg * 64 * MT + mt * 64 + (warp & 3) * 16 + (lane >> 2);
        if constexpr (is_float) {
            switch (p.y_dtype) {
            /* (y is x's dtype or f32: DESIGN.md §2; only those cases are compiled per kind) */
            case XCONV_DTYPE_BF16:
                if constexpr (K == kind::bf16) tile_store<XCONV_DTYPE_BF16, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0);
                break;
            case XCONV_DTYPE_F16:
                if constexpr (K == kind::f16) tile_store<XCONV_DTYPE_F16, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0);
                break;
            case XCONV_DTYPE_F8E4M3:
                if constexpr (K == kind::e4m3) tile_store<XCONV_DTYPE_F8E4M3, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0);
                break;
            case XCONV_DTYPE_F8E5M2:
                if constexpr (K == kind::e5m2) tile_store<XCONV_DTYPE_F8E5M2, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0);
                break;
            default: tile_store<XCONV_DTYPE_F32, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0); break;
            }
        } else {
            switch (y_es) { /* integers: the low bits of the u32 sum in y's width */
            case 1: tile_store<XCONV_DTYPE_U8, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0); break;
            case 2: tile_store<XCONV_DTYPE_U16, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0); break;
            default: tile_store<XCONV_DTYPE_U32, BN, SWZ, BM>(acc[mt], bv, has_bias, smem, pitch, row0, col0); break;
            }
        }
    }
}

/* The epilogue's first part, run by 256 threads: wg_tile_rows with the bias from pre, the rows'
 * y offsets after the tile (row_off, for the copy to y). pre: this thread's epi_fetch for the
 * tile. sync() is a barrier over those 256 threads; the caller made sure that nothing reads or
 * writes that shared memory any more. No barrier after the tile is written. */
template <kind K, int MT, int BN, bool SWZ, class acc_t, class Sync>
__device__ __forceinline__ void wg_tile_fill(const acc_t (&acc)[MT][BN / 2], unsigned char *smem,
                                             const xconv_canon &p, const epi_pre<bias_of<K>> &pre,
                                             bool has_bias, int y_es, int tid, Sync sync)
{
    constexpr int BM = 128 * MT;
    using bias_t = bias_of<K>;
    int64_t *row_off = (int64_t *)(smem + tile_bytes<SWZ, BM, BN>(y_es));
    bias_t *bv = (bias_t *)(smem + tile_bytes<SWZ, BM, BN>(y_es) + BM * sizeof(int64_t));
    if (tid < BM) row_off[tid] = pre.row_off;
    if (has_bias && tid < BN) bv[tid] = pre.bias;
    sync();
    wg_tile_rows<K, MT, BN, SWZ>(acc, smem, p, bv, has_bias, y_es, tid);
}

/* The per-warpgroup epilogue of a tile that leaves by TMA boxes: warpgroup wg (= tid / 128)
 * rounds its own 64 MT rows into the swizzled boxes (rows 64 MT wg .. of each), with its own
 * copy of the bias (after the tile, from epi_fetch's split fetch) and a barrier over its own
 * 128 threads only (bar_id), so each warpgroup hands its half to its own store warp while the
 * other half may still be read out (wg_half: the boxes' halves go out on their own). */
template <kind K, int MT, int BN, class acc_t>
__device__ __forceinline__ void wg_half_fill(const acc_t (&acc)[MT][BN / 2], unsigned char *smem,
                                             const xconv_canon &p, const epi_pre<bias_of<K>> &pre,
                                             bool has_bias, int y_es, int tid, int bar_id)
{
    constexpr int BM = 128 * MT;
    using bias_t = bias_of<K>;
    const int wg = tid >> 7, i = tid & 127;
    bias_t *bv = (bias_t *)(smem + tile_bytes<true, BM, BN>(y_es)) + wg * BN;
    if (has_bias) {
        if (i < BN) bv[i] = pre.bias;
        if (i + 128 < BN) bv[i + 128] = pre.bias2;
        asm volatile("bar.sync %0, 128;" ::"r"(bar_id) : "memory");
    }
    wg_tile_rows<K, MT, BN, true>(acc, smem, p, bv, has_bias, y_es, tid);
}

/* The epilogue of a swapped tile (A: 128 output channels of w, B: BN positions of x, so the
 * sums are [channel][position]; tma_set's swap): warpgroup wg's 64 channels x BN positions
 * plus the bias of its thread's two channels (b0, b1: rows lane / 4 and + 8 of its warp's 16),
 * rounded once to YD (bf16 or f16) and written transposed, [position][channel], into its own
 * box of y (BN rows of 128 bytes, 128-byte swizzle) by stmatrix .trans: each 8x8 block of the
 * accumulator fragment (8 channels x 8 positions) lands as 8 rows of 16 bytes, four blocks per
 * instruction. */
template <xconv_dtype YD, int BN>
__device__ __forceinline__ void swap_fill(const float (&acc)[BN / 2], float b0, float b1,
                                          bool has_bias, unsigned char *box, int tid)
{
    const int lane = tid & 31, warp = (tid >> 5) & 3, mi = lane >> 3, k = lane & 7;
    const uint32_t base = smem_addr(box);
    const int ch = 2 * warp + (mi & 1); /* the 16-byte chunk of the lane's block's channels */
    static_assert(BN % 32 == 0, "two stmatrix per rounding");
#pragma unroll
    for (int j = 0; j < BN / 8; j += 4) {
        float lo[8], hi[8];
        uint32_t r[8];
#pragma unroll
        for (int q = 0; q < 8; q++) { /* blocks (j, channels 0-7), (j, 8-15), (j + 1, ..) */
            const int jj = j + (q >> 1), hh = q & 1;
            lo[q] = acc[4 * jj + 2 * hh], hi[q] = acc[4 * jj + 2 * hh + 1];
            if (has_bias) lo[q] += hh ? b1 : b0, hi[q] += hh ? b1 : b0;
        }
        round_pairs<YD, 8>(lo, hi, r);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const int pos = 8 * (j + 2 * s + (mi >> 1)) + k; /* the row (position) this lane addresses */
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                             base + pos * BKB + ((ch ^ (pos & 7)) << 4)),
                         "r"(r[4 * s]), "r"(r[4 * s + 1]), "r"(r[4 * s + 2]), "r"(r[4 * s + 3])
                         : "memory");
        }
    }
}

/* The epilogue's second part: wg_tile_fill's tile to y, by NT threads (t: 0..NT-1). */
template <int MT, int BN, int NT>
__device__ __forceinline__ void wg_tile_out(const unsigned char *smem, const xconv_canon &p,
                                            char *y, int y_es, bool y_vec, int t, int64_t m0,
                                            int64_t o0, int64_t M)
{
    constexpr int BM = 128 * MT;
    const int pitch = BN * y_es + 16;
    xconv_cuda_tile_copy<BM, BN, NT>(p, smem, pitch, (const int64_t *)(smem + BM * pitch), y,
                                     y_es, y_vec, t, m0, M, o0);
}

#endif /* XCONV_WGMMA_ARCH */

#if XCONV_WGMMA_ARCH
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                     " selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
/* One bulk copy of bytes (a multiple of 16, both ends 16-byte aligned) from shared memory to
 * global, in this thread's current bulk group; bulk_wait_read: this thread's groups have
 * read their shared memory; bulk_wait_all: and written global memory. */
__device__ __forceinline__ void bulk_store(void *dst, uint32_t src, int bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
/* all but this thread's newest bulk group have read their shared memory */
__device__ __forceinline__ void bulk_wait_read_but1()
{
    asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
/* One TMA store of a box of y (c: first channel, m: first position) from src, in this
 * thread's current bulk group. */
__device__ __forceinline__ void tma_store_y(const CUtensorMap *map, uint32_t src, int c, int m)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"((uint64_t)map), "r"(c), "r"(m), "r"(src)
                 : "memory");
}
/* One TMA load of the B tile of stage (c, k2, k1, k0, o) into dst, completing on bar (whose
 * expected bytes the caller set). */
__device__ __forceinline__ void tma_load_b(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                           int c, int k2, int k1, int k0, int o)
{
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c), "r"(k2), "r"(k1), "r"(k0), "r"(o), "r"(bar)
                 : "memory");
}
/* One TMA im2col load of an A tile into dst, completing on bar: BM pixels of x from the
 * window corner q (innermost spatial dim first; the dims of the map's rank) of the tile's
 * first output position in image n, channels from c, every pixel shifted by the tap's
 * offsets o (the kernel index times the dilation per dim). */
__device__ __forceinline__ void tma_load_a(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                           int rank, int c, const int (&q)[3], int n,
                                           const uint16_t (&o)[3])
{
    const uint64_t m = (uint64_t)map;
    if (rank == 3)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx"
                     "::bytes [%0], [%1, {%2, %3, %4}], [%5], {%6};" ::"r"(dst),
                     "l"(m), "r"(c), "r"(q[0]), "r"(n), "r"(bar), "h"(o[0])
                     : "memory");
    else if (rank == 4)
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx"
                     "::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};" ::"r"(dst),
                     "l"(m), "r"(c), "r"(q[0]), "r"(q[1]), "r"(n), "r"(bar), "h"(o[0]), "h"(o[1])
                     : "memory");
    else
        asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx"
                     "::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7], {%8, %9, %10};" ::"r"(dst),
                     "l"(m), "r"(c), "r"(q[0]), "r"(q[1]), "r"(q[2]), "r"(n), "r"(bar), "h"(o[0]),
                     "h"(o[1]), "h"(o[2])
                     : "memory");
}
#endif

/* One problem of a TMA kernel's launch: the kernel's view of it, its tensor maps, where its
 * tiles start in the launch's numbering. */
struct tma_job {
    CUtensorMap b, a; /* w as B tiles, x in im2col mode as A tiles */
    CUtensorMap y;    /* y for the tiles' stores, where y_map */
    xconv_canon p;
    long long tile0;
    int a_rank; /* 3, 4 or 5: the spatial dims the A map keeps plus channels and images */
    int kshift; /* A's channel coordinates start this many channels early, zero-filled by the
                 * copy engine (cuda.patch_tc's row classes, xconv_tc_views); else 0 */
    int flip;   /* bit d: dim d's taps run backwards in A (B's tap k0, k1, k2 is K - 1 - k) */
    bool y_vec; /* whole 16-byte pieces of y rows */
    bool y_map; /* y has a TMA view (xconv__cuda_map_y): the tile goes out in boxes */
};
/* The problems of a launch (cuda.deconv_tc's stride phases, or one): a kernel parameter. */
constexpr int MAX_JOBS = XCONV_CUDA_TC_SET_MAX;
struct tma_set {
    tma_job job[MAX_JOBS];
    long long tiles; /* of all jobs */
    int count;
    bool pack; /* one job of 64-byte channel runs, two taps per stage (wgmma_tma_kernel's PK) */
};
/* A kernel's tile orientation: BM rows of positions (A: x) x BN output channels (B: w), or
 * swapped (SW): BM = 128 output channels (A: w) x BN positions (B: x), the y tile written
 * transposed (swap_fill); the tiles' extents along positions (TP) and channels (TC). */
template <int BM, int BN, bool SW> struct tile_dims {
    static constexpr int TP = SW ? BN : BM, TC = SW ? BM : BN;
};

/* wg_half_fill's shared memory for one y tile (host and device): BM rows of BN y_es bytes in
 * 128-byte boxes (tile_bytes<true>), then each warpgroup's copy of the bias (4-byte values) */
template <int BM, int BN> constexpr int wg_half_bytes(int y_es) { return BM * BN * y_es + 2 * BN * 4; }

/* Where a TMA kernel's shared memory goes: nst pipeline stages from 0, the epilogue's y tile
 * at epi (0: over the stages, for a block with one tile), the mbarriers at bars. */
struct tma_smem {
    int nst, epi, bars;
    int own_copy; /* measuring knob XCONV_WGMMA_EPI=consumers: no store warps */
    int wg_half;  /* every job's y tile leaves by TMA boxes, each warpgroup's half of the rows
                   * handed to its own store warp (wg_half_fill) */
    int band;     /* tiles numbered in bands of this many m-tiles, column tile fastest within a
                   * band (0: one band, m-tile fastest) */
    int bres, epi2; /* the kernel's RB (every tile of the launch reads one B tile): B loaded
                     * once at bres, and the y tile's second buffer at epi + epi2 */
};

#if XCONV_WGMMA_ARCH
/* Descriptor of a K-major tile in the 128-byte swizzle: start >> 4, leading byte offset 16
 * (unused), stride byte offset 1024 (8 rows), layout 1 (128B swizzle) in bits 62-63. The k-th
 * 32-byte step of K starts 32 k bytes further (the swizzle is applied on the address bits,
 * so the descriptor's start moves by 2 units). */
__device__ __forceinline__ uint64_t tile_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

/* One stage's MMAs of warpgroup wg, committed as one wgmma group: its MT m64 tiles of the
 * stage's A (at stage) against the stage's B (at stage + a_bytes). */
template <kind K, int MT, int BN, class acc_t>
__device__ __forceinline__ void mma_stage(acc_t (&acc)[MT][BN / 2], uint32_t stage, int a_bytes,
                                          int wg)
{
    const uint64_t da = tile_desc(stage + wg * MT * 64 * BKB), db = tile_desc(stage + a_bytes);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < BKB / 32; ks++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++) /* 64 rows = 8 KiB of A further */
            xconv_wgmma::mma_op<(int)K, BN>::run(acc[mt], da + mt * 512 + 2 * ks, db + 2 * ks);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* The same in the 64-byte swizzle: stride byte offset 512 (8 rows of 64 bytes), layout 2. */
__device__ __forceinline__ uint64_t tile_desc64(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (32ull << 32) | (2ull << 62);
}

/* mma_stage for a stage of two taps of 64 bytes each (wgmma_tma_kernel's PK): A as two
 * [BM rows x 64 bytes] halves, B as two [BN x 64 bytes] halves, each in the 64-byte swizzle;
 * half h holds tap 2s + h of stage s, so the stage's 128 bytes of K are both taps whole. */
template <kind K, int MT, int BN, class acc_t>
__device__ __forceinline__ void mma_stage_pk(acc_t (&acc)[MT][BN / 2], uint32_t stage, int a_bytes,
                                             int wg)
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint64_t da = tile_desc64(stage + h * 128 * MT * 64 + wg * MT * 64 * 64),
                       db = tile_desc64(stage + a_bytes + h * BN * 64);
#pragma unroll
        for (int ks = 0; ks < 2; ks++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++) /* 64 rows = 4 KiB of A further */
                xconv_wgmma::mma_op<(int)K, BN>::run(acc[mt], da + mt * 256 + 2 * ks, db + 2 * ks);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* After the last wgmma.wait_group: keeps the compiler from reading the accumulators before. */
template <int MT, int BN, class acc_t> __device__ __forceinline__ void acc_fence(acc_t (&acc)[MT][BN / 2])
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            if constexpr (std::is_same<acc_t, float>::value) asm volatile("" : "+f"(acc[mt][i])::"memory");
            else asm volatile("" : "+r"(acc[mt][i])::"memory");
        }
}
#endif

} /* namespace */

#endif /* XCONV_CUDA_WGMMA_DEVICE_CUH */
