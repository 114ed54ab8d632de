/*
 * igemm_wgmma.cu — "cuda.igemm_wgmma": implicit-GEMM convolution on Hopper's warpgroup MMA
 * (wgmma.mma_async, sm_90a) for conv with bf16 / f16 inputs (f32 accumulate, y bf16 / f16 /
 * f32) and i8 / u8 inputs (s32 accumulate = exact modulo 2^32, y of at most 32 bits), where
 * cuda.igemm_tc's 16-byte loader applies: x and w channels-last, cin/groups a multiple of 16
 * bytes, 16-byte aligned rows and pointers. The GEMM view is cuda.igemm_tc's (igemm.cu):
 *
 *   M = N * prod(Y) output positions, N = cout_g, K = (tap, channel),
 *   A[m, (tap, c)] = x[n(m), Y(m)*s + tap*t - lo, c]   (0 outside x: padding)
 *   B[(tap, c), o] = w[g, o, c, tap]
 *
 * K runs in stages of 128 bytes of one tap's channels (a tap's last stage zero-filled past
 * cin/groups), so every 16-byte piece of an A row is 8 (16) channels of one pixel and one tap:
 * cp.async moves it straight into shared memory (implicit im2col, no column buffer).
 *
 * Block tile BM x BN x 128 bytes of K, BM = 128 MT: (MT, BN) one of 128 x {64, 128, 160,
 * 192, 256} and 256 x {64, 128}, or swapped 128 x 192 (A: 128 output channels of w, B: 192
 * positions of x by the im2col map; the y tile written transposed by stmatrix .trans:
 * rn50_3x3_256's 12544 x 256 outputs make 132 such tiles for 132 SMs where 128 x 256 made
 * 98, 476 -> 565 TFLOP/s; 16-bit floats only), picked per problem by pick_cfg (waves over
 * the SMs times the bytes a block moves per stage). 256 threads = 2 warpgroups, each computing MT m64
 * tiles x BN with one wgmma m64nBNk16 (k32 for bytes) per m64 tile and 32 bytes of K, A and
 * B both read from shared memory through descriptors. Tiles are stored in the
 * 128-byte-swizzle layout wgmma reads: row r at r * 128 bytes, its 16-byte chunk c at chunk
 * position c ^ (r & 7), each tile 1024-byte aligned.
 *
 * Loads, two kernels:
 *   - wgmma_tma_kernel (where x has a TMA im2col view and w a tiled one; make_set says
 *     when): A by TMA in im2col mode, the copy engine walking the tile's output positions,
 *     strides, padding and image boundaries itself, B by TMA from a 5-d tensor map of w
 *     (tma_maps.cu); a producer warpgroup's first thread issues both copies of a stage
 *     once its slot is free, the two consumer warpgroups only wait for full slots and run
 *     the MMAs, and no thread computes an address. Against cp.async A this took rn50_3x3_64
 *     from 182 to 261 TFLOP/s, c3d from 476 to 671, unet_320 from 525 to 643; the producer
 *     warpgroup (no block barrier per stage) and a persistent grid added 5-15% on most
 *     layers. cuda.deconv_tc's phases (negative dilation) run their taps backwards, all
 *     phases in one launch. A block loops over tiles with its stages running on across
 *     them, so on a persistent grid the next tile loads under this one's epilogue
 *     (launch_tma).
 *   - wgmma_kernel: A by cp.async of every thread (each keeps its rows' source pointers and
 *     bounds for the current tap, so a stage costs one add and one cp.async per row: the
 *     per-stage address arithmetic bounded the kernel before, 448 -> 689 TFLOP/s on
 *     sdvae_512); B by the same TMA (or by cp.async where no tensor map can be made:
 *     strided groups, negative strides).
 * Pipeline of wgmma_kernel: STAGES shared-memory stages (about 192 KiB), STAGES - 2 loaded
 * ahead, one wgmma group left in flight while the next stage's loads are issued; a stage is
 * refilled only after a block barrier that follows both warpgroups' wait for the wgmma that
 * read it. Shared memory written by cp.async is made visible to the tensor cores' (async
 * proxy) reads by fence.proxy.async before that barrier.
 *
 * Epilogue: cuda.igemm_tc's semantics: f32 (s32 as u32) sums plus the bias, one rounding to
 * y's dtype (the library's rules, common.cuh's f32_to_bf16 / f32_to_f16_rne) into a
 * shared-memory tile, then 16-byte stores of whole rows where y allows. The bias and the
 * rows' y offsets are fetched before the tile's MMAs (epi_fetch). In the TMA kernel the
 * consumers only fill the tile: the producer warpgroup's store warps copy it to y while the
 * consumers run the next tile's MMAs (rn50_1x1_256 94 -> 101 TFLOP/s): where y has a TMA view
 * (channels-last, positions at one stride: xconv__cuda_map_y) the tile is filled in boxes of
 * 128 bytes x BM rows in the 128-byte swizzle, and each consumer warpgroup hands its own half
 * of the rows (or, swapped, its own box) to its own store warp, which stores it by TMA while
 * the other half may still be read out (rn50_1x1_256 111 -> 128 against handing the whole
 * tile over at once); else the three store warps copy it by cp.async.bulk, one copy per row
 * (y rows of whole 16-byte pieces; else the consumers copy). (The row copies' operands are per thread, so the compiler issued them lane by lane:
 * ncu put 16% of rn50_1x1_256's warp samples at the consumers' wait for the tile to be free
 * and 12% in the store warps' issue loop.)
 * No atomics, no split of K: results are deterministic, and for exact inputs identical to
 * cuda.igemm_tc's and cpu.ref's.
 *
 * The kernels are compiled for sm_90a only (the compute_80 PTX pass sees empty bodies); the
 * engine supports a problem only on a device of compute capability 9.0. cuda.deconv_tc and
 * cuda.patch_tc launch the same kernel on their rewritten problems (xconv__cuda_tc_launch).
 *
 * Tuning knobs (environment, read at each launch; for measurements, not needed otherwise):
 * XCONV_WGMMA_CFG=0..7 forces a configuration (an index of CFGS); XCONV_WGMMA_TMA=1 keeps A on
 * cp.async, =0 loads B by cp.async too; XCONV_WGMMA_PERSIST=0/1 forces the one-tile-per-block
 * or the persistent grid of the TMA kernel; XCONV_WGMMA_EPI=consumers leaves the copy of the
 * y tile to y to the consumer warpgroups (as before the store warps), =rows to the store warps'
 * row copies even where y has a TMA view, =whole hands TMA-stored tiles over whole;
 * XCONV_WGMMA_RESB=0 leaves B out of residence; XCONV_WGMMA_TRACE=1 prints each TMA launch's
 * layout to stderr.
 *
 * Resident B (the kernel's RB, chosen by launch_tma, 128 x 256 tiles only): where every tile
 * of a launch reads the same B (one job, one group, one column tile) in one K stage (a 1x1
 * conv over 128 bytes of channels), the producer loads B once onto its own mbarrier, the
 * pipeline slots hold A only, and the room freed holds a second y tile: each warpgroup fills
 * its half of one y buffer while its store warp's TMA stores still read the other
 * (wait_group.read 1), on a second pair of named barriers per warpgroup. rn50_1x1_256 (128 x
 * 256 tiles moved 32 KiB of w with every 16 KiB of x), against the kernel without it in one
 * call: bf16 131.2 -> 134.5 TFLOP/s, f16 134.9 -> 144.2 (seventeenth session).
 */
#include "cuda/wgmma_device.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

using namespace xconv_cuda;

