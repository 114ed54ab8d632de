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
 * rows are slow: the same GEMM ran 343 TFLOP/s with 1176 channels against 545-568 with 1216 or
 * 1152 (bf16, 16384 x 1152 outputs, an H100). Copying x as well costs more than it saves (31
 * us of the GEMM's 18 us saved, tenth session), but w is small (2.7 MB against x's 38.5 MB):
 * with only w copied into rows of 1216 channels, 343 -> 448 TFLOP/s in either layout
 * (thirtieth session). The folded problem keeps 1176 channels: its last k-block reads past
 * the rows' ends, which both TMA maps fill with zeros, so w's padding is never read; only the
 * rows' pitch (2432 bytes) changes.
 *
 * Folded rows that are not whole 16-byte pieces (qwenvl_patch in i8 / u8 / fp8: 1176 bytes)
 * cannot take the 16-byte loader at all, so there the copy pays: x and w are copied into the
 * workspace over the folded problem's own grids (x's positions, w's taps: strides and padding of
 * the dims left unfolded stay as they are) with rows padded by zeros to whole 128-byte blocks,
 * and the folded conv runs over the copies (zero channels add 0 * 0). Taken where the padding
 * adds at most half the row; XCONV_PATCH_PAD=1 takes it wherever it applies (tests).
 */
#include "cuda/common.cuh"

#include <stdlib.h>

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

/* The padded copies: r is the folded q over a dense copy of w in the workspace with rows of
 * cpad channels (whole 128-byte blocks), and of x too where copy_x. Two cases:
 *   - q does not take the 16-byte loader (rows that are not whole 16-byte pieces): x and w,
 *     where the padding adds at most half the row;
 *   - q takes it, but its 16-bit rows are off 128-byte boundaries (qwenvl_patch: 2352 bytes)
 *     and the GEMM is long (PATCH_W_MIN_POS positions, so that copying w costs little beside
 *     it): w alone. Every TMA box row of w then starts a 128-byte line; x's stay as they are.
 * XCONV_PATCH_PAD=1 takes the first wherever it applies (tests), =w the second, =0 neither
 * in the second case. */
#define PATCH_W_MIN_POS 2048
struct padded {
    xconv_canon r;
    int64_t     cpad;
    bool        copy_x;
    size_t      x_bytes, w_bytes; /* the copies, each rounded up to 256 bytes (x: 0 if not) */
};

/* The knob's first character (0 where unset): read at plan creation and again at each run. */
char pad_knob()
{
    const char *env = getenv("XCONV_PATCH_PAD");
    return env ? env[0] : 0;
}

bool pad_plan(const xconv_canon *q, char knob, padded *pd)
{
    const int64_t es = (int64_t)xconv_dtype_size(q->x_dtype);
    if (es > 2 || q->x_sc != 1 || q->w_si != 1 || q->groups != 1) return false;
    const int64_t row = q->cin * es, cpad = (row + 127) / 128 * 128 / es;
    bool copy_x;
    if (!xconv__cuda_igemm_fast(q)) {
        if (knob != '1' && 2 * (cpad - q->cin) > q->cin) return false;
        copy_x = true;
    } else if (knob == '1') {
        copy_x = true;
    } else {
        const bool w_pays = es == 2 && row % 128 && q->n * xconv__prod3(q->y_size) >= PATCH_W_MIN_POS;
        if (knob == '0' || (knob != 'w' && !w_pays)) return false;
        copy_x = false;
    }
    xconv_canon r = *q;
    if (copy_x) {
        r.cin = r.cin_g = cpad;
        r.x_off = 0, r.x_sc = 1;
        xconv__cuda_dense_strides(q->x_size, cpad, r.x_ss);
        r.x_sn = xconv__prod3(q->x_size) * cpad;
    }
    r.w_off = 0, r.w_si = 1;
    xconv__cuda_dense_strides(q->k_size, cpad, r.w_sk);
    r.w_so = xconv__prod3(q->k_size) * cpad;
    r.w_sg = r.w_so * q->cout_g;
    if (!xconv__cuda_igemm_fast(&r)) return false;
    pd->r = r;
    pd->cpad = cpad;
    pd->copy_x = copy_x;
    pd->x_bytes = copy_x ? xconv__cuda_align256((size_t)(q->n * r.x_sn * es)) : 0;
    pd->w_bytes = xconv__cuda_align256((size_t)(q->cout * r.w_so * es));
    return true;
}

/* dst[row][0, cpad) = src row (cin elements) then zeros; row = ((a * D0 + i0) * D1 + i1) * D2
 * + i2 at src element base + a*sa + i0*s[0] + i1*s[1] + i2*s[2]: x over (n, positions), w over
 * (o, taps). A block per row (grid-stride), threads along it. */
