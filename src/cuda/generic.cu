/*
 * generic.cu — "cuda.generic": the direct convolution on the GPU for every valid CUDA
 * problem (both ops, every rank, layout, strided view, dtype, groups, bias). It is the
 * fallback of the CUDA engines as cpu.ref is of the CPU ones, so it favours coverage and
 * plainness; the tensor-core engines take the shapes that matter for speed.
 *
 * One thread per output element, grid-stride. Each element is one sum in a fixed order
 * (kernel taps outer, input channels inner): deterministic, no atomics. Storage dtypes are
 * converted to the compute type as they are read and rounded once when y is stored, with
 * the rules of src/core (common.cuh), so the kernel exists per compute type only.
 * Index math is the gather form of ref.tmpl.h for conv_transpose: tap k of output j reads
 * x at (j + lo - k*t) / s where that is a non-negative multiple of s inside x.
 */
#include "cuda/common.cuh"

using namespace xconv_cuda;

namespace {

template <class T, bool TRANSPOSE>
__global__ void __launch_bounds__(256)
generic_kernel(const xconv_canon p, const char *__restrict__ x, const char *__restrict__ w,
               const char *__restrict__ bias, char *__restrict__ y, int64_t total,
               bool channel_fastest, const int *only_if)
{
    if (only_if && *(const volatile int *)only_if == 0) return;
    const int64_t Y0 = p.y_size[0], Y1 = p.y_size[1], Y2 = p.y_size[2];
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        /* Neighbouring threads take neighbouring y addresses in either layout. */
        int64_t r = idx, co, j0, j1, j2, n;
        if (channel_fastest) {
            co = r % p.cout, r /= p.cout;
            j2 = r % Y2, r /= Y2;
            j1 = r % Y1, r /= Y1;
            j0 = r % Y0, n = r / Y0;
        } else {
            j2 = r % Y2, r /= Y2;
            j1 = r % Y1, r /= Y1;
            j0 = r % Y0, r /= Y0;
            co = r % p.cout, n = r / p.cout;
        }
        const int64_t g = co / p.cout_g, o = co % p.cout_g;
        T acc = bias ? ops<T>::load(p.bias_dtype, bias, p.b_off + co * p.b_s) : ops<T>::zero();
        const int64_t xg = p.x_off + n * p.x_sn + g * p.cin_g * p.x_sc;
        const int64_t wo = p.w_off + g * p.w_sg + o * p.w_so;
        const int64_t j[3] = {j0, j1, j2};
        for (int64_t k0 = 0; k0 < p.k_size[0]; k0++) {
            int64_t q0;
            if (!TRANSPOSE) {
                q0 = j[0] * p.stride[0] + k0 * p.dil[0] - p.pad_lo[0];
            } else {
                const int64_t r0 = j[0] + p.pad_lo[0] - k0 * p.dil[0];
                if (r0 < 0 || r0 % p.stride[0]) continue;
                q0 = r0 / p.stride[0];
            }
            const bool in0 = q0 >= 0 && q0 < p.x_size[0];
            if (TRANSPOSE && !in0) continue;
            for (int64_t k1 = 0; k1 < p.k_size[1]; k1++) {
                int64_t q1;
                if (!TRANSPOSE) {
                    q1 = j[1] * p.stride[1] + k1 * p.dil[1] - p.pad_lo[1];
                } else {
                    const int64_t r1 = j[1] + p.pad_lo[1] - k1 * p.dil[1];
                    if (r1 < 0 || r1 % p.stride[1]) continue;
                    q1 = r1 / p.stride[1];
                }
                const bool in1 = in0 && q1 >= 0 && q1 < p.x_size[1];
                if (TRANSPOSE && !in1) continue;
                for (int64_t k2 = 0; k2 < p.k_size[2]; k2++) {
                    int64_t q2;
                    if (!TRANSPOSE) {
                        q2 = j[2] * p.stride[2] + k2 * p.dil[2] - p.pad_lo[2];
                    } else {
                        const int64_t r2 = j[2] + p.pad_lo[2] - k2 * p.dil[2];
                        if (r2 < 0 || r2 % p.stride[2]) continue;
                        q2 = r2 / p.stride[2];
                    }
                    const bool in = in1 && q2 >= 0 && q2 < p.x_size[2];
                    if (TRANSPOSE && !in) continue;
                    int64_t xa = xg + q0 * p.x_ss[0] + q1 * p.x_ss[1] + q2 * p.x_ss[2];
                    int64_t wa = wo + k0 * p.w_sk[0] + k1 * p.w_sk[1] + k2 * p.w_sk[2];
                    /* conv's padding reads as 0 and 0 * w joins the sum, as cpu.ref has it
                     * (Inf * 0 is NaN, as in PyTorch) */
                    for (int64_t i = 0; i < p.cin_g; i++, xa += p.x_sc, wa += p.w_si)
                        ops<T>::mac(acc, in ? ops<T>::load(p.x_dtype, x, xa) : ops<T>::zero(),
                                    ops<T>::load(p.x_dtype, w, wa));
                }
            }
        }
        ops<T>::store(p.y_dtype, y, p.y_off + n * p.y_sn + co * p.y_sc + j0 * p.y_ss[0] +
                                        j1 * p.y_ss[1] + j2 * p.y_ss[2], acc);
    }
}