namespace {

/* Tile configurations: MT m64 row tiles per warpgroup (BM = 128 MT rows), BN columns; the
 * stages fill about 192 KiB (a stage is (BM + BN) * 128 bytes); 64-wide tiles run two
 * blocks per SM. */
template <int MT, int BN> struct cfg;
template <> struct cfg<1, 64> { static constexpr int stages = 4, minb = 2; };  /* 96 KiB */
template <> struct cfg<2, 64> { static constexpr int stages = 5, minb = 1; };  /* 200 KiB */
template <> struct cfg<1, 128> { static constexpr int stages = 6, minb = 1; }; /* 192 KiB */
template <> struct cfg<2, 128> { static constexpr int stages = 4, minb = 1; }; /* 192 KiB */
template <> struct cfg<1, 160> { static constexpr int stages = 5, minb = 1; }; /* 180 KiB */
template <> struct cfg<1, 192> { static constexpr int stages = 5, minb = 1; }; /* 200 KiB */
template <> struct cfg<1, 256> { static constexpr int stages = 4, minb = 1; }; /* 192 KiB */

/* wg_epilogue's shared memory: the y tile of y_es-byte elements (rows padded by 16 bytes),
 * its row offsets, the bias (the cp.async kernel sizes it for 4-byte y) */
template <int MT, int BN> constexpr int epi_bytes(int y_es = 4)
{
    return 128 * MT * (BN * y_es + 16) + 128 * MT * 8 + BN * 4;
}
/* The pipeline's and the epilogue's shared memory for a reduction of kt stages: a short
 * reduction (a 1x1 conv over few channels) fills fewer stages, so more blocks share an SM
 * and one block's epilogue runs under another's loads. The mbarriers follow it. */
template <int MT, int BN> __host__ __device__ constexpr int region_bytes(int kt)
{
    const int stages = kt < cfg<MT, BN>::stages ? kt : cfg<MT, BN>::stages;
    const int pipe = stages * (128 * MT + BN) * BKB;
    return pipe > epi_bytes<MT, BN>() ? pipe : epi_bytes<MT, BN>();
}
template <int MT, int BN> constexpr int smem_bytes(int kt)
{
    return region_bytes<MT, BN>(kt) + 1024 /* TMA_B's mbarriers */ +
           1024 /* alignment of the dynamic shared memory */;
}

/* The kernel with A by cp.async. TMA_B: the B tiles come by TMA (one tensor map of w:
 * channels, the three taps, output channels of all groups; 128-byte swizzle, zero fill past
 * cin/groups and cout) on one mbarrier per stage, leaving the threads only A's cp.async;
 * else by cp.async like A. TPK > 1 (cin/groups of 128 / TPK bytes: 64, 32 or 16, B by
 * cp.async): each 128-byte block of K holds TPK taps whole, thread chunk c loading tap
 * TPK s + c / (8 / TPK) of stage s, so that a layer of 64 i8 / fp8 channels runs its 3 x 3
 * taps in 5 blocks rather than 9 half-empty ones (the products are the same; integer sums
 * wrap to the same bits in any order). */
template <kind K, int MT, int BN, bool TMA_B, int TPK = 1>
__global__ void __launch_bounds__(THREADS, cfg<MT, BN>::minb)
wgmma_kernel(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
             const char *__restrict__ bias, char *__restrict__ y, int y_es, bool y_vec,
             const __grid_constant__ CUtensorMap tmb)
{
#if XCONV_WGMMA_ARCH
    static_assert(TPK == 1 || !TMA_B, "taps packed into a block: B by cp.async");
    using acc_t = typename std::conditional<acc_float<K>(), float, int32_t>::type;
    constexpr int ES = in_bytes<K>();
    constexpr int EPC = 16 / ES;                 /* elements per 16-byte chunk */
    constexpr int BM = 128 * MT, AROWS = BM / 32; /* A rows per thread */
    constexpr int STAGES = cfg<MT, BN>::stages;
    constexpr int PF = STAGES - 2;               /* stages loaded ahead */
    constexpr int A_BYTES = BM * BKB, STAGE_BYTES = (BM + BN) * BKB;
    constexpr int BROWS = BN / 32;               /* B rows per thread */
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    const uint32_t sbase = smem_addr(smem);
    /* TMA_B: one mbarrier per stage after the pipeline / epilogue space */
    const int kvol = (int)(p.k_size[0] * p.k_size[1] * p.k_size[2]);
    const int cchunks = (int)((p.cin_g * ES + BKB - 1) / BKB);
    const int KT = TPK > 1 ? (kvol + TPK - 1) / TPK : kvol * cchunks;
    const uint32_t bars = sbase + region_bytes<MT, BN>(KT);

    const int tid = threadIdx.x, wg = tid >> 7;
    const int64_t g = blockIdx.z;
    const int64_t Y0 = p.y_size[0], Y1 = p.y_size[1], Y2 = p.y_size[2];
    const int64_t M = p.n * Y0 * Y1 * Y2;
    const int64_t m0 = (int64_t)blockIdx.x * BM;
    const int64_t o0 = (int64_t)blockIdx.y * BN;
    const epi_pre<bias_of<K>> pre = epi_fetch<BM, BN, bias_of<K>>(p, bias, tid, m0, M, o0, g);

    /* This thread's 16-byte chunk and rows: A rows row0 + 32 i (i < AROWS), B rows row0 + 32 i. */
    const int chunk = tid & 7, row0 = tid >> 3;
    int64_t a_base[AROWS];
    int a_q[AROWS][3];
    bool a_ok[AROWS];
#pragma unroll
    for (int i = 0; i < AROWS; i++) {
        const int64_t m = m0 + row0 + 32 * i;
        a_ok[i] = m < M;
        int64_t r = a_ok[i] ? m : 0;
        const int64_t j2 = r % Y2; r /= Y2;
        const int64_t j1 = r % Y1; r /= Y1;
        const int64_t j0 = r % Y0;
        const int64_t n = r / Y0;
        a_q[i][0] = (int)(j0 * p.stride[0] - p.pad_lo[0]);
        a_q[i][1] = (int)(j1 * p.stride[1] - p.pad_lo[1]);
        a_q[i][2] = (int)(j2 * p.stride[2] - p.pad_lo[2]);
        a_base[i] = p.x_off + n * p.x_sn + g * p.cin_g + a_q[i][0] * p.x_ss[0] +
                    a_q[i][1] * p.x_ss[1] + a_q[i][2] * p.x_ss[2];
    }
    const int64_t b_base = p.w_off + g * p.w_sg + (o0 + row0) * p.w_so, b_step = 32 * p.w_so;
    const int64_t b_rows = p.cout_g - o0 - row0; /* B rows i with 32 i < b_rows exist */
    const int X0 = (int)p.x_size[0], X1 = (int)p.x_size[1], X2 = (int)p.x_size[2];
    const int K1 = (int)p.k_size[1], K2 = (int)p.k_size[2];
    const int D0 = (int)p.dil[0], D1 = (int)p.dil[1], D2 = (int)p.dil[2];

    /* Stages are loaded in order: (tap, channel block) advance by one per call. A row's
     * source pointer and bounds change with the tap only, so they are kept per row and
     * recomputed at each tap's first block. */
    const char *a_src[AROWS];
    bool a_in[AROWS];
    int ld_cb = 0, k0 = 0, k1 = 0, k2 = 0;
    /* B by cp.async into the stage at sb: this thread's chunk of its rows, w_tap elements
     * into each row of w, zeros where ok is false */
    auto load_b = [&](uint32_t sb, int64_t w_tap, bool ok) {
#pragma unroll
        for (int i = 0; i < BROWS; i++) {
            const bool in = ok && 32 * i < b_rows;
            cp_async16(sb + swz(row0 + 32 * i, chunk), in ? w + (b_base + i * b_step + w_tap) * ES : w, in);
        }
    };
    auto load_stage = [&](int slot) {
        if constexpr (TPK > 1) { /* ld_cb counts stages; this thread's tap of each */
            constexpr int CPT = 8 / TPK; /* 16-byte chunks per tap */
            const int tap = ld_cb++ * TPK + chunk / CPT, cc = (chunk % CPT) * EPC;
            const bool t_ok = tap < kvol;
            const int t2 = tap % K2, t1 = tap / K2 % K1, t0 = tap / K2 / K1;
            const int64_t x_tap = (int64_t)t0 * D0 * p.x_ss[0] + (int64_t)t1 * D1 * p.x_ss[1] +
                                  (int64_t)t2 * D2 * p.x_ss[2] + cc;
            const uint32_t sa = sbase + slot * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
            for (int i = 0; i < AROWS; i++) {
                const int q0 = a_q[i][0] + t0 * D0, q1 = a_q[i][1] + t1 * D1, q2 = a_q[i][2] + t2 * D2;
                const bool ok = t_ok && a_ok[i] && (unsigned)q0 < (unsigned)X0 &&
                                (unsigned)q1 < (unsigned)X1 && (unsigned)q2 < (unsigned)X2;
                cp_async16(sa + swz(row0 + 32 * i, chunk), ok ? x + (a_base[i] + x_tap) * ES : x, ok);
            }
            load_b(sb, t0 * p.w_sk[0] + t1 * p.w_sk[1] + t2 * p.w_sk[2] + cc, t_ok);
            return;
        }
        if (ld_cb == 0) {
            const int64_t x_tap = (int64_t)k0 * D0 * p.x_ss[0] + (int64_t)k1 * D1 * p.x_ss[1] +
                                  (int64_t)k2 * D2 * p.x_ss[2] + chunk * EPC;
#pragma unroll
            for (int i = 0; i < AROWS; i++) {
                const int q0 = a_q[i][0] + k0 * D0, q1 = a_q[i][1] + k1 * D1,
                          q2 = a_q[i][2] + k2 * D2;
                a_in[i] = a_ok[i] && (unsigned)q0 < (unsigned)X0 && (unsigned)q1 < (unsigned)X1 &&
                          (unsigned)q2 < (unsigned)X2;
                a_src[i] = x + (a_base[i] + x_tap) * ES;
            }
        }
        const int c = ld_cb * (BKB / ES) + chunk * EPC; /* first channel */
        const bool c_ok = c < p.cin_g;
        const uint32_t sa = sbase + slot * STAGE_BYTES, sb = sa + A_BYTES;
        const int cb = ld_cb, t0 = k0, t1 = k1, t2 = k2; /* this stage's block and tap */
        if (++ld_cb == cchunks) {
            ld_cb = 0;
            if (++k2 == K2) {
                k2 = 0;
                if (++k1 == K1) k1 = 0, k0++;
            }
        }
#pragma unroll
        for (int i = 0; i < AROWS; i++) {
            const bool ok = a_in[i] && c_ok;
            cp_async16(sa + swz(row0 + 32 * i, chunk), ok ? a_src[i] + cb * BKB : x, ok);
        }
        if constexpr (TMA_B) {
            if (tid == 0) {
                mbar_expect(bars + 8 * slot, BN * BKB);
                tma_load_b(sb, &tmb, bars + 8 * slot, cb * (BKB / ES), t2, t1, t0,
                           (int)(g * p.cout_g + o0));
            }
            return;
        }
        load_b(sb, t0 * p.w_sk[0] + t1 * p.w_sk[1] + t2 * p.w_sk[2] + c, c_ok);
    };

    acc_t acc[MT][BN / 2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) acc[mt][i] = 0;

    if (TMA_B && tid == 0) {
        for (int s = 0; s < STAGES && s < KT; s++) mbar_init(bars + 8 * s, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if (TMA_B) __syncthreads();
#pragma unroll
    for (int s = 0; s < PF; s++) {
        if (s < KT) load_stage(s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<PF - 1>();
        /* cp.async wrote through the generic proxy; wgmma reads through the async one */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        const int slot = kt % STAGES;
        if constexpr (TMA_B) mbar_wait(bars + 8 * slot, (kt / STAGES) & 1);
        mma_stage<K, MT, BN>(acc, sbase + slot * STAGE_BYTES, A_BYTES, wg);
        /* refill the stage that wgmma kt - 2 read: both warpgroups waited for it (below, in
         * iteration kt - 1) before the barrier above */
        const int nk = kt + PF;
        if (nk < KT) load_stage(nk % STAGES);
        cp_async_commit();
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    acc_fence<MT, BN>(acc);
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's shared memory becomes the output tile */

    wg_tile_fill<K, MT, BN, false>(acc, smem, p, pre, bias != nullptr, y_es, tid, [] { __syncthreads(); });
    __syncthreads();
    wg_tile_out<MT, BN, THREADS>(smem, p, y, y_es, y_vec, tid, m0, o0, M);
#else
    (void)p, (void)x, (void)w, (void)bias, (void)y, (void)y_es, (void)y_vec;
    __trap(); /* never launched: supports() asks for a compute capability 9.0 device */
#endif
}

/* The TMA kernel's threads: two consumer warpgroups (the MMAs, the epilogue) and a producer
 * warpgroup whose first thread issues the copies. The producer gives registers to the
 * consumers (setmaxnreg: with 384 threads the compiler's cap at entry is 168 per thread,
 * which spilled the 256-wide tiles' accumulators). setmaxnreg.inc waits until the block's
 * own released registers cover it, so the consumers may take only what the producer gave
 * back: 256 (C - E) <= 128 (E - P) with E the entry cap (a request beyond it hung the
 * kernel on the device). */
constexpr int TMA_THREADS = THREADS + 128;
constexpr int STORE_THREADS = 96; /* the producer warpgroup's last three warps */
static_assert(STORE_THREADS % 32 == 0 && STORE_THREADS <= TMA_THREADS - THREADS - 32,
              "the store warps are whole warps of the producer warpgroup but its first");
template <int MINB> constexpr int entry_regs() { return 65536 / (TMA_THREADS * MINB) / 8 * 8; }
template <int MINB> constexpr int producer_regs() { return MINB == 1 ? 56 : 40; }
template <int MINB> constexpr int consumer_regs() { return MINB == 1 ? 224 : 96; }
static_assert(THREADS * (consumer_regs<1>() - entry_regs<1>()) <=
                      (TMA_THREADS - THREADS) * (entry_regs<1>() - producer_regs<1>()) &&
                  THREADS * (consumer_regs<2>() - entry_regs<2>()) <=
                      (TMA_THREADS - THREADS) * (entry_regs<2>() - producer_regs<2>()),
              "the consumers' registers must come from the producer's");

/* The kernel with A and B by TMA, A in im2col mode: the copy engine walks a tile's output
 * positions, the padding and the image boundaries itself, so one thread issues a stage's two
 * copies and no thread computes an address (rn50_3x3_64 182 -> 261 TFLOP/s, c3d 476 -> 671
 * against cp.async A). That thread is a producer warp's: it waits for a slot to be free (its
 * "empty" mbarrier, one arrival per consumer warp once the wgmma that read it is done) and
 * loads it ("full" mbarrier), all nst slots ahead; the consumer warpgroups only wait for full
 * slots, so no block-wide barrier per stage (ncu: the barrier after each stage, with thread 0
 * of the MMA warps issuing the copies, took 35-48% of the warps' stall cycles).
 * Tiles are numbered job by job (set.job[j].tile0), within a job m-tile fastest, then column
 * tile, then group; a block runs the tiles first, first + step, ... and its stages run on
 * across them, into the next tile's while this one's epilogue runs (with a grid of fewer
 * blocks than tiles, the epilogue has its own shared memory). One launch over
 * cuda.deconv_tc's phases fills the SMs that one launch per phase left idle in each phase's
 * last wave. MULTI: more than one job; with one, the job's fields are read at fixed parameter
 * offsets (a run-time job index made every read a generic load: 10-15% slower on the large
 * layers). */
template <kind K, int MT, int BN, bool MULTI, bool SW, bool RB, bool PK = false>
__global__ void __launch_bounds__(TMA_THREADS, cfg<MT, BN>::minb)
wgmma_tma_kernel(const __grid_constant__ tma_set set, const char *__restrict__ bias,
                 char *__restrict__ y, int y_es, const tma_smem lay)
{
#if XCONV_WGMMA_ARCH
    using acc_t = typename std::conditional<acc_float<K>(), float, int32_t>::type;
    constexpr int ES = in_bytes<K>(), CPB = BKB / ES; /* channels per 128-byte block */
    constexpr int BM = 128 * MT, A_BYTES = BM * BKB, STAGE_BYTES = (BM + BN) * BKB;
    /* a tile's positions and output channels (SW: swapped, A from w, B from x) */
    constexpr int TP = tile_dims<BM, BN, SW>::TP, TC = tile_dims<BM, BN, SW>::TC;
    static_assert(!SW || (MT == 1 && ES == 2 && !MULTI), "swapped tiles: 128 channels, 16-bit floats, one job");
    static_assert(!RB || (!SW && !MULTI), "resident B: one job, tiles not swapped");
    /* PK: one job of 64-byte channel runs (one group), each stage two taps whole, as two
     * 64-byte-swizzled halves of A and of B (tma_set.pack; mma_stage_pk) */
    static_assert(!PK || (!SW && !MULTI && !RB && ES == 1), "packed taps: one job of 8-bit inputs");
    /* RB: B resident, slots of A only (a compile-time choice: a run-time one cost
     * the other launches 2-5% on the H200) */
    constexpr int SLOT = RB ? A_BYTES : STAGE_BYTES;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    const int nst = lay.nst, tid = threadIdx.x, wg = tid >> 7;
    const uint32_t sbase = smem_addr(smem), full = sbase + lay.bars, empty = full + 8 * nst;
    const uint32_t bfull = empty + 8 * nst; /* RB: the resident B tiles have landed */
    const int64_t ntile = set.tiles;
    const int64_t first = blockIdx.x + (int64_t)gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z);
    const int64_t step = (int64_t)gridDim.x * gridDim.y * gridDim.z;

    /* A job's tiling: m-tiles, column tiles, stages per tile. */
    struct geom {
        int64_t tm, tn, M;
        int kt, cchunks;
    };
    auto geom_of = [](const xconv_canon &q) {
        geom r;
        r.M = q.n * q.y_size[0] * q.y_size[1] * q.y_size[2];
        r.tm = (r.M + TP - 1) / TP;
        r.tn = (q.cout_g + TC - 1) / TC;
        r.cchunks = (int)((q.cin_g * ES + BKB - 1) / BKB);
        const int kvol = (int)(q.k_size[0] * q.k_size[1] * q.k_size[2]);
        r.kt = PK ? (kvol + 1) / 2 : kvol * r.cchunks;
        return r;
    };
    /* the job of tile t, from job j on (tiles only grow) */
    auto job_of = [&](int64_t t, int j) {
        if constexpr (MULTI)
            while (j + 1 < set.count && t >= set.job[j + 1].tile0) j++;
        return j;
    };
    /* Where tile t lies (j: its job, found from j on): the job, its tiling, the tile's index
     * in the job, first position m0, first output channel o0 in its group g. */
    struct tile_pos {
        const tma_job *J;
        geom G;
        int64_t lt, m0, o0, g;
    };
    auto tile_at = [&](int64_t t, int &j) {
        j = job_of(t, j);
        tile_pos r;
        r.J = &set.job[MULTI ? j : 0];
        r.G = geom_of(r.J->p);
        r.lt = t - r.J->tile0;
        const int64_t per_g = r.G.tm * r.G.tn, in_g = r.lt % per_g;
        r.g = r.lt / per_g;
        if (lay.band <= 0 || lay.band >= r.G.tm) {
            r.m0 = in_g % r.G.tm * TP, r.o0 = in_g / r.G.tm * TC;
        } else { /* bands of lay.band m-tiles (the last one maybe fewer), m fastest inside */
            const int64_t b = in_g / (lay.band * r.G.tn), in_b = in_g - b * lay.band * r.G.tn;
            const int64_t rows = r.G.tm - b * lay.band < lay.band ? r.G.tm - b * lay.band : lay.band;
            r.m0 = (b * lay.band + in_b % rows) * TP, r.o0 = in_b / rows * TC;
        }
        return r;
    };
    /* The TMA stores of warpgroup h's part of tile tp's y tile (at tile): its rows of each
     * 128-byte box (BM / 2 rows from 64 MT h), or swapped its own box (64 channels of all the
     * tile's positions). */
    auto store_boxes = [&](const tile_pos &tp, const unsigned char *tile, int h) {
        const int c0 = (int)(tp.g * tp.J->p.cout_g + tp.o0);
        if constexpr (SW)
            tma_store_y(&tp.J->y, smem_addr(tile + h * BN * BKB), c0 + h * BKB / y_es, (int)tp.m0);
        else
            for (int b = 0; b < BN * y_es / BKB; b++)
                tma_store_y(&tp.J->y, smem_addr(tile + b * BM * BKB + h * (BM / 2) * BKB),
                            c0 + b * BKB / y_es, (int)tp.m0 + h * (BM / 2));
    };

    if (tid == 0) {
        for (int s = 0; s < nst; s++) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, THREADS / 32);
        }
        if (RB) mbar_init(bfull, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads(); /* the last block-wide barrier: the producer warp leaves early */

    constexpr int MINB = cfg<MT, BN>::minb;
    /* The y tile between the consumers, who fill it, and the store warps, who copy it to y:
     * named barriers over both (bar.arrive by one side, bar.sync by the other). */
    constexpr int EPI_THREADS = THREADS + STORE_THREADS;
    auto tile_full_arrive = [] { asm volatile("bar.arrive 2, %0;" ::"n"(EPI_THREADS) : "memory"); };
    auto tile_full_wait = [] { asm volatile("bar.sync 2, %0;" ::"n"(EPI_THREADS) : "memory"); };
    auto tile_free_arrive = [] { asm volatile("bar.arrive 3, %0;" ::"n"(EPI_THREADS) : "memory"); };
    auto tile_free_wait = [] { asm volatile("bar.sync 3, %0;" ::"n"(EPI_THREADS) : "memory"); };
    /* lay.wg_half: the same per warpgroup h and its store warp h, for y buffer b (b = 1 only
     * with RB's second buffer), on barriers 4 + 2h + 6b (full) and 5 + 2h + 6b (free);
     * 8 + h is the warpgroup's own (wg_half_fill's bias). */
    constexpr int HALF_THREADS = 128 + 32;
    auto half_full_arrive = [](int h, int b) { asm volatile("bar.arrive %0, %1;" ::"r"(4 + 2 * h + 6 * b), "n"(HALF_THREADS) : "memory"); };
    auto half_full_wait = [](int h, int b) { asm volatile("bar.sync %0, %1;" ::"r"(4 + 2 * h + 6 * b), "n"(HALF_THREADS) : "memory"); };
    auto half_free_arrive = [](int h, int b) { asm volatile("bar.arrive %0, %1;" ::"r"(5 + 2 * h + 6 * b), "n"(HALF_THREADS) : "memory"); };
    auto half_free_wait = [](int h, int b) { asm volatile("bar.sync %0, %1;" ::"r"(5 + 2 * h + 6 * b), "n"(HALF_THREADS) : "memory"); };
    if (tid >= THREADS) { /* the producer warpgroup */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(producer_regs<MINB>()));
        if (tid >= TMA_THREADS - STORE_THREADS) { /* the store warps */
            if (lay.own_copy) return;
            const int st = tid - (TMA_THREADS - STORE_THREADS);
            if (lay.wg_half) { /* store warp h: warpgroup h's half of the rows of each box */
                const int h = st >> 5;
                if (h >= 2) return;
                int sj = 0, b = 0;
                for (int64_t t = first; t < ntile; t += step) {
                    const tile_pos tp = tile_at(t, sj);
                    half_full_wait(h, b);
                    if ((st & 31) == 0) {
                        store_boxes(tp, smem + lay.epi + b * lay.epi2, h);
                        bulk_commit();
                        if constexpr (RB) bulk_wait_read_but1(); /* the other buffer's stores */
                        else bulk_wait_read();
                    }
                    __syncwarp();
                    if constexpr (RB) { /* two buffers: the previous tile's is free for the next */
                        if (t != first && t + step < ntile) half_free_arrive(h, b ^ 1);
                        b ^= 1;
                    } else if (t + step < ntile) {
                        half_free_arrive(h, 0);
                    }
                }
                if ((st & 31) == 0) bulk_wait_all();
                return;
            }
            const unsigned char *tile = smem + lay.epi;
            const int pitch = BN * y_es + 16;
            const int64_t *row_off = (const int64_t *)(tile + BM * pitch);
            int sj = 0;
            for (int64_t t = first; t < ntile; t += step) {
                const tile_pos tp = tile_at(t, sj);
                const int rows = (int)(tp.G.M - tp.m0 < BM ? tp.G.M - tp.m0 : BM);
                const int row_bytes = (int)(tp.J->p.cout_g - tp.o0 < BN ? tp.J->p.cout_g - tp.o0 : BN) * y_es;
                tile_full_wait();
                if (tp.J->y_map) { /* both warpgroups' boxes by TMA, from one thread */
                    if (st == 0) {
                        store_boxes(tp, tile, 0);
                        store_boxes(tp, tile, 1);
                        bulk_commit();
                        bulk_wait_read();
                    }
                    __syncwarp();
                } else {
                    for (int r = st; r < rows; r += STORE_THREADS)
                        bulk_store(y + row_off[r] * y_es, smem_addr(tile + r * pitch), row_bytes);
                    bulk_commit();
                    bulk_wait_read(); /* the tile may be written again */
                }
                if (t + step < ntile) tile_free_arrive();
            }
            bulk_wait_all();
            return;
        }
        if (tid != THREADS) return;
        /* tile pt of job pj, its stage (cb, k0, k1, k2), into slot ps once the slot's
         * empty phase pe is done (the first round passes: parity 1 is the phase before the
         * barrier's first); the tile's window corner (innermost spatial dim first, in the A
         * map's dims), image, first channel of x and first row of w; the job's taps,
         * dilations, maps */
        int64_t pt = first;
        int pj = 0, ps = 0, cb = 0, k0 = 0, k1 = 0, k2 = 0, corner[3], img = 0, pc0 = 0, po0 = 0;
        int pk[3], pd[3], rank = 0, flip = 0, nimg = 0;
        uint32_t pe = 1;
        const CUtensorMap *ma = nullptr, *mb = nullptr;
        geom pgeo;
        auto start_tile = [&]() {
            if (pt >= ntile) return;
            const tile_pos tp = tile_at(pt, pj);
            const tma_job &J = *tp.J;
            const xconv_canon &q = J.p;
            pgeo = tp.G;
            for (int d = 0; d < 3; d++) pk[d] = (int)q.k_size[d], pd[d] = (int)q.dil[d];
            rank = J.a_rank, flip = J.flip, ma = &J.a, mb = &J.b, nimg = (int)q.n;
            int64_t r = tp.m0;
            const int64_t j2 = r % q.y_size[2]; r /= q.y_size[2];
            const int64_t j1 = r % q.y_size[1]; r /= q.y_size[1];
            const int64_t j0 = r % q.y_size[0];
            img = (int)(r / q.y_size[0]);
            corner[0] = (int)(j2 * q.stride[2] - q.pad_lo[2]);
            corner[1] = (int)(j1 * q.stride[1] - q.pad_lo[1]);
            corner[2] = (int)(j0 * q.stride[0] - q.pad_lo[0]);
            pc0 = (int)(tp.g * q.cin_g) - J.kshift;
            po0 = (int)(tp.g * q.cout_g + tp.o0);
        };
        start_tile();
        if (RB && pt < ntile) { /* the launch's one B tile (one tap, one channel block), once */
            mbar_expect(bfull, BN * BKB);
            tma_load_b(sbase + lay.bres, mb, bfull, 0, 0, 0, 0, po0);
        }
        while (pt < ntile) {
            if (pgeo.kt == 0) { /* bias only: nothing to load */
                pt += step;
                start_tile();
                continue;
            }
            mbar_wait(empty + 8 * ps, pe);
            const uint32_t sa = sbase + ps * SLOT, bar = full + 8 * ps;
            if constexpr (PK) { /* stage cb: taps 2 cb and 2 cb + 1, each a 64-byte half */
                const int kvol = pk[0] * pk[1] * pk[2];
                mbar_expect(bar, SLOT);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    /* past the last tap (odd tap counts): A of an image past the last and B
                     * of a kernel row past the last, both zero-filled by the copy engine */
                    const int tap = 2 * cb + h, tt = tap < kvol ? tap : 0;
                    const int t2 = tt % pk[2], t1 = tt / pk[2] % pk[1], t0 = tt / pk[2] / pk[1];
                    const uint16_t toff[3] = {(uint16_t)(t2 * pd[2]), (uint16_t)(t1 * pd[1]),
                                              (uint16_t)(t0 * pd[0])};
                    tma_load_a(sa + h * BM * 64, ma, bar, rank, pc0, corner, tap < kvol ? img : nimg, toff);
                    tma_load_b(sa + A_BYTES + h * BN * 64, mb, bar, 0, flip & 4 ? pk[2] - 1 - t2 : t2,
                               flip & 2 ? pk[1] - 1 - t1 : t1,
                               tap < kvol ? (flip & 1 ? pk[0] - 1 - t0 : t0) : pk[0], po0);
                }
                if (++ps == nst) ps = 0, pe ^= 1;
                if (++cb < pgeo.kt) continue;
                cb = 0;
                pt += step;
                start_tile();
                continue;
            }
            const uint16_t off[3] = {(uint16_t)(k2 * pd[2]), (uint16_t)(k1 * pd[1]),
                                     (uint16_t)(k0 * pd[0])};
            mbar_expect(bar, SLOT);
            /* x's tile is A, w's B (SW: the other way round) */
            tma_load_a(SW ? sa + A_BYTES : sa, ma, bar, rank, pc0 + cb * CPB, corner, img, off);
            if constexpr (!RB)
                tma_load_b(SW ? sa : sa + A_BYTES, mb, bar, cb * CPB, flip & 4 ? pk[2] - 1 - k2 : k2,
                           flip & 2 ? pk[1] - 1 - k1 : k1, flip & 1 ? pk[0] - 1 - k0 : k0, po0);
            if (++ps == nst) ps = 0, pe ^= 1;
            if (++cb < pgeo.cchunks) continue;
            cb = 0;
            if (++k2 < pk[2]) continue;
            k2 = 0;
            if (++k1 < pk[1]) continue;
            k1 = 0;
            if (++k0 < pk[0]) continue;
            k0 = 0;
            pt += step;
            start_tile();
        }
        return;
    }

    /* The consumer warpgroups: wait for a full slot, MMAs, and once the wgmma that read a
     * slot is done (wait_group 1 after the next one), each warp's lane 0 frees the slot. */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(consumer_regs<MINB>()));
    auto consumers_sync = [] { asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory"); };
    const bool lead = (tid & 31) == 0;
    acc_t acc[MT][BN / 2];
    int cs = 0, cj = 0; /* the slot and the parity of the stage the MMAs read next; the job */
    uint32_t cpar = 0;
    int yb = 0; /* RB: the y buffer of this tile */
    if (RB && first < ntile) mbar_wait(bfull, 0);
    for (int64_t t = first; t < ntile; t += step) {
        const tile_pos tp = tile_at(t, cj);
        const tma_job &J = *tp.J;
        const geom &cg = tp.G;
        const int64_t m0 = tp.m0, o0 = tp.o0, g = tp.g;
        const epi_pre<bias_of<K>> pre =
            epi_fetch<BM, BN, bias_of<K>>(J.p, bias, tid, m0, cg.M, o0, g, lay.wg_half, SW);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < BN / 2; i++) acc[mt][i] = 0;
        int held = -1; /* the slot an unfinished wgmma still reads */
        for (int kt = 0; kt < cg.kt; kt++) {
            mbar_wait(full + 8 * cs, cpar);
            const uint32_t sa = sbase + cs * SLOT; /* B: in the slot, or resident */
            if constexpr (PK) mma_stage_pk<K, MT, BN>(acc, sa, A_BYTES, wg);
            else mma_stage<K, MT, BN>(acc, sa, RB ? (int)(sbase + lay.bres - sa) : A_BYTES, wg);
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            if (held >= 0 && lead) mbar_arrive(empty + 8 * held);
            held = cs;
            if (++cs == nst) cs = 0, cpar ^= 1;
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        acc_fence<MT, BN>(acc);
        if (held >= 0 && lead) mbar_arrive(empty + 8 * held);
        /* the y tile is free: on the first tile, once both warpgroups are done with the
         * stages it may lie over; then once the store warps have copied the last one */
        if (SW || lay.wg_half) { /* this warpgroup's half, to its own store warp */
            if constexpr (RB) { /* y apart from the stages; each buffer's first tile finds it free */
                if (t >= first + 2 * step) half_free_wait(wg, yb);
            } else if (t == first) {
                consumers_sync();
            } else {
                half_free_wait(wg, 0);
            }
            if constexpr (SW) { /* its own box: all the tile's positions, its 64 channels */
                unsigned char *box = smem + lay.epi + wg * BN * BKB;
                if (J.p.y_dtype == XCONV_DTYPE_BF16)
                    swap_fill<XCONV_DTYPE_BF16, BN>(acc[0], pre.bias, pre.bias2, bias != nullptr, box, tid);
                else
                    swap_fill<XCONV_DTYPE_F16, BN>(acc[0], pre.bias, pre.bias2, bias != nullptr, box, tid);
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                half_full_arrive(wg, 0);
                continue;
            }
            wg_half_fill<K, MT, BN>(acc, smem + lay.epi + yb * lay.epi2, J.p, pre, bias != nullptr,
                                    y_es, tid, 8 + wg);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            half_full_arrive(wg, yb);
            if constexpr (RB) yb ^= 1;
            continue;
        }
        if (t == first || lay.own_copy) consumers_sync();
        else tile_free_wait();
        if (J.y_map && !lay.own_copy) /* boxes for the TMA stores */
            wg_tile_fill<K, MT, BN, true>(acc, smem + lay.epi, J.p, pre, bias != nullptr, y_es,
                                          tid, consumers_sync);
        else
            wg_tile_fill<K, MT, BN, false>(acc, smem + lay.epi, J.p, pre, bias != nullptr, y_es,
                                           tid, consumers_sync);
        if (lay.own_copy) {
            consumers_sync();
            wg_tile_out<MT, BN, THREADS>(smem + lay.epi, J.p, y, y_es, J.y_vec, tid, m0, o0, cg.M);
        } else { /* the store warps take it from here, by the async proxy */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            tile_full_arrive();
        }
    }
#else
    (void)bias, (void)y, (void)y_es, (void)lay;
    __trap(); /* never launched: supports() asks for a compute capability 9.0 device */
#endif
}

/* The tile configurations (MT, BN) and their blocks per SM. */
struct tile_cfg {
    int mt, bn, per_sm;
    double rate; /* relative bytes per cycle */
    bool swap;   /* 128 output channels x bn positions (tile_dims' SW) */
    double rate_long; /* the rate where the grid runs LONG_WAVES waves or more (0: rate) */
};
/* 256 x 64 against 128 x 64 in two blocks per SM, once the epilogue rounded 8 pairs per NaN
 * check (nineteenth session, bf16 TFLOP/s, three rounds): rn50_3x3_64 (6 waves) 346-352
 * against 323-330; one to three waves (conv 3x3 and 1x1, 12544-100352 positions, 32-64
 * channels) the same or slower (147-164 against 155-170; 77 against 86-88). */
constexpr int LONG_WAVES = 4;
const tile_cfg CFGS[] = {{1, 256, 1, 5.25, false, 0}, {2, 128, 1, 4.18, false, 0}, {1, 192, 1, 4.86, false, 0},
                         {1, 160, 1, 4.75, false, 0}, {1, 128, 1, 4.59, false, 0}, {2, 64, 1, 4.4, false, 4.75},
                         {1, 64, 2, 5.65, false, 0},  {1, 192, 1, 4.86, true, 0}};
constexpr int NCFG = (int)(sizeof CFGS / sizeof CFGS[0]);

/* The configuration with the fewest estimated time units: waves of blocks over the SMs
 * times the bytes a block moves per stage ((BM + BN) * 128) over a per-configuration rate
 * (fitted on the device to sdvae_512 and rn50_3x3_64), blocks sharing an SM taking
 * proportionally longer; ties go to the earlier configuration. Checked on the device against
 * every configuration forced in turn (XCONV_WGMMA_CFG): on the 14 suite entries it runs, the
 * pick was the fastest or within the run-to-run spread (~6%) of it. */
int pick_cfg(const xconv_canon *p, bool swap_ok)
{
    const int64_t sms = xconv__cuda_device_sms(p->device_index);
    const int64_t M = p->n * xconv__prod3(p->y_size);
    int best = 0;
    double best_t = 0;
    for (int i = 0; i < NCFG; i++) {
        if (CFGS[i].swap && !swap_ok) continue;
        const int bm = 128 * CFGS[i].mt, bn = CFGS[i].bn;
        const int tp = CFGS[i].swap ? bn : bm, tc = CFGS[i].swap ? bm : bn;
        const int64_t blocks = (M + tp - 1) / tp * ((p->cout_g + tc - 1) / tc) * p->groups;
        const int64_t slots = sms * CFGS[i].per_sm, waves = (blocks + slots - 1) / slots;
        const double rate = waves >= LONG_WAVES && CFGS[i].rate_long > 0 ? CFGS[i].rate_long : CFGS[i].rate;
        const double t = (double)waves * CFGS[i].per_sm * (bm + bn) / rate;
        if (i == 0 || t < best_t) best = i, best_t = t;
    }
    return best;
}

/* Measuring knobs of the TMA kernel's launch (environment, read at each launch; 0: the
 * default): XCONV_WGMMA_EPI (below); XCONV_WGMMA_NST=n stages per block (as many as fit, if fewer);
 * XCONV_WGMMA_BLOCKS=n at most n blocks in a persistent grid (for tests: many tiles per block
 * on small problems). (Tried in the seventh session and dropped: one mbarrier pair per 2 or
 * 3 stages, rn50_3x3_64 0.65-0.83x; tiles numbered column tile first, no change; two y tiles
 * in turn, where they fit beside 3 stages, 1.12x on rn50_1x1_256's 128x128 tiles but those
 * stay slower than its 128x256 tiles, which leave no room for two. Eighth session, dropped:
 * two y tiles in turn with the per-warpgroup hand-over, 113.7 -> 116.8 on those 128x128 tiles,
 * still under 128x256's 123; x of a 1x1 conv by a tiled 2-d map instead of im2col mode: no
 * change on 128x256 tiles, 0.94x on the swapped ones; 16-bit y by stmatrix in the normal
 * orientation, rn50_1x1_256 118 -> 108; y stored evict-first in L2, rn50_1x1_1024 366 -> 337;
 * swapped tiles in clusters of two blocks sharing x's tile by TMA multicast (each loading
 * half, empty barriers arrived on from both blocks), correct but rn50_1x1_1024 360 -> 282,
 * rn50_3x3_256 555 -> 419.) */
struct wgmma_knobs {
    int nst, blocks;
    int resb;  /* XCONV_WGMMA_RESB=0 leaves B out of residence (launch_tma's RB kernel) */
    int trace; /* XCONV_WGMMA_TRACE=1: each TMA launch's tiles and shared-memory layout on
                * stderr (which layouts a test or a bench ran) */
    int band; /* XCONV_WGMMA_BAND: -1 unset (launch_tma picks), else bands of that many m-tiles */
    int epi; /* XCONV_WGMMA_EPI: 0 the default, 1 "consumers" (no store warps), 2 "rows" (the
              * store warps' row copies even where y has a TMA view), 3 "whole" (TMA boxes, but
              * the whole tile handed over at once, not per warpgroup) */
    int short_runs; /* XCONV_WGMMA_SHORT=0 keeps channel runs under 128 bytes off the TMA
                     * kernel (on the cp.async kernel, taps packed into its blocks) */
    int pack;       /* XCONV_WGMMA_PACK=0: the TMA kernel's 64-byte runs one tap per stage */
    int tpk;        /* XCONV_WGMMA_TPK=1: the cp.async kernel's short runs one tap per block */
};
wgmma_knobs knobs_of()
{
    auto num = [](const char *name, int lo, int hi) {
        const char *v = getenv(name);
        const int n = v ? atoi(v) : 0;
        return n >= lo && n <= hi ? n : 0;
    };
    const char *ev = getenv("XCONV_WGMMA_EPI");
    const int epi = !ev                               ? 0
                    : strcmp(ev, "consumers") == 0 ? 1
                    : strcmp(ev, "rows") == 0      ? 2
                    : strcmp(ev, "whole") == 0     ? 3
                                                   : 0;
    const char *bv = getenv("XCONV_WGMMA_BAND"); /* -1 (unset): launch_tma picks */
    auto off = [](const char *name, char c) { /* 0 where the knob starts with c, else 1 */
        const char *v = getenv(name);
        return v && v[0] == c ? 0 : 1;
    };
    return wgmma_knobs{num("XCONV_WGMMA_NST", 3, 16), num("XCONV_WGMMA_BLOCKS", 1, 1 << 20),
                       off("XCONV_WGMMA_RESB", '0'), num("XCONV_WGMMA_TRACE", 1, 1),
                       bv ? num("XCONV_WGMMA_BAND", 0, 1 << 20) : -1, epi,
                       off("XCONV_WGMMA_SHORT", '0'), off("XCONV_WGMMA_PACK", '0'),
                       off("XCONV_WGMMA_TPK", '1')};
}

/* The jobs of ps[0..n) for the TMA kernel with BM x BN tiles: false where a tensor map cannot
 * be made for one of them (or the knobs keep A on cp.async). */
bool make_set(const xconv_canon *ps, int n, const xconv_exec *e, int bm, int bn, tma_set *set,
              bool swap = false, const xconv_tc_views *av = nullptr)
{
    const char *tv = getenv("XCONV_WGMMA_TMA"); /* tuning knob: 0 or 1 keeps A on cp.async */
    if ((tv && (tv[0] == '0' || tv[0] == '1')) || n < 1 || n > MAX_JOBS) return false;
    const wgmma_knobs kn = knobs_of();
    set->count = n;
    set->tiles = 0;
    /* Two taps per stage where a tap's channels are 64 bytes of an 8-bit dtype (one job, one
     * group, several taps): 64-byte boxes in the 64-byte swizzle, so a 3 x 3 conv over 64 i8
     * channels runs 5 stages, not 9 half-empty ones (kn.pack). */
    set->pack = n == 1 && !swap && kn.pack && xconv_dtype_size(ps->x_dtype) == 1 &&
                ps->groups == 1 && ps->cin_g == 64 && xconv__prod3(ps->k_size) > 1;
    const int kb = set->pack ? 64 : BKB;
    for (int i = 0; i < n; i++) {
        tma_job &J = set->job[i];
        /* a tile's positions (x's im2col box) and output channels (w's box) */
        const int tp = swap ? bn : bm, tc = swap ? bm : bn;
        if ((!kn.short_runs && ps[i].cin_g * (int64_t)xconv_dtype_size(ps[i].x_dtype) < BKB) ||
            !xconv__cuda_map_w(&ps[i], e, tc, &J.b, kb) ||
            !xconv__cuda_map_x_im2col(av ? &av->a[i] : &ps[i], e, tp, &J.a, &J.a_rank, &J.flip,
                                      &J.p, kb))
            return false;
        J.kshift = 0;
        if (av) { /* A through its own view; the job's tiling and B are ps[i]'s */
            if (J.flip) return false;
            J.p = ps[i];
            J.kshift = av->kshift[i];
        }
        J.y_vec = xconv__cuda_y_vec(&ps[i], e);
        /* y boxes: a warpgroup's rows (BM / 2 positions), or swapped its 64 channels of all */
        J.y_map = kn.epi != 2 && J.y_vec &&
                  xconv__cuda_map_y(&ps[i], e, swap ? tp : bm / 2, tc, &J.y);
        if (swap && !J.y_map) return false;
        J.tile0 = set->tiles;
        set->tiles += (ps[i].n * xconv__prod3(ps[i].y_size) + tp - 1) / tp *
                      ((ps[i].cout_g + tc - 1) / tc) * ps[i].groups;
    }
    return set->tiles <= INT32_MAX;
}

/* The TMA kernel's launch: each block one tile with the y tile over the stages, or a
 * persistent grid of as many blocks as fit on the SMs at once, each with its own y tile
 * after fewer stages, looping over tiles, the next tile's loads running under this one's
 * epilogue. persist: 1 or 0 forces either (when it fits); -1 picks the persistent grid when
 * there are more tiles than blocks fit at once. Measured in one call, bf16 (TFLOP/s, one
 * block per tile -> persistent): rn50_1x1_256 67 -> 86, rn50_3x3_128 388 -> 447, whisper_c2
 * 423 -> 464, unet_up2d 444 -> 495, encodec_up 471 -> 511, qwenvl_patch 309 -> 333; with no
 * more tiles than blocks, the fewer stages only cost (rn50_1x1_1024, 98 tiles: 325 -> 311).
 * (Before the producer warpgroup, when only nst - 2 stages were loaded ahead, the persistent
 * grid lost up to 30% on long reductions.) False when fewer than 3 stages fit. */
/* Resident B is compiled for the 128 x 256 tiles only (the one-stage 1x1 layers' pick). */
template <int MT, int BN, bool SW> constexpr bool rb_ok() { return !SW && MT == 1 && BN == 256; }
template <kind K, int MT, int BN, bool SW>
auto tma_kernel_for(bool multi, bool rb, bool pack)
{
    if constexpr (SW) {
        return wgmma_tma_kernel<K, MT, BN, false, true, false>;
    } else {
        if constexpr (rb_ok<MT, BN, SW>())
            if (rb) return wgmma_tma_kernel<K, MT, BN, false, false, true>;
        if constexpr (in_bytes<K>() == 1)
            if (pack) return wgmma_tma_kernel<K, MT, BN, false, false, false, true>;
    }
    return multi ? wgmma_tma_kernel<K, MT, BN, true, false, false> : wgmma_tma_kernel<K, MT, BN, false, false, false>;
}
template <kind K, int MT, int BN, bool SW = false>
bool launch_tma(const tma_set &set, const xconv_exec *e, cudaStream_t stream, int persist)
{
    constexpr int BM = 128 * MT, STAGE = (BM + BN) * BKB, STAGES = cfg<MT, BN>::stages;
    constexpr int A_BYTES = BM * BKB;
    const xconv_canon &q = set.job[0].p;
    const int yes = (int)xconv_dtype_size(q.y_dtype);
    const int64_t es = (int64_t)xconv_dtype_size(q.x_dtype);
    const int64_t kt = set.pack ? (xconv__prod3(q.k_size) + 1) / 2
                                : xconv__prod3(q.k_size) * ((q.cin_g * es + BKB - 1) / BKB);
    const int epi = epi_bytes<MT, BN>(yes);
    int limit = 0;
    cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, q.device_index);
    const int room = limit - 2048; /* the mbarriers and the alignment */
    auto kern = tma_kernel_for<K, MT, BN, SW>(set.count > 1, false, set.pack);
    /* the persistent layout and how many of its blocks fit at once */
    tma_smem lay;
    const wgmma_knobs kn = knobs_of();
    lay.own_copy = kn.epi == 1;
    lay.wg_half = kn.epi != 3;
    /* Tiles in bands of 2 m-tiles, column tiles fastest inside, for a 1x1 conv (a GEMM: each
     * tile reads its x rows once, from device memory) over more than one column tile: the
     * tiles that share x rows then run together and the later ones find them in L2. Measured
     * in one call, bf16 TFLOP/s (one band -> bands of 1, 2, 4): qwenvl_patch 344 -> 385, 403,
     * 394, rn50_1x1_1024 341 -> 393, -, 396; on 3x3 layers, whose x stays in L2, bands lost
     * up to 10% (sdvae_256 753 -> 693, 673 at bands of 1 and 4). */
    lay.band = kn.band >= 0 ? kn.band
               : set.count == 1 && xconv__prod3(q.k_size) == 1 &&
                         q.cout_g > tile_dims<BM, BN, SW>::TC
                   ? 2
                   : 0;
    for (int i = 0; i < set.count; i++) { /* the store warps' bulk copies take whole 16-byte rows */
        lay.own_copy |= !set.job[i].y_vec;
        lay.wg_half &= set.job[i].y_map;
    }
    lay.wg_half &= !lay.own_copy;
    if (SW && (!lay.wg_half || set.count != 1)) return false; /* swapped tiles leave by boxes only */
    /* stages: as many as the configuration has (or the knob asks) and fit; where the
     * configuration runs two blocks per SM (64-wide tiles), as many as let two fit:
     * rn50_3x3_64 214 -> 280 TFLOP/s with 3 stages each against 4 stages in one block */
    int want = kn.nst > 0 ? kn.nst : STAGES;
    if (kn.nst == 0 && cfg<MT, BN>::minb == 2) {
        int per_sm = 0;
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, q.device_index);
        const int two = (per_sm / 2 - 1024 /* reserved per block */ - 2048 - epi) / STAGE;
        if (two >= 3 && two < want) want = two;
    }
    lay.nst = (room - epi) / STAGE < want ? (room - epi) / STAGE : want;
    lay.epi = lay.nst * STAGE;
    lay.bars = (lay.epi + epi + 15) / 16 * 16;
    lay.bres = lay.epi2 = 0;
    bool resb = false;
    /* One job whose tiles all read the same B (one group, one column tile) in one stage (a 1x1
     * conv over 128 bytes of channels: rn50_1x1_256, whose 128 x 256 tiles moved 32 KiB
     * of w per 16 KiB of x): B stays resident, the slots hold A only, and the room that frees
     * takes a second y tile, so one tile is filled while the other's stores drain (y is most of
     * the traffic there). Persistent grids only (the y tiles lie apart from the stages). */
    if (rb_ok<MT, BN, SW>() && kn.resb != 0 && !set.pack && set.count == 1 && lay.wg_half && q.groups == 1 &&
        q.cout_g <= BN && kt == 1) {
        const int ytile = wg_half_bytes<BM, BN>(yes);
        const int epi2 = (ytile + 1023) / 1024 * 1024, bbytes = BN * BKB;
        const int nst = (room - bbytes - epi2 - ytile) / A_BYTES;
        if (nst >= 3) {
            resb = true, lay.epi2 = epi2;
            lay.nst = nst < want ? nst : want;
            lay.bres = lay.nst * A_BYTES;
            lay.epi = lay.bres + bbytes;
            lay.bars = (lay.epi + epi2 + ytile + 15) / 16 * 16;
            kern = tma_kernel_for<K, MT, BN, SW>(false, true, false);
        }
    }
    int64_t slots = 0;
    if (lay.nst >= 3 && lay.bars + 2048 <= limit) {
        int per_sm = 0;
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.bars + 2048);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, TMA_THREADS, lay.bars + 2048);
        slots = xconv__cuda_device_sms(q.device_index) * per_sm;
    }
    if (persist < 0) persist = slots > 0 && set.tiles > slots;
    if (persist && slots == 0) return false;
    if (!persist) {
        resb = false, lay.bres = lay.epi2 = 0;
        kern = tma_kernel_for<K, MT, BN, SW>(set.count > 1, false, set.pack);
        lay.nst = kt < 3 ? 3 : kt < STAGES ? (int)kt : STAGES;
        lay.epi = 0;
        lay.bars = lay.nst * STAGE > epi ? lay.nst * STAGE : (epi + 15) / 16 * 16;
        if (lay.bars + 2048 > limit) return false;
    }
    const int smem = lay.bars + 2048;
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    unsigned blocks = (unsigned)(persist && slots < set.tiles ? slots : set.tiles);
    if (persist && kn.blocks > 0 && (unsigned)kn.blocks < blocks) blocks = (unsigned)kn.blocks;
    if (kn.trace)
        fprintf(stderr, "wgmma_tma bm %d bn %d sw %d resb %d pk %d nst %d slot %d bres %d epi %d epi2 %d bars %d blocks %u tiles %lld\n",
                BM, BN, (int)SW, (int)resb, (int)set.pack, lay.nst, resb ? A_BYTES : STAGE, lay.bres, lay.epi, lay.epi2, lay.bars, blocks,
                (long long)set.tiles);
    kern<<<blocks, TMA_THREADS, smem, stream>>>(set, (const char *)e->bias, (char *)e->y, yes, lay);
    return true;
}

