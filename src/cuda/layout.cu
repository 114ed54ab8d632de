/*
 * layout.cu — "cuda.cf_tc": channels-first problems on the channels-last tensor-core kernels.
 * The tensor-core loaders want each pixel's channels as contiguous 16-byte runs, which
 * channels-first x does not have (cuda.igemm_tc's gathering loader reaches 5-20% of cuDNN
 * there). This engine transposes x to [N, X.., C] and w to [Cout, K.., Cin/g] in the
 * workspace, runs the channels-last problem (conv: cuda.igemm_wgmma's kernel where it fits,
 * else cuda.igemm_tc's 16-byte loader; conv_transpose: cuda.deconv_tc), writing y as
 * [N, Y.., Cout] in the workspace, and transposes y back into the caller's layout. The
 * transposes are bandwidth-bound tiled kernels (32 x 32 tiles through shared memory, both
 * sides coalesced), a few percent of a large layer's time.
 *
 * Needs: spatial dims dense in x and y (each channel plane one run), kernel dims dense in w,
 * one weight stride across groups, and a channels-last problem the tensor cores take.
 * Results are the inner engine's, bit for bit: a transpose moves values, never rounds.
 */
#include "cuda/common.cuh"

extern "C" const xconv_engine xconv__engine_cuda_deconv;

namespace {

constexpr int TILE = 32, ROWS = 8;

/*
 * dst[b, q, r] = src[b, r, q] for r < R, q < Q: src rows r at stride src_r with q contiguous;
 * dst rows q at stride dst_q with r contiguous; batches at src_b / dst_b. Element type T is
 * the storage dtype's bits (1, 2 or 4 bytes).
 */
template <typename T>
__global__ void transpose(const T *src, T *dst, int64_t R, int64_t Q, int64_t src_b,
                          int64_t src_r, int64_t dst_b, int64_t dst_q)
{
    __shared__ T tile[TILE][TILE + 1];
    const int64_t b = blockIdx.z, q0 = (int64_t)blockIdx.x * TILE, r0 = (int64_t)blockIdx.y * TILE;
    const T *s = src + b * src_b;
    T *d = dst + b * dst_b;
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const int64_t r = r0 + j, q = q0 + threadIdx.x;
        if (r < R && q < Q) tile[j][threadIdx.x] = s[r * src_r + q];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const int64_t q = q0 + j, r = r0 + threadIdx.x;
        if (r < R && q < Q) d[q * dst_q + r] = tile[threadIdx.x][j];
    }
}

void launch_transpose(size_t es, const void *src, void *dst, int64_t B, int64_t R, int64_t Q,
                      int64_t src_b, int64_t src_r, int64_t dst_b, int64_t dst_q,
                      cudaStream_t stream)
{
    if (B == 0 || R == 0 || Q == 0) return;
    const dim3 grid((unsigned)((Q + TILE - 1) / TILE), (unsigned)((R + TILE - 1) / TILE),
                    (unsigned)B);
    const dim3 block(TILE, ROWS);
    switch (es) {
    case 1: transpose<uint8_t><<<grid, block, 0, stream>>>((const uint8_t *)src, (uint8_t *)dst, R, Q, src_b, src_r, dst_b, dst_q); break;
    case 2: transpose<uint16_t><<<grid, block, 0, stream>>>((const uint16_t *)src, (uint16_t *)dst, R, Q, src_b, src_r, dst_b, dst_q); break;
    default: transpose<uint32_t><<<grid, block, 0, stream>>>((const uint32_t *)src, (uint32_t *)dst, R, Q, src_b, src_r, dst_b, dst_q); break;
    }
}

struct cf_layout {
    xconv_canon q;               /* the channels-last problem over the workspace */
    size_t      x_bytes, w_bytes, y_bytes;
};

/* p rewritten over channels-last copies at offsets 0 of their workspace parts. */
cf_layout layout_of(const xconv_canon *p)
{
    cf_layout l;
    l.q = *p;
    xconv_canon &q = l.q;
    const int64_t xs = xconv__prod3(p->x_size), ys = xconv__prod3(p->y_size),
                  kk = xconv__prod3(p->k_size);
    q.x_off = 0, q.x_sc = 1, q.x_sn = p->n > 1 ? xs * p->cin : 0;
    xconv__cuda_dense_strides(p->x_size, p->cin, q.x_ss);
    q.y_off = 0, q.y_sc = 1, q.y_sn = p->n > 1 ? ys * p->cout : 0;
    xconv__cuda_dense_strides(p->y_size, p->cout, q.y_ss);
    q.w_off = 0, q.w_si = 1, q.w_so = kk * p->cin_g, q.w_sg = p->groups > 1 ? p->cout_g * q.w_so : 0;
    xconv__cuda_dense_strides(p->k_size, p->cin_g, q.w_sk);
    const size_t xes = xconv_dtype_size(p->x_dtype), yes = xconv_dtype_size(p->y_dtype);
    l.x_bytes = xconv__cuda_align256(xes * (size_t)(p->n * xs * p->cin));
    l.w_bytes = xconv__cuda_align256(xes * (size_t)(p->cout * kk * p->cin_g));
    l.y_bytes = xconv__cuda_align256(yes * (size_t)(p->n * ys * p->cout));
    return l;
}

