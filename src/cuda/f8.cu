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
    l.q = *p;
    xconv_canon &q = l.q;
    q.x_dtype = XCONV_DTYPE_BF16;
    q.ct = XCONV_CT_F32;
    q.cin_g = l.cpad;
    q.cin = p->groups * q.cin_g;
    const int64_t xs = xconv__prod3(p->x_size), kk = xconv__prod3(p->k_size);
    q.x_off = 0, q.x_sc = 1, q.x_sn = p->n > 1 ? xs * q.cin : 0;
    xconv__cuda_dense_strides(p->x_size, q.cin, q.x_ss);
    q.w_off = 0, q.w_si = 1, q.w_so = kk * q.cin_g, q.w_sg = p->groups > 1 ? p->cout_g * q.w_so : 0;
    xconv__cuda_dense_strides(p->k_size, q.cin_g, q.w_sk);
    l.x_bytes = xconv__cuda_align256(2 * (size_t)(p->n * xs * q.cin));
    l.w_bytes = xconv__cuda_align256(2 * (size_t)(p->cout * kk * q.cin_g));
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

/* x'[n, s, g, c] (c < cpad, zeros past cin_g) from x (any strides), one thread per element. */
__global__ void copy_x(const xconv_canon p, const uint8_t *__restrict__ x, uint16_t *__restrict__ xo,
                       int64_t cpad, int64_t total)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e % cpad, g = e / cpad % p.groups, pix = e / (cpad * p.groups);
        const int64_t s2 = pix % p.x_size[2], s1 = pix / p.x_size[2] % p.x_size[1],
                      s0 = pix / (p.x_size[2] * p.x_size[1]) % p.x_size[0];
        const int64_t n = pix / (p.x_size[0] * p.x_size[1] * p.x_size[2]);
        xo[e] = c < p.cin_g ? f8_to_bf16(p.x_dtype, x,
                                         p.x_off + n * p.x_sn + (g * p.cin_g + c) * p.x_sc +
                                             s0 * p.x_ss[0] + s1 * p.x_ss[1] + s2 * p.x_ss[2])
                            : (uint16_t)0;
    }
}

/* w'[g, o, k, i] (i < cpad, zeros past cin_g) from w (canonical (g, o, i, k) strides). */
__global__ void copy_w(const xconv_canon p, const uint8_t *__restrict__ w, uint16_t *__restrict__ wo,
                       int64_t cpad, int64_t total)
{
    const int64_t kk = p.k_size[0] * p.k_size[1] * p.k_size[2];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e % cpad, k = e / cpad % kk, o = e / (cpad * kk) % p.cout_g;
        const int64_t g = e / (cpad * kk * p.cout_g);
        const int64_t k2 = k % p.k_size[2], k1 = k / p.k_size[2] % p.k_size[1],
                      k0 = k / (p.k_size[2] * p.k_size[1]);
        wo[e] = i < p.cin_g ? f8_to_bf16(p.x_dtype, w,
                                         p.w_off + g * p.w_sg + o * p.w_so + i * p.w_si +
                                             k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2])
                            : (uint16_t)0;
    }
}

/* y (fp8, any strides) from the dense f32 y'[n, s, co], rounded once. */
__global__ void round_y(const xconv_canon p, const float *__restrict__ yf, uint8_t *__restrict__ y,
                        int64_t total)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t co = e % p.cout, pix = e / p.cout;
        const int64_t s2 = pix % p.y_size[2], s1 = pix / p.y_size[2] % p.y_size[1],
                      s0 = pix / (p.y_size[2] * p.y_size[1]) % p.y_size[0];
        const int64_t n = pix / (p.y_size[0] * p.y_size[1] * p.y_size[2]);
        store_f32(p.y_dtype, y,
                  p.y_off + n * p.y_sn + co * p.y_sc + s0 * p.y_ss[0] + s1 * p.y_ss[1] +
                      s2 * p.y_ss[2],
                  yf[e]);
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
    const f8_layout l = layout_of(p);
    const char *why;
    if (!xconv__cuda_igemm_fast_why(&l.q, &why))
        return *why_not = "cuda.f8_bf16: the bf16 problem does not take the tensor-core loader",
               false;
    return true;
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
    const double moved = 1.5 * (double)(l.x_bytes + l.w_bytes) + 2.25 * (double)l.y_bytes;
    return 0.012 * pad * p->flops + 1.5 * moved + 4e4;
}

template <class K>
void launch_grid(const xconv_canon *p, int64_t total, cudaStream_t st, K kernel)
{
    if (total <= 0) return;
    const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * 16;
    const int64_t want = (total + 255) / 256;
    kernel((unsigned)(want < cap ? want : cap), st);
}

xconv_status f8_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const f8_layout l = layout_of(p);
    char *ws = (char *)e->workspace;
    uint16_t *xo = (uint16_t *)ws, *wo = (uint16_t *)(ws + l.x_bytes);
    float *yo = l.y_copy ? (float *)(ws + l.x_bytes + l.w_bytes) : nullptr;
    const int64_t xt = p->n * xconv__prod3(p->x_size) * l.q.cin;
    const int64_t wt = p->cout * xconv__prod3(p->k_size) * l.q.cin_g;
    const int64_t yt = p->n * xconv__prod3(p->y_size) * p->cout;
    const xconv_exec inner = xconv__cuda_inner_exec(e, &l.q, xo, wo, yo ? (void *)yo : e->y);
    return xconv__cuda_run(e, "cuda.f8_bf16", err, [&](cudaStream_t st) {
        launch_grid(p, xt, st, [&](unsigned b, cudaStream_t s) {
            copy_x<<<b, 256, 0, s>>>(*p, (const uint8_t *)e->x, xo, l.cpad, xt);
        });
        launch_grid(p, wt, st, [&](unsigned b, cudaStream_t s) {
            copy_w<<<b, 256, 0, s>>>(*p, (const uint8_t *)e->w, wo, l.cpad, wt);
        });
        xconv__cuda_tc_launch(&l.q, &inner, st);
        if (yo)
            launch_grid(p, yt, st, [&](unsigned b, cudaStream_t s) {
                round_y<<<b, 256, 0, s>>>(*p, yo, (uint8_t *)e->y, yt);
            });
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_f8 = {
    "cuda.f8_bf16",     XCONV_DEVICE_CUDA, f8_supports,
    f8_workspace_bytes, f8_cost,           f8_run,
    nullptr /* no prepack */, nullptr,
};
