/*
 * mbarrier.cuh — Hopper's shared-memory transaction barriers and the bulk copy from global
 * into shared memory that completes on one (sm_90+ only: the other passes see nothing), for
 * the kernels whose data arrives by the copy engine rather than by their threads' loads
 * (cuda.igemm_wgmma's stages, cuda.depthwise's dw_rows).
 */
#ifndef XCONV_CUDA_MBARRIER_CUH
#define XCONV_CUDA_MBARRIER_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define XCONV_MBARRIER_ARCH 1
#else
#define XCONV_MBARRIER_ARCH 0
#endif

namespace {

#if XCONV_MBARRIER_ARCH
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
/* Waits until the barrier's phase of this parity has completed (the first phase has
 * parity 0). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                     " selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* This thread's arrival, with `bytes` more bytes for the phase to wait for. */
__device__ __forceinline__ void mbar_expect(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
/* bytes (a multiple of 16, both ends 16-byte aligned) from global src into shared dst by the
 * copy engine, counted on bar's transaction bytes. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, int bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
#endif

} /* namespace */

#endif /* XCONV_CUDA_MBARRIER_CUH */