template <class T>
void launch(const xconv_canon *p, const xconv_exec *e, int64_t total, cudaStream_t stream,
            const int *only_if)
{
    const int threads = 256;
    /* A few waves of blocks; the grid-stride loop covers the rest. */
    const int64_t want = (total + threads - 1) / threads;
    /* a fallback behind a flag (only_if) usually returns at once: few blocks to launch */
    const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * (only_if ? 4 : 32);
    const unsigned blocks = (unsigned)(want < cap ? want : cap);
    const int64_t ysc = p->y_sc < 0 ? -p->y_sc : p->y_sc;
    const int64_t yss = p->y_ss[2] < 0 ? -p->y_ss[2] : p->y_ss[2];
    const bool channel_fastest = p->y_size[2] == 1 ? ysc <= (p->y_ss[1] < 0 ? -p->y_ss[1] : p->y_ss[1])
                                                   : ysc < yss;
    if (p->op == XCONV_OP_CONV)
        generic_kernel<T, false><<<blocks, threads, 0, stream>>>(
            *p, (const char *)e->x, (const char *)e->w, (const char *)e->bias, (char *)e->y, total,
            channel_fastest, only_if);
    else
        generic_kernel<T, true><<<blocks, threads, 0, stream>>>(
            *p, (const char *)e->x, (const char *)e->w, (const char *)e->bias, (char *)e->y, total,
            channel_fastest, only_if);
}

bool generic_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA) {
        *why_not = "cuda.generic runs on cuda tensors only";
        return false;
    }
    return true;
}

size_t generic_workspace_bytes(const xconv_canon *) { return 0; }

/* Far above the tensor-core engines, below nothing: the CUDA fallback. */
double generic_cost(const xconv_canon *p) { return 4.0 * p->flops + 1e5; }

} /* namespace */

void xconv__cuda_generic_launch(const xconv_exec *e, cudaStream_t st, const int *only_if)
{
    const xconv_canon *p = e->p;
    const int64_t total = p->n * p->cout * xconv__prod3(p->y_size);
    if (total == 0) return;
    switch (p->ct) {
    case XCONV_CT_U32: launch<uint32_t>(p, e, total, st, only_if); break;
    case XCONV_CT_U64: launch<uint64_t>(p, e, total, st, only_if); break;
    case XCONV_CT_F32: launch<float>(p, e, total, st, only_if); break;
    case XCONV_CT_F64: launch<double>(p, e, total, st, only_if); break;
    case XCONV_CT_C64: launch<xconv_c64>(p, e, total, st, only_if); break;
    case XCONV_CT_C128: launch<xconv_c128>(p, e, total, st, only_if); break;
    default: break;
    }
}

namespace {

/* Whether element i of w (a float or complex dtype d) is Inf or NaN (a part of it, for
 * complex; f64 read as f64). */
__device__ __forceinline__ bool nonfinite_at(xconv_dtype d, const char *w, int64_t i)
{
    switch (d) {
    case XCONV_DTYPE_F64: return !isfinite(((const double *)w)[i]);
    case XCONV_DTYPE_C64: {
        const float *v = (const float *)w + 2 * i;
        return !isfinite(v[0]) || !isfinite(v[1]);
    }
    case XCONV_DTYPE_C128: {
        const double *v = (const double *)w + 2 * i;
        return !isfinite(v[0]) || !isfinite(v[1]);
    }
    default: return !isfinite(ops<float>::load(d, w, i));
    }
}

/* *flag = 1 when one of the elements [0, total) from w (dtype d) is Inf or NaN: a dense w
 * scanned as a run (a thread per element, grid-striding, no index splits). */
__global__ void flag_nonfinite_run(xconv_dtype d, const char *__restrict__ w, int64_t total,
                                   int *flag)
{
    bool bad = false;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        bad |= nonfinite_at(d, w, i);
    if (bad) *(volatile int *)flag = 1;
}

/* *flag = 1 when a weight of p (float dtypes) is Inf or NaN; one thread per weight. */
__global__ void flag_nonfinite_w(const xconv_canon p, const char *__restrict__ w, int64_t total,
                                 int *flag)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int64_t r = idx;
    const int64_t k2 = r % p.k_size[2];
    r /= p.k_size[2];
    const int64_t k1 = r % p.k_size[1];
    r /= p.k_size[1];
    const int64_t k0 = r % p.k_size[0];
    r /= p.k_size[0];
    const int64_t i = r % p.cin_g, co = r / p.cin_g;
    const int64_t g = co / p.cout_g, o = co % p.cout_g;
    const int64_t wa = p.w_off + g * p.w_sg + o * p.w_so + i * p.w_si + k0 * p.w_sk[0] +
                       k1 * p.w_sk[1] + k2 * p.w_sk[2];
    if (nonfinite_at(p.x_dtype, w, wa)) *(volatile int *)flag = 1;
}

} /* namespace */