template <class T>
__global__ void pad_rows(const T *__restrict__ src, T *__restrict__ dst, int64_t rows, int cin,
                         int cpad, int64_t base, int64_t sa, int64_t s0, int64_t s1, int64_t s2,
                         int64_t D0, int64_t D1, int64_t D2)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t t = r;
        const int64_t i2 = t % D2;
        t /= D2;
        const int64_t i1 = t % D1;
        t /= D1;
        const int64_t i0 = t % D0, a = t / D0;
        const T *s = src + base + a * sa + i0 * s0 + i1 * s1 + i2 * s2;
        T *d = dst + r * cpad;
        for (int c = threadIdx.x; c < cpad; c += blockDim.x) d[c] = c < cin ? s[c] : (T)0;
    }
}

template <class T>
void launch_pad(const T *src, T *dst, int64_t rows, const xconv_canon *q, int64_t cpad,
                int64_t base, int64_t sa, const int64_t s[3], const int64_t D[3], cudaStream_t st)
{
    const int64_t cap = (int64_t)xconv__cuda_device_sms(q->device_index) * 16;
    const unsigned blocks = (unsigned)(rows < cap ? rows : cap);
    const int threads = cpad >= 256 ? 256 : 128;
    pad_rows<T><<<blocks, threads, 0, st>>>(src, dst, rows, (int)q->cin, (int)cpad, base, sa, s[0],
                                            s[1], s[2], D[0], D[1], D[2]);
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
    padded pd;
    if (!xconv__cuda_igemm_fast_why(&q, &why) && !pad_plan(&q, pad_knob(), &pd))
        return *why_not = "cuda.patch_tc: the folded problem does not take the 16-byte loader "
                          "(channels-last rows of 16-byte multiples), nor does its padded copy",
               false;
    return true;
}

size_t patch_workspace_bytes(const xconv_canon *p)
{
    xconv_canon q;
    padded pd;
    fold(p, &q);
    return pad_plan(&q, pad_knob(), &pd) ? pd.x_bytes + pd.w_bytes : 0;
}

/* Below cuda.igemm_tc: the same kernel with fewer, longer K runs; the padded copy adds its
 * zero channels and the bytes it moves (as cuda.cf_tc's transposes). */
double patch_cost(const xconv_canon *p)
{
    xconv_canon q;
    padded pd;
    fold(p, &q);
    if (!pad_plan(&q, pad_knob(), &pd)) return 0.015 * p->flops + 2e4;
    return 0.015 * p->flops * (pd.copy_x ? (double)pd.cpad / (double)q.cin : 1.0) +
           1.5 * (double)(pd.x_bytes + pd.w_bytes) + 4e4;
}

xconv_status patch_run(const xconv_exec *e, xconv_error *err)
{
    xconv_canon q;
    padded pd;
    fold(e->p, &q);
    /* The knob as it is now, unless the plan was made under another setting whose copies
     * differ: then the first setting whose copies fit the plan's workspace and that runs q
     * (one of them is the plan's own), so that a knob changed between plan and run never
     * writes past the workspace. */
    bool pad = false, runs = false;
    const char knobs[5] = {pad_knob(), 0, '0', 'w', '1'};
    for (int i = 0; i < 5 && !runs; i++) {
        pad = pad_plan(&q, knobs[i], &pd);
        runs = pad ? pd.x_bytes + pd.w_bytes <= e->workspace_bytes : xconv__cuda_igemm_fast(&q);
    }
    if (!runs) /* (unreachable: the plan's own setting runs) */
        return xconv__fail(err, XCONV_STATUS_INTERNAL, NULL,
                           "cuda.patch_tc: no copy of x and w fits the plan's workspace");
    return xconv__cuda_run(e, "cuda.patch_tc", err, [&](cudaStream_t st) {
        if (!pad) {
            xconv__cuda_tc_launch(&q, e, st);
            return;
        }
        char *xw = (char *)e->workspace, *ww = xw + pd.x_bytes;
        auto copy = [&](auto t) {
            using T = decltype(t);
            if (pd.copy_x)
                launch_pad<T>((const T *)e->x, (T *)xw, q.n * xconv__prod3(q.x_size), &q, pd.cpad,
                              q.x_off, q.x_sn, q.x_ss, q.x_size, st);
            launch_pad<T>((const T *)e->w, (T *)ww, q.cout * xconv__prod3(q.k_size), &q, pd.cpad,
                          q.w_off, q.w_so, q.w_sk, q.k_size, st);
        };
        if (xconv_dtype_size(q.x_dtype) == 1) copy(uint8_t{});
        else copy(uint16_t{});
        const xconv_exec inner = xconv__cuda_inner_exec(e, &pd.r, pd.copy_x ? xw : e->x, ww, e->y);
        xconv__cuda_tc_launch(&pd.r, &inner, st);
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_patch = {
    "cuda.patch_tc",       XCONV_DEVICE_CUDA, patch_supports,
    patch_workspace_bytes, patch_cost,        patch_run,
    nullptr /* no prepack */, nullptr,
};
