/*
 * cf_gemm.cu — "cuda.cf_gemm": channels-first 1x1 convolutions (every kernel dim 1, stride 1,
 * no padding) with bf16 / f16 inputs as plain GEMMs on Hopper's wgmma, reading x and writing y
 * where they lie. Per image n and group g, with P positions (the spatial dims, contiguous):
 *
 *   y[n, g, o, p] = bias[g, o] + sum_c w[g, o, c] x[n, g, c, p]     (A = w, B = x, D = y)
 *
 * w's rows are K-major (input channels contiguous), x's rows N-major (positions contiguous:
 * wgmma reads it transposed, imm-trans-b), and the accumulators' rows are y's channel rows,
 * positions along them: no transposes. cuda.cf_tc ran these layers through channels-last
 * copies of x and y, three extra passes over the tensors (rn50_1x1_256 channels-first at 0.19x
 * cuDNN, nineteenth session's figures).
 *
 * Tiles of 128 output channels x BN positions (256 for 16-bit y, 128 for f32 y, whose wider
 * y buffer would not fit), K in stages of 64 channels: A by a 3-d TMA map of w (channel,
 * output channel, group; a 128 x 128-byte box), B by a 4-d map of x (position, channel, group,
 * image; BN / 64 boxes of 64 positions x 64 channels), both in the 128-byte swizzle, zero fill
 * past cin/groups, cout/groups and P (so a tail never reads into the next group, and no Inf or
 * NaN outside the problem meets a zero). 256-wide tiles read and write rows of 512 contiguous
 * bytes, where 128-wide ones moved 256: rn50_1x1_256 121 -> 152 TFLOP/s (bf16, H200).
 * Three warpgroups: the producer's first thread issues a stage's copies once the slot's
 * "empty" mbarrier says the MMAs are done with it; each consumer warpgroup runs m64nBNk16 over
 * its 64 channels with one wgmma group left in flight. Blocks loop over tiles (a persistent
 * grid, channel tiles fastest so that the tiles reading one x tile run together), the stages
 * running on across tiles. Epilogue: each consumer warpgroup rounds its sums plus the bias
 * once to y's dtype into a y buffer (128-byte boxes in the 128-byte swizzle, no bank
 * conflicts) and its first thread stores them by TMA (a 4-d map of y like x's) while the
 * warpgroup goes on to the next tile; with two buffers (blocks of several tiles) a buffer is
 * written again once `cp.async.bulk.wait_group.read 1` says the store two tiles back has read
 * it. Where y has no TMA view (rows of positions not a multiple of 16 bytes) the warpgroup
 * copies its rows out, two 16-bit values a store where y's rows are 4-byte aligned.
 *
 * Where x's or w's rows are not multiples of 16 bytes (the TMA maps' strides must be; e.g.
 * 14 x 14 positions in 16-bit x), the run first copies them into the workspace with rows
 * padded to 16 bytes (pad_rows, a thread per 16-, 8-, 4- or 2-byte unit); the maps still stop
 * at P and cin/groups, so the padding is never read. Sums: the tensor cores' f32 (DESIGN.md §2), bias added after the
 * last product, one rounding; no atomics, no split of K: deterministic, and for exact inputs
 * identical to cpu.ref.
 *
 * Compiled for sm_90a only (the compute_80 pass sees an empty kernel); supports() asks for a
 * compute capability 9.0 device. Knobs (environment, read at each run; for tests and
 * measurements): XCONV_CFGEMM_BLOCKS=n caps the persistent grid at n blocks (many tiles per
 * block, both y buffers reused); XCONV_CFGEMM_BN=128 forces 128-wide tiles;
 * XCONV_CFGEMM_YBUFS=1/2 forces one or two y buffers.
 */
#include "cuda/wgmma_device.cuh"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

using namespace xconv_cuda;

