/*
 * fold.cu — "cuda.fold_tc": convs with few input channels (rn50's first layer: 3) on the
 * tensor cores. Their channel runs are shorter than the 16 bytes the fast loaders take, so
 * cuda.igemm_tc falls back to element loads (22 TFLOP/s on rn50_conv1). This engine folds the
 * innermost kernel dim, and P taps of the next one, into the channels, in the workspace:
 *
 *   x'[n, a0, r, j2, (p, k2, c)] = x[n, c, a0, r + p*t1 - lo1, j2*s2 + k2*t2 - lo2]
 *                                                     (0 outside x)
 *   w'[o, k0, u, (p, k2, c)]     = w[o, c, k0, u*P + p, k2]     (0 for u*P + p >= K1)
 *
 * channels-last, (p, k2, c) padded with zeros to a multiple of 16 bytes, and runs the conv over
 * dims 0 and 1 (kernel K0 x ceil(K1 / P) x 1; dim 1 at stride s1, dilation P*t1 and no
 * padding: x' holds the rows r = 0 .. (Y1 - 1) s1 + (ceil(K1 / P) - 1) P t1 that the windows
 * read) on the tensor-core kernels (cuda.igemm_wgmma's where it fits, else cuda.igemm_tc's
 * 16-byte loader). The products per output are the same terms, plus zeros; y is written in
 * place. P is the fold with the fewest 128-byte K stages (the kernels' unit): rn50_conv1's
 * 21 folded channels (48 bytes with padding) took a whole stage per tap, 7 per output tile;
 * with P = 3, 63 channels fill 3 stages of 128 bytes (x' is 2.7x larger).
 *
 * The overlapping fold ("spread", bf16 / f16 / i8 / u8, where it costs less): x' holds each
 * pixel only once, as S slots (R rows of x at that column, each of cs >= cin channels, zero
 * padded), and the folded conv reads a 128-byte run of x' per tap: the L = 128 / (S es)
 * consecutive x' pixels from the window's first column, i.e. pixels that overlap those of the
 * next output (x''s pixel stride times the conv stride is the folded conv's pixel stride,
 * less than its 128 bytes of channels). The weights of slots outside the window are zero:
 *
 *   x'[n, a0, v, pp, (j, c)] = x[n, c, a0, v - lo1 + j*t1, pp - lo2]      (0 outside x, c >= cin)
 *   w'[o, k0, u, (i, j, c)]   = w[o, c, k0, u*R + j, i / t2]   (0 unless i % t2 == 0, i / t2 < K2,
 *                                                                u*R + j < K1, c < cin)
 *
 * rn50_conv1 (3 channels, 7 x 7 at stride 2, 16-bit): cs 4, R 2, 8 pixels per run, 4 stages
 * per output against P = 3's 3, but x' is 54 MB written once instead of 210 MB written and
 * read back. A slot outside the window multiplies a real value of x by zero: with an Inf or
 * NaN anywhere in x that would make NaN where cpu.ref has none, so the spread kernel flags
 * non-finite floats and cuda.generic's kernel, launched behind it, recomputes y when the flag
 * is set (and returns at once when it is not).
 */
#include "cuda/common.cuh"

#include <stdlib.h>
#include <string.h>

