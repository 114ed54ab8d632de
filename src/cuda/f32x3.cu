/*
 * f32x3.cu — "cuda.f32_bf16x3": f32 convolution on the bf16 tensor cores, for callers that
 * allow reduced-precision f32 math (xconv_plan_options.allow_tf32). Each f32 value splits
 * into hi + lo, hi = bf16(x) and lo = bf16(x - hi), so x carries about 17 significant bits
 * where TF32 keeps 11. The workspace holds, per group,
 * x' = [x_hi, x_lo, x_hi] and w' = [w_hi, w_hi, w_lo] along the channels (each block padded
 * to 8 channels with zeros), channels-last, so one bf16 conv with f32 accumulation computes
 * x_hi*w_hi + x_lo*w_hi + x_hi*w_lo per term: the product to about 2^-17 relative (the
 * lo*lo term, below 2^-18, is dropped), 3x the bf16 work. y (f32) is written in place by the tensor-core
 * kernel (cuda.igemm_wgmma's where it fits, else cuda.igemm_tc's 16-byte loader).
 * Non-finite values travel in hi x hi alone (lo = 0 and the cross terms' hi = 0), so
 * infinities and NaNs land where f32 puts them.
 */
#include "cuda/common.cuh"

namespace {

constexpr int PAD = 8; /* bf16 channels per 16 bytes */

struct x3_layout {
    xconv_canon q;
    int64_t     cpad;      /* each of the three blocks of a group, in channels */
    size_t      x_bytes, w_bytes;
};

x3_layout layout_of(const xconv_canon *p)
{
    x3_layout l;
    l.cpad = (p->cin_g + PAD - 1) / PAD * PAD;
    l.q = xconv__cuda_bf16_copies(p, 3 * l.cpad, &l.x_bytes, &l.w_bytes);
    return l;
}

/* The parts of v: HI = bf16(v) rounded to nearest (truncated where that overflows), LO =
 * bf16(v - hi); v - hi is exact in f32 and |lo| <= 2^-9 |v|, so the dropped lo*lo term is
 * below 2^-18 relative. An infinity or NaN is all in HI (LO = 0); HI_CROSS, the hi that
 * multiplies the other operand's lo, is 0 for it: else lo = 0 times an infinite hi would add a
 * NaN where f32's x * w is infinite (test_gpu's infinite weights found that). */
enum split_kind { HI, LO, HI_CROSS };
__device__ __forceinline__ uint16_t split_part(float v, split_kind part)
{
    const uint32_t b = __float_as_uint(v);
    if ((b & 0x7f800000u) == 0x7f800000u) /* inf / NaN: all in hi */
        return part == HI ? xconv_cuda::f32_to_bf16(v) : (uint16_t)0;
    uint16_t hi = xconv_cuda::f32_to_bf16(v);
    if ((hi & 0x7fffu) == 0x7f80u) hi = (uint16_t)(b >> 16); /* rounded up to inf */
    if (part != LO) return hi;
    return xconv_cuda::f32_to_bf16(v - __uint_as_float((uint32_t)hi << 16));
}

/* x'[n, s, g, block, c] from x (any strides): block 0 hi, 1 lo, 2 hi (the cross one). */
__global__ void split_x(const xconv_canon p, const float *x, uint16_t *xo, int64_t cpad, int64_t total)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t c = e % cpad, block = e / cpad % 3, g = e / (3 * cpad) % p.groups;
    const int64_t pix = e / (3 * cpad * p.groups);
    const int64_t s2 = pix % p.x_size[2], s1 = pix / p.x_size[2] % p.x_size[1],
                  s0 = pix / (p.x_size[2] * p.x_size[1]) % p.x_size[0];
    const int64_t n = pix / (p.x_size[0] * p.x_size[1] * p.x_size[2]);
    uint16_t v = 0;
    if (c < p.cin_g) {
        const float f = x[p.x_off + n * p.x_sn + (g * p.cin_g + c) * p.x_sc + s0 * p.x_ss[0] +
                          s1 * p.x_ss[1] + s2 * p.x_ss[2]];
        v = split_part(f, block == 0 ? HI : block == 1 ? LO : HI_CROSS);
    }
    xo[e] = v;
}

