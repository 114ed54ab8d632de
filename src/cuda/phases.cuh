/*
 * phases.cuh — conv_transpose as stride phases, for the engines that run it as plain convs
 * (cuda.deconv_tc on the tensor cores, cuda.igemm_simt on the CUDA cores). Output
 * j = r + s*u (phase r in [0, s)) is hit by the taps k with r + lo - k*t = 0 mod s, i.e.
 * k = k_r + i*(s/g) (g = gcd(s, t)), and tap i reads
 *   x[u + c_r - i*(t/g)],   c_r = (r + lo - k_r*t) / s,
 * so each phase is a plain conv over x: stride 1, dilation -(t/g), padding -c_r, the phase's
 * taps of w (every (s/g)-th from k_r), y viewed with stride s from r. Its taps outside x
 * read zeros and add 0 * w, where the gather formula has no term: equal for every finite
 * weight, so a float engine flags Inf / NaN weights and recomputes y by cuda.generic.
 */
#ifndef XCONV_CUDA_PHASES_CUH
#define XCONV_CUDA_PHASES_CUH

#include "cuda/common.cuh"

namespace xconv_cuda {

constexpr int MAX_PHASES = 512; /* stride products above it run on cuda.generic */

inline int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The conv of phase (r0, r1, r2); false when the phase has no outputs. */
inline bool phase(const xconv_canon *p, const int64_t r[3], xconv_canon *q)
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
template <class F> inline bool each_phase(const xconv_canon *p, F f)
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

/* Whether p's strides, dilations and paddings allow the phase decomposition. */
inline bool phases_fit(const xconv_canon *p)
{
    for (int d = 0; d < 3; d++)
        if (p->stride[d] > MAX_PHASES || p->dil[d] > (1 << 30) || p->pad_lo[d] > (1 << 30))
            return false;
    return p->stride[0] * p->stride[1] * p->stride[2] <= MAX_PHASES;
}

} /* namespace xconv_cuda */

#endif /* XCONV_CUDA_PHASES_CUH */
