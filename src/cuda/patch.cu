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

/* w's copies made once, at plan creation, for constant weights: qwenvl_patch bf16 on an H100
 * (thirty-second session) 448 -> 498 TFLOP/s channels-last, 448 -> 491 channels-first. The
 * row classes stay off by default: 477 / 475 with their copies made once, 293 / 295 at every
 * run (their 23.6 MB of copies), against w's single copy's 498 / 491. */
#ifndef PATCH_CLASSES_DEFAULT
#define PATCH_CLASSES_DEFAULT 0
#endif
#ifndef PATCH_PREPACK_DEFAULT
#define PATCH_PREPACK_DEFAULT 1
#endif

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

/* The copies, by mode:
 *   COPY_XW: q does not take the 16-byte loader (rows that are not whole 16-byte pieces): x
 *     and w copied into rows of cpad channels (whole 128-byte blocks), where the padding adds
 *     at most half the row; r is q over the copies.
 *   COPY_W: q takes it, but its 16-bit rows are off 128-byte lines (qwenvl_patch: 2352 bytes)
 *     and the GEMM is long (PATCH_W_MIN_POS positions, so that copying w costs little beside
 *     it): w alone into rows of cpad channels. Every TMA box row of w then starts a line; x's
 *     stay as they are. r is q over w's copy.
 *   COPY_CLASSES: as COPY_W, but x's rows are read off lines no more either (class_plan).
 * XCONV_PATCH_PAD=1 takes COPY_XW wherever it applies (tests), =w COPY_W, =c COPY_CLASSES,
 * =0 none of the last two. */
#define PATCH_W_MIN_POS 2048
enum copy_mode { COPY_XW = 1, COPY_W, COPY_CLASSES };
constexpr int MAX_CLASSES = XCONV_CUDA_TC_SET_MAX;
struct padded {
    copy_mode   mode;
    xconv_canon r;
    int64_t     cpad;              /* the copies' row pitch, in elements */
    size_t      x_bytes, w_bytes;  /* the copies, each rounded up to 256 bytes (x: 0 if none) */
    /* COPY_CLASSES: class j's problem (B: w's copy j) and the view its A tiles take */
    int         classes;
    int         shift[MAX_CLASSES];
    xconv_canon job[MAX_CLASSES], a[MAX_CLASSES];
};

/* Whether a plan with constant weights makes w's copies once (XCONV_PATCH_PREPACK=1 or =0
 * turns it on or off, else PATCH_PREPACK_DEFAULT). */
bool prepack_on()
{
    const char *env = getenv("XCONV_PATCH_PREPACK");
    return env ? env[0] == '1' : PATCH_PREPACK_DEFAULT;
}

/* The knob's first character (0 where unset): read at plan creation and again at each run. */
char pad_knob()
{
    const char *env = getenv("XCONV_PATCH_PAD");
    return env ? env[0] : 0;
}

/* Whether q's positions (images, then the spatial dims) lie at one pitch in x (of_x) or y:
 * position m at m * *pitch elements from the first. */
bool even_rows(const xconv_canon *q, bool of_x, int64_t *pitch)
{
    const int64_t size[4] = {q->n, q->y_size[0], q->y_size[1], q->y_size[2]};
    int64_t step[4];
    step[0] = of_x ? q->x_sn : q->y_sn;
    for (int d = 0; d < 3; d++) step[1 + d] = of_x ? q->stride[d] * q->x_ss[d] : q->y_ss[d];
    int64_t p = 0, span = 1;
    for (int d = 3; d >= 0; d--) {
        if (size[d] == 1) continue;
        if (span == 1) p = step[d];
        else if (step[d] != p * span) return false;
        span *= size[d];
    }
    *pitch = p;
    return span > 1 && p > 0;
}

/* Row classes. A folded 1x1 problem whose x rows (16-bit, whole 16-byte pieces) lie at one
 * pitch off 128-byte lines reads each row's 128-byte blocks across two lines; rows j, j + C,
 * j + 2C, .. (class j) start at one offset s_j into their line, C = 128 / gcd(pitch, 128) <= 8
 * classes (qwenvl_patch: 2352-byte rows, 8 classes, s_j = 0, 24, 48, 8, 32, 56, 16, 40
 * channels). Class j runs as a problem of its own, in one launch with the others: its A tiles
 * start s_j channels before each row (the copy engine fills those with zeros, as it does past
 * the row's end), so that every box row starts a line, and B reads w's copy j, rows shifted by
 * s_j channels in rows of cpad. The offsets assume x's buffer starts a 128-byte line (a
 * cudaMalloc'ed one does); any other start still sums right, with lines split. */