namespace {

constexpr int BM = 128;               /* output channels per tile; BN positions: 128 or 256 */
constexpr int BK = 64;                /* channels per stage: one 128-byte row of A */
constexpr int CF_THREADS = 384;       /* two consumer warpgroups, then the producer's */
constexpr int A_BYTES = BM * BKB;     /* 16 KiB: 128 rows of w's 64 channels */
constexpr int B_BOX = BK * BKB;       /* 8 KiB: 64 channels x 64 positions */
template <int BN> constexpr int stage_bytes() { return A_BYTES + (BN / 64) * B_BOX; }
constexpr int MAX_STAGES = 4;
constexpr int SMEM_LIMIT = 227 * 1024; /* the H200's opt-in dynamic shared memory per block */

/* What the kernel reads besides its pointers. */
struct cf_args {
    CUtensorMap a, b, y; /* w (c, o, g), x (p, c, g, n), y (p, o, g, n); y only where y_map */
    xconv_canon p;       /* the bias, and y's view for the row copies */
    long long tiles;
    int kt;              /* stages per tile */
    int tn, to;          /* position tiles and channel tiles per (image, group) */
    int nst;             /* pipeline stages */
    int ybuf;            /* bytes of one y buffer: 128 rows x BN y elements */
    int nybuf;           /* y buffers: 2 (a tile's stores run under the next tile) or 1 */
    int y_pairs;         /* the row copies may store pairs of 16-bit y as one 4-byte word */
    int y_map;           /* y stored by TMA boxes, else the rows copied element by element */
    int y_es;            /* y's element bytes */
    long long P;         /* positions per channel */
};

#if XCONV_WGMMA_ARCH
/* 256-wide tiles hold 128 sums per consumer thread: the producer gives registers up
 * (setmaxnreg; the entry cap at 384 threads is 168, and 256 (224 - 168) <= 128 (168 - 56)) */
constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;

/* Descriptor of an N-major B tile in the 128-byte swizzle: 64 positions (128 bytes) per row
 * of one channel, rows 128 bytes apart; the leading byte offset is the step between 64-wide
 * position blocks (one 8 KiB box), the stride byte offset the step between groups of 8
 * channel rows (1 KiB); a 16-channel step of K starts 2 KiB further. (The first device run
 * checked the other reading, the two offsets swapped: relative L2 error 0.99.) */
__device__ __forceinline__ uint64_t bn_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(B_BOX >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, uint32_t src, int c0, int c1,
                                             int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
                 ::"l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
                 : "memory");
}

#endif