namespace {

struct fold_layout {
    xconv_canon q;
    int64_t     kc, cpad;   /* folded channels (P * K2 * Cin) and their padded count */
    int64_t     rows;       /* P: taps of dim 1 per folded tap */
    size_t      x_bytes, w_bytes;
};

/* The fold with P taps of dim 1 per folded tap. */
fold_layout layout_with(const xconv_canon *p, int64_t P)
{
    fold_layout l;
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype), per16 = 16 / es;
    l.rows = P;
    l.kc = P * p->k_size[2] * p->cin;
    l.cpad = (l.kc + per16 - 1) / per16 * per16;
    l.q = *p;
    xconv_canon &q = l.q;
    q.cin = q.cin_g = l.cpad;
    q.x_size[2] = p->y_size[2];
    q.k_size[2] = 1, q.stride[2] = 1, q.dil[2] = 1, q.pad_lo[2] = q.pad_hi[2] = 0;
    if (P > 1) {
        q.k_size[1] = (p->k_size[1] + P - 1) / P;
        q.dil[1] = P * p->dil[1];
        q.pad_lo[1] = q.pad_hi[1] = 0;
        q.x_size[1] = (p->y_size[1] - 1) * p->stride[1] + (q.k_size[1] - 1) * q.dil[1] + 1;
    }
    q.x_off = 0, q.x_sc = 1;
    xconv__cuda_dense_strides(q.x_size, l.cpad, q.x_ss);
    q.x_sn = p->n > 1 ? xconv__prod3(q.x_size) * l.cpad : 0;
    q.w_off = 0, q.w_si = 1, q.w_sg = 0;
    xconv__cuda_dense_strides(q.k_size, l.cpad, q.w_sk);
    q.w_so = xconv__prod3(q.k_size) * l.cpad;
    l.x_bytes = xconv__cuda_align256((size_t)(p->n * xconv__prod3(q.x_size) * l.cpad * es));
    l.w_bytes = xconv__cuda_align256((size_t)(p->cout * xconv__prod3(q.k_size) * l.cpad * es));
    return l;
}

/* 128-byte K stages per output tile of a fold. */
int64_t stages_of(const fold_layout &l, int64_t es)
{
    return xconv__prod3(l.q.k_size) * ((l.cpad * es + 127) / 128);
}

/* P: the fewest stages, then the smallest x' (the smallest P), among P = 1 and, for 2-byte
 * x, the folds whose pixels are whole 128-byte blocks (the TMA im2col loads). Measured on
 * rn50_conv1: bf16/f16 P = 3 68 TFLOP/s against 38 at P = 1; i8 P = 1 51 TOP/s against 44 at
 * P = 6 (128 bytes, 4x the x' of P = 1) and 24 at P = 4 (96 bytes, cp.async loads).
 * Measuring knob: XCONV_FOLD_ROWS=n forces P = n (at most K1). */
fold_layout layout_of(const xconv_canon *p)
{
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype);
    if (const char *v = getenv("XCONV_FOLD_ROWS"))
        if (atoi(v) >= 1) return layout_with(p, atoi(v) < p->k_size[1] ? atoi(v) : p->k_size[1]);
    fold_layout best = layout_with(p, 1);
    for (int64_t P = 2; es == 2 && P <= p->k_size[1] && P <= 16; P++) {
        const fold_layout l = layout_with(p, P);
        if ((l.cpad * es) % 128 == 0 && stages_of(l, es) < stages_of(best, es)) best = l;
    }
    return best;
}

/* Where value f = (u, k2, c) of a folded pixel comes from, relative to the pixel's own
 * corner (row r, column j2 s2): x rows + du, columns + dk, element offset off; past kc, du
 * puts it outside x (a zero). */
struct fold_tap {
    int64_t off;
    int du, dk;
};

/* x' by warps: a warp takes 32 folded pixels (n, a0, r, j2) of x' (xs1: x''s rows), each
 * lane finds one pixel's corner, then the warp writes the pixels' cpad / PER 16-byte chunks
 * in order, lane by lane (512 contiguous bytes per store), each value's source from a
 * per-block table (dynamic shared memory, cpad entries). (A thread per pixel writing its own
 * chunks, 128 bytes apart across the warp, ran rn50_conv1's fold in 400 us at 23% of the
 * DRAM rate; a thread per chunk dividing f into (u, k2, c) per value was instruction-bound.) */