/* tuning knob: XCONV_WGMMA_PERSIST=0 gives the TMA kernel one block per tile, =1 a persistent
 * grid; -1 (unset): launch_tma picks */
int persist_knob()
{
    const char *pv = getenv("XCONV_WGMMA_PERSIST");
    return pv && pv[0] == '1' ? 1 : pv && pv[0] == '0' ? 0 : -1;
}

/* ps[0..n) in BM x BN tiles: one launch of the TMA kernel where it takes them all, else (n ==
 * 1 only) the cp.async kernel. False when nothing was launched. */
template <kind K, int MT, int BN>
bool launch_cfg(const xconv_canon *ps, int n, const xconv_exec *e, cudaStream_t stream,
                const xconv_tc_views *av = nullptr)
{
    tma_set set;
    if (make_set(ps, n, e, 128 * MT, BN, &set, false, av)) {
        const int persist = persist_knob();
        if (launch_tma<K, MT, BN>(set, e, stream, persist) ||
            launch_tma<K, MT, BN>(set, e, stream, 0))
            return true;
    }
    if (n != 1 || av) return false; /* (the cp.async kernel reads A through ps's view only) */
    const xconv_canon *p = ps;
    const int es = (int)xconv_dtype_size(p->x_dtype), yes = (int)xconv_dtype_size(p->y_dtype);
    const int64_t kvol = xconv__prod3(p->k_size), cbytes = p->cin_g * es;
    /* taps packed into 128-byte blocks where a tap's channels are 64, 32 or 16 bytes */
    const int tpk = kvol > 1 && (cbytes == 64 || cbytes == 32 || cbytes == 16) && knobs_of().tpk
                        ? (int)(BKB / cbytes) : 1;
    const int64_t kt = tpk > 1 ? (kvol + tpk - 1) / tpk : kvol * ((cbytes + BKB - 1) / BKB);
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    const char *tv = getenv("XCONV_WGMMA_TMA"); /* tuning knob: 0 loads B by cp.async too */
    const bool tma_b = tpk == 1 && !(tv && tv[0] == '0') && xconv__cuda_map_w(p, e, BN, &map);
    const dim3 grid((unsigned)((p->n * xconv__prod3(p->y_size) + 128 * MT - 1) / (128 * MT)),
                    (unsigned)((p->cout_g + BN - 1) / BN), (unsigned)p->groups);
    const int smem = smem_bytes<MT, BN>((int)kt);
    auto kern = tpk == 2   ? wgmma_kernel<K, MT, BN, false, 2>
                : tpk == 4 ? wgmma_kernel<K, MT, BN, false, 4>
                : tpk == 8 ? wgmma_kernel<K, MT, BN, false, 8>
                : tma_b    ? wgmma_kernel<K, MT, BN, true>
                           : wgmma_kernel<K, MT, BN, false>;
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    kern<<<grid, THREADS, smem, stream>>>(*p, (const char *)e->x, (const char *)e->w,
                                          (const char *)e->bias, (char *)e->y, yes,
                                          xconv__cuda_y_vec(p, e), map);
    return true;
}