bool class_plan(const xconv_canon *q, padded *pd)
{
    const int64_t es = (int64_t)xconv_dtype_size(q->x_dtype), line = 128 / es;
    if (es != 2 || q->groups != 1 || q->x_sc != 1 || q->w_si != 1 || xconv__prod3(q->k_size) != 1)
        return false;
    for (int d = 0; d < 3; d++)
        if (q->pad_lo[d] || q->pad_hi[d]) return false;
    int64_t px, py;
    if (!even_rows(q, true, &px) || !even_rows(q, false, &py) || (px * es) % 16 ||
        (px * es) % 128 == 0)
        return false;
    int C = 1;
    while ((C * px * es) % 128) C++;
    const int64_t M = q->n * xconv__prod3(q->y_size);
    if (C > MAX_CLASSES || M < C) return false;
    int most = 0;
    for (int j = 0; j < C; j++) {
        pd->shift[j] = (int)(((q->x_off + j * px) * es % 128 + 128) % 128 / es);
        if (pd->shift[j] > most) most = pd->shift[j];
    }
    const int64_t cpad = (most + q->cin + line - 1) / line * line;
    for (int j = 0; j < C; j++) {
        xconv_canon r = *q;
        r.n = (M - j + C - 1) / C;
        for (int d = 0; d < 3; d++) {
            r.x_size[d] = r.y_size[d] = 1;
            r.x_ss[d] = r.y_ss[d] = r.w_sk[d] = 0;
            r.stride[d] = r.dil[d] = 1;
        }
        r.x_off = q->x_off + j * px, r.x_sn = C * px;
        r.y_off = q->y_off + j * py, r.y_sn = C * py;
        pd->a[j] = r; /* x's rows as they are */
        r.cin = r.cin_g = pd->shift[j] + q->cin;
        r.w_off = j * q->cout * cpad, r.w_so = cpad, r.w_sg = cpad * q->cout, r.w_si = 1;
        if (!xconv__cuda_igemm_fast(&r) || !xconv__cuda_igemm_fast(&pd->a[j])) return false;
        pd->job[j] = r;
    }
    pd->mode = COPY_CLASSES;
    pd->classes = C;
    pd->cpad = cpad;
    pd->x_bytes = 0;
    pd->w_bytes = xconv__cuda_align256((size_t)(C * q->cout * cpad * es));
    return true;
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
        if (knob == '0' || (knob != 'w' && knob != 'c' && !w_pays)) return false;
        /* (by default only where the class copies are made once: 23.6 MB for qwenvl_patch) */
        if (knob == 'c' || (knob != 'w' && PATCH_CLASSES_DEFAULT && q->constant_weights && prepack_on()))
            if (class_plan(q, pd)) return true;
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
    pd->mode = copy_x ? COPY_XW : COPY_W;
    pd->r = r;
    pd->cpad = cpad;
    pd->x_bytes = copy_x ? xconv__cuda_align256((size_t)(q->n * r.x_sn * es)) : 0;
    pd->w_bytes = xconv__cuda_align256((size_t)(q->cout * r.w_so * es));
    return true;
}

/* dst[row][0, cpad) = shift zeros, the src row (cin elements), then zeros; row = ((a * D0 +
 * i0) * D1 + i1) * D2 + i2 at src element base + a*sa + i0*s[0] + i1*s[1] + i2*s[2]: x over
 * (n, positions), w over (o, taps). A block per row (grid-stride), threads along it. */
template <class T>
__global__ void pad_rows(const T *__restrict__ src, T *__restrict__ dst, int64_t rows, int cin,
                         int cpad, int shift, int64_t base, int64_t sa, int64_t s0, int64_t s1,
                         int64_t s2, int64_t D0, int64_t D1, int64_t D2)
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
        for (int c = threadIdx.x; c < cpad; c += blockDim.x)
            d[c] = c >= shift && c < shift + cin ? s[c - shift] : (T)0;
    }
}

