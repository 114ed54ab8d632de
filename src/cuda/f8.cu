/*
 * f8.cu — "cuda.f8_bf16": fp8 (e4m3, e5m2) convolution on the bf16 tensor cores. Every fp8
 * value is exactly a bf16 value (3 or 2 mantissa bits, exponents inside bf16's), so x and w are
 * copied into the workspace as bf16, channels-last with each group's channels padded to whole
 * 16-byte pieces (zeros), and one bf16 conv with f32 sums runs on them: cuda.igemm_wgmma's
 * kernel where it fits, else cuda.igemm_tc's 16-byte loader. The products are exact and the
 * sums are f32, so DESIGN.md §2's f32 rule holds, which Hopper's native fp8 MMA (narrower
 * accumulation) would not give. y f32 is written in place; y fp8 goes through a dense f32 copy
 * in the workspace and is rounded once (nearest even, e4m3 saturating) into y.
 *
 * cuda.igemm_tc runs fp8 itself, widening to f16 in registers on mma.sync (sdvae_512: 218
 * TFLOP/s); the copies cost about one pass over x, w and y, so this engine takes the large
 * problems by cost and leaves the small ones there.
 */
#include "cuda/common.cuh"

using namespace xconv_cuda;

namespace {

constexpr int PAD = 8; /* bf16 channels per 16 bytes */

struct f8_layout {
    xconv_canon q;          /* the bf16 problem over the copies */
    int64_t     cpad;       /* channels per group in the copy of x */
    bool        y_copy;     /* y is fp8: the conv writes f32 into the workspace first */
    size_t      x_bytes, w_bytes, y_bytes;
};

f8_layout layout_of(const xconv_canon *p)
{
    f8_layout l;
    l.cpad = (p->cin_g + PAD - 1) / PAD * PAD;
    l.q = xconv__cuda_bf16_copies(p, l.cpad, &l.x_bytes, &l.w_bytes);
    xconv_canon &q = l.q;
    q.ct = XCONV_CT_F32;
    l.y_copy = p->y_dtype != XCONV_DTYPE_F32;
    l.y_bytes = 0;
    if (l.y_copy) { /* dense channels-last f32 */
        const int64_t ys = xconv__prod3(p->y_size);
        q.y_dtype = XCONV_DTYPE_F32;
        q.y_off = 0, q.y_sc = 1, q.y_sn = p->n > 1 ? ys * p->cout : 0;
        xconv__cuda_dense_strides(p->y_size, p->cout, q.y_ss);
        l.y_bytes = xconv__cuda_align256(4 * (size_t)(p->n * ys * p->cout));
    }
    return l;
}

/* fp8 element i of base as bf16: exact, the f32 value of an fp8 code has at most 4
 * significant bits */
__device__ __forceinline__ uint16_t f8_to_bf16(xconv_dtype d, const uint8_t *base, int64_t i)
{
    return (uint16_t)(__float_as_uint(load_f32(d, base, i)) >> 16);
}

/* The copies run a block per row (grid-stride over rows) and its threads along the row.
 * A row's offset in x or y: r * step where the image and pixel dims collapse into one
 * stride (dense views), else split from r in 32-bit arithmetic (supports: fewer than 2^31
 * rows); one thread per element with 64-bit splits made the copies take most of the time
 * (sdvae_512 fp8: 232 TFLOP/s in all). */
struct rows_of {
    int64_t  off, step;       /* collapsed: offset of row r = off + r * step */
    bool     collapsed;
    uint32_t d2, d1, d0;      /* else: the pixel dims, innermost first */
    int64_t  s2, s1, s0, sn;
};

rows_of rows_for(const int64_t size[3], const int64_t ss[3], int64_t sn, int64_t n, int64_t off)
{
    rows_of R;
    R.off = off, R.d2 = (uint32_t)size[2], R.d1 = (uint32_t)size[1], R.d0 = (uint32_t)size[0];
    R.s2 = ss[2], R.s1 = ss[1], R.s0 = ss[0], R.sn = sn;
    /* collapse from the innermost dim outwards: each outer dim's stride = inner size * stride */
    int64_t step = 0, span = 1;
    bool ok = true;
    const int64_t sizes[4] = {size[2], size[1], size[0], n}, strides[4] = {ss[2], ss[1], ss[0], sn};
    for (int d = 0; d < 4 && ok; d++) {
        if (sizes[d] == 1) continue;
        if (step == 0) step = strides[d], span = sizes[d];
        else if (strides[d] == step * span) span *= sizes[d];
        else ok = false;
    }
    R.collapsed = ok;
    R.step = step;
    return R;
}

__device__ __forceinline__ int64_t row_offset(const rows_of &R, int64_t r)
{
    if (R.collapsed) return R.off + r * R.step;
    uint32_t t = (uint32_t)r;
    const uint32_t i2 = t % R.d2;
    t /= R.d2;
    const uint32_t i1 = t % R.d1;
    t /= R.d1;
    const uint32_t i0 = t % R.d0, n = t / R.d0;
    return R.off + n * R.sn + i0 * R.s0 + i1 * R.s1 + i2 * R.s2;
}

/* x'[n, s][g, c] (c < cpad, zeros past cin_g) from x (any strides): a row per pixel. */
__global__ void copy_x(const xconv_canon p, rows_of R, const uint8_t *__restrict__ x,
                       uint16_t *__restrict__ xo, int cpad, int64_t rows)
{
    const int len = (int)p.groups * cpad; /* (below 2^31: supports) */
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t base = row_offset(R, r);
        for (int j = threadIdx.x; j < len; j += blockDim.x) {
            const int g = j / cpad, c = j - g * cpad;
            xo[r * len + j] =
                c < p.cin_g ? f8_to_bf16(p.x_dtype, x, base + (g * p.cin_g + c) * p.x_sc)
                            : (uint16_t)0;
        }
    }
}

