/*
 * depthwise_rows.cuh — cuda.depthwise's dw_rows (depthwise.cu, its one includer; hence the
 * anonymous namespace): channels-last bf16 / f16 / f32 depthwise convs (multiplier 1) whose
 * rows of x are dense (a row: all of dim 2's positions, all channels, one contiguous run of
 * bytes). A block walks a band of output rows of one plane, in a strip of output columns;
 * the strip's input columns of each row the band needs (a contiguous run of bytes) are brought
 * into a ring of shared-memory slots by one bulk copy (the copy engine, one thread issuing
 * it), `depth` output rows ahead of the first that reads them, while the threads sum outputs
 * from the slots. So the threads issue no global loads at all: dw_slide, whose threads load
 * 16 bytes a tap, reached about 60% of the copy rate on 16-bit rows (a run of outputs keeps
 * only one row of its window in flight in its registers).
 */
#ifndef XCONV_CUDA_DEPTHWISE_ROWS_CUH
#define XCONV_CUDA_DEPTHWISE_ROWS_CUH

#include "cuda/depthwise_cl16.cuh"
#include "cuda/mbarrier.cuh"

namespace {

constexpr int ROWS_THREADS = 256;
constexpr int ROWS_MAX_K1 = 8; /* window rows (dim 1) */

/* A dw_rows launch: the slots (the window's rows and those of the next `depth` output rows),
 * the strips and bands of outputs, and the shared memory's parts. */
struct rows_geom {
    int ring;          /* slots: k1 + depth * stride1 rows of x */
    int depth;         /* output rows whose new input rows are copied ahead */
    int strip;         /* output columns per strip (a strip's input columns fill a slot) */
    int strips;        /* strips per output row */
    int band;          /* output rows per band (the last band of a plane maybe fewer) */
    int planes_bands;  /* bands per plane of outputs (dim 0 and image fixed) */
    int bands;         /* n * y0 * planes_bands * strips */
    int pitch;         /* a slot: a strip's input columns, rounded up to 128 bytes */
    int bars;          /* offset of the slots' mbarriers (after the weights and bias) */
    int slots;         /* offset of the first slot (128-aligned) */
    int fence;         /* a proxy fence before the copies into slots the threads read */
};

/* Sums bias first, then taps in (k1, k2) order (k0's window is 1 wide), a column or row
 * outside x read as zeros whose products join the sum (0 * Inf is NaN, as in cpu.ref). KS = 3:
 * a 3 x 3 window compiled in, its weights in registers; 0: any window. */
template <xconv_dtype D, int YB, int KS>
__global__ void __launch_bounds__(ROWS_THREADS, 2)
dw_rows(const xconv_canon p, const rows_geom g, const char *__restrict__ x,
        const char *__restrict__ w, const char *__restrict__ bias, char *__restrict__ y)
{
#if XCONV_MBARRIER_ARCH
    using VT = vec_traits<D>;
    constexpr int V = VT::V, ES = 16 / V;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int C = (int)p.cin, CV = C / V;
    const int K1 = KS ? KS : (int)p.k_size[1], K2 = KS ? KS : (int)p.k_size[2];
    float *wk = (float *)smem_raw; /* [tap][channel], then the bias as a last tap */
    const uint32_t bars = smem_addr(smem_raw + g.bars);
    unsigned char *slots = smem_raw + g.slots;
    for (int i = threadIdx.x; i < K1 * K2 * C; i += ROWS_THREADS) {
        const int tap = i / C, c = i - tap * C, k1 = tap / K2, k2 = tap - k1 * K2;
        wk[i] = load_f32(p.x_dtype, w, p.w_off + c * p.w_sg + k1 * p.w_sk[1] + k2 * p.w_sk[2]);
    }
    for (int c = threadIdx.x; c < C; c += ROWS_THREADS)
        wk[K1 * K2 * C + c] = bias ? load_f32(p.bias_dtype, bias, p.b_off + c * p.b_s) : 0.0f;
    if (threadIdx.x == 0) {
        for (int s = 0; s < g.ring; s++) mbar_init(bars + 8 * s, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const int S1 = (int)p.stride[1], P1 = (int)p.pad_lo[1], X1 = (int)p.x_size[1];
    const int S2 = (int)p.stride[2], P2 = (int)p.pad_lo[2], X2 = (int)p.x_size[2];
    const int Y1 = (int)p.y_size[1], Y2 = (int)p.y_size[2], Y0 = (int)p.y_size[0];
    /* thread t sums channel vector t % CV of every (t / CV)-th output of a row (the threads
     * past the last whole set idle): its weights (3 x 3: in registers) and bias stay put */
    const int per = ROWS_THREADS / CV, cv = threadIdx.x % CV, o0 = threadIdx.x / CV;
    float bv[V], wr[KS == 3 ? 9 : 1][V];
#pragma unroll
    for (int v = 0; v < V; v++) bv[v] = wk[K1 * K2 * C + cv * V + v];
    if constexpr (KS == 3)
#pragma unroll
        for (int t = 0; t < 9; t++)
#pragma unroll
            for (int v = 0; v < V; v++) wr[t][v] = wk[t * C + cv * V + v];
    /* bit s of `next`: the parity of the next copy into slot s; of `want`: that of the last
     * one issued (what a wait on the slot's barrier asks for). Every thread keeps both, as
     * all see the same copies; thread 0 issues them. */
    uint32_t next = 0, want = 0;
    for (int b = blockIdx.x; b < g.bands; b += gridDim.x) {
        /* band b: strip si of output columns (fastest: neighbouring strips share their edge
         * columns in L2), output rows [j1_0, j1_end) of one plane (image n, dim-0 index j0) */
        const int si = b % g.strips, t = b / g.strips, plane = t / g.planes_bands;
        const int j1_0 = (t - plane * g.planes_bands) * g.band;
        const int j1_end = j1_0 + g.band < Y1 ? j1_0 + g.band : Y1;
        const int n = plane / Y0, j0 = plane - n * Y0;
        const int ow_lo = si * g.strip, ow_hi = ow_lo + g.strip < Y2 ? ow_lo + g.strip : Y2;
        /* the strip's input columns inside x: [c_lo, c_hi), one contiguous run of each row */
        const int c_lo = ow_lo * S2 - P2 > 0 ? ow_lo * S2 - P2 : 0;
        const int c_end = (ow_hi - 1) * S2 - P2 + K2, c_hi = c_end < X2 ? c_end : X2;
        const int seg = c_hi > c_lo ? (c_hi - c_lo) * C * ES : 0;
        const char *xp = x + (p.x_off + n * p.x_sn + j0 * p.stride[0] * p.x_ss[0] + (int64_t)c_lo * C) * ES;
        char *yp = y + (p.y_off + n * p.y_sn + j0 * p.y_ss[0]) * YB;
        /* row r of x (maybe outside it: never copied, read as zeros) lies in slot (r + P1) %
         * ring; a row is copied `depth` output rows before the first that reads it, into the
         * slot of a row no output row from this one on reads (ring = K1 + depth S1) */
        auto issue = [&](int r) {
            if (r < 0 || r >= X1 || seg == 0) return;
            const int s = (r + P1) % g.ring;
            want = (want & ~(1u << s)) | (next & (1u << s));
            next ^= 1u << s;
            if (threadIdx.x == 0) {
                mbar_expect(bars + 8 * s, seg);
                bulk_load(smem_addr(slots + s * g.pitch), xp + (int64_t)r * p.x_ss[1] * ES, seg, bars + 8 * s);
            }
        };
        const int rows_end = (j1_end - 1) * S1 - P1 + K1; /* past the band's last row */
        int issued = j1_0 * S1 - P1;
        for (int j1 = j1_0; j1 < j1_end; j1++) {
            const int base = j1 * S1 - P1, ahead = base + g.depth * S1 + K1;
            for (; issued < (ahead < rows_end ? ahead : rows_end); issued++) issue(issued);
            for (int k1 = 0; k1 < K1; k1++) {
                const int r = base + k1;
                if (r >= 0 && r < X1 && seg) {
                    const int s = (r + P1) % g.ring;
                    mbar_wait(bars + 8 * s, (want >> s) & 1);
                }
            }
            /* each window row's slot (a row outside x: -1, read as zeros) */
            int soff[KS ? KS : ROWS_MAX_K1];
#pragma unroll
            for (int k1 = 0; k1 < (KS ? KS : ROWS_MAX_K1); k1++) {
                const int r = base + k1;
                soff[k1] = k1 < K1 && r >= 0 && r < X1 ? (r + P1) % g.ring * g.pitch : -1;
            }
            for (int ow = ow_lo + o0; o0 < per && ow < ow_hi; ow += per) {
                float acc[V];
#pragma unroll
                for (int v = 0; v < V; v++) acc[v] = bv[v];
#pragma unroll(KS ? KS : 1)
                for (int k1 = 0; k1 < K1; k1++) {
                    const unsigned char *row = slots + (soff[k1] < 0 ? 0 : soff[k1]);
#pragma unroll(KS ? KS : 1)
                    for (int k2 = 0; k2 < K2; k2++) {
                        const int col = ow * S2 + k2 - P2;
                        const uint4 xv = soff[k1] >= 0 && col >= 0 && col < X2
                                             ? *(const uint4 *)(row + ((col - c_lo) * C + cv * V) * ES)
                                             : make_uint4(0, 0, 0, 0);
                        if constexpr (KS == 3) vec_mac<D>(acc, xv, wr[k1 * 3 + k2]);
                        else vec_mac<D>(acc, xv, wk + (k1 * K2 + k2) * C + cv * V);
                    }
                }
                vec_store<D, YB>(yp + ((int64_t)j1 * p.y_ss[1] + (int64_t)ow * p.y_ss[2] + cv * V) * YB,
                                 acc);
            }
            __syncthreads(); /* the slots this row read may be copied into again */
            if (g.fence && threadIdx.x == 0) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
    }
#else
    (void)p, (void)g, (void)x, (void)w, (void)bias, (void)y;
    __trap(); /* never launched: rows_ok asks for compute capability 9.0 */
#endif
}

} /* namespace */

#endif /* XCONV_CUDA_DEPTHWISE_ROWS_CUH */