bool cf_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA) return *why_not = "cuda.cf_tc runs on cuda tensors only", false;
    if (p->x_sc == 1 && p->cin > 1)
        return *why_not = "cuda.cf_tc is for channels-first x (channels not contiguous)", false;
    const size_t xes = xconv_dtype_size(p->x_dtype), yes = xconv_dtype_size(p->y_dtype);
    if (xes > 2 || (yes != 1 && yes != 2 && yes != 4))
        return *why_not = "cuda.cf_tc takes 1- or 2-byte x and 1-, 2- or 4-byte y", false;
    if (!xconv__cuda_dense_spatial(p->x_size, p->x_ss) ||
        !xconv__cuda_dense_spatial(p->y_size, p->y_ss) ||
        !xconv__cuda_dense_spatial(p->k_size, p->w_sk))
        return *why_not = "cuda.cf_tc needs dense spatial dims in x and y and dense kernel dims in w",
               false;
    if (p->groups > 1 && p->w_sg != p->cout_g * p->w_so)
        return *why_not = "cuda.cf_tc needs one weight stride across groups", false;
    if (p->n > 65535 || p->cout > 65535 || p->cin / TILE >= 65535 || p->cin_g / TILE >= 65535 ||
        xconv__prod3(p->y_size) / TILE >= 65535)
        return *why_not = "cuda.cf_tc: too large for its transpose grids", false;
    const cf_layout l = layout_of(p);
    if (p->op == XCONV_OP_CONV) {
        const char *why;
        if (!xconv__cuda_igemm_fast_why(&l.q, &why))
            return *why_not = "cuda.cf_tc: the channels-last problem does not take the 16-byte "
                              "tensor-core loader (cin/groups a multiple of 16 bytes)",
                   false;
        return true;
    }
    if ((p->cin_g * (int64_t)xes) % 16 || !xconv__engine_cuda_deconv.supports(&l.q, why_not))
        return *why_not = "cuda.cf_tc: the channels-last conv_transpose does not take "
                          "cuda.deconv_tc's 16-byte loader",
               false;
    return true;
}

size_t cf_workspace_bytes(const xconv_canon *p)
{
    const cf_layout l = layout_of(p);
    const bool flag = p->op != XCONV_OP_CONV && xconv__cuda_float_weights(p);
    return l.x_bytes + l.w_bytes + l.y_bytes + (flag ? 256 : 0); /* cuda.deconv_tc's flag */
}

/* The tensor-core kernels' cost (wgmma's, the likeliest), plus the transposes: each byte
 * moved costs about what 150 multiply-adds do at the tensor cores' rate. */
double cf_cost(const xconv_canon *p)
{
    const cf_layout l = layout_of(p);
    const double moved = 2.0 * (double)(l.x_bytes + l.y_bytes) + 2.0 * (double)l.w_bytes;
    return (p->op == XCONV_OP_CONV ? 0.012 : 0.015) * p->flops + 1.5 * moved + 6e4;
}

xconv_status cf_run(const xconv_exec *e, xconv_error *err)
{
    const xconv_canon *p = e->p;
    const cf_layout l = layout_of(p);
    char *ws = (char *)e->workspace;
    char *xw = ws, *ww = ws + l.x_bytes, *yw = ww + l.w_bytes;
    const size_t xes = xconv_dtype_size(p->x_dtype), yes = xconv_dtype_size(p->y_dtype);
    const int64_t xs = xconv__prod3(p->x_size), ys = xconv__prod3(p->y_size),
                  kk = xconv__prod3(p->k_size);
    const xconv_exec inner = xconv__cuda_inner_exec(e, &l.q, xw, ww, yw);
    const int mode = p->op != XCONV_OP_CONV ? xconv__cuda_wcheck_mode(e) : 0;
    int *flag = mode == 2 ? (int *)(yw + l.y_bytes) : nullptr;
    return xconv__cuda_run(e, "cuda.cf_tc", err, [&](cudaStream_t st) {
        if (mode == 1) { /* constant weights with an Inf or NaN: the gather formula alone */
            xconv__cuda_generic_launch(e, st, nullptr);
            return;
        }
        if (flag) xconv__cuda_flag_nonfinite_w(e, flag, st);
        /* x[n, c, s] -> xw[n, s, c]; w[o, i, k] -> ww[o, k, i] (o over every group) */
        launch_transpose(xes, (const char *)e->x + p->x_off * (int64_t)xes, xw, p->n, p->cin, xs,
                         p->x_sn, p->x_sc, xs * p->cin, p->cin, st);
        launch_transpose(xes, (const char *)e->w + p->w_off * (int64_t)xes, ww, p->cout, p->cin_g,
                         kk, p->w_so, p->w_si, kk * p->cin_g, p->cin_g, st);
        if (p->op == XCONV_OP_CONV) xconv__cuda_tc_launch(&l.q, &inner, st);
        else xconv__cuda_deconv_launch(&l.q, &inner, st);
        /* yw[n, s, c] -> y[n, c, s] */
        launch_transpose(yes, yw, (char *)e->y + p->y_off * (int64_t)yes, p->n, ys, p->cout,
                         ys * p->cout, p->cout, p->y_sn, p->y_sc, st);
        if (flag) xconv__cuda_generic_launch(e, st, flag); /* as cuda.deconv_tc's */
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_cf = {
    "cuda.cf_tc",       XCONV_DEVICE_CUDA, cf_supports,
    cf_workspace_bytes, cf_cost,           cf_run,
    xconv__cuda_wcheck_bytes, xconv__cuda_wcheck_prepack, /* constant weights: checked once */
    nullptr,
};