template <kind K>
bool launch(const xconv_canon *ps, int n, const xconv_exec *e, cudaStream_t stream, int c,
            const xconv_tc_views *av)
{
    switch (c) {
    case 0: return launch_cfg<K, 1, 256>(ps, n, e, stream, av);
    case 1: return launch_cfg<K, 2, 128>(ps, n, e, stream, av);
    case 2: return launch_cfg<K, 1, 192>(ps, n, e, stream, av);
    case 3: return launch_cfg<K, 1, 160>(ps, n, e, stream, av);
    case 4: return launch_cfg<K, 1, 128>(ps, n, e, stream, av);
    case 5: return launch_cfg<K, 2, 64>(ps, n, e, stream, av);
    case 6: return launch_cfg<K, 1, 64>(ps, n, e, stream, av);
    default: /* swapped 128 x 192 tiles, else the plain 128 x 192 */
        if constexpr (K == kind::bf16 || K == kind::f16) {
            tma_set set;
            const int persist = persist_knob();
            if (n == 1 && !av && make_set(ps, 1, e, 128, 192, &set, true) &&
                (launch_tma<K, 1, 192, true>(set, e, stream, persist) ||
                 launch_tma<K, 1, 192, true>(set, e, stream, 0)))
                return true;
        }
        return launch_cfg<K, 1, 192>(ps, n, e, stream, av);
    }
}