/* The kernel: K 0 (bf16) or 1 (f16), tiles 128 x BN. */
template <int K, int BN>
__global__ void __launch_bounds__(CF_THREADS, 1)
cf_gemm_kernel(const __grid_constant__ cf_args A, const char *__restrict__ bias,
               char *__restrict__ y)
{
#if XCONV_WGMMA_ARCH
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    constexpr int STAGE_BYTES = stage_bytes<BN>();
    const int nst = A.nst, tid = threadIdx.x;
    const uint32_t sbase = smem_addr(smem);
    unsigned char *ybufs = smem + nst * STAGE_BYTES;
    const uint32_t full = sbase + nst * STAGE_BYTES + A.nybuf * A.ybuf, empty = full + 8 * nst;
    const xconv_canon &p = A.p;
    /* this block's tiles: first, first + step, ... below last (contiguous runs of tiles per
     * block measured 4% slower on rn50_1x1_256: neighbouring blocks then no longer share x
     * tiles and write neighbouring row pieces at the same time) */
    const int64_t first = blockIdx.x, step = gridDim.x, last = A.tiles;
    /* tile t: channel tile t % to, position tile (t / to) % tn, (image, group) the rest */
    auto tile_of = [&](int64_t t, int &o0, int &p0, int &g, int &n) {
        o0 = (int)(t % A.to) * BM;
        t /= A.to;
        p0 = (int)(t % A.tn) * BN;
        t /= A.tn;
        g = (int)(t % p.groups);
        n = (int)(t / p.groups);
    };
    if (tid == 0) {
        for (int s = 0; s < nst; s++) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, 8); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (tid >= 256) { /* the producer: its first thread issues every copy */
        if constexpr (BN > 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (tid != 256) return;
        int s = 0;
        uint32_t ph = 1; /* a fresh barrier's phase before the first passes at parity 1 */
        for (int64_t t = first; t < last; t += step) {
            int o0, p0, g, n;
            tile_of(t, o0, p0, g, n);
            for (int kb = 0; kb < A.kt; kb++) {
                mbar_wait(empty + 8 * s, ph);
                const uint32_t sa = sbase + s * STAGE_BYTES, bar = full + 8 * s;
                mbar_expect(bar, STAGE_BYTES);
                tma_load_3d(sa, &A.a, bar, kb * BK, o0, g);
#pragma unroll
                for (int j = 0; j < BN / 64; j++)
                    tma_load_4d(sa + A_BYTES + j * B_BOX, &A.b, bar, p0 + 64 * j, kb * BK, g, n);
                if (++s == nst) s = 0, ph ^= 1;
            }
        }
        return;
    }

    /* the consumers: warpgroup wg owns tile rows (output channels) 64 wg .. 64 wg + 63 */
    if constexpr (BN > 128) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    const int wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    const int r0 = wg * 64 + warp * 16 + (lane >> 2); /* this thread's rows r0, r0 + 8 */
    const bool lead = lane == 0, wg_lead = (tid & 127) == 0;
    const int y_es = A.y_es;
    const int64_t P = A.P;
    auto wg_sync = [wg] { asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory"); };
    int s = 0, yb = 0;
    uint32_t ph = 0;
    float acc[1][BN / 2];
    for (int64_t t = first; t < last; t += step) {
        int o0, p0, g, n;
        tile_of(t, o0, p0, g, n);
        float b0 = 0.0f, b1 = 0.0f;
        if (bias) {
            b0 = xconv_cuda_bias_at<float>(p, bias, o0 + r0, g);
            b1 = xconv_cuda_bias_at<float>(p, bias, o0 + r0 + 8, g);
        }
#pragma unroll
        for (int i = 0; i < BN / 2; i++) acc[0][i] = 0.0f;
        int held = -1; /* the slot an unfinished wgmma group still reads */
        for (int kb = 0; kb < A.kt; kb++) {
            mbar_wait(full + 8 * s, ph);
            const uint32_t sa = sbase + s * STAGE_BYTES;
            const uint64_t da = tile_desc(sa + wg * 64 * BKB), db = bn_desc(sa + A_BYTES);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int ks = 0; ks < BK / 16; ks++) /* 32 bytes of A's rows, 16 rows of B a step */
                xconv_wgmma::mma_op<4 + K, BN>::run(acc[0], da + 2 * ks, db + (uint64_t)(ks * 16 * BKB >> 4));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            if (held >= 0 && lead) mbar_arrive(empty + 8 * held);
            held = s;
            if (++s == nst) s = 0, ph ^= 1;
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        acc_fence<1, BN>(acc);
        if (held >= 0 && lead) mbar_arrive(empty + 8 * held);
        /* the rows' bias (the accumulators' rows are output channels: d[4j + 2h + e] is row
         * r0 + 8h), added before tile_store rounds each sum once */
        if (bias)
#pragma unroll
            for (int i = 0; i < BN / 2; i++) acc[0][i] += (i >> 1) & 1 ? b1 : b0;

        unsigned char *buf = ybufs + yb * A.ybuf;
        /* the store from this buffer has read it: with two, the one two tiles back (the
         * newest group is the other buffer's) */
        if (A.y_map && wg_lead) {
            if (A.nybuf == 2) bulk_wait_read_but1();
            else bulk_wait_read();
        }
        wg_sync();
        /* the warpgroup's 64 rows into the y buffer's 128-byte boxes (the swizzled layout the
         * TMA store reads), as the wgmma kernel's epilogue fills its tiles */
        const float *no_bias = nullptr;
        const int c0 = 2 * (lane & 3);
        switch (p.y_dtype) {
        case XCONV_DTYPE_BF16: tile_store<XCONV_DTYPE_BF16, BN, true, BM>(acc[0], no_bias, false, buf, 0, r0, c0); break;
        case XCONV_DTYPE_F16: tile_store<XCONV_DTYPE_F16, BN, true, BM>(acc[0], no_bias, false, buf, 0, r0, c0); break;
        default:
            if constexpr (BN == 128) tile_store<XCONV_DTYPE_F32, BN, true, BM>(acc[0], no_bias, false, buf, 0, r0, c0);
            break; /* (f32 y runs 128-wide tiles) */
        }
        const int rows = (int)(p.cout_g - o0 - 64 * wg < 64 ? p.cout_g - o0 - 64 * wg : 64);
        if (A.y_map) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            wg_sync();
            if (wg_lead) { /* one bulk group per tile, empty where the rows lie past cout/groups,
                            * so that the wait above always means the store two tiles back */
                const int per_box = BKB / y_es; /* positions per 128-byte box */
                for (int b = 0; rows > 0 && b < BN / per_box && p0 + b * per_box < P; b++)
                    tma_store_4d(&A.y, smem_addr(buf + b * BM * BKB + wg * 64 * BKB),
                                 p0 + b * per_box, o0 + 64 * wg, g, n);
                bulk_commit();
            }
        } else { /* rows of this warpgroup, element by element (a warp per row at a time) */
            wg_sync();
            const int cols = (int)(P - p0 < BN ? P - p0 : BN);
            for (int rr = warp; rr < rows; rr += 4) {
                const int r = 64 * wg + rr;
                char *dst = y + (p.y_off + n * p.y_sn + (g * p.cout_g + o0 + r) * p.y_sc + p0) * y_es;
                if (A.y_pairs) { /* 16-bit y, rows 4-byte aligned: two positions a store */
                    for (int c = 2 * lane; c < cols; c += 64) {
                        const unsigned char *src = buf + tile_at_byte<true, BM>(r, c * 2, 0);
                        if (c + 1 < cols) *(uint32_t *)(dst + 2 * c) = *(const uint32_t *)src;
                        else *(uint16_t *)(dst + 2 * c) = *(const uint16_t *)src;
                    }
                    continue;
                }
                for (int c = lane; c < cols; c += 32) {
                    const unsigned char *src = buf + tile_at_byte<true, BM>(r, c * y_es, 0);
                    if (y_es == 2) *(uint16_t *)(dst + 2 * c) = *(const uint16_t *)src;
                    else *(uint32_t *)(dst + 4 * c) = *(const uint32_t *)src;
                }
            }
        }
        if (A.nybuf == 2) yb ^= 1;
    }
    if (A.y_map && wg_lead) bulk_wait_all();
#else
    (void)A, (void)bias, (void)y;
    __trap(); /* never launched: supports() asks for a compute capability 9.0 device */
#endif
}

/* ---- host side ----------------------------------------------------------------------------- */

/* How a problem is laid out for the kernel: whether x and w are first copied into the
 * workspace with rows padded to 16 bytes, and the copies' row pitches (elements). Tried and
 * not kept (H200): B loaded by the producer warpgroup's cp.async of 8-byte pieces instead of
 * copying x, correct but slower (rn50_1x1_1024 bf16 86 against 135 TFLOP/s with the copy:
 * a stage is signalled one behind its loads, since the consumers free a slot only after
 * starting the next); x read in place through a map whose rows are G = 2, 4 or 8 channel
 * planes (a row stride of a 16-byte multiple), which faulted with "illegal instruction" at
 * the first box starting at a plane h > 0: tiled TMA loads want the box's innermost
 * coordinate on a 16-byte boundary, which h planes of 392 bytes are not. */
struct cf_plan {
    bool copy_x, copy_w;
    int64_t xp, wp;            /* row pitch of the copies: P and cin/groups rounded up */
    size_t x_bytes, w_bytes;   /* their workspace parts (256-byte multiples) */
};

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

cf_plan plan_of(const xconv_canon *p)
{
    cf_plan l;
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype), P = xconv__prod3(p->x_size);
    /* a stride of a size-1 dim is never used; the maps then take a stand-in */
    l.copy_x = (p->x_sc * es) % 16 || (p->n > 1 && (p->x_sn * es) % 16);
    l.copy_w = (p->w_so * es) % 16 || (p->groups > 1 && (p->w_sg * es) % 16);
    l.xp = round_up(P, 16 / es);
    l.wp = round_up(p->cin_g, 16 / es);
    l.x_bytes = l.copy_x ? xconv__cuda_align256((size_t)(es * p->n * p->cin * l.xp)) : 0;
    l.w_bytes = l.copy_w ? xconv__cuda_align256((size_t)(es * p->cout * l.wp)) : 0;
    return l;
}

