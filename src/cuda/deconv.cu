/*
 * deconv.cu — "cuda.deconv_tc": conv_transpose on the tensor cores without a column buffer,
 * by stride phases. Output j = r + s*u (phase r in [0, s)) is hit by the taps k with
 * r + lo - k*t = 0 mod s, i.e. k = k_r + i*(s/g) (g = gcd(s, t)), and tap i reads
 *   x[u + c_r - i*(t/g)],   c_r = (r + lo - k_r*t) / s,
 * so each phase is a plain conv over x: stride 1, dilation -(t/g), padding -c_r, the phase's
 * taps of w (every (s/g)-th from k_r), y viewed with stride s from r. The tensor-core kernel
 * (cuda.igemm_wgmma's on Hopper where the phase takes the 16-byte loader, else cuda.igemm_tc's)
 * runs the phases as they are: all in one launch of the wgmma TMA kernel where it takes them
 * (up to 8 phases with taps; one launch per phase left each phase's last wave of blocks
 * part-empty), else one launch per phase (the cp.async loader for channels-last rows of
 * 16-byte multiples, the gathering loader otherwise); a phase no tap hits gets the bias (or
 * 0) through the same kernel with an empty reduction, like the gather formula of ref.tmpl.h.
 */
#include "cuda/common.cuh"

#include <stdlib.h>

namespace {

constexpr int MAX_PHASES = 512; /* one launch per phase */

int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The conv of phase (r0, r1, r2); false when the phase has no outputs. */
bool phase(const xconv_canon *p, const int64_t r[3], xconv_canon *q)
{
    *q = *p;
    q->op = XCONV_OP_CONV;
    for (int d = 0; d < 3; d++) {
        const int64_t s = p->stride[d], t = p->dil[d], lo = p->pad_lo[d], K = p->k_size[d];
        if (r[d] >= p->y_size[d]) return false;
        const int64_t g = gcd64(s, t), step = s / g;
        int64_t kf = 0;
        while (kf < step && ((r[d] + lo - kf * t) % s + s) % s != 0) kf++;
        const int64_t taps = kf < step && kf < K ? (K - kf + step - 1) / step : 0;
        q->y_size[d] = (p->y_size[d] - r[d] + s - 1) / s;
        q->y_off += r[d] * p->y_ss[d];
        q->y_ss[d] = s * p->y_ss[d];
        q->k_size[d] = taps;
        q->stride[d] = 1;
        q->dil[d] = -(t / g);
        if (taps) {
            q->pad_lo[d] = -((r[d] + lo - kf * t) / s); /* exact: kf solves the congruence */
            q->w_off += kf * p->w_sk[d];
            q->w_sk[d] = step * p->w_sk[d];
        } else {
            q->pad_lo[d] = 0;
        }
        q->pad_hi[d] = q->opad[d] = 0;
    }
    return true;
}

/* f(q) for the conv q of every phase phase() gives, in phase order; stops (false) when f
 * returns false. */
template <class F> bool each_phase(const xconv_canon *p, F f)
{
    int64_t r[3];
    for (r[0] = 0; r[0] < p->stride[0]; r[0]++)
        for (r[1] = 0; r[1] < p->stride[1]; r[1]++)
            for (r[2] = 0; r[2] < p->stride[2]; r[2]++) {
                xconv_canon q;
                if (phase(p, r, &q) && !f(q)) return false;
            }
    return true;
}

bool deconv_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.deconv_tc runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV_TRANSPOSE)
        return *why_not = "cuda.deconv_tc runs conv_transpose only", false;
    for (int d = 0; d < 3; d++)
        if (p->stride[d] > MAX_PHASES || p->dil[d] > (1 << 30) || p->pad_lo[d] > (1 << 30))
            return *why_not = "cuda.deconv_tc: stride, dilation or padding too large", false;
    if (p->stride[0] * p->stride[1] * p->stride[2] > MAX_PHASES)
        return *why_not = "cuda.deconv_tc: too many stride phases", false;
    return each_phase(p, [&](const xconv_canon &q) { return xconv__cuda_igemm_fits(&q, why_not); });
}

/* the non-finite-weight flag (xconv__cuda_flag_nonfinite_w) */
size_t deconv_workspace_bytes(const xconv_canon *p)
{
    return xconv__cuda_float_weights(p) ? 256 : 0;
}

/* cuda.igemm_tc's cost of the first phase's loader, a little above for the extra launches. */
double deconv_cost(const xconv_canon *p)
{
    const int64_t r[3] = {0, 0, 0};
    xconv_canon q;
    phase(p, r, &q);
    q.flops = p->flops;
    return xconv__cuda_igemm_cost(&q, 1.25) + 2e4;
}

xconv_status deconv_run(const xconv_exec *e, xconv_error *err)
{
    int *flag = xconv__cuda_float_weights(e->p) ? (int *)e->workspace : nullptr;
    return xconv__cuda_run(e, "cuda.deconv_tc", err, [&](cudaStream_t st) {
        if (flag) xconv__cuda_flag_nonfinite_w(e, flag, st);
        xconv__cuda_deconv_launch(e->p, e, st);
        /* an Inf or NaN weight: y again by the gather formula (the phases' taps outside x
         * would add 0 * Inf = NaN where cpu.ref has no term) */
        if (flag) xconv__cuda_generic_launch(e, st, flag);
    });
}

} /* namespace */

void xconv__cuda_deconv_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream)
{
    /* The phases with taps in one launch of the wgmma kernel where it takes them (at most
     * XCONV_CUDA_TC_SET_MAX: its launch parameter), else one launch per phase; a phase
     * without taps gets the bias alone. */
    xconv_canon set[XCONV_CUDA_TC_SET_MAX];
    int n = 0;
    each_phase(p, [&](const xconv_canon &q) {
        if (q.n * xconv__prod3(q.y_size) == 0) return true;
        if (xconv__prod3(q.k_size) == 0) xconv__cuda_tc_launch(&q, e, stream);
        else if (n++ < XCONV_CUDA_TC_SET_MAX) set[n - 1] = q;
        return true;
    });
    /* tuning knob: XCONV_DECONV_SPLIT=1 launches the phases one by one */
    const char *split = getenv("XCONV_DECONV_SPLIT");
    if (n == 0 || (n <= XCONV_CUDA_TC_SET_MAX && !(split && split[0] == '1') &&
                   xconv__cuda_tc_launch_set(set, n, e, stream)))
        return;
    each_phase(p, [&](const xconv_canon &q) {
        if (q.n * xconv__prod3(q.y_size) != 0 && xconv__prod3(q.k_size) != 0)
            xconv__cuda_tc_launch(&q, e, stream);
        return true;
    });
}

extern "C" const xconv_engine xconv__engine_cuda_deconv = {
    "cuda.deconv_tc",       XCONV_DEVICE_CUDA, deconv_supports,
    deconv_workspace_bytes, deconv_cost,       deconv_run,
    nullptr /* no prepack */, nullptr,
};
