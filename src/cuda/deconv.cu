/*
 * deconv.cu — "cuda.deconv_tc": conv_transpose on the tensor cores without a column buffer,
 * by stride phases (phases.cuh): each phase is a plain conv that the tensor-core kernel
 * (cuda.igemm_wgmma's on Hopper where the phase takes the 16-byte loader, else cuda.igemm_tc's)
 * runs as it is: all in one launch of the wgmma TMA kernel where it takes them
 * (up to 8 phases with taps; one launch per phase left each phase's last wave of blocks
 * part-empty), else one launch per phase (the cp.async loader for channels-last rows of
 * 16-byte multiples, the gathering loader otherwise); a phase no tap hits gets the bias (or
 * 0) through the same kernel with an empty reduction, like the gather formula of ref.tmpl.h.
 */
#include "cuda/phases.cuh"

#include <stdlib.h>

using namespace xconv_cuda;

namespace {

bool deconv_supports(const xconv_canon *p, const char **why_not)
{
    if (p->device != XCONV_DEVICE_CUDA)
        return *why_not = "cuda.deconv_tc runs on cuda tensors only", false;
    if (p->op != XCONV_OP_CONV_TRANSPOSE)
        return *why_not = "cuda.deconv_tc runs conv_transpose only", false;
    if (!phases_fit(p))
        return *why_not = "cuda.deconv_tc: too many stride phases, or dilation or padding too large",
               false;
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
    const int mode = xconv__cuda_wcheck_mode(e);
    int *flag = mode == 2 ? (int *)e->workspace : nullptr;
    return xconv__cuda_run(e, "cuda.deconv_tc", err, [&](cudaStream_t st) {
        if (mode == 1) { /* constant weights with an Inf or NaN: the gather formula alone */
            xconv__cuda_generic_launch(e, st, nullptr);
            return;
        }
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
    xconv__cuda_wcheck_bytes, xconv__cuda_wcheck_prepack, /* constant weights: checked once */
    nullptr,
};