bool cf_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA) return *why_not = "cuda.cf_gemm runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cuda.cf_gemm runs conv only", false;
    if ((p->x_dtype != XCONV_DTYPE_BF16 && p->x_dtype != XCONV_DTYPE_F16) ||
        (p->y_dtype != XCONV_DTYPE_BF16 && p->y_dtype != XCONV_DTYPE_F16 && p->y_dtype != XCONV_DTYPE_F32))
        return *why_not = "cuda.cf_gemm takes bf16 or f16 x and w, and bf16, f16 or f32 y", false;
    for (int d = 0; d < 3; d++)
        if (p->k_size[d] != 1 || p->pad_lo[d] != 0 || p->pad_hi[d] != 0 ||
            (p->x_size[d] > 1 && p->stride[d] != 1))
            return *why_not = "cuda.cf_gemm runs 1x1 convs at stride 1 without padding", false;
    const int64_t P = xconv__prod3(p->x_size);
    if (P < 2 || !xconv__cuda_dense_spatial(p->x_size, p->x_ss) ||
        !xconv__cuda_dense_spatial(p->y_size, p->y_ss) ||
        p->x_sc < P || p->y_sc < P || p->x_sn < 0 || p->y_sn < 0)
        return *why_not = "cuda.cf_gemm needs channels-first x and y (each channel's positions "
                          "one contiguous run)",
               false;
    if (p->w_si != 1 || p->w_so < p->cin_g || (p->groups > 1 && p->w_sg < p->cout_g * p->w_so))
        return *why_not = "cuda.cf_gemm needs w's input channels contiguous", false;
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype);
    if (P >= (1ll << 31) || p->cin_g >= (1ll << 31) || p->cout_g >= (1ll << 31) ||
        p->groups >= (1ll << 31) || p->n >= (1ll << 31) || p->x_sn * es >= (1ll << 40) ||
        p->y_sn * es >= (1ll << 40))
        return *why_not = "cuda.cf_gemm: too large for its tensor maps", false;
    const cf_plan l = plan_of(p); /* (the copies index a block of rows in 32 bits) */
    if ((l.copy_x && p->cin * l.xp >= (1ll << 31)) || (l.copy_w && p->cout_g * l.wp >= (1ll << 31)))
        return *why_not = "cuda.cf_gemm: an image of x or a group of w too large for its padded copy",
               false;
    if (xconv__cuda_device_cc(p->device_index) != 90)
        return *why_not = "cuda.cf_gemm needs a gpu of compute capability 9.0 (sm_90a)", false;
    return true;
}