template <typename T>
__global__ void fold_x(const xconv_canon p, const T *x, T *xo, int cpad, int P, int64_t xs1,
                       int64_t pixels)
{
    extern __shared__ fold_tap tab[];
    const int cin = (int)p.cin, per_row = (int)p.k_size[2] * cin, kc = P * per_row;
    for (int f = threadIdx.x; f < cpad; f += blockDim.x) {
        const int u = f / per_row, k2 = f % per_row / cin, c = f % cin;
        /* with P == 1, x' keeps x's rows (dim 1 not folded) */
        const int du = f >= kc ? -(1 << 30) : P == 1 ? 0 : (int)(u * p.dil[1] - p.pad_lo[1]);
        const int dk = (int)(k2 * p.dil[2] - p.pad_lo[2]);
        tab[f] = fold_tap{du * p.x_ss[1] + dk * p.x_ss[2] + c * p.x_sc, du, dk};
    }
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int64_t pix0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) - lane;
    if (pix0 >= pixels) return;
    /* this lane's pixel's corner: its element offset in x, row and first column */
    int64_t t = pix0 + lane < pixels ? pix0 + lane : pix0;
    const int64_t j2 = t % p.y_size[2];
    t /= p.y_size[2];
    const int64_t r = t % xs1;
    t /= xs1;
    const int64_t a0 = t % p.x_size[0], n = t / p.x_size[0];
    const int c2 = (int)(j2 * p.stride[2]);
    const int64_t base = p.x_off + n * p.x_sn + a0 * p.x_ss[0] + r * p.x_ss[1] + c2 * p.x_ss[2];
    const int rr = (int)r;
    const uint32_t X1 = (uint32_t)p.x_size[1], X2 = (uint32_t)p.x_size[2];
    constexpr int PER = 16 / sizeof(T);
    const int cpp = cpad / PER; /* chunks per pixel */
    const int npix = pixels - pix0 < 32 ? (int)(pixels - pix0) : 32;
    uint4 *out = (uint4 *)(xo + pix0 * cpad);
    /* chunk k of the warp's pixels: its value i's source from taps(i) */
    auto chunk_at = [&](int k, int64_t b, int pr, int pc, auto taps) {
        union { uint4 v; T e[PER]; } chunk;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const fold_tap tp = taps(i);
            const bool in = (uint32_t)(pr + tp.du) < X1 && (uint32_t)(pc + tp.dk) < X2;
            chunk.e[i] = in ? x[b + tp.off] : T(0);
        }
        out[k] = chunk.v;
    };
    /* With cpp dividing 32 a lane's chunk index q never changes: its PER taps stay in
     * registers (ncu: the per-value table reads held L1 at 99% and the fold at 9% of the DRAM
     * rate). */
    const bool fixed_q = 32 % cpp == 0;
    fold_tap mine[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) mine[i] = tab[fixed_q ? lane % cpp * PER + i : i];
    for (int k0 = 0; k0 < npix * cpp; k0 += 32) { /* the whole warp, for the shuffles */
        const int k = k0 + lane < npix * cpp ? k0 + lane : k0;
        const int pl = k / cpp, q = k - pl * cpp;
        const int64_t b = __shfl_sync(0xffffffffu, base, pl);
        const int pr = __shfl_sync(0xffffffffu, rr, pl), pc = __shfl_sync(0xffffffffu, c2, pl);
        if (k != k0 + lane) continue;
        if (fixed_q)
            chunk_at(k, b, pr, pc, [&](int i) { return mine[i]; });
        else
            chunk_at(k, b, pr, pc, [&](int i) { return tab[q * PER + i]; });
    }
}

/* w'[o, k0, u, f] for f = (p, k2, c) < kc: w[o, c, k0, u P + p, k2], zero past K1 and kc;
 * kq1: w' taps along dim 1. */
template <typename T>
__global__ void fold_w(const xconv_canon p, const T *w, T *wo, int64_t kc, int64_t cpad, int P,
                       int64_t kq1, int64_t total)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t f = e % cpad, u = e / cpad % kq1, k0 = e / (cpad * kq1) % p.k_size[0];
    const int64_t o = e / (cpad * kq1 * p.k_size[0]);
    T v = 0;
    const int64_t per_row = p.k_size[2] * p.cin;
    const int64_t k1 = u * P + f / per_row;
    if (f < kc && k1 < p.k_size[1]) {
        const int64_t k2 = f % per_row / p.cin, c = f % p.cin;
        v = w[p.w_off + o * p.w_so + c * p.w_si + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]];
    }
    wo[e] = v;
}