template <class T>
void launch_pad(const T *src, T *dst, int64_t rows, const xconv_canon *q, int64_t cpad,
                int64_t base, int64_t sa, const int64_t s[3], const int64_t D[3], cudaStream_t st,
                int shift = 0)
{
    const int64_t cap = (int64_t)xconv__cuda_device_sms(q->device_index) * 16;
    const unsigned blocks = (unsigned)(rows < cap ? rows : cap);
    const int threads = cpad >= 256 ? 256 : 128;
    pad_rows<T><<<blocks, threads, 0, st>>>(src, dst, rows, (int)q->cin, (int)cpad, shift, base,
                                            sa, s[0], s[1], s[2], D[0], D[1], D[2]);
}

/* The copies of w that pd's mode reads (into wdst) and of x (COPY_XW, into xdst). */
void make_copies(const xconv_canon *q, const padded &pd, const void *x, const void *w, void *xdst,
                 void *wdst, cudaStream_t st)
{
    if (pd.mode == COPY_CLASSES) { /* copy j: w's rows shifted by s_j (16-bit, one tap) */
        for (int j = 0; j < pd.classes; j++)
            launch_pad<uint16_t>((const uint16_t *)w, (uint16_t *)wdst + j * q->cout * pd.cpad,
                                 q->cout, q, pd.cpad, q->w_off, q->w_so, q->w_sk, q->k_size, st,
                                 pd.shift[j]);
        return;
    }
    auto copy = [&](auto t) {
        using T = decltype(t);
        if (pd.mode == COPY_XW)
            launch_pad<T>((const T *)x, (T *)xdst, q->n * xconv__prod3(q->x_size), q, pd.cpad,
                          q->x_off, q->x_sn, q->x_ss, q->x_size, st);
        launch_pad<T>((const T *)w, (T *)wdst, q->cout * xconv__prod3(q->k_size), q, pd.cpad,
                      q->w_off, q->w_so, q->w_sk, q->k_size, st);
    };
    if (xconv_dtype_size(q->x_dtype) == 1) copy(uint8_t{});
    else copy(uint16_t{});
}

/* q's run over the copies (x in place but for COPY_XW); a launch the wgmma kernel cannot take
 * (the row classes' views need its TMA loads) runs q over x and w as they are. */
void launch_copies(const xconv_canon *q, const padded &pd, const xconv_exec *e, const void *xc,
                   const void *wc, cudaStream_t st)
{
    if (pd.mode == COPY_CLASSES) {
        const xconv_exec inner = xconv__cuda_inner_exec(e, &pd.job[0], e->x, wc, e->y);
        const xconv_tc_views av = {pd.a, pd.shift};
        if (!xconv__cuda_tc_launch_set(pd.job, pd.classes, &inner, st, &av))
            xconv__cuda_tc_launch(q, e, st);
        return;
    }
    const xconv_exec inner = xconv__cuda_inner_exec(e, &pd.r, pd.mode == COPY_XW ? xc : e->x, wc, e->y);
    xconv__cuda_tc_launch(&pd.r, &inner, st);
}

/* With constant weights, w's copies (COPY_W, COPY_CLASSES) are made once, at plan creation,
 * into device memory of the plan's own, whose address the packed bytes keep. */
struct patch_packed {
    char  knob;  /* the mode's knob ('w' or 'c'): pad_plan gives the same views at each run */
    void *dev;   /* the copies; null when they could not be made (runs read w as it is) */
};

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

size_t patch_prepack_bytes(const xconv_canon *p)
{
    if (!prepack_on()) return 0;
    xconv_canon q;
    padded pd;
    fold(p, &q);
    return pad_plan(&q, pad_knob(), &pd) && pd.mode != COPY_XW ? sizeof(patch_packed) : 0;
}