/* The tile width: 256 positions for 16-bit y (rows of 512 contiguous bytes per tile in x and
 * y), 128 for f32 y (whose 256-wide y buffer would not fit beside the stages).
 * XCONV_CFGEMM_BN=128 forces 128 (a measuring knob). */
int pick_bn(const xconv_canon *p)
{
    const char *v = getenv("XCONV_CFGEMM_BN");
    if (v && atoi(v) == 128) return 128;
    return xconv_dtype_size(p->y_dtype) == 2 ? 256 : 128;
}

size_t cf_workspace_bytes(const xconv_canon *p)
{
    const cf_plan l = plan_of(p);
    return l.x_bytes + l.w_bytes;
}

/* The MMAs' rate over the tiles' padded work, plus the bytes the copies move (the same
 * weights per byte as cuda.cf_tc's transposes, which this engine leaves out). */
double cf_cost(const xconv_canon *p)
{
    const cf_plan l = plan_of(p);
    const double P = (double)xconv__prod3(p->x_size);
    const double pad = (double)round_up(p->cout_g, BM) / (double)p->cout_g *
                       ((double)round_up((int64_t)P, pick_bn(p)) / P) *
                       ((double)round_up(p->cin_g, BK) / (double)p->cin_g);
    return 0.009 * p->flops * pad + 1.5 * 2.0 * (double)(l.x_bytes + l.w_bytes) + 3e4;
}

/* Unit u of `units` (rows of `upr` units of T): row r = u / upr of the rows, its source at
 * (r / rows) * ostride + (r % rows) * spitch, its destination at r * dpitch (bytes); a thread
 * per unit, so a warp's loads and stores run on across row ends (a warp per row of 392 bytes
 * in 4-byte words ran at 1.48 TB/s, half of rn50_1x1_1024's time: ncu, twentieth session).
 * 32-bit index arithmetic: the caller keeps units below 2^31. */