/* The overlapping fold: S slots per x' pixel (S es = 16, 32 or 64 bytes), R rows of cs
 * channels each; L pixels per 128-byte run. */
struct spread_layout {
    xconv_canon q;
    int64_t cs, R, S, L, V, Wp; /* V x' rows, Wp x' pixels per row */
    size_t x_bytes, w_bytes, flag_off;
    bool ok;
};

spread_layout spread_with(const xconv_canon *p, int64_t S)
{
    spread_layout l;
    memset(&l, 0, sizeof l);
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype), run = 128 / es;
    l.S = S, l.L = run / S;
    if (l.L < (p->k_size[2] - 1) * p->dil[2] + 1) return l;
    int64_t cs = 1;
    while (cs < p->cin) cs *= 2;
    if (cs > S) return l;
    l.R = 1;
    while (2 * l.R <= S / cs && 2 * l.R <= p->k_size[1]) l.R *= 2;
    l.cs = S / l.R;
    const int64_t K1 = (p->k_size[1] + l.R - 1) / l.R;
    l.V = (p->y_size[1] - 1) * p->stride[1] + (K1 - 1) * l.R * p->dil[1] + 1;
    l.Wp = (p->y_size[2] - 1) * p->stride[2] + l.L;
    xconv_canon &q = l.q;
    q = *p;
    q.cin = q.cin_g = run;
    q.x_off = 0, q.x_sc = 1;
    q.x_size[1] = l.V, q.k_size[1] = K1, q.dil[1] = l.R * p->dil[1];
    q.pad_lo[1] = q.pad_hi[1] = 0;
    q.x_size[2] = p->y_size[2], q.k_size[2] = 1, q.stride[2] = 1, q.dil[2] = 1;
    q.pad_lo[2] = q.pad_hi[2] = 0;
    q.x_ss[2] = p->y_size[2] > 1 ? p->stride[2] * S : 0; /* overlapping pixels */
    q.x_ss[1] = l.V > 1 ? l.Wp * S : 0;
    q.x_ss[0] = p->x_size[0] > 1 ? l.V * l.Wp * S : 0;
    q.x_sn = p->n > 1 ? p->x_size[0] * l.V * l.Wp * S : 0;
    q.w_off = 0, q.w_si = 1, q.w_sg = 0;
    xconv__cuda_dense_strides(q.k_size, run, q.w_sk);
    q.w_so = xconv__prod3(q.k_size) * run;
    l.x_bytes = xconv__cuda_align256((size_t)(p->n * p->x_size[0] * l.V * l.Wp * S * es));
    l.w_bytes = xconv__cuda_align256((size_t)(p->cout * xconv__prod3(q.k_size) * run * es));
    l.flag_off = l.x_bytes + l.w_bytes;
    l.ok = p->n * p->x_size[0] * l.V <= INT32_MAX; /* spread_x's 32-bit row split */
    return l;
}

/* The spread with the fewest stages (then the fewest slots), where one applies: wgmma's
 * dtypes (the folded conv must run on it to pay), 2-D-or-less windows in dims 1 and 2. */
spread_layout spread_of(const xconv_canon *p)
{
    spread_layout best;
    memset(&best, 0, sizeof best);
    const xconv_dtype d = p->x_dtype;
    if (d != XCONV_DTYPE_BF16 && d != XCONV_DTYPE_F16 && d != XCONV_DTYPE_I8 && d != XCONV_DTYPE_U8)
        return best;
    const int64_t es = (int64_t)xconv_dtype_size(d);
    for (int64_t bytes = 16; bytes <= 64; bytes *= 2) {
        const spread_layout l = spread_with(p, bytes / es);
        if (l.ok && (!best.ok || xconv__prod3(l.q.k_size) < xconv__prod3(best.q.k_size))) best = l;
    }
    return best;
}