bool wgmma_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.igemm_wgmma runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV) return *why_not = "cuda.igemm_wgmma runs conv only", false;
    return xconv__cuda_wgmma_fits(p, why_not);
}

size_t wgmma_workspace_bytes(const xconv_canon *) { return 0; }

/* Below cuda.igemm_tc's 16-byte loader (0.02 flops) and cuda.patch_tc (0.015); fp8 (only
 * with allow_fp8_fast_accum) at twice the bf16 rate, below cuda.f8_bf16 (0.012 and its
 * copies). */
double wgmma_cost(const xconv_canon *p)
{
    const bool fp8 = p->x_dtype == XCONV_DTYPE_F8E4M3 || p->x_dtype == XCONV_DTYPE_F8E5M2;
    return (fp8 ? 0.005 : 0.01) * p->flops + 2e4;
}

xconv_status wgmma_run(const xconv_exec *e, xconv_error *err)
{
    return xconv__cuda_run(e, "cuda.igemm_wgmma", err,
                           [&](cudaStream_t st) { xconv__cuda_tc_launch(e->p, e, st); });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_igemm_wgmma = {
    "cuda.igemm_wgmma",    XCONV_DEVICE_CUDA, wgmma_supports,
    wgmma_workspace_bytes, wgmma_cost,        wgmma_run,
    nullptr /* no prepack */, nullptr, nullptr,
};

/* Whether the wgmma kernel runs p (a canonical conv, maybe rewritten by another engine):
 * cuda.igemm_tc's 16-byte loader conditions, bf16 / f16 / i8 / u8 inputs, or fp8 where the
 * plan allows the tensor cores' fp8 accumulation (p->fp8_fast: the engines that run their
 * rewritten problems here, cuda.cf_tc, cuda.deconv_tc, cuda.patch_tc, then take it too), a
 * device of compute capability 9.0 (the sm_90a code). */
bool xconv__cuda_wgmma_fits(const xconv_canon *p, const char **why_not)
{
    const xconv_dtype d = p->x_dtype;
    const bool fp8 = d == XCONV_DTYPE_F8E4M3 || d == XCONV_DTYPE_F8E5M2;
    if (fp8 && !p->fp8_fast)
        return *why_not = "cuda.igemm_wgmma sums fp8 in the tensor cores' fp8 accumulation, "
                          "fewer bits than f32: it runs fp8 only when the plan allows it "
                          "(xconv_plan_options.allow_fp8_fast_accum)",
               false;
    if (d != XCONV_DTYPE_BF16 && d != XCONV_DTYPE_F16 && d != XCONV_DTYPE_I8 &&
        d != XCONV_DTYPE_U8 && !fp8)
        return *why_not = "cuda.igemm_wgmma takes bf16, f16, i8, u8 and (with "
                          "allow_fp8_fast_accum) f8e4m3 and f8e5m2 inputs",
               false;
    if (!xconv__cuda_igemm_fast_why(p, why_not)) return false;
    if ((p->cout_g + 63) / 64 > 65535 || (p->n * xconv__prod3(p->y_size) + 127) / 128 > INT32_MAX)
        return *why_not = "cuda.igemm_wgmma: too many output channels for the grid", false;
    if (xconv__cuda_device_cc(p->device_index) != 90)
        return *why_not = "cuda.igemm_wgmma needs a gpu of compute capability 9.0 (sm_90a)",
               false;
    return true;
}

bool xconv__cuda_tc_launch_set(const xconv_canon *ps, int n, const xconv_exec *e,
                               cudaStream_t stream, const xconv_tc_views *av)
{
    const char *why;
    if (n < 1 || n > MAX_JOBS || !xconv__cuda_igemm_ptrs_ok(e, ps)) return false;
    for (int i = 0; i < n; i++)
        if (!xconv__cuda_wgmma_fits(&ps[i], &why)) return false;
    /* swapped tiles: one problem of 16-bit floats into 16-bit floats, whole channel tiles */
    const bool swap_ok = n == 1 && !av && (ps->x_dtype == XCONV_DTYPE_BF16 || ps->x_dtype == XCONV_DTYPE_F16) &&
                         (ps->y_dtype == XCONV_DTYPE_BF16 || ps->y_dtype == XCONV_DTYPE_F16) &&
                         (ps->groups == 1 || ps->cout_g % 128 == 0);
    int c = pick_cfg(ps, swap_ok);
    /* tuning knob: XCONV_WGMMA_CFG=0..7 forces a configuration (an index of CFGS) */
    if (const char *f = getenv("XCONV_WGMMA_CFG"))
        if (f[0] >= '0' && f[0] < '0' + NCFG && f[1] == 0) c = f[0] - '0';
    /* a forced swapped configuration where swapped tiles cannot run (y of 4 bytes: they store
     * 16-bit pairs; test_gpu's fp8 problems through cuda.f8_bf16's f32 y found it) runs the
     * plain 128 x 192 tiles */
    if (CFGS[c].swap && !swap_ok) c = 2;
    switch (ps->x_dtype) {
    case XCONV_DTYPE_BF16: return launch<kind::bf16>(ps, n, e, stream, c, av);
    case XCONV_DTYPE_F16: return launch<kind::f16>(ps, n, e, stream, c, av);
    case XCONV_DTYPE_I8: return launch<kind::s8>(ps, n, e, stream, c, av);
    case XCONV_DTYPE_U8: return launch<kind::u8>(ps, n, e, stream, c, av);
    case XCONV_DTYPE_F8E4M3: return launch<kind::e4m3>(ps, n, e, stream, c, av);
    case XCONV_DTYPE_F8E5M2: return launch<kind::e5m2>(ps, n, e, stream, c, av);
    default: return false;
    }
}

/* p on the tensor cores: the wgmma kernels where they fit and the pointers are 16-byte
 * aligned, else cuda.igemm_tc's kernel (which picks its loader). */
void xconv__cuda_tc_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream)
{
    if (!xconv__cuda_tc_launch_set(p, 1, e, stream)) xconv__cuda_igemm_launch(p, e, stream);
}