template <class T>
__global__ void pad_rows(char *dst, int64_t dpitch, const char *src, int64_t spitch, uint32_t rows,
                         int64_t ostride, uint32_t upr, uint32_t units)
{
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += gridDim.x * blockDim.x) {
        const uint32_t r = u / upr, k = u - r * upr, blk = r / rows, rr = r - blk * rows;
        const T v = *(const T *)(src + blk * ostride + rr * spitch + (int64_t)k * sizeof(T));
        *(T *)(dst + r * dpitch + (int64_t)k * sizeof(T)) = v;
    }
}

/* Rows of `width` bytes, `rows` of them at pitch spitch and `outer` blocks of them at ostride
 * bytes, into dst at dpitch, block after block, in the widest units (16, 8, 4 or 2 bytes)
 * that every offset allows. (cudaMemcpy2DAsync, one call per block of rows, ran
 * rn50_1x1_1024's copy 8x slower.) */
void copy_rows(char *dst, int64_t dpitch, const char *src, int64_t spitch, int64_t width,
               int64_t rows, int64_t outer, int64_t ostride, cudaStream_t st)
{
    if (outer < 1) outer = 1;
    if (outer == 1) ostride = rows * spitch;
    const uint64_t bits = (uint64_t)(uintptr_t)src | (uint64_t)(uintptr_t)dst |
                          (uint64_t)(dpitch | spitch | ostride | width);
    const int64_t unit = bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 2;
    const int64_t upr = width / unit, per_block = rows * upr;
    /* launches of as many blocks of rows as keep the units below 2^31 (a block is: cf_supports) */
    const int64_t step = (((int64_t)1 << 31) - 1) / per_block;
    for (int64_t b0 = 0; b0 < outer; b0 += step) { /* (one launch unless x is huge) */
        const int64_t nb = outer - b0 < step ? outer - b0 : step;
        const uint32_t units = (uint32_t)(nb * per_block);
        const unsigned blocks = (unsigned)((units + 255) / 256 < 65535 ? (units + 255) / 256 : 65535);
        char *d = dst + b0 * rows * dpitch;
        const char *s = src + b0 * ostride;
#define XCONV_PAD_ROWS(T)                                                                          \
    pad_rows<T><<<blocks, 256, 0, st>>>(d, dpitch, s, spitch, (uint32_t)rows, ostride,             \
                                        (uint32_t)upr, units)
        if (unit == 16) XCONV_PAD_ROWS(uint4);
        else if (unit == 8) XCONV_PAD_ROWS(uint2);
        else if (unit == 4) XCONV_PAD_ROWS(uint32_t);
        else XCONV_PAD_ROWS(uint16_t);
#undef XCONV_PAD_ROWS
    }
}

/* The kernel for p's input dtype and tile width. */
template <int BN> void (*kernel_for(const xconv_canon *p))(cf_args, const char *, char *)
{
    return p->x_dtype == XCONV_DTYPE_BF16 ? cf_gemm_kernel<0, BN> : cf_gemm_kernel<1, BN>;
}