/* x' of the spread: a block per x' row (n, a0, v) at a time (grid.y, striding), a thread per
 * pixel pp of it, its S slots (SE bytes) in one go. Slot i's offset in x from the pixel's
 * column (row i >> lcs at dilation t1, channel i & (cs - 1); -1 outside x or past cin) is the
 * same for the whole row: the block's first threads put the S offsets in shared memory, so a
 * slot costs a broadcast read, a compare and a load. A non-finite float read sets *flag (FK:
 * 1 bf16, 2 f16, 0 integers). (Each thread splitting its pixel index and computing the 64-bit
 * offsets of every slot was instruction-bound: rn50_conv1's x' took 74 us, 80% issue-active;
 * with 32-bit row splits still 56 us; staging the block's R rows of x in shared memory first,
 * dense rows by coalesced loads, then assembling the slots from there, ran 62 us and i8
 * rn50_conv1 124 -> 53 TOP/s: tried and dropped.) */
template <typename T, int SE, int FK>
__global__ void __launch_bounds__(256)
spread_x(const xconv_canon p, const T *x, T *xo, int lcs, int R, int64_t V, int64_t Wp,
         int64_t rows, int *flag)
{
    constexpr int NE = SE / (int)sizeof(T);
    __shared__ int64_t slot[NE], rbase;
    const int64_t pp = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t col = pp - p.pad_lo[2];
    const bool live = pp < Wp && col >= 0 && col < p.x_size[2];
    const uint32_t uV = (uint32_t)V, uX0 = (uint32_t)p.x_size[0];
    const int64_t col_off = col * p.x_ss[2];
    bool bad = false;
    for (uint32_t r = blockIdx.y; r < (uint32_t)rows; r += gridDim.y) { /* rows < 2^31 */
        if (threadIdx.x <= NE) {
            const uint32_t v = r % uV, a0 = r / uV % uX0, n = r / uV / uX0;
            const int i = threadIdx.x, j = i >> lcs, c = i & ((1 << lcs) - 1);
            const int64_t row = (int64_t)v - p.pad_lo[1] + j * p.dil[1];
            if (i == NE) rbase = p.x_off + n * p.x_sn + a0 * p.x_ss[0];
            else
                slot[i] = j < R && c < p.cin && row >= 0 && row < p.x_size[1]
                              ? row * p.x_ss[1] + c * p.x_sc
                              : -1;
        }
        __syncthreads();
        if (pp < Wp) {
            const T *xp = x + rbase + col_off;
            union { uint4 q[SE / 16]; T e[NE]; } px;
#pragma unroll
            for (int i = 0; i < NE; i++) {
                const int64_t o = slot[i];
                T val = 0;
                if (live && o >= 0) {
                    val = xp[o];
                    if (FK == 1) bad |= ((uint32_t)val & 0x7f80u) == 0x7f80u;
                    if (FK == 2) bad |= ((uint32_t)val & 0x7c00u) == 0x7c00u;
                }
                px.e[i] = val;
            }
            uint4 *out = (uint4 *)(xo + ((int64_t)r * Wp + pp) * NE);
#pragma unroll
            for (int k = 0; k < SE / 16; k++) out[k] = px.q[k];
        }
        __syncthreads();
    }
    if (FK && bad) *(volatile int *)flag = 1;
}

/* w' of the spread, one element per thread; run: elements per 128-byte run. */
template <typename T>
__global__ void spread_w(const xconv_canon p, const T *w, T *wo, int run, int S, int cs, int R,
                         int64_t kq1, int64_t total)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t f = e % run, u = e / run % kq1, k0 = e / (run * kq1) % p.k_size[0];
    const int64_t o = e / (run * kq1 * p.k_size[0]);
    const int64_t i = f / S, j = f % S / cs, c = f % S % cs;
    const int64_t k1 = u * R + j, k2 = i / p.dil[2];
    T v = 0;
    if (c < p.cin && j < R && k1 < p.k_size[1] && i % p.dil[2] == 0 && k2 < p.k_size[2])
        v = w[p.w_off + o * p.w_so + c * p.w_si + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]];
    wo[e] = v;
}

/* Whether the spread runs p (cheaper than the fold, and its conv takes the 16-byte loader).
 * Measuring knob: XCONV_FOLD_SPREAD=0 leaves it out, =1 takes it wherever it applies. */