bool xconv__cuda_float_weights(const xconv_canon *p)
{
    const xconv_dtype d = p->x_dtype;
    return d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F16 || d == XCONV_DTYPE_F8E4M3 ||
           d == XCONV_DTYPE_F8E5M2 || d == XCONV_DTYPE_F32 || d == XCONV_DTYPE_F64 ||
           d == XCONV_DTYPE_C64 || d == XCONV_DTYPE_C128;
}

void xconv__cuda_flag_nonfinite_w(const xconv_exec *e, int *flag, cudaStream_t st)
{
    const xconv_canon *p = e->p;
    cudaMemsetAsync(flag, 0, sizeof(int), st);
    const int64_t total = p->cout * p->cin_g * xconv__prod3(p->k_size);
    if (total <= 0) return;
    /* dense (no gaps, no negative strides: the elements fill [w_off, w_off + total)): one run;
     * the index split per weight cost encodec_up's 2M weights about 20 us */
    const int64_t sizes[] = {p->groups, p->cout_g, p->cin_g, p->k_size[0], p->k_size[1], p->k_size[2]};
    const int64_t strides[] = {p->w_sg, p->w_so, p->w_si, p->w_sk[0], p->w_sk[1], p->w_sk[2]};
    int64_t last = 0;
    bool dense = true;
    for (int i = 0; i < 6; i++) {
        if (sizes[i] > 1 && strides[i] <= 0) dense = false;
        if (sizes[i] > 1) last += (sizes[i] - 1) * strides[i];
    }
    const size_t es = xconv_dtype_size(p->x_dtype);
    if (dense && last + 1 == total) {
        const int64_t cap = (int64_t)xconv__cuda_device_sms(p->device_index) * 8;
        const int64_t want = (total + 255) / 256;
        flag_nonfinite_run<<<(unsigned)(want < cap ? want : cap), 256, 0, st>>>(
            p->x_dtype, (const char *)e->w + p->w_off * (int64_t)es, total, flag);
    } else {
        flag_nonfinite_w<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(*p, (const char *)e->w,
                                                                          total, flag);
    }
}

size_t xconv__cuda_wcheck_bytes(const xconv_canon *p)
{
    return p->op == XCONV_OP_CONV_TRANSPOSE && xconv__cuda_float_weights(p) ? sizeof(int) : 0;
}

void xconv__cuda_wcheck_prepack(const xconv_canon *p, xconv_context *ctx, const void *w,
                                void *packed)
{
    int *rec = (int *)packed;
    *rec = -1;
    xconv_exec e;
    xconv_cuda_scope s;
    if (!xconv__cuda_prepack_enter(p, ctx, w, &e, &s)) return;
    int *flag = nullptr;
    if (cudaMallocAsync((void **)&flag, sizeof(int), s.stream) == cudaSuccess) {
        xconv__cuda_flag_nonfinite_w(&e, flag, s.stream);
        int host = -1;
        if (cudaMemcpyAsync(&host, flag, sizeof host, cudaMemcpyDeviceToHost, s.stream) ==
                cudaSuccess &&
            cudaStreamSynchronize(s.stream) == cudaSuccess)
            *rec = host ? 1 : 0;
        cudaFreeAsync(flag, s.stream);
    }
    (void)cudaGetLastError(); /* a failure leaves -1 (check at every run), not an error */
    xconv__cuda_leave(&s);
}

int xconv__cuda_wcheck_mode(const xconv_exec *e)
{
    if (!xconv__cuda_float_weights(e->p)) return 0;
    const int rec = e->packed ? *(const int *)e->packed : -1;
    return rec == 0 ? 0 : rec == 1 ? 1 : 2;
}

xconv_status xconv__cuda_generic_run(const xconv_exec *e, xconv_error *err)
{
    return xconv__cuda_run(e, "cuda.generic", err,
                           [&](cudaStream_t st) { xconv__cuda_generic_launch(e, st, nullptr); });
}

extern "C" const xconv_engine xconv__engine_cuda_generic = {
    "cuda.generic", XCONV_DEVICE_CUDA, generic_supports, generic_workspace_bytes, generic_cost,
    xconv__cuda_generic_run,
    nullptr /* no prepack */, nullptr, nullptr,
};