xconv_status cf_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const cf_plan l = plan_of(p);
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype), yes = (int64_t)xconv_dtype_size(p->y_dtype);
    const int64_t P = xconv__prod3(p->x_size);
    const char *x = (const char *)e->x + p->x_off * es, *w = (const char *)e->w + p->w_off * es;
    char *ws = (char *)e->workspace;
    /* the views the maps read: in place, or the padded copies */
    const int64_t xsc = l.copy_x ? l.xp : p->x_sc, xsn = l.copy_x ? p->cin * l.xp : p->x_sn;
    const int64_t wso = l.copy_w ? l.wp : p->w_so, wsg = l.copy_w ? p->cout_g * l.wp : p->w_sg;
    const char *xv = l.copy_x ? ws : x, *wv = l.copy_w ? ws + l.x_bytes : w;

    cf_args A;
    memset(&A, 0, sizeof A);
    A.p = *p;
    const cuuint64_t xd[4] = {(cuuint64_t)P, (cuuint64_t)p->cin_g, (cuuint64_t)p->groups, (cuuint64_t)p->n};
    const cuuint64_t xs[3] = {(cuuint64_t)(xsc * es), (cuuint64_t)(p->cin_g * xsc * es),
                              (cuuint64_t)((p->n > 1 ? xsn : p->groups * p->cin_g * xsc) * es)};
    const cuuint32_t xb[4] = {64, BK, 1, 1};
    const cuuint64_t wd[3] = {(cuuint64_t)p->cin_g, (cuuint64_t)p->cout_g, (cuuint64_t)p->groups};
    const cuuint64_t wsd[2] = {(cuuint64_t)(wso * es),
                               (cuuint64_t)((p->groups > 1 ? wsg : p->cout_g * wso) * es)};
    const cuuint32_t wb[3] = {BK, BM, 1};
    const cuuint64_t yd[4] = {(cuuint64_t)P, (cuuint64_t)p->cout_g, (cuuint64_t)p->groups, (cuuint64_t)p->n};
    const cuuint64_t ys[3] = {(cuuint64_t)(p->y_sc * yes), (cuuint64_t)(p->cout_g * p->y_sc * yes),
                              (cuuint64_t)((p->n > 1 ? p->y_sn : p->groups * p->cout_g * p->y_sc) * yes)};
    const cuuint32_t yb[4] = {(cuuint32_t)(BKB / yes), 64, 1, 1};
    const bool maps = xconv__cuda_map_tiled(&A.a, 2, 3, wv, wd, wsd, wb) &&
                      xconv__cuda_map_tiled(&A.b, 2, 4, xv, xd, xs, xb);
    if (!maps) return xconv__cuda_generic_run(e, err); /* an unaligned view: no TMA */
    A.y_map = xconv__cuda_map_tiled(&A.y, (int)yes, 4, (const char *)e->y + p->y_off * yes, yd, ys, yb);

    const int BN = pick_bn(p), STAGE_BYTES = BN == 256 ? stage_bytes<256>() : stage_bytes<128>();
    A.kt = (int)((p->cin_g + BK - 1) / BK);
    A.tn = (int)((P + BN - 1) / BN);
    A.to = (int)((p->cout_g + BM - 1) / BM);
    A.tiles = (long long)A.tn * A.to * p->groups * p->n;
    A.ybuf = BM * BN * (int)yes;
    A.y_es = (int)yes;
    A.P = P;
    int64_t blocks = xconv__cuda_device_sms(p->device_index);
    if (const char *v = getenv("XCONV_CFGEMM_BLOCKS"))
        if (atoi(v) > 0 && atoi(v) < blocks) blocks = atoi(v);
    if (blocks > A.tiles) blocks = A.tiles;
    /* two y buffers where a block runs several tiles (XCONV_CFGEMM_YBUFS=1/2 forces), the
     * rest of the shared memory in stages */
    A.nybuf = A.tiles > blocks ? 2 : 1;
    if (const char *v = getenv("XCONV_CFGEMM_YBUFS"))
        if (atoi(v) == 1 || atoi(v) == 2) A.nybuf = atoi(v);
    A.nst = (SMEM_LIMIT - 2048 - A.nybuf * A.ybuf) / STAGE_BYTES;
    if (A.nst > MAX_STAGES) A.nst = MAX_STAGES;
    if (A.nst < 2) A.nybuf = 1, A.nst = (SMEM_LIMIT - 2048 - A.ybuf) / STAGE_BYTES;
    const int smem = A.nst * STAGE_BYTES + A.nybuf * A.ybuf + 16 * A.nst + 1024;
    const int64_t ybase = (int64_t)(uintptr_t)e->y + p->y_off * yes;
    A.y_pairs = yes == 2 && ybase % 4 == 0 && p->y_sc % 2 == 0 && p->y_sn % 2 == 0;
    return xconv__cuda_run(e, "cuda.cf_gemm", err, [&](cudaStream_t st) {
        if (l.copy_x)
            copy_rows(ws, l.xp * es, x, p->x_sc * es, P * es, p->cin, p->n, p->x_sn * es, st);
        if (l.copy_w)
            copy_rows(ws + l.x_bytes, l.wp * es, w, p->w_so * es, p->cin_g * es, p->cout_g,
                      p->groups, p->w_sg * es, st);
        auto kern = BN == 256 ? kernel_for<256>(p) : kernel_for<128>(p);
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        kern<<<(unsigned)blocks, CF_THREADS, smem, st>>>(A, (const char *)e->bias, (char *)e->y);
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_cf_gemm = {
    "cuda.cf_gemm",     XCONV_DEVICE_CUDA, cf_supports,
    cf_workspace_bytes, cf_cost,           cf_run,
    nullptr,            nullptr,           nullptr,
};