/* w'[g, o, k][i] (i < cpad, zeros past cin_g) from w (canonical (g, o, i, k) strides): a row
 * per (output channel, tap); w is small. */
__global__ void copy_w(const xconv_canon p, const uint8_t *__restrict__ w,
                       uint16_t *__restrict__ wo, int cpad, int64_t rows)
{
    const int64_t kk = p.k_size[0] * p.k_size[1] * p.k_size[2];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t k = r % kk, co = r / kk, o = co % p.cout_g, g = co / p.cout_g;
        const int64_t k2 = k % p.k_size[2], k1 = k / p.k_size[2] % p.k_size[1],
                      k0 = k / (p.k_size[2] * p.k_size[1]);
        const int64_t base = p.w_off + g * p.w_sg + o * p.w_so + k0 * p.w_sk[0] + k1 * p.w_sk[1] +
                             k2 * p.w_sk[2];
        for (int i = threadIdx.x; i < cpad; i += blockDim.x)
            wo[r * cpad + i] =
                i < p.cin_g ? f8_to_bf16(p.x_dtype, w, base + i * p.w_si) : (uint16_t)0;
    }
}

/* y (fp8, any strides) from the dense f32 y'[n, s][co], rounded once: a row per pixel. */
__global__ void round_y(const xconv_canon p, rows_of R, const float *__restrict__ yf,
                        uint8_t *__restrict__ y, int64_t rows)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t base = row_offset(R, r);
        for (int co = threadIdx.x; co < (int)p.cout; co += blockDim.x)
            store_f32(p.y_dtype, y, base + co * p.y_sc, yf[r * p.cout + co]);
    }
}