void patch_prepack(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed)
{
    patch_packed *pk = (patch_packed *)packed;
    pk->knob = 0, pk->dev = nullptr;
    xconv_canon q;
    padded pd;
    fold(p, &q);
    if (!pad_plan(&q, pad_knob(), &pd) || pd.mode == COPY_XW) return;
    xconv_exec e;
    xconv_cuda_scope s;
    if (!xconv__cuda_prepack_enter(p, ctx, w, &e, &s)) return;
    void *dev = nullptr;
    if (cudaMalloc(&dev, pd.w_bytes) == cudaSuccess) {
        make_copies(&q, pd, nullptr, w, nullptr, dev, s.stream);
        if (cudaStreamSynchronize(s.stream) == cudaSuccess && cudaGetLastError() == cudaSuccess) {
            pk->knob = pd.mode == COPY_CLASSES ? 'c' : 'w';
            pk->dev = dev;
        } else {
            cudaFree(dev);
        }
    }
    (void)cudaGetLastError(); /* a failure leaves no copies: the runs read w as it is */
    xconv__cuda_leave(&s);
}

void patch_release(const xconv_canon *p, void *packed)
{
    patch_packed *pk = (patch_packed *)packed;
    if (!pk->dev) return;
    int prev = 0;
    const bool got = cudaGetDevice(&prev) == cudaSuccess;
    if (cudaSetDevice(p->device_index) == cudaSuccess) cudaFree(pk->dev);
    if (got) cudaSetDevice(prev);
    (void)cudaGetLastError();
    pk->dev = nullptr;
}

size_t patch_workspace_bytes(const xconv_canon *p)
{
    if (p->prepacked) return 0; /* (w's copies only, held by the plan) */
    xconv_canon q;
    padded pd;
    fold(p, &q);
    return pad_plan(&q, pad_knob(), &pd) ? pd.x_bytes + pd.w_bytes : 0;
}

/* Below cuda.igemm_tc: the same kernel with fewer, longer K runs; the copies add their zero
 * channels and the bytes they move (as cuda.cf_tc's transposes; engines are chosen before any
 * prepack, so w's copies count even where the plan will make them once). */
double patch_cost(const xconv_canon *p)
{
    xconv_canon q;
    padded pd;
    fold(p, &q);
    if (!pad_plan(&q, pad_knob(), &pd)) return 0.015 * p->flops + 2e4;
    return 0.015 * p->flops * (pd.mode == COPY_XW ? (double)pd.cpad / (double)q.cin : 1.0) +
           1.5 * (double)(pd.x_bytes + pd.w_bytes) + 4e4;
}

xconv_status patch_run(const xconv_exec *e, xconv_error *err)
{
    xconv_canon q;
    padded pd;
    fold(e->p, &q);
    const patch_packed *pk = (const patch_packed *)e->packed;
    bool pad = false, runs = false;
    if (pk) { /* the plan's copies, or none (q takes the 16-byte loader: no x copy planned) */
        pad = pk->dev && pad_plan(&q, pk->knob, &pd);
        runs = true;
    } else {
        /* The knob as it is now, unless the plan was made under another setting whose copies
         * differ: then the first setting whose copies fit the plan's workspace and that runs q
         * (one of them is the plan's own), so that a knob changed between plan and run never
         * writes past the workspace. */
        const char knobs[6] = {pad_knob(), 0, '0', 'w', 'c', '1'};
        for (int i = 0; i < 6 && !runs; i++) {
            pad = pad_plan(&q, knobs[i], &pd);
            runs = pad ? pd.x_bytes + pd.w_bytes <= e->workspace_bytes : xconv__cuda_igemm_fast(&q);
        }
    }
    if (!runs) /* (unreachable: the plan's own setting runs) */
        return xconv__fail(err, XCONV_STATUS_INTERNAL, NULL,
                           "cuda.patch_tc: no copy of x and w fits the plan's workspace");
    return xconv__cuda_run(e, "cuda.patch_tc", err, [&](cudaStream_t st) {
        if (!pad) {
            xconv__cuda_tc_launch(&q, e, st);
            return;
        }
        char *xw = (char *)e->workspace, *ww = pk ? (char *)pk->dev : xw + pd.x_bytes;
        if (!pk) make_copies(&q, pd, e->x, e->w, xw, ww, st);
        launch_copies(&q, pd, e, xw, ww, st);
    });
}

} /* namespace */

extern "C" const xconv_engine xconv__engine_cuda_patch = {
    "cuda.patch_tc",       XCONV_DEVICE_CUDA, patch_supports,
    patch_workspace_bytes, patch_cost,        patch_run,
    patch_prepack_bytes,   patch_prepack,     patch_release, /* constant weights: w copied once */
};
