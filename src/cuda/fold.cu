/*
 * fold.cu — "cuda.fold_tc": convs with few input channels (rn50's first layer: 3) on the
 * tensor cores. Their channel runs are shorter than the 16 bytes the fast loaders take, so
 * cuda.igemm_tc falls back to element loads (22 TFLOP/s on rn50_conv1). This engine folds the
 * innermost kernel dim into the channels, in the workspace:
 *
 *   x'[n, a0, a1, j2, (k2, c)] = x[n, c, a0, a1, j2*s2 + k2*t2 - lo2]   (0 outside x)
 *   w'[o, k0, k1, (k2, c)]     = w[o, c, k0, k1, k2]
 *
 * channels-last, (k2, c) padded with zeros to a multiple of 16 bytes, and runs the conv over
 * dims 0 and 1 (kernel K0 x K1 x 1, the same strides, dilations and padding there) on the
 * tensor-core kernels (cuda.igemm_wgmma's where it fits, else cuda.igemm_tc's 16-byte
 * loader). The products and their order per output are the same terms; y is written in place.
 */
#include "cuda/common.cuh"

namespace {

struct fold_layout {
    xconv_canon q;
    int64_t     kc, cpad;   /* folded channels (K2 * Cin) and their padded count */
    size_t      x_bytes, w_bytes;
};

fold_layout layout_of(const xconv_canon *p)
{
    fold_layout l;
    const int64_t es = (int64_t)xconv_dtype_size(p->x_dtype), per16 = 16 / es;
    l.kc = p->k_size[2] * p->cin;
    l.cpad = (l.kc + per16 - 1) / per16 * per16;
    l.q = *p;
    xconv_canon &q = l.q;
    q.cin = q.cin_g = l.cpad;
    q.x_size[2] = p->y_size[2];
    q.k_size[2] = 1, q.stride[2] = 1, q.dil[2] = 1, q.pad_lo[2] = q.pad_hi[2] = 0;
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

/* One thread per folded pixel (n, a0, a1, j2): its cpad values, gathered along dim 2 and
 * written as 16-byte chunks (cpad * sizeof(T) is a multiple of 16). */
template <typename T>
__global__ void fold_x(const xconv_canon p, const T *x, T *xo, int cpad, int64_t pixels)
{
    const int64_t pix = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= pixels) return;
    int64_t t = pix;
    const int64_t j2 = t % p.y_size[2];
    t /= p.y_size[2];
    const int64_t a1 = t % p.x_size[1];
    t /= p.x_size[1];
    const int64_t a0 = t % p.x_size[0], n = t / p.x_size[0];
    const T *row = x + p.x_off + n * p.x_sn + a0 * p.x_ss[0] + a1 * p.x_ss[1];
    uint4 *out = (uint4 *)(xo + pix * cpad);
    constexpr int PER = 16 / sizeof(T);
    union { uint4 v; T e[PER]; } chunk;
    int f = 0;
    for (int k2 = 0; k2 < (int)p.k_size[2]; k2++) {
        const int64_t a2 = j2 * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
        const bool in = a2 >= 0 && a2 < p.x_size[2];
        const T *px = row + a2 * p.x_ss[2];
        for (int c = 0; c < (int)p.cin; c++) {
            chunk.e[f % PER] = in ? px[c * p.x_sc] : T(0);
            if (++f % PER == 0) out[f / PER - 1] = chunk.v;
        }
    }
    for (; f < cpad;) {
        chunk.e[f % PER] = T(0);
        if (++f % PER == 0) out[f / PER - 1] = chunk.v;
    }
}

template <typename T>
__global__ void fold_w(const xconv_canon p, const T *w, T *wo, int64_t kc, int64_t cpad,
                       int64_t total)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t f = e % cpad, k1 = e / cpad % p.k_size[1], k0 = e / (cpad * p.k_size[1]) % p.k_size[0];
    const int64_t o = e / (cpad * p.k_size[1] * p.k_size[0]);
    T v = 0;
    if (f < kc) {
        const int64_t k2 = f / p.cin, c = f % p.cin;
        v = w[p.w_off + o * p.w_so + c * p.w_si + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2]];
    }
    wo[e] = v;
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
    const char *why;
    if (!xconv__cuda_igemm_fast_why(&l.q, &why))
        return *why_not = "cuda.fold_tc: the folded conv does not take the 16-byte tensor-core loader",
               false;
    return true;
}

size_t fold_workspace_bytes(const xconv_canon *p)
{
    const fold_layout l = layout_of(p);
    return l.x_bytes + l.w_bytes;
}

/* The tensor-core rate on the padded channels, plus writing and reading x' once. */
double fold_cost(const xconv_canon *p)
{
    const fold_layout l = layout_of(p);
    return 0.015 * (double)l.cpad / (double)l.kc * p->flops + 3.0 * (double)l.x_bytes + 6e4;
}

template <typename T>
void launch_folds(const xconv_canon *p, const xconv_exec *e, const fold_layout &l, T *xo, T *wo,
                  cudaStream_t stream)
{
    const int64_t pixels = p->n * xconv__prod3(l.q.x_size);
    const int64_t wt = p->cout * xconv__prod3(l.q.k_size) * l.cpad;
    if (pixels > 0)
        fold_x<T><<<(unsigned)((pixels + 127) / 128), 128, 0, stream>>>(*p, (const T *)e->x, xo, (int)l.cpad, pixels);
    if (wt > 0)
        fold_w<T><<<(unsigned)((wt + 255) / 256), 256, 0, stream>>>(*p, (const T *)e->w, wo, l.kc, l.cpad, wt);
}

xconv_status fold_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const fold_layout l = layout_of(p);
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
    nullptr /* no prepack */, nullptr,
};