bool use_spread(const xconv_canon *p, const fold_layout &fl, spread_layout *sl)
{
    const char *v = getenv("XCONV_FOLD_SPREAD");
    if (v && v[0] == '0') return false;
    *sl = spread_of(p);
    const char *why;
    if (!sl->ok || !xconv__cuda_igemm_fast_why(&sl->q, &why)) return false;
    if (v && v[0] == '1') return true;
    /* the fold's cost terms (fold_cost): stages over the useful K, and x' bytes (the spread's
     * written once and read from L2 mostly, the fold's written and read back) */
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype);
    const double used = (double)(xconv__prod3(p->k_size) * p->cin * es);
    const double spread = 0.015 * (double)(xconv__prod3(sl->q.k_size) * 128) / used * p->flops +
                          1.5 * (double)sl->x_bytes;
    const double fold = 0.015 * (double)(stages_of(fl, es) * 128) / used * p->flops +
                        3.0 * (double)fl.x_bytes;
    return spread < fold;
}

bool fold_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.fold_tc runs on cuda tensors only", false;
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype);
    if (p->op != XCONV_OP_CONV || p->groups != 1 || p->k_size[2] < 2 || es > 2)
        return *why_not = "cuda.fold_tc folds a conv's innermost kernel dim (groups 1, K > 1, "
                          "1- or 2-byte x) into its channels",
               false;
    if ((p->cin * es) % 16 == 0)
        return *why_not = "cuda.fold_tc is for channel runs shorter than 16 bytes", false;
    const fold_layout l = layout_of(p);
    spread_layout sl;
    if (use_spread(p, l, &sl)) return true;
    if (l.cpad * (int64_t)sizeof(fold_tap) > 48 * 1024)
        return *why_not = "cuda.fold_tc: too many folded channels for its table", false;
    const char *why;
    if (!xconv__cuda_igemm_fast_why(&l.q, &why))
        return *why_not = "cuda.fold_tc: the folded conv does not take the 16-byte tensor-core loader",
               false;
    return true;
}

size_t fold_workspace_bytes(const xconv_canon *p)
{
    const fold_layout l = layout_of(p);
    spread_layout sl;
    if (use_spread(p, l, &sl)) return sl.flag_off + 256;
    return l.x_bytes + l.w_bytes;
}

/* The tensor-core rate on the stages' channels (128 bytes each), plus writing and reading x'
 * once. */
double fold_cost(const xconv_canon *p)
{
    const fold_layout l = layout_of(p);
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype);
    const double used = (double)(xconv__prod3(p->k_size) * p->cin * es); /* bytes of K */
    spread_layout sl;
    if (use_spread(p, l, &sl))
        return 0.015 * (double)(xconv__prod3(sl.q.k_size) * 128) / used * p->flops +
               1.5 * (double)sl.x_bytes + 6e4;
    return 0.015 * (double)(stages_of(l, es) * 128) / used * p->flops + 3.0 * (double)l.x_bytes +
           6e4;
}

template <typename T>
void launch_folds(const xconv_canon *p, const xconv_exec *e, const fold_layout &l, T *xo, T *wo,
                  cudaStream_t stream)
{
    const int64_t pixels = p->n * xconv__prod3(l.q.x_size);
    const int64_t wt = p->cout * xconv__prod3(l.q.k_size) * l.cpad;
    if (pixels > 0)
        fold_x<T><<<(unsigned)((pixels + 127) / 128), 128, l.cpad * sizeof(fold_tap), stream>>>(
            *p, (const T *)e->x, xo, (int)l.cpad, (int)l.rows, l.q.x_size[1], pixels);
    if (wt > 0)
        fold_w<T><<<(unsigned)((wt + 255) / 256), 256, 0, stream>>>(
            *p, (const T *)e->w, wo, l.kc, l.cpad, (int)l.rows, l.q.k_size[1], wt);
}