/* w'[g, o, k, block, i] from w (canonical (g, o, i, k) strides): block 0 hi, 1 hi (the cross
 * one), 2 lo. */
__global__ void split_w(const xconv_canon p, const float *w, uint16_t *wo, int64_t cpad, int64_t total)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t kk = p.k_size[0] * p.k_size[1] * p.k_size[2];
    const int64_t i = e % cpad, block = e / cpad % 3, k = e / (3 * cpad) % kk;
    const int64_t o = e / (3 * cpad * kk) % p.cout_g, g = e / (3 * cpad * kk * p.cout_g);
    const int64_t k2 = k % p.k_size[2], k1 = k / p.k_size[2] % p.k_size[1],
                  k0 = k / (p.k_size[2] * p.k_size[1]);
    uint16_t v = 0;
    if (i < p.cin_g) {
        const float f = w[p.w_off + g * p.w_sg + o * p.w_so + i * p.w_si + k0 * p.w_sk[0] +
                          k1 * p.w_sk[1] + k2 * p.w_sk[2]];
        v = split_part(f, block == 0 ? HI : block == 1 ? HI_CROSS : LO);
    }
    wo[e] = v;
}

bool x3_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.f32_bf16x3 runs on cuda tensors only", false;
    if (!p->allow_reduced)
        return *why_not = "cuda.f32_bf16x3 needs reduced-precision f32 math allowed "
                          "(xconv_plan_options.allow_tf32)",
               false;
    if (p->op != XCONV_OP_CONV || p->x_dtype != XCONV_DTYPE_F32 || p->y_dtype != XCONV_DTYPE_F32)
        return *why_not = "cuda.f32_bf16x3 runs f32 conv into f32", false;
    const x3_layout l = layout_of(p);
    const char *why;
    if (!xconv__cuda_igemm_fast_why(&l.q, &why))
        return *why_not = "cuda.f32_bf16x3: the split problem does not take the tensor-core loader",
               false;
    return true;
}

size_t x3_workspace_bytes(const xconv_canon *p)
{
    const x3_layout l = layout_of(p);
    return l.x_bytes + l.w_bytes;
}

/* Three bf16 products per term on the tensor cores, plus the splitting passes, scaled by the
 * zero channels of the padded blocks (a depthwise conv stays on cuda.depthwise). */
double x3_cost(const xconv_canon *p)
{
    const double pad = (double)layout_of(p).cpad / (double)(p->cin_g > 0 ? p->cin_g : 1);
    return 0.04 * pad * p->flops + 6e4;
}

xconv_status x3_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const x3_layout l = layout_of(p);
    uint16_t *xo = (uint16_t *)e->workspace, *wo = (uint16_t *)((char *)e->workspace + l.x_bytes);
    const int64_t xt = p->n * xconv__prod3(p->x_size) * l.q.cin;
    const int64_t wt = p->cout * xconv__prod3(p->k_size) * l.q.cin_g;
    const xconv_exec inner = xconv__cuda_inner_exec(e, &l.q, xo, wo, e->y);
    return xconv__cuda_run(e, "cuda.f32_bf16x3", err, [&](cudaStream_t st) {
        if (xt > 0)
            split_x<<<(unsigned)((xt + 255) / 256), 256, 0, st>>>(*p, (const float *)e->x, xo, l.cpad, xt);
        if (wt > 0)
            split_w<<<(unsigned)((wt + 255) / 256), 256, 0, st>>>(*p, (const float *)e->w, wo, l.cpad, wt);
        xconv__cuda_tc_launch(&l.q, &inner, st);
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_f32x3 = {
    "cuda.f32_bf16x3",  XCONV_DEVICE_CUDA, x3_supports,
    x3_workspace_bytes, x3_cost,           x3_run,
    nullptr /* no prepack */, nullptr, nullptr,
};
