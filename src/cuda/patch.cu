/*
 * patch.cu — "cuda.patch_tc": patch convolution (kernel == stride, no padding, no
 * dilation: the windows tile x) as a GEMM on the tensor cores. Each window's kernel dims are
 * folded into the channel dim, so the problem becomes a conv with fewer taps and longer
 * contiguous channel runs that the tensor-core kernels run as is (cuda.igemm_wgmma's on Hopper
 * where the folded problem takes the 16-byte loader, else cuda.igemm_tc's):
 *
 *   channels-last: x[n, .., q*K + k, c] is x'[n, .., q, k*C + c] when the windows of the
 *     innermost dims are contiguous ([K, C] rows); innermost dims first, each fold needs the
 *     dims inside it to have become trivial (one window).
 *   channels-first: only when x holds one window per image (a ViT patch embedding with the
 *     patches as the batch): x[n] is then one contiguous run of C * prod(K) values in the
 *     order of w[o] ([C, K..]), a 1x1 conv with C * prod(K) channels.
 *
 * qwenvl_patch (cin 3, k 2x14x14) becomes a 1x1 conv with 1176 channels in either layout.
 * Its rows (2352 bytes) do not start on 128-byte boundaries, and the kernel's TMA loads of such
 * rows are slow: the same GEMM ran 400 TFLOP/s with 1176 channels against 532-579 with 1152 or
 * 1216 (bf16, 16384 x 1152 outputs, one call). Copying x and w into the workspace with rows
 * padded to 1216 channels did not pay: the copies took 31 us (2.9 TB/s) of the GEMM's 18 us
 * saved, 397 -> 374 TFLOP/s (tried and dropped, tenth session). The same copy for folded rows
 * that are not whole 16-byte pieces (qwenvl_patch in i8: 1176 bytes, which cuda.fold_tc runs
 * at 141 TOP/s) ran it at 473 TOP/s (y i32) and 645 (y i8), but test_gpu failed on two such
 * problems with two images (the second image's outputs wrong: f8e5m2 exact, and f16 in one of
 * two runs under compute-sanitizer, which reported no memory error), so it was left out. The
 * likely cause (GPU.md, tenth session): the copy took output position j's pixel to be pixel j
 * of x also in the dims the fold leaves unfolded, where a stride or padding makes it
 * j * stride - pad_lo (or a zero row).
 */
#include "cuda/common.cuh"

namespace {

/* p with its kernel dims folded into channels; false when nothing folds. */
bool fold(const xconv_canon *p, xconv_canon *q)
{
    *q = *p;
    if (p->op != XCONV_OP_CONV || p->groups != 1) return false;
    bool folded = false;
    /* (the canonical form gives a single channel stride 0) */
    if (p->cin == 1 || (p->x_sc == 1 && p->w_si == 1)) {
        int64_t cc = p->cin;
        for (int d = 2; d >= 0; d--) {
            if (d < 2 && (q->x_size[d + 1] != 1 || q->y_size[d + 1] != 1 || q->k_size[d + 1] != 1))
                break;
            const int64_t K = q->k_size[d];
            if (K == 1) {
                if (q->x_size[d] == 1 && q->y_size[d] == 1) continue;
                break;
            }
            /* (one window: the canonical form sets its stride to 1) */
            if ((q->y_size[d] > 1 && q->stride[d] != K) || q->dil[d] != 1 || q->pad_lo[d] != 0 ||
                q->y_size[d] * K > q->x_size[d] ||
                q->x_ss[d] != cc || q->w_sk[d] != cc)
                break;
            /* one window left: never stepped, stride 0 like every size-1 dim */
            q->x_ss[d] = q->y_size[d] > 1 ? K * cc : 0;
            q->x_size[d] = q->y_size[d];
            q->k_size[d] = q->stride[d] = q->dil[d] = 1;
            q->pad_lo[d] = q->pad_hi[d] = 0;
            q->w_sk[d] = 0;
            cc *= K;
            folded = true;
        }
        q->cin = q->cin_g = cc;
        q->x_sc = q->w_si = 1;
        return folded;
    }
    /* channels-first, one window per image, x[n] and w[o] dense in [C, K..] order */
    int64_t xs = 1, ws = 1;
    for (int d = 2; d >= 0; d--) {
        const int64_t K = p->k_size[d];
        if (K != p->x_size[d] || p->y_size[d] != 1 || p->pad_lo[d] != 0 ||
            (K > 1 && p->dil[d] != 1))
            return false;
        if (K > 1 && (p->x_ss[d] != xs || p->w_sk[d] != ws)) return false;
        xs *= K, ws *= K;
    }
    if (xs == 1 || (p->cin > 1 && (p->x_sc != xs || p->w_si != ws))) return false;
    q->cin = q->cin_g = p->cin * xs;
    q->x_sc = q->w_si = 1;
    for (int d = 0; d < 3; d++) {
        q->x_size[d] = q->k_size[d] = q->stride[d] = q->dil[d] = 1;
        q->pad_lo[d] = q->pad_hi[d] = 0;
        q->x_ss[d] = q->w_sk[d] = 0;
    }
    return true;
}

bool patch_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.patch_tc runs on cuda tensors only", false;
    xconv_canon q;
    if (!fold(p, &q))
        return *why_not =
                   "cuda.patch_tc needs a patch conv: groups 1, kernel == stride, no padding or "
                   "dilation, "
                   "windows contiguous (channels-last) or one window per image (channels-first)",
               false;
    /* worth it only where the folded problem takes the cp.async loader; cuda.igemm_tc's
     * gathering loader runs the rest unfolded */
    const char *why;
    if (!xconv__cuda_igemm_fast_why(&q, &why))
        return *why_not = "cuda.patch_tc: the folded problem does not take the 16-byte loader "
                          "(channels-last rows "
                          "of 16-byte multiples)",
               false;
    return true;
}

size_t patch_workspace_bytes(const xconv_canon *) { return 0; }

/* Below cuda.igemm_tc: the same kernel with fewer, longer K runs. */
double patch_cost(const xconv_canon *p) { return 0.015 * p->flops + 2e4; }

xconv_status patch_run(const xconv_exec *e, xconv_error *err)
{
    xconv_canon q;
    fold(e->p, &q);
    return xconv__cuda_run(e, "cuda.patch_tc", err,
                           [&](cudaStream_t st) { xconv__cuda_tc_launch(&q, e, st); });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_patch = {
    "cuda.patch_tc",       XCONV_DEVICE_CUDA, patch_supports,
    patch_workspace_bytes, patch_cost,        patch_run,
    nullptr /* no prepack */, nullptr,
};