template <typename T, int FK>
void launch_spread(const xconv_canon *p, const xconv_exec *e, const spread_layout &l, T *xo,
                   T *wo, int *flag, cudaStream_t st)
{
    const int64_t rows = p->n * p->x_size[0] * l.V;
    const int se = (int)(l.S * (int64_t)sizeof(T));
    int lcs = 0;
    while ((1 << lcs) < l.cs) lcs++;
    if (FK) cudaMemsetAsync(flag, 0, sizeof(int), st);
    /* a row's pixels over one block where they fit (256 threads), a few waves of blocks */
    const int threads = l.Wp <= 128 ? 128 /* > NE: the table fill */ : l.Wp < 256 ? (int)(l.Wp + 31) / 32 * 32 : 256;
    const int64_t bx = (l.Wp + threads - 1) / threads;
    const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * 16 / bx;
    const int64_t by = rows < cap ? rows : cap > 0 ? cap : 1;
    const dim3 grid((unsigned)bx, (unsigned)(by < 65535 ? by : 65535));
    if (rows > 0) {
        if (se == 16)
            spread_x<T, 16, FK><<<grid, threads, 0, st>>>(*p, (const T *)e->x, xo, lcs, (int)l.R, l.V, l.Wp, rows, flag);
        else if (se == 32)
            spread_x<T, 32, FK><<<grid, threads, 0, st>>>(*p, (const T *)e->x, xo, lcs, (int)l.R, l.V, l.Wp, rows, flag);
        else
            spread_x<T, 64, FK><<<grid, threads, 0, st>>>(*p, (const T *)e->x, xo, lcs, (int)l.R, l.V, l.Wp, rows, flag);
    }
    const int run = (int)(128 / sizeof(T));
    const int64_t wt = p->cout * xconv__prod3(l.q.k_size) * run;
    if (wt > 0)
        spread_w<T><<<(unsigned)((wt + 255) / 256), 256, 0, st>>>(
            *p, (const T *)e->w, wo, run, (int)l.S, (int)l.cs, (int)l.R, l.q.k_size[1], wt);
}

xconv_status fold_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const fold_layout l = layout_of(p);
    spread_layout sl;
    if (use_spread(p, l, &sl)) {
        char *xo = (char *)e->workspace, *wo = xo + sl.x_bytes;
        int *flag = (int *)(xo + sl.flag_off);
        const xconv_exec inner = xconv__cuda_inner_exec(e, &sl.q, xo, wo, e->y);
        const xconv_dtype d = p->x_dtype;
        return xconv__cuda_run(e, "cuda.fold_tc", err, [&](cudaStream_t st) {
            if (d == XCONV_DTYPE_BF16)
                launch_spread<uint16_t, 1>(p, e, sl, (uint16_t *)xo, (uint16_t *)wo, flag, st);
            else if (d == XCONV_DTYPE_F16)
                launch_spread<uint16_t, 2>(p, e, sl, (uint16_t *)xo, (uint16_t *)wo, flag, st);
            else
                launch_spread<uint8_t, 0>(p, e, sl, (uint8_t *)xo, (uint8_t *)wo, flag, st);
            xconv__cuda_tc_launch(&sl.q, &inner, st);
            /* x with an Inf or NaN: y again from the direct kernel */
            if (d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F16) xconv__cuda_generic_launch(e, st, flag);
        });
    }
    char *xo = (char *)e->workspace, *wo = xo + l.x_bytes;
    const xconv_exec inner = xconv__cuda_inner_exec(e, &l.q, xo, wo, e->y);
    return xconv__cuda_run(e, "cuda.fold_tc", err, [&](cudaStream_t st) {
        if (xconv_dtype_size(p->x_dtype) == 1)
            launch_folds<uint8_t>(p, e, l, (uint8_t *)xo, (uint8_t *)wo, st);
        else
            launch_folds<uint16_t>(p, e, l, (uint16_t *)xo, (uint16_t *)wo, st);
        xconv__cuda_tc_launch(&l.q, &inner, st);
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_fold = {
    "cuda.fold_tc",       XCONV_DEVICE_CUDA, fold_supports,
    fold_workspace_bytes, fold_cost,         fold_run,
    nullptr /* no prepack */, nullptr, nullptr,
};