bool f8_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.f8_bf16 runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV ||
        (p->x_dtype != XCONV_DTYPE_F8E4M3 && p->x_dtype != XCONV_DTYPE_F8E5M2))
        return *why_not = "cuda.f8_bf16 runs fp8 conv", false;
    if (p->y_dtype != p->x_dtype && p->y_dtype != XCONV_DTYPE_F32)
        return *why_not = "cuda.f8_bf16: y must be fp8 or f32 (f64 sums run on the CUDA cores)",
               false;
    if (p->cin + 16 * p->groups > INT32_MAX || p->cout > INT32_MAX ||
        p->n * xconv__prod3(p->x_size) > INT32_MAX || p->n * xconv__prod3(p->y_size) > INT32_MAX)
        return *why_not = "cuda.f8_bf16: 2^31 or more channels or pixels", false;
    /* only where the bf16 problem runs on the wgmma kernel: on cuda.igemm_tc's loader the
     * copies do not pay (rn50_conv1, 8 padded channels: 9.4 -> 2.4 TFLOP/s) */
    if (p->cin_g < 64)
        return *why_not = "cuda.f8_bf16 runs 64 or more input channels per group (whole 128-byte "
                          "bf16 blocks for the wgmma kernel's TMA loads)",
               false;
    const f8_layout l = layout_of(p);
    return xconv__cuda_wgmma_fits(&l.q, why_not);
}

size_t f8_workspace_bytes(const xconv_canon *p)
{
    const f8_layout l = layout_of(p);
    return l.x_bytes + l.w_bytes + l.y_bytes;
}

/* The wgmma kernel's cost (scaled by the zero channels) plus the bytes the copies move, as
 * cuda.cf_tc counts its transposes. */
double f8_cost(const xconv_canon *p)
{
    const f8_layout l = layout_of(p);
    const double pad = (double)l.cpad / (double)(p->cin_g > 0 ? p->cin_g : 1);
    /* per byte of the copies: x' and w' written and read (2.25), y' written and read and
     * y written (3.4) */
    return 0.012 * pad * p->flops + 2.25 * (double)(l.x_bytes + l.w_bytes) +
           3.375 * (double)l.y_bytes + 4e4;
}

/* A grid of one block per row, capped at 16 blocks per SM (the kernels stride over rows). */
template <class K> void launch_rows(const xconv_canon *p, int64_t rows, cudaStream_t st, K kernel)
{
    if (rows <= 0) return;
    const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * 16;
    kernel((unsigned)(rows < cap ? rows : cap), st);
}

xconv_status f8_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const f8_layout l = layout_of(p);
    char *ws = (char *)e->workspace;
    uint16_t *xo = (uint16_t *)ws, *wo = (uint16_t *)(ws + l.x_bytes);
    float *yo = l.y_copy ? (float *)(ws + l.x_bytes + l.w_bytes) : nullptr;
    const int64_t xr = p->n * xconv__prod3(p->x_size), wr = p->cout * xconv__prod3(p->k_size);
    const int64_t yr = p->n * xconv__prod3(p->y_size);
    const xconv_exec inner = xconv__cuda_inner_exec(e, &l.q, xo, wo, yo ? (void *)yo : e->y);
    return xconv__cuda_run(e, "cuda.f8_bf16", err, [&](cudaStream_t st) {
        launch_rows(p, xr, st, [&](unsigned b, cudaStream_t s) {
            copy_x<<<b, 128, 0, s>>>(*p, rows_for(p->x_size, p->x_ss, p->x_sn, p->n, p->x_off),
                                     (const uint8_t *)e->x, xo, (int)l.cpad, xr);
        });
        launch_rows(p, wr, st, [&](unsigned b, cudaStream_t s) {
            copy_w<<<b, 128, 0, s>>>(*p, (const uint8_t *)e->w, wo, (int)l.cpad, wr);
        });
        xconv__cuda_tc_launch(&l.q, &inner, st);
        if (yo)
            launch_rows(p, yr, st, [&](unsigned b, cudaStream_t s) {
                round_y<<<b, 128, 0, s>>>(*p, rows_for(p->y_size, p->y_ss, p->y_sn, p->n, p->y_off),
                                          yo, (uint8_t *)e->y, yr);
            });
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_f8 = {
    "cuda.f8_bf16",     XCONV_DEVICE_CUDA, f8_supports,
    f8_workspace_bytes, f8_cost,           f8_run,
    nullptr /* no prepack */, nullptr, nullptr,
};
